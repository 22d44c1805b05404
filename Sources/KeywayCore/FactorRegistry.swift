/// The factor plugins available to an evaluation, by factor. Built per call: no process-global state.
public struct FactorRegistry: Sendable {
    private var plugins: [FactorKind: any Authenticator] = [:]

    /// Creates a registry; a later plugin for the same factor replaces an earlier one.
    public init(_ authenticators: [any Authenticator] = []) {
        for authenticator in authenticators { register(authenticator) }
    }

    /// Adds or replaces the plugin for its factor.
    public mutating func register(_ authenticator: any Authenticator) {
        plugins[authenticator.factor] = authenticator
    }

    /// The plugin for `factor`, if registered.
    public subscript(factor: FactorKind) -> (any Authenticator)? { plugins[factor] }

    /// The registered factors.
    public var factors: Set<FactorKind> { Set(plugins.keys) }
}

/// What a factor's refusals are called: LocalAuthentication's codes for the factors it names (the biometric's
/// `biometryNotEnrolled`, the passcode's `passcodeNotSet`), Keyway's own for the rest. Each plugin declares its own
/// (`FactorPlugin.codes`), and every place that reports a refusal reads them from there.
public struct FactorCodes: Sendable, Equatable {
    /// Nothing is enrolled.
    public var notEnrolled: AuthenticationError.Code
    /// The factor cannot be used now (switched off, its device absent or busy).
    public var notAvailable: AuthenticationError.Code
    /// Locked until another factor succeeds.
    public var locked: AuthenticationError.Code
    /// What unlocks it, as the person is told ("enter the passcode to unlock").
    public var unlockedBy: String

    /// Creates codes; the defaults are Keyway's own.
    public init(
        notEnrolled: AuthenticationError.Code = .factorNotEnrolled,
        notAvailable: AuthenticationError.Code = .factorNotAvailable, locked: AuthenticationError.Code = .lockedOut,
        unlockedBy: String = "another factor must succeed"
    ) {
        self.notEnrolled = notEnrolled
        self.notAvailable = notAvailable
        self.locked = locked
        self.unlockedBy = unlockedBy
    }
}

extension FactorCodes {
    /// LocalAuthentication's codes for biometrics (§1): only the passcode unlocks a lockout.
    public static var biometry: FactorCodes {
        FactorCodes(
            notEnrolled: .biometryNotEnrolled, notAvailable: .biometryNotAvailable, locked: .biometryLockout,
            unlockedBy: "enter the passcode to unlock")
    }

    /// LocalAuthentication's code for a passcode that is not set.
    public static var passcode: FactorCodes { FactorCodes(notEnrolled: .passcodeNotSet) }
}

extension Availability {
    /// The error an unavailable factor is reported with, in the codes the factor declares.
    public func error(for factor: FactorKind, codes: FactorCodes) -> AuthenticationError? {
        switch self {
        case .available:
            return nil
        case .failed(let error):
            return error
        case .notEnrolled:
            return AuthenticationError(codes.notEnrolled, "no \(factor) is enrolled")
        case .notAvailable(let reason):
            return AuthenticationError(codes.notAvailable, "\(factor) is not available: \(reason)")
        case .lockedOut(let until?, let reason):
            return AuthenticationError(.throttled, "\(factor) is locked until \(until): \(reason)", retryAt: until)
        case .lockedOut(nil, let reason):
            return AuthenticationError(codes.locked, "\(factor) is locked: \(reason)")
        }
    }
}
