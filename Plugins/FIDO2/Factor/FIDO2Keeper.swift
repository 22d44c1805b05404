public import KeywayCore

/// The vault's side of security keys (keywayd): the registered keys of each account, the attempt gate, and the
/// signature counter (docs/ARCHITECTURE.md §19).
///
/// - Enrollment happens at the key: keywayd's libfido2 backend (`DeviceBackend` "libfido2") makes a credential and
///   this keeper stores it beside the account's other keys, under its name.
/// - Each attempt is one assertion over a fresh random challenge, which keywayd's listener already checked against
///   the account's public keys (`FIDO2Presentation`); here it is counted: reserved, then settled as a success only
///   for a signature by a registered credential, with the user present, verified when the settings require it, and
///   a signature counter above the one stored. A counter that does not increase is refused and the key is marked
///   "may have been cloned" (its record, `keyway status`, the audit trail, the reason logged), as pam_u2f never does.
/// - The new counter is written by a compare-and-swap of the record (`AttemptGate.settleUse`), so of two attempts
///   with one counter value (two copies of one key at once) only one succeeds.
public final class FIDO2Keeper: FactorKeeper {
    public var factor: FactorKind { .fido2 }
    /// Counts attempts.
    public let gate: AttemptGate
    /// Whether a verification must show user verification (a PIN or the key's own reader).
    public let requiresVerification: Bool
    /// The backend that makes credentials (keywayd's "libfido2"), or nil outside keywayd.
    public let device: (any DeviceBackend)?
    /// The factor's settings, handed to the backend when it enrolls.
    public let settings: FactorSettings

    public var codes: FactorCodes { gate.codes }
    public var store: any Store { gate.store }

