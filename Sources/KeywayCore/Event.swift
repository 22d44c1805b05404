/// Something an operator watches for: a decision, a lockout, a change an administrator made, a secret used once, the
/// fleet's database away. The PAM module sends its decisions and keywayd the rest to the journal (`Journal`, with the
/// kind's fixed `MESSAGE_ID`, explained by `systemd/keyway.catalog` for `journalctl -x`) and counts them in its
/// metrics (docs/ARCHITECTURE.md §20). Never a secret; the account name only in `KEYWAY_USER`, never in a metric.
public struct Event: Sendable, Equatable {
    /// The kinds, each with the journal's `MESSAGE_ID` that never changes once released.
    public enum Kind: String, Sendable, CaseIterable {
        /// A policy was satisfied (the module's decision).
        case success
        /// A policy was not satisfied (the module's decision).
        case failure
        /// A failure locked a factor (a wait, or locked until another factor or an administrator clears it).
        case lockout
        /// A success of one factor cleared another's lockout (the passcode unlocking the biometric).
        case unlocked
        /// An administrator reset an account's counters.
        case reset
        /// An enrollment was added, replaced or removed.
        case enrollment
        /// A recovery code was spent.
        case recoveryCodeUsed = "recovery-code-used"
        /// An administrator issued a temporary pass.
        case passIssued = "pass-issued"
        /// A temporary pass was used.
        case passUsed = "pass-used"
        /// A security key's signature counter did not increase: it may have been cloned.
        case possibleClone = "possible-clone"
        /// The fleet's database could not be used.
        case databaseAway = "database-away"
        /// The fleet's database could be used again.
        case databaseBack = "database-back"

        /// The journal's `MESSAGE_ID`: 128 random bits, fixed for good.
        public var messageID: String {
            switch self {
            case .success: "e1202fac2c6d44749c2be2265d643257"
            case .failure: "a19f08d9b942435e8f99227cacc53260"
            case .lockout: "d029e4a5fbac46e6addc3c77393b94d2"
            case .unlocked: "dfd00f3598c8492d9bbb7a43b9a7f800"
            case .reset: "7930e16d10e347a4bcc38a0a0aa7c252"
            case .enrollment: "957b0c3b2d284a2f920981fe795dcc4d"
            case .recoveryCodeUsed: "c67493a8de314928aefecfdea4af696b"
            case .passIssued: "9a72032989c14d68aa91e42297a916e8"
            case .passUsed: "a2a0d57c2a684652aea3fe3a44b6c8d8"
            case .possibleClone: "6b786c93f8a44abcbbb9df95428d4c06"
            case .databaseAway: "50c0188f12154f2592ae490107f7af59"
            case .databaseBack: "5042f399c9514a06a228b721b6921518"
            }
        }

        /// The syslog priority the journal files it at: 6 info, 5 notice, 4 warning, 3 error.
        public var priority: Int {
            switch self {
            case .success, .enrollment, .passIssued, .databaseBack: 6
            case .failure, .unlocked, .reset, .recoveryCodeUsed, .passUsed: 5
            case .lockout, .possibleClone: 4
            case .databaseAway: 3
            }
        }
    }

    /// What happened.
    public var kind: Kind
    /// One line a person reads (`MESSAGE`).
    public var message: String
    /// The structured fields, `KEYWAY_` and the rest of the name in capitals (`KEYWAY_USER`), in order.
    public var fields: [Field]

    /// One field: a journal field name (capitals, digits and `_`) and its value.
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// Creates an event.
    public init(_ kind: Kind, _ message: String, _ fields: [Field] = []) {
        self.kind = kind
        self.message = message
        self.fields = fields
    }

    /// The value of field `name`, or nil.
    public subscript(name: String) -> String? { fields.first { $0.name == name }?.value }

    /// The event of a module's decision: `KEYWAY_USER`, `KEYWAY_SERVICE`, `KEYWAY_POLICY`, `KEYWAY_RESULT`,
    /// `KEYWAY_FACTOR` (the factors asked, in order), `KEYWAY_REMOTE`, the error's `KEYWAY_CODE` and `KEYWAY_REASON`,
    /// `KEYWAY_STEPS`, and `KEYWAY_MODE=audit` when nothing was enforced.
    public static func decision(
        _ evaluation: Evaluation, service: String, remote: Bool, rhost: String?, audit: Bool
    ) -> Event {
        var fields = [
            Field("KEYWAY_USER", evaluation.user), Field("KEYWAY_SERVICE", service),
            Field("KEYWAY_POLICY", evaluation.policy),
            Field("KEYWAY_RESULT", evaluation.succeeded ? "success" : "failure"),
            Field("KEYWAY_FACTOR", evaluation.factorsUsed.map { $0.rawValue }.joined(separator: ",")),
            Field("KEYWAY_REMOTE", remote ? "yes" : "no"),
        ]
        if let rhost, !rhost.isEmpty { fields.append(Field("KEYWAY_RHOST", rhost)) }
        if let error = evaluation.error {
            fields.append(Field("KEYWAY_CODE", "\(error.code.rawValue)"))
            fields.append(Field("KEYWAY_REASON", error.reason))
        }
        fields.append(Field("KEYWAY_STEPS", evaluation.steps.map { $0.description }.joined(separator: ",")))
        if audit { fields.append(Field("KEYWAY_MODE", "audit")) }
        let outcome = evaluation.succeeded ? "succeeded" : "failed"
        let message =
            "\(service): \(evaluation.user) \(outcome) policy \(evaluation.policy)"
            + (evaluation.error.map { ": \($0.reason)" } ?? "") + (audit ? " (audit mode: not enforced)" : "")
        return Event(evaluation.succeeded ? .success : .failure, message, fields)
    }
}
