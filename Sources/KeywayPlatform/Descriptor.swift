import CKeywayLibc

/// Writing to an open descriptor, unbuffered: every byte, a partial write continued and an interrupted one tried
/// again, so a line is never cut by a signal or a full pipe's short write. The one place Keyway writes this way
/// (docs/ARCHITECTURE.md §2, one helper per OS concern).
public enum Descriptor {
    /// Writes all of `bytes` to `fd`; false when the descriptor refused (its errno is left for the caller's words).
    @discardableResult
    public static func write(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { CKeywayLibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if count < 0 && keyway_errno() == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    /// Writes all of `text`'s UTF-8 to `fd`.
    @discardableResult
    public static func write(_ text: String, to fd: Int32) -> Bool { write(Array(text.utf8), to: fd) }

    /// `line` and a newline on standard error: a command's error or a daemon's log line (the journal under systemd).
    public static func printError(_ line: String) { write(line + "\n", to: 2) }
}
