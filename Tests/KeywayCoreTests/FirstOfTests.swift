import KeywayCore
import KeywayTestSupport
import Testing

/// `first of` (docs/ARCHITECTURE.md §14): an armed sensor and a typed factor at one prompt, over real attempt gates.
@Suite("first of: factors at once")
struct FirstOfTests {
    let store = InMemoryStore()
    let clock = ManualClock()
    let sensor: ScriptedFactor
    let pattern: ScriptedFactor
    let passcode: ScriptedFactor
    let context: EvaluationContext
    let user = UserContext(name: "alice", service: "test")

    init(options: EvaluationContext.Options = .init(), enrolled: [FactorKind] = [.biometric, .gesture, .passcode]) {
        sensor = ScriptedFactor(
            .biometric, store: store, clock: clock, schedule: .biometric, biometry: .fingerprint, role: .presented,
            codes: .biometry)
        pattern = ScriptedFactor(.gesture, store: store, clock: clock, schedule: .gesture, role: .typed)
        passcode = ScriptedFactor(
            .passcode, store: store, clock: clock, schedule: .passcode, clears: [.biometric], role: .typed,
            codes: .passcode)
        context = EvaluationContext(registry: FactorRegistry([sensor, pattern, passcode]), options: options)
        for factor in [sensor, pattern, passcode] where enrolled.contains(factor.kind) { try? factor.enroll(user.name) }
    }

    static let both = Policy(
        name: "either", rule: .firstOf([.factor(.biometric, attempts: 3), .factor(.gesture, attempts: 3)]))

    /// Evaluates with `answers`; `during[n]` is presented to the sensor while the n-th prompt waits.
    func evaluate(_ answers: [ScriptedConversation.Answer], policy: Policy = both, during: [Int: [String]] = [:])
        -> (Evaluation, ScriptedConversation)
    {
        let conversation = ScriptedConversation(answers)
        let sensor = self.sensor
        conversation.onAsk { number in for touch in during[number] ?? [] { sensor.present(touch) } }
        return (context.evaluate(policy, for: user, reason: "test", conversation: conversation), conversation)
    }

    func failures(_ factor: FactorKind) -> Int {
        (try? store.attempts(user: user.name)[factor].consecutiveFailures) ?? -1
    }

    @Test("one prompt asks for both; a touch, then Enter, succeeds")
    func touchThenEnter() {
        let (evaluation, conversation) = evaluate([.type("")], during: [1: ["ok"]])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(conversation.prompts.map(\.text) == ["Touch the sensor and press Enter, or type your gesture: "])
        #expect(conversation.prompts.first?.wake == nil, "the scripted sensor has no descriptor to wait on")
        #expect(evaluation.steps.last == Evaluation.Step(factor: .biometric, attempt: 1, outcome: .succeeded))
    }

    @Test("typing the pattern while the sensor is armed succeeds, and the sensor counts nothing")
    func typedWhileArmed() {
        let (evaluation, conversation) = evaluate([.type("ok")])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(conversation.prompts.count == 1)
        #expect(failures(.biometric) == 0)
        #expect(evaluation.steps.last == Evaluation.Step(factor: .gesture, attempt: 1, outcome: .succeeded))
    }

    @Test("a wrong touch, then the right pattern: success, and the touch counted once")
    func wrongTouchThenPattern() {
        let (evaluation, conversation) = evaluate([.type(""), .type("ok")], during: [1: ["wrong"]])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(failures(.biometric) == 1)
        #expect(conversation.messages.map(\.text) == ["Not recognized. 2 attempts left."])
    }

    @Test("a touch made before the prompt does not count; Enter with nothing presented says so and asks again")
    func touchBeforeArming() {
        sensor.present("ok")
        let (evaluation, conversation) = evaluate([.type(""), .cancel])
        #expect(!evaluation.succeeded)
        #expect(evaluation.error?.code == .userCancel)
        #expect(conversation.messages.map(\.text) == ["Nothing was presented to the sensor."])
        #expect(failures(.biometric) == 0)
    }

    @Test("some askpass agents refuse an empty entry: one character asks the sensor too")
    func oneCharacterConfirmation() {
        let (evaluation, _) = evaluate([.type("y")], during: [1: ["ok"]])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(failures(.gesture) == 0, "'y' was not taken for a pattern")
    }

