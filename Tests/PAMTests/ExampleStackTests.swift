import Foundation
import Testing

@testable import KeywayProcessFixture

/// pam/examples installed as they say (whole files in place of /etc/pam.d/login and /etc/pam.d/sudo) and used
/// through real `login` and real `sudo` in a terminal: Keyway lets the person in, and the rest of the stack still
/// ran (pam_loginuid set the audit login id, pam_limits applied a limit set for this test). The only change made
/// to an example is where the module is (build/pam_keyway.so, not the system directory) and which keywayd it asks
/// (the fixture's socket). Runs inside scripts/test-isolated.sh (a private /etc), and still puts every file back
/// byte for byte.
@Suite("pam/examples on the real login and sudo", .serialized)
struct ExampleStackTests {
    let fixture = PAMFixture()
    let user = "kwex\(getpid() % 100_000)"
    let limits = "/etc/security/limits.d/keyway-example-test.conf"

    /// The example's text with the module at build/pam_keyway.so and the fixture's keywayd.
    func example(_ name: String) throws -> String {
        let text = try String(contentsOfFile: packageRoot + "/pam/examples/" + name, encoding: .utf8)
        let lines = text.components(separatedBy: "\n").map { line in
            guard !line.hasPrefix("#"), line.contains(" pam_keyway.so ") else { return line }
            return line.replacingOccurrences(of: " pam_keyway.so ", with: " \(modulePath) \(fixture.moduleArguments) ")
        }
        #expect(lines.contains { $0.contains(modulePath) }, "\(name) has no Keyway line")
        return lines.joined(separator: "\n")
    }

    /// Puts `text` in place of `path` for `body`, then restores the original byte for byte (and checks it).
    func replacing(_ path: String, with text: String, _ body: () throws -> Void) throws {
        systemStackLock.lock()  // LoginTests replaces /etc/pam.d/login too, in a suite that runs beside this one
        defer { systemStackLock.unlock() }
        let original = try Data(contentsOf: URL(fileURLWithPath: path))
        defer {
            try? original.write(to: URL(fileURLWithPath: path))
            let restored = try? Data(contentsOf: URL(fileURLWithPath: path))
            #expect(restored == original, "\(path) was not restored")
        }
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try body()
    }

