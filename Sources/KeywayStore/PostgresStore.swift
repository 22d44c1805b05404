import CKeywayLibc
import Glibc
public import KeywayCore
import KeywayPlatform
import Synchronization

/// The fleet's `Store`: one PostgreSQL database shared by the keywayd of every host (docs/ARCHITECTURE.md §17,
/// keywayd(8) FLEETS).
///
/// Exact across hosts: `updateAttempts` holds a per-account advisory lock (`pg_advisory_xact_lock`) from the read to
/// the commit, so a reservation made on any host is committed before that host runs the slow hash, and no two hosts
/// can both see "4 failures" and both verify. Times come from the database's clock (`clock`). A database that is
/// away (unreachable, restarted, failed over, a host cut off) makes a call throw `.serviceUnavailable` within the
/// request timeout; keywayd answers that as "unavailable" and reconnects by itself on a later request.
public final class PostgresStore: LoadableStore {
    /// Where the database is and how this host uses it.
    public struct Options: Sendable, Equatable {
        /// A libpq URI (`postgresql:///keyway?host=/run/postgresql`). It may not hold a password: that comes from
        /// `passfile`.
        public var uri: String
        /// This host's name in the audit trail.
        public var host: String
        /// The longest one call may take, connecting included; then it fails as unavailable.
        public var timeout: Duration
        /// Connections this process keeps open at most for every caller, and one more that only root's requests
        /// use (`ServedCaller`); a call waits (within `timeout`) for a free one.
        public var connections: Int
        /// A connection unused this long is closed (the last one used stays open): so hundreds of hosts do not hold
        /// a server's connections for nothing, while one stays ready when the server is full.
        public var idle: Duration
        /// libpq's password file, which must be the current user's and 0600 (root's, for keywayd).
        public var passfile: String
        /// Where this host keeps the database's system identifier and the newest timeline of it used, so a process
        /// started later still refuses a former primary (`check`); nil keeps them in memory only. keywayd's is
        /// `/var/lib/keyway/fleet-timeline`.
        public var timelineFile: String? = nil
        /// How the records of factors whose uses change them split into their spendable parts (`Factors.spendable`):
        /// the database keeps those parts as rows it judges by rule (`SpendableLayout`). A record with such parts
        /// read by a process without its factor's layout is a store failure, never a record read short.
        public var spendable = SpendableLayouts([])

        /// The default password file.
        public static var defaultPassfile: String { "/etc/keyway/pgpass" }

        /// Options for `uri`, as this machine's host name.
        public init(
            uri: String, host: String? = nil, timeout: Duration = .milliseconds(1500), connections: Int = 8,
            idle: Duration = .seconds(60), passfile: String = defaultPassfile
        ) {
            self.uri = uri
            self.host = host ?? Self.machineName()
            self.timeout = timeout
            self.connections = max(1, connections)
            self.idle = idle
            self.passfile = passfile
        }

