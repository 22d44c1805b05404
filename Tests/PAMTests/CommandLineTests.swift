import Foundation
import Testing

/// The `keyway` command as built (`build/keyway`): error messages and exit statuses, table-driven.
@Suite("keyway command line")
struct CommandLineTests {
    @Test(
        "usage errors say what is wrong, suggest the near miss, and exit 64",
        arguments: [
            (["--usr", "alice", "status"], "Error: Unknown option '--usr'. Did you mean '--user'?"),
            (["status", "--stor"], "Error: Unknown option '--stor'. Did you mean '--store'?"),
            (["statsu"], "Error: Unknown command 'statsu'. Did you mean 'status'?"),
            (["enroll", "gesture", "--user"], "Error: Missing value for '--user <user>'."),
            (
                ["enroll", "retina", "--user", "alice"],
                "Error: Unknown factor 'retina'; use gesture, biometric or passcode."
            ),
            (["enroll", "gesture"], "Error: Missing '--user <user>'."),
            (["sensor", "present", "alice"], "Error: unknown command 'present' with 1 arguments"),
            (["unlock", "--stdin=yes", "--user", "a"], "Error: The flag '--stdin' takes no value."),
            // Numbers are checked where they are parsed: none falls back silently, none crashes.
            (["bench", "--rounds", "0"], "Error: '--rounds 0': give a whole number from 1 to 100000."),
            (["bench", "--rounds", "abc"], "Error: '--rounds abc': give a whole number from 1 to 100000."),
            (["bench", "--rounds=2.5"], "Error: '--rounds 2.5': give a whole number from 1 to 100000."),
            (["sensor", "plug", "--wait", "abc"], "Error: '--wait abc': give a number from 0 to 600."),
            (["sensor", "plug", "--wait", "-1"], "Error: '--wait -1': give a number from 0 to 600."),
            (["sensor", "plug", "--wait", "nan"], "Error: '--wait nan': give a number from 0 to 600."),
            (
                ["change", "biometric", "--user", "alice"],
                "Error: A biometric is changed by enrolling it again: keyway enroll biometric --user alice."
            ),
        ])
    func usageErrors(arguments: [String], message: String) throws {
        let result = try run(cliPath, arguments)
        #expect(result.status == 64, "\(result.text)")
        #expect(result.output.first?.hasPrefix(message) == true, "\(result.text)")
        #expect(result.output.contains("See 'keyway --help'."))
    }

    @Test(
        "outcomes map to exit statuses: 0 success, 1 failed, 2 locked, 3 not enrolled, 65/66 config, 74 store, 78 policy"
    )
    func exitStatuses() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        let store = ["--store", fixture.store]
        func unlock(_ user: String, _ typed: String) throws -> Run {
            try run(cliPath, store + ["unlock", "--user", user, "--policy", "pattern", "--stdin"], input: typed)
        }
        #expect(try unlock("alice", "2-4-9-3\n").status == 0)
        #expect(try unlock("alice", "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n").status == 1)
        _ = try unlock("alice", "7-5-3-6\n9-5-1-4\n8-4-2-6\n")
        let locked = try unlock("alice", "2-4-9-3\n")
        #expect(locked.status == 2, "\(locked.text)")
        #expect(locked.text.contains("gesture is locked until 20"), "\(locked.text)")
        #expect(try unlock("bob", "2-4-9-3\n").status == 3)
        let unknown = try run(cliPath, store + ["unlock", "--user", "alice", "--policy", "no-such", "--stdin"])
        #expect(unknown.status == 78, "\(unknown.text)")
        #expect(unknown.text.contains("unknown policy 'no-such'"), "\(unknown.text)")
        let missing = try run(cliPath, store + ["--config", fixture.directory + "/absent.conf", "status"])
        #expect(missing.status == 66, "\(missing.text)")
        #expect(missing.text.contains("absent.conf: error: the file does not exist"), "\(missing.text)")
        fixture.writeConfig("[gesture]\nmin-dots = 12\n")
        let broken = try run(cliPath, store + ["--config", fixture.configPath, "status"])
        #expect(broken.status == 65, "\(broken.text)")
        #expect(broken.text.contains("keyway.conf:2:12: error: min-dots = 12 is out of range"), "\(broken.text)")
        chmod(fixture.store, 0o644)
        let unsafe = try run(cliPath, store + ["status"])
        #expect(unsafe.status == 74, "\(unsafe.text)")
        #expect(unsafe.text.contains("keyway: Keyway store \(fixture.store): it is accessible to group or others"))
        chmod(fixture.store, 0o600)
        let reset = try run(cliPath, store + ["reset", "--user", "alice"])
        #expect(reset.status == 0, "\(reset.text)")
        #expect(try unlock("alice", "2-4-9-3\n").status == 0)
        let audit = try run(cliPath, store + ["audit", "--user", "alice"])
        #expect(audit.text.contains("via keyway reset reset alice all"), "\(audit.text)")
    }

    @Test("enroll and change with --stdin, status shows the factors, remove takes them away")
    func lifecycle() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let store = ["--store", fixture.store]
        #expect(
            try run(cliPath, store + ["enroll", "passcode", "--user", "carol", "--stdin"], input: "739155\n").status
                == 0)
        let weak = try run(cliPath, store + ["enroll", "passcode", "--user", "dave", "--stdin"], input: "123456\n")
        #expect(weak.status == 1)
        #expect(weak.text.contains("That passcode is too easy to guess; choose another."))
        let change = try run(
            cliPath, store + ["change", "passcode", "--user", "carol", "--stdin"], input: "739155\n482915\n")
        #expect(change.status == 0, "\(change.text)")
        let status = try run(cliPath, store + ["status", "--user", "carol"])
        #expect(status.text.contains("passcode: enrolled"), "\(status.text)")
        #expect(try run(cliPath, store + ["remove", "passcode", "--user", "carol"]).status == 0)
        let gone = try run(cliPath, store + ["remove", "passcode", "--user", "carol"])
        #expect(gone.status == 3, "\(gone.text)")
    }
}
