import Foundation
import Testing

@testable import KeywayProcessFixture

@Suite("syslog: every decision, never a secret", .serialized)
struct SyslogTests {
    @Test("read-tty where the module cannot read the terminal itself: the default mode, and the log says why")
    func readTTYFallsBack() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        let config = fixture.writeConfig("[policy either]\nrequire = first of (biometric, gesture)\n")
        fixture.service("kwtty", "policy=either \(config) read-tty")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        // U+0600 joins the character after it: split by Characters, each "\u{600}/.." hid its '/'.
        let joined = "pts/\u{600}/../\u{600}/../etc/passwd"
        for options in [["--no-tty"], ["--tty", "/dev/null"], ["--tty", "pts/../../etc/passwd"], ["--tty", joined]] {
            let result = try capture.harness(options + ["--answer", "2-4-9-3", fixture.services, "kwtty", "alice"])
            #expect(result.output.last?.hasPrefix("result: PAM_SUCCESS") == true, "\(result.text)")
        }
        let lines = capture.lines.filter { $0.contains("read-tty") }
        for reason in [
            "read-tty: PAM_TTY is not set; default mode (Enter after a touch)",
            "read-tty: PAM_TTY /dev/null is not a terminal; default mode",
            "read-tty: PAM_TTY (pts/../../etc/passwd) is not a device; default mode",
            "read-tty: PAM_TTY (\(joined)) is not a device; default mode",
        ] {
            #expect(lines.contains { $0.hasPrefix("<86>") && $0.contains(reason) }, "\(reason): \(lines)")
        }
    }

    @Test("every call is located (remote counts apart): a remote one says why in its log line, typed factors too")
    func locatedOnEveryCall() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        let config = fixture.writeConfig("[policy anywhere]\nrequire = gesture\nwhen = remote\n")
        fixture.service("kwtyped", "policy=pattern")
        fixture.service("kwwhen", "policy=anywhere \(config)")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        for service in ["kwtyped", "kwwhen"] {
            let result = try capture.harness(["--no-tty", "--answer", "2-4-9-3", fixture.services, service, "alice"])
            #expect(result.output.last?.hasPrefix("result: PAM_SUCCESS") == true, "\(service): \(result.text)")
        }
        let lines = capture.lines.filter { $0.contains("pam_keyway") && $0.contains("outcome=success") }
        let typed = lines.filter { $0.contains("service=kwtyped") }
        let located = lines.filter { $0.contains("service=kwwhen") }
        #expect(typed.count == 1 && typed[0].contains("remote=yes (PAM_TTY is not set)"), "\(lines)")
        #expect(located.count == 1 && located[0].contains("remote=yes (PAM_TTY is not set)"), "\(lines)")
    }

    @Test("decisions go to authpriv with user, service, policy, steps and outcome; errors say why; no pattern appears")
    func decisionsAreLogged() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("kwlog", "policy=pattern")
        let broken = "auth required \(modulePath) policy=pattern polcy=x \(fixture.moduleArguments)\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/kwbroken", contents: Data(broken.utf8))
        let twice = "auth required \(modulePath) policy=passcode policy=pattern \(fixture.moduleArguments)\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/kwtwice", contents: Data(twice.utf8))
        let away = "auth required \(modulePath) policy=pattern socket=\(fixture.directory)/absent.sock\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/kwaway", contents: Data(away.utf8))
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        for (service, user, answers) in [
            ("kwlog", "alice", ["3-4-9-2", "2-4-9-3"]),
            ("kwlog", "alice", ["6-1-8-3", "4-3-8-1-6", "7-5-3-6"]),
            ("kwlog", "bob", ["6-1-8-3", "4-3-8-1-6", "7-5-3-6"]), ("kwbroken", "alice", ["2-4-9-3"]),
            ("kwtwice", "alice", ["2-4-9-3"]), ("kwaway", "alice", ["2-4-9-3"]),
            ("kwlog", "mallory\nJan  1 00:00:00 host sshd[1]: Accepted", ["6-1-8-3", "4-3-8-1-6", "7-5-3-6"]),
        ] {
            _ = try capture.harness(answers.flatMap { ["--answer", $0] } + [fixture.services, service, user])
        }
        let lines = capture.lines.filter { $0.contains("pam_keyway") }
        #expect(
            lines.contains {
                $0.hasPrefix("<86>")
                    && $0.contains(
                        "pam_keyway(kwlog:auth): user=alice policy=pattern "
                            + "outcome=success steps=[gesture#1:mismatch, "
                            + "gesture#2:succeeded] service=kwlog")
            },
            "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("<85>") && $0.contains("outcome=failure(authenticationFailed)")
                    && $0.contains("gesture#3:attempts-exhausted")
            }, "\(lines)")
        // The administrator's log tells what the person is not told: bob has no pattern.
        #expect(
            lines.contains {
                $0.contains(
                    "user=bob policy=pattern outcome=failure(authenticationFailed) "
                        + "steps=[gesture#1:not-enrolled")
            }, "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("<83>")
                    && $0.contains(
                        "configuration error, failing closed: "
                            + "unknown argument 'polcy=x'")
            }, "\(lines)")
        #expect(
            lines.contains {
                $0.hasPrefix("<83>")
                    && $0.contains(
                        "pam_keyway(kwtwice:auth): configuration error, failing closed: "
                            + "'policy=pattern' repeats 'policy=passcode'; give each argument once")
            }, "\(lines)")
        // keywayd unreachable: one error line saying where it was looked for and why it failed.
        let unreachable = lines.filter { $0.contains("pam_keyway(kwaway:auth)") }
        #expect(unreachable.count == 1, "\(unreachable)")
        #expect(
            unreachable.first.map {
                $0.hasPrefix("<83>") && $0.contains("outcome=failure(serviceUnavailable)")
                    && $0.contains("keywayd at \(fixture.directory)/absent.sock: connect to ")
                    && $0.contains("No such file or directory")
            } ?? false, "\(unreachable)")
        // A user name cannot start a forged line: it is refused, and logged with its control characters escaped.
        #expect(
            lines.contains {
                $0.contains(
                    "user=mallory\\x0aJan  1 00:00:00 host sshd[1]: Accepted refused: "
                        + "the user name contains a control character")
            }, "\(lines)")
        #expect(!lines.contains { $0.contains("mallory\n") })
        for secret in ["2-4-9-3", "2493", "3-4-9-2", "6-1-8-3", "4-3-8-1-6", "7-5-3-6", "24963", "34692"] {
            #expect(!lines.joined().contains(secret), "\(secret) appeared in the log")
        }
    }
}
