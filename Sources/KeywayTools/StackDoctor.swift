public import KeywayConfig
import KeywayConfigFiles
public import KeywayCore
import KeywayRuntime

/// `keyway doctor`'s analysis: every PAM stack that uses Keyway, and where one could lock people out (issue 11).
///
/// Pure: it reads the files it is given by name, and asks the configuration and keywayd through closures, so the
/// tests drive it with literal stacks. It follows includes, reads each Keyway line's control as libpam does
/// (`PAMControl`), its arguments with the module's own parser (`ModuleArguments`), and its policy in the
/// configuration its `config=` names.
public struct StackDoctor: Sendable {
    /// One thing to fix, at one line (or, for keywayd, one socket).
    public struct Finding: Sendable, Equatable {
        /// What kind of problem.
        public enum Kind: String, Sendable {
            /// A failure of Keyway leaves nobody a way in.
            case lockOut
            /// `success=N` skips modules other than the password, or lands somewhere that refuses.
            case jump
            /// The module refuses its arguments.
            case arguments
            /// The configuration `config=` names does not load.
            case configuration
            /// The policy is unknown, or can never succeed in some session.
            case policy
            /// keywayd does not answer, or its store fails.
            case keywayd
            /// A roll-out lets people in without Keyway's factor (`unenrolled=allow`), or a stack refuses accounts
            /// that lack it.
            case rollOut
            /// sshd's configuration keeps Keyway from being asked, or asks more than the stack means.
            case sshd
        }

        public var kind: Kind
        /// The file, or nil for keywayd.
        public var file: String?
        /// The line in it.
        public var line: Int
        /// What is wrong and what it does to a login.
        public var reason: String
        /// How to fix it.
        public var fix: String
        /// The stacks this applies to (a line in common-auth is in every stack that includes it).
        public var stacks: [String] = []
        /// Every login through the line fails now, root's included (a policy with errors on a `required` line):
        /// `critical:` rather than `warning:`, and CRITICAL in `keyway health`.
        public var critical = false

        /// `DIR/FILE:LINE: warning: reason (in …)` and the fix on the next line.
        public func text(in directory: String) -> String {
            let place = file.map { "\(directory)/\($0):\(line): " } ?? ""
            var reason = reason
            let others = stacks.filter { $0 != file }
            if !others.isEmpty { reason += " (in \(others.joined(separator: ", ")))" }
            if kind == .lockOut, let way = stacks.first(where: { StackDoctor.rootWaysIn.contains($0) }) {
                reason += "; \(way) is one of root's ways in: this could lock out root"
            }
            return "\(place)\(critical ? "critical" : "warning"): \(reason)\n  fix: \(fix)"
        }
    }

    /// One Keyway line in one stack: where, the control and the policy in effect.
    public struct Use: Sendable, Equatable {
        /// The stack (service file) that runs it.
        public var stack: String
        /// `auth` or `account`.
        public var type: String
        /// The line.
        public var line: PAMLine
        /// The policy its arguments name, or nil when they are refused.
        public var policy: String?
        /// A remark on how it combines with the password ("two factors").
        public var note: String?

        /// `auth at sudo:7, [success=done default=ignore], policy pattern`.
        public var summary: String {
            var text = "\(type) at \(line.location), \(line.control), "
            text += policy.map { "policy \($0)" } ?? "arguments refused"
            if let note { text += " (\(note))" }
            return text
        }
    }

    /// What the doctor found.
    public struct Report: Sendable {
        /// Every use of Keyway, by stack, in stack order.
        public var uses: [Use] = []
        /// The warnings, in file and line order, keywayd's last.
        public var findings: [Finding] = []

        /// The stacks that use Keyway, in order.
        public var stacks: [String] {
            var seen: Set<String> = []
            return uses.map(\.stack).filter { seen.insert($0).inserted }
        }

        /// One line per stack: `sudo: auth at sudo:7, …; account at …`.
        public var summaries: [String] {
            stacks.map { stack in
                "\(stack): " + uses.filter { $0.stack == stack }.map(\.summary).joined(separator: "; ")
            }
        }
    }

