public import KeywayCore
import Synchronization

/// keywayd's answers: who may ask what (the table in keywayd(8)), then the vault. Pure, so the tests and the fuzzer
/// drive exactly what the daemon runs; the daemon adds only sockets, threads and the work pool.
///
/// | request      | root | any other user                                    |
/// |--------------|------|---------------------------------------------------|
/// | availability | yes  | own account only                                  |
/// | verify       | yes  | own account only (as `unix_chkpwd`)               |
/// | change       | yes  | own chosen secret (pattern, passcode), with the current one |
/// | status       | yes  | own account only                                  |
/// | enroll, offer | yes | own shared secret (TOTP, recovery codes): an offer just after verifying any factor of the account (`proofWindow`); the enrollment with a code of what was offered |
/// | remove       | yes  | no                                                |
/// | reset        | yes  | no                                                |
/// | audit        | yes  | no                                                |
/// | set          | yes  | own switches; a factor off only just after verifying it (`proofWindow`) |
///
/// A user other than root makes at most `writesPerWindow` changes (`set`, `change`, `enroll`) a minute.
/// | arm, claim   | yes  | own account only (a screen locker running as the user); a claim only by the uid that armed |
/// | report       | yes  | own account's decisions only (counted apart: `caller="user"`)  |
/// | metrics, health | yes | yes: they name no account (answered at most once a second)  |
///
/// A refused request never reaches the vault, so it costs the named user no attempt.
public struct VaultService: Sendable {
    /// Who asked, as the kernel vouches for it.
    public struct Caller: Sendable, Equatable {
        /// The effective user id at connection time.
        public var uid: UInt32
        /// That user's account name, or nil when the id has none.
        public var name: String?

        /// Creates a caller.
        public init(uid: UInt32, name: String?) {
            self.uid = uid
            self.name = name
        }

        /// Root may do everything.
        public var isRoot: Bool { uid == 0 }
        /// True when `user` is this caller's own account name, byte for byte (Swift's `==` would also equate
        /// canonically equivalent spellings, which are different accounts).
        public func owns(_ user: String?) -> Bool {
            guard let user, let name else { return false }
            return Array(user.utf8) == Array(name.utf8)
        }

        /// How the caller is named in the audit trail and logs.
        public var label: String { name.map { "\($0.escapingControlCharacters)" } ?? "uid \(uid)" }
    }

    /// The state.
    public let vault: any Vault
    /// The per-user switches, to know which need proof to turn off (the factors' own unless given).
    public let userSettings: [UserSetting]
    /// The factors (`Factors.all`): what their refusals and devices are called.
    public let factors: [FactorPlugin]
    /// Who verified which factor when: the proof a user gives before turning that factor off.
    let proofs: Proofs
    /// The factors armed now (`first of`, the sensor's sequential wait).
    public let leases: Leases
    /// An account's uid, for a device's rule (`armingRefusal`); nil when it cannot be told.
    public let accountUID: @Sendable (String) -> UInt32?
    /// Whether a policy lets the person enroll this factor as the account's first second factor, as themselves
    /// (keyway.conf's `first-enrollment = self`; `selfService`).
    public let firstEnrollment: @Sendable (_ user: String, _ factor: FactorKind) -> Bool
    /// The second factors each account held when its owner was offered a new one, by caller, account and factor:
    /// the enrollment that confirms the offer is refused if one more has been enrolled since (`selfService`).
    let offersMade: PendingOffers<[FactorKind]>
    let now: @Sendable () -> Int64
    /// How many changes each user other than root has made lately: each writes an audit row.
    let writes: WriteBudget
    /// Changes (`set`, `change`) one user other than root may make per `writeWindow`; beyond them a change is
    /// refused and nothing is written, so no user can fill the disk that holds the store (keywayd(8), LIMITS).
    public static let writesPerWindow = 10
    /// The window of `writesPerWindow`, in milliseconds of `now`.
    public static let writeWindow: Int64 = 60_000
    /// How long a verification counts as proof, in milliseconds of `now`.
    public static let proofWindow: Int64 = 120_000

