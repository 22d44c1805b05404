import Glibc
import KeywayCore
import KeywayPlatform
import KeywayTools

/// The person at the terminal (prompts on /dev/tty with echo off), or lines from standard input with `--stdin`.
final class TerminalConversation: Conversation {
    private let fromStandardInput: Bool
    private let quiet: Bool
    /// Where a QR code goes as an SVG image instead of the terminal (`--qr-file`).
    private let qrFile: String?

    init(fromStandardInput: Bool, quiet: Bool = false, qrFile: String? = nil) {
        self.fromStandardInput = fromStandardInput
        self.quiet = quiet
        self.qrFile = qrFile
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
            Descriptor.write(text, to: tty)
            let silent = prompt.echo ? nil : RawTerminal(tty)
            silent?.enter(.silent, flush: true)
            line = Self.readLine(from: tty)
            if let silent {
                silent.restore(flush: true)
                Descriptor.write("\n", to: tty)
            }
        }
        guard let line else { return .cancel }
        if line.isEmpty && prompt.fallbackLabel != nil { return .fallback }
        return .secret(line)
    }

    func tell(_ message: Message) {
        guard !quiet else { return }
        Self.show(message, qrFile: qrFile)
    }

    var showsSecrets: Bool { Self.showsSecrets }

    /// Secrets are written to standard error only while it is a terminal, where the person reads them and no file or
    /// log (sudo's I/O log keeps what a terminal shows only when asked to) keeps them.
    static var showsSecrets: Bool { isatty(2) == 1 }

    /// Writes `message` to standard error, drawn as a QR code first when it is scannable (`Message.scannable`). A
    /// secret is written only to a terminal; elsewhere a line says it was withheld.
    static func show(_ message: Message, qrFile: String? = nil) {
        if message.isSecret && !showsSecrets {
            Descriptor.printError("(a secret is shown only on a terminal; standard error is not one)")
            return
        }
        var text = message.text + "\n"
        if message.isScannable {
            text = scannable(message.text, qrFile: qrFile)
        }
        Descriptor.write(text, to: 2)
    }

    /// A scannable text as the terminal can show it: its QR code in black on white when it fits the window with 3
    /// lines to spare (the line above it, the key and the prompt below), then the text itself when that fits too;
    /// or, with `qrFile`, the code written there as an SVG image (0600, new: it holds the secret).
    static func scannable(_ text: String, qrFile: String?) -> String {
        if let qrFile {
            guard let svg = QRCode.svg(text) else { return text + "\n" }
            let fd = open(qrFile, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard fd >= 0 else {
                return "(the QR code could not be written to \(qrFile): \(String(cString: strerror(errno))))\n\(text)\n"
            }
            let written = Descriptor.write(svg, to: fd)
            close(fd)
            guard written else { return "(the QR code could not be written to \(qrFile))\n\(text)\n" }
            return "The QR code is in \(qrFile) (an SVG image, mode 0600): it holds the secret, so delete it once "
                + "it is scanned.\n"
        }
        var size = winsize()
        let rows = ioctl(2, UInt(TIOCGWINSZ), &size) == 0 && size.ws_row > 0 ? Int(size.ws_row) : 24
        let columns = ioctl(2, UInt(TIOCGWINSZ), &size) == 0 && size.ws_col > 0 ? Int(size.ws_col) : 80
        if let code = QRCode.lines(text, margin: 2), code.count + 3 <= rows, code.allSatisfy({ $0.count <= columns }) {
            let wrapped = (text.count + columns - 1) / columns
            let shown = code.count + 3 + wrapped <= rows ? text + "\n" : ""
            return QRCode.inColour(code).joined(separator: "\n") + "\n" + shown
        }
        let needed = QRCode.lines(text, margin: 2)?.count ?? 0
        return "(the QR code needs \(needed + 3) lines and this terminal has \(rows): enlarge it, or run again with "
            + "--qr-file FILE to have it written as an image)\n\(text)\n"
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
