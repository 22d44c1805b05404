/// Where enrollments, attempt counters and lockouts live: in memory for tests, SQLite in production.
///
/// Implementation requirements:
/// - `updateAttempts` is atomic across threads and processes: it reads the user's whole `AttemptBook`,
///   runs `body` once, and writes the result, with no other update in between. This one primitive is how
///   attempts are reserved before they are verified.
/// - `save` replaces a factor's enrollment atomically: after a crash the old or the new one is present, never neither.
/// - Every failure throws `AuthenticationError(.storeFailure, reason)` with a reason naming the store and the cause;
///   a shared store whose database is away (unreachable, restarting, this host cut off) throws `.serviceUnavailable`
///   instead, which the module answers as PAM_AUTHINFO_UNAVAIL, so a `default=ignore` stack goes on to the password.
public protocol Store: AnyObject, Sendable {
    /// The user's enrollment for `factor`, or nil when there is none.
    func enrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Enrollment?
    /// All of the user's enrollments, ordered by factor.
    func enrollments(user: String) throws(AuthenticationError) -> [Enrollment]
    /// Every user's enrollment of `factor`, in one read (what the costs in use are: `KnowledgeKeeper.burn`).
    func enrollments(of factor: FactorKind) throws(AuthenticationError) -> [Enrollment]
    /// Adds or replaces the enrollment for its user and factor.
    func save(_ enrollment: Enrollment) throws(AuthenticationError)
    /// Replaces `current` with `new` (same user and factor) only if the stored record is still `current` (the same
    /// payload), atomically; false, changing nothing, when it is not. A change verifies the old secret and then
    /// stores the new one: this keeps a removal or another change made in between from being undone. `entry` is the
    /// audit row written with it (an enrollment, or a single-use secret spent from a set: `.use`).
    func replace(_ current: Enrollment, with new: Enrollment, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    /// Removes the user's enrollment for `factor`; returns false when there was none.
    @discardableResult
    func removeEnrollment(user: String, factor: FactorKind, by change: Attribution) throws(AuthenticationError) -> Bool
    /// Books the check of `code`, a one-time code of the user's `factor`, before its attempt is counted: a store
    /// whose checks a caller could otherwise undo (a fleet's database, where a host's role could roll its own
    /// transaction back) commits the booking first and checks only a booked code. Throws `.factorNotAvailable`,
    /// booking and counting nothing, when the `remote` or local channel's budget of wrong codes in this step is
    /// spent. A store that checks codes in its own process books nothing.
    func reserveOneTimeCode(user: String, factor: FactorKind, code: [UInt8], remote: Bool) throws(AuthenticationError)
    /// Checks `code` against the one-time codes (RFC 6238) of the secret kept in the user's enrollment of `factor`
    /// (`OneTimeCode.record`), within `window` steps either side of `now`'s; nil when there is no such enrollment.
    /// A code matches once: the step that matched is marked used in the same transaction, and a step at or before
    /// the mark, or the step the enrollment was made in, does not match again (`Enrollment.checkOneTimeCode`).
    /// The secret never leaves the store for this: a fleet's database checks the code itself, by its own clock and
    /// window, and its read of the enrollment gives a host only the header (keywayd(8), FLEETS).
    func checkOneTimeCode(
        user: String, factor: FactorKind, code: [UInt8], window: Int64, remote: Bool, at now: Timestamp
    ) throws(AuthenticationError) -> OneTimeCodeCheck?
    /// The user's attempt counters, read without locking.
    func attempts(user: String) throws(AuthenticationError) -> AttemptBook
    /// The user's enrollments, counters and preferences in one read: what the availability of a factor is judged
    /// from (`FactorKeeper.availability(for:switchedOff:)`). A store that can, reads them together (one
    /// transaction, one round trip to a database); the default reads each in turn.
    func account(user: String) throws(AuthenticationError) -> AccountRecord
    /// Atomically reads, changes and writes back the user's attempt counters. With `durable` false the change may be
    /// lost in a power cut (never in a process crash): for changes whose loss errs on the safe side, such as clearing
    /// a counter after a success, which then merely stays counted.
    /// (Not generic, so it can be called through `any Store` in Embedded Swift; a body that computes something
    /// assigns it to a variable it captured.)
    func updateAttempts(user: String, durable: Bool, _ body: (inout AttemptBook) -> Void) throws(AuthenticationError)
    /// `updateAttempts(durable: true)` in two halves: returns once the change is committed and seen by every reader
    /// (a crash of this process keeps it), while the write to the disk goes on in the background; the returned
    /// `DiskWrite` waits for that. A reservation is made this way so that the disk's wait overlaps the slow hash,
    /// and no verdict is given before it is on disk (`AttemptGate`, docs/ARCHITECTURE.md §5). A store that cannot
    /// split the two (the default) writes durably and returns a finished `DiskWrite`.
    func updateAttemptsWritingInBackground(user: String, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError) -> any DiskWrite
    /// Clears the counters of one factor, or of all factors when `factor` is nil (as `faillock --reset`).
    func resetAttempts(user: String, factor: FactorKind?, by change: Attribution) throws(AuthenticationError)
    /// Keeps the counters of at most `limit` names that have no enrollment (those with the latest failures) and
    /// deletes the rest; returns how many names lost their counters. Concealment counts attempts for any name typed
    /// at a login prompt, so without this an attacker trying a million names would grow the store by a million
    /// rows. Counters of names with an enrollment are never touched, nor those that throttle or lock a name now
    /// (`AttemptState.deciding` failures or more).
    @discardableResult
    func pruneCounters(ofUnenrolledKeeping limit: Int) throws(AuthenticationError) -> Int
    /// The names, sorted, at most `limit`, whose counters hold `least` consecutive failures or more in some factor
    /// and channel: the only names a lockout can be on (what keywayd's `keyway_locked_accounts` reads).
    func failingAccounts(atLeast least: Int, limit: Int) throws(AuthenticationError) -> [String]
    /// Every user with an enrollment or counters, sorted.
    func users() throws(AuthenticationError) -> [String]
    /// The record of changes (enrollments, removals, resets), oldest first; for one user, or all when nil.
    func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry]
    /// The user's switches and preferences (`keyway enable|disable|set`), key → value; a key not stored has its
    /// declared default (UserSetting).
    func preferences(user: String) throws(AuthenticationError) -> [String: String]
    /// Keeps the audit trail within `limit` rows and returns how many it dropped: first an account's routine rows
    /// (`AuditEntry.Action.isRoutine`: a switch set) beyond its latest `AuditEntry.routineRowsPerAccount`, then a
    /// host's beyond its latest `routinePerHost` (a host's own store is one host), then, while over the limit, the
    /// oldest routine rows of all, and only then the oldest of the rest (enrollments, removals, resets). So one user
    /// toggling a setting, or one host's users, never push out another's rows, nor the rows that matter first.
    /// keywayd runs it every minute, so no flood of changes can fill the disk that holds the store (keywayd(8),
    /// LIMITS).
    @discardableResult
    func pruneAudit(keeping limit: Int, routinePerHost: Int) throws(AuthenticationError) -> Int
    /// Stores (or with nil, forgets) one preference and records it in the audit trail, in one transaction. A value
    /// equal to the stored one (nil: none stored) writes nothing, not even an audit row.
    func setPreference(user: String, key: String, value: String?, by change: Attribution) throws(AuthenticationError)
}

