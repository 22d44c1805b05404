import Foundation
import KeywayCore
import KeywayPlatform
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayStore

/// Starts `body` on `count` threads of their own at once (not a dispatch queue's, whose width is the machine's
/// cores); the group is left when each returns.
private func onThreads(_ count: Int, _ group: DispatchGroup, _ body: @escaping @Sendable (Int) -> Void) {
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
}

/// The error a call threw, or nil.
private func failure(_ body: () throws(AuthenticationError) -> Void) -> AuthenticationError? {
    do throws(AuthenticationError) {
        try body()
        return nil
    } catch {
        return error
    }
}

/// Connections a stranger holds open on a server's socket: each has sent its startup message and sits at the
/// password prompt, so the server has given it a place of its `max_connections` until `authentication_timeout`.
private final class Strangers {
    private(set) var descriptors: [Int32] = []

    init(count: Int, socket: String, role: String) {
        // The startup message: length, protocol 3.0, then user and database, each a C string, and an empty one.
        let body: [UInt8] = [0, 3, 0, 0] + Array("user\0\(role)\0database\0keyway\0\0".utf8)
        let message = withUnsafeBytes(of: UInt32(body.count + 4).bigEndian) { Array($0) } + body
        for _ in 0..<count {
            // A full backlog or a server already full refuses some: those are simply not held.
            guard case .success(let fd) = UnixSocket.connect(to: socket) else { continue }
            let deadline = MonotonicClock.milliseconds() + 2000
            guard case .success = UnixSocket.send(message, to: fd, until: deadline) else {
                close(fd)
                continue
            }
            descriptors.append(fd)
        }
    }

    func leave() {
        for fd in descriptors { close(fd) }
        descriptors = []
    }
}

@Suite("PostgreSQL store: failover, a pooler, a full server", .serialized)
struct PostgresFailoverTests {
    @Test("a synchronous standby's wait cancelled: the COMMIT's warning answers unavailable, the guess still counted")
    func cancelledSynchronousWait() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let standby = try PostgresCluster(standbyOf: fleet.cluster, synchronous: true)
        defer { standby.stop() }
        let store = try PostgresStore(
            .init(uri: fleet.cluster.uri, host: "host-a", timeout: .seconds(20), passfile: fleet.cluster.passfile))
        let gate = AttemptGate(factor: .passcode, store: store, clock: store.clock, schedule: .passcode)
        try gate.reserve(for: "alice").confirm()  // replicated: the standby answers
        try standby.freeze()
        defer { try? standby.thaw() }
        // The reservation's COMMIT now waits for the standby; the wait is cancelled, as statement_timeout or an
        // administrator's pg_cancel_backend cancels it. The server answers COMMIT with a WARNING: committed here,
        // perhaps never on the standby that a failover would promote.
        let reservation = try gate.reserve(for: "alice")
        let waiting = try eventually {
            try fleet.cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'SyncRep'") == "1"
        }
        #expect(waiting, "the commit waits for the standby")
        try fleet.cluster.sql("SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
        let refused = failure { () throws(AuthenticationError) in try reservation.confirm() }
        #expect(refused?.code == .serviceUnavailable, "\(String(describing: refused))")
        #expect(refused?.reason.contains("replicated") == true, "\(refused?.reason ?? "")")
        // Nothing was verified; the primary still counts the guess, so failing closed costs the person one.
        let counted = try fleet.cluster.sql(
            "SELECT failures FROM attempts WHERE account = 'alice' AND factor = 'passcode'")
        #expect(counted == "2", "\(counted)")
        // While the standby stays away, every reservation is unavailable within the timeout, none confirmed.
        let quick = try PostgresStore(
            .init(
                uri: fleet.cluster.uri, host: "host-a", timeout: .milliseconds(800), passfile: fleet.cluster.passfile))
        let quickGate = AttemptGate(factor: .passcode, store: quick, clock: quick.clock, schedule: .passcode)
        let started = Date()
        let away = failure { () throws(AuthenticationError) in try quickGate.reserve(for: "bob").confirm() }
        #expect(away?.code == .serviceUnavailable, "\(String(describing: away))")
        #expect(Date().timeIntervalSince(started) < 5)
        try standby.thaw()
        try gate.reserve(for: "carol").confirm()  // the standby back: commits are acknowledged again
    }