    /// Creates the service. `now` reads a monotonic clock in milliseconds (tests pass their own).
    public init(
        vault: any Vault, factors: [FactorPlugin] = [], userSettings: [UserSetting]? = nil,
        now: @escaping @Sendable () -> Int64 = { 0 },
        accountUID: @escaping @Sendable (String) -> UInt32? = { _ in nil },
        firstEnrollment: @escaping @Sendable (String, FactorKind) -> Bool = { _, _ in false }
    ) {
        self.accountUID = accountUID
        self.firstEnrollment = firstEnrollment
        self.now = now
        // Longer than any keeper keeps its offer: a confirmation never outlives the record of what was held.
        offersMade = PendingOffers(lifetime: 3_600_000)
        self.factors = factors
        self.vault = vault
        self.userSettings = userSettings ?? factors.userSettings
        proofs = Proofs(now: now)
        leases = Leases(now: now)
        writes = WriteBudget(now: now)
    }

    /// Changes by uid in the current window. Bounded by the users who made one within a window.
    final class WriteBudget: Sendable {
        private let table = Mutex<[UInt32: (start: Int64, count: Int)]>([:])
        let now: @Sendable () -> Int64
        init(now: @escaping @Sendable () -> Int64) { self.now = now }

        /// Spends one change for `uid`; the seconds until the next is allowed when none is left.
        func spend(_ uid: UInt32) -> Int64? {
            let time = now()
            return table.withLock { table -> Int64? in
                if table.count > 4096 { table = table.filter { time - $0.value.start < VaultService.writeWindow } }
                var entry = table[uid] ?? (time, 0)
                if time - entry.start >= VaultService.writeWindow { entry = (time, 0) }
                guard entry.count < VaultService.writesPerWindow else {
                    return (entry.start + VaultService.writeWindow - time + 999) / 1000
                }
                entry.count += 1
                table[uid] = entry
                return nil
            }
        }
    }

    /// Recent successful verifications, by caller, account and factor. Used once: turning a factor off spends it.
    final class Proofs: Sendable {
        struct Key: Hashable { let uid: UInt32, user: String, factor: FactorKind }
        private let table = Mutex<[Key: Int64]>([:])
        let now: @Sendable () -> Int64
        init(now: @escaping @Sendable () -> Int64) { self.now = now }

        func record(_ key: Key) {
            let time = now()
            table.withLock { table in
                table = table.filter { time - $0.value < VaultService.proofWindow }  // bounded by callers × factors
                table[key] = time
            }
        }

        /// Spends a proof by `uid` of a factor of `user` among `factors` (any, when nil).
        func spendAny(uid: UInt32, user: String, among factors: [FactorKind]? = nil) -> Bool {
            let time = now()
            return table.withLock { table in
                guard
                    let key = table.keys.first(where: {
                        $0.uid == uid && $0.user == user && (factors?.contains($0.factor) ?? true)
                    })
                else { return false }
                let at = table.removeValue(forKey: key) ?? 0
                return time - at < VaultService.proofWindow
            }
        }

        func spend(_ key: Key) -> Bool {
            let time = now()
            return table.withLock { table in
                guard let at = table.removeValue(forKey: key) else { return false }
                return time - at < VaultService.proofWindow
            }
        }
    }

    /// Why `caller` may not make `request`, or nil when it may.
    public static func refusal(of request: Request, by caller: Caller) -> String? {
        if caller.isRoot { return nil }
        let own = caller.owns(request.user)
        switch request {
        case .availability, .verify, .status(.some), .arm, .claim:
            return own ? nil : "\(caller.label) may only ask about their own account"
        case .report:
            return own ? nil : "\(caller.label) may only report their own account's decisions"
        case .metrics, .health:
            return nil
        case .change:
            // Which factors can be changed at all is the factor's to say (`FactorKeeper.changeable`), before any
            // attempt is counted.
            return own ? nil : "\(caller.label) may only change their own factors"
        case .status(nil):
            return "only root may list every user"
        case .enroll, .offer, .remove, .reset, .audit, .enrollAtDevice:
            return "only root may \(request.name)"
        case .set:
            return own ? nil : "\(caller.label) may only set their own switches"
        }
    }

