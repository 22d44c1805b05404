/// One setting a factor plugin declares: its key, type and range, default and one line of help.
///
/// Plugins declare their settings; the configuration parser checks values against the declarations, did-you-mean
/// suggestions and keyway.conf(5) come from the same list, and a new plugin adds keys without touching the parser
/// (docs/ARCHITECTURE.md §11).
public struct Setting: Sendable {
    /// The key, as written in `[factor]` sections and as `factor.key` in a policy.
    public let key: String
    /// What values it takes.
    public let kind: Kind
    /// The value when nothing sets it.
    public let defaultValue: Value
    /// One line for keyway.conf(5) and `keyway policy show`.
    public let help: String
    /// Whether a policy may override it (`gesture.attempts = 5` in a `[policy …]` section).
    public let perPolicy: Bool
    /// Where it is enforced: the client (prompts, composition) or keywayd (anything a process running as the user
    /// must not be able to relax).
    public let enforcedBy: Enforcer

    /// What values a setting takes.
    public enum Kind: Sendable, Equatable {
        /// A whole number in the range.
        case integer(ClosedRange<Int>)
        /// `yes`/`no` (also `true`/`false`, `on`/`off`, `1`/`0`).
        case boolean
        /// A duration in milliseconds in the range (`500ms 30s 5m 72h 2d`); `off` too when `offAllowed`.
        case duration(ClosedRange<Int64>, offAllowed: Bool)
        /// One of the words.
        case choice([String])
        /// A rate written `1/N`, N in the range.
        case rate(ClosedRange<Int>)
        /// A word of 1 to `maxLength` printable ASCII characters, no spaces or quotes (a relying party id).
        case word(maxLength: Int)
    }

    /// Who enforces a setting.
    public enum Enforcer: String, Sendable { case client, daemon }

    /// A setting's value.
    public enum Value: Sendable, Equatable, CustomStringConvertible {
        case integer(Int)
        case boolean(Bool)
        /// Milliseconds, or nil for `off`.
        case duration(Int64?)
        case choice(String)
        /// `1/N`.
        case rate(Int)
        case word(String)

        /// The value as a configuration file writes it; parsing it gives the same value.
        public var description: String {
            switch self {
            case .integer(let value): "\(value)"
            case .boolean(let value): value ? "yes" : "no"
            case .duration(nil): "off"
            case .duration(let milliseconds?): Setting.format(milliseconds: milliseconds)
            case .choice(let word): word
            case .rate(let denominator): "1/\(denominator)"
            case .word(let word): word
            }
        }
    }

    /// Declares a setting.
    public init(
        _ key: String, _ kind: Kind, default defaultValue: Value, perPolicy: Bool = false,
        enforcedBy: Enforcer = .client, help: String
    ) {
        self.key = key
        self.kind = kind
        self.defaultValue = defaultValue
        self.help = help
        self.perPolicy = perPolicy
        self.enforcedBy = enforcedBy
    }

    /// The per-evaluation attempt limit every factor has.
    public static func attempts(default count: Int = 3) -> Setting {
        Setting(
            "attempts", .integer(1...20), default: .integer(count), perPolicy: true,
            help: "counted failures allowed in one evaluation before the policy moves on")
    }

    /// `timeout` of a presented factor: how long one wait at its device lasts (`waiting`: "at the sensor", "for a
    /// touch").
    public static func deviceTimeout(waiting: String) -> Setting {
        Setting(
            "timeout", .duration(1000...600_000, offAllowed: false), default: .duration(30_000), perPolicy: true,
            help: "how long to wait \(waiting) before the policy moves on")
    }

    /// `remote` of a presented factor: whether a remote session may use this machine's `device` (someone at the
    /// machine touches it), off by default.
    public static func remote(device: String) -> Setting {
        Setting(
            "remote", .choice(["deny", "allow"]), default: .choice("deny"),
            help: "deny: a remote session never uses this machine's \(device); allow: it may (someone at the machine "
                + "touches it)")
    }

