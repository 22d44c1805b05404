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
}
