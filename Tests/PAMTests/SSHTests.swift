import Foundation
import Testing

@testable import KeywayProcessFixture

/// A second factor for SSH as an administrator rolls it out (docs/GUIDE.md, "SSH"): Debian's sshd on loopback with
/// pam/examples/sshd as its PAM stack and pam/examples/sshd_config's lines, a real ssh client in tmux logging in with
/// a key, then a TOTP code from Debian's oathtool. Everything the person learns is read off the screen.
@Suite("SSH: a key, then a code", .serialized)
struct SSHTests {
    let fixture = PAMFixture()
    static let coder = "kwssh-coder"
    static let newcomer = "kwssh-new"

    /// oathtool's code for `key` at `offset` seconds from now.
    func oathtool(_ key: String, offset: Int = 0) throws -> String {
        let seconds = Int(Date().timeIntervalSince1970) + offset
        let result = try run("/usr/bin/oathtool", ["--totp", "-b", "-N", "@\(seconds)", key])
        #expect(result.status == 0, "\(result.text)")
        return result.output.first ?? ""
    }

    /// `keyway enroll totp` for `user` in a terminal, as root at a console: the key read off the screen.
    func enrollTOTP(_ user: String) throws -> String {
        let terminal = try Terminal("\(cliPath) --socket \(fixture.socket) enroll totp --user \(user)")
        defer { terminal.close() }
        let screen = try terminal.waitFor("Code from the app:")
        let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
        let key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
        try terminal.type(try oathtool(key))
        #expect(try terminal.waitFor("[exit ").contains("[exit 0]"))
        return key
    }

    /// `keyway enroll recovery` for `user` in a terminal, as root: the ten codes read off the screen, the fifth typed
    /// back.
    func enrollRecovery(_ user: String) throws -> [String] {
        try enrollRecoveryInTerminal(
            "\(cliPath) --socket \(fixture.socket) enroll recovery --user \(user)", typingBack: 4)
    }

    /// A shipped example with the module at build/pam_keyway.so and the fixture's keywayd.
    func example(_ name: String) throws -> String {
        let text = try String(contentsOfFile: packageRoot + "/pam/examples/" + name, encoding: .utf8)
        return text.components(separatedBy: "\n").map { line in
            guard !line.hasPrefix("#"), line.contains(" pam_keyway.so ") else { return line }
            return line.replacingOccurrences(of: " pam_keyway.so ", with: " \(modulePath) \(fixture.moduleArguments) ")
        }.joined(separator: "\n")
    }

    /// sshd with pam/examples/sshd naming `[policy ssh]` of `config` (keyway.conf's text, written by the fixture) in
    /// place of the built-in totp, for `users`.
    func sshd(policy config: String, users: [String] = [coder]) throws -> SSHServer {
        let argument = fixture.writeConfig(config)
        let stack = try example("sshd").replacingOccurrences(of: "policy=totp", with: "policy=ssh \(argument)")
        return try SSHServer(settings: try sshdSettings() + ["PasswordAuthentication no"], pam: stack, users: users)
    }

    /// pam/examples/sshd_config's settings.
    func sshdSettings() throws -> [String] {
        try String(contentsOfFile: packageRoot + "/pam/examples/sshd_config", encoding: .utf8)
            .split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") && !$0.isEmpty }
    }

    func setUp() throws -> String {
        try requireIsolation()
        #expect(try TestAccounts.add(Self.coder))
        #expect(try TestAccounts.add(Self.newcomer))
        chmod(fixture.directory, 0o755)
        fixture.startDaemon()
        return try enrollTOTP(Self.coder)
    }

    func tearDown() {
        TestAccounts.remove(Self.coder)
        TestAccounts.remove(Self.newcomer)
        fixture.remove()
    }

    /// Waits until the shell runs as `user` (it echoes a marker the typed command cannot show). The command is typed
    /// again every 5 seconds, as a person seeing nothing would: typed while the session was still being made, it can
    /// be discarded (a terminal's mode set with TCSAFLUSH drops what was typed ahead), and a loaded machine takes
    /// longer than a fixed wait. A retyped line that reaches a prompt instead is a wrong answer there, never a way in.
    func inShell(_ terminal: Terminal, as user: String) throws {
        try terminal.type("echo IN-$(id -un)-SHELL", until: "IN-\(user)-SHELL")
    }

