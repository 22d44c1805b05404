import KeywayCore
import KeywayTestSupport
import Testing

/// Evidence that may be used once (a one-time code): the gate accepts a moment once, atomically, and keeps it
/// through a reset.
@Suite("one-time evidence in the attempt gate")
struct OneTimeEvidenceTests {
    let store = InMemoryStore()
    let clock = ManualClock()
    var gate: AttemptGate {
        AttemptGate(factor: FactorKind(rawValue: "otp"), store: store, clock: clock, schedule: .passcode)
    }

    @Test("a moment succeeds once; the same or an earlier one is a replay and stays counted")
    func once() throws {
        let step = Timestamp(milliseconds: 1_800_000_030_000)
        #expect(try gate.settleSuccess(try gate.reserve(for: "bob"), once: step))
        #expect(try store.attempts(user: "bob")[gate.factor].consecutiveFailures == 0)
        #expect(try !gate.settleSuccess(try gate.reserve(for: "bob"), once: step))
        #expect(try !gate.settleSuccess(try gate.reserve(for: "bob"), once: Timestamp(milliseconds: 1_800_000_000_000)))
        #expect(try store.attempts(user: "bob")[gate.factor].consecutiveFailures == 2)
        #expect(try gate.settleSuccess(try gate.reserve(for: "bob"), once: Timestamp(milliseconds: 1_800_000_060_000)))
        #expect(try store.attempts(user: "bob")[gate.factor].consecutiveFailures == 0)
    }

    @Test("a new secret's record starts at its confirming moment: that moment is spent, a reset keeps it so")
    func restartAndReset() throws {
        let step = Timestamp(milliseconds: 1_800_000_030_000)
        #expect(try gate.settleSuccess(try gate.reserve(for: "bob"), once: step.adding(.seconds(60))))
        try gate.restart(step, for: "bob")  // a new secret, confirmed with the code of `step`
        try store.resetAttempts(user: "bob", factor: nil, by: Attribution("root", at: clock.now()))
        #expect(try !gate.settleSuccess(try gate.reserve(for: "bob"), once: step))
        #expect(try gate.settleSuccess(try gate.reserve(for: "bob"), once: step.adding(.seconds(30))))
    }

    @Test("of many parallel successes with one moment, exactly one wins")
    func parallel() async throws {
        let gate = self.gate
        let step = Timestamp(milliseconds: 1_800_000_090_000)
        let wins = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<32 {
                group.addTask { (try? gate.settleSuccess(try gate.reserve(for: "carol"), once: step)) ?? false }
            }
            var count = 0
            for await won in group where won { count += 1 }
            return count
        }
        #expect(wins == 1)
    }
}
