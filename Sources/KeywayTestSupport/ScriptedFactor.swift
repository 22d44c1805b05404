public import KeywayCore
import Synchronization

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
    /// How the factor takes part in `first of`: typed at the shared prompt, presented to an armed device, or neither.
    public enum Role: Sendable { case ordinary, typed, presented }
    /// Its part in `first of`.
    public let role: Role
    /// What the armed device sees, as the test presents it: "ok" matches, anything else does not.
    private let touches = Mutex<[String]>([])

    /// Creates a scripted factor for `kind`; a user is enrolled when the store has an enrollment for `kind`.
    public init(
        _ kind: FactorKind, store: any Store, clock: any Clock, schedule: ThrottleSchedule,
        clears: [FactorKind] = [], biometry: BiometryType = .none, unavailableReason: String? = nil,
        role: Role = .ordinary, codes: FactorCodes = FactorCodes()
    ) {
        self.kind = kind
        self.biometry = biometry
        self.unavailableReason = unavailableReason
        self.role = role
        gate = AttemptGate(factor: kind, store: store, clock: clock, schedule: schedule, clears: clears, codes: codes)
    }

    public var codes: FactorCodes { gate.codes }

    /// Presents something to the armed device (role `.presented`): it is matched and counted at once, as keywayd
    /// does, and kept for the next `collect`.
    public func present(_ typed: String) { touches.withLock { $0.append(typed) } }

    public var invitation: String? { role == .presented ? "Touch the sensor" : nil }

    public var typedEntry: KnowledgeFactor? {
        guard role == .typed else { return nil }
        return KnowledgeFactor(
            factor: kind, promptText: "\(kind): ", normalize: { .success($0) },
            vault: LocalVault(store: gate.store, clock: gate.clock, keepers: [ScriptedKeeper(gate: gate)]))
    }

    public func arm(_ request: AuthenticationRequest) throws(AuthenticationError) -> any ArmedFactor {
        guard role == .presented else { throw AuthenticationError(.factorNotAvailable, "\(kind) cannot be armed") }
        touches.withLock { $0.removeAll() }  // nothing presented before arming counts
        return ScriptedArmed(factor: self, user: request.user.name)
    }

    /// One check of what was typed or presented, counted through the gate.
    public func check(_ typed: String, user: String) throws(AuthenticationError) -> Verdict {
        try ScriptedKeeper.check(typed, user: user, gate: gate)
    }

    /// What was presented since arming, checked.
    func takeTouches(user: String) throws(AuthenticationError) -> [Verdict] {
        let taken = touches.withLock { touches in
            defer { touches.removeAll() }
            return touches
        }
        var verdicts: [Verdict] = []
        for touch in taken { verdicts.append(try check(touch, user: user)) }
        return verdicts
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
            throw Availability.notEnrolled.error(for: kind, codes: codes)
                ?? AuthenticationError(.factorNotEnrolled)
        }
        return try check(typed, user: request.user.name)
    }

    public func domainState(for user: String) throws(AuthenticationError) -> [UInt8] {
        try gate.store.enrollment(user: user, factor: kind).map { Array("\($0.changedAt.milliseconds)".utf8) } ?? []
    }
}

/// A scripted factor armed for one evaluation.
final class ScriptedArmed: ArmedFactor {
    let factor: ScriptedFactor
    let user: String
    private(set) var released = false

    init(factor: ScriptedFactor, user: String) {
        self.factor = factor
        self.user = user
    }

    func collect() throws(AuthenticationError) -> [Verdict] {
        guard !released else { throw AuthenticationError(.invalidContext, "collected after release") }
        return try factor.takeTouches(user: user)
    }

    var wakeDescriptor: Int32? { nil }

    func awaitPresentation(milliseconds: Int32) -> ArmedWait { .ended }

    func release() { released = true }
}

/// The vault's side of a scripted factor: a secret "ok" verifies, through the gate; enrolled when the store has an
/// enrollment of its factor.
public final class ScriptedKeeper: FactorKeeper {
    /// Counts attempts.
    public let gate: AttemptGate
    /// Creates the keeper over `gate`.
    public init(gate: AttemptGate) { self.gate = gate }
    public var factor: FactorKind { gate.factor }
    public var store: any Store { gate.store }

    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        guard records.contains(where: { $0.factor == factor }) else { return .notEnrolled }
        return gate.availability(of: book, whenAllowed: .available)
    }

    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .secret(let secret) = evidence else { throw AuthenticationError(.invalidPolicy, "a secret") }
        return try Self.check(
            secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }, user: user.name, gate: gate)
    }

    /// Reserves, then settles: "ok" is a success, anything else a failure fingerprinted by its text.
    static func check(_ typed: String, user: String, gate: AttemptGate) throws(AuthenticationError) -> Verdict {
        let reservation = try gate.reserve(for: user)
        if typed == "ok" {
            try gate.settleSuccess(reservation)
            return .success
        }
        return .failure(try gate.settleFailure(reservation, fingerprint: Array(typed.utf8)))
    }

    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        throw AuthenticationError(.invalidPolicy, "scripted factors are enrolled with enroll(_:)")
    }
}
