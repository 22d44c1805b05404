import Foundation
import KeywayPlatform
import Synchronization
import Testing

@testable import KeywayProcessFixture

/// The hash workers against guesses others make at an account (docs/ARCHITECTURE.md §10, "Fair to the owner"): a
/// guess that repeats a remembered failure is answered without the slow hash, and an account's owner has a share of
/// the workers apart from everyone else's, so loops of `su victim` repeating a wrong pattern can neither lock the
/// victim nor keep the victim's own sudo waiting.
@Suite("hostile peers: a fair hash pool", .serialized)
struct FairPoolTests {
    let fixture = PAMFixture()

    /// The harness (pam_start_confdir) with `ruid` as its real uid and root as its effective one: how su and sudo
    /// run the module.
    func asStartedBy(_ ruid: String, _ user: String, _ patterns: String...) throws -> Started {
        try Started(
            "/usr/bin/setpriv",
            ["--ruid=\(ruid)", "--euid=0", "--", harnessPath] + patterns.flatMap { ["--answer", $0] }
                + [fixture.services, "pattern", user])
    }

    @Test("three loops of `su victim` repeating a wrong pattern for 60 s: the victim's own sudo succeeds every time")
    func repeatedGuesses() throws {
        try requireIsolation()
        defer {
            TestAccounts.remove("kwvictim")
            TestAccounts.remove("kwrival")
            fixture.remove()
        }
        #expect(try TestAccounts.add("kwvictim"))
        #expect(try TestAccounts.add("kwrival"))
        let victim = try TestAccounts.ids("kwvictim")
        let rival = try TestAccounts.ids("kwrival")
        fixture.service("pattern", "policy=pattern")
        // The default cost (enrolled through keywayd), so a guess that reaches the slow hash holds a worker.
        let enroll = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", "kwvictim", "--stdin"],
            input: "2-4-9-3\n")
        #expect(enroll.status == 0, "\(enroll.text)")

        let seconds = Int64(ProcessInfo.processInfo.environment["KEYWAY_FAIR_SECONDS"] ?? "") ?? 60
        let end = MonotonicClock.milliseconds() + seconds * 1000
        let guesses = Mutex<[String]>([])  // each guess's result
        let loops = (0..<3).map { _ in
            Thread {
                while MonotonicClock.milliseconds() < end {
                    let attempt = try? self.asStartedBy(rival.uid, "kwvictim", "1-6-7-2-9", "1-6-7-2-9", "1-6-7-2-9")
                        .finish()
                    guesses.withLock { $0.append(attempt?.result ?? "not run") }
                }
            }
        }
        loops.forEach { $0.start() }
        var slowest: Int64 = 0
        var owner = 0
        usleep(500_000)
        while MonotonicClock.milliseconds() < end - 1000 {
            let start = MonotonicClock.milliseconds()
            let result = try asStartedBy(victim.uid, "kwvictim", "2-4-9-3").finish()
            slowest = max(slowest, MonotonicClock.milliseconds() - start)
            owner += 1
            #expect(result.result == "PAM_SUCCESS", "the owner's own right pattern: \(result.text)")
            usleep(200_000)
        }
        while loops.contains(where: { !$0.isFinished }) { usleep(50_000) }
        let results = guesses.withLock { $0 }
        let repeats = results.count
        #expect(results.allSatisfy { $0 == "PAM_AUTH_ERR" || $0 == "PAM_MAXTRIES" }, "\(Set(results))")
        print(
            "fair pool: \(repeats) repeated wrong guesses by kwrival, \(owner) right ones by kwvictim, slowest \(slowest) ms; "
                + "results \(Set(results))")
        #expect(repeats >= 3 * seconds, "the attack made only \(repeats) guesses")
        #expect(owner >= seconds / 2, "the owner authenticated only \(owner) times")
        // Starved, the owner would wait the pool's 10 s and be answered busy; the figure itself is in the note.
        #expect(slowest < 10_000, "the owner's slowest authentication took \(slowest) ms")
        // The repeats counted nothing: the victim is not throttled, and a right pattern right after still works.
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", "kwvictim"])
        #expect(!status.text.contains("locked") && !status.text.contains("wait"), "\(status.text)")
        // Only the first wrong guess reached the slow hash and was counted; the owner's successes reset it.
        #expect(!status.text.contains("consecutive failures"), "\(status.text)")
        #expect(!fixture.daemonLog.contains("busy: answered") || fixture.daemonLog.contains("started by uid"))
    }

    @Test("every busy answer is logged with who held the places")
    func busyIsLogged() throws {
        try requireIsolation()
        defer { fixture.remove() }
        fixture.startDaemon(["--workers", "1", "--queue", "0"])
        fixture.service("pattern", "policy=pattern")
        let enroll = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", "daemon", "--stdin"],
            input: "2-4-9-3\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        // Different wrong guesses at once: one worker, no queue, so all but one are answered busy.
        let guesses = try ["1-6-7-2-9", "3-5-7-8", "1-5-9-8", "7-5-3-6"].map { pattern in
            try Started(harnessPath, answers(pattern) + [fixture.services, "pattern", "daemon"])
        }.map { $0.finish() }
        let busy = guesses.filter { $0.result == "PAM_AUTHINFO_UNAVAIL" }
        #expect(!busy.isEmpty, "\(guesses.map { $0.text })")
        let lines = fixture.daemonLog.split(separator: "\n").filter { $0.contains("busy: answered") }
        #expect(lines.count >= min(busy.count, 10), "\(fixture.daemonLog)")
        #expect(lines.allSatisfy { $0.contains("pid ") && $0.contains("about daemon") }, "\(lines)")
    }
}
