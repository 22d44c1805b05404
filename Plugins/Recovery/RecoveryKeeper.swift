public import KeywayCore

/// The vault's side of recovery codes (keywayd): it makes a set of ten, keeps them in memory until one is typed
/// back, stores only their Argon2id hashes (one salt for the set, so a check derives once:
/// `SecretHasher.verify(_:againstSet:)`), and spends each code once.
///
/// - A code is checked after its attempt is reserved, in the same gate as every factor; a wrong one is counted.
/// - A right code is removed from the stored set by a compare-and-swap on the record (`Store.replace`), recorded
///   as a use in the audit trail: of two hosts racing with the same code, one replaces the record and the other finds
///   the code gone, and is refused. Only then is the success settled.
/// - A new set replaces the old one whole: the old codes stop working at once.
public final class RecoveryKeeper: FactorKeeper {
    /// The factor.
    public var factor: FactorKind { .recovery }
    /// Counts attempts.
    public let gate: AttemptGate
    /// The slow hash.
    public let hasher: any SecretHasher
    /// How long a set waits for the code typed back to confirm it, in milliseconds.
    public static let pendingLifetime: Int64 = 600_000
    /// Sets offered and not yet confirmed.
    private let pending = PendingOffers<[[UInt8]]>(lifetime: pendingLifetime)
    private let random: @Sendable (Int) -> [UInt8]

    /// Creates the keeper. `random` draws the codes (the system's generator unless given: tests).
    public init(
        store: any Store, clock: any Clock, hasher: any SecretHasher, schedule: ThrottleSchedule = .passcode,
        random: (@Sendable (Int) -> [UInt8])? = nil
    ) {
        gate = AttemptGate(factor: .recovery, store: store, clock: clock, schedule: schedule)
        self.hasher = hasher
        self.random = random ?? randomBytes
    }

    public var store: any Store { gate.store }

    public var codes: FactorCodes { gate.codes }

    /// Whether a name has recovery codes is hidden at a login prompt, as every typed secret's enrollment is.
    public var concealsEnrollment: Bool { true }

    /// Enrolled, switched on, codes left and not locked: all in the store.
    public var judgedFromStore: Bool { true }

    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        let left = records.first { $0.factor == .recovery }.flatMap { try? RecoverySet(decoding: $0.payload) }
        guard (left?.hashes.isEmpty == false) || user.concealsEnrollment else { return .notEnrolled }
        return gate.availability(of: book, in: AttemptBook.Channel(remote: user.isRemote), whenAllowed: .available)
    }

    public func usesLeft(of record: Enrollment) -> Int? { (try? RecoverySet(decoding: record.payload))?.hashes.count }

    /// Ten new codes for `user`, returned once as lines of text, kept here until one is typed back.
    public func offer(for user: String) throws(AuthenticationError) -> [UInt8] {
        let set = RecoveryCode.generate(RecoveryCode.setSize, random: random)
        pending.keep(set, for: user, now: gate.clock.now().milliseconds)
        var text: [UInt8] = []
        for (index, code) in set.enumerated() {
            if index > 0 { text.append(UInt8(ascii: "\n")) }
            text += Array(RecoveryCode.written(code).utf8)
        }
        return text
    }

    /// The hashed set offered to `user`, once `evidence` is one of its codes typed back (it stays usable).
    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        guard label == nil else { throw AuthenticationError(.enrollmentRefused, "recovery codes have no named parts") }
        let now = gate.clock.now()
        guard let offered = pending.current(for: user, now: now.milliseconds) else {
            throw AuthenticationError(
                .enrollmentRefused,
                "no recovery codes were made for \(user.escapingControlCharacters) in the last "
                    + "\(Self.pendingLifetime / 60_000) minutes; run keyway enroll recovery again")
        }
        let typed: Secret
        switch try canonical(evidence) {
        case .success(let code): typed = code
        case .failure(let problem): throw AuthenticationError(.enrollmentRefused, problem.message)
        }
        guard offered.contains(where: { code in typed.withUnsafeBytes { $0.elementsEqual(code) } }) else {
            throw AuthenticationError(
                .enrollmentRefused, "that is not one of the codes shown; type one as it is written")
        }
        let hashes = try hasher.hashSet(offered.map { Secret(copying: $0) })
        pending.remove(user)
        return Enrollment(
            user: user, factor: .recovery, payload: RecoverySet(made: hashes.count, hashes: hashes).encoded,
            changedAt: now, changedBy: actor)
    }

    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        let candidate: Secret
        switch try canonical(evidence) {
        case .success(let code): candidate = code
        case .failure(let problem): return .failure(.malformed(problem.message))
        }
        guard let record = try store.enrollment(user: user.name, factor: .recovery),
            case let set = try RecoverySet(decoding: record.payload), !set.hashes.isEmpty
        else {
            guard user.concealsEnrollment else {
                throw AuthenticationError(.factorNotEnrolled, "\(user.name) has no recovery codes left")
            }
            return try concealedAbsence(evidence, for: user)
        }
        let reservation = try gate.reserve(for: user)
        switch try hasher.verify(candidate, againstSet: set.hashes) {
        case .mismatch(let fingerprint):
            return .failure(try gate.settleFailure(reservation, fingerprint: fingerprint))
        case .match(let index):
            // Take the code out of whatever the record holds now; a code already gone (used by another request, or
            // the set replaced) is refused.
            let spent = set.hashes[index]
            return try gate.settleUse(reservation, of: record) { payload throws(AuthenticationError) in
                var rest = try RecoverySet(decoding: payload)
                guard let position = rest.hashes.firstIndex(of: spent) else { return nil }
                rest.hashes.remove(at: position)
                return (rest.encoded, "a recovery code, \(rest.hashes.count) of \(rest.made) left")
            }
        }
    }

    /// A name without recovery codes, under concealment: counted, the slow work done, "not recognized".
    public func concealedAbsence(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .success(let candidate) = try canonical(evidence) else { return .failure(.notEnrolled) }
        let reservation = try gate.reserve(for: user)
        _ = try gate.settleFailure(reservation, fingerprint: hasher.burnWork(candidate))
        return .failure(.notEnrolled)
    }

    private func canonical(_ evidence: Evidence) throws(AuthenticationError)
        -> Result<Secret, KnowledgeFactor.NormalizationError>
    {
        guard case .secret(let secret) = evidence else {
            throw AuthenticationError(.invalidPolicy, "a recovery code is typed, not presented to a sensor")
        }
        return RecoveryCode.normalize(secret)
    }
}

