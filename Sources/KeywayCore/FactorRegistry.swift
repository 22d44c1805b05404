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

extension Availability {
    /// The error an unavailable factor is reported with; LocalAuthentication's codes for the biometric
    /// and the passcode, Keyway's own for other factors.
    public func error(for factor: FactorKind) -> AuthenticationError? {
        switch self {
        case .available:
            return nil
        case .failed(let error):
            return error
        case .notEnrolled:
            let code: AuthenticationError.Code =
                factor == .biometric ? .biometryNotEnrolled : factor == .passcode ? .passcodeNotSet : .factorNotEnrolled
            return AuthenticationError(code, "no \(factor) is enrolled")
        case .notAvailable(let reason):
            return AuthenticationError(
                factor == .biometric ? .biometryNotAvailable : .factorNotAvailable,
                "\(factor) is not available: \(reason)")
        case .lockedOut(let until?, let reason):
            return AuthenticationError(.throttled, "\(factor) is locked until \(until): \(reason)", retryAt: until)
        case .lockedOut(nil, let reason):
            return AuthenticationError(
                factor == .biometric ? .biometryLockout : .lockedOut,
                "\(factor) is locked: \(reason)")
        }
    }
}
