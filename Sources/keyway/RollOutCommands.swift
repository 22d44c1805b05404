import Glibc
import KeywayConfig
import KeywayCore
import KeywayFactors
import KeywayPlatform
import KeywayRuntime
import KeywayTools

/// A roll-out in numbers: every account that can log in, with what it has enrolled and where it stands with a policy
/// (`keyway status --all`), and the accounts `keyway doctor` reads (docs/GUIDE.md, "Rolling out a policy").
extension Command {
    /// Shells that end a login at once: accounts with one of them are services, not people.
    static let noLoginShells: Set<String> = [
        "/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false", "/bin/sync",
    ]
    /// login.defs(5), whose UID_MIN is where people's accounts start.
    static let loginDefinitions = "/etc/login.defs"

    /// The accounts people log in with, in the password database's order: root, and every account from UID_MIN
    /// (login.defs, else 1000) with a shell that lets it log in, nobody's excepted. Only what NSS enumerates (an LDAP
    /// directory may not list its accounts).
    static func loginAccounts() -> [String] {
        let first = readPAMFile(loginDefinitions).flatMap(Self.uidMinimum) ?? 1000
        var names: [String] = []
        setpwent()
        defer { endpwent() }
        while let entry = getpwent() {
            let uid = entry.pointee.pw_uid
            let shell = entry.pointee.pw_shell.map { String(cString: $0) } ?? ""
            guard uid == 0 || (uid >= first && uid != 65_534), !noLoginShells.contains(shell),
                let name = entry.pointee.pw_name.map({ String(cString: $0) }), !names.contains(name)
            else { continue }
            names.append(name)
        }
        return names
    }

    /// UID_MIN in login.defs' text.
    static func uidMinimum(_ text: String) -> UInt32? {
        for line in text.split(separator: "\n") {
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if words.count >= 2, words[0] == "UID_MIN", let value = UInt32(words[1]) { return value }
        }
        return nil
    }

    /// Every account keywayd at `socket` knows, with the factors it has enrolled.
    static func enrolledFactors(at socket: String) -> Result<[String: Set<FactorKind>], AuthenticationError> {
        let vault = DaemonVault(socketPath: socket, via: "keyway doctor", timeoutMilliseconds: 10_000)
        do {
            var found: [String: Set<FactorKind>] = [:]
            for status in try vault.status(of: nil) { found[status.user] = status.enrolledFactors }
            return .success(found)
        } catch {
            return .failure(error)
        }
    }

    /// Whether `user` is in `group`, as the module asks it.
    static func membership(_ user: String, _ group: String) -> Result<Bool, AuthenticationError> {
        Accounts.isMember(user, of: group).mapError { AuthenticationError(.invalidPolicy, $0.description) }
    }

    /// The address an account's sshd settings are asked for (`sshd -T -C … addr=`): a documentation address
    /// (RFC 5737), so a `Match Address` for a particular network does not apply unless --ssh-from names it.
    static let sshFrom = "192.0.2.1"

    /// sshd's settings for an account with every `Match` applied, from `sshd -T -C`, for the configuration `file`;
    /// nil when sshd is not installed.
    static func sshdPerAccount(_ file: String, from address: String) -> (
        (String) -> Result<SSHDConfig, AuthenticationError>
    )? {
        let sshd = "/usr/sbin/sshd"
        guard access(sshd, X_OK) == 0 else { return nil }
        return { user in
            let (status, output) = capture([
                sshd, "-T", "-f", file, "-C", "user=\(user),host=\(address),addr=\(address)",
            ])
            guard status == 0 else {
                let why = output.split(separator: "\n").last.map(String.init) ?? "exit \(status)"
                return .failure(AuthenticationError(.internalFailure, "sshd -T: \(why)"))
            }
            return .success(SSHDConfig(text: output, file: "sshd -T -C user=\(user)"))
        }
    }

    /// Runs `arguments` (an absolute path first) with no input and returns its exit status and its output, standard
    /// error after standard output's lines as they came; status -1 when it could not be started.
    static func capture(_ arguments: [String]) -> (Int32, String) {
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else { return (-1, String(cString: strerror(errno))) }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)
        var pointers = arguments.map { strdup($0) } + [nil]
        defer { for pointer in pointers { free(pointer) } }
        var pid: pid_t = 0
        let started = posix_spawn(&pid, arguments[0], &actions, nil, &pointers, environ)
        close(pipeEnds[1])
        defer { close(pipeEnds[0]) }
        guard started == 0 else { return (-1, String(cString: strerror(started))) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 8192)
        while bytes.count < largestPAMFile {
            let count = chunk.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        return (code, String(decoding: bytes, as: UTF8.self))
    }