    /// Modules that ask for a password (or another secret of the system's own): what Keyway should fall back on.
    public static let passwordModules: Set<String> = [
        "pam_unix.so", "pam_unix2.so", "pam_sss.so", "pam_ldap.so", "pam_krb5.so", "pam_winbind.so",
        "pam_userdb.so", "pam_pwdb.so", "pam_systemd_home.so",
    ]
    /// Stacks through which root gets in, or which those include.
    public static let rootWaysIn: Set<String> = [
        "sudo", "sudo-i", "su", "su-l", "login", "sshd", "common-auth", "system-auth", "system-login",
        "password-auth",
    ]
    /// The codes pam_keyway returns when it does not succeed (pam_keyway(8), RETURN VALUES), as pam.conf names them.
    public static let failureCodes = [
        "auth_err", "maxtries", "authinfo_unavail", "perm_denied", "conv_err", "service_err", "system_err",
        "user_unknown",
    ]

    /// The PAM files read.
    public let directory: PAMDirectory
    /// sshd's configuration, when there is one: how its stack (`sshd`) is reached.
    public let sshd: SSHDConfig?

    /// A doctor for the files of `directory`, and sshd's configuration `sshd` when sshd is installed.
    public init(directory: PAMDirectory, sshd: SSHDConfig? = nil) {
        self.directory = directory
        self.sshd = sshd
    }

    /// Examines every service's auth and account stacks. `configuration` loads the configuration a `config=` names
    /// (nil: the default); `keywayd` asks the daemon at a socket and returns why it cannot serve, or nil; `people`,
    /// when given, are the accounts whose standing with each policy is checked (`rollOutFindings`).
    public func examine(
        configuration: (String?) -> Result<Configuration, ConfigurationProblems>,
        keywayd: (String) -> AuthenticationError?, people: People? = nil
    ) -> Report {
        var report = Report()
        var raw: [Finding] = []
        for service in directory.services {
            for type in ["auth", "account"] {
                let (uses, findings) = examine(service, type: type)
                report.uses += uses
                raw += findings
            }
        }
        raw += lineFindings(report.uses, configuration: configuration)
        if let people { raw += rollOutFindings(report.uses, people: people, configuration: configuration) }
        report.findings = Self.merged(raw) + daemonFindings(report.uses, keywayd: keywayd)
        return report
    }

    // MARK: Stacks

    /// Where a Keyway line sits: the modules at its level, its index there, and what follows the substacks
    /// around it.
    struct Place {
        var line: PAMLine
        var siblings: [PAMStackItem]
        var index: Int
        var before: [PAMLine]
        var outerAfter: [PAMLine]

        /// The modules that run after it when it jumps over `skipped` of its siblings.
        func after(skipping skipped: Int = 0) -> [PAMLine] {
            let from = min(siblings.count, index + 1 + skipped)
            return siblings[from...].flatMap(\.modules) + outerAfter
        }
    }

    /// Every Keyway line of a stack, with its place.
    static func places(in items: [PAMStackItem], before: [PAMLine] = [], outerAfter: [PAMLine] = []) -> [Place] {
        var places: [Place] = []
        var seen = before
        for (index, item) in items.enumerated() {
            let after = items[(index + 1)...].flatMap(\.modules) + outerAfter
            switch item {
            case .module(let line) where line.isKeyway:
                places.append(
                    Place(line: line, siblings: items, index: index, before: seen, outerAfter: outerAfter))
            case .module: break
            case .substack(_, let inner):
                places += Self.places(in: inner, before: seen, outerAfter: after)
            }
            seen += item.modules
        }
        return places
    }

