import Foundation
import Testing

/// Real `login` in a terminal, with Keyway in front of its stack. Like the sudo tests it runs only inside
/// `scripts/test-isolated.sh`, where `/etc` is a private copy, and it still puts `/etc/pam.d/login` back byte for byte.
@Suite("real login", .serialized)
struct LoginTests {
    let fixture = PAMFixture()
    let user = "kwlogin\(getpid() % 100_000)"
    let stack = "/etc/pam.d/login"

    @Test("Ctrl-C while login waits at the sensor ends the wait at once (login leaves SIGINT at its default)")
    func interruptAtSensor() throws {
        try requireIsolation()
        let original = try Data(contentsOf: URL(fileURLWithPath: stack))
        defer {
            try? original.write(to: URL(fileURLWithPath: stack))
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        try fixture.enrollFinger(user, "right-index")
        try fixture.enrollPasscode(user, "739155")
        fixture.startDaemon()
        let keyway = "auth required \(modulePath) policy=biometrics-only \(fixture.moduleArguments) timeout=15\n"
        try Data((keyway + String(decoding: original, as: UTF8.self)).utf8).write(to: URL(fileURLWithPath: stack))

        let screen = try screenAfterCtrlCAtSensor("login \(user)")
        #expect(!screen.contains("Timed out"), "\(screen)")
        #expect(screen.contains("[exit 130]") || screen.contains("Login incorrect"), "\(screen)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: stack)) != original, "the test ran with Keyway in the stack")
    }

    @Test(
        "at a real login: a miss is said above the next prompt; the failure that locks says until when, no more prompts"
    )
    func wrongThenLocked() throws {
        try requireIsolation()
        let original = try Data(contentsOf: URL(fileURLWithPath: stack))
        defer {
            try? original.write(to: URL(fileURLWithPath: stack))
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        try fixture.enrollPattern(user, "2-4-9-3")
        fixture.startDaemon()
        // Five tries: the pattern's lock starts at the fifth consecutive failure.
        let config = fixture.writeConfig("[policy login-pattern]\nrequire = gesture*5\n")
        let keyway =
            "auth [success=done default=ignore] \(modulePath) policy=login-pattern \(config) \(fixture.moduleArguments)\n"
        try Data((keyway + String(decoding: original, as: UTF8.self)).utf8).write(to: URL(fileURLWithPath: stack))

        let terminal = try Terminal("login \(user)")
        defer { terminal.close() }
        var screen = try terminal.waitFor("Pattern (dots 1-9):")
        #expect(screen.contains("Draw your pattern by typing the dots in order"), "\(screen)")
        try terminal.type("3-4-9-2")
        screen = try terminal.waitFor("Not recognized. 4 attempts left.")
        #expect(screen.hasSuffix("Not recognized. 4 attempts left.\nPattern (dots 1-9):"), "\(screen)")
        for (guess, left) in [("6-1-8-3", "3 attempts"), ("4-3-8-1-6", "2 attempts"), ("7-5-3-6", "1 attempt")] {
            try terminal.type(guess)
            try terminal.waitFor("Not recognized. \(left) left.")
        }
        // The fifth failure locks the pattern: said at once with its end, and login's own password prompt follows.
        try terminal.type("9-5-1-4")
        screen = try terminal.waitFor("Password:")
        let lines = screen.split(separator: "\n").map(String.init)
        let lock = try #require(lines.firstIndex { $0.hasPrefix("Too many failed attempts; try again after 20") })
        #expect(lines[lock - 1] == "Not recognized.", "\(screen)")
        #expect(lines[lock].hasSuffix("seconds)."), "\(screen)")
        #expect(lines.filter { $0.hasPrefix("Pattern (dots 1-9):") }.count == 5, "a prompt after the lock: \(screen)")
        #expect(!screen.contains("0 attempts left"), "\(screen)")
    }
}
