import CKeywayLibc
public import KeywayConfig
public import KeywayCore
public import KeywayFactors
import KeywayPlatform

/// Reads `keyway.conf` and its drop-ins, trusting only what root alone can change (docs/ARCHITECTURE.md §11).
/// It is below both sides: the module, the CLI and keywayd read the configuration the same way, and keywayd links no client code.
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
    /// was named (`config=`, `--config`) is an error. (The module's form, which keeps the compiled configuration
    /// between calls, is `ConfigurationCache`'s `load` in KeywayRuntime.)
    public static func load(_ named: String? = nil, plugins: [FactorPlugin] = Factors.all)
        -> Result<Configuration, ConfigurationProblems>
    {
        switch sources(named) {
        case .failure(let problems): return .failure(problems)
        case .success(let read): return Configuration.parse(read, plugins: plugins)
        }
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
        let rule = TrustedFile.rootOnly(.directory)
        if case .failure(let problem) = rule.check(descriptor: fd) {
            problems.append(Diagnostic(.error, file: directory, why(rule, problem)))
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

    /// Opens `path` (relative to `directory`) without following a link, checks that root alone can change it, and
    /// reads it.
    static func read(_ path: String, at directory: Int32) -> TrustedFile.Reading {
        let rule = TrustedFile.rootOnly(.regularFile)
        return rule.read(path, at: directory, limit: ConfigSource.maximumSize, explain: { why(rule, $0) })
    }

    static func openProblem(_ code: Int32, directory: Bool) -> String {
        if code == ELOOP { return why(TrustedFile.rootOnly(.directory), .symbolicLink) }
        if code == ENOTDIR && directory { return "it is not a directory" }
        return "cannot be opened: \(String(cString: strerror(code)))"
    }

    /// Why a file or directory of the configuration is refused, with the fix.
    static func why(_ rule: TrustedFile, _ problem: TrustedFile.Problem) -> String {
        switch problem {
        case .symbolicLink:
            return "it is a symbolic link; Keyway does not follow links to its configuration (copy the file instead)"
        case .owner: return rule.words(problem) + "; only root may configure Keyway (chown root)"
        case .mode: return rule.words(problem) + "; anyone who can write it could weaken every policy (chmod go-w)"
        case .unexaminable, .wrongKind, .links: return rule.words(problem)
        }
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
