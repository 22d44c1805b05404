import Foundation
import KeywayCore
import KeywayFactors
import KeywayPlatform
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayStore

/// A cluster of the test's own with Keyway's schema, and a store on it as keywayd's role (keyway_host) sees it,
/// granted the rows too (self-service), so the store's whole contract can be run on it; a host's least privilege is
/// PostgresLeastPrivilegeTests'.
struct Fleet {
    let cluster: PostgresCluster
    let store: PostgresStore

    init(port: Int? = nil, host: String = "host-a") throws {
        cluster = try PostgresCluster(port: port)
        do {
            let owner = try PostgresStore(.init(uri: cluster.ownerURI, passfile: cluster.passfile))
            #expect(try owner.migrate(granting: [], writers: ["keyway_host"], parts: Fleet.parts) == 0)
            store = try Self.open(cluster.uri, cluster, host: host)
        } catch {
            cluster.stop()
            throw error
        }
    }

    init(cluster: PostgresCluster, store: PostgresStore) {
        self.cluster = cluster
        self.store = store
    }

    /// The factors' parts of the schema, as `keyway store migrate` composes them.
    static let parts = Factors.database

    static func open(_ uri: String, _ cluster: PostgresCluster, host: String) throws(AuthenticationError)
        -> PostgresStore
    {
        var options = PostgresStore.Options(uri: uri, host: host, passfile: cluster.passfile)
        options.spendable = Factors.spendable
        return try PostgresStore(options)
    }

    /// psql as `role` (its password from the cluster's pgpass), returning the status and what psql said.
    func psql(as role: String, _ statement: String) -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [
            "-c", "PGPASSFILE=\(cluster.passfile) psql -X -At -v ON_ERROR_STOP=1 \"$0\" -c \"$1\" 2>&1",
            "postgresql://\(role)@/keyway?host=\(cluster.directory)", statement,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        try? process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}

@Suite("PostgreSQL store: a fleet's shared state", .serialized)
struct PostgresStoreTests {
    @Test("passes the store conformance checks, as keywayd's role")
    func conformance() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        #expect(StoreConformance.check(fleet.store) == [])
        let trail = try fleet.store.auditTrail(user: "store-conformance-alice")
        #expect(trail.allSatisfy { $0.host == "host-a" }, "every change names its host: \(trail)")
    }

