public import KeywayCore

/// The vault's side of TOTP (keywayd): it makes the shared secret, keeps it in the store, checks codes with the
/// attempt gate, and accepts each code once.
///
/// - `offer` makes a secret of `OneTimeCode.secretLength` random bytes and keeps it in memory, for this user only,
///   for `pendingLifetime`; it is the only time the secret leaves keywayd. An enrollment stores it only once a code
///   from it is confirmed, so a secret mistyped into a phone is never saved.
/// - A code is booked with the store (`Store.reserveOneTimeCode`: a fleet's database keeps a budget of wrong codes
///   no host can roll back), then its attempt reserved, then checked within `window` steps either side of now
///   (clocks drift).
/// - A code is accepted once: the store marks the step that matched as used in the transaction that checks it
///   (`Store.checkOneTimeCode`), so a code seen over a shoulder, or sent twice at once, is refused and counted. The
///   code that confirms an enrollment is of a step no later than the enrollment's, so it is used already.
/// - The secret is kept as it must be to compute codes (as google-authenticator-libpam's and pam_oath's files keep
///   it): in keywayd's store, which only root can read; never in a log, never in an answer after `offer`.
public final class TOTPKeeper: FactorKeeper {
    /// The factor.
    public var factor: FactorKind { .totp }
    /// Counts attempts.
    public let gate: AttemptGate
    /// Digits per code for new enrollments.
    public let digits: Int
    /// Steps accepted either side of now.
    public let window: Int64
    /// How long an offered secret waits for its confirming code, in milliseconds.
    public static let pendingLifetime: Int64 = 600_000
    /// Secrets offered and not yet confirmed.
    private let pending = PendingOffers<[UInt8]>(lifetime: pendingLifetime)
    /// Makes a new secret.
    private let random: @Sendable (Int) -> [UInt8]
    /// Keys the fingerprints of codes typed for a name with no code enrolled (made at start, never stored).
    private let absentKey: [UInt8]

    /// Creates the keeper. `random` makes secrets (the system's generator unless given: tests).
    public init(
        store: any Store, clock: any Clock, schedule: ThrottleSchedule = .passcode, digits: Int = 6,
        window: Int = 1, random: (@Sendable (Int) -> [UInt8])? = nil
    ) {
        gate = AttemptGate(factor: .totp, store: store, clock: clock, schedule: schedule)
        self.digits = digits
        self.window = Int64(window)
        self.random = random ?? randomBytes
        absentKey = randomBytes(32)
    }

    public var store: any Store { gate.store }

    public var codes: FactorCodes { gate.codes }

    /// A login prompt does not tell whether a name has a code enrolled (docs/ARCHITECTURE.md §5): under concealment
    /// every name is asked, and a name without one is counted and refused as a wrong code is.
    public var concealsEnrollment: Bool { true }

