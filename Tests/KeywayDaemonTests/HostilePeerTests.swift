import Foundation
import KeywayPlatform
import Testing

@testable import KeywayProcessFixture

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
    /// A second person, at the sensor after an attack (`touchAuthenticates`) and over their own connections
    /// (`busyProbe`).
    static func toucher(_ mode: String) -> String { "kwtouch-\(mode)" }

    /// The attacker (a finger enrolled, so it may arm its own sensor) and the victims (alice: a pattern; the toucher:
    /// a finger).
    func setUp(_ mode: String) throws -> (uid: String, gid: String) {
        try requireIsolation()
        let name = Self.attacker(mode)
        #expect(try TestAccounts.add(name))
        let (uid, gid) = try TestAccounts.ids(name)
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode(name, "482916")
        try fixture.enrollFinger(name, "right-index")
        #expect(try TestAccounts.add(Self.toucher(mode)))
        try fixture.enrollPasscode(Self.toucher(mode), "639217")  // the sensor's policies ask for a passcode set
        try fixture.enrollFinger(Self.toucher(mode), "right-index")
        chmod(fixture.directory, 0o755)
        let config = fixture.writeConfig("[biometric]\ntimeout = 3s\n")
        fixture.startDaemon(
            ["--passed-descriptors", mode, "--request-timeout", "500", "--config", fixture.configPath])
        fixture.service("pattern", "policy=pattern")
        fixture.service("bio", "policy=biometrics-only timeout=20 \(config)")
        return (uid, gid)
    }

    func tearDown(_ mode: String) {
        TestAccounts.remove(Self.attacker(mode))
        TestAccounts.remove(Self.toucher(mode))
        fixture.remove()
    }

    /// Milliseconds of alice's right pattern through the real module (pam_start_confdir), which must succeed.
    func victim() throws -> Int64 {
        let start = MonotonicClock.milliseconds()
        let result = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        return MonotonicClock.milliseconds() - start
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

    /// The hostile program as the attacker, started, and waited for until its attack is in place: `refused` and
    /// `admitted` say so after their first round, in a file of the fixture's made for them (KEYWAY_HOSTILE_READY).
    func startAttackInPlace(_ attacker: (uid: String, gid: String), _ arguments: [String]) throws -> Started {
        let mark = freshMark("attack-in-place")
        let running = try Started(
            "/usr/bin/setpriv",
            ["--reuid=\(attacker.uid)", "--regid=\(attacker.gid)", "--clear-groups", "--", hostilePath] + arguments,
            environment: ["KEYWAY_HOSTILE_READY": mark])
        awaitMark(mark, of: running, "keyway-hostile \(arguments.joined(separator: " ")) in place")
        return running
    }

    /// An empty file in the fixture's directory that any user may write: an attacker's mark.
    func freshMark(_ name: String) -> String {
        let path = fixture.directory + "/" + name
        unlink(path)
        _ = FileManager.default.createFile(atPath: path, contents: nil)
        chmod(path, 0o666)
        return path
    }

    /// Waits for `running` to write its mark at `path` (or to end: what it printed then says why).
    func awaitMark(_ path: String, of running: Started, _ what: String) {
        var mark = ""
        _ = waitUntil(what, seen: { "the mark \"\(mark)\", running \(running.process.isRunning)" }) {
            mark = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return !mark.isEmpty || !running.process.isRunning
        }
    }

    /// The hostile program as the attacker, to its end.
    func attack(_ mode: String, _ attacker: (uid: String, gid: String), _ arguments: [String]) throws -> Run {
        try startAttack(attacker, arguments).finish()
    }

    @Test(
        "a lingering socket, a listener carrying one, a pty, on refused and admitted connections; then 1,200 more",
        arguments: ["refuse", "receive"])
    func lingeringConnections(mode: String) throws {
        defer { tearDown(mode) }
        let attacker = try setUp(mode)
        let normal = try normalTime()
        let before = descriptors()
        for (kind, passing) in [
            ("refused", "tcp"), ("admitted", "tcp"), ("refused", "listener"),
            ("admitted", "listener"), ("refused", "pty"), ("admitted", "pty"),
        ] {
            let running = try startAttackInPlace(attacker, [kind, fixture.socket, "3", passing])
            var slowest: Int64 = 0
            for _ in 0..<5 { slowest = max(slowest, try victim()) }
            let report = running.finish()
            #expect(report.status == 0, "\(report.text)")
            // A victim held by the attack waits its 3 s; a loaded machine (a suite beside this one) costs a second.
            #expect(
                slowest <= normal + 2000,
                "\(mode) \(kind) \(passing): \(slowest) ms, \(normal) ms normally; \(report.text)")
            if mode == "refuse" {
                #expect(report.text.contains("passed 0 "), "the kernel took a descriptor: \(report.text)")
            } else {
                #expect(!report.text.contains("passed 0 "), "no descriptor was passed: \(report.text)")
            }
            #expect(try victim() <= normal + 2000, "after: \(mode) \(kind) \(passing)")
            #expect(
                settle(to: before) <= before,
                "\(mode) \(kind) \(passing): \(before) descriptors before, \(descriptors())")
        }
        // keywayd still takes and lets go of connections as before: 1,200 in a row, then the victim.
        let churn = try attack(mode, attacker, ["churn", fixture.socket, "1200"])
        #expect(churn.text.contains("served 1200"), "\(churn.text)")
        #expect(try victim() <= normal + 1000, "after 1,200 connections: \(mode)")
        #expect(settle(to: before) <= before, "\(mode) churn: \(before) descriptors before, \(descriptors())")
    }

    /// A listening Unix socket whose unaccepted connection carries a lingering TCP socket (SO_LINGER 60 s, a full send
    /// queue, a peer that never reads), passed to keywayd's socket `argv[1]` and let go of at once, so keywayd's close
    /// of the listener would be the one to release it. Once keywayd has ended that connection (it disposes of what
    /// came with a message before it closes the connection) the program says so in the file `argv[3]`, then waits
    /// `argv[2]` seconds.
    static let listenerAttack = """
        import array, socket, struct, sys, time
        tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen(1)
        sender = socket.socket(); sender.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        sender.connect(tcp.getsockname()); receiver, _ = tcp.accept()
        receiver.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sender.setblocking(False)
        try:
            while True: sender.send(b"A" * 65536)
        except BlockingIOError:
            pass
        sender.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 60))
        listener = socket.socket(socket.AF_UNIX); listener.bind("\\0keyway-listener-attack"); listener.listen(1)
        client = socket.socket(socket.AF_UNIX); client.connect("\\0keyway-listener-attack")
        client.sendmsg([b"A"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [sender.fileno()]))])
        client.close(); sender.close()
        keywayd = socket.socket(socket.AF_UNIX); keywayd.connect(sys.argv[1])
        keywayd.sendmsg([b"A"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [listener.fileno()]))])
        listener.close()
        keywayd.settimeout(30)
        try:
            keywayd.recv(1)
            open(sys.argv[3], "a").write("ended by keywayd\n")
        except OSError:
            pass
        time.sleep(float(sys.argv[2]))
        """

    @Test("a listener carrying a lingering socket, received: no keywayd thread waits in its close")
    func listenerCarryingLingering() throws {
        let mode = "receive"
        defer { tearDown(mode) }
        let attacker = try setUp(mode)
        let pid = try #require(fixture.daemonProcess?.processIdentifier)
        let mark = freshMark("listener-passed")
        let running = try Started(
            "/usr/bin/setpriv",
            [
                "--reuid=\(attacker.uid)", "--regid=\(attacker.gid)", "--clear-groups", "--", "/usr/bin/python3", "-c",
                Self.listenerAttack, fixture.socket, "3", mark,
            ])
        awaitMark(mark, of: running, "keywayd's end of the connection that passed the listener")
        // A thread in a lingering close waits in the kernel's wait_woken (sk_stream_wait_close).
        let waits = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []).compactMap {
            try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/wchan", encoding: .utf8)
        }
        #expect(
            !waits.contains { $0.contains("wait_woken") || $0.contains("wait_close") }, "keywayd's threads: \(waits)")
        _ = running.finish()
        #expect(try victim() > 0)
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
        let start = MonotonicClock.milliseconds()
        let floods = try (0..<4).map { _ in
            try Started(
                "/usr/bin/setpriv",
                [
                    "--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", hostilePath, "set", fixture.socket,
                    "kwflood", "25000",
                ])
        }
        let reports = floods.map { $0.finish() }
        let minutes = Int((MonotonicClock.milliseconds() - start) / 60_000) + 1
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

