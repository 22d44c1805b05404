import CSQLite
public import Glibc
public import KeywayCore
import Synchronization

/// The production `Store`: one SQLite database (WAL, full sync), root-owned 0600 in a 0700 directory.
///
/// Every process opens its own connection; SQLite's locks make `updateAttempts` atomic across processes
/// (`BEGIN IMMEDIATE`), and its journal makes every change all-or-nothing across crashes.
public final class SQLiteStore: LoadableStore {
    /// Where the store is and whom it must belong to.
    public struct Options: Sendable, Equatable {
        /// The database file.
        public var path: String
        /// The owner the directory and file must have: root, except for tests that say otherwise on purpose.
        public var owner: uid_t
        /// Create the directory (0700) and the file (0600) if missing.
        public var create: Bool
        /// How long to wait for another process's lock before failing.
        public var busyTimeout: Duration

        /// The default location.
        public static var defaultPath: String { "/var/lib/keyway/keyway.db" }

        /// Options for the store at `path`, which must be root's.
        public init(path: String = defaultPath, create: Bool = true, busyTimeout: Duration = .seconds(10)) {
            self.path = path
            self.owner = 0
            self.create = create
            self.busyTimeout = busyTimeout
        }

        /// Options for a store owned by the current user instead of root: for tests and demos in a temporary
        /// directory only. The permission checks stay; only the expected owner changes.
        public static func ownedByCurrentUser(path: String, create: Bool = true) -> Options {
            var options = Options(path: path, create: create)
            options.owner = geteuid()
            return options
        }
    }

    /// Where the store is.
    public let options: Options
    private let connection: SQLiteConnection
    /// Serializes use of `connection` between threads of one process (SQLite's locks serialize processes).
    private let lock = Mutex(())