    @Test(
        "a key then a code → a shell; the code again → refused, said on the screen; wrong codes → until when it waits")
    func keyThenCode() throws {
        defer { tearDown() }
        let key = try setUp()
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"),
            users: [Self.coder, Self.newcomer])
        defer { sshd.stop() }
        // The enrollment spent this step's code: the next step's is within the window.
        let code = try oathtool(key, offset: 30)
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code:", seconds: 20)
            try terminal.type(code)
            try inShell(terminal, as: Self.coder)
        }
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        try terminal.waitFor("Verification code:", seconds: 20)
        try terminal.type(code)
        var screen = try terminal.waitFor("Verification code:", count: 2)
        #expect(screen.contains("Not recognized"), "the used code's refusal is not on the screen:\n\(screen)")
        // Distinct wrong codes (the same wrong code again in one step is refunded) until the counter throttles: the
        // screen says until when, in words.
        let valid = try [-30, 0, 30, 60].map { try oathtool(key, offset: $0) }
        let wrong = (1...9).map { String(repeating: String($0), count: 6) }.filter { !valid.contains($0) }
        var prompts = 2
        for guess in wrong where !screen.contains("try again") {
            // Each guess once the one before is answered: the next prompt, or the lockout's words. A guess typed
            // before its prompt can be read by nobody.
            try terminal.type(guess)
            prompts += 1
            waitUntil("the answer to \(guess)", seen: { screen }) {
                screen = (try? terminal.screen()) ?? screen
                return screen.components(separatedBy: "Verification code:").count - 1 >= prompts
                    || screen.contains("try again")
            }
        }
        screen = try terminal.waitFor("try again", seconds: 10)
        #expect(screen.contains("Too many failed attempts"), "\(screen)")
        print("ssh: throttled, the screen says: \(screen.split(separator: "\n").filter { $0.contains("try again") })")
        #expect(!screen.contains("IN-\(Self.coder)"), "\(screen)")
    }

    @Test("roll-out: a person without a code gets in with the key alone, and the log says so")
    func rollOut() throws {
        defer { tearDown() }
        _ = try setUp()
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"),
            users: [Self.coder, Self.newcomer])
        defer { sshd.stop() }
        let terminal = try Terminal(sshd.command(Self.newcomer))
        defer { terminal.close() }
        try inShell(terminal, as: Self.newcomer)
        #expect(!(try terminal.screen()).contains("Verification code:"))
        let logged = capture.lines(waitingFor: "sshd's log line allowing \(Self.newcomer)") {
            $0.contains("user=\(Self.newcomer)") && $0.contains("outcome=allowed")
        }
        let allowed = logged.filter { $0.contains("user=\(Self.newcomer)") && $0.contains("outcome=allowed") }
        #expect(!allowed.isEmpty, "\(logged)")
        #expect(allowed.allSatisfy { $0.contains("unenrolled=allow") }, "\(allowed)")
    }

    @Test("unenrolled=allow: an account with nothing enrolled passes without a prompt; a name no account has does not")
    func allowOnlyAccounts() throws {
        defer { tearDown() }
        _ = try setUp()
        fixture.service("codes", "policy=totp unenrolled=allow")
        let newcomer = try harness(fixture, "codes", Self.newcomer, ["--acct"])
        #expect(newcomer.result == "PAM_SUCCESS", "\(newcomer.text)")
        #expect(!newcomer.text.contains("prompt:"), "\(newcomer.text)")
        let stranger = try harness(fixture, "codes", "kwssh-no-such-account", answers("123456"))
        #expect(stranger.result != "PAM_SUCCESS", "\(stranger.text)")
        // An enrolled user is asked the code as ever: allow never skips a factor someone has.
        let coder = try harness(fixture, "codes", Self.coder, answers("000000", "111111", "222222"))
        #expect(coder.result == "PAM_AUTH_ERR", "\(coder.text)")
        #expect(coder.text.contains("Verification code:"), "\(coder.text)")
    }

    @Test("`require = totp or recovery`: no recovery until there are codes; code 1 asked, once; code 2 then, not 5")
    func recoveryCode() throws {
        defer { tearDown() }
        _ = try setUp()
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        let sshd = try sshd(policy: "[policy ssh]\nrequire = totp or recovery\n")
        defer { sshd.stop() }
        // Without recovery codes, the code's prompt offers nothing it could not keep.
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            let screen = try terminal.waitFor("Verification code:", seconds: 20)
            #expect(!screen.contains("recovery"), "recovery offered to someone who has none:\n\(screen)")
        }
        let codes = try enrollRecovery(Self.coder)
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code (Enter: use recovery):", seconds: 20)
            try terminal.type("")
            // The code is asked for by its number on the list, the lowest unused (NIST's look-up secrets).
            try terminal.waitFor("Recovery code 1:")
            try terminal.type(codes[0].uppercased())
            try inShell(terminal, as: Self.coder)
        }
        let logged = capture.lines(waitingFor: "sshd's log line of \(Self.coder)'s recovery code") {
            $0.contains("user=\(Self.coder)") && $0.contains("recovery#1:succeeded")
        }
        let used = logged.filter { $0.contains("user=\(Self.coder)") && $0.contains("recovery#1:succeeded") }
        #expect(!used.isEmpty, "the log does not say a recovery code let \(Self.coder) in: \(logged)")
        do {
            // Code 1 again, then code 5 (unused, but not the one asked): each refused, one failure each.
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code (Enter: use recovery):", seconds: 20)
            try terminal.type("")
            try terminal.waitFor("Recovery code 2:")
            try terminal.type(codes[0])
            try terminal.waitFor("Recovery code 2:", count: 2)
            try terminal.type(codes[4])
            let screen = try terminal.waitFor("Not recognized", count: 2)
            #expect(!screen.contains("IN-\(Self.coder)"), "\(screen)")
            print("ssh: code 1 again, then code 5, at code 2's prompt:\n\(screen)")
        }
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", Self.coder])
        #expect(status.text.contains("recovery: enrolled") && status.text.contains("9 uses left"), "\(status.text)")
        #expect(status.text.contains("remote: 2 consecutive failures"), "\(status.text)")
        // Code 2 at its prompt: in, and code 5 is still there for its turn.
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        try terminal.waitFor("Verification code (Enter: use recovery):", seconds: 20)
        try terminal.type("")
        try terminal.waitFor("Recovery code 2:")
        try terminal.type(codes[1])
        try inShell(terminal, as: Self.coder)
        let audit = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", Self.coder])
        #expect(audit.text.contains("use \(Self.coder) recovery code 1, 9 of 10 left"), "\(audit.text)")
        #expect(audit.text.contains("use \(Self.coder) recovery code 2, 8 of 10 left"), "\(audit.text)")
    }

    @Test(
        "20 wrong codes over sshd throttle the remote way in; the same person then logs in at the console with a code")
    func remoteGuessesSpareTheConsole() throws {
        defer { tearDown() }
        let key = try setUp()
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"),
            users: [Self.coder])
        defer { sshd.stop() }
        let valid = try [-30, 0, 30, 60, 90].map { try oathtool(key, offset: $0) }
        let wrong = (0..<40).map { String(format: "%06d", ($0 * 7_919 + 104_729) % 1_000_000) }.filter {
            !valid.contains($0)
        }
        // The schedule throttles after 5; between connections the remote counters are aged by two hours in the
        // store (sqlite3), as an attacker waiting out each throttle would, until 20 wrong codes were counted.
        func remoteFailures() throws -> Int {
            let query = "SELECT COALESCE(MAX(failures), 0) FROM attempts WHERE factor = 'totp@remote'"
            return Int(try run("/usr/bin/sqlite3", [fixture.store, query]).output.first ?? "") ?? -1
        }
        var next = 0
        var throttled = 0
        while try remoteFailures() < 20 && next < wrong.count {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            /// True once the screen shows `count` prompts; false once the lock is said or the connection ends.
            func prompted(_ count: Int, seconds: Double = 20) throws -> Bool {
                let deadline = Date().addingTimeInterval(seconds)
                while Date() < deadline {
                    let screen = try terminal.screen()
                    if screen.contains("try again") || screen.contains("Permission denied") { return false }
                    if screen.components(separatedBy: "Verification code:").count - 1 >= count { return true }
                    usleep(50_000)
                }
                return false
            }
            for prompt in 1...3 {
                guard try prompted(prompt), try remoteFailures() < 20 else { break }
                try terminal.type(wrong[next])
                next += 1
            }
            _ = try prompted(4, seconds: 3)  // the last code's answer: a lock, a refusal, or a fourth prompt
            if try terminal.screen().contains("try again") { throttled += 1 }
            let aged = try run(
                "/usr/bin/sqlite3",
                [
                    fixture.store,
                    "UPDATE attempts SET last_failure = last_failure - 7200000 WHERE factor LIKE '%@remote'",
                ])
            #expect(aged.status == 0, "\(aged.text)")
        }
        #expect(throttled > 0, "20 wrong codes over ssh never throttled the remote way in")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", Self.coder])
        #expect(status.text.contains("totp: enrolled"), "\(status.text)")
        #expect(status.text.contains("remote: 20 consecutive failures"), "\(status.text)")
        // At the console: real login on a terminal of this machine's local session, the code after the name.
        systemStackLock.lock()  // LoginTests and ExampleStackTests replace /etc/pam.d/login too
        defer { systemStackLock.unlock() }
        let loginStack = "/etc/pam.d/login"
        let original = try Data(contentsOf: URL(fileURLWithPath: loginStack))
        defer { try? original.write(to: URL(fileURLWithPath: loginStack)) }
        let keyway = "auth [success=done default=die] \(modulePath) policy=totp \(fixture.moduleArguments)\n"
        try Data((keyway + String(decoding: original, as: UTF8.self)).utf8).write(to: URL(fileURLWithPath: loginStack))
        let terminal = try Terminal("login \(Self.coder)")
        defer { terminal.close() }
        let asked = try terminal.waitFor("Verification code:")
        #expect(!asked.contains("try again"), "\(asked)")
        try terminal.type(try oathtool(key, offset: 30))
        try inShell(terminal, as: Self.coder)
        let after = try run(cliPath, ["--socket", fixture.socket, "status", "--user", Self.coder])
        #expect(!after.text.contains("consecutive failures"), "a success clears both sets: \(after.text)")
    }

    @Test(
        "an administrator's pass, typed at the code's prompt: a shell once, then refused; a new one refused once expired"
    )
    func temporaryPass() throws {
        defer { tearDown() }
        _ = try setUp()
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"),
            users: [Self.coder])
        defer { sshd.stop() }
        func issue(_ arguments: [String]) throws -> String {
            let issued = try run(
                cliPath, ["--socket", fixture.socket, "pass", "issue", "--user", Self.coder] + arguments)
            #expect(issued.status == 0, "\(issued.text)")
            let line = try #require(issued.output.first { $0.hasPrefix("Pass for \(Self.coder): ") }, "\(issued.text)")
            return String(line.split(separator: " ").last ?? "")
        }
        /// An ssh login typing `typed` at the code's prompt: the screen once it ends or a shell answers.
        func login(_ typed: String) throws -> String {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code:", seconds: 20)
            try terminal.type(typed)
            // The code's outcome first: a shell's prompt (user@host:/$), ssh asking again, or the connection's end.
            // Only a shell is typed into: an echo typed at the next code's prompt would be a code.
            var screen = ""
            func shell() -> Bool {
                let after = screen.components(separatedBy: "Verification code:").last ?? ""
                let last = after.split(separator: "\n").last ?? ""
                return last.hasSuffix("$") || last.hasSuffix("#")
            }
            let decided = waitUntil("the outcome of the code typed at ssh's prompt", seconds: 20, seen: { screen }) {
                screen = (try? terminal.screen()) ?? screen
                return shell() || screen.components(separatedBy: "Verification code:").count >= 3
                    || screen.contains("[exit ")
            }
            guard decided && shell() else { return screen }
            try terminal.type("echo IN-$(id -un)-SHELL")
            return try (try? terminal.waitFor("IN-\(Self.coder)-SHELL", seconds: 15)) ?? terminal.screen()
        }
        let pass = try issue(["--for", "2h", "--uses", "1"])
        #expect(pass.count == 19, "\(pass)")
        #expect(try login(pass).contains("IN-\(Self.coder)-SHELL"), "the pass did not let \(Self.coder) in")
        let again = try login(pass)
        #expect(!again.contains("IN-\(Self.coder)-SHELL"), "a pass of one use let \(Self.coder) in twice:\n\(again)")
        let spent = try run(cliPath, ["--socket", fixture.socket, "status", "--user", Self.coder]).text
        #expect(spent.contains("pass: spent, every use; issued"), "\(spent)")
        #expect(!spent.contains("0 uses left"), "\(spent)")
        let audit = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", Self.coder]).text
        #expect(audit.contains("enroll \(Self.coder) pass"), "\(audit)")
        #expect(audit.contains("use \(Self.coder) a pass in place of totp, 0 of 1 uses left"), "\(audit)")
        // A new pass, its end moved two hours back in the store (as if two hours had passed): refused.
        let later = try issue(["--for", "1h", "--uses", "2"])
        let select = "SELECT CAST(payload AS TEXT) FROM enrollments WHERE factor = 'pass'"
        let record = try run("/usr/bin/sqlite3", [fixture.store, select]).output
        let end = try #require(record.count >= 3 ? record[2] : nil, "\(record)")
        let past = String((Int64(end) ?? 0) - 7_200_000)
        let aged = try run(
            "/usr/bin/sqlite3",
            [
                fixture.store,
                "UPDATE enrollments SET payload = CAST(replace(CAST(payload AS TEXT), '\(end)', '\(past)') AS BLOB) "
                    + "WHERE factor = 'pass'",
            ])
        #expect(aged.status == 0, "\(aged.text)")
        let expired = try login(later)
        #expect(!expired.contains("IN-\(Self.coder)-SHELL"), "an expired pass let \(Self.coder) in:\n\(expired)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", Self.coder]).text
        #expect(status.contains("pass: issued") && status.contains("expired"), "\(status)")
    }

    @Test("a person replaces their own TOTP over ssh: proved with a recovery code, a new key, its code logs in")
    func replaceOwnTOTP() throws {
        defer { tearDown() }
        let old = try setUp()
        let codes = try enrollRecovery(Self.coder)
        let sshd = try sshd(policy: "[policy ssh]\nrequire = totp or recovery\n")
        defer { sshd.stop() }
        var key = ""
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code (Enter: use recovery):", seconds: 20)
            try terminal.type(try oathtool(old, offset: 30))
            try inShell(terminal, as: Self.coder)
            // As the person, not root: keyway asks them to prove it first (the code they just used is spent, so
            // Enter, then a recovery code), then shows the new key.
            // The login's own prompt is still on the screen until `clear` has run: the command says when it has
            // (printf's output differs from the line as typed), and only then is the prompt keyway's.
            let enroll = "\(cliPath) --socket \(fixture.socket) enroll totp --user \(Self.coder)"
            try terminal.type("clear; printf 'ENROLL%s\\n' -STARTS; \(enroll)")
            try terminal.waitFor("ENROLL-STARTS")
            do { try terminal.waitFor("Verification code (Enter: use recovery):") } catch {
                throw TerminalError(text: "\(error)\nkeywayd's log:\n\(fixture.daemonLog)")
            }
            try terminal.type("")
            // The person's own proof, not concealed from them: the prompt names the code it wants, by number.
            try terminal.waitFor("Recovery code 1:")
            try terminal.type(codes[0])
            let screen = try terminal.waitFor("Code from the app:")
            let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
            key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
            #expect(key != old)
            try terminal.type(try oathtool(key))
            try terminal.waitFor("The totp of \(Self.coder) is set")
        }
        let audit = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", Self.coder]).text
        #expect(audit.contains("enroll \(Self.coder) totp; by \(Self.coder) via keyway enroll"), "\(audit)")
        // The new key's next code logs in; the old key's does not.
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        try terminal.waitFor("Verification code (Enter: use recovery):", seconds: 20)
        try terminal.type(try oathtool(old, offset: 30))
        try terminal.waitFor("Not recognized")
        // ssh reads an answer with the terminal flushed: the next code is typed once its prompt is there.
        try terminal.waitFor("Verification code (Enter: use recovery):", count: 2)
        try terminal.type(try oathtool(key, offset: 30))
        try inShell(terminal, as: Self.coder)
    }

    @Test("a pattern does not rebind the ssh code: only a second factor is asked; a code, then a pass, replace them")
    func patternDoesNotRebind() throws {
        defer { tearDown() }
        let old = try setUp()
        // The person also has a screen-lock pattern, which someone who watched could know.
        let pattern = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", Self.coder, "--stdin"],
            input: "2-5-8-9-6\n")
        #expect(pattern.status == 0, "\(pattern.text)")
        let issued = try run(
            cliPath, ["--socket", fixture.socket, "pass", "issue", "--user", Self.coder, "--for", "2h", "--uses", "2"])
        let pass = String(
            try #require(issued.output.first { $0.hasPrefix("Pass for \(Self.coder): ") }, "\(issued.text)")
                .split(separator: " ").last ?? "")
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"), users: [Self.coder])
        defer { sshd.stop() }
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        try terminal.waitFor("Verification code:", seconds: 20)
        try terminal.type(pass)
        try inShell(terminal, as: Self.coder)
        // New recovery codes: keyway asks for the code alone (the pattern is not offered), and the current code does.
        let enroll = "\(cliPath) --socket \(fixture.socket) enroll"
        try terminal.type("clear; printf 'RECOVERY%s\\n' -STARTS; \(enroll) recovery --user \(Self.coder)")
        try terminal.waitFor("RECOVERY-STARTS")
        let asked = try terminal.waitFor("Verification code")
        #expect(!asked.contains("gesture") && !asked.contains("pattern"), "the pattern was offered:\n\(asked)")
        try terminal.type(try oathtool(old, offset: 30))
        let shown = try terminal.waitFor("Type one of them")
        let codes = recoveryCodes(onScreen: shown)
        #expect(codes.count == 10, "\(shown)")
        try terminal.type(codes.first ?? "")
        try terminal.waitFor("recovery codes of \(Self.coder) are set")
        // A new key: the pass that let the person in (one of its two uses) is the proof, so nothing is asked first.
        try terminal.type("clear; printf 'TOTP%s\\n' -STARTS; \(enroll) totp --user \(Self.coder)")
        try terminal.waitFor("TOTP-STARTS")
        let screen = try terminal.waitFor("Code from the app:")
        #expect(!screen.contains("Verification code") && !screen.contains("gesture"), "\(screen)")
        let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
        let key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
        #expect(key != old)
        try terminal.type(try oathtool(key))
        try terminal.waitFor("The totp of \(Self.coder) is set")
        let audit = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", Self.coder]).text
        #expect(audit.contains("enroll \(Self.coder) recovery; by \(Self.coder) via keyway enroll"), "\(audit)")
        #expect(audit.contains("enroll \(Self.coder) totp; by \(Self.coder) via keyway enroll"), "\(audit)")
        #expect(audit.contains("a pass in place of totp, 1 of 2 uses left"), "\(audit)")
        // Once: the new TOTP is newer than the pass, so another new key needs the new code (or the pass again).
        try terminal.type("clear; printf 'AGAIN%s\\n' -STARTS; \(enroll) totp --user \(Self.coder)")
        try terminal.waitFor("AGAIN-STARTS")
        let again = try terminal.waitFor("Verification code")
        #expect(!again.contains("Code from the app:"), "\(again)")
    }

    @Test("a lost phone as the guide writes it: a pass of one use → a login → a new TOTP in that session → it works")
    func lostPhone() throws {
        defer { tearDown() }
        let old = try setUp()
        // The administrator issues the pass the guide shows and reads it out.
        let issued = try run(
            cliPath,
            [
                "--socket", fixture.socket, "pass", "issue", "--user", Self.coder, "--for", "2h", "--uses", "1",
                "--in-place-of", "totp",
            ])
        #expect(issued.status == 0, "\(issued.text)")
        let pass = String(
            try #require(issued.output.first { $0.hasPrefix("Pass for \(Self.coder): ") }, "\(issued.text)")
                .split(separator: " ").last ?? "")
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"), users: [Self.coder])
        defer { sshd.stop() }
        var key = ""
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code:", seconds: 20)
            try terminal.type(pass)
            try inShell(terminal, as: Self.coder)
            // In that session, a new TOTP: asked for nothing first (the pass's use was the proof).
            try terminal.type("clear; printf 'TOTP%s\\n' -STARTS; \(cliPath) --socket \(fixture.socket) enroll totp")
            try terminal.waitFor("TOTP-STARTS")
            let screen = try terminal.waitFor("Code from the app:")
            #expect(!screen.contains("Verification code"), "\(screen)")
            let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
            key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
            #expect(key != old)
            try terminal.type(try oathtool(key))
            try terminal.waitFor("The totp of \(Self.coder) is set")
        }
        // The new phone's next code logs in; the pass, spent, does not.
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code:", seconds: 20)
            try terminal.type(try oathtool(key, offset: 30))
            try inShell(terminal, as: Self.coder)
        }
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        try terminal.waitFor("Verification code:", seconds: 20)
        try terminal.type(pass)
        // Spent, it no longer stands in: it is read as a code, and refused as one.
        let screen = try terminal.waitFor("Verification code:", count: 2)
        #expect(screen.contains("a code is 6 digits"), "\(screen)")
        #expect(!screen.contains("IN-\(Self.coder)"), "\(screen)")
        let audit = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", Self.coder]).text
        #expect(audit.contains("a pass in place of totp, 0 of 1 uses left"), "\(audit)")
        #expect(audit.contains("enroll \(Self.coder) totp; by \(Self.coder) via keyway enroll"), "\(audit)")
    }

    /// A shell over ssh with the key alone (nothing enrolled, `unenrolled=allow`), connecting once more if sshd ended
    /// the session before its shell ran, as a person would: seen once under a loaded parallel run, after Keyway had
    /// let the login through ("Connection to 127.0.0.1 closed by remote host." after the banner).
    func keyOnlyShell(_ sshd: SSHServer, _ user: String) throws -> Terminal {
        let first = try Terminal(sshd.command(user))
        do {
            try inShell(first, as: user)
            return first
        } catch {
            let ended = (try? first.screen())?.contains("closed by remote host") ?? false
            first.close()
            guard ended else { throw error }
            print("ssh: sshd ended \(user)'s session before its shell; connecting again")
        }
        let second = try Terminal(sshd.command(user))
        do {
            try inShell(second, as: user)
        } catch {
            second.close()
            throw error
        }
        return second
    }

    /// `keyway status --all --group GROUP --policy ssh --json`: each account's standing, by name.
    func standings(group: String) throws -> [String: String] {
        let result = try run(
            cliPath,
            [
                "--socket", fixture.socket, "--config", fixture.configPath, "status", "--all", "--group", group,
                "--policy",
                "ssh", "--json",
            ])
        #expect(result.status == 0, "\(result.text)")
        print("ssh: keyway status --all --json: \(result.output.first ?? "")")
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(result.text.utf8)) as? [String: Any], "\(result.text)")
        let accounts = try #require(object["accounts"] as? [[String: Any]], "\(result.text)")
        var found: [String: String] = [:]
        for account in accounts {
            if let user = account["user"] as? String { found[user] = account["standing"] as? String }
        }
        return found
    }

    @Test("a team's roll-out: each enrolls their own first code over ssh; status --all, the metric, then doctor")
    func teamEnrollsThemselves() throws {
        let late = "kwssh-late"
        let team = "kwssh-team"
        defer {
            TestAccounts.removeGroup(team)
            TestAccounts.remove(late)
            tearDown()
        }
        try requireIsolation()
        for user in [Self.coder, Self.newcomer, late] { #expect(try TestAccounts.add(user)) }
        #expect(try TestAccounts.addGroup(team, members: [Self.coder, Self.newcomer, late]))
        chmod(fixture.directory, 0o755)
        // The team's sshd admits the team only (so root and the machine's other accounts are not the roll-out's).
        let settings = try sshdSettings() + ["PasswordAuthentication no", "AllowGroups \(team)"]
        // keyway.conf(5)'s ssh-roll-out.conf, read by keywayd (who may enroll a first code) and by the module.
        let example = try String(contentsOfFile: packageRoot + "/man/examples/ssh-roll-out.conf", encoding: .utf8)
        let config = fixture.writeConfig(example)
        fixture.startDaemon(["--config", fixture.configPath])
        let stack = try self.example("sshd").replacingOccurrences(of: "policy=totp", with: "policy=ssh \(config)")
        var keys: [String: String] = [:]
        // Before: nobody has enrolled, and each is let in without a factor.
        let before = try standings(group: team)
        #expect(before == [Self.coder: "unenrolled", Self.newcomer: "unenrolled", late: "unenrolled"], "\(before)")
        do {
            let sshd = try SSHServer(settings: settings, pam: stack, users: [Self.coder, Self.newcomer, late])
            defer { sshd.stop() }
            for user in [Self.coder, Self.newcomer] {
                // In with the key alone, told how to enroll, then `keyway enroll totp` as themselves: the app's key,
                // one code back.
                let terminal = try keyOnlyShell(sshd, user)
                defer { terminal.close() }
                let nudged = try terminal.screen()
                #expect(nudged.contains("no second factor is set up for you yet"), "\(nudged)")
                #expect(nudged.contains("`keyway enroll totp` sets it up."), "\(nudged)")
                let enroll = "\(cliPath) --socket \(fixture.socket) enroll"
                try terminal.type("clear; printf 'TOTP%s\\n' -STARTS; \(enroll) totp")
                try terminal.waitFor("TOTP-STARTS")
                let screen = try terminal.waitFor("Code from the app:")
                #expect(!screen.contains("Verification code"), "a first code asked a proof:\n\(screen)")
                let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
                let key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
                try terminal.type(try oathtool(key))
                try terminal.waitFor("The totp of \(user) is set")
                keys[user] = key
                // Only the first: recovery codes now need the code just set (its prompt, not a new set).
                try terminal.type("clear; printf 'RECOVERY%s\\n' -STARTS; \(enroll) recovery")
                try terminal.waitFor("RECOVERY-STARTS")
                let asked = try terminal.waitFor("Verification code")
                #expect(!asked.contains("Type one of them"), "\(asked)")
                try terminal.sendKey("C-c")
            }
        }
        for user in [Self.coder, Self.newcomer] {
            let audit = try run(cliPath, ["--socket", fixture.socket, "audit", "--user", user]).text
            #expect(audit.contains("enroll \(user) totp; by \(user) via keyway enroll"), "\(audit)")
            #expect(!audit.contains("root via"), "\(audit)")
        }
        // The roll-out in numbers: two ready, one still let in without a factor, and those logins counted.
        let during = try standings(group: team)
        #expect(during == [Self.coder: "ready", Self.newcomer: "ready", late: "unenrolled"], "\(during)")
        let metrics = try run(cliPath, ["--socket", fixture.socket, "metrics"])
        let allowed = metrics.output.filter {
            $0.hasPrefix("keyway_decisions_total{") && $0.contains("result=\"allowed\"")
        }
        let counted = allowed.compactMap { $0.split(separator: " ").last.flatMap { Double($0) } }.reduce(0, +)
        #expect(counted >= 2, "\(metrics.text)")
        print("ssh: logins let in without a factor: \(allowed)")
        // The roll-out ends: unenrolled = allow is taken out of the policy and the stack.
        fixture.writeConfig(example.replacingOccurrences(of: "unenrolled = allow\n", with: ""))
        let ended = stack.replacingOccurrences(of: " unenrolled=allow", with: "")
        let sshd = try SSHServer(settings: settings, pam: ended, users: [Self.coder, Self.newcomer, late])
        defer { sshd.stop() }
        // doctor, reading the stack as installed and sshd as it runs, names exactly the one who did not enroll.
        let pamDirectory = fixture.directory + "/stacks"
        mkdir(pamDirectory, 0o755)
        _ = FileManager.default.createFile(atPath: pamDirectory + "/sshd", contents: Data(ended.utf8))
        let doctor = try run(
            cliPath, ["doctor", "--pam-dir", pamDirectory, "--sshd-config", sshd.directory + "/sshd_config"])
        print("ssh: keyway doctor after the roll-out:\n\(doctor.text)")
        let refused = doctor.output.filter { $0.contains("would refuse") }
        #expect(refused.count == 1, "\(doctor.text)")
        #expect(
            refused.first?.hasSuffix("policy 'ssh' would refuse 1 account that lacks totp or recovery: \(late)")
                == true,
            "\(doctor.text)")
        #expect(doctor.status == 1, "\(doctor.text)")
        let after = try standings(group: team)
        #expect(after == [Self.coder: "ready", Self.newcomer: "ready", late: "refused"], "\(after)")
        for user in [Self.coder, Self.newcomer] {
            let terminal = try Terminal(sshd.command(user))
            defer { terminal.close() }
            try terminal.waitFor("Verification code", seconds: 20)
            try terminal.type(try oathtool(keys[user] ?? "", offset: 30))
            try inShell(terminal, as: user)
        }
        // The one who did not enroll is asked like anyone (concealment) and is not let in.
        let terminal = try Terminal(sshd.command(late))
        defer { terminal.close() }
        try terminal.waitFor("Verification code", seconds: 20)
        try terminal.type("123456")
        let screen = try terminal.waitFor("Not recognized")
        #expect(!screen.contains("IN-\(late)"), "\(screen)")
    }

    @Test("failmode = safe: keywayd stopped → in with the key alone, said on the screen and logged as a warning")
    func failModeSafe() throws {
        defer { tearDown() }
        _ = try setUp()
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        let sshd = try sshd(policy: "[policy ssh]\nrequire = totp or recovery\nfailmode = safe\n")
        defer { sshd.stop() }
        // While keywayd runs, safe changes nothing: the code is asked.
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            try terminal.waitFor("Verification code", seconds: 20)
        }
        fixture.stopDaemon()
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        // A note keywayd left may still prompt (as with secure); what is typed then cannot be checked.
        if (try? terminal.waitFor("Verification code", seconds: 5)) != nil { try terminal.type("123456") }
        try inShell(terminal, as: Self.coder)
        let screen = try terminal.screen()
        #expect(screen.contains("Keyway is not available; let in without it (failmode=safe)."), "\(screen)")
        let logged = capture.lines(waitingFor: "the safe way in, logged") {
            $0.contains("user=\(Self.coder)") && $0.contains("failmode=safe: in without Keyway")
        }
        #expect(logged.contains { $0.contains("outcome=allowed (keywayd is not running") }, "\(logged)")
    }

    @Test("failmode=safe only when keywayd is not running: a stranger's socket or one that hangs up refuses")
    func failModeSafeOnlyWhenAbsent() throws {
        defer { tearDown() }
        _ = try setUp()
        fixture.stopDaemon()
        // A service file of its own, naming a socket the test controls (the fixture's lines name keywayd's).
        var template = Array("/tmp/keyway-failmode.XXXXXX".utf8CString)
        let place = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: place) }
        chmod(place, 0o777)
        let socket = place + "/keywayd.sock"
        let line = "\(modulePath) socket=\(socket) sensor=\(fixture.sensor) policy=totp failmode=safe"
        _ = FileManager.default.createFile(
            atPath: fixture.services + "/safe", contents: Data("auth required \(line)\naccount required \(line)\n".utf8)
        )
        // No socket at all: not running → in, auth and account.
        let absent = try harness(fixture, "safe", Self.coder, ["--acct"])
        #expect(absent.result == "PAM_SUCCESS", "\(absent.text)")
        #expect(absent.text.contains("failmode=safe"), "\(absent.text)")
        // A listener someone else runs there, and root's listener that hangs up at once (keywayd failing mid-request):
        // each connected, so keywayd is not "not running": refused, as secure would.
        let listener = """
            import os, socket, sys
            s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1], 0o777); s.listen(8)
            print("listening", flush=True)
            while True:
                c, _ = s.accept(); c.close()
            """
        for user in ["nobody", "root"] {
            unlink(socket)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", user, "--", "/usr/bin/python3", "-c", listener, socket]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            defer {
                process.terminate()
                process.waitUntilExit()
            }
            _ = output.fileHandleForReading.availableData  // "listening"
            let refused = try harness(fixture, "safe", Self.coder, answers("123456"))
            #expect(refused.result != "PAM_SUCCESS", "\(user)'s listener: \(refused.text)")
            #expect(!refused.text.contains("let in without it"), "\(user)'s listener: \(refused.text)")
        }
    }

    @Test("a typo in [policy ssh] on the required line: no shell for anyone; health and doctor say CRITICAL")
    func typoInRequiredPolicy() throws {
        defer { tearDown() }
        let key = try setUp()
        // Configuration management writes a typo (recovrey) into the policy the stack names.
        let sshd = try sshd(policy: "[policy ssh]\nrequire = totp or recovrey\n")
        defer { sshd.stop() }
        do {
            let terminal = try Terminal(sshd.command(Self.coder))
            defer { terminal.close() }
            if (try? terminal.waitFor("Verification code", seconds: 5)) != nil {
                try terminal.type(try oathtool(key, offset: 30))
            }
            let screen = try terminal.waitFor("Keyway is not available", seconds: 20)
            #expect(!screen.contains("IN-\(Self.coder)"), "\(screen)")
        }
        // The stack as installed, in a PAM directory of its own.
        let pamDirectory = fixture.directory + "/stacks"
        mkdir(pamDirectory, 0o755)
        let stack = try example("sshd").replacingOccurrences(
            of: "policy=totp", with: "policy=ssh config=\(fixture.configPath)")
        _ = FileManager.default.createFile(atPath: pamDirectory + "/sshd", contents: Data(stack.utf8))
        let health = try run(cliPath, ["--socket", fixture.socket, "health", "--pam-dir", pamDirectory])
        #expect(health.status == 2, "\(health.text)")
        #expect(
            health.output.first?.hasPrefix("KEYWAY CRITICAL - stacks \(pamDirectory)/sshd:") == true, "\(health.text)")
        #expect(health.text.contains("policy 'ssh' has errors"), "\(health.text)")
        let doctor = try run(
            cliPath, ["doctor", "--pam-dir", pamDirectory, "--sshd-config", sshd.directory + "/sshd_config"])
        let critical = doctor.output.filter { $0.hasPrefix("\(pamDirectory)/sshd:") && $0.contains(": critical: ") }
        #expect(critical.contains { $0.contains("policy 'ssh' has errors") }, "\(doctor.text)")
        #expect(doctor.text.contains("critical (logins failing now)"), "\(doctor.text)")
        print("ssh: a typo in a required policy: \(health.output.first ?? "")")
    }

    @Test("locked out over ssh, sshd_config as the guide writes it: until when, on the failure and after; no password")
    func lockedOutNoPassword() throws {
        defer { tearDown() }
        let key = try setUp()
        // pam/examples/sshd_config's lines alone: sshd's own PasswordAuthentication is left at its default.
        let sshd = try SSHServer(settings: try sshdSettings(), pam: try example("sshd"), users: [Self.coder])
        var running = true
        defer { if running { sshd.stop() } }
        let valid = try [-30, 0, 30, 60].map { try oathtool(key, offset: $0) }
        let wrong = (1...9).map { String(repeating: String($0), count: 6) }.filter { !valid.contains($0) }
        /// Types a wrong code at the prompt on the screen, then at each next one, until `words` are on the screen;
        /// the screen then.
        func guess(_ terminal: Terminal, until words: String) throws -> String {
            var screen = try terminal.screen()
            var next = 0
            while !screen.contains(words) && next < wrong.count {
                let prompts = screen.components(separatedBy: "Verification code").count - 1
                try terminal.type(wrong[next])
                next += 1
                let answered = waitUntil("the answer to \(wrong[next - 1])", seconds: 20, seen: { screen }) {
                    screen = (try? terminal.screen()) ?? screen
                    return screen.components(separatedBy: "Verification code").count - 1 > prompts
                        || screen.contains(words)
                }
                if !answered { break }
            }
            return screen
        }
        // The failure that starts the lock (the fifth, in the connection's second round of prompts).
        do {
            let terminal = try Terminal(sshd.command(Self.coder, ["-v"]), rows: 400)
            defer { terminal.close() }
            _ = try terminal.waitFor("Verification code", seconds: 20)
            var screen = try guess(terminal, until: "try again after")
            #expect(screen.contains("Too many failed attempts; try again after"), "\(screen)")
            // ssh goes on with keyboard-interactive, where the lock is said again without a prompt, until ssh gives
            // up: never a password prompt, and no code asked while it cannot count.
            var afterLock = ""
            waitUntil("what ssh does after the lock", seconds: 20, seen: { screen }) {
                screen = (try? terminal.screen()) ?? screen
                afterLock = screen.components(separatedBy: "Too many failed attempts").dropFirst().joined()
                return afterLock.contains("Permission denied") || afterLock.contains("password:")
            }
            #expect(afterLock.contains("Permission denied (keyboard-interactive)"), "\(screen)")
            #expect(!afterLock.contains("Verification code") && !screen.contains("password:"), "\(screen)")
            // ssh -v: sshd still offers keyboard-interactive, never an empty list (on which ssh tries a password).
            let offered = screen.split(separator: "\n").filter { $0.contains("Authentications that can continue:") }
            #expect(offered.allSatisfy { !$0.hasSuffix("continue:") && !$0.hasSuffix("continue: ") }, "\(offered)")
        }
        // A fresh connection while locked: the lock's words before any prompt, no password prompt, no shell.
        let terminal = try Terminal(sshd.command(Self.coder, ["-v"]), rows: 400)
        defer { terminal.close() }
        let screen = try terminal.waitFor("try again after", seconds: 20)
        #expect(screen.contains("Too many failed attempts; try again after"), "\(screen)")
        #expect(!screen.contains("Verification code"), "a prompt before the lock's words:\n\(screen)")
        let after = try terminal.screen()
        #expect(!after.contains("password:") && !after.contains("IN-\(Self.coder)"), "\(after)")
        print(
            "ssh: locked, the screen says: \(after.split(separator: "\n").filter { $0.contains("try again") }.first ?? "")"
        )
        // After the roll-out (unenrolled=allow taken out, so enrollment is concealed, as for a name with nothing
        // enrolled, whose counters lock alike): the same, before any prompt.
        sshd.stop()
        running = false
        let concealing = try SSHServer(
            settings: try sshdSettings(),
            pam: try example("sshd").replacingOccurrences(of: " unenrolled=allow", with: ""), users: [Self.coder])
        defer { concealing.stop() }
        let again = try Terminal(concealing.command(Self.coder), rows: 400)
        defer { again.close() }
        let concealed = try again.waitFor("try again after", seconds: 20)
        #expect(!concealed.contains("Verification code") && !concealed.contains("password:"), "\(concealed)")
    }

    @Test("keywayd stopped: the ssh client shows that Keyway is not available; no shell")
    func reasonWhenUnavailable() throws {
        defer { tearDown() }
        _ = try setUp()
        let sshd = try SSHServer(
            settings: try sshdSettings() + ["PasswordAuthentication no"], pam: try example("sshd"),
            users: [Self.coder])
        defer { sshd.stop() }
        fixture.stopDaemon()
        let terminal = try Terminal(sshd.command(Self.coder))
        defer { terminal.close() }
        // The prompt comes from keywayd's note of the account (it has a code); the check cannot.
        if (try? terminal.waitFor("Verification code:", seconds: 5)) != nil { try terminal.type("123456") }
        let screen = try terminal.waitFor("Keyway is not available", seconds: 20)
        #expect(!screen.contains("IN-\(Self.coder)"), "\(screen)")
        // ssh asks again (its next keyboard-interactive round), never a shell.
        let again = try terminal.waitFor("Verification code:", count: 2, seconds: 20)
        #expect(!again.contains("$ "), "\(again)")
    }
}
