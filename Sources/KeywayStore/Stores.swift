public import KeywayCore

/// A store that can take a whole other store's contents at once (`keyway store copy`).
public protocol LoadableStore: Store {
    /// Copies `contents` into this store, which must be empty, in one transaction: all or nothing, no new audit rows.
    func load(_ contents: StoreContents) throws(AuthenticationError)
}

/// Everything a store holds, read through the `Store` protocol: what `keyway store copy` moves.
public struct StoreContents: Sendable, Equatable {
    /// Every enrollment.
    public var enrollments: [Enrollment]
    /// Every user's counters (users without any are left out).
    public var attempts: [String: AttemptBook]
    /// Every user's switches and preferences.
    public var preferences: [String: [String: String]]
    /// The audit trail, oldest first.
    public var audit: [AuditEntry]

    /// Reads all of `store`.
    public static func read(from store: any Store) throws(AuthenticationError) -> StoreContents {
        var contents = StoreContents(enrollments: [], attempts: [:], preferences: [:], audit: [])
        for user in try store.users() {
            contents.enrollments += try store.enrollments(user: user)
            let book = try store.attempts(user: user)
            if book != AttemptBook() { contents.attempts[user] = book }
            let preferences = try store.preferences(user: user)
            if !preferences.isEmpty { contents.preferences[user] = preferences }
        }
        contents.audit = try store.auditTrail(user: nil)
        return contents
    }
}

/// Opens the store a location names: a `postgresql://` URI is the fleet's database (PostgresStore), anything else
/// the path of this host's SQLite file (SQLiteStore).
public enum Stores {
    /// How to open it.
    public struct Options: Sendable, Equatable {
        /// The path or URI.
        public var location: String
        /// Create a missing SQLite file (a database is never created: `keyway store migrate` does that).
        public var create = false
        /// Accept an SQLite file owned by the current user instead of root: tests and the demo only.
        public var ownedByCurrentUser = false
        /// This host's name in a shared store's audit trail (nil: the machine's).
        public var host: String? = nil
        /// The database's password file (root's, 0600).
        public var passfile = PostgresStore.Options.defaultPassfile
        /// Where a database's timeline is kept between runs (`PostgresStore.Options.timelineFile`).
        public var timelineFile: String? = nil
        /// How spendable records split, for a database (`PostgresStore.Options.spendable`).
        public var spendable = SpendableLayouts([])

        /// Options for `location`.
        public init(location: String) { self.location = location }
    }

    /// The store, and the clock its times come from when it is not the host's own (the database's, for PostgreSQL).
    public static func open(_ options: Options) throws(AuthenticationError) -> (
        store: any LoadableStore, clock: (any Clock)?
    ) {
        if PostgresStore.isDatabaseURI(options.location) {
            var database = PostgresStore.Options(uri: options.location, host: options.host, passfile: options.passfile)
            database.timelineFile = options.timelineFile
            database.spendable = options.spendable
            let store = try PostgresStore(database)
            return (store, store.clock)
        }
        let store = try SQLiteStore(
            options.ownedByCurrentUser
                ? .ownedByCurrentUser(path: options.location, create: options.create)
                : SQLiteStore.Options(path: options.location, create: options.create))
        return (store, nil)
    }
}
