public import KeywayCore
import Synchronization

/// A `Store` in memory, for tests: thread-safe, nothing persists. Beside the tests, not in the core, since nothing
/// Keyway ships uses it.
public final class InMemoryStore: Store {
    private struct Contents {
        var enrollments: [String: [FactorKind: Enrollment]] = [:]
        var attempts: [String: AttemptBook] = [:]
        var audit: [AuditEntry] = []
        var preferences: [String: [String: String]] = [:]
        var marks: [String: [FactorKind: OneTimeMark]] = [:]
    }

    private let contents = Mutex(Contents())

    /// Creates an empty store.
    public init() {}

    public func enrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Enrollment? {
        contents.withLock { $0.enrollments[user]?[factor] }
    }

    public func enrollments(user: String) throws(AuthenticationError) -> [Enrollment] {
        contents.withLock { ($0.enrollments[user] ?? [:]).values.sorted { $0.factor < $1.factor } }
    }

    public func enrollments(of factor: FactorKind) throws(AuthenticationError) -> [Enrollment] {
        contents.withLock { $0.enrollments.values.compactMap { $0[factor] }.sorted { $0.user < $1.user } }
    }

    public func reserveOneTimeCode(user: String, factor: FactorKind, code: [UInt8], remote: Bool)
        throws(AuthenticationError)
    {}

    public func checkOneTimeCode(
        user: String, factor: FactorKind, code: [UInt8], window: Int64, remote: Bool, at now: Timestamp
    ) throws(AuthenticationError) -> OneTimeCodeCheck? {
        contents.withLock { contents -> OneTimeCodeCheck? in
            guard
                let record = contents.enrollments[user]?[factor],
                let (check, mark) = record.checkOneTimeCode(
                    code, window: window, at: now, mark: contents.marks[user]?[factor])
            else { return nil }
            if let mark { contents.marks[user, default: [:]][factor] = mark }
            return check
        }
    }

    public func save(_ enrollment: Enrollment) throws(AuthenticationError) {
        contents.withLock {
            $0.enrollments[enrollment.user, default: [:]][enrollment.factor] = enrollment
            $0.audit.append(
                AuditEntry(
                    at: enrollment.changedAt, actor: enrollment.changedBy, user: enrollment.user,
                    action: .enroll, factor: enrollment.factor))
        }
    }

