public import CKeywayLibc
public import KeywayCore
import KeywayPlatform
import Synchronization

/// Sensor events from the control socket: the socket exists only while an authentication waits at the sensor.
/// Only processes of the owner (root in production) may connect, and the peer is checked with SO_PEERCRED.
///
/// One authentication owns the sensor at a time: it holds an exclusive `flock` on `sensor.lock` while it listens,
/// so a second one is told the sensor is busy, and a socket left by a crash is replaced only under the lock.
public final class SocketSensorEvents: SensorEventSource {
    /// The directory holding the socket, the lock and the unplugged flag.
    public let directory: String
    /// The uid allowed to send commands.
    public let owner: uid_t
    /// The listener kept between events by `hold()`, or nil when each wait binds its own.
    private let held = Mutex<Listener?>(nil)
    /// Answer "ok" only once the event has been acted on (`acknowledge()`), so the sender knows it counted.
    public let acknowledgesAfterHandling: Bool
    /// The sender of the last event, waiting for its "ok".
    private let unanswered = Mutex<Int32?>(nil)

    /// Creates a source; nothing is bound until a wait.
    public init(
        directory: String = SensorControl.defaultDirectory, owner: uid_t = 0, acknowledgesAfterHandling: Bool = false
    ) {
        self.directory = directory
        self.owner = owner
        self.acknowledgesAfterHandling = acknowledgesAfterHandling
    }

    /// Answers the sender of the last event "ok" (with `acknowledgesAfterHandling`): keywayd calls it once the touch
    /// is matched and counted, so `keyway sensor present` returns only when a claim would see it.
    public func acknowledge() {
        guard
            let client = unanswered.withLock({ client -> Int32? in
                defer { client = nil }
                return client
            })
        else { return }
        SensorControl.reply(client, "ok")
        CKeywayLibc.close(client)
    }

    /// The flag file decides; `lstat` rather than `access`, which would check the real uid (a user's, under su).
    public var pluggedIn: Bool {
        var info = stat()
        return lstat(SensorControl.unpluggedFlag(in: directory), &info) != 0
    }

    /// Takes the sensor and keeps listening between events until `release()` (keywayd, for an armed
    /// authentication), so no other authentication can take it in between and no touch finds nobody listening.
    public func hold() -> Result<Void, SensorControlError> {
        switch Listener.open(directory: directory, owner: owner) {
        case .success(let opened):
            held.withLock { $0 = opened }
            return .success(())
        case .failure(let error): return .failure(error)
        }
    }

    /// Gives the sensor back after `hold()`.
    public func release() {
        acknowledge()
        held.withLock { listener in
            listener?.close()
            listener = nil
        }
    }

    public func next(timeout: Duration, cancellation: CancellationFlag) -> SensorEvent? {
        acknowledge()  // whatever came before has been handled by now
        let listening: Listener
        let kept = held.withLock { $0 }
        if let kept {
            listening = kept
        } else {
            switch Listener.open(directory: directory, owner: owner) {
            case .success(let opened): listening = opened
            case .failure(let error): return .failure(error.description)
            }
        }
        defer { if kept == nil { listening.close() } }
        let deadline = MonotonicClock.milliseconds() + timeout.milliseconds
        while !cancellation.isCancelled {
            let left = deadline - MonotonicClock.milliseconds()
            if left <= 0 { return nil }
            var poller = pollfd(fd: listening.socket, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(min(left, 100))) > 0 else { continue }
            let client = accept(listening.socket, nil, nil)
            guard client >= 0 else { continue }
            _ = keyway_fcntl(client, F_SETFD, FD_CLOEXEC)
            // The wait may have ended while the sender connected (its authentication gone, say): a touch made then
            // belongs to nobody, and the sender is told so rather than counted against a finished authentication.
            if cancellation.isCancelled {
                Self.turnAway(client)
                return nil
            }
            if let event = serve(client, until: min(deadline, MonotonicClock.milliseconds() + 2000)) {
                if acknowledgesAfterHandling {
                    unanswered.withLock { $0 = client }  // the previous sender was answered when this wait began
                } else {
                    CKeywayLibc.close(client)
                }
                return event
            }
            CKeywayLibc.close(client)
        }
        return nil
    }

