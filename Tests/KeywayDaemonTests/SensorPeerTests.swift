import Foundation
import KeywayPlatform
import Testing

@testable import KeywayProcessFixture

/// The sensor against hostile local users (docs/ARCHITECTURE.md §10 and §14): a touch proves only that someone is at
/// the sensor, so keywayd arms it only for an authentication the account's owner started, or root on a local seat;
/// and keywayd owns the wait, first come first served, so a stopped or looping holder cannot keep it from another
/// user's waiting authentication for longer than the biometric timeout.
@Suite("hostile peers: the sensor", .serialized)
struct SensorPeerTests {
    let fixture = PAMFixture()

    /// The harness as su or sudo runs the module: `ruid` real, root effective.
    func startedBy(_ ruid: String, _ service: String, _ user: String, _ answers: [String] = []) throws -> Started {
        try Started(
            "/usr/bin/setpriv",
            ["--ruid=\(ruid)", "--euid=0", "--", harnessPath] + answers.flatMap { ["--answer", $0] }
                + [fixture.services, service, user])
    }

    func touch(_ user: String, wait: Int = 10) throws -> Run {
        try run(cliPath, ["sensor", "present", user, "right-index", "--wait", "\(wait)", "--sensor", fixture.sensor])
    }

    /// Waits up to `seconds` for keywayd's log to contain `text`.
    func logged(_ text: String, within seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if fixture.daemonLog.contains(text) { return true }
            usleep(50_000)
        }
        return false
    }

    /// Waits until the rival's loop holds the sensor (keywayd listens at it): had the victim come first, it would
    /// hold the sensor itself and no rival lease would be ended for it, however long a loaded machine took.
    func rivalHoldsSensor() {
        let socket = fixture.sensor + "/sensor.sock"
        waitUntil("the rival's lease", seen: { "no \(socket); keywayd's log:\n\(fixture.daemonLog)" }) {
            FileManager.default.fileExists(atPath: socket)
        }
    }

    func setUp() throws -> (victim: (uid: String, gid: String), rival: (uid: String, gid: String)) {
        try requireIsolation()
        #expect(try TestAccounts.add("kwsvictim"))
        #expect(try TestAccounts.add("kwsrival"))
        for name in ["kwsvictim", "kwsrival"] {
            try fixture.enrollPattern(name, "2-4-9-3")
            try fixture.enrollPasscode(name, "739155")
            try fixture.enrollFinger(name, "right-index")
        }
        chmod(fixture.directory, 0o755)
        // keywayd's biometric timeout (3 s) bounds how long a lease keeps the sensor while someone waits; the
        // clients wait longer (timeout=20), so only keywayd's rule can hand the sensor over.
        let config = fixture.writeConfig("[biometric]\ntimeout = 3s\n")
        fixture.startDaemon(["--config", fixture.configPath])
        fixture.service("bio", "policy=biometrics-only timeout=20 \(config)")
        let either = fixture.writeConfig(
            "[biometric]\ntimeout = 3s\n[policy either]\nrequire = first of (biometric, gesture)\n")
        fixture.service("either", "policy=either \(either)")
        return (try TestAccounts.ids("kwsvictim"), try TestAccounts.ids("kwsrival"))
    }

    func tearDown() {
        TestAccounts.remove("kwsvictim")
        TestAccounts.remove("kwsrival")
        fixture.remove()
    }

    @Test("`su victim` from another user's session never arms the sensor; the victim's touch cannot authenticate it")
    func suOther() throws {
        defer { tearDown() }
        let (victim, rival) = try setUp()
        // The sequential wait: refused at once, nothing listens, so the victim's touch reaches no one.
        let su = try startedBy(rival.uid, "bio", "kwsvictim")
        let stray = try touch("kwsvictim", wait: 2)
        let refused = su.finish()
        #expect(refused.result == "PAM_AUTHINFO_UNAVAIL", "\(refused.text)")
        #expect(stray.status != 0, "a touch reached a listener: \(stray.text)")
        #expect(logged("the sensor refused for kwsvictim", within: 2), "\(fixture.daemonLog)")
        #expect(fixture.daemonLog.contains("su from another person's session"), "\(fixture.daemonLog)")
        // `first of`: only the typed factor is offered, and the right pattern still works for su.
        let either = try startedBy(rival.uid, "either", "kwsvictim", ["2-4-9-3"]).finish()
        #expect(either.result == "PAM_SUCCESS", "\(either.text)")
        #expect(!either.text.contains("Touch the sensor"), "\(either.text)")
        // The victim's own authentication (sudo: started by the victim) gets the sensor and the touch.
        let own = try startedBy(victim.uid, "bio", "kwsvictim")
        let touched = try touch("kwsvictim")
        #expect(touched.status == 0, "\(touched.text)")
        #expect(own.finish().result == "PAM_SUCCESS")
    }

    @Test("a stopped holder keeps the sensor from another user's waiting authentication no longer than the timeout")
    func stoppedHolder() throws {
        defer { tearDown() }
        let (victim, rival) = try setUp()
        let holder = try startedBy(rival.uid, "bio", "kwsrival")
        // Stopped only once it holds the sensor (keywayd listens at it), however long a loaded machine takes.
        for _ in 0..<400 where !FileManager.default.fileExists(atPath: fixture.sensor + "/sensor.sock") {
            usleep(50_000)
        }
        kill(holder.process.processIdentifier, SIGSTOP)
        defer {
            kill(holder.process.processIdentifier, SIGKILL)
            kill(holder.process.processIdentifier, SIGCONT)
            _ = holder.finish()
        }
        let start = Date()
        let waiting = try startedBy(victim.uid, "bio", "kwsvictim")
        #expect(logged("lease for kwsrival ended after 3 s", within: 8), "\(fixture.daemonLog)")
        let handedOver = Date().timeIntervalSince(start)
        let touched = try touch("kwsvictim")
        #expect(touched.status == 0, "\(touched.text)")
        #expect(waiting.finish().result == "PAM_SUCCESS")
        print(
            "sensor: a stopped holder gave the sensor up \(String(format: "%.1f", handedOver)) s after another waited")
        #expect(handedOver < 3 + 3, "the waiting authentication got the sensor after \(handedOver) s")
    }

    @Test("a user holding their own armed sensor: another person's `first of` waits in line and gets it in time")
    func firstOfWaitsInLine() throws {
        defer { tearDown() }
        let (victim, rival) = try setUp()
        let loop = try Started(
            "/usr/bin/setpriv",
            [
                "--reuid=\(rival.uid)", "--regid=\(rival.gid)", "--clear-groups", "--", hostilePath, "rearm",
                fixture.socket, "kwsrival", "10",
            ])
        defer { _ = loop.finish() }
        rivalHoldsSensor()
        // The victim's `first of` (touch or pattern): its prompt waits for Enter, which the test presses only after
        // the touch, as a person who touched the sensor does.
        let enter = fixture.directory + "/enter"
        let waiting = try Started(
            "/usr/bin/setpriv",
            [
                "--ruid=\(victim.uid)", "--euid=0", "--", harnessPath, "--answer-when", enter, "", fixture.services,
                "either", "kwsvictim",
            ])
        #expect(logged("lease for kwsrival ended after 3 s", within: 8), "\(fixture.daemonLog)")
        let touched = try touch("kwsvictim")
        #expect(touched.status == 0, "\(touched.text)")
        #expect(FileManager.default.createFile(atPath: enter, contents: Data()))
        let result = waiting.finish()
        #expect(result.result == "PAM_SUCCESS", "\(result.text)\n\(fixture.daemonLog)")
        #expect(result.text.contains("Touch the sensor"), "the sensor was not offered: \(result.text)")
    }

    @Test("a holder re-arming in a loop cannot keep the sensor from another user's waiting authentication")
    func loopingHolder() throws {
        defer { tearDown() }
        let (victim, rival) = try setUp()
        let loop = try Started(
            "/usr/bin/setpriv",
            [
                "--reuid=\(rival.uid)", "--regid=\(rival.gid)", "--clear-groups", "--", hostilePath, "rearm",
                fixture.socket, "kwsrival", "8",
            ])
        rivalHoldsSensor()
        let start = Date()
        let waiting = try startedBy(victim.uid, "bio", "kwsvictim")
        #expect(logged("lease for kwsrival ended after 3 s", within: 8), "\(fixture.daemonLog)")
        // The next in line is the victim, not the loop's next arming: its touch reaches the victim's lease.
        let touched = try touch("kwsvictim")
        #expect(touched.status == 0, "\(touched.text)")
        #expect(waiting.finish().result == "PAM_SUCCESS", "after \(Date().timeIntervalSince(start)) s")
        // keywayd's log above shows the loop held the sensor; its own count is a second witness when it finished.
        let report = loop.finish()
        if report.status == 0 {
            #expect(!report.text.contains("leases 0 "), "the loop never held the sensor: \(report.text)")
        }
    }
}