    /// The uses of Keyway in one stack of a service, and what its stack does with them.
    func examine(_ service: String, type: String) -> ([Use], [Finding]) {
        var uses: [Use] = []
        var findings: [Finding] = []
        for place in Self.places(in: directory.stack(service, type: type)) {
            let policy = try? ModuleArguments.parse(place.line.arguments).get().policy
            var use = Use(stack: service, type: type, line: place.line, policy: policy)
            if type == "auth" {
                var (note, lockOut) = Self.failure(at: place)
                if service == "sshd", let sshd, sshd.usesPAM, sshd.keyboardInteractive, sshd.keyThenKeyboardInteractive
                {
                    // The key first: a refusal here is the second factor doing its work, not a lock-out.
                    lockOut = nil
                    note =
                        "the second factor after the key (AuthenticationMethods at \(sshd.place(of: "AuthenticationMethods")))"
                }
                use.note = note
                findings += [lockOut, Self.jump(at: place)].compactMap { $0 }
                if service == "sshd", let sshd { findings += Self.sshdFindings(sshd, at: place) }
            }
            uses.append(use)
        }
        for index in findings.indices { findings[index].stacks = [service] }
        return (uses, findings)
    }

    /// Where sshd's configuration keeps Keyway's line in its stack from being asked, or makes a login ask more than
    /// the stack means (docs/GUIDE.md, "SSH: a code after the key").
    static func sshdFindings(_ sshd: SSHDConfig, at place: Place) -> [Finding] {
        let setup = "pam/examples/sshd_config has the lines for a key, then a code"
        guard sshd.usesPAM else {
            return [
                finding(
                    place,
                    "sshd does not use PAM (UsePAM at \(sshd.place(of: "UsePAM"))), so it never runs this stack: "
                        + "nobody is asked Keyway's factor over SSH",
                    fix: "UsePAM yes in /etc/ssh/sshd_config.d/keyway.conf; \(setup)", kind: .sshd)
            ]
        }
        guard sshd.keyboardInteractive else {
            return [
                finding(
                    place,
                    "keyboard-interactive is off (KbdInteractiveAuthentication at "
                        + "\(sshd.place(of: "KbdInteractiveAuthentication"))), so sshd never asks this stack's "
                        + "prompts: Keyway's factor is never asked, and a key alone logs in",
                    fix: "KbdInteractiveAuthentication yes in /etc/ssh/sshd_config.d/keyway.conf; \(setup)", kind: .sshd
                )
            ]
        }
        var found: [Finding] = []
        if sshd.loginWithoutKeyboardInteractive {
            let methods =
                sshd.methodLists == nil
                ? "AuthenticationMethods is not set"
                : "AuthenticationMethods at \(sshd.place(of: "AuthenticationMethods"))"
            found.append(
                finding(
                    place,
                    "a login can finish without keyboard-interactive (\(methods)): a key alone logs in without "
                        + "Keyway's factor",
                    fix: "AuthenticationMethods publickey,keyboard-interactive; \(setup)", kind: .sshd))
        }
        if sshd.passwordMethodRuns {
            found.append(
                finding(
                    place,
                    "sshd's password method runs this stack too (PasswordAuthentication at "
                        + "\(sshd.place(of: "PasswordAuthentication"))) and answers every hidden prompt with the "
                        + "password: Keyway's factor is asked a second time there, or counted wrong",
                    fix: "PasswordAuthentication no, and the password over keyboard-interactive "
                        + "(pam/examples/sshd-password)", kind: .sshd))
        }
        if sshd.keyThenKeyboardInteractive,
            let password = (place.before + place.after()).first(where: { passwordModules.contains($0.moduleName) })
        {
            found.append(
                finding(
                    place,
                    "after the key, \(password.moduleName) at \(password.location) asks the password as well as "
                        + "Keyway's factor (the stack still includes the password)",
                    fix: "replace @include common-auth with the Keyway line, as pam/examples/sshd does (or "
                        + "AuthenticationMethods keyboard-interactive for a password and a code)", kind: .sshd))
        }
        return found
    }

    /// How a failure of Keyway ends the stack.
    enum Fatality {
        /// Every failure is ignored or jumps: the modules below decide.
        case passes
        /// A failure fails the stack, which goes on (`required`).
        case fails
        /// A failure ends the stack at once (`requisite`, `die`, `done`).
        case ends
    }

    /// The worst of the actions the control gives Keyway's failure codes.
    static func fatality(_ control: PAMControl) -> Fatality {
        var worst = Fatality.passes
        for code in failureCodes {
            switch control.action(for: code) {
            case .die, .done: return .ends
            case .bad, .ok: worst = .fails
            case .ignore, .reset, .jump: break
            }
        }
        return worst
    }

