import Glibc
import KeywayCore
import KeywayTools

/// The person at the terminal (prompts on /dev/tty with echo off), or lines from standard input with `--stdin`.
final class TerminalConversation: Conversation {
    private let fromStandardInput: Bool
    private let quiet: Bool

    init(fromStandardInput: Bool, quiet: Bool = false) {
        self.fromStandardInput = fromStandardInput
        self.quiet = quiet
    }

    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        let text = prompt.textWithFallback
        let line: Secret?
        if fromStandardInput {
            line = Self.readLine(from: 0)
        } else {
            let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
            guard tty >= 0 else {
                throw AuthenticationError(.notInteractive, "no terminal to ask on; use --stdin to read from input")
            }
            defer { close(tty) }
            _ = text.withCString { write(tty, $0, strlen($0)) }
            var saved = termios()
            let isTerminal = tcgetattr(tty, &saved) == 0
            if isTerminal && !prompt.echo {
                var silent = saved
                silent.c_lflag &= ~tcflag_t(ECHO)
                tcsetattr(tty, TCSAFLUSH, &silent)
            }
            line = Self.readLine(from: tty)
            if isTerminal && !prompt.echo {
                tcsetattr(tty, TCSAFLUSH, &saved)
                _ = write(tty, "\n", 1)
            }
        }
        guard let line else { return .cancel }
        if line.isEmpty && prompt.fallbackLabel != nil { return .fallback }
        return .secret(line)
    }

    func tell(_ message: Message) {
        guard !quiet else { return }
        Self.show(message)
    }

    var showsSecrets: Bool { Self.showsSecrets }

    /// Secrets are written to standard error only while it is a terminal, where the person reads them and no file or
    /// log (sudo's I/O log keeps what a terminal shows only when asked to) keeps them.
    static var showsSecrets: Bool { isatty(2) == 1 }

    /// Writes `message` to standard error, drawn as a QR code first when it is scannable (`Message.scannable`). A
    /// secret is written only to a terminal; elsewhere a line says it was withheld.
    static func show(_ message: Message) {
        if message.isSecret && !showsSecrets {
            let withheld = "(a secret is shown only on a terminal; standard error is not one)\n"
            _ = withheld.withCString { write(2, $0, strlen($0)) }
            return
        }
        var text = message.text + "\n"
        if message.isScannable, let code = QRCode.lines(message.text) {
            text = code.joined(separator: "\n") + "\n" + text
        }
        _ = text.withCString { write(2, $0, strlen($0)) }
    }

    /// Reads one line (without its newline) byte by byte into a wiped buffer; nil at end of input.
    static func readLine(from descriptor: Int32) -> Secret? {
        let capacity = 4096
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
        defer {
            secureZero(buffer)
            buffer.deallocate()
        }
        var count = 0
        var sawAnything = false
        while count < capacity {
            var byte: UInt8 = 0
            let got = read(descriptor, &byte, 1)
            if got <= 0 { break }
            sawAnything = true
            if byte == UInt8(ascii: "\n") { break }
            buffer[count] = byte
            count += 1
        }
        guard sawAnything else { return nil }
        if count > 0 && buffer[count - 1] == UInt8(ascii: "\r") { count -= 1 }
        return Secret(copying: UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
    }
}
