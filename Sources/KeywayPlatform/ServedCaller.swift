import CKeywayLibc

/// Whose request the current thread serves: keywayd marks root's, so a shared resource can keep a place for root
/// that no flood of other users' requests takes (the fleet database's connections: `PostgresStore`).
///
/// A thread-specific value (pthread_key_create), not a task-local one: keywayd serves requests on threads, and this
/// target is also built in Embedded Swift, which has no task-locals.
public enum ServedCaller {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// True while a request of root's is served on this thread (bound with `serving(root:_:)`).
    public static var root: Bool { pthread_getspecific(key) != nil }

    /// Runs `body` marked as serving root's request, or not; the mark before it is restored after.
    public static func serving<T>(root: Bool, _ body: () -> T) -> T {
        let before = pthread_getspecific(key)
        pthread_setspecific(key, root ? UnsafeRawPointer(bitPattern: 1) : nil)
        defer { pthread_setspecific(key, before) }
        return body()
    }
}
