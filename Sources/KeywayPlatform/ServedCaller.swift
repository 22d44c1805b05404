/// Whose request the current thread serves: keywayd marks root's, so a shared resource can keep a place for root
/// that no flood of other users' requests takes (the fleet database's connections: `PostgresStore`).
public enum ServedCaller {
    /// True while a request of root's is served on this thread (bound with `serving(root:_:)`).
    @TaskLocal public static var root = false

    /// Runs `body` marked as serving root's request, or not.
    public static func serving<T>(root: Bool, _ body: () -> T) -> T {
        $root.withValue(root) { body() }
    }
}
