import CKeywayLibc

/// Whether the terminal a PAM call comes from belongs to a remote login, from utmp (which only root and sshd
/// write, unlike the environment): sudo does not set PAM_RHOST on Linux, so `sudo` typed in an SSH session would
/// otherwise count as local and could be approved at the local sensor.
enum RemoteSession {
    /// True when utmp has a user process on `tty` (PAM_TTY, "/dev/pts/3" or "pts/3") logged in from a host that
    /// is not a local X display (":0").
    static func isRemote(tty: String?) -> Bool {
        guard var line = tty, !line.isEmpty else { return false }
        if line.hasPrefix("/dev/") { line.removeFirst(5) }
        setutxent()
        defer { endutxent() }
        while let entry = getutxent() {
            guard entry.pointee.ut_type == USER_PROCESS else { continue }
            let entryLine = withUnsafeBytes(of: entry.pointee.ut_line) { cString($0) }
            guard entryLine == line else { continue }
            let host = withUnsafeBytes(of: entry.pointee.ut_host) { cString($0) }
            if !host.isEmpty && !host.hasPrefix(":") { return true }
        }
        return false
    }

    /// The bytes up to the first NUL of a fixed-size C field.
    private static func cString(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}
