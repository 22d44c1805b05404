import KeywayCore
import KeywayFactors
import KeywayRuntime

/// One `keyway` subcommand as data: its words, summary, operands, options and what it runs. Dispatch, `--help`,
/// usage errors with did-you-mean, `keyway help --synopsis` (checked against keyway(8) by a test) and the bash
/// completion all come from the list in `Subcommand.all`, so none of them can drift from the others
/// (docs/ARCHITECTURE.md §13, "commands as types").
struct Subcommand: Sendable {
    /// A word the command takes after its name.
    struct Operand: Sendable {
        /// What the word may be.
        enum Kind: Sendable {
            /// A factor's name or alias; `only` narrows the factors the command accepts.
            case factor(only: [FactorKind]?)
            /// One of these words.
            case choice([String])
            /// Any word (a policy's name).
            case word
            /// Every remaining word (the sensor's event and its arguments).
            case rest
        }

        let placeholder: String
        let kind: Kind
        var optional = false
        /// Words the shell offers for it besides those its kind implies (the sensor's events).
        var suggestions: [String] = []
    }

    /// The command's words: `["enroll"]`, `["policy", "show"]`.
    let path: [String]
    /// Other words that name the same command (`policies` for `policy list`).
    var aliases: [[String]] = []
    /// One line, for the usage and the completion.
    let summary: String
    var operands: [Operand] = []
    /// The options of this command besides the global ones.
    var options: [CommandLineParser.Option] = []
    /// Options the command cannot run without.
    var required: Set<String> = []
    /// Shown by `--help` under the synopsis: what a person must know beyond the summary.
    var details: String = ""
    /// Runs the parsed command and returns its exit status.
    let run: @Sendable (Command) -> Int32

    var name: String { path.joined(separator: " ") }

    /// `keyway enroll gesture|passcode|biometric --user USER [--stdin] …`, as keyway(8) and `--help` show it.
    var synopsis: String {
        var words = ["keyway"] + path
        for operand in operands {
            let shown: String
            switch operand.kind {
            case .factor(let only): shown = (only ?? Factors.all.map(\.kind)).map(\.rawValue).joined(separator: "|")
            case .choice(let choices): shown = choices.joined(separator: "|")
            case .word: shown = operand.placeholder
            case .rest: shown = operand.placeholder + " ..."
            }
            words.append(operand.optional ? "[\(shown)]" : shown)
        }
        for option in options {
            let shown = option.placeholder.map { "\(option.name) \($0)" } ?? option.name
            words.append(required.contains(option.name) ? shown : "[\(shown)]")
        }
        return words.joined(separator: " ")
    }

    /// What `keyway COMMAND --help` prints.
    var help: String {
        var lines = ["usage: \(synopsis)", "", summary]
        if !details.isEmpty { lines += ["", details] }
        let shown = options + Subcommand.globalOptions
        let width = shown.map { $0.usage.count }.max() ?? 0
        lines += ["", "options:"]
        for option in shown {
            lines.append("  \(option.usage.padded(to: width))  \(option.help)")
        }
        return lines.joined(separator: "\n")
    }

    /// The options every command takes.
    static let globalOptions: [CommandLineParser.Option] = [
        .init(
            name: "--socket", placeholder: "PATH", help: "keywayd's socket (default /run/keyway/keywayd.sock)",
            completion: .files),
        .init(
            name: "--store", placeholder: "PATH|URI",
            help: "work on this store (a file, or a postgresql:// URI) directly, not through keywayd (root)",
            completion: .files),
        .init(
            name: "--passfile", placeholder: "FILE",
            help: "a PostgreSQL store's password file (default /etc/keyway/pgpass)", completion: .files),
        .init(
            name: "--sensor", placeholder: "DIR", help: "the simulated sensor's directory (default /run/keyway/sensor)",
            completion: .files),
        .init(
            name: "--config", placeholder: "FILE", help: "the configuration (default /etc/keyway/keyway.conf)",
            completion: .files),
        .init(name: "--help", help: "show this help"),
    ]
}

extension CommandLineParser.Option {
    /// `--user USER` or `--stdin`.
    var usage: String { placeholder.map { "\(name) \($0)" } ?? name }
}

extension String {
    func padded(to width: Int) -> String { self + String(repeating: " ", count: max(0, width - count)) }
}

// MARK: Finding the command

