import Foundation
import Testing

@testable import KeywayProcessFixture

/// `keyway doctor --pam-dir DIR` as built (`build/keyway`), on directories written for the test, with the fixture's
/// keywayd answering on its socket.
@Suite("keyway doctor", .serialized)
struct DoctorTests {
    static let commonAuth = """
        auth\t[success=1 default=ignore]\tpam_unix.so nullok
        auth\trequisite\t\t\tpam_deny.so
        auth\trequired\t\t\tpam_permit.so
        """

    /// A directory `name` in the fixture holding `files`.
    func directory(_ fixture: PAMFixture, _ name: String, _ files: [String: String]) -> String {
        let path = fixture.directory + "/" + name
        mkdir(path, 0o755)
        for (file, text) in files {
            _ = FileManager.default.createFile(atPath: path + "/" + file, contents: Data(text.utf8))
        }
        return path
    }

    @Test("a bad directory: each warning with its file:line and fix, exit 1; a good one: the summary, exit 0")
    func directories() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        fixture.startDaemon()
        let socket = "socket=\(fixture.socket)"
        let bad = directory(
            fixture, "bad",
            [
                "sudo": "auth required pam_keyway.so \(socket) policy=pattern\n",
                "login": "auth [success=done default=ignore] pam_keyway.so \(socket) polcy=pattern\n"
                    + "@include common-auth\n",
                "common-auth": Self.commonAuth,
            ])
        let result = try run(cliPath, ["doctor", "--pam-dir", bad])
        #expect(result.status == 1, "\(result.text)")
        #expect(
            result.output.contains("login: auth at login:1, [success=done default=ignore], arguments refused"),
            "\(result.text)")
        #expect(
            result.output.contains { $0.hasPrefix("\(bad)/login:1: warning: pam_keyway.so refuses its arguments") },
            "\(result.text)")
        let lockOut = try #require(result.output.firstIndex { $0.hasPrefix("\(bad)/sudo:1: warning: `required`") })
        #expect(result.output[lockOut].hasSuffix("; sudo is one of root's ways in: this could lock out root"))
        #expect(
            result.output[lockOut + 1]
                == "  fix: auth [success=done default=ignore] pam_keyway.so \(socket) policy=pattern, with the "
                + "password below it (e.g. @include common-auth)", "\(result.text)")
        // The roll-out: the required line refuses every account that can log in and has no pattern, root among
        // them (the fixture's store has nothing for root; other accounts of this machine may be named too).
        let refused = result.output.filter { $0.hasPrefix("\(bad)/sudo:1: warning: policy 'pattern' would refuse ") }
        #expect(refused.count == 1, "\(result.text)")
        #expect(refused.first?.contains(" gesture: root") == true, "\(result.text)")
        #expect(result.output.last == "2 stacks in \(bad) use Keyway; 3 warnings", "\(result.text)")

        let good = directory(
            fixture, "good",
            [
                "sudo": "auth [success=done default=ignore] pam_keyway.so \(socket) policy=pattern next=password\n"
                    + "@include common-auth\n",
                "common-auth": Self.commonAuth,
            ])
        let clean = try run(cliPath, ["doctor", "--pam-dir", good])
        #expect(clean.status == 0, "\(clean.text)")
        #expect(
            clean.output == [
                "sudo: auth at sudo:1, [success=done default=ignore], policy pattern",
                "1 stack in \(good) uses Keyway; nothing to fix",
            ], "\(clean.text)")

        let none = try run(
            cliPath, ["doctor", "--pam-dir", directory(fixture, "none", ["common-auth": Self.commonAuth])])
        #expect(none.status == 0, "\(none.text)")
        #expect(none.output.last?.hasPrefix("no stack uses Keyway") == true, "\(none.text)")

        // Without the fixture's keywayd: one warning for the socket, and the same directory is no longer clean.
        fixture.stopDaemon()
        let stopped = try run(cliPath, ["doctor", "--pam-dir", good])
        #expect(stopped.status == 1, "\(stopped.text)")
        #expect(
            stopped.output.contains { $0.hasPrefix("warning: keywayd does not answer at \(fixture.socket)") },
            "\(stopped.text)")

        let asNobody = try run(
            "/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", cliPath, "doctor"])
        #expect(asNobody.status == 77, "\(asNobody.text)")
        #expect(asNobody.text.contains("doctor runs as root"), "\(asNobody.text)")
    }
}