/// What a store keeps about one user, as `Store.account` reads it.
public struct AccountRecord: Sendable, Equatable {
    /// The user's enrollments, ordered by factor.
    public var enrollments: [Enrollment]
    /// The user's attempt counters.
    public var attempts: AttemptBook
    /// The user's switches and preferences (`Store.preferences`).
    public var preferences: [String: String]

    public init(enrollments: [Enrollment], attempts: AttemptBook, preferences: [String: String]) {
        self.enrollments = enrollments
        self.attempts = attempts
        self.preferences = preferences
    }
}

extension Store {
    /// A change of the enrollment, recorded as an enrollment by its `changedBy`.
    public func replace(_ current: Enrollment, with new: Enrollment) throws(AuthenticationError) -> Bool {
        try replace(
            current, with: new,
            recording: AuditEntry(
                at: new.changedAt, actor: new.changedBy, user: new.user, action: .enroll, factor: new.factor))
    }

    /// Spends one use of a single-use secret kept in `record` (a recovery code, a pass): `spend` gives the record with
    /// the use taken out and the audit row that says so, or nil when there is nothing of it left to spend. The record
    /// is swapped only if it is still what was read (`replace`), and read again when another request changed it
    /// first, so of two requests racing for one use exactly one spends it. True when this one did.
    public func spendOnce(
        _ record: Enrollment, _ spend: (Enrollment) throws(AuthenticationError) -> (Enrollment, AuditEntry)?
    ) throws(AuthenticationError) -> Bool {
        var current = record
        for _ in 0..<8 {
            guard let (updated, entry) = try spend(current) else { return false }
            if try replace(current, with: updated, recording: entry) { return true }
            guard let again = try enrollment(user: record.user, factor: record.factor) else { return false }
            current = again
        }
        return false
    }