    @Test(
        "failover: the promoted standby used; the old primary started again as a primary never used, after a restart too"
    )
    func formerPrimaryRefused() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let standby = try PostgresCluster(standbyOf: fleet.cluster, synchronous: false)
        defer { standby.stop() }
        let both =
            "postgresql://keyway_host@/keyway?host=\(fleet.cluster.directory),\(standby.directory)&port=5432"
            + "&target_session_attrs=read-write"
        let timeline = fleet.cluster.directory + "/host-a-timeline"
        var options = PostgresStore.Options(uri: both, host: "host-a", passfile: fleet.cluster.passfile)
        options.timelineFile = timeline
        let store = try PostgresStore(options)
        func failures(on cluster: PostgresCluster) throws -> String {
            try cluster.sql("SELECT failures FROM attempts WHERE account = 'alice' AND factor = 'passcode'")
        }
        func count() throws(AuthenticationError) {
            try store.updateAttempts(user: "alice", durable: true) { $0[.passcode].consecutiveFailures += 1 }
        }
        try count()
        #expect(try eventually { try failures(on: standby) == "1" }, "replayed on the standby")
        try fleet.cluster.halt()
        try standby.promote()
        try count()  // the pooled connection is gone: a new one skips the stopped server and finds the promoted one
        #expect(try failures(on: standby) == "2")
        // The old primary comes back as a primary, on the timeline the promotion left, and first in the URI.
        try fleet.cluster.resume()
        #expect(try failures(on: fleet.cluster) == "1")
        try standby.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'keywayd on host-a'")
        try count()  // a new connection: libpq picks the old primary, which this host refuses, then the new one
        #expect(try failures(on: standby) == "3")
        #expect(try failures(on: fleet.cluster) == "1", "nothing went to the former primary")
        #expect(try standby.sql("SELECT substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)") == "00000002")
        // With the promoted server gone as well, the former primary alone is refused as away, saying why.
        try standby.halt()
        let refused = failure { () throws(AuthenticationError) in try count() }
        #expect(refused?.code == .serviceUnavailable, "\(String(describing: refused))")
        #expect(refused?.reason.contains("a former primary") == true, "\(refused?.reason ?? "")")
        #expect(try failures(on: fleet.cluster) == "1")
        // A process started afterwards (keywayd restarted) reads the timeline kept in its file and refuses it too;
        // one without the file could not tell, and would count on the former primary.
        let kept = try String(contentsOfFile: timeline, encoding: .utf8)
        #expect(kept.hasSuffix(" 2\n"), "\(kept)")
        let restarted = try PostgresStore(options)
        let again = failure { () throws(AuthenticationError) in _ = try restarted.attempts(user: "alice") }
        #expect(again?.reason.contains("a former primary") == true, "\(again?.reason ?? "")")
        let forgetful = try PostgresStore(.init(uri: both, host: "host-a", passfile: fleet.cluster.passfile))
        #expect(try forgetful.attempts(user: "alice")[.passcode].consecutiveFailures == 1, "the control: accepted")
        // A kept file another user could write is refused before anything is used.
        chmod(timeline, 0o666)
        #expect(throws: AuthenticationError.self) { try PostgresStore(options) }
        chmod(timeline, 0o600)
        try "garbage".write(toFile: timeline, atomically: true, encoding: .utf8)
        chmod(timeline, 0o600)
        do {
            _ = try PostgresStore(options)
            Issue.record("a malformed timeline file was accepted")
        } catch {
            #expect(error.reason.contains("is not 'SYSTEM TIMELINE'"), "\(error.reason)")
        }
    }

    @Test("a server full of strangers' half-open connections: the open connection goes on, a new one unavailable")
    func fullServer() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        try fleet.store.updateAttempts(user: "alice", durable: true) { $0[.passcode].consecutiveFailures = 1 }
        // A local user with no role at all fills every place (120, of which 3 are the superuser's) and holds them.
        let strangers = Strangers(
            count: 130, socket: fleet.cluster.directory + "/.s.PGSQL.5432", role: "nobody_at_all")
        defer { strangers.leave() }
        let fresh = try Fleet.open(fleet.cluster.uri, fleet.cluster, host: "host-b")
        let full = eventually {
            failure { () throws(AuthenticationError) in _ = try fresh.attempts(user: "alice") } != nil
        }
        #expect(full, "a new connection is refused")
        let refused = failure { () throws(AuthenticationError) in _ = try fresh.attempts(user: "alice") }
        #expect(refused?.code == .serviceUnavailable, "\(String(describing: refused))")
        #expect(refused?.reason.contains("too many clients") == true, "\(refused?.reason ?? "")")
        // The host that was serving keeps its open connection, and goes on counting.
        try fleet.store.updateAttempts(user: "alice", durable: true) { $0[.passcode].consecutiveFailures += 1 }
        #expect(try fleet.store.attempts(user: "alice")[.passcode].consecutiveFailures == 2)
        strangers.leave()
        #expect(
            eventually {
                failure { () throws(AuthenticationError) in _ = try fresh.attempts(user: "alice") } == nil
            })
    }

    @Test("root's requests keep a connection of their own: users' requests holding every other one do not stop root")
    func rootConnection() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let store = try PostgresStore(
            .init(
                uri: fleet.cluster.uri, host: "host-r", timeout: .seconds(2), connections: 2,
                passfile: fleet.cluster.passfile))
        // Users' requests hold both connections (each inside a reservation, as a stalled request would) until let go.
        let letGo = DispatchSemaphore(value: 0)
        let holding = DispatchGroup()
        onThreads(2, holding) { index in
            try? store.updateAttempts(user: "user-\(index)", durable: true) { _ in letGo.wait() }
        }
        defer {
            letGo.signal()
            letGo.signal()
            holding.wait()
        }
        #expect(
            try eventually {
                try fleet.cluster.sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'keywayd on host-r'") == "2"
            })
        let user = failure { () throws(AuthenticationError) in _ = try store.attempts(user: "alice") }
        #expect(user?.code == .serviceUnavailable, "\(String(describing: user))")
        #expect(user?.reason.contains("all 2 connections stayed busy") == true, "\(user?.reason ?? "")")
        let root = ServedCaller.serving(root: true) {
            failure { () throws(AuthenticationError) in _ = try store.attempts(user: "alice") }
        }
        #expect(root == nil, "root's request has a connection of its own: \(String(describing: root))")
    }

    @Test("connections unused for the idle time are closed, all but the last one used")
    func idleConnectionsClosed() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let store = try PostgresStore(
            .init(
                uri: fleet.cluster.uri, host: "host-i", timeout: .seconds(5), connections: 4,
                idle: .milliseconds(300), passfile: fleet.cluster.passfile))
        func serverConnections() throws -> String {
            try fleet.cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'keywayd on host-i'")
        }
        // Three requests at once: three connections, each given back to the pool.
        let requests = DispatchGroup()
        onThreads(3, requests) { index in
            try? store.updateAttempts(user: "user-\(index)", durable: true) { _ in usleep(500_000) }
        }
        requests.wait()
        let opened = try serverConnections()
        #expect(opened == "3", "\(opened)")
        usleep(500_000)  // longer than `idle`
        _ = try store.attempts(user: "alice")  // takes the latest, and closes the two unused since
        #expect(try eventually { try serverConnections() == "1" }, "the idle connections closed")
    }

    @Test("TLS as the guide sets it up: migrate and keywayd's role verify the server; no CA or a wrong one, refused")
    func tlsAsTheGuideSaysIt() throws {
        let port = 41_000 + Int(getpid() % 10_000)
        let cluster = try PostgresCluster(port: port, tls: true)
        defer { cluster.stop() }
        // The owner over TCP with TLS, the CA named in the URI (keyway store migrate ... --grant).
        let owner = try PostgresStore(
            .init(
                uri: "postgresql://keyway_owner@localhost:\(port)/keyway?sslrootcert=\(cluster.directory)/ca.crt",
                passfile: cluster.passfile))
        #expect(try owner.migrate(granting: ["keyway_host"], parts: Fleet.parts) == 0)
        // keywayd's role: sslmode=verify-full unless the URI says otherwise.
        let store = try PostgresStore(.init(uri: cluster.uri, host: "host-t", passfile: cluster.passfile))
        try store.updateAttempts(user: "alice", durable: true) { $0[.passcode].consecutiveFailures = 1 }
        #expect(
            try cluster.sql(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
                    + "WHERE a.application_name = 'keywayd on host-t'") == "t", "the connection is encrypted")
        // Without the CA, or with another, nothing is sent: verify-full cannot check the server.
        let noCA = try PostgresStore(
            .init(uri: "postgresql://keyway_host@localhost:\(port)/keyway", host: "host-t", passfile: cluster.passfile))
        let missing = failure { () throws(AuthenticationError) in _ = try noCA.attempts(user: "alice") }
        #expect(missing?.code == .serviceUnavailable, "\(String(describing: missing))")
        #expect(missing?.reason.contains("root certificate") == true, "\(missing?.reason ?? "")")
        let otherCA = cluster.directory + "/other-ca.crt"
        let made = PostgresCluster.run(
            "openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout /dev/null "
                + "-out \(otherCA) -days 1 -subj /CN=other 2>&1")
        #expect(made.0 == 0, "\(made.1)")
        let wrong = try PostgresStore(
            .init(
                uri: "postgresql://keyway_host@localhost:\(port)/keyway?sslrootcert=\(otherCA)", host: "host-t",
                passfile: cluster.passfile))
        let refused = failure { () throws(AuthenticationError) in _ = try wrong.attempts(user: "alice") }
        #expect(refused?.code == .serviceUnavailable, "\(String(describing: refused))")
        #expect(refused?.reason.contains("certificate verify failed") == true, "\(refused?.reason ?? "")")
        // And the server takes no TCP connection without TLS (hostssl only).
        let plain = try PostgresStore(
            .init(
                uri: "postgresql://keyway_host@localhost:\(port)/keyway?sslmode=disable", host: "host-t",
                passfile: cluster.passfile))
        let unencrypted = failure { () throws(AuthenticationError) in _ = try plain.attempts(user: "alice") }
        #expect(unencrypted?.reason.contains("no encryption") == true, "\(unencrypted?.reason ?? "")")
    }

    @Test("through PgBouncer 1.18 in transaction mode: 6 hosts, 48 threads, 2 server connections, every count exact")
    func pgbouncerTransactionMode() throws {
        let fleet = try Fleet()
        defer { fleet.cluster.stop() }
        let port = 40_000 + Int(getpid() % 10_000)
        let pooled = try fleet.cluster.pooler(port: port, size: 2)
        // A longer timeout than keywayd's: 48 threads queue for PgBouncer's 2 server connections on a loaded machine.
        let hosts = try (0..<6).map { index in
            try PostgresStore(
                .init(uri: pooled, host: "host-\(index)", timeout: .seconds(10), passfile: fleet.cluster.passfile))
        }
        let problems = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 48) { index in
            let store = hosts[index % hosts.count]
            for round in 0..<3 {
                do throws(AuthenticationError) {
                    try store.updateAttempts(user: "pooled-\(round)", durable: true) {
                        $0[.passcode].consecutiveFailures += 1
                    }
                    _ = try store.account(user: "pooled-\(round)")
                } catch {
                    problems.withLock { $0.append(error.reason) }
                }
            }
        }
        #expect(problems.withLock { $0 } == [])
        for round in 0..<3 {
            #expect(try fleet.store.attempts(user: "pooled-\(round)")[.passcode].consecutiveFailures == 48)
        }
        let server = try fleet.cluster.sql("SELECT count(*) FROM pg_stat_activity WHERE usename = 'keyway_host'")
        #expect((Int(server) ?? 99) <= 3, "PgBouncer's 2 and this test's own store: \(server)")
    }
}