    /// A user's own shared secret (TOTP, recovery codes; `FactorPlugin.EnrollmentKind.sharedSecret`), enrolled or
    /// replaced without root: the offer only just after the caller verified a factor of the account (a proof,
    /// spent), or after an administrator's pass in place of it was used (`Vault.passLetsReplace`: a login with the
    /// lost phone's pass, once), or, for an account with no second factor yet, where a policy lets the person enroll the first
    /// (`firstEnrollment`); the enrollment only with a code of what was offered (the keeper's check), which only whoever
    /// saw the offer can make, and only while the account holds no second factor it did not hold at the offer. ""
    /// lets the request through; nil leaves it to `refusal`.
    func selfService(_ request: Request, by caller: Caller) -> String? {
        guard !caller.isRoot else { return nil }
        switch request {
        case .offer(let factor, let user, _) where caller.owns(user) && isSharedSecret(factor):
            // A second factor the account already has is replaced, or joined, only on the proof of one of them (a
            // pass typed in its place counts as it): never on a pattern or a passcode, which someone who saw the
            // screen unlocked may know.
            let held: [FactorKind]
            do throws(AuthenticationError) {
                held = try secondFactors(of: user)
            } catch {
                return "the factors of \(user) cannot be read now (\(error.reason)); nothing was offered"
            }
            var proved = proofs.spendAny(uid: caller.uid, user: user, among: held.isEmpty ? nil : held)
            // The administrator's pass that let a person who lost their phone in: its use was the proof.
            if !proved && held.contains(factor) {
                do throws(AuthenticationError) {
                    proved = try vault.passLetsReplace(factor, of: user)
                } catch {
                    return "the pass of \(user) cannot be read now (\(error.reason)); nothing was offered"
                }
            }
            guard proved || (held.isEmpty && firstEnrollment(user, factor)) else {
                guard !held.isEmpty else {
                    return "\(user) has no second factor yet, and no policy lets a person enroll their own first "
                        + "\(factor) (first-enrollment = self, keyway.conf(5)): an administrator enrolls it "
                        + "(keyway enroll \(factor) --user \(user)), or issues a pass to prove it with"
                }
                return "\(user) has \(held.map { $0.rawValue }.joined(separator: " and ")): a new \(factor) needs "
                    + "one of them verified first (within \(Self.proofWindow / 1000) seconds), or an administrator's "
                    + "pass typed in its place; another factor of the account does not replace it"
            }
            offersMade.keep(held, for: offerKey(caller, user, factor), now: now())
            return ""
        case .enroll(let factor, let user, nil, .secret, _) where caller.owns(user) && isSharedSecret(factor):
            // Two offers made while the account had nothing (a first TOTP, first recovery codes) confirm only the
            // first: the second then needs the factor enrolled meanwhile, as any later change does.
            let held: [FactorKind]
            do throws(AuthenticationError) {
                held = try secondFactors(of: user)
            } catch {
                return "the factors of \(user) cannot be read now (\(error.reason)); nothing was enrolled"
            }
            let before = offersMade.current(for: offerKey(caller, user, factor), now: now()) ?? []
            let since = held.filter { !before.contains($0) }
            guard since.isEmpty else {
                return "\(user) has enrolled \(since.map { $0.rawValue }.joined(separator: " and ")) since this "
                    + "\(factor) was offered: nothing was enrolled; run keyway enroll \(factor) again, which asks "
                    + "for it"
            }
            return ""
        default:
            return nil
        }
    }

    /// Names one caller's offer of `factor` to `user` in `offersMade`.
    private func offerKey(_ caller: Caller, _ user: String, _ factor: FactorKind) -> String {
        "\(caller.uid)\u{0}\(user)\u{0}\(factor.rawValue)"
    }

    private func isSharedSecret(_ factor: FactorKind) -> Bool { factors.plugin(factor)?.enrollment == .sharedSecret }

    /// The shared-secret factors `user` has enrolled (TOTP, recovery codes): the second factors a self-service
    /// change must be proved with.
    func secondFactors(of user: String) throws(AuthenticationError) -> [FactorKind] {
        var held: [FactorKind] = []
        for plugin in factors where plugin.enrollment == .sharedSecret {
            if try vault.record(of: plugin.kind, for: user) != nil { held.append(plugin.kind) }
        }
        return held
    }

    /// Why `factor`'s device may not answer this authentication, as the refusal its plugin's codes name, or nil for a
    /// factor without a device. A presentation proves only that someone is at the device, so the plugin's
    /// `ArmingRule` says whose authentications it may answer (docs/ARCHITECTURE.md §10, "The sensor answers only the
    /// person").
    public func armingRefusal(of factor: FactorKind, _ context: UserContext, by caller: Caller) -> AuthenticationError?
    {
        guard let plugin = factors.plugin(factor), let arming = plugin.arming else { return nil }
        let device = "the \(plugin.device ?? "device")"
        let why: String?
        switch arming.rule {
        case .ownerOrLocalRoot: why = ownerOrLocalRootRefusal(context, by: caller, device: device)
        }
        return why.map { AuthenticationError(plugin.codes.notAvailable, $0) }
    }

