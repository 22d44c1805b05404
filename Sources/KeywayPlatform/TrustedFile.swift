public import CKeywayLibc

/// The one owner-and-mode check (docs/ARCHITECTURE.md §2, "One helper per OS concern"): whether a file or directory
/// is of the expected kind, owned by someone who may change it, and changeable by no one else. The configuration,
/// the store and its directories, a fleet's password and timeline files, keywayd's kept files and notes and the
/// simulated sensor's directory are all judged here; each caller words the refusal with its own fix.
public struct TrustedFile: Sendable {
    /// What the path must be.
    public enum Kind: Sendable, Equatable {
        case regularFile
        case directory

        /// "a regular file", "a directory".
        public var words: String {
            switch self {
            case .regularFile: return "a regular file"
            case .directory: return "a directory"
            }
        }
    }

    /// Why a path is not trusted.
    public enum Problem: Sendable, Equatable, Error {
        /// `stat` failed, with this errno.
        case unexaminable(Int32)
        /// A symbolic link, where the real path was wanted.
        case symbolicLink
        /// Not of the kind asked for.
        case wrongKind(Kind)
        /// Owned by this uid, which may not own it.
        case owner(uid_t)
        /// Its permission bits (`mode & 0o7777`) include some of the forbidden ones.
        case mode(mode_t)
        /// More than one hard link.
        case links(Int)
    }

    /// The kind it must be, or nil for any.
    public var kind: Kind?
    /// Who may own it.
    public var owners: [uid_t]
    /// Permission bits no one but the owner may hold (0o022: writable by no one else; 0o077: not even readable).
    public var forbidden: mode_t
    /// Whether a sticky directory (as /tmp) is trusted despite `forbidden`: no one can rename or replace another's
    /// entries there.
    public var stickyExempt: Bool
    /// Whether exactly one hard link is required (a second name could be given to someone else).
    public var singleLink: Bool

    public init(
        _ kind: Kind?, ownedBy owners: [uid_t], forbidden: mode_t, stickyExempt: Bool = false, singleLink: Bool = false
    ) {
        self.kind = kind
        self.owners = owners
        self.forbidden = forbidden
        self.stickyExempt = stickyExempt
        self.singleLink = singleLink
    }

    /// Only root may change it, and no one else may write it: keyway.conf and its drop-ins.
    public static func rootOnly(_ kind: Kind) -> TrustedFile { TrustedFile(kind, ownedBy: [0], forbidden: 0o022) }

    /// This process's user's, writable by no one else (0o022), or private to it (0o077).
    public static func mine(_ kind: Kind, privateToo: Bool = false) -> TrustedFile {
        TrustedFile(kind, ownedBy: [geteuid()], forbidden: privateToo ? 0o077 : 0o022)
    }

    /// What is wrong with a status already read (a symbolic link only when read with `lstat`), or nil.
    public func problem(_ info: stat) -> Problem? {
        let type = info.st_mode & mode_t(S_IFMT)
        if type == mode_t(S_IFLNK) { return .symbolicLink }
        switch kind {
        case .regularFile where type != mode_t(S_IFREG): return .wrongKind(.regularFile)
        case .directory where type != mode_t(S_IFDIR): return .wrongKind(.directory)
        case .regularFile, .directory, nil: break
        }
        if !owners.contains(info.st_uid) { return .owner(info.st_uid) }
        let sticky = type == mode_t(S_IFDIR) && info.st_mode & mode_t(S_ISVTX) != 0
        if info.st_mode & forbidden != 0 && !(stickyExempt && sticky) { return .mode(info.st_mode & 0o7777) }
        if singleLink && info.st_nlink != 1 { return .links(Int(info.st_nlink)) }
        return nil
    }

    /// The status of an open descriptor when it is trusted.
    public func check(descriptor: Int32) -> Result<stat, Problem> {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return .failure(.unexaminable(keyway_errno())) }
        if let problem = problem(info) { return .failure(problem) }
        return .success(info)
    }

    /// The status of `path`, not following a final symbolic link, when it is trusted; `.success(nil)` when nothing
    /// is there.
    public func check(path: String) -> Result<stat?, Problem> {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            let error = keyway_errno()
            return error == ENOENT ? .success(nil) : .failure(.unexaminable(error))
        }
        if let problem = problem(info) { return .failure(problem) }
        return .success(info)
    }

    /// What `read` found.
    public enum Reading: Sendable, Equatable {
        case read([UInt8])
        case missing
        case refused(String)
    }

    /// Opens `path` (relative to the directory `directory`, or to the working directory) without following a link,
    /// checks the open file against this rule, and reads at most `limit` bytes of it. A refusal is in words:
    /// `explain`'s for a problem with the file (the rule's own `words` when none is given), the system's for an open
    /// or a read that failed.
    public func read(
        _ path: String, at directory: Int32 = AT_FDCWD, limit: Int, explain: ((Problem) -> String)? = nil
    ) -> Reading {
        let fd = keyway_openat(directory, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        if fd < 0 {
            let code = keyway_errno()
            if code == ENOENT { return .missing }
            if code == ELOOP { return .refused(explain?(.symbolicLink) ?? words(.symbolicLink)) }
            return .refused("cannot be opened: \(String(cString: strerror(code)))")
        }
        defer { close(fd) }
        let size: Int
        switch check(descriptor: fd) {
        case .success(let info): size = Int(info.st_size)
        case .failure(let problem): return .refused(explain?(problem) ?? words(problem))
        }
        // Read straight into a buffer of the file's size and one byte more (to see the end), grown if it grows.
        var bytes = [UInt8](repeating: 0, count: min(max(size, 0), limit) + 1)
        var used = 0
        while used <= limit {
            if used == bytes.count { bytes += [UInt8](repeating: 0, count: min(bytes.count, limit + 1 - used) + 1) }
            let count = bytes.withUnsafeMutableBytes {
                Int(CKeywayLibc.read(fd, $0.baseAddress! + used, $0.count - used))
            }
            if count < 0 {
                if keyway_errno() == EINTR { continue }
                return .refused("cannot be read: \(String(cString: strerror(keyway_errno())))")
            }
            if count == 0 {
                bytes.removeLast(bytes.count - used)
                return .read(bytes)
            }
            used += count
        }
        return .refused("it is larger than \(limit) bytes")
    }

    /// The problem in words, for a refusal that names the path itself: "it is owned by uid 1000, not root".
    public func words(_ problem: Problem) -> String {
        switch problem {
        case .unexaminable(let error): return "cannot be examined: \(String(cString: strerror(error)))"
        case .symbolicLink: return "it is a symbolic link; use the real path"
        case .wrongKind(let kind): return "it is not \(kind.words)"
        case .owner(let uid): return "it is owned by uid \(uid), not \(ownerWords)"
        case .mode(let mode):
            let verb = forbidden & 0o044 != 0 ? "accessible to" : "writable by"
            let who =
                mode & forbidden & 0o070 != 0 && mode & forbidden & 0o007 != 0
                ? "group and others" : mode & forbidden & 0o070 != 0 ? "its group" : "others"
            return "it is \(verb) \(who) (mode \(TrustedFile.octal(mode)))"
        case .links(let count): return "it has \(count) hard links; it must have exactly one"
        }
    }

    /// Who may own it, in words: "root", "uid 1000", "root or uid 1000".
    public var ownerWords: String {
        owners.map { $0 == 0 ? "root" : "uid \($0)" }.joined(separator: " or ")
    }

    /// "0644".
    public static func octal(_ mode: mode_t) -> String { "0" + String(mode & 0o7777, radix: 8) }
}
