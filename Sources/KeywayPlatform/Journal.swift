import CKeywayLibc
public import KeywayCore

/// The systemd journal's native protocol, as `sd_journal_send` speaks it, without libsystemd: one datagram per entry
/// to `/run/systemd/journal/socket`, each field `NAME=value` and a newline, or, for a value holding a newline, the
/// name, a newline, the value's length as 64 bits little-endian, the value and a newline. journald adds the fields
/// only it can vouch for (`_PID`, `_UID`, `_COMM`), so an entry a user's process forges is told by them. Never waits
/// and never fails the caller: without a journal (no socket, a full queue) the entry is dropped, and syslog still
/// has the line (docs/ARCHITECTURE.md §20).
public enum Journal {
    /// Where journald listens.
    public static let socketPath = "/run/systemd/journal/socket"

    /// The datagram of `event`: `MESSAGE`, `MESSAGE_ID`, `PRIORITY`, `SYSLOG_IDENTIFIER` (`identifier`), then the
    /// event's own fields. A field whose name the journal would refuse (not capitals, digits and `_`, or starting
    /// with `_`) is left out.
    public static func entry(_ event: Event, identifier: String) -> [UInt8] {
        var bytes: [UInt8] = []
        func add(_ name: String, _ value: String) {
            guard isFieldName(name) else { return }
            bytes.append(contentsOf: Array(name.utf8))
            let raw = Array(value.utf8)
            if raw.contains(10) {
                bytes.append(10)
                var length = UInt64(raw.count)
                for _ in 0..<8 {
                    bytes.append(UInt8(truncatingIfNeeded: length))
                    length >>= 8
                }
            } else {
                bytes.append(61)  // =
            }
            bytes.append(contentsOf: raw)
            bytes.append(10)
        }
        add("MESSAGE", event.message)
        add("MESSAGE_ID", event.kind.messageID)
        add("PRIORITY", "\(event.kind.priority)")
        add("SYSLOG_IDENTIFIER", identifier)
        add("SYSLOG_FACILITY", "10")  // authpriv, where the module's syslog lines go
        add("KEYWAY_EVENT", event.kind.rawValue)
        for field in event.fields { add(field.name, field.value) }
        return bytes
    }

    /// True for a name the journal accepts from a client: 1–64 of `A-Z`, `0-9`, `_`, not starting with `_` or a digit.
    public static func isFieldName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, bytes.count <= 64, first != 95, !(48...57).contains(first) else { return false }
        return bytes.allSatisfy { (65...90).contains($0) || (48...57).contains($0) || $0 == 95 }
    }

    /// Sends `event` to the journal at `path`; true when the datagram was taken. An entry larger than a datagram
    /// can carry (the socket's send buffer, some 200 KiB) is dropped: no event comes near it.
    @discardableResult
    public static func send(_ event: Event, identifier: String, to path: String = socketPath) -> Bool {
        guard var address = UnixSocket.address(path) else { return false }
        let fd = socket(
            AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = entry(event, identifier: identifier)
        let sent = UnixSocket.withAddress(&address) { target in
            bytes.withUnsafeBytes { raw in
                sendto(
                    fd, raw.baseAddress, raw.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), target,
                    socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        return sent == bytes.count
    }
}
