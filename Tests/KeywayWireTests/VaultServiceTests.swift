import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayTestSupport
import KeywayWire
import Synchronization
import Testing

/// Who may ask what (the table in keywayd(8)), row by row, straight at `VaultService` over an in-memory vault:
/// every request kind, from root, from the account itself, from another user and from a uid with no name.
@Suite("keywayd: who may ask what")
struct VaultServiceTests {
    let store = InMemoryStore()
    let service: VaultService
    let root = VaultService.Caller(uid: 0, name: "root")
    let alice = VaultService.Caller(uid: 1000, name: "alice")
    let nameless = VaultService.Caller(uid: 4242, name: nil)

    init() throws {
        let vault = try patternAndPasscodeVault(store)
        service = VaultService(vault: vault)
        for user in ["alice", "bob"] {
            try vault.enroll(.secret(Secret(copying: Array("2493".utf8))), of: .gesture, for: user, label: nil, by: "t")
        }
    }

    static func requests(about user: String) -> [Request] {
        let pattern = Secret(copying: Array("2493".utf8))
        return [
            .availability(.gesture, UserContext(name: user)),
            .verify(.gesture, UserContext(name: user), .secret(pattern)),
            .change(.gesture, user: user, current: pattern, new: Secret(copying: Array("16729".utf8)), via: "t"),
            .change(.biometric, user: user, current: pattern, new: pattern, via: "t"),
            .status(user: user), .status(user: nil),
            .enroll(.gesture, user: user, label: nil, .secret(pattern), via: "t"),
            .offer(FactorKind(rawValue: "totp"), user: user, via: "t"),
            .remove(.gesture, user: user, label: nil, via: "t"), .reset(nil, user: user, via: "t"), .audit(user: user),
            .set(key: "gesture.show-trail", user: user, value: false, via: "t"),
            .arm(.biometric, UserContext(name: user), attempts: 3),
            .claim(.biometric, UserContext(name: user), nonce: Array(repeating: 7, count: 16)),
            .enrollAtDevice(.biometric, user: user, label: "left-index", via: "t"),
            .report(Decision(user: user, service: "sudo", policy: "gesture", result: .failure, milliseconds: 1200)),
        ]
    }

