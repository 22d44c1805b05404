import Foundation
import KeywayCore
import Testing

@testable import KeywayProcessFixture

/// GDM and KDE run the fingerprint as a PAM service of its own beside the password's (`gdm-fingerprint`,
/// `kde-fingerprint`; docs/ARCHITECTURE.md §14). Both legs reach one keywayd, which counts the biometric failures
/// per user and factor, so the lockout is one count across the legs and `first of` anywhere. Real libpam
/// (`pam_start_confdir`), the real module and keywayd; `keyway sensor` from another process is the finger.
@Suite("greeter legs: one lockout count", .serialized)
struct GreeterLegTests {
    let fixture = PAMFixture()

    func stranger() throws {
        let touch = try run(cliPath, ["sensor", "stranger", "--wait", "10", "--sensor", fixture.sensor])
        #expect(touch.status == 0, "\(touch.text)")
    }

    func waitForSensor() {
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: fixture.sensor + "/sensor.sock") {
            usleep(50_000)
        }
    }

    @Test("3 failures at the fingerprint leg and 2 at a `first of` prompt lock biometrics for both")
    func sharedAcrossLegs() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")
        try fixture.enrollFinger("alice", "right-index")
        let config = fixture.writeConfig("[policy either]\nrequire = first of (biometric, gesture)\n")
        fixture.service("fingerprint-leg", "policy=biometrics-only timeout=15")
        fixture.service("password-leg", "policy=either \(config)")

        // The fingerprint leg: the module waits at the sensor with no prompt; three strangers.
        let leg = try Started(harnessPath, [fixture.services, "fingerprint-leg", "alice"])
        for _ in 0..<3 { try stranger() }
        let first = leg.finish()
        #expect(first.result == "PAM_AUTH_ERR", "\(first.text)")
        #expect(try fixture.vault().store.attempts(user: "alice")[.biometric].consecutiveFailures == 3)

        // The password leg's `first of`: two more strangers while its prompt waits, then Enter.
        let touched = fixture.directory + "/touched"
        let prompt = try Started(
            harnessPath,
            ["--answer-when", touched, "", "--answer", "2-4-9-3", fixture.services, "password-leg", "alice"])
        waitForSensor()
        for _ in 0..<2 { try stranger() }
        #expect(FileManager.default.createFile(atPath: touched, contents: nil))
        let second = prompt.finish()
        #expect(second.output.contains("prompt: Touch the sensor and press Enter, or type your pattern (dots 1-9): "))
        // The fifth failure in a row locks biometrics: said once; the pattern, asked alone, still lets alice in.
        #expect(second.output.contains("error: Not recognized."), "\(second.text)")
        #expect(second.output.contains("prompt: Pattern (dots 1-9): "), "\(second.text)")
        #expect(second.result == "PAM_SUCCESS", "\(second.text)")
        #expect(try fixture.vault().store.attempts(user: "alice")[.biometric].consecutiveFailures == 5)

        // Back at the fingerprint leg: locked, without waiting at the sensor.
        let third = try harness(fixture, "fingerprint-leg", "alice")
        #expect(third.result != "PAM_SUCCESS", "\(third.text)")
        #expect(!third.output.contains("info: Place your finger on the sensor."), "\(third.text)")
        if case .lockedOut = try fixture.vault().availability(of: .biometric, for: UserContext(name: "alice")) {
        } else {
            Issue.record("biometrics are not locked after 5 failures across the legs")
        }
    }
}
