import Foundation
import KeywayCore
import Testing

@testable import KeywayProcessFixture

/// Real `sudo`, as a throwaway user whose sudoers drop-in selects a throwaway PAM service. It runs only inside
/// `scripts/test-isolated.sh`, where `/etc` is a private copy: the user, the drop-in and the service never reach the
/// real system, even if the test is killed. They are still removed afterwards, so tests do not see each other's.
@Suite("real sudo", .serialized)
struct SudoTests {
    let fixture = PAMFixture()
    let user = "kwtest\(getpid() % 100_000)"
    var service: String { "keyway-test-\(user)" }
    var sudoers: String { "/etc/sudoers.d/keyway-test-\(user)" }
    var pamFile: String { "/etc/pam.d/\(service)" }

    /// Creates the user, the sudoers drop-in (checked by visudo first) and the PAM service. With `handover`, Keyway
    /// stands in front of the password as pam_keyway(8) recommends (`[success=done default=ignore]`, then pam_unix).
    func install(policy: String, handover: Bool = false, arguments: String = "") throws {
        try requireIsolation()
        #expect(try TestAccounts.add(user))
        let rules = "Defaults:\(user) pam_service=\(service), !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n"
        try fixture.installSudoers(rules, at: sudoers)
        let auth =
            handover
            ? "auth     [success=done default=ignore] \(modulePath) policy=\(policy) \(fixture.moduleArguments) "
                + "\(arguments)\n"
                + "auth     required pam_unix.so"
            : "auth     required \(modulePath) policy=\(policy) \(fixture.moduleArguments) timeout=15"
        let stack = """
            \(auth)
            account  required \(modulePath) policy=\(policy) \(fixture.moduleArguments)
            session  required pam_permit.so

            """
        _ = FileManager.default.createFile(atPath: pamFile, contents: Data(stack.utf8))
        fixture.startDaemon()
    }

    /// Removes everything `install` made; runs even when the test failed.
    func uninstall() {
        unlink(sudoers)
        unlink(pamFile)
        TestAccounts.remove(user)
        fixture.remove()
    }

    /// `sudo -S -k id -u` as the throwaway user, with `input` on standard input.
    func sudo(_ input: String) throws -> Started {
        try Started("/usr/bin/su", [user, "-c", "sudo -S -k id -u"], input: input, separateErrors: true)
    }

    @Test("pattern: `echo PATTERN | sudo -S -k id -u` prints 0 with the right pattern, fails with a wrong one")
    func pattern() throws {
        defer { uninstall() }
        try fixture.enrollPattern(user, "2-4-9-3")
        try install(policy: "pattern")
        let right = try sudo("2-4-9-3\n").finish()
        #expect(right.status == 0, "\(right.text)")
        #expect(right.standardOutput == ["0"], "\(right.text)")
        let wrong = try sudo("3-4-9-2\n").finish()
        #expect(wrong.status != 0, "\(wrong.text)")
        #expect(wrong.standardOutput.isEmpty, "\(wrong.text)")
        // sudo passes PAM_SILENT: nothing comes on its own, but the miss leads the next prompt (which meets the end
        // of the input here).
        #expect(wrong.text.contains("Not recognized. 2 attempts left.\nPattern (dots 1-9): "), "\(wrong.text)")
    }

