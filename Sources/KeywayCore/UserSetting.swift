/// A per-user switch (`keyway enable|disable FACTOR`, `keyway set KEY on|off`): the settings screen of a phone,
/// kept by keywayd in the store beside the enrollments. Declared as data by the plugins, as the configuration's
/// settings are (docs/ARCHITECTURE.md §11): every factor has `enabled`; a plugin adds its own (`show-trail`).
public struct UserSetting: Sendable, Equatable {
    /// The factor it belongs to.
    public let factor: FactorKind
    /// The name within the factor (`enabled`, `show-trail`).
    public let name: String
    /// One line for `keyway set --help` and keyway(8).
    public let help: String
    /// Its value when the user never set it.
    public let defaultValue: Bool
    /// Whether turning it off needs the factor verified first (a factor's own switch, as on the phones: whoever
    /// finds the session unlocked must not turn a factor off without knowing it).
    public let offNeedsProof: Bool

    /// Declares a switch.
    public init(
        _ factor: FactorKind, _ name: String, default defaultValue: Bool, offNeedsProof: Bool = false, help: String
    ) {
        self.factor = factor
        self.name = name
        self.defaultValue = defaultValue
        self.offNeedsProof = offNeedsProof
        self.help = help
    }

    /// The key as stored and as `keyway set` takes it in full: `gesture.show-trail`.
    public var key: String { "\(factor).\(name)" }

    /// The switch every factor has: off, the factor is unavailable to every policy and keeps its enrollment.
    public static func enabled(_ factor: FactorKind) -> UserSetting {
        UserSetting(
            factor, "enabled", default: true, offNeedsProof: true,
            help:
                "off: no policy uses the \(factor) for this user; its enrollment is kept (keyway enable turns it back on)"
        )
    }

    /// The factor a stored key belongs to.
    public static func factor(of key: String) -> FactorKind? {
        key.split(separator: ".", maxSplits: 1).first.map { FactorKind(rawValue: String($0)) }
    }

    /// The value a stored text means (`on`/`off`), nil for anything else.
    public static func value(_ text: String?) -> Bool? {
        switch text {
        case "on": true
        case "off": false
        default: nil
        }
    }

    /// The stored text of a value.
    public static func text(_ value: Bool) -> String { value ? "on" : "off" }

    /// This switch's value among a user's stored preferences.
    public func value(in preferences: [String: String]) -> Bool { Self.value(preferences[key]) ?? defaultValue }
}