    /// The largest jump a failure of Keyway takes, or 0.
    static func failureJump(_ control: PAMControl) -> Int {
        failureCodes.map { code in
            if case .jump(let count) = control.action(for: code) { count } else { 0 }
        }.max() ?? 0
    }

    /// A note for a deliberate second factor, or a warning when a failure of Keyway leaves nobody a way in.
    static func failure(at place: Place) -> (note: String?, finding: Finding?) {
        let control = PAMControl(place.line.control)
        let before = place.before.first { passwordModules.contains($0.moduleName) }
        let below = place.after().first { passwordModules.contains($0.moduleName) }
        let reached = place.after(skipping: failureJump(control)).first { passwordModules.contains($0.moduleName) }
        let refuses = "a forgotten pattern, a lockout or a stopped keywayd refuses everyone"
        switch fatality(control) {
        case .passes:
            guard reached == nil && before == nil else { return (nil, nil) }
            return (
                nil,
                finding(
                    place,
                    "when Keyway fails, nothing in the auth stack can let anyone in (no password module such "
                        + "as pam_unix.so runs after it): \(refuses)",
                    fix: "put the password below the Keyway line (e.g. @include common-auth)")
            )
        case .fails:
            guard before == nil && below == nil else { return ("two factors: the password is needed as well", nil) }
            return (
                nil,
                finding(
                    place,
                    "`\(control.text)` makes a failure of Keyway fail the auth stack, and no password module "
                        + "(pam_unix.so, pam_sss.so, ...) is in it: \(refuses)",
                    fix: recommended(place.line) + ", with the password below it (e.g. @include common-auth)")
            )
        case .ends:
            if let below {
                return (
                    nil,
                    finding(
                        place,
                        "`\(control.text)` ends the auth stack as soon as Keyway fails, so the password below "
                            + "it (\(below.moduleName) at \(below.location)) never runs: \(refuses)",
                        fix: recommended(place.line) + ", so that the password decides when Keyway fails")
                )
            }
            guard before == nil else { return ("two factors: the password is needed as well", nil) }
            return (
                nil,
                finding(
                    place,
                    "`\(control.text)` ends the auth stack as soon as Keyway fails, and no password module "
                        + "(pam_unix.so, pam_sss.so, ...) is in it: \(refuses)",
                    fix: recommended(place.line) + ", with the password below it (e.g. @include common-auth)")
            )
        }
    }

    /// The line as recommended: `auth [success=done default=ignore] pam_keyway.so ARGUMENTS`.
    static func recommended(_ line: PAMLine) -> String {
        (["auth", "[success=done default=ignore]", line.module] + line.arguments).joined(separator: " ")
    }

    /// A warning when Keyway's success jumps over modules other than the password, onto pam_deny, or past the end.
    static func jump(at place: Place) -> Finding? {
        let control = PAMControl(place.line.control)
        guard case .jump(let count) = control.action(for: "success") else { return nil }
        let skipped = place.siblings.dropFirst(place.index + 1).prefix(count)
        let named = skipped.filter { item in
            if case .module(let line) = item {
                return !passwordModules.contains(line.moduleName) && line.moduleName != "pam_deny.so"
            }
            return true
        }
        var problems: [String] = []
        if !named.isEmpty {
            let list = named.map { item in
                if case .substack(let line, _) = item { return "the substack \(line.module) (\(line.location))" }
                return "\(item.line.moduleName) (\(item.line.location))"
            }
            problems.append(
                "skips \(list.joined(separator: ", ")), which then never run\(list.count == 1 ? "s" : "") for anyone who "
                    + "passes Keyway")
        }
        let landing = place.index + 1 + count
        if landing < place.siblings.count, case .module(let line) = place.siblings[landing],
            line.moduleName == "pam_deny.so"
        {
            problems.append("lands on pam_deny.so (\(line.location)), which refuses everyone who passes Keyway")
        } else if landing >= place.siblings.count {
            problems.append(
                "jumps past the end of the stack, and a jump is no verdict: the stack then succeeds only if a module "
                    + "above Keyway did")
        }
        guard !problems.isEmpty else { return nil }
        let moved = named.isEmpty ? "" : ", or move those modules above the Keyway line"
        return finding(
            place, "on success, `success=\(count)` \(problems.joined(separator: "; and "))",
            fix: "use success=done (a success of Keyway ends the stack with success)\(moved)", kind: .jump)
    }

