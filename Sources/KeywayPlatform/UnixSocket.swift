public import CKeywayLibc
import KeywayCore

/// Unix stream sockets for keywayd and its clients: connect, listen, whole frames with deadlines, and the peer's
/// identity from the kernel (`SO_PEERCRED`). Every descriptor is close-on-exec; no call raises SIGPIPE.
public enum UnixSocket {
    /// A failed socket call, with the operation and the system's reason.
    public struct Failure: Error, Sendable, CustomStringConvertible {
        /// What was being done ("connect to /run/keyway/keywayd.sock").
        public var operation: String
        /// errno, or 0 for a protocol problem (a frame too large, a deadline).
        public var errno: Int32
        /// The system's words for errno, or the protocol problem.
        public var reason: String

        init(_ operation: String, errno: Int32) {
            self.operation = operation
            self.errno = errno
            reason = String(cString: strerror(errno))
        }

        init(_ operation: String, reason: String) {
            self.operation = operation
            errno = 0
            self.reason = reason
        }

        public var description: String { "\(operation): \(reason)" }
    }

    /// Who is at the other end, as the kernel saw them when they connected.
    public struct Peer: Sendable, Equatable {
        /// The process.
        public var pid: pid_t
        /// The effective user.
        public var uid: uid_t
        /// The effective group.
        public var gid: gid_t
    }

    static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    static func withAddress<R>(_ address: inout sockaddr_un, _ body: (UnsafePointer<sockaddr>) -> R) -> R {
        withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }

    /// Connects to the socket at `path` without waiting: a listener whose backlog is full is an error at once
    /// (EAGAIN), never a hang. The descriptor is non-blocking; `send` and `receiveFrame` wait with deadlines.
    public static func connect(to path: String) -> Result<Int32, Failure> {
        let operation = "connect to \(path)"
        guard var address = address(path) else { return .failure(Failure(operation, reason: "the path is too long")) }
        let flags = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
        let fd = socket(AF_UNIX, flags, 0)
        guard fd >= 0 else { return .failure(Failure(operation, errno: keyway_errno())) }
        let result = withAddress(&address) { CKeywayLibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        guard result == 0 else {
            let error = keyway_errno()
            close(fd)
            return .failure(Failure(operation, errno: error))
        }
        return .success(fd)
    }

    /// Binds and listens at `path` with `mode` (replacing a stale socket there, never any other kind of file).
    public static func listen(at path: String, mode: mode_t, backlog: Int32 = 128) -> Result<Int32, Failure> {
        let operation = "listen at \(path)"
        guard var address = address(path) else { return .failure(Failure(operation, reason: "the path is too long")) }
        var existing = stat()
        if lstat(path, &existing) == 0 {
            guard existing.st_mode & mode_t(S_IFMT) == mode_t(S_IFSOCK) else {
                return .failure(Failure(operation, reason: "a file that is not a socket is in the way"))
            }
            // A socket someone still answers on is not stale: never take it over.
            if case .success(let live) = connect(to: path) {
                close(live)
                return .failure(Failure(operation, reason: "another process listens there (is keywayd running?)"))
            }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return .failure(Failure(operation, errno: keyway_errno())) }
        let bound = withAddress(&address) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        guard bound == 0, chmod(path, mode) == 0, CKeywayLibc.listen(fd, backlog) == 0 else {
            let error = keyway_errno()
            close(fd)
            return .failure(Failure(operation, errno: error))
        }
        return .success(fd)
    }

    /// The connected peer's process, user and group.
    public static func peer(of fd: Int32) -> Peer? {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }: Glibc hides it behind _GNU_SOURCE, so its layout here.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0, length == 12 else { return nil }
        return Peer(pid: credentials.pid, uid: credentials.uid, gid: credentials.gid)
    }

