import Synchronization

/// The vault's side of a knowledge factor: the enrollment rules, the slow hash and the attempt gate. Runs where
/// the store is (keywayd), so a client can neither skip the rules nor hold a lock.
public final class KnowledgeKeeper: FactorKeeper {
    /// The factor.
    public var factor: FactorKind { gate.factor }
    /// Canonicalizes what a client sent (a canonical secret is its own normal form).
    public let normalize: KnowledgeFactor.Normalizer
    /// The enrollment rules.
    public let rules: KnowledgeFactor.Rules
    /// The slow hash.
    public let hasher: any SecretHasher
    /// Counts attempts.
    public let gate: AttemptGate
    /// Recent wrong secrets, answered again without the slow hash.
    public let repeats = RepeatMemory()
    /// The costs this factor's enrolled secrets were hashed at, each with a decoy hash and how many use it.
    private let decoys = Mutex(Decoys())
    private struct Decoys {
        var refreshed: Int64? = nil
        var costs: [(parameters: String, decoy: String, count: Int)] = []
    }
    /// How often the costs in use are read again, in milliseconds.
    static let decoyRefresh: Int64 = 600_000

    /// Creates the keeper.
    public init(
        normalize: @escaping KnowledgeFactor.Normalizer, rules: @escaping KnowledgeFactor.Rules,
        hasher: any SecretHasher, gate: AttemptGate
    ) {
        self.normalize = normalize
        self.rules = rules
        self.hasher = hasher
        self.gate = gate
    }

    public var store: any Store { gate.store }

    public var codes: FactorCodes { gate.codes }

    /// A chosen secret: its owner may change it.
    public var changeable: Bool { true }

    /// Enrolled, switched on and not locked: all in the store.
    public var judgedFromStore: Bool { true }

