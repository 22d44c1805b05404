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
}