    static func finding(_ place: Place, _ reason: String, fix: String, kind: Finding.Kind = .lockOut) -> Finding {
        Finding(kind: kind, file: place.line.file, line: place.line.number, reason: reason, fix: fix)
    }

    // MARK: Arguments and policies

    /// The warnings that belong to a line whatever stack runs it: arguments, configuration, policy.
    func lineFindings(_ uses: [Use], configuration load: (String?) -> Result<Configuration, ConfigurationProblems>)
        -> [Finding]
    {
        var loaded: [String: Result<Configuration, ConfigurationProblems>] = [:]
        var findings: [Finding] = []
        for use in uses {
            var found: [Finding] = []
            switch ModuleArguments.parse(use.line.arguments) {
            case .failure(let error):
                found.append(
                    Finding(
                        kind: .arguments, file: use.line.file, line: use.line.number,
                        reason: "pam_keyway.so refuses its arguments, so every \(use.type) through it fails with "
                            + "PAM_SERVICE_ERR: \(error.reason)",
                        fix: "correct the argument; pam_keyway(8) lists them under OPTIONS"))
            case .success(let arguments):
                let key = arguments.config ?? ""
                let configuration = loaded[key] ?? load(arguments.config)
                loaded[key] = configuration
                found += Self.policyFindings(arguments, configuration, at: use.line)
            }
            findings += found.map { finding in
                var finding = finding
                finding.stacks = [use.stack]
                return finding
            }
        }
        return findings
    }

    /// A configuration that does not load, an unknown policy, or one that can never succeed in some session.
    static func policyFindings(
        _ arguments: ModuleArguments, _ loaded: Result<Configuration, ConfigurationProblems>, at line: PAMLine
    ) -> [Finding] {
        func finding(_ kind: Finding.Kind, _ reason: String, fix: String) -> Finding {
            Finding(kind: kind, file: line.file, line: line.number, reason: reason, fix: fix)
        }
        // A failing policy on a line whose failure fails the stack: nobody gets in through it now.
        func failing(_ kind: Finding.Kind, _ reason: String, fix: String) -> Finding {
            var found = finding(kind, reason, fix: fix)
            if fatality(PAMControl(line.control)) != .passes {
                found.critical = true
                found.reason += "; the line is \(line.control), so every login through it fails now, root's included"
            }
            return found
        }
        let path = arguments.config ?? ConfigurationFiles.defaultPath
        let configuration: Configuration
        switch loaded {
        case .success(let found): configuration = found
        case .failure(let problems):
            let first = (problems.errors.first ?? problems.diagnostics.first)?.headline ?? "unreadable"
            let more = problems.errors.count > 1 ? " (and \(problems.errors.count - 1) more)" : ""
            let check = arguments.config.map { "keyway --config \($0) policy check" } ?? "keyway policy check"
            return [
                failing(
                    .configuration,
                    "the configuration \(path) does not load, so the module fails closed with "
                        + "PAM_SERVICE_ERR: \(first)\(more)",
                    fix: "`\(check)` shows every error and how to fix it")
            ]
        }
        if let errors = configuration.unusable[arguments.policy], let first = errors.first {
            let check = arguments.config.map { "keyway --config \($0) policy check" } ?? "keyway policy check"
            return [
                failing(
                    .policy,
                    "policy '\(arguments.policy)' has errors, so this stack fails closed with PAM_SERVICE_ERR (stacks "
                        + "with other policies go on): \(first.headline)"
                        + (errors.count > 1 ? " (and \(errors.count - 1) more)" : ""),
                    fix: "`\(check)` shows every error and how to fix it; `keyway policy edit` checks before it saves")
            ]
        }
        guard let named = configuration.policy(named: arguments.policy) else {
            let names = configuration.policies.map(\.base.name)
            return [
                failing(
                    .policy,
                    "policy '\(arguments.policy)' is not defined in \(path), so the module fails closed with "
                        + "PAM_SERVICE_ERR (the policies are \(names.joined(separator: ", ")))",
                    fix: "name one of those with policy=, or define [policy \(arguments.policy)] in \(path)")
            ]
        }
        var found: [Finding] = []
        if arguments.unenrolled == .allow
            || (arguments.unenrolled == nil && ([named.base] + named.variants).contains { $0.unenrolled == .allow })
        {
            found.append(
                finding(
                    .rollOut,
                    "unenrolled=allow lets everyone with nothing enrolled for policy '\(arguments.policy)' in without "
                        + "it (a roll-out; each such login is logged as outcome=allowed)",
                    fix: "remove unenrolled=allow once everyone has enrolled (`keyway status --user NAME` tells)"))
        }
        return found
            + ([named.base] + named.variants).flatMap { definition in
                definition.impossible.map { why in
                    let variant = definition.variant.map { " (\($0))" } ?? ""
                    return finding(
                        .policy, "policy '\(arguments.policy)'\(variant) can never succeed in a \(why)",
                        fix:
                            "give it a fallback that serves remote sessions (e.g. require = biometric or passcode), or "
                            + "use it only for services nobody reaches remotely")
                }
            }
    }

