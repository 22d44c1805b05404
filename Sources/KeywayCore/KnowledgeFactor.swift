import Synchronization

/// The person's side of a "something you know" factor (the pattern, the passcode): ask, check the form, hand the
/// canonical secret to the vault. The vault's side, `KnowledgeKeeper`, reserves, hashes and settles.
public struct KnowledgeFactor: Sendable {
    /// How a plugin turns what was typed into the bytes that are hashed, or says why it is malformed.
    public typealias Normalizer = @Sendable (Secret) -> Result<Secret, NormalizationError>
    /// Why a canonical secret may not be enrolled, or nil.
    public typealias Rules = @Sendable (Secret) -> NormalizationError?

    /// Why an entry is not well formed, in words safe to show and log (never containing the entry).
    public struct NormalizationError: Error, Sendable, Equatable {
        /// The explanation.
        public var message: String
        /// Creates an explanation.
        public init(_ message: String) { self.message = message }
    }

    /// The factor.
    public let factor: FactorKind
    /// What the prompt says, e.g. "Pattern: ".
    public let promptText: String
    /// Turns raw input into canonical bytes.
    public let normalize: Normalizer
    /// Where the secret is checked.
    public let vault: any Vault
    /// Shown before the first prompt of an evaluation (the numbered grid for the pattern), or nil.
    public let preamble: String?

    /// Creates the person's side of a knowledge factor.
    public init(
        factor: FactorKind, promptText: String, preamble: String? = nil, normalize: @escaping Normalizer,
        vault: any Vault
    ) {
        self.factor = factor
        self.promptText = promptText
        self.preamble = preamble
        self.normalize = normalize
        self.vault = vault
    }

    /// What the vault says (a concealing context sees every user as enrolled).
    public func availability(for user: UserContext) -> Availability { vault.availability(of: factor, for: user) }

    /// One attempt: prompt (`promptText`, or `prompt` when the plugin words this one: "Recovery code 3: "),
    /// normalize, then the vault's reserve, verify, settle.
    public func authenticate(
        _ request: AuthenticationRequest, conversation: any Conversation, prompt: String? = nil
    ) throws(AuthenticationError) -> Verdict {
        if let preamble, request.attempt == 1 { conversation.tell(.explaining(factor, preamble)) }
        let entered: Secret
        switch try conversation.ask(
            Prompt(prompt ?? promptText, echo: false, fallbackLabel: request.fallbackLabel, factor: factor))
        {
        case .secret(let secret): entered = secret
        case .fallback: throw AuthenticationError(.userFallback)
        case .cancel: throw AuthenticationError(.userCancel)
        }
        return try verify(entered, for: request.user)
    }

    /// One attempt at what the person typed: normalize, then the vault's reserve, verify, settle.
    public func verify(_ entered: Secret, for user: UserContext) throws(AuthenticationError) -> Verdict {
        switch normalize(entered) {
        case .success(let candidate): return try vault.verify(.secret(candidate), of: factor, for: user)
        case .failure(let problem): return .failure(.malformed(problem.message))
        }
    }

    /// What the enrollment conversation says.
    public struct EnrollmentWording: Sendable {
        /// Asks for the new secret.
        public var first: String
        /// Asks for it again.
        public var again: String
        /// Says the two entries differ.
        public var differ: String
        /// Asks for the current secret before a change.
        public var current: String

        /// Creates the wording.
        public init(first: String, again: String, differ: String, current: String) {
            self.first = first
            self.again = again
            self.differ = differ
            self.current = current
        }
    }

    /// Asks for a new secret twice until both entries agree and `check` accepts it, then has the vault store it
    /// (the vault applies the rules again: they are enforced where the state is). Refused or differing entries
    /// start over with the reason shown, up to `rounds` times; the old enrollment stays until the new one is saved.
    public func enroll(
        user: String, by actor: String, wording: EnrollmentWording, rounds: Int = 3,
        conversation: any Conversation, check: (Secret) -> NormalizationError?
    ) throws(AuthenticationError) {
        let new = try askNew(wording: wording, rounds: rounds, conversation: conversation, check: check)
        try vault.enroll(.secret(new), of: factor, for: user, label: nil, by: actor)
    }

    /// Changes the secret: the current one first (a counted attempt, so a wrong one stops here), then the new one
    /// twice; the vault verifies the current one again as it stores the new one, in one request.
    public func change(
        user: String, by actor: String, wording: EnrollmentWording, rounds: Int = 3,
        conversation: any Conversation, check: (Secret) -> NormalizationError?
    ) throws(AuthenticationError) {
        guard let current = try askCanonical(wording.current, conversation: conversation) else {
            throw AuthenticationError(.authenticationFailed, "the current \(factor) was not well formed")
        }
        guard try vault.verify(.secret(current), of: factor, for: UserContext(name: user)) == .success else {
            throw AuthenticationError(.authenticationFailed, "the current \(factor) is wrong")
        }
        let new = try askNew(wording: wording, rounds: rounds, conversation: conversation, check: check)
        try vault.change(current, to: new, of: factor, for: user, by: actor)
    }

    /// The new secret, asked twice until both agree and `check` accepts it.
    private func askNew(
        wording: EnrollmentWording, rounds: Int, conversation: any Conversation, check: (Secret) -> NormalizationError?
    ) throws(AuthenticationError) -> Secret {
        if let preamble { conversation.tell(.explaining(factor, preamble)) }
        for _ in 0..<max(rounds, 1) {
            guard let first = try askCanonical(wording.first, conversation: conversation) else { continue }
            if let problem = check(first) {
                conversation.tell(.error(problem.message))
                continue
            }
            guard let second = try askCanonical(wording.again, conversation: conversation) else { continue }
            guard first == second else {
                conversation.tell(.error(wording.differ))
                continue
            }
            return first
        }
        throw AuthenticationError(
            .authenticationFailed, "no acceptable \(factor) was entered in \(max(rounds, 1)) rounds")
    }

    /// Asks once and normalizes; nil (after telling why) when malformed.
    private func askCanonical(_ text: String, conversation: any Conversation) throws(AuthenticationError) -> Secret? {
        switch try conversation.ask(Prompt(text, echo: false, factor: factor)) {
        case .secret(let entered):
            switch normalize(entered) {
            case .success(let canonical): return canonical
            case .failure(let problem):
                conversation.tell(.error(problem.message))
                return nil
            }
        case .fallback, .cancel:
            throw AuthenticationError(.userCancel)
        }
    }
}
