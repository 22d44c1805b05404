/// What sshd's configuration says about PAM, as `keyway doctor` needs it (docs/GUIDE.md, "SSH: a code after the
/// key"): whether keyboard-interactive runs PAM's auth stack, whether the password method runs it too, and which
/// methods a login needs. Read as sshd reads it (sshd_config(5)): keywords in any case, the first value given wins,
/// `Include` read in place (globs expanded by the caller), and nothing after the first `Match`, whose settings apply
/// only to some connections.
public struct SSHDConfig: Sendable, Equatable {
    /// Where a setting was given: `file:line`.
    public struct Place: Sendable, Equatable, CustomStringConvertible {
        public var file: String
        public var line: Int
        public var description: String { "\(file):\(line)" }
    }

    /// One setting's value and where it was given, or nil for sshd's default.
    public struct Setting: Sendable, Equatable {
        public var words: [String]
        public var place: Place?
    }

    /// The settings read, by lowercased keyword (first value wins).
    public private(set) var settings: [String: Setting] = [:]

    /// The most files an `Include` chain reads (sshd's own limit is 16 deep).
    static let maximumIncludes = 64

    /// Reads `text` (the file `file`); `include` gives the files an `Include` pattern names, in order, as
    /// (path, text).
    public init(text: String, file: String, include: (String) -> [(path: String, text: String)] = { _ in [] }) {
        var files = 0
        read(text, file: file, include: include, files: &files)
    }

    /// Reads one file into `settings`; false once a `Match` ends the global part.
    @discardableResult
    private mutating func read(
        _ text: String, file: String, include: (String) -> [(path: String, text: String)], files: inout Int
    ) -> Bool {
        files += 1
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.drop { $0 == " " || $0 == "\t" }
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "=" }).map(String.init)
            guard let keyword = words.first?.lowercased() else { continue }
            if keyword == "match" { return false }
            if keyword == "include" {
                for pattern in words.dropFirst() {
                    for (path, inner) in include(pattern) where files < Self.maximumIncludes {
                        if !read(inner, file: path, include: include, files: &files) { return false }
                    }
                }
                continue
            }
            if settings[keyword] == nil {
                settings[keyword] = Setting(
                    words: Array(words.dropFirst()), place: Place(file: file, line: index + 1))
            }
        }
        return true
    }

    /// A yes/no setting: its value, or `otherwise` when it is not given.
    public func flag(_ keyword: String, otherwise: Bool) -> Bool {
        guard let value = settings[keyword.lowercased()]?.words.first?.lowercased() else { return otherwise }
        return value == "yes"
    }

    /// `UsePAM` (sshd's default: no; Debian's sshd_config says yes).
    public var usesPAM: Bool { flag("UsePAM", otherwise: false) }

    /// `KbdInteractiveAuthentication` (or its older name `ChallengeResponseAuthentication`); sshd's default is yes.
    public var keyboardInteractive: Bool {
        if settings["kbdinteractiveauthentication"] != nil {
            return flag("KbdInteractiveAuthentication", otherwise: true)
        }
        return flag("ChallengeResponseAuthentication", otherwise: true)
    }

    /// `PasswordAuthentication` (default yes): with UsePAM, sshd's password method runs PAM's auth stack too.
    public var passwordMethod: Bool { flag("PasswordAuthentication", otherwise: true) }

    /// True when sshd's password method can run: allowed, and named in some method list (or none are given).
    public var passwordMethodRuns: Bool {
        passwordMethod && (methodLists.map { lists in lists.contains { $0.contains("password") } } ?? true)
    }

    /// `AuthenticationMethods`: each list a login may complete, methods in order (`keyboard-interactive:pam` is
    /// `keyboard-interactive`); nil when it is not given or is `any`: any one method that succeeds logs in.
    public var methodLists: [[String]]? {
        guard let words = settings["authenticationmethods"]?.words, words != ["any"], !words.isEmpty else {
            return nil
        }
        return words.map { list in
            list.split(separator: ",").map { String($0.split(separator: ":").first ?? $0) }
        }
    }

    /// True when every login needs a public key first and keyboard-interactive after it: Keyway's code is then a
    /// second factor, and a `required` line that refuses is the point, not a lock-out.
    public var keyThenKeyboardInteractive: Bool {
        guard let lists = methodLists else { return false }
        return lists.allSatisfy { list in
            guard let key = list.firstIndex(of: "publickey"),
                let keyboard = list.firstIndex(of: "keyboard-interactive")
            else { return false }
            return key < keyboard
        }
    }

    /// True when some login can finish without keyboard-interactive (so without Keyway's prompt): no
    /// `AuthenticationMethods` (a key alone logs in), or a list without it.
    public var loginWithoutKeyboardInteractive: Bool {
        guard let lists = methodLists else { return true }
        return lists.contains { !$0.contains("keyboard-interactive") }
    }

    /// Where `keyword` was given, for a message: `file:line`, or "sshd's default".
    public func place(of keyword: String) -> String {
        settings[keyword.lowercased()]?.place.map(\.description) ?? "sshd's default"
    }
}
