import Foundation

/// A datagram socket bound at a path, with a thread that keeps every datagram it receives: what the syslog and the
/// journal captures listen with. The path is made 0666, so any user's process can send; `stop` closes and unlinks it.
final class DatagramSink: @unchecked Sendable {
    let path: String
    private let descriptor: Int32
    private let lock = NSLock()
    private var received: [[UInt8]] = []
    private var reader: Thread?

    /// Binds at `path`; nil when it cannot.
    init?(at path: String) {
        self.path = path
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(path.utf8)
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else {
            close(descriptor)
            return nil
        }
        chmod(path, 0o666)
        var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while !Thread.current.isCancelled {
                let count = recv(descriptor, &buffer, buffer.count, 0)
                if count > 0 { lock.withLock { received.append(Array(buffer[0..<count])) } }
            }
        }
        reader = thread
        thread.start()
    }

    /// Every datagram so far, after a pause for those on their way.
    var datagrams: [[UInt8]] {
        usleep(300_000)
        return lock.withLock { received }
    }

    func stop() {
        reader?.cancel()
        usleep(300_000)
        close(descriptor)
        unlink(path)
    }
}
