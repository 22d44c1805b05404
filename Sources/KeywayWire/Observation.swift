import KeywayCore

/// A PAM module's decision as it reports it to keywayd for the metrics (`Request.report`): no evidence, no reason,
/// only what the counters and the duration histogram are labelled by, and the account, which keywayd checks against
/// the caller and never puts in a label.
public struct Decision: Sendable, Equatable {
    /// How the stack was answered.
    public enum Result: String, Sendable, CaseIterable {
        /// PAM_SUCCESS.
        case success
        /// A failure, whatever its PAM code.
        case failure
        /// PAM_IGNORE: audit mode, or `unenrolled=skip` for someone with nothing enrolled.
        case ignored
        /// PAM_SUCCESS with no factor asked: nothing enrolled, and `unenrolled=allow` (a roll-out).
        case allowed
    }

    /// The account.
    public var user: String
    /// The PAM service (`sudo`, `sshd`).
    public var service: String
    /// The policy's name.
    public var policy: String
    /// The outcome.
    public var result: Result
    /// How long the evaluation took, prompts included.
    public var milliseconds: Int64

    public init(user: String, service: String, policy: String, result: Result, milliseconds: Int64) {
        self.user = user
        self.service = service
        self.policy = policy
        self.result = result
        self.milliseconds = milliseconds
    }
}

/// One of keywayd's checks of itself (`Request.health`), in the monitoring plugins' convention.
public struct HealthCheck: Sendable, Equatable {
    /// How bad it is: the exit status `keyway health` gives when this is the worst check.
    public enum Level: UInt8, Sendable, Comparable {
        case ok = 0
        case warning = 1
        case critical = 2

        /// OK, WARNING, CRITICAL: the words of the monitoring plugins' first line.
        public var word: String {
            switch self {
            case .ok: "OK"
            case .warning: "WARNING"
            case .critical: "CRITICAL"
            }
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }
    }

    /// What was checked (`store`, `configuration`, `reader fprintd`, `database`).
    public var name: String
    /// The finding.
    public var level: Level
    /// What was found, in words.
    public var detail: String

    public init(_ name: String, _ level: Level, _ detail: String) {
        self.name = name
        self.level = level
        self.detail = detail
    }
}
