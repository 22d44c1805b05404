import Glibc
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayFactors
import KeywayPlatform
import KeywayRuntime

/// `keyway policy edit`: visudo's habit for keyway.conf. The file is copied beside itself (root's, 0600), the
/// editor opens the copy, and the copy replaces the file (by a rename, so a reader sees the old or the new one) only
/// when it checks clean together with the drop-ins; otherwise the errors are shown and the person edits again or
/// leaves with the file as it was.
extension Command {
    func policyEdit() -> Int32 {
        guard geteuid() == 0 else {
            Keyway.printError("keyway: only root may edit the configuration (it is root's: keyway.conf(5), FILES)")
            return ExitStatus.notPermitted
        }
        let path = parsed.value("--config") ?? ConfigurationFiles.defaultPath
        var dropIns: [ConfigSource] = []
        var original: [UInt8] = []
        switch ConfigurationFiles.sources(path) {
        case .success(let sources):
            original = sources.first { $0.path == path }?.bytes ?? []
            dropIns = sources.filter { $0.path != path }
        case .failure(let problems) where problems.isMissingFile:
            break  // a new file
        case .failure(let problems):
            Keyway.printError(problems.description)
            return ExitStatus.dataError
        }
        let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")).map { String(path[..<$0]) } ?? "."
        let directory = slash.isEmpty ? "/" : slash
        var template = Array("\(directory)/.keyway.conf.edit.XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else {
            Keyway.printError("keyway: cannot make a copy to edit in \(directory): \(String(cString: strerror(errno)))")
            return ExitStatus.cannotCreate
        }
        let copy = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        defer { unlink(copy) }
        guard fchmod(fd, 0o600) == 0, Descriptor.write(original, to: fd) else {
            close(fd)
            Keyway.printError("keyway: cannot write \(copy): \(String(cString: strerror(errno)))")
            return ExitStatus.cannotCreate
        }
        close(fd)
        while true {
            let editor = Self.editor()
            let status = Self.runEditor(editor, on: copy)
            guard status == 0 else {
                Keyway.printError("keyway: the editor (\(editor)) exited with status \(status); \(path) is unchanged")
                return ExitStatus.warnings
            }
            guard let edited = Self.contents(of: copy) else {
                Keyway.printError("keyway: cannot read \(copy) back; \(path) is unchanged")
                return ExitStatus.cannotCreate
            }
            if edited == original {
                print("\(path) is unchanged.")
                return ExitStatus.success
            }
            let problems: [Diagnostic]
            switch Configuration.parse([ConfigSource(path: path, bytes: edited)] + dropIns, plugins: Factors.all) {
            case .success(let configuration):
                problems = configuration.policyErrors
                if problems.isEmpty {
                    for warning in configuration.warnings { Keyway.printError(warning.description) }
                    if let failure = Self.install(copy, as: path, in: directory) {
                        Keyway.printError(
                            "keyway: cannot put the edit in place of \(path): \(failure); it is unchanged")
                        return ExitStatus.cannotCreate
                    }
                    print("\(path) is saved; the next authentication uses it.")
                    return ExitStatus.success
                }
            case .failure(let found): problems = found.errors
            }
            Keyway.printError(ConfigurationProblems(problems).description)
            Keyway.printError("\(path) has not been changed.")
            Descriptor.write("What now? (e)dit again, or e(x)it without saving: ", to: 2)
            let answer = TerminalConversation.readLine(from: 0)?.withUnsafeBytes { Array($0) } ?? []
            guard answer.first == UInt8(ascii: "e") else {
                print("Nothing was saved: \(path) is as it was.")
                return ExitStatus.dataError
            }
        }
    }

    /// The editor as sudoedit and visudo choose it: SUDO_EDITOR, VISUAL, EDITOR, else Debian's `editor`, else vi.
    static func editor() -> String {
        for name in ["SUDO_EDITOR", "VISUAL", "EDITOR"] {
            if let value = getenv(name).map({ String(cString: $0) }), !value.isEmpty { return value }
        }
        return access("/usr/bin/editor", X_OK) == 0 ? "/usr/bin/editor" : "vi"
    }

    /// Runs `editor` (a command line, as the variables hold it) on `file` through the shell, on this terminal;
    /// its exit status, or -1 when it could not be started.
    static func runEditor(_ editor: String, on file: String) -> Int32 {
        let arguments = ["/bin/sh", "-c", editor + " \"$1\"", "keyway-policy-edit", file]
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        var pid: pid_t = 0
        guard posix_spawn(&pid, "/bin/sh", nil, nil, &pointers, environ) == 0 else { return -1 }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    static func contents(of path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { return bytes }
            bytes += buffer[..<count]
            if bytes.count > ConfigSource.maximumSize { return bytes }  // parse refuses it with the reason
        }
    }

    /// The edited copy as the file: root's, 0644 as keyway.conf(5) asks, on the disk, then renamed over it.
    static func install(_ copy: String, as path: String, in directory: String) -> String? {
        let fd = open(copy, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        guard fchown(fd, 0, 0) == 0, fchmod(fd, 0o644) == 0, fsync(fd) == 0, rename(copy, path) == 0 else {
            return String(cString: strerror(errno))
        }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
        return nil
    }
}
