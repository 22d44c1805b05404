import Foundation
import Testing

/// A program in a real terminal, driven as a person would: keys in, the screen out. It is a detached tmux session on a
/// server of its own (`tmux -L`), so tests never touch anyone's tmux, and `close()` ends the server and everything in
/// it. The command runs in `sh`; when it ends, its exit status is printed ("[exit N]") and the pane stays two minutes,
/// so the final screen can be read (and a test killed before `close()` leaves nothing running for long).
struct Terminal {
    let server: String

    /// Starts `command` in a terminal of `columns` × `rows` (120×40 unless given).
    init(_ command: String, columns: Int = 120, rows: Int = 40) throws {
        server = "keyway-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // The shell catches Ctrl-C (a handler, which the command does not inherit), so a key meant for the command
        // does not end the pane too.
        let shell = "trap : INT QUIT; \(command); echo \"[exit $?]\"; sleep 120"
        // The tmux server outlives this call: it must hold none of this process's descriptors (Foundation's own
        // pipes included, or waiting for the client never ends), so a shell closes them all before tmux starts, and
        // the server's output goes to a file.
        let log = NSTemporaryDirectory() + server + ".log"
        defer { unlink(log) }
        let closeAll = "for fd in /proc/$$/fd/*; do n=${fd##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done"
        let started = try run(
            "/bin/bash",
            [
                "-c", "\(closeAll); exec \"$@\" </dev/null >\"$0\" 2>&1", log, "/usr/bin/tmux", "-L", server,
                "new-session", "-d", "-x", "\(columns)", "-y", "\(rows)", "sh", "-c", shell,
            ])
        guard started.status == 0 else {
            throw TerminalError(
                text: "tmux did not start: \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    /// Types `text` (literally), then Enter.
    func type(_ text: String) throws {
        if !text.isEmpty { _ = try run("/usr/bin/tmux", ["-L", server, "send-keys", "-t", "0", "-l", text]) }
        _ = try run("/usr/bin/tmux", ["-L", server, "send-keys", "-t", "0", "Enter"])
    }

    /// Presses a key by tmux's name for it ("C-c", "Escape", "Up").
    func sendKey(_ key: String) throws {
        _ = try run("/usr/bin/tmux", ["-L", server, "send-keys", "-t", "0", key])
    }

    /// What the terminal shows now, trailing blank lines removed.
    func screen() throws -> String {
        let captured = try run("/usr/bin/tmux", ["-L", server, "capture-pane", "-p", "-t", "0"])
        return captured.output.joined(separator: "\n").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Waits until the screen shows `text` `count` times (the screen is polled every 50 ms, for at most `seconds`),
    /// and returns the screen; throws with the last screen when it never does.
    @discardableResult
    func waitFor(_ text: String, count: Int = 1, seconds: Double = 15) throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        var shown = ""
        repeat {
            shown = try screen()
            if shown.components(separatedBy: text).count - 1 >= count { return shown }
            usleep(50_000)
        } while Date() < deadline
        throw TerminalError(text: "\"\(text)\" ×\(count) never appeared; the screen:\n\(shown)")
    }

    /// Types `text` and waits for `expected`, typing it again every `every` seconds while it has not appeared, for at
    /// most `seconds`: what is typed while a program is still setting its terminal up (`su --pty` making a new one, a
    /// shell starting inside it) can be lost, and a person seeing nothing would type again. For commands that are
    /// harmless to repeat.
    @discardableResult
    func type(_ text: String, until expected: String, every: Double = 5, seconds: Double = 45) throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            try type(text)
            do {
                return try waitFor(expected, seconds: min(every, max(0.1, deadline.timeIntervalSinceNow)))
            } catch let error as TerminalError where Date() >= deadline {
                throw error
            } catch is TerminalError {
                continue
            }
        }
    }

    /// Ends the tmux server and the program in it.
    /// tmux's own `kill-server` has been seen to answer 0 and leave its server running (a test's pane outlived it),
    /// so the server and the pane's processes are also killed by pid.
    func close() {
        let pids =
            (try? run("/usr/bin/tmux", ["-L", server, "display-message", "-p", "#{pid} #{pane_pid}"]))?
            .output.first?.split(separator: " ").compactMap { pid_t($0) } ?? []
        _ = try? run("/usr/bin/tmux", ["-L", server, "kill-server"])
        if pids.count == 2 { kill(-pids[1], SIGKILL) }
        for pid in pids { kill(pid, SIGKILL) }
    }
}

/// Runs `command` (an authentication whose policy waits at the sensor for 15 s) in a terminal, presses Ctrl-C once the
/// sensor's instruction is on the screen, and returns the screen after the command has ended. Throws when it has not
/// ended 8 s later: without an end at Ctrl-C it would sit out the sensor's timeout.
func screenAfterCtrlCAtSensor(_ command: String) throws -> String {
    let terminal = try Terminal(command)
    defer { terminal.close() }
    try terminal.waitFor("Place your finger on the sensor.")
    try terminal.sendKey("C-c")
    return try terminal.waitFor("[exit ", seconds: 8)
}

struct TerminalError: Error, CustomStringConvertible {
    let text: String
    var description: String { text }
}

/// `command` (a `keyway enroll recovery`) run in a terminal: the ten codes read off the screen, the one at
/// `typingBack` typed back to confirm the set, and the command's exit 0 expected.
func enrollRecoveryInTerminal(_ command: String, typingBack: Int) throws -> [String] {
    let terminal = try Terminal(command)
    defer { terminal.close() }
    let screen = try terminal.waitFor("Type one of them")
    let codes = recoveryCodes(onScreen: screen)
    #expect(codes.count == 10, "\(screen)")
    guard codes.indices.contains(typingBack) else { return codes }
    try terminal.type(codes[typingBack])
    #expect(try terminal.waitFor("[exit ").contains("[exit 0]"))
    return codes
}

/// The recovery codes `keyway enroll recovery` shows, numbered ("1. abcd-efgh-jkmn"), read off a screen.
func recoveryCodes(onScreen screen: String) -> [String] {
    screen.split(separator: "\n").compactMap { line -> String? in
        let fields = line.split(separator: " ")
        guard fields.count == 2, fields[0].hasSuffix("."), Int(fields[0].dropLast()) != nil else { return nil }
        return String(fields[1])
    }
}