/// One person's subordinate uids (/etc/subuid, which useradd fills for every user) are that person: holding
/// connections from 32 of them takes one person's places, never everyone else's (keywayd(8), LIMITS).
@Suite("hostile peers: subordinate uids", .serialized)
struct SubordinateUidTests {
    /// Keeps `argv[2]` connections to keywayd's socket `argv[1]` open until the file `argv[3]` exists, connecting
    /// again a quarter of a second after keywayd closes some (it holds places; it is not a flood of connects, which
    /// would fill the listen backlog, a bound shared by everyone); prints how many it made.
    static let holder = """
        import os, select, socket, sys, time
        path, width, stop = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        held, made = [], 0
        while not os.path.exists(stop):
            while len(held) < width:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                    held.append(s)
                    made += 1
                except OSError:
                    s.close()
                    break
            ready, _, _ = select.select(held, [], [], 0.05)
            for s in ready:
                held.remove(s)
                s.close()
            if ready:
                time.sleep(0.25)
        print(made)
        """

    @Test("32 subordinate uids of one user hold connections: another user's keyway and PAM host get in 30 of 30")
    func subordinateFlood() throws {
        try requireIsolation()
        let fixture = PAMFixture()
        let (owner, victim) = ("kwsubowner", "kwsubvictim")
        #expect(try TestAccounts.add(owner))
        #expect(try TestAccounts.add(victim))
        let line = "\(owner):300000:65536\n"
        let original = try TestAccounts.withAccountFilesLocked { () throws -> String in
            let before = (try? String(contentsOfFile: "/etc/subuid", encoding: .utf8)) ?? ""
            try (before + line).write(toFile: "/etc/subuid", atomically: true, encoding: .utf8)
            return before
        }
        var flooders: [Started] = []
        let stop = fixture.directory + "/stop-flooding"
        defer {
            for flooder in flooders { flooder.process.terminate() }
            _ = try? TestAccounts.withAccountFilesLocked {
                try original.write(toFile: "/etc/subuid", atomically: true, encoding: .utf8)
            }
            TestAccounts.remove(owner)
            TestAccounts.remove(victim)
            fixture.remove()
        }
        try fixture.enrollPattern(victim, "2-4-9-3")
        chmod(fixture.directory, 0o755)
        fixture.startDaemon()
        fixture.service("locker", "policy=pattern")
        // 32 of the owner's subordinate uids, 8 connections each: 256, twice what all users but root may hold.
        for offset in 0..<32 {
            let uid = "\(300_000 + offset)"
            flooders.append(
                try Started(
                    "/usr/bin/setpriv",
                    [
                        "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--", "/usr/bin/python3", "-c",
                        Self.holder, fixture.socket, "8", stop,
                    ]))
        }
        usleep(1_500_000)
        let (uid, gid) = try TestAccounts.ids(victim)
        let asUser = ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--"]
        var statuses = 0
        var lockers = 0
        for _ in 0..<30 {
            let status = try run("/usr/bin/setpriv", asUser + [cliPath, "--socket", fixture.socket, "status"])
            if status.status == 0 { statuses += 1 } else { print("keyway status as \(victim): \(status.text)") }
            // The person's own screen locker: a PAM host running as the person.
            let locker = try run(
                "/usr/bin/setpriv",
                asUser + [harnessPath] + answers("2-4-9-3") + [fixture.services, "locker", victim])
            if locker.result == "PAM_SUCCESS" { lockers += 1 } else { print("locker as \(victim): \(locker.text)") }
        }
        let stillFlooding = flooders.allSatisfy { $0.process.isRunning }
        _ = FileManager.default.createFile(atPath: stop, contents: nil)
        let made = flooders.map { Int($0.finish().output.first ?? "") ?? 0 }.reduce(0, +)
        flooders = []
        print("subordinate uids: 32 uids made \(made) connections; status \(statuses)/30, locker \(lockers)/30")
        #expect(stillFlooding, "a flooder ended before the victim's tries were over")
        #expect(statuses == 30)
        #expect(lockers == 30)
        #expect(fixture.daemonLog.contains("too many connections"), "the flood was never refused: it proved nothing")
    }
}
