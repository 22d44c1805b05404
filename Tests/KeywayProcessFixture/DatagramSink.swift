import Foundation
import Testing

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
        let thread = Thread { [self] in
            while !Thread.current.isCancelled {
                var ready = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
                if poll(&ready, 1, 200) > 0 { lock.withLock { receiveQueued() } }
            }
        }
        reader = thread
        thread.start()
    }

    /// Takes every datagram queued on the socket now (the lock held): one taken is kept before the lock is let go.
    private func receiveQueued() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            guard count >= 0 else { return }
            received.append(Array(buffer[0..<count]))
        }
    }

    /// Every datagram sent so far: those the reader kept and those still queued. A sender that has returned from its
    /// send is in it; one that sends on its own time (a daemon, sshd) is waited for by the test, for the entry it
    /// needs (`waitUntil`).
    var datagrams: [[UInt8]] {
        lock.withLock {
            receiveQueued()
            return received
        }
    }

    func stop() {
        reader?.cancel()
        // The reader leaves its poll within 200 ms; the socket is closed once it no longer reads it.
        _ = waitUntil("the datagram reader's end at \(path)", seconds: 10, seen: { "still reading" }) {
            reader?.isFinished ?? true
        }
        close(descriptor)
        unlink(path)
    }
}
