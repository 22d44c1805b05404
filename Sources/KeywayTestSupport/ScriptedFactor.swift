public import KeywayCore

/// A factor whose person types what happens: "ok" verifies, anything else that is not "?" is wrong,
/// "?" is a malformed entry. It counts attempts through the real `AttemptGate`, so the policy engine's rules can be
/// tested against real counting without a slow hash. Its factor, biometry and sensor state are configurable.
public final class ScriptedFactor: Authenticator {
    /// The factor this instance stands for.
    public var factor: FactorKind { kind }
    /// The factor this instance stands for.
    public let kind: FactorKind
    /// The biometry type reported when available.
    public let biometry: BiometryType
    /// When non-nil, the factor reports `.notAvailable` with this reason.
    public let unavailableReason: String?
    /// Counts attempts.
    public let gate: AttemptGate

    /// Creates a scripted factor for `kind`; a user is enrolled when the store has an enrollment for `kind`.
    public init(
        _ kind: FactorKind, store: any Store, clock: any Clock, schedule: ThrottleSchedule,
        clears: [FactorKind] = [], biometry: BiometryType = .none, unavailableReason: String? = nil
    ) {
        self.kind = kind
        self.biometry = biometry
        self.unavailableReason = unavailableReason
        gate = AttemptGate(factor: kind, store: store, clock: clock, schedule: schedule, clears: clears)
    }

    /// Enrolls `user` for this factor.
    public func enroll(_ user: String) throws(AuthenticationError) {
        try gate.store.save(
            Enrollment(
                user: user, factor: kind, payload: Array("ok".utf8),
                changedAt: gate.clock.now(), changedBy: "test"))
    }

    public func availability(for user: UserContext) -> Availability {
        if let unavailableReason { return .notAvailable(unavailableReason) }
        guard (try? gate.store.enrollment(user: user.name, factor: kind)) != nil else { return .notEnrolled }
        return gate.availability(for: user.name, whenAllowed: .available(biometry))
    }

    public func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        let reply = try conversation.ask(Prompt("\(kind): ", fallbackLabel: request.fallbackLabel))
        let typed: String
        switch reply {
        case .fallback: throw AuthenticationError(.userFallback)
        case .cancel: throw AuthenticationError(.userCancel)
        case .secret(let secret): typed = secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
        }
        if typed == "?" { return .failure(.malformed("not a valid entry")) }
        guard try gate.store.enrollment(user: request.user.name, factor: kind) != nil else {
            throw Availability.notEnrolled.error(for: kind) ?? AuthenticationError(.factorNotEnrolled)
        }
        let reservation = try gate.reserve(for: request.user.name)
        if typed == "ok" {
            try gate.settleSuccess(reservation)
            return .success
        }
        return .failure(try gate.settleFailure(reservation, fingerprint: Array(typed.utf8)))
    }

    public func domainState(for user: String) throws(AuthenticationError) -> [UInt8] {
        try gate.store.enrollment(user: user, factor: kind).map { Array("\($0.changedAt.milliseconds)".utf8) } ?? []
    }
}