    /// `pruneAudit` with the routine rows a host keeps (`AuditEntry.routineRowsPerHost`).
    @discardableResult
    public func pruneAudit(keeping limit: Int) throws(AuthenticationError) -> Int {
        try pruneAudit(keeping: limit, routinePerHost: AuditEntry.routineRowsPerHost)
    }

    /// Each part in turn.
    public func account(user: String) throws(AuthenticationError) -> AccountRecord {
        AccountRecord(
            enrollments: try enrollments(user: user), attempts: try attempts(user: user),
            preferences: try preferences(user: user))
    }

    /// Atomically reads, changes and durably writes back the user's attempt counters.
    public func updateAttempts(user: String, _ body: (inout AttemptBook) -> Void) throws(AuthenticationError) {
        try updateAttempts(user: user, durable: true, body)
    }

    /// Writes durably before returning: nothing is left to wait for.
    public func updateAttemptsWritingInBackground(user: String, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError) -> any DiskWrite
    {
        try updateAttempts(user: user, durable: true, body)
        return FinishedDiskWrite()
    }
}

/// A committed change on its way to the disk (`Store.updateAttemptsWritingInBackground`).
public protocol DiskWrite: AnyObject, Sendable {
    /// Returns once the change is on disk, or throws the store's failure to put it there; may be called again.
    func wait() throws(AuthenticationError)
}

/// A change that was on disk before it was handed over.
public final class FinishedDiskWrite: DiskWrite {
    public init() {}
    public func wait() throws(AuthenticationError) {}
}

/// Who made a change and when, for the audit trail.
public struct Attribution: Sendable, Equatable {
    /// Who ("root via keyway remove").
    public var actor: String
    /// When.
    public var at: Timestamp

    /// Creates an attribution.
    public init(_ actor: String, at: Timestamp) {
        self.actor = actor
        self.at = at
    }
}

/// One change in the audit trail.
public struct AuditEntry: Sendable, Equatable, CustomStringConvertible {
    /// What was done.
    public enum Action: String, Sendable, Equatable {
        /// An enrollment was added or replaced.
        case enroll
        /// An enrollment was removed.
        case remove
        /// Counters were reset.
        case reset
        /// A per-user switch or preference was set (the key and value are in `detail`).
        case set
        /// A single-use secret was spent (a recovery code, a pass; what is left in `detail`).
        case use
        /// keywayd marked an enrollment for what a verification found (a security key whose signature counter did
        /// not increase: it may have been cloned; `detail` says which and why).
        case mark

        /// A row pruning drops first (`Store.pruneAudit`): what a user may do to their own account any number of
        /// times, as opposed to an enrollment, a removal or a reset.
        public var isRoutine: Bool {
            switch self {
            case .set: true
            case .enroll, .remove, .reset, .use, .mark: false
            }
        }
    }

