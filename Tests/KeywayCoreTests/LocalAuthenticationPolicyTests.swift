import KeywayCore
import KeywayTestSupport
import Testing

/// The LocalAuthentication rules of docs/ARCHITECTURE.md §1, one test each.
@Suite("LocalAuthentication policy rules")
struct LocalAuthenticationPolicyTests {
    @Test("biometrics-only succeeds on a match")
    func biometricsOnlySucceeds() {
        let rig = Rig()
        let (evaluation, _) = rig.evaluate(.biometricsOnly, [.ok])
        #expect(evaluation.succeeded)
        #expect(evaluation.factorsUsed == [.biometric])
    }

    @Test("one evaluation gives up after 3 failed matches")
    func threeFailuresPerEvaluation() {
        let rig = Rig()
        let (evaluation, conversation) = rig.evaluate(.biometricsOnly, [.wrong(1), .wrong(2), .wrong(3), .ok])
        #expect(evaluation.error == AuthenticationError(.authenticationFailed))
        #expect(conversation.prompts.count == 3)
        #expect(conversation.remainingAnswers == 1)
        #expect(rig.failures(.biometric) == 3)
    }

    @Test("5 consecutive failures across evaluations lock biometrics, and the lock persists")
    func lockoutAcrossEvaluations() {
        let rig = Rig()
        _ = rig.evaluate(.biometricsOnly, [.wrong(1), .wrong(2), .wrong(3)])
        let (second, conversation) = rig.evaluate(.biometricsOnly, [.wrong(4), .wrong(5), .ok])
        #expect(second.error == AuthenticationError(.biometryLockout))
        // The failure that locks says so and ends: no third prompt whose touch would only be refused.
        #expect(conversation.prompts.count == 2)
        #expect(conversation.remainingAnswers == 1)
        #expect(rig.failures(.biometric) == 5)
        let (third, later) = rig.evaluate(.biometricsOnly, [.ok])
        #expect(third.error == AuthenticationError(.biometryLockout))
        #expect(later.prompts.isEmpty)
        #expect(rig.context.canEvaluate(.biometricsOnly, for: rig.user) == AuthenticationError(.biometryLockout))
        rig.clock.advance(by: .seconds(86_400 * 365))
        #expect(rig.context.canEvaluate(.biometricsOnly, for: rig.user) == AuthenticationError(.biometryLockout))
    }

    @Test("a biometric success resets the consecutive count")
    func successResets() {
        let rig = Rig()
        _ = rig.evaluate(.biometricsOnly, [.wrong(1), .wrong(2), .wrong(3)])
        let (evaluation, _) = rig.evaluate(.biometricsOnly, [.wrong(4), .ok])
        #expect(evaluation.succeeded)
        #expect(rig.failures(.biometric) == 0)
        let (next, _) = rig.evaluate(.biometricsOnly, [.wrong(5), .wrong(6), .wrong(7)])
        #expect(next.error == AuthenticationError(.authenticationFailed))  // 3, not 7: no lockout
    }

    @Test(
        "biometrics-only fails at once with the sensor's own code",
        arguments: [
            (Rig(biometricUnavailable: "unplugged"), AuthenticationError.Code.biometryNotAvailable),
            (Rig(enrollBiometric: false), .biometryNotEnrolled),
        ])
    func biometricsOnlyUnusable(rig: Rig, code: AuthenticationError.Code) {
        let (evaluation, conversation) = rig.evaluate(.biometricsOnly, [.ok])
        #expect(evaluation.error?.code == code)
        #expect(conversation.prompts.isEmpty)
        #expect(rig.context.canEvaluate(.biometricsOnly, for: rig.user)?.code == code)
    }

    @Test("biometrics-only: choosing the fallback returns userFallback")
    func biometricsOnlyFallback() {
        let rig = Rig(options: .init(fallbackLabel: "Enter password"))
        let (evaluation, conversation) = rig.evaluate(.biometricsOnly, [.fallback])
        #expect(evaluation.error == AuthenticationError(.userFallback))
        #expect(conversation.prompts.first?.fallbackLabel == "Enter password")
    }

