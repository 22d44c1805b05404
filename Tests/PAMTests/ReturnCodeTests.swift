import Foundation
import KeywayCore
import KeywayGesture
import KeywayRuntime
import KeywayStore
import Testing

@testable import KeywayProcessFixture

/// Every row of the outcome → PAM code table in pam_keyway(8), through the real libpam (pam_start_confdir)
/// in a C host process.
@Suite("PAM return codes through libpam", .serialized)
struct ReturnCodeTests {
    let fixture = PAMFixture()

    init() throws {
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")
        try fixture.enrollFinger("alice", "right-index")
        fixture.service("pattern", "policy=pattern")
        fixture.service("bio", "policy=biometrics-only timeout=2")
        fixture.service("bio-or-code", "policy=biometrics-or-passcode timeout=2")
        fixture.service("ignore-alone", "policy=pattern unenrolled=ignore")
        // PAM_IGNORE is seen through the stack: the next module decides only when pam_keyway ignored the user.
        let ignoring =
            "auth requisite \(modulePath) \(fixture.moduleArguments) policy=pattern unenrolled=ignore\n"
            + "auth required pam_permit.so\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/ignore", contents: Data(ignoring.utf8))
    }

    @Test("success: the right pattern → PAM_SUCCESS, after the numbered grid")
    func success() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(result.output.first == "info: Draw your pattern by typing the dots in order, e.g. 2-7-6-1:")
        #expect(result.text.contains("  1 2 3\n  4 5 6\n  7 8 9\nprompt: Pattern (dots 1-9): "))
    }

    @Test("failure: three wrong patterns → PAM_AUTH_ERR, saying how many attempts remain")
    func failure() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "pattern", "alice", answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6"))
        #expect(result.result == "PAM_AUTH_ERR", "\(result.text)")
        #expect(result.output.contains("error: Not recognized. 2 attempts left."))
        #expect(result.output.contains("error: Not recognized. 1 attempt left."))
        for secret in ["3-4-9-2", "6-1-8-3", "4-3-8-1-6", "3492", "2-4-9-3"] { #expect(!result.text.contains(secret)) }
    }

    @Test(
        "locked out: the 5th failure says so at once; then PAM_MAXTRIES, saying until when; acct_mgmt → PAM_PERM_DENIED"
    )
    func lockedOut() throws {
        defer { fixture.remove() }
        _ = try harness(fixture, "pattern", "alice", answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6"))
        // The failure that triggers the lockout does not lie: no "attempts left", no third prompt (whose answer,
        // even a right one, would only be discarded), and the lock's end, at once.
        let triggering = try harness(fixture, "pattern", "alice", answers("7-5-3-6", "9-5-1-4", "2-4-9-3"))
        #expect(triggering.result == "PAM_MAXTRIES", "\(triggering.text)")
        #expect(triggering.output.filter { $0.hasPrefix("prompt:") }.count == 2, "\(triggering.text)")
        #expect(triggering.output.contains("error: Not recognized. 2 attempts left."), "\(triggering.text)")
        #expect(triggering.output.contains("error: Not recognized."), "\(triggering.text)")
        #expect(!triggering.text.contains("1 attempt left"), "\(triggering.text)")
        #expect(triggering.text.contains("error: Too many failed attempts; try again after "), "\(triggering.text)")
        #expect(
            triggering.text.firstMatch(of: /try again after \d{4}-\d\d-\d\dT/) == nil,
            "the time is local, not a UTC stamp: \(triggering.text)")
        let result = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(result.result == "PAM_MAXTRIES", "\(result.text)")
        #expect(result.text.contains("error: Too many failed attempts; try again after "), "\(result.text)")
        #expect(result.text.contains("seconds)."))
        #expect(!result.text.contains("prompt:"))
        let account = try harness(fixture, "pattern", "alice", ["--acct-only"])
        #expect(account.result == "PAM_PERM_DENIED", "\(account.text)")
    }

    @Test("acct_mgmt for a user who is not locked → PAM_SUCCESS")
    func accountFine() throws {
        defer { fixture.remove() }
        #expect(try harness(fixture, "pattern", "alice", ["--acct-only"]).result == "PAM_SUCCESS")
    }

    @Test("an account stack alone (cron's) after failures: PAM_SUCCESS, and the count is kept, never reset")
    func accountKeepsCounts() throws {
        defer { fixture.remove() }
        let wrong = try harness(fixture, "pattern", "alice", answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6"))
        #expect(wrong.result == "PAM_AUTH_ERR", "\(wrong.text)")
        for _ in 0..<5 {
            let account = try harness(fixture, "pattern", "alice", ["--acct-only"])
            #expect(account.result == "PAM_SUCCESS", "\(account.text)")
        }
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", "alice"])
        #expect(
            status.text.contains("gesture: enrolled") && status.text.contains("3 consecutive failures"),
            "\(status.text)")
        // Two more wrong patterns make five in a row: the count the account calls left alone locks.
        let more = try harness(fixture, "pattern", "alice", answers("7-5-3-6", "9-5-1-4"))
        #expect(more.result == "PAM_MAXTRIES", "\(more.text)")
    }

    @Test("no pattern enrolled: asked, hashed, throttled and refused exactly like anyone else (no enumeration)")
    func notEnrolledIsConcealed() throws {
        defer { fixture.remove() }
        // The second round's last wrong pattern is the 5th counted failure (the repeat is not counted): it locks both.
        for (wrong, expected) in [
            (answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6"), "PAM_AUTH_ERR"),
            (answers("7-5-3-6", "7-5-3-6", "9-5-1-4"), "PAM_MAXTRIES"),
        ] {
            let stranger = try harness(fixture, "pattern", "bob", wrong)
            let member = try harness(fixture, "pattern", "alice", wrong)
            #expect(stranger.result == expected, "\(stranger.text)")
            // The same lines; the lock's end differs only by the seconds between the two runs.
            let same = { (run: Run) in
                run.output.map { $0.replacingOccurrences(of: "[0-9]", with: "#", options: .regularExpression) }
            }
            #expect(same(stranger) == same(member), "bob:\n\(stranger.text)\nalice:\n\(member.text)")
        }
        // Five distinct wrong patterns each (the repeat was not counted): both are now made to wait.
        let stranger = try harness(fixture, "pattern", "bob", answers("2-4-9-3"))
        let member = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(stranger.result == "PAM_MAXTRIES" && member.result == "PAM_MAXTRIES", "\(stranger.text)")
        #expect(try fixture.vault().store.attempts(user: "bob")[.gesture].consecutiveFailures == 5)
    }

    @Test("no finger enrolled → PAM_AUTHINFO_UNAVAIL at once, without waiting at the sensor")
    func biometricNotEnrolled() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "bio", "bob")
        #expect(result.result == "PAM_AUTHINFO_UNAVAIL", "\(result.text)")
        #expect(!result.text.contains("Place your finger"))
    }

    @Test("unenrolled=ignore → PAM_IGNORE for a user with nothing enrolled, never success")
    func unenrolledIgnore() throws {
        defer { fixture.remove() }
        // Alone in the stack, an ignoring module leaves libpam with no decision: it fails, never succeeds.
        let alone = try harness(fixture, "ignore-alone", "bob", answers("2-4-9-3"))
        #expect(alone.result != "PAM_SUCCESS" && alone.result != nil, "\(alone.text)")
        #expect(!alone.text.contains("prompt:"))
        // Followed by pam_permit, bob passes only because pam_keyway returned PAM_IGNORE (requisite stops on failure).
        #expect(try harness(fixture, "ignore", "bob", answers("2-4-9-3")).result == "PAM_SUCCESS")
        #expect(try harness(fixture, "ignore", "alice", answers("2-4-9-3")).result == "PAM_SUCCESS")
        #expect(
            try harness(fixture, "ignore", "alice", answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6")).result == "PAM_AUTH_ERR"
        )
    }

    @Test("a remote session cannot use the sensor → PAM_AUTHINFO_UNAVAIL; biometrics-or-passcode asks the passcode")
    func remoteSession() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "bio", "alice", ["--rhost", "203.0.113.9"])
        #expect(result.result == "PAM_AUTHINFO_UNAVAIL", "\(result.text)")
        let fallback = try harness(fixture, "bio-or-code", "alice", ["--rhost", "203.0.113.9"] + answers("739155"))
        #expect(fallback.result == "PAM_SUCCESS", "\(fallback.text)")
        #expect(fallback.text.contains("prompt: Passcode: "))
    }

    @Test("a terminal that utmp says is logged in from another host is remote, as sudo inside SSH; a local one is not")
    func remoteByUtmp() throws {
        defer { fixture.remove() }
        // utmp is a file of the test's own, read by the harness's process alone (`--utmp`): a system-wide one would
        // be written by every sshd and tmux of the tests running meanwhile.
        let utmp = fixture.directory + "/utmp"
        _ = FileManager.default.createFile(atPath: utmp, contents: nil)
        let remoteLine = "pts/kwr\(getpid() % 1000)"
        let localLine = "pts/kwl\(getpid() % 1000)"
        #expect(try run(harnessPath, ["--utmp", utmp, "--utmp-add", remoteLine, "203.0.113.7"]).status == 0)
        #expect(try run(harnessPath, ["--utmp", utmp, "--utmp-add", localLine, ":0"]).status == 0)
        let remote = try harness(
            fixture, "bio-or-code", "alice", ["--utmp", utmp, "--tty", "/dev/" + remoteLine] + answers("739155"))
        #expect(remote.result == "PAM_SUCCESS", "\(remote.text)")
        #expect(!remote.text.contains("Place your finger"), "\(remote.text)")
        #expect(remote.text.contains("prompt: Passcode: "))
        #expect(
            try harness(fixture, "bio", "alice", ["--utmp", utmp, "--tty", "/dev/" + remoteLine]).result
                == "PAM_AUTHINFO_UNAVAIL")
        // A local one: the harness's own terminal (held in the run's local session); the utmp line of ":0" alone
        // proves nothing.
        #expect(
            try harness(fixture, "bio", "alice", ["--utmp", utmp, "--tty", "/dev/" + localLine]).result
                == "PAM_AUTHINFO_UNAVAIL")
        let local = try Started(harnessPath, [fixture.services, "bio", "alice"])
        _ = try run(cliPath, ["sensor", "present", "alice", "right-index", "--wait", "10", "--sensor", fixture.sensor])
        #expect(local.finish().result == "PAM_SUCCESS")
    }

    @Test("the person gives up (no reply) → PAM_CONV_ERR; the conversation fails → PAM_CONV_ERR")
    func cancelAndConversationFailure() throws {
        defer { fixture.remove() }
        #expect(try harness(fixture, "pattern", "alice", ["--null-answer"]).result == "PAM_CONV_ERR")
        #expect(try harness(fixture, "pattern", "alice", ["--conv-error"]).result == "PAM_CONV_ERR")
    }

    @Test("a hostile 100,000-byte reply is refused → PAM_CONV_ERR, no crash")
    func hugeReply() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "pattern", "alice", ["--huge-answer", "100000"])
        #expect(result.status == 0)
        #expect(result.result == "PAM_CONV_ERR", "\(result.text)")
    }

    @Test("malformed replies (letters, control bytes) are rejected with a reason and not counted")
    func malformedReplies() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "pattern", "alice", answers("1-a-3", "1-2-\u{1b}[2J", "2-4-9-3"))
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(result.output.filter { $0 == "error: Use the dot numbers 1 to 9 (for example 2-7-6-1)." }.count == 2)
    }

    @Test(
        "configuration errors fail closed → PAM_SERVICE_ERR",
        arguments: [
            "policy=pattern polcy=pattern", "policy=no-such-policy", "policy=pattern config=/etc/keyway/keyway.conf",
            "policy=pattern timeout=0", "policy=pattern unenrolled=maybe", "policy=pattern socket=relative/path",
            "policy=pattern failmode=open", "policy=pattern lockout=deny", "policy=pattern failmode=safe failmode=safe",
            // Given twice: refused, never "the last one wins". store= was replaced by socket= (keywayd opens it).
            "policy=passcode policy=pattern", "policy=pattern store=/tmp/elsewhere.db", "policy=pattern debug debug",
            // next= is shown in a prompt: words only.
            "policy=pattern next=", "policy=pattern next=Password", "policy=pattern next=pass\u{1b}[2J",
            "policy=pattern next=a-very-long-name-for-a-module",
        ])
    func configurationErrors(arguments: String) throws {
        defer { fixture.remove() }
        let text = "auth required \(modulePath) \(arguments)\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/broken", contents: Data(text.utf8))
        let result = try harness(fixture, "broken", "alice", answers("2-4-9-3"))
        #expect(result.result == "PAM_SERVICE_ERR", "\(result.text)")
        #expect(result.text.contains("Keyway is not available (see the system log)."))
        #expect(!result.text.contains("prompt:"))
    }

    @Test(
        "store problems: keywayd refuses to start, naming the file; the module fails closed → PAM_AUTHINFO_UNAVAIL",
        arguments: [
            "group-readable", "symlink", "not-a-store",
        ])
    func storeErrors(problem: String) throws {
        defer { fixture.remove() }
        fixture.stopDaemon()
        var store = fixture.store
        var expected = "it is accessible to group or others"
        switch problem {
        case "group-readable": chmod(fixture.store, 0o640)
        case "not-a-store":
            store = fixture.directory + "/lib/other.db"
            #expect(try run("/usr/bin/sqlite3", [store, "CREATE TABLE t(x)"]).status == 0)
            chmod(store, 0o600)
            expected = "it is not a Keyway store"
        default:
            symlink(fixture.store, fixture.directory + "/lib/link.db")
            store = fixture.directory + "/lib/link.db"
            expected = "symbolic link"
        }
        let before = FileManager.default.contents(atPath: fixture.store)
        let daemon = try run(daemonPath, ["--socket", fixture.socket, "--store", store, "--idle-exit", "5"])
        #expect(daemon.status == 74, "\(daemon.text)")
        #expect(daemon.text.contains("keywayd: cannot open the store: Keyway store \(store)"), "\(daemon.text)")
        #expect(daemon.text.contains(expected), "\(daemon.text)")
        let text = "auth required \(modulePath) policy=pattern \(fixture.moduleArguments)\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/store", contents: Data(text.utf8))
        let result = try harness(fixture, "store", "alice", answers("2-4-9-3"))
        #expect(result.result == "PAM_AUTHINFO_UNAVAIL", "\(result.text)")
        #expect(result.text.contains("Keyway is not available (see the system log)."), "\(result.text)")
        #expect(!result.text.contains("prompt:"))
        #expect(FileManager.default.contents(atPath: fixture.store) == before)
    }

    @Test("a store that fails while reading counters → PAM_SYSTEM_ERR from auth and account, with the reason logged")
    func storeFailsMidway() throws {
        defer { fixture.remove() }
        #expect(try run("/usr/bin/sqlite3", [fixture.store, "DROP TABLE attempts"]).status == 0)
        let auth = try harness(fixture, "pattern", "alice", answers("2-4-9-3"))
        #expect(auth.result == "PAM_SYSTEM_ERR", "\(auth.text)")
        #expect(!auth.text.contains("prompt:"))
        #expect(try harness(fixture, "pattern", "alice", ["--acct-only"]).result == "PAM_SYSTEM_ERR")
        #expect(try harness(fixture, "bio-or-code", "alice", answers("739155")).result == "PAM_SYSTEM_ERR")
    }

    @Test("PAM_SILENT (sudo): nothing sent on its own; what happened leads the next prompt; the last word says why")
    func silent() throws {
        defer { fixture.remove() }
        let grid = GestureAuthenticator.grid.split(separator: "\n").map(String.init)
        let result = try harness(fixture, "pattern", "alice", ["--silent"] + answers("3-4-9-2", "2-4-9-3"))
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(!result.text.contains("info:") && !result.text.contains("error:"), "\(result.text)")
        // The harness prints a prompt's lines as they come: the first prompt carries the grid, the second the miss.
        let shown = Array(result.output.dropLast())
        #expect(
            shown == ["prompt: " + grid[0]] + grid.dropFirst() + ["Pattern (dots 1-9): "]
                + ["prompt: Not recognized. 2 attempts left.", "Pattern (dots 1-9): "], "\(result.output)")

        let failed = try harness(
            fixture, "pattern", "alice", ["--silent"] + answers("3-4-9-2", "1-4-9-2", "7-4-9-2"))
        #expect(failed.result == "PAM_AUTH_ERR", "\(failed.text)")
        // Given up: the one message sent under PAM_SILENT, so the person knows why the next module (sudo's password)
        // is asking.
        let last = failed.output.suffix(3)
        #expect(Array(last.prefix(2)) == ["error: Not recognized.", "Authentication failed."], "\(failed.output)")
        #expect(!failed.text.contains("info:"), "\(failed.text)")
    }

    @Test("biometrics-only: a touch sent by `keyway sensor` from another process → PAM_SUCCESS")
    func sensorTouch() throws {
        defer { fixture.remove() }
        let waiting = try Started(harnessPath, [fixture.services, "bio", "alice"])
        let touch = try run(
            cliPath, ["sensor", "present", "alice", "right-index", "--wait", "10", "--sensor", fixture.sensor])
        let result = waiting.finish()
        #expect(touch.status == 0, "\(touch.text)")
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(result.output.first == "info: Place your finger on the sensor.")
    }

    @Test("unplugging the sensor while an authentication waits answers the sender and ends the wait")
    func unplugWhileWaiting() throws {
        defer { fixture.remove() }
        let waiting = try Started(harnessPath, [fixture.services, "bio", "alice"])
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: fixture.sensor + "/sensor.sock") {
            usleep(50_000)  // until it listens at the sensor
        }
        let unplug = try run(cliPath, ["sensor", "unplug", "--wait", "10", "--sensor", fixture.sensor])
        let result = waiting.finish()
        #expect(unplug.status == 0, "\(unplug.text)")
        #expect(result.result == "PAM_AUTHINFO_UNAVAIL", "\(result.text)")
        #expect(result.text.contains("the sensor was unplugged"), "\(result.text)")
        #expect(FileManager.default.fileExists(atPath: fixture.sensor + "/sensor-unplugged"))
    }

    @Test("the sensor is taken in turn: a second wait queues behind the first; a `first of` joins the line too")
    func sensorBusy() throws {
        defer { fixture.remove() }
        fixture.service("bio-long", "policy=biometrics-only timeout=15")
        let config = fixture.writeConfig("[policy either]\nrequire = first of (biometric, gesture)\n")
        fixture.service("either", "policy=either \(config)")
        let first = try Started(harnessPath, [fixture.services, "bio-long", "alice"])
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: fixture.sensor + "/sensor.sock") {
            usleep(50_000)  // until keywayd listens at the sensor for the first one
        }
        // A `first of` prompt is armed at once and waits in the sensor's line meanwhile (never told "in use"); the
        // pattern typed at its prompt succeeds before its turn comes.
        let either = try harness(fixture, "either", "alice", answers("2-4-9-3"))
        #expect(either.result == "PAM_SUCCESS", "\(either.text)")
        #expect(!either.text.contains("the sensor is in use"), "\(either.text)")
        #expect(either.text.contains("Touch the sensor"), "\(either.text)")
        // A second wait at the sensor queues (keywayd owns the sensor, first come first served).
        let second = try Started(harnessPath, [fixture.services, "bio-long", "alice"])
        usleep(300_000)
        let touch = try run(
            cliPath, ["sensor", "present", "alice", "right-index", "--wait", "10", "--sensor", fixture.sensor])
        #expect(touch.status == 0, "\(touch.text)")
        #expect(first.finish().result == "PAM_SUCCESS")
        let again = try run(
            cliPath, ["sensor", "present", "alice", "right-index", "--wait", "10", "--sensor", fixture.sensor])
        #expect(again.status == 0, "\(again.text)")
        #expect(second.finish().result == "PAM_SUCCESS")
    }

    @Test("under PAM_SILENT the sensor instruction is still shown: without it nobody knows to touch the sensor")
    func silentInstruction() throws {
        defer { fixture.remove() }
        let waiting = try Started(harnessPath, ["--silent", fixture.services, "bio", "alice"])
        _ = try run(cliPath, ["sensor", "stranger", "--wait", "10", "--sensor", fixture.sensor])
        _ = try run(cliPath, ["sensor", "present", "alice", "right-index", "--wait", "10", "--sensor", fixture.sensor])
        let result = waiting.finish()
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(result.output.filter { $0 == "info: Place your finger on the sensor." }.count == 2, "\(result.text)")
        #expect(!result.text.contains("error:"), "\(result.text)")
    }

    @Test("biometrics-only: nothing presented before the timeout → PAM_AUTHINFO_UNAVAIL, saying why")
    func sensorTimeout() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "bio", "alice")
        #expect(result.result == "PAM_AUTHINFO_UNAVAIL", "\(result.text)")
        #expect(
            result.text.contains(
                "error: Timed out waiting for the person (nothing was presented to the sensor within 2 seconds)."),
            "\(result.text)")
    }

    @Test("biometrics-only: the fallback chosen at the sensor → PAM_AUTH_ERR; biometrics-or-passcode goes on")
    func sensorFallback() throws {
        defer { fixture.remove() }
        let only = try Started(harnessPath, [fixture.services, "bio", "alice"])
        _ = try run(cliPath, ["sensor", "fallback", "--wait", "10", "--sensor", fixture.sensor])
        #expect(only.finish().result == "PAM_AUTH_ERR")
        let either = try Started(harnessPath, answers("739155") + [fixture.services, "bio-or-code", "alice"])
        _ = try run(cliPath, ["sensor", "fallback", "--wait", "10", "--sensor", fixture.sensor])
        let result = either.finish()
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(result.text.contains("prompt: Passcode: "))
    }

    @Test("an unplugged sensor → biometrics-only PAM_AUTHINFO_UNAVAIL at once; the passcode still works")
    func unplugged() throws {
        defer { fixture.remove() }
        #expect(try run(cliPath, ["sensor", "unplug", "--sensor", fixture.sensor]).status == 0)
        #expect(try harness(fixture, "bio", "alice").result == "PAM_AUTHINFO_UNAVAIL")
        #expect(try harness(fixture, "bio-or-code", "alice", answers("739155")).result == "PAM_SUCCESS")
        #expect(try run(cliPath, ["sensor", "plug", "--sensor", fixture.sensor]).status == 0)
    }

    @Test("1,000 start/authenticate/end cycles in one process: no crash, no growing memory")
    func thousandCycles() throws {
        defer { fixture.remove() }
        let result = try harness(fixture, "pattern", "alice", ["--cycles", "1000"] + answers("2-4-9-3"))
        #expect(result.status == 0, "\(result.text)")
        let rss = result.output.compactMap { line -> Int? in
            guard line.hasPrefix("cycle ") else { return nil }
            #expect(line.contains("PAM_SUCCESS"), "\(line)")
            return Int(line.split(separator: " ").last ?? "")
        }
        #expect(rss.count == 3, "\(result.text)")
        print("pam_keyway 1,000 cycles: RSS kB at cycles 1, 100, 1000: \(rss)")
        if rss.count == 3 {
            // After warm-up (cycle 100), 900 more cycles may not add more than 1 MB.
            #expect(rss[2] - rss[1] < 1024, "RSS kB at cycles 1, 100, 1000: \(rss)")
        }
    }
}
