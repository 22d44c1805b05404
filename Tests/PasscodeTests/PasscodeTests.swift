import KeywayCore
import KeywayCrypto
import KeywayTestSupport
import Testing

@testable import KeywayPasscode

struct PasscodeRig {
    let store = InMemoryStore()
    let clock = ManualClock()
    let plugin: PasscodeAuthenticator
    let user = UserContext(name: "alice")

    init(rules: PasscodeRules = .default) throws {
        plugin = PasscodeAuthenticator(
            store: store, clock: clock, hasher: try Argon2idHasher(cost: .minimum),
            rules: rules)
    }

    func enroll(_ passcode: String) throws {
        _ = try plugin.enroll(
            user: user.name, by: "test", conversation: ScriptedConversation(typing: passcode, passcode))
    }

    func attempt(_ typed: String) -> Result<Verdict, AuthenticationError> {
        Result { () throws(AuthenticationError) in
            try plugin.authenticate(
                AuthenticationRequest(user: user), conversation: ScriptedConversation(typing: typed))
        }
    }

    var failures: Int { (try? store.attempts(user: user.name)[.passcode].consecutiveFailures) ?? -1 }
}

@Suite("Passcode factor")
struct PasscodeTests {
    @Test("passes the authenticator conformance checks")
    func conformance() throws {
        let rig = try PasscodeRig()
        let problems = AuthenticatorConformance.check(
            .init(
                plugin: rig.plugin, store: rig.store,
                enroll: { user in
                    _ = try rig.plugin.enroll(
                        user: user, by: "t", conversation: ScriptedConversation(typing: "739155", "739155"))
                },
                arrange: { scenario in
                    switch scenario {
                    case .correct: ScriptedConversation(typing: "739155")
                    case .wrong: ScriptedConversation(typing: "739156")
                    case .cancel: ScriptedConversation([.cancel])
                    }
                }))
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("only an Argon2id hash is stored")
    func storesHash() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        let payload = try #require(try rig.store.enrollment(user: "alice", factor: .passcode)).payload
        let text = String(decoding: payload, as: UTF8.self)
        #expect(text.hasPrefix("$argon2id$"))
        #expect(!text.contains("739155"))
    }

    @Test(
        "enrollment refuses short and common passcodes with a reason, and the two entries must match",
        arguments: [
            (["12345", "739155", "739155"], "Use at least 6 characters."),
            (["123456", "739155", "739155"], "That passcode is too easy to guess; choose another."),
            (["000000", "739155", "739155"], "That passcode is too easy to guess; choose another."),
            (["121212", "739155", "739155"], "That passcode is too easy to guess; choose another."),
            (["987654", "739155", "739155"], "That passcode is too easy to guess; choose another."),
            (["PassWord", "739155", "739155"], "That passcode is too easy to guess; choose another."),
            (["739155", "739156", "739155", "739155"], "The passcodes did not match; start again."),
        ])
    func enrollmentRules(typed: [String], message: String) throws {
        let rig = try PasscodeRig()
        let conversation = ScriptedConversation(typed.map(ScriptedConversation.Answer.type))
        _ = try rig.plugin.enroll(user: "alice", by: "test", conversation: conversation)
        #expect(conversation.messages == [.error(message)])
        #expect(rig.attempt("739155") == .success(.success))
    }

