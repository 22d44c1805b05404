import KeywayCore
import KeywayCrypto
import KeywayPlatform
import KeywayTestSupport
import Testing

@testable import KeywayGesture

struct GestureRig {
    let store = InMemoryStore()
    let clock = ManualClock()
    let plugin: GestureAuthenticator
    let user = UserContext(name: "alice")

    init(rules: PatternRules = .default) throws {
        plugin = GestureAuthenticator(
            store: store, clock: clock, hasher: try Argon2idHasher(cost: .minimum), rules: rules)
    }

    func enroll(_ pattern: String) throws {
        _ = try plugin.enroll(user: user.name, by: "test", conversation: ScriptedConversation(typing: pattern, pattern))
    }

    func attempt(_ typed: String) -> Result<Verdict, AuthenticationError> {
        Result { () throws(AuthenticationError) in
            try plugin.authenticate(
                AuthenticationRequest(user: user), conversation: ScriptedConversation(typing: typed))
        }
    }

    var failures: Int { (try? store.attempts(user: user.name)[.gesture].consecutiveFailures) ?? -1 }
}

@Suite("Gesture factor")
struct GestureAuthenticatorTests {
    @Test("passes the authenticator conformance checks")
    func conformance() throws {
        let rig = try GestureRig()
        let problems = AuthenticatorConformance.check(
            .init(
                plugin: rig.plugin, store: rig.store,
                enroll: { user in
                    _ = try rig.plugin.enroll(
                        user: user, by: "t", conversation: ScriptedConversation(typing: "2-4-9-3", "2-4-9-3"))
                },
                arrange: { scenario in
                    switch scenario {
                    case .correct: ScriptedConversation(typing: "2493")
                    case .wrong: ScriptedConversation(typing: "2-4-9-1")
                    case .cancel: ScriptedConversation([.cancel])
                    }
                }))
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test(
        "the three input forms unlock the same pattern, and a straight move picks up the dot it crosses",
        arguments: ["4-1-5-9-6", "41596", "4 1 5 9 6", "4-1-9-6", " 4,1,5,9,6\n"])
    func inputForms(typed: String) throws {
        let rig = try GestureRig()
        try rig.enroll("4-1-5-9-6")
        #expect(rig.attempt(typed) == .success(.success))
    }

    @Test("the numbered grid is shown before the pattern is asked for")
    func gridShown() throws {
        let rig = try GestureRig()
        try rig.enroll("2-4-9-3")
        let conversation = ScriptedConversation(typing: "2-4-9-3")
        _ = try rig.plugin.authenticate(AuthenticationRequest(user: rig.user), conversation: conversation)
        // The grid says which factor it explains, and the prompt which factor it asks for (a lock screen draws the
        // grid instead; pam_keyway(8), MARKED PROMPTS).
        #expect(conversation.events.first == .told(.explaining(.gesture, GestureAuthenticator.grid)))
        #expect(conversation.prompts == [Prompt("Pattern (dots 1-9): ", echo: false, factor: .gesture)])
        #expect(GestureAuthenticator.grid.contains("1 2 3\n  4 5 6\n  7 8 9"))
    }

    @Test(
        "malformed entries are rejected with a reason and not counted",
        arguments: [
            ("1-2-a-6", "Use the dot numbers 1 to 9"), ("0-1-2-3", "Use the dot numbers 1 to 9"),
            ("1-5-1-6", "A dot can be used only once."), ("1-5", "Connect at least 4 dots."),
            ("", "No pattern was entered."),
        ])
    func malformed(typed: String, reason: String) throws {
        let rig = try GestureRig()
        try rig.enroll("2-4-9-3")
        guard case .success(.failure(.malformed(let why))) = rig.attempt(typed) else {
            Issue.record("\(typed) must be malformed")
            return
        }
        #expect(why.hasPrefix(reason))
        #expect(rig.failures == 0)
    }

    @Test(
        "enrollment: drawn twice and must match; short or common shapes refused with a reason",
        arguments: [
            (["2-4-9-3", "2-4-9-1", "2-4-9-3", "2-4-9-3"], "The patterns did not match; start again."),
            (["1-2-3", "2-4-9-3", "2-4-9-3"], "Connect at least 4 dots."),
            (["1-2-3-5-7-8-9", "2-4-9-3", "2-4-9-3"], "That pattern is too common; choose another."),  // Z
            (["1-4-7-8-9", "2-4-9-3", "2-4-9-3"], "That pattern is too common; choose another."),  // L
            (["a-b-c-d", "2-4-9-3", "2-4-9-3"], PatternError.invalidCharacter.description),
        ])
    func enrollmentRules(typed: [String], message: String) throws {
        let rig = try GestureRig()
        let conversation = ScriptedConversation(typed.map(ScriptedConversation.Answer.type))
        _ = try rig.plugin.enroll(user: "alice", by: "test", conversation: conversation)
        #expect(conversation.messages.filter { $0.kind == .error } == [.error(message)])
        #expect(rig.attempt("2-4-9-3") == .success(.success))
    }

    @Test("a raised minimum refuses shorter patterns at enrollment")
    func raisedMinimum() throws {
        let rig = try GestureRig(rules: PatternRules(minimumDots: 6))
        let conversation = ScriptedConversation(typing: "2-4-9-3", "2-4-9-3-7-8", "2-4-9-3-7-8")
        _ = try rig.plugin.enroll(user: "alice", by: "test", conversation: conversation)
        #expect(conversation.messages.contains(.error("Connect at least 6 dots.")))
        #expect(rig.attempt("2-4-9-3-7-8") == .success(.success))
    }

    @Test("only an Argon2id hash of the pattern is stored")
    func storesHash() throws {
        let rig = try GestureRig()
        try rig.enroll("2-4-9-3")
        let payload = try #require(try rig.store.enrollment(user: "alice", factor: .gesture)).payload
        let text = String(decoding: payload, as: UTF8.self)
        #expect(text.hasPrefix("$argon2id$v=19$"))
        #expect(!text.contains("2493") && !text.contains("2-4-9-3"))
    }

    @Test("change: the current pattern first; a wrong one is counted and changes nothing")
    func change() throws {
        let rig = try GestureRig()
        try rig.enroll("2-4-9-3")
        #expect(throws: AuthenticationError(.authenticationFailed)) {
            try rig.plugin.change(
                user: "alice", by: "alice", conversation: ScriptedConversation(typing: "2-4-9-1", "6-1-8-3", "6-1-8-3"))
        }
        #expect(rig.failures == 1)
        #expect(rig.attempt("2-4-9-3") == .success(.success))
        _ = try rig.plugin.change(
            user: "alice", by: "alice", conversation: ScriptedConversation(typing: "2-4-9-3", "6-1-8-3", "6-1-8-3"))
        #expect(rig.attempt("6-1-8-3") == .success(.success))
        #expect(rig.attempt("2-4-9-3") == .success(.failure(.mismatch)))
    }

