import Foundation
import Testing

@testable import KeywayProcessFixture

/// pam_keyway(8)'s LOCAL AND REMOTE table, case by case, through pamtester and a service in /etc/pam.d: a session
/// is local only when something the user cannot forge says so. `when = local` refuses a remote session with
/// PAM_PERM_DENIED before anything is asked; the biometric (`remote = deny`) is skipped for the passcode.
@Suite("local or remote: proven, never assumed", .serialized)
struct LocalityTests {
    enum Terminal {
        case none, value(String)
        /// A pseudo-terminal whose master a process of `name` holds (see `PseudoTerminalHolder`).
        case held(name: String, user: String? = nil, startedBy: String? = nil, session: Bool = true, on: String? = nil)
    }

    /// The suite runs in a local login session of its own (scripts/test-isolated.sh); `session: false` moves the
    /// holder out of it.
    static let cases: [(String, Terminal, rhost: String?, local: Bool)] = [
        ("no PAM_TTY (ssh -T host sudo -S)", .none, nil, false),
        ("an empty PAM_TTY", .value(""), nil, false),
        ("PAM_TTY /dev/null, not a terminal", .value("/dev/null"), nil, false),
        ("PAM_RHOST set, on a local terminal", .held(name: "python3"), "203.0.113.9", false),
        ("a pseudo-terminal held by sshd", .held(name: "sshd"), nil, false),
        ("a pseudo-terminal held by a process sshd started", .held(name: "xterm", startedBy: "sshd"), nil, false),
        (
            "a pseudo-terminal held by a user's process, no logind",
            .held(name: "xterm", user: "nobody", session: false), nil, false
        ),
        ("a pseudo-terminal held by root's process in a local logind session", .held(name: "xterm"), nil, true),
        (
            "a pseudo-terminal held by root's process outside any session, on no terminal (systemd-run -t)",
            .held(name: "systemd-run", session: false), nil, false
        ),
        (
            "a pseudo-terminal held by root's process outside any session, on a virtual console",
            .held(name: "script", session: false, on: consoleDevice), nil, true
        ),
        ("the local X display :0", .value(":0"), nil, true),
    ]

    @Test("when = local and remote = deny follow the table", arguments: 0..<cases.count)
    func table(index: Int) throws {
        try requireIsolation()
        let (label, terminal, rhost, local) = Self.cases[index]
        let fixture = PAMFixture()
        let service = "kwlocal-\(getpid())-\(index)"
        var holder: PseudoTerminalHolder? = nil
        defer {
            holder?.stop()
            unlink("/etc/pam.d/\(service)")
            unlink("/etc/pam.d/\(service)-bio")
            fixture.remove()
        }
        let config = fixture.writeConfig("[policy console]\nrequire = gesture\nwhen = local\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")
        try fixture.enrollFinger("alice", "right-index")
        fixture.startDaemon()
        let line = "\(modulePath) \(fixture.moduleArguments)"
        _ = FileManager.default.createFile(
            atPath: "/etc/pam.d/\(service)", contents: Data("auth required \(line) policy=console \(config)\n".utf8))
        _ = FileManager.default.createFile(
            atPath: "/etc/pam.d/\(service)-bio",
            contents: Data("auth required \(line) policy=biometrics-or-passcode timeout=1\n".utf8))
        var items: [String] = []
        switch terminal {
        case .none: break
        case .value(let text): items = ["-I", "tty=\(text)"]
        case .held(let name, let user, let startedBy, let session, let terminal):
            holder = try PseudoTerminalHolder(
                name: name, user: user, startedBy: startedBy, session: session, on: terminal)
            items = ["-I", "tty=\(holder!.path)"]
        }
        if let rhost { items += ["-I", "rhost=\(rhost)"] }
        let console = try run(
            "/usr/bin/pamtester", ["-v"] + items + [service, "alice", "authenticate"], input: "2-4-9-3\n")
        #expect((console.status == 0) == local, "\(label): \(console.text)")
        if !local {
            #expect(console.text.contains("Permission denied"), "\(label): \(console.text)")
        }
        // The sensor: a local session is offered it (nothing is presented: after timeout=1 the passcode); a remote
        // one is not, and goes to the passcode at once.
        let biometric = try run(
            "/usr/bin/pamtester", ["-v"] + items + ["\(service)-bio", "alice", "authenticate"], input: "739155\n")
        #expect(biometric.status == 0, "\(label): \(biometric.text)")
        #expect(biometric.text.contains("Place your finger") == local, "\(label): \(biometric.text)")
    }

