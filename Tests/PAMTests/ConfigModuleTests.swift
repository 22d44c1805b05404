import Foundation
import KeywayConfig
import KeywayConfigFiles
import KeywayFactors
import KeywayRuntime
import Testing

@testable import KeywayProcessFixture

/// keyway.conf through the real module: the harness drives libpam (pam_start_confdir) on a service in the fixture,
/// the module reads the configuration named by config=, and keywayd enforces what it must.
@Suite("keyway.conf through pam_keyway.so", .serialized)
struct ConfigModuleTests {
    let fixture = PAMFixture()

    /// A service whose auth line is `control pam_keyway.so ARGS`, optionally followed by pam_permit.
    func stack(_ name: String, _ arguments: String, control: String = "required", permit: Bool = false) {
        var text = "auth \(control) \(modulePath) \(fixture.moduleArguments) \(arguments)\n"
        if permit { text += "auth required pam_permit.so\n" }
        text += "account required \(modulePath) \(fixture.moduleArguments) \(arguments)\n"
        _ = FileManager.default.createFile(atPath: fixture.services + "/" + name, contents: Data(text.utf8))
    }

    @Test("2 of (gesture, passcode, biometric): two of them succeed; one is not enough")
    func twoOfThree() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig("[policy ssh]\nrequire = 2 of (gesture, passcode, biometric)\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("kwssh", "policy=ssh \(config)")
        let both = try harness(fixture, "kwssh", "alice", answers("2-4-9-3", "739155"))
        #expect(both.result == "PAM_SUCCESS", "\(both.text)")
        // The pattern three times wrong, then the passcode: one of two, and no finger is enrolled.
        let one = try harness(fixture, "kwssh", "alice", answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6", "739155"))
        #expect(one.result == "PAM_AUTH_ERR", "\(one.text)")
        #expect(one.text.contains("prompt: Passcode: "), "\(one.text)")
    }

    @Test("a variant for a group: root (in group root) needs both factors; another account needs either")
    func groupVariant() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig(
            """
            [policy sudo]
            require = gesture or passcode

            [policy sudo for group root]
            require = gesture and passcode
            """)
        for user in ["root", "alice"] {
            try fixture.enrollPattern(user, "2-4-9-3")
            try fixture.enrollPasscode(user, "739155")
        }
        fixture.service("kwsudo", "policy=sudo \(config)")
        let rootPattern = try harness(fixture, "kwsudo", "root", answers("2-4-9-3"))
        #expect(rootPattern.result != "PAM_SUCCESS", "\(rootPattern.text)")
        #expect(rootPattern.text.contains("prompt: Passcode: "), "\(rootPattern.text)")
        let rootBoth = try harness(fixture, "kwsudo", "root", answers("2-4-9-3", "739155"))
        #expect(rootBoth.result == "PAM_SUCCESS", "\(rootBoth.text)")
        let alice = try harness(fixture, "kwsudo", "alice", answers("2-4-9-3"))
        #expect(alice.result == "PAM_SUCCESS", "\(alice.text)")
        #expect(!alice.text.contains("prompt: Passcode: "), "\(alice.text)")
    }

    @Test("when = local: a remote session is refused with PAM_PERM_DENIED and a reason; a local one is asked")
    func localOnly() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig("[policy console]\nrequire = gesture\nwhen = local\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("kwconsole", "policy=console \(config)")
        let remote = try harness(fixture, "kwconsole", "alice", ["--rhost", "203.0.113.9"] + answers("2-4-9-3"))
        #expect(remote.result == "PAM_PERM_DENIED", "\(remote.text)")
        #expect(!remote.text.contains("prompt:"), "\(remote.text)")
        #expect(remote.text.contains("local sessions only"), "\(remote.text)")
        let local = try harness(fixture, "kwconsole", "alice", answers("2-4-9-3"))
        #expect(local.result == "PAM_SUCCESS", "\(local.text)")
    }

