public import KeywayCore

/// The passcode factor: the fallback that also clears the biometric lockout when it succeeds.
public struct PasscodeAuthenticator: Authenticator {
    public var factor: FactorKind { .passcode }

    /// The enrollment rules.
    public let rules: PasscodeRules
    /// The shared knowledge-factor machinery (prompt, reserve, Argon2id, settle).
    public let knowledge: KnowledgeFactor

    /// Creates the factor over a store, a clock and a hasher.
    public init(store: any Store, clock: any Clock, hasher: any SecretHasher, rules: PasscodeRules = .default,
                schedule: ThrottleSchedule = .passcode) {
        self.rules = rules
        let gate = AttemptGate(factor: FactorKind.passcode, store: store, clock: clock, schedule: schedule,
                               clears: [.biometric])
        knowledge = KnowledgeFactor(factor: FactorKind.passcode, promptText: "Passcode: ", normalize: Self.normalize,
                                    hasher: hasher, gate: gate, notEnrolledCode: .passcodeNotSet)
    }

    public func availability(for user: UserContext) -> Availability { knowledge.availability(for: user) }

    public func authenticate(_ request: AuthenticationRequest, conversation: some Conversation)
        throws(AuthenticationError) -> Verdict
    {
        try knowledge.authenticate(request, conversation: conversation)
    }

    /// Sets a new passcode, asked twice.
    public func enroll(user: String, by actor: String, conversation: some Conversation) throws(AuthenticationError)
        -> Enrollment
    {
        try knowledge.enroll(user: user, by: actor, wording: Self.wording, conversation: conversation,
                             check: rules.violation(of:))
    }

    /// Changes the passcode after verifying the current one.
    public func change(user: String, by actor: String, conversation: some Conversation) throws(AuthenticationError)
        -> Enrollment
    {
        try knowledge.change(user: user, by: actor, wording: Self.wording, conversation: conversation,
                             check: rules.violation(of:))
    }

    static let wording = KnowledgeFactor.EnrollmentWording(
        first: "New passcode: ", again: "Enter the new passcode again: ",
        differ: "The passcodes did not match; start again.", current: "Current passcode: ")

    /// A passcode is used as entered; only an empty entry is malformed.
    static let normalize: KnowledgeFactor.Normalizer = { entered in
        entered.isEmpty ? .failure(.init("No passcode was entered.")) : .success(entered)
    }
}
