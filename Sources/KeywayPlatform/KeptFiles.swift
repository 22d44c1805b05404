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
        // fchmod: the mode asked for, whatever the umask took away.
        let complete = Descriptor.write(bytes, to: fd) && fchmod(fd, mode) == 0 && (!durable || fsync(fd) == 0)
        close(fd)
        if complete && renameat(dir, temporary, dir, name) == 0 { return !durable || fsync(dir) == 0 }
        unlinkat(dir, temporary, 0)
        return false
    }

    /// Reads back a file this user kept at `path`, at most `limit` bytes: `.success(nil)` when there is none, a
    /// failure in words when it is not a regular file of this user's that no one else may write (whoever could
    /// write it could make this process believe it: `TrustedFile.mine`).
    public static func read(_ path: String, limit: Int) -> Result<[UInt8]?, UnixSocket.Failure> {
        switch TrustedFile.mine(.regularFile).read(path, limit: limit) {
        case .read(let bytes): return .success(bytes)
        case .missing: return .success(nil)
        case .refused(let reason): return .failure(UnixSocket.Failure("read \(path)", reason: reason))
        }
    }
}
