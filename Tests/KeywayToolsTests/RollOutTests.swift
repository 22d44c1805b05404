import KeywayConfig
import KeywayCore
import KeywayFactors
import KeywayTools
import Testing

/// A roll-out's standing per account, and `keyway doctor`'s reading of it over literal stacks, accounts and sshd
/// settings (what `sshd -T -C` prints).
@Suite("Roll-out")
struct RollOutTests {
    static let totp = FactorKind(rawValue: "totp")
    static let config = """
        [policy ssh]
        require = totp or recovery
        unenrolled = allow

        [policy ssh for group admins]
        require = totp and recovery

        [policy strict]
        require = totp or recovery
        """
    static var configuration: Configuration {
        get throws {
            try Configuration.parse([ConfigSource(path: "/etc/keyway/keyway.conf", text: config)], plugins: Factors.all)
                .get()
        }
    }
    static let admins: @Sendable (String, String) -> Result<Bool, AuthenticationError> = { user, group in
        .success(group == "admins" && user == "ann")
    }

    @Test("a rule can succeed with what is enrolled: or, and, k of n, first of")
    func canSucceed() {
        let totp = Policy.Rule.factor(Self.totp, attempts: 3)
        let recovery = Policy.Rule.factor(FactorKind(rawValue: "recovery"), attempts: 3)
        #expect(Policy.Rule.anyOf([totp, recovery]).canSucceed(with: [Self.totp]))
        #expect(!Policy.Rule.allOf([totp, recovery]).canSucceed(with: [Self.totp]))
        #expect(
            Policy.Rule.atLeast(2, of: [totp, recovery, .factor(FactorKind(rawValue: "gesture"), attempts: 5)])
                .canSucceed(with: [FactorKind(rawValue: "gesture"), Self.totp]))
        #expect(
            !Policy.Rule.firstOf([totp, .factor(FactorKind(rawValue: "biometric"), attempts: 3)]).canSucceed(with: [
                FactorKind(rawValue: "gesture")
            ]))
        #expect(!totp.canSucceed(with: []))
    }

    @Test("standing: ready, let through by unenrolled = allow, refused with what it needs, the group's variant")
    func standing() throws {
        let configuration = try Self.configuration
        func standing(_ user: String, _ enrolled: Set<FactorKind>, _ policy: String = "ssh") -> RollOut.Standing {
            RollOut.standing(
                of: user, enrolled: enrolled, policy: policy, in: configuration, isMember: { Self.admins(user, $0) })
        }
        #expect(standing("bob", [Self.totp]) == .ready)
        #expect(standing("bob", []) == .letThrough)
        #expect(standing("bob", [], "strict") == .refused(needs: "totp or recovery"))
        // The admins' variant asks both and has no unenrolled = allow of its own: the base's applies to nothing
        // enrolled, but one of two enrolled is refused.
        #expect(standing("ann", [Self.totp]) == .refused(needs: "totp and recovery"))
        #expect(standing("ann", []) == .letThrough)
        #expect(standing("bob", [], "nonesuch") == .unknown("policy 'nonesuch' has errors or is not defined"))
        let failing = RollOut.standing(
            of: "carol", enrolled: [], policy: "ssh", in: configuration,
            isMember: { _ in .failure(AuthenticationError(.invalidPolicy, "sssd is stopped")) })
        guard case .unknown(let why) = failing else { Issue.record("\(failing)"); return }
        #expect(why.contains("sssd is stopped"), "\(why)")
    }

    @Test("sshd's lists add up line by line, as sshd -T prints them; who sshd admits")
    func admits() {
        let settings = SSHDConfig(
            text: """
                usepam yes
                permitrootlogin no
                allowgroups team
                allowgroups ops
                denyusers mallory
                denyusers eve@10.0.0.1
                authenticationmethods publickey,keyboard-interactive
                kbdinteractiveauthentication yes
                """, file: "sshd -T")
        let member = { (user: String) in
            { (group: String) -> Bool? in
                ["ann": ["team"], "bob": ["ops"], "mallory": ["team"], "eve": ["team"], "dan": []][user]?.contains(
                    group)
            }
        }
        #expect(settings.settings["allowgroups"]?.words == ["team", "ops"])
        #expect(settings.admits("ann", isMember: member("ann")))
        #expect(settings.admits("bob", isMember: member("bob")))
        #expect(!settings.admits("dan", isMember: member("dan")))
        #expect(!settings.admits("mallory", isMember: member("mallory")))
        #expect(settings.admits("eve", isMember: member("eve")), "a host-bound deny is not known to apply")
        #expect(!settings.admits("root", isMember: { _ in true }))
        // A membership that cannot be told counts the account in.
        #expect(settings.admits("zed", isMember: { _ in nil }))
        #expect(settings.everyLoginRunsPAM)
        let users = SSHDConfig(text: "AllowUsers dev-* ops@192.0.2.0/24\nUsePAM yes\n", file: "c")
        #expect(users.admits("dev-ann", isMember: { _ in false }))
        #expect(users.admits("ops", isMember: { _ in false }))
        #expect(!users.admits("ann", isMember: { _ in false }))
        #expect(!users.everyLoginRunsPAM, "without AuthenticationMethods a key alone logs in")
        let matched = SSHDConfig(text: "UsePAM yes\nMatch User ann\n  AuthenticationMethods publickey\n", file: "c")
        #expect(matched.firstMatch?.description == "c:2")
    }

    @Test("doctor lists the accounts a required line would refuse, and those let through; sshd per account")
    func doctorRollOut() throws {
        let stack = "auth required pam_keyway.so policy=strict\n"
        let sshdStack = "auth required pam_keyway.so policy=ssh\n"
        let doctor = StackDoctor(
            directory: PAMDirectory(
                path: "/etc/pam.d", files: ["login": stack + "@include common-auth\n", "sshd": sshdStack]),
            sshd: SSHDConfig(
                text: "UsePAM yes\nAuthenticationMethods publickey,keyboard-interactive\nMatch User carol\n",
                file: "/etc/ssh/sshd_config"))
        let perAccount: [String: String] = [
            "root": "usepam yes\npermitrootlogin no\nauthenticationmethods publickey,keyboard-interactive\n",
            "ann": "usepam yes\nauthenticationmethods publickey,keyboard-interactive\n",
            "bob": "usepam yes\nauthenticationmethods publickey,keyboard-interactive\n",
            "carol": "usepam yes\nauthenticationmethods publickey\n",
        ]
        let people = StackDoctor.People(
            accounts: ["root", "ann", "bob", "carol"],
            enrolled: { _ in .success(["ann": [Self.totp]]) }, isMember: { _, _ in .success(false) },
            sshd: { user in .success(SSHDConfig(text: perAccount[user] ?? "", file: "sshd -T")) })
        let report = doctor.examine(
            configuration: { _ in
                Configuration.parse(
                    [ConfigSource(path: "/etc/keyway/keyway.conf", text: Self.config)], plugins: Factors.all)
            }, keywayd: { _ in nil }, people: people)
        let texts = report.findings.map { $0.text(in: "/etc/pam.d") }
        // login: everyone without a code is refused (root included); sshd: bob is let through (unenrolled = allow),
        // root is not admitted and carol's key alone logs her in.
        #expect(
            texts.contains {
                $0.hasPrefix(
                    "/etc/pam.d/login:1: warning: policy 'strict' would refuse 3 accounts that lack totp or recovery: "
                        + "root, bob, carol\n")
            }, "\(texts)")
        #expect(
            texts.contains {
                $0.hasPrefix(
                    "/etc/pam.d/sshd:1: warning: policy 'ssh' lets 1 account in without a factor (nothing enrolled, "
                        + "unenrolled=allow): bob\n")
            }, "\(texts)")
        #expect(!texts.contains { $0.contains("Match blocks") }, "sshd -T read them: \(texts)")
        // Without sshd to ask, the Match block is said not to be read.
        let blind = StackDoctor.People(
            accounts: ["bob"], enrolled: { _ in .success([:]) }, isMember: { _, _ in .success(false) }, sshd: nil)
        let unread = doctor.examine(
            configuration: { _ in
                Configuration.parse(
                    [ConfigSource(path: "/etc/keyway/keyway.conf", text: Self.config)], plugins: Factors.all)
            }, keywayd: { _ in nil }, people: blind)
        #expect(
            unread.findings.contains {
                $0.file == "/etc/ssh/sshd_config" && $0.line == 3 && $0.reason.contains("Match")
            },
            "\(unread.findings)")
    }
}
