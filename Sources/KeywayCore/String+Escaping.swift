extension String {
    /// The text safe to put on one line of a log or a terminal: control characters (C0, DEL and C1, which start
    /// terminal escape sequences and line breaks) are written as `\xNN`, and a backslash as `\\`, so the escaped
    /// form of one name can never look like another's. A user name typed at a login prompt must not be able to
    /// forge a log line or a `keyway status` line, nor send escape sequences to root's terminal.
    public var escapingControlCharacters: String {
        // Nearly every line has nothing to escape: one pass over the bytes then returns the text as it is, where
        // rebuilding it scalar by scalar cost a log line of the module 33,000 instructions.
        guard needsEscaping else { return self }
        var safe = ""
        safe.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            switch scalar.value {
            case 0x00..<0x20, 0x7F..<0xA0:
                let hex = String(scalar.value, radix: 16)
                safe += "\\x" + (hex.count == 1 ? "0" + hex : hex)
            case 0x5C:
                safe += "\\\\"
            default:
                safe.unicodeScalars.append(scalar)
            }
        }
        return safe
    }

    /// Whether any byte is C0, DEL or a backslash, or any scalar is C1 (U+0080–U+009F: 0xC2 then 0x80–0x9F in
    /// UTF-8; 0xC2 is only ever a lead byte, and a String is always valid UTF-8).
    private var needsEscaping: Bool {
        var previous: UInt8 = 0
        for byte in utf8 {
            if byte < 0x20 || byte == 0x7F || byte == 0x5C || (previous == 0xC2 && byte < 0xA0) { return true }
            previous = byte
        }
        return false
    }
}
