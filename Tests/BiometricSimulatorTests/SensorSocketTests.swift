import Foundation
import Glibc
import KeywayCore
import KeywayPlatform
import Synchronization
import Testing

@testable import KeywayBiometricSimulator

/// The simulated sensor's control socket at the moment a wait ends (docs/ARCHITECTURE.md §14): a command that
/// reaches the socket then belongs to no authentication, and its sender must hear so rather than have it counted.
@Suite("the sensor socket as a wait ends")
struct SensorSocketTests {
    /// A fresh 0700 control directory, removed by `remove`.
    let directory: String = {
        var template = Array("/tmp/kw-sensor.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: made!)
    }()

    func remove() { _ = try? FileManager.default.removeItem(atPath: directory) }

    /// `hold()` again after a `release()`, retried for up to 2 s while the lock is busy. The suite runs beside tests
    /// that start processes (keywayd never forks), and a child forked in the instant before its exec holds a copy of
    /// every descriptor of this process, the sensor's flock included, until the exec closes it; a `make test` run
    /// failed here once so. Any other failure, or a lock still held after 2 s, fails the test.
    func holdAgain(_ events: SocketSensorEvents) throws {
        let deadline = MonotonicClock.milliseconds() + 2000
        while true {
            switch events.hold() {
            case .success: return
            case .failure(let error) where error.isBusy && MonotonicClock.milliseconds() < deadline:
                usleep(1000)
            case .failure(let error): throw error
            }
        }
    }

    /// Connects to the sensor's socket and writes `line`, as `keyway sensor` does; the connection is in the
    /// listener's queue when this returns.
    func connectAndWrite(_ line: String) throws -> Int32 {
        let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = SensorControl.unixAddress(SensorControl.socketPath(in: directory))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(client, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(connected == 0, "connect: \(String(cString: strerror(errno)))")
        SensorControl.reply(client, line)
        return client
    }

    @Test("a touch queued when the sensor is given back is answered `not taken`, and no wait ever sees it")
    func queuedAtRelease() throws {
        defer { remove() }
        let events = SocketSensorEvents(directory: directory, owner: getuid(), acknowledgesAfterHandling: true)
        try events.hold().get()
        let client = try connectAndWrite("present alice right-index")
        defer { close(client) }
        events.release()
        #expect(SensorControl.readLine(client, until: MonotonicClock.milliseconds() + 5000) == "not taken")
        #expect(access(SensorControl.socketPath(in: directory), F_OK) != 0, "the socket path is gone")
        // The sensor is free: the next holder takes it and finds nothing left over.
        try holdAgain(events)
        #expect(events.next(timeout: .milliseconds(200), cancellation: CancellationFlag()) == nil)
        events.release()
    }

    @Test("a touch accepted just as the wait is cancelled is turned away, not returned as an event")
    func acceptedAsCancelled() throws {
        defer { remove() }
        let events = SocketSensorEvents(directory: directory, owner: getuid(), acknowledgesAfterHandling: true)
        try events.hold().get()
        defer { events.release() }
        let client = try connectAndWrite("present alice right-index")
        defer { close(client) }
        // Not cancelled when the wait looks, cancelled by the time the connection is accepted: the authentication
        // went away in between.
        let checks = Mutex(0)
        let cancellation = CancellationFlag(following: CancellationFlag()) {
            checks.withLock { count in
                count += 1
                return count > 1
            }
        }
        #expect(events.next(timeout: .seconds(5), cancellation: cancellation) == nil)
        #expect(SensorControl.readLine(client, until: MonotonicClock.milliseconds() + 5000) == "not taken")
    }

    @Test("`keyway sensor` reads `not taken` as nobody waiting, so --wait tries again and a plain send says why")
    func senderReadsNotTaken() throws {
        defer { remove() }
        let events = SocketSensorEvents(directory: directory, owner: getuid(), acknowledgesAfterHandling: true)
        try events.hold().get()
        let sent = Mutex<Result<Void, SensorControlError>?>(nil)
        let sender = Thread {
            sent.withLock {
                $0 = SensorControl.send(.present(user: "alice", finger: "right-index"), directory: directory)
            }
        }
        sender.start()
        // The sender's command is queued or about to be: giving the sensor back turns it away either way, and a
        // command that finds no socket is told the same.
        events.release()
        let deadline = MonotonicClock.milliseconds() + 10_000
        while sent.withLock({ $0 == nil }) && MonotonicClock.milliseconds() < deadline { usleep(10_000) }
        let result = try #require(sent.withLock { $0 })
        guard case .failure(let error) = result else {
            Issue.record("a touch nobody waited for was reported delivered")
            return
        }
        #expect(error.description.contains("no authentication is waiting at the sensor"), "\(error)")
    }
}
