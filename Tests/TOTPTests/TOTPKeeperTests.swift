import KeywayCore
import KeywayTestSupport
import Testing

@testable import KeywayTOTP

/// The vault's side of TOTP over a real attempt gate: a secret offered once and saved only when a code confirms it;
/// each code accepted once, within one step either side of now; wrong codes counted as every factor's are.
@Suite("TOTP keeper")
struct TOTPKeeperTests {
    let store = InMemoryStore()
    /// The start of a step, so "one step later" is a whole step.
    let clock = ManualClock(Timestamp(seconds: 1_800_000_010))
    let secret = (0..<20).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
    let keeper: TOTPKeeper
    let vault: LocalVault
    var generator: OneTimeCode { OneTimeCode(secret: secret) }

    init() {
        let secret = self.secret
        keeper = TOTPKeeper(store: store, clock: clock, random: { _ in secret })
        vault = LocalVault(store: store, clock: clock, keepers: [keeper])
    }

    /// The code of the step `offset` steps from now.
    func code(_ offset: Int64 = 0) -> Secret {
        Secret(copying: generator.code(step: generator.step(at: clock.now()) + offset))
    }

    func verify(_ code: Secret, user: String = "alice") throws -> Verdict {
        try vault.verify(.secret(code), of: .totp, for: UserContext(name: user))
    }

    func failures(_ user: String = "alice") throws -> Int { try store.attempts(user: user)[.totp].consecutiveFailures }

    func enroll(_ user: String = "alice") throws {
        #expect(try vault.offer(.totp, for: user, by: "root") == secret)
        try vault.enroll(.secret(code()), of: .totp, for: user, label: nil, by: "root")
    }

