public import Glibc
public import KeywayCore
import Synchronization

/// Sensor events from the control socket: the socket exists while an authentication waits at the sensor.
/// Only processes of the owner (root in production) may connect, and the peer is checked with SO_PEERCRED.
public final class SocketSensorEvents: SensorEventSource {
    /// The directory holding the socket and the unplugged flag.
    public let directory: String
    /// The uid allowed to send commands.
    public let owner: uid_t
    private let listener = Mutex<Int32>(-1)

    /// Creates a source; nothing is bound until the first wait.
    public init(directory: String = SensorControl.defaultDirectory, owner: uid_t = 0) {
        self.directory = directory
        self.owner = owner
    }

    deinit {
        let descriptor = listener.withLock { $0 }
        if descriptor >= 0 {
            close(descriptor)
            unlink(SensorControl.socketPath(in: directory))
        }
    }

    public var pluggedIn: Bool { access(SensorControl.unpluggedFlag(in: directory), F_OK) != 0 }

    public func next(timeout: Duration, cancellation: CancellationFlag) -> SensorEvent? {
        let descriptor: Int32
        switch listen() {
        case .success(let bound): descriptor = bound
        case .failure(let error): return .failure(error.description)
        }
        let deadline = SensorControl.monotonicMilliseconds() + timeout.milliseconds
        while !cancellation.isCancelled {
            let left = deadline - SensorControl.monotonicMilliseconds()
            if left <= 0 { return nil }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, Int32(min(left, 100)))
            guard ready > 0 else { continue }
            let client = accept(descriptor, nil, nil)
            guard client >= 0 else { continue }
            _ = fcntl(client, F_SETFD, FD_CLOEXEC)
            defer { close(client) }
            if let event = serve(client) { return event }
        }
        return nil
    }

    /// Reads one command from a client and answers it; returns the event when it was valid.
    private func serve(_ client: Int32) -> SensorEvent? {
        // struct ucred is { pid_t pid; uid_t uid; gid_t gid; }; Glibc does not export it without _GNU_SOURCE.
        var credentials: (pid: Int32, uid: UInt32, gid: UInt32) = (0, UInt32.max, UInt32.max)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        guard getsockopt(client, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, credentials.uid == owner else {
            reply(client, "error only uid \(owner) may drive the sensor")
            return nil
        }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard let line = SensorControl.readLine(client) else { return nil }
        switch SensorControl.parse(line[...]) {
        case .success(let event):
            if event == .unplug { _ = SensorControl.send(.unplug, directory: directory) }
            if event == .plug { unlink(SensorControl.unpluggedFlag(in: directory)) }
            reply(client, "ok")
            return event
        case .failure(let error):
            reply(client, "error \(error)")
            return nil
        }
    }

    private func reply(_ client: Int32, _ text: String) {
        _ = (text + "\n").withCString { write(client, $0, strlen($0)) }
    }

    /// Binds the socket once per source; a live socket of another waiting authentication means the sensor is busy,
    /// a dead one (left by a crash) is replaced.
    private func listen() -> Result<Int32, SensorControlError> {
        listener.withLock { current in
            if current >= 0 { return .success(current) }
            if mkdir(directory, 0o700) != 0 && errno != EEXIST {
                return .failure(SensorControlError("cannot create \(directory): \(SensorControl.errnoText())"))
            }
            var info = stat()
            guard lstat(directory, &info) == 0, info.st_mode & S_IFMT == S_IFDIR, info.st_uid == owner,
                info.st_mode & 0o077 == 0
            else {
                return .failure(SensorControlError("\(directory) must be a directory owned by uid \(owner), mode 0700"))
            }
            let path = SensorControl.socketPath(in: directory)
            let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard descriptor >= 0 else { return .failure(SensorControlError("socket: \(SensorControl.errnoText())")) }
            var address = SensorControl.unixAddress(path)
            func bindIt() -> Int32 {
                withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                    }
                }
            }
            if bindIt() != 0 {
                guard errno == EADDRINUSE, !Self.isAlive(path) else {
                    close(descriptor)
                    return .failure(SensorControlError("the sensor is in use by another authentication"))
                }
                unlink(path)
                guard bindIt() == 0 else {
                    close(descriptor)
                    return .failure(SensorControlError("cannot listen on \(path): \(SensorControl.errnoText())"))
                }
            }
            chmod(path, 0o600)
            Glibc.listen(descriptor, 4)
            current = descriptor
            return .success(descriptor)
        }
    }

    /// True when another process listens on `path`.
    private static func isAlive(_ path: String) -> Bool {
        let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return false }
        defer { close(probe) }
        var address = SensorControl.unixAddress(path)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(probe, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }
}