    /// `hash-passes`: Argon2id's passes over memory (t) for the secrets a knowledge factor stores. Enforced by
    /// keywayd, which hashes; verification reads the cost from each stored hash, so a change applies to new
    /// enrollments and changes only. `keyway calibrate` proposes a value for this machine.
    public static func hashPasses(default passes: Int = 3) -> Setting {
        Setting(
            "hash-passes", .integer(1...10), default: .integer(passes), enforcedBy: .daemon,
            help: "Argon2id passes over memory for patterns and passcodes set from now on "
                + "(those already stored keep their own cost; keyway calibrate proposes one)")
    }

    /// `hash-memory`: Argon2id's memory in MiB for the secrets a knowledge factor stores (see `hashPasses`).
    public static func hashMemory(default mebibytes: Int = 64) -> Setting {
        Setting(
            "hash-memory", .integer(8...4096), default: .integer(mebibytes), enforcedBy: .daemon,
            help: "Argon2id memory in MiB for each hash of a pattern or passcode set from now on; each of "
                + "keywayd's workers may use this much at once")
    }

    /// What the values look like, for messages and the manual: "a whole number from 4 to 9".
    public var expected: String {
        switch kind {
        case .integer(let range): "a whole number from \(range.lowerBound) to \(range.upperBound)"
        case .boolean: "yes or no"
        case .duration(let range, let offAllowed):
            "a duration from \(Self.format(milliseconds: range.lowerBound)) to "
                + "\(Self.format(milliseconds: range.upperBound)) (e.g. 500ms, 30s, 5m, 72h, 2d)"
                + (offAllowed ? ", or off" : "")
        case .choice(let words): Self.list(words)
        case .rate(let range): "1/N with N from \(range.lowerBound) to \(range.upperBound)"
        case .word(let maxLength): "1 to \(maxLength) printable characters without spaces or quotes"
        }
    }

    /// Parses `text` as this setting's value; the failure says what was expected.
    public func parse(_ text: String) -> Result<Value, SettingError> {
        let bad = SettingError("'\(text)' is not valid for \(key): expected \(expected)")
        switch kind {
        case .integer(let range):
            guard let number = Self.wholeNumber(text) else { return .failure(bad) }
            guard range.contains(number) else {
                return .failure(SettingError("\(key) = \(text) is out of range: expected \(expected)"))
            }
            return .success(.integer(number))
        case .boolean:
            switch text {
            case "yes", "true", "on", "1": return .success(.boolean(true))
            case "no", "false", "off", "0": return .success(.boolean(false))
            default: return .failure(bad)
            }
        case .duration(let range, let offAllowed):
            if text == "off" && offAllowed { return .success(.duration(nil)) }
            guard let milliseconds = Self.milliseconds(text) else { return .failure(bad) }
            guard range.contains(milliseconds) else {
                return .failure(SettingError("\(key) = \(text) is out of range: expected \(expected)"))
            }
            return .success(.duration(milliseconds))
        case .choice(let words):
            guard words.contains(text) else { return .failure(bad) }
            return .success(.choice(text))
        case .rate(let range):
            guard text.hasPrefix("1/"), let denominator = Self.wholeNumber(String(text.dropFirst(2))) else {
                return .failure(bad)
            }
            guard range.contains(denominator) else {
                return .failure(SettingError("\(key) = \(text) is out of range: expected \(expected)"))
            }
            return .success(.rate(denominator))
        case .word(let maxLength):
            let bytes = Array(text.utf8)
            guard (1...maxLength).contains(bytes.count),
                bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "'") })
            else { return .failure(bad) }
            return .success(.word(text))
        }
    }

    /// A decimal whole number without sign or spaces, at most 9 digits.
    static func wholeNumber(_ text: String) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int(text)
    }

    /// `500ms`, `30s`, `5m`, `72h`, `2d` (one number, one unit) in milliseconds.
    static func milliseconds(_ text: String) -> Int64? {
        let bytes = Array(text.utf8)
        let count = bytes.prefix { $0 >= 48 && $0 <= 57 }.count
        guard let number = wholeNumber(String(decoding: bytes[..<count], as: UTF8.self)) else { return nil }
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        let unit = String(decoding: bytes[count...], as: UTF8.self)
        guard let scale = units.first(where: { $0.0 == unit })?.1 else { return nil }
        return Int64(number) * scale
    }

    /// The largest unit that writes `milliseconds` exactly.
    public static func format(milliseconds: Int64) -> String {
        let units: [(String, Int64)] = [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)]
        for (unit, scale) in units where milliseconds >= scale && milliseconds % scale == 0 {
            return "\(milliseconds / scale)\(unit)"
        }
        return "\(milliseconds)ms"
    }

    /// "a, b or c".
    public static func list(_ words: [String]) -> String {
        guard words.count > 1 else { return words.first ?? "" }
        return words.dropLast().joined(separator: ", ") + " or " + words[words.count - 1]
    }
}

