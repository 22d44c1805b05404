import Foundation
import Testing

@testable import KeywayProcessFixture

/// `keyway enroll gesture` and `keyway change gesture` in a real terminal (tmux), driven as a person would: the
/// pattern drawn on the full-screen grid with arrows, hjkl, space and digits, the screen read while drawing, and the
/// pattern so drawn then checked through the PAM module. Every way out gives the terminal back as it was.
@Suite("Pattern drawn on the terminal grid")
struct GridDrawingTests {
    /// The pattern drawn in these tests: 2, 4, then 6 (which picks up 5 on the way), then 9. Not on the blocklist.
    static let pattern = "2-4-5-6-9"

    /// The built `keyway` on the fixture's store.
    func keyway(_ fixture: PAMFixture, _ words: String) -> String {
        "\(cliPath) --store \(fixture.store) \(words)"
    }

    /// A command line that records the terminal's settings (`stty -g`) before and after `command`, says how it
    /// ended ("[keyway N]"), then leaves an interactive shell at the prompt "grid-shell$ ": a shell that does not
    /// touch the terminal's settings itself, so what it echoes is what `command` left.
    func thenShell(_ command: String, in fixture: PAMFixture) -> String {
        let settings = fixture.directory + "/stty"
        return "stty -g > \(settings).before; \(command); echo \"[keyway $?]\"; stty -g > \(settings).after; "
            + "PS1='grid-shell$ ' exec sh -i"
    }

    /// The terminal as `take` found it: the same settings, the normal screen, the cursor shown, the shell echoing.
    func expectRestored(_ terminal: Terminal, _ fixture: PAMFixture) throws {
        let screen = try terminal.waitFor("grid-shell$")
        #expect(!screen.contains("○") && !screen.contains("arrows/hjkl"), "\(screen)")
        #expect(try terminal.pane("#{alternate_on} #{cursor_flag}") == "0 1")
        let before = try String(contentsOfFile: fixture.directory + "/stty.before", encoding: .utf8)
        let after = try String(contentsOfFile: fixture.directory + "/stty.after", encoding: .utf8)
        #expect(before == after)
        // Typed text is echoed by the terminal (the command line), then printed by the shell.
        try terminal.type("echo typed-back")
        try terminal.waitFor("typed-back", count: 2)
    }

    /// Presses tmux's keys one by one.
    func press(_ terminal: Terminal, _ keys: String...) throws {
        for key in keys { try terminal.sendKey(key) }
    }

    @Test("enroll: drawn with arrows and space, the trail on screen, confirmed with digits; the module accepts it")
    func enrollThenAuthenticate() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let terminal = try Terminal(keyway(fixture, "enroll gesture --user root"))
        defer { terminal.close() }
        var screen = try terminal.waitFor("arrows/hjkl move")
        #expect(screen.hasPrefix("New pattern\n"), "\(screen)")
        #expect(!screen.contains("Draw your pattern by typing"), "\(screen)")
        // From the centre: up to 2, down-left to 4, right twice to 6 (passing over 5, which is picked up).
        try press(terminal, "Up", "Space", "Left", "Down", "Space", "Right", "Right", "Space")
        screen = try terminal.waitFor("4 dots")
        var lines = screen.components(separatedBy: "\n")
        #expect(lines.contains("     ○       ●       ○"), "\(screen)")
        #expect(lines.contains("           ╱") && lines.contains("       ╱"), "\(screen)")
        #expect(lines.contains("     ●───────●──────[●]"), "\(screen)")
        // A slip taken back: up to 3 and chosen, then Backspace; down twice to 9.
        try press(terminal, "Up", "Space")
        try terminal.waitFor("5 dots")
        try press(terminal, "BSpace")
        try terminal.waitFor("4 dots")
        try press(terminal, "Down", "Down", "Space")
        screen = try terminal.waitFor("5 dots")
        lines = screen.components(separatedBy: "\n")
        #expect(lines.contains("     ●───────●───────●"), "\(screen)")
        #expect(lines.filter { $0 == String(repeating: " ", count: 21) + "│" }.count == 3, "\(screen)")
        #expect(lines.contains("     ○       ○      [●]"), "\(screen)")
        try press(terminal, "Enter")
        screen = try terminal.waitFor("Draw the pattern again")
        #expect(screen.contains("0 dots") && !screen.contains("●"), "\(screen)")
        try terminal.type("2469")  // digits jump and choose; 4 → 6 picks up 5 again
        screen = try terminal.waitFor("[exit ", seconds: 60)
        #expect(screen.hasSuffix("The gesture of root is set.\n[exit 0]"), "\(screen)")
        #expect(!screen.contains("○"), "\(screen)")
        #expect(try terminal.pane("#{alternate_on} #{cursor_flag}") == "0 1")

