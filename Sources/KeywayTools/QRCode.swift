import CQREncode

/// A QR code for the `otpauth://` URI an authenticator app scans (`keyway enroll totp`), drawn on a terminal or
/// written as an SVG image.
///
/// libqrencode (Debian's, the library behind the `qrencode` tool) makes the symbol, at error correction level L (a
/// screen is clean: the smallest symbol, so it fits a 24-line terminal). On a terminal it is drawn two modules per
/// character with the block characters `qrencode -t UTF8i` uses, dark modules as ink, in black on a white background
/// the code forces (`inColour`), so it reads the same on dark and light terminals. The tests compare it with
/// `qrencode`'s own output.
public enum QRCode {
    /// The modules of `text`'s symbol, row by row (true: dark), or nil when libqrencode cannot encode it.
    public static func modules(_ text: String) -> [[Bool]]? {
        guard let symbol = QRcode_encodeString(text, 0, QR_ECLEVEL_L, QR_MODE_8, 1) else { return nil }
        defer { QRcode_free(symbol) }
        let width = Int(symbol.pointee.width)
        let data = symbol.pointee.data!
        return (0..<width).map { y in (0..<width).map { x in data[y * width + x] & 1 == 1 } }
    }

    /// The lines of the QR code of `text` with a quiet zone of `margin` modules at the sides and `margin / 2` lines
    /// above and below (as `qrencode` draws it), dark modules as ink (no colours).
    public static func lines(_ text: String, margin: Int = 2) -> [String]? {
        guard let rows = modules(text) else { return nil }
        let width = rows.count
        func dark(_ x: Int, _ y: Int) -> Bool {
            guard (0..<width).contains(x), (0..<width).contains(y) else { return false }
            return rows[y][x]
        }
        let blank = String(repeating: " ", count: width + 2 * margin)
        var lines = Array(repeating: blank, count: margin / 2)
        var y = 0
        while y < width {
            var line = ""
            for x in -margin..<(width + margin) {
                switch (dark(x, y), dark(x, y + 1)) {
                case (false, false): line += " "
                case (true, false): line += "▀"
                case (false, true): line += "▄"
                case (true, true): line += "█"
                }
            }
            lines.append(line)
            y += 2
        }
        return lines + Array(repeating: blank, count: margin / 2)
    }

    /// `lines` in black on white whatever the terminal's colours (SGR 30;47 on each line, reset after it).
    public static func inColour(_ lines: [String]) -> [String] { lines.map { "\u{1B}[30;47m" + $0 + "\u{1B}[0m" } }

    /// The symbol of `text` as an SVG image, `scale` pixels a module, with a quiet zone of 4 modules.
    public static func svg(_ text: String, scale: Int = 8) -> String? {
        guard let rows = modules(text) else { return nil }
        let size = (rows.count + 8) * scale
        var svg = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"\(size)\" height=\"\(size)\">\n"
        svg += "<rect width=\"\(size)\" height=\"\(size)\" fill=\"#ffffff\"/>\n<path fill=\"#000000\" d=\""
        for (y, row) in rows.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                svg += "M\((x + 4) * scale) \((y + 4) * scale)h\(scale)v\(scale)h-\(scale)z"
            }
        }
        return svg + "\"/>\n</svg>\n"
    }
}