    /// Creates the keeper.
    public init(
        store: any Store, clock: any Clock, schedule: ThrottleSchedule, requiresVerification: Bool,
        settings: FactorSettings = FactorSettings(), device: (any DeviceBackend)? = nil
    ) {
        gate = AttemptGate(factor: .fido2, store: store, clock: clock, schedule: schedule, codes: FIDO2Plugin.codes)
        self.requiresVerification = requiresVerification
        self.settings = settings
        self.device = device
    }

    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        guard records.contains(where: { $0.factor == .fido2 }) else { return .notEnrolled }
        return gate.availability(of: book, in: AttemptBook.Channel(remote: user.isRemote), whenAllowed: .available)
    }

    /// The registered keys of `user`, or nil.
    func keys(of user: String) throws(AuthenticationError) -> (Enrollment, FIDO2Keys)? {
        guard let record = try store.enrollment(user: user, factor: .fido2) else { return nil }
        return (record, try FIDO2Keys(decoding: record.payload))
    }

    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .device(let bytes) = evidence, let presented = FIDO2Presentation(decoding: bytes) else {
            throw AuthenticationError(.invalidPolicy, "a security key is touched, not typed")
        }
        guard let (record, keys) = try keys(of: user.name) else {
            throw AuthenticationError(.factorNotEnrolled, "no security key is registered for \(user.name)")
        }
        let reservation = try gate.reserve(for: user)
        guard presented.outcome == .signed, presented.userPresent,
            let index = keys.credentials.firstIndex(where: { $0.id == presented.credentialID })
        else { return .failure(try gate.settleFailure(reservation, fingerprint: nil)) }
        if requiresVerification && !presented.userVerified {
            _ = try gate.settleFailure(reservation, fingerprint: nil)
            throw AuthenticationError(
                .authenticationFailed, "the key did not verify its user (user-verification = required)")
        }
        let credential = keys.credentials[index]
        // Keys that keep no counter send 0 every time (WebAuthn §6.1.1): nothing to compare.
        if (presented.counter != 0 || credential.counter != 0) && presented.counter <= credential.counter {
            _ = try gate.settleFailure(reservation, fingerprint: nil)
            let why =
                "the signature counter of key '\(credential.name.escapingControlCharacters)' did not increase "
                + "(\(presented.counter) after \(credential.counter)): the key may have been cloned"
            try markClone(credential.id, in: record, why: why)
            throw AuthenticationError(.authenticationFailed, why + "; refused, and marked in keyway status")
        }
        return try gate.settleUse(reservation, of: record) { payload throws(AuthenticationError) in
            var current = try FIDO2Keys(decoding: payload)
            guard let at = current.credentials.firstIndex(where: { $0.id == presented.credentialID }),
                presented.counter == 0 || presented.counter > current.credentials[at].counter
            else { return nil }
            current.credentials[at].counter = presented.counter
            return (current.encoded, "security key '\(credential.name)', counter \(presented.counter)")
        }
    }

    /// Marks the credential as possibly cloned (once), with an audit row saying why.
    private func markClone(_ id: [UInt8], in record: Enrollment, why: String) throws(AuthenticationError) {
        var current = record
        for _ in 0..<8 {
            var keys = try FIDO2Keys(decoding: current.payload)
            guard let at = keys.credentials.firstIndex(where: { $0.id == id }), !keys.credentials[at].cloneSuspected
            else { return }
            keys.credentials[at].cloneSuspected = true
            var updated = current
            updated.payload = keys.encoded
            let entry = AuditEntry(
                at: gate.clock.now(), actor: "keywayd", user: record.user, action: .mark, factor: .fido2, detail: why)
            if try store.replace(current, with: updated, recording: entry) { return }
            guard let again = try store.enrollment(user: record.user, factor: .fido2) else { return }
            current = again
        }
    }

    /// A credential the backend made, added under its name (replacing a key of the same name).
    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        guard case .device(let bytes) = evidence, var made = FIDO2Credential(made: bytes) else {
            throw AuthenticationError(
                .enrollmentRefused, "a security key is enrolled at the key (keyway enroll fido2), not from a secret")
        }
        let name = label ?? "key"
        if let problem = Self.nameProblem(name) { throw AuthenticationError(.enrollmentRefused, problem) }
        made.name = name
        var keys = try self.keys(of: user)?.1 ?? FIDO2Keys([])
        keys.credentials.removeAll { $0.name == name || $0.id == made.id }
        guard keys.credentials.count < FIDO2Keys.maximum else {
            throw AuthenticationError(
                .enrollmentRefused, "\(user) already has \(FIDO2Keys.maximum) security keys; remove one first")
        }
        keys.credentials.append(made)
        return Enrollment(
            user: user, factor: .fido2, payload: keys.encoded, changedAt: gate.clock.now(), changedBy: actor)
    }

    /// Why `name` cannot name a key, or nil: 1 to 32 letters, digits, '-', '_' or '.'.
    public static func nameProblem(_ name: String) -> String? {
        let allowed = name.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: ".")
        }
        guard allowed, (1...32).contains(name.utf8.count) else {
            return "a key's name is 1 to 32 letters, digits, '-', '_' or '.'"
        }
        return nil
    }

    /// Makes the credential at the key (keywayd's backend), then stores it beside the account's other keys.
    public func enrollAtDevice(
        for user: String, label: String?, by actor: String, typed: Secret?, progress: (String) -> Void,
        cancelled: () -> Bool
    ) throws(AuthenticationError) {
        guard let device else {
            throw AuthenticationError(.factorNotAvailable, "only keywayd talks to security keys")
        }
        let name = label ?? "key"
        if let problem = Self.nameProblem(name) { throw AuthenticationError(.enrollmentRefused, problem) }
        let existing = try keys(of: user)
        let made = try device.enroll(
            FactorPlugin.DeviceSide(
                settings: settings, user: UserContext(name: user), limit: .seconds(120), enrollment: existing?.0,
                typed: typed),
            label: name, progress: progress, cancelled: cancelled)
        let record = try enrollment(of: .device(made), for: user, label: name, by: actor)
        if let existing {
            guard try store.replace(existing.0, with: record) else {
                throw AuthenticationError(
                    .serviceUnavailable, "the keys of \(user) changed meanwhile; nothing was enrolled, try again")
            }
        } else {
            try store.save(record)
        }
    }

    public func enrollment(removing label: String, from record: Enrollment, by actor: String)
        throws(AuthenticationError) -> Enrollment?
    {
        var keys = try FIDO2Keys(decoding: record.payload)
        keys.credentials.removeAll { $0.name == label }
        guard !keys.credentials.isEmpty else { return nil }
        var updated = record
        updated.payload = keys.encoded
        updated.changedAt = gate.clock.now()
        updated.changedBy = actor
        return updated
    }

    /// The keys' names; a key whose signature counter did not increase is named with the warning.
    public func details(of record: Enrollment) throws(AuthenticationError) -> (labels: [String], domainState: [UInt8]) {
        let keys = try FIDO2Keys(decoding: record.payload)
        return (
            keys.credentials.map {
                $0.cloneSuspected ? "\($0.name) (MAY BE CLONED: its counter did not increase)" : $0.name
            },
            []
        )
    }
}

extension FIDO2Credential {
    /// A credential as the backend hands it over after making it (its name given later): the stored form of one key.
    public init?(made bytes: [UInt8]) {
        guard let keys = try? FIDO2Keys(decoding: bytes), keys.credentials.count == 1 else { return nil }
        self = keys.credentials[0]
    }

    /// The form the backend hands over.
    public var made: [UInt8] { FIDO2Keys([self]).encoded }
}