    @Test("in a terminal, as a person: a miss is said above the next prompt; giving up says why before the password")
    func terminal() throws {
        defer { uninstall() }
        try fixture.enrollPattern(user, "2-4-9-3")
        try install(policy: "pattern", handover: true)
        // setpriv, not su: su -c starts a new session without the terminal, and sudo needs one to ask.
        let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        defer { terminal.close() }
        // sudo's PAM_SILENT drops messages sent on their own; the grid comes with the first prompt instead.
        var screen = try terminal.waitFor("Pattern (dots 1-9):")
        #expect(screen.contains("Draw your pattern by typing the dots in order"), "\(screen)")
        try terminal.type("3-4-9-2")
        screen = try terminal.waitFor("Not recognized. 2 attempts left.")
        #expect(screen.hasSuffix("Not recognized. 2 attempts left.\nPattern (dots 1-9):"), "\(screen)")
        try terminal.type("1-4-9-2")
        try terminal.waitFor("Not recognized. 1 attempt left.")
        try terminal.type("7-4-9-2")
        // Keyway gives up and says why, once, before sudo's own password prompt; the password path is unchanged.
        screen = try terminal.waitFor("password for \(user):")
        let lines = screen.split(separator: "\n").map(String.init)
        #expect(
            Array(lines.suffix(3)) == ["Not recognized.", "Authentication failed.", "[sudo] password for \(user):"],
            "\(screen)")
        // The throwaway user has no password: sudo refuses after the one try sudoers allows.
        try terminal.type("not-the-password")
        screen = try terminal.waitFor("[exit ")
        #expect(!screen.contains("\n0\n"), "\(screen)")
    }

    @Test("next=password: the prompt says Enter uses the password; Enter goes straight to it, nothing counted or said")
    func handover() throws {
        defer { uninstall() }
        try fixture.enrollPattern(user, "2-4-9-3")
        try install(policy: "pattern", handover: true, arguments: "next=password")
        let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        defer { terminal.close() }
        var screen = try terminal.waitFor("Pattern (dots 1-9; Enter: use password):")
        // A miss first: the next prompt still offers the way out.
        try terminal.type("3-4-9-2")
        screen = try terminal.waitFor("Not recognized. 2 attempts left.")
        #expect(
            screen.hasSuffix("Not recognized. 2 attempts left.\nPattern (dots 1-9; Enter: use password):"), "\(screen)")
        try terminal.type("")
        screen = try terminal.waitFor("password for \(user):")
        let lines = screen.split(separator: "\n").map(String.init)
        // The person chose the password: no "Authentication failed." before it.
        #expect(!screen.contains("Authentication failed."), "\(screen)")
        #expect(lines.last == "[sudo] password for \(user):", "\(screen)")
        #expect(try fixture.vault().store.attempts(user: user)[.gesture].consecutiveFailures == 1, "Enter was counted")
    }

    @Test("sudo for a user with nothing enrolled: no prompt that cannot succeed; one line saying so, then the password")
    func unenrolledOwner() throws {
        defer { uninstall() }
        _ = try fixture.vault()  // the store exists, with nothing in it for this user
        try install(policy: "pattern", handover: true)
        let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        defer { terminal.close() }
        // The person proves who they are (sudo's real uid is theirs): hiding their own enrollment from them protects
        // no one. A login prompt, or su to another account, still conceals it (the harness tests, run by root).
        let screen = try terminal.waitFor("password for \(user):")
        #expect(!screen.contains("Pattern (dots"), "\(screen)")
        let lines = screen.split(separator: "\n").map(String.init)
        #expect(
            Array(lines.suffix(2)) == [
                "Not set up for you yet (`keyway enroll` sets it up).", "[sudo] password for \(user):",
            ], "\(screen)")
    }

    @Test("Ctrl-C while sudo waits at the sensor ends the wait at once, not at the sensor's timeout")
    func interruptAtSensor() throws {
        defer { uninstall() }
        try fixture.enrollFinger(user, "right-index")
        try fixture.enrollPasscode(user, "739155")
        try install(policy: "biometrics-only")  // the sensor waits 15 s
        // sudo blocks SIGINT while it authenticates; the module sees it pending and ends the wait, then sudo acts
        // on it as on Ctrl-C at a prompt.
        let screen = try screenAfterCtrlCAtSensor(
            "setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        #expect(!screen.contains("Timed out"), "\(screen)")
        #expect(!screen.contains("\n0\n"), "\(screen)")
    }

    @Test("biometrics-or-passcode in a terminal: a touch lets sudo through; three strangers lead to the passcode")
    func sensorTouch() throws {
        defer { uninstall() }
        try fixture.enrollFinger(user, "right-index")
        try fixture.enrollPasscode(user, "739155")
        try install(policy: "biometrics-or-passcode")
        // In tmux: the terminal's master is held by root's tmux server, in the run's local logind session
        // (scripts/test-isolated.sh; pam_keyway(8), LOCAL AND REMOTE).
        let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        _ = try terminal.waitFor("Place your finger on the sensor.")
        let touch = try run(
            cliPath, ["sensor", "present", user, "right-index", "--wait", "15", "--sensor", fixture.sensor])
        #expect(touch.status == 0, "\(touch.text)")
        let screen = try terminal.waitFor("\n0\n")
        #expect(screen.contains("\n0\n"), "\(screen)")
        let fallback = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        _ = try fallback.waitFor("Place your finger on the sensor.")
        for _ in 0..<3 {
            _ = try run(cliPath, ["sensor", "stranger", "--wait", "15", "--sensor", fixture.sensor])
        }
        _ = try fallback.waitFor("Passcode")
        try fallback.type("739155")
        let second = try fallback.waitFor("\n0\n")
        #expect(second.contains("Passcode"), "\(second)")
    }

    @Test("biometrics-or-passcode with `sudo -S` and no terminal: remote, so the passcode at once, never the sensor")
    func noTerminalIsRemote() throws {
        defer { uninstall() }
        try fixture.enrollFinger(user, "right-index")
        try fixture.enrollPasscode(user, "739155")
        try install(policy: "biometrics-or-passcode")
        let result = try sudo("739155\n").finish()
        #expect(result.status == 0, "\(result.text)")
        #expect(result.standardOutput == ["0"], "\(result.text)")
        #expect(!result.text.contains("Place your finger"), "\(result.text)")
    }
}
