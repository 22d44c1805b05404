extension UserContext {
    /// The longest user name accepted, in bytes (glibc's LOGIN_NAME_MAX less its terminator).
    public static let maximumNameLength = 255

    /// Why `name` cannot be an account name, or nil when it can. Refused: empty, longer than 255 bytes, a control
    /// character (a forged log line, an escape sequence), `/` or `:` (a path, a passwd field), `.` and `..`.
    /// No account can have such a name, so refusing one reveals nothing about who has enrolled. Spaces and
    /// backslashes are allowed: directory services (SSSD, winbind) give names such as `DOMAIN\john smith`.
    public static func nameProblem(_ name: String) -> String? {
        let length = name.utf8.count
        if length == 0 { return "the user name is empty" }
        if length > maximumNameLength {
            return "a user name of \(length) bytes is longer than \(maximumNameLength)"
        }
        // One pass over the bytes (keywayd checks every request's name): C0 controls and DEL are single bytes; the C1
        // controls U+0080...U+009F are 0xC2 then 0x80...0x9F in UTF-8, and no other character's encoding holds that
        // pair, since 0xC2 only ever starts a character.
        var control = false
        var separator = false
        var previous: UInt8 = 0
        for byte in name.utf8 {
            if byte < 0x20 || byte == 0x7F || (previous == 0xC2 && byte >= 0x80 && byte < 0xA0) { control = true }
            if byte == UInt8(ascii: "/") || byte == UInt8(ascii: ":") { separator = true }
            previous = byte
        }
        if control { return "the user name contains a control character" }
        if separator { return "the user name contains '/' or ':'" }
        if name == "." || name == ".." { return "the user name is '.' or '..'" }
        return nil
    }
}
