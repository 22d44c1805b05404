import Glibc
import KeywayCore
import KeywayGesture
import KeywayPlatform
import KeywayTools

/// The pattern drawn on a 3×3 grid that fills the terminal, as on a phone: arrows or hjkl move, space or a digit
/// chooses, Backspace undoes, Enter finishes, Esc or Ctrl-C cancels (`PatternDrawing` holds the drawing and its
/// screen). Used for `keyway enroll gesture` and `keyway change gesture` when /dev/tty is a terminal.
///
/// Each `ask` takes the terminal (raw mode, the alternate screen, the cursor hidden) and gives it back before it
/// returns, whatever happens: a signal that ends the program, or a crash, restores it too (`GridTerminal`).
final class GridConversation: Conversation {
    /// Whether the chosen dots and the lines between them are drawn (phones' "make pattern visible").
    private let showTrail: Bool
    /// What the factor said since the last drawing ("The patterns did not match; start again."), shown on the next.
    private var message: String?

    /// A conversation that draws on the terminal; `forPattern` decides whether there is one to draw on.
    init(showTrail: Bool) {
        self.showTrail = showTrail
    }

    /// A message told after the last drawing (the final refusal of a third round, say) is printed rather than lost.
    deinit {
        if let message { Keyway.printError(message) }
    }

    /// The conversation for a pattern: the grid on a terminal; otherwise the typed digits of
    /// `TerminalConversation` (with `--stdin`, on a terminal that cannot draw, or with no terminal at all).
    static func forPattern(fromStandardInput: Bool, showTrail: Bool) -> any Conversation {
        guard !fromStandardInput, GridTerminal.isUsable else {
            return TerminalConversation(fromStandardInput: fromStandardInput)
        }
        return GridConversation(showTrail: showTrail)
    }

    /// Lets the person draw until Enter (the pattern) or Esc, Ctrl-C or the terminal's end (`.cancel`); Enter on no
    /// dots is `.fallback` when the prompt offers one. The prompt's text, without its colon, is the screen's title.
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        let terminal = try GridTerminal.take()
        defer { terminal.giveBack() }
        var drawing = PatternDrawing()
        defer {
            drawing.wipe()
            message = nil
        }
        let title = Self.title(of: prompt)
        while true {
            terminal.draw(drawing.render(showTrail: showTrail, title: title, message: message))
            guard let key = terminal.readKey() else { return .cancel }
            switch drawing.apply(key) {
            case .drawing: continue
            case .cancelled: return .cancel
            case .finished:
                if drawing.chosen.isEmpty && prompt.fallbackLabel != nil { return .fallback }
                return .secret(drawing.secret)
            }
        }
    }

    /// Keeps the message for the next drawing. The typed form's numbered grid is not said: the grid is on screen.
    func tell(_ message: Message) {
        guard message.text != GestureAuthenticator.grid else { return }
        self.message = message.text
    }

    /// "New pattern: " becomes "New pattern".
    static func title(of prompt: Prompt) -> String {
        var title = Substring(prompt.text)
        while let last = title.last, last == " " || last == ":" { title.removeLast() }
        return String(title)
    }
}

/// The terminal while a pattern is drawn on it: /dev/tty in raw mode on the alternate screen, the cursor hidden.
/// `giveBack` restores what `take` found; so does a signal that ends the program (`GridTerminal.restoringSignals`).
final class GridTerminal {
    /// /dev/tty, open while the grid is shown.
    private let descriptor: Int32
    /// The settings found, restored on every way out; the raw mode it reads keys in.
    private let mode: RawTerminal

    /// Switches to the alternate screen, clears it and hides the cursor.
    static let enterSequence = "\u{1B}[?1049h\u{1B}[H\u{1B}[2J\u{1B}[?25l"
    /// Shows the cursor and leaves the alternate screen: the screen the person had comes back.
    static let leaveSequence = "\u{1B}[?25h\u{1B}[?1049l"
    /// The signals whose default ends the program: termination and hang-up, the keyboard's (should raw mode be
    /// undone from outside), and crashes. Each restores the terminal, then ends the program as it would have.
    static let restoringSignals = [SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGSEGV, SIGILL, SIGTRAP, SIGABRT, SIGBUS, SIGFPE]
    /// How long the rest of an escape sequence may take to arrive before a lone ESC counts as the Esc key.
    static let escapeMilliseconds: Int32 = 50

