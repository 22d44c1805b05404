import CKeywayLibc
import KeywayPlatform

/// The frame commands of the socket protocol: CTAPHID's command codes, each message one frame,
/// `command (1 byte) | length (4 bytes, big-endian) | payload`, both ways (Tests/SoftKeyShim/softkey_shim.c).
enum FrameCommand {
    /// CTAPHID_INIT: an 8-byte nonce in; the nonce, a channel id, versions and capabilities out.
    static let initialize: UInt8 = 0x06
    /// CTAPHID_CBOR: a CTAP2 request in (command byte, CBOR), a status byte and CBOR out.
    static let cbor: UInt8 = 0x10
    /// CTAPHID_CANCEL: stop waiting for the user; no answer of its own.
    static let cancel: UInt8 = 0x11
}

/// One client's connection, served on a thread of its own until the client closes it.
final class Connection {
    /// The largest frame payload taken; a larger one closes the connection.
    static let maximumPayload = 1 << 16

    /// What `next` found.
    enum Event {
        case frame(command: UInt8, payload: [UInt8])
        case timeout
        case closed
    }

    let fd: Int32
    let key: SoftKey
    /// Bytes received and not yet taken as a frame.
    private var pending: [UInt8] = []

    init(fd: Int32, key: SoftKey) {
        self.fd = fd
        self.key = key
    }

    /// Answers frames until the client closes the connection (or a knob unplugs the key).
    func serve() {
        defer { close(fd) }
        while case .frame(let command, let payload) = next(waiting: -1) {
            let knobs = Knobs.load(from: key.directory)
            if knobs.unplugged {
                log("unplugged")
                return
            }
            switch command {
            case FrameCommand.initialize:
                guard payload.count == 8 else {
                    log("init invalid-length")
                    guard send(command, [CTAPStatus.invalidLength.rawValue]) else { return }
                    continue
                }
                log("init")
                // The nonce, channel 0x01020304, CTAPHID version 2, device version 1.0.0, capabilities CBOR | NMSG.
                guard send(command, payload + [0x01, 0x02, 0x03, 0x04, 2, 1, 0, 0, 0x0C]) else { return }
            case FrameCommand.cbor:
                let presence = PresenceWait(directory: key.directory) { self.watch($0) }
                let (name, reply) = key.handle(payload, knobs: knobs, presence: presence)
                guard let reply else {
                    log("\(name) disconnected")
                    return
                }
                log(name + " " + reply.status.word + (reply.detail.isEmpty ? "" : " " + reply.detail))
                guard send(command, reply.bytes) else { return }
            case FrameCommand.cancel:
                log("cancel idle")  // nothing to cancel: no answer, as CTAPHID
            default:
                log("frame 0x" + [command].hex + " invalid-command")
                guard send(command, [CTAPStatus.invalidCommand.rawValue]) else { return }
            }
        }
    }

    /// Appends `line` to `DIR/log`: before the answer is sent, so a client that has its answer finds the line.
    private func log(_ line: String) { key.directory.append("log", line: line) }

    /// While the key waits for a touch: a CANCEL frame, the client gone, or nothing within `milliseconds` (any other
    /// frame is dropped: the key is busy).
    private func watch(_ milliseconds: Int32) -> Interruption? {
        switch next(waiting: milliseconds) {
        case .timeout: nil
        case .closed: .closed
        case .frame(let command, _): command == FrameCommand.cancel ? .cancel : nil
        }
    }

    /// Sends one frame; false when the client cannot take it within 5 seconds.
    private func send(_ command: UInt8, _ payload: [UInt8]) -> Bool {
        let count = UInt32(payload.count)
        let header = [
            command, UInt8(count >> 24), UInt8(count >> 16 & 0xFF), UInt8(count >> 8 & 0xFF), UInt8(count & 0xFF),
        ]
        let deadline = MonotonicClock.milliseconds() + 5000
        if case .success = UnixSocket.send(header + payload, to: fd, until: deadline) { return true }
        return false
    }

    /// The next frame, waiting up to `milliseconds` for it (forever when negative).
    func next(waiting milliseconds: Int32) -> Event {
        let deadline = milliseconds < 0 ? Int64.max : MonotonicClock.milliseconds() + Int64(milliseconds)
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            if pending.count >= 5 {
                let length = pending[1..<5].reduce(0) { $0 << 8 | Int($1) }
                guard length <= Self.maximumPayload else { return .closed }
                if pending.count >= 5 + length {
                    let frame = Event.frame(command: pending[0], payload: Array(pending[5..<5 + length]))
                    pending.removeFirst(5 + length)
                    return frame
                }
            }
            let left = deadline == Int64.max ? -1 : max(0, deadline - MonotonicClock.milliseconds())
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready < 0 && keyway_errno() == EINTR { continue }
            if ready < 0 { return .closed }
            if ready == 0 { return .timeout }
            let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if got < 0 && (keyway_errno() == EINTR || keyway_errno() == EAGAIN) { continue }
            if got <= 0 { return .closed }
            pending += chunk[0..<got]
        }
    }
}
