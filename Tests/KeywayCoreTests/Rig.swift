import KeywayCore
import KeywayTestSupport

/// A biometric and a passcode stand-in over a real in-memory store and attempt gates, with a manual clock.
struct Rig {
    let store = InMemoryStore()
    let clock = ManualClock()
    let biometric: ScriptedFactor
    let passcode: ScriptedFactor
    let context: EvaluationContext
    let user = UserContext(name: "alice", service: "test")

    init(
        biometricUnavailable: String? = nil, enrollBiometric: Bool = true, enrollPasscode: Bool = true,
        options: EvaluationContext.Options = .init(), extra: [FactorKind] = []
    ) {
        biometric = ScriptedFactor(
            .biometric, store: store, clock: clock, schedule: .biometric,
            biometry: .fingerprint, unavailableReason: biometricUnavailable, codes: .biometry)
        passcode = ScriptedFactor(
            .passcode, store: store, clock: clock, schedule: .passcode, clears: [.biometric], codes: .passcode)
        var registry = FactorRegistry([biometric, passcode])
        for kind in extra {
            let factor = ScriptedFactor(kind, store: store, clock: clock, schedule: ThrottleSchedule())
            try? factor.enroll(user.name)
            registry.register(factor)
        }
        context = EvaluationContext(registry: registry, options: options)
        if enrollBiometric { try? biometric.enroll(user.name) }
        if enrollPasscode { try? passcode.enroll(user.name) }
    }

    /// Evaluates `policy` with scripted answers; returns the evaluation and the conversation.
    func evaluate(_ policy: Policy, _ answers: [ScriptedConversation.Answer]) -> (Evaluation, ScriptedConversation) {
        let conversation = ScriptedConversation(answers)
        return (context.evaluate(policy, for: user, reason: "test", conversation: conversation), conversation)
    }

    func failures(_ factor: FactorKind) -> Int {
        (try? store.attempts(user: user.name)[factor].consecutiveFailures) ?? -1
    }
}

extension ScriptedConversation.Answer {
    static let ok = Self.type("ok")
    static func wrong(_ n: Int = 0) -> Self { .type("wrong-\(n)") }
}
