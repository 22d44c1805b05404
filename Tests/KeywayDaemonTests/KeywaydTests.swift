import Foundation
import KeywayCore
import KeywayPlatform
import KeywayRuntime
import KeywayWire
import Testing

@testable import KeywayProcessFixture

/// keywayd with real processes: the stopped-client attack, hostile requests, who may ask what, a non-root PAM
/// host, a non-root `keyway change`, 64 parallel guesses, SIGKILL mid-traffic, and the enumeration table.
@Suite("keywayd", .serialized)
struct KeywaydTests {
    let fixture = PAMFixture()

    // MARK: Helpers

    /// Opens a raw connection to the fixture's daemon.
    func connect() throws -> Int32 {
        switch UnixSocket.connect(to: fixture.socket) {
        case .success(let fd): return fd
        case .failure(let failure): throw failure
        }
    }

    /// Writes bytes on a raw connection.
    func write(_ fd: Int32, _ bytes: [UInt8]) {
        _ = UnixSocket.send(bytes, to: fd, until: MonotonicClock.milliseconds() + 2000)
    }

    /// What the daemon does with a raw connection: its answer, or nil when it closed without one, and how long
    /// that took.
    func outcome(_ fd: Int32, waiting: Int64 = 5000) -> (response: Response?, milliseconds: Int64) {
        let start = MonotonicClock.milliseconds()
        let frame = UnixSocket.receiveFrame(from: fd, limit: Wire.maximumResponse, until: start + waiting)
        let elapsed = MonotonicClock.milliseconds() - start
        close(fd)
        guard case .success(let bytes) = frame else { return (nil, elapsed) }
        return (try? Response(decoding: bytes), elapsed)
    }

    /// A client of the fixture's daemon, as the module and the CLI use it.
    var client: DaemonVault { DaemonVault(socketPath: fixture.socket, via: "keyway-tests") }

    /// A throwaway account (removed by `removeUsers`), with its uid.
    func addUser(_ name: String) throws -> (uid: String, gid: String) {
        try requireIsolation()
        #expect(try TestAccounts.add(name))
        let uid = try run("/usr/bin/id", ["-u", name]).output.first ?? ""
        let gid = try run("/usr/bin/id", ["-g", name]).output.first ?? ""
        return (uid, gid)
    }

    /// Throwaway accounts, each with the pattern 2-4-9-3, and the daemon started where they can reach it; the
    /// first one's ids.
    func accounts(_ names: String...) throws -> (uid: String, gid: String) {
        let ids = try names.map { name in
            let ids = try addUser(name)
            try fixture.enrollPattern(name, "2-4-9-3")
            return ids
        }
        chmod(fixture.directory, 0o755)  // the socket is 0666; its directory must let users reach it
        fixture.startDaemon()
        return ids[0]
    }

    func removeUsers(_ names: String...) {
        for name in names { TestAccounts.remove(name) }
    }

    /// Runs a program as another user (setpriv: no setuid helper, no PAM of its own).
    func runAs(_ user: (uid: String, gid: String), _ program: String, _ arguments: [String], input: String? = nil)
        throws -> Run
    {
        try KeywayProcessFixture.run(
            "/usr/bin/setpriv",
            ["--reuid=\(user.uid)", "--regid=\(user.gid)", "--clear-groups", "--", program] + arguments, input: input)
    }

    /// The milliseconds `body` took.
    func timed(_ body: () throws -> Void) rethrows -> Int64 {
        let start = MonotonicClock.milliseconds()
        try body()
        return MonotonicClock.milliseconds() - start
    }

    func median(_ values: [Int64]) -> Int64 { values.sorted()[values.count / 2] }

    // MARK: Tests