    /// Routine rows kept per account before any other pruning (`Store.pruneAudit`).
    public static let routineRowsPerAccount = 64
    /// Routine rows kept per host (all of a host's accounts) before the overall cap (`Store.pruneAudit`).
    public static let routineRowsPerHost = 4096

    /// When.
    public var at: Timestamp
    /// Who.
    public var actor: String
    /// Whose data.
    public var user: String
    /// What.
    public var action: Action
    /// Which factor, or nil for all.
    public var factor: FactorKind?
    /// What was set (`gesture.enabled=no`), for `.set`.
    public var detail: String?
    /// The host whose keywayd made the change, in a store many hosts share (PostgreSQL); nil in a host's own store.
    public var host: String?
    /// The database role that wrote the row, in a store many hosts share: the host's own role for a use it made,
    /// whatever the row says of itself (keywayd(8), FLEETS, "Trust"); nil in a host's own store.
    public var role: String?

    /// Creates an entry.
    public init(
        at: Timestamp, actor: String, user: String, action: Action, factor: FactorKind?, detail: String? = nil,
        host: String? = nil, role: String? = nil
    ) {
        self.role = role
        self.at = at
        self.actor = actor
        self.user = user
        self.action = action
        self.factor = factor
        self.detail = detail
        self.host = host
    }

    /// `TIME ACTION USER WHAT; by ACTOR[ on HOST][ (role ROLE)]`: what was done first, then who did it, so a tool's
    /// name ("keyway pass issue") never runs into the action.
    public var description: String {
        "\(at) \(action.rawValue) \(user.escapingControlCharacters) "
            + (detail.map { $0.escapingControlCharacters } ?? factor?.rawValue ?? "all")
            + "; by \(actor.escapingControlCharacters)\(host.map { " on " + $0.escapingControlCharacters } ?? "")"
            + (role.map { " (role " + $0.escapingControlCharacters + ")" } ?? "")
    }
}

/// One enrolled factor of one user. The payload is the factor's own encoding (an Argon2id string, templates).
public struct Enrollment: Sendable, Equatable {
    /// The account name.
    public var user: String
    /// The factor.
    public var factor: FactorKind
    /// The factor's data, opaque to the store.
    public var payload: [UInt8]
    /// When it was last changed.
    public var changedAt: Timestamp
    /// Who changed it ("root via keyway enroll", "alice via keyway change").
    public var changedBy: String

    /// Creates an enrollment record.
    public init(user: String, factor: FactorKind, payload: [UInt8], changedAt: Timestamp, changedBy: String) {
        self.user = user
        self.factor = factor
        self.payload = payload
        self.changedAt = changedAt
        self.changedBy = changedBy
    }
}

/// A user's attempt counters, one state per factor.
public struct AttemptBook: Sendable, Equatable {
    /// The state per factor; a missing factor has had no failures.
    public var states: [FactorKind: AttemptState]

    /// Creates a book.
    public init(_ states: [FactorKind: AttemptState] = [:]) { self.states = states }

    /// The state of `factor` (empty when never used).
    public subscript(factor: FactorKind) -> AttemptState {
        get { states[factor] ?? AttemptState() }
        set { states[factor] = newValue == AttemptState() ? nil : newValue }
    }

    /// Failures on this account since its last success of any factor: what the account limit applies to
    /// (NIST SP 800-63B counts consecutive failures per account, so any success ends the streak).
    public var accountStreak: Int {
        get { self[.accountStreak].consecutiveFailures }
        set { self[.accountStreak].consecutiveFailures = newValue }
    }
}

extension FactorKind {
    /// The key under which the account-wide streak is kept beside the factors' counters.
    static let accountStreak = FactorKind(rawValue: "*account")
}

extension AttemptBook {
    /// Where an attempt came from, as the counters keep it: a remote session's failures (sshd, a remote greeter) are
    /// counted apart from a local one's, so someone on the network who knows a name can throttle and lock only the
    /// remote way in, and the person at the console still gets in (NIST SP 800-63B prefers rate limiting to lockouts
    /// anyone can trigger). A remote counter is kept beside the local one under `FACTOR@remote` (the account's streak
    /// too); when a factor last succeeded is one value for both.
    public enum Channel: Sendable, Equatable {
        case local, remote