    /// The logind cases of the table, with logind's records made here: a private, empty /run/systemd/sessions (a
    /// tmpfs in the run's mount namespace) and the holder moved into a cgroup named as systemd names them.
    static let logindCases: [(String, cgroup: String, record: String, local: Bool)] = [
        ("a user's holder in a local logind session", "session-kw1.scope", "UID=65534\nREMOTE=0\n", true),
        ("a user's holder in a remote logind session", "session-kw1.scope", "UID=65534\nREMOTE=1\n", false),
        (
            "a user's holder under user@UID.service, the user active on a seat", "user@UID.service",
            "UID=UID\nREMOTE=0\nACTIVE=1\nSEAT=seat0\n", true
        ),
        (
            "a user's holder under user@UID.service, the user's session remote", "user@UID.service",
            "UID=UID\nREMOTE=1\nACTIVE=1\nSEAT=seat0\n", false
        ),
    ]

    @Test("logind's record of a user's holder decides", arguments: 0..<logindCases.count)
    func logind(index: Int) throws {
        try requireIsolation()
        let (label, group, template, local) = Self.logindCases[index]
        let uid = try #require(getpwnam("nobody")).pointee.pw_uid
        // A record of the test's own beside the run's session (a mount over the directory would take the run's
        // session away from the suites running meanwhile).
        let id = "kw\(getpid())x\(index)"
        let recordPath = "/run/systemd/sessions/\(id)"
        let cgroup = try Cgroup(
            "logind-\(index)/"
                + group.replacingOccurrences(of: "UID", with: "\(uid)").replacingOccurrences(
                    of: "session-kw1", with: "session-\(id)"))
        let holder = try PseudoTerminalHolder(name: "xterm", user: "nobody")
        defer {
            holder.stop()
            cgroup.remove()
            unlink(recordPath)
        }
        try cgroup.add(holder.pid)
        let record = template.replacingOccurrences(of: "UID=UID", with: "UID=\(uid)")
        try record.write(toFile: recordPath, atomically: false, encoding: .utf8)
        #expect(try localPolicy(on: holder.path, label) == local, "\(label)")
    }

    @Test("tmux: a pane of one started in this local session is local; over ssh, remote; the sensor offered once")
    func tmuxPanes() throws {
        try requireIsolation()
        let fixture = PAMFixture()
        let user = "kwtmux-ssh"
        // utmp as Debian's tmux writes it for each pane (through utempter): "tmux(PID).%N". The harness reads and
        // writes a file of the test's own as utmp (`--utmp`), never /run/utmp: any sshd or tmux of another test
        // running meanwhile would write records there, left stale when it is killed, and a later terminal of that
        // number would be taken for theirs.
        let utmp = fixture.directory + "/utmp"
        _ = FileManager.default.createFile(atPath: utmp, contents: nil)
        /// The record tmux writes for the pane `tty` of its server `pid`.
        func record(_ tty: String, server pid: String) throws {
            let line = String(tty.dropFirst(5))
            #expect(try run(harnessPath, ["--utmp", utmp, "--utmp-add", line, "tmux(\(pid)).%0"]).status == 0)
        }
        let capture = try SyslogCapture(directory: fixture.directory)
        defer {
            capture.stop()
            TestAccounts.remove(user)
            fixture.remove()
        }
        #expect(try TestAccounts.add(user))
        try fixture.enrollPattern("alice", "2-4-9-3")
        try fixture.enrollPasscode("alice", "739155")  // a finger counts only beside a passcode, as on a phone
        try fixture.enrollFinger("alice", "right-index")
        let config = fixture.writeConfig("[policy touch]\nrequire = first of (biometric, gesture)\n")
        fixture.service("kwtmux", "policy=touch \(config)", account: false)
        /// The decision on the pane `tty`: the harness's output and the module's log line.
        func decide(on tty: String) throws -> (output: String, logged: String) {
            // Only this service's lines: the capture hears every test that logs meanwhile.
            let mine = { (line: String) in line.contains("pam_keyway(kwtmux:auth)") }
            let before = capture.lines.filter(mine).count
            let result = try capture.harness(
                ["--utmp", utmp, "--tty", tty, "--answer", "2-4-9-3", fixture.services, "kwtmux", "alice"])
            #expect(result.output.last?.hasPrefix("result: PAM_SUCCESS") == true, "\(tty): \(result.text)")
            let logged = capture.lines.filter(mine)
            #expect(logged.count == before + 1, "\(logged)")
            return (result.text, logged.last ?? "")
        }

        // Started here, in this run's local session (scripts/test-isolated.sh): its server holds the pane.
        let here = try KeywayProcessFixture.Terminal("sleep 300")
        defer { here.close() }
        let listed = try run("/usr/bin/tmux", ["-L", here.server, "list-panes", "-F", "#{pane_tty} #{pid}"]).output
        let (pane, server) = (
            String(listed.first?.split(separator: " ").first ?? ""),
            String(listed.first?.split(separator: " ").last ?? "")
        )
        try record(pane, server: server)
        let local = try decide(on: pane)
        #expect(local.output.contains("Touch the sensor"), "a local pane was not offered the sensor: \(local.output)")
        #expect(!local.logged.contains("remote=yes"), "\(local.logged)")
        print("tmux, local: \(local.logged)")
        // The same pane with a record naming another machine, as sshd writes one: remote, so the record is read.
        let line = String(pane.dropFirst(5))
        #expect(try run(harnessPath, ["--utmp", utmp, "--utmp-add", line, "203.0.113.9"]).status == 0)
        let named = try decide(on: pane)
        #expect(
            named.logged.contains("remote=yes (utmp records \(line) as logged in from 203.0.113.9)"), "\(named.logged)")

