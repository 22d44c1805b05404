import Foundation
import KeywayCore
import KeywayTestSupport
import Testing

/// The biometric factor on fprintd's reader (`[biometric] backend = fprintd`, docs/ARCHITECTURE.md §18): a real
/// fprintd with libfprint's virtual reader on a private bus (scripts/fprintd-bus.sh), keywayd its only client,
/// authentications through the real module and libpam. Nothing of the system's bus or prints is touched.
@Suite("the biometric on fprintd", .serialized)
struct FprintdTests {
    let fixture = PAMFixture()
    static let user = "kwfprint"

    /// The harness as sudo runs the module for the account's owner (real uid the owner's, root effective): the
    /// reader answers only the person at it, as the sensor does.
    func authenticate(_ service: String, _ answers: [String] = []) throws -> Started {
        let uid = try TestAccounts.ids(Self.user).uid
        return try Started(
            "/usr/bin/setpriv",
            ["--ruid=\(uid)", "--euid=0", "--", harnessPath] + answers.flatMap { ["--answer", $0] }
                + [fixture.services, service, Self.user])
    }

    /// Waits for fprintd to start a verification after `count`, then puts print `id` on the reader.
    func scan(_ bus: FprintdBus, _ id: String, after count: inout Int) {
        #expect(bus.awaitVerification(after: count), "fprintd started no verification: \(fixture.daemonLog)")
        count = bus.verificationsStarted
        bus.scan(id)
    }

    func failures() throws -> Int {
        try fixture.vault().status(of: Self.user).first?[.biometric]?.failures ?? -1
    }

    func setUp() throws -> FprintdBus {
        try requireIsolation()
        #expect(try TestAccounts.add(Self.user))
        let bus = try FprintdBus()
        let enrolled = bus.enrollWithFprintd(Self.user, print: "print-a")
        #expect(enrolled.contains("enroll-completed"), "\(enrolled)")
        try fixture.enrollPasscode(Self.user, "739155")
        chmod(fixture.directory, 0o755)
        let config = fixture.writeConfig("[biometric]\nbackend = fprintd\ntimeout = 10s\n")
        fixture.startDaemon(["--config", fixture.configPath, "--system-bus", bus.address])
        fixture.service("bio", "policy=biometrics-only \(config)")
        fixture.service("either", "policy=biometrics-or-passcode \(config)")
        return bus
    }

    func tearDown(_ bus: FprintdBus?) {
        fixture.remove()
        bus?.stop()
        TestAccounts.remove(Self.user)
    }

    @Test("a print enrolled with fprintd-enroll authenticates; 5 wrong prints over two runs lock; the passcode clears")
    func matchLockAndPasscode() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        var seen = reader.verificationsStarted
        // The finger fprintd enrolled authenticates, and keywayd has recorded it: status lists it.
        let right = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        let matched = right.finish()
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        let status = try fixture.vault().status(of: Self.user).first?[.biometric]
        #expect(status?.labels == ["right-index-finger"], "\(String(describing: status))")
        // Three wrong prints in the first run (the policy's 3 attempts), counted by Keyway, not only by fprintd.
        let first = try authenticate("bio")
        for _ in 0..<3 { scan(reader, "print-b", after: &seen) }
        let refused = first.finish()
        #expect(refused.result != "PAM_SUCCESS", "\(refused.text)")
        #expect(try failures() == 3)
        // Two more in a second run reach the lockout of 5: only the passcode unlocks it now.
        let second = try authenticate("bio")
        for _ in 0..<2 { scan(reader, "print-b", after: &seen) }
        let locked = second.finish()
        #expect(locked.result != "PAM_SUCCESS", "\(locked.text)")
        #expect(try failures() == 5)
        let availability = try fixture.vault().status(of: Self.user).first?[.biometric]?.availability
        guard case .lockedOut? = availability else {
            Issue.record("biometrics not locked after 5 wrong prints: \(String(describing: availability))")
            return
        }
        // The lock holds even for the right print: fprintd is not asked (no verification starts).
        let before = reader.verificationsStarted
        let stillLocked = try authenticate("bio").finish()
        #expect(stillLocked.result != "PAM_SUCCESS", "\(stillLocked.text)")
        #expect(reader.verificationsStarted == before)
        // The passcode, asked because biometrics are locked, clears the lock.
        let passcode = try authenticate("either", ["739155"]).finish()
        #expect(passcode.result == "PAM_SUCCESS", "\(passcode.text)")
        #expect(try failures() == 0)
        let again = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        #expect(again.finish().result == "PAM_SUCCESS")
    }

    @Test("a peer on the bus forging fprintd's VerifyStatus, as nobody and as root, decides nothing and counts nothing")
    func forgedStatus() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        var seen = reader.verificationsStarted
        let device = try String(contentsOfFile: reader.directory + "/device", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let waiting = try authenticate("bio")
        #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
        seen = reader.verificationsStarted
        // Any peer may emit a signal on fprintd's path and interface: a match to let itself in, no-matches to lock
        // the person out. Only fprintd's own unique name is listened to.
        for (who, verdict) in [("65534", "verify-match"), ("65534", "verify-no-match"), ("0", "verify-match")] {
            for _ in 0..<3 {
                let sent = reader.script(
                    "run", "setpriv", "--reuid=\(who)", "--regid=\(who)", "--clear-groups", "dbus-send",
                    "--bus=\(reader.address)", "--type=signal", device, "net.reactivated.Fprint.Device.VerifyStatus",
                    "string:\(verdict)", "boolean:true")
                #expect(sent.status == 0, "dbus-send as uid \(who): \(sent.output)")
            }
        }
        usleep(500_000)
        guard waiting.process.isRunning else {
            Issue.record("a forged status ended the wait: \(waiting.finish().text)")
            return
        }
        #expect(try failures() == 0)
        #expect(reader.verificationsStarted == seen)
        // The person's own finger still decides.
        reader.scan("print-a")
        let matched = waiting.finish()
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        #expect(try failures() == 0)
    }

    @Test("fprintd killed mid-verify, and fprintd absent: the passcode follows, the log names why, nothing counted")
    func fprintdGone() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        let seen = reader.verificationsStarted
        let waiting = try authenticate("either", ["739155"])
        #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
        reader.script("kill-fprintd")
        let killed = waiting.finish()
        #expect(killed.result == "PAM_SUCCESS", "\(killed.text)\n\(fixture.daemonLog)")
        #expect(killed.text.contains("Passcode"), "\(killed.text)")
        #expect(fixture.daemonLog.contains("fprintd stopped while it verified"), "\(fixture.daemonLog)")
        #expect(try failures() == 0)
        // fprintd absent from the start of the next authentication: the passcode at once, the cause logged.
        let absent = try authenticate("either", ["739155"]).finish()
        #expect(absent.result == "PAM_SUCCESS", "\(absent.text)")
        #expect(fixture.daemonLog.contains("fprintd is not running"), "\(fixture.daemonLog)")
        #expect(try failures() == 0)
        // Started again, the same keywayd uses it without a restart.
        reader.script("restart-fprintd")
        var count = reader.verificationsStarted
        let back = try authenticate("bio")
        scan(reader, "print-a", after: &count)
        #expect(back.finish().result == "PAM_SUCCESS", "\(fixture.daemonLog)")
    }
}
