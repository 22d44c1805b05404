extension String {
    /// The text safe to put on one line of a log or a terminal: control characters (C0, DEL and C1, which start
    /// terminal escape sequences and line breaks) are written as `\xNN`, and a backslash as `\\`, so the escaped
    /// form of one name can never look like another's. A user name typed at a login prompt must not be able to
    /// forge a log line or a `keyway status` line, nor send escape sequences to root's terminal.
    public var escapingControlCharacters: String {
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
}
