public import KeywayCore

/// A store that tells its observer what it did: each row it adds to the audit trail (an enrollment, a removal, a
/// reset, a switch, a single-use secret spent, a mark), once the change is made, and how long each call took. keywayd
/// wraps its store in one, so every audited change is also an event and every call a latency sample, whatever the
/// store and whichever keeper made the change (docs/ARCHITECTURE.md §20). Adds no behaviour of its own.
public final class ObservedStore: Store {
    /// Reads and writes, as the store's latency is measured.
    public enum Operation: String, Sendable, CaseIterable {
        case read
        case write
    }

    /// The store that does the work.
    public let base: any Store
    private let audited: @Sendable (AuditEntry) -> Void
    private let timed: @Sendable (Operation, Int64, AuthenticationError?) -> Void
    private let nanoseconds: @Sendable () -> Int64

    /// Wraps `base`: `audited` hears each audit row it made, `timed` how many nanoseconds of `nanoseconds` (a
    /// monotonic clock) each call took and the error it failed with, if it did.
    public init(
        _ base: any Store, nanoseconds: @escaping @Sendable () -> Int64,
        timed: @escaping @Sendable (Operation, Int64, AuthenticationError?) -> Void,
        audited: @escaping @Sendable (AuditEntry) -> Void
    ) {
        self.base = base
        self.nanoseconds = nanoseconds
        self.timed = timed
        self.audited = audited
    }

    private func time<T>(_ operation: Operation, _ body: () throws(AuthenticationError) -> T)
        throws(AuthenticationError) -> T
    {
        let start = nanoseconds()
        do {
            let result = try body()
            timed(operation, nanoseconds() - start, nil)
            return result
        } catch {
            timed(operation, nanoseconds() - start, error)
            throw error
        }
    }

    public func enrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Enrollment? {
        try time(.read) { () throws(AuthenticationError) in try base.enrollment(user: user, factor: factor) }
    }

    public func enrollments(user: String) throws(AuthenticationError) -> [Enrollment] {
        try time(.read) { () throws(AuthenticationError) in try base.enrollments(user: user) }
    }

    public func enrollments(of factor: FactorKind) throws(AuthenticationError) -> [Enrollment] {
        try time(.read) { () throws(AuthenticationError) in try base.enrollments(of: factor) }
    }

    public func save(_ enrollment: Enrollment) throws(AuthenticationError) {
        try time(.write) { () throws(AuthenticationError) in try base.save(enrollment) }
        audited(
            AuditEntry(
                at: enrollment.changedAt, actor: enrollment.changedBy, user: enrollment.user, action: .enroll,
                factor: enrollment.factor))
    }

    public func replace(_ current: Enrollment, with new: Enrollment, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    {
        let replaced = try time(.write) { () throws(AuthenticationError) in
            try base.replace(current, with: new, recording: entry)
        }
        if replaced { audited(entry) }
        return replaced
    }

    @discardableResult
    public func removeEnrollment(user: String, factor: FactorKind, by change: Attribution) throws(AuthenticationError)
        -> Bool
    {
        let removed = try time(.write) { () throws(AuthenticationError) in
            try base.removeEnrollment(user: user, factor: factor, by: change)
        }
        if removed {
            audited(AuditEntry(at: change.at, actor: change.actor, user: user, action: .remove, factor: factor))
        }
        return removed
    }

    public func reserveOneTimeCode(user: String, factor: FactorKind, code: [UInt8], remote: Bool)
        throws(AuthenticationError)
    {
        try time(.write) { () throws(AuthenticationError) in
            try base.reserveOneTimeCode(user: user, factor: factor, code: code, remote: remote)
        }
    }

    public func checkOneTimeCode(
        user: String, factor: FactorKind, code: [UInt8], window: Int64, remote: Bool, at now: Timestamp
    ) throws(AuthenticationError) -> OneTimeCodeCheck? {
        try time(.write) { () throws(AuthenticationError) in
            try base.checkOneTimeCode(
                user: user, factor: factor, code: code, window: window, remote: remote, at: now)
        }
    }

    public func attempts(user: String) throws(AuthenticationError) -> AttemptBook {
        try time(.read) { () throws(AuthenticationError) in try base.attempts(user: user) }
    }

    public func account(user: String) throws(AuthenticationError) -> AccountRecord {
        try time(.read) { () throws(AuthenticationError) in try base.account(user: user) }
    }

    public func updateAttempts(user: String, durable: Bool, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError)
    {
        try time(.write) { () throws(AuthenticationError) in try base.updateAttempts(user: user, durable: durable, body)
        }
    }

    public func updateAttemptsWritingInBackground(user: String, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError) -> any DiskWrite
    {
        try time(.write) { () throws(AuthenticationError) in
            try base.updateAttemptsWritingInBackground(user: user, body)
        }
    }

    public func resetAttempts(user: String, factor: FactorKind?, by change: Attribution) throws(AuthenticationError) {
        try time(.write) { () throws(AuthenticationError) in
            try base.resetAttempts(user: user, factor: factor, by: change)
        }
        audited(AuditEntry(at: change.at, actor: change.actor, user: user, action: .reset, factor: factor))
    }

    @discardableResult
    public func pruneCounters(ofUnenrolledKeeping limit: Int) throws(AuthenticationError) -> Int {
        try time(.write) { () throws(AuthenticationError) in try base.pruneCounters(ofUnenrolledKeeping: limit) }
    }

    public func failingAccounts(atLeast least: Int, limit: Int) throws(AuthenticationError) -> [String] {
        try time(.read) { () throws(AuthenticationError) in try base.failingAccounts(atLeast: least, limit: limit) }
    }

    public func users() throws(AuthenticationError) -> [String] {
        try time(.read) { () throws(AuthenticationError) in try base.users() }
    }

    public func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry] {
        try time(.read) { () throws(AuthenticationError) in try base.auditTrail(user: user) }
    }

    public func preferences(user: String) throws(AuthenticationError) -> [String: String] {
        try time(.read) { () throws(AuthenticationError) in try base.preferences(user: user) }
    }

    @discardableResult
    public func pruneAudit(keeping limit: Int, routinePerHost: Int) throws(AuthenticationError) -> Int {
        try time(.write) { () throws(AuthenticationError) in
            try base.pruneAudit(keeping: limit, routinePerHost: routinePerHost)
        }
    }

    public func setPreference(user: String, key: String, value: String?, by change: Attribution)
        throws(AuthenticationError)
    {
        try time(.write) { () throws(AuthenticationError) in
            try base.setPreference(user: user, key: key, value: value, by: change)
        }
        audited(
            AuditEntry(
                at: change.at, actor: change.actor, user: user, action: .set, factor: nil,
                detail: "\(key)=\(value ?? "default")"))
    }
}
