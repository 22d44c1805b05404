import KeywayCore
import KeywayTestSupport
import Testing

@Suite("EvaluationContext: invalidate, not interactive, labels")
struct EvaluationContextTests {
    @Test("invalidate() during an evaluation ends it with appCancel, even if the factor then succeeds")
    func invalidateInFlight() {
        let rig = Rig()
        let conversation = ScriptedConversation([.ok])
        let context = rig.context
        conversation.onAsk { _ in context.invalidate() }
        let evaluation = context.evaluate(.biometricsOrPasscode, for: rig.user, reason: "r", conversation: conversation)
        #expect(evaluation.error == AuthenticationError(.appCancel))
        #expect(!evaluation.succeeded)
    }

    @Test("after invalidate(), every use fails with invalidContext")
    func invalidatedContext() {
        let rig = Rig()
        rig.context.invalidate()
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.ok])
        #expect(evaluation.error == AuthenticationError(.invalidContext))
        #expect(conversation.prompts.isEmpty)
        #expect(rig.context.canEvaluate(.biometricsOnly, for: rig.user) == AuthenticationError(.invalidContext))
    }

    @Test("a context is reusable across evaluations")
    func reusable() {
        let rig = Rig()
        #expect(rig.evaluate(.biometricsOnly, [.ok]).0.succeeded)
        #expect(rig.evaluate(.biometricsOrPasscode, [.fallback, .ok]).0.succeeded)
    }

    @Test("interactionNotAllowed fails instead of prompting; unusable factors keep their own codes")
    func notInteractive() {
        let rig = Rig(options: .init(interactionNotAllowed: true))
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.ok])
        #expect(evaluation.error == AuthenticationError(.notInteractive))
        #expect(conversation.prompts.isEmpty)
        let unenrolled = Rig(enrollBiometric: false, options: .init(interactionNotAllowed: true))
        #expect(unenrolled.evaluate(.biometricsOnly, []).0.error == AuthenticationError(.biometryNotEnrolled))
    }

    @Test("an empty fallback label offers no fallback; a custom one is used")
    func labels() {
        let hidden = Rig(options: .init(fallbackLabel: ""))
        let (_, first) = hidden.evaluate(.biometricsOrPasscode, [.ok])
        #expect(first.prompts.first?.fallbackLabel == nil)
        let custom = Rig(options: .init(fallbackLabel: "Type your PIN"))
        let (_, second) = custom.evaluate(.biometricsOrPasscode, [.ok])
        #expect(second.prompts.first?.fallbackLabel == "Type your PIN")
        let plain = Rig()
        let (_, third) = plain.evaluate(.biometricsOnly, [.ok])
        #expect(third.prompts.first?.fallbackLabel == nil)
    }

    @Test(
        "a prompt offers its fallback in its own text, for channels with only a line to type on",
        arguments: [
            (
                Prompt("Pattern (dots 1-9): ", fallbackLabel: "Use passcode"),
                "Pattern (dots 1-9; Enter: use passcode): "
            ),
            (Prompt("Passcode: ", fallbackLabel: "Use password"), "Passcode (Enter: use password): "),
            (Prompt("Pattern: "), "Pattern: "),
        ])
    func promptText(prompt: Prompt, text: String) {
        #expect(prompt.textWithFallback == text)
    }

    @Test("a conversation failure stops the evaluation and fails")
    func conversationFailure() {
        let rig = Rig()
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.channelFailure, .ok])
        #expect(evaluation.error == AuthenticationError(.conversationFailure))
        #expect(conversation.prompts.count == 1)
    }

    @Test("canEvaluate answers without prompting")
    func canEvaluate() {
        let rig = Rig()
        #expect(rig.context.canEvaluate(.biometricsOrPasscode, for: rig.user) == nil)
        let bare = Rig(enrollBiometric: false, enrollPasscode: false)
        #expect(bare.context.canEvaluate(.biometricsOrPasscode, for: bare.user) == AuthenticationError(.passcodeNotSet))
        #expect(bare.context.canEvaluate(.biometricsOnly, for: bare.user) == AuthenticationError(.biometryNotEnrolled))
    }
}
