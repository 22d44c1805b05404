import Glibc
import KeywayPlatform

/// The line protocol between keyway-lock's three processes (docs/LOCK.md, "Three processes"): one message per line,
/// a verb, a space, and a payload in which `%`, line feed and carriage return are escaped as `%25`, `%0A`, `%0D`.
///
/// The authentication process says `prompt ID hidden|shown TEXT`, `info TEXT`, `error TEXT`, `woken ID` and
/// `result success|failure TEXT`; the drawing process answers `answer ID TEXT`; the locking process passes both on
/// and adds the person's input for the drawing: `down X Y`, `move X Y`, `up X Y`, `key NAME`, `text CHARACTERS`,
/// `restarted` when it started a new authentication process, `right` before it unlocks and `caps on|off`; the
/// drawing process also says `failed N` after each failed attempt. `Verb` is the table.
struct Line: Equatable {
    /// What a line says, one table for the three processes: who sends each is in the comment above.
    enum Verb: String, CaseIterable {
        // The authentication process.
        case prompt, info, error, woken, result
        // The drawing process.
        case answer, failed
        // The locking process: the person's input, and what it adds.
        case down, move, up, key, text, restarted, right, caps
    }

    var verb: Verb
    var payload: String

    init(_ verb: Verb, _ payload: String = "") {
        self.verb = verb
        self.payload = payload
    }

    /// The line as written, with its line feed.
    var encoded: String {
        var out = verb.rawValue
        if !payload.isEmpty {
            out += " "
            for character in payload.unicodeScalars {
                switch character {
                case "%": out += "%25"
                case "\n": out += "%0A"
                case "\r": out += "%0D"
                default: out.unicodeScalars.append(character)
                }
            }
        }
        return out + "\n"
    }

    /// Reads one line as written (without its line feed); nil for an empty line or an unknown verb.
    init?(decoding text: String) {
        guard !text.isEmpty else { return nil }
        let parts = text.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        // A verb no process of this version sends is dropped with its line.
        guard let known = Verb(rawValue: String(parts[0])) else { return nil }
        verb = known
        guard parts.count == 2 else {
            payload = ""
            return
        }
        var out = ""
        var scalars = Array(parts[1].unicodeScalars)[...]
        while let first = scalars.popFirst() {
            guard first == "%", scalars.count >= 2 else {
                out.unicodeScalars.append(first)
                continue
            }
            let code = String(String.UnicodeScalarView(scalars.prefix(2)))
            scalars = scalars.dropFirst(2)
            switch code {
            case "25": out += "%"
            case "0A": out += "\n"
            case "0D": out += "\r"
            default: out += "%" + code
            }
        }
        payload = out
    }

    /// The payload's first word and the rest (`prompt 3 hidden …` → "3", "hidden …").
    var split: (String, String) {
        let parts = payload.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: false)
        return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
    }
}

/// One end of a pipe read line by line, without blocking past what `poll` said is there.
final class LineReader {
    let descriptor: Int32
    private var pending: [UInt8] = []
    /// True once the other end closed (or the read failed).
    private(set) var ended = false
    /// The longest line kept; a longer one is cut (a broken or hostile peer cannot grow this process without bound).
    static let longest = 64 * 1024

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    /// Reads what is there (one `read`) and returns the complete lines.
    func drain() -> [Line] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 && (errno == EINTR || errno == EAGAIN) { return [] }
        guard count > 0 else {
            ended = true
            return []
        }
        pending += buffer[0..<count]
        var lines: [Line] = []
        while let end = pending.firstIndex(of: 10) {
            let text = String(decoding: pending[..<end], as: UTF8.self)
            pending.removeSubrange(...end)
            if let line = Line(decoding: text) { lines.append(line) }
        }
        if pending.count > Self.longest { pending.removeAll() }
        return lines
    }
}

/// Writes `line` to `descriptor` whole (a pipe: a write of at most PIPE_BUF bytes is atomic; a longer one is
/// looped). False when the reader is gone.
@discardableResult
func send(_ line: Line, to descriptor: Int32) -> Bool { Descriptor.write(line.encoded, to: descriptor) }

/// A child process of this program in another role, joined to its parent by two pipes: its standard input is
/// `input` (the parent writes), its standard output is `output` (the parent reads). Standard error is shared.
struct Child {
    let pid: pid_t
    let input: Int32
    let output: LineReader

    /// Starts `/proc/self/exe` with `arguments` (the same program, which the kernel keeps even if its file is
    /// replaced meanwhile by an upgrade). nil when it could not start.
    static func start(_ arguments: [String]) -> Child? {
        var toChild: [Int32] = [0, 0]
        var fromChild: [Int32] = [0, 0]
        guard pipe(&toChild) == 0 else { return nil }
        guard pipe(&fromChild) == 0 else {
            close(toChild[0])
            close(toChild[1])
            return nil
        }
        // The parent's ends are not inherited by the other child (a drawing process holding the authentication
        // process's input open would keep it from ever seeing the end of it).
        for descriptor in toChild + fromChild { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        let argv = (["keyway-lock"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, "/proc/self/exe", &actions, nil, argv, environ)
        close(toChild[0])
        close(fromChild[1])
        guard status == 0 else {
            close(toChild[1])
            close(fromChild[0])
            return nil
        }
        return Child(pid: pid, input: toChild[1], output: LineReader(fromChild[0]))
    }

    /// Closes this side's ends of the pipes (the child is waited for by the caller).
    func closePipes() {
        close(input)
        close(output.descriptor)
    }
}

/// Writes "keyway-lock: `text`" on standard error.
func complain(_ text: String) {
    Descriptor.printError("keyway-lock: " + text)
}
