import Foundation
import KeywayConfig
import KeywayCore
import KeywayFactors
import KeywayRuntime
import KeywayTools
import Testing

/// `keyway doctor`'s analysis over literal PAM directories: what uses Keyway, and where a stack could lock people out.
@Suite("PAM stack doctor")
struct StackDoctorTests {
    /// Debian's common-auth and common-account, as pam-auth-update writes them.
    static let commonAuth = """
        # here are the per-package modules (the "Primary" block)
        auth\t[success=1 default=ignore]\tpam_unix.so nullok
        # here's the fallback if no module succeeds
        auth\trequisite\t\t\tpam_deny.so
        auth\trequired\t\t\tpam_permit.so
        auth\toptional\t\t\tpam_cap.so
        """
    static let commonAccount = """
        account\t[success=1 new_authtok_reqd=done default=ignore]\tpam_unix.so
        account\trequisite\t\t\tpam_deny.so
        account\trequired\t\t\tpam_permit.so
        """
    /// The recommended sudo stack (pam/examples/sudo without its comments).
    static let recommendedSudo = """
        #%PAM-1.0
        session    required   pam_limits.so
        auth       [success=done default=ignore]  pam_keyway.so policy=pattern next=password
        @include common-auth
        @include common-account
        """

    /// The common files with `files` beside them.
    static func directory(_ files: [String: String]) -> [String: String] {
        ["common-auth": commonAuth, "common-account": commonAccount].merging(files) { $1 }
    }

    /// The doctor's report on `files`, with `config` as keyway.conf (none: the built-ins) and keywayd answering
    /// with `keywayd` (nil: it answers).
    static func examine(
        _ files: [String: String], config: String? = nil,
        keywayd: @escaping (String) -> AuthenticationError? = { _ in nil }
    ) -> StackDoctor.Report {
        let doctor = StackDoctor(directory: PAMDirectory(path: "/etc/pam.d", files: files))
        return doctor.examine(
            configuration: { _ in
                Configuration.parse(
                    config.map { [ConfigSource(path: "/etc/keyway/keyway.conf", text: $0)] } ?? [],
                    plugins: Factors.all)
            }, keywayd: keywayd)
    }

    /// The warnings as `keyway doctor` prints them, one text each.
    static func texts(_ report: StackDoctor.Report) -> [String] { report.findings.map { $0.text(in: "/etc/pam.d") } }

    @Test("the recommended sudo stack is clean: one summary line, no warning")
    func recommended() {
        let report = Self.examine(Self.directory(["sudo": Self.recommendedSudo]))
        #expect(report.findings.isEmpty, "\(Self.texts(report))")
        #expect(report.summaries == ["sudo: auth at sudo:3, [success=done default=ignore], policy pattern"])
    }

    @Test("no stack uses Keyway: nothing to report")
    func none() {
        let report = Self.examine(Self.directory(["sudo": "@include common-auth\n#auth required pam_keyway.so\n"]))
        #expect(report.uses.isEmpty)
        #expect(report.findings.isEmpty)
        #expect(report.stacks.isEmpty)
    }

