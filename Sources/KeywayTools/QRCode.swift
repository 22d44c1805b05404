import CQREncode

/// A QR code drawn on a terminal, for the `otpauth://` URI an authenticator app scans (`keyway enroll totp`).
///
/// libqrencode (Debian's, the library behind the `qrencode` tool) makes the symbol; this draws it two modules per
/// character with the block characters `qrencode -t UTF8` uses, light modules as ink, so that it reads on the dark
/// terminals most people use, with a quiet zone of `margin` modules. The tests compare it with `qrencode`'s own output.
public enum QRCode {
    /// The lines of the QR code of `text` (error correction level M), or nil when libqrencode cannot encode it.
    public static func lines(_ text: String, margin: Int = 2) -> [String]? {
        guard let symbol = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1) else { return nil }
        defer { QRcode_free(symbol) }
        let width = Int(symbol.pointee.width)
        let data = symbol.pointee.data!
        func dark(_ x: Int, _ y: Int) -> Bool {
            guard (0..<width).contains(x), (0..<width).contains(y) else { return false }
            return data[y * width + x] & 1 == 1
        }
        var lines: [String] = []
        var y = -margin
        while y < width + margin {
            var line = ""
            for x in -margin..<(width + margin) {
                switch (dark(x, y), dark(x, y + 1)) {
                case (false, false): line += "█"
                case (false, true): line += "▀"
                case (true, false): line += "▄"
                case (true, true): line += " "
                }
            }
            lines.append(line)
            y += 2
        }
        return lines
    }
}
