/// Where Keyway's state is kept and its secrets checked: the questions the factors ask of the store and the slow
/// hash, and the administration the command line needs (docs/ARCHITECTURE.md §10).
///
/// Two implementations, and the factors cannot tell them apart:
/// - `LocalVault`: in this process, over a `Store` and the factors' keepers. keywayd serves one; tests and
///   `keyway --store` use one directly.
/// - `DaemonVault` (KeywayRuntime): keywayd over its socket. The PAM module and the command line use it, so no
///   process a user can stop ever holds a store lock.
///
/// Implementation requirements:
/// - `verify` reserves the attempt, verifies and settles in one call: nothing is left for the caller to settle.
/// - Every failure is an `AuthenticationError`; a refusal (not allowed, busy, unreachable) costs the user nothing.
/// - Class-bound, so factors can hold one as an existential in every build mode.
public protocol Vault: AnyObject, Sendable {
    /// Whether `factor`'s state lets it be used for `user` now: enrolled, not locked. Never prompts.
    func availability(of factor: FactorKind, for user: UserContext) -> Availability
    /// One counted attempt: reserve, verify the evidence, settle.
    func verify(_ evidence: Evidence, of factor: FactorKind, for user: UserContext) throws(AuthenticationError)
        -> Verdict
    /// Checks the evidence against the factor's enrollment rules and stores it (a secret's hash, a finger's template
    /// under `label`), replacing what was there.
    func enroll(_ evidence: Evidence, of factor: FactorKind, for user: String, label: String?, by actor: String)
        throws(AuthenticationError)
    /// Verifies `current` (a counted attempt), then enrolls `new`: what a user may do to their own factor.
    func change(_ current: Secret, to new: Secret, of factor: FactorKind, for user: String, by actor: String)
        throws(AuthenticationError)
    /// A new shared secret for a factor enrolled with one (TOTP): kept by the vault until `enroll` confirms it with a
    /// code, and returned this once, to be shown to the person. Root, or the owner just after a verification.
    func offer(_ factor: FactorKind, for user: String, by actor: String) throws(AuthenticationError) -> [UInt8]
    /// Removes the enrollment (or only `label`, a finger); false when there was none.
    func remove(_ factor: FactorKind, of user: String, label: String?, by actor: String) throws(AuthenticationError)
        -> Bool
    /// Enrollments, counters and availability of one user, or of every user when nil.
    func status(of user: String?) throws(AuthenticationError) -> [UserStatus]
    /// Clears the counters of one factor, or all (as `faillock --reset`).
    func reset(_ factor: FactorKind?, of user: String, by actor: String) throws(AuthenticationError)
    /// Who changed what, oldest first; for one user or all.
    func audit(of user: String?) throws(AuthenticationError) -> [AuditEntry]
    /// Sets one of the user's switches (`gesture.enabled`, `gesture.show-trail`): a key the vault does not know is
    /// refused. Whether the caller may (turning a factor off needs it verified first) is keywayd's to decide.
    func set(_ key: String, to value: Bool, of user: String, by actor: String) throws(AuthenticationError)
    /// Arms `factor` for `user` (`first of`): the vault waits at the device, matches and counts what is presented, at
    /// most `attempts` counted failures, until the returned factor is released. Only a vault beside the device can.
    /// With `waits`, a device another authentication holds is waited for in line instead of refused at once.
    /// `typed` is what the person typed for the device (a security key's PIN), used for this arming only.
    func arm(_ factor: FactorKind, for user: UserContext, attempts: Int, waits: Bool, typed: Secret?)
        throws(AuthenticationError) -> any ArmedFactor
    /// True for a vault that waits at the devices itself (keywayd's), so a factor's sequential wait is an arming.
    var waitsAtDevices: Bool { get }
    /// The stored record of `user`'s enrollment of `factor`, for keywayd's own device listeners (a security key signs
    /// only for the credentials it is told of); nil when there is none or the vault does not say.
    func record(of factor: FactorKind, for user: String) throws(AuthenticationError) -> Enrollment?
    /// True when an administrator's pass `user` has used lets them replace `factor` (`PassKeeper.letsReplace`).
    func passLetsReplace(_ factor: FactorKind, of user: String) throws(AuthenticationError) -> Bool
    /// Enrolls `label` of `factor` for `user` at a device the vault drives (fprintd's reader), telling the person
    /// each step through `progress`; `cancelled` is asked while the device waits. Root only; only a vault beside
    /// the device can. `typed` as for `arm`.
    func enrollAtDevice(
        _ factor: FactorKind, for user: String, label: String?, by actor: String, typed: Secret?,
        progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError)
}

