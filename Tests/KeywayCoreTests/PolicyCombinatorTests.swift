import KeywayTestSupport
import Testing

@testable import KeywayCore

let gesture = FactorKind.gesture
let token = FactorKind(rawValue: "token")

@Suite("Custom policies: any-of, all-of, k-of-n, attempts, fail closed")
struct PolicyCombinatorTests {
    @Test("any-of falls back in order on failure, and stops at the first success")
    func anyOfOrder() {
        let rig = Rig(extra: [gesture])
        let policy = Policy(name: "p", rule: .anyOf([.factor(gesture, attempts: 1), .factor(.passcode, attempts: 2)]))
        let (evaluation, conversation) = rig.evaluate(policy, [.wrong(), .ok, .ok])
        #expect(evaluation.succeeded)
        #expect(conversation.prompts.map(\.text) == ["gesture: ", "passcode: "])
        #expect(conversation.remainingAnswers == 1)
        #expect(evaluation.factorsUsed == [gesture, .passcode])
    }

    @Test("a factor the person does not have is not offered next; one they have, or under concealment, is")
    func offersWhatThePersonHas() {
        let policy = Policy(name: "p", rule: .anyOf([.factor(gesture, attempts: 1), .factor(.passcode, attempts: 1)]))
        let (_, without) = Rig(enrollPasscode: false, extra: [gesture]).evaluate(policy, [.wrong()])
        #expect(without.prompts.map(\.fallbackLabel) == [nil], "the passcode offered to someone who has none")
        let (_, with) = Rig(extra: [gesture]).evaluate(policy, [.wrong(), .wrong()])
        #expect(with.prompts.first?.fallbackLabel == "Use passcode")
        // A later alternative the person has is offered past one they do not.
        let three = Policy(
            name: "p",
            rule: .anyOf([.factor(gesture, attempts: 1), .factor(.passcode, attempts: 1), .factor(token, attempts: 1)]))
        let (_, past) = Rig(enrollPasscode: false, extra: [gesture, token]).evaluate(three, [.wrong(), .wrong()])
        #expect(past.prompts.first?.fallbackLabel == "Use token", "\(past.prompts.map(\.fallbackLabel))")
        // Under concealment every name is offered the same, so the offer tells nothing about what is enrolled.
        let rig = Rig(enrollPasscode: false, extra: [gesture])
        let conversation = ScriptedConversation([.wrong()])
        var concealed = rig.user
        concealed.concealsEnrollment = true
        _ = rig.context.evaluate(policy, for: concealed, reason: "test", conversation: conversation)
        #expect(conversation.prompts.first?.fallbackLabel == "Use passcode")
    }

    @Test("a lockout followed only by factors the person does not have is what the evaluation ends with")
    func lockoutExplains() {
        let locked = AuthenticationError(.throttled, "try again later")
        let none = AuthenticationError(.factorNotEnrolled, "no recovery is enrolled")
        #expect(RuleCombinator.explain([locked, none])?.code == .throttled)
        #expect(RuleCombinator.explain([locked, none, none])?.code == .throttled)
        #expect(RuleCombinator.explain([none, locked])?.code == .throttled)
        let failed = AuthenticationError(.authenticationFailed, "wrong")
        #expect(RuleCombinator.explain([locked, failed])?.code == .authenticationFailed)
        #expect(RuleCombinator.explain([none])?.code == .factorNotEnrolled)
    }

    @Test("all-of needs every factor, in order")
    func allOfNeedsEvery() {
        let rig = Rig(extra: [gesture])
        let policy = Policy(name: "p", rule: .allOf([.factor(gesture, attempts: 1), .factor(.passcode, attempts: 1)]))
        let (both, _) = rig.evaluate(policy, [.ok, .ok])
        #expect(both.succeeded)
        let (firstFails, conversation) = rig.evaluate(policy, [.wrong(), .ok])
        #expect(firstFails.error == AuthenticationError(.authenticationFailed))
        #expect(conversation.prompts.count == 1)  // no point asking for the second
        let (secondFails, _) = rig.evaluate(policy, [.ok, .wrong(2)])
        #expect(!secondFails.succeeded)
    }

    @Test("all-of with a factor not enrolled fails with that factor's code")
    func allOfNotEnrolled() {
        let rig = Rig(enrollPasscode: false, extra: [gesture])
        let policy = Policy(name: "p", rule: .allOf([.factor(gesture, attempts: 1), .factor(.passcode, attempts: 1)]))
        let (evaluation, _) = rig.evaluate(policy, [.ok, .ok])
        #expect(evaluation.error == AuthenticationError(.passcodeNotSet))
    }

