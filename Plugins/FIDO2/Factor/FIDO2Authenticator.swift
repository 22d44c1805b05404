public import KeywayCore

/// The person's side of security keys: "Touch your security key". Only keywayd talks to a key (the module and the
/// CLI link no libfido2), so every wait is an arming there: a sequential wait for one counted attempt, or a key
/// waiting beside a typed factor (`first of (fido2, gesture)`). With `[fido2] pin = ask` the key's PIN is asked
/// first, through the conversation, and handed to keywayd with the arming (never stored); a key waiting beside a
/// prompt (`first of`) is asked without one.
public final class FIDO2Authenticator: Authenticator {
    public var factor: FactorKind { .fido2 }
    public var codes: FactorCodes { FIDO2Plugin.codes }

    /// Where the keys are kept and attempts counted.
    public let vault: any Vault
    /// How long a sequential wait waits for a touch.
    public let timeout: Duration
    /// Whether a remote session may use this machine's key (`[fido2] remote = allow`).
    public let servesRemoteSessions: Bool
    /// Whether the key's PIN is asked before a sequential wait and an enrollment (`[fido2] pin = ask`).
    public let asksPIN: Bool

    /// Creates the person's side over a vault.
    public init(
        vault: any Vault, timeout: Duration = .seconds(30), servesRemoteSessions: Bool = false, asksPIN: Bool = false
    ) {
        self.vault = vault
        self.timeout = timeout
        self.servesRemoteSessions = servesRemoteSessions
        self.asksPIN = asksPIN
    }

    /// The key's PIN, asked when `[fido2] pin = ask` (nil otherwise, or when the person typed nothing).
    private func pin(_ conversation: any Conversation) throws(AuthenticationError) -> Secret? {
        guard asksPIN else { return nil }
        switch try conversation.ask(Prompt("PIN of your security key: ")) {
        case .secret(let pin): return pin.isEmpty ? nil : pin
        case .fallback: throw AuthenticationError(.userFallback)
        case .cancel: throw AuthenticationError(.userCancel)
        }
    }

    public func availability(for user: UserContext) -> Availability {
        if let reason = unusableReason(for: user) { return .notAvailable(reason) }
        return vault.availability(of: .fido2, for: user)
    }

    public func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.factorNotAvailable, reason) }
        let pin = try pin(conversation)
        let armed = try vault.arm(.fido2, for: request.user, attempts: 1, waits: true, typed: pin)
        defer { armed.release() }
        conversation.tell(.instruction("Touch your security key."))
        return try ArmedWaiting.verdict(
            of: armed, within: timeout, device: "the security key", codes: codes, request: request,
            conversation: conversation)
    }

    /// The key waits in the background while a prompt does (`first of`).
    public var invitation: String? { "Touch your security key" }

    /// Has keywayd wait at the key for this authentication.
    public func arm(_ request: AuthenticationRequest) throws(AuthenticationError) -> any ArmedFactor {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.factorNotAvailable, reason) }
        return try vault.arm(.fido2, for: request.user, attempts: request.attemptsAllowed, waits: false, typed: nil)
    }

    /// `keyway enroll fido2`: keywayd makes a credential at the key (a touch), and keeps it under `--name`.
    public func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError)
        -> [String]
    {
        if request.scripted {
            throw AuthenticationError(
                .enrollmentRefused, "a security key is enrolled by touching it; nothing simulates it")
        }
        let name = request.label ?? "key"
        if let problem = FIDO2Keeper.nameProblem(name) { throw AuthenticationError(.enrollmentRefused, problem) }
        try vault.enrollAtDevice(
            .fido2, for: request.user, label: name, by: request.actor, typed: try pin(conversation),
            progress: { step in conversation.tell(.instruction(step)) }, cancelled: { false })
        return ["Registered security key '\(name)' for \(request.user)."]
    }

    /// Why a key cannot serve this user at all, or nil.
    private func unusableReason(for user: UserContext) -> String? {
        if !vault.waitsAtDevices { return "only keywayd talks to security keys" }
        if user.isRemote && !servesRemoteSessions { return "the security key is local and this session is remote" }
        return nil
    }
}
