/// The parts a "something you know" factor (the pattern, the passcode) shares: ask, check the form,
/// reserve an attempt, verify with the slow hash, settle. Plugins supply only what differs.
public struct KnowledgeFactor: Sendable {
    /// How a plugin turns what was typed into the bytes that are hashed, or says why it is malformed.
    public typealias Normalizer = @Sendable (Secret) -> Result<Secret, NormalizationError>

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
    /// The slow hash.
    public let hasher: any SecretHasher
    /// Counts attempts.
    public let gate: AttemptGate
    /// The code for "not enrolled" (`.passcodeNotSet` for the passcode).
    public let notEnrolledCode: AuthenticationError.Code
    /// Shown before the first prompt of an evaluation (the numbered grid for the pattern), or nil.
    public let preamble: String?

    /// Creates the shared part of a knowledge factor.
    public init(
        factor: FactorKind, promptText: String, preamble: String? = nil, normalize: @escaping Normalizer,
        hasher: any SecretHasher, gate: AttemptGate, notEnrolledCode: AuthenticationError.Code
    ) {
        self.factor = factor
        self.promptText = promptText
        self.preamble = preamble
        self.normalize = normalize
        self.hasher = hasher
        self.gate = gate
        self.notEnrolledCode = notEnrolledCode
    }

    /// Availability from the enrollment and the counters; a concealing context sees every user as enrolled.
    public func availability(for user: UserContext) -> Availability {
        do {
            guard try gate.store.enrollment(user: user.name, factor: factor) != nil else {
                return user.concealsEnrollment ? .available : .notEnrolled
            }
        } catch {
            return .failed(error)
        }
        return gate.availability(for: user.name, whenAllowed: .available)
    }

    /// One attempt: prompt, normalize, reserve, verify, settle.
    public func authenticate(_ request: AuthenticationRequest, conversation: some Conversation)
        throws(AuthenticationError) -> Verdict
    {
        if let preamble, request.attempt == 1 { conversation.tell(.info(preamble)) }
        let entered: Secret
        switch try conversation.ask(Prompt(promptText, echo: false, fallbackLabel: request.fallbackLabel)) {
        case .secret(let secret): entered = secret
        case .fallback: throw AuthenticationError(.userFallback)
        case .cancel: throw AuthenticationError(.userCancel)
        }
        let candidate: Secret
        switch normalize(entered) {
        case .success(let normalized): candidate = normalized
        case .failure(let problem): return .failure(.malformed(problem.message))
        }
        return try verify(candidate, user: request.user.name, concealing: request.user.concealsEnrollment)
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

    /// Asks for a new secret twice until both entries agree and `check` accepts it, then saves its hash.
    /// Refused or differing entries start over with the reason shown, up to `rounds` times; the old enrollment
    /// stays in place until the new one is saved.
    public func enroll(
        user: String, by actor: String, wording: EnrollmentWording, rounds: Int = 3,
        conversation: some Conversation,
        check: (Secret) -> NormalizationError?
    ) throws(AuthenticationError) -> Enrollment {
        if let preamble { conversation.tell(.info(preamble)) }
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
            let record = try enrollment(of: first, user: user, by: actor)
            try gate.store.save(record)
            return record
        }
        throw AuthenticationError(
            .authenticationFailed, "no acceptable \(factor) was entered in \(max(rounds, 1)) rounds")
    }

    /// Changes the secret: the current one first (counted like any attempt), then `enroll`.
    public func change(
        user: String, by actor: String, wording: EnrollmentWording, rounds: Int = 3,
        conversation: some Conversation,
        check: (Secret) -> NormalizationError?
    ) throws(AuthenticationError) -> Enrollment {
        guard let current = try askCanonical(wording.current, conversation: conversation) else {
            throw AuthenticationError(.authenticationFailed, "the current \(factor) was not well formed")
        }
        guard try verify(current, user: user) == .success else {
            throw AuthenticationError(.authenticationFailed, "the current \(factor) is wrong")
        }
        return try enroll(
            user: user, by: actor, wording: wording, rounds: rounds, conversation: conversation,
            check: check)
    }

