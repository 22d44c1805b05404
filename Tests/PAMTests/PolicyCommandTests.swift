import Foundation
import Testing

@testable import KeywayProcessFixture

/// `keyway policy check | list | show` and `keyway unlock --policy`, run as an administrator would.
@Suite("keyway policy: check, list, show", .serialized)
struct PolicyCommandTests {
    let fixture = PAMFixture()

    func keyway(_ arguments: [String], input: String? = nil) throws -> Run {
        try Started(cliPath, ["--config", fixture.configPath] + arguments, input: input, separateErrors: true).finish()
    }

    static let configuration = """
        [gesture]
        attempts = 4

        [policy sudo]
        require = gesture or passcode

        [policy sudo for group wheel]
        require = gesture and passcode

        [policy ssh]
        require = 2 of (gesture, passcode, biometric)
        """

    @Test("check: silent and 0 when valid, warnings on stderr; 65 with every error; 66 for a missing file")
    func check() throws {
        defer { fixture.remove() }
        fixture.writeConfig(Self.configuration)
        let valid = try keyway(["policy", "check"])
        #expect(valid.status == 0 && valid.output.isEmpty, "\(valid.text)")
        fixture.writeConfig(Self.configuration + "\n[policy remote-finger]\nrequire = biometric or gesture\n")
        let warned = try keyway(["policy", "check"])
        #expect(warned.status == 0 && warned.standardOutput.isEmpty, "\(warned.text)")
        #expect(warned.text.contains("warning: policy 'remote-finger' cannot succeed in a remote session") == false)
        fixture.writeConfig(Self.configuration + "\n[policy remote-finger]\nrequire = biometric and gesture\n")
        let warning = try keyway(["policy", "check"])
        #expect(warning.status == 0 && warning.standardOutput.isEmpty, "\(warning.text)")
        #expect(
            warning.text.contains(
                "keyway.conf:13:11: warning: policy 'remote-finger' cannot succeed in a remote session: biometric "
                    + "cannot serve remote sessions"), "\(warning.text)")
        fixture.writeConfig(Self.configuration + "\n[policy broken]\nrequire = gesture or pascode\nwhen = lcoal\n")
        let broken = try keyway(["policy", "check"])
        #expect(broken.status == 65, "\(broken.text)")
        #expect(broken.standardOutput.isEmpty)
        #expect(broken.text.contains("keyway.conf:13:22: error: unknown factor 'pascode'"), "\(broken.text)")
        #expect(broken.text.contains("help: did you mean 'passcode'?"))
        #expect(broken.text.contains("keyway.conf:14:8: error: 'lcoal' is not valid for when"), "\(broken.text)")
        let missing = try Started(
            cliPath, ["--config", fixture.directory + "/none.conf", "policy", "check"], separateErrors: true
        ).finish()
        #expect(missing.status == 66, "\(missing.text)")
    }

    @Test("drop-ins: read in name order, a later value wins; the directory and each file must be root's alone")
    func dropIns() throws {
        defer { fixture.remove() }
        fixture.writeConfig(Self.configuration)
        let directory = fixture.configPath + ".d"
        mkdir(directory, 0o755)
        func dropIn(_ name: String, _ text: String, mode: mode_t = 0o644) {
            _ = FileManager.default.createFile(atPath: directory + "/" + name, contents: Data(text.utf8))
            chmod(directory + "/" + name, mode)
        }
        dropIn("20-later.conf", "[gesture]\nattempts = 6\n")
        dropIn("10-earlier.conf", "[gesture]\nattempts = 5\n")
        dropIn("notes.txt", "not a drop-in, not read\n")
        let shown = try keyway(["policy", "show", "sudo"])
        #expect(shown.status == 0, "\(shown.text)")
        #expect(shown.text.contains("gesture.attempts = 6  (\(directory)/20-later.conf:2)"), "\(shown.text)")
        dropIn("30-open.conf", "[gesture]\nattempts = 2\n", mode: 0o666)
        let open = try keyway(["policy", "check"])
        #expect(open.status == 65, "\(open.text)")
        #expect(
            open.text.contains("\(directory)/30-open.conf: error: it is writable by group and others (mode 0666)"),
            "\(open.text)")
        unlink(directory + "/30-open.conf")
        symlink(fixture.configPath, directory + "/40-link.conf")
        let linked = try keyway(["policy", "check"])
        #expect(
            linked.status == 65 && linked.text.contains("40-link.conf: error: it is a symbolic link"), "\(linked.text)")
        unlink(directory + "/40-link.conf")
        chmod(directory, 0o777)
        let writable = try keyway(["policy", "check"])
        #expect(writable.status == 65, "\(writable.text)")
        #expect(
            writable.text.contains("\(directory): error: it is writable by group and others (mode 0777)"),
            "\(writable.text)")
        chmod(directory, 0o755)
        #expect(try keyway(["policy", "check"]).status == 0)
    }

    @Test("list: built-in and configured policies, their variants, and where each is defined")
    func list() throws {
        defer { fixture.remove() }
        fixture.writeConfig(Self.configuration)
        let listed = try keyway(["policy", "list"])
        #expect(listed.status == 0, "\(listed.text)")
        let text = listed.standardOutput.joined(separator: "\n")
        #expect(text.contains("pattern-or-passcode     gesture*4 or passcode*3  (built-in)"), "\(text)")
        #expect(text.contains("sudo                    gesture*4 or passcode*3  (\(fixture.configPath):4)"), "\(text)")
        #expect(text.contains("for group wheel: gesture*4 and passcode*3  (\(fixture.configPath):7)"), "\(text)")
        #expect(text.contains("ssh                     2 of (gesture*4, passcode*3, biometric*3)"), "\(text)")
    }

    @Test("show: the variant that applies, the tree with what follows each factor, every setting with its origin")
    func show() throws {
        defer { fixture.remove() }
        fixture.writeConfig(Self.configuration)
        let member = try keyway(["policy", "show", "sudo", "--group", "wheel"])
        #expect(member.status == 0, "\(member.text)")
        let text = member.standardOutput.joined(separator: "\n")
        #expect(text.contains("variant: for group wheel (\(fixture.configPath):7)"), "\(text)")
        #expect(text.contains("require = gesture*4 and passcode*3  (\(fixture.configPath):8)"), "\(text)")
        #expect(text.contains("gesture, up to 4 counted failures\n      on success: passcode is asked"), "\(text)")
        #expect(text.contains("gesture.attempts = 4  (\(fixture.configPath):2)"), "\(text)")
        #expect(text.contains("gesture.min-dots = 4  (default, enforced by keywayd)"), "\(text)")
        let other = try keyway(["policy", "show", "sudo"])
        let base = other.standardOutput.joined(separator: "\n")
        #expect(base.contains("variant: none matches, so the base applies (variants: for group wheel)"), "\(base)")
        #expect(base.contains("on failure, unavailable, fallback chosen or locked out: passcode is tried"), "\(base)")
        let remote = try keyway(["policy", "show", "biometrics-only", "--remote"])
        #expect(
            remote.text.contains(
                "warning: this policy can never succeed in a remote session: biometric cannot serve remote sessions"),
            "\(remote.text)")
        let unknown = try keyway(["policy", "show", "sduo"])
        #expect(unknown.status == 65 && unknown.text.contains("did you mean 'sudo'?"), "\(unknown.text)")
    }

    @Test("show explains `first of`: armed at once, the first success wins, failures per factor")
    func showFirstOf() throws {
        defer { fixture.remove() }
        fixture.writeConfig("[policy either]\nrequire = first of (biometric, gesture*5) or passcode\n")
        let shown = try keyway(["policy", "show", "either"])
        #expect(shown.status == 0, "\(shown.text)")
        let text = shown.standardOutput.joined(separator: "\n")
        #expect(text.contains("require = first of (biometric*3, gesture*5) or passcode*3"), "\(text)")
        #expect(
            text.contains(
                "    first of, at once: the sensor waits while the prompt does; the first success is enough:\n"
                    + "      biometric, up to 3 counted failures\n      gesture, up to 5 counted failures\n"
                    + "      on a success of any: this group succeeds"), "\(text)")
        #expect(text.contains("each failure counts for its own factor"), "\(text)")
    }

    @Test("unlock --policy evaluates a configured policy as the module does, variant and settings included")
    func unlock() throws {
        defer { fixture.remove() }
        fixture.writeConfig(Self.configuration)
        try fixture.enrollPattern("alice", "2-4-9-3")
        let store = ["--store", fixture.store]
        // gesture.attempts = 4: three wrong patterns leave a fourth try.
        let fourth = try keyway(
            store + ["unlock", "--user", "alice", "--policy", "sudo", "--stdin"],
            input: "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n2-4-9-3\n")
        #expect(fourth.status == 0, "\(fourth.text)")
        #expect(fourth.text.contains("policy=sudo outcome=success"), "\(fourth.text)")
        // root is in group root, not wheel: the base applies to root too.
        let unknown = try keyway(store + ["unlock", "--user", "alice", "--policy", "nope", "--stdin"], input: "\n")
        #expect(unknown.status == 78 && unknown.text.contains("unknown policy 'nope'"), "\(unknown.text)")
    }
}
