public import KeywayCore

/// The 3×3 pattern lock as a factor: the grid is shown, the pattern typed as dot numbers, checked against an
/// Argon2id hash, with Android-style throttling.
public final class GestureAuthenticator: KnowledgeAuthenticator {
    /// The enrollment rules (minimum dots, blocklist).
    public let rules: PatternRules
    /// The person's side of the shared knowledge-factor machinery (prompt, normalize, hand to the vault).
    public let knowledge: KnowledgeFactor

    /// Creates the person's side of the factor over a vault (keywayd's, or a local one).
    public init(vault: any Vault, rules: PatternRules = .default) {
        self.rules = rules
        knowledge = KnowledgeFactor(
            factor: .gesture, promptText: "Pattern (dots 1-9): ", preamble: Self.grid, normalize: Self.normalize,
            vault: vault)
    }

    /// Creates the factor over a local vault of its own: for tests and tools that own the store.
    public convenience init(
        store: any Store, clock: any Clock, hasher: any SecretHasher, rules: PatternRules = .default,
        schedule: ThrottleSchedule = .gesture
    ) {
        let keeper = Self.keeper(store: store, clock: clock, hasher: hasher, rules: rules, schedule: schedule)
        self.init(vault: LocalVault(store: store, clock: clock, keepers: [keeper]), rules: rules)
    }

    /// The vault's side: the rules, Argon2id and the attempt gate over `store`.
    public static func keeper(
        store: any Store, clock: any Clock, hasher: any SecretHasher, rules: PatternRules = .default,
        schedule: ThrottleSchedule = .gesture
    ) -> KnowledgeKeeper {
        KnowledgeKeeper(
            normalize: normalize, rules: { violation(of: $0, rules: rules) }, hasher: hasher,
            gate: AttemptGate(factor: .gesture, store: store, clock: clock, schedule: schedule))
    }

    /// The numbered grid shown before the pattern is asked for.
    public static let grid = """
        Draw your pattern by typing the dots in order, e.g. 2-7-6-1:
          1 2 3
          4 5 6
          7 8 9
        """

    public static let wording = KnowledgeFactor.EnrollmentWording(
        first: "New pattern: ", again: "Draw the pattern again: ",
        differ: "The patterns did not match; start again.", current: "Current pattern: ")

    /// Applies the enrollment rules to a canonical pattern.
    public func violation(of canonical: Secret) -> KnowledgeFactor.NormalizationError? {
        Self.violation(of: canonical, rules: rules)
    }

    static func violation(of canonical: Secret, rules: PatternRules) -> KnowledgeFactor.NormalizationError? {
        let pattern = canonical.withUnsafeBytes { Pattern.parse($0) }
        switch pattern {
        case .success(let pattern): return rules.violation(of: pattern).map { .init($0.description) }
        case .failure(let error): return .init(error.description)
        }
    }

    /// Parses what was typed into the canonical dots ("12369"). Shorter than the 4-dot floor is malformed: no
    /// enrollment can be that short, so it is a slip, not a guess, and is not counted.
    static let normalize: KnowledgeFactor.Normalizer = { entered in
        switch entered.withUnsafeBytes({ Pattern.parse($0) }) {
        case .failure(let error):
            return .failure(.init(error.description))
        case .success(let pattern) where pattern.dots.count < PatternRules.minimumDotsRange.lowerBound:
            return .failure(.init(PatternError.tooShort(minimum: PatternRules.minimumDotsRange.lowerBound).description))
        case .success(let pattern):
            return .success(Secret(copying: pattern.canonicalBytes))
        }
    }
}
