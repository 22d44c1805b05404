import Foundation
import KeywayCore
import KeywayPlatform
import KeywayTestSupport
import Testing

@testable import KeywayProcessFixture

/// The biometric factor on fprintd's reader (`[biometric] backend = fprintd`, docs/ARCHITECTURE.md §18): a real
/// fprintd with libfprint's virtual reader on a private bus (scripts/fprintd-bus.sh), keywayd its only client,
/// authentications through the real module and libpam. Nothing of the system's bus or prints is touched.
@Suite("the biometric on fprintd", .serialized)
struct FprintdTests {
    let fixture = PAMFixture()
    static let user = "kwfprint"

    /// The harness as sudo runs the module for the account's owner (real uid the owner's, root effective): the
    /// reader answers only the person at it, as the sensor does.
    func authenticate(_ service: String, _ answers: [String] = []) throws -> Started {
        let uid = try TestAccounts.ids(Self.user).uid
        return try Started(
            "/usr/bin/setpriv",
            ["--ruid=\(uid)", "--euid=0", "--", harnessPath] + answers.flatMap { ["--answer", $0] }
                + [fixture.services, service, Self.user])
    }

    /// Waits for fprintd to start a verification after `count`, then puts print `id` on the reader.
    func scan(_ bus: FprintdBus, _ id: String, after count: inout Int) {
        #expect(bus.awaitVerification(after: count), "fprintd started no verification: \(fixture.daemonLog)")
        count = bus.verificationsStarted
        bus.scan(id)
    }

    /// How many times fprintd has logged `text` (its debug log: G_MESSAGES_DEBUG=all, scripts/fprintd-bus.sh).
    func logged(_ bus: FprintdBus, _ text: String) -> Int { bus.fprintdLog.components(separatedBy: text).count - 1 }

    /// keywayd's calls of fprintd's VerifyStop, as fprintd logs each method call. keywayd stops a verification only
    /// once its lease has recorded what the verification gave (a match, say): its next step, or its release.
    static let verifyStop = "to call method 'VerifyStop'"

    /// Waits until fprintd has logged `text` more than `count` times.
    func awaitLogged(_ bus: FprintdBus, _ text: String, after count: Int, _ what: String) {
        _ = waitUntil(what, seen: { String(bus.fprintdLog.suffix(1500)) }) { logged(bus, text) > count }
    }

    func failures() throws -> Int {
        try fixture.vault().status(of: Self.user).first?[.biometric]?.failures ?? -1
    }

    func setUp(_ policies: String = "", systemSocket: Bool = false, logind: Bool = false) throws -> FprintdBus {
        try requireIsolation()
        #expect(try TestAccounts.add(Self.user))
        let bus = try FprintdBus(systemSocket: systemSocket)
        if logind {
            let started = bus.script("logind")
            #expect(started.status == 0, "\(started.output)")
        }
        let enrolled = bus.enrollWithFprintd(Self.user, print: "print-a")
        #expect(enrolled.contains("enroll-completed"), "\(enrolled)")
        try fixture.enrollPasscode(Self.user, "739155")
        chmod(fixture.directory, 0o755)
        let config = fixture.writeConfig("[biometric]\nbackend = fprintd\ntimeout = 10s\n" + policies)
        fixture.startDaemon(["--config", fixture.configPath, "--system-bus", bus.address])
        fixture.service("bio", "policy=biometrics-only \(config)")
        fixture.service("either", "policy=biometrics-or-passcode \(config)")
        fixture.service("brief", "policy=biometrics-or-passcode timeout=2 \(config)")
        return bus
    }

    func tearDown(_ bus: FprintdBus?) {
        fixture.remove()
        bus?.stop()
        TestAccounts.remove(Self.user)
    }