    @Test("mode = audit: PAM_IGNORE whatever happens, and the would-be outcome in the system log")
    func audit() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig("[policy roll-out]\nrequire = gesture\nmode = audit\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.startDaemon()
        // requisite: a failure would stop the stack at once; only PAM_IGNORE lets pam_permit decide.
        stack("kwaudit", "policy=roll-out \(config)", control: "requisite", permit: true)
        stack("kwaudit-alone", "policy=roll-out \(config)")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        func authenticate(_ service: String, _ typed: [String]) throws -> Run {
            return try capture.harness(typed.flatMap { ["--answer", $0] } + [fixture.services, service, "alice"])
        }
        let wrong = try authenticate("kwaudit", ["3-4-9-2", "6-1-8-3", "4-3-8-1-6"])
        #expect(wrong.result == "PAM_SUCCESS", "a wrong pattern in audit mode is ignored: \(wrong.text)")
        let right = try authenticate("kwaudit", ["2-4-9-3"])
        #expect(right.result == "PAM_SUCCESS", "\(right.text)")
        // Alone, an ignoring module leaves libpam without a decision: never a success.
        let alone = try authenticate("kwaudit-alone", ["2-4-9-3"])
        #expect(alone.result != "PAM_SUCCESS" && alone.result != nil, "\(alone.text)")
        let lines = capture.lines.filter { $0.contains("pam_keyway") }
        #expect(
            lines.contains {
                $0.contains("user=alice policy=roll-out outcome=failure(authenticationFailed)")
                    && $0.contains("mode=audit (not enforced: PAM_IGNORE)")
            }, "\(lines)")
        #expect(
            lines.contains {
                $0.contains("user=alice policy=roll-out outcome=success") && $0.contains("mode=audit")
            }, "\(lines)")
    }

    @Test(
        "a typo in policy B: service A (and a built-in) still authenticate; B fails closed, its log line names file:line"
    )
    func typoInOnePolicy() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig(
            "[policy console-a]\nrequire = gesture\n\n[policy ssh-b]\nrequire = totp or recovrey\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.startDaemon(["--config", fixture.configPath])
        stack("kw-a", "policy=console-a \(config)")
        stack("kw-b", "policy=ssh-b \(config)")
        stack("kw-builtin", "policy=pattern \(config)")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        func authenticate(_ service: String) throws -> Run {
            try capture.harness(["--answer", "2-4-9-3", "--acct", fixture.services, service, "alice"])
        }
        #expect(try authenticate("kw-a").result == "PAM_SUCCESS")
        #expect(try authenticate("kw-builtin").result == "PAM_SUCCESS")
        let broken = try authenticate("kw-b")
        #expect(broken.result == "PAM_SERVICE_ERR", "\(broken.text)")
        #expect(!broken.text.contains("prompt:"), "\(broken.text)")
        let line = capture.lines.first { $0.contains("policy=ssh-b") }
        #expect(
            line?.contains("policy 'ssh-b' has errors") == true
                && line?.contains("\(fixture.configPath):5:19: error: unknown factor 'recovrey'") == true,
            "\(capture.lines)")
        // keywayd started with the file too, and said which policy it cannot use.
        #expect(fixture.daemonLog.contains("policy 'ssh-b' has errors"), "\(fixture.daemonLog)")
    }

    @Test(
        "passcode-max-age (keywayd): a passcode not entered for 73 hours sends the user to the passcode, which renews it"
    )
    func passcodeMaxAge() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig("[biometric]\npasscode-max-age = 72h\n")
        fixture.startDaemon(["--config", fixture.configPath])
        try fixture.enrollPasscode("alice", "739155")
        try fixture.enrollFinger("alice", "right-index")
        fixture.service("kwbio", "policy=biometrics-or-passcode \(config) timeout=1")
        func status() throws -> String {
            try run(cliPath, ["--socket", fixture.socket, "--config", fixture.configPath, "status", "--user", "alice"])
                .text
        }
        let fresh = try status()
        #expect(!fresh.contains("LOCKED"), "\(fresh)")
        // Set 73 hours ago, as if nobody had typed it since (the store's own clock is the system's).
        let aged = try run(
            "/usr/bin/sqlite3",
            [
                fixture.store,
                "UPDATE enrollments SET changed_at = changed_at - \(73 * 3_600_000) WHERE factor = 'passcode'",
            ])
        #expect(aged.status == 0, "\(aged.text)")
        let before = try status()
        #expect(
            before.contains("biometric: enrolled") && before.contains("LOCKED") && before.contains("passcode-max-age"),
            "\(before)")
        let result = try harness(fixture, "kwbio", "alice", answers("739155"))
        #expect(result.result == "PAM_SUCCESS", "\(result.text)")
        #expect(!result.text.contains("Place your finger"), "\(result.text)")
        #expect(result.text.contains("prompt: Passcode: "), "\(result.text)")
        let after = try status()
        #expect(!after.contains("LOCKED"), "the passcode entry renews the window: \(after)")
    }

    @Test(
        "a world-writable, foreign-owned or symlinked configuration: the module fails closed and the log names the file"
    )
    func untrustedFiles() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        let config = fixture.writeConfig("[policy sudo]\nrequire = gesture\n")
        fixture.service("kwtrust", "policy=sudo \(config)")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        func authenticate() throws -> Run {
            return try capture.harness(["--answer", "2-4-9-3", fixture.services, "kwtrust", "alice"])
        }
        #expect(try authenticate().result == "PAM_SUCCESS")
        chmod(fixture.configPath, 0o666)
        let writable = try authenticate()
        #expect(writable.result == "PAM_SERVICE_ERR", "\(writable.text)")
        #expect(!writable.text.contains("prompt:"))
        #expect(writable.text.contains("Keyway is not available (see the system log)."), "\(writable.text)")
        chmod(fixture.configPath, 0o644)
        chown(fixture.configPath, 65534, 65534)
        #expect(try authenticate().result == "PAM_SERVICE_ERR")
        chown(fixture.configPath, 0, 0)
        let real = fixture.directory + "/real.conf"
        rename(fixture.configPath, real)
        symlink(real, fixture.configPath)
        #expect(try authenticate().result == "PAM_SERVICE_ERR")
        unlink(fixture.configPath)
        let lines = capture.lines.filter { $0.contains("pam_keyway") }
        let path = fixture.configPath
        #expect(
            lines.contains {
                $0.contains(
                    "configuration error, failing closed: \(path): error: it is writable by group and others (mode 0666)"
                )
            },
            "\(lines)")
        #expect(lines.contains { $0.contains("\(path): error: it is owned by uid 65534, not root") }, "\(lines)")
        #expect(lines.contains { $0.contains("\(path): error: it is a symbolic link") }, "\(lines)")
        // A named file that does not exist is an error too, never the built-ins.
        #expect(try authenticate().result == "PAM_SERVICE_ERR")
        #expect(capture.lines.contains { $0.contains("\(path): error: the file does not exist") })
    }

    @Test("a configuration error: PAM_SERVICE_ERR, and the log has every error as file:line:col")
    func malformed() throws {
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        let config = fixture.writeConfig("[policy sudo]\nrequire = gesture or pascode\n[gesture]\nmin-dots = 12\n")
        fixture.service("kwbad", "policy=sudo \(config)")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        let result = try capture.harness(["--answer", "2-4-9-3", fixture.services, "kwbad", "alice"])
        #expect(result.result == "PAM_SERVICE_ERR", "\(result.text)")
        let lines = capture.lines.filter { $0.contains("pam_keyway") }
        #expect(
            lines.contains { $0.hasPrefix("<83>") && $0.contains("keyway.conf:2:22: error: unknown factor 'pascode'") },
            "\(lines)")
        #expect(lines.contains { $0.contains("keyway.conf:4:12: error: min-dots = 12 is out of range") }, "\(lines)")
        // An unknown policy name is a configuration error too.
        stack("kwnone", "policy=no-such \(config.replacingOccurrences(of: "keyway.conf", with: "absent.conf"))")
        #expect(try harness(fixture, "kwnone", "alice", answers("2-4-9-3")).result == "PAM_SERVICE_ERR")
    }

    @Test("keywayd refuses to start on a configuration with errors, and says why")
    func daemonRefuses() throws {
        defer { fixture.remove() }
        fixture.writeConfig("[biometric]\nlockout-after = 0\n")
        let result = try run(
            daemonPath, ["--socket", fixture.socket, "--store", fixture.store, "--config", fixture.configPath])
        #expect(result.status == 78, "\(result.text)")
        #expect(result.text.contains("keyway.conf:2:17: error: lockout-after = 0 is out of range"), "\(result.text)")
    }

    /// The compiled form the module keeps beside the fixture's socket, for the fixture's configuration, as the module
    /// names it; and the identity the module gives its own build (its file's device, inode, size and mtime).
    func keptForm() throws -> (path: String, build: [UInt8]) {
        var status = stat()
        try #require(stat(modulePath, &status) == 0)
        let build = ConfigurationCache.build(identity: [
            UInt64(status.st_dev), UInt64(status.st_ino), UInt64(status.st_size), UInt64(status.st_mtim.tv_sec),
            UInt64(status.st_mtim.tv_nsec),
        ])
        let cache = ConfigurationCache(directory: fixture.directory, build: build)
        return (fixture.directory + "/" + cache.fileName(for: fixture.configPath), build)
    }

    @Test("the module keeps the compiled keyway.conf beside the socket, uses it, and never one another user owns")
    func compiledFormKept() throws {
        defer { fixture.remove() }
        let config = fixture.writeConfig("[policy site]\nrequire = passcode\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("kwsite", "policy=site \(config)")
        let first = try harness(fixture, "kwsite", "alice", answers("739155"))
        #expect(first.result == "PAM_SUCCESS", "\(first.text)")
        let (kept, build) = try keptForm()
        let status = try FileManager.default.attributesOfItem(atPath: kept)
        #expect(status[.ownerAccountID] as? Int == 0)
        #expect(status[.posixPermissions] as? Int == 0o644)

        // Used: a form of root's made for these bytes but saying `require = gesture` is what the module then asks.
        func plant() throws {
            guard case .success(let sources) = ConfigurationFiles.sources(fixture.configPath),
                case .success(let lie) = Configuration.parse(
                    [ConfigSource(path: fixture.configPath, text: "[policy site]\nrequire = gesture\n")],
                    plugins: Factors.all)
            else { throw CocoaError(.fileReadUnknown) }
            try? FileManager.default.removeItem(atPath: kept)
            try Data(ConfigurationCache.encode(lie, build: build, sources: sources)).write(
                to: URL(fileURLWithPath: kept))
            chmod(kept, 0o644)
        }
        try plant()
        let planted = try harness(fixture, "kwsite", "alice", answers("2-4-9-3"))
        #expect(planted.text.contains("prompt: Pattern (dots 1-9): "), "\(planted.text)")
        #expect(planted.result == "PAM_SUCCESS", "\(planted.text)")

        // The same form owned by another user is not used: the files are compiled, and ask for the passcode.
        chown(kept, 65534, 65534)
        let foreign = try harness(fixture, "kwsite", "alice", answers("739155"))
        #expect(foreign.text.contains("prompt: Passcode: "), "\(foreign.text)")
        #expect(foreign.result == "PAM_SUCCESS", "\(foreign.text)")

        // An edit applies to the next call, whatever is kept.
        try plant()
        fixture.writeConfig("[policy site]\nrequire = passcode\n\n")
        let edited = try harness(fixture, "kwsite", "alice", answers("739155"))
        #expect(edited.text.contains("prompt: Passcode: "), "\(edited.text)")
        #expect(edited.result == "PAM_SUCCESS", "\(edited.text)")
    }
}

