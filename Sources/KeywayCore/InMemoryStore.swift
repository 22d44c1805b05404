import Synchronization

/// A `Store` in memory, for tests and dry runs (`keyway policy test`). Thread-safe; nothing persists.
public final class InMemoryStore: Store {
    private struct Contents {
        var enrollments: [String: [FactorKind: Enrollment]] = [:]
        var attempts: [String: AttemptBook] = [:]
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
        contents.withLock { $0.enrollments[enrollment.user, default: [:]][enrollment.factor] = enrollment }
    }

    @discardableResult
    public func removeEnrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Bool {
        contents.withLock { $0.enrollments[user]?.removeValue(forKey: factor) != nil }
    }

    public func attempts(user: String) throws(AuthenticationError) -> AttemptBook {
        contents.withLock { $0.attempts[user] ?? AttemptBook() }
    }

    public func updateAttempts<T>(user: String, _ body: (inout AttemptBook) -> T) throws(AuthenticationError) -> T {
        contents.withLock { contents in
            var book = contents.attempts[user] ?? AttemptBook()
            let result = body(&book)
            contents.attempts[user] = book.states.isEmpty ? nil : book
            return result
        }
    }
}