extension Vault {
    public func arm(_ factor: FactorKind, for user: UserContext, attempts: Int, waits: Bool, typed: Secret?)
        throws(AuthenticationError) -> any ArmedFactor
    {
        throw AuthenticationError(.factorNotAvailable, "this vault cannot wait at the \(factor)")
    }

    /// Most vaults hold no device.
    public var waitsAtDevices: Bool { false }

    /// Only a vault beside the store says.
    public func record(of factor: FactorKind, for user: String) throws(AuthenticationError) -> Enrollment? { nil }

    /// Only a vault beside the store says.
    public func passLetsReplace(_ factor: FactorKind, of user: String) throws(AuthenticationError) -> Bool { false }

    public func enrollAtDevice(
        _ factor: FactorKind, for user: String, label: String?, by actor: String, typed: Secret?,
        progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) {
        throw AuthenticationError(.factorNotAvailable, "this vault drives no device to enroll the \(factor) at")
    }
}

/// What a factor hands over to be checked or enrolled.
public enum Evidence: Sendable, Equatable {
    /// A secret in the factor's canonical form (the pattern's dots, the passcode's bytes).
    case secret(Secret)
    /// Sensor samples: one to match, several to enroll. Each is a point in the sensor's feature space.
    case samples([[Double]])
    /// What a device produced inside keywayd, in its factor's own form: fprintd's verdict (one byte, 1 for a match),
    /// a security key's checked assertion. Made only by keywayd's own listener at the device: the wire refuses it
    /// from any client.
    case device([UInt8])

    /// True for a secret typed at a prompt; false for what a device produced, which a device's `ArmingRule` governs.
    public var isTyped: Bool {
        switch self {
        case .secret: true
        case .samples, .device: false
        }
    }
}

/// What is left of an enrollment spent a use at a time (`FactorKeeper.uses(of:)`).
public struct Uses: Sendable, Equatable {
    /// The uses left.
    public var left: Int
    /// The number of the one asked for next, when they are used in order; nil when any may be.
    public var next: Int?

    /// Creates a count.
    public init(left: Int, next: Int? = nil) {
        self.left = left
        self.next = next
    }
}

/// One user's enrollments, counters and availability, as `keyway status` shows them.
public struct UserStatus: Sendable, Equatable {
    /// The account name.
    public var user: String
    /// One entry per factor the vault knows, in its order.
    public var factors: [FactorStatus]
    /// The switches the user set (key → on/off); a key not here has its default.
    public var switches: [String: Bool]

    /// Creates a status.
    public init(user: String, factors: [FactorStatus], switches: [String: Bool] = [:]) {
        self.user = user
        self.factors = factors
        self.switches = switches
    }

    /// The value of `setting` for this user.
    public func value(of setting: UserSetting) -> Bool { switches[setting.key] ?? setting.defaultValue }

    /// One factor of one user.
    public struct FactorStatus: Sendable, Equatable {
        /// The factor.
        public var factor: FactorKind
        /// When and by whom it was enrolled, or nil when it is not.
        public var enrolled: (at: Timestamp, by: String)?
        /// Named parts of the enrollment (fingers), in order.
        public var labels: [String]
        /// Consecutive failures counted now.
        public var failures: Int
        /// What the counters and the enrollment allow now.
        public var availability: Availability
        /// Changes with every enrollment change (LocalAuthentication's `evaluatedPolicyDomainState`); may be empty.
        public var domainState: [UInt8]
        /// Uses left, for a factor spent a use at a time (recovery codes); nil for any other.
        public var usesLeft: Int?
        /// The number of the use a prompt asks for next, for a factor used in order (recovery code 3); nil for any
        /// other, and for a set made before codes were asked in order.
        public var nextUse: Int? = nil
        /// The counters of remote sessions, kept apart (`AttemptBook.Channel`): their consecutive failures and what
        /// they allow a remote session now.
        public var remoteFailures: Int = 0
        public var remoteAvailability: Availability? = nil

