import Foundation
import Testing

@testable import KeywayProcessFixture

/// Real `login` in a terminal, with Keyway in front of its stack. Like the sudo tests it runs only inside
/// `scripts/test-isolated.sh`, where `/etc` is a private copy, and it still puts `/etc/pam.d/login` back byte for byte.
@Suite("real login", .serialized)
struct LoginTests {
    let fixture = PAMFixture()
    let user = "kwlogin\(getpid() % 100_000)"
    let stack = "/etc/pam.d/login"

    /// Keyway's line in front of login's own stack for the throwaway user: `install` enrolls, starts keywayd and
    /// returns the line; `body` runs with it in place. The stack, the user and the fixture are put back whatever
    /// happens.
    func withKeywayInLogin(_ install: () throws -> String, _ body: () throws -> Void) throws {
        try requireIsolation()
        systemStackLock.lock()  // ExampleStackTests replaces /etc/pam.d/login too, beside this suite
        defer { systemStackLock.unlock() }
        let original = try Data(contentsOf: URL(fileURLWithPath: stack))
        defer {
            try? original.write(to: URL(fileURLWithPath: stack))
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        let keyway = try install()
        try Data((keyway + String(decoding: original, as: UTF8.self)).utf8).write(to: URL(fileURLWithPath: stack))
        try body()
        #expect(try Data(contentsOf: URL(fileURLWithPath: stack)) != original, "the test ran with Keyway in the stack")
    }

    @Test("Ctrl-C while login waits at the sensor ends the wait at once (login leaves SIGINT at its default)")
    func interruptAtSensor() throws {
        try withKeywayInLogin {
            try fixture.enrollFinger(user, "right-index")
            try fixture.enrollPasscode(user, "739155")
            fixture.startDaemon()
            return "auth required \(modulePath) policy=biometrics-only \(fixture.moduleArguments) timeout=15\n"
        } _: {
            let screen = try screenAfterCtrlCAtSensor("login \(user)")
            #expect(!screen.contains("Timed out"), "\(screen)")
            #expect(screen.contains("[exit 130]") || screen.contains("Login incorrect"), "\(screen)")
        }
    }

    @Test(
        "at a real login: a miss is said above the next prompt; the failure that locks says until when, no more prompts"
    )
    func wrongThenLocked() throws {
        try withKeywayInLogin {
            try fixture.enrollPattern(user, "2-4-9-3")
            fixture.startDaemon()
            // Five tries: the pattern's lock starts at the fifth consecutive failure.
            let config = fixture.writeConfig("[policy login-pattern]\nrequire = gesture*5\n")
            return "auth [success=done default=ignore] \(modulePath) policy=login-pattern \(config) "
                + "\(fixture.moduleArguments)\n"
        } _: {
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
            let lock = try #require(lines.firstIndex { $0.hasPrefix("Too many failed attempts; try again after ") })
            #expect(lines[lock - 1] == "Not recognized.", "\(screen)")
            #expect(lines[lock].hasSuffix("seconds)."), "\(screen)")
            #expect(
                lines.filter { $0.hasPrefix("Pattern (dots 1-9):") }.count == 5, "a prompt after the lock: \(screen)")
            #expect(!screen.contains("0 attempts left"), "\(screen)")
        }
    }

    /// With `first of (biometric, gesture)` and `read-tty` in front of login's own stack, for a user with a finger, a
    /// pattern and a passcode: runs `body` on `login USER` in a terminal once the no-Enter prompt shows.
    func atReadTTYPrompt(_ body: (Terminal) throws -> Void) throws {
        try withKeywayInLogin {
            try fixture.enrollPattern(user, "2-4-9-3")
            try fixture.enrollPasscode(user, "739155")
            try fixture.enrollFinger(user, "right-index")
            fixture.startDaemon()
            let config = fixture.writeConfig("[policy either]\nrequire = first of (biometric, gesture)\n")
            return "auth [success=done default=ignore] \(modulePath) policy=either \(config) "
                + "\(fixture.moduleArguments) read-tty\n"
        } _: {
            let terminal = try Terminal("login \(user)")
            defer { terminal.close() }
            try terminal.waitFor(Self.noEnterPrompt)
            try body(terminal)
        }
    }

    static let noEnterPrompt = "Touch the sensor, or type your pattern (dots 1-9):"

    @Test("read-tty at a real login: a touch alone logs in, no Enter pressed")
    func touchAloneLogsIn() throws {
        try atReadTTYPrompt { terminal in
            let touched = try run(
                cliPath, ["sensor", "present", user, "right-index", "--wait", "5", "--sensor", fixture.sensor])
            #expect(touched.status == 0, "\(touched.text)")
            // The user's shell, with no key pressed since the prompt.
            try terminal.type("echo logged-in-as-$(id -un)")
            let screen = try terminal.waitFor("logged-in-as-\(user)\n")
            #expect(!screen.contains("Login incorrect"), "\(screen)")
        }
    }

    @Test("read-tty at a real login: Ctrl-C ends the prompt and the terminal echoes again")
    func readTTYCtrlC() throws {
        try atReadTTYPrompt { terminal in
            try terminal.sendKey("2")  // typed, not shown: echo is off while the module reads
            var screen = try terminal.screen()
            #expect(screen.hasSuffix(Self.noEnterPrompt), "\(screen)")
            try terminal.sendKey("C-c")
            // The module read Ctrl-C as a key (no signal was sent) and gave up; the stack goes on to login's password.
            screen = try terminal.waitFor("Password:")
            #expect(screen.contains(Self.noEnterPrompt + " ^C\nCancelled.\nPassword:"), "\(screen)")
            // pam_unix turns echo off for the password and puts back what it found: echo on, if the module restored it.
            try terminal.type("")
            screen = try terminal.waitFor("login:")
            _ = try run("/usr/bin/tmux", ["-L", terminal.server, "send-keys", "-t", "0", "-l", "echo-is-on"])
            screen = try terminal.waitFor("login: echo-is-on")
            #expect(!screen.contains("logged in"), "\(screen)")
        }
    }

    @Test("read-tty: login killed outright mid-read; keywayd puts the terminal's settings back (echo, line editing)")
    func readTTYKilled() throws {
        try atReadTTYPrompt { terminal in
            let pane = try run(
                "/usr/bin/tmux", ["-L", terminal.server, "display-message", "-p", "#{pane_tty} #{pane_pid}"])
            let fields = pane.output.first?.split(separator: " ").map(String.init) ?? []
            try #require(fields.count == 2, "\(pane.text)")
            func settings() throws -> String { try run("/usr/bin/stty", ["-a", "-F", fields[0]]).text }
            let reading = try settings()
            #expect(reading.contains("-echo ") && reading.contains("-icanon"), "while the module reads: \(reading)")
            let login = try run("/usr/bin/pgrep", ["-P", fields[1], "-x", "login"])
            let pid = try #require(login.output.first.flatMap { pid_t($0) }, "\(login.text)")
            kill(pid, SIGKILL)
            try terminal.waitFor("[exit 137]")
            // keywayd sees the arming connection close without a withdrawal and restores what the module deposited.
            var after = ""
            for _ in 0..<100 {
                after = try settings()
                if !after.contains("-echo ") && !after.contains("-icanon") { break }
                usleep(50_000)
            }
            #expect(!after.contains("-echo ") && !after.contains("-icanon") && !after.contains("-isig"), "\(after)")
        }
    }
}