/// How a set is stored: a version byte, how many codes it was made with, then the hashes of those not yet used, one
/// per line.
struct RecoverySet: Equatable {
    var made: Int
    var hashes: [String]

    init(made: Int, hashes: [String]) {
        self.made = made
        self.hashes = hashes
    }

    init(decoding bytes: [UInt8]) throws(AuthenticationError) {
        guard bytes.count >= 2, bytes[0] == 1, bytes[1] > 0,
            let text = String(validating: bytes[2...], as: UTF8.self)
        else {
            throw AuthenticationError(.storeFailure, "the stored recovery codes are not a version-1 record")
        }
        made = Int(bytes[1])
        hashes = text.isEmpty ? [] : text.split(separator: "\n").map { String($0) }
        guard hashes.count <= made else {
            throw AuthenticationError(.storeFailure, "the stored recovery codes hold more hashes than were made")
        }
    }

    var encoded: [UInt8] {
        var bytes: [UInt8] = [1, UInt8(made)]
        for (index, hash) in hashes.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: "\n")) }
            bytes += Array(hash.utf8)
        }
        return bytes
    }
}

extension FactorKind {
    /// Single-use codes for when the usual factors are lost (a phone): `require = totp or recovery`.
    public static let recovery = FactorKind(rawValue: "recovery")
}

extension RecoverySet {
    /// A set's spendable parts are its codes, each named by its hash with one use; fixed are the version and how many
    /// were made. A code used is 0 in the store and left out of the record (`SpendableLayout`).
    static let spendable = SpendableLayout(
        .recovery,
        split: { bytes in
            guard let set = try? RecoverySet(decoding: bytes), set.encoded == bytes else { return nil }
            return SpendableParts(
                fixed: Array(bytes.prefix(2)), items: set.hashes.map { SpendableItem($0, 1, .fallsByOne) })
        },
        join: { parts in
            guard parts.fixed.count == 2, parts.fixed[0] == 1, parts.fixed[1] > 0,
                parts.items.count <= Int(parts.fixed[1]),
                parts.items.allSatisfy({ ($0.value == 0 || $0.value == 1) && !$0.name.isEmpty })
            else { return nil }
            let set = RecoverySet(
                made: Int(parts.fixed[1]), hashes: parts.items.filter { $0.value == 1 }.map { $0.name })
            guard (try? RecoverySet(decoding: set.encoded)) == set else { return nil }
            return set.encoded
        })
}