/// keyway.conf(5)'s examples, each in front of a real /etc/pam.d service (in the private /etc of
/// scripts/test-isolated.sh), driven by the real pamtester.
@Suite("keyway.conf(5)'s examples through pamtester and /etc/pam.d", .serialized)
struct ConfigExamplePamtesterTests {
    @Test(
        "each example's policy authenticates as the page says",
        arguments: [
            ("sudo-pattern.conf", "sudo", "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n739155\n", true),
            ("sudo-pattern.conf", "sudo", "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n111111\n", false),
            ("two-of-three.conf", "ssh", "2-4-9-3\n739155\n", true),
            ("two-of-three.conf", "ssh", "2-4-9-3\n111111\n111112\n111113\n", false),
            ("wheel.conf", "sudo", "2-4-9-3\n", true),
            ("console.conf", "console", "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n7-5-3-6\n2-4-9-3\n739155\n", true),
            ("roll-out.conf", "roll-out", "3-4-9-2\n6-1-8-3\n4-3-8-1-6\n", true),
            ("passcode-max-age.conf", "unlock", "739155\n", true),
            ("settings.conf", "login", "2-4-9-3\n739155\n", true),
            ("settings.conf", "login", "2-4-9-3\n", false),
        ])
    func example(file: String, policy: String, typed: String, succeeds: Bool) throws {
        try requireIsolation()
        let fixture = PAMFixture()
        let service = "kwconf-\(getpid())"
        defer {
            unlink("/etc/pam.d/\(service)")
            fixture.remove()
        }
        let example = try String(contentsOfFile: packageRoot + "/man/examples/" + file, encoding: .utf8)
        let config = fixture.writeConfig(example)
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")
        fixture.startDaemon()
        // mode = audit returns PAM_IGNORE: requisite and pam_permit let the stack decide, as keyway.conf(5) says.
        let control = policy == "roll-out" ? "requisite" : "required"
        var stack = "auth \(control) \(modulePath) \(fixture.moduleArguments) policy=\(policy) \(config)\n"
        if policy == "roll-out" { stack += "auth required pam_permit.so\n" }
        _ = FileManager.default.createFile(atPath: "/etc/pam.d/\(service)", contents: Data(stack.utf8))
        // A terminal root holds, as a local one: when = local needs the session proven local (pam_keyway(8)).
        let terminal = try PseudoTerminalHolder()
        defer { terminal.stop() }
        let result = try run(
            "/usr/bin/pamtester", ["-v", "-I", "tty=\(terminal.path)", service, "alice", "authenticate"], input: typed)
        #expect((result.status == 0) == succeeds, "\(file) \(policy): \(result.text)")
        #expect(result.text.contains("successfully authenticated") == succeeds, "\(result.text)")
    }
}