/// Why a value was refused.
public struct SettingError: Error, Sendable, Equatable {
    /// The message, naming the key, the value and what was expected.
    public let message: String
    /// Creates an error.
    public init(_ message: String) { self.message = message }
}

/// The values of one factor's settings; a setting not given has its default.
public struct FactorSettings: Sendable, Equatable {
    private var values: [String: Setting.Value]

    /// Settings with the given values.
    public init(_ values: [String: Setting.Value] = [:]) { self.values = values }

    /// The value, or the setting's default.
    public subscript(setting: Setting) -> Setting.Value { values[setting.key] ?? setting.defaultValue }

    /// Sets a value.
    public mutating func set(_ key: String, _ value: Setting.Value) { values[key] = value }

    /// True when the value was given (not the default).
    public func isSet(_ key: String) -> Bool { values[key] != nil }

    /// An integer setting's value.
    public func integer(_ setting: Setting) -> Int {
        if case .integer(let value) = self[setting] { return value }
        if case .integer(let value) = setting.defaultValue { return value }
        return 0
    }

    /// A boolean setting's value.
    public func boolean(_ setting: Setting) -> Bool {
        if case .boolean(let value) = self[setting] { return value }
        if case .boolean(let value) = setting.defaultValue { return value }
        return false
    }

    /// A duration setting's value, nil for `off`.
    public func duration(_ setting: Setting) -> Duration? {
        if case .duration(let value) = self[setting] { return value.map { .milliseconds($0) } }
        if case .duration(let value) = setting.defaultValue { return value.map { .milliseconds($0) } }
        return nil
    }

    /// A choice setting's word.
    public func choice(_ setting: Setting) -> String {
        if case .choice(let word) = self[setting] { return word }
        if case .choice(let word) = setting.defaultValue { return word }
        return ""
    }

    /// A word setting's word.
    public func word(_ setting: Setting) -> String {
        if case .word(let word) = self[setting] { return word }
        if case .word(let word) = setting.defaultValue { return word }
        return ""
    }

    /// A rate setting's N in 1/N.
    public func rate(_ setting: Setting) -> Int {
        if case .rate(let value) = self[setting] { return value }
        if case .rate(let value) = setting.defaultValue { return value }
        return 1
    }
}

/// The settings of every factor, by factor.
public struct SettingsBook: Sendable, Equatable {
    private var factors: [FactorKind: FactorSettings]

    /// Settings, all defaults unless given.
    public init(_ factors: [FactorKind: FactorSettings] = [:]) { self.factors = factors }

    /// One factor's settings.
    public subscript(factor: FactorKind) -> FactorSettings {
        get { factors[factor] ?? FactorSettings() }
        set { factors[factor] = newValue }
    }
}