    @Test("5 wrong patterns → 30 s wait; repeats of the same wrong pattern count once")
    func throttling() throws {
        let rig = try GestureRig()
        try rig.enroll("2-4-9-3")
        #expect(rig.attempt("1-5-9-6") == .success(.failure(.mismatch)))
        #expect(rig.attempt("1-5-9-6") == .success(.failure(.repeatedMismatch)))
        for wrong in ["3-5-7-4", "7-5-3-6", "8-4-2-6", "9-5-1-4"] {
            #expect(rig.attempt(wrong) == .success(.failure(.mismatch)))
        }
        #expect(rig.failures == 5)
        guard case .failure(let error) = rig.attempt("2-4-9-3") else {
            Issue.record("the right pattern inside the 30 s wait must be refused")
            return
        }
        #expect(error.code == .throttled)
        #expect(error.retryAt == rig.clock.now().adding(.seconds(30)))
        rig.clock.advance(by: .seconds(30))
        #expect(rig.attempt("2-4-9-3") == .success(.success))
        #expect(rig.failures == 0)
    }

    @Test("policy: the gesture with its grid, through the engine, says how many attempts are left")
    func throughPolicy() throws {
        let rig = try GestureRig()
        try rig.enroll("2-4-9-3")
        let context = EvaluationContext(registry: FactorRegistry([rig.plugin]))
        let conversation = ScriptedConversation(typing: "1-5-9-6", "2-4-9-3")
        let evaluation = context.evaluate(
            Policy(name: "pattern", rule: .factor(.gesture, attempts: 3)),
            for: rig.user, reason: "sudo", conversation: conversation)
        #expect(evaluation.succeeded)
        #expect(
            conversation.messages == [
                .explaining(.gesture, GestureAuthenticator.grid), .error("Not recognized. 2 attempts left."),
            ])
    }
}
