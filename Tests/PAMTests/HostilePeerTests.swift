import Foundation
import KeywayPlatform
import Testing

/// The hostile-peer executable, built next to the test bundle.
let hostilePath: String = {
    var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("keyway-hostile").path),
        directory.path != "/"
    {
        directory = directory.deletingLastPathComponent()
    }
    return directory.appendingPathComponent("keyway-hostile").path
}()

/// keywayd against a hostile local user who passes descriptors (keywayd(8), "Descriptors"): a lingering TCP socket
/// on a refused connection, on an admitted one and on an arming lease; a thousand messages of two and three
/// descriptors on a lease; a file, a FIFO and another terminal deposited as custody. Each runs twice: with the
/// kernel refusing the descriptors (SO_PASSRIGHTS, Linux 6.16 and later) and with keywayd receiving and disposing of
/// them itself, as older kernels make it. Meanwhile another user's right pattern is timed, and keywayd's open
/// descriptors counted before and after.
@Suite("hostile peers: passed descriptors", .serialized)
struct HostilePeerTests {
    let fixture = PAMFixture()

    /// The attacker's account, one per mode: the cases of a parameterized test may run side by side, and adding an
    /// account ends whatever a leftover one of the same name still runs.
    static func attacker(_ mode: String) -> String { "kwpeer-\(mode)" }

    /// The attacker (a finger enrolled, so it may arm its own sensor) and the victim (alice: a pattern).
    func setUp(_ mode: String) throws -> (uid: String, gid: String) {
        try requireIsolation()
        let name = Self.attacker(mode)
        #expect(try TestAccounts.add(name))
        let (uid, gid) = try TestAccounts.ids(name)
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode(name, "482916")
        try fixture.enrollFinger(name, "right-index")
        chmod(fixture.directory, 0o755)
        fixture.startDaemon(["--passed-descriptors", mode, "--request-timeout", "500"])
        fixture.service("pattern", "policy=pattern")
        return (uid, gid)
    }

    func tearDown(_ mode: String) {
        TestAccounts.remove(Self.attacker(mode))
        fixture.remove()
    }

    /// Milliseconds of alice's right pattern through the real module (pam_start_confdir), which must succeed.
    func victim() throws -> Int64 {
        let start = UnixSocket.monotonicMilliseconds()
        let result = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        return UnixSocket.monotonicMilliseconds() - start
    }

    /// The victim's normal time, the median of three, before any attack.
    func normalTime() throws -> Int64 { try (0..<3).map { _ in try victim() }.sorted()[1] }