    @Test("three refused rounds fail the enrollment and leave the old passcode in place")
    func enrollmentGivesUp() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        let conversation = ScriptedConversation(typing: "111111", "123456", "12345")
        #expect(throws: AuthenticationError(.authenticationFailed)) {
            try rig.plugin.enroll(user: "alice", by: "test", conversation: conversation)
        }
        #expect(rig.attempt("739155") == .success(.success))
    }

    @Test("a raised minimum length is enforced; it cannot be lowered below 6")
    func minimumLength() throws {
        #expect(PasscodeRules(minimumLength: 4).minimumLength == 6)
        let rig = try PasscodeRig(rules: PasscodeRules(minimumLength: 8))
        #expect(rig.plugin.rules.violation(of: Secret(copying: Array("7391552".utf8))) != nil)
        #expect(rig.plugin.rules.violation(of: Secret(copying: Array("73915528".utf8))) == nil)
    }

    @Test("change verifies the current passcode first, and a wrong one counts as a failure")
    func change() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        #expect(throws: AuthenticationError(.authenticationFailed)) {
            try rig.plugin.change(
                user: "alice", by: "alice", conversation: ScriptedConversation(typing: "000001", "482915", "482915"))
        }
        #expect(rig.failures == 1)
        _ = try rig.plugin.change(
            user: "alice", by: "alice", conversation: ScriptedConversation(typing: "739155", "482915", "482915"))
        #expect(rig.attempt("482915") == .success(.success))
        #expect(rig.attempt("739155") == .success(.failure(.mismatch)))
    }

    @Test("the delay ladder applies through the clock: 5 failures → wait 1 minute, the 6th → 5 minutes")
    func delayLadder() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        for n in 0..<5 { #expect(rig.attempt("00000\(n)x") == .success(.failure(.mismatch))) }
        guard case .failure(let error) = rig.attempt("739155") else {
            Issue.record("the 6th attempt inside the delay must be refused")
            return
        }
        #expect(error.code == .throttled)
        #expect(error.retryAt == rig.clock.now().adding(.seconds(60)))
        #expect(
            rig.plugin.availability(for: rig.user)
                == .lockedOut(
                    until: rig.clock.now().adding(.seconds(60)),
                    reason: "too many failed attempts"))
        rig.clock.advance(by: .seconds(60))
        #expect(rig.attempt("999999x") == .success(.failure(.mismatch)))
        guard case .failure(let again) = rig.attempt("739155") else {
            Issue.record("the attempt after the 6th failure must wait 5 minutes")
            return
        }
        #expect(again.code == .throttled)
        rig.clock.advance(by: .seconds(300))
        #expect(rig.attempt("739155") == .success(.success))
        #expect(rig.failures == 0)
    }

    @Test("the same wrong passcode repeated counts once")
    func repeatedWrongCountsOnce() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        #expect(rig.attempt("555123") == .success(.failure(.mismatch)))
        #expect(rig.attempt("555123") == .success(.failure(.repeatedMismatch)))
        #expect(rig.attempt("555123") == .success(.failure(.repeatedMismatch)))
        #expect(rig.failures == 1)
        #expect(rig.attempt("555124") == .success(.failure(.mismatch)))
        #expect(rig.failures == 2)
    }

    @Test("a passcode success clears the biometric lockout")
    func clearsBiometricLockout() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        try rig.store.updateAttempts(user: "alice") { $0[.biometric].consecutiveFailures = 5 }
        #expect(rig.attempt("739155") == .success(.success))
        #expect(try rig.store.attempts(user: "alice")[.biometric] == AttemptState())
    }

    @Test("an empty entry is malformed and not counted; fallback and cancel are errors")
    func emptyFallbackCancel() throws {
        let rig = try PasscodeRig()
        try rig.enroll("739155")
        #expect(rig.attempt("") == .success(.failure(.malformed("No passcode was entered."))))
        #expect(rig.failures == 0)
        let fallback = Result { () throws(AuthenticationError) in
            try rig.plugin.authenticate(
                AuthenticationRequest(user: rig.user), conversation: ScriptedConversation([.fallback]))
        }
        #expect(fallback == .failure(AuthenticationError(.userFallback)))
    }

    @Test("concealing enrollment: a user without a passcode is available, asked, hashed, counted, not recognized")
    func concealedUnenrolledUser() throws {
        let rig = try PasscodeRig()
        let hidden = UserContext(name: "nobody", concealsEnrollment: true)
        #expect(rig.plugin.availability(for: hidden) == .available)
        let conversation = ScriptedConversation(typing: "739155")
        let verdict = try rig.plugin.authenticate(AuthenticationRequest(user: hidden), conversation: conversation)
        #expect(verdict == .failure(.notEnrolled))
        #expect(conversation.prompts.count == 1)
        #expect(try rig.store.attempts(user: "nobody")[.passcode].consecutiveFailures == 1)  // counted like anyone
        #expect(rig.plugin.availability(for: UserContext(name: "nobody")) == .notEnrolled)
    }

    @Test("an unenrolled user is asked and answered like anyone else, then told passcodeNotSet")
    func unenrolledUser() throws {
        let rig = try PasscodeRig()
        let conversation = ScriptedConversation(typing: "739155")
        #expect(throws: AuthenticationError(.passcodeNotSet)) {
            try rig.plugin.authenticate(
                AuthenticationRequest(user: UserContext(name: "nobody")), conversation: conversation)
        }
        #expect(conversation.prompts.count == 1)
    }
}

