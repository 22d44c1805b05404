/// What sshd's configuration says about PAM, as `keyway doctor` needs it (docs/GUIDE.md, "SSH: a code after the
/// key"): whether keyboard-interactive runs PAM's auth stack, whether the password method runs it too, and which
/// methods a login needs. Read as sshd reads it (sshd_config(5)): keywords in any case, the first value given wins,
/// `Include` read in place (globs expanded by the caller), and nothing after the first `Match`, whose settings apply
/// only to some connections (its place is kept: `firstMatch`). `sshd -T` prints the same form, so an account's
/// settings with every `Match` applied are read by the same parser.
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

    /// The settings read, by lowercased keyword (first value wins, but for `lists`).
    public private(set) var settings: [String: Setting] = [:]
    /// Where the first `Match` begins: what follows applies to some connections only, and is not read here
    /// (`keyway doctor` asks `sshd -T -C` per account instead).
    public private(set) var firstMatch: Place?

    /// Keywords whose every line adds to one list, as sshd reads them (and `sshd -T` prints one entry a line).
    static let lists: Set<String> = ["allowusers", "denyusers", "allowgroups", "denygroups"]

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
            if keyword == "match" {
                firstMatch = Place(file: file, line: index + 1)
                return false
            }
            if keyword == "include" {
                for pattern in words.dropFirst() {
                    for (path, inner) in include(pattern) where files < Self.maximumIncludes {
                        if !read(inner, file: path, include: include, files: &files) { return false }
                    }
                }
                continue
            }
            if Self.lists.contains(keyword), let given = settings[keyword] {
                settings[keyword]?.words = given.words + words.dropFirst()
            } else if settings[keyword] == nil {
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

    /// True when every login runs PAM's auth stack: UsePAM, and every `AuthenticationMethods` list names
    /// keyboard-interactive (allowed) or the password method. Then an account Keyway refuses has no way in; otherwise
    /// a key alone logs in and Keyway is never asked.
    public var everyLoginRunsPAM: Bool {
        guard usesPAM, let lists = methodLists else { return false }
        return lists.allSatisfy { list in
            (keyboardInteractive && list.contains("keyboard-interactive"))
                || (passwordMethod && list.contains("password"))
        }
    }

    /// Whether sshd lets `user` log in at all, as its `PermitRootLogin`, `DenyUsers`, `AllowUsers`, `DenyGroups` and
    /// `AllowGroups` say (sshd_config(5)). A `user@host` pattern is taken to match any host, and a group pattern with
    /// wildcards to match no group: what cannot be told from here counts the account in, so that `keyway doctor`
    /// never leaves out someone who could be refused. `isMember(group)` is nil when membership cannot be told.
    public func admits(_ user: String, isMember: (String) -> Bool?) -> Bool {
        if user == "root", settings["permitrootlogin"]?.words.first?.lowercased() == "no" { return false }
        func names(_ keyword: String) -> [String] { settings[keyword]?.words ?? [] }
        func userMatches(_ pattern: String) -> Bool {
            Self.matches(String(pattern.split(separator: "@", maxSplits: 1).first ?? ""), user)
        }
        if names("denyusers").contains(where: { !$0.contains("@") && userMatches($0) }) { return false }
        if !names("allowusers").isEmpty, !names("allowusers").contains(where: userMatches) { return false }
        let plain = { (group: String) in !group.contains("*") && !group.contains("?") }
        if names("denygroups").contains(where: { plain($0) && isMember($0) == true }) { return false }
        let allowed = names("allowgroups")
        if !allowed.isEmpty, !allowed.contains(where: { !plain($0) || isMember($0) != false }) { return false }
        return true
    }

    /// sshd's pattern matching of a name: `*` any run of characters, `?` any one.
    static func matches(_ pattern: String, _ name: String) -> Bool {
        func match(_ pattern: Substring, _ name: Substring) -> Bool {
            guard let first = pattern.first else { return name.isEmpty }
            if first == "*" {
                var rest = name
                while true {
                    if match(pattern.dropFirst(), rest) { return true }
                    guard !rest.isEmpty else { return false }
                    rest = rest.dropFirst()
                }
            }
            guard let head = name.first, first == "?" || first == head else { return false }
            return match(pattern.dropFirst(), name.dropFirst())
        }
        return match(pattern[...], name[...])
    }

    /// Where `keyword` was given, for a message: `file:line`, or "sshd's default".
    public func place(of keyword: String) -> String {
        settings[keyword.lowercased()]?.place.map(\.description) ?? "sshd's default"
    }
}
