import CKeywayLibc
import Glibc
import KeywayCore
import KeywayPlatform

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
            let rule = TrustedFile(nil, ownedBy: [0, owner], forbidden: 0o022, stickyExempt: true)
            switch rule.problem(info) {
            case nil: continue
            case .symbolicLink: throw refuse(storePath, "\(current) is a symbolic link; use the real path")
            case .owner, .mode, .wrongKind, .links, .unexaminable:
                throw refuse(
                    storePath,
                    "\(current) can be changed by other users (owner uid \(info.st_uid), mode "
                        + "\(TrustedFile.octal(info.st_mode))); keep the store under root-owned directories")
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
        try check(
            info, TrustedFile(.directory, ownedBy: [owner], forbidden: 0o022), path: directory,
            named: "its directory \(directory)", fix: "chmod 700", storePath: storePath)
    }

    /// Refuses the store when `info` breaks `rule`, saying how to fix it.
    private static func check(
        _ info: stat, _ rule: TrustedFile, path: String, named subject: String, fix: String, storePath: String
    ) throws(AuthenticationError) {
        guard let problem = rule.problem(info) else { return }
        let owner = rule.owners.first ?? 0
        let why: String
        switch problem {
        case .symbolicLink:
            why = "\(subject) is a symbolic link; use the real \(rule.kind == .directory ? "directory" : "file")"
        case .wrongKind(let kind): why = "\(rule.kind == .directory ? path : subject) is not \(kind.words)"
        case .owner(let uid):
            why =
                "\(subject) is owned by uid \(uid), not \(ownerName(owner)); fix with `chown \(ownerName(owner)) \(path)`"
        case .mode(let mode):
            let what = rule.forbidden & 0o044 != 0 ? "accessible to" : "writable by"
            why = "\(subject) is \(what) group or others (mode \(TrustedFile.octal(mode))); fix with `\(fix) \(path)`"
        case .links(let count): why = "\(subject) has \(count) hard links; a store must have exactly one"
        case .unexaminable(let error): why = "\(subject) cannot be examined: \(String(cString: strerror(error)))"
        }
        throw refuse(storePath, why)
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
        try check(
            info, TrustedFile(.regularFile, ownedBy: [owner], forbidden: 0o077, singleLink: true), path: path,
            named: "it", fix: "chmod 600", storePath: path)
    }

    static func refuse(_ path: String, _ why: String) -> AuthenticationError {
        AuthenticationError(.storeFailure, "Keyway store \(path): \(why)")
    }

    private static func ownerName(_ uid: uid_t) -> String { uid == 0 ? "root" : "uid \(uid)" }

    static func errnoText() -> String { String(cString: strerror(errno)) }
}