/// Counts the slow hash's runs of the real Argon2id hasher it wraps.
final class SlowHashCounter: SecretHasher, @unchecked Sendable {  // counted from one test at a time
    let inner: Argon2idHasher
    var slow = 0
    var burned = 0
    init() throws { inner = try Argon2idHasher(cost: .minimum) }
    func decoy(like encoded: String) -> String? { inner.decoy(like: encoded) }
    func quickFingerprint(_ secret: Secret, boundTo binding: [UInt8]) -> [UInt8]? {
        inner.quickFingerprint(secret, boundTo: binding)
    }
    func hash(_ secret: Secret) throws(AuthenticationError) -> String { try inner.hash(secret) }
    func verify(_ secret: Secret, against encoded: String) throws(AuthenticationError) -> SecretCheck {
        slow += 1
        return try inner.verify(secret, against: encoded)
    }
    func burnWork(_ secret: Secret) -> [UInt8] {
        slow += 1
        burned += 1
        return inner.burnWork(secret)
    }
}

@Suite("Passcode factor: repeats without the slow hash")
struct PasscodeRepeatTests {
    @Test("a repeated wrong passcode is answered without the slow hash, counts nothing, and respects the lockout")
    func repeatIsFast() throws {
        let store = InMemoryStore()
        let clock = ManualClock()
        let hasher = try SlowHashCounter()
        let plugin = PasscodeAuthenticator(store: store, clock: clock, hasher: hasher, rules: .default)
        func attempt(_ typed: String, as name: String = "alice", concealing: Bool = false) -> Verdict? {
            try? plugin.authenticate(
                AuthenticationRequest(user: UserContext(name: name, concealsEnrollment: concealing)),
                conversation: ScriptedConversation(typing: typed))
        }
        _ = try plugin.enroll(user: "alice", by: "t", conversation: ScriptedConversation(typing: "739155", "739155"))
        #expect(attempt("555123") == .failure(.mismatch))
        #expect(hasher.slow == 1)
        for _ in 0..<5 { #expect(attempt("555123") == .failure(.repeatedMismatch)) }
        #expect(hasher.slow == 1, "a repeat ran the slow hash")
        #expect(try store.attempts(user: "alice")[.passcode].consecutiveFailures == 1)
        // A success keeps the memory (the wrong passcode is still wrong); the right one always pays the hash.
        #expect(attempt("739155") == .success)
        #expect(attempt("555123") == .failure(.repeatedMismatch))
        #expect(hasher.slow == 2)
        // An unenrolled name under concealment: the same, so the two cannot be told apart.
        #expect(attempt("555123", as: "ghost", concealing: true) == .failure(.notEnrolled))
        #expect(attempt("555123", as: "ghost", concealing: true) == .failure(.notEnrolled))
        #expect(hasher.slow == 3)
        // Locked out: a repeat still gets the lockout, not a verdict.
        for guess in ["111111", "222223", "333334", "444445", "555556"] { _ = attempt(guess) }
        let locked = Result { () throws(AuthenticationError) in
            try plugin.authenticate(
                AuthenticationRequest(user: UserContext(name: "alice")),
                conversation: ScriptedConversation(typing: "555123"))
        }
        #expect(throws: AuthenticationError(.throttled)) { try locked.get() }
        // A changed passcode remembers nothing: the old wrong one is checked again by the slow hash.
        clock.advance(by: .seconds(3600))
        _ = try plugin.change(
            user: "alice", by: "t", conversation: ScriptedConversation(typing: "739155", "864209", "864209"))
        let before = hasher.slow
        #expect(attempt("555123") == .failure(.mismatch))
        #expect(hasher.slow == before + 1)
    }

    @Test("a name without an enrollment pays a verification at a cost enrolled secrets use, not the configured one")
    func decoyCost() throws {
        let store = InMemoryStore()
        let hasher = try SlowHashCounter()
        let plugin = PasscodeAuthenticator(store: store, clock: ManualClock(), hasher: hasher, rules: .default)
        // Before any enrollment: the configured cost (burnWork).
        _ = try? plugin.authenticate(
            AuthenticationRequest(user: UserContext(name: "ghost", concealsEnrollment: true)),
            conversation: ScriptedConversation(typing: "555123"))
        #expect(hasher.burned == 1)
        _ = try plugin.enroll(user: "alice", by: "t", conversation: ScriptedConversation(typing: "739155", "739155"))
        let verifies = hasher.slow - hasher.burned
        // Once a secret is enrolled, a decoy at its cost: a verification, the same work as an enrolled name's.
        let verdict = try? plugin.authenticate(
            AuthenticationRequest(user: UserContext(name: "ghost2", concealsEnrollment: true)),
            conversation: ScriptedConversation(typing: "555124"))
        #expect(verdict == .failure(.notEnrolled))
        #expect(hasher.burned == 1, "the configured cost was paid instead of an enrolled one")
        #expect(hasher.slow - hasher.burned == verifies + 1)
    }
}
