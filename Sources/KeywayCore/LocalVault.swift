/// The vault in this process: a `Store` and one keeper per factor. keywayd serves one over its socket; tests and
/// `keyway --store` use one directly. Built per use: nothing here is process-global.
public final class LocalVault: Vault {
    /// Where enrollments and counters live.
    public let store: any Store
    /// The time source for attributions.
    public let clock: any Clock
    /// The keepers, in the order `status` lists them.
    public let keepers: [any FactorKeeper]
    /// The per-user switches this vault keeps (`enabled` for every keeper's factor, and what the plugins declare).
    public let userSettings: [UserSetting]

    /// Creates a vault; a later keeper for the same factor replaces an earlier one. Without `userSettings`, each
    /// factor has its `enabled` switch only.
    public init(
        store: any Store, clock: any Clock, keepers: [any FactorKeeper], userSettings: [UserSetting]? = nil
    ) {
        self.store = store
        self.clock = clock
        var ordered: [any FactorKeeper] = []
        for keeper in keepers {
            ordered.removeAll { $0.factor == keeper.factor }
            ordered.append(keeper)
        }
        self.keepers = ordered
        self.userSettings = userSettings ?? ordered.map { UserSetting.enabled($0.factor) }
    }

    /// Why `factor` is switched off for `user` (`keyway disable`), or nil when it is on.
    private func switchedOff(_ factor: FactorKind, of user: String) throws(AuthenticationError) -> Availability? {
        Self.switchedOff(factor, in: try store.preferences(user: user))
    }

    /// The same, from preferences already read.
    private static func switchedOff(_ factor: FactorKind, in preferences: [String: String]) -> Availability? {
        guard UserSetting.enabled(factor).value(in: preferences) == false else { return nil }
        return .notAvailable("the \(factor) is turned off for this account (keyway enable \(factor) turns it on)")
    }

    /// The keeper of `factor`, or the error a request for an unknown factor gets.
    public func keeper(_ factor: FactorKind) throws(AuthenticationError) -> any FactorKeeper {
        guard let keeper = keepers.first(where: { $0.factor == factor }) else {
            throw AuthenticationError(.factorNotAvailable, "this vault keeps no \(factor)")
        }
        return keeper
    }

    public func availability(of factor: FactorKind, for user: UserContext) -> Availability {
        let answer: Availability
        do {
            answer = try keeper(factor).availability(for: user) { Self.switchedOff(factor, in: $0) }
        } catch {
            return .failed(error)
        }
        // A stand-in the account holds (an administrator's pass) is typed at this factor's prompt: it is asked.
        if answer != .available,
            keepers.contains(where: { $0.factor != factor && $0.standsIn(for: factor, typed: nil, user: user) })
        {
            return .available
        }
        return answer
    }

    /// The factors judged from the store alone (`FactorKeeper.judgedFromStore`) that `user` could use now, to a
    /// context that conceals enrollment and to one that does not: what keywayd notes for the module
    /// (docs/ARCHITECTURE.md §10, "Notes"). The account is read once; each list holds what `availability` would
    /// answer `.available` for, to a local session and a remote one alike: a factor locked for one of them only is
    /// left out, so that session's module asks keywayd and says the lock before any prompt.
    public func noted(_ user: String) throws(AuthenticationError) -> (concealing: [FactorKind], plain: [FactorKind]) {
        let account = try store.account(user: user)
        var lists: ([FactorKind], [FactorKind]) = ([], [])
        for keeper in keepers where keeper.judgedFromStore {
            for concealing in [true, false] {
                let available = [false, true].allSatisfy { remote in
                    let context = UserContext(name: user, isRemote: remote, concealsEnrollment: concealing)
                    return keeper.judged(
                        for: context, account, switchedOff: { Self.switchedOff(keeper.factor, in: $0) }
                    ) { keeper.availability(for: context, records: account.enrollments, book: account.attempts) }
                        == .available
                }
                guard available else { continue }
                if concealing { lists.0.append(keeper.factor) } else { lists.1.append(keeper.factor) }
            }
        }
        return lists
    }