    /// `keyway status --all`: every account that can log in or is in the store, what it has enrolled and, with
    /// --policy, where it stands (ready, unenrolled, refused); `--group` narrows, `--json` prints one object.
    func statusOfAll() -> Int32 {
        guard getuid() == 0 else {
            Keyway.printError("keyway: status --all is root's: keywayd shows anyone else only their own account")
            return ExitStatus.notPermitted
        }
        let group = parsed.value("--group")
        let policy = parsed.value("--policy")
        let configuration = policy.map { _ in self.configuration() }
        if let policy, let configuration, configuration.policy(named: policy) == nil {
            let names = configuration.policies.map(\.base.name).joined(separator: ", ")
            Keyway.fail(usage: "no policy is named '\(policy)'; the policies are \(names)")
        }
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            var statuses: [String: UserStatus] = [:]
            for status in try runtime.vault.status(of: nil) { statuses[status.user] = status }
            var names = Self.loginAccounts()
            names += statuses.keys.filter { !names.contains($0) }.sorted()
            if let group {
                var members: [String] = []
                for user in names where try Self.membership(user, group).get() { members.append(user) }
                names = members
            }
            var rows: [(user: String, enrolled: [FactorKind], standing: RollOut.Standing?)] = []
            for user in names {
                let enrolled = statuses[user]?.enrolledFactors ?? []
                let standing = policy.flatMap { name in
                    configuration.map { configuration in
                        RollOut.standing(
                            of: user, enrolled: enrolled, policy: name, in: configuration,
                            isMember: { Self.membership(user, $0) })
                    }
                }
                let ordered = (statuses[user]?.factors ?? []).map(\.factor).filter { enrolled.contains($0) }
                rows.append((user, ordered, standing))
            }
            if parsed.has("--json") {
                print(Self.rollOutJSON(rows, policy: policy))
                return
            }
            for row in rows {
                var line = "\(row.user): "
                line += row.enrolled.isEmpty ? "nothing enrolled" : row.enrolled.map(\.rawValue).joined(separator: ", ")
                if let standing = row.standing, let policy {
                    switch standing {
                    case .ready: line += "; ready for policy \(policy)"
                    case .letThrough: line += "; not enrolled for policy \(policy) (let in without a factor)"
                    case .refused(let needs): line += "; refused by policy \(policy) (needs \(needs))"
                    case .unknown(let why): line += "; policy \(policy) cannot be told: \(why)"
                    }
                }
                print(line.escapingControlCharacters)
            }
            let counted = Self.counts(rows.compactMap(\.standing))
            let among = group.map { " in group \($0)" } ?? ""
            var summary = "\(rows.count) account\(rows.count == 1 ? "" : "s")\(among)"
            if let policy {
                summary += " for policy \(policy): "
                summary += counted.map { "\($0.count) \($0.word)" }.joined(separator: ", ")
            }
            print(summary.escapingControlCharacters)
        }
    }

    /// How many accounts stand each way, in a fixed order.
    static func counts(_ standings: [RollOut.Standing]) -> [(word: String, count: Int)] {
        ["ready", "unenrolled", "refused", "unknown"].map { word in
            (word, standings.filter { $0.word == word }.count)
        }
    }

    /// `{"policy": …, "accounts": [{"user": …, "enrolled": […], "standing": …}], "counts": {…}}`.
    static func rollOutJSON(
        _ rows: [(user: String, enrolled: [FactorKind], standing: RollOut.Standing?)], policy: String?
    ) -> String {
        let accounts = rows.map { row in
            var fields = [
                "\"user\": \(json(row.user))",
                "\"enrolled\": [\(row.enrolled.map { json($0.rawValue) }.joined(separator: ", "))]",
            ]
            if let standing = row.standing {
                fields.append("\"standing\": \(json(standing.word))")
                switch standing {
                case .refused(let needs): fields.append("\"needs\": \(json(needs))")
                case .unknown(let why): fields.append("\"why\": \(json(why))")
                case .ready, .letThrough: break
                }
            }
            return "{" + fields.joined(separator: ", ") + "}"
        }
        var object = [
            "\"policy\": \(policy.map(json) ?? "null")", "\"accounts\": [\(accounts.joined(separator: ", "))]",
        ]
        if policy != nil {
            let counted = counts(rows.compactMap(\.standing)).map { "\(json($0.word)): \($0.count)" }
            object.append("\"counts\": {\(counted.joined(separator: ", "))}")
        }
        return "{" + object.joined(separator: ", ") + "}"
    }
}

extension UserStatus {
    /// The factors enrolled (an administrator's pass is no factor of its own and is left out).
    var enrolledFactors: Set<FactorKind> {
        Set(factors.filter { $0.enrolled != nil && Factors.all.plugin($0.factor) != nil }.map(\.factor))
    }
}
