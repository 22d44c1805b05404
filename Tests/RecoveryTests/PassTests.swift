import Foundation
import KeywayCore
import KeywayCrypto
import KeywayStore
import KeywayTOTP
import KeywayTestSupport
import Synchronization
import Testing

/// An administrator's temporary pass (`PassKeeper`) over real Argon2id and SQLite: it stands in for one factor,
/// its uses are spent exactly once even when two vaults on one store race, it lapses by the store's clock, and the
/// store never holds it in plain text.
@Suite("temporary passes")
struct PassTests {
    let directory: String
    let store: SQLiteStore
    let clock = ManualClock(Timestamp(seconds: 1_800_000_000))
    let hasher: Argon2idHasher
    let vault: LocalVault

    init() throws {
        var template = Array("/tmp/keyway-pass-test.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        store = try SQLiteStore(.ownedByCurrentUser(path: directory + "/keyway.db"))
        hasher = try Argon2idHasher(cost: .minimum)
        vault = Self.vault(store, clock, hasher)
    }

    static func vault(_ store: any Store, _ clock: any Clock, _ hasher: any SecretHasher) -> LocalVault {
        // A typed factor named totp that keeps what keepers keep of a wrong entry (a slow hash's fingerprint), so a
        // pass that reaches it after its last use leaves nothing readable either.
        let totp = KnowledgeKeeper(
            normalize: { .success($0) }, rules: { _ in nil }, hasher: hasher,
            gate: AttemptGate(factor: FactorKind(rawValue: "totp"), store: store, clock: clock, schedule: .passcode))
        return LocalVault(
            store: store, clock: clock, keepers: [totp, PassKeeper(store: store, clock: clock, hasher: hasher)])
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    func issue(uses: Int, seconds: Int = 7200) throws -> String {
        let code = try vault.offer(.pass, for: "alice", by: "root")
        try vault.enroll(
            .secret(Secret(copying: code)), of: .pass, for: "alice", label: "totp \(seconds) \(uses)", by: "root")
        return String(decoding: code, as: UTF8.self)
    }

    func verify(_ typed: String, _ vault: LocalVault? = nil) throws -> Verdict {
        try (vault ?? self.vault).verify(
            .secret(Secret(copying: Array(typed.utf8))), of: FactorKind(rawValue: "totp"),
            for: UserContext(name: "alice", isRemote: true))
    }

    @Test("typed at the factor's prompt it lets the person in its number of times; the factor is asked meanwhile")
    func usesAndStandIn() throws {
        defer { remove() }
        let totp = FactorKind(rawValue: "totp")
        #expect(vault.availability(of: totp, for: UserContext(name: "alice")) == .notEnrolled)
        let pass = try issue(uses: 2)
        #expect(vault.availability(of: totp, for: UserContext(name: "alice")) == .available)
        #expect(try verify(pass.uppercased()) == .success)
        #expect(try verify(pass) == .success)
        #expect((try? verify(pass)) != .success, "a third use of a pass of two")
        #expect(vault.availability(of: totp, for: UserContext(name: "alice")) == .notEnrolled)
        let uses = try store.auditTrail(user: "alice").filter { $0.action == .use }.compactMap(\.detail)
        #expect(uses == ["a pass in place of totp, 1 of 2 uses left", "a pass in place of totp, 0 of 2 uses left"])
        // A new pass replaces the old; the old code is never accepted again.
        let next = try issue(uses: 1)
        #expect((try? verify(pass)) != .success)
        #expect(try verify(next) == .success)
    }

    @Test("a used pass lets the person replace what it stands in for: once, before it lapses, if issued after it")
    func replaceAfterUse() throws {
        defer { remove() }
        let totp = FactorKind(rawValue: "totp")
        func lets(_ factor: FactorKind = totp) throws -> Bool { try vault.passLetsReplace(factor, of: "alice") }
        func enrollFactor() throws {
            clock.advance(by: .seconds(1))
            try vault.enroll(
                .secret(Secret(copying: Array("482913".utf8))), of: totp, for: "alice", label: nil, by: "r")
        }
        try enrollFactor()
        clock.advance(by: .seconds(1))
        let pass = try issue(uses: 1)
        #expect(try !lets(), "issued, not used")
        #expect(try verify(pass) == .success)  // the login, its one use
        #expect(try lets())
        #expect(try !lets(FactorKind(rawValue: "recovery")), "only what it stands in for")
        try enrollFactor()  // the replacement
        #expect(try !lets(), "once: the factor is newer than the pass")
        // A pass issued before the factor's record, or lapsed, lets nothing.
        let older = try issue(uses: 2)
        try enrollFactor()
        #expect(try verify(older) == .success)
        #expect(try !lets(), "issued before the factor was enrolled")
        clock.advance(by: .seconds(1))
        let lapsing = try issue(uses: 2, seconds: 60)
        #expect(try verify(lapsing) == .success)
        #expect(try lets())
        clock.advance(by: .seconds(61))
        #expect(try !lets(), "lapsed")
    }

    @Test("it lapses by the store's clock; terms out of bounds are refused")
    func expiry() throws {
        defer { remove() }
        let pass = try issue(uses: 1, seconds: 60)
        clock.advance(by: .seconds(61))
        #expect((try? verify(pass)) != .success)
        for terms in ["totp 59 1", "totp 2592001 1", "totp 60 0", "totp 60 11", "pass 60 1", "totp 60"] {
            let code = try vault.offer(.pass, for: "alice", by: "root")
            #expect(throws: AuthenticationError(.enrollmentRefused), "\(terms)") {
                try vault.enroll(.secret(Secret(copying: code)), of: .pass, for: "alice", label: terms, by: "root")
            }
        }
    }

    @Test("two vaults on one store race for the last use 20 times: exactly one wins; the store holds no pass")
    func raceAndNoPlaintext() throws {
        defer { remove() }
        let other = Self.vault(try SQLiteStore(.ownedByCurrentUser(path: directory + "/keyway.db")), clock, hasher)
        var passes: [String] = []
        for round in 0..<20 {
            let pass = try issue(uses: 1)
            passes.append(pass)
            let wins = Mutex(0)
            let vaults = [vault, other]
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                if (try? verify(pass, vaults[index])) == .success { wins.withLock { $0 += 1 } }
            }
            #expect(wins.withLock { $0 } == 1, "round \(round)")
        }
        var everything = Data()
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            everything += try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        for pass in passes {
            for form in [pass, pass.replacingOccurrences(of: "-", with: "")] {
                #expect(everything.range(of: Data(form.utf8)) == nil, "\(form) is in the store")
            }
        }
    }
}

