import CKeywayLibc
public import KeywayConfig
public import KeywayCore
public import KeywayFactors

/// Reads `keyway.conf` and its drop-ins, trusting only what root alone can change (docs/ARCHITECTURE.md §11).
///
/// The main file, the drop-in directory and each drop-in must be owned by root and not writable by group or others,
/// and are opened without following a symbolic link; otherwise the file is refused with the reason. Drop-ins are
/// `NAME.conf.d/*.conf` beside the main file, read in byte order of their names.
public enum ConfigurationFiles {
    /// The main file when none is named.
    public static let defaultPath = "/etc/keyway/keyway.conf"
    /// The most drop-in files read.
    public static let maximumDropIns = 128

    /// Reads and compiles the configuration. A missing default file means the built-ins only; a missing file that
    /// was named (`config=`, `--config`) is an error. With a `cache`, the files are still read and checked on every
    /// call, but compiled only when the cache holds no form of exactly these bytes (the module's case).
    public static func load(
        _ named: String? = nil, plugins: [FactorPlugin] = Factors.all, cache: ConfigurationCache? = nil
    ) -> Result<Configuration, ConfigurationProblems> {
        let read: [ConfigSource]
        switch sources(named) {
        case .failure(let problems): return .failure(problems)
        case .success(let found): read = found
        }
        // The built-ins alone compile faster than a kept form is read.
        guard let cache, !read.isEmpty else { return Configuration.parse(read, plugins: plugins) }
        return cache.configuration(for: named ?? defaultPath, sources: read, plugins: plugins)
    }

    /// The files' contents, main file first; or why they cannot be trusted.
    public static func sources(_ named: String?) -> Result<[ConfigSource], ConfigurationProblems> {
        let path = named ?? defaultPath
        var problems: [Diagnostic] = []
        var sources: [ConfigSource] = []
        switch read(path, at: AT_FDCWD) {
        case .read(let bytes): sources.append(ConfigSource(path: path, bytes: bytes))
        case .missing:
            if named != nil {
                var problem = Diagnostic(.error, file: path, "the file does not exist")
                problem.isMissingFile = true
                problems.append(problem)
            }
        case .refused(let why): problems.append(Diagnostic(.error, file: path, why))
        }
        let directory = path + ".d"
        let fd = keyway_open(directory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        if fd < 0 {
            let code = keyway_errno()
            if code != ENOENT {
                problems.append(Diagnostic(.error, file: directory, openProblem(code, directory: true)))
            }
            return problems.isEmpty ? .success(sources) : .failure(ConfigurationProblems(problems))
        }
        defer { close(fd) }
        if case .failure(let why) = trusted(fd, directory: true) {
            problems.append(Diagnostic(.error, file: directory, why.reason))
            return .failure(ConfigurationProblems(problems))
        }
        var names: [String] = []
        switch dropInNames(fd) {
        case .names(let found): names = found
        case .refused(let why):
            problems.append(Diagnostic(.error, file: directory, why))
            return .failure(ConfigurationProblems(problems))
        }
        if names.count > maximumDropIns {
            problems.append(
                Diagnostic(
                    .error, file: directory, "it holds \(names.count) drop-ins; at most \(maximumDropIns) are read"))
            return .failure(ConfigurationProblems(problems))
        }
        for name in names {
            let file = directory + "/" + name
            switch read(name, at: fd) {
            case .read(let bytes): sources.append(ConfigSource(path: file, bytes: bytes))
            case .missing: continue  // removed while listing
            case .refused(let why): problems.append(Diagnostic(.error, file: file, why))
            }
        }
        return problems.isEmpty ? .success(sources) : .failure(ConfigurationProblems(problems))
    }

    enum Listing {
        case names([String])
        case refused(String)
    }

    enum Reading {
        case read([UInt8])
        case missing
        case refused(String)
    }

    /// Opens `path` (relative to `directory`) without following a link, checks it, and reads it.
    static func read(_ path: String, at directory: Int32, limit: Int = ConfigSource.maximumSize) -> Reading {
        let fd = keyway_openat(directory, path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        if fd < 0 {
            let code = keyway_errno()
            return code == ENOENT ? .missing : .refused(openProblem(code, directory: false))
        }
        defer { close(fd) }
        let size: Int
        switch trusted(fd, directory: false) {
        case .success(let info): size = Int(info.st_size)
        case .failure(let why): return .refused(why.reason)
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
        return .refused("it is larger than \(limit) bytes; a configuration is a few hundred lines")
    }

    static func openProblem(_ code: Int32, directory: Bool) -> String {
        if code == ELOOP {
            return "it is a symbolic link; Keyway does not follow links to its configuration (copy the file instead)"
        }
        if code == ENOTDIR && directory { return "it is not a directory" }
        return "cannot be opened: \(String(cString: strerror(code)))"
    }

    /// Why an open file or directory cannot be trusted.
    struct Untrusted: Error {
        /// In words, for the diagnostic.
        var reason: String
    }

    /// The open file's or directory's status when root alone can change it (its size is what `read` allocates), or
    /// why it cannot be trusted.
    static func trusted(_ fd: Int32, directory: Bool) -> Result<stat, Untrusted> {
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            return .failure(Untrusted(reason: "cannot be examined: \(String(cString: strerror(keyway_errno())))"))
        }
        let type = info.st_mode & 0o170000
        if directory && type != 0o040000 { return .failure(Untrusted(reason: "it is not a directory")) }
        if !directory && type != 0o100000 { return .failure(Untrusted(reason: "it is not a regular file")) }
        if info.st_uid != 0 {
            return .failure(
                Untrusted(
                    reason: "it is owned by uid \(info.st_uid), not root; only root may configure Keyway (chown root)"))
        }
        let mode = info.st_mode & 0o7777
        if mode & 0o022 != 0 {
            let octal = String(mode, radix: 8)
            let who = mode & 0o022 == 0o022 ? "group and others" : mode & 0o020 != 0 ? "its group" : "others"
            return .failure(
                Untrusted(
                    reason: "it is writable by \(who) (mode 0\(octal)); "
                        + "anyone who can write it could weaken every policy (chmod go-w)"))
        }
        return .success(info)
    }

    /// The `*.conf` names in the directory, sorted; hidden files are left out.
    static func dropInNames(_ fd: Int32) -> Listing {
        let copy = dup(fd)
        guard copy >= 0, let stream = fdopendir(copy) else {
            if copy >= 0 { close(copy) }
            return .refused("cannot be listed: \(String(cString: strerror(keyway_errno())))")
        }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = String(cString: keyway_dirent_name(entry))
            guard !name.hasPrefix("."), name.hasSuffix(".conf"), name.utf8.count > 5 else { continue }
            names.append(name)
            if names.count > maximumDropIns { break }
        }
        return .names(names.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) })
    }
}