    /// Enrolled, switched on and not locked: all in the store.
    public var judgedFromStore: Bool { true }

    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        guard records.contains(where: { $0.factor == .totp }) || user.concealsEnrollment else { return .notEnrolled }
        return gate.availability(of: book, in: AttemptBook.Channel(remote: user.isRemote), whenAllowed: .available)
    }

    public func concealedAbsence(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard let entered = try Self.code(of: evidence, digits: digits) else {
            return .failure(.malformed("a code is \(digits) digits"))
        }
        // Counted, and a repeat refunded, exactly as an enrolled name's wrong code is (by step), so the counts do
        // not tell the two apart.
        let reservation = try gate.reserve(for: user)
        let step = OneTimeCode(secret: absentKey, digits: digits).step(at: gate.clock.now())
        let fingerprint = OneTimeCode.mismatchFingerprint(entered, step: step, key: absentKey + Array(user.name.utf8))
        _ = try gate.settleFailure(reservation, fingerprint: fingerprint)
        return .failure(.notEnrolled)
    }

    public func offer(for user: String) throws(AuthenticationError) -> [UInt8] {
        let secret = random(OneTimeCode.secretLength)
        pending.keep(secret, for: user, now: gate.clock.now().milliseconds)
        return secret
    }

    /// The enrollment of the secret offered to `user`, once `evidence` is a current code from it. The confirming code
    /// is spent: it cannot then log in.
    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        guard label == nil else { throw AuthenticationError(.enrollmentRefused, "a totp has no named parts") }
        let entered = try Self.code(of: evidence, digits: digits)
        let now = gate.clock.now()
        guard let offered = pending.current(for: user, now: now.milliseconds) else {
            throw AuthenticationError(
                .enrollmentRefused,
                "no secret was offered for \(user.escapingControlCharacters) in the last "
                    + "\(Self.pendingLifetime / 60_000) minutes; run keyway enroll totp again")
        }
        guard let entered else { throw AuthenticationError(.enrollmentRefused, "a code is \(digits) digits") }
        let generator = OneTimeCode(secret: offered, digits: digits)
        let current = generator.step(at: now)
        // Not a code of a later step: the enrollment's own step marks the confirming code used (`checkOneTimeCode`).
        guard let step = generator.matchingStep(entered, around: current, window: window), step <= current else {
            throw AuthenticationError(
                .enrollmentRefused,
                "that is not the app's current code for this secret (is the phone's clock right?); try the next code")
        }
        pending.remove(user)
        return Enrollment(
            user: user, factor: .totp, payload: generator.record, changedAt: now, changedBy: actor)
    }

    /// The code is checked by the store (`Store.checkOneTimeCode`), which keeps the secret: a fleet's database gives
    /// no host a seed, only the record's header (the digits and the period).
    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard let record = try store.enrollment(user: user.name, factor: .totp) else {
            if user.concealsEnrollment { return try concealedAbsence(evidence, for: user) }
            throw AuthenticationError(.factorNotEnrolled, "no totp is enrolled for \(user.name)")
        }
        guard let shape = OneTimeCode(record: record.payload, needsSecret: false) else {
            throw AuthenticationError(.storeFailure, "the stored totp of \(user.name) is not a version-1 record")
        }
        guard let entered = try Self.code(of: evidence, digits: shape.digits) else {
            return .failure(.malformed("a code is \(shape.digits) digits"))
        }
        // Booked before it is counted: a budget the store keeps, once spent, answers "not available" and counts
        // nothing, so strangers spending it cannot make the person's right code a counted failure.
        try store.reserveOneTimeCode(user: user.name, factor: .totp, code: entered, remote: user.isRemote)
        let reservation = try gate.reserve(for: user)
        guard
            let check = try store.checkOneTimeCode(
                user: user.name, factor: .totp, code: entered, window: window, remote: user.isRemote,
                at: gate.clock.now())
        else {
            // Removed since it was read: a wrong code, as for a name without one.
            return .failure(try gate.settleFailure(reservation, fingerprint: nil))
        }
        if check.step != nil {
            try gate.settleSuccess(reservation)
            return .success
        }
        // A wrong code, or one already used. A repeat of the same wrong code in the same step is refunded, as every
        // factor's repeat is; in a later step it is a new guess.
        return .failure(try gate.settleFailure(reservation, fingerprint: check.fingerprint))
    }

    /// The digits typed, or nil when they are not `digits` digits (spaces, as apps show "123 456", are dropped).
    static func code(of evidence: Evidence, digits: Int) throws(AuthenticationError) -> [UInt8]? {
        guard case .secret(let secret) = evidence else {
            throw AuthenticationError(.invalidPolicy, "a totp is checked with a code, not sensor samples")
        }
        let typed = secret.withUnsafeBytes { bytes in bytes.filter { $0 != UInt8(ascii: " ") } }
        guard typed.count == digits, typed.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
            return nil
        }
        return typed
    }
}

extension FactorKind {
    /// A time-based one-time code from an authenticator app (RFC 6238).
    public static let totp = FactorKind(rawValue: "totp")
}
