import Synchronization

/// A `Store` in memory, for tests and dry runs (`keyway policy test`). Thread-safe; nothing persists.
public final class InMemoryStore: Store {
    private struct Contents {
        var enrollments: [String: [FactorKind: Enrollment]] = [:]
        var attempts: [String: AttemptBook] = [:]
        var audit: [AuditEntry] = []
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

    public func save(_ enrollment: Enrollment) throws(AuthenticationError) {
        contents.withLock {
            $0.enrollments[enrollment.user, default: [:]][enrollment.factor] = enrollment
            $0.audit.append(
                AuditEntry(
                    at: enrollment.changedAt, actor: enrollment.changedBy, user: enrollment.user,
                    action: .enroll, factor: enrollment.factor))
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
            if let factor { $0.attempts[user]?[factor] = AttemptState() } else { $0.attempts[user] = nil }
            if $0.attempts[user]?.states.isEmpty == true { $0.attempts[user] = nil }
            $0.audit.append(AuditEntry(at: change.at, actor: change.actor, user: user, action: .reset, factor: factor))
        }
    }

    public func users() throws(AuthenticationError) -> [String] {
        contents.withLock { Set($0.enrollments.keys).union($0.attempts.keys).sorted() }
    }

    public func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry] {
        contents.withLock { contents in contents.audit.filter { user == nil || $0.user == user } }
    }

    public func attempts(user: String) throws(AuthenticationError) -> AttemptBook {
        contents.withLock { $0.attempts[user] ?? AttemptBook() }
    }

    public func updateAttempts<T>(user: String, durable: Bool, _ body: (inout AttemptBook) -> T)
        throws(AuthenticationError) -> T
    {
        contents.withLock { contents in
            var book = contents.attempts[user] ?? AttemptBook()
            let result = body(&book)
            contents.attempts[user] = book.states.isEmpty ? nil : book
            return result
        }
    }
}