/// Unknown means no (docs/ARCHITECTURE.md §11): a group variant whose membership NSS cannot tell fails the
/// authentication closed, never falls back to the base policy; a group larger than the old 64 KiB limit is read.
@Suite("group variants: a membership that cannot be told fails closed", .serialized)
struct GroupLookupTests {
    @Test("a group entry too large to read: PAM_SERVICE_ERR and a log line; a 200 KiB group still matches")
    func unreadableGroup() throws {
        let fixture = PAMFixture()
        defer {
            TestAccounts.remove("kwgrouper")
            fixture.remove()
        }
        #expect(try TestAccounts.add("kwgrouper"))
        try fixture.enrollPattern("kwgrouper", "2-4-9-3")
        try fixture.enrollPasscode("kwgrouper", "739155")
        // Members of kwbig get the stricter variant: the pattern and the passcode.
        let config = fixture.writeConfig(
            "[policy p]\nrequire = gesture\n[policy p for group kwbig]\nrequire = gesture and passcode\n")
        fixture.service("kwgroup", "policy=p \(config)")
        let original = try String(contentsOfFile: "/etc/group", encoding: .utf8)
        func withGroup(members: Int, _ body: () throws -> Void) throws {
            try TestAccounts.withAccountFilesLocked {
                let names = (0..<members).map { String(format: "kwmember%07d", $0) } + ["kwgrouper"]
                let line = "kwbig:x:64999:" + names.joined(separator: ",") + "\n"
                try (original + line).write(toFile: "/etc/group", atomically: true, encoding: .utf8)
                defer { try? original.write(toFile: "/etc/group", atomically: true, encoding: .utf8) }
                try body()
            }
        }
        // About 200 KiB: read (the buffer grows), kwgrouper is a member, the variant asks for both.
        try withGroup(members: 12_000) {
            let member = try harness(fixture, "kwgroup", "kwgrouper", answers("2-4-9-3", "739155"))
            #expect(member.result == "PAM_SUCCESS", "\(member.text)")
            #expect(member.text.contains("prompt: Passcode: "), "the group variant did not apply: \(member.text)")
        }
        // About 1.3 MiB, past what any lookup reads: unknown, so refused, not the base policy's pattern alone.
        try withGroup(members: 80_000) {
            let capture = try SyslogCapture(directory: fixture.directory)
            defer { capture.stop() }
            let refused = try capture.harness(answers("2-4-9-3") + [fixture.services, "kwgroup", "kwgrouper"])
            #expect(refused.result == "PAM_SERVICE_ERR", "\(refused.text)")
            #expect(!refused.text.contains("prompt:"), "\(refused.text)")
            let reason = "whether kwgrouper is a member cannot be told"
            #expect(capture.lines.contains { $0.contains(reason) }, "\(capture.lines)")
        }
        #expect(try String(contentsOfFile: "/etc/group", encoding: .utf8) == original)
    }

