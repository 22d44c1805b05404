import CPAM
import KeywayCore

/// What a call to the module decided, before it becomes a PAM return code.
enum PAMOutcome: Equatable {
    /// The policy was satisfied.
    case success
    /// It was not, and why.
    case failure(AuthenticationError)
    /// The user has none of the policy's factors and `unenrolled=skip` is set, or the policy is in audit mode: let
    /// the stack decide.
    case ignored

    /// The one outcome → PAM code mapping (documented in pam_keyway(8)). Starts as a failure; only a success maps
    /// to PAM_SUCCESS, and only `unenrolled=skip` and `mode = audit` to PAM_IGNORE. A lockout is PAM_MAXTRIES, or
    /// PAM_AUTH_ERR with `lockout=auth_err` (sshd turns keyboard-interactive off on PAM_MAXTRIES).
    func code(lockoutIsAuthError: Bool) -> Int32 {
        var code = PAM_AUTH_ERR
        switch self {
        case .success:
            code = PAM_SUCCESS
        case .ignored:
            code = PAM_IGNORE
        case .failure(let error):
            switch error.code {
            case .authenticationFailed, .userFallback, .appCancel, .systemCancel, .invalidContext:
                code = PAM_AUTH_ERR
            case .userCancel, .conversationFailure, .notInteractive:
                code = PAM_CONV_ERR
            case .throttled, .lockedOut, .biometryLockout:
                code = lockoutIsAuthError ? PAM_AUTH_ERR : PAM_MAXTRIES
            case .passcodeNotSet, .biometryNotEnrolled, .factorNotEnrolled, .biometryNotAvailable,
                .factorNotAvailable, .timeout, .serviceUnavailable:
                code = PAM_AUTHINFO_UNAVAIL
            case .invalidPolicy, .enrollmentRefused:
                code = PAM_SERVICE_ERR
            case .storeFailure, .internalFailure:
                code = PAM_SYSTEM_ERR
            case .invalidUserName:
                code = PAM_USER_UNKNOWN
            case .notPermitted:
                code = PAM_PERM_DENIED
            }
        }
        return code
    }
}
