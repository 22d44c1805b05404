import KeywayCore
import KeywayTestSupport
import Synchronization
import Testing

/// A store whose reservations reach the disk when the test says, and fail to when it says: the order of events and
/// the failure a real disk gives too rarely to test (an I/O error on fdatasync). Everything else is InMemoryStore's.
private final class DiskOrderStore: Store {
    let base = InMemoryStore()
    let events = Mutex<[String]>([])
    let diskFails: Bool

    init(diskFails: Bool = false) { self.diskFails = diskFails }

    final class Write: DiskWrite {
        let store: DiskOrderStore
        init(_ store: DiskOrderStore) { self.store = store }
        func wait() throws(AuthenticationError) {
            store.events.withLock { $0.append("on disk") }
            if store.diskFails { throw AuthenticationError(.storeFailure, "an I/O error occurred") }
        }
    }

    func updateAttemptsWritingInBackground(user: String, _ body: (inout AttemptBook) -> Void)
        throws(AuthenticationError) -> any DiskWrite
    {
        try base.updateAttempts(user: user, durable: false, body)
        events.withLock { $0.append("reserved") }
        return Write(self)
    }

    func updateAttempts(user: String, durable: Bool, _ body: (inout AttemptBook) -> Void) throws(AuthenticationError) {
        events.withLock { $0.append("settled") }
        try base.updateAttempts(user: user, durable: durable, body)
    }

    func reserveOneTimeCode(user: String, factor: FactorKind, code: [UInt8], remote: Bool)
        throws(AuthenticationError)
    { try base.reserveOneTimeCode(user: user, factor: factor, code: code, remote: remote) }
    func checkOneTimeCode(
        user: String, factor: FactorKind, code: [UInt8], window: Int64, remote: Bool, at now: Timestamp
    ) throws(AuthenticationError) -> OneTimeCodeCheck? {
        try base.checkOneTimeCode(user: user, factor: factor, code: code, window: window, remote: remote, at: now)
    }
    func enrollment(user: String, factor: FactorKind) throws(AuthenticationError) -> Enrollment? {
        try base.enrollment(user: user, factor: factor)
    }
    func enrollments(user: String) throws(AuthenticationError) -> [Enrollment] { try base.enrollments(user: user) }
    func enrollments(of factor: FactorKind) throws(AuthenticationError) -> [Enrollment] {
        try base.enrollments(of: factor)
    }
    func save(_ enrollment: Enrollment) throws(AuthenticationError) { try base.save(enrollment) }
    func replace(_ current: Enrollment, with new: Enrollment, recording entry: AuditEntry)
        throws(AuthenticationError) -> Bool
    {
        try base.replace(current, with: new, recording: entry)
    }
    func removeEnrollment(user: String, factor: FactorKind, by change: Attribution) throws(AuthenticationError) -> Bool
    {
        try base.removeEnrollment(user: user, factor: factor, by: change)
    }
    func attempts(user: String) throws(AuthenticationError) -> AttemptBook { try base.attempts(user: user) }
    func resetAttempts(user: String, factor: FactorKind?, by change: Attribution) throws(AuthenticationError) {
        try base.resetAttempts(user: user, factor: factor, by: change)
    }
    func pruneCounters(ofUnenrolledKeeping limit: Int) throws(AuthenticationError) -> Int {
        try base.pruneCounters(ofUnenrolledKeeping: limit)
    }
    func failingAccounts(atLeast least: Int, limit: Int) throws(AuthenticationError) -> [String] {
        try base.failingAccounts(atLeast: least, limit: limit)
    }
    func users() throws(AuthenticationError) -> [String] { try base.users() }
    func auditTrail(user: String?) throws(AuthenticationError) -> [AuditEntry] { try base.auditTrail(user: user) }
    func preferences(user: String) throws(AuthenticationError) -> [String: String] {
        try base.preferences(user: user)
    }
    func pruneAudit(keeping limit: Int, routinePerHost: Int) throws(AuthenticationError) -> Int {
        try base.pruneAudit(keeping: limit, routinePerHost: routinePerHost)
    }
    func setPreference(user: String, key: String, value: String?, by change: Attribution) throws(AuthenticationError) {
        try base.setPreference(user: user, key: key, value: value, by: change)
    }
}

@Suite("A reserved attempt reaches the disk before any verdict")
struct DiskWriteTests {
    private func gate(_ store: DiskOrderStore) -> AttemptGate {
        AttemptGate(factor: .passcode, store: store, clock: ManualClock(), schedule: .passcode)
    }

    @Test("every settle waits for the reservation's disk write before it records or returns anything")
    func settleWaits() throws {
        let store = DiskOrderStore()
        let gate = gate(store)
        try gate.settleSuccess(try gate.reserve(for: "bob"))
        _ = try gate.settleFailure(try gate.reserve(for: "bob"), fingerprint: [1, 2, 3])
        try gate.settleSuccess(try gate.reserve(for: "bob"))
        #expect(
            store.events.withLock { $0 }
                == Array(repeating: ["reserved", "on disk", "settled"], count: 3).flatMap { $0 })
    }

    @Test("a reservation that cannot reach the disk gives no verdict and stays counted", arguments: [true, false])
    func failedWriteFailsClosed(succeeded: Bool) throws {
        let store = DiskOrderStore(diskFails: true)
        let gate = gate(store)
        let reservation = try gate.reserve(for: "bob")
        #expect(throws: AuthenticationError(.storeFailure)) {
            if succeeded {
                try gate.settleSuccess(reservation)
            } else {
                _ = try gate.settleFailure(reservation, fingerprint: nil)
            }
        }
        #expect(!store.events.withLock { $0 }.contains("settled"))
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 1)
    }

    @Test("a store without a background write (the default) is on disk when reserve returns")
    func defaultIsDurable() throws {
        let store = InMemoryStore()
        let gate = AttemptGate(factor: .passcode, store: store, clock: ManualClock(), schedule: .passcode)
        let reservation = try gate.reserve(for: "bob")
        try reservation.confirm()
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 1)
    }
}
