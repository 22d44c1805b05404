import Foundation
import KeywayCore
import Testing

@testable import KeywayProcessFixture

/// TOTP as an administrator and a user meet it: `keyway enroll totp` in a terminal (the QR code on the screen, a code
/// from the "phone" confirming it), then codes from Debian's oathtool, not from Keyway's own implementation, through
/// pamtester on a real /etc/pam.d service and through real sudo in a terminal. Runs only inside
/// `scripts/test-isolated.sh`, where /etc is a private copy; everything made is removed afterwards all the same.
@Suite("TOTP through the module", .serialized)
struct TOTPModuleTests {
    let fixture = PAMFixture()
    let user = "kwtotp\(getpid() % 100_000)"
    var service: String { "keyway-totp-\(user)" }
    var pamFile: String { "/etc/pam.d/\(service)" }
    var sudoers: String { "/etc/sudoers.d/keyway-totp-\(user)" }

    /// The user, a service in /etc/pam.d with `policy` in front of nothing else, and a sudoers drop-in selecting it.
    func install(policy: String, config: String = "") throws {
        try requireIsolation()
        #expect(try TestAccounts.add(user))
        let rules = "Defaults:\(user) pam_service=\(service), !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n"
        try fixture.installSudoers(rules, at: sudoers)
        let arguments = "policy=\(policy) \(fixture.moduleArguments) \(config)"
        let stack = """
            auth     required \(modulePath) \(arguments)
            account  required \(modulePath) \(arguments)
            session  required pam_permit.so

            """
        _ = FileManager.default.createFile(atPath: pamFile, contents: Data(stack.utf8))
        fixture.startDaemon(config.isEmpty ? [] : ["--config", fixture.configPath])
    }

    func uninstall() {
        unlink(sudoers)
        unlink(pamFile)
        TestAccounts.remove(user)
        fixture.remove()
    }

    /// oathtool's code for `key` at `offset` seconds from now.
    func oathtool(_ key: String, offset: Int = 0) throws -> String {
        let seconds = Int(Date().timeIntervalSince1970) + offset
        let result = try run("/usr/bin/oathtool", ["--totp", "-b", "-N", "@\(seconds)", key])
        #expect(result.status == 0, "\(result.text)")
        return result.output.first ?? ""
    }

    /// `keyway enroll totp` in a terminal, as root at a console: the key read off the screen, a code for it typed.
    /// Returns the key and the screen as it was when the code was asked for.
    func enrollInTerminal() throws -> (key: String, screen: String) {
        let terminal = try Terminal("\(cliPath) --socket \(fixture.socket) enroll totp --user \(user)")
        defer { terminal.close() }
        let screen = try terminal.waitFor("Code from the app:")
        let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
        let key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
        #expect(key.count == 32, "a 20-byte key is 32 base32 letters: \(key)")
        try terminal.type(try oathtool(key))
        let done = try terminal.waitFor("[exit ")
        #expect(done.contains("The totp of \(user) is set"), "\(done)")
        #expect(done.contains("[exit 0]"), "\(done)")
        return (key, screen)
    }