    @Test(
        "2-of-3 tolerates one failure and stops once two succeed",
        arguments: [
            ([ScriptedConversation.Answer.ok, .ok], true, 2),
            ([.wrong(), .ok, .ok], true, 3),
            ([.ok, .wrong(), .ok], true, 3),
            ([.wrong(), .wrong(1)], false, 2),  // after two failures 2 of 3 is out of reach: no third prompt
            ([.ok, .wrong(), .wrong(1)], false, 3),
        ])
    func twoOfThree(answers: [ScriptedConversation.Answer], succeeds: Bool, prompts: Int) {
        let rig = Rig(extra: [gesture, token])
        let rule = Policy.Rule.atLeast(
            2,
            of: [
                .factor(gesture, attempts: 1), .factor(token, attempts: 1),
                .factor(.passcode, attempts: 1),
            ])
        let (evaluation, conversation) = rig.evaluate(Policy(name: "two", rule: rule), answers)
        #expect(evaluation.succeeded == succeeds)
        #expect(conversation.prompts.count == prompts)
    }

    @Test("per-factor attempts bound one evaluation", arguments: [1, 2, 5])
    func perFactorAttempts(attempts: Int) {
        let rig = Rig(extra: [token])
        let answers = (0..<6).map { ScriptedConversation.Answer.wrong($0) }
        let (evaluation, conversation) = rig.evaluate(
            Policy(name: "t", rule: .factor(token, attempts: attempts)),
            answers)
        #expect(!evaluation.succeeded)
        #expect(conversation.prompts.count == attempts)
        #expect(conversation.messages.last == .error("Not recognized."))
        if attempts > 1 {
            #expect(
                conversation.messages.first
                    == .error("Not recognized. \(attempts - 1) attempt\(attempts == 2 ? "" : "s") left."))
        }
    }

    @Test(
        "an empty or unsatisfiable policy fails closed without prompting",
        arguments: [
            Policy.Rule.anyOf([]), .allOf([]),
            .atLeast(3, of: [.factor(.passcode, attempts: 1), .factor(.biometric, attempts: 1)]),
            .atLeast(0, of: [.factor(.passcode, attempts: 1)]), .factor(FactorKind(rawValue: "retina"), attempts: 1),
            .factor(.passcode, attempts: 0), .anyOf([.factor(.passcode, attempts: 1), .allOf([])]),
        ])
    func failsClosed(rule: Policy.Rule) {
        let rig = Rig()
        let policy = Policy(name: "broken", rule: rule)
        #expect(!policy.problems(knownFactors: [.passcode, .biometric]).isEmpty)
        let (evaluation, conversation) = rig.evaluate(policy, [.ok, .ok, .ok])
        #expect(evaluation.error == AuthenticationError(.invalidPolicy))
        #expect(!evaluation.succeeded)
        #expect(conversation.prompts.isEmpty)
        #expect(rig.context.canEvaluate(policy, for: rig.user) == AuthenticationError(.invalidPolicy))
    }

    @Test("problems name the place and the reason")
    func problemsAreSpecific() {
        let policy = Policy(
            name: "admin",
            rule: .anyOf([
                .factor(.passcode, attempts: 1),
                .atLeast(
                    2,
                    of: [
                        .factor(FactorKind(rawValue: "retina"), attempts: 1)
                    ]),
            ]))
        #expect(
            policy.problems(knownFactors: [.passcode]) == [
                "admin[2]: requires 2 factors but lists only 1",
                "admin[2][1]: no plugin provides the factor 'retina'",
            ])
    }

    @Test("malformed entries do not count as attempts, and are bounded")
    func malformedNotCounted() {
        let rig = Rig()
        let (evaluation, conversation) = rig.evaluate(
            Policy(name: "p", rule: .factor(.passcode, attempts: 3)),
            [.type("?"), .type("?"), .ok])
        #expect(evaluation.succeeded)
        #expect(conversation.messages.filter { $0 == .error("not a valid entry") }.count == 2)
        let (endless, more) = rig.evaluate(
            Policy(name: "p", rule: .factor(.passcode, attempts: 1)),
            Array(repeating: .type("?"), count: 10))
        #expect(endless.error == AuthenticationError(.authenticationFailed))
        #expect(more.prompts.count == 3)
        #expect(rig.failures(.passcode) == 0)
    }

    @Test("the evaluation records every step and never a typed secret")
    func evaluationRecord() {
        let rig = Rig()
        let (evaluation, _) = rig.evaluate(.biometricsOrPasscode, [.type("hunter2"), .fallback, .ok])
        #expect(
            evaluation.steps.map(\.description) == [
                "biometric#1:mismatch", "biometric#2:ended(userFallback)", "passcode#1:succeeded",
            ])
        #expect(evaluation.description.contains("outcome=success"))
        #expect(!evaluation.description.contains("hunter2"))
    }

    @Test("rule descriptions read as configuration")
    func descriptions() {
        #expect(Policy.biometricsOrPasscode.description == "biometrics-or-passcode: any-of(biometric×3, passcode×3)")
        #expect(
            Policy.Rule.allOf([.factor(gesture, attempts: 1), .factor(.passcode, attempts: 2)]).description
                == "all-of(gesture×1, passcode×2)")
        #expect(Policy.builtIn(named: "biometrics-only") == .biometricsOnly)
        #expect(Policy.builtIn(named: "nope") == nil)
    }
}
