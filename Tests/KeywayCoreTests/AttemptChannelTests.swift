import KeywayCore
import KeywayTestSupport
import Testing

/// Remote and local sessions count apart (`AttemptBook.Channel`): guesses over the network throttle and lock only the
/// remote way in; a success anywhere clears both; a one-time code used in one is used in the other.
@Suite("Attempts: remote sessions count apart from local ones")
struct AttemptChannelTests {
    let store = InMemoryStore()
    let clock = ManualClock()

    func gate(accountLimit: Int = ThrottleSchedule.accountLimit) -> AttemptGate {
        AttemptGate(factor: .passcode, store: store, clock: clock, schedule: .passcode, accountLimit: accountLimit)
    }

    func fail(_ gate: AttemptGate, _ times: Int, remote: Bool, round: UInt8 = 0) throws {
        for index in 0..<times {
            let reservation = try gate.reserve(for: UserContext(name: "alice", isRemote: remote))
            _ = try gate.settleFailure(reservation, fingerprint: [UInt8(index), remote ? 1 : 0, round])
        }
    }

    @Test("five remote failures throttle remote sessions only; the local one is asked and its success clears both")
    func remoteThrottleSparesLocal() throws {
        let gate = gate()
        try fail(gate, 5, remote: true)
        do {
            _ = try gate.reserve(for: UserContext(name: "alice", isRemote: true))
            Issue.record("a sixth remote attempt was allowed")
        } catch {
            // The log's reason says which channel is throttled, and until when.
            #expect(error.code == .throttled)
            #expect(
                error.reason.contains("passcode attempts from remote sessions; try again after "), "\(error.reason)")
            #expect(error.retryAt != nil)
        }
        let book = try store.attempts(user: "alice")
        #expect(book[.passcode].consecutiveFailures == 0, "the local counter is untouched")
        #expect(book.viewed(from: .remote)[.passcode].consecutiveFailures == 5)
        guard case .lockedOut = gate.availability(of: book, in: .remote, whenAllowed: .available) else {
            Issue.record("remote is not throttled")
            return
        }
        #expect(gate.availability(of: book, in: .local, whenAllowed: .available) == .available)
        let local = try gate.reserve(for: UserContext(name: "alice"))
        try gate.settleSuccess(local)
        let after = try store.attempts(user: "alice")
        #expect(after.viewed(from: .remote)[.passcode].consecutiveFailures == 0)
        #expect(after[.passcode].consecutiveFailures == 0)
        #expect(after.states.keys.allSatisfy { !$0.rawValue.hasSuffix("@remote") }, "\(after.states.keys)")
    }

    @Test(
        "the account limit counts per channel: the account's limit of remote failures locks remote sessions, not the console"
    )
    func accountLimitPerChannel() throws {
        let gate = gate(accountLimit: 4)
        try fail(gate, 4, remote: true)
        #expect(throws: AuthenticationError(.lockedOut)) {
            try gate.reserve(for: UserContext(name: "alice", isRemote: true))
        }
        _ = try gate.reserve(for: UserContext(name: "alice"))
    }

    @Test("a view and its write-back change only the channel viewed; a reset clears both")
    func viewRoundTrip() throws {
        try fail(gate(), 3, remote: false)
        try fail(gate(), 2, remote: true)
        var book = try store.attempts(user: "alice")
        let before = book
        book.absorb(book.viewed(from: .remote), from: .remote)
        book.absorb(book.viewed(from: .local), from: .local)
        #expect(book == before)
        try store.resetAttempts(user: "alice", factor: .passcode, by: Attribution("root", at: clock.now()))
        let reset = try store.attempts(user: "alice")
        #expect(reset[.passcode].consecutiveFailures == 0)
        #expect(reset.viewed(from: .remote)[.passcode].consecutiveFailures == 0)
    }
}
