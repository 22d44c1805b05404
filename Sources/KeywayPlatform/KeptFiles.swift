public import CKeywayLibc

/// Files root keeps for later processes to read in a directory it alone can change (the compiled `keyway.conf`,
/// keywayd's availability notes): each replaced whole by a rename, so a reader sees the old file or the new one,
/// never part of one (docs/ARCHITECTURE.md §11 and §10).
public enum KeptFiles {
    /// Writes `bytes` as `name` in the open directory `dir`, with `mode`; false when it could not (nothing is left
    /// behind then, and the old file, if any, stays). With `durable`, the file and then the directory are synced
    /// before it returns true, so a power cut keeps the new file.
    @discardableResult
    public static func replace(_ name: String, in dir: Int32, with bytes: [UInt8], mode: mode_t, durable: Bool = false)
        -> Bool
    {
        // Named by process and thread, so two writers at once (a greeter serving two seats) never share one; a name
        // left by a dead process whose pid and thread this call now has is removed first.
        let temporary = ".\(name).\(getpid()).\(pthread_self())"
        unlinkat(dir, temporary, 0)
        let fd = keyway_openat_mode(dir, temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
        guard fd >= 0 else { return false }
        var written = 0
        while written < bytes.count {
            let count = bytes.withUnsafeBytes { Int(write(fd, $0.baseAddress! + written, $0.count - written)) }
            if count < 0 && keyway_errno() == EINTR { continue }
            guard count > 0 else { break }
            written += count
        }
        // fchmod: the mode asked for, whatever the umask took away.
        let complete = written == bytes.count && fchmod(fd, mode) == 0 && (!durable || fsync(fd) == 0)
        close(fd)
        if complete && renameat(dir, temporary, dir, name) == 0 { return !durable || fsync(dir) == 0 }
        unlinkat(dir, temporary, 0)
        return false
    }

    /// Reads back a file this user kept at `path`, at most `limit` bytes: `.success(nil)` when there is none, a
    /// failure in words when it is not a regular file of this user's that no one else may write (whoever could
    /// write it could make this process believe it).
    public static func read(_ path: String, limit: Int) -> Result<[UInt8]?, UnixSocket.Failure> {
        let operation = "read \(path)"
        let fd = keyway_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0)
        guard fd >= 0 else {
            let error = keyway_errno()
            return error == ENOENT ? .success(nil) : .failure(UnixSocket.Failure(operation, errno: error))
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & mode_t(S_IFMT) == mode_t(S_IFREG), info.st_uid == geteuid(),
            info.st_mode & 0o022 == 0
        else {
            return .failure(
                UnixSocket.Failure(
                    operation,
                    reason: "not a regular file owned by uid \(geteuid()) and writable by no one else (uid "
                        + "\(info.st_uid), mode 0\(String(info.st_mode & 0o7777, radix: 8)))"))
        }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while bytes.count <= limit {
            let count = CKeywayLibc.read(fd, &buffer, buffer.count)
            if count < 0 && keyway_errno() == EINTR { continue }
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        guard bytes.count <= limit else {
            return .failure(UnixSocket.Failure(operation, reason: "larger than \(limit) bytes"))
        }
        return .success(bytes)
    }
}
