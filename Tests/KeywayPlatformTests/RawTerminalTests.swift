import Glibc
import KeywayPlatform
import Testing

/// The one terminal-mode helper, on a real pseudo-terminal: what each mode turns off, and that restoring puts back
/// exactly what was found.
@Suite("RawTerminal")
struct RawTerminalTests {
    /// A new pseudo-terminal's two ends (the program's side, the terminal's side); both closed at the end.
    private func withTerminal(_ body: (Int32) throws -> Void) throws {
        let controller = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        try #require(controller >= 0)
        defer { close(controller) }
        var unlock: Int32 = 0
        var number: UInt32 = 0
        // TIOCSPTLCK and TIOCGPTN (the _IOW/_IOR macros do not reach Swift), as unlockpt(3) and ptsname(3) use them.
        try #require(ioctl(controller, 0x4004_5431, &unlock) == 0 && ioctl(controller, 0x8004_5430, &number) == 0)
        let terminal = open("/dev/pts/\(number)", O_RDWR | O_NOCTTY)
        try #require(terminal >= 0)
        defer { close(terminal) }
        try body(terminal)
    }

    private func settings(_ fd: Int32) -> termios {
        var found = termios()
        _ = tcgetattr(fd, &found)
        return found
    }

    @Test("raw: keys one by one, no echo, no signals, no translated line ends; restore gives back what was found")
    func raw() throws {
        try withTerminal { terminal in
            let found = settings(terminal)
            #expect(found.c_lflag & tcflag_t(ICANON | ECHO | ISIG) == tcflag_t(ICANON | ECHO | ISIG))
            let mode = try #require(RawTerminal(terminal))
            #expect(mode.enter(.raw, flush: true))
            let raw = settings(terminal)
            #expect(raw.c_lflag & tcflag_t(ICANON | ECHO | ECHONL | ISIG | IEXTEN) == 0)
            #expect(raw.c_iflag & tcflag_t(ICRNL | IXON) == 0)
            #expect(raw.c_oflag == found.c_oflag)  // output processing stays
            mode.restore()
            let back = settings(terminal)
            #expect(back.c_lflag == found.c_lflag && back.c_iflag == found.c_iflag)
        }
    }

    @Test("silent: lines as usual without echo; restoring from another process's copy works the same")
    func silent() throws {
        try withTerminal { terminal in
            let found = settings(terminal)
            let mode = try #require(RawTerminal(terminal))
            #expect(mode.enter(.silent))
            let silent = settings(terminal)
            #expect(silent.c_lflag & tcflag_t(ECHO) == 0)
            #expect(silent.c_lflag & tcflag_t(ICANON | ISIG) == tcflag_t(ICANON | ISIG))
            RawTerminal.restore(terminal, to: found)  // keywayd's custody restores what the module deposited
            #expect(settings(terminal).c_lflag == found.c_lflag)
        }
    }

    @Test("a descriptor that is no terminal has no mode to change")
    func notATerminal() {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { ends.forEach { close($0) } }
        #expect(RawTerminal(ends[0]) == nil)
    }
}

/// The monotonic clock: never behind itself, and a sleep of 20 ms is at least 20 ms on it.
@Suite("MonotonicClock")
struct MonotonicClockTests {
    @Test("advances at least as long as a sleep, and milliseconds agree with nanoseconds")
    func advances() {
        let before = MonotonicClock.nanoseconds()
        usleep(20_000)
        let after = MonotonicClock.nanoseconds()
        #expect(after - before >= 20_000_000)
        let milliseconds = MonotonicClock.milliseconds()
        #expect(milliseconds >= after / 1_000_000)
    }
}