    /// Opens (creating if allowed) the store, checking ownership and mode, and migrating an older schema.
    public init(_ options: Options = Options()) throws(AuthenticationError) {
        self.options = options
        let created = try StoreFile.prepare(path: options.path, owner: options.owner, create: options.create)
        let opened: SQLiteConnection
        switch SQLiteConnection.open(path: options.path) {
        case .success(let connection): opened = connection
        case .failure(let error): throw Self.failure(options.path, "cannot be opened", error)
        }
        let (seconds, attoseconds) = options.busyTimeout.components
        opened.setBusyTimeout(milliseconds: Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        try Self.configure(opened, path: options.path, created: created)
        connection = opened
    }

    /// Checks what the file is before anything is written. Only a file this open created is set up as a new store:
    /// an existing file without Keyway's mark (emptied, truncated to nothing, another program's) is refused, so a
    /// damaged store can never come back as an empty one in which nobody is enrolled.
    private static func configure(_ db: SQLiteConnection, path: String, created: Bool) throws(AuthenticationError) {
        do {
            let identity = try db.query("PRAGMA application_id")
            let version = try db.query("PRAGMA user_version").first?.first?.integer ?? 0
            let application = identity.first?.first?.integer ?? 0
            if application != Schema.applicationID {
                let tables = try db.query("SELECT count(*) FROM sqlite_schema").first?.first?.integer ?? 0
                guard application == 0, tables == 0 else {
                    throw AuthenticationError(
                        .storeFailure,
                        "Keyway store \(path): it is not a Keyway store "
                            + "(another application's database); it was not changed")
                }
                guard created else {
                    throw AuthenticationError(
                        .storeFailure,
                        "Keyway store \(path): it is empty (no Keyway data; truncated or emptied?). Restore it "
                            + "from a backup; to start over on purpose, move it away and enroll again. "
                            + "It was not changed.")
                }
            }
            guard version <= Schema.currentVersion else {
                throw AuthenticationError(
                    .storeFailure,
                    "Keyway store \(path): it was written by a newer Keyway "
                        + "(schema version \(version); this version knows up to "
                        + "\(Schema.currentVersion)); upgrade Keyway. The file was not changed.")
            }
            try db.execute("PRAGMA trusted_schema = OFF; PRAGMA secure_delete = ON; PRAGMA synchronous = FULL")
            if version < Schema.currentVersion { try migrate(db) }
            var mode = try db.query("PRAGMA journal_mode").first?.first?.text
            if mode != "wal" { mode = try db.query("PRAGMA journal_mode = WAL").first?.first?.text }
            guard mode == "wal" else {
                throw AuthenticationError(
                    .storeFailure,
                    "Keyway store \(path): cannot use write-ahead logging "
                        + "(journal mode is \(mode ?? "unknown"))")
            }
            try db.commitWithoutSync()  // durable transactions sync the log themselves (SQLiteConnection.transaction)
        } catch let error as SQLiteError {
            throw failure(path, "cannot be read", error)
        } catch let error as AuthenticationError {
            throw error
        } catch {
            throw AuthenticationError(.storeFailure, "Keyway store \(path): \(error)")
        }
    }

    /// Applies the missing migrations, each in its own transaction; another process may be migrating too.
    private static func migrate(_ db: SQLiteConnection) throws(SQLiteError) {
        try db.transaction { () throws(SQLiteError) in
            let version = try db.query("PRAGMA user_version").first?.first?.integer ?? 0
            guard version < Schema.currentVersion else { return }
            for index in Int(version)..<Schema.migrations.count {
                try db.execute(Schema.migrations[index])
            }
            try db.execute(
                "PRAGMA application_id = \(Schema.applicationID); "
                    + "PRAGMA user_version = \(Schema.currentVersion)")
        }
    }

    /// How often this store's connection has synced its write-ahead log (for tests).
    var logSyncs: Int { lock.withLock { _ in connection.logSyncs } }

    static func failure(_ path: String, _ what: String, _ error: SQLiteError) -> AuthenticationError {
        AuthenticationError(.storeFailure, "Keyway store \(path): \(what): \(error)")
    }

    /// Runs `body` on the connection, turning SQLite failures into store failures that name the file.
    private func run<T>(_ what: String, _ body: (SQLiteConnection) throws(SQLiteError) -> T) throws(AuthenticationError)
        -> T
    {
        let outcome: Result<T, SQLiteError> = lock.withLock { _ in
            do throws(SQLiteError) { return .success(try body(connection)) } catch { return .failure(error) }
        }
        switch outcome {
        case .success(let value): return value
        case .failure(let error): throw Self.failure(options.path, what, error)
        }
    }

    // MARK: Enrollments

    public func enrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Enrollment? {
        try run("cannot read an enrollment") { db throws(SQLiteError) in try Self.enrollment(db, user, factor) }
    }

    private static func enrollment(_ db: SQLiteConnection, _ user: String, _ factor: FactorKind)
        throws(SQLiteError) -> Enrollment?
    {
        try db.query(
            "SELECT user, factor, payload, changed_at, changed_by FROM enrollments WHERE user = ? AND factor = ?",
            [.text(user), .text(factor.rawValue)]
        )
        .first.flatMap(Self.enrollment(from:))
    }

    public func enrollments(user: String) throws(AuthenticationError) -> [Enrollment] {
        try run("cannot read enrollments") { db throws(SQLiteError) in try Self.enrollments(db, user) }
    }

    private static func enrollments(_ db: SQLiteConnection, _ user: String) throws(SQLiteError) -> [Enrollment] {
        try db.query(
            "SELECT user, factor, payload, changed_at, changed_by FROM enrollments WHERE user = ? ORDER BY factor",
            [.text(user)]
        ).compactMap(Self.enrollment(from:))
    }

    public func enrollments(of factor: FactorKind) throws(AuthenticationError) -> [Enrollment] {
        try run("cannot read enrollments") { db throws(SQLiteError) in
            try db.query(
                "SELECT user, factor, payload, changed_at, changed_by FROM enrollments WHERE factor = ? ORDER BY user",
                [.text(factor.rawValue)]
            ).compactMap(Self.enrollment(from:))
        }
    }

    private static func enrollment(from row: [SQLiteConnection.Value]) -> Enrollment? {
        guard row.count == 5, let user = row[0].text, let factor = row[1].text, let payload = row[2].blob,
            let changedAt = row[3].integer, let changedBy = row[4].text
        else { return nil }
        return Enrollment(
            user: user, factor: FactorKind(rawValue: factor), payload: payload,
            changedAt: Timestamp(milliseconds: changedAt), changedBy: changedBy)
    }

    public func reserveOneTimeCode(user: String, factor: FactorKind, code: [UInt8], remote: Bool)
        throws(AuthenticationError)
    {}

    /// The check and its mark in one write transaction, so of two requests with the same code one matches; durable
    /// when it marked a step (a power cut cannot reopen a used code), and costing no sync when it did not.
    public func checkOneTimeCode(
        user: String, factor: FactorKind, code: [UInt8], window: Int64, remote: Bool, at now: Timestamp
    ) throws(AuthenticationError) -> OneTimeCodeCheck? {
        try run("cannot check the code") { db throws(SQLiteError) in
            try db.transaction(durableIf: { $0?.step != nil }) { () throws(SQLiteError) -> OneTimeCodeCheck? in
                let keys: [SQLiteConnection.Value] = [.text(user), .text(factor.rawValue)]
                guard let record = try Self.enrollment(db, user, factor) else { return nil }
                let mark = try db.query("SELECT step, changed_at FROM code_marks WHERE user = ? AND factor = ?", keys)
                    .first.flatMap { row -> OneTimeMark? in
                        guard let step = row[0].integer, let changedAt = row[1].integer else { return nil }
                        return OneTimeMark(step: step, changedAt: Timestamp(milliseconds: changedAt))
                    }
                guard let (check, used) = record.checkOneTimeCode(code, window: window, at: now, mark: mark) else {
                    return nil
                }
                if let used {
                    try db.query(
                        "INSERT OR REPLACE INTO code_marks (user, factor, step, changed_at) VALUES (?, ?, ?, ?)",
                        keys + [.integer(used.step), .integer(used.changedAt.milliseconds)])
                }
                return check
            }
        }
    }

    public func save(_ enrollment: Enrollment) throws(AuthenticationError) {
        try run("cannot save the enrollment") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                try db.query(
                    "INSERT OR REPLACE INTO enrollments (user, factor, payload, changed_at, changed_by) "
                        + "VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(enrollment.user), .text(enrollment.factor.rawValue), .blob(enrollment.payload),
                        .integer(enrollment.changedAt.milliseconds), .text(enrollment.changedBy),
                    ])
                try Self.audit(
                    db,
                    AuditEntry(
                        at: enrollment.changedAt, actor: enrollment.changedBy,
                        user: enrollment.user, action: .enroll, factor: enrollment.factor))
            }
        }
    }

    public func replace(_ current: Enrollment, with new: Enrollment, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    {
        guard new.user == current.user, new.factor == current.factor else { return false }
        return try run("cannot save the enrollment") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let stored = try db.query(
                    "SELECT payload FROM enrollments WHERE user = ? AND factor = ?",
                    [.text(current.user), .text(current.factor.rawValue)]
                ).first?.first?.blob
                guard stored == current.payload else { return false }
                try db.query(
                    "UPDATE enrollments SET payload = ?, changed_at = ?, changed_by = ? WHERE user = ? AND factor = ?",
                    [
                        .blob(new.payload), .integer(new.changedAt.milliseconds), .text(new.changedBy),
                        .text(new.user), .text(new.factor.rawValue),
                    ])
                try Self.audit(db, entry)
                return true
            }
        }
    }

    @discardableResult
    public func removeEnrollment(user: String, factor: FactorKind, by change: Attribution) throws(AuthenticationError)
        -> Bool
    {
        try run("cannot remove the enrollment") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let removed = try db.query(
                    "DELETE FROM enrollments WHERE user = ? AND factor = ? RETURNING 1",
                    [.text(user), .text(factor.rawValue)])
                guard !removed.isEmpty else { return false }
                try Self.audit(
                    db,
                    AuditEntry(
                        at: change.at, actor: change.actor, user: user, action: .remove,
                        factor: factor))
                return true
            }
        }
    }

    // MARK: Attempts

    public func attempts(user: String) throws(AuthenticationError) -> AttemptBook {
        try run("cannot read attempt counters") { db throws(SQLiteError) in try Self.book(db, user) }
    }

    /// In one read transaction: one snapshot, and the file's locks taken once rather than for each part.
    public func account(user: String) throws(AuthenticationError) -> AccountRecord {
        try run("cannot read the account") { db throws(SQLiteError) in
            try db.reading { () throws(SQLiteError) in
                AccountRecord(
                    enrollments: try Self.enrollments(db, user), attempts: try Self.book(db, user),
                    preferences: try Self.preferences(db, user))
            }
        }
    }

    public func updateAttempts(user: String, durable: Bool, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError)
    {
        try run("cannot update attempt counters") { db throws(SQLiteError) in
            // Not durable: committed to the log without its sync, safe against a crash, not against a power cut.
            try db.transaction(durable: durable) { () throws(SQLiteError) in
                let before = try Self.book(db, user)
                var book = before
                body(&book)
                for factor in Set(before.states.keys).union(book.states.keys) where before[factor] != book[factor] {
                    let state = book[factor]
                    if state == AttemptState() {
                        try db.query(
                            "DELETE FROM attempts WHERE user = ? AND factor = ?",
                            [.text(user), .text(factor.rawValue)])
                    } else {
                        try db.query(
                            "INSERT OR REPLACE INTO attempts "
                                + "(user, factor, failures, last_failure, recent_mismatches, last_success) "
                                + "VALUES (?, ?, ?, ?, ?, ?)",
                            [
                                .text(user), .text(factor.rawValue), .integer(Int64(state.consecutiveFailures)),
                                state.lastFailure.map { .integer($0.milliseconds) } ?? .null,
                                .blob(Self.encode(state.recentMismatches)),
                                state.lastSuccess.map { .integer($0.milliseconds) } ?? .null,
                            ])
                    }
                }
            }
        }
    }

    /// Committed at `synchronous = NORMAL` (in the log, seen by every connection, kept by a crash of this process),
    /// then the log synced on another thread, under the store's lock like every use of the connection.
    public func updateAttemptsWritingInBackground(user: String, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError) -> any DiskWrite
    {
        try updateAttempts(user: user, durable: false, body)
        return BackgroundDiskWrite { [self] () throws(AuthenticationError) in
            try run("cannot write attempt counters to disk") { db throws(SQLiteError) in try db.syncLog() }
        }
    }

    public func resetAttempts(user: String, factor: FactorKind?, by change: Attribution) throws(AuthenticationError) {
        try run("cannot reset attempt counters") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                // Counters are cleared; when each factor last succeeded is kept (a one-time code stays used, the
                // passcode's age stays what it was).
                // A factor's remote counters (AttemptBook.Channel) with its own.
                let which = factor == nil ? "" : " AND factor IN (?, ?)"
                let arguments: [SQLiteConnection.Value] =
                    [.text(user)]
                    + (factor.map { [.text($0.rawValue), .text(AttemptBook.remoteKey($0).rawValue)] } ?? [])
                try db.query("DELETE FROM attempts WHERE user = ?\(which) AND last_success IS NULL", arguments)
                try db.query(
                    "UPDATE attempts SET failures = 0, last_failure = NULL, recent_mismatches = ? WHERE user = ?\(which)",
                    [.blob(Self.encode([]))] + arguments)
                try Self.audit(
                    db,
                    AuditEntry(
                        at: change.at, actor: change.actor, user: user, action: .reset,
                        factor: factor))
            }
        }
    }

    private static func book(_ db: SQLiteConnection, _ user: String) throws(SQLiteError) -> AttemptBook {
        var book = AttemptBook()
        let rows = try db.query(
            "SELECT factor, failures, last_failure, recent_mismatches, last_success FROM attempts WHERE user = ?",
            [.text(user)])
        for row in rows {
            guard let factor = row[0].text, let failures = row[1].integer else { continue }
            book[FactorKind(rawValue: factor)] = AttemptState(
                consecutiveFailures: Int(clamping: failures),
                lastFailure: row[2].integer.map { Timestamp(milliseconds: $0) },
                recentMismatches: decode(row[3].blob ?? []),
                lastSuccess: row[4].integer.map { Timestamp(milliseconds: $0) })
        }
        return book
    }

    /// Length-prefixed fingerprints, oldest first.
    static func encode(_ fingerprints: [[UInt8]]) -> [UInt8] {
        fingerprints.flatMap { [UInt8(clamping: $0.count)] + $0.prefix(255) }
    }

    static func decode(_ bytes: [UInt8]) -> [[UInt8]] {
        var result: [[UInt8]] = []
        var index = 0
        while index < bytes.count {
            let length = Int(bytes[index])
            guard index + 1 + length <= bytes.count else { break }
            result.append(Array(bytes[(index + 1)..<(index + 1 + length)]))
            index += 1 + length
        }
        return result
    }

    // MARK: Administration

    @discardableResult
    public func failingAccounts(atLeast least: Int, limit: Int) throws(AuthenticationError) -> [String] {
        try run("cannot read attempt counters") { db throws(SQLiteError) in
            try db.query(
                "SELECT DISTINCT user FROM attempts WHERE failures >= ? ORDER BY user LIMIT ?",
                [.integer(Int64(least)), .integer(Int64(max(limit, 0)))]
            ).compactMap { $0.first?.text }
        }
    }

    public func pruneCounters(ofUnenrolledKeeping limit: Int) throws(AuthenticationError) -> Int {
        try run("cannot prune attempt counters") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let doomed = try db.query(
                    "SELECT user FROM attempts a WHERE NOT EXISTS (SELECT 1 FROM enrollments e WHERE e.user = a.user) "
                        + "GROUP BY user HAVING max(failures) < ? "
                        + "ORDER BY max(coalesce(last_failure, 0)) DESC, user LIMIT -1 OFFSET ?",
                    [.integer(Int64(AttemptState.deciding)), .integer(Int64(max(limit, 0)))]
                ).compactMap { $0.first?.text }
                for user in doomed { try db.query("DELETE FROM attempts WHERE user = ?", [.text(user)]) }
                return doomed.count
            }
        }
    }

    @discardableResult
    public func pruneAudit(keeping limit: Int, routinePerHost: Int) throws(AuthenticationError) -> Int {
        try run("cannot prune the audit trail") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                // Store.pruneAudit: an account's routine rows beyond its latest few, then routine rows first.
                let count = { () throws(SQLiteError) -> Int in
                    Int(try db.query("SELECT count(*) FROM audit").first?.first?.integer ?? 0)
                }
                let before = try count()
                let routine = SQLiteConnection.Value.text(AuditEntry.Action.set.rawValue)
                try db.query(
                    "DELETE FROM audit WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
                        + "(PARTITION BY user ORDER BY id DESC) AS n FROM audit WHERE action = ?) WHERE n > ?)",
                    [routine, .integer(Int64(AuditEntry.routineRowsPerAccount))])
                try db.query(
                    "DELETE FROM audit WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
                        + "(PARTITION BY host ORDER BY id DESC) AS n FROM audit WHERE action = ?) WHERE n > ?)",
                    [routine, .integer(Int64(max(routinePerHost, 0)))])
                let excess = try count() - max(limit, 0)
                if excess > 0 {
                    try db.query(
                        "DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY action = ? DESC, id LIMIT ?)",
                        [routine, .integer(Int64(excess))])
                }
                return before - (try count())
            }
        }
    }

    public func users() throws(AuthenticationError) -> [String] {
        try run("cannot list users") { db throws(SQLiteError) in
            try db.query(
                "SELECT user FROM enrollments UNION SELECT user FROM attempts UNION SELECT user FROM preferences "
                    + "ORDER BY 1"
            )
            .compactMap { $0.first?.text }
        }
    }

    public func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry] {
        try run("cannot read the audit trail") { db throws(SQLiteError) in
            let columns = "SELECT at, actor, user, action, factor, detail, host FROM audit"
            let rows: [[SQLiteConnection.Value]]
            if let user {
                rows = try db.query(columns + " WHERE user = ? ORDER BY id", [.text(user)])
            } else {
                rows = try db.query(columns + " ORDER BY id")
            }
            return rows.compactMap { row in
                guard let at = row[0].integer, let actor = row[1].text, let user = row[2].text,
                    let action = row[3].text.flatMap(AuditEntry.Action.init(rawValue:))
                else { return nil }
                return AuditEntry(
                    at: Timestamp(milliseconds: at), actor: actor, user: user, action: action,
                    factor: row[4].text.map(FactorKind.init(rawValue:)), detail: row[5].text, host: row[6].text)
            }
        }
    }

    private static func audit(_ db: SQLiteConnection, _ entry: AuditEntry) throws(SQLiteError) {
        try db.query(
            "INSERT INTO audit (at, actor, user, action, factor, detail, host) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                .integer(entry.at.milliseconds), .text(entry.actor), .text(entry.user),
                .text(entry.action.rawValue), entry.factor.map { .text($0.rawValue) } ?? .null,
                entry.detail.map { .text($0) } ?? .null, entry.host.map { .text($0) } ?? .null,
            ])
    }

    // MARK: Preferences

    public func preferences(user: String) throws(AuthenticationError) -> [String: String] {
        try run("cannot read preferences") { db throws(SQLiteError) in try Self.preferences(db, user) }
    }

    private static func preferences(_ db: SQLiteConnection, _ user: String) throws(SQLiteError) -> [String: String] {
        var result: [String: String] = [:]
        for row in try db.query("SELECT key, value FROM preferences WHERE user = ?", [.text(user)]) {
            if let key = row[0].text, let value = row[1].text { result[key] = value }
        }
        return result
    }

    public func setPreference(user: String, key: String, value: String?, by change: Attribution)
        throws(AuthenticationError)
    {
        try run("cannot store the preference") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let stored = try db.query(
                    "SELECT value FROM preferences WHERE user = ? AND key = ?", [.text(user), .text(key)]
                ).first?.first?.text
                if stored == value { return }  // nothing changes: nothing is written
                if let value {
                    try db.query(
                        "INSERT INTO preferences (user, key, value) VALUES (?, ?, ?) "
                            + "ON CONFLICT (user, key) DO UPDATE SET value = excluded.value",
                        [.text(user), .text(key), .text(value)])
                } else {
                    try db.query("DELETE FROM preferences WHERE user = ? AND key = ?", [.text(user), .text(key)])
                }
                try Self.audit(
                    db,
                    AuditEntry(
                        at: change.at, actor: change.actor, user: user, action: .set,
                        factor: UserSetting.factor(of: key), detail: "\(key)=\(value ?? "default")"))
            }
        }
    }

    /// Copies `contents` into this store, which must be empty, in one transaction (no new audit rows).
    public func load(_ contents: StoreContents) throws(AuthenticationError) {
        try run("cannot copy into the store") { db throws(SQLiteError) in
            try db.transaction { () throws(SQLiteError) in
                let present =
                    try db.query(
                        "SELECT (SELECT count(*) FROM enrollments) + (SELECT count(*) FROM attempts) "
                            + "+ (SELECT count(*) FROM preferences)"
                    ).first?.first?.integer ?? 0
                guard present == 0 else {
                    throw SQLiteError(
                        code: SQLITE_CONSTRAINT, message: "the target store is not empty; nothing was copied")
                }
                for enrollment in contents.enrollments {
                    try db.query(
                        "INSERT INTO enrollments (user, factor, payload, changed_at, changed_by) VALUES (?, ?, ?, ?, ?)",
                        [
                            .text(enrollment.user), .text(enrollment.factor.rawValue), .blob(enrollment.payload),
                            .integer(enrollment.changedAt.milliseconds), .text(enrollment.changedBy),
                        ])
                }
                for (user, book) in contents.attempts {
                    for (factor, state) in book.states {
                        try db.query(
                            "INSERT INTO attempts (user, factor, failures, last_failure, recent_mismatches, "
                                + "last_success) VALUES (?, ?, ?, ?, ?, ?)",
                            [
                                .text(user), .text(factor.rawValue), .integer(Int64(state.consecutiveFailures)),
                                state.lastFailure.map { .integer($0.milliseconds) } ?? .null,
                                .blob(Self.encode(state.recentMismatches)),
                                state.lastSuccess.map { .integer($0.milliseconds) } ?? .null,
                            ])
                    }
                }
                for (user, preferences) in contents.preferences {
                    for (key, value) in preferences {
                        try db.query(
                            "INSERT INTO preferences (user, key, value) VALUES (?, ?, ?)",
                            [.text(user), .text(key), .text(value)])
                    }
                }
                for entry in contents.audit { try Self.audit(db, entry) }
            }
        }
    }

    /// Runs SQLite's full consistency check; "ok" when the file is sound.
    public func integrityCheck() throws(AuthenticationError) -> String {
        try run("cannot check integrity") { db throws(SQLiteError) in
            try db.query("PRAGMA integrity_check").compactMap { $0.first?.text }.joined(separator: "; ")
        }
    }
}