        // Through the real module (keywayd serving the same store): the drawn pattern opens, another does not.
        fixture.service("grid", "policy=pattern")
        let right = try harness(fixture, "grid", "root", answers(Self.pattern))
        #expect(right.result == "PAM_SUCCESS", "\(right.text)")
        let wrong = try harness(fixture, "grid", "root", answers("2-4-5-6-3", "2-5-8-9", "1-5-9-6"))
        #expect(wrong.result == "PAM_AUTH_ERR", "\(wrong.text)")
    }

    @Test("with the account's show-trail off, the grid shows neither the trail nor the chosen dots; the pattern works")
    func hiddenTrail() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let off = try run(cliPath, ["--store", fixture.store, "set", "show-trail", "off", "--user", "root"])
        #expect(off.status == 0, "\(off.text)")
        let terminal = try Terminal(keyway(fixture, "enroll gesture --user root"))
        defer { terminal.close() }
        try terminal.waitFor("arrows/hjkl move")
        try press(terminal, "Up", "Space", "Left", "Down", "Space", "Right", "Right", "Space", "Down", "Space")
        let screen = try terminal.waitFor("5 dots")
        for mark in ["●", "─", "│", "╱", "╲"] { #expect(!screen.contains(mark), "\(mark) shown: \(screen)") }
        #expect(screen.contains("[○]"), "the cursor must stay visible: \(screen)")
        try press(terminal, "Enter")
        try terminal.waitFor("Draw the pattern again")
        try terminal.type("2469")
        #expect(try terminal.waitFor("[exit ", seconds: 60).hasSuffix("The gesture of root is set.\n[exit 0]"))
        fixture.service("grid", "policy=pattern")
        #expect(try harness(fixture, "grid", "root", answers(Self.pattern)).result == "PAM_SUCCESS")
    }

    @Test("change: the current pattern drawn with digits, the new one with hjkl; the module takes the new one only")
    func change() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let enrolled = try run(
            cliPath, ["--store", fixture.store, "enroll", "gesture", "--user", "root", "--stdin"],
            input: Self.pattern + "\n")
        #expect(enrolled.status == 0, "\(enrolled.text)")
        let terminal = try Terminal(keyway(fixture, "change gesture --user root"))
        defer { terminal.close() }
        try terminal.waitFor("Current pattern\n")
        try terminal.type("2469")
        try terminal.waitFor("New pattern\n", seconds: 60)
        // 3, 5, 4, 7, 8: up-right, then down-left (a diagonal), left, down, right.
        try press(terminal, "k", "l", "Space", "h", "j", "Space", "h", "Space", "j", "Space", "l", "Space")
        let screen = try terminal.waitFor("5 dots")
        for stroke in ["╱", "─", "│"] { #expect(screen.contains(stroke), "\(screen)") }
        try press(terminal, "Enter")
        try terminal.waitFor("Draw the pattern again")
        try terminal.type("35478")
        #expect(try terminal.waitFor("[exit ", seconds: 60).hasSuffix("Changed the gesture of root.\n[exit 0]"))

        fixture.service("grid", "policy=pattern")
        #expect(try harness(fixture, "grid", "root", answers("3-5-4-7-8")).result == "PAM_SUCCESS")
        let old = try harness(fixture, "grid", "root", answers(Self.pattern, Self.pattern, Self.pattern))
        #expect(old.result == "PAM_AUTH_ERR", "\(old.text)")
    }

    @Test("what the factor says is shown on the grid, which starts again: too short, then a confirmation that differs")
    func messages() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let terminal = try Terminal(thenShell(keyway(fixture, "enroll gesture --user root"), in: fixture))
        defer { terminal.close() }
        try terminal.waitFor("New pattern\n")
        try terminal.type("12")
        var screen = try terminal.waitFor("Connect at least 4 dots.")
        #expect(screen.hasPrefix("New pattern\n") && screen.contains("0 dots") && !screen.contains("●"), "\(screen)")
        try terminal.type("2469")
        try terminal.waitFor("Draw the pattern again")
        try terminal.type("2468")
        screen = try terminal.waitFor("The patterns did not match; start again.")
        #expect(screen.hasPrefix("New pattern\n"), "\(screen)")
        #expect(screen.contains("0 dots") && !screen.contains("●") && !screen.contains("─"), "\(screen)")
        #expect(!screen.contains("Connect at least"), "\(screen)")
        // The message stays while the next drawing starts.
        try press(terminal, "Space")
        screen = try terminal.waitFor("1 dot\n")
        #expect(screen.contains("The patterns did not match; start again."), "\(screen)")
        try press(terminal, "Escape")
        screen = try terminal.waitFor("[keyway 4]")
        #expect(screen.contains("keyway: Cancelled.\n[keyway 4]"), "\(screen)")
        try expectRestored(terminal, fixture)
        let status = try run(cliPath, ["--store", fixture.store, "status", "--user", "root"])
        #expect(!status.text.contains("gesture: enrolled"), "\(status.text)")
    }

    @Test(
        "Esc and Ctrl-C cancel: exit 4, the shell's screen back, the terminal's settings as they were",
        arguments: [
            "Escape", "C-c",
        ])
    func cancel(key: String) throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let terminal = try Terminal(thenShell(keyway(fixture, "enroll gesture --user root"), in: fixture))
        defer { terminal.close() }
        try terminal.waitFor("New pattern\n")
        try press(terminal, "Up", "Space", "Down", "Space")
        try terminal.waitFor("2 dots")
        try press(terminal, key)
        let screen = try terminal.waitFor("[keyway 4]")
        #expect(screen.contains("keyway: Cancelled.\n[keyway 4]"), "\(screen)")
        try expectRestored(terminal, fixture)
    }

    @Test(
        "a signal that ends keyway while it draws (termination, hang-up, a crash) gives the terminal back first",
        arguments: [(SIGTERM, 143), (SIGHUP, 129), (SIGSEGV, 139)])
    func signalEndsDrawing(signal: Int32, status: Int) throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let pidFile = fixture.directory + "/keyway.pid"
        // No core file, and no Swift backtrace to wait for: the default action itself.
        let command =
            "sh -c 'echo $$ > \(pidFile); ulimit -c 0; SWIFT_BACKTRACE=enable=no exec "
            + keyway(fixture, "enroll gesture --user root") + "'"
        let terminal = try Terminal(thenShell(command, in: fixture))
        defer { terminal.close() }
        try terminal.waitFor("New pattern\n")
        try press(terminal, "Space")
        try terminal.waitFor("1 dot\n")
        let pid = try #require(
            pid_t(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        #expect(kill(pid, signal) == 0)
        try terminal.waitFor("[keyway \(status)]")
        try expectRestored(terminal, fixture)
    }
}

extension Terminal {
    /// tmux's own view of the pane, in its format language: "#{alternate_on}" is 1 while a program shows the
    /// alternate screen, "#{cursor_flag}" 1 while the cursor is visible.
    func pane(_ format: String) throws -> String {
        try run("/usr/bin/tmux", ["-L", server, "display-message", "-p", "-t", "0", format]).output.first ?? ""
    }
}