        /// The channel of a session judged remote or not.
        public init(remote: Bool) { self = remote ? .remote : .local }

        /// How a reason names the channel: nothing for the local one, " from remote sessions" for the other.
        public var words: String {
            switch self {
            case .local: ""
            case .remote: " from remote sessions"
            }
        }
    }

    static let remoteSuffix = "@remote"

    /// The key of `factor`'s remote counters.
    public static func remoteKey(_ factor: FactorKind) -> FactorKind {
        FactorKind(rawValue: factor.rawValue + remoteSuffix)
    }

    /// The counters as `channel` counts them, under the plain factor keys: the local ones as they are; for the
    /// remote channel, the remote ones with each factor's shared last success.
    public func viewed(from channel: Channel) -> AttemptBook {
        var view: [FactorKind: AttemptState] = [:]
        switch channel {
        case .local:
            for (key, state) in states where !key.rawValue.hasSuffix(Self.remoteSuffix) { view[key] = state }
        case .remote:
            for (key, state) in states {
                if key.rawValue.hasSuffix(Self.remoteSuffix) {
                    let base = FactorKind(rawValue: String(key.rawValue.dropLast(Self.remoteSuffix.utf8.count)))
                    var remote = state
                    remote.lastSuccess = states[base]?.lastSuccess
                    view[base] = remote
                } else if let last = state.lastSuccess, view[key] == nil {
                    view[key] = AttemptState(lastSuccess: last)
                }
            }
        }
        return AttemptBook(view)
    }

    /// Writes back a `view` of `channel` (`viewed(from:)`) that a change was made to, leaving the other channel's
    /// counters as they were.
    public mutating func absorb(_ view: AttemptBook, from channel: Channel) {
        switch channel {
        case .local:
            let keys = Set(view.states.keys).union(states.keys.filter { !$0.rawValue.hasSuffix(Self.remoteSuffix) })
            for key in keys { self[key] = view[key] }
        case .remote:
            var keys = Set(view.states.keys)
            for key in states.keys where key.rawValue.hasSuffix(Self.remoteSuffix) {
                keys.insert(FactorKind(rawValue: String(key.rawValue.dropLast(Self.remoteSuffix.utf8.count))))
            }
            for key in keys {
                let state = view[key]
                var local = self[key]
                local.lastSuccess = state.lastSuccess
                self[key] = local
                var remote = state
                remote.lastSuccess = nil
                self[Self.remoteKey(key)] = remote
            }
        }
    }
}

/// The counters of one factor of one user.
public struct AttemptState: Sendable, Equatable {
    /// Failures since the last success (reserved attempts count until they succeed).
    public var consecutiveFailures: Int
    /// When the last failure was counted.
    public var lastFailure: Timestamp?
    /// Fingerprints of recent wrong secrets, oldest first, so the same wrong secret does not count twice.
    /// A fingerprint is derived from the slow hash, so it is as hard to invert as the enrollment itself.
    public var recentMismatches: [[UInt8]]
    /// When the factor last succeeded (what `[biometric] passcode-max-age` measures from).
    public var lastSuccess: Timestamp?

    /// Creates a state.
    public init(
        consecutiveFailures: Int = 0, lastFailure: Timestamp? = nil, recentMismatches: [[UInt8]] = [],
        lastSuccess: Timestamp? = nil
    ) {
        self.consecutiveFailures = consecutiveFailures
        self.lastFailure = lastFailure
        self.recentMismatches = recentMismatches
        self.lastSuccess = lastSuccess
    }

    /// How many recent wrong-secret fingerprints are kept.
    public static let rememberedMismatches = 8
    /// Consecutive failures from which counters decide something (every factor's first wait or lock is at 5): the
    /// counters of a name without an enrollment are never pruned from there on, so a flood of names cannot make a
    /// throttled one look fresh, which an enrolled name's never does (`Store.pruneCounters`).
    public static let deciding = 5
}