    func uid(of name: String) throws -> String {
        try run("/usr/bin/id", ["-u", name]).text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test(
        "examples/login in place of /etc/pam.d/login: the passcode logs in; pam_loginuid, pam_limits, pam_group still ran"
    )
    func login() throws {
        try requireIsolation()
        defer {
            unlink(limits)
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        try fixture.enrollPasscode(user, "739155")
        fixture.startDaemon()
        #expect(FileManager.default.createFile(atPath: limits, contents: Data("\(user) hard nofile 1234\n".utf8)))
        // pam_group grants a group at login (services;ttys;users;times;groups): proof that it still runs.
        let groups = try String(contentsOfFile: "/etc/security/group.conf", encoding: .utf8)
        let stack = try example("login")
        try replacing("/etc/security/group.conf", with: groups + "login;*;\(user);Al0000-2400;audio\n") {
            try replacing("/etc/pam.d/login", with: stack) { try loginAndLook() }
        }
    }

    /// Logs in with the passcode and checks what the rest of the stack did.
    func loginAndLook() throws {
        let terminal = try Terminal("login \(user)")
        defer { terminal.close() }
        // No finger enrolled: biometrics-or-passcode goes to the passcode, which offers the password.
        try terminal.waitFor("Passcode (Enter: use password):")
        try terminal.type("739155")
        try terminal.waitFor("\(user)@")  // the shell prompt, user@host:/$
        try terminal.type(
            "echo LOGINUID=$(cat /proc/self/loginuid) NOFILE=$(ulimit -Hn) WHO=$(id -un) GROUPS=$(id -Gn)")
        let screen = try terminal.waitFor("WHO=\(user)")
        // pam_loginuid and pam_limits (session lines) and pam_group (an auth line, at pam_setcred) all ran.
        #expect(screen.contains("LOGINUID=\(try uid(of: user)) NOFILE=1234 WHO=\(user)"), "\(screen)")
        #expect(screen.contains(" audio"), "pam_group did not run: \(screen)")
        try terminal.type("exit")
    }

    @Test("examples/login: Enter at the passcode goes to login's own password prompt; nothing of Keyway's stops it")
    func loginHandover() throws {
        try requireIsolation()
        defer {
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        try fixture.enrollPasscode(user, "739155")
        fixture.startDaemon()
        try replacing("/etc/pam.d/login", with: try example("login")) {
            let terminal = try Terminal("login \(user)")
            defer { terminal.close() }
            try terminal.waitFor("Passcode (Enter: use password):")
            try terminal.type("")
            let screen = try terminal.waitFor("Password:")
            #expect(!screen.contains("Authentication failed."), "\(screen)")
        }
    }

    @Test("examples/sudo in place of /etc/pam.d/sudo: the pattern runs the command as root with root's limits")
    func sudo() throws {
        try requireIsolation()
        let sudoers = "/etc/sudoers.d/keyway-example-\(user)"
        defer {
            unlink(sudoers)
            unlink(limits)
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        try fixture.enrollPattern(user, "2-4-9-3")
        fixture.startDaemon()
        let rules = "Defaults:\(user) !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n"
        try fixture.installSudoers(rules, at: sudoers)
        #expect(FileManager.default.createFile(atPath: limits, contents: Data("root hard nofile 2345\n".utf8)))
        try replacing("/etc/pam.d/sudo", with: try example("sudo")) {
            let command = "sh -c 'echo UID=$(id -u) NOFILE=$(ulimit -Hn)'"
            let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k \(command)")
            defer { terminal.close() }
            try terminal.waitFor("Pattern (dots 1-9; Enter: use password):")
            try terminal.type("2-4-9-3")
            let screen = try terminal.waitFor("[exit ")
            // pam_limits, the example's session line, applied root's limit to the command.
            #expect(screen.contains("UID=0 NOFILE=2345"), "\(screen)")
            #expect(screen.contains("[exit 0]"), "\(screen)")
        }
    }

    @Test("examples/two-factor as a service of its own: sudo needs the pattern and the password; either alone fails")
    func twoFactor() throws {
        try requireIsolation()
        let service = "kwex-2fa-\(user)"
        let sudoers = "/etc/sudoers.d/keyway-example-\(user)"
        defer {
            unlink(sudoers)
            unlink("/etc/pam.d/\(service)")
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        #expect(try TestAccounts.setPassword(user, "Correct-horse-739"))
        try fixture.enrollPattern(user, "2-4-9-3")
        fixture.startDaemon()
        let rules =
            "Defaults:\(user) pam_service=\(service), !pam_session, !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n"
        try fixture.installSudoers(rules, at: sudoers)
        #expect(
            FileManager.default.createFile(
                atPath: "/etc/pam.d/\(service)", contents: Data(try example("two-factor").utf8)))

        func sudo(pattern: [String], password: String) throws -> String {
            let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
            defer { terminal.close() }
            for (index, guess) in pattern.enumerated() {
                try terminal.waitFor("Pattern (dots 1-9):", count: index + 1)
                try terminal.type(guess)
            }
            try terminal.waitFor("password for \(user):")
            try terminal.type(password)
            return try terminal.waitFor("[exit ")
        }
        let both = try sudo(pattern: ["2-4-9-3"], password: "Correct-horse-739")
        #expect(both.contains("\n0\n") && both.contains("[exit 0]"), "\(both)")
        // The pattern first, then the password: both were asked.
        #expect(both.range(of: "Pattern (dots 1-9):")!.lowerBound < both.range(of: "password for")!.lowerBound)
        let passwordOnly = try sudo(pattern: ["3-4-9-2", "6-1-8-3", "4-3-8-1-6"], password: "Correct-horse-739")
        #expect(!passwordOnly.contains("\n0\n") && !passwordOnly.contains("[exit 0]"), "\(passwordOnly)")
        let patternOnly = try sudo(pattern: ["2-4-9-3"], password: "not-the-password")
        #expect(!patternOnly.contains("\n0\n") && !patternOnly.contains("[exit 0]"), "\(patternOnly)")
    }
}