        /// Creates a factor status.
        public init(
            factor: FactorKind, enrolled: (at: Timestamp, by: String)?, labels: [String] = [], failures: Int = 0,
            availability: Availability, domainState: [UInt8] = [], usesLeft: Int? = nil
        ) {
            self.usesLeft = usesLeft
            self.factor = factor
            self.enrolled = enrolled
            self.labels = labels
            self.failures = failures
            self.availability = availability
            self.domainState = domainState
        }

        public static func == (lhs: FactorStatus, rhs: FactorStatus) -> Bool {
            lhs.factor == rhs.factor && lhs.enrolled?.at == rhs.enrolled?.at && lhs.enrolled?.by == rhs.enrolled?.by
                && lhs.labels == rhs.labels && lhs.failures == rhs.failures && lhs.availability == rhs.availability
                && lhs.domainState == rhs.domainState && lhs.usesLeft == rhs.usesLeft && lhs.nextUse == rhs.nextUse
                && lhs.remoteFailures == rhs.remoteFailures && lhs.remoteAvailability == rhs.remoteAvailability
        }
    }

    /// The status of `factor`, if the vault knows it.
    public subscript(factor: FactorKind) -> FactorStatus? { factors.first { $0.factor == factor } }
}

/// The half of a factor plugin that runs where the state is (in keywayd): it checks evidence against enrollments
/// with the attempt gate, and applies the enrollment rules. The other half, the `Authenticator`, talks to the
/// person and hands evidence to a `Vault`.
public protocol FactorKeeper: AnyObject, Sendable {
    /// The factor kept.
    var factor: FactorKind { get }
    /// Where its enrollments and counters are.
    var store: any Store { get }
    /// Where its attempts are counted and its lockouts decided, from the counters alone (keywayd's lockout events and
    /// gauge read it, never a device: `LocalVault.lockedFactors`).
    var gate: AttemptGate { get }
    /// Enrolled and not locked, judged from the user's enrollments and counters already read (so `status` reads
    /// each user once, whatever the number of factors).
    func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability
    /// Enrolled, switched on and not locked now: the account read once (`Store.account`) after `refresh` (the
    /// default, `availabilityReadingOnce`); a keeper whose device answers both questions at once asks it once.
    /// `switchedOff` is the vault's answer, from the account's preferences, for a factor its owner turned off.
    func availability(for user: UserContext, switchedOff: ([String: String]) -> Availability?) -> Availability
    /// Reserve, verify, settle.
    func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict
    /// Checks the rules and builds the enrollment record to save (not saving it).
    func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    /// The enrollment without `label`, or nil when removing it leaves nothing; throws when the factor has no labels.
    func enrollment(removing label: String, from record: Enrollment, by actor: String) throws(AuthenticationError)
        -> Enrollment?
    /// The labels and domain state of a stored enrollment.
    func details(of record: Enrollment) throws(AuthenticationError) -> (labels: [String], domainState: [UInt8])
    /// Throws why `user`'s enrollment cannot be removed here (a reader that keeps its own prints); most can be.
    func checkRemoval(of user: String) throws(AuthenticationError)
    /// For an enrollment spent a use at a time (recovery codes, a pass): the uses left, and the number of the one a
    /// prompt asks for next when they are used in order (recovery code 3); nil for any other.
    func uses(of record: Enrollment) -> Uses?
    /// True when what `user` typed at `factor`'s prompt is this keeper's to check instead (an administrator's pass
    /// in place of the factor: `PassKeeper`), or with `typed` nil, when `user` holds such a stand-in at all (then the
    /// factor is asked even if it is not enrolled or is locked); most keepers stand in for nothing. Under
    /// concealment an entry of the stand-in's form is this keeper's whether or not the name holds one, so the answer
    /// does not tell (docs/ARCHITECTURE.md §5).
    func standsIn(for factor: FactorKind, typed: Secret?, user: UserContext) -> Bool
    /// What its refusals are called (its plugin's `codes`).
    var codes: FactorCodes { get }
    /// True when its owner may change it, giving the current secret (a chosen secret).
    var changeable: Bool { get }
    /// A new shared secret for `user` (a factor enrolled with `.sharedSecret`): generated here, kept in this process
    /// only until an enrollment confirms it or a later offer replaces it, and returned this once to be shown.
    func offer(for user: String) throws(AuthenticationError) -> [UInt8]
    /// True for a factor whose enrollment concealment hides (a typed secret); the sensor says "not enrolled" to
    /// anyone.
    var concealsEnrollment: Bool { get }
    /// True when the factor's availability follows from the store and the concealment alone (a typed secret): no
    /// device, no clock but the counters', nothing about the session. keywayd notes such factors for the module
    /// (`LocalVault.noted`, docs/ARCHITECTURE.md §10, "Notes"); a keeper that asks a device must say false.
    var judgedFromStore: Bool { get }
    /// For a factor its owner switched off, asked about under concealment: the answer a name with nothing enrolled
    /// gets (counted, the same slow work, "not recognized"), so that "turned off" tells no one but the owner that
    /// something is enrolled. Called only when `concealsEnrollment`.
    func concealedAbsence(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict
    /// Brings the store's record of `user`'s enrollment up to date with a device that keeps the enrollment itself
    /// (fprintd's prints), before the vault reads it; most keepers have nothing to do.
    func refresh(_ user: String) throws(AuthenticationError)
    /// Enrolls `label` at the device that keeps this factor's enrollments (`DeviceBackend`), recording it as
    /// `actor`'s, with what the person typed for it (`typed`, a security key's PIN); a factor without one refuses.
    func enrollAtDevice(
        for user: String, label: String?, by actor: String, typed: Secret?, progress: (String) -> Void,
        cancelled: () -> Bool
    ) throws(AuthenticationError)
}

extension FactorKeeper {
    /// Most factors conceal nothing.
    public var concealsEnrollment: Bool { false }