    /// Whether the grid can be drawn: /dev/tty is a terminal that understands cursor movement, big enough for the
    /// screen `PatternDrawing` renders.
    static var isUsable: Bool {
        guard let name = getenv("TERM").map({ String(cString: $0) }), !name.isEmpty, name != "dumb" else {
            return false
        }
        let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var size = winsize()
        guard isatty(descriptor) == 1, ioctl(descriptor, UInt(TIOCGWINSZ), &size) == 0 else { return false }
        let screen = PatternDrawing().render(showTrail: true, title: "", message: nil)
        let width = screen.map { $0.unicodeScalars.count }.max() ?? 0
        // A terminal that reports no size (0×0) is given the benefit of the doubt.
        return size.ws_row == 0 || (Int(size.ws_row) >= screen.count && Int(size.ws_col) >= width)
    }

    private init(descriptor: Int32, mode: RawTerminal) {
        self.descriptor = descriptor
        self.mode = mode
    }

    /// Opens /dev/tty, saves its settings, installs the restoring handlers, then enters raw mode and the alternate
    /// screen, in that order, so that there is never a changed terminal without a way back.
    static func take() throws(AuthenticationError) -> GridTerminal {
        let descriptor = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard descriptor >= 0 else {
            throw AuthenticationError(.notInteractive, "no terminal to draw on; use --stdin to read from input")
        }
        guard let mode = RawTerminal(descriptor) else {
            close(descriptor)
            throw AuthenticationError(.notInteractive, "/dev/tty is not a terminal; use --stdin to read from input")
        }
        let terminal = GridTerminal(descriptor: descriptor, mode: mode)
        TerminalRescue.arm(descriptor: descriptor, settings: mode.saved, signals: restoringSignals)
        mode.enter(.raw, flush: true)
        terminal.write(enterSequence)
        return terminal
    }

    /// Restores the terminal as `take` found it (keys typed but not read are dropped), puts the signals'
    /// dispositions back and closes /dev/tty.
    func giveBack() {
        write(Self.leaveSequence)
        mode.restore(flush: true)
        TerminalRescue.disarm()
        close(descriptor)
    }

    /// Draws a screen from the top left, clearing what each line and the lines below held before.
    func draw(_ lines: [String]) {
        write("\u{1B}[H" + lines.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
    }

    /// The next key that means something to the drawing; nil when the terminal is gone (end of input, an error).
    func readKey() -> PatternDrawing.Key? {
        while true {
            guard let first = readByte() else { return nil }
            let bytes = first == 0x1B ? [first] + escapeSequenceRest() : [first]
            if let key = PatternDrawing.Key(terminalBytes: bytes) { return key }
        }
    }

    /// The bytes after an ESC that arrive within `escapeMilliseconds` of each other: `[` or `O` and up to the
    /// sequence's final byte. None when ESC came alone, which is the Esc key.
    private func escapeSequenceRest() -> [UInt8] {
        guard waitForInput(), let introducer = readByte() else { return [] }
        var rest = [introducer]
        guard introducer == UInt8(ascii: "[") || introducer == UInt8(ascii: "O") else { return rest }
        while rest.count < 16, waitForInput(), let byte = readByte() {
            rest.append(byte)
            if (0x40...0x7E).contains(byte) { break }
        }
        return rest
    }

    /// Whether a byte can be read within `escapeMilliseconds`.
    private func waitForInput() -> Bool {
        var watched = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        while true {
            let ready = poll(&watched, 1, Self.escapeMilliseconds)
            if ready >= 0 || errno != EINTR { return ready > 0 }
        }
    }

    /// One byte from the terminal, retried when a signal interrupts; nil at the end of input or on an error.
    private func readByte() -> UInt8? {
        var byte: UInt8 = 0
        while true {
            let got = read(descriptor, &byte, 1)
            if got == 1 { return byte }
            if got < 0 && errno == EINTR { continue }
            return nil
        }
    }

    /// Writes all of `text`, retrying partial writes and interruptions; a terminal that is gone is not an error
    /// here (the next read ends the drawing).
    private func write(_ text: String) { Descriptor.write(text, to: descriptor) }
}

/// What the restoring signal handler reads: the terminal's descriptor and saved settings, the bytes that leave the
/// alternate screen, and the dispositions it replaced, in memory allocated once before any handler is installed. A
/// handler may call only async-signal-safe functions, so it finds nothing to allocate, lock or initialize here.
enum TerminalRescue {
    /// The terminal to restore, while `armed`.
    struct State {
        var armed = false
        var descriptor: Int32 = -1
        var settings = termios()
    }