    @Test("a print enrolled with fprintd-enroll authenticates; 5 wrong prints over two runs lock; the passcode clears")
    func matchLockAndPasscode() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        var seen = reader.verificationsStarted
        // The finger fprintd enrolled authenticates, and keywayd has recorded it: status lists it.
        let right = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        let matched = right.finish()
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        let status = try fixture.vault().status(of: Self.user).first?[.biometric]
        #expect(status?.labels == ["right-index-finger"], "\(String(describing: status))")
        // Three wrong prints in the first run (the policy's 3 attempts), counted by Keyway, not only by fprintd.
        let first = try authenticate("bio")
        for _ in 0..<3 { scan(reader, "print-b", after: &seen) }
        let refused = first.finish()
        #expect(refused.result != "PAM_SUCCESS", "\(refused.text)")
        #expect(try failures() == 3)
        // Two more in a second run reach the lockout of 5: only the passcode unlocks it now.
        let second = try authenticate("bio")
        for _ in 0..<2 { scan(reader, "print-b", after: &seen) }
        let locked = second.finish()
        #expect(locked.result != "PAM_SUCCESS", "\(locked.text)")
        #expect(try failures() == 5)
        let availability = try fixture.vault().status(of: Self.user).first?[.biometric]?.availability
        guard case .lockedOut? = availability else {
            Issue.record("biometrics not locked after 5 wrong prints: \(String(describing: availability))")
            return
        }
        // The lock holds even for the right print: fprintd is not asked (no verification starts).
        let before = reader.verificationsStarted
        let stillLocked = try authenticate("bio").finish()
        #expect(stillLocked.result != "PAM_SUCCESS", "\(stillLocked.text)")
        #expect(reader.verificationsStarted == before)
        // The passcode, asked because biometrics are locked, clears the lock.
        let passcode = try authenticate("either", ["739155"]).finish()
        #expect(passcode.result == "PAM_SUCCESS", "\(passcode.text)")
        #expect(try failures() == 0)
        let again = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        #expect(again.finish().result == "PAM_SUCCESS")
        // A second finger enrolled with fprintd: keyway status (through keywayd) lists both, the domain state
        // changes, and `keyway enroll biometric` is refused with the reason.
        let stateBefore = try fixture.vault().status(of: Self.user).first?[.biometric]?.domainState ?? []
        let thumbEnrolled = reader.enrollWithFprintd(Self.user, finger: "left-thumb", print: "print-c")
        #expect(thumbEnrolled.contains("enroll-completed"), "\(thumbEnrolled)")
        let cli = ["--socket", fixture.socket, "--config", fixture.configPath]
        let shown = try run(cliPath, cli + ["status", "--user", Self.user])
        #expect(shown.text.contains("left-thumb") && shown.text.contains("right-index-finger"), "\(shown.text)")
        let stateAfter = try fixture.vault().status(of: Self.user).first?[.biometric]?.domainState ?? []
        #expect(
            !stateBefore.isEmpty && !stateAfter.isEmpty && stateBefore != stateAfter,
            "domain state \(stateBefore) then \(stateAfter)")
        let enroll = try run(cliPath, cli + ["enroll", "biometric", "--user", Self.user, "--simulate-touches"])
        #expect(enroll.status != 0 && enroll.text.contains("fprintd"), "\(enroll.text)")
        // Removing the biometric is refused as keywayd(8) says (the reader keeps the prints), whole or a finger, and
        // the fingers are still there.
        for extra in [[], ["--finger", "left-thumb"]] {
            let removed = try run(cliPath, cli + ["remove", "biometric", "--user", Self.user] + extra)
            #expect(removed.status != 0 && removed.text.contains("fprintd-delete"), "\(removed.text)")
            #expect(!removed.text.contains("Removed"), "\(removed.text)")
        }
        let still = try run(cliPath, cli + ["status", "--user", Self.user])
        #expect(still.text.contains("left-thumb") && still.text.contains("right-index-finger"), "\(still.text)")
    }

    /// `sudo` for the account in a real terminal, with `stack` as its PAM service (the module at build/, the
    /// fixture's keywayd and configuration) and pam_unix's password after it.
    func sudo(_ stack: String, _ config: String, keyway: Bool = true) throws -> Terminal {
        let service = "kwfprint-sudo"
        let lines = stack.components(separatedBy: "\n").map { line in
            guard !line.hasPrefix("#"), line.contains(" pam_keyway.so ") else { return line }
            return line.replacingOccurrences(
                of: " pam_keyway.so ", with: " \(modulePath) \(fixture.moduleArguments) \(config) ")
        }
        #expect(!keyway || lines.contains { $0.contains(modulePath) }, "no Keyway line in \(stack)")
        _ = FileManager.default.createFile(
            atPath: "/etc/pam.d/\(service)", contents: Data(lines.joined(separator: "\n").utf8))
        let sudoers = "/etc/sudoers.d/\(service)"
        if access(sudoers, F_OK) != 0 {
            let rules =
                "Defaults:\(Self.user) pam_service=\(service), !pam_session, !lecture, passwd_tries=1\n"
                + "\(Self.user) ALL=(ALL) ALL\n"
            try fixture.installSudoers(rules, at: sudoers)
        }
        return try Terminal("setpriv --reuid \(Self.user) --regid \(Self.user) --init-groups sudo -k id -u")
    }

    func removeSudo() {
        unlink("/etc/pam.d/kwfprint-sudo")
        unlink("/etc/sudoers.d/kwfprint-sudo")
    }

    @Test("pam/examples/sudo-fingerprint on real sudo: the finger; 5 wrong prints over two runs lock; the passcode")
    func sudoFingerprint() throws {
        var bus: FprintdBus? = nil
        defer {
            removeSudo()
            tearDown(bus)
        }
        let reader = try setUp()
        bus = reader
        #expect(try TestAccounts.setPassword(Self.user, "Correct-horse-739"))
        let example = try String(contentsOfFile: packageRoot + "/pam/examples/sudo-fingerprint", encoding: .utf8)
        let config = "config=\(fixture.configPath)"
        var seen = reader.verificationsStarted
        // The enrolled finger: root, no password asked.
        do {
            let terminal = try sudo(example, config)
            defer { terminal.close() }
            try terminal.waitFor("Place your finger on the sensor.")
            scan(reader, "print-a", after: &seen)
            let screen = try terminal.waitFor("[exit ")
            #expect(screen.contains("\n0\n[exit 0]"), "\(screen)")
            #expect(!screen.contains("password for"), "\(screen)")
        }
        // Three wrong prints: the passcode is asked; Enter there goes on to the password, which is wrong here.
        do {
            let terminal = try sudo(example, config)
            defer { terminal.close() }
            for _ in 0..<3 { scan(reader, "print-b", after: &seen) }
            try terminal.waitFor("Passcode (Enter: use password):")
            try terminal.type("")
            try terminal.waitFor("password for \(Self.user):")
            try terminal.type("not-the-password")
            let screen = try terminal.waitFor("[exit ")
            #expect(!screen.contains("[exit 0]"), "\(screen)")
        }
        #expect(try failures() == 3)
        // Two more lock the reader (5 in a row across runs); the passcode, asked at once, clears the lock.
        do {
            let terminal = try sudo(example, config)
            defer { terminal.close() }
            for _ in 0..<2 { scan(reader, "print-b", after: &seen) }
            try terminal.waitFor("Passcode (Enter: use password):")
            #expect(try failures() == 5)
            let availability = try fixture.vault().status(of: Self.user).first?[.biometric]?.availability
            if case .lockedOut? = availability {
            } else {
                Issue.record("not locked after 5 wrong prints: \(String(describing: availability))")
            }
            try terminal.type("739155")
            let screen = try terminal.waitFor("[exit ")
            #expect(screen.contains("\n0\n[exit 0]"), "\(screen)")
        }
        #expect(try failures() == 0)
    }

    @Test("first of (biometric, gesture) on real sudo: a print then Enter; the pattern typed while fprintd waits")
    func sudoFirstOf() throws {
        var bus: FprintdBus? = nil
        defer {
            removeSudo()
            tearDown(bus)
        }
        let reader = try setUp("[policy laptop]\nrequire = first of (biometric, gesture)\n")
        bus = reader
        try fixture.enrollPattern(Self.user, "2-4-9-3")
        let stack = """
            auth     [success=done default=ignore] pam_keyway.so policy=laptop next=password
            auth     required pam_unix.so
            account  required pam_permit.so

            """
        let prompt = "Touch the sensor and press Enter, or type your pattern (dots 1-9; Enter: use password):"
        var seen = reader.verificationsStarted
        do {
            let terminal = try sudo(stack, "config=\(fixture.configPath)")
            defer { terminal.close() }
            try terminal.waitFor(prompt)
            let stops = logged(reader, Self.verifyStop)
            scan(reader, "print-a", after: &seen)
            // The match has reached keywayd's lease before Enter asks for it: keywayd then stops the verification.
            awaitLogged(reader, Self.verifyStop, after: stops, "keywayd's VerifyStop after the match")
            try terminal.type("")
            let screen = try terminal.waitFor("[exit ")
            #expect(screen.contains("\n0\n[exit 0]"), "\(screen)\n\(fixture.daemonLog)")
        }
        do {
            let terminal = try sudo(stack, "config=\(fixture.configPath)")
            defer { terminal.close() }
            try terminal.waitFor(prompt)
            #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
            seen = reader.verificationsStarted
            try terminal.type("2-4-9-3")
            let screen = try terminal.waitFor("[exit ")
            #expect(screen.contains("\n0\n[exit 0]"), "\(screen)\n\(fixture.daemonLog)")
        }
        #expect(try failures() == 0)
        // The pattern ended that lease: keywayd released the reader, and the next authentication claims it.
        let next = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        #expect(next.finish().result == "PAM_SUCCESS", "\(fixture.daemonLog)")
    }

    /// Runs sudo with `stack` and offers a wrong print at every verification fprintd starts, until the run asks
    /// for a passcode or a password instead (Enter at the passcode, then the password, which pam_unix accepts at
    /// once, without its delay after a failure); the number of wrong prints it verified.
    func wrongPrintsVerified(_ reader: FprintdBus, _ stack: String, _ config: String = "") throws -> Int {
        var seen = reader.verificationsStarted
        let terminal = try sudo(stack, config, keyway: !config.isEmpty)
        defer { terminal.close() }
        var verified = 0
        while true {
            var started = false
            var screen = ""
            for _ in 0..<300 {
                if reader.verificationsStarted > seen {
                    started = true
                    break
                }
                screen = try terminal.screen()
                if screen.contains("Passcode (Enter: use password):") || screen.contains("password for") { break }
                usleep(20_000)
            }
            if !started { break }
            seen = reader.verificationsStarted
            reader.scan("print-b")
            verified += 1
        }
        if try terminal.screen().contains("Passcode (Enter: use password):") { try terminal.type("") }
        try terminal.waitFor("password for \(Self.user):")
        try terminal.type("Correct-horse-739")
        let screen = try terminal.waitFor("[exit ")
        #expect(screen.contains("\n0\n[exit 0]"), "\(screen)")
        return verified
    }

    @Test("10 sudo runs of wrong prints: Keyway verifies 5 in all (its lockout), pam_fprintd max-tries=3 verifies 30")
    func againstPamFprintd() throws {
        var bus: FprintdBus? = nil
        defer {
            removeSudo()
            tearDown(bus)
        }
        // pam_fprintd in setuid sudo ignores DBUS_SYSTEM_BUS_ADDRESS: the private bus listens at the system's path
        // too (in the isolated /run).
        let reader = try setUp(systemSocket: true)
        bus = reader
        #expect(try TestAccounts.setPassword(Self.user, "Correct-horse-739"))
        let keyway = try String(contentsOfFile: packageRoot + "/pam/examples/sudo-fingerprint", encoding: .utf8)
        let fprintd = """
            auth     [success=done default=ignore] pam_fprintd.so max-tries=3 timeout=10
            auth     required pam_unix.so
            account  required pam_permit.so

            """
        var keywayRuns: [Int] = []
        for _ in 0..<10 { keywayRuns.append(try wrongPrintsVerified(reader, keyway, "config=\(fixture.configPath)")) }
        var fprintdRuns: [Int] = []
        for _ in 0..<10 { fprintdRuns.append(try wrongPrintsVerified(reader, fprintd)) }
        print("wrong prints verified per sudo run: Keyway \(keywayRuns), pam_fprintd max-tries=3 \(fprintdRuns)")
        #expect(keywayRuns == [3, 2, 0, 0, 0, 0, 0, 0, 0, 0], "\(keywayRuns)\n\(fixture.daemonLog)")
        #expect(try failures() == 5)
        #expect(fprintdRuns == Array(repeating: 3, count: 10), "\(fprintdRuns)\n\(reader.fprintdLog.suffix(3000))")
    }

    @Test("keyway enroll biometric at fprintd's reader, in tmux: each of 5 stages shown; the new print works")
    func enrollThroughKeyway() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        let cli = "\(cliPath) --socket \(fixture.socket) --config \(fixture.configPath)"
        // keywayd's record of fprintd's list, made at the first authentication.
        var seen = reader.verificationsStarted
        let first = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        #expect(first.finish().result == "PAM_SUCCESS")
        let stateBefore = try fixture.vault().status(of: Self.user).first?[.biometric]?.domainState ?? []
        // The same finger again, with another print (fprintd replaces it). A reader without identification, as this
        // one, verifies "any" against the user's first finger only (so does pam_fprintd), hence one finger here.
        do {
            let enrollments = logged(reader, "start enrollment device")
            let terminal = try Terminal("\(cli) enroll biometric --user \(Self.user) --finger right-index")
            defer { terminal.close() }
            // keywayd shows the first stage once fprintd's EnrollStart has returned, and each next one once fprintd has
            // said the last passed: the reader is enrolling then, and takes the scan.
            for stage in 1...5 {
                try terminal.waitFor("Swipe your finger across the reader (\(stage) of 5)")
                if stage == 1 {
                    awaitLogged(reader, "start enrollment device", after: enrollments, "fprintd's enrollment start")
                }
                reader.scan("print-d")
            }
            let screen = try terminal.waitFor("[exit ")
            #expect(
                screen.contains("Enrolled right-index-finger for \(Self.user).") && screen.contains("[exit 0]"),
                "\(screen)")
        }
        let status = try fixture.vault().status(of: Self.user).first?[.biometric]
        #expect(status?.labels == ["right-index-finger"], "\(String(describing: status))")
        // Enrolled again through Keyway: a new domain state though the list of names is the same.
        #expect(!(status?.domainState ?? []).isEmpty && status?.domainState != stateBefore)
        let audit = try fixture.vault().audit(of: Self.user).map(\.actor)
        #expect(audit.contains { $0.contains("root via keyway") }, "\(audit)")
        seen = reader.verificationsStarted
        let left = try authenticate("bio")
        scan(reader, "print-d", after: &seen)
        let leftRun = left.finish()
        #expect(
            leftRun.result == "PAM_SUCCESS", "\(leftRun.text)\n\(fixture.daemonLog)\n\(reader.fprintdLog.suffix(4000))")
    }

    @Test("enrolling at the reader: refused to a user; a client killed mid-enrollment leaves no finger and frees it")
    func enrollmentAttacked() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        let cli = ["--socket", fixture.socket, "--config", fixture.configPath]
        // Only root enrolls, at the reader as anywhere: the account's owner is refused, and nothing starts.
        let uid = try TestAccounts.ids(Self.user).uid
        let before = reader.fprintdLog.components(separatedBy: "EnrollStart").count
        let refused = try run(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", cliPath] + cli
                + ["enroll", "biometric", "--user", Self.user, "--finger", "left-index"])
        #expect(refused.status != 0 && refused.text.contains("only root"), "\(refused.text)")
        #expect(reader.fprintdLog.components(separatedBy: "EnrollStart").count == before)
        // Root's enrollment killed after one stage: keywayd stops it and releases the reader.
        do {
            let enrollments = logged(reader, "start enrollment device")
            let terminal = try Terminal(
                ([cliPath] + cli + ["enroll", "biometric", "--user", Self.user, "--finger", "left-index"])
                    .joined(separator: " "))
            try terminal.waitFor("Swipe your finger across the reader (1 of 5)")
            awaitLogged(reader, "start enrollment device", after: enrollments, "fprintd's enrollment start")
            reader.scan("print-d")
            try terminal.waitFor("Swipe your finger across the reader (2 of 5)")
            terminal.close()
        }
        var ended = false
        for _ in 0..<100 where !ended {
            ended = fixture.daemonLog.contains("enroll at the device ended")
            if !ended { usleep(50_000) }
        }
        #expect(ended, "\(fixture.daemonLog)")
        #expect(!reader.script("run", "fprintd-list", Self.user).output.contains("left-index-finger"))
        var seen = reader.verificationsStarted
        let next = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        #expect(next.finish().result == "PAM_SUCCESS", "\(fixture.daemonLog)")
        let fingers = try fixture.vault().status(of: Self.user).first?[.biometric]?.labels
        #expect(fingers == ["right-index-finger"], "\(String(describing: fingers))")
    }

    @Test("the reader unplugged mid-verify: the passcode follows, the log says so, nothing counted; and after")
    func readerUnplugged() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        let seen = reader.verificationsStarted
        let waiting = try authenticate("either", ["739155"])
        #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
        reader.script("cmd", "UNPLUG")
        let unplugged = waiting.finish()
        #expect(unplugged.result == "PAM_SUCCESS", "\(unplugged.text)\n\(fixture.daemonLog)")
        #expect(unplugged.text.contains("Passcode"), "\(unplugged.text)")
        #expect(try failures() == 0)
        // No reader at all now: the passcode at once, and the log names fprintd's answer.
        let after = try authenticate("either", ["739155"]).finish()
        #expect(after.result == "PAM_SUCCESS", "\(after.text)")
        #expect(try failures() == 0)
        let log = fixture.daemonLog
        #expect(log.contains("disconnected") || log.contains("no reader") || log.contains("NoSuchDevice"), "\(log)")
    }

    @Test("a peer on the bus forging fprintd's VerifyStatus, as nobody and as root, decides nothing and counts nothing")
    func forgedStatus() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        var seen = reader.verificationsStarted
        let device = try String(contentsOfFile: reader.directory + "/device", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let waiting = try authenticate("bio")
        #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
        seen = reader.verificationsStarted
        // Any peer may emit a signal on fprintd's path and interface: a match to let itself in, no-matches to lock
        // the person out. Only fprintd's own unique name is listened to.
        for (who, verdict) in [("65534", "verify-match"), ("65534", "verify-no-match"), ("0", "verify-match")] {
            for _ in 0..<3 {
                let sent = reader.script(
                    "run", "setpriv", "--reuid=\(who)", "--regid=\(who)", "--clear-groups", "dbus-send",
                    "--bus=\(reader.address)", "--type=signal", device, "net.reactivated.Fprint.Device.VerifyStatus",
                    "string:\(verdict)", "boolean:true")
                #expect(sent.status == 0, "dbus-send as uid \(who): \(sent.output)")
            }
        }
        usleep(500_000)
        guard waiting.process.isRunning else {
            Issue.record("a forged status ended the wait: \(waiting.finish().text)")
            return
        }
        #expect(try failures() == 0)
        #expect(reader.verificationsStarted == seen)
        // The person's own finger still decides.
        reader.scan("print-a")
        let matched = waiting.finish()
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        #expect(try failures() == 0)
    }

    /// A program of a user's that owns fprintd's name on a bus that allows it and answers every verification with
    /// a match: what keywayd must not believe.
    static let impostor = """
        import dbus, dbus.service, dbus.mainloop.glib
        from gi.repository import GLib
        dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
        bus = dbus.SystemBus()
        name = dbus.service.BusName("net.reactivated.Fprint", bus)
        DEVICE = "/net/reactivated/Fprint/Device/9"
        class Manager(dbus.service.Object):
            @dbus.service.method("net.reactivated.Fprint.Manager", out_signature="o")
            def GetDefaultDevice(self): return DEVICE
        class Device(dbus.service.Object):
            @dbus.service.method("net.reactivated.Fprint.Device", in_signature="s")
            def Claim(self, user): pass
            @dbus.service.method("net.reactivated.Fprint.Device", in_signature="s")
            def VerifyStart(self, finger): GLib.timeout_add(200, self.match)
            def match(self):
                self.VerifyStatus("verify-match", True)
                return False
            @dbus.service.signal("net.reactivated.Fprint.Device", signature="sb")
            def VerifyStatus(self, result, done): pass
            @dbus.service.method("net.reactivated.Fprint.Device")
            def VerifyStop(self): pass
            @dbus.service.method("net.reactivated.Fprint.Device")
            def Release(self): pass
        Manager(bus, "/net/reactivated/Fprint/Manager")
        Device(bus, DEVICE)
        GLib.MainLoop().run()
        """

    @Test("fprintd's name owned by a user's program that answers every verify with a match: not believed")
    func impostorOnTheBus() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        reader.script("kill-fprintd")
        let impostor = try Started(
            "/usr/bin/env",
            [
                "DBUS_SYSTEM_BUS_ADDRESS=\(reader.address)", "setpriv", "--reuid=65534", "--regid=65534",
                "--clear-groups", "/usr/bin/python3", "-c", Self.impostor,
            ])
        defer { impostor.process.terminate() }
        var owned = false
        for _ in 0..<100 where !owned {
            let asked = reader.script(
                "run", "dbus-send", "--system", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                "org.freedesktop.DBus.NameHasOwner", "string:net.reactivated.Fprint")
            owned = asked.output.contains("boolean true")
            if !owned { usleep(100_000) }
        }
        #expect(owned, "the impostor did not take the name")
        let refused = try authenticate("bio").finish()
        #expect(refused.result != "PAM_SUCCESS", "\(refused.text)\n\(fixture.daemonLog)")
        #expect(fixture.daemonLog.contains("uid 65534, not root's"), "\(fixture.daemonLog)")
        #expect(try failures() == 0)
    }

    /// Sends signals straight to every bus connection of process `argv[1]` for `argv[2]` seconds (a unicast signal
    /// passes no match rule), and prints how many it sent.
    static let flood = """
        import dbus, dbus.lowlevel, sys, time
        bus = dbus.SystemBus()
        names = dbus.Interface(
            bus.get_object("org.freedesktop.DBus", "/org/freedesktop/DBus"), "org.freedesktop.DBus")
        pid, end, sent = int(sys.argv[1]), time.time() + float(sys.argv[2]), 0
        while time.time() < end:
            for name in names.ListNames():
                try:
                    if not name.startswith(":") or int(names.GetConnectionUnixProcessID(name)) != pid: continue
                except dbus.DBusException:
                    continue
                for _ in range(100):
                    message = dbus.lowlevel.SignalMessage("/flood", "org.example.Flood", "Ping")
                    message.set_destination(name)
                    bus.send_message(message)
                    sent += 1
            bus.flush()
        print(sent)
        """

    @Test("a flood of signals at keywayd during a wait: it still ends at its timeout, and the reader is free after")
    func floodDuringWait() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        let pid = try #require(fixture.daemonProcess?.processIdentifier)
        let flood = try Started(
            "/usr/bin/env",
            [
                "DBUS_SYSTEM_BUS_ADDRESS=\(reader.address)", "setpriv", "--reuid=65534", "--regid=65534",
                "--clear-groups", "/usr/bin/python3", "-c", Self.flood, "\(pid)", "8",
            ])
        // "brief" waits 2 s at the reader, then asks the passcode.
        let began = MonotonicClock.milliseconds()
        let waited = try authenticate("brief", ["739155"]).finish()
        let took = MonotonicClock.milliseconds() - began
        #expect(waited.result == "PAM_SUCCESS", "\(waited.text)\n\(fixture.daemonLog)")
        #expect(waited.text.contains("Timed out"), "\(waited.text)")
        #expect(took < 2000 + 2500, "the wait ended \(took) ms after it began; its timeout is 2 s")
        #expect(try failures() == 0)
        // The reader was given back: while the flood goes on, the next 2 s wait gets it, and the finger decides.
        var count = reader.verificationsStarted
        let next = try authenticate("brief")
        scan(reader, "print-a", after: &count)
        let matched = next.finish()
        #expect(flood.process.isRunning, "the flood ended before the second wait: it proves nothing")
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        let sent = flood.finish()
        #expect(Int(sent.output.first ?? "") ?? 0 > 1000, "the flood sent too little to matter: \(sent.text)")
        print("fprintd flood: the 2 s wait ended after \(took) ms under \(sent.output.first ?? "?") signals")
    }

    /// Claims the default reader for root as another fprintd client would, makes the file `argv[2]`, holds the reader
    /// `argv[1]` seconds, and releases it.
    static let otherClient = """
        import dbus, sys, time
        bus = dbus.SystemBus()
        manager = dbus.Interface(
            bus.get_object("net.reactivated.Fprint", "/net/reactivated/Fprint/Manager"), "net.reactivated.Fprint.Manager")
        device = dbus.Interface(
            bus.get_object("net.reactivated.Fprint", manager.GetDefaultDevice()), "net.reactivated.Fprint.Device")
        device.Claim("root")
        open(sys.argv[2], "w").close()
        time.sleep(float(sys.argv[1]))
        device.Release()
        """

    @Test("suspend under logind: the reader claimed before, given back at sleep, a finger after the resume succeeds")
    func acrossSuspend() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp(logind: true)
        bus = reader
        // Awake, keywayd holds a delay inhibitor: logind waits for it before the machine sleeps.
        _ = waitUntil("keywayd's delay inhibitor", seen: { fixture.daemonLog }) {
            reader.script("inhibitors").output.contains("keywayd delay")
        }
        #expect(
            fixture.daemonLog.contains("sleep: followed through logind (a delay inhibitor)"), "\(fixture.daemonLog)")
        let release = "to call method 'Release'"
        var seen = reader.verificationsStarted
        let waiting = try authenticate("bio")
        #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
        seen = reader.verificationsStarted
        #expect(logged(reader, "to call method 'Claim'") >= 1)
        // Going to sleep: keywayd stops its verification, then closes the inhibitor, while the authentication waits.
        // The claim is given back after the resume: fprintd refuses a Release while it suspends the reader, and
        // stays stuck with it open (ARCHITECTURE.md §14, "Sleep").
        let stops = logged(reader, Self.verifyStop)
        let releases = logged(reader, release)
        #expect(reader.script("sleep", "true").status == 0)
        awaitLogged(reader, Self.verifyStop, after: stops, "keywayd's VerifyStop at sleep")
        _ = waitUntil("the inhibitor closed", seen: { fixture.daemonLog }) {
            !reader.script("inhibitors").output.contains("keywayd")
        }
        #expect(fixture.daemonLog.contains("given back for sleep"), "\(fixture.daemonLog)")
        #expect(fixture.daemonLog.contains("sleep: the devices are given back; the machine may sleep"))
        #expect(waiting.process.isRunning, "the wait ended at sleep: \(fixture.daemonLog)")
        #expect(reader.verificationsStarted == seen, "a verification started while asleep")
        // Resumed: the claim is given back and taken again for the same authentication, and the finger decides it.
        #expect(reader.script("sleep", "false").status == 0)
        awaitLogged(reader, release, after: releases, "keywayd's Release after the resume")
        scan(reader, "print-a", after: &seen)
        let matched = waiting.finish()
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        #expect(fixture.daemonLog.contains("taken again after the resume"), "\(fixture.daemonLog)")
        #expect(!reader.fprintdLog.contains("still busy"), "\(reader.fprintdLog.suffix(3000))")
        _ = waitUntil("a new inhibitor", seen: { reader.script("inhibitors").output }) {
            reader.script("inhibitors").output.contains("keywayd delay")
        }
        #expect(try failures() == 0)
        // Anyone on the bus may send a signal named PrepareForSleep; only logind's own is followed, so a user's
        // program cannot make keywayd let go of the reader.
        let forged = reader.script(
            "run", "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "dbus-send",
            "--bus=\(reader.address)",
            "--type=signal", "/org/freedesktop/login1", "org.freedesktop.login1.Manager.PrepareForSleep", "boolean:true"
        )
        #expect(forged.status == 0, "\(forged.output)")
        let again = try authenticate("bio")
        scan(reader, "print-a", after: &seen)
        #expect(again.finish().result == "PAM_SUCCESS", "\(fixture.daemonLog)")
        #expect(fixture.daemonLog.components(separatedBy: "given back for sleep").count == 2, "\(fixture.daemonLog)")
    }

    @Test("a reader another program holds: said in the log; a sequential wait gets it once it is given back")
    func readerHeldElsewhere() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        let flag = fixture.directory + "/claimed"
        let other = try Started(
            "/usr/bin/env",
            ["DBUS_SYSTEM_BUS_ADDRESS=\(reader.address)", "/usr/bin/python3", "-c", Self.otherClient, "2", flag])
        // Its claim is made before the authentication starts.
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: flag) { usleep(50_000) }
        #expect(FileManager.default.fileExists(atPath: flag), "the other client did not claim the reader")
        var count = reader.verificationsStarted
        let waiting = try authenticate("bio")
        scan(reader, "print-a", after: &count)
        let matched = waiting.finish()
        #expect(matched.result == "PAM_SUCCESS", "\(matched.text)\n\(fixture.daemonLog)")
        #expect(fixture.daemonLog.contains("held by another program"), "\(fixture.daemonLog)")
        let released = other.finish()
        #expect(released.status == 0, "\(released.text)")
    }

    @Test("a verify unanswered, fprintd killed mid-verify, fprintd absent: the passcode follows, nothing counted")
    func fprintdGone() throws {
        var bus: FprintdBus? = nil
        defer { tearDown(bus) }
        let reader = try setUp()
        bus = reader
        // A verification nobody answers ends at the policy's timeout: the passcode follows, nothing counted.
        let unanswered = try authenticate("brief", ["739155"]).finish()
        #expect(unanswered.result == "PAM_SUCCESS", "\(unanswered.text)")
        #expect(unanswered.text.contains("Timed out"), "\(unanswered.text)")
        #expect(try failures() == 0)
        let seen = reader.verificationsStarted
        let waiting = try authenticate("either", ["739155"])
        #expect(reader.awaitVerification(after: seen), "\(fixture.daemonLog)")
        reader.script("kill-fprintd")
        let killed = waiting.finish()
        #expect(killed.result == "PAM_SUCCESS", "\(killed.text)\n\(fixture.daemonLog)")
        #expect(killed.text.contains("Passcode"), "\(killed.text)")
        #expect(fixture.daemonLog.contains("fprintd stopped while it had the reader"), "\(fixture.daemonLog)")
        #expect(try failures() == 0)
        // fprintd absent from the start of the next authentication: the passcode at once, the cause logged.
        let absent = try authenticate("either", ["739155"]).finish()
        #expect(absent.result == "PAM_SUCCESS", "\(absent.text)")
        #expect(fixture.daemonLog.contains("fprintd is not running"), "\(fixture.daemonLog)")
        #expect(try failures() == 0)
        // Started again, the same keywayd uses it without a restart.
        reader.script("restart-fprintd")
        var count = reader.verificationsStarted
        let back = try authenticate("bio")
        scan(reader, "print-a", after: &count)
        #expect(back.finish().result == "PAM_SUCCESS", "\(fixture.daemonLog)")
    }
}
