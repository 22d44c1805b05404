public import KeywayCore

/// The one table of exit statuses, shared by `keyway` and `keywayd` (documented in keyway(8) and keywayd(8)): 0 for
/// success, small numbers for what a script tells apart, sysexits.h's for the rest. `status(for:)` defaults to
/// failure.
public enum ExitStatus {
    public static let success: Int32 = 0
    /// `keyway doctor` printed a warning: a stack that could lock people out, or Keyway that cannot work there.
    public static let warnings: Int32 = 1
    /// A command line that is wrong.
    public static let usage: Int32 = 64  // EX_USAGE
    /// The configuration has errors.
    public static let dataError: Int32 = 65  // EX_DATAERR
    /// A configuration file that was named does not exist.
    public static let noInput: Int32 = 66  // EX_NOINPUT
    /// The account named with --user does not exist.
    public static let noUser: Int32 = 67  // EX_NOUSER
    /// keywayd does not answer.
    public static let unavailable: Int32 = 69  // EX_UNAVAILABLE
    /// A fault of Keyway's own.
    public static let software: Int32 = 70  // EX_SOFTWARE
    /// The system refused what keywayd needs to serve (a socket, a thread).
    public static let systemError: Int32 = 71  // EX_OSERR
    /// A file the command was asked to write could not be created.
    public static let cannotCreate: Int32 = 73  // EX_CANTCREAT
    /// The store or standard output could not be read or written (a full disk, a closed terminal).
    public static let ioError: Int32 = 74  // EX_IOERR
    /// Only root may do this.
    public static let notPermitted: Int32 = 77  // EX_NOPERM
    /// The configuration (or keywayd's store settings) cannot be used.
    public static let configuration: Int32 = 78  // EX_CONFIG

    public static func status(for error: AuthenticationError?) -> Int32 {
        guard let error else { return success }
        switch error.code {
        case .authenticationFailed, .userFallback: return 1
        case .throttled, .lockedOut, .biometryLockout: return 2
        case .passcodeNotSet, .biometryNotEnrolled, .factorNotEnrolled, .biometryNotAvailable, .factorNotAvailable,
            .timeout:
            return 3
        case .userCancel, .appCancel, .systemCancel, .invalidContext, .notInteractive, .conversationFailure: return 4
        case .invalidPolicy: return configuration
        case .enrollmentRefused: return 5
        case .storeFailure: return ioError
        case .internalFailure: return software
        case .invalidUserName: return usage
        case .serviceUnavailable: return unavailable
        case .notPermitted: return notPermitted
        }
    }
}
