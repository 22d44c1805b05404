import KeywayCore

/// The one mapping from outcomes to exit statuses (documented in keyway(8)); it defaults to failure.
enum ExitStatus {
    static let success: Int32 = 0
    /// `keyway doctor` printed a warning: a stack that could lock people out, or Keyway that cannot work there.
    static let warnings: Int32 = 1
    static let usage: Int32 = 64  // EX_USAGE
    /// The configuration has errors.
    static let dataError: Int32 = 65  // EX_DATAERR
    /// A configuration file that was named does not exist.
    static let noInput: Int32 = 66  // EX_NOINPUT
    /// The account named with --user does not exist.
    static let noUser: Int32 = 67  // EX_NOUSER
    /// A file the command was asked to write could not be created.
    static let cannotCreate: Int32 = 73  // EX_CANTCREAT
    /// Only root may do this.
    static let notPermitted: Int32 = 77  // EX_NOPERM
    /// Standard output could not be written (a full disk, a closed terminal); not a reader that left.
    static let outputFailure: Int32 = 74  // EX_IOERR

    static func status(for error: AuthenticationError?) -> Int32 {
        guard let error else { return success }
        switch error.code {
        case .authenticationFailed, .userFallback: return 1
        case .throttled, .lockedOut, .biometryLockout: return 2
        case .passcodeNotSet, .biometryNotEnrolled, .factorNotEnrolled, .biometryNotAvailable, .factorNotAvailable,
            .timeout:
            return 3
        case .userCancel, .appCancel, .systemCancel, .invalidContext, .notInteractive, .conversationFailure: return 4
        case .invalidPolicy: return 78  // EX_CONFIG
        case .enrollmentRefused: return 5
        case .storeFailure: return 74  // EX_IOERR
        case .internalFailure: return 70  // EX_SOFTWARE
        case .invalidUserName: return usage
        case .serviceUnavailable: return 69  // EX_UNAVAILABLE
        case .notPermitted: return 77  // EX_NOPERM
        }
    }
}
