import CKeywayLibc
import Glibc
import KeywayCore
import KeywayPlatform
import Synchronization

/// How a `PostgresStore` reaches its database: the timeline it keeps, its password file, the connections it pools
/// and reuses, the failover check of each new one, and the transactions every call runs in (docs/ARCHITECTURE.md
/// §17). The store's calls themselves are in PostgresStore.swift.
extension PostgresStore {
    /// The system identifier and timeline kept in `file` ("SYSTEM TIMELINE"), nil when there is no file yet. The file
    /// must be the current user's and writable by no one else: whoever could write it could make this host accept
    /// a former primary.
    static func readTimeline(_ file: String, uri: String) throws(AuthenticationError) -> (
        system: String, timeline: Int64
    )? {
        let rule = TrustedFile.mine(.regularFile)
        let text: [UInt8]
        switch rule.read(file, limit: 128) {
        case .missing: return nil
        case .read(let bytes): text = bytes
        case .refused(let reason):
            throw refuse(
                uri,
                "the timeline file \(file) must be a regular file owned by uid \(geteuid()) and writable by no one "
                    + "else: \(reason)")
        }
        let words = String(decoding: text, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard words.count == 2, words[0].allSatisfy(\.isNumber), let timeline = Int64(words[1]), timeline > 0 else {
            throw refuse(
                uri,
                "the timeline file \(file) is not 'SYSTEM TIMELINE' as keywayd writes it; remove it only if no "
                    + "former primary of the database can come back (keywayd(8), FLEETS, \"Failover\")")
        }
        return (String(words[0]), timeline)
    }

    /// Keeps the database's system identifier and `timeline` in `Options.timelineFile`, synced, before the server is
    /// used; a failure to keep it fails the connection, since a later process could not refuse a former primary.
    func keepTimeline(system: String, _ timeline: Int64) throws(PostgresError) {
        guard let file = options.timelineFile else { return }
        let slash = file.lastIndex(of: "/")
        let directory = slash.map { $0 == file.startIndex ? "/" : String(file[..<$0]) } ?? "."
        let name = slash.map { String(file[file.index(after: $0)...]) } ?? file
        let dir = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        defer { if dir >= 0 { close(dir) } }
        guard dir >= 0,
            KeptFiles.replace(name, in: dir, with: Array("\(system) \(timeline)\n".utf8), mode: 0o600, durable: true)
        else {
            throw PostgresError(
                state: "KW005", "cannot keep timeline \(timeline) in \(file) (errno \(errno)); the server is not used")
        }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    static func refuse(_ uri: String, _ why: String) -> AuthenticationError {
        AuthenticationError(.storeFailure, "Keyway store \(uri): \(why)")
    }

    /// The password file, when there is one, must be the current user's alone: libpq would merely warn.
    static func checkPassfile(_ path: String, uri: String) throws(AuthenticationError) {
        let rule = TrustedFile.mine(.regularFile, privateToo: true)
        if case .failure(let problem) = rule.check(path: path) {
            throw refuse(
                uri,
                "the password file \(path) must be a regular file owned by uid \(geteuid()) with mode 0600: "
                    + rule.words(problem))
        }
    }

    /// libpq reads PGPASSWORD, PGSSLMODE and the rest from the environment for anything not given: the store's
    /// settings come from its URI and its root-only files alone, so they are removed from this process.
    static func forgetEnvironment() {
        var names: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            if text.hasPrefix("PG"), let equals = text.firstIndex(of: "=") { names.append(String(text[..<equals])) }
            index += 1
        }
        for name in names { unsetenv(name) }
    }

    func unavailable(_ what: String, _ error: PostgresError) -> AuthenticationError {
        // A budget the database keeps (PostgresSchema, migration 4) spent: this factor waits, nothing is wrong.
        if error.state == PostgresError.budgetSpent {
            return AuthenticationError(.factorNotAvailable, "Keyway store \(options.uri): \(error.description)")
        }
        return AuthenticationError(
            error.databaseAway ? .serviceUnavailable : .storeFailure,
            "Keyway store \(options.uri): \(what): "
                + (error.databaseAway ? "the database is unavailable: " : "") + error.description
                + (error.state == "42501"
                    ? "; this host's role may not do that: in a fleet, enrollments, resets, switches and the audit "
                        + "trail are changed with an administrator's role (keyway --store URI; keywayd(8), FLEETS)"
                    : ""))
    }

    /// A new connection to a server this host may use (`check`). When the server libpq chose is refused as a former
    /// primary, the URI's other servers are tried in its order, within the same deadline.
    func connect(deadline: Int64) throws(PostgresError) -> PostgresConnection {
        var passed: Set<String> = []
        var elsewhere: [(String, String)] = []
        var refusal: PostgresError? = nil
        while true {
            let connection: PostgresConnection
            do throws(PostgresError) {
                connection = try PostgresConnection.connect(parameters + elsewhere, deadline: deadline)
            } catch {
                guard let refusal else { throw error }
                throw PostgresError(
                    state: refusal.state, refusal.message + "; no other server answered: " + error.message,
                    connectionLost: true)
            }
            do throws(PostgresError) {
                try check(connection, deadline: deadline)
                return connection
            } catch  where error.state == PostgresError.formerPrimary {
                refusal = error
                passed.insert(connection.server)
                let rest = servers.filter { !passed.contains($0.host + ":" + $0.port) }
                guard !rest.isEmpty else { throw error }
                elsewhere = [
                    ("host", rest.map { $0.host }.joined(separator: ",")),
                    ("port", rest.map { $0.port }.joined(separator: ",")),
                ]
            }
        }
    }

    /// Checks a new connection's server: the schema's version, and that it is a primary of the database this host
    /// has used on a timeline no older than one it has used (a failover promotes a standby to a new timeline; the
    /// old primary, started again, still answers on the old one, without what the new one has counted since). Reads
    /// the database's clock too. The timeline is the one in the name of the WAL file being written.
    func check(_ connection: PostgresConnection, deadline: Int64) throws(PostgresError) {
        let sent = MonotonicClock.milliseconds()
        let rows: [[String?]]
        do {
            rows = try connection.query(
                "SELECT version, (extract(epoch FROM clock_timestamp()) * 1000)::bigint, "
                    + "(SELECT system_identifier FROM pg_control_system())::text, CASE WHEN pg_is_in_recovery() "
                    + "THEN NULL ELSE ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint "
                    + "END, has_table_privilege('enrollments', 'UPDATE') FROM keyway_schema", deadline: deadline)
        } catch  where error.state == "42P01" {
            throw PostgresError(
                state: error.state,
                "the database has no Keyway schema; run keyway store migrate as the database's owner "
                    + "(keyway(8), STORE)")
        }
        clock.measured(rows.first?[1].flatMap { Int64($0) }, sent: sent)
        privileged.store(rows.first?[4] == "t", ordering: .relaxed)
        let version = rows.first?[0].flatMap { Int($0) } ?? 0
        guard version == PostgresSchema.currentVersion else {
            throw PostgresError(
                state: "KW001",
                version > PostgresSchema.currentVersion
                    ? "it was written by a newer Keyway (schema version \(version); this version knows up to "
                        + "\(PostgresSchema.currentVersion)); upgrade Keyway. Nothing was changed."
                    : "its schema is version \(version) and this Keyway needs \(PostgresSchema.currentVersion); run "
                        + "keyway store migrate as the database's owner")
        }
        guard let timeline = rows.first?[3].flatMap({ Int64($0) }), let system = rows.first?[2] ?? nil else {
            throw PostgresError(
                state: "25006",
                "the server \(connection.server) is a standby (read-only); list the servers in the URI with "
                    + "target_session_attrs=read-write (keywayd(8), FLEETS)", connectionLost: true)
        }
        let (newest, changed) = history.withLock { known -> (Int64?, Bool) in
            if let known, known.system == system, known.timeline > timeline { return (known.timeline, false) }
            defer { known = (system, timeline) }
            return (nil, known?.system != system || known?.timeline != timeline)
        }
        if changed { try keepTimeline(system: system, timeline) }
        if let newest {
            throw PostgresError(
                state: PostgresError.formerPrimary,
                "the server \(connection.server) is on timeline \(timeline), older than timeline \(newest) this host "
                    + "has used: a former primary, not used (keywayd(8), FLEETS)", connectionLost: true)
        }
    }

    /// Lends a connection to `body`, within the request timeout. A connection that died while idle (the database
    /// restarted) fails in its first round trip, which only reads or begins a transaction, so that one is retried
    /// once on a fresh connection: nothing was done. A connection lost later is closed and the call fails as
    /// unavailable.
    func run<T>(_ what: String, _ body: (PostgresConnection, Int64) throws(PostgresError) -> T)
        throws(AuthenticationError) -> T
    {
        do {
            let value = try attempt(what, body)
            noteAvailability(nil)
            return value
        } catch {
            if error.code == .serviceUnavailable { noteAvailability(error) }
            throw error
        }
    }

    func attempt<T>(_ what: String, _ body: (PostgresConnection, Int64) throws(PostgresError) -> T)
        throws(AuthenticationError) -> T
    {
        let deadline = MonotonicClock.milliseconds() + Self.milliseconds(options.timeout)
        let slot: Slots
        if ServedCaller.root && rootSlot.acquire(until: 0) {
            slot = rootSlot
        } else if slots.acquire(until: deadline) {
            slot = slots
        } else {
            throw AuthenticationError(
                .serviceUnavailable,
                "Keyway store \(options.uri): \(what): all \(options.connections) connections stayed busy")
        }
        var handedOver = false  // a pipeline's answers left to another thread, with the slot (`giveBack`)
        defer { if !handedOver { slot.release() } }
        var reused = takeIdle()
        while true {
            let connection: PostgresConnection
            do throws(PostgresError) {
                if let reused { connection = reused } else { connection = try connect(deadline: deadline) }
            } catch {
                throw unavailable(what, error)
            }
            connection.roundTrips = 0
            do throws(PostgresError) {
                let value = try body(connection, deadline)
                handedOver = connection.awaitsAnswers
                if handedOver { connection.slot = slot } else { pool(connection, lost: false) }
                return value
            } catch {
                if error.connectionLost, reused != nil, connection.roundTrips <= 1 {
                    reused = nil
                    continue
                }
                pool(connection, lost: error.connectionLost)
                throw unavailable(what, error)
            }
        }
    }

    /// Keeps a connection for the next request when it can be used again (not lost, no transaction open); a
    /// connection not kept is closed when its last reference goes.
    func pool(_ connection: PostgresConnection, lost: Bool) {
        guard !lost && !connection.inTransaction else { return }
        let now = MonotonicClock.milliseconds()
        idle.withLock { $0.append((connection, now)) }
    }

    /// The connection given back last, if any, after closing those unused for `Options.idle` but the latest.
    func takeIdle() -> PostgresConnection? {
        let oldest = MonotonicClock.milliseconds() - Self.milliseconds(options.idle)
        let (taken, stale) = idle.withLock { pool -> (PostgresConnection?, [PostgresConnection]) in
            let stale = pool.dropLast().prefix { $0.since < oldest }.map { $0.connection }
            pool.removeFirst(stale.count)
            return (pool.popLast()?.connection, stale)
        }
        _ = stale  // closed here, outside the lock, as the last references go
        return taken
    }

    /// Gives back a connection whose pipeline's answers were left to another thread
    /// (`PostgresConnection.awaitsAnswers`), once that thread has read them (within the deadline of the request
    /// that sent it): pooled as `attempt` pools, and its slot freed.
    func giveBack(_ connection: PostgresConnection, lost: Bool) {
        let slot = connection.slot
        connection.slot = nil
        pool(connection, lost: lost)
        slot?.release()
    }

    /// Runs `body` in a transaction: committed on return, rolled back on a throw.
    func transaction<T>(
        _ db: PostgresConnection, _ deadline: Int64, _ body: () throws(PostgresError) -> T
    ) throws(PostgresError) -> T {
        try rollingBack(db, deadline) { () throws(PostgresError) in
            try db.pipeline(Self.begin(until: deadline), deadline: deadline)
            let value = try body()
            try db.query("COMMIT", deadline: deadline)
            return value
        }
    }

    /// BEGIN, and the server's own limits for the transaction (SET LOCAL, so a pooler's next client never inherits
    /// them): a statement or a lock wait ends when the request's deadline passes, and a transaction left idle (a
    /// host stopped while it holds an account's lock) is ended by the server soon after.
    static func begin(until deadline: Int64) -> [PostgresConnection.Statement] {
        let left = max(100, deadline - MonotonicClock.milliseconds())
        return [
            PostgresConnection.Statement(sql: "BEGIN"),
            PostgresConnection.Statement(
                sql: "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true), "
                    + "set_config('idle_in_transaction_session_timeout', $2, true)",
                parameters: [String(left), String(left * 2 + 1000)]),
        ]
    }

    /// `statement` in a transaction of its own with the server's limits (`begin`), sent as one pipeline: one round
    /// trip. Its rows.
    func inOneTrip(_ db: PostgresConnection, _ deadline: Int64, _ statement: PostgresConnection.Statement)
        throws(PostgresError) -> [[String?]]
    {
        try rollingBack(db, deadline) { () throws(PostgresError) in
            let answers = try db.pipeline(
                Self.begin(until: deadline) + [statement, PostgresConnection.Statement(sql: "COMMIT")],
                deadline: deadline)
            return answers[answers.count - 2]
        }
    }

    /// Takes the account's lock until the transaction ends and reads the database's clock.
    func lockAccount(_ db: PostgresConnection, _ user: String, _ deadline: Int64) throws(PostgresError) {
        let sent = MonotonicClock.milliseconds()
        let rows = try db.query(Self.lockAccount(user), deadline: deadline)
        clock.measured(rows.first?[0].flatMap { Int64($0) }, sent: sent)
    }

    /// The statement that takes the account's lock and then reads the database's clock (one row, one column).
    static func lockAccount(_ user: String) -> PostgresConnection.Statement {
        PostgresConnection.Statement(
            sql: "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint "
                + "FROM (SELECT pg_advisory_xact_lock(hashtextextended($1, 0))) AS locked", parameters: [user])
    }
}