/// Counts the slow hashes a hasher runs: the work an answer costs, so two answers that must take the same time can be
/// compared without a clock.
final class CountingHasher: SecretHasher {
    let base: Argon2idHasher
    let slow = Mutex(0)
    init(_ base: Argon2idHasher) { self.base = base }
    func quickFingerprint(_ secret: Secret, boundTo binding: [UInt8]) -> [UInt8]? { nil }
    func decoy(like encoded: String) -> String? { base.decoy(like: encoded) }
    func hash(_ secret: Secret) throws(AuthenticationError) -> String { try base.hash(secret) }
    func verify(_ secret: Secret, against encoded: String) throws(AuthenticationError) -> SecretCheck {
        slow.withLock { $0 += 1 }
        return try base.verify(secret, against: encoded)
    }
    func hashSet(_ secrets: [Secret]) throws(AuthenticationError) -> [String] { try base.hashSet(secrets) }
    func verify(_ secret: Secret, againstSet encoded: [String]) throws(AuthenticationError) -> SetCheck {
        slow.withLock { $0 += 1 }
        return try base.verify(secret, againstSet: encoded)
    }
    func burnWork(_ secret: Secret) -> [UInt8] {
        slow.withLock { $0 += 1 }
        return base.burnWork(secret)
    }
}

extension PassTests {
    @Test("a pass-shaped entry at a TOTP prompt, under concealment: the same answer and work with a pass or without")
    func passConcealed() throws {
        defer { remove() }
        let counting = CountingHasher(hasher)
        let totp = TOTPKeeper(store: store, clock: clock)
        let passes = PassKeeper(store: store, clock: clock, hasher: counting)
        let vault = LocalVault(store: store, clock: clock, keepers: [totp, passes])
        let code = try vault.offer(.pass, for: "alice", by: "root")
        try vault.enroll(.secret(Secret(copying: code)), of: .pass, for: "alice", label: "totp 7200 2", by: "root")
        func answer(_ name: String) throws -> (Verdict, Int) {
            let before = counting.slow.withLock { $0 }
            let verdict = try vault.verify(
                .secret(Secret(copying: Array("abcd-efgh-jkmn-pqrs".utf8))), of: .totp,
                for: UserContext(name: name, isRemote: true, concealsEnrollment: true))
            return (verdict, counting.slow.withLock { $0 } - before)
        }
        let (held, heldWork) = try answer("alice")
        let (absent, absentWork) = try answer("bob")
        #expect(held == .failure(.mismatch) && absent == held, "alice: \(held), bob: \(absent)")
        #expect(heldWork == 1 && absentWork == 1, "slow hashes: alice \(heldWork), bob \(absentWork)")
        #expect(try store.attempts(user: "bob").viewed(from: .remote)[.pass].consecutiveFailures == 1, "counted alike")
        // Without concealment (an administrator's own tool), bob is told he has no code at all.
        #expect(throws: AuthenticationError(.factorNotEnrolled)) {
            try vault.verify(
                .secret(Secret(copying: Array("abcd-efgh-jkmn-pqrs".utf8))), of: .totp, for: UserContext(name: "bob"))
        }
    }
}
