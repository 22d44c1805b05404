/// A small table-driven parser: positional words, `--flag` and `--option VALUE` (or `--option=VALUE`).
/// Errors read like swift-argument-parser's: `Unknown option '--usr'. Did you mean '--user'?`
struct CommandLineParser {
    /// An option a command accepts.
    struct Option: Sendable {
        /// What the shell offers to complete an option's value with.
        enum Completion: Sendable { case none, users, groups, files, words([String]) }

        let name: String
        /// The value's name in usage text (`USER`), or nil for a flag.
        var placeholder: String? = nil
        let help: String
        /// The numbers a value may be, checked as it is parsed; nil for text.
        var range: ClosedRange<Double>? = nil
        /// Whether the number must be whole.
        var whole = true
        var completion: Completion = .none

        var takesValue: Bool { placeholder != nil }
    }

    /// What was parsed.
    struct Parsed {
        var positional: [String] = []
        var values: [String: String] = [:]
        var flags: Set<String> = []

        func value(_ name: String) -> String? { values[name] }
        func has(_ name: String) -> Bool { flags.contains(name) }
        /// Whether the option was given at all, as a flag or with a value.
        func isGiven(_ name: String) -> Bool { flags.contains(name) || values[name] != nil }
    }

    /// A usage error, reported with exit status 64.
    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    let options: [Option]

    func parse(_ words: [String]) -> Result<Parsed, UsageError> {
        var parsed = Parsed()
        var index = 0
        while index < words.count {
            let word = words[index]
            index += 1
            guard word.hasPrefix("--"), word.count > 2 else {
                parsed.positional.append(word)
                continue
            }
            let pieces = word.split(separator: "=", maxSplits: 1)
            let name = String(pieces[0])
            guard let option = options.first(where: { $0.name == name }) else {
                let suggestion = Subcommand.didYouMean(name, among: options.map(\.name))
                return .failure(UsageError(description: "Unknown option '\(name)'.\(suggestion)"))
            }
            if option.takesValue {
                let value: String
                if pieces.count == 2 {
                    value = String(pieces[1])
                } else if index < words.count {
                    value = words[index]
                    index += 1
                } else {
                    return .failure(UsageError(description: "Missing value for '\(name) <\(name.dropFirst(2))>'."))
                }
                if let problem = Self.numberProblem(value, for: option) {
                    return .failure(UsageError(description: "'\(name) \(value)': \(problem)."))
                }
                parsed.values[name] = value
            } else {
                guard pieces.count == 1 else {
                    return .failure(UsageError(description: "The flag '\(name)' takes no value."))
                }
                parsed.flags.insert(name)
            }
        }
        return .success(parsed)
    }

    /// Why `value` is not a number `option` accepts, or nil (also for options that take text).
    static func numberProblem(_ value: String, for option: Option) -> String? {
        guard let range = option.range else { return nil }
        func show(_ number: Double) -> String { number == number.rounded() ? String(Int(number)) : String(number) }
        let wanted =
            "give a \(option.whole ? "whole number" : "number") from \(show(range.lowerBound)) to \(show(range.upperBound))"
        guard let number = Double(value), number.isFinite, range.contains(number),
            !option.whole || number == number.rounded()
        else { return wanted }
        return nil
    }
}