        // Started over ssh by the person, in their ssh session.
        let sshd = try SSHServer(
            settings: ["PasswordAuthentication no", "KbdInteractiveAuthentication no"],
            pam: "auth required pam_permit.so\naccount required pam_permit.so\nsession required pam_permit.so\n",
            users: [user])
        defer { sshd.stop() }
        let terminal = try KeywayProcessFixture.Terminal(sshd.command(user))
        defer { terminal.close() }
        try terminal.type(
            "tmux -L mine new-session -d 'sleep 300'; tmux -L mine list-panes -F 'PANE=#{pane_tty}=#{pid}='",
            until: "PANE=/dev/")
        let screen = try terminal.screen()
        let fields = (screen.components(separatedBy: "PANE=").last ?? "").components(separatedBy: "=")
        let found = fields.first ?? ""
        #expect(found.hasPrefix("/dev/pts/") && fields.count > 1, "\(screen)")
        try record(found, server: fields.count > 1 ? fields[1] : "0")
        let remote = try decide(on: found)
        #expect(!remote.output.contains("Touch the sensor"), "a pane started over ssh was offered the sensor")
        #expect(
            remote.logged.contains("remote=yes (utmp records \(String(found.dropFirst(5))) as a pane of tmux (pid "),
            "\(remote.logged)")
        print("tmux, over ssh: \(remote.logged)")
        _ = try? terminal.type("tmux -L mine kill-server; echo KILLED", until: "KILLED")
    }

    /// Runs `when = local` through pamtester on the terminal `path`; true when it was let through.
    func localPolicy(on path: String, _ label: String) throws -> Bool {
        let fixture = PAMFixture()
        let service = "kwlocal-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        defer {
            unlink("/etc/pam.d/\(service)")
            fixture.remove()
        }
        let config = fixture.writeConfig("[policy console]\nrequire = gesture\nwhen = local\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.startDaemon()
        _ = FileManager.default.createFile(
            atPath: "/etc/pam.d/\(service)",
            contents: Data("auth required \(modulePath) \(fixture.moduleArguments) policy=console \(config)\n".utf8))
        let result = try run(
            "/usr/bin/pamtester", ["-v", "-I", "tty=\(path)", service, "alice", "authenticate"], input: "2-4-9-3\n")
        if result.status != 0 {
            #expect(result.text.contains("Permission denied"), "\(label): \(result.text)")
        }
        return result.status == 0
    }

    @Test("a root process holding a master vouches only through its own terminal: su --pty on sshd's is remote")
    func terminalChain() throws {
        try requireIsolation()
        // sshd's terminal, and root's su --pty started from it and set loose (no sshd among its ancestors), outside
        // any logind session: the inner terminal is judged by the outer one.
        let ssh = try PseudoTerminalHolder(name: "sshd", session: false)
        defer { ssh.stop() }
        let su = try PseudoTerminalHolder(name: "su", session: false, on: ssh.path)
        defer { su.stop() }
        #expect(try !localPolicy(on: su.path, "su --pty on sshd's terminal"))
        // The same chain from a virtual console is local: a console, a terminal made there, one made in that.
        let script = try PseudoTerminalHolder(name: "script", session: false, on: consoleDevice)
        defer { script.stop() }
        let inner = try PseudoTerminalHolder(name: "su", session: false, on: script.path)
        defer { inner.stop() }
        #expect(try localPolicy(on: inner.path, "su --pty on a terminal made at a console"))
    }

    @Test("another devpts instance's terminal of the same number is not the test's, both ways")
    func otherInstance() throws {
        try requireIsolation()
        // The test's terminal is local (made at a console); a stranger's of the same number, held by "sshd", in
        // another instance, must not make it remote.
        let local = try PseudoTerminalHolder(name: "script", session: false, on: consoleDevice)
        defer { local.stop() }
        let remoteStranger = try ForeignTerminal(index: local.index, name: "sshd")
        defer { remoteStranger.stop() }
        #expect(try localPolicy(on: local.path, "a local terminal beside a remote stranger's of the same number"))
        // The test's terminal is vouched for by nothing; a stranger's of the same number, at a console, in another
        // instance, must not make it local.
        let loose = try PseudoTerminalHolder(name: "systemd-run", session: false)
        defer { loose.stop() }
        let localStranger = try ForeignTerminal(index: loose.index, name: "script", on: consoleDevice)
        defer { localStranger.stop() }
        #expect(try !localPolicy(on: loose.path, "an unvouched terminal beside a local stranger's of the same number"))
    }

    @Test("400,000 descriptors of /dev/ptmx held by a user: the search stops at its limit, remote; then local again")
    func searchLimit() throws {
        try requireIsolation()
        // 20 processes of nobody, each holding one master of /dev/ptmx about 20,000 times (as many as the hard limit
        // of descriptors lets it, 20,000 here), started before the holder so that /proc lists them first.
        let script = """
            import os, resource, sys
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            master = os.open('/dev/ptmx', os.O_RDWR | os.O_NOCTTY)
            os.setgid(65534)
            os.setuid(65534)
            for _ in range(min(hard, 20000) - 8):
                os.dup(master)
            print('ready', flush=True)
            sys.stdin.read()
            """
        var flood: [(Process, Pipe)] = []
        defer { for (process, input) in flood { try? input.fileHandleForWriting.close(); process.waitUntilExit() } }
        for _ in 0..<20 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
            process.arguments = ["-c", script]
            let (input, output) = (Pipe(), Pipe())
            process.standardInput = input
            process.standardOutput = output
            try process.run()
            flood.append((process, input))
            let said = String(decoding: output.fileHandleForReading.readData(ofLength: 6), as: UTF8.self)
            #expect(said == "ready\n", "a flood process said \(said)")
        }
        let holder = try PseudoTerminalHolder(name: "xterm")
        defer { holder.stop() }
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("kwsearch", "policy=pattern")
        let capture = try SyslogCapture(directory: fixture.directory)
        defer { capture.stop() }
        func located() throws -> String {
            let result = try capture.harness([
                "--tty", holder.path, "--answer", "2-4-9-3", fixture.services, "kwsearch", "alice",
            ])
            #expect(result.output.last?.hasPrefix("result: PAM_SUCCESS") == true, "\(result.text)")
            return capture.lines.last { $0.contains("service=kwsearch") && $0.contains("outcome=") } ?? ""
        }
        let line = String(holder.path.dropFirst(5))
        let flooded = try located()
        #expect(
            flooded.contains("remote=yes (the search for the master side of \(line) ran past 500 ms"), "\(flooded)")
        for (_, input) in flood { try? input.fileHandleForWriting.close() }
        for (process, _) in flood { process.waitUntilExit() }
        flood = []
        let calm = try located()
        #expect(calm.contains("outcome=success") && !calm.contains("remote="), "local (no remote= field): \(calm)")
    }
}