    /// keywayd's open descriptors.
    func descriptors() -> Int {
        guard let pid = fixture.daemonProcess?.processIdentifier else { return -1 }
        return (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Waits up to 3 s for keywayd's descriptors to come back to `count`; what they are then.
    func settle(to count: Int) -> Int {
        for _ in 0..<30 {
            if descriptors() <= count { break }
            usleep(100_000)
        }
        return descriptors()
    }

    /// The hostile program as the attacker, started.
    func startAttack(_ attacker: (uid: String, gid: String), _ arguments: [String]) throws -> Started {
        try Started(
            "/usr/bin/setpriv",
            ["--reuid=\(attacker.uid)", "--regid=\(attacker.gid)", "--clear-groups", "--", hostilePath] + arguments)
    }

    /// The hostile program as the attacker, to its end.
    func attack(_ mode: String, _ attacker: (uid: String, gid: String), _ arguments: [String]) throws -> Run {
        try startAttack(attacker, arguments).finish()
    }

    @Test(
        "a lingering TCP socket passed on a refused and on an admitted connection: the victim's pattern keeps its time",
        arguments: ["refuse", "receive"])
    func lingeringConnections(mode: String) throws {
        defer { tearDown(mode) }
        let attacker = try setUp(mode)
        let normal = try normalTime()
        let before = descriptors()
        for kind in ["refused", "admitted"] {
            let running = try startAttack(attacker, [kind, fixture.socket, "4"])
            usleep(700_000)
            var slowest: Int64 = 0
            for _ in 0..<5 { slowest = max(slowest, try victim()) }
            let report = running.finish()
            #expect(report.status == 0, "\(report.text)")
            #expect(slowest <= normal + 1000, "\(mode) \(kind): \(slowest) ms, \(normal) ms normally; \(report.text)")
            if mode == "refuse" {
                #expect(report.text.contains("passed 0 "), "the kernel took a descriptor: \(report.text)")
            } else {
                #expect(!report.text.contains("passed 0 "), "no descriptor was passed: \(report.text)")
            }
            #expect(try victim() <= normal + 1000, "after: \(mode) \(kind)")
            #expect(settle(to: before) <= before, "\(mode) \(kind): \(before) descriptors before, \(descriptors())")
        }
    }

    @Test(
        "a lease: a lingering socket, 1,000 messages of two and of three descriptors; the lease ends, nothing is kept",
        arguments: ["refuse", "receive"])
    func leaseDescriptors(mode: String) throws {
        defer { tearDown(mode) }
        let attacker = try setUp(mode)
        let normal = try normalTime()
        let before = descriptors()
        for (count, per) in [(1, 0), (1000, 2), (1000, 3)] {
            let report = try attack(
                mode, attacker, ["lease", fixture.socket, Self.attacker(mode), "\(count)", "\(per)"])
            #expect(report.status == 0, "\(report.text)")
            if mode == "refuse" {
                #expect(report.text.contains("passed 0 "), "the kernel took a descriptor: \(report.text)")
                #expect(report.text.contains("ended false"), "a refused descriptor ended the lease: \(report.text)")
            } else {
                // The first message with descriptors ends the lease: at most a few more reach the socket's queue.
                #expect(report.text.contains("ended true"), "the lease was not ended: \(report.text)")
            }
            #expect(try victim() <= normal + 1000, "\(mode) lease \(count)×\(per)")
            #expect(settle(to: before) <= before, "\(mode) \(count)×\(per): \(before) before, \(descriptors())")
        }
    }

    @Test(
        "a file, a FIFO and another terminal deposited as custody by a user: refused, the lease ended, none kept",
        arguments: ["refuse", "receive"])
    func foreignCustody(mode: String) throws {
        defer { tearDown(mode) }
        let attacker = try setUp(mode)
        let before = descriptors()
        for kind in ["file", "fifo", "tty"] {
            let report = try attack(mode, attacker, ["deposit", fixture.socket, Self.attacker(mode), kind])
            #expect(report.status == 0, "\(report.text)")
            if mode == "refuse" {
                #expect(report.text.contains("deposited false"), "the kernel took the deposit: \(report.text)")
            } else {
                #expect(report.text.contains("ended true"), "the lease outlived a foreign deposit: \(report.text)")
            }
            _ = try victim()
            #expect(settle(to: before) <= before, "\(mode) \(kind): \(before) before, \(descriptors()) after")
        }
    }
}

/// keywayd against a user who writes as much as it may (keywayd(8), LIMITS): a change that changes nothing writes
/// nothing, a user other than root makes at most 10 changes a minute, and the audit trail keeps the latest rows.
@Suite("hostile peers: bounded writes", .serialized)
struct BoundedWriteTests {
    let fixture = PAMFixture()

    /// The store's size once its write-ahead log is checkpointed into it (SQLite's own growth, not the attack's).
    func size(_ path: String) throws -> Int {
        _ = try run("/usr/bin/sqlite3", [path, "PRAGMA wal_checkpoint(TRUNCATE)"])
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : -1
    }

    func auditRows() throws -> Int {
        Int(try run("/usr/bin/sqlite3", [fixture.store, "SELECT count(*) FROM audit"]).output.first ?? "") ?? -1
    }

    @Test("100,000 `set` requests by a user: at most 10 a minute are written, the store grows by a few pages")
    func setFlood() throws {
        try requireIsolation()
        defer {
            TestAccounts.remove("kwflood")
            fixture.remove()
        }
        #expect(try TestAccounts.add("kwflood"))
        let (uid, gid) = try TestAccounts.ids("kwflood")
        try fixture.enrollPattern("kwflood", "2-4-9-3")
        chmod(fixture.directory, 0o755)
        fixture.startDaemon()
        let rowsBefore = try auditRows()
        let sizeBefore = try size(fixture.store)
        let start = UnixSocket.monotonicMilliseconds()
        let floods = try (0..<4).map { _ in
            try Started(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", hostilePath, "set", fixture.socket,
                    "kwflood", "25000",
                ])
        }
        let reports = floods.map { $0.finish() }
        let minutes = Int((UnixSocket.monotonicMilliseconds() - start) / 60_000) + 1
        var done = 0
        for report in reports {
            #expect(report.status == 0, "\(report.text)")
            let words = report.text.split(separator: " ")
            done += words.firstIndex(of: "done").flatMap { Int(words[$0 + 1]) } ?? 0
            #expect(report.text.contains("other 0"), "answers that were neither done, refused nor busy: \(report.text)")
        }
        let written = try auditRows() - rowsBefore
        #expect(done <= 10 * minutes, "\(done) changes were made in \(minutes) minute(s)")
        #expect(written <= done, "\(written) audit rows for \(done) changes")
        #expect(written >= 1, "no change was made at all")
        let sizeAfter = try size(fixture.store)
        #expect(sizeAfter - sizeBefore <= 16 * 1024, "the store grew from \(sizeBefore) to \(sizeAfter) bytes")
        // Root setting what is already set writes nothing either.
        let rows = try auditRows()
        for _ in 0..<3 {
            let again = try run(
                cliPath, ["--socket", fixture.socket, "set", "gesture.show-trail", "on", "--user", "kwflood"])
            #expect(again.status == 0, "\(again.text)")
        }
        #expect(try auditRows() <= rows + 1, "a set that changes nothing was audited")
    }
}
