public import KeywayCore

/// The passcode factor: the fallback that also clears the biometric lockout when it succeeds.
public struct PasscodeAuthenticator: KnowledgeAuthenticator {
    /// The enrollment rules.
    public let rules: PasscodeRules
    /// The shared knowledge-factor machinery (prompt, reserve, Argon2id, settle).
    public let knowledge: KnowledgeFactor

    /// Creates the factor over a store, a clock and a hasher.
    public init(
        store: any Store, clock: any Clock, hasher: any SecretHasher, rules: PasscodeRules = .default,
        schedule: ThrottleSchedule = .passcode
    ) {
        self.rules = rules
        let gate = AttemptGate(factor: .passcode, store: store, clock: clock, schedule: schedule, clears: [.biometric])
        knowledge = KnowledgeFactor(
            factor: .passcode, promptText: "Passcode: ", normalize: Self.normalize,
            hasher: hasher, gate: gate, notEnrolledCode: .passcodeNotSet)
    }

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
