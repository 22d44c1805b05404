// What a new pattern must satisfy at enrollment and change (docs/ARCHITECTURE.md §1). Verification does not apply
// these rules: a pattern enrolled under older, weaker rules must still unlock until it is changed.

/// Rules applied at enrollment and change.
public struct PatternRules: Sendable, Equatable {
    /// The range `minimumDots` is clamped to: 4 is the security floor, 9 is every dot.
    public static let minimumDotsRange: ClosedRange<Int> = 4...9

    /// Stored clamped, so neither init nor setter can leave a value below the floor.
    private var clampedMinimumDots: Int

    /// Shortest allowed pattern; values outside 4…9 are clamped, since a setter cannot throw.
    ///
    /// Clamping rather than refusing was chosen so a mistyped config value can never weaken the floor
    /// (2 becomes 4) nor lock everyone out (12 becomes 9). A config layer that wants to report the
    /// mistake can compare against `minimumDotsRange` before building the rules.
    public var minimumDots: Int {
        get { clampedMinimumDots }
        set { clampedMinimumDots = Self.clamp(newValue) }
    }

    /// Shapes refused regardless of length.
    public var blocklist: PatternBlocklist

    /// At least 4 dots and the built-in blocklist, as docs/ARCHITECTURE.md §1 describes.
    public static let `default` = PatternRules()

    /// Builds rules; minimumDots is clamped to `minimumDotsRange` for the reasons given on the property.
    public init(minimumDots: Int = 4, blocklist: PatternBlocklist = .builtIn) {
        self.clampedMinimumDots = Self.clamp(minimumDots)
        self.blocklist = blocklist
    }

    /// nil when the pattern may be enrolled; otherwise why not, length first since it is the cheaper fix.
    public func violation(of pattern: Pattern) -> PatternError? {
        if pattern.dots.count < minimumDots {
            return .tooShort(minimum: minimumDots)
        }
        if blocklist.contains(pattern) {
            return .blocklisted
        }
        return nil
    }

    /// Keeps a requested minimum inside `minimumDotsRange`.
    private static func clamp(_ value: Int) -> Int {
        min(max(value, minimumDotsRange.lowerBound), minimumDotsRange.upperBound)
    }
}