    @Test("malformed, oversized, truncated, trailing and slow requests: each refused, the daemon keeps serving")
    func hostileRequests() throws {
        defer { fixture.remove() }
        fixture.startDaemon(["--request-timeout", "300"])
        defer { fixture.stopDaemon() }
        let serving = { #expect((try? client.status(of: "alice")) != nil, "the daemon stopped serving") }

        // A version this daemon does not speak, an unknown kind: answered with the reason, connection closed.
        for (body, reason) in [([UInt8]([9, 6]), "protocol version 9"), ([Wire.version, 99], "request kind 99")] {
            let fd = try connect()
            write(fd, WireWriter.frame(body))
            let answer = outcome(fd).response
            guard case .failure(let error)? = answer else {
                Issue.record("\(body): expected a refusal, got \(String(describing: answer))")
                continue
            }
            #expect(error.reason.contains(reason), "\(error.reason)")
            serving()
        }
        // A field past the end, bytes after the last field, a sample count of four billion.
        var truncatedUser = WireWriter(kind: 6)
        truncatedUser.u8(1)
        truncatedUser.u32(200)
        var trailing = Request.status(user: "alice").encoded
        trailing.append(0)
        var hugeCount = WireWriter(kind: 2)
        hugeCount.string("biometric")
        hugeCount.string("alice")
        hugeCount.string("t")
        hugeCount.bool(false)
        hugeCount.bool(false)
        hugeCount.bool(false)  // no starting uid
        hugeCount.u8(2)
        hugeCount.u32(Int(UInt32.max))
        for (body, reason) in [
            (truncatedUser.bytes, "runs past the end"), (trailing, "follow the last field"),
            (hugeCount.bytes, "more than the 64 accepted"),
        ] {
            let fd = try connect()
            write(fd, WireWriter.frame(body))
            guard case .failure(let error)? = outcome(fd).response else {
                Issue.record("expected a refusal mentioning \(reason)")
                continue
            }
            #expect(error.reason.contains(reason), "\(error.reason)")
            serving()
        }
        // Oversized: the length alone is refused; the daemon reads no further and closes at once.
        let oversized = try connect()
        write(oversized, [0x7F, 0xFF, 0xFF, 0xFF])
        let big = outcome(oversized)
        #expect(big.response == nil && big.milliseconds < 1000, "\(big)")
        serving()
        // Truncated: half a request, then the client goes away.
        let truncated = try connect()
        write(truncated, WireWriter.frame(Request.status(user: "alice").encoded).prefix(7).map { $0 })
        shutdown(truncated, Int32(SHUT_WR))
        #expect(outcome(truncated).response == nil)
        serving()
        // Slow: half a request, then nothing. Others are served meanwhile; the stall is closed at the deadline.
        let slowStart = MonotonicClock.milliseconds()
        let slow = try connect()
        write(slow, [0, 0, 0, 40, Wire.version])
        let during = timed { serving() }
        let stalled = outcome(slow)
        let closedAfter = MonotonicClock.milliseconds() - slowStart
        #expect(stalled.response == nil)
        #expect(closedAfter >= 250 && closedAfter < 3000, "closed after \(closedAfter) ms")
        #expect(during < 1000, "a request beside a stalled one took \(during) ms")
        serving()
        // A second keywayd does not take over a socket that is being served.
        let second = try run(daemonPath, ["--socket", fixture.socket, "--store", fixture.store, "--idle-exit", "5"])
        #expect(second.status == 71, "\(second.text)")
        #expect(second.text.contains("another process listens there"), "\(second.text)")
        serving()
    }

    @Test("keywayd stopped: PAM_AUTHINFO_UNAVAIL and a message; with default=ignore the password stack below decides")
    func daemonStopped() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("pattern", "policy=pattern")
        fixture.stopDaemon()
        let alone = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(alone.result == "PAM_AUTHINFO_UNAVAIL", "\(alone.text)")
        #expect(alone.output.first == "error: Keyway is not available (see the system log).", "\(alone.text)")
        #expect(!alone.text.contains("prompt:"))
        // The sudo example's stack: pam_permit stands in for the password stack below.
        let stack =
            "auth [success=done default=ignore] \(modulePath) policy=pattern \(fixture.moduleArguments)\n"
            + "auth required pam_permit.so\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/fallthrough", contents: Data(stack.utf8))
        let below = try harness(fixture, "fallthrough", "alice")
        #expect(below.result == "PAM_SUCCESS", "\(below.text)")
        #expect(!below.text.contains("prompt:"), "\(below.text)")
    }

    @Test("stopped clients, stalled requests and unread answers leave another user's right pattern unaffected")
    func stoppedClients() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("pattern", "policy=pattern")
        // The daemon account (mallory here) has a pattern at the default cost (enrolled through the daemon): its clients keep the pool busy.
        let enroll = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", "daemon", "--stdin"],
            input: "1-6-7-2-9\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        func alice() throws -> Int64 {
            try timed {
                let result = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
                #expect(result.result == "PAM_SUCCESS", "\(result.text)")
            }
        }
        let normal = median(try (0..<7).map { _ in try alice() })
        // 20 clients stopped at random points of their request, 20 connections with half a request each.
        var stopped: [Started] = []
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20 {
            let client = try Started(
                cliPath, ["--socket", fixture.socket, "unlock", "--user", "daemon", "--policy", "pattern", "--stdin"],
                input: "3-4-9-2\n")
            usleep(UInt32.random(in: 0...150_000, using: &generator))  // a Swift client connects after ~10-30 ms
            kill(client.process.processIdentifier, SIGSTOP)
            stopped.append(client)
        }
        var stalls: [Int32] = []
        for _ in 0..<20 {
            let fd = try connect()
            write(
                fd,
                WireWriter.frame(Request.availability(.gesture, UserContext(name: "daemon")).encoded).prefix(9).map {
                    $0
                })
            stalls.append(fd)
        }
        // And 20 that sent a whole request and never read the answer: exactly "stopped between sending and
        // receiving", without depending on when a signal lands.
        for index in 0..<20 {
            let fd = try connect()
            let guess = Secret(copying: Array("3-4-9-\(index % 9 + 1)".utf8))
            write(fd, WireWriter.frame(Request.verify(.gesture, UserContext(name: "daemon"), .secret(guess)).encoded))
            stalls.append(fd)
        }
        usleep(200_000)
        let attackedRuns = try (0..<7).map { _ in try alice() }
        let attacked = attackedRuns.max() ?? 0
        for client in stopped {
            kill(client.process.processIdentifier, SIGKILL)
            _ = client.finish()
        }
        for fd in stalls { close(fd) }
        print(
            "keywayd stopped-client attack: alice's right pattern took \(normal) ms (median of 7) before, "
                + "\(median(attackedRuns)) ms (median), \(attacked) ms (slowest) during"
        )
        // Today's figures are in the issue note. The median must stay within 1 s of normal; the slowest run within
        // 5 s, which a loaded 2-core CI machine can blip by ~1 s, while a stall (a held SQLite lock cost 10 s,
        // connections served one at a time would cost 40 s) still fails it.
        #expect(
            median(attackedRuns) - normal < 1000, "alice took \(attackedRuns) ms under attack, \(normal) ms without")
        #expect(attacked - normal < 5000, "alice took \(attacked) ms under attack, \(normal) ms without")
    }

    @Test("a full queue answers busy at once and counts nothing; beyond its share an account waits its turn; idle exit")
    func busyAndIdle() throws {
        defer { fixture.remove() }
        fixture.startDaemon(["--workers", "1", "--queue", "4"])
        let enroll = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", "daemon", "--stdin"],
            input: "1-6-7-2-9\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        func send(_ guess: String, for user: String) throws -> Int32 {
            let fd = try connect()
            let request = Request.verify(
                .gesture, UserContext(name: user, concealsEnrollment: true), .secret(Secret(copying: Array(guess.utf8)))
            )
            write(fd, WireWriter.frame(request.encoded))
            return fd
        }
        func isBusy(_ answer: Response?) -> Bool {
            if case .failure(let error)? = answer { error.code == .serviceUnavailable } else { false }
        }
        // Four different wrong patterns for one account at once (each a default-cost hash): its share is one
        // place, so they wait their turn, one after the other, and each is answered and counted.
        let oneAccount = try ["3-4-9-2", "6-1-8-3", "4-3-8-1-6", "7-5-3-6"].map { try send($0, for: "daemon") }
        let waited = oneAccount.map { outcome($0, waiting: 10_000).response }
        #expect(waited.allSatisfy { if case .verdict? = $0 { true } else { false } }, "\(waited)")
        #expect(try fixture.vault().store.attempts(user: "daemon")[.gesture].consecutiveFailures == 4)
        // Six names at once: one worker and a queue of four admit five; the sixth is answered busy at once.
        let names = (1...6).map { "kwqueue\($0)" }
        let spread = try names.map { try send("2-5-8-9", for: $0) }
        let answers = spread.map { outcome($0, waiting: 10_000) }
        let busy = answers.filter { isBusy($0.response) }
        #expect(busy.count == 1, "\(answers)")
        #expect(busy.allSatisfy { $0.milliseconds < 1000 }, "busy was not answered at once: \(answers)")
        let counted = try names.reduce(0) { total, name in
            total + (try fixture.vault().store.attempts(user: name)[.gesture].consecutiveFailures)
        }
        #expect(counted == names.count - busy.count, "\(counted) counted for \(names.count - busy.count) answered")
        // A daemon that may exit when idle does, and takes its socket with it.
        let idleSocket = fixture.directory + "/idle.sock"
        let idle = try Started(daemonPath, ["--socket", idleSocket, "--store", fixture.store, "--idle-exit", "1"])
        let ended = idle.finish()
        #expect(ended.status == 0, "\(ended.text)")
        #expect(ended.text.contains("idle for 1 s; exiting"), "\(ended.text)")
        #expect(!FileManager.default.fileExists(atPath: idleSocket))
    }

    @Test("socket activation: started by the first connection with the socket passed in (LISTEN_FDS), it serves")
    func socketActivation() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        // systemd-socket-activate does what keywayd.socket does: listen, and start the service at the first
        // connection with the listening socket as descriptor 3.
        let activator = try Started(
            "/usr/bin/systemd-socket-activate",
            ["-l", fixture.socket, daemonPath, "--store", fixture.store, "--idle-exit", "2"], separateErrors: true)
        // keywayd is started by the first connection: up to 30 s on a loaded machine, the last refusal kept.
        var status: [UserStatus]? = nil
        var refusal = ""
        waitUntil("an answer through the activated socket", seen: { refusal }) {
            do throws(AuthenticationError) {
                status = try client.status(of: "alice")
            } catch {
                refusal = "\(error)"
            }
            return status != nil
        }
        #expect(status?.first?[.gesture]?.enrolled != nil, "no answer through the activated socket: \(refusal)")
        let unlock = try run(
            cliPath, ["--socket", fixture.socket, "unlock", "--user", "alice", "--policy", "pattern", "--stdin"],
            input: "2-4-9-3\n")
        #expect(unlock.status == 0, "\(unlock.text)")
        kill(activator.process.processIdentifier, SIGTERM)
        let daemon = activator.finish()
        #expect(daemon.text.contains("on the socket systemd passed"), "\(daemon.text)")
    }

    @Test("who may ask what: the table in keywayd(8), row by row, as a real non-root user; refusals count nothing")
    func whoMayAskWhat() throws {
        let me = "kwtest-kd1", other = "kwtest-kd2"
        defer {
            removeUsers(me, other)
            fixture.remove()
        }
        let mine = try accounts(me, other)
        let trailBefore = try fixture.vault().store.auditTrail(user: nil).count
        func keyway(_ arguments: [String], input: String? = nil) throws -> Run {
            try runAs(mine, cliPath, ["--socket", fixture.socket] + arguments, input: input)
        }
        let allowed: [([String], String?)] = [
            (["unlock", "--user", me, "--policy", "pattern", "--stdin"], "2-4-9-3\n"),
            (["status", "--user", me], nil),
            // Without --user, their own account: keywayd refuses to list everyone (VaultServiceTests).
            (["status"], nil),
        ]
        for (arguments, input) in allowed {
            let result = try keyway(arguments, input: input)
            #expect(result.status == 0, "\(arguments): \(result.text)")
        }
        let refused: [([String], String?, String)] = [
            (["unlock", "--user", other, "--policy", "pattern", "--stdin"], "2-4-9-3\n", "their own account"),
            (["status", "--user", other], nil, "their own account"),
            (["change", "gesture", "--user", other, "--stdin"], "2-4-9-3\n1-6-7-2-9\n", "their own"),
            (["enroll", "gesture", "--user", me, "--stdin"], "1-6-7-2-9\n", "only root may enroll"),
            (["remove", "gesture", "--user", me], nil, "only root may remove"),
            (["reset", "--user", me], nil, "only root may reset"),
            (["audit"], nil, "only root may audit"),
        ]
        for (arguments, input, reason) in refused {
            let result = try keyway(arguments, input: input)
            #expect(result.status == 77, "\(arguments): \(result.text)")
            #expect(result.text.contains(reason), "\(arguments): \(result.text)")
        }
        #expect(try fixture.vault().store.attempts(user: other) == AttemptBook(), "a refusal counted an attempt")
        #expect(try fixture.vault().store.auditTrail(user: nil).count == trailBefore, "a refusal changed something")
        // Root may do all of it.
        let everyone = try run(cliPath, ["--socket", fixture.socket, "status"])
        #expect(everyone.status == 0 && everyone.text.contains("\(other):"), "\(everyone.text)")
    }

    @Test(
        "a user turns their own pattern off by drawing it, and on again; keywayd refuses it without; policies skip it")
    func switches() throws {
        let me = "kwtest-kd7", other = "kwtest-kd8"
        defer {
            removeUsers(me, other)
            fixture.remove()
        }
        let mine = try accounts(me, other)
        func keyway(_ arguments: [String], input: String? = nil) throws -> Run {
            try runAs(mine, cliPath, ["--socket", fixture.socket] + arguments, input: input)
        }
        let wrong = try keyway(["disable", "gesture", "--stdin"], input: "1-5-9-6\n3-4-9-2\n6-1-8-3\n")
        #expect(wrong.status == 1, "\(wrong.text)")
        #expect(try fixture.vault().store.preferences(user: me) == [:], "turned off without the pattern")
        let off = try keyway(["disable", "gesture", "--stdin"], input: "2-4-9-3\n")
        #expect(off.status == 0, "\(off.text)")
        #expect(off.text.contains("gesture.enabled is off for \(me)."), "\(off.text)")
        let status = try keyway(["status"])
        #expect(status.text.contains("unavailable: the gesture is turned off for this account"), "\(status.text)")
        #expect(status.text.contains("switches: gesture.enabled off"), "\(status.text)")
        // Every policy: the factor is unavailable, the enrollment kept; the module gives way to the next module.
        let unlock = try keyway(["unlock", "--user", me, "--policy", "pattern", "--stdin"], input: "2-4-9-3\n")
        #expect(unlock.status == 3, "\(unlock.text)")
        fixture.service("pattern", "policy=pattern")
        // The owner's own sudo (started by them): told it is off; the module gives way to the next module.
        let module = try run(
            "/usr/bin/setpriv",
            ["--ruid=\(mine.uid)", "--euid=0", "--", harnessPath] + answers("2-4-9-3") + [
                fixture.services, "pattern", me,
            ])
        #expect(module.result == "PAM_AUTHINFO_UNAVAIL", "\(module.text)")
        // A stranger at a login prompt (started by root): asked and refused like a name with nothing enrolled, so
        // "turned off" tells no one that a pattern exists (EnumerationTests).
        let stranger = try harness(fixture, "pattern", me, answers("2-4-9-3", "1-5-9-6", "3-4-9-2"))
        #expect(stranger.result == "PAM_AUTH_ERR", "\(stranger.text)")
        #expect(try fixture.vault().store.enrollment(user: me, factor: .gesture) != nil, "the enrollment was lost")
        // Another user's switch is not theirs to set; their own goes back on without proof.
        let theirs = try keyway(["enable", "gesture", "--user", other])
        #expect(theirs.status == 77, "\(theirs.text)")
        #expect(try keyway(["set", "show-trail", "off"]).status == 0)
        let on = try keyway(["enable", "gesture"])
        #expect(on.status == 0, "\(on.text)")
        let back = try keyway(["unlock", "--user", me, "--policy", "pattern", "--stdin"], input: "2-4-9-3\n")
        #expect(back.status == 0, "\(back.text)")
        #expect(try fixture.vault().store.preferences(user: me) == ["gesture.show-trail": "off"])
        let trail = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", me]).text
        #expect(trail.contains("set \(me) gesture.enabled=off; by \(me) via keyway disable"), "\(trail)")
    }

    @Test(
        "a non-root PAM host (a screen locker's case): pamtester as the user authenticates them; another user is refused"
    )
    func nonRootPamHost() throws {
        let me = "kwtest-kd3", other = "kwtest-kd4"
        let service = "/etc/pam.d/kwtest-screen"
        defer {
            unlink(service)
            removeUsers(me, other)
            fixture.remove()
        }
        let mine = try accounts(me, other)
        let line = "\(modulePath) policy=pattern \(fixture.moduleArguments)"
        _ = FileManager.default.createFile(
            atPath: service, contents: Data("auth required \(line)\naccount required \(line)\n".utf8))
        let ok = try runAs(
            mine, "/usr/bin/pamtester", ["-v", "kwtest-screen", me, "authenticate", "acct_mgmt"], input: "2-4-9-3\n")
        #expect(ok.status == 0, "\(ok.text)")
        #expect(ok.text.contains("successfully authenticated"), "\(ok.text)")
        let refused = try runAs(
            mine, "/usr/bin/pamtester", ["-v", "kwtest-screen", other, "authenticate"], input: "2-4-9-3\n")
        #expect(refused.status != 0, "\(refused.text)")
        #expect(refused.text.contains("Permission denied"), "\(refused.text)")
        #expect(!refused.text.contains("Pattern"), "a refused user must not be prompted: \(refused.text)")
        #expect(try fixture.vault().store.attempts(user: other) == AttemptBook())
    }

    @Test("`keyway change gesture` as a non-root user: the current pattern first, then the new one")
    func nonRootChange() throws {
        let me = "kwtest-kd5"
        defer {
            removeUsers(me)
            fixture.remove()
        }
        let mine = try accounts(me)
        let change = ["--socket", fixture.socket, "change", "gesture", "--user", me, "--stdin"]
        let wrong = try runAs(mine, cliPath, change, input: "3-4-9-2\n1-6-7-2-9\n")
        #expect(wrong.status == 1, "\(wrong.text)")
        let changed = try runAs(mine, cliPath, change, input: "2-4-9-3\n1-6-7-2-9\n")
        #expect(changed.status == 0, "\(changed.text)")
        #expect(changed.text.contains("Changed the gesture of \(me)."), "\(changed.text)")
        let unlock = ["--socket", fixture.socket, "unlock", "--user", me, "--policy", "pattern", "--stdin"]
        #expect(try runAs(mine, cliPath, unlock, input: "1-6-7-2-9\n").status == 0)
        #expect(try runAs(mine, cliPath, unlock, input: "2-4-9-3\n").status != 0)
        let trail = try fixture.vault().store.auditTrail(user: me).map(\.actor)
        #expect(trail.last == "\(me) via keyway change", "\(trail)")
    }

    @Test(
        "64 parallel wrong guesses through pamtester: at most 5 reach the slow hash; the daemon's memory stays bounded")
    func parallelGuesses() throws {
        let service = "/etc/pam.d/kwtest-guess"
        defer {
            unlink(service)
            fixture.remove()
        }
        try requireIsolation()
        let counter = fixture.directory + "/count-hash.so"
        let built = try run(
            "/usr/bin/gcc",
            [
                "-O2", "-shared", "-fPIC", "-o", counter, packageRoot + "/Benchmarks/count-hash.c", "-ldl",
            ])
        #expect(built.status == 0, "\(built.text)")
        let log = fixture.directory + "/hashes.log"
        fixture.startDaemon([], environment: ["LD_PRELOAD": counter, "COUNT_HASH_LOG": log])
        // Enrolled through the daemon, so at the default cost (Argon2id, 64 MiB).
        let enroll = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "passcode", "--user", "bin", "--stdin"],
            input: "correct horse 739155\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        unlink(log)
        _ = FileManager.default.createFile(
            atPath: service,
            contents: Data("auth required \(modulePath) policy=passcode \(fixture.moduleArguments)\n".utf8))
        let guesses = try (0..<64).map { index in
            try Started(
                "/usr/bin/pamtester", ["kwtest-guess", "bin", "authenticate"], input: "wrong guess \(index)\n")
        }
        let results = guesses.map { $0.finish() }
        #expect(results.allSatisfy { $0.status != 0 })
        let hashed = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").count ?? 0
        let book = try fixture.vault().store.attempts(user: "bin")  // pamtester without a terminal: remote
        let counted = book[.passcode].consecutiveFailures + book.viewed(from: .remote)[.passcode].consecutiveFailures
        let status = try String(
            contentsOfFile: "/proc/\(fixture.daemonProcess!.processIdentifier)/status", encoding: .utf8)
        let peak =
            status.split(separator: "\n").first { $0.hasPrefix("VmHWM:") }.map {
                Int($0.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? 0
            } ?? 0
        let workers = Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        let bound = (workers * 64 + 32) * 1024
        print(
            "keywayd 64 parallel guesses: \(hashed) slow hashes, \(counted) counted, peak RSS \(peak / 1024) MiB (bound \(bound / 1024) MiB)"
        )
        // At most the limit; fewer when the pool answered some "busy" (one account holds at most half the pool), and
        // the daemon's count (the store) agrees with the independent one (the preloaded counter).
        #expect(hashed <= 5 && hashed >= 1, "\(hashed) guesses reached the slow hash")
        #expect(counted == hashed, "the store counted \(counted), the slow hash ran \(hashed) times")
        // The bound is the deployable daemon's. Under AddressSanitizer (make harden) the shadow memory and the
        // quarantine of freed blocks are the sanitizer's, so there only the counts above are checked.
        if deployableDaemon { #expect(peak > 0 && peak <= bound, "peak RSS \(peak) KiB, bound \(bound) KiB") }
    }

    @Test(
        "SIGKILL of the daemon during 200 mixed requests: integrity ok, every acknowledged enrollment kept, clients told at once"
    )
    func killedMidway() throws {
        defer { fixture.remove() }
        fixture.startDaemon()
        let vault = client
        final class Tally: @unchecked Sendable {
            let lock = NSLock()
            var acknowledged: [String] = []
            var failures: [(String, Int64)] = []
            var done = 0
        }
        let tally = Tally()
        let killer = Thread {
            while tally.lock.withLock({ tally.done }) < 100 { usleep(1000) }
            fixture.stopDaemon()
        }
        killer.start()
        DispatchQueue.concurrentPerform(iterations: 4) { lane in
            for step in 0..<50 {
                let index = lane * 50 + step
                let user = "user-\(index / 4)"
                let start = MonotonicClock.milliseconds()
                var failure: AuthenticationError?
                do throws(AuthenticationError) {
                    switch index % 4 {
                    case 0:
                        let secret = Secret(copying: Array("kw \(index) passcode x".utf8))
                        try vault.enroll(.secret(secret), of: .passcode, for: user, label: nil, by: "test")
                        tally.lock.withLock { tally.acknowledged.append(user) }
                    case 1:
                        let guess = Secret(copying: Array("wrong \(index)".utf8))
                        _ = try vault.verify(.secret(guess), of: .passcode, for: UserContext(name: user))
                    case 2: _ = try vault.status(of: user)
                    default: try vault.reset(nil, of: user, by: "test")
                    }
                } catch {
                    failure = error
                }
                let elapsed = MonotonicClock.milliseconds() - start
                tally.lock.withLock {
                    tally.done += 1
                    if let failure { tally.failures.append((failure.code.rawValue, elapsed)) }
                }
            }
        }
        while !killer.isFinished { usleep(1000) }
        let integrity = try run("/usr/bin/sqlite3", [fixture.store, "PRAGMA integrity_check"])
        #expect(integrity.output == ["ok"], "\(integrity.text)")
        let store = try fixture.vault().store
        for user in tally.acknowledged {
            #expect(
                try store.enrollment(user: user, factor: .passcode) != nil, "\(user)'s acknowledged enrollment was lost"
            )
        }
        #expect(!tally.failures.isEmpty, "no request ran after the kill")
        for (code, milliseconds) in tally.failures {
            // Requests that met the dead daemon: told so at once. Requests queued behind a verification may also
            // have been refused as not enrolled (the kill beat their enrollment); nothing else.
            #expect(["serviceUnavailable", "passcodeNotSet"].contains(code), "\(code)")
            if code == "serviceUnavailable" { #expect(milliseconds < 2000, "a client waited \(milliseconds) ms") }
        }
        print(
            "keywayd SIGKILL mid-traffic: \(tally.acknowledged.count) acknowledged enrollments kept, \(tally.failures.count) requests refused after the kill"
        )
        fixture.startDaemon()
        #expect((try? client.status(of: tally.acknowledged.first ?? "user-0")) != nil, "the next daemon does not serve")
    }

    @Test(
        "enumeration: an enrolled user, an unenrolled account and a name that does not exist look the same, before and after a lockout"
    )
    func enumeration() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("pattern", "policy=pattern")
        let people = ["alice", "daemon", "no-such-user-kw"]  // "daemon" is an account on every Debian system
        func normalized(_ run: Run) -> String {
            run.text.replacingOccurrences(of: "[0-9]", with: "#", options: .regularExpression)
        }
        for person in people {
            let account = try harness(fixture, "pattern", person, ["--acct-only"])
            #expect(account.result == "PAM_SUCCESS", "\(person): \(account.text)")
        }
        for round in [answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6"), answers("7-5-3-6", "9-5-1-4")] {
            let seen = try people.map { try harness(fixture, "pattern", $0, round) }
            #expect(Set(seen.map(normalized)).count == 1, "\(seen.map(\.text))")
            #expect(Set(seen.map(\.result)).count == 1, "\(seen.map(\.text))")
        }
        for person in people {
            let account = try harness(fixture, "pattern", person, ["--acct-only"])
            #expect(account.result == "PAM_PERM_DENIED", "\(person): \(account.text)")
        }
        let locked = try people.map { try harness(fixture, "pattern", $0, answers("2-4-9-3")) }
        #expect(locked.allSatisfy { $0.result == "PAM_MAXTRIES" }, "\(locked.map(\.text))")
        #expect(Set(locked.map(normalized)).count == 1, "\(locked.map(\.text))")
        #expect(locked.allSatisfy { !$0.text.contains("prompt:") })
    }
}