    /// A keeper says so when it is true: a note that lists a factor wrongly only costs the person a wasted prompt,
    /// but costs it all the same.
    public var judgedFromStore: Bool { false }

    public var codes: FactorCodes { FactorCodes() }

    public var changeable: Bool { false }

    public func offer(for user: String) throws(AuthenticationError) -> [UInt8] {
        throw AuthenticationError(.invalidPolicy, "the \(factor) has no shared secret to offer")
    }

    public func concealedAbsence(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        throw AuthenticationError(.factorNotAvailable, "the \(factor) conceals nothing")
    }

    public func refresh(_ user: String) throws(AuthenticationError) {}

    public func enrollAtDevice(
        for user: String, label: String?, by actor: String, typed: Secret?, progress: (String) -> Void,
        cancelled: () -> Bool
    ) throws(AuthenticationError) {
        throw AuthenticationError(.invalidPolicy, "the \(factor) is not enrolled at a device")
    }
}

extension FactorKeeper {
    public func availability(for user: UserContext, switchedOff: ([String: String]) -> Availability?) -> Availability {
        availabilityReadingOnce(for: user, switchedOff: switchedOff)
    }

    /// Enrolled, switched on and not locked: `refresh`, then the account read once and judged (`judged`).
    public func availabilityReadingOnce(
        for user: UserContext, switchedOff: ([String: String]) -> Availability?
    ) -> Availability {
        do {
            try refresh(user.name)
            let account = try store.account(user: user.name)
            return judged(for: user, account, switchedOff: switchedOff) {
                availability(for: user, records: account.enrollments, book: account.attempts)
            }
        } catch {
            return .failed(error)
        }
    }

    /// `switchedOff`'s answer for a factor its owner turned off, else `ready()`. Under concealment a switched-off
    /// secret looks like one never enrolled, so it is judged like any other (`concealedAbsence` answers it).
    public func judged(
        for user: UserContext, _ account: AccountRecord, switchedOff: ([String: String]) -> Availability?,
        ready: () -> Availability
    ) -> Availability {
        if let off = switchedOff(account.preferences), !(user.concealsEnrollment && concealsEnrollment) { return off }
        return ready()
    }

    public func enrollment(removing label: String, from record: Enrollment, by actor: String)
        throws(AuthenticationError) -> Enrollment?
    {
        throw AuthenticationError(.invalidPolicy, "the \(factor) has no named parts to remove")
    }

    public func details(of record: Enrollment) throws(AuthenticationError) -> (labels: [String], domainState: [UInt8]) {
        ([], [])
    }

    public func uses(of record: Enrollment) -> Uses? { nil }

    public func checkRemoval(of user: String) throws(AuthenticationError) {}

    public func standsIn(for factor: FactorKind, typed: Secret?, user: UserContext) -> Bool { false }
}