    /// Reads one command from a client (within `until`) and answers it; returns the event when it was valid.
    private func serve(_ client: Int32, until: Int64) -> SensorEvent? {
        // struct ucred is { pid_t pid; uid_t uid; gid_t gid; }; Glibc does not export it without _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, UInt32.max, UInt32.max)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(client, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.uid == owner else {
            SensorControl.reply(client, "error only uid \(owner) may drive the sensor")
            return nil
        }
        guard let line = SensorControl.readLine(client, until: until) else { return nil }
        switch SensorControl.parse(line[...]) {
        case .success(let event):
            // Set the flag directly: `send` would connect to this very socket and wait on itself.
            if event == .unplug || event == .plug {
                _ = SensorControl.setPluggedIn(event == .plug, directory: directory)
            }
            if !acknowledgesAfterHandling { SensorControl.reply(client, "ok") }
            return event
        case .failure(let error):
            SensorControl.reply(client, "error \(error)")
            return nil
        }
    }

    /// Answers a sender whose command no wait will take (`SensorControl.notTaken`), after reading its line so the
    /// answer is not lost to a reset, and closes the connection.
    static func turnAway(_ client: Int32) {
        _ = SensorControl.readLine(client, until: MonotonicClock.milliseconds() + 200)
        SensorControl.reply(client, SensorControl.notTaken)
        CKeywayLibc.close(client)
    }

    /// A bound, listening socket and the lock that makes it ours.
    private struct Listener: Sendable {
        let socket: Int32
        let lock: Int32
        let path: String

        static func open(directory: String, owner: uid_t) -> Result<Listener, SensorControlError> {
            if case .failure(let error) = SensorControl.makeDirectory(directory) { return .failure(error) }
            guard
                case .success(.some) = TrustedFile(.directory, ownedBy: [owner], forbidden: 0o077).check(
                    path: directory)
            else {
                return .failure(SensorControlError("\(directory) must be a directory owned by uid \(owner), mode 0700"))
            }
            let lock = keyway_open(directory + "/sensor.lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
            guard lock >= 0 else {
                return .failure(SensorControlError("cannot open the sensor lock: \(SensorControl.errnoText())"))
            }
            guard flock(lock, LOCK_EX | LOCK_NB) == 0 else {
                CKeywayLibc.close(lock)
                return .failure(SensorControlError("the sensor is in use by another authentication", isBusy: true))
            }
            let path = SensorControl.socketPath(in: directory)
            unlink(path)  // under the lock: whatever is there was left by a process that no longer listens
            let descriptor = CKeywayLibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = SensorControl.unixAddress(path)
            let bound =
                descriptor >= 0
                && withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
                    }
                }
            guard bound, chmod(path, 0o600) == 0, CKeywayLibc.listen(descriptor, 4) == 0 else {
                let why = SensorControl.errnoText()
                if descriptor >= 0 { CKeywayLibc.close(descriptor) }
                CKeywayLibc.close(lock)
                return .failure(SensorControlError("cannot listen on \(path): \(why)"))
            }
            return .success(Listener(socket: descriptor, lock: lock, path: path))
        }

        /// Removes the path (so nobody new connects), turns away whoever connected already, closes the socket, then
        /// releases the lock (in that order, so nobody binds a path we then unlink, and no sender is left with a
        /// reset it would take for a delivered touch).
        func close() {
            unlink(path)
            _ = keyway_fcntl(socket, F_SETFL, O_NONBLOCK)
            while true {
                let client = accept(socket, nil, nil)
                guard client >= 0 else { break }
                SocketSensorEvents.turnAway(client)
            }
            CKeywayLibc.close(socket)
            CKeywayLibc.close(lock)
        }
    }
}
