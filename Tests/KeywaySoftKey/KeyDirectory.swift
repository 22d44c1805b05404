import CKeywayLibc
import KeywayPlatform

/// The soft key's directory (`keyway-softkey DIR`): its socket, its state, the knobs and the touch a test sets, and
/// the log of what it did. Every file is reached through one descriptor of the directory, opened at start.
struct KeyDirectory: Sendable {
    /// The directory's path as given.
    let path: String
    /// The open directory.
    let fd: Int32

    /// Opens `path`, making it (mode 0755) when it is missing; nil when it cannot.
    static func open(_ path: String) -> KeyDirectory? {
        if mkdir(path, 0o755) != 0 && keyway_errno() != EEXIST { return nil }
        let fd = keyway_open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        guard fd >= 0 else { return nil }
        return KeyDirectory(path: path, fd: fd)
    }

    /// The path of the file `name` in the directory.
    func path(of name: String) -> String { path.hasSuffix("/") ? path + name : path + "/" + name }

    /// The contents of `name` (at most `limit` bytes), or nil when it is missing, unreadable, or larger.
    func read(_ name: String, limit: Int = 1 << 20) -> [UInt8]? {
        let file = keyway_openat(fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard file >= 0 else { return nil }
        defer { close(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = chunk.withUnsafeMutableBytes { CKeywayLibc.read(file, $0.baseAddress, $0.count) }
            if count < 0 && keyway_errno() == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { return bytes }
            bytes += chunk[0..<count]
            guard bytes.count <= limit else { return nil }
        }
    }

    /// Replaces `name` whole (a temporary file, then a rename), mode 0600; false when it could not.
    func replace(_ name: String, with bytes: [UInt8]) -> Bool {
        KeptFiles.replace(name, in: fd, with: bytes, mode: 0o600)
    }

    /// Appends `line` and a newline to `name` in one write, so lines from two connections never mix.
    func append(_ name: String, line: String) {
        let file = keyway_openat_mode(fd, name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o644)
        guard file >= 0 else { return }
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(file, $0.baseAddress, $0.count) }
        close(file)
    }

    /// True when `name` exists.
    func exists(_ name: String) -> Bool {
        var status = stat()
        return fstatat(fd, name, &status, Int32(AT_SYMLINK_NOFOLLOW)) == 0
    }

    /// Removes `name`; true when this call removed it (of two waiting at once, one alone takes a touch).
    func remove(_ name: String) -> Bool { unlinkat(fd, name, 0) == 0 }
}