    @Test("in an 80×24 terminal the whole QR code, the key and the prompt are on the screen; --qr-file writes an image")
    func smallTerminal() throws {
        defer { uninstall() }
        try install(policy: "totp-only", config: fixture.writeConfig("[policy totp-only]\nrequire = totp\n"))
        let terminal = try Terminal(
            "\(cliPath) --socket \(fixture.socket) enroll totp --user \(user)", columns: 80, rows: 24)
        defer { terminal.close() }
        let screen = try terminal.waitFor("Code from the app:")
        let lines = screen.split(separator: "\n", omittingEmptySubsequences: false)
        let keyLine = try #require(lines.first { $0.hasPrefix("Key: ") }, "\(screen)")
        let key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let uri =
            "otpauth://totp/Keyway:\(user)%40\(host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })?secret=\(key)"
        let drawn = Self.asShown(try run("/usr/bin/qrencode", ["-l", "L", "-m", "2", "-t", "UTF8i", uri]).output)
        #expect(drawn.count > 10)
        #expect(
            screen.contains(drawn.joined(separator: "\n")), "the whole QR code is not on the 24-line screen:\n\(screen)"
        )
        #expect(lines.count <= 24 && screen.contains("Scan this code"), "\(screen)")
        terminal.close()
        // --qr-file: the image, new and private; the terminal gets no blocks.
        let file = fixture.directory + "/qr.svg"
        let written = try Terminal(
            "\(cliPath) --socket \(fixture.socket) enroll totp --user \(user) --qr-file \(file)", columns: 80, rows: 24)
        defer { written.close() }
        let told = try written.waitFor("Code from the app:")
        #expect(told.contains("The QR code is in \(file)") && !told.contains("▀"), "\(told)")
        var info = stat()
        #expect(stat(file, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect((try String(contentsOfFile: file, encoding: .utf8)).hasPrefix("<svg"))
    }

    /// qrencode's lines as a captured screen shows them: without trailing spaces, blank lines dropped (the capture of
    /// a blank line is empty, and the code's blank quiet-zone lines are blank).
    static func asShown(_ lines: [String]) -> [String] {
        lines.map { String($0.reversed().drop { $0 == " " }.reversed()) }.filter { !$0.isEmpty }
    }

    /// pamtester on the real service, with `code` on standard input.
    func pamtester(_ code: String) throws -> Run {
        try run("/usr/bin/pamtester", ["-v", service, user, "authenticate"], input: code + "\n")
    }

    @Test("enrollment shows the QR code of the otpauth URI; oathtool's code works once; reused, old and wrong fail")
    func enrollAndPamtester() throws {
        defer { uninstall() }
        try install(policy: "totp-only", config: fixture.writeConfig("[policy totp-only]\nrequire = totp\n"))
        let (key, screen) = try enrollInTerminal()
        // The QR code on the screen is the one for this URI, line for line as Debian's qrencode draws it.
        var host = [CChar](repeating: 0, count: 256)
        gethostname(&host, 255)
        let uri =
            "otpauth://totp/Keyway:\(user)%40\(host.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })?secret=\(key)"
        #expect(screen.replacingOccurrences(of: "\n", with: "").contains(uri), "the URI (wrapped at 120 columns)")
        let qr = try run("/usr/bin/qrencode", ["-l", "L", "-m", "2", "-t", "UTF8i", uri])
        let drawn = Self.asShown(qr.output)
        #expect(drawn.count > 10)
        #expect(screen.contains(drawn.joined(separator: "\n")), "the QR code is not on the screen:\n\(screen)")
        // The enrollment spent the current step's code: the next step's (within the window) logs in, once.
        let next = try oathtool(key, offset: 30)
        let right = try pamtester(next)
        #expect(right.status == 0, "\(right.text)")
        #expect(right.text.contains("successfully authenticated"), "\(right.text)")
        let reused = try pamtester(next)
        #expect(reused.status != 0, "a code used once is refused: \(reused.text)")
        let old = try pamtester(try oathtool(key, offset: -60))
        #expect(old.status != 0, "a code two steps old is refused: \(old.text)")
        let wrong = try pamtester(next == "000000" ? "000001" : "000000")
        #expect(wrong.status != 0, "\(wrong.text)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(status.text.contains("totp"), "\(status.text)")
        #expect(status.text.contains("3 consecutive failures"), "reused, old and wrong are counted: \(status.text)")
        #expect(!fixture.daemonLog.contains(key), "the secret is never logged")
    }

    @Test("three mistyped confirmations save nothing, say so and exit 5 (enrollment refused), not a config error")
    func mistypedConfirmation() throws {
        defer { uninstall() }
        try install(policy: "totp-only", config: fixture.writeConfig("[policy totp-only]\nrequire = totp\n"))
        let terminal = try Terminal("\(cliPath) --socket \(fixture.socket) enroll totp --user \(user)")
        defer { terminal.close() }
        let screen = try terminal.waitFor("Code from the app:")
        let keyLine = try #require(screen.split(separator: "\n").first { $0.hasPrefix("Key: ") }, "\(screen)")
        let key = String(keyLine.dropFirst(5).prefix { $0 != "(" }).replacingOccurrences(of: " ", with: "")
        let right = try oathtool(key)
        // Each typo once the one before is answered, as a person reads the answer before typing again.
        let typos = [("12345", "a code is "), (right == "000000" ? "000001" : "000000", "current code")]
        for (typo, answer) in typos {
            try terminal.type(typo)
            try terminal.waitFor(answer, seconds: 30)
        }
        try terminal.type("abcdef")
        let done = try terminal.waitFor("[exit ", seconds: 30)
        #expect(done.contains("[exit 5]"), "\(done)")
        #expect(done.contains("nothing was saved"), "\(done)")
        #expect(done.contains("current code"), "each typo is answered: \(done)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(!status.text.contains("totp: enrolled"), "nothing was enrolled: \(status.text)")
    }

    @Test("with standard error not a terminal (a pipe, as a log would be), no secret is made or shown")
    func secretOnlyOnATerminal() throws {
        defer { uninstall() }
        try install(policy: "totp-only", config: fixture.writeConfig("[policy totp-only]\nrequire = totp\n"))
        let piped = try run(cliPath, ["--socket", fixture.socket, "enroll", "totp", "--user", user, "--stdin"])
        #expect(piped.status != 0, "\(piped.text)")
        #expect(piped.text.contains("shown only on a terminal"), "\(piped.text)")
        #expect(!piped.text.contains("otpauth://") && !piped.text.contains("Key:"), "\(piped.text)")
        let status = try run(cliPath, ["--socket", fixture.socket, "status", "--user", user])
        #expect(!status.text.contains("totp: enrolled"), "nothing was enrolled: \(status.text)")
        // On a terminal it still works (enrollInTerminal reads the key off the screen).
        _ = try enrollInTerminal()
    }

    @Test("2 of (gesture, passcode, totp) through pamtester: the pattern and a code pass; the pattern alone does not")
    func twoOfThree() throws {
        defer { uninstall() }
        try fixture.enrollPattern(user, "2-4-9-3")
        try install(
            policy: "two-of", config: fixture.writeConfig("[policy two-of]\nrequire = 2 of (gesture, passcode, totp)\n")
        )
        let (key, _) = try enrollInTerminal()
        // No passcode is enrolled, but a login prompt does not say so (unenrolled = conceal): Enter moves on to the code.
        let both = try pamtester("2-4-9-3\n\n" + (try oathtool(key, offset: 30)))
        #expect(both.status == 0, "\(both.text)")
        let alone = try pamtester("2-4-9-3")
        #expect(alone.status != 0, "one factor of two is not enough: \(alone.text)")
    }

    @Test("real sudo in a terminal: the pattern and a code from oathtool (gesture and totp) → root")
    func sudoGestureAndTotp() throws {
        defer { uninstall() }
        try fixture.enrollPattern(user, "2-4-9-3")
        try install(policy: "two-step", config: fixture.writeConfig("[policy two-step]\nrequire = gesture and totp\n"))
        let (key, _) = try enrollInTerminal()
        let terminal = try Terminal("setpriv --reuid \(user) --regid \(user) --init-groups sudo -k id -u")
        defer { terminal.close() }
        try terminal.waitFor("Pattern (dots 1-9):")
        try terminal.type("2-4-9-3")
        try terminal.waitFor("Verification code:")
        try terminal.type(try oathtool(key, offset: 30))
        let screen = try terminal.waitFor("[exit ")
        #expect(screen.contains("[exit 0]"), "\(screen)")
        #expect(screen.split(separator: "\n").contains("0"), "sudo ran id -u as root: \(screen)")
    }
}
