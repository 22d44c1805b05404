import Glibc
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayPlatform
import KeywayRuntime
import KeywayTools

/// `keyway doctor [--pam-dir DIR] [--sshd-config FILE]`: the PAM stacks that use Keyway, and where one could lock
/// people out or sshd keeps Keyway from being asked (`StackDoctor` decides; this reads the files, asks keywayd and
/// prints).
extension Command {
    /// The PAM directory when --pam-dir is not given.
    static let pamDirectory = "/etc/pam.d"
    /// sshd's configuration when --sshd-config is not given (read when it exists).
    static let sshdConfiguration = "/etc/ssh/sshd_config"
    /// The largest PAM file read; a service file is a few lines.
    static let largestPAMFile = 1 << 20

    func doctor() -> Int32 {
        guard getuid() == 0 else {
            Keyway.printError(
                "keyway: doctor runs as root: it reads the configuration as the module does (only files root alone "
                    + "can change are trusted) and asks keywayd as root (sudo keyway doctor, or su -c 'keyway doctor')")
            return ExitStatus.notPermitted
        }
        let path = parsed.value("--pam-dir") ?? Self.pamDirectory
        let files: [String: String]
        switch Self.readPAMFiles(path) {
        case .success(let read): files = read
        case .failure(let problem):
            Keyway.printError("keyway: cannot read \(path): \(problem.reason)")
            return ExitStatus.noInput
        }
        let sshdPath = parsed.value("--sshd-config") ?? Self.sshdConfiguration
        var sshd: SSHDConfig? = nil
        if let text = Self.readPAMFile(sshdPath) {
            sshd = SSHDConfig(text: text, file: sshdPath, include: Self.sshdIncludes)
        } else if parsed.value("--sshd-config") != nil {
            Keyway.printError("keyway: cannot read \(sshdPath)")
            return ExitStatus.noInput
        }
        let people = StackDoctor.People(
            accounts: Self.loginAccounts(), enrolled: Self.enrolledFactors(at:), isMember: Self.membership,
            sshd: sshd == nil ? nil : Self.sshdPerAccount(sshdPath, from: parsed.value("--ssh-from") ?? Self.sshFrom))
        let report = StackDoctor(directory: PAMDirectory(path: path, files: files), sshd: sshd).examine(
            configuration: { ConfigurationFiles.load($0) }, keywayd: Self.keywaydProblem, people: people)
        for line in report.summaries { print(line.escapingControlCharacters) }
        for finding in report.findings {
            for line in finding.text(in: path).split(separator: "\n") { print(String(line).escapingControlCharacters) }
        }
        print(Self.doctorSummary(report, path: path))
        return report.findings.isEmpty ? ExitStatus.success : ExitStatus.warnings
    }

    /// The last line: how many stacks use Keyway and how many warnings there are.
    static func doctorSummary(_ report: StackDoctor.Report, path: String) -> String {
        let stacks = report.stacks.count
        guard stacks > 0 else { return "no stack uses Keyway in \(path)" }
        let used = "\(stacks) stack\(stacks == 1 ? "" : "s") in \(path) use\(stacks == 1 ? "s" : "") Keyway"
        let critical = report.findings.filter(\.critical).count
        let warnings = report.findings.count - critical
        var counts: [String] = []
        if critical > 0 { counts.append("\(critical) critical (logins failing now)") }
        if warnings > 0 { counts.append("\(warnings) warning\(warnings == 1 ? "" : "s")") }
        return counts.isEmpty ? "\(used); nothing to fix" : "\(used); " + counts.joined(separator: ", ")
    }

    /// Why keywayd at `socket` cannot serve: unreachable, or its store failing (one question about root's
    /// enrollments, which reads the store and hashes nothing); nil when it answers.
    static func keywaydProblem(_ socket: String) -> AuthenticationError? {
        let vault = DaemonVault(socketPath: socket, via: "keyway doctor", timeoutMilliseconds: 10_000)
        do {
            _ = try vault.status(of: "root")
            return nil
        } catch {
            return error
        }
    }

    /// The files an sshd_config `Include` names, in sshd's order: a relative pattern is under /etc/ssh, and a glob
    /// is expanded in sorted order (glob(3)).
    static func sshdIncludes(_ pattern: String) -> [(path: String, text: String)] {
        let full = pattern.hasPrefix("/") ? pattern : "/etc/ssh/" + pattern
        var found = glob_t()
        defer { globfree(&found) }
        guard glob(full, 0, nil, &found) == 0 else { return [] }
        return (0..<Int(found.gl_pathc)).compactMap { index in
            guard let name = found.gl_pathv[index].map({ String(cString: $0) }), let text = readPAMFile(name) else {
                return nil
            }
            return (name, text)
        }
    }

    /// The regular files of the PAM directory (symbolic links followed, as libpam follows them), by name.
    static func readPAMFiles(_ path: String) -> Result<[String: String], AuthenticationError> {
        guard let stream = opendir(path) else {
            return .failure(AuthenticationError(.internalFailure, String(cString: strerror(errno))))
        }
        defer { closedir(stream) }
        var files: [String: String] = [:]
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
                String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name != ".", name != "..", let text = readPAMFile(path + "/" + name) else { continue }
            files[name] = text
        }
        return .success(files)
    }

    /// A regular file's text, or nil for anything else (a directory, a file that cannot be read).
    static func readPAMFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, info.st_mode & 0o170000 == 0o100000 else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while bytes.count <= largestPAMFile {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