    public func verify(_ evidence: Evidence, of factor: FactorKind, for user: UserContext) throws(AuthenticationError)
        -> Verdict
    {
        let keeper = try keeper(factor)
        // What stands in for this factor for this user (an administrator's pass, typed at its prompt) checks it.
        if case .secret(let typed) = evidence,
            let standIn = keepers.first(where: {
                $0.factor != factor && $0.standsIn(for: factor, typed: typed, user: user)
            })
        {
            return try standIn.verify(evidence, for: user)
        }
        // A switched-off factor answers nothing, so a client that skips the availability question gains nothing.
        if case .notAvailable(let reason)? = try switchedOff(factor, of: user.name) {
            if user.concealsEnrollment && keeper.concealsEnrollment {
                return try keeper.concealedAbsence(evidence, for: user)
            }
            throw AuthenticationError(keeper.codes.notAvailable, reason)
        }
        return try keeper.verify(evidence, for: user)
    }

    public func set(_ key: String, to value: Bool, of user: String, by actor: String) throws(AuthenticationError) {
        guard let setting = userSettings.first(where: { $0.key == key }) else {
            throw AuthenticationError(
                .invalidPolicy,
                "no such switch '\(key.escapingControlCharacters)'; known: "
                    + userSettings.map { $0.key }.joined(separator: ", "))
        }
        // The default is not stored: a later release may change a default, and the user who never chose keeps it.
        let stored = value == setting.defaultValue ? nil : UserSetting.text(value)
        try store.setPreference(user: user, key: key, value: stored, by: Attribution(actor, at: clock.now()))
    }

    public func enroll(_ evidence: Evidence, of factor: FactorKind, for user: String, label: String?, by actor: String)
        throws(AuthenticationError)
    {
        try store.save(try keeper(factor).enrollment(of: evidence, for: user, label: label, by: actor))
    }

    public func record(of factor: FactorKind, for user: String) throws(AuthenticationError) -> Enrollment? {
        try store.enrollment(user: user, factor: factor)
    }

    public func passLetsReplace(_ factor: FactorKind, of user: String) throws(AuthenticationError) -> Bool {
        try PassKeeper.letsReplace(factor, of: user, in: store, now: clock.now())
    }

    public func enrollAtDevice(
        _ factor: FactorKind, for user: String, label: String?, by actor: String, typed: Secret?,
        progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) {
        try keeper(factor).enrollAtDevice(
            for: user, label: label, by: actor, typed: typed, progress: progress, cancelled: cancelled)
    }

    public func offer(_ factor: FactorKind, for user: String, by actor: String) throws(AuthenticationError) -> [UInt8] {
        try keeper(factor).offer(for: user)
    }

    public func change(_ current: Secret, to new: Secret, of factor: FactorKind, for user: String, by actor: String)
        throws(AuthenticationError)
    {
        let keeper = try keeper(factor)
        guard keeper.changeable else {
            throw AuthenticationError(
                .notPermitted, "the \(factor) cannot be changed; an administrator enrolls it again")
        }
        let before = try store.enrollment(user: user, factor: factor)
        // The current secret first: a wrong one, or a locked-out user, costs one hash and no more.
        guard try keeper.verify(.secret(current), for: UserContext(name: user)) == .success, let before else {
            throw AuthenticationError(.authenticationFailed, "the current \(factor) is wrong")
        }
        let record = try keeper.enrollment(of: .secret(new), for: user, label: nil, by: actor)
        guard try store.replace(before, with: record) else {
            throw AuthenticationError(
                .serviceUnavailable, "the \(factor) of \(user) was changed meanwhile; nothing was changed, try again")
        }
    }

