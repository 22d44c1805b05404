import Foundation
import KeywayCore
import Testing

@testable import KeywayProcessFixture

/// `first of (biometric, pattern)` in front of real `sudo`, typed in a real terminal (docs/ARCHITECTURE.md §14):
/// keywayd arms the sensor while sudo's one prompt waits; `keyway sensor …` from another process is the finger.
/// Inside `scripts/test-isolated.sh` only; the users, drop-ins and services are removed afterwards.
@Suite("first of: real sudo", .serialized)
struct FirstOfSudoTests {
    let fixture = PAMFixture()
    let user = "kwfirst\(getpid() % 100_000)"
    let other = "kwother\(getpid() % 100_000)"
    static let prompt = "Touch the sensor and press Enter, or type your pattern (dots 1-9; Enter: use password):"

    /// A user with a pattern, a passcode and a finger, whose sudo asks `first of (biometric, pattern)` in front of
    /// pam_unix.
    func install(_ name: String, arguments: String = "") throws {
        try requireIsolation()
        #expect(try TestAccounts.add(name))
        try fixture.enrollPattern(name, "2-4-9-3")
        try fixture.enrollPasscode(name, "739155")
        try fixture.enrollFinger(name, "right-index")
        let config = fixture.writeConfig("[policy either]\nrequire = first of (biometric, gesture)\n")
        let rules =
            "Defaults:\(name) pam_service=keyway-first-\(name), !lecture, passwd_tries=1\n\(name) ALL=(ALL) ALL\n"
        try fixture.installSudoers(rules, at: "/etc/sudoers.d/keyway-first-\(name)")
        let line = "\(modulePath) policy=either \(config) \(fixture.moduleArguments) \(arguments)"
        let stack = """
            auth     [success=done default=ignore] \(line) next=password
            auth     required pam_unix.so
            account  required \(line)
            session  required pam_permit.so

            """
        _ = FileManager.default.createFile(atPath: "/etc/pam.d/keyway-first-\(name)", contents: Data(stack.utf8))
        fixture.startDaemon()
    }

    func uninstall() {
        for name in [user, other] {
            unlink("/etc/sudoers.d/keyway-first-\(name)")
            unlink("/etc/pam.d/keyway-first-\(name)")
            TestAccounts.remove(name)
        }
        fixture.remove()
    }

    func sudo(as name: String) throws -> Terminal {
        try Terminal("setpriv --reuid \(name) --regid \(name) --init-groups sudo -k id -u")
    }

    /// `keyway sensor EVENT…` as root, as the finger; waits up to 5 s for an authentication at the sensor.
    @discardableResult
    func sensor(_ event: [String], wait: Bool = true) throws -> Run {
        try run(cliPath, ["sensor"] + event + (wait ? ["--wait", "5"] : []) + ["--sensor", fixture.sensor])
    }

    func failures(_ name: String, _ factor: FactorKind) throws -> Int {
        try fixture.vault().store.attempts(user: name)[factor].consecutiveFailures
    }

    @Test("a touch, then Enter, at sudo's one prompt: root")
    func touchThenEnter() throws {
        defer { uninstall() }
        try install(user)
        let terminal = try sudo(as: user)
        defer { terminal.close() }
        try terminal.waitFor(Self.prompt)
        let touched = try sensor(["present", user, "right-index"])
        #expect(touched.status == 0, "\(touched.text)")
        try terminal.type("")
        let screen = try terminal.waitFor("[exit ")
        #expect(screen.contains("\n0\n[exit 0]"), "\(screen)")
        #expect(!screen.contains("password for"), "\(screen)")
    }

    @Test("typing the pattern while the sensor is armed: root, and the sensor is free again at once")
    func patternWhileArmed() throws {
        defer { uninstall() }
        try install(user)
        let terminal = try sudo(as: user)
        defer { terminal.close() }
        try terminal.waitFor(Self.prompt)
        try terminal.type("2-4-9-3")
        let screen = try terminal.waitFor("[exit ")
        #expect(screen.contains("\n0\n[exit 0]"), "\(screen)")
        // The module closed its arming connection: keywayd no longer listens, so a touch finds nobody.
        let late = try sensor(["present", user, "right-index"], wait: false)
        #expect(late.status != 0 && late.text.contains("no authentication is waiting"), "\(late.text)")
    }

