/// One logical line of a PAM service file, as libpam reads it (pam.conf(5)): the text from a `#` on is a comment,
/// blank and comment lines are skipped, and a `\` at the end of a line joins the next one.
public struct PAMLine: Sendable, Equatable {
    /// The file's name in the PAM directory (`sudo`, `common-auth`).
    public var file: String
    /// The line the entry starts on, from 1.
    public var number: Int
    /// `auth`, `account`, `password` or `session` (lowercased, without the dash), or `@include`.
    public var type: String
    /// A leading `-` on the type: libpam skips the line without a word when the module is missing.
    public var quiet: Bool
    /// The control as written: `required`, `[success=done default=ignore]`, `include`; empty for `@include`.
    public var control: String
    /// The module's path or name, or the file an include names.
    public var module: String
    /// The module's arguments (a `[...]` argument without its brackets).
    public var arguments: [String]

    /// `sudo:7`.
    public var location: String { "\(file):\(number)" }

    /// The module's file name: `pam_unix.so` for `/lib/x86_64-linux-gnu/security/pam_unix.so`.
    public var moduleName: String { String(module.split(separator: "/").last ?? "") }

    /// Whether the line runs Keyway's module, named alone or by a path.
    public var isKeyway: Bool { moduleName == "pam_keyway.so" }

    /// `include` or `substack` (lowercased), or nil for a module line and for `@include`.
    var includeKind: String? {
        let word = control.lowercased()
        return word == "include" || word == "substack" ? word : nil
    }
}

/// A module of one type's stack, or a substack with its own modules (a substack's jumps and `die` stay inside it).
public indirect enum PAMStackItem: Sendable {
    case module(PAMLine)
    case substack(PAMLine, [PAMStackItem])

    /// The line that put this item in the stack.
    public var line: PAMLine {
        switch self {
        case .module(let line), .substack(let line, _): line
        }
    }

    /// The modules in order, those of substacks in their place.
    public var modules: [PAMLine] {
        switch self {
        case .module(let line): [line]
        case .substack(_, let items): items.flatMap(\.modules)
        }
    }
}

/// The files of a PAM directory, by name, and each service's stack of one type with `@include`, `include` and
/// `substack` followed to the other files of the same directory (what libpam builds when a service starts).
public struct PAMDirectory: Sendable {
    /// The directory's path, for messages and for includes that name it absolutely.
    public let path: String
    /// Each file's contents, by name.
    public let files: [String: String]
    /// The deepest chain of includes followed (libpam's own limit for substacks is lower).
    public static let maximumDepth = 16

    /// The directory `path` holding `files`.
    public init(path: String = "/etc/pam.d", files: [String: String]) {
        self.path = path
        self.files = files
    }

    /// The files that are services: every file but backups and package managers' leftovers.
    public var services: [String] {
        files.keys.filter { name in
            !name.hasPrefix(".") && !name.hasSuffix("~")
                && ![".dpkg-", ".rpmnew", ".rpmsave", ".ucf-"].contains { name.contains($0) }
        }.sorted()
    }

    /// The lines of `file`, or an empty list when there is no such file.
    public func lines(of file: String) -> [PAMLine] {
        guard let text = files[file] else { return [] }
        return Self.lines(of: text, file: file)
    }

    /// The stack of `type` (`auth`, `account`) that service `name` runs.
    public func stack(_ name: String, type: String) -> [PAMStackItem] {
        items(of: name, type: type, visiting: [])
    }

    /// The name in this directory an include names (`common-auth`, `/etc/pam.d/common-auth`), or nil for a file
    /// elsewhere.
    public func fileName(_ included: String) -> String? {
        guard included.hasPrefix("/") else { return included }
        for directory in [path, "/etc/pam.d"] where included.hasPrefix(directory + "/") {
            return String(included.dropFirst(directory.count + 1))
        }
        return nil
    }

    func items(of file: String, type: String, visiting: [String]) -> [PAMStackItem] {
        guard visiting.count < Self.maximumDepth, !visiting.contains(file) else { return [] }
        let inner = visiting + [file]
        var items: [PAMStackItem] = []
        for line in lines(of: file) {
            if line.type == "@include" {
                items += fileName(line.module).map { self.items(of: $0, type: type, visiting: inner) } ?? []
                continue
            }
            guard line.type == type else { continue }
            switch line.includeKind {
            case "include":
                items += fileName(line.module).map { self.items(of: $0, type: type, visiting: inner) } ?? []
            case "substack":
                let nested = fileName(line.module).map { self.items(of: $0, type: type, visiting: inner) } ?? []
                items.append(.substack(line, nested))
            default:
                items.append(.module(line))
            }
        }
        return items
    }

    // MARK: Reading a file

