/// Why an evaluation could not reach a verdict, as LocalAuthentication's `LAError` plus what Linux needs.
///
/// Equality compares codes only, so tests read `#expect(throws: AuthenticationError(.biometryLockout))`.
public struct AuthenticationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, as a stable code.
    public var code: Code
    /// Why, for logs and administrators. Never contains a secret.
    public var reason: String
    /// When a temporary lockout ends (for `.throttled`), if known.
    public var retryAt: Timestamp?

    /// Creates an error with a code and, optionally, a reason and a retry time.
    public init(_ code: Code, _ reason: String = "", retryAt: Timestamp? = nil) {
        self.code = code
        self.reason = reason.isEmpty ? code.summary : reason
        self.retryAt = retryAt
    }

    public static func == (lhs: AuthenticationError, rhs: AuthenticationError) -> Bool { lhs.code == rhs.code }

    public var description: String { "\(code.rawValue): \(reason)" }

    /// What the person is told: the code's summary, with the reason where it is the person's business (which
    /// sensor problem, what timed out), e.g. "Biometrics are not available (the sensor is in use by another
    /// authentication)."
    public var spoken: String {
        switch code {
        case .biometryNotAvailable, .factorNotAvailable, .timeout, .enrollmentRefused:
            guard reason != code.summary else { return code.summary }
            return "\(code.summary.dropLast()) (\(reason))."
        case .authenticationFailed, .userCancel, .userFallback, .systemCancel, .passcodeNotSet, .biometryNotEnrolled,
            .biometryLockout, .appCancel, .invalidContext, .notInteractive, .factorNotEnrolled, .throttled, .lockedOut,
            .invalidPolicy, .storeFailure, .conversationFailure, .internalFailure, .invalidUserName,
            .serviceUnavailable,
            .notPermitted:
            return code.summary
        }
    }

    /// The error codes. The first eleven mirror `LAError.Code`; the rest are Keyway's own.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        /// The person did not provide valid credentials.
        case authenticationFailed
        /// The person cancelled.
        case userCancel
        /// The person chose the fallback (for example "Use passcode").
        case userFallback
        /// The system cancelled (for example the sensor went away mid-evaluation).
        case systemCancel
        /// No passcode is set for the user.
        case passcodeNotSet
        /// The biometric sensor is absent, unplugged, or cannot be used from this session.
        case biometryNotAvailable
        /// No biometric is enrolled for the user.
        case biometryNotEnrolled
        /// Too many biometric failures; a passcode success unlocks biometrics again.
        case biometryLockout
        /// The caller invalidated the context during the evaluation.
        case appCancel
        /// The context was invalidated before this use.
        case invalidContext
        /// Interaction was needed but the context does not allow it.
        case notInteractive

        /// A non-biometric factor (such as the pattern) is not enrolled for the user.
        case factorNotEnrolled
        /// A factor is not available (not registered, or unusable here).
        case factorNotAvailable
        /// Too many recent failures; try again at `retryAt`.
        case throttled
        /// The person did not respond in time (no finger on the sensor); the policy may fall back.
        case timeout
        /// The failure limit was reached; an administrator must reset the counters.
        case lockedOut
        /// The policy is empty, unsatisfiable or refers to an unknown factor.
        case invalidPolicy
        /// What was given cannot be enrolled, and nothing was saved: a rule refused it, a confirmation did not match
        /// what was shown, or it has the wrong shape for the factor.
        case enrollmentRefused
        /// The enrollment and attempt store could not be read or written.
        case storeFailure
        /// The conversation with the person failed (not a cancel).
        case conversationFailure
        /// A factor failed internally (for example the password hash could not be computed).
        case internalFailure
        /// The user name cannot be an account's (empty, too long, a control character, `/`); see
        /// `UserContext.nameProblem`.
        case invalidUserName
        /// keywayd could not be reached, or was too busy to answer; nothing was counted.
        case serviceUnavailable
        /// The caller may not ask this (another user's factor, an administrator's command); nothing was counted.
        case notPermitted

        /// A one-line explanation used when no reason is given.
        public var summary: String {
            switch self {
            case .authenticationFailed: "Authentication failed."
            case .userCancel: "Cancelled."
            case .userFallback: "Fallback chosen."
            case .systemCancel: "Cancelled by the system."
            case .passcodeNotSet: "No passcode is set."
            case .biometryNotAvailable: "Biometrics are not available."
            case .biometryNotEnrolled: "No biometric is enrolled."
            case .biometryLockout: "Biometrics are locked; enter the passcode to unlock them."
            case .appCancel: "Cancelled by the application."
            case .invalidContext: "The authentication context was invalidated."
            case .notInteractive: "Interaction is needed but not allowed."
            case .factorNotEnrolled: "The factor is not enrolled."
            case .factorNotAvailable: "The factor is not available."
            case .throttled: "Too many attempts; try again later."
            case .timeout: "Timed out waiting for the person."
            case .lockedOut: "Locked after too many failures; an administrator must reset it."
            case .invalidPolicy: "The policy cannot be satisfied."
            case .enrollmentRefused: "Nothing was enrolled."
            case .storeFailure: "The Keyway store could not be used."
            case .conversationFailure: "The conversation failed."
            case .internalFailure: "Internal failure."
            case .invalidUserName: "That is not a valid user name."
            case .serviceUnavailable: "Keyway is not available right now."
            case .notPermitted: "Not permitted."
            }
        }

        /// True for a factor that may not be tried now: throttled, locked out, biometrics locked.
        public var isLockout: Bool {
            switch self {
            case .throttled, .lockedOut, .biometryLockout: true
            case .authenticationFailed, .userCancel, .userFallback, .systemCancel, .passcodeNotSet,
                .biometryNotAvailable, .biometryNotEnrolled, .appCancel, .invalidContext, .notInteractive,
                .factorNotEnrolled, .factorNotAvailable, .timeout, .invalidPolicy, .storeFailure, .conversationFailure,
                .internalFailure, .invalidUserName, .serviceUnavailable, .notPermitted, .enrollmentRefused:
                false
            }
        }

        /// True when the evaluation must stop instead of trying another factor:
        /// the person or the caller asked to stop, or infrastructure failed (fail closed).
        public var stopsEvaluation: Bool {
            switch self {
            case .userCancel, .systemCancel, .appCancel, .invalidContext, .notInteractive,
                .invalidPolicy, .storeFailure, .conversationFailure, .internalFailure, .invalidUserName,
                .serviceUnavailable, .notPermitted, .enrollmentRefused:
                true
            case .authenticationFailed, .userFallback, .passcodeNotSet, .biometryNotAvailable, .biometryNotEnrolled,
                .biometryLockout, .factorNotEnrolled, .factorNotAvailable, .throttled, .timeout, .lockedOut:
                false
            }
        }
    }
}