    @Test("a wrong touch, then the right pattern: root, with the touch counted once")
    func wrongTouchThenPattern() throws {
        defer { uninstall() }
        try install(user)
        let terminal = try sudo(as: user)
        defer { terminal.close() }
        try terminal.waitFor(Self.prompt)
        #expect(try sensor(["stranger"]).status == 0)
        try terminal.type("")
        var screen = try terminal.waitFor("Not recognized. 2 attempts left.")
        #expect(screen.hasSuffix("Not recognized. 2 attempts left.\n\(Self.prompt)"), "\(screen)")
        try terminal.type("2-4-9-3")
        screen = try terminal.waitFor("[exit ")
        #expect(screen.contains("\n0\n[exit 0]"), "\(screen)")
        #expect(try failures(user, .biometric) == 1)
        #expect(try failures(user, .gesture) == 0)
    }

    @Test("a touch made before the prompt does not count: Enter then finds nothing, and nothing is counted")
    func touchBeforePrompt() throws {
        defer { uninstall() }
        try install(user)
        let early = try sensor(["present", user, "right-index"], wait: false)
        #expect(early.status != 0, "\(early.text)")
        let terminal = try sudo(as: user)
        defer { terminal.close() }
        try terminal.waitFor(Self.prompt)
        try terminal.type("y")  // a one-character confirmation, as an askpass agent that refuses empty entries sends
        var screen = try terminal.waitFor("Nothing was presented to the sensor.")
        #expect(screen.hasSuffix("Nothing was presented to the sensor.\n\(Self.prompt)"), "\(screen)")
        try terminal.type("")  // Enter with nothing presented: the password, as offered
        screen = try terminal.waitFor("password for \(user):")
        #expect(!screen.contains("\n0\n"), "\(screen)")
        #expect(try failures(user, .biometric) == 0)
    }

    @Test("a touch while another user's authentication holds the sensor does not authenticate this one")
    func anotherUsersArming() throws {
        defer { uninstall() }
        try install(user)
        try install(other)
        let first = try sudo(as: other)
        defer { first.close() }
        try first.waitFor(Self.prompt)
        // The sensor is armed for the other user: this sudo waits in line for it (its prompt offers the sensor, and
        // the holder's lease would end after the timeout for it), never told "in use".
        let second = try sudo(as: user)
        defer { second.close() }
        var screen = try second.waitFor(Self.prompt)
        #expect(!screen.contains("the sensor is in use"), "\(screen)")
        // This user's finger goes to the authentication holding the sensor when it is touched, where it is a
        // stranger's: a touch counts only for the authentication the sensor was listening for.
        #expect(try sensor(["present", user, "right-index"]).status == 0)
        try second.type("")
        screen = try second.waitFor("password for \(user):")
        #expect(!screen.contains("\n0\n"), "\(screen)")
        try first.type("")
        screen = try first.waitFor("Not recognized. 2 attempts left.")
        #expect(try failures(other, .biometric) == 1)
        #expect(try failures(user, .biometric) == 0)
    }

    @Test(
        "read-tty with `sudo -S` and no terminal: remote, so the pattern alone on standard input (no sensor, no tty)"
    )
    func readTTYWithStandardInput() throws {
        defer { uninstall() }
        try install(user, arguments: "read-tty")
        let result = try Started(
            "/usr/bin/su", [user, "-c", "sudo -S -k id -u"], input: "2-4-9-3\n", separateErrors: true
        )
        .finish()
        #expect(result.status == 0, "\(result.text)")
        #expect(result.standardOutput == ["0"], "\(result.text)")
        #expect(!result.text.contains("Touch the sensor"), "\(result.text)")
        #expect(result.text.contains("Pattern"), "\(result.text)")
    }
}