        /// gethostname(2).
        static func machineName() -> String {
            var buffer = [CChar](repeating: 0, count: 256)
            guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// Where the database is.
    public let options: Options
    /// The database's clock, as this host measures it: what lockouts, attributions and one-time codes are dated by.
    public let clock: DatabaseClock
    let parameters: [(String, String)]
    /// The servers the URI lists, in its order (host or socket directory, port): where a connection may go when the
    /// one libpq chose is refused (`connect`).
    let servers: [(host: String, port: String)]
    /// Connections not lent out, each with when it was given back (monotonic milliseconds), the latest last.
    let idle = Mutex<[(connection: PostgresConnection, since: Int64)]>([])
    /// The database this host has used (its system identifier) and the newest timeline of it seen: a server of the
    /// same database on an older timeline is a former primary, never used again (`check`).
    let history = Mutex<(system: String, timeline: Int64)?>(nil)
    /// Whether this host's role may change the tables (the owner, an administrator, a host with self-service), as
    /// the last new connection found: a host without may not prune the audit trail (`pruneAudit`).
    let privileged = Atomic<Bool>(false)
    /// Whether the last call found the database away, and who is told when that changes.
    let away = Mutex<(isAway: Bool, tell: (@Sendable (Bool, String) -> Void)?)>((false, nil))

    /// Calls `tell` with one line when the database goes away and when it answers again (keywayd logs them), so an
    /// outage is one pair of log lines, not one per request.
    public func onAvailabilityChange(_ tell: @escaping @Sendable (_ away: Bool, _ line: String) -> Void) {
        away.withLock { $0.tell = tell }
    }

    func noteAvailability(_ problem: AuthenticationError?) {
        let isAway = problem?.code == .serviceUnavailable
        let (changed, tell) = away.withLock { state in
            defer { state.isAway = isAway }
            return (state.isAway != isAway, state.tell)
        }
        guard changed, let tell else { return }
        tell(isAway, problem.map { $0.reason } ?? "Keyway store \(options.uri): the database answers again")
    }
    let slots: Slots
    /// The one connection only root's requests take (`ServedCaller.root`), so no flood of users' requests keeps an
    /// administrator's `keyway reset` or root's own authentication from the database.
    let rootSlot = Slots(1)

    /// The schema version this build reads and writes.
    public static var schemaVersion: Int { PostgresSchema.currentVersion }

    /// Whether `location` names a PostgreSQL database (a libpq URI) rather than an SQLite file.
    public static func isDatabaseURI(_ location: String) -> Bool {
        location.hasPrefix("postgresql://") || location.hasPrefix("postgres://")
    }

    /// Checks the URI and the password file; connects only when a call needs the database, so keywayd starts (and
    /// serves "unavailable") while the database is away.
    public init(_ options: Options) throws(AuthenticationError) {
        self.options = options
        clock = DatabaseClock()
        slots = Slots(options.connections)
        guard Self.isDatabaseURI(options.uri) else {
            throw Self.refuse(options.uri, "give a postgresql:// URI")
        }
        let keywords: [String: String]
        switch PostgresConnection.keywords(of: options.uri) {
        case .failure(let error): throw Self.refuse(options.uri, "the URI cannot be read: \(error.message)")
        case .success(let found):
            keywords = found
            guard found["password"] == nil else {
                throw Self.refuse(
                    "postgresql://…",  // not repeated: a log line must not carry it either
                    "the URI holds a password; put it in \(options.passfile) (root's, mode 0600) instead, where no "
                        + "command line or environment shows it")
            }
        }
        try Self.checkPassfile(options.passfile, uri: options.uri)
        let known = try options.timelineFile.flatMap { file throws(AuthenticationError) in
            try Self.readTimeline(file, uri: options.uri)
        }
        Self.forgetEnvironment()
        let hosts = (keywords["host"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        let ports = (keywords["port"] ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        servers =
            keywords["hostaddr"] != nil || hosts.count < 2 || (ports.count > 1 && ports.count != hosts.count)
            ? []  // one server, or a list libpq alone interprets: nowhere else to go
            : hosts.indices.map { (hosts[$0], ports.count > 1 ? ports[$0] : ports.first ?? "5432") }
        let seconds = max(2, options.timeout.components.seconds + 1)
        // libpq takes the last value of a keyword: these defaults come before the URI, which may override them
        // (sslmode, passfile). The server's own limits are set in each transaction (`begin`), not at the start of
        // the session: a pooler in transaction mode passes no session options on.
        parameters = [
            ("connect_timeout", String(seconds)), ("sslmode", "verify-full"), ("passfile", options.passfile),
            ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"), ("keepalives_count", "2"),
            ("tcp_user_timeout", String(Self.milliseconds(options.timeout) + 1000)),
            ("application_name", "keywayd on \(options.host)"),
            ("dbname", options.uri),
        ]
        history.withLock { $0 = known }
    }

    // MARK: Enrollments

    /// Enrollments are read through the schema's functions, which give a host's role a sealed factor's header only
    /// (a TOTP's digits and period, never its secret: `checkOneTimeCode`), each with its spendable parts (uses left,
    /// a counter), which the factor's layout joins back into its record (`SpendableLayout`).
    static let enrollmentColumns = "SELECT account, factor, payload, changed_at, changed_by FROM "
    static let spendableColumns = "SELECT account, factor, name, value, rule, step, ceiling FROM "

    public func enrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Enrollment? {
        try run("cannot read an enrollment") { db, deadline throws(PostgresError) in
            let rows = try db.pipeline(
                [
                    .init(
                        sql: Self.enrollmentColumns + "keyway_enrollment_rows($1, $2)",
                        parameters: [user, factor.rawValue]),
                    .init(
                        sql: Self.spendableColumns + "keyway_spendable_rows($1, $2)",
                        parameters: [user, factor.rawValue]),
                ], deadline: deadline)
            return try joined(rows[0], rows[1]).first
        }
    }

    public func enrollments(user: String) throws(AuthenticationError) -> [Enrollment] {
        try run("cannot read enrollments") { db, deadline throws(PostgresError) in
            let rows = try db.pipeline(Self.readEnrollments(user), deadline: deadline)
            return try joined(rows[0], rows[1])
        }
    }

    /// The account's records and their spendable parts: two statements, sent together.
    static func readEnrollments(_ user: String) -> [PostgresConnection.Statement] {
        [
            .init(sql: Self.enrollmentColumns + "keyway_enrollment_rows($1, NULL)", parameters: [user]),
            .init(sql: Self.spendableColumns + "keyway_spendable_rows($1, NULL)", parameters: [user]),
        ]
    }

    public func enrollments(of factor: FactorKind) throws(AuthenticationError) -> [Enrollment] {
        try run("cannot read enrollments") { db, deadline throws(PostgresError) in
            let rows = try db.pipeline(
                [
                    .init(sql: Self.enrollmentColumns + "keyway_enrollments_of($1)", parameters: [factor.rawValue]),
                    .init(sql: Self.spendableColumns + "keyway_spendables_of($1)", parameters: [factor.rawValue]),
                ], deadline: deadline)
            return try joined(rows[0], rows[1])
        }
    }

    func audit(_ db: PostgresConnection, _ entry: AuditEntry, _ deadline: Int64) throws(PostgresError) {
        try db.query(
            "INSERT INTO audit (at, host, actor, account, action, factor, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)",
            [
                String(entry.at.milliseconds), entry.host ?? options.host, entry.actor, entry.user,
                entry.action.rawValue, entry.factor?.rawValue, entry.detail,
            ], deadline: deadline)
    }

    public func save(_ enrollment: Enrollment) throws(AuthenticationError) {
        let parts = try split(enrollment)
        try run("cannot save the enrollment") { db, deadline throws(PostgresError) in
            try transaction(db, deadline) { () throws(PostgresError) in
                try db.query(
                    "INSERT INTO enrollments (account, factor, payload, changed_at, changed_by) "
                        + "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (account, factor) DO UPDATE SET "
                        + "payload = excluded.payload, changed_at = excluded.changed_at, "
                        + "changed_by = excluded.changed_by",
                    [
                        enrollment.user, enrollment.factor.rawValue, PostgresConnection.bytea(parts.fixed),
                        String(enrollment.changedAt.milliseconds), enrollment.changedBy,
                    ], deadline: deadline)
                try writeSpendables(parts.items, of: enrollment.user, enrollment.factor, db, deadline)
                try audit(
                    db,
                    AuditEntry(
                        at: enrollment.changedAt, actor: enrollment.changedBy, user: enrollment.user, action: .enroll,
                        factor: enrollment.factor), deadline)
            }
        }
    }

    public func replace(_ current: Enrollment, with new: Enrollment, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    {
        guard new.user == current.user, new.factor == current.factor else { return false }
        let (old, parts) = (try split(current), try split(new))
        if entry.action == .use || entry.action == .mark, new.changedAt == current.changedAt,
            new.changedBy == current.changedBy, let use = SpendableUse.between(old, parts)
        {
            return try spend(current, old.fixed, use, recording: entry)
        }
        return try run("cannot save the enrollment") { db, deadline throws(PostgresError) in
            // keyway_replace, for an administrator's role (a host spends: keyway_spend). The record is swapped only if
            // its fixed part and its spendable parts are still what `current` holds.
            let stale = "KW004"
            do throws(PostgresError) {
                return try transaction(db, deadline) { () throws(PostgresError) in
                    let swapped =
                        try db.query(
                            "SELECT keyway_replace($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                            [
                                current.user, current.factor.rawValue, PostgresConnection.bytea(old.fixed),
                                PostgresConnection.bytea(parts.fixed), String(new.changedAt.milliseconds),
                                new.changedBy,
                                String(entry.at.milliseconds), entry.host ?? options.host, entry.actor,
                                entry.action.rawValue, entry.detail,
                            ], deadline: deadline
                        ).first?[0] == "t"
                    guard swapped else { return false }
                    guard options.spendable[current.factor] != nil else { return true }
                    let stored = try db.query(
                        Self.spendableColumns + "keyway_spendable_rows($1, $2)",
                        [current.user, current.factor.rawValue],
                        deadline: deadline)
                    let read = try joined(
                        [[current.user, current.factor.rawValue, PostgresConnection.bytea(old.fixed), "0", ""]], stored)
                    guard read.first?.payload == current.payload else {
                        throw PostgresError(state: stale, "the record changed since it was read")
                    }
                    try writeSpendables(parts.items, of: new.user, new.factor, db, deadline)
                    return true
                }
            } catch {
                if error.state == stale { return false }
                throw error
            }
        }
    }

    /// One use of a record (`SpendableUse`), as the database judges it by the part's rule (keyway_spend).
    func spend(_ current: Enrollment, _ fixed: [UInt8], _ use: SpendableUse, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    {
        try run("cannot spend a use of the enrollment") { db, deadline throws(PostgresError) in
            try inOneTrip(
                db, deadline,
                PostgresConnection.Statement(
                    sql: "SELECT keyway_spend($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                    parameters: [
                        current.user, current.factor.rawValue, PostgresConnection.bytea(fixed),
                        String(current.changedAt.milliseconds), use.name, String(use.from), String(use.to),
                        entry.host ?? options.host, entry.actor, entry.action.rawValue, entry.detail,
                    ])
            ).first?[0] == "t"
        }
    }

    /// Booked by the database (keyway_reserve_code) in a transaction of its own, committed before the check: no
    /// rollback of the check can give the count back.
    public func reserveOneTimeCode(user: String, factor: FactorKind, code: [UInt8], remote: Bool)
        throws(AuthenticationError)
    {
        try run("cannot book the code's check") { db, deadline throws(PostgresError) in
            _ = try inOneTrip(
                db, deadline,
                PostgresConnection.Statement(
                    sql: "SELECT keyway_reserve_code($1, $2, $3, $4)",
                    parameters: [user, factor.rawValue, String(decoding: code, as: UTF8.self), remote ? "t" : "f"]))
        }
    }

    /// Checked by the database (keyway_check_code), by its clock and window rather than `now`, and only once booked
    /// (`reserveOneTimeCode`): the secret never reaches a host. `window` must be the database's.
    public func checkOneTimeCode(
        user: String, factor: FactorKind, code: [UInt8], window: Int64, remote: Bool, at now: Timestamp
    ) throws(AuthenticationError) -> OneTimeCodeCheck? {
        try run("cannot check the code") { db, deadline throws(PostgresError) in
            let rows = try inOneTrip(
                db, deadline,
                PostgresConnection.Statement(
                    sql: "SELECT step, fingerprint FROM keyway_check_code($1, $2, $3, $4, $5)",
                    parameters: [
                        user, factor.rawValue, String(decoding: code, as: UTF8.self), String(window),
                        remote ? "t" : "f",
                    ]))
            guard let row = rows.first else { return nil }
            return OneTimeCodeCheck(
                step: row[0].flatMap { Int64($0) },
                fingerprint: row[1].flatMap(PostgresConnection.bytes(fromBytea:)) ?? [])
        }
    }

    @discardableResult
    public func removeEnrollment(user: String, factor: FactorKind, by change: Attribution) throws(AuthenticationError)
        -> Bool
    {
        try run("cannot remove the enrollment") { db, deadline throws(PostgresError) in
            try transaction(db, deadline) { () throws(PostgresError) in
                let removed = try db.query(
                    "DELETE FROM enrollments WHERE account = $1 AND factor = $2 RETURNING 1", [user, factor.rawValue],
                    deadline: deadline)
                guard !removed.isEmpty else { return false }
                try audit(
                    db, AuditEntry(at: change.at, actor: change.actor, user: user, action: .remove, factor: factor),
                    deadline)
                return true
            }
        }
    }

    // MARK: Attempts

    func book(_ db: PostgresConnection, _ user: String, _ deadline: Int64) throws(PostgresError)
        -> AttemptBook
    {
        Self.book(from: try db.query(Self.readBook(user), deadline: deadline))
    }

    /// The statement that reads an account's attempt counters, one row per factor.
    static func readBook(_ user: String) -> PostgresConnection.Statement {
        PostgresConnection.Statement(
            sql: "SELECT factor, failures, last_failure, recent_mismatches, last_success FROM keyway_attempt_rows($1)",
            parameters: [user])
    }

    /// The attempt counters in `readBook`'s rows.
    static func book(from rows: [[String?]]) -> AttemptBook {
        var book = AttemptBook()
        for row in rows {
            guard let factor = row[0], let failures = row[1].flatMap({ Int($0) }) else { continue }
            book[FactorKind(rawValue: factor)] = AttemptState(
                consecutiveFailures: failures,
                lastFailure: row[2].flatMap { Int64($0) }.map { Timestamp(milliseconds: $0) },
                recentMismatches: SQLiteStore.decode(row[3].flatMap(PostgresConnection.bytes(fromBytea:)) ?? []),
                lastSuccess: row[4].flatMap { Int64($0) }.map { Timestamp(milliseconds: $0) })
        }
        return book
    }

    public func attempts(user: String) throws(AuthenticationError) -> AttemptBook {
        try run("cannot read attempt counters") { db, deadline throws(PostgresError) in
            try book(db, user, deadline)
        }
    }

    /// Under the account's advisory lock: every host's reservations for one account are serialized, each committed
    /// (with `durable`, flushed by the server: synchronous_commit) before its host verifies anything.
    ///
    /// Two round trips, each a pipeline (`PostgresConnection.pipeline`): BEGIN, the lock and the read, then the
    /// writes and COMMIT. The read is its own statement after the lock's, so its snapshot is taken once the lock is
    /// held and it sees the last holder's commit (one statement for both would read a snapshot taken before the
    /// wait). A failure rolls the transaction back, as `transaction` does.
    public func updateAttempts(user: String, durable: Bool, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError)
    {
        try run("cannot update attempt counters") { db, deadline throws(PostgresError) in
            try rollingBack(db, deadline) { () throws(PostgresError) in
                let finish = try changeAttempts(user, durable: durable, body, db, deadline)
                try db.pipeline(finish, deadline: deadline)
            }
        }
    }

    /// `updateAttempts(durable: true)` with the writes and COMMIT sent but not waited for: the account's lock is
    /// taken and the counters read before this returns, and the returned write reads the server's answer on
    /// another thread, while the caller hashes. The count is committed when the server has flushed it, and no
    /// verdict is given before `wait()` has seen that (a failure there throws, and the attempt is not counted, nor
    /// answered). Another host's reservation of the account waits on its lock until the commit, as before; a
    /// keywayd that dies after sending leaves the attempt counted, since the server commits what it was sent.
    public func updateAttemptsWritingInBackground(user: String, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError) -> any DiskWrite
    {
        // The connection passes to the reading thread only once `attempt` is done with it: its answers still to read
        // (`awaitsAnswers`) keep it out of the pool and its slot taken, and no other thread has seen it yet.
        let (db, deadline) = try run("cannot update attempt counters") {
            db, deadline throws(PostgresError) -> (PostgresConnection, Int64) in
            try rollingBack(db, deadline) { () throws(PostgresError) in
                try db.send(try changeAttempts(user, durable: true, body, db, deadline))
            }
            return (db, deadline)
        }
        return BackgroundDiskWrite { [self] () throws(AuthenticationError) in
            do throws(PostgresError) {
                try rollingBack(db, deadline) { () throws(PostgresError) in _ = try db.answers(until: deadline) }
                giveBack(db, lost: false)
                noteAvailability(nil)
            } catch {
                giveBack(db, lost: error.connectionLost)
                let failure = unavailable("cannot update attempt counters", error)
                if failure.code == .serviceUnavailable { noteAvailability(failure) }
                throw failure
            }
        }
    }

    /// Runs `body`, rolling back the transaction it left open if it throws (unless the connection is gone).
    func rollingBack<T>(_ db: PostgresConnection, _ deadline: Int64, _ body: () throws(PostgresError) -> T)
        throws(PostgresError) -> T
    {
        do { return try body() } catch {
            if !error.connectionLost && db.inTransaction { _ = try? db.query("ROLLBACK", deadline: deadline) }
            throw error
        }
    }

    /// The first round trip of an update of the counters: BEGIN, the account's lock and the read, in one pipeline;
    /// then `body`. Returns the rest to send in one more: the writes (what changed) and COMMIT.
    func changeAttempts(
        _ user: String, durable: Bool, _ body: (inout AttemptBook) -> Void, _ db: PostgresConnection,
        _ deadline: Int64
    ) throws(PostgresError) -> [PostgresConnection.Statement] {
        let begin =
            Self.begin(until: deadline)
            + (durable ? [] : [PostgresConnection.Statement(sql: "SET LOCAL synchronous_commit = off")])
        let sent = MonotonicClock.milliseconds()
        let read = try db.pipeline(begin + [Self.lockAccount(user), Self.readBook(user)], deadline: deadline)
        clock.measured(read[read.count - 2].first?[0].flatMap { Int64($0) }, sent: sent)
        let before = Self.book(from: read[read.count - 1])
        var after = before
        body(&after)
        // A success's row first: the schema lets a host's role lower the account's other counters only after it
        // (keyway_put_attempts).
        let changed = Set(before.states.keys).union(after.states.keys).filter { before[$0] != after[$0] }
        func succeeded(_ factor: FactorKind) -> Bool {
            guard let last = after[factor].lastSuccess else { return false }
            return before[factor].lastSuccess.map { last > $0 } ?? true
        }
        return changed.sorted { succeeded($0) != succeeded($1) ? succeeded($0) : $0.rawValue < $1.rawValue }
            .map { Self.write(after[$0], of: $0, for: user) } + [PostgresConnection.Statement(sql: "COMMIT")]
    }

    /// The statement that stores one factor's counters for `user`, replacing what was there (none left: the row
    /// goes), by the schema's rules for a host (keyway_put_attempts).
    static func write(_ state: AttemptState, of factor: FactorKind, for user: String)
        -> PostgresConnection.Statement
    {
        PostgresConnection.Statement(
            sql: "SELECT keyway_put_attempts($1, $2, $3, $4, $5, $6)",
            parameters: [
                user, factor.rawValue, String(state.consecutiveFailures),
                state.lastFailure.map { String($0.milliseconds) },
                PostgresConnection.bytea(SQLiteStore.encode(state.recentMismatches)),
                state.lastSuccess.map { String($0.milliseconds) },
            ])
    }

    public func resetAttempts(user: String, factor: FactorKind?, by change: Attribution) throws(AuthenticationError) {
        try run("cannot reset attempt counters") { db, deadline throws(PostgresError) in
            try transaction(db, deadline) { () throws(PostgresError) in
                try lockAccount(db, user, deadline)
                // Counters are cleared; when each factor last succeeded is kept (as the SQLite store does).
                // A factor's remote counters (AttemptBook.Channel) with its own.
                let which = factor == nil ? "" : " AND factor IN ($2, $3)"
                let arguments: [String?] =
                    [user] + (factor.map { [$0.rawValue, AttemptBook.remoteKey($0).rawValue] } ?? [])
                try db.query(
                    "DELETE FROM attempts WHERE account = $1\(which) AND last_success IS NULL", arguments,
                    deadline: deadline)
                try db.query(
                    "UPDATE attempts SET failures = 0, last_failure = NULL, recent_mismatches = '\\x' "
                        + "WHERE account = $1\(which)", arguments, deadline: deadline)
                try audit(
                    db, AuditEntry(at: change.at, actor: change.actor, user: user, action: .reset, factor: factor),
                    deadline)
            }
        }
    }

    // MARK: Administration

    @discardableResult
    public func pruneCounters(ofUnenrolledKeeping limit: Int) throws(AuthenticationError) -> Int {
        try run("cannot prune attempt counters") { db, deadline throws(PostgresError) in
            try transaction(db, deadline) { () throws(PostgresError) in
                let rows = try db.query(
                    "SELECT keyway_prune_counters($1, $2)", [String(AttemptState.deciding), String(max(limit, 0))],
                    deadline: deadline)
                return rows.first?[0].flatMap { Int($0) } ?? 0
            }
        }
    }

    public func failingAccounts(atLeast least: Int, limit: Int) throws(AuthenticationError) -> [String] {
        try run("cannot read attempt counters") { db, deadline throws(PostgresError) in
            try db.query(
                "SELECT keyway_failing_accounts($1, $2)", [String(least), String(max(limit, 0))], deadline: deadline
            ).compactMap { $0.first ?? nil }
        }
    }

    @discardableResult
    public func pruneAudit(keeping limit: Int, routinePerHost: Int) throws(AuthenticationError) -> Int {
        // A host's role deletes no audit row: in a fleet the trail is kept in bounds by an administrator's role
        // (keywayd(8), FLEETS).
        try run("cannot prune the audit trail") { db, deadline throws(PostgresError) in
            guard privileged.load(ordering: .relaxed) else { return 0 }  // as the connection's check found
            return try transaction(db, deadline) { () throws(PostgresError) in
                // Store.pruneAudit: an account's routine rows beyond its latest few, then routine rows first.
                let routine = AuditEntry.Action.set.rawValue
                let perAccount = try db.query(
                    "WITH gone AS (DELETE FROM audit WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
                        + "(PARTITION BY account ORDER BY id DESC) AS n FROM audit WHERE action = $1) AS ranked "
                        + "WHERE n > $2) RETURNING 1) SELECT count(*) FROM gone",
                    [routine, String(AuditEntry.routineRowsPerAccount)], deadline: deadline)
                let perHost = try db.query(
                    "WITH gone AS (DELETE FROM audit WHERE id IN (SELECT id FROM (SELECT id, row_number() OVER "
                        + "(PARTITION BY host ORDER BY id DESC) AS n FROM audit WHERE action = $1) AS ranked "
                        + "WHERE n > $2) RETURNING 1) SELECT count(*) FROM gone",
                    [routine, String(max(routinePerHost, 0))], deadline: deadline)
                let overall = try db.query(
                    "WITH gone AS (DELETE FROM audit WHERE id IN (SELECT id FROM audit ORDER BY action = $1 DESC, id "
                        + "LIMIT greatest((SELECT count(*) FROM audit) - $2, 0)) RETURNING 1) SELECT count(*) FROM gone",
                    [routine, String(max(limit, 0))], deadline: deadline)
                return [perAccount, perHost, overall].reduce(0) { $0 + ($1.first?[0].flatMap { Int($0) } ?? 0) }
            }
        }
    }

    public func users() throws(AuthenticationError) -> [String] {
        try run("cannot list users") { db, deadline throws(PostgresError) in
            try db.query(
                "SELECT account FROM enrollments UNION SELECT account FROM attempts "
                    + "UNION SELECT account FROM preferences ORDER BY 1", deadline: deadline
            ).compactMap { $0.first ?? nil }
        }
    }

    public func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry] {
        try run("cannot read the audit trail") { db, deadline throws(PostgresError) in
            let columns = "SELECT at, actor, account, action, factor, detail, host, role FROM audit"
            let rows: [[String?]]
            if let user {
                rows = try db.query(columns + " WHERE account = $1 ORDER BY id", [user], deadline: deadline)
            } else {
                rows = try db.query(columns + " ORDER BY id", deadline: deadline)
            }
            return rows.compactMap { row in
                guard let at = row[0].flatMap({ Int64($0) }), let actor = row[1], let user = row[2],
                    let action = row[3].flatMap(AuditEntry.Action.init(rawValue:))
                else { return nil }
                return AuditEntry(
                    at: Timestamp(milliseconds: at), actor: actor, user: user, action: action,
                    factor: row[4].map(FactorKind.init(rawValue:)), detail: row[5], host: row[6], role: row[7])
            }
        }
    }

    // MARK: Preferences

    public func preferences(user: String) throws(AuthenticationError) -> [String: String] {
        try run("cannot read preferences") { db, deadline throws(PostgresError) in
            Self.preferences(from: try db.query(Self.readPreferences(user), deadline: deadline))
        }
    }

    static func readPreferences(_ user: String) -> PostgresConnection.Statement {
        PostgresConnection.Statement(sql: "SELECT key, value FROM keyway_preference_rows($1)", parameters: [user])
    }

    static func preferences(from rows: [[String?]]) -> [String: String] {
        var result: [String: String] = [:]
        for row in rows {
            if let key = row[0], let value = row[1] { result[key] = value }
        }
        return result
    }

    /// The reads in one round trip (a pipeline).
    public func account(user: String) throws(AuthenticationError) -> AccountRecord {
        try run("cannot read the account") { db, deadline throws(PostgresError) in
            let rows = try db.pipeline(
                Self.readEnrollments(user) + [Self.readBook(user), Self.readPreferences(user)], deadline: deadline)
            return AccountRecord(
                enrollments: try joined(rows[0], rows[1]), attempts: Self.book(from: rows[2]),
                preferences: Self.preferences(from: rows[3]))
        }
    }

    public func setPreference(user: String, key: String, value: String?, by change: Attribution)
        throws(AuthenticationError)
    {
        try run("cannot store the preference") { db, deadline throws(PostgresError) in
            try transaction(db, deadline) { () throws(PostgresError) in
                try lockAccount(db, user, deadline)
                let stored =
                    try db.query(
                        "SELECT value FROM preferences WHERE account = $1 AND key = $2", [user, key], deadline: deadline
                    ).first?[0] ?? nil
                if stored == value { return }  // nothing changes: nothing is written
                if let value {
                    try db.query(
                        "INSERT INTO preferences (account, key, value) VALUES ($1, $2, $3) "
                            + "ON CONFLICT (account, key) DO UPDATE SET value = excluded.value", [user, key, value],
                        deadline: deadline)
                } else {
                    try db.query(
                        "DELETE FROM preferences WHERE account = $1 AND key = $2", [user, key], deadline: deadline)
                }
                try audit(
                    db,
                    AuditEntry(
                        at: change.at, actor: change.actor, user: user, action: .set,
                        factor: UserSetting.factor(of: key), detail: "\(key)=\(value ?? "default")"), deadline)
            }
        }
    }

    // MARK: Migration and copying

    /// Creates or upgrades the schema (as the database's owner), the SQL of the factors checked inside the database
    /// (`parts`: `Factors.database`, TOTP's) composed into its migrations, splits the records kept whole before migration 5 by
    /// `Options.spendable` (`splitWholeRecords`), then grants each host's role in `roles` what a host
    /// needs and no table, and each of `writers` the tables' rows as well (self-service on that host, or an
    /// administrator's role). Refuses a schema newer than this build's. Returns the version found before.
    public func migrate(granting roles: [String], writers: [String] = [], parts: [DatabaseSchema])
        throws(AuthenticationError) -> Int
    {
        for role in roles + writers {
            guard let first = role.utf8.first, first >= UInt8(ascii: "a") && first <= UInt8(ascii: "z") || first == 95,
                role.utf8.allSatisfy({ ($0 >= 97 && $0 <= 122) || ($0 >= 48 && $0 <= 57) || $0 == 95 }),
                role.utf8.count <= 63
            else {
                throw Self.refuse(options.uri, "the role name '\(role)' must be lower-case letters, digits and _")
            }
        }
        let deadline = MonotonicClock.milliseconds() + max(Self.milliseconds(options.timeout), 30_000)
        let db: PostgresConnection
        do throws(PostgresError) {
            db = try PostgresConnection.connect(parameters, deadline: deadline)
        } catch {
            throw unavailable("cannot connect", error)
        }
        do throws(PostgresError) {
            return try transaction(db, deadline) { () throws(PostgresError) in
                try db.query(PostgresSchema.migrationLock, deadline: deadline)
                try db.query(
                    "CREATE TABLE IF NOT EXISTS keyway_schema (version integer NOT NULL, "
                        + "one boolean PRIMARY KEY DEFAULT true CHECK (one))", deadline: deadline)
                try db.query(
                    "INSERT INTO keyway_schema (version) VALUES (0) ON CONFLICT DO NOTHING", deadline: deadline)
                let found =
                    try db.query("SELECT version FROM keyway_schema", deadline: deadline)
                    .first?[0].flatMap { Int($0) } ?? 0
                guard found <= PostgresSchema.currentVersion else {
                    throw PostgresError(
                        state: "KW001",
                        "it was written by a newer Keyway (schema version \(found); this version knows up to "
                            + "\(PostgresSchema.currentVersion)); upgrade Keyway. Nothing was changed.")
                }
                // Functions name the schema they run in (their search_path): the one the tables are made in.
                let schema =
                    try db.query("SELECT quote_ident(current_schema())", deadline: deadline).first?[0] ?? nil
                let migrations = PostgresSchema.migrations(with: parts)
                for index in found..<PostgresSchema.currentVersion {
                    try db.query(migrations[index].replacing("@schema", with: schema ?? "public"), deadline: deadline)
                }
                try db.query(
                    "UPDATE keyway_schema SET version = \(PostgresSchema.currentVersion)", deadline: deadline)
                _ = try splitWholeRecords(db, deadline)
                for role in roles {
                    try db.query(PostgresSchema.grants(to: "\"\(role)\"", .host, parts: parts), deadline: deadline)
                }
                for role in writers {
                    try db.query(PostgresSchema.grants(to: "\"\(role)\"", .writer, parts: parts), deadline: deadline)
                }
                return found
            }
        } catch {
            throw unavailable("cannot migrate", error)
        }
    }

    /// Copies everything `source` holds into this store, which must be empty, in one transaction: enrollments,
    /// counters, preferences and the audit trail as they are (no new audit rows). All or nothing.
    public func load(_ contents: StoreContents) throws(AuthenticationError) {
        try run("cannot copy into the store") { db, deadline throws(PostgresError) in
            try transaction(db, deadline) { () throws(PostgresError) in
                let present =
                    try db.query(
                        "SELECT (SELECT count(*) FROM enrollments) + (SELECT count(*) FROM attempts) "
                            + "+ (SELECT count(*) FROM preferences)", deadline: deadline
                    ).first?[0].flatMap { Int($0) } ?? 0
                guard present == 0 else {
                    throw PostgresError(state: "KW002", "the target store is not empty; nothing was copied")
                }
                try insert(contents, into: db, deadline: deadline)
            }
        }
    }

    func insert(_ contents: StoreContents, into db: PostgresConnection, deadline: Int64) throws(PostgresError) {
        for enrollment in contents.enrollments {
            let parts: SpendableParts
            do throws(AuthenticationError) {
                parts = try split(enrollment)
            } catch {
                throw PostgresError(state: "KW003", error.reason)
            }
            try db.query(
                "INSERT INTO enrollments (account, factor, payload, changed_at, changed_by) VALUES ($1, $2, $3, $4, $5)",
                [
                    enrollment.user, enrollment.factor.rawValue, PostgresConnection.bytea(parts.fixed),
                    String(enrollment.changedAt.milliseconds), enrollment.changedBy,
                ], deadline: deadline)
            try writeSpendables(parts.items, of: enrollment.user, enrollment.factor, db, deadline)
        }
        for (user, book) in contents.attempts {
            for (factor, state) in book.states {
                try db.query(Self.write(state, of: factor, for: user), deadline: deadline)
            }
        }
        for (user, preferences) in contents.preferences {
            for (key, value) in preferences {
                try db.query(
                    "INSERT INTO preferences (account, key, value) VALUES ($1, $2, $3)", [user, key, value],
                    deadline: deadline)
            }
        }
        for entry in contents.audit { try audit(db, entry, deadline) }
    }

    /// What a failover would do to this host's counts, for `keyway health`: whether the server keywayd uses is a
    /// primary, and the synchronous standbys it waits for (empty: none, so a failover may lose the latest counts,
    /// keywayd(8), FLEETS).
    public func failoverState() -> Result<(primary: Bool, synchronous: String), AuthenticationError> {
        Result { () throws(AuthenticationError) in
            try run("cannot reach the database") { db, deadline throws(PostgresError) in
                let row = try db.query(
                    "SELECT NOT pg_is_in_recovery(), current_setting('synchronous_standby_names')", deadline: deadline
                ).first
                return (row?[0] == "t", (row?[1] ?? nil) ?? "")
            }
        }
    }

    /// The advisory locks other sessions of this database hold now (an account's lock, `lockAccount`): the holder's
    /// process on the server, its role and the lock's key. pg_locks and the roles of pg_stat_activity are open to
    /// every role, so a host's keywayd can see who holds what, though not since when (`Health` remembers).
    public func heldLocks() -> Result<[(pid: String, role: String, key: String)], AuthenticationError> {
        Result { () throws(AuthenticationError) in
            try run("cannot read the database's locks") { db, deadline throws(PostgresError) in
                try db.query(
                    "SELECT l.pid, coalesce(a.usename, '?'), l.classid || ':' || l.objid FROM pg_locks l "
                        + "LEFT JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted "
                        + "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                        + "AND l.pid <> pg_backend_pid() ORDER BY l.pid", deadline: deadline
                ).compactMap { row in
                    guard row.count == 3, let pid = row[0], let role = row[1], let key = row[2] else { return nil }
                    return (pid, role, key)
                }
            }
        }
    }

    /// Connects (or takes a pooled connection) and says whether the database can be used now: which server answered,
    /// on which timeline, or why none did. keywayd logs it at start.
    public func probe() -> Result<String, AuthenticationError> {
        Result { () throws(AuthenticationError) in
            try run("cannot reach the database") { db, deadline throws(PostgresError) in
                try db.query("SELECT 1", deadline: deadline)
                let timeline = history.withLock { $0?.timeline }.map { ", timeline \($0)" } ?? ""
                return "the database answers: \(db.server)\(timeline), schema version \(PostgresSchema.currentVersion)"
            }
        }
    }
}
