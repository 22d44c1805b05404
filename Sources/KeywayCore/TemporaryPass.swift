extension FactorKind {
    /// An administrator's temporary pass, typed where the factor it stands in for is asked (`PassKeeper`).
    public static let pass = FactorKind(rawValue: "pass")
}

/// An administrator's temporary pass (Entra's Temporary Access Pass, privacyIDEA's replacement token): a code root
/// issues for one account, accepted at the prompt of one factor (`in place of totp`) a number of times, until a time
/// by the store's clock (a fleet's database's, so every host agrees). One per account: a new one replaces it.
///
/// - `offer` makes the code (16 characters of `ReadableCode`, 79 bits) and keeps it in memory; `enrollment` with the
///   same code and the terms as its label (`FACTOR SECONDS USES`) stores its Argon2id hash, so root sees it once.
/// - `LocalVault.verify` hands it a typed entry that has a pass's form at the prompt of the factor it stands in for
///   (`standsIn`); it is counted in its own gate, and a use is spent by a compare-and-swap of the record, recorded as
///   a use in the audit trail: of two hosts racing for the last use, one gets it.
public final class PassKeeper: FactorKeeper {
    public var factor: FactorKind { .pass }
    /// Counts attempts at passes.
    public let gate: AttemptGate
    /// The slow hash.
    public let hasher: any SecretHasher
    /// The form of a pass.
    public static let form = ReadableCode(length: 16)
    /// The longest a pass may last, in seconds (30 days), and the most uses.
    public static let longest: Int64 = 30 * 86_400
    public static let mostUses = 10
    /// Passes made and not yet stored: `keyway pass issue` stores one at once.
    private let pending = PendingOffers<[UInt8]>(lifetime: 60_000)
    private let random: @Sendable (Int) -> [UInt8]

    /// Creates the keeper. `random` draws the codes (the system's generator unless given: tests).
    public init(
        store: any Store, clock: any Clock, hasher: any SecretHasher, random: (@Sendable (Int) -> [UInt8])? = nil
    ) {
        gate = AttemptGate(factor: .pass, store: store, clock: clock, schedule: .passcode)
        self.hasher = hasher
        self.random = random ?? randomBytes
    }

    public var store: any Store { gate.store }

    /// A pass is never a policy's factor on its own: it only stands in for one.
    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        .notEnrolled
    }

    public func uses(of record: Enrollment) -> Uses? {
        (try? PassRecord(decoding: record.payload)).map { Uses(left: $0.uses) }
    }

    public func details(of record: Enrollment) throws(AuthenticationError) -> (labels: [String], domainState: [UInt8]) {
        let pass = try PassRecord(decoding: record.payload)
        let state = pass.expires < gate.clock.now() ? "expired" : "until"
        return (["in place of \(pass.inPlaceOf)", "\(state) \(pass.expires)"], [])
    }

    /// A new pass for `user`, returned once as written; kept here until `enrollment` stores it (within a minute).
    public func offer(for user: String) throws(AuthenticationError) -> [UInt8] {
        let code = Self.form.generate(1, random: random)[0]
        pending.keep(code, for: user, now: gate.clock.now().milliseconds)
        return Array(Self.form.written(code).utf8)
    }

    /// The pass offered to `user`, with the terms in `label` (`FACTOR SECONDS USES`), hashed.
    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        let words = (label ?? "").split(separator: " ").map(String.init)
        guard words.count == 3, let seconds = Int64(words[1]), (60...Self.longest).contains(seconds),
            let uses = Int(words[2]), (1...Self.mostUses).contains(uses), !words[0].isEmpty, words[0] != "pass"
        else {
            throw AuthenticationError(
                .enrollmentRefused,
                "a pass's terms are FACTOR SECONDS USES: a factor, 60 to \(Self.longest) seconds, 1 to \(Self.mostUses) uses"
            )
        }
        let now = gate.clock.now()
        guard case .secret(let typed) = evidence, let canonical = Self.form.canonical(typed),
            let offered = pending.current(for: user, now: now.milliseconds),
            canonical.withUnsafeBytes({ $0.elementsEqual(offered) })
        else {
            throw AuthenticationError(
                .enrollmentRefused, "no pass was made for \(user.escapingControlCharacters) just now")
        }
        pending.remove(user)
        let record = PassRecord(
            inPlaceOf: FactorKind(rawValue: words[0]), expires: now.adding(.seconds(seconds)), uses: uses, made: uses,
            hash: try hasher.hash(canonical))
        return Enrollment(user: user, factor: .pass, payload: record.encoded, changedAt: now, changedBy: actor)
    }

    /// True when `typed` (if given) has a pass's form and `user` holds a pass in place of `factor` with uses left,
    /// unexpired. Under concealment, an entry of a pass's form from a name that holds no pass is this keeper's too
    /// (`concealedAbsence`), so it is answered as a wrong pass is, not as a malformed entry of `factor`.
    public func standsIn(for factor: FactorKind, typed: Secret?, user: UserContext) -> Bool {
        guard typed.map({ Self.form.canonical($0) != nil }) ?? true else { return false }
        guard let record = try? store.enrollment(user: user.name, factor: .pass) else {
            return typed != nil && user.concealsEnrollment
        }
        guard let pass = try? PassRecord(decoding: record.payload) else { return false }
        return pass.inPlaceOf == factor && pass.uses > 0 && gate.clock.now() < pass.expires
    }

    /// True when `user`'s pass stands in for `factor`, has been used, has not lapsed, and was issued after `factor`'s
    /// record was last written: the lost-phone pass that let the person in lets them replace what it stood in for,
    /// once (the replacement is a newer record), even when its last use was the login (`VaultService.selfService`).
    public static func letsReplace(_ factor: FactorKind, of user: String, in store: any Store, now: Timestamp)
        throws(AuthenticationError) -> Bool
    {
        guard let record = try store.enrollment(user: user, factor: .pass),
            let pass = try? PassRecord(decoding: record.payload),
            pass.inPlaceOf == factor, pass.uses < pass.made, now < pass.expires
        else { return false }
        guard let current = try store.enrollment(user: user, factor: factor) else { return false }
        return current.changedAt < record.changedAt
    }

    /// A pass typed for a name that holds none, under concealment: counted, and refused after the same slow hash a
    /// wrong pass costs, as a wrong pass is.
    public func concealedAbsence(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .secret(let typed) = evidence, let candidate = Self.form.canonical(typed) else {
            return .failure(.malformed("a pass is 16 letters and digits, as written: xxxx-xxxx-xxxx-xxxx"))
        }
        let reservation = try gate.reserve(for: user)
        let fingerprint = hasher.burnWork(candidate)
        return .failure(try gate.settleFailure(reservation, fingerprint: fingerprint))
    }

    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .secret(let typed) = evidence, let candidate = Self.form.canonical(typed) else {
            return .failure(.malformed("a pass is 16 letters and digits, as written: xxxx-xxxx-xxxx-xxxx"))
        }
        guard let record = try store.enrollment(user: user.name, factor: .pass) else {
            if user.concealsEnrollment { return try concealedAbsence(evidence, for: user) }
            throw AuthenticationError(.factorNotEnrolled, "\(user.name) holds no pass")
        }
        let reservation = try gate.reserve(for: user)
        let pass = try PassRecord(decoding: record.payload)
        switch try hasher.verify(candidate, against: pass.hash) {
        case .mismatch(let fingerprint):
            return .failure(try gate.settleFailure(reservation, fingerprint: fingerprint))
        case .match:
            // Spend one use of this very pass (the same hash), unexpired, whatever else changed in between.
            return try gate.settleUse(reservation, of: record) { payload throws(AuthenticationError) in
                var left = try PassRecord(decoding: payload)
                guard left.hash == pass.hash, left.uses > 0, gate.clock.now() < left.expires else { return nil }
                left.uses -= 1
                return (left.encoded, "a pass in place of \(left.inPlaceOf), \(left.uses) of \(left.made) uses left")
            }
        }
    }
}

