public import KeywayCore

/// The vault's side of recovery codes (keywayd): it makes a set of ten, keeps them in memory until one is typed
/// back, stores only their Argon2id hashes, each with its own salt and numbered as the list shows them, and spends
/// each code once, in order: the prompt asks for the lowest unused number and only that code is checked, so a check
/// derives once (`RecoverySet`; a set made before numbering accepts any of its codes, against its one salt).
///
/// - A code is checked after its attempt is reserved, in the same gate as every factor; a wrong one is counted, and
///   so is another code of the set typed where the next was asked: one failure, as any wrong code.
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
        guard (left?.lines.isEmpty == false) || user.concealsEnrollment else { return .notEnrolled }
        return gate.availability(of: book, in: AttemptBook.Channel(remote: user.isRemote), whenAllowed: .available)
    }

    public func uses(of record: Enrollment) -> Uses? {
        (try? RecoverySet(decoding: record.payload)).map { Uses(left: $0.lines.count, next: $0.next?.number) }
    }

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
        var hashes: [String] = []
        for code in offered { hashes.append(try hasher.hash(Secret(copying: code))) }
        pending.remove(user)
        return Enrollment(
            user: user, factor: .recovery, payload: RecoverySet(numbering: hashes).encoded, changedAt: now,
            changedBy: actor)
    }

    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        let candidate: Secret
        switch try canonical(evidence) {
        case .success(let code): candidate = code
        case .failure(let problem): return .failure(.malformed(problem.message))
        }
        guard let record = try store.enrollment(user: user.name, factor: .recovery),
            case let set = try RecoverySet(decoding: record.payload), !set.lines.isEmpty
        else {
            guard user.concealsEnrollment else {
                throw AuthenticationError(.factorNotEnrolled, "\(user.name) has no recovery codes left")
            }
            return try concealedAbsence(evidence, for: user)
        }
        let reservation = try gate.reserve(for: user)
        // The line of the code that matched: the next one's alone (version 2), or any of a version-1 set's.
        let spent: String
        if let next = set.next {
            switch try hasher.verify(candidate, against: next.hash) {
            case .mismatch(let fingerprint):
                return .failure(try gate.settleFailure(reservation, fingerprint: fingerprint))
            case .match: spent = set.lines[0]
            }
        } else {
            switch try hasher.verify(candidate, againstSet: set.lines) {
            case .mismatch(let fingerprint):
                return .failure(try gate.settleFailure(reservation, fingerprint: fingerprint))
            case .match(let index): spent = set.lines[index]
            }
        }
        // Take the code out of whatever the record holds now; a code already gone (used by another request, or the
        // set replaced) is refused.
        return try gate.settleUse(reservation, of: record) { payload throws(AuthenticationError) in
            var rest = try RecoverySet(decoding: payload)
            guard let position = rest.lines.firstIndex(of: spent) else { return nil }
            rest.lines.remove(at: position)
            let which = RecoverySet.entry(spent).map { "recovery code \($0.number)" } ?? "a recovery code"
            return (rest.encoded, "\(which), \(rest.lines.count) of \(rest.made) left")
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

/// How a set is stored: a version byte, how many codes it was made with, then one line per code not yet used.
///
/// - Version 2, as NIST SP 800-63B-4 asks of look-up secrets: each line is the code's number on the list shown and
///   its own salted hash (`3 $argon2id$…`), in the order of their numbers. A code is asked for by number, the lowest
///   unused first, so a check derives once.
/// - Version 1, sets made before: the hashes alone under one salt for the set (`SecretHasher.hashSet`); any unused code
///   is accepted, which derives once too. Such a set keeps working until it is replaced.
struct RecoverySet: Equatable {
    /// 1 or 2.
    var version: UInt8
    /// Codes the set was made with.
    var made: Int
    /// The stored lines of the unused codes.
    var lines: [String]

    /// A version-2 set of `hashes`, numbered from 1 in order.
    init(numbering hashes: [String]) {
        version = 2
        made = hashes.count
        lines = hashes.enumerated().map { "\($0.offset + 1) \($0.element)" }
    }

    init(decoding bytes: [UInt8]) throws(AuthenticationError) {
        guard bytes.count >= 2, bytes[0] == 1 || bytes[0] == 2, bytes[1] > 0,
            let text = String(validating: bytes[2...], as: UTF8.self)
        else {
            throw AuthenticationError(.storeFailure, "the stored recovery codes are not a version-1 or 2 record")
        }
        version = bytes[0]
        made = Int(bytes[1])
        lines = text.isEmpty ? [] : text.split(separator: "\n", omittingEmptySubsequences: false).map { String($0) }
        guard lines.count <= made, !lines.contains(where: { $0.isEmpty }) else {
            throw AuthenticationError(.storeFailure, "the stored recovery codes hold more hashes than were made")
        }
        if version == 2 {
            let numbers = lines.map { Self.entry($0)?.number ?? 0 }
            guard numbers.allSatisfy({ (1...made).contains($0) }), zip(numbers, numbers.dropFirst()).allSatisfy(<)
            else {
                throw AuthenticationError(
                    .storeFailure, "the stored recovery codes are not numbered 1 to \(made) in order")
            }
        }
    }

    /// A version-2 line's number and hash.
    static func entry(_ line: String) -> (number: Int, hash: String)? {
        guard let space = line.firstIndex(of: " "), let number = Int(line[..<space]) else { return nil }
        return (number, String(line[line.index(after: space)...]))
    }

    /// The code asked for next (the lowest unused number) and its hash; nil for a version-1 set or an empty one.
    var next: (number: Int, hash: String)? { version == 2 ? lines.first.flatMap(Self.entry) : nil }

    var encoded: [UInt8] {
        var bytes: [UInt8] = [version, UInt8(made)]
        for (index, line) in lines.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: "\n")) }
            bytes += Array(line.utf8)
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
                fixed: Array(bytes.prefix(2)), items: set.lines.map { SpendableItem($0, 1, .fallsByOne) })
        },
        join: { parts in
            guard parts.fixed.count == 2, parts.fixed[0] == 1 || parts.fixed[0] == 2, parts.fixed[1] > 0,
                parts.items.count <= Int(parts.fixed[1]),
                parts.items.allSatisfy({ ($0.value == 0 || $0.value == 1) && !$0.name.isEmpty })
            else { return nil }
            var set = RecoverySet(numbering: [])
            set.version = parts.fixed[0]
            set.made = Int(parts.fixed[1])
            set.lines = parts.items.filter { $0.value == 1 }.map { $0.name }
            guard (try? RecoverySet(decoding: set.encoded)) == set else { return nil }
            return set.encoded
        })
}