    /// Waits until `fd` is ready for `events` or the deadline (monotonic milliseconds) passes.
    private static func wait(_ fd: Int32, _ events: Int16, until deadline: Int64) -> Bool {
        while true {
            let left = deadline - MonotonicClock.milliseconds()
            guard left > 0 else { return false }
            var entry = pollfd(fd: fd, events: events, revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready > 0 { return true }
            if ready < 0 && keyway_errno() != EINTR { return false }
        }
    }

    /// Writes all of `bytes` before the deadline.
    public static func send(_ bytes: [UInt8], to fd: Int32, until deadline: Int64) -> Result<Void, Failure> {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes {
                CKeywayLibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if written < 0 {
                let error = keyway_errno()
                guard error == EAGAIN || error == EINTR else { return .failure(Failure("send", errno: error)) }
                // No room (a peer that does not read) or interrupted: wait for room, never past the deadline.
                guard wait(fd, Int16(POLLOUT), until: deadline) else {
                    return .failure(Failure("send", reason: "the other end did not read in time"))
                }
                continue
            }
            offset += written
        }
        return .success(())
    }

    /// Reads exactly `count` bytes before the deadline, growing the buffer as bytes arrive (a length alone never
    /// makes it allocate), and wiping what it read when it fails (a half-received request may hold a secret).
    private static func receive(_ count: Int, from fd: Int32, until deadline: Int64, what: String)
        -> Result<[UInt8], Failure>
    {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(min(count, 64 * 1024))  // a whole request: no reallocation leaves a copy behind
        var chunk = [UInt8](repeating: 0, count: min(count, 64 * 1024))
        defer { chunk.withUnsafeMutableBytes { secureZero($0) } }
        func fail(_ failure: Failure) -> Result<[UInt8], Failure> {
            bytes.withUnsafeMutableBytes { secureZero($0) }
            return .failure(failure)
        }
        // Read first and wait only when nothing is there: a client sends its request as it connects, so it has
        // usually arrived by the time it is read, and a poll before every read would be a system call for nothing.
        while bytes.count < count {
            let wanted = min(chunk.count, count - bytes.count)
            var passed = 0
            var odd = false
            let got = chunk.withUnsafeMutableBytes {
                receiveMessage(fd, into: $0, count: wanted, passed: &passed, odd: &odd)
            }
            if passed > 0 || odd {
                return fail(Failure("receive", reason: "the peer passed descriptors or control data with \(what)"))
            }
            if got == -2 {
                guard wait(fd, Int16(POLLIN), until: deadline) else {
                    return fail(Failure("receive", reason: "\(what) did not arrive in time"))
                }
                continue
            }
            if got < 0 { return fail(Failure("receive", errno: keyway_errno())) }
            if got == 0 { return fail(Failure("receive", reason: "the connection closed before \(what) ended")) }
            chunk.withUnsafeBytes { bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0[0..<got])) }
        }
        return .success(bytes)
    }

    /// Receives one message without waiting into the first `count` bytes of `buffer`, as
    /// `keyway_receive_message`: every descriptor passed with it is disposed of here (`dispose`), counted in
    /// `passed`; `odd` is set for control data that is not descriptors or was cut short. Returns the bytes read,
    /// 0 at the end of the stream, -2 when nothing is there yet, -1 on error.
    public static func receiveMessage(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, count: Int, passed: inout Int, odd: inout Bool
    ) -> Int {
        var descriptors: [Int32] = []
        let got = receiveMessage(fd, into: buffer, count: count, descriptors: &descriptors, odd: &odd)
        for descriptor in descriptors { dispose(descriptor) }
        passed = descriptors.count
        return got
    }

    /// `receiveMessage`, handing the caller the descriptors that came with the message: it must dispose of each.
    public static func receiveMessage(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, count: Int, descriptors: inout [Int32],
        odd: inout Bool
    ) -> Int {
        var fds = [Int32](repeating: -1, count: Int(KEYWAY_MAX_PASSED))
        var received: Int32 = 0
        var strange: Int32 = 0
        let got = fds.withUnsafeMutableBufferPointer {
            keyway_receive_message(
                fd, buffer.baseAddress, min(count, buffer.count), $0.baseAddress, &received, &strange)
        }
        descriptors = Array(fds[0..<Int(received)])
        odd = strange != 0
        return got
    }

    /// Lets go of a descriptor a peer may have had a hand in (a client's connection, or anything it passed) so that
    /// the close cannot block: an abortive close for a socket, a Unix socket shut down and emptied of what is
    /// queued on it first (`keyway_dispose_descriptor`). keywayd(8), "Descriptors".
    public static func dispose(_ fd: Int32) { keyway_dispose_descriptor(fd) }

    /// Makes `accept` on the listener `fd` wait for a connection (no O_NONBLOCK) and give up after `milliseconds`
    /// (SO_RCVTIMEO, which Linux applies to accept: it then fails with EAGAIN).
    public static func waitInAccept(atMost milliseconds: Int32, on fd: Int32) -> Result<Void, Failure> {
        let error = keyway_accept_waits(fd, milliseconds)
        guard error == 0 else { return .failure(Failure("make the listener's accept wait and time out", errno: error)) }
        return .success(())
    }

    /// Asks the kernel to refuse descriptors passed to `fd` (a listener passes the setting on to each connection it
    /// accepts), or to take them again with `accept`; false on a kernel without SO_PASSRIGHTS (before 6.16).
    @discardableResult
    public static func acceptDescriptors(_ accept: Bool, on fd: Int32) -> Bool {
        keyway_accept_passed_descriptors(fd, accept ? 1 : 0) == 0
    }

    /// True when the other end has closed the connection (its whole request was read, so anything readable now is
    /// the end of the stream).
    public static func peerHasClosed(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, 0) > 0 else { return false }
        if entry.revents & Int16(POLLHUP | POLLERR) != 0 { return true }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) == 0
    }

    /// Reads one frame (a 4-byte big-endian length, then the body) of at most `limit` bytes before the deadline.
    public static func receiveFrame(from fd: Int32, limit: Int, until deadline: Int64) -> Result<[UInt8], Failure> {
        let header: [UInt8]
        switch receive(4, from: fd, until: deadline, what: "the message's length") {
        case .success(let bytes): header = bytes
        case .failure(let failure): return .failure(failure)
        }
        let length = header.reduce(0) { $0 << 8 | Int($1) }
        guard length >= 2, length <= limit else {
            return .failure(Failure("receive", reason: "a message of \(length) bytes is outside 2...\(limit)"))
        }
        return receive(length, from: fd, until: deadline, what: "the message")
    }
}
