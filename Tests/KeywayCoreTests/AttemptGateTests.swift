import KeywayCore
import KeywayTestSupport
import Testing

@Suite("Attempts: reserved before verification, throttled, refunded for repeats")
struct AttemptGateTests {
    let store = InMemoryStore()
    let clock = ManualClock()

    func gate(
        _ schedule: ThrottleSchedule, factor: FactorKind = .passcode, clears: [FactorKind] = [],
        accountLimit: Int = ThrottleSchedule.accountLimit, codes: FactorCodes = FactorCodes()
    ) -> AttemptGate {
        AttemptGate(
            factor: factor, store: store, clock: clock, schedule: schedule, clears: clears,
            accountLimit: accountLimit, codes: codes)
    }

    @Test("a reserved attempt is counted before it is verified; a crash before settling leaves it counted")
    func reservedIsCounted() throws {
        let gate = gate(.passcode)
        _ = try gate.reserve(for: "bob")
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 1)
        #expect(try store.attempts(user: "bob")[.passcode].lastFailure == clock.now())
    }

    @Test(
        "the passcode ladder: 5 → 1 min, 6 → 5 min, 7–8 → 15 min, 9+ → 1 h",
        arguments: [
            (4, nil), (5, 60), (6, 300), (7, 900), (8, 900), (9, 3600), (50, 3600),
        ] as [(Int, Int64?)])
    func passcodeLadder(failures: Int, seconds: Int64?) {
        #expect(ThrottleSchedule.passcode.delay(afterFailures: failures) == seconds.map { .seconds($0) })
    }

    @Test(
        "the gesture ladder starts at 30 s after 5 failures and grows",
        arguments: [
            (4, nil), (5, 30), (9, 30), (10, 60), (15, 300), (20, 900), (30, 3600), (60, 14_400),
        ] as [(Int, Int64?)])
    func gestureLadder(failures: Int, seconds: Int64?) {
        #expect(ThrottleSchedule.gesture.delay(afterFailures: failures) == seconds.map { .seconds($0) })
    }

    @Test("a reservation inside the delay is refused with the time it ends; after it, allowed")
    func throttled() throws {
        let gate = gate(.passcode)
        for _ in 0..<5 { _ = try gate.reserve(for: "bob") }
        let start = clock.now()
        #expect(throws: AuthenticationError(.throttled)) { try gate.reserve(for: "bob") }
        do { _ = try gate.reserve(for: "bob") } catch { #expect(error.retryAt == start.adding(.seconds(60))) }
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 5)  // refusals are not counted
        clock.advance(by: .seconds(59))
        #expect(throws: AuthenticationError(.throttled)) { try gate.reserve(for: "bob") }
        clock.advance(by: .seconds(1))
        _ = try gate.reserve(for: "bob")
        #expect(throws: AuthenticationError(.throttled)) { try gate.reserve(for: "bob") }  // now 5 minutes
        clock.advance(by: .seconds(299))
        #expect(throws: AuthenticationError(.throttled)) { try gate.reserve(for: "bob") }
    }

    @Test("the biometric lock holds until a clearing factor succeeds")
    func biometricLockClearedByPasscode() throws {
        let sensor = gate(.biometric, factor: .biometric, codes: .biometry)
        let passcode = gate(.passcode, clears: [.biometric])
        for _ in 0..<5 { _ = try sensor.reserve(for: "bob") }
        #expect(throws: AuthenticationError(.biometryLockout)) { try sensor.reserve(for: "bob") }
        try passcode.settleSuccess(try passcode.reserve(for: "bob"))
        #expect(try store.attempts(user: "bob")[.biometric] == AttemptState())
        _ = try sensor.reserve(for: "bob")
    }

    @Test("100 consecutive failures over all factors lock the account until an administrator resets it")
    func accountLimit() throws {
        let a = gate(ThrottleSchedule(), factor: gesture)
        let b = gate(ThrottleSchedule())
        for _ in 0..<60 { _ = try a.reserve(for: "bob") }
        for _ in 0..<40 { _ = try b.reserve(for: "bob") }
        #expect(throws: AuthenticationError(.lockedOut)) { try a.reserve(for: "bob") }
        #expect(throws: AuthenticationError(.lockedOut)) { try b.reserve(for: "bob") }
        clock.advance(by: .seconds(86_400 * 30))
        #expect(throws: AuthenticationError(.lockedOut)) { try b.reserve(for: "bob") }
    }

    @Test("two successes in one millisecond are dated apart: a later success never equals the one before")
    func successesMoveForward() throws {
        let gate = gate(.passcode)
        try gate.settleSuccess(try gate.reserve(for: "bob"))
        let first = try #require(try store.attempts(user: "bob")[.passcode].lastSuccess)
        #expect(first == clock.now())
        try gate.settleSuccess(try gate.reserve(for: "bob"))  // the clock has not moved
        let second = try store.attempts(user: "bob")[.passcode].lastSuccess
        #expect(second == Timestamp(milliseconds: first.milliseconds + 1))
        clock.advance(by: .seconds(1))
        try gate.settleSuccess(try gate.reserve(for: "bob"))
        #expect(try store.attempts(user: "bob")[.passcode].lastSuccess == clock.now())
    }

    @Test("a success of any factor ends the account streak: the limit counts consecutive failures")
    func accountStreakEndsOnAnySuccess() throws {
        let a = gate(ThrottleSchedule(), factor: gesture)
        let b = gate(ThrottleSchedule())
        for _ in 0..<99 { _ = try a.reserve(for: "bob") }
        try b.settleSuccess(try b.reserve(for: "bob"))
        #expect(try store.attempts(user: "bob").accountStreak == 0)
        #expect(try store.attempts(user: "bob")[gesture].consecutiveFailures == 99)
        _ = try a.reserve(for: "bob")  // the 100th gesture failure in a row, but not of the account
    }

    @Test("the same wrong secret does not count twice; a different one does")
    func repeatedMismatchRefunded() throws {
        let gate = gate(.passcode)
        #expect(try gate.settleFailure(gate.reserve(for: "bob"), fingerprint: [1, 2]) == .mismatch)
        #expect(try gate.settleFailure(gate.reserve(for: "bob"), fingerprint: [1, 2]) == .repeatedMismatch)
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 1)
        #expect(try gate.settleFailure(gate.reserve(for: "bob"), fingerprint: [3]) == .mismatch)
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 2)
    }

    @Test("only the most recent wrong secrets are remembered")
    func rememberedMismatchesBounded() throws {
        let gate = gate(ThrottleSchedule())
        for n in 0..<(AttemptState.rememberedMismatches + 3) {
            _ = try gate.settleFailure(gate.reserve(for: "bob"), fingerprint: [UInt8(n)])
        }
        let state = try store.attempts(user: "bob")[.passcode]
        #expect(state.recentMismatches.count == AttemptState.rememberedMismatches)
        #expect(try gate.settleFailure(gate.reserve(for: "bob"), fingerprint: [0]) == .mismatch)  // forgotten
    }

    @Test("availability reflects the counters")
    func availability() throws {
        let gate = gate(.passcode)
        for _ in 0..<5 { _ = try gate.reserve(for: "bob") }
        #expect(
            gate.availability(for: "bob", whenAllowed: .available)
                == .lockedOut(until: clock.now().adding(.seconds(60)), reason: "too many failed attempts"))
        #expect(gate.availability(for: "carol", whenAllowed: .available) == .available)
    }
}

