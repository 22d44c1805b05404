import KeywayCore

/// One problem found in a configuration file, reported the way a compiler reports one:
///
/// ```
/// /etc/keyway/keyway.conf.d/30-ssh.conf:4:25: error: unknown factor 'pascode'
///     require = 2 of (gesture, pascode, biometric)
///                              ^~~~~~~
/// help: did you mean 'passcode'?
/// ```
public struct Diagnostic: Sendable, Equatable, CustomStringConvertible {
    /// Error (the configuration is refused) or warning (it is used, and the warning printed).
    public enum Severity: String, Sendable { case error, warning }

    /// Error or warning.
    public var severity: Severity
    /// The file.
    public var file: String
    /// The line, from 1; 0 when the problem is the file itself (missing, not trusted).
    public var line: Int
    /// The column, from 1, counted in Unicode scalars; 0 when the problem is the whole line or file.
    public var column: Int
    /// How many scalars the problem spans (at least 1 when a column is given).
    public var length: Int
    /// What is wrong.
    public var message: String
    /// What to do about it, if something can be suggested.
    public var help: String?
    /// The line's text, shown under the message with a caret.
    public var source: String?
    /// True when the problem is a file that was named but does not exist (keyway policy check exits 66).
    public var isMissingFile = false
    /// True for a cycle between policies (kept when a referenced policy's other errors are left to its own place).
    var isCycle = false

    /// Creates a diagnostic.
    public init(
        _ severity: Severity, file: String, line: Int = 0, column: Int = 0, length: Int = 1, _ message: String,
        help: String? = nil, source: String? = nil
    ) {
        self.severity = severity
        self.file = file
        self.line = line
        self.column = column
        self.length = max(length, 1)
        self.message = message
        self.help = help
        self.source = source
    }

    /// `file:line:col: error: message`, the first line of the report (what syslog gets).
    public var headline: String {
        var place = file
        if line > 0 { place += ":\(line)" }
        if line > 0 && column > 0 { place += ":\(column)" }
        return Self.printable("\(place): \(severity.rawValue): \(message)")
    }

    /// The whole report: the headline, the line with a caret under the problem, and the help.
    public var description: String {
        var text = headline
        if let source, line > 0 {
            let shown = Self.printable(source)
            text += "\n    \(shown)"
            if column > 0 {
                text +=
                    "\n    " + String(repeating: " ", count: column - 1) + "^"
                    + String(repeating: "~", count: max(0, min(length, 200) - 1))
            }
        }
        if let help { text += "\nhelp: " + Self.printable(help) }
        return text
    }

    /// The text with control characters (a tab, an escape, C1 controls such as U+009B) shown as one `?` each, so the
    /// caret stays aligned and a hostile file (or file name) cannot drive the terminal or forge a log line.
    static func printable(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            scalars.append(scalar.value < 0x20 || (scalar.value >= 0x7F && scalar.value < 0xA0) ? "?" : scalar)
        }
        return String(scalars)
    }
}

/// Suggestions for a misspelt name.
enum Suggest {
    /// The closest candidate within a small edit distance, or nil.
    static func nearest(_ word: String, in candidates: [String]) -> String? {
        let limit = max(1, min(3, word.utf8.count / 3))
        var best: (String, Int)? = nil
        for candidate in candidates {
            let distance = EditDistance.between(Array(word.utf8), Array(candidate.utf8))
            if distance <= limit, best == nil || distance < best!.1 { best = (candidate, distance) }
        }
        return best?.0
    }

    /// "did you mean 'x'?" or nil.
    static func help(_ word: String, in candidates: [String]) -> String? {
        nearest(word, in: candidates).map { "did you mean '\($0)'?" }
    }
}

extension Diagnostic: Error {}

/// Why a configuration was refused: every error of every file, then the warnings.
public struct ConfigurationProblems: Error, Sendable, CustomStringConvertible {
    /// The diagnostics, errors first.
    public var diagnostics: [Diagnostic]

    /// Creates the list.
    public init(_ diagnostics: [Diagnostic]) { self.diagnostics = diagnostics }

    /// The errors only.
    public var errors: [Diagnostic] { diagnostics.filter { $0.severity == .error } }

    /// True when the only trouble is a named file that does not exist.
    public var isMissingFile: Bool { !errors.isEmpty && errors.allSatisfy { $0.isMissingFile } }

    /// Every report, each on its own, separated by blank lines.
    public var description: String { diagnostics.map { $0.description }.joined(separator: "\n\n") }
}