extension Subcommand {
    /// What the words on the command line name.
    enum Match {
        case command(Subcommand, operands: [String])
        case help
        case problem(String)
    }

    /// The command named by the leading positional words: the longest path (or alias) that matches, so that
    /// `sensor roc` is not the sensor event `roc`.
    static func match(_ positional: [String], in commands: [Subcommand] = all) -> Match {
        guard let first = positional.first else { return .help }
        var best: (Subcommand, Int)?
        for command in commands {
            for path in [command.path] + command.aliases
            where path.count <= positional.count && Array(positional.prefix(path.count)) == path
                && path.count > (best?.1 ?? 0)
            {
                best = (command, path.count)
            }
        }
        if let (command, length) = best { return .command(command, operands: Array(positional.dropFirst(length))) }
        // A group (`policy`) without a command that is its own: name what may follow.
        let group = commands.filter { $0.path.count > 1 && $0.path[0] == first }.map { $0.path[1] }
        if !group.isEmpty {
            guard positional.count > 1 else {
                return .problem("Missing the \(first) command: \(Setting.list(group)).")
            }
            return .problem("Unknown \(first) command '\(positional[1])'." + didYouMean(positional[1], among: group))
        }
        let names = Set(commands.map { $0.path[0] } + commands.flatMap { $0.aliases.map { $0[0] } })
        return .problem("Unknown command '\(first)'." + didYouMean(first, among: names.sorted()))
    }

    /// " Did you mean 'x'?" for the nearest of `candidates` within 3 edits, or "".
    static func didYouMean(_ word: String, among candidates: [String]) -> String {
        let near = candidates.min { EditDistance.between($0, word) < EditDistance.between($1, word) }
        guard let near, EditDistance.between(near, word) <= 3 else { return "" }
        return " Did you mean '\(near)'?"
    }

    /// Every option any command takes, so that the first pass knows which words are option values.
    static var everyOption: [CommandLineParser.Option] {
        var seen = Set<String>()
        return (globalOptions + all.flatMap(\.options)).filter { seen.insert($0.name).inserted }
    }

    /// Checks the operands' count and kinds and the options this command takes; the usage error, or nil.
    func problem(operands given: [String], parsed: CommandLineParser.Parsed) -> String? {
        let own = Set((options + Subcommand.globalOptions).map(\.name))
        for name in parsed.values.keys.sorted() + parsed.flags.sorted() where !own.contains(name) {
            return "'keyway \(self.name)' takes no option '\(name)'."
                + Subcommand.didYouMean(name, among: options.map(\.name))
        }
        for (index, operand) in operands.enumerated() {
            guard index < given.count else {
                if operand.optional { break }
                switch operand.kind {
                case .factor(let only):
                    let names = (only ?? Factors.all.map(\.kind)).map(\.rawValue)
                    return "Missing the factor: \(Setting.list(names))."
                case .choice(let choices):
                    return "Missing the \(operand.placeholder.lowercased()): \(Setting.list(choices))."
                case .word, .rest: return "Missing the \(operand.placeholder.lowercased()): \(synopsis)."
                }
            }
            let word = given[index]
            switch operand.kind {
            case .factor(let only):
                guard let plugin = Factors.all.plugin(named: word) else {
                    let names = (only ?? Factors.all.map(\.kind)).map(\.rawValue)
                    return "Unknown factor '\(word.escapingControlCharacters)'; use \(Setting.list(names))."
                }
                if let only, !only.contains(plugin.kind) {
                    return
                        "'keyway \(self.name)' does not apply to the \(plugin.kind); use \(Setting.list(only.map(\.rawValue)))."
                }
            case .choice(let choices):
                guard choices.contains(word) else {
                    return "Unknown \(operand.placeholder.lowercased()) '\(word.escapingControlCharacters)'; use "
                        + "\(Setting.list(choices))." + Subcommand.didYouMean(word, among: choices)
                }
            case .word, .rest: break
            }
        }
        let takesRest = operands.last.map { if case .rest = $0.kind { true } else { false } } ?? false
        if !takesRest && given.count > operands.count {
            return "Unexpected argument '\(given[operands.count].escapingControlCharacters)' for 'keyway \(name)'."
        }
        for name in required.sorted() where parsed.value(name) == nil {
            let option = options.first { $0.name == name }
            return "Missing '\(name) <\(option?.placeholder?.lowercased() ?? "value")>'."
        }
        return nil
    }
}
