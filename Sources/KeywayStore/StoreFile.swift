import Glibc
import KeywayCore

/// Checks (and, when asked, creates) the store's directory and file before SQLite opens them: no symlinks, the
/// expected owner, no access for group or others. Every refusal says what is wrong and how to fix it.
enum StoreFile {
    /// Makes sure `path` is safe to open as the store, creating a 0700 directory and a 0600 file when allowed.
    /// Returns true when this call created the file (only then may an empty database be initialized).
    @discardableResult
    static func prepare(path: String, owner: uid_t, create: Bool) throws(AuthenticationError) -> Bool {
        guard path.hasPrefix("/") else { throw refuse(path, "the path must be absolute") }
        let directory = parent(of: path)
        try checkAncestors(of: directory, owner: owner, storePath: path)
        try checkDirectory(directory, owner: owner, create: create, storePath: path)
        let (descriptor, created) = try openFile(path, create: create)
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw refuse(path, "cannot be examined: \(errnoText())") }
        try checkFile(path, info, owner: owner)
        for companion in [path + "-wal", path + "-shm", path + "-journal"] {
            var companionInfo = stat()
            if lstat(companion, &companionInfo) == 0 { try checkFile(companion, companionInfo, owner: owner) }
        }
        return created
    }

    /// Every directory above the store's own must be a real directory that only root (or the owner) can change
    /// entries in: not a symlink, owned by root or the owner, and not writable by group or others unless sticky
    /// (as /tmp), where nobody else can rename or replace what is ours. Otherwise the path could be swapped between
    /// this check and SQLite's open.
    private static func checkAncestors(of directory: String, owner: uid_t, storePath: String)
        throws(AuthenticationError)
    {
        var current = ""
        for component in directory.split(separator: "/").dropLast() {
            current += "/" + component
            var info = stat()
            guard lstat(current, &info) == 0 else {
                throw refuse(storePath, "cannot examine \(current): \(errnoText())")
            }
            if info.st_mode & S_IFMT == S_IFLNK {
                throw refuse(storePath, "\(current) is a symbolic link; use the real path")
            }
            let sticky = info.st_mode & mode_t(S_ISVTX) != 0
            guard info.st_uid == 0 || info.st_uid == owner, info.st_mode & 0o022 == 0 || sticky else {
                throw refuse(
                    storePath,
                    "\(current) can be changed by other users (owner uid \(info.st_uid), mode "
                        + "\(octal(info.st_mode & 0o7777))); keep the store under root-owned directories")
            }
        }
    }

    static func parent(of path: String) -> String {
        let trimmed = path.split(separator: "/", omittingEmptySubsequences: true).dropLast()
        return "/" + trimmed.joined(separator: "/")
    }

    private static func checkDirectory(_ directory: String, owner: uid_t, create: Bool, storePath: String)
        throws(AuthenticationError)
    {
        var info = stat()
        if lstat(directory, &info) != 0 {
            guard errno == ENOENT, create else {
                throw refuse(
                    storePath,
                    "its directory \(directory) is missing (\(errnoText())); create it with "
                        + "`install -d -m 700 -o root -g root \(directory)` (`make install` creates it too)")
            }
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                throw refuse(storePath, "cannot create the directory \(directory): \(errnoText())")
            }
            guard lstat(directory, &info) == 0 else { throw refuse(storePath, "cannot examine \(directory)") }
        }
        if info.st_mode & S_IFMT == S_IFLNK {
            throw refuse(storePath, "its directory \(directory) is a symbolic link; use the real directory")
        }
        guard info.st_mode & S_IFMT == S_IFDIR else { throw refuse(storePath, "\(directory) is not a directory") }
        try checkOwnerAndMode(
            info, of: directory, named: "its directory \(directory)", owner: owner, forbidden: 0o022,
            problem: "writable by group or others", fix: "chmod 700", storePath: storePath)
    }

    /// The owner must be `owner`, and none of the `forbidden` mode bits may be set; the refusal says how to fix it.
    private static func checkOwnerAndMode(
        _ info: stat, of path: String, named subject: String, owner: uid_t, forbidden: mode_t, problem: String,
        fix: String, storePath: String
    ) throws(AuthenticationError) {
        guard info.st_uid == owner else {
            throw refuse(
                storePath,
                "\(subject) is owned by uid \(info.st_uid), not \(ownerName(owner)); "
                    + "fix with `chown \(ownerName(owner)) \(path)`")
        }
        guard info.st_mode & forbidden == 0 else {
            throw refuse(
                storePath, "\(subject) is \(problem) (mode \(octal(info.st_mode & 0o7777))); fix with `\(fix) \(path)`")
        }
    }

    private static func openFile(_ path: String, create: Bool) throws(AuthenticationError) -> (Int32, Bool) {
        let descriptor = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)
        if descriptor >= 0 { return (descriptor, false) }
        switch errno {
        case ELOOP:
            throw refuse(path, "it is a symbolic link; point the store at the real file")
        case ENOENT where create:
            let created = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0o600)
            guard created >= 0 else { throw refuse(path, "cannot be created: \(errnoText())") }
            fchmod(created, 0o600)
            return (created, true)
        case ENOENT:
            throw refuse(
                path,
                "it does not exist yet: nobody is enrolled. The first enrollment creates it "
                    + "(`keyway enroll gesture --user USER` as root, through keywayd or with --store)")
        case EACCES, EPERM:
            throw refuse(path, "permission denied; the store is root's and Keyway must run as root")
        default:
            throw refuse(path, "cannot be opened: \(errnoText())")
        }
    }

    private static func checkFile(_ path: String, _ info: stat, owner: uid_t) throws(AuthenticationError) {
        if info.st_mode & S_IFMT == S_IFLNK { throw refuse(path, "it is a symbolic link; use the real file") }
        guard info.st_mode & S_IFMT == S_IFREG else { throw refuse(path, "it is not a regular file") }
        try checkOwnerAndMode(
            info, of: path, named: "it", owner: owner, forbidden: 0o077, problem: "accessible to group or others",
            fix: "chmod 600", storePath: path)
        guard info.st_nlink == 1 else {
            throw refuse(path, "it has \(info.st_nlink) hard links; a store must have exactly one")
        }
    }

    static func refuse(_ path: String, _ why: String) -> AuthenticationError {
        AuthenticationError(.storeFailure, "Keyway store \(path): \(why)")
    }

    private static func ownerName(_ uid: uid_t) -> String { uid == 0 ? "root" : "uid \(uid)" }

    private static func octal(_ mode: mode_t) -> String { "0" + String(mode, radix: 8) }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
