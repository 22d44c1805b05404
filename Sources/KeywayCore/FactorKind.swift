/// The name of an authentication factor ("gesture", "biometric", "passcode", or a plugin's own).
///
/// A struct rather than an enum so a new plugin can add a factor without changing the core.
public struct FactorKind: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The factor's name as written in configuration, logs and the store.
    public let rawValue: String

    /// Creates a factor kind from its configuration name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The 3×3 pattern lock.
    public static let gesture = FactorKind(rawValue: "gesture")
    /// A fingerprint or face sensor.
    public static let biometric = FactorKind(rawValue: "biometric")
    /// The passcode, the fallback that also clears a biometric lockout.
    public static let passcode = FactorKind(rawValue: "passcode")

    public var description: String { rawValue }
    public static func < (lhs: FactorKind, rhs: FactorKind) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Which kind of biometry a sensor offers, as LocalAuthentication's `LABiometryType`.
public enum BiometryType: String, Sendable, Hashable {
    /// No biometric sensor.
    case none
    /// A fingerprint sensor.
    case fingerprint
    /// A face sensor.
    case face
}