@Suite("Secret, Timestamp")
struct ValueTests {
    @Test("a secret never prints its bytes")
    func secretRedacted() {
        let secret = Secret(copying: Array("hunter2".utf8))
        #expect("\(secret)" == "Secret(redacted)")
        #expect(String(reflecting: secret) == "Secret(redacted)")
        #expect(!"\([secret])".contains("hunter2"))
    }

    @Test("secrets compare by content, including length")
    func secretEquality() {
        #expect(Secret(copying: [1, 2, 3]) == Secret(copying: [1, 2, 3]))
        #expect(Secret(copying: [1, 2, 3]) != Secret(copying: [1, 2, 4]))
        #expect(Secret(copying: [1, 2, 3]) != Secret(copying: [1, 2]))
        #expect(Secret(copying: []) == Secret(copying: []))
    }

    @Test("a secret copies contiguous and non-contiguous bytes alike")
    func secretCopies() {
        let bytes: [UInt8] = Array("2-4-9-3".utf8)
        let expected = Secret(copying: bytes)
        #expect(Secret(copying: bytes[...]) == expected)
        #expect(Secret(copying: bytes.lazy.map { $0 }) == expected)  // no contiguous storage: the byte loop
        #expect(Secret(copying: bytes.withUnsafeBytes { Array($0) }) == expected)
        #expect(Secret(copying: [0] + bytes + [0]).count == bytes.count + 2)
    }

    @Test("secureZero wipes a buffer")
    func wipe() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 1)
        defer { buffer.deallocate() }
        buffer.copyBytes(from: Array(repeating: 0xAB as UInt8, count: 16))
        secureZero(buffer)
        #expect(buffer.allSatisfy { $0 == 0 })
    }

    @Test(
        "timestamps print as UTC ISO 8601",
        arguments: [
            (0, "1970-01-01T00:00:00Z"), (1_767_225_600, "2026-01-01T00:00:00Z"), (951_782_400, "2000-02-29T00:00:00Z"),
            (1_798_761_599, "2026-12-31T23:59:59Z"), (-1, "1969-12-31T23:59:59Z"),
        ] as [(Int64, String)])
    func timestampDescription(seconds: Int64, text: String) {
        #expect(Timestamp(seconds: seconds).description == text)
    }

    @Test(
        "durations read aloud",
        arguments: [
            (30, "30 seconds"), (60, "1 minute"), (300, "5 minutes"), (3600, "1 hour"), (1, "1 second"),
        ] as [(Int64, String)])
    func spokenDuration(seconds: Int64, text: String) {
        #expect(Duration.seconds(seconds).spokenDescription == text)
    }
}