    /// The entries of a file's text, as libpam's line assembly reads them.
    public static func lines(of text: String, file: String) -> [PAMLine] {
        var result: [PAMLine] = []
        var pending = ""
        var start = 0
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var content = Substring(raw)
            let commented = content.firstIndex(of: "#")
            if let commented { content = content[..<commented] }
            // Blank and comment-only lines are skipped, even inside a continued entry (as libpam does).
            guard content.contains(where: { !$0.isWhitespace }) else { continue }
            if pending.isEmpty { start = index + 1 }
            var trimmed = content
            while let last = trimmed.last, last.isWhitespace { trimmed = trimmed.dropLast() }
            if commented == nil, trimmed.last == "\\" {
                pending += String(trimmed.dropLast()) + " "
                continue
            }
            pending += String(content)
            if let line = entry(pending, file: file, number: start) { result.append(line) }
            pending = ""
        }
        if !pending.isEmpty, let line = entry(pending, file: file, number: start) { result.append(line) }
        return result
    }

    /// One entry's words: type, control, module and arguments; nil for an entry too short to be one.
    static func entry(_ text: String, file: String, number: Int) -> PAMLine? {
        let words = tokens(text)
        guard words.count >= 2 else { return nil }
        if words[0] == "@include" {
            return PAMLine(
                file: file, number: number, type: "@include", quiet: false, control: "", module: words[1],
                arguments: [])
        }
        guard words.count >= 3 else { return nil }
        let quiet = words[0].hasPrefix("-")
        let type = String(words[0].dropFirst(quiet ? 1 : 0)).lowercased()
        let arguments = words.dropFirst(3).map { word in
            word.hasPrefix("[") && word.hasSuffix("]") && word.count >= 2
                ? String(word.dropFirst().dropLast()).replacing("\\]", with: "]") : word
        }
        return PAMLine(
            file: file, number: number, type: type, quiet: quiet, control: words[1], module: words[2],
            arguments: Array(arguments))
    }

    /// Words split at blanks; a word that starts with `[` runs to its closing `]`, blanks included (a bracketed
    /// control, or an argument such as `[query=select … where x = 1]`; `\]` does not close it).
    static func tokens(_ text: String) -> [String] {
        var words: [String] = []
        var characters = Substring(text)
        while let first = characters.firstIndex(where: { !$0.isWhitespace }) {
            characters = characters[first...]
            var end = characters.endIndex
            if characters.first == "[" {
                var previous: Character = " "
                for index in characters.indices {
                    if characters[index] == "]" && previous != "\\" {
                        end = characters.index(after: index)
                        break
                    }
                    previous = characters[index]
                }
            } else {
                end = characters.firstIndex(where: \.isWhitespace) ?? characters.endIndex
            }
            words.append(String(characters[..<end]))
            characters = characters[end...]
        }
        return words
    }
}

/// What libpam does after a module returns a code: pam.conf(5)'s actions.
public enum PAMAction: Sendable, Equatable {
    /// The code is not counted.
    case ignore
    /// The stack fails, but goes on.
    case bad
    /// The stack fails and ends at once.
    case die
    /// The code stands unless the stack already failed.
    case ok
    /// As `ok`, and the stack ends at once.
    case done
    /// Forget what the modules above decided.
    case reset
    /// Skip the next N modules.
    case jump(Int)
}

/// A line's control: the action for each code, as libpam sets them up (`pam_handlers.c`).
public struct PAMControl: Sendable, Equatable {
    /// The control as written.
    public let text: String
    /// The actions named, by code (`success`, `auth_err`).
    let actions: [String: PAMAction]
    /// The action for every code not named.
    let fallback: PAMAction

    /// The control `text`: a keyword (`required`, `requisite`, `sufficient`, `optional`, in any case) or
    /// `[value=action ...]`, whose codes not named are `bad` unless `default=` says otherwise. An unknown keyword
    /// is read as libpam reads it, as a bracket of nothing: every code is `bad`.
    public init(_ text: String) {
        self.text = text
        let table = Self.table(text)
        actions = table.actions
        fallback = table.fallback
    }

    /// The actions a control names, and the one for every other code.
    static func table(_ text: String) -> (actions: [String: PAMAction], fallback: PAMAction) {
        switch text.lowercased() {
        case "required": (["success": .ok, "new_authtok_reqd": .ok, "ignore": .ignore], .bad)
        case "requisite": (["success": .ok, "new_authtok_reqd": .ok, "ignore": .ignore], .die)
        case "optional": (["success": .ok, "new_authtok_reqd": .ok], .ignore)
        case "sufficient": (["success": .done, "new_authtok_reqd": .done], .ignore)
        default: bracket(text)
        }
    }

    /// `[value=action ...]`: the codes not named are `bad` unless `default=` names their action.
    static func bracket(_ text: String) -> (actions: [String: PAMAction], fallback: PAMAction) {
        var named: [String: PAMAction] = [:]
        let inside = text.hasPrefix("[") ? text.dropFirst().prefix { $0 != "]" } : ""
        for pair in inside.split(whereSeparator: \.isWhitespace) {
            let parts = pair.split(separator: "=", maxSplits: 1).map { $0.lowercased() }
            guard parts.count == 2, let found = Self.action(parts[1]) else { continue }
            named[parts[0]] = found
        }
        let fallback = named.removeValue(forKey: "default") ?? .bad
        return (named, fallback)
    }

    /// The action for a return code (`auth_err`).
    public func action(for code: String) -> PAMAction { actions[code] ?? fallback }

    static func action(_ word: String) -> PAMAction? {
        switch word {
        case "ignore": .ignore
        case "bad": .bad
        case "die": .die
        case "ok": .ok
        case "done": .done
        case "reset": .reset
        default: Int(word).flatMap { $0 > 0 ? PAMAction.jump($0) : nil }
        }
    }
}