    @Test("enrollment saves the offered secret only once a current code confirms it; the confirming code is spent")
    func enrollment() throws {
        #expect(throws: AuthenticationError(.enrollmentRefused)) {
            try vault.enroll(.secret(code()), of: .totp, for: "alice", label: nil, by: "root")
        }
        _ = try vault.offer(.totp, for: "alice", by: "root")
        #expect(throws: AuthenticationError(.enrollmentRefused)) {
            try vault.enroll(.secret(code(3)), of: .totp, for: "alice", label: nil, by: "root")
        }
        #expect(try store.enrollment(user: "alice", factor: .totp) == nil, "a wrong code saves nothing")
        try vault.enroll(.secret(code()), of: .totp, for: "alice", label: nil, by: "root")  // the offer was kept
        #expect(try store.enrollment(user: "alice", factor: .totp)?.payload == [1, 6, 30] + secret)
        #expect(try verify(code()) == .failure(.mismatch), "the confirming code cannot log in")
        clock.advance(by: .seconds(30))
        #expect(try verify(code()) == .success)
    }

    @Test("an offer lasts ten minutes and is for one user")
    func offerLifetime() throws {
        _ = try vault.offer(.totp, for: "alice", by: "root")
        #expect(throws: AuthenticationError(.enrollmentRefused)) {
            try vault.enroll(.secret(code()), of: .totp, for: "bob", label: nil, by: "root")
        }
        clock.advance(by: .seconds(601))
        #expect(throws: AuthenticationError(.enrollmentRefused)) {
            try vault.enroll(.secret(code()), of: .totp, for: "alice", label: nil, by: "root")
        }
    }

    @Test("one step either side is accepted; two steps old is not; each code once, a replay counted")
    func window() throws {
        try enroll()
        clock.advance(by: .seconds(90))
        #expect(try verify(code(-2)) == .failure(.mismatch), "two steps old")
        #expect(try verify(code(-1)) == .success, "the previous step's code")
        #expect(try verify(code(-1)) == .failure(.mismatch), "the same code again")
        #expect(try failures() == 1, "the replay is counted")
        #expect(try verify(code(0)) == .success, "a later step's code still works")
        #expect(try verify(code(-1)) == .failure(.mismatch), "an earlier step after a later one is refused")
        #expect(try verify(code(1)) == .success, "the next step's code, for a clock running ahead")
        #expect(try verify(code(0)) == .failure(.mismatch), "and then the current one is used up")
    }

    @Test("wrong codes count; a repeat of the same wrong code is refunded; five lock for a minute")
    func counting() throws {
        try enroll()
        clock.advance(by: .seconds(30))
        #expect(try verify(Secret(copying: Array("000000".utf8))) == .failure(.mismatch))
        #expect(try verify(Secret(copying: Array("000000".utf8))) == .failure(.repeatedMismatch))
        #expect(try failures() == 1)
        for wrong in ["111111", "222222", "333333", "444444"] {
            #expect(try verify(Secret(copying: Array(wrong.utf8))) == .failure(.mismatch))
        }
        #expect(throws: AuthenticationError(.throttled)) { try verify(code()) }
        clock.advance(by: .seconds(61))
        #expect(try verify(code()) == .success)
        #expect(try failures() == 0)
    }

    /// The outcome of each of `codes` typed in each of `steps` steps for `user`, as a word per attempt.
    func outcomes(_ codes: [String], steps: Int, for user: UserContext) -> [String] {
        var seen: [String] = []
        for _ in 0..<steps {
            for wrong in codes {
                let evidence = Evidence.secret(Secret(copying: Array(wrong.utf8)))
                let word: String
                do {
                    let verdict: Verdict = try vault.verify(evidence, of: .totp, for: user)
                    switch verdict {
                    case .failure(.mismatch), .failure(.notEnrolled): word = "counted"
                    case .failure(.repeatedMismatch): word = "refunded"
                    default: word = "unexpected"
                    }
                } catch {
                    word = error.code == .throttled ? "throttled" : "error"
                }
                seen.append(word)
            }
            clock.advance(by: .seconds(30))
        }
        return seen
    }

    @Test("a wrong code repeated in a later step is a new guess: 16 over 4 steps throttle, enrolled or not, alike")
    func repeatsAcrossSteps() throws {
        try enroll()
        clock.advance(by: .seconds(30))
        let codes: [String] = ["000000", "111111", "222222", "333333"]
        let enrolled: [String] = outcomes(codes, steps: 4, for: UserContext(name: "alice", concealsEnrollment: true))
        let refunded: Bool = enrolled.contains("refunded")
        #expect(!refunded, "\(enrolled)")
        let counted: Int = enrolled.prefix(5).filter { $0 == "counted" }.count
        #expect(counted == 5, "\(enrolled)")
        let throttled: Bool = enrolled.contains("throttled")
        #expect(throttled, "\(enrolled)")
        let aliceFailures: Int = try failures()
        #expect(aliceFailures >= 5)
        let absent: [String] = outcomes(codes, steps: 4, for: UserContext(name: "nobody", concealsEnrollment: true))
        #expect(absent == enrolled, "a name with nothing enrolled is answered alike")
        let nobodyFailures: Int = try failures("nobody")
        #expect(nobodyFailures == aliceFailures)
    }

    @Test("within one step a repeat is refunded for a name with nothing enrolled too")
    func concealedRepeat() throws {
        let hidden = UserContext(name: "nobody", concealsEnrollment: true)
        let wrong = Evidence.secret(Secret(copying: Array("000000".utf8)))
        #expect(try vault.verify(wrong, of: .totp, for: hidden) == .failure(.notEnrolled))
        #expect(try vault.verify(wrong, of: .totp, for: hidden) == .failure(.notEnrolled))
        #expect(try failures("nobody") == 1)
        clock.advance(by: .seconds(30))
        #expect(try vault.verify(wrong, of: .totp, for: hidden) == .failure(.notEnrolled))
        #expect(try failures("nobody") == 2, "a later step counts it")
    }

    @Test("a malformed code is refused without counting; spaces as apps show them are dropped")
    func malformed() throws {
        try enroll()
        clock.advance(by: .seconds(30))
        #expect(try verify(Secret(copying: Array("12a456".utf8))) == .failure(.malformed("a code is 6 digits")))
        #expect(try verify(Secret(copying: Array("12345".utf8))) == .failure(.malformed("a code is 6 digits")))
        #expect(try failures() == 0)
        let spaced = generator.code(step: generator.step(at: clock.now()))
        #expect(try verify(Secret(copying: Array(spaced[0..<3]) + [32] + Array(spaced[3...]))) == .success)
    }

    @Test("nothing enrolled, and a damaged record, fail with their own codes and count nothing")
    func damaged() throws {
        #expect(throws: AuthenticationError(.factorNotEnrolled)) { try verify(code()) }
        try store.save(
            Enrollment(user: "alice", factor: .totp, payload: [9, 9], changedAt: clock.now(), changedBy: "x"))
        #expect(throws: AuthenticationError(.storeFailure)) { try verify(code()) }
        #expect(try failures() == 0)
    }

    @Test("under concealment a name without a code is asked, counted and refused as a wrong code is")
    func concealment() throws {
        let hidden = UserContext(name: "nobody", concealsEnrollment: true)
        #expect(vault.availability(of: .totp, for: hidden) == .available)
        #expect(try vault.verify(.secret(code()), of: .totp, for: hidden) == .failure(.notEnrolled))
        #expect(try failures("nobody") == 1)
        #expect(
            try vault.verify(.secret(Secret(copying: Array("12".utf8))), of: .totp, for: hidden)
                == .failure(.malformed("a code is 6 digits")))
        #expect(try failures("nobody") == 1)
    }

    @Test("availability follows the enrollment and the counters; a user cannot change it")
    func availability() throws {
        #expect(vault.availability(of: .totp, for: UserContext(name: "alice")) == .notEnrolled)
        try enroll()
        #expect(vault.availability(of: .totp, for: UserContext(name: "alice")) == .available)
        #expect(throws: AuthenticationError(.notPermitted)) {
            try vault.change(code(), to: code(), of: .totp, for: "alice", by: "alice")
        }
    }

    @Test("the person's side shows the URI and the key once, and confirms with the code typed")
    func personSide() throws {
        let conversation = ScriptedConversation([
            .type("000000"), .type(String(decoding: code().withUnsafeBytes { Array($0) }, as: UTF8.self)),
        ])
        let lines = try TOTPAuthenticator(vault: vault).enroll(
            EnrollmentRequest(user: "alice", actor: "root"), conversation: conversation)
        #expect(lines.first?.hasPrefix("The totp of alice is set") == true, "\(lines)")
        let scannable = conversation.messages.filter { $0.isScannable }.map { $0.text }
        #expect(scannable.count == 1)
        let key = Base32.encode(secret)
        #expect(scannable.first?.hasPrefix("otpauth://totp/Keyway:alice") == true, "\(scannable)")
        #expect(scannable.first?.hasSuffix("?secret=\(key)") == true, "\(scannable)")
        #expect(conversation.messages.contains { $0.kind == .error }, "the wrong first code was explained")
        #expect(try store.enrollment(user: "alice", factor: .totp) != nil)
    }
}
