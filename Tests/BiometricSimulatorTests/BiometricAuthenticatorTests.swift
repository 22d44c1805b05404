import KeywayBiometric
import KeywayCore
import KeywayCrypto
import KeywayPasscode
import KeywayPlatform
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayBiometricSimulator

/// A simulated fingerprint sensor and a real passcode over one in-memory store.
struct SensorRig {
    let store = InMemoryStore()
    let clock = ManualClock()
    let events = ScriptedSensorEvents()
    let sensor: SimulatedSensor
    let biometric: BiometricAuthenticator
    let passcode: PasscodeAuthenticator
    let context: EvaluationContext
    let alice = UserContext(name: "alice")

    init(_ configuration: SimulatedSensor.Configuration = .init(), events source: (any SensorEventSource)? = nil)
        throws
    {
        sensor = SimulatedSensor(configuration, events: source ?? events)
        let states = Mutex(0)  // predictable, distinct domain states
        biometric = BiometricAuthenticator(
            store: store, clock: clock, sensor: sensor,
            newDomainState: {
                states.withLock {
                    $0 += 1; return Array(repeating: UInt8(truncatingIfNeeded: $0), count: 16)
                }
            })
        passcode = PasscodeAuthenticator(store: store, clock: clock, hasher: try Argon2idHasher(cost: .minimum))
        context = EvaluationContext(registry: FactorRegistry([biometric, passcode]))
    }

    /// Enrolls alice's right index finger from genuine touches, and the passcode 739155.
    func enrollAlice(passcode code: Bool = true) throws {
        for _ in 0..<sensor.configuration.model.enrollmentSamples {
            events.push(.present(user: "alice", finger: "right-index"))
        }
        _ = try biometric.enroll(user: "alice", finger: "right-index", by: "test", conversation: ScriptedConversation())
        if code {
            _ = try passcode.enroll(
                user: "alice", by: "test", conversation: ScriptedConversation(typing: "739155", "739155"))
        }
    }

    func attempt(_ event: SensorEvent?, as user: UserContext? = nil) -> Result<Verdict, AuthenticationError> {
        if let event { events.push(event) }
        return Result { () throws(AuthenticationError) in
            try biometric.authenticate(AuthenticationRequest(user: user ?? alice), conversation: ScriptedConversation())
        }
    }

    func evaluate(_ policy: Policy, typing: [ScriptedConversation.Answer] = []) -> (Evaluation, ScriptedConversation) {
        let conversation = ScriptedConversation(typing)
        return (context.evaluate(policy, for: alice, reason: "test", conversation: conversation), conversation)
    }

    var failures: Int { (try? store.attempts(user: "alice")[.biometric].consecutiveFailures) ?? -1 }
}

@Suite("Biometric simulator factor")
struct BiometricAuthenticatorTests {
    @Test("passes the authenticator conformance checks")
    func conformance() throws {
        let rig = try SensorRig()
        let problems = AuthenticatorConformance.check(
            .init(
                plugin: rig.biometric, store: rig.store,
                enroll: { user in
                    _ = try rig.passcode.enroll(
                        user: user, by: "t", conversation: ScriptedConversation(typing: "739155", "739155"))
                    for _ in 0..<5 { rig.events.push(.present(user: user, finger: "thumb")) }
                    _ = try rig.biometric.enroll(
                        user: user, finger: "thumb", by: "t", conversation: ScriptedConversation())
                },
                arrange: { scenario in
                    switch scenario {
                    case .correct: rig.events.push(.present(user: "conformance-user", finger: "thumb"))
                    case .wrong: rig.events.push(.presentStranger)
                    case .cancel: rig.events.push(.cancel)
                    }
                    return ScriptedConversation()
                }))
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a genuine touch matches; another person's enrolled finger does not, and is counted")
    func genuineAndImpostor() throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        #expect(rig.attempt(.present(user: "alice", finger: "right-index")) == .success(.success))
        #expect(rig.attempt(.present(user: "bob", finger: "right-index")) == .success(.failure(.mismatch)))
        #expect(rig.attempt(.present(user: "alice", finger: "left-index")) == .success(.failure(.mismatch)))
        #expect(rig.failures == 2)
    }

