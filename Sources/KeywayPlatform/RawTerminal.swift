public import CKeywayLibc

/// The one way Keyway changes a terminal's mode and puts it back: the CLI's grid and its passcode prompts, and the
/// module's `read-tty` (docs/ARCHITECTURE.md §14). Whoever takes a terminal keeps this value and calls `restore` on
/// every way out; a process that may be killed first also leaves `saved` with keywayd (`TerminalCustody`).
public struct RawTerminal: Sendable {
    /// How the terminal is to read.
    public enum Mode: Sendable {
        /// Keys one by one as they are pressed: no echo, no line editing, no signals from Ctrl-C or Ctrl-Z, no
        /// flow control or translated line ends (the caller reads Ctrl-C and Enter as bytes).
        case raw
        /// Lines as usual, without echo: a secret typed at a prompt.
        case silent
    }

    /// The terminal.
    public let descriptor: Int32
    /// Its settings as found.
    public let saved: termios

    /// Reads the settings of the terminal open at `descriptor`; nil when it is not a terminal.
    public init?(_ descriptor: Int32) {
        var settings = termios()
        guard tcgetattr(descriptor, &settings) == 0 else { return nil }
        self.descriptor = descriptor
        saved = settings
    }

    /// `settings` changed to read in `mode`.
    public static func settings(_ settings: termios, in mode: Mode) -> termios {
        var changed = settings
        switch mode {
        case .silent:
            changed.c_lflag &= ~tcflag_t(ECHO)
        case .raw:
            changed.c_lflag &= ~tcflag_t(ECHO | ECHONL | ICANON | ISIG | IEXTEN)
            changed.c_iflag &= ~tcflag_t(IXON | ICRNL | INLCR | IGNCR | BRKINT | ISTRIP | INPCK)
            withUnsafeMutableBytes(of: &changed.c_cc) { controls in
                controls[Int(VMIN)] = 1
                controls[Int(VTIME)] = 0
            }
        }
        return changed
    }

    /// Makes the terminal read in `mode`; with `flush`, keys typed before are dropped (TCSAFLUSH) rather than read
    /// in the new mode. False when the terminal refused (errno says why).
    @discardableResult
    public func enter(_ mode: Mode, flush: Bool = false) -> Bool {
        var changed = Self.settings(saved, in: mode)
        return tcsetattr(descriptor, flush ? TCSAFLUSH : TCSANOW, &changed) == 0
    }

    /// Puts the settings back as they were found; with `flush`, keys typed but not read are dropped.
    public func restore(flush: Bool = false) { Self.restore(descriptor, to: saved, flush: flush) }

    /// Puts `settings` (read before the terminal was changed, perhaps by another process: keywayd's custody) back on
    /// the terminal open at `descriptor`.
    public static func restore(_ descriptor: Int32, to settings: termios, flush: Bool = false) {
        var settings = settings
        _ = tcsetattr(descriptor, flush ? TCSAFLUSH : TCSANOW, &settings)
    }
}
