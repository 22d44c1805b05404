import Foundation
import Testing

/// pam_keyway(8)'s LOCAL AND REMOTE table, case by case, through pamtester and a service in /etc/pam.d: a session
/// is local only when something the user cannot forge says so. `when = local` refuses a remote session with
/// PAM_PERM_DENIED before anything is asked; the biometric (`remote = deny`) is skipped for the passcode.
@Suite("local or remote: proven, never assumed", .serialized)
struct LocalityTests {
    enum Terminal {
        case none, value(String), held(name: String, user: String?, startedBy: String?)
    }

    static let cases: [(String, Terminal, rhost: String?, local: Bool)] = [
        ("no PAM_TTY (ssh -T host sudo -S)", .none, nil, false),
        ("an empty PAM_TTY", .value(""), nil, false),
        ("PAM_TTY /dev/null, not a terminal", .value("/dev/null"), nil, false),
        ("PAM_RHOST set, on a local terminal", .held(name: "python3", user: nil, startedBy: nil), "203.0.113.9", false),
        ("a pseudo-terminal held by sshd", .held(name: "sshd", user: nil, startedBy: nil), nil, false),
        (
            "a pseudo-terminal held by a process sshd started", .held(name: "xterm", user: nil, startedBy: "sshd"), nil,
            false
        ),
        (
            "a pseudo-terminal held by a user's process, no logind",
            .held(name: "xterm", user: "nobody", startedBy: nil), nil, false
        ),
        ("a pseudo-terminal held by root's terminal", .held(name: "xterm", user: nil, startedBy: nil), nil, true),
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
        case .held(let name, let user, let startedBy):
            holder = try PseudoTerminalHolder(name: name, user: user, startedBy: startedBy)
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
        let sessions = "/run/systemd/sessions"
        let existed = FileManager.default.fileExists(atPath: sessions)
        try FileManager.default.createDirectory(atPath: sessions, withIntermediateDirectories: true)
        #expect(
            try run("/bin/mount", ["-t", "tmpfs", "-o", "mode=755,size=1m", "keyway-test-sessions", sessions]).status
                == 0)
        defer {
            _ = try? run("/bin/umount", [sessions])
            if !existed { rmdir(sessions) }
        }
        let hierarchy = try #require(
            ["/sys/fs/cgroup/systemd", "/sys/fs/cgroup/unified", "/sys/fs/cgroup"].first {
                FileManager.default.fileExists(atPath: $0 + "/cgroup.procs")
            }, "no writable cgroup hierarchy")
        let parent = "\(hierarchy)/keyway-test-\(getpid())-\(index)"
        let cgroup = parent + "/" + group.replacingOccurrences(of: "UID", with: "\(uid)")
        try FileManager.default.createDirectory(atPath: cgroup, withIntermediateDirectories: true)
        let fixture = PAMFixture()
        let service = "kwlogind-\(getpid())-\(index)"
        let holder = try PseudoTerminalHolder(name: "xterm", user: "nobody")
        defer {
            holder.stop()
            rmdir(cgroup)
            rmdir(parent)
            unlink("/etc/pam.d/\(service)")
            fixture.remove()
        }
        try "\(holder.pid)\n".write(toFile: cgroup + "/cgroup.procs", atomically: false, encoding: .utf8)
        let record = template.replacingOccurrences(of: "UID=UID", with: "UID=\(uid)")
        try record.write(toFile: "\(sessions)/kw1", atomically: false, encoding: .utf8)
        let config = fixture.writeConfig("[policy console]\nrequire = gesture\nwhen = local\n")
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.startDaemon()
        _ = FileManager.default.createFile(
            atPath: "/etc/pam.d/\(service)",
            contents: Data("auth required \(modulePath) \(fixture.moduleArguments) policy=console \(config)\n".utf8))
        let console = try run(
            "/usr/bin/pamtester", ["-v", "-I", "tty=\(holder.path)", service, "alice", "authenticate"],
            input: "2-4-9-3\n")
        #expect((console.status == 0) == local, "\(label): \(console.text)")
    }
}
