import Foundation
import Testing

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

    /// Creates the user, the sudoers drop-in (checked by visudo first) and the PAM service.
    func install(policy: String) throws {
        try requireIsolation()
        #expect(try run("/usr/sbin/useradd", ["-M", "-s", "/bin/bash", user]).status == 0)
        let rules = "Defaults:\(user) pam_service=\(service), !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n"
        let draft = fixture.directory + "/sudoers"
        _ = FileManager.default.createFile(
            atPath: draft, contents: Data(rules.utf8), attributes: [.posixPermissions: 0o440])
        let check = try run("/usr/sbin/visudo", ["-cf", draft])
        #expect(check.status == 0, "\(check.text)")
        guard check.status == 0 else { return }
        try FileManager.default.copyItem(atPath: draft, toPath: sudoers)
        let stack = """
            auth     required \(modulePath) policy=\(policy) \(fixture.moduleArguments) timeout=15
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
        _ = try? run("/usr/sbin/userdel", [user])
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
        // sudo passes PAM_SILENT: the grid and "Not recognized" stay quiet, the prompt does not.
        #expect(wrong.text.contains("Pattern (dots 1-9): "), "\(wrong.text)")
        #expect(!wrong.text.contains("Not recognized."), "\(wrong.text)")
    }

    @Test("biometrics-or-passcode: a touch sent by `keyway sensor` from another process lets sudo through")
    func sensorTouch() throws {
        defer { uninstall() }
        try fixture.enrollFinger(user, "right-index")
        try fixture.enrollPasscode(user, "739155")
        try install(policy: "biometrics-or-passcode")
        let waiting = try sudo("")
        let touch = try run(
            cliPath, ["sensor", "present", user, "right-index", "--wait", "15", "--sensor", fixture.sensor])
        let result = waiting.finish()
        #expect(touch.status == 0, "\(touch.text)")
        #expect(result.status == 0, "\(result.text)")
        #expect(result.standardOutput.filter { $0 != "Place your finger on the sensor." } == ["0"], "\(result.text)")
        // sudo shows PAM_TEXT_INFO on standard output; the instruction comes through despite sudo's PAM_SILENT.
        #expect(result.text.contains("Place your finger on the sensor."))
        // A stranger's touch three times falls back to the passcode, which sudo reads from standard input.
        let fallback = try sudo("739155\n")
        for _ in 0..<3 {
            _ = try run(cliPath, ["sensor", "stranger", "--wait", "15", "--sensor", fixture.sensor])
        }
        let second = fallback.finish()
        #expect(second.status == 0, "\(second.text)")
        #expect(second.standardOutput.filter { $0 != "Place your finger on the sensor." } == ["0"], "\(second.text)")
        #expect(second.text.contains("Passcode"), "\(second.text)")
    }
}