    // MARK: keywayd

    /// One warning per socket keywayd does not answer on, naming the stacks that use it.
    func daemonFindings(_ uses: [Use], keywayd: (String) -> AuthenticationError?) -> [Finding] {
        var sockets: [String] = []
        var stacks: [String: [String]] = [:]
        for use in uses {
            guard let arguments = try? ModuleArguments.parse(use.line.arguments).get() else { continue }
            if stacks[arguments.socket] == nil { sockets.append(arguments.socket) }
            if !(stacks[arguments.socket] ?? []).contains(use.stack) {
                stacks[arguments.socket, default: []] += [use.stack]
            }
        }
        return sockets.compactMap { socket in
            guard let error = keywayd(socket) else { return nil }
            var finding = Self.daemonFinding(socket, error)
            finding.stacks = stacks[socket] ?? []
            return finding
        }
    }

    static func daemonFinding(_ socket: String, _ error: AuthenticationError) -> Finding {
        let prefix = "keywayd at \(socket): "
        let detail = error.reason.hasPrefix(prefix) ? String(error.reason.dropFirst(prefix.count)) : error.reason
        let start =
            socket == ModuleArguments().socket
            ? "systemctl enable --now keywayd.socket (or run keywayd --foreground as root from your init system)"
            : "start keywayd --socket \(socket), or correct socket= in the stack"
        switch error.code {
        case .serviceUnavailable:
            return Finding(
                kind: .keywayd, file: nil, line: 0,
                reason: "keywayd does not answer at \(socket) (\(detail)): every authentication through Keyway "
                    + "gets PAM_AUTHINFO_UNAVAIL", fix: start)
        case .storeFailure:
            return Finding(
                kind: .keywayd, file: nil, line: 0,
                reason: "keywayd at \(socket) cannot use its store (\(detail)): every authentication through "
                    + "Keyway gets PAM_SYSTEM_ERR",
                fix: "follow the message (keywayd(8) lists the store's checks); `journalctl -u keywayd` has the details"
            )
        default:
            return Finding(
                kind: .keywayd, file: nil, line: 0,
                reason: "keywayd at \(socket) refused the doctor's question: \(detail)",
                fix: "run keyway doctor as root, and see keywayd(8)")
        }
    }

    // MARK: Merging

    /// One finding per line and problem, with every stack it is in (common-auth's lines reach many services).
    static func merged(_ findings: [Finding]) -> [Finding] {
        var merged: [Finding] = []
        for finding in findings {
            if let index = merged.firstIndex(where: {
                $0.kind == finding.kind && $0.file == finding.file && $0.line == finding.line
                    && $0.reason == finding.reason
            }) {
                for stack in finding.stacks where !merged[index].stacks.contains(stack) {
                    merged[index].stacks.append(stack)
                }
            } else {
                merged.append(finding)
            }
        }
        return merged.sorted { ($0.file ?? "", $0.line) < ($1.file ?? "", $1.line) }
    }
}