    @Test("Enter with nothing presented takes the offered way out (next=password)")
    func enterHandsOver() {
        let rig = FirstOfTests(options: .init(handoverLabel: "Use password"))
        let (evaluation, conversation) = rig.evaluate([.fallback])
        #expect(evaluation.error?.code == .userFallback)
        #expect(
            conversation.prompts.first?.textWithFallback
                == "Touch the sensor and press Enter, or type your gesture (Enter: use password): ")
        #expect(conversation.messages.isEmpty)
    }

    @Test("failures count per factor: the pattern used up, the sensor still waits, alone")
    func perFactorCounts() {
        let (evaluation, conversation) = evaluate(
            [.type("w1"), .type("w2"), .type("w3"), .type("")], during: [4: ["ok"]])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(failures(.gesture) == 3)
        #expect(failures(.biometric) == 0)
        #expect(
            conversation.prompts.map(\.text).last == "Touch the sensor and press Enter: ",
            "\(conversation.prompts.map(\.text))")
    }

    @Test("the sensor used up, the typed factor goes on with its own prompt and its attempts left")
    func sensorUsedUp() {
        let (evaluation, conversation) = evaluate(
            [.type("w1"), .type(""), .type("ok")], during: [2: ["n1", "n2", "n3"]])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(failures(.biometric) == 3)
        #expect(conversation.prompts.map(\.text).last == "gesture: ", "\(conversation.prompts.map(\.text))")
    }

    @Test("the biometric lockout count is shared across `first of` branches and evaluations")
    func sharedLockout() {
        _ = evaluate([.type(""), .cancel], during: [1: ["a", "b", "c"]])
        #expect(failures(.biometric) == 3)
        let sensorOnly = Policy(
            name: "sensor", rule: .firstOf([.factor(.biometric, attempts: 5), .factor(.passcode, attempts: 3)]))
        let (evaluation, conversation) = evaluate([.type(""), .cancel], policy: sensorOnly, during: [1: ["d", "e"]])
        #expect(failures(.biometric) == 5)
        #expect(!evaluation.succeeded)
        // The fifth failure locks biometrics: said at once, and the prompt goes on for the passcode alone.
        #expect(conversation.messages.map(\.text).contains("Not recognized."), "\(conversation.messages)")
        #expect(conversation.prompts.map(\.text).last == "passcode: ", "\(conversation.prompts.map(\.text))")
        if case .lockedOut = sensor.availability(for: user) {
        } else {
            Issue.record("biometrics are not locked: \(sensor.availability(for: user))")
        }
    }

    @Test("composes: `first of (…) or passcode` goes on to the passcode when both fail")
    func composes() {
        let policy = Policy(
            name: "composed", rule: .anyOf([Self.both.rule, .factor(.passcode, attempts: 3)]))
        let (evaluation, conversation) = evaluate(
            [.type("w1"), .type("w2"), .type("w3"), .type(""), .type("ok")], policy: policy,
            during: [4: ["x", "y", "z"]])
        #expect(evaluation.succeeded, "\(evaluation)")
        #expect(conversation.prompts.map(\.text).last == "passcode: ")
        #expect(failures(.biometric) == 0, "the passcode clears the biometric count")
        #expect(failures(.gesture) == 3)
    }

    @Test("an unavailable member leaves the other asked alone, with its own prompt")
    func oneLeft() {
        let rig = FirstOfTests(enrolled: [.gesture, .passcode])
        let (evaluation, conversation) = rig.evaluate([.type("ok")])
        #expect(evaluation.succeeded)
        #expect(conversation.prompts.map(\.text) == ["gesture: "])
    }

    @Test("a locked sensor is said once, and the pattern is asked alone; a sensor never enrolled is not mentioned")
    func lockedSensorSaid() {
        for _ in 0..<5 { _ = try? sensor.check("wrong-\(UInt32.random(in: 0...UInt32.max))", user: user.name) }
        let (evaluation, conversation) = evaluate([.type("ok")])
        #expect(evaluation.succeeded)
        #expect(conversation.prompts.map(\.text) == ["gesture: "])
        #expect(conversation.messages.count == 1, "\(conversation.messages)")
        let quiet = FirstOfTests(enrolled: [.gesture, .passcode])
        let (_, told) = quiet.evaluate([.type("ok")])
        #expect(told.messages.isEmpty, "\(told.messages)")
    }

    @Test("cancel at the shared prompt ends the evaluation and releases the sensor")
    func cancel() {
        let (evaluation, _) = evaluate([.cancel])
        #expect(evaluation.error?.code == .userCancel)
        #expect(failures(.biometric) == 0 && failures(.gesture) == 0)
    }

    @Test("canEvaluate treats `first of` as any of its factors")
    func capability() {
        #expect(context.canEvaluate(Self.both, for: user) == nil)
        #expect(FirstOfTests(enrolled: [.gesture]).context.canEvaluate(Self.both, for: user) == nil)
        #expect(FirstOfTests(enrolled: [.passcode]).context.canEvaluate(Self.both, for: user) != nil)
    }

    @Test("problems: members are factors, at least two, each once")
    func problems() {
        let known: Set<FactorKind> = [.biometric, .gesture, .passcode]
        let nested = Policy(
            name: "n", rule: .firstOf([.factor(.biometric, attempts: 3), .anyOf([.factor(.gesture, attempts: 3)])]))
        #expect(nested.problems(knownFactors: known) == ["n[2]: 'first of' lists factors, not rules"])
        let single = Policy(name: "s", rule: .firstOf([.factor(.biometric, attempts: 3)]))
        #expect(single.problems(knownFactors: known) == ["s: 'first of' lists at least two factors"])
        let twice = Policy(name: "t", rule: .firstOf([.factor(.gesture, attempts: 3), .factor(.gesture, attempts: 2)]))
        #expect(twice.problems(knownFactors: known) == ["t: 'gesture' is listed twice in 'first of'"])
    }
}