    @Test("`auth required pam_keyway.so` alone in sudo: a lock-out warning that mentions root, with the fix")
    func requiredAlone() throws {
        let report = Self.examine(Self.directory(["sudo": "auth required pam_keyway.so policy=pattern\n"]))
        let finding = try #require(report.findings.first)
        #expect(report.findings.count == 1, "\(Self.texts(report))")
        #expect(finding.kind == .lockOut)
        #expect(finding.file == "sudo" && finding.line == 1)
        let text = finding.text(in: "/etc/pam.d")
        #expect(text.hasPrefix("/etc/pam.d/sudo:1: warning: `required` makes a failure of Keyway fail"), "\(text)")
        #expect(text.contains("a stopped keywayd refuses everyone"), "\(text)")
        #expect(text.contains("this could lock out root"), "\(text)")
        #expect(
            text.hasSuffix(
                "\n  fix: auth [success=done default=ignore] pam_keyway.so policy=pattern, with the password below "
                    + "it (e.g. @include common-auth)"), "\(text)")
    }

    @Test("the same alone in a service that is not root's way in: the warning, without root")
    func requiredAloneElsewhere() throws {
        let report = Self.examine(["cups": "auth required pam_keyway.so\n"])
        let text = try #require(Self.texts(report).first)
        #expect(text.hasPrefix("/etc/pam.d/cups:1: warning:"), "\(text)")
        #expect(!text.contains("root"), "\(text)")
    }

    @Test("requisite above the password: the password never runs when Keyway fails, so it warns")
    func requisiteBeforePassword() throws {
        let report = Self.examine(
            Self.directory(["sudo": "auth requisite pam_keyway.so policy=pattern\n@include common-auth\n"]))
        let text = try #require(Self.texts(report).first)
        #expect(report.findings.count == 1, "\(Self.texts(report))")
        #expect(text.contains("`requisite` ends the auth stack as soon as Keyway fails"), "\(text)")
        #expect(text.contains("(pam_unix.so at common-auth:2) never runs"), "\(text)")
        #expect(text.contains("could lock out root"), "\(text)")
        #expect(text.contains("fix: auth [success=done default=ignore] pam_keyway.so policy=pattern"), "\(text)")
    }

    @Test("a bracket control that dies on failure is requisite by another name")
    func dieOnFailure() {
        let stack = "auth [success=ok auth_err=die default=ignore] pam_keyway.so\n@include common-auth\n"
        let report = Self.examine(Self.directory(["sudo": stack]))
        #expect(report.findings.map(\.kind) == [.lockOut], "\(Self.texts(report))")
        // Codes a bracket does not name are `bad`: a Keyway failure then fails the stack, with no password here.
        let bare = Self.examine(["other-service": "auth [success=done] pam_keyway.so\n"])
        #expect(bare.findings.map(\.kind) == [.lockOut], "\(Self.texts(bare))")
    }

    @Test("required above the password is two factors on purpose: a note, not a warning")
    func twoFactors() throws {
        let report = Self.examine(
            Self.directory([
                "sudo": "auth required pam_keyway.so policy=pattern unenrolled=skip\n@include common-auth\n"
            ]))
        #expect(report.findings.isEmpty, "\(Self.texts(report))")
        let use = try #require(report.uses.first)
        #expect(use.note == "two factors: the password is needed as well")
    }

    @Test("success=2 that skips pam_group and lands on pam_deny: both named, with the fix")
    func jumpOverGroup() throws {
        let stack = """
            auth [success=2 default=ignore] pam_keyway.so policy=pattern
            auth optional pam_group.so
            auth sufficient pam_unix.so
            auth requisite pam_deny.so
            """
        let report = Self.examine(["sudo": stack])
        let finding = try #require(report.findings.first { $0.kind == .jump })
        #expect(report.findings.count == 1, "\(Self.texts(report))")
        #expect(finding.line == 1)
        #expect(finding.reason.contains("`success=2` skips pam_group.so (sudo:2)"), "\(finding.reason)")
        #expect(finding.reason.contains("lands on pam_deny.so (sudo:4)"), "\(finding.reason)")
        #expect(finding.fix.hasPrefix("use success=done"), "\(finding.fix)")
        #expect(finding.fix.contains("move those modules above the Keyway line"), "\(finding.fix)")
    }

    @Test("success=1 above common-auth skips pam_unix's own jump and lands on pam_deny")
    func jumpOntoDeny() throws {
        let stack = "auth [success=1 default=ignore] pam_keyway.so\n@include common-auth\n"
        let report = Self.examine(Self.directory(["sudo": stack]))
        let finding = try #require(report.findings.first)
        #expect(report.findings.map(\.kind) == [.jump], "\(Self.texts(report))")
        #expect(finding.reason.contains("lands on pam_deny.so (common-auth:4)"), "\(finding.reason)")
    }

    @Test("a jump over the password and pam_deny onto pam_permit, as pam-auth-update writes them, is clean")
    func jumpAsDebianDoes() {
        let stack = """
            auth [success=2 default=ignore] pam_keyway.so
            auth [success=1 default=ignore] pam_unix.so
            auth requisite pam_deny.so
            auth required pam_permit.so
            """
        let report = Self.examine(["common-auth": stack])
        #expect(report.findings.isEmpty, "\(Self.texts(report))")
    }

    @Test("a jump past the end of the stack is no verdict: it warns")
    func jumpPastTheEnd() throws {
        let stack = """
            auth [success=3 default=ignore] pam_keyway.so
            auth [success=1 default=ignore] pam_unix.so
            auth requisite pam_deny.so
            """
        let report = Self.examine(["common-auth": stack])
        let finding = try #require(report.findings.first)
        #expect(report.findings.map(\.kind) == [.jump], "\(Self.texts(report))")
        #expect(finding.reason.contains("jumps past the end of the stack"), "\(finding.reason)")
        #expect(finding.fix == "use success=done (a success of Keyway ends the stack with success)")
    }

    @Test("arguments the module refuses: the parser's reason, and the summary says so")
    func badArgument() throws {
        let stack = "auth [success=done default=ignore] pam_keyway.so polcy=pattern\n@include common-auth\n"
        let report = Self.examine(Self.directory(["sudo": stack]))
        let finding = try #require(report.findings.first)
        #expect(report.findings.map(\.kind) == [.arguments], "\(Self.texts(report))")
        #expect(finding.reason.contains("PAM_SERVICE_ERR: unknown argument 'polcy=pattern'; known: policy="))
        #expect(finding.fix.hasPrefix("correct the argument; pam_keyway(8) lists them"))
        #expect(report.summaries == ["sudo: auth at sudo:1, [success=done default=ignore], arguments refused"])
    }

    @Test("an unknown policy warns; defined in keyway.conf it does not")
    func unknownPolicy() throws {
        let files = Self.directory(["sudo": "auth sufficient pam_keyway.so policy=admins\n@include common-auth\n"])
        let report = Self.examine(files)
        let finding = try #require(report.findings.first)
        #expect(report.findings.map(\.kind) == [.policy], "\(Self.texts(report))")
        #expect(finding.reason.hasPrefix("policy 'admins' is not defined in /etc/keyway/keyway.conf"))
        #expect(finding.fix.contains("define [policy admins]"))
        let defined = Self.examine(files, config: "[policy admins]\nrequire = gesture or passcode\n")
        #expect(defined.findings.isEmpty, "\(Self.texts(defined))")
    }

    @Test("a configuration that does not load fails every login: one warning with its first error")
    func brokenConfiguration() throws {
        let files = Self.directory(["sudo": "auth sufficient pam_keyway.so\n@include common-auth\n"])
        let report = Self.examine(files, config: "[policy x]\nrequire = passcode\n[gesture]\nmin-dots = 12\n")
        let finding = try #require(report.findings.first)
        #expect(report.findings.map(\.kind) == [.configuration], "\(Self.texts(report))")
        #expect(finding.reason.contains("does not load, so the module fails closed with PAM_SERVICE_ERR"))
        #expect(finding.reason.contains("/etc/keyway/keyway.conf:4"), "\(finding.reason)")
        #expect(finding.fix == "`keyway policy check` shows every error and how to fix it")
    }

    @Test("a typo in one policy warns only on the stacks that name it")
    func brokenPolicy() throws {
        let files = Self.directory([
            "sudo": "auth sufficient pam_keyway.so policy=x\n@include common-auth\n",
            "login": "auth sufficient pam_keyway.so policy=y\n@include common-auth\n",
        ])
        let report = Self.examine(files, config: "[policy x]\nrequire = pascode\n[policy y]\nrequire = passcode\n")
        #expect(report.findings.count == 1, "\(Self.texts(report))")
        let finding = try #require(report.findings.first)
        #expect(finding.kind == .policy && finding.file == "sudo", "\(Self.texts(report))")
        #expect(finding.reason.contains("policy 'x' has errors"), "\(finding.reason)")
        #expect(finding.reason.contains("/etc/keyway/keyway.conf:2:11: error: unknown factor 'pascode'"))
    }

    @Test("a typo in a policy a required line names is critical: every login through it fails, root's included")
    func brokenRequiredPolicy() throws {
        let files = Self.directory([
            "sshd": "auth required pam_keyway.so policy=ssh\naccount required pam_keyway.so policy=ssh\n",
            "sudo": "auth [success=done default=ignore] pam_keyway.so policy=ssh\n@include common-auth\n",
        ])
        let report = Self.examine(files, config: "[policy ssh]\nrequire = totp or recovrey\n")
        let critical = report.findings.filter(\.critical)
        #expect(critical.map(\.file) == ["sshd", "sshd"], "\(Self.texts(report))")
        let text = try #require(critical.first).text(in: "/etc/pam.d")
        #expect(text.hasPrefix("/etc/pam.d/sshd:1: critical: policy 'ssh' has errors"), "\(text)")
        #expect(text.contains("the line is required, so every login through it fails now, root's included"))
        // Where the password follows, the same typo is a warning: people still get in.
        let sudo = try #require(report.findings.first { $0.file == "sudo" })
        #expect(!sudo.critical && sudo.text(in: "/etc/pam.d").contains("warning: policy 'ssh' has errors"))
    }

    @Test("a policy that can never succeed in a remote session warns")
    func impossiblePolicy() throws {
        let stack = "auth [success=done default=ignore] pam_keyway.so policy=biometrics-only\n@include common-auth\n"
        let report = Self.examine(Self.directory(["sshd": stack]))
        let finding = try #require(report.findings.first)
        #expect(report.findings.map(\.kind) == [.policy], "\(Self.texts(report))")
        #expect(finding.reason.hasPrefix("policy 'biometrics-only' can never succeed in a remote session"))
    }

    @Test("Keyway in common-auth is found in every stack that includes it, and warned about once")
    func throughCommonAuth() throws {
        let files = [
            "common-auth": "auth [success=done default=ignore] pam_keyway.so policy=pattern\n" + Self.commonAuth,
            "sudo": "@include common-auth\n",
            "login": "auth optional pam_faildelay.so delay=3000000\nauth include common-auth\n",
            "cron": "account required pam_access.so\n",
        ]
        let report = Self.examine(files)
        #expect(report.findings.isEmpty, "\(Self.texts(report))")
        #expect(report.stacks == ["common-auth", "login", "sudo"])
        #expect(report.summaries.last == "sudo: auth at common-auth:1, [success=done default=ignore], policy pattern")
        let locked = Self.examine(files.merging(["common-auth": "auth required pam_keyway.so\n"]) { $1 })
        let finding = try #require(locked.findings.first)
        #expect(locked.findings.count == 1, "\(Self.texts(locked))")
        #expect(finding.stacks == ["common-auth", "login", "sudo"])
        let text = finding.text(in: "/etc/pam.d")
        #expect(text.contains("(in login, sudo); common-auth is one of root's ways in"), "\(text)")
    }

    @Test("a Keyway line in account only is fine")
    func accountOnly() throws {
        let stack = "@include common-auth\naccount required pam_keyway.so policy=pattern\n@include common-account\n"
        let report = Self.examine(Self.directory(["sudo": stack]))
        #expect(report.findings.isEmpty, "\(Self.texts(report))")
        #expect(report.summaries == ["sudo: account at sudo:2, required, policy pattern"])
    }

    @Test("comments, continued lines, a leading dash and a path to the module are read as libpam reads them")
    func lineSyntax() throws {
        let stack = """
            #%PAM-1.0
            # auth required pam_keyway.so   (commented out)

            -auth [success=done \\
                  default=ignore] /lib/x86_64-linux-gnu/security/pam_keyway.so \\
            # a comment line inside the entry is skipped
               policy=pattern next=password  # the rest is a comment \\
            @include common-auth
            """
        let lines = PAMDirectory.lines(of: stack, file: "sudo")
        let keyway = try #require(lines.first)
        #expect(lines.count == 2)
        #expect(keyway.number == 4 && keyway.quiet && keyway.type == "auth" && keyway.isKeyway)
        #expect(keyway.arguments == ["policy=pattern", "next=password"])
        #expect(PAMControl(keyway.control).action(for: "auth_err") == .ignore)
        #expect(lines[1].type == "@include" && lines[1].module == "common-auth")
        let report = Self.examine(Self.directory(["sudo": stack]))
        #expect(report.findings.isEmpty, "\(Self.texts(report))")
        #expect(report.uses.count == 1)
    }

    @Test("keywayd not answering is one warning for the default socket, and one more for a stack naming another")
    func keywayd() throws {
        let files = Self.directory([
            "sudo": Self.recommendedSudo,
            "login": "auth [success=done default=ignore] pam_keyway.so\n@include common-auth\n",
            "su": "auth [success=done default=ignore] pam_keyway.so socket=/run/other.sock\n@include common-auth\n",
        ])
        let report = Self.examine(files) { socket in
            AuthenticationError(.serviceUnavailable, "connect to \(socket): No such file or directory")
        }
        #expect(report.findings.map(\.kind) == [.keywayd, .keywayd], "\(Self.texts(report))")
        let first = try #require(report.findings.first)
        #expect(first.file == nil)
        #expect(first.stacks == ["login", "sudo"])
        #expect(first.reason.hasPrefix("keywayd does not answer at /run/keyway/keywayd.sock"))
        #expect(first.fix.hasPrefix("systemctl enable --now keywayd.socket"))
        #expect(report.findings[1].fix == "start keywayd --socket /run/other.sock, or correct socket= in the stack")
        let store = Self.examine(files) { _ in AuthenticationError(.storeFailure, "Keyway store: damaged") }
        #expect(store.findings.first?.reason.contains("cannot use its store") == true)
    }

    @Test("unenrolled=allow is a roll-out the doctor names, on the stack's line or in the policy it uses")
    func rollOut() throws {
        func kinds(_ stack: String, config: String? = nil) -> [StackDoctor.Finding.Kind] {
            Self.examine(Self.directory(["sshd": stack + "auth required pam_unix.so\n"]), config: config).findings
                .map(\.kind)
        }
        #expect(kinds("auth required pam_keyway.so policy=totp unenrolled=allow\n").contains(.rollOut))
        #expect(
            kinds(
                "auth required pam_keyway.so policy=codes\n",
                config: "[policy codes]\nrequire = totp\nunenrolled = allow\n"
            ).contains(.rollOut))
        #expect(!kinds("auth required pam_keyway.so policy=totp\n").contains(.rollOut))
        #expect(
            !kinds(
                "auth required pam_keyway.so policy=codes unenrolled=conceal\n",
                config: "[policy codes]\nrequire = totp\nunenrolled = allow\n"
            ).contains(.rollOut), "the stack's own argument wins")
    }

    @Test(
        "sshd: keyboard-interactive off is warned; a key then a code is clean; the password method running the stack too is warned"
    )
    func sshdSetups() throws {
        let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("pam/examples")
        func example(_ name: String) throws -> String {
            try String(contentsOf: examples.appendingPathComponent(name), encoding: .utf8)
        }
        // The roll-out argument is a warning of its own (`rollOut`); these setups are the finished roll-out.
        let keyThenCode = try example("sshd").replacingOccurrences(of: " unenrolled=allow", with: "")
        let common = [
            "common-auth": "auth [success=1 default=ignore] pam_unix.so nullok\nauth requisite pam_deny.so\n"
                + "auth required pam_permit.so\n",
            "common-account": "account required pam_unix.so\n", "common-session": "session required pam_unix.so\n",
            "common-password": "password required pam_unix.so\n",
        ]
        func report(_ stack: String, _ sshd: SSHDConfig) -> StackDoctor.Report {
            StackDoctor(directory: PAMDirectory(files: common.merging(["sshd": stack]) { $1 }), sshd: sshd).examine(
                configuration: { _ in Configuration.parse([], plugins: Factors.all) }, keywayd: { _ in nil })
        }
        // Debian's own sshd_config: its drop-ins first, then keyboard-interactive off.
        let debian = "Include /etc/ssh/sshd_config.d/*.conf\nKbdInteractiveAuthentication no\nUsePAM yes\n"
        let off = report(keyThenCode, SSHDConfig(text: debian, file: "/etc/ssh/sshd_config"))
        let offWarning = off.findings.first { $0.kind == .sshd }
        #expect(offWarning?.reason.contains("keyboard-interactive is off") == true, "\(Self.texts(off))")
        #expect(offWarning?.reason.contains("/etc/ssh/sshd_config:2") == true, "\(Self.texts(off))")
        // pam/examples/sshd_config as the drop-in: its yes comes first and wins; the key, then the code.
        let dropIn = try example("sshd_config")
        let keyed = report(
            keyThenCode,
            SSHDConfig(
                text: debian, file: "/etc/ssh/sshd_config",
                include: {
                    $0 == "/etc/ssh/sshd_config.d/*.conf" ? [("/etc/ssh/sshd_config.d/keyway.conf", dropIn)] : []
                }))
        #expect(keyed.findings.isEmpty, "\(Self.texts(keyed))")
        #expect(keyed.summaries.first { $0.hasPrefix("sshd:") }?.contains("second factor after the key") == true)
        // The password and a code, with sshd's own password method still on and no AuthenticationMethods.
        let password = report(
            try example("sshd-password"), SSHDConfig(text: "UsePAM yes\nKbdInteractiveAuthentication yes\n", file: "c"))
        let reasons = password.findings.filter { $0.kind == .sshd }.map(\.reason)
        #expect(reasons.contains { $0.contains("password method runs this stack too") }, "\(Self.texts(password))")
        #expect(reasons.contains { $0.contains("without keyboard-interactive") }, "\(Self.texts(password))")
        // Still the key first, but the stack kept common-auth: the password is asked after the key as well.
        let both = report(
            "@include common-auth\nauth required pam_keyway.so policy=totp\n",
            SSHDConfig(text: dropIn, file: "/etc/ssh/sshd_config.d/keyway.conf"))
        #expect(
            both.findings.contains { $0.kind == .sshd && $0.reason.contains("asks the password as well") },
            "\(Self.texts(both))")
    }

    @Test("the shipped example stacks are clean")
    func shippedExamples() throws {
        let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("pam/examples")
        for name in ["sudo", "login", "two-factor"] {
            let text = try String(contentsOf: examples.appendingPathComponent(name), encoding: .utf8)
            let report = Self.examine(
                Self.directory([name: text, "common-session-noninteractive": "session required pam_unix.so\n"]))
            #expect(report.findings.isEmpty, "\(name): \(Self.texts(report))")
            #expect(report.stacks == [name])
        }
    }
}