    /// `ArmingRule.ownerOrLocalRoot`: the account's owner started it (its starter's uid is the account's: sudo, a
    /// screen locker), or root started it on a local seat (a console login, a greeter). Never `su OTHER` from
    /// someone else's session; unknown means no.
    private func ownerOrLocalRootRefusal(_ context: UserContext, by caller: Caller, device: String) -> String? {
        if startedByOwner(context.name, startedBy: context.startedBy, caller: caller) { return nil }
        guard let starter = context.startedBy else {
            return "who started this authentication is unknown; \(device) answers only its owner"
        }
        if starter == 0 {
            return context.isRemote ? "root's authentication of \(context.name) is remote" : nil
        }
        guard accountUID(context.name) != nil else {
            return
                "the uid of \(context.name.escapingControlCharacters) cannot be told; \(device) answers only its owner"
        }
        return "uid \(starter) started this authentication of \(context.name.escapingControlCharacters) "
            + "(su from another person's session); \(device) answers only its owner"
    }

    /// True when the account's owner started this authentication: a caller other than root asking about its own
    /// account (the table above), or a root client whose starter (`UserContext.startedBy`) has the account's uid.
    /// Unknown is false. The sensor's rule and the owner's share of the hash workers both ask this.
    public func startedByOwner(_ account: String, startedBy: UInt32?, caller: Caller) -> Bool {
        guard caller.isRoot else { return caller.owns(account) }
        guard let starter = startedBy, starter != 0, let owner = accountUID(account) else { return false }
        return starter == owner
    }

    /// The refusal when another authentication holds the device, named as its plugin names it ("the sensor").
    public func deviceBusy(_ factor: FactorKind) -> AuthenticationError {
        AuthenticationError(
            .factorNotAvailable,
            "the \(factors.plugin(factor)?.device ?? "\(factor)") is in use by another authentication")
    }

    /// True for the requests a user other than root may make that write the audit trail.
    public static func writesAudit(_ request: Request) -> Bool {
        switch request {
        case .set, .change, .enroll: true
        case .availability, .verify, .offer, .remove, .status, .reset, .audit, .arm, .claim, .enrollAtDevice, .report,
            .metrics, .health:
            false
        }
    }

    /// True for requests that can change what keywayd would answer about an account's factors (an attempt counted,
    /// an enrollment or a switch changed): keywayd writes the account's note before answering those, so whatever
    /// the client asks next (the module's next prompt) finds it current (docs/ARCHITECTURE.md §10, "Notes").
    public static func changesAccount(_ request: Request) -> Bool {
        switch request {
        case .verify, .enroll, .change, .remove, .reset, .set, .claim, .enrollAtDevice: true
        case .availability, .offer, .status, .audit, .arm, .report, .metrics, .health: false
        }
    }

    /// True for requests that run the slow hash, which keywayd runs on its bounded pool.
    public static func isSlow(_ request: Request) -> Bool {
        switch request {
        case .verify, .enroll, .change: true
        case .availability, .offer, .remove, .status, .reset, .audit, .set, .arm, .claim, .enrollAtDevice, .report,
            .metrics, .health:
            false
        }
    }

    /// What a client calls itself, as the audit trail may record it: printable ASCII only, at most 64 bytes, so no
    /// client can store a record that other answers cannot carry, or hide text behind control or bidi characters.
    public static func toolName(_ via: String) -> String {
        let kept = via.unicodeScalars.filter { (0x20...0x7E).contains($0.value) }.prefix(64)
        return kept.isEmpty ? "an unnamed tool" : String(String.UnicodeScalarView(kept))
    }

    /// The request as keywayd takes it from `caller`: who started the authentication is what a root client says
    /// (the module inside su or sudo reads its host's real uid), and for anyone else the caller itself.
    public static func vouched(_ request: Request, by caller: Caller) -> Request {
        caller.isRoot ? request : request.started(by: caller.uid)
    }