    @Test(
        "biometrics-or-passcode: an unusable sensor goes straight to the passcode",
        arguments: [
            Rig(biometricUnavailable: "remote session"), Rig(enrollBiometric: false),
        ])
    func unusableSensorGoesToPasscode(rig: Rig) {
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.ok])
        #expect(evaluation.succeeded)
        #expect(conversation.prompts.map(\.text) == ["passcode: "])
        #expect(evaluation.factorsUsed == [.passcode])
    }

    @Test("biometrics-or-passcode: a locked sensor goes straight to the passcode, whose success clears the lock")
    func passcodeClearsLockout() {
        let rig = Rig()
        _ = rig.evaluate(.biometricsOnly, [.wrong(1), .wrong(2), .wrong(3)])
        _ = rig.evaluate(.biometricsOnly, [.wrong(4), .wrong(5)])
        #expect(rig.failures(.biometric) == 5)
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.ok])
        #expect(evaluation.succeeded)
        #expect(conversation.prompts.map(\.text) == ["passcode: "])
        #expect(conversation.messages.contains(.info(AuthenticationError.Code.biometryLockout.summary)))
        #expect(rig.failures(.biometric) == 0)
        let (after, _) = rig.evaluate(.biometricsOnly, [.ok])
        #expect(after.succeeded)
    }

    @Test("biometrics-or-passcode: failed matches and the fallback both lead to the passcode")
    func failureAndFallbackLeadToPasscode() {
        let rig = Rig()
        let (afterFailures, first) = rig.evaluate(.biometricsOrPasscode, [.wrong(1), .wrong(2), .wrong(3), .ok])
        #expect(afterFailures.succeeded)
        #expect(first.prompts.map(\.text) == ["biometric: ", "biometric: ", "biometric: ", "passcode: "])
        #expect(first.prompts.first?.fallbackLabel == "Use passcode")
        #expect(first.prompts.last?.fallbackLabel == nil)
        let (afterFallback, second) = rig.evaluate(.biometricsOrPasscode, [.fallback, .ok])
        #expect(afterFallback.succeeded)
        #expect(second.prompts.map(\.text) == ["biometric: ", "passcode: "])
    }

    @Test("biometrics-or-passcode: when the passcode fails too, the reason says both, in order")
    func bothFailuresReported() {
        let rig = Rig()
        let (evaluation, _) = rig.evaluate(
            .biometricsOrPasscode, [.wrong(1), .wrong(2), .wrong(3), .wrong(4), .wrong(5), .wrong(6)])
        #expect(evaluation.error == AuthenticationError(.authenticationFailed))
        #expect(
            evaluation.error?.reason == "3 failed biometric attempts; then 3 failed passcode attempts",
            "\(String(describing: evaluation.error))")
    }

    @Test("biometrics-or-passcode with no passcode and no usable sensor reports passcodeNotSet")
    func passcodeNotSet() {
        let rig = Rig(biometricUnavailable: "no sensor", enrollPasscode: false)
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.ok])
        #expect(evaluation.error == AuthenticationError(.passcodeNotSet))
        #expect(conversation.prompts.isEmpty)
    }

    @Test("failed matches, then a throttled passcode: the wait is what is reported")
    func throttledPasscodeWins() throws {
        let rig = Rig()
        for _ in 0..<5 { _ = try rig.passcode.gate.reserve(for: rig.user.name) }
        let (evaluation, _) = rig.evaluate(.biometricsOrPasscode, [.wrong(1), .wrong(2), .wrong(3)])
        #expect(evaluation.error == AuthenticationError(.throttled))
        #expect(evaluation.error?.retryAt != nil)
    }

    @Test("a cancel ends the evaluation: no fallback to the passcode")
    func cancelStops() {
        let rig = Rig()
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, [.cancel, .ok])
        #expect(evaluation.error == AuthenticationError(.userCancel))
        #expect(conversation.prompts.count == 1)
    }

    @Test("biometric type and domain state are reported through the context")
    func biometryTypeAndDomainState() throws {
        let rig = Rig()
        #expect(rig.context.biometryType(for: rig.user) == .fingerprint)
        #expect(try !rig.context.domainState(for: rig.user).isEmpty)
        #expect(Rig(enrollBiometric: false).context.biometryType(for: rig.user) == .none)
    }
}
