import Synchronization

/// A plugin whose evidence is typed at a prompt (the pattern, the passcode, a one-time code): it supplies its
/// `KnowledgeFactor` and gets its name, availability, authentication and its place in `first of`'s shared prompt
/// from here. How it is enrolled is its own (`KnowledgeAuthenticator`, or a shared secret as TOTP's).
public protocol TypedAuthenticator: Authenticator {
    /// The shared machinery, configured for this factor.
    var knowledge: KnowledgeFactor { get }
}

extension TypedAuthenticator {
    public var factor: FactorKind { knowledge.factor }

    /// Typed at a prompt: `first of` asks for it in the prompt it shares with armed factors.
    public var typedEntry: KnowledgeFactor? { knowledge }

    public func availability(for user: UserContext) -> Availability { knowledge.availability(for: user) }

    public func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        try knowledge.authenticate(request, conversation: conversation)
    }
}

/// A "something you know" plugin: a typed secret the person chooses, with its wording and its enrollment rules; it
/// gets enrollment (asked twice) and change from here.
public protocol KnowledgeAuthenticator: TypedAuthenticator {
    /// What enrollment and change say.
    static var wording: KnowledgeFactor.EnrollmentWording { get }
    /// Why a canonical secret may not be enrolled, or nil.
    func violation(of canonical: Secret) -> KnowledgeFactor.NormalizationError?
}

extension KnowledgeAuthenticator {
    /// `keyway enroll`: a new secret, asked twice.
    public func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError)
        -> [String]
    {
        guard request.label == nil else {
            throw AuthenticationError(.enrollmentRefused, "a \(factor) has no named parts")
        }
        try enroll(user: request.user, by: request.actor, conversation: conversation)
        return ["The \(factor) of \(request.user) is set."]
    }

    /// Sets a new secret, asked twice.
    public func enroll(user: String, by actor: String, conversation: any Conversation) throws(AuthenticationError) {
        try knowledge.enroll(
            user: user, by: actor, wording: Self.wording, conversation: conversation,
            check: violation(of:))
    }

    /// Changes the secret after verifying the current one.
    public func change(user: String, by actor: String, conversation: any Conversation) throws(AuthenticationError) {
        try knowledge.change(
            user: user, by: actor, wording: Self.wording, conversation: conversation,
            check: violation(of:))
    }
}