    public func remove(_ factor: FactorKind, of user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Bool
    {
        let keeper = try keeper(factor)
        let change = Attribution(actor, at: clock.now())
        guard let label else {
            try keeper.checkRemoval(of: user)
            return try store.removeEnrollment(user: user, factor: factor, by: change)
        }
        guard let record = try store.enrollment(user: user, factor: factor),
            try keeper.details(of: record).labels.contains(label)
        else { return false }
        if let rest = try keeper.enrollment(removing: label, from: record, by: actor) {
            try store.save(rest)
        } else {
            try store.removeEnrollment(user: user, factor: factor, by: change)
        }
        return true
    }

    public func status(of user: String?) throws(AuthenticationError) -> [UserStatus] {
        let users: [String]
        if let user { users = [user] } else { users = try store.users() }
        var result: [UserStatus] = []
        for name in users {
            for keeper in keepers { try keeper.refresh(name) }
            let records = try store.enrollments(user: name)
            let book = try store.attempts(user: name)
            let preferences = try store.preferences(user: name)
            var factors: [UserStatus.FactorStatus] = []
            for keeper in keepers {
                let record = records.first { $0.factor == keeper.factor }
                let details = try record.map { record throws(AuthenticationError) in try keeper.details(of: record) }
                let switchedOff = Self.switchedOff(keeper.factor, in: preferences)
                let uses = record.flatMap(keeper.uses(of:))
                var status = UserStatus.FactorStatus(
                    factor: keeper.factor, enrolled: record.map { ($0.changedAt, $0.changedBy) },
                    labels: details?.labels ?? [], failures: book[keeper.factor].consecutiveFailures,
                    availability: switchedOff
                        ?? keeper.availability(for: UserContext(name: name), records: records, book: book),
                    domainState: details?.domainState ?? [], usesLeft: uses?.left)
                status.nextUse = uses?.next
                status.remoteFailures = book.viewed(from: .remote)[keeper.factor].consecutiveFailures
                status.remoteAvailability =
                    switchedOff
                    ?? keeper.availability(for: UserContext(name: name, isRemote: true), records: records, book: book)
                factors.append(status)
            }
            var switches: [String: Bool] = [:]
            for setting in userSettings {
                if let value = UserSetting.value(preferences[setting.key]) { switches[setting.key] = value }
            }
            result.append(UserStatus(user: name, factors: factors, switches: switches))
        }
        return result
    }

    public func reset(_ factor: FactorKind?, of user: String, by actor: String) throws(AuthenticationError) {
        try store.resetAttempts(user: user, factor: factor, by: Attribution(actor, at: clock.now()))
    }

    /// How many accounts each factor is locked (or made to wait) for now, in either channel, among the first `limit`
    /// names whose counters could decide a lockout (`Store.failingAccounts`): keywayd's `keyway_locked_accounts`.
    public func lockedAccounts(limit: Int) throws(AuthenticationError) -> [FactorKind: Int] {
        var counts: [FactorKind: Int] = [:]
        for name in try store.failingAccounts(atLeast: AttemptState.deciding, limit: limit) {
            for factor in try lockedFactors(of: name) { counts[factor, default: 0] += 1 }
        }
        return counts
    }

    /// The factors locked (or made to wait) for `user` now, local or remote, as their counters decide (each keeper's
    /// gate, from one reading of the counters; no device is asked).
    public func lockedFactors(of user: String) throws(AuthenticationError) -> Set<FactorKind> {
        let book = try store.attempts(user: user)
        var locked: Set<FactorKind> = []
        for keeper in keepers {
            for channel in [AttemptBook.Channel.local, .remote] {
                if case .lockedOut = keeper.gate.availability(of: book, in: channel, whenAllowed: .notEnrolled) {
                    locked.insert(keeper.factor)
                }
            }
        }
        return locked
    }

    public func audit(of user: String?) throws(AuthenticationError) -> [AuditEntry] {
        try store.auditTrail(user: user)
    }
}