    /// Asks once and normalizes; nil (after telling why) when malformed.
    private func askCanonical(_ text: String, conversation: some Conversation) throws(AuthenticationError) -> Secret? {
        switch try conversation.ask(Prompt(text, echo: false)) {
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

    /// Hashes an already-validated secret into an enrollment record.
    public func enrollment(of secret: Secret, user: String, by actor: String) throws(AuthenticationError)
        -> Enrollment
    {
        let encoded = try hasher.hash(secret)
        return Enrollment(
            user: user, factor: factor, payload: Array(encoded.utf8), changedAt: gate.clock.now(),
            changedBy: actor)
    }

    /// Checks a canonical secret against the user's enrollment: reserve, verify, settle. Used by `authenticate`
    /// and before a change, so a change attempt counts like any other attempt.
    /// With `concealing`, a user with nothing enrolled gets `.notEnrolled` after the same slow-hash work.
    public func verify(_ candidate: Secret, user: String, concealing: Bool = false) throws(AuthenticationError)
        -> Verdict
    {
        guard let enrollment = try gate.store.enrollment(user: user, factor: factor) else {
            guard concealing else {
                hasher.burnWork(candidate)
                throw AuthenticationError(notEnrolledCode, "no \(factor) is enrolled for \(user)")
            }
            // Counted, throttled and refunded exactly like an enrolled user's wrong secret, so neither the
            // delays nor the repeats tell the two apart.
            let reservation = try gate.reserve(for: user)
            _ = try gate.settleFailure(reservation, fingerprint: hasher.burnWork(candidate))
            return .failure(.notEnrolled)
        }
        guard let encoded = String(validating: enrollment.payload, as: UTF8.self) else {
            throw AuthenticationError(.storeFailure, "the stored \(factor) hash for \(user) is not text")
        }
        let reservation = try gate.reserve(for: user)
        switch try hasher.verify(candidate, against: encoded) {
        case .match:
            try gate.settleSuccess(reservation)
            return .success
        case .mismatch(let fingerprint):
            return .failure(try gate.settleFailure(reservation, fingerprint: fingerprint))
        }
    }
}

/// A "something you know" plugin: it supplies its `KnowledgeFactor`, its wording and its enrollment rules, and
/// gets availability, authentication, enrollment and change from here.
public protocol KnowledgeAuthenticator: Authenticator {
    /// The shared machinery, configured for this factor.
    var knowledge: KnowledgeFactor { get }
    /// What enrollment and change say.
    static var wording: KnowledgeFactor.EnrollmentWording { get }
    /// Why a canonical secret may not be enrolled, or nil.
    func violation(of canonical: Secret) -> KnowledgeFactor.NormalizationError?
}

extension KnowledgeAuthenticator {
    public var factor: FactorKind { knowledge.factor }

    public func availability(for user: UserContext) -> Availability { knowledge.availability(for: user) }

    public func authenticate(_ request: AuthenticationRequest, conversation: some Conversation)
        throws(AuthenticationError) -> Verdict
    {
        try knowledge.authenticate(request, conversation: conversation)
    }

    /// Sets a new secret, asked twice.
    public func enroll(user: String, by actor: String, conversation: some Conversation) throws(AuthenticationError)
        -> Enrollment
    {
        try knowledge.enroll(
            user: user, by: actor, wording: Self.wording, conversation: conversation,
            check: violation(of:))
    }

    /// Changes the secret after verifying the current one.
    public func change(user: String, by actor: String, conversation: some Conversation) throws(AuthenticationError)
        -> Enrollment
    {
        try knowledge.change(
            user: user, by: actor, wording: Self.wording, conversation: conversation,
            check: violation(of:))
    }
}