    public func replace(_ current: Enrollment, with new: Enrollment, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    {
        contents.withLock {
            let stored = $0.enrollments[current.user]?[current.factor]
            guard stored?.payload == current.payload, new.user == current.user, new.factor == current.factor else {
                return false
            }
            $0.enrollments[new.user, default: [:]][new.factor] = new
            $0.audit.append(entry)
            return true
        }
    }

    @discardableResult
    public func removeEnrollment(user: String, factor: FactorKind, by change: Attribution) throws(AuthenticationError)
        -> Bool
    {
        contents.withLock {
            guard $0.enrollments[user]?.removeValue(forKey: factor) != nil else { return false }
            if $0.enrollments[user]?.isEmpty == true { $0.enrollments[user] = nil }
            $0.audit.append(AuditEntry(at: change.at, actor: change.actor, user: user, action: .remove, factor: factor))
            return true
        }
    }

    public func resetAttempts(user: String, factor: FactorKind?, by change: Attribution) throws(AuthenticationError) {
        contents.withLock {
            // Counters are cleared; when each factor last succeeded is kept (a one-time code stays used).
            if var book = $0.attempts[user] {
                for kind in Array(book.states.keys)
                where factor == nil || kind == factor || factor.map(AttemptBook.remoteKey) == kind {
                    book[kind] = AttemptState(lastSuccess: book[kind].lastSuccess)
                }
                $0.attempts[user] = book
            }
            if $0.attempts[user]?.states.isEmpty == true { $0.attempts[user] = nil }
            $0.audit.append(AuditEntry(at: change.at, actor: change.actor, user: user, action: .reset, factor: factor))
        }
    }

    @discardableResult
    public func pruneAudit(keeping limit: Int, routinePerHost: Int) throws(AuthenticationError) -> Int {
        contents.withLock { contents in
            let before = contents.audit.count
            // An account's routine rows beyond its latest few, newest counted first; then a host's.
            var routine: [String: Int] = [:]
            var kept: [AuditEntry] = []
            for entry in contents.audit.reversed() {
                if entry.action.isRoutine {
                    routine[entry.user, default: 0] += 1
                    if routine[entry.user, default: 0] > AuditEntry.routineRowsPerAccount { continue }
                }
                kept.append(entry)
            }
            var byHost: [String?: Int] = [:]
            kept.removeAll { entry in
                guard entry.action.isRoutine else { return false }
                byHost[entry.host, default: 0] += 1
                return byHost[entry.host, default: 0] > routinePerHost
            }
            kept.reverse()
            // Then the oldest routine rows, then the oldest of the rest.
            var excess = max(kept.count - max(limit, 0), 0)
            for routinePass in [true, false] where excess > 0 {
                var index = 0
                while index < kept.count && excess > 0 {
                    if kept[index].action.isRoutine == routinePass {
                        kept.remove(at: index)
                        excess -= 1
                    } else {
                        index += 1
                    }
                }
            }
            contents.audit = kept
            return before - kept.count
        }
    }

    @discardableResult
    public func failingAccounts(atLeast least: Int, limit: Int) throws(AuthenticationError) -> [String] {
        contents.withLock { contents in
            Array(
                contents.attempts.filter { $0.value.states.values.contains { $0.consecutiveFailures >= least } }
                    .keys.sorted().prefix(max(limit, 0)))
        }
    }

    public func pruneCounters(ofUnenrolledKeeping limit: Int) throws(AuthenticationError) -> Int {
        contents.withLock { contents in
            let unenrolled = contents.attempts.filter { entry in
                (contents.enrollments[entry.key]?.isEmpty ?? true)
                    && entry.value.states.values.allSatisfy { $0.consecutiveFailures < AttemptState.deciding }
            }
            let latest = unenrolled.map { entry in
                (entry.key, entry.value.states.values.compactMap { $0.lastFailure }.max() ?? Timestamp(milliseconds: 0))
            }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
            let doomed = latest.dropFirst(max(limit, 0)).map { $0.0 }
            for name in doomed { contents.attempts[name] = nil }
            return doomed.count
        }
    }

    public func users() throws(AuthenticationError) -> [String] {
        contents.withLock { Set($0.enrollments.keys).union($0.attempts.keys).union($0.preferences.keys).sorted() }
    }

    public func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry] {
        contents.withLock { contents in contents.audit.filter { user == nil || $0.user == user } }
    }

    public func attempts(user: String) throws(AuthenticationError) -> AttemptBook {
        contents.withLock { $0.attempts[user] ?? AttemptBook() }
    }

    public func updateAttempts(user: String, durable: Bool, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError)
    {
        contents.withLock { contents in
            var book = contents.attempts[user] ?? AttemptBook()
            body(&book)
            contents.attempts[user] = book.states.isEmpty ? nil : book
        }
    }

    public func preferences(user: String) throws(AuthenticationError) -> [String: String] {
        contents.withLock { $0.preferences[user] ?? [:] }
    }

    public func setPreference(user: String, key: String, value: String?, by change: Attribution)
        throws(AuthenticationError)
    {
        contents.withLock {
            if $0.preferences[user]?[key] == value { return }  // nothing changes: nothing is written
            $0.preferences[user, default: [:]][key] = value
            $0.audit.append(
                AuditEntry(
                    at: change.at, actor: change.actor, user: user, action: .set,
                    factor: UserSetting.factor(of: key), detail: "\(key)=\(value ?? "default")"))
        }
    }
}