    @Test("root may ask everything")
    func rootRow() {
        for request in Self.requests(about: "bob") { #expect(VaultService.refusal(of: request, by: root) == nil) }
    }

    @Test("a user may ask availability, verify, status, change and set of their own account only")
    func ownRow() {
        let allowed: Set = [
            "availability", "verify", "status alice", "change gesture", "change biometric", "set", "arm", "claim",
            "report",
        ]
        for request in Self.requests(about: "alice") {
            var key = request.name
            if case .status(let user) = request { key += " " + (user ?? "everyone") }
            if case .change(let factor, _, _, _, _) = request { key += " " + factor.rawValue }
            #expect((VaultService.refusal(of: request, by: alice) == nil) == allowed.contains(key), "\(key)")
        }
    }

    @Test("only a factor that says it can be changed is: the sensor's change is refused before anything is counted")
    func changeableFactorsOnly() throws {
        let clock = ManualClock()
        let sensor = ScriptedFactor(.biometric, store: store, clock: clock, schedule: .biometric, codes: .biometry)
        let vault = LocalVault(store: store, clock: clock, keepers: [ScriptedKeeper(gate: sensor.gate)])
        let pattern = Secret(copying: Array("2493".utf8))
        let answer = VaultService(vault: vault).answer(
            .change(.biometric, user: "alice", current: pattern, new: pattern, via: "t"), from: alice)
        guard case .failure(let error) = answer else {
            Issue.record("a biometric change was answered: \(answer)")
            return
        }
        #expect(error.code == .notPermitted, "\(error)")
        #expect(error.reason.contains("cannot be changed"), "\(error)")
        #expect(try store.attempts(user: "alice") == AttemptBook())
    }

    @Test("anyone may ask for the metrics and the health, which name no account; each survives the wire")
    func metricsAndHealthForAnyone() throws {
        for caller in [root, alice, nameless] {
            #expect(VaultService.refusal(of: .metrics, by: caller) == nil)
            #expect(VaultService.refusal(of: .health, by: caller) == nil)
        }
        for request in Self.requests(about: "alice") + [.metrics, .health] {
            #expect(try Request(decoding: request.encoded) == request, "\(request.name)")
        }
        let answers: [Response] = [
            .text("# HELP keyway_up x\nkeyway_up 1\n"),
            .health([HealthCheck("keywayd", .ok, "answering"), HealthCheck("store", .critical, "read-only")]),
        ]
        for answer in answers { #expect(try Response(decoding: answer.encoded) == answer) }
        // A report is about exactly one decision: a negative duration or an unknown result is malformed.
        var bytes = Request.report(
            Decision(user: "alice", service: "sudo", policy: "p", result: .success, milliseconds: 0)
        ).encoded
        bytes[bytes.count - 1] = 0xFF
        bytes[bytes.count - 8] = 0xFF
        #expect(throws: WireError.self) { try Request(decoding: bytes) }
    }

    @Test("a user may ask nothing about another account, and a uid with no name nothing at all")
    func otherRow() {
        for request in Self.requests(about: "bob") {
            #expect(VaultService.refusal(of: request, by: alice) != nil, "\(request.name)")
        }
        for request in Self.requests(about: "alice") {
            #expect(VaultService.refusal(of: request, by: nameless) != nil, "\(request.name)")
        }
    }

    @Test("a refused request never reaches the vault: bob's counters and enrollment stay as they were")
    func refusalCostsNothing() throws {
        let before = try store.enrollment(user: "bob", factor: .gesture)
        for request in Self.requests(about: "bob") {
            guard case .failure(let error) = service.answer(request, from: alice) else {
                Issue.record("\(request.name) was answered for another user")
                continue
            }
            #expect(error.code == .notPermitted)
        }
        #expect(try store.attempts(user: "bob") == AttemptBook())
        #expect(try store.enrollment(user: "bob", factor: .gesture) == before)
        #expect(try store.auditTrail(user: "bob").count == 1)
    }

    @Test("own account means the same bytes: a canonically equivalent spelling is another account")
    func bytesNotCanonicalEquivalence() {
        let composed = VaultService.Caller(uid: 1001, name: "jos\u{E9}")
        let request = Request.status(user: "jose\u{301}")
        #expect("jos\u{E9}" == "jose\u{301}")  // what Swift's == would have let through
        #expect(VaultService.refusal(of: request, by: composed) != nil)
        #expect(VaultService.refusal(of: .status(user: "jos\u{E9}"), by: composed) == nil)
    }

    @Test("the tool a client names is kept to 64 printable ASCII bytes in the audit trail")
    func toolNames() throws {
        #expect(VaultService.toolName("keyway change") == "keyway change")
        #expect(VaultService.toolName("a" + String(repeating: "\u{301}", count: 511)) == "a")
        #expect(VaultService.toolName("x\u{202E}evil\n") == "xevil")
        #expect(VaultService.toolName(String(repeating: "z", count: 500)).utf8.count == 64)
        #expect(VaultService.toolName("\u{1B}[2J") == "[2J")
        #expect(VaultService.toolName("") == "an unnamed tool")
        let change = Request.change(
            .gesture, user: "alice", current: Secret(copying: Array("2493".utf8)),
            new: Secret(copying: Array("16729".utf8)), via: "a" + String(repeating: "\u{301}", count: 511))
        #expect(service.answer(change, from: alice) == .done)
        #expect(try store.enrollment(user: "alice", factor: .gesture)?.changedBy == "alice via a")
    }

    /// A service over the store with the pattern and every shared-secret factor's keeper, on `clock`, its proofs
    /// timed by `now`; `first` says which first enrollments a policy lets the person make.
    func sharedSecretService(
        _ clock: ManualClock, first: @escaping @Sendable (String, FactorKind) -> Bool = { _, _ in false },
        now: @escaping @Sendable () -> Int64
    ) throws -> VaultService {
        let hasher = try Argon2idHasher(cost: .minimum)
        var keepers: [any FactorKeeper] = [GestureAuthenticator.keeper(store: store, clock: clock, hasher: hasher)]
        for plugin in Factors.all where plugin.enrollment == .sharedSecret {
            keepers.append(
                plugin.vaultSide(
                    FactorPlugin.VaultSide(store: store, clock: clock, hasher: hasher, settings: FactorSettings())))
        }
        return VaultService(
            vault: LocalVault(store: store, clock: clock, keepers: keepers), factors: Factors.all, now: now,
            firstEnrollment: first)
    }

    @Test("first-enrollment = self: the first second factor without proof, only the one the policy names, only once")
    func firstEnrollmentBySelf() throws {
        let manual = ManualClock()
        let totp = FactorKind(rawValue: "totp")
        let recovery = FactorKind(rawValue: "recovery")
        func refusal(_ response: Response) -> String? {
            if case .failure(let error) = response, error.code == .notPermitted { return error.reason }
            return nil
        }
        // No policy lets alice: refused, saying what would do.
        let closed = try sharedSecretService(manual) { 0 }
        let why = refusal(closed.answer(.offer(totp, user: "alice", via: "t"), from: alice))
        #expect(why?.contains("no policy lets a person enroll their own first totp (first-enrollment = self") == true)
        // A policy names both for alice (a roll-out of `totp or recovery`), and nothing for bob's account.
        let service = try sharedSecretService(manual, first: { user, _ in user == "alice" }) { 0 }
        #expect(refusal(service.answer(.offer(totp, user: "bob", via: "t"), from: alice)) != nil, "bob's account")
        guard case .offered(let secret) = service.answer(.offer(totp, user: "alice", via: "t"), from: alice),
            case .offered(let codes) = service.answer(.offer(recovery, user: "alice", via: "t"), from: alice)
        else {
            Issue.record("no first offers without proof")
            return
        }
        let phone = OneTimeCode(secret: secret)
        let code = Evidence.secret(Secret(copying: phone.code(step: phone.step(at: manual.now()))))
        #expect(
            service.answer(.enroll(totp, user: "alice", label: nil, code, via: "keyway enroll"), from: alice) == .done)
        #expect(try store.enrollment(user: "alice", factor: totp)?.changedBy == "alice via keyway enroll")
        // Both were offered while alice had nothing: only the first confirmed counts as the first.
        let first = Evidence.secret(Secret(copying: Array(codes.split(separator: UInt8(ascii: "\n"))[0])))
        let late = refusal(service.answer(.enroll(recovery, user: "alice", label: nil, first, via: "t"), from: alice))
        #expect(late?.contains("alice has enrolled totp since this recovery was offered") == true, "\(late ?? "done")")
        #expect(try store.enrollment(user: "alice", factor: recovery) == nil)
        // Now a new TOTP, or recovery codes, without proof: refused, as for anyone who has one.
        for factor in [totp, recovery] {
            let again = refusal(service.answer(.offer(factor, user: "alice", via: "t"), from: alice))
            #expect(again?.contains("alice has totp: a new \(factor) needs one of them verified") == true)
        }
    }

    @Test("own TOTP: offered only just after a factor of the account is verified, once; never another's")
    func selfServiceSharedSecret() throws {
        let clock = Mutex<Int64>(0)
        let service = try sharedSecretService(ManualClock()) { clock.withLock { $0 } }
        let totp = FactorKind(rawValue: "totp")
        func refused(_ response: Response) -> Bool {
            if case .failure(let error) = response { return error.code == .notPermitted } else { return false }
        }
        let offer = Request.offer(totp, user: "alice", via: "keyway enroll")
        #expect(refused(service.answer(offer, from: alice)), "an offer without proof")
        let pattern = Secret(copying: Array("2493".utf8))
        #expect(
            service.answer(.verify(.gesture, UserContext(name: "alice"), .secret(pattern)), from: alice)
                == .verdict(.success))
        #expect(refused(service.answer(.offer(totp, user: "bob", via: "t"), from: alice)), "bob's, on alice's proof")
        guard case .offered(let secret) = service.answer(offer, from: alice) else {
            Issue.record("no offer after the proof")
            return
        }
        #expect(secret.count == 20)
        #expect(refused(service.answer(offer, from: alice)), "the proof was spent")
        // An enrollment of someone else's, or of a factor that is no shared secret, is still root's.
        let code = Secret(copying: Array("123456".utf8))
        #expect(refused(service.answer(.enroll(totp, user: "bob", label: nil, .secret(code), via: "t"), from: alice)))
        #expect(
            refused(
                service.answer(.enroll(.gesture, user: "alice", label: nil, .secret(pattern), via: "t"), from: alice)))
        // Alice's own, with a wrong code: reaches the keeper, which refuses it (not a permission refusal).
        if case .failure(let error) = service.answer(
            .enroll(totp, user: "alice", label: nil, .secret(code), via: "t"), from: alice)
        {
            #expect(error.code != .notPermitted, "\(error)")
        }
        clock.withLock { $0 += VaultService.proofWindow }
        _ = service.answer(.verify(.gesture, UserContext(name: "alice"), .secret(pattern)), from: alice)
        clock.withLock { $0 += VaultService.proofWindow }
        #expect(refused(service.answer(offer, from: alice)), "an expired proof")
        #expect(!refused(service.answer(offer, from: root)), "root needs none")
    }

    @Test("a second factor the account has is replaced only on the proof of one: never on the pattern")
    func secondFactorsProveSecondFactors() throws {
        let manual = ManualClock()
        let service = try sharedSecretService(manual) { 0 }
        let totp = FactorKind(rawValue: "totp")
        let recovery = FactorKind(rawValue: "recovery")
        func refusal(_ response: Response) -> String? {
            if case .failure(let error) = response, error.code == .notPermitted { return error.reason }
            return nil
        }
        let pattern = Evidence.secret(Secret(copying: Array("2493".utf8)))
        func provePattern() {
            #expect(
                service.answer(.verify(.gesture, UserContext(name: "alice"), pattern), from: alice)
                    == .verdict(.success))
        }
        // The first second factor, on the pattern: alice has none yet.
        provePattern()
        guard case .offered(let secret) = service.answer(.offer(totp, user: "alice", via: "t"), from: alice) else {
            Issue.record("no first TOTP offered on the pattern")
            return
        }
        let phone = OneTimeCode(secret: secret)
        func code() -> Evidence { .secret(Secret(copying: phone.code(step: phone.step(at: manual.now())))) }
        #expect(service.answer(.enroll(totp, user: "alice", label: nil, code(), via: "t"), from: alice) == .done)
        // Now a new TOTP, or new recovery codes, on the pattern: refused, saying what would do.
        for factor in [totp, recovery] {
            provePattern()
            let why = refusal(service.answer(.offer(factor, user: "alice", via: "t"), from: alice))
            #expect(
                why?.contains("alice has totp: a new \(factor) needs one of them verified first") == true,
                "\(why ?? "offered")")
        }
        // On the current code: recovery codes made; then each replaced on a proof of a second factor.
        manual.advance(by: .seconds(30))
        #expect(service.answer(.verify(totp, UserContext(name: "alice"), code()), from: alice) == .verdict(.success))
        guard case .offered(let codes) = service.answer(.offer(recovery, user: "alice", via: "t"), from: alice) else {
            Issue.record("no recovery codes on the current code")
            return
        }
        let first = Array(codes.split(separator: UInt8(ascii: "\n"))[0])
        #expect(
            service.answer(
                .enroll(recovery, user: "alice", label: nil, .secret(Secret(copying: first)), via: "t"), from: alice)
                == .done)
        provePattern()
        #expect(
            refusal(service.answer(.offer(totp, user: "alice", via: "t"), from: alice))?.contains(
                "alice has totp and recovery") == true)
        #expect(
            service.answer(.verify(recovery, UserContext(name: "alice"), .secret(Secret(copying: first))), from: alice)
                == .verdict(.success))
        guard case .offered = service.answer(.offer(totp, user: "alice", via: "t"), from: alice) else {
            Issue.record("no new TOTP on a recovery code")
            return
        }
    }

    @Test("turning a factor off needs it verified by the same caller just before; once; root needs no proof")
    func switchProof() throws {
        let clock = Mutex<Int64>(0)
        let proving = VaultService(
            vault: service.vault, userSettings: [.enabled(.gesture), .enabled(.passcode)],
            now: { clock.withLock { $0 } })
        let off = Request.set(key: "gesture.enabled", user: "alice", value: false, via: "keyway disable")
        let pattern = Secret(copying: Array("2493".utf8))
        func refused(_ response: Response) -> Bool {
            if case .failure(let error) = response { return error.code == .notPermitted } else { return false }
        }
        #expect(refused(proving.answer(off, from: alice)), "off without proof")
        // A wrong pattern is no proof; the right one is, for the gesture only and for this caller only.
        let wrong = Request.verify(.gesture, UserContext(name: "alice"), .secret(Secret(copying: Array("1593".utf8))))
        _ = proving.answer(wrong, from: alice)
        #expect(refused(proving.answer(off, from: alice)), "off after a wrong pattern")
        #expect(
            proving.answer(.verify(.gesture, UserContext(name: "alice"), .secret(pattern)), from: alice)
                == .verdict(.success))
        let passcodeOff = Request.set(key: "passcode.enabled", user: "alice", value: false, via: "t")
        #expect(refused(proving.answer(passcodeOff, from: alice)), "the gesture's proof turned the passcode off")
        #expect(proving.answer(off, from: alice) == .done)
        #expect(try store.preferences(user: "alice") == ["gesture.enabled": "off"])
        #expect(
            proving.answer(.availability(.gesture, UserContext(name: "alice")), from: alice)
                == .availability(
                    .notAvailable("the gesture is turned off for this account (keyway enable gesture turns it on)")))
        // On again needs nothing; off again needs a new proof (the first was spent), and an old one expires.
        let on = Request.set(key: "gesture.enabled", user: "alice", value: true, via: "keyway enable")
        #expect(proving.answer(on, from: alice) == .done)
        #expect(try store.preferences(user: "alice") == [:])
        #expect(refused(proving.answer(off, from: alice)), "a spent proof")
        _ = proving.answer(.verify(.gesture, UserContext(name: "alice"), .secret(pattern)), from: alice)
        clock.withLock { $0 += VaultService.proofWindow }
        #expect(refused(proving.answer(off, from: alice)), "an expired proof")
        // Root (the administrator, as for reset) needs none; an unknown switch is refused by name.
        #expect(proving.answer(off, from: root) == .done)
        guard
            case .failure(let unknown) = proving.answer(
                .set(key: "gesture.colour", user: "alice", value: true, via: "t"), from: root)
        else { Issue.record("an unknown switch was set"); return }
        #expect(unknown.reason.contains("no such switch 'gesture.colour'"), "\(unknown.reason)")
        #expect(
            try store.auditTrail(user: "alice").map(\.description).contains {
                $0.hasSuffix("set alice gesture.enabled=off; by root via keyway disable")
            })
    }
}