    @Test("as LocalAuthentication: biometrics without a passcode report passcodeNotSet, and cannot be used")
    func passcodeRequired() throws {
        let rig = try SensorRig()
        try rig.enrollAlice(passcode: false)
        #expect(
            rig.biometric.availability(for: rig.alice).error(for: .biometric, codes: rig.biometric.codes)
                == AuthenticationError(.passcodeNotSet))
        #expect(rig.context.canEvaluate(.biometricsOnly, for: rig.alice) == AuthenticationError(.passcodeNotSet))
        #expect(
            rig.attempt(.present(user: "alice", finger: "right-index")).map { _ in 0 }
                == .failure(AuthenticationError(.passcodeNotSet)))
    }

    @Test("the person is told what to do: finger or face")
    func instruction() throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        let conversation = ScriptedConversation()
        rig.events.push(.present(user: "alice", finger: "right-index"))
        _ = try rig.biometric.authenticate(AuthenticationRequest(user: rig.alice), conversation: conversation)
        #expect(conversation.messages.first == .instruction("Place your finger on the sensor."))
        let face = try SensorRig(.init(biometry: .face))
        #expect(face.biometric.instruction == "Look at the camera.")
    }

    @Test("availability: no sensor, unplugged, remote session, not enrolled, locked")
    func availability() throws {
        let none = try SensorRig(.init(biometry: .none))
        #expect(none.biometric.availability(for: none.alice) == .notAvailable("no biometric sensor is fitted"))
        let rig = try SensorRig()
        #expect(rig.biometric.availability(for: rig.alice) == .notEnrolled)
        try rig.enrollAlice()
        #expect(rig.biometric.availability(for: rig.alice) == .available(.fingerprint))
        #expect(
            rig.biometric.availability(for: UserContext(name: "alice", isRemote: true))
                == .notAvailable("the sensor is local and this session is remote"))
        rig.sensor.isPluggedIn = false
        #expect(rig.biometric.availability(for: rig.alice) == .notAvailable("the sensor is unplugged"))
        rig.sensor.isPluggedIn = true
        for _ in 0..<5 { _ = rig.attempt(.presentStranger) }
        guard case .lockedOut(nil, _) = rig.biometric.availability(for: rig.alice) else {
            Issue.record("5 failures must lock the sensor")
            return
        }
    }

    @Test(
        "sensor events end an attempt with their own outcome",
        arguments: [
            (SensorEvent.cancel, AuthenticationError.Code.userCancel), (.fallback, .userFallback),
            (.unplug, .biometryNotAvailable), (.failure("firmware crashed"), .biometryNotAvailable),
        ])
    func eventsEndAttempt(event: SensorEvent, code: AuthenticationError.Code) throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        #expect(rig.attempt(event).map { _ in 0 } == .failure(AuthenticationError(code)))
        #expect(rig.failures == 0)
    }

    @Test("nothing presented before the timeout ends the attempt with .timeout, uncounted")
    func timeout() throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        guard case .failure(let error) = rig.attempt(nil) else {
            Issue.record("expected a timeout")
            return
        }
        #expect(error.code == .timeout)
        #expect(error.reason.contains("30 seconds"))
        #expect(rig.failures == 0)
    }

    @Test("a failure to acquire is not a failed match")
    func failureToAcquire() throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        #expect(
            rig.attempt(.retry("Finger moved too fast.")) == .success(.failure(.noSample("Finger moved too fast."))))
        #expect(rig.failures == 0)
    }

    @Test(
        "biometrics-or-passcode: timeout, unplug and an unplugged sensor all lead to the passcode",
        arguments: [
            [SensorEvent](), [.unplug], [.failure("io error")],
        ])
    func fallsBackToPasscode(events: [SensorEvent]) throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        for event in events { rig.events.push(event) }
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, typing: [.type("739155")])
        #expect(evaluation.succeeded)
        #expect(evaluation.factorsUsed == [.biometric, .passcode])
        #expect(conversation.prompts.map(\.text) == ["Passcode: "])
    }

    @Test("5 impostor touches lock biometrics across evaluations; the passcode unlocks them")
    func lockoutAndPasscodeUnlock() throws {
        let rig = try SensorRig()
        try rig.enrollAlice()
        for _ in 0..<3 { rig.events.push(.presentStranger) }
        #expect(rig.evaluate(.biometricsOnly).0.error == AuthenticationError(.authenticationFailed))
        for _ in 0..<3 { rig.events.push(.presentStranger) }
        #expect(rig.evaluate(.biometricsOnly).0.error == AuthenticationError(.biometryLockout))
        #expect(rig.events.pending.count == 1)  // the 5th failure locked: nobody waited for the 6th touch
        #expect(rig.failures == 5)
        rig.events.push(.present(user: "alice", finger: "right-index"))
        #expect(rig.evaluate(.biometricsOnly).0.error == AuthenticationError(.biometryLockout))
        let (unlock, conversation) = rig.evaluate(.biometricsOrPasscode, typing: [.type("739155")])
        #expect(unlock.succeeded)
        #expect(conversation.prompts.map(\.text) == ["Passcode: "])
        #expect(rig.failures == 0)
    }

    @Test("invalidating the context while the sensor waits ends the evaluation with appCancel")
    func invalidateWhileWaiting() throws {
        final class Invalidating: SensorEventSource {
            let context = Mutex<EvaluationContext?>(nil)
            func next(timeout: Duration, cancellation: CancellationFlag) -> SensorEvent? {
                context.withLock { $0 }?.invalidate()
                return cancellation.isCancelled ? nil : .present(user: "alice", finger: "right-index")
            }
        }
        let source = Invalidating()
        let rig = try SensorRig(events: source)
        _ = try rig.passcode.enroll(
            user: "alice", by: "t", conversation: ScriptedConversation(typing: "739155", "739155"))
        let template = try rig.sensor.configuration.model.enroll([
            rig.sensor.sample(of: .present(user: "alice", finger: "right-index"))!
        ])
        try rig.store.save(
            Enrollment(
                user: "alice", factor: .biometric,
                payload: BiometricEnrollment(
                    templates: [("right-index", template.encoded())],
                    domainState: Array(repeating: 1, count: 16)
                ).encoded(),
                changedAt: rig.clock.now(), changedBy: "t"))
        source.context.withLock { $0 = rig.context }
        let (evaluation, conversation) = rig.evaluate(.biometricsOrPasscode, typing: [.type("739155")])
        #expect(evaluation.error == AuthenticationError(.appCancel))
        #expect(conversation.prompts.isEmpty)
    }

    @Test("domain state: empty with nothing enrolled, new on every change, add-then-remove included")
    func domainState() throws {
        let rig = try SensorRig()
        #expect(try rig.context.domainState(for: rig.alice) == [])
        try rig.enrollAlice(passcode: false)
        let first = try rig.context.domainState(for: rig.alice)
        #expect(first.count == 16)
        for _ in 0..<5 { rig.events.push(.present(user: "alice", finger: "thumb")) }
        _ = try rig.biometric.enroll(user: "alice", finger: "thumb", by: "t", conversation: ScriptedConversation())
        let second = try rig.context.domainState(for: rig.alice)
        try rig.biometric.remove(user: "alice", finger: "thumb", by: "t")
        let third = try rig.context.domainState(for: rig.alice)
        #expect(Set([first, second, third]).count == 3)
        #expect(try rig.biometric.fingers(of: "alice") == ["right-index"])
        try rig.biometric.remove(user: "alice", finger: "right-index", by: "t")
        #expect(try rig.context.domainState(for: rig.alice) == [])
        #expect(rig.biometric.availability(for: rig.alice) == .notEnrolled)
    }

    @Test("the real system-random domain state differs between enrollments")
    func systemRandomDomainState() throws {
        let store = InMemoryStore()
        let events = ScriptedSensorEvents()
        let plugin = BiometricAuthenticator(store: store, clock: ManualClock(), sensor: SimulatedSensor(events: events))
        for _ in 0..<10 { events.push(.present(user: "u", finger: "a")) }
        _ = try plugin.enroll(user: "u", finger: "a", by: "t", conversation: ScriptedConversation())
        let first = try plugin.domainState(for: "u")
        _ = try plugin.enroll(user: "u", finger: "a", by: "t", conversation: ScriptedConversation())
        #expect(try plugin.domainState(for: "u") != first)
    }

    @Test("enrollment takes the model's number of touches, shows progress, and skips unusable samples")
    func enrollmentProgress() throws {
        let rig = try SensorRig()
        rig.events.push(.present(user: "alice", finger: "f"), .retry("Finger too dry."))
        for _ in 0..<4 { rig.events.push(.present(user: "alice", finger: "f")) }
        let conversation = ScriptedConversation()
        _ = try rig.biometric.enroll(user: "alice", finger: "f", by: "t", conversation: conversation)
        #expect(
            conversation.messages.filter { $0.kind == .info }.map(\.text).last
                == "Place your finger on the sensor. (5 of 5)")
        #expect(conversation.messages.contains(.error("Finger too dry.")))
        _ = try rig.passcode.enroll(
            user: "alice", by: "t", conversation: ScriptedConversation(typing: "739155", "739155"))
        #expect(rig.attempt(.present(user: "alice", finger: "f")) == .success(.success))
    }

    @Test("a cancelled or timed-out enrollment leaves the previous enrollment untouched")
    func enrollmentCancelled() throws {
        let rig = try SensorRig()
        try rig.enrollAlice(passcode: false)
        let before = try rig.store.enrollment(user: "alice", factor: .biometric)
        rig.events.push(.present(user: "alice", finger: "thumb"), .cancel)
        #expect(throws: AuthenticationError(.userCancel)) {
            try rig.biometric.enroll(user: "alice", finger: "thumb", by: "t", conversation: ScriptedConversation())
        }
        #expect(throws: AuthenticationError(.timeout)) {
            try rig.biometric.enroll(user: "alice", finger: "thumb", by: "t", conversation: ScriptedConversation())
        }
        #expect(try rig.store.enrollment(user: "alice", factor: .biometric) == before)
    }

    @Test(
        "a damaged stored enrollment is a store failure and makes the sensor unavailable, never a match",
        arguments: [
            [UInt8](), Array("KWB1".utf8), Array("KWB2".utf8) + Array(repeating: 0, count: 17),
            Array("KWB1".utf8) + Array(repeating: 0, count: 16) + [1, 1, 65, 255, 255, 255, 255],
        ])
    func damagedPayload(payload: [UInt8]) throws {
        let rig = try SensorRig()
        try rig.store.save(
            Enrollment(
                user: "alice", factor: .biometric, payload: payload, changedAt: rig.clock.now(),
                changedBy: "t"))
        guard case .failed(let error) = rig.biometric.availability(for: rig.alice) else {
            Issue.record("a damaged enrollment must not be available")
            return
        }
        #expect(error.code == .storeFailure)
        #expect(error.reason.contains("damaged"))
        #expect(
            rig.attempt(.present(user: "alice", finger: "right-index")).map { _ in 0 }
                == .failure(AuthenticationError(.storeFailure)))
    }

    @Test("enrollment payloads round-trip")
    func payloadRoundTrip() throws {
        let rig = try SensorRig()
        try rig.enrollAlice(passcode: false)
        let keeper = BiometricKeeper(store: rig.store, clock: rig.clock)
        let stored = try #require(try keeper.load("alice"))
        #expect(try BiometricEnrollment(decoding: stored.encoded()) == stored)
    }
}
