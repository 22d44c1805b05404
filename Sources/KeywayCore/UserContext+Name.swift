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
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F..<0xA0).contains($0.value) }) {
            return "the user name contains a control character"
        }
        if name.contains("/") || name.contains(":") { return "the user name contains '/' or ':'" }
        if name == "." || name == ".." { return "the user name is '.' or '..'" }
        return nil
    }
}
