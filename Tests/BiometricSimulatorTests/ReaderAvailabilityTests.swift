import KeywayBiometric
import KeywayCore
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayBiometricSimulator

/// A reader that keeps its own prints (fprintd's shape), counting how often it is asked for a user's fingers.
final class CountingReader: DeviceBackend {
    let state = Mutex((fingers: ["right-index-finger"], reachable: true, asked: 0))
    var name: String { "counting reader" }

    func labels(of user: String) throws(AuthenticationError) -> [String] {
        let (fingers, reachable) = state.withLock { state in
            state.asked += 1
            return (state.fingers, state.reachable)
        }
        guard reachable else { throw AuthenticationError(.biometryNotAvailable, "the reader is unplugged") }
        return fingers
    }

    func listener(_ side: FactorPlugin.DeviceSide) -> any DeviceListener { EndedListener() }

    func enroll(_ side: FactorPlugin.DeviceSide, label: String, progress: (String) -> Void, cancelled: () -> Bool)
        throws(AuthenticationError) -> [UInt8]
    {
        state.withLock { $0.fingers.append(label) }
        return []
    }

    var asked: Int { state.withLock { $0.asked } }
}

/// A device that is gone as soon as it is held.
final class EndedListener: DeviceListener {
    func hold() throws(DeviceHoldFailure) {
        throw .unavailable(AuthenticationError(.biometryNotAvailable, "unplugged"))
    }
    func next(cancellation: CancellationFlag) -> DeviceEvent? { nil }
    func handled() {}
    func release() {}
}

/// With a reader, the availability before a prompt asks it once: its list brings the record up to date and its
/// answer says whether it can serve (it was asked twice, each time on a new connection to fprintd).
@Suite("the biometric's availability at a reader")
struct ReaderAvailabilityTests {
    let store = InMemoryStore()
    let clock = ManualClock()
    let reader = CountingReader()

    func vault() throws -> (LocalVault, BiometricKeeper) {
        let keeper = BiometricKeeper(store: store, clock: clock, reader: reader)
        // Biometrics need a passcode: a record of one is enough for availability.
        try store.save(
            Enrollment(user: "alice", factor: .passcode, payload: [1], changedAt: clock.now(), changedBy: "t"))
        return (LocalVault(store: store, clock: clock, keepers: [keeper]), keeper)
    }

    @Test("reachable: asked once, the record mirrors the reader's list, available")
    func reachable() throws {
        let (vault, _) = try vault()
        let answer = vault.availability(of: .biometric, for: UserContext(name: "alice"))
        #expect(answer == .available(.fingerprint), "\(answer)")
        #expect(reader.asked == 1)
        #expect(try store.enrollment(user: "alice", factor: .biometric) != nil)
    }

    @Test("unplugged after enrollment: asked once, not available with the reader's reason, the record kept")
    func unreachable() throws {
        let (vault, _) = try vault()
        _ = vault.availability(of: .biometric, for: UserContext(name: "alice"))
        reader.state.withLock { $0.reachable = false }
        let answer = vault.availability(of: .biometric, for: UserContext(name: "alice"))
        #expect(answer == .notAvailable("the reader is unplugged"), "\(answer)")
        #expect(reader.asked == 2)
        #expect(try store.enrollment(user: "alice", factor: .biometric) != nil)
    }

    @Test("nothing at the reader: asked once, not enrolled, and no record")
    func nothingEnrolled() throws {
        let (vault, _) = try vault()
        reader.state.withLock { $0.fingers = [] }
        #expect(vault.availability(of: .biometric, for: UserContext(name: "alice")) == .notEnrolled)
        #expect(reader.asked == 1)
        #expect(try store.enrollment(user: "alice", factor: .biometric) == nil)
    }

    @Test("the status path, which reads every user's records once, still asks the reader whether it can serve")
    func status() throws {
        let (vault, keeper) = try vault()
        _ = vault.availability(of: .biometric, for: UserContext(name: "alice"))
        reader.state.withLock { $0.reachable = false }
        let records = try store.enrollments(user: "alice")
        let answer = keeper.availability(
            for: UserContext(name: "alice"), records: records, book: try store.attempts(user: "alice"))
        #expect(answer == .notAvailable("the reader is unplugged"), "\(answer)")
    }
}