    @Test("a group source that cannot answer (nss_hesiod's ENOENT) fails closed, never the base policy")
    func groupSourceDown() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("root", "2-4-9-3")
        // The variant's group is in no file: only the second source could say, and it cannot.
        let config = fixture.writeConfig(
            "[policy p]\nrequire = gesture\n[policy p for group kwremotegroup]\nrequire = gesture and passcode\n")
        fixture.service("kwnssdown", "policy=p \(config)")
        let answered = try harness(fixture, "kwnssdown", "root", answers("2-4-9-3"))
        #expect(answered.result == "PAM_SUCCESS", "with files alone the group has no members: \(answered.text)")
        let nsswitch = fixture.directory + "/nsswitch.conf"
        try "passwd: files\ngroup: files hesiod\nshadow: files\n".write(
            toFile: nsswitch, atomically: true, encoding: .utf8)
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        // The harness alone sees the changed nsswitch.conf (its own mount namespace), and syslog in the capture.
        let script =
            "mount --bind \(nsswitch) /etc/nsswitch.conf && mount --bind \(capture.socketPath) /dev/log && "
            + "exec \(harnessPath) --answer 2-4-9-3 \(fixture.services) kwnssdown root"
        let refused = try run("/usr/bin/unshare", ["--mount", "/bin/sh", "-c", script])
        #expect(refused.result == "PAM_SERVICE_ERR", "\(refused.text)")
        #expect(!refused.text.contains("prompt:"), "\(refused.text)")
        #expect(
            capture.lines.contains { $0.contains("kwremotegroup") && $0.contains("No such file") },
            "\(capture.lines)")
    }
}