    /// One more than the highest signal number (NSIG): the size of the table of replaced dispositions.
    static let signalCount = 65

    /// The state, at a fixed address.
    nonisolated(unsafe) static let state: UnsafeMutablePointer<State> = {
        let state = UnsafeMutablePointer<State>.allocate(capacity: 1)
        state.initialize(to: State())
        return state
    }()

    /// `GridTerminal.leaveSequence`'s bytes, at a fixed address.
    nonisolated(unsafe) static let leave: UnsafeMutableBufferPointer<UInt8> = {
        let bytes = Array(GridTerminal.leaveSequence.utf8)
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
        _ = buffer.initialize(from: bytes)
        return buffer
    }()

    /// What each signal's disposition was before the restoring handler replaced it, indexed by signal number.
    nonisolated(unsafe) static let replaced: UnsafeMutableBufferPointer<sigaction> = {
        let table = UnsafeMutableBufferPointer<sigaction>.allocate(capacity: signalCount)
        table.initialize(repeating: sigaction())
        return table
    }()

    /// Whether `replaced` holds a signal's previous disposition, indexed by signal number.
    nonisolated(unsafe) static let isReplaced: UnsafeMutableBufferPointer<Bool> = {
        let table = UnsafeMutableBufferPointer<Bool>.allocate(capacity: signalCount)
        table.initialize(repeating: false)
        return table
    }()

    /// Records the terminal to restore and installs the restoring handler for each of `signals`, keeping what it
    /// replaces. A signal the program was told to ignore (SIGHUP under nohup) stays ignored.
    static func arm(descriptor: Int32, settings: termios, signals: [Int32]) {
        _ = (leave, replaced, isReplaced)  // initialized here, never in a handler
        state.pointee.descriptor = descriptor
        state.pointee.settings = settings
        state.pointee.armed = true
        for signal in signals where signal > 0 && signal < signalCount {
            var previous = sigaction()
            guard sigaction(signal, nil, &previous) == 0, !isIgnored(previous) else { continue }
            replaced[Int(signal)] = previous
            isReplaced[Int(signal)] = true
            var action = sigaction()
            action.__sigaction_handler.sa_handler = restoreTerminalAndReraise
            sigemptyset(&action.sa_mask)
            action.sa_flags = 0
            if sigaction(signal, &action, nil) != 0 { isReplaced[Int(signal)] = false }
        }
    }

    /// Nothing to restore any more: the replaced dispositions are put back.
    static func disarm() {
        state.pointee.armed = false
        for signal in 1..<signalCount where isReplaced[signal] {
            _ = sigaction(Int32(signal), &replaced[signal], nil)
            isReplaced[signal] = false
        }
    }

    /// Whether a disposition is SIG_IGN.
    private static func isIgnored(_ action: sigaction) -> Bool {
        guard (action.sa_flags & SA_SIGINFO) == 0, let handler = action.__sigaction_handler.sa_handler else {
            return false
        }
        return unsafeBitCast(handler, to: Int.self) == 1
    }
}

/// The restoring handler: leaves the alternate screen, shows the cursor and puts the terminal's settings back (only
/// `write` and `tcsetattr`, both async-signal-safe), then puts back the disposition it replaced and raises the
/// signal again, so the program ends as it would have: by the default action (a core for a crash, 128 + N for the
/// shell), or through the Swift runtime's crash handler, which prints its backtrace and then does the same.
private func restoreTerminalAndReraise(_ signal: Int32) {
    let state = TerminalRescue.state
    if state.pointee.armed {
        state.pointee.armed = false
        _ = write(state.pointee.descriptor, TerminalRescue.leave.baseAddress, TerminalRescue.leave.count)
        _ = tcsetattr(state.pointee.descriptor, TCSAFLUSH, &state.pointee.settings)
    }
    if signal > 0 && signal < TerminalRescue.signalCount && TerminalRescue.isReplaced[Int(signal)] {
        _ = sigaction(signal, &TerminalRescue.replaced[Int(signal)], nil)
    } else {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = SIG_DFL
        sigemptyset(&action.sa_mask)
        _ = sigaction(signal, &action, nil)
    }
    _ = raise(signal)
}
