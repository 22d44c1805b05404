import KeywayConfig
public import KeywayCore
import KeywayRuntime

/// The roll-out half of `keyway doctor`: which accounts a stack would refuse now because they lack its policy's
/// factor, and which it still lets through without one (`unenrolled = allow`). For sshd's stack, each account is
/// taken as sshd would take it (`sshd -T -C user=…`), so `AllowUsers`, `PermitRootLogin` and `Match` blocks count.
extension StackDoctor {
    /// The accounts a roll-out concerns, as the caller read them.
    public struct People {
        /// The accounts that can log in (a login shell), in order.
        public var accounts: [String]
        /// What each account has enrolled, as the keywayd at a socket says (an account not in it has nothing), or
        /// why it cannot say.
        public var enrolled: (_ socket: String) -> Result<[String: Set<FactorKind>], AuthenticationError>
        /// Whether an account is in a group; a failure when that cannot be told.
        public var isMember: @Sendable (_ user: String, _ group: String) -> Result<Bool, AuthenticationError>
        /// sshd's settings for one account with every `Match` applied, or why they could not be read; nil when there
        /// is no sshd to ask.
        public var sshd: ((String) -> Result<SSHDConfig, AuthenticationError>)?

        public init(
            accounts: [String],
            enrolled: @escaping (String) -> Result<[String: Set<FactorKind>], AuthenticationError>,
            isMember: @escaping @Sendable (String, String) -> Result<Bool, AuthenticationError>,
            sshd: ((String) -> Result<SSHDConfig, AuthenticationError>)?
        ) {
            self.accounts = accounts
            self.enrolled = enrolled
            self.isMember = isMember
            self.sshd = sshd
        }
    }

    /// The most names one finding lists; the rest are counted (`keyway status --all` has them all).
    static let namesShown = 20

    /// For each auth line whose failure fails its stack: the accounts it would refuse, and those it lets through
    /// without a factor; for sshd's stack, only the accounts sshd lets in and whose every login runs the stack.
    func rollOutFindings(
        _ uses: [Use], people: People, configuration load: (String?) -> Result<Configuration, ConfigurationProblems>
    ) -> [Finding] {
        var findings: [Finding] = []
        var sshdRead: [String: Result<SSHDConfig, AuthenticationError>] = [:]
        var asked: [String: Result<[String: Set<FactorKind>], AuthenticationError>] = [:]
        for use in uses where use.type == "auth" && Self.fatality(PAMControl(use.line.control)) != .passes {
            guard case .success(let arguments) = ModuleArguments.parse(use.line.arguments),
                case .success(let configuration) = load(arguments.config),
                configuration.policy(named: arguments.policy) != nil
            else { continue }  // lineFindings says why
            let answer = asked[arguments.socket] ?? people.enrolled(arguments.socket)
            asked[arguments.socket] = answer
            guard case .success(let enrolled) = answer else { continue }  // daemonFindings says why
            var refused: [String: [String]] = [:]  // what is needed → who lacks it
            var needs: [String] = []
            var through: [String] = []
            var unread: [String] = []
            let isMember = people.isMember
            for user in people.accounts {
                let standing = RollOut.standing(
                    of: user, enrolled: enrolled[user] ?? [], policy: arguments.policy, in: configuration,
                    unenrolled: arguments.unenrolled, isMember: { isMember(user, $0) })
                if standing == .ready { continue }
                if use.stack == "sshd", let ask = people.sshd {
                    let read = sshdRead[user] ?? ask(user)
                    sshdRead[user] = read
                    switch read {
                    case .success(let settings):
                        let member = { (group: String) -> Bool? in try? isMember(user, group).get() }
                        guard settings.admits(user, isMember: member), settings.everyLoginRunsPAM else { continue }
                    case .failure(let error):
                        unread.append("\(user) (\(error.reason))")
                    }
                }
                switch standing {
                case .refused(let need):
                    if refused[need] == nil { needs.append(need) }
                    refused[need, default: []].append(user)
                case .letThrough: through.append(user)
                case .unknown(let why): refused["a policy that can be told (\(why))", default: []].append(user)
                case .ready: break
                }
            }
            let policy = "policy '\(arguments.policy)'"
            for need in needs + refused.keys.filter({ !needs.contains($0) }).sorted() {
                let users = refused[need] ?? []
                findings.append(
                    finding(
                        use,
                        "\(policy) would refuse \(Self.count(users.count, "account")) that \(users.count == 1 ? "lacks" : "lack") "
                            + "\(need): \(Self.listed(users))",
                        fix: "enroll them (keyway enroll FACTOR --user NAME, or first-enrollment = self and "
                            + "unenrolled = allow until they have; keyway pass issue --user NAME for a way in today)",
                        kind: .rollOut))
            }
            if !through.isEmpty {
                findings.append(
                    finding(
                        use,
                        "\(policy) lets \(Self.count(through.count, "account")) in without a factor (nothing "
                            + "enrolled, unenrolled=\((arguments.unenrolled ?? .allow).rawValue)): \(Self.listed(through))",
                        fix: "they enroll (keyway enroll); `keyway status --all --policy \(arguments.policy)` follows "
                            + "the roll-out", kind: .rollOut))
            }
            if !unread.isEmpty {
                findings.append(
                    finding(
                        use,
                        "sshd's settings could not be read for \(Self.listed(unread)); they are counted as asked",
                        fix: "run sshd -T -C user=NAME,host=HOST,addr=ADDRESS to see why", kind: .sshd))
            }
        }
        if let sshd, let match = sshd.firstMatch, people.sshd == nil, uses.contains(where: { $0.stack == "sshd" }) {
            findings.append(
                Finding(
                    kind: .sshd, file: match.file, line: match.line,
                    reason: "the Match blocks from here were not read (sshd could not be asked), so accounts they "
                        + "change may be judged wrongly", fix: "install openssh-server's sshd, which `sshd -T` asks",
                    stacks: ["sshd"]))
        }
        return findings
    }

    private func finding(_ use: Use, _ reason: String, fix: String, kind: Finding.Kind) -> Finding {
        Finding(kind: kind, file: use.line.file, line: use.line.number, reason: reason, fix: fix, stacks: [use.stack])
    }

    /// "1 account", "3 accounts".
    static func count(_ number: Int, _ noun: String) -> String { "\(number) \(noun)\(number == 1 ? "" : "s")" }

    /// At most `namesShown` names, then how many more.
    static func listed(_ names: [String]) -> String {
        let shown = names.prefix(namesShown).joined(separator: ", ")
        return names.count > namesShown ? "\(shown) and \(names.count - namesShown) more" : shown
    }
}