    /// Answers one request from `caller`. An enrollment at the device tells each step through `progress` and stops
    /// when `cancelled` says so (its client gone, its time up); an arming `inLine` is one the daemon answers before
    /// its turn at the device (`Leases.open`).
    public func answer(
        _ request: Request, from caller: Caller, progress: (String) -> Void = { _ in },
        cancelled: () -> Bool = { false }, inLine: Bool = false
    ) -> Response {
        let request = Self.vouched(request, by: caller)
        if let refusal = selfService(request, by: caller) ?? Self.refusal(of: request, by: caller), !refusal.isEmpty {
            return .failure(AuthenticationError(.notPermitted, refusal))
        }
        if let user = request.user, let problem = UserContext.nameProblem(user) {
            return .failure(AuthenticationError(.invalidUserName, problem))
        }
        func actor(_ via: String) -> String { "\(caller.label) via \(Self.toolName(via))" }
        if !caller.isRoot, Self.writesAudit(request), let wait = writes.spend(caller.uid) {
            return .failure(
                AuthenticationError(
                    .notPermitted,
                    "\(caller.label) made \(Self.writesPerWindow) changes within \(Self.writeWindow / 1000) s; "
                        + "nothing was changed, try again in \(wait) s"))
        }
        do {
            switch request {
            case .availability(let factor, let user):
                return .availability(vault.availability(of: factor, for: user))
            case .verify(let factor, let user, let evidence):
                if !evidence.isTyped, let refusal = armingRefusal(of: factor, user, by: caller) {
                    return .failure(refusal)
                }
                let verdict = try vault.verify(evidence, of: factor, for: user)
                if verdict == .success {
                    proofs.record(.init(uid: caller.uid, user: user.name, factor: factor))
                }
                return .verdict(verdict)
            case .enroll(let factor, let user, let label, let evidence, let via):
                try vault.enroll(evidence, of: factor, for: user, label: label, by: actor(via))
                return .done
            case .offer(let factor, let user, let via):
                return .offered(try vault.offer(factor, for: user, by: actor(via)))
            case .enrollAtDevice(let factor, let user, let label, let via, let typed):
                try vault.enrollAtDevice(
                    factor, for: user, label: label, by: actor(via), typed: typed, progress: progress,
                    cancelled: cancelled)
                return .done
            case .change(let factor, let user, let current, let new, let via):
                try vault.change(current, to: new, of: factor, for: user, by: actor(via))
                return .done
            case .remove(let factor, let user, let label, let via):
                return .removed(try vault.remove(factor, of: user, label: label, by: actor(via)))
            case .status(let user):
                return .status(try vault.status(of: user))
            case .reset(let factor, let user, let via):
                try vault.reset(factor, of: user, by: actor(via))
                return .done
            case .audit(let user):
                return .audit(try vault.audit(of: user))
            case .arm(let factor, let user, let attempts, _, _):
                if let refusal = armingRefusal(of: factor, user, by: caller) {
                    return .failure(refusal)
                }
                // The daemon holds the device first and listens after this answer, for as long as the connection
                // stays open; here: may the user use the factor now, and is the device free. `inLine`: the daemon
                // has this arming wait in its line for the device, so the lease is made without it.
                let availability = vault.availability(of: factor, for: user)
                if let error = availability.error(for: factor, codes: factors.codes(of: factor)) {
                    return .failure(error)
                }
                guard
                    let nonce = leases.open(
                        factor, user: user.name, uid: caller.uid, attempts: attempts, inLine: inLine)
                else {
                    return .failure(deviceBusy(factor))
                }
                return .armed(nonce: nonce)
            case .claim(let factor, let user, let nonce):
                switch leases.claim(nonce, factor: factor, user: user.name, uid: caller.uid) {
                case .success(let verdicts):
                    if verdicts.contains(.success) {
                        proofs.record(.init(uid: caller.uid, user: user.name, factor: factor))
                    }
                    return .verdicts(verdicts)
                case .failure(let error): return .failure(error)
                }
            case .set(let key, let user, let value, let via):
                if !value, !caller.isRoot, let setting = userSettings.first(where: { $0.key == key }),
                    setting.offNeedsProof,
                    !proofs.spend(.init(uid: caller.uid, user: user, factor: setting.factor))
                {
                    return .failure(
                        AuthenticationError(
                            .notPermitted,
                            "turning the \(setting.factor) off needs it verified first (within "
                                + "\(Self.proofWindow / 1000) seconds): keyway disable asks for it"))
                }
                try vault.set(key, to: value, of: user, by: actor(via))
                return .done
            case .report:
                return .done  // allowed: the server counts it (KeywayDaemon's Telemetry)
            case .metrics, .health:
                return .failure(AuthenticationError(.internalFailure, "only keywayd's server answers \(request.name)"))
            }
        } catch {
            return .failure(error)
        }
    }
}