/// How a pass is stored: lines of text (a version, the factor, the end in milliseconds, uses left, uses given, the
/// Argon2id hash).
struct PassRecord: Equatable {
    var inPlaceOf: FactorKind
    var expires: Timestamp
    var uses: Int
    var made: Int
    var hash: String

    init(inPlaceOf: FactorKind, expires: Timestamp, uses: Int, made: Int, hash: String) {
        self.inPlaceOf = inPlaceOf
        self.expires = expires
        self.uses = uses
        self.made = made
        self.hash = hash
    }

    init(decoding bytes: [UInt8]) throws(AuthenticationError) {
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map {
            String(decoding: $0, as: UTF8.self)
        }
        guard lines.count == 6, lines[0] == "1", let expires = Int64(lines[2]), let uses = Int(lines[3]),
            let made = Int(lines[4]), uses >= 0, uses <= made
        else {
            throw AuthenticationError(.storeFailure, "the stored pass is not a version-1 record")
        }
        self.init(
            inPlaceOf: FactorKind(rawValue: lines[1]), expires: Timestamp(milliseconds: expires), uses: uses,
            made: made, hash: lines[5])
    }

    var encoded: [UInt8] { Self.lines(of: self, uses: String(uses)) }
}

extension PassKeeper {
    /// A pass's spendable part is its uses left; the rest, with `-` where the uses were, is fixed (`SpendableLayout`).
    public static let spendable = SpendableLayout(
        .pass,
        split: { bytes in
            guard let record = try? PassRecord(decoding: bytes), record.encoded == bytes else { return nil }
            return SpendableParts(
                fixed: PassRecord.lines(of: record, uses: "-"),
                items: [SpendableItem("uses", Int64(record.uses), .fallsByOne)])
        },
        join: { parts in
            var lines = parts.fixed.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
            guard parts.items.count == 1, parts.items[0].name == "uses", lines.count == 6,
                Array(lines[3]) == [UInt8(ascii: "-")],
                parts.items[0].value >= 0, parts.items[0].value <= Int64(PassKeeper.mostUses)
            else { return nil }
            lines[3] = ArraySlice(String(parts.items[0].value).utf8)
            var bytes: [UInt8] = []
            for (index, line) in lines.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: "\n")) }
                bytes += line
            }
            guard let record = try? PassRecord(decoding: bytes), record.encoded == bytes else { return nil }
            return bytes
        })
}

extension PassRecord {
    /// The record's lines with `uses` in place of its uses left.
    static func lines(of record: PassRecord, uses: String) -> [UInt8] {
        Array(
            "1\n\(record.inPlaceOf.rawValue)\n\(record.expires.milliseconds)\n\(uses)\n\(record.made)\n\(record.hash)"
                .utf8)
    }
}