    /// Availability from the enrollment and the counters. A concealing context sees every user as enrolled, with
    /// the counters a user without an enrollment has too, so a lockout looks the same for both.
    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        guard records.contains(where: { $0.factor == factor }) || user.concealsEnrollment else { return .notEnrolled }
        return gate.availability(of: book, in: AttemptBook.Channel(remote: user.isRemote), whenAllowed: .available)
    }

    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        switch try canonical(evidence) {
        case .success(let candidate):
            return try verify(
                candidate, user: user.name, concealing: user.concealsEnrollment,
                in: AttemptBook.Channel(remote: user.isRemote))
        case .failure(let problem): return .failure(.malformed(problem.message))
        }
    }

    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        guard label == nil else { throw AuthenticationError(.enrollmentRefused, "a \(factor) has no named parts") }
        let secret: Secret
        switch try canonical(evidence) {
        case .success(let canonical): secret = canonical
        case .failure(let problem): throw AuthenticationError(.enrollmentRefused, problem.message)
        }
        if let problem = rules(secret) { throw AuthenticationError(.enrollmentRefused, problem.message) }
        let encoded = try hasher.hash(secret)
        decoys.withLock { $0.refreshed = nil }  // the costs in use may change with this one: read them again
        return Enrollment(
            user: user, factor: factor, payload: Array(encoded.utf8), changedAt: gate.clock.now(),
            changedBy: actor)
    }

    /// The slow work for a name without an enrollment, and the wrong secret's fingerprint: a verification against a
    /// decoy made at one of the costs enrolled secrets use, picked for this name by a keyed hash of it and weighted by
    /// how many use each, so that after a change of the cost such a name costs what some enrolled name costs, and
    /// the same each time it is tried (docs/ARCHITECTURE.md §5). Without enrollments, the configured cost.
    func burn(_ candidate: Secret, for user: String) -> [UInt8] {
        let now = gate.clock.now().milliseconds
        let stale = decoys.withLock { state in state.refreshed.map { now - $0 >= Self.decoyRefresh } ?? true }
        if stale {
            var found: [(parameters: String, decoy: String, count: Int)] = []
            for record in (try? gate.store.enrollments(of: factor)) ?? [] {
                guard let encoded = String(validating: record.payload, as: UTF8.self) else { continue }
                let parameters = String(encoded.split(separator: "$", maxSplits: 4).prefix(3).joined(separator: "$"))
                if let index = found.firstIndex(where: { $0.parameters == parameters }) {
                    found[index].count += 1
                } else if let decoy = hasher.decoy(like: encoded) {
                    found.append((parameters, decoy, 1))
                }
            }
            decoys.withLock { $0 = Decoys(refreshed: now, costs: found) }
        }
        let costs = decoys.withLock { $0.costs }
        let total = costs.reduce(0) { $0 + $1.count }
        guard total > 0 else { return hasher.burnWork(candidate) }
        let key = hasher.quickFingerprint(Secret(copying: Array(user.utf8)), boundTo: Array("decoy".utf8)) ?? []
        var pick = Int(key.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) } % UInt32(total))
        for cost in costs {
            if pick < cost.count {
                if case .mismatch(let fingerprint)? = try? hasher.verify(candidate, against: cost.decoy) {
                    return fingerprint
                }
                return hasher.burnWork(candidate)
            }
            pick -= cost.count
        }
        return hasher.burnWork(candidate)
    }

    /// A secret's enrollment is what concealment hides.
    public var concealsEnrollment: Bool { true }

    /// A name without this secret enrolled, under concealment: counted, the slow work done, "not recognized".
    public func concealedAbsence(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .success(let candidate) = try canonical(evidence) else { return .failure(.notEnrolled) }
        let reservation = try gate.reserve(for: user)
        _ = try gate.settleFailure(reservation, fingerprint: burn(candidate, for: user.name))
        return .failure(.notEnrolled)
    }

    private func canonical(_ evidence: Evidence) throws(AuthenticationError)
        -> Result<Secret, KnowledgeFactor.NormalizationError>
    {
        guard case .secret(let secret) = evidence else {
            throw AuthenticationError(.invalidPolicy, "a \(factor) is checked with a secret, not sensor samples")
        }
        return normalize(secret)
    }

    /// Checks a canonical secret against the user's enrollment: reserve, verify, settle.
    /// With `concealing`, a user with nothing enrolled gets `.notEnrolled` after the same slow-hash work.
    public func verify(
        _ candidate: Secret, user: String, concealing: Bool = false, in channel: AttemptBook.Channel = .local
    ) throws(AuthenticationError)
        -> Verdict
    {
        let enrollment = try gate.store.enrollment(user: user, factor: factor)
        // A repeat of a wrong secret seen lately is the failure it was: no slow hash, nothing counted (the lockout,
        // if any, still answers first). Enrolled or not, it looks and costs the same.
        let quick = hasher.quickFingerprint(candidate, boundTo: enrollment?.payload ?? [])
        if let quick, enrollment != nil || concealing, repeats.contains(quick, for: user) {
            try gate.check(for: user, in: channel)
            return .failure(enrollment == nil ? .notEnrolled : .repeatedMismatch)
        }
        guard let enrollment else {
            guard concealing else {
                _ = burn(candidate, for: user)
                throw AuthenticationError(gate.codes.notEnrolled, "no \(factor) is enrolled for \(user)")
            }
            // Counted, throttled and refunded exactly like an enrolled user's wrong secret, so neither the
            // delays nor the repeats tell the two apart.
            let reservation = try gate.reserve(for: user, in: channel)
            _ = try gate.settleFailure(reservation, fingerprint: burn(candidate, for: user))
            if let quick { repeats.remember(quick, for: user) }
            return .failure(.notEnrolled)
        }
        guard let encoded = String(validating: enrollment.payload, as: UTF8.self) else {
            throw AuthenticationError(.storeFailure, "the stored \(factor) hash for \(user) is not text")
        }
        let reservation = try gate.reserve(for: user, in: channel)
        switch try hasher.verify(candidate, against: encoded) {
        case .match:
            try gate.settleSuccess(reservation)  // a wrong secret stays wrong: the memory is kept
            return .success
        case .mismatch(let fingerprint):
            let failure = try gate.settleFailure(reservation, fingerprint: fingerprint)
            if let quick { repeats.remember(quick, for: user) }
            return .failure(failure)
        }
    }
}