/// keywayd's armed factors (`first of`): a match is claimed once, with the nonce, by the uid that armed, for the
/// same user, within its lifetime; one authentication holds the device at a time.
@Suite("keywayd: armed sensor leases")
struct LeaseTests {
    /// The monotonic clock and the nonce maker the leases see.
    final class World: Sendable {
        let now = Mutex<Int64>(1_000)
        let nonces = Mutex<UInt8>(0)
    }
    let world = World()
    let leases: Leases

    init() {
        let world = self.world
        leases = Leases(
            now: { world.now.withLock { $0 } },
            random: {
                Array(
                    repeating: world.nonces.withLock {
                        $0 += 1; return $0
                    }, count: Leases.nonceLength)
            })
    }

    func advance(_ milliseconds: Int64) { world.now.withLock { $0 += milliseconds } }

    @Test("what was presented is claimed once, in order; a success is spent and nothing counts after it")
    func claimOnce() throws {
        let nonce = try #require(leases.open(.biometric, user: "alice", uid: 0, attempts: 3))
        leases.record(.failure(.mismatch), for: nonce)
        leases.record(.success, for: nonce)
        #expect(!leases.wantsMore(nonce), "a lease with a match waiting listens no more")
        #expect(
            leases.claim(nonce, factor: .biometric, user: "alice", uid: 0) == .success([.failure(.mismatch), .success]))
        #expect(leases.claim(nonce, factor: .biometric, user: "alice", uid: 0) == .success([]))
        leases.record(.success, for: nonce)
        #expect(leases.claim(nonce, factor: .biometric, user: "alice", uid: 0) == .success([]))
    }

    @Test("another uid, another user, another factor or a made-up nonce: the same refusal, and the match stays")
    func boundToTheAuthentication() throws {
        let nonce = try #require(leases.open(.biometric, user: "alice", uid: 1000, attempts: 3))
        leases.record(.success, for: nonce)
        for (factor, user, uid, tried) in [
            (FactorKind.biometric, "alice", UInt32(1001), nonce), (.biometric, "bob", 1000, nonce),
            (.gesture, "alice", 1000, nonce), (.biometric, "alice", 1000, Array(repeating: 9, count: 16)),
            (.biometric, "alice", 1000, []),
        ] {
            guard case .failure(let error) = leases.claim(tried, factor: factor, user: user, uid: uid) else {
                Issue.record("claimed by \(uid) for \(user)")
                continue
            }
            #expect(error.code == .invalidContext)
        }
        #expect(leases.claim(nonce, factor: .biometric, user: "alice", uid: 1000) == .success([.success]))
    }

    @Test("a match expires 60 s after the touch; failures do not")
    func expiry() throws {
        let nonce = try #require(leases.open(.biometric, user: "alice", uid: 0, attempts: 3))
        leases.record(.failure(.mismatch), for: nonce)
        leases.record(.success, for: nonce)
        #expect(Leases.matchLifetime == 60_000)
        advance(Leases.matchLifetime)
        #expect(leases.claim(nonce, factor: .biometric, user: "alice", uid: 0) == .success([.failure(.mismatch)]))
    }

    @Test("one authentication holds the device; it is free again when the lease closes or outlives its limit")
    func oneAtATime() throws {
        let first = try #require(leases.open(.biometric, user: "alice", uid: 0, attempts: 3))
        #expect(leases.open(.biometric, user: "bob", uid: 0, attempts: 3) == nil)
        leases.close(first)
        guard case .failure = leases.claim(first, factor: .biometric, user: "alice", uid: 0) else {
            Issue.record("a closed lease was claimed")
            return
        }
        let second = try #require(leases.open(.biometric, user: "bob", uid: 0, attempts: 3))
        #expect(leases.wantsMore(second))
        advance(Leases.maximumDuration)
        #expect(!leases.wantsMore(second))
        #expect(leases.open(.biometric, user: "carol", uid: 0, attempts: 3) != nil)
    }

    @Test("a lease made in line waits for the device without taking it, and holds it only when it is free")
    func inLine() throws {
        let holder = try #require(leases.open(.biometric, user: "alice", uid: 0, attempts: 3))
        let waiting = try #require(leases.open(.biometric, user: "bob", uid: 0, attempts: 3, inLine: true))
        #expect(!leases.hold(waiting), "held while another lease holds the device")
        leases.release(holder)
        #expect(leases.hold(waiting))
        #expect(leases.open(.biometric, user: "carol", uid: 0, attempts: 3) == nil, "the device is held again")
        #expect(!leases.hold(Array(repeating: 9, count: Leases.nonceLength)), "no such lease")
    }

    @Test("the lease stops after its attempts; an end (cancel, unplug, lockout) is reported once nothing is pending")
    func attemptsAndEnd() throws {
        let nonce = try #require(leases.open(.biometric, user: "alice", uid: 0, attempts: 2))
        leases.record(.failure(.noSample("too fast")), for: nonce)
        #expect(leases.wantsMore(nonce), "an unusable sample is not a counted failure")
        leases.record(.failure(.mismatch), for: nonce)
        leases.record(.failure(.mismatch), for: nonce)
        #expect(!leases.wantsMore(nonce))
        leases.end(nonce, with: AuthenticationError(.userCancel))
        #expect(
            leases.claim(nonce, factor: .biometric, user: "alice", uid: 0)
                == .success([.failure(.noSample("too fast")), .failure(.mismatch), .failure(.mismatch)]))
        #expect(
            leases.claim(nonce, factor: .biometric, user: "alice", uid: 0) == .failure(AuthenticationError(.userCancel))
        )
    }

    @Test("arm, claim and an enrollment at the device, and their answers, cross the wire unchanged")
    func wire() throws {
        let user = UserContext(name: "alice", service: "sudo", isRemote: false, concealsEnrollment: true)
        for request in [
            Request.arm(.biometric, user, attempts: 3), .claim(.biometric, user, nonce: Array(0..<16)),
            .enrollAtDevice(.biometric, user: "alice", label: nil, via: "keyway enroll"),
            .enrollAtDevice(.biometric, user: "alice", label: "left-thumb", via: "keyway enroll"),
            .arm(
                FactorKind(rawValue: "fido2"), user, attempts: 3, waits: true,
                typed: Secret(copying: Array("4711".utf8))),
            .enrollAtDevice(
                FactorKind(rawValue: "fido2"), user: "alice", label: "yubi", via: "keyway enroll",
                typed: Secret(copying: [0x31])),
        ] {
            #expect(try Request(decoding: request.encoded) == request)
        }
        // A PIN longer than CTAP2's 63 bytes is refused on the wire, before any device sees it.
        let long = Request.arm(
            FactorKind(rawValue: "fido2"), user, attempts: 3, typed: Secret(copying: Array(repeating: 0x31, count: 64)))
        #expect(throws: WireError.self) { try Request(decoding: long.encoded) }
        for response in [
            Response.armed(nonce: Array(0..<16)), .verdicts([]),
            .verdicts([.failure(.mismatch), .failure(.noSample("too fast")), .success]),
            .progress("Swipe your finger across the reader (2 of 5)"),
        ] {
            #expect(try Response(decoding: response.encoded) == response)
        }
        #expect(throws: WireError.self) { try Request(decoding: Request.arm(.biometric, user, attempts: 0).encoded) }
    }

    @Test("VaultService: arming needs the factor usable and the device free; a claimed match is proof for `disable`")
    func service() throws {
        let store = InMemoryStore()
        let clock = ManualClock()
        let sensor = ScriptedFactor(
            .biometric, store: store, clock: clock, schedule: .biometric, biometry: .fingerprint, codes: .biometry)
        let vault = LocalVault(store: store, clock: clock, keepers: [ScriptedKeeper(gate: sensor.gate)])
        let service = VaultService(vault: vault, factors: Factors.all, userSettings: [.enabled(.biometric)])
        let alice = VaultService.Caller(uid: 1000, name: "alice")
        let context = UserContext(name: "alice")
        guard case .failure(let unenrolled) = service.answer(.arm(.biometric, context, attempts: 3), from: alice)
        else { Issue.record("armed with nothing enrolled"); return }
        #expect(unenrolled.code == .biometryNotEnrolled)
        try sensor.enroll("alice")
        guard case .armed(let nonce) = service.answer(.arm(.biometric, context, attempts: 3), from: alice) else {
            Issue.record("not armed")
            return
        }
        guard case .failure(let busy) = service.answer(.arm(.biometric, context, attempts: 3), from: alice) else {
            Issue.record("armed twice")
            return
        }
        #expect(busy.reason == "the sensor is in use by another authentication")
        service.leases.record(.success, for: nonce)
        #expect(service.answer(.claim(.biometric, context, nonce: nonce), from: alice) == .verdicts([.success]))
        #expect(
            service.answer(.set(key: "biometric.enabled", user: "alice", value: false, via: "t"), from: alice) == .done)
    }
}
