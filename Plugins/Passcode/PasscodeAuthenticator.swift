public import KeywayCore

/// The passcode factor: the fallback that also clears the biometric lockout when it succeeds.
public final class PasscodeAuthenticator: KnowledgeAuthenticator {
    /// The enrollment rules.
    public let rules: PasscodeRules
    /// The person's side of the shared knowledge-factor machinery (prompt, normalize, hand to the vault).
    public let knowledge: KnowledgeFactor

    /// Creates the person's side of the factor over a vault (keywayd's, or a local one).
    public init(vault: any Vault, rules: PasscodeRules = .default) {
        self.rules = rules
        knowledge = KnowledgeFactor(
            factor: .passcode, promptText: "Passcode: ", normalize: Self.normalize, vault: vault)
    }

    /// Creates the factor over a local vault of its own: for tests and tools that own the store.
    public convenience init(
        store: any Store, clock: any Clock, hasher: any SecretHasher, rules: PasscodeRules = .default,
        schedule: ThrottleSchedule = .passcode
    ) {
        let keeper = Self.keeper(store: store, clock: clock, hasher: hasher, rules: rules, schedule: schedule)
        self.init(vault: LocalVault(store: store, clock: clock, keepers: [keeper]), rules: rules)
    }

    /// The vault's side: the rules, Argon2id and the attempt gate over `store`; a success clears the biometric
    /// lockout.
    public static func keeper(
        store: any Store, clock: any Clock, hasher: any SecretHasher, rules: PasscodeRules = .default,
        schedule: ThrottleSchedule = .passcode
    ) -> KnowledgeKeeper {
        KnowledgeKeeper(
            normalize: normalize, rules: { rules.violation(of: $0) }, hasher: hasher,
            gate: AttemptGate(
                factor: .passcode, store: store, clock: clock, schedule: schedule, clears: [.biometric], codes: codes))
    }

    /// LocalAuthentication's code for a passcode that is not set.
    public static var codes: FactorCodes { .passcode }

    public var codes: FactorCodes { Self.codes }

    public static let wording = KnowledgeFactor.EnrollmentWording(
        first: "New passcode: ", again: "Enter the new passcode again: ",
        differ: "The passcodes did not match; start again.", current: "Current passcode: ")

    public func violation(of canonical: Secret) -> KnowledgeFactor.NormalizationError? {
        rules.violation(of: canonical)
    }

    /// A passcode is used as entered; only an empty entry is malformed.
    static let normalize: KnowledgeFactor.Normalizer = { entered in
        entered.isEmpty ? .failure(.init("No passcode was entered.")) : .success(entered)
    }
}