    @Test("48 processes guessing at once on one database: at most 5 slow-hash checks, the count exact")
    func parallelGuesses() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let scratch = Scratch()
        defer { scratch.remove() }
        let environment = "KEYWAY_PROBE_PASSFILE=\(fleet.cluster.passfile)"
        #expect(
            try Probe.run(["enroll", fleet.cluster.uri, "alice", "739155"], shell: environment) == ["committed alice"])
        let attack = try GuessAttack(
            store: fleet.cluster.uri, processes: 48, in: scratch.directory, environment: environment)
        // What matters, whatever the machine's load: no more slow hashes than the limit, and each one counted. (On a
        // loaded machine a guess may be hashed and then find the database too slow to settle: it is answered
        // "unavailable", still counted, so the answered mismatches alone can be fewer than the hashes.)
        let counted = try fleet.store.attempts(user: "alice")[.passcode].consecutiveFailures
        #expect(attack.kdfRuns >= 1 && attack.kdfRuns <= 5, "\(attack.kdfRuns) slow hashes: \(attack.outcomes)")
        #expect(counted >= attack.kdfRuns && counted <= 5, "\(counted) counted, \(attack.kdfRuns) hashed")
        #expect(attack.verified <= attack.kdfRuns, "\(attack.outcomes)")
        #expect(!attack.outcomes.contains("success"), "\(attack.outcomes)")
        #expect(attack.refused >= 1, "the limit refused the rest: \(attack.outcomes)")
    }

    @Test("writers SIGKILLed at random and the server crashed once: every reported commit present, no count lower")
    func killedWritersAndACrash() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let environment = "KEYWAY_PROBE_PASSFILE=\(fleet.cluster.passfile)"
        var committed: Set<String> = []
        var lastCount: [String: Int] = [:]
        var operations = 0
        var generator = SystemRandomNumberGenerator()
        var round = 0
        var crashed = false
        while (operations < 200 || round < 20) && round < 300 {
            defer { round += 1 }
            let writers = try (0..<3).map { writer in
                try Probe(["churn", fleet.cluster.uri, "r\(round)w\(writer)", "400"], shell: environment)
            }
            usleep(UInt32.random(in: 20_000...120_000, using: &generator))
            if round == 10 {  // the server itself goes down mid-write, as a crash would, and comes back
                try fleet.cluster.halt()
                try fleet.cluster.resume()
                crashed = true
            }
            for writer in writers where writer.process.isRunning { kill(writer.process.processIdentifier, SIGKILL) }
            for (writer, probe) in writers.enumerated() {
                for line in probe.finish() {
                    let words = line.split(separator: " ")
                    if words.first == "committed", words.count == 2 {
                        committed.insert(String(words[1]))
                        operations += 1
                    }
                    if words.first == "counted", words.count == 3, let count = Int(words[2]) {
                        lastCount["r\(round)w\(writer)"] = count
                        operations += 1
                    }
                }
            }
        }
        #expect(crashed)
        #expect(operations >= 200, "only \(operations) operations were reported")
        for user in committed {
            #expect(
                try fleet.store.enrollment(user: user, factor: .passcode)?.payload == Array("payload of \(user)".utf8))
        }
        for (user, count) in lastCount {
            let stored = try fleet.store.attempts(user: user)[.gesture].consecutiveFailures
            #expect(stored == count || stored == count + 1, "\(user): reported \(count), stored \(stored)")
        }
    }

    @Test("the database away: unavailable within the timeout, then the same store recovers by itself")
    func databaseAway() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let at = Attribution("root", at: Timestamp(seconds: 1_767_225_600))
        try fleet.store.save(
            Enrollment(user: "alice", factor: .passcode, payload: [7], changedAt: at.at, changedBy: "root"))
        try fleet.cluster.halt()
        let started = Date()
        var code: AuthenticationError.Code? = nil
        do { _ = try fleet.store.attempts(user: "alice") } catch { code = error.code }
        #expect(code == .serviceUnavailable)
        #expect(Date().timeIntervalSince(started) < 2, "failing took \(Date().timeIntervalSince(started)) s")
        try fleet.cluster.resume()
        #expect(try fleet.store.enrollment(user: "alice", factor: .passcode)?.payload == [7])
        try fleet.store.updateAttempts(user: "alice") { $0[.passcode].consecutiveFailures = 2 }
        #expect(try fleet.store.attempts(user: "alice")[.passcode].consecutiveFailures == 2)
    }

    @Test("a database that hangs mid-request (SIGSTOP): unavailable within the timeout, nothing counted, then back")
    func databaseHangs() throws {
        let fleet = try Fleet()
        defer {
            try? fleet.cluster.thaw()
            fleet.cluster.stop()
        }
        try fleet.store.updateAttempts(user: "alice") { $0[.passcode].consecutiveFailures = 1 }
        try fleet.cluster.freeze()
        for what in ["a pooled connection", "a new connection"] {
            let started = Date()
            var code: AuthenticationError.Code? = nil
            do { try fleet.store.updateAttempts(user: "alice") { $0[.passcode].consecutiveFailures += 1 } } catch {
                code = error.code
            }
            let took = Date().timeIntervalSince(started)
            #expect(code == .serviceUnavailable, "\(what)")
            #expect(took < 2.5, "\(what): failing took \(took) s (the timeout is 1.5 s)")
        }
        try fleet.cluster.thaw()
        var failures = -1
        for _ in 0..<50 {  // the server finishes what it was sent, then the lost transactions roll back
            if let book = try? fleet.store.attempts(user: "alice") { failures = book[.passcode].consecutiveFailures }
            if failures == 1 { break }
            usleep(100_000)
        }
        #expect(failures == 1, "a reservation that was answered unavailable was kept")
    }

    @Test("migrations: versioned, repeatable, a newer schema refused by keywayd and by migrate, nothing changed")
    func migrations() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let owner = try PostgresStore(.init(uri: fleet.cluster.ownerURI, passfile: fleet.cluster.passfile))
        #expect(
            try owner.migrate(granting: [], writers: ["keyway_host"], parts: Fleet.parts)
                == PostgresSchema.currentVersion)
        try fleet.cluster.sql("UPDATE keyway_schema SET version = 99")
        let newer = try Fleet.open(fleet.cluster.uri, fleet.cluster, host: "host-b")
        #expect(throws: AuthenticationError.self) { try newer.users() }
        do { _ = try newer.users() } catch {
            #expect(error.code == .storeFailure)
            #expect(error.reason.contains("schema version 99"), "\(error.reason)")
        }
        do {
            _ = try owner.migrate(granting: [], parts: Fleet.parts)
            Issue.record("migrate accepted a newer schema")
        } catch {
            #expect(error.reason.contains("newer Keyway"), "\(error.reason)")
        }
        #expect(try fleet.cluster.sql("SELECT version FROM keyway_schema") == "99")
        try fleet.cluster.sql("DROP TABLE keyway_schema")
        do {
            _ = try Fleet.open(fleet.cluster.uri, fleet.cluster, host: "host-c").users()
            Issue.record("a database without the schema was used")
        } catch {
            #expect(error.reason.contains("run keyway store migrate"), "\(error.reason)")
        }
    }

    @Test("keywayd's role has the rows and nothing else: no DDL, no dropping, no schema change")
    func leastPrivilege() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        #expect(fleet.psql(as: "keyway_host", "SELECT count(*) FROM enrollments").0 == 0)
        for statement in [
            "CREATE TABLE intruder (x int)", "DROP TABLE attempts", "ALTER TABLE audit DROP COLUMN host",
            "UPDATE keyway_schema SET version = 0", "TRUNCATE audit",
        ] {
            let (status, output) = fleet.psql(as: "keyway_host", statement)
            #expect(status != 0, "\(statement) was allowed: \(output)")
            #expect(output.contains("permission denied") || output.contains("must be owner"), "\(output)")
        }
    }

    @Test("a host is cut off by its role alone; the others go on")
    func hostCutOff() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let bURI = try fleet.cluster.role("host_b")
        _ = try PostgresStore(.init(uri: fleet.cluster.ownerURI, passfile: fleet.cluster.passfile))
            .migrate(granting: ["host_b"], parts: Fleet.parts)
        let b = try Fleet.open(bURI, fleet.cluster, host: "host-b")
        #expect(try b.attempts(user: "alice") == AttemptBook())
        try fleet.cluster.sql(
            "ALTER ROLE host_b NOLOGIN; SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'host_b'"
        )
        do {
            _ = try b.attempts(user: "alice")
            Issue.record("a cut-off host was served")
        } catch {
            #expect(error.code == .serviceUnavailable, "\(error.reason)")
            #expect(error.reason.contains("not permitted to log in"), "\(error.reason)")
        }
        #expect(try fleet.store.users() == [])
    }

    @Test("no password on the command line, no loose password file, no PG* environment")
    func secretsStayInRootsFile() throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        do {
            _ = try PostgresStore(.init(uri: "postgresql://keyway_host:hunter2@/keyway?host=/tmp"))
            Issue.record("a password in the URI was accepted")
        } catch {
            #expect(error.reason.contains("holds a password"), "\(error.reason)")
            #expect(!error.reason.contains("hunter2"), "the refusal repeats the password: \(error.reason)")
        }
        chmod(cluster.passfile, 0o644)
        do {
            _ = try PostgresStore(.init(uri: cluster.uri, passfile: cluster.passfile))
            Issue.record("a readable password file was accepted")
        } catch {
            #expect(error.reason.contains("mode 0600"), "\(error.reason)")
        }
        chmod(cluster.passfile, 0o600)
        setenv("PGPASSWORD", "from-the-environment", 1)
        _ = try? PostgresStore(.init(uri: cluster.uri, passfile: cluster.passfile))
        #expect(getenv("PGPASSWORD") == nil, "libpq would read PGPASSWORD")
    }

    @Test("the test cluster lets in no other local user, and nobody without a password (owner included)")
    func clusterIsClosed() throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        var info = stat()
        #expect(stat(cluster.directory, &info) == 0)
        #expect(info.st_mode & 0o077 == 0, "the directory others cannot enter: \(String(info.st_mode, radix: 8))")
        /// psql as the system user `user` (group `group`), with no password file, trying the superuser.
        func outsider(_ user: String, _ group: String) -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = [
                "--reuid=\(user)", "--regid=\(group)", "--clear-groups", "--", "/usr/bin/env", "-i",
                "PGPASSFILE=/dev/null", "PGCONNECT_TIMEOUT=5", "psql", "-X", "-At", "-w",
                "postgresql://keyway_owner@/keyway?host=\(cluster.directory)", "-c", "SELECT 1",
            ]
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try? process.run()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        let (nobody, nobodySaid) = outsider("65534", "65534")
        #expect(nobody != 0, "\(nobodySaid)")
        #expect(nobodySaid.contains("Permission denied") || nobodySaid.contains("No such file"), "\(nobodySaid)")
        let (postgres, postgresSaid) = outsider("postgres", "postgres")
        #expect(postgres != 0, "\(postgresSaid)")
        #expect(postgresSaid.contains("password"), "the socket is reached, a password is asked: \(postgresSaid)")
        #expect(try cluster.sql("SELECT 1") == "1", "the owner, with its password, still gets in")
    }

    @Test("copying an SQLite store into PostgreSQL keeps every enrollment, counter, switch and audit row")
    func copyFromSQLite() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let scratch = Scratch()
        defer { scratch.remove() }
        let sqlite = try scratch.open()
        let at = Timestamp(seconds: 1_767_225_600)
        for index in 0..<20 {
            let user = "user-\(index)"
            try sqlite.save(
                Enrollment(
                    user: user, factor: index % 2 == 0 ? .passcode : .gesture, payload: Array("hash \(index)".utf8),
                    changedAt: at, changedBy: "root"))
            try sqlite.updateAttempts(user: user) { book in
                book[.passcode] = AttemptState(
                    consecutiveFailures: index % 6, lastFailure: at, recentMismatches: [[UInt8(index)]],
                    lastSuccess: at.adding(.seconds(-60)))
            }
        }
        try sqlite.setPreference(user: "user-3", key: "gesture.enabled", value: "no", by: Attribution("root", at: at))
        let before = try StoreContents.read(from: sqlite)
        try fleet.store.load(before)
        var after = try StoreContents.read(from: fleet.store)
        #expect(after.audit.allSatisfy { $0.host == "host-a" && $0.role == "keyway_host" })
        for index in after.audit.indices { (after.audit[index].host, after.audit[index].role) = (nil, nil) }
        #expect(after == before)
        do {
            try fleet.store.load(before)
            Issue.record("a second copy into a store that is not empty was accepted")
        } catch {
            #expect(error.reason.contains("not empty"), "\(error.reason)")
        }
    }

    @Test("a pipeline: its statements in order in one round trip; a failure skips the rest and is thrown")
    func pipeline() throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let deadline = MonotonicClock.milliseconds() + 20_000
        let db = try PostgresConnection.connect(
            [("dbname", cluster.ownerURI), ("passfile", cluster.passfile)], deadline: deadline)
        try db.query("CREATE TEMPORARY TABLE seen (n int)", deadline: deadline)
        db.roundTrips = 0
        let rows = try db.pipeline(
            [
                .init(sql: "INSERT INTO seen VALUES ($1)", parameters: ["1"]),
                .init(sql: "SELECT count(*) FROM seen"),
                .init(sql: "SELECT $1::int + 1, $2::text IS NULL", parameters: ["41", nil]),
            ], deadline: deadline)
        #expect(rows == [[], [["1"]], [["42", "t"]]], "each statement sees the ones before it")
        #expect(db.roundTrips == 1)
        do {
            try db.pipeline(
                [
                    .init(sql: "BEGIN"), .init(sql: "INSERT INTO seen VALUES ($1)", parameters: ["2"]),
                    .init(sql: "SELECT $1::int * 2", parameters: ["2"]), .init(sql: "SELECT 1 / 0"),
                    .init(sql: "INSERT INTO seen VALUES (3)"), .init(sql: "SELECT $1::int * 3", parameters: ["3"]),
                    .init(sql: "COMMIT"),
                ], deadline: deadline)
            Issue.record("a division by zero in a pipeline was not thrown")
        } catch {
            #expect(error.state == "22012", "\(error)")
            #expect(!error.connectionLost)
        }
        // The transaction is left aborted for the caller, who rolls it back; the connection takes statements again.
        #expect(db.inTransaction)
        try db.query("ROLLBACK", deadline: deadline)
        #expect(try db.query("SELECT array_agg(n ORDER BY n)::text FROM seen", deadline: deadline) == [["{1}"]])
        // No statement outlives its run in the session (no named prepared statements): a pooler in transaction mode
        // may give the next transaction another server session.
        let again = try db.pipeline(
            [
                .init(sql: "SELECT $1::int * 2", parameters: ["21"]),
                .init(sql: "SELECT $1::int * 3", parameters: ["5"]),
                .init(sql: "SELECT $1::int + 1, $2::text IS NULL", parameters: ["1", "x"]),
            ], deadline: deadline)
        #expect(again == [[["42"]], [["15"]], [["2", "f"]]])
        #expect(try db.query("SELECT count(*) FROM pg_prepared_statements", deadline: deadline) == [["0"]])
    }

    @Test("a reservation's write refused by the database after it was sent: no verdict, nothing counted, pool fine")
    func refusedReservation() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        // The writes and COMMIT of a reservation are sent, and their answer read on another thread while the hash
        // runs: a refusal there must still stop the verdict, roll back, and leave the connection usable.
        let (status, said) = fleet.psql(
            as: "keyway_owner",
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                + "IF NEW.account = 'refused' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$; "
                + "CREATE TRIGGER refuse BEFORE INSERT OR UPDATE ON attempts FOR EACH ROW EXECUTE FUNCTION refuse()")
        #expect(status == 0, "\(said)")
        let gate = AttemptGate(factor: .passcode, store: fleet.store, clock: fleet.store.clock, schedule: .passcode)
        for _ in 0..<3 {  // the same connection again and again: each refusal is rolled back
            // The lock and the read succeed, so the reservation returns; the refusal comes with the commit's answer.
            let reservation = try gate.reserve(for: "refused")
            do {
                try reservation.confirm()
                Issue.record("a reservation the database refused was confirmed")
            } catch {
                #expect(error.code == .storeFailure, "\(error)")
                #expect(error.reason.contains("refused by the test"), "\(error.reason)")
            }
        }
        #expect(try fleet.store.attempts(user: "refused") == AttemptBook(), "nothing counted")
        let reservation = try gate.reserve(for: "alice")
        try reservation.confirm()
        #expect(try fleet.store.attempts(user: "alice")[.passcode].consecutiveFailures == 1)
        try gate.settleSuccess(reservation)
        #expect(try fleet.store.attempts(user: "alice")[.passcode].consecutiveFailures == 0)
    }

    @Test("16 threads reserving through a pool of 2 connections: every one answered, 5 per account, no more")
    func sharedPool() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        // One keywayd's threads share its pool: a reservation hands its connection to the thread that reads the
        // commit, which gives it back; no connection may serve two threads at once, nor a slot be freed twice.
        let store = try PostgresStore(
            .init(uri: fleet.cluster.uri, host: "host-a", connections: 2, passfile: fleet.cluster.passfile))
        let outcomes = Mutex<[String: [String]]>([:])
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            let user = "pool-\(index % 4)"  // four threads on each account
            let gate = AttemptGate(factor: .passcode, store: store, clock: store.clock, schedule: .passcode)
            for _ in 0..<10 {
                var outcome = "reserved"
                do throws(AuthenticationError) {
                    try gate.reserve(for: user).confirm()
                } catch {
                    outcome = error.code == .throttled ? "throttled" : "\(error.code): \(error.reason)"
                }
                outcomes.withLock { $0[user, default: []].append(outcome) }
            }
        }
        for account in 0..<4 {
            let seen = outcomes.withLock { $0["pool-\(account)"] ?? [] }
            #expect(seen.count == 40)
            #expect(seen.filter { $0 == "reserved" }.count == 5, "\(seen)")
            #expect(seen.allSatisfy { $0 == "reserved" || $0 == "throttled" }, "\(seen)")
            #expect(try store.attempts(user: "pool-\(account)")[.passcode].consecutiveFailures == 5)
        }
    }
}
