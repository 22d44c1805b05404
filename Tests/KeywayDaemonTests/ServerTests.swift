import Foundation
import KeywayCore
import KeywayDaemon
import KeywayPlatform
import KeywayRuntime
import KeywayTestSupport
import KeywayWire
import Synchronization
import Testing

/// keywayd's server driven in-process: the real accept loop, connection threads and pool on a real socket, answering
/// the real client (`DaemonVault`), over a vault whose store the test reads directly.
@Suite("keywayd's server in-process")
struct ServerTests {
    let store = InMemoryStore()
    let clock = ManualClock()
    let kind = FactorKind(rawValue: "scripted")
    let directory: String
    var socket: String { directory + "/keywayd.sock" }

    init() throws {
        var template = Array("/tmp/keyway-server-test.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        try store.save(Enrollment(user: "alice", factor: kind, payload: [1], changedAt: clock.now(), changedBy: "t"))
    }

    /// Serves until idle for `idle` milliseconds; `done` is signalled when `run` returns. With `slow`, a secret
    /// starting "slow" takes a worker that many milliseconds before it is judged (a slow hash).
    func serve(
        idle: Int64, done: DispatchSemaphore, slow: UInt32 = 0, notes: AvailabilityNotes? = nil,
        rootConnections: Int = Server.Options().maximumRootConnections
    ) throws {
        let gate = AttemptGate(factor: kind, store: store, clock: clock, schedule: .passcode)
        let keeper: any FactorKeeper =
            slow > 0 ? SlowKeeper(gate: gate, milliseconds: slow) : ScriptedKeeper(gate: gate)
        let vault = LocalVault(store: store, clock: clock, keepers: [keeper])
        var options = Server.Options()
        options.idleExit = idle
        options.requestTimeout = 300
        options.maximumRootConnections = rootConnections
        let server = Server(service: VaultService(vault: vault), options: options, notes: notes, maintenance: {})
        guard case .success(let listener) = UnixSocket.listen(at: socket, mode: 0o666) else {
            throw AuthenticationError(.serviceUnavailable, "cannot listen at \(socket)")
        }
        Thread.detachNewThread {
            _ = server.run(listener)  // false only when the listener cannot wait in accept: the test then fails
            close(listener)
            done.signal()
        }
    }

    @Test("the client's verifications are counted in the server's store, and run returns once idle")
    func verifyAndIdle() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let done = DispatchSemaphore(value: 0)
        try serve(idle: 1500, done: done)
        let client = DaemonVault(socketPath: socket, via: "test")
        let alice = UserContext(name: "alice")
        #expect(client.availability(of: kind, for: alice) == .available)
        #expect(
            try client.verify(.secret(Secret(copying: Array("no".utf8))), of: kind, for: alice) == .failure(.mismatch))
        #expect(try store.attempts(user: "alice")[kind].consecutiveFailures == 1)
        #expect(try client.verify(.secret(Secret(copying: Array("ok".utf8))), of: kind, for: alice) == .success)
        #expect(try store.attempts(user: "alice")[kind].consecutiveFailures == 0)
        #expect(done.wait(timeout: .now() + 10) == .success, "run returns after 1.5 s without a connection")
    }

    @Test("a client that connects and says nothing is let go at the request deadline; others are answered meanwhile")
    func silentClient() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let done = DispatchSemaphore(value: 0)
        try serve(idle: 1500, done: done)
        guard case .success(let silent) = UnixSocket.connect(to: socket) else {
            Issue.record("cannot connect")
            return
        }
        defer { close(silent) }
        // Answered while the silent connection is still open.
        #expect(
            DaemonVault(socketPath: socket, via: "test").availability(of: kind, for: UserContext(name: "alice"))
                == .available)
        var byte: UInt8 = 0
        var entry = pollfd(fd: silent, events: Int16(POLLIN), revents: 0)
        #expect(poll(&entry, 1, 3000) == 1, "the server closes the silent connection")
        #expect(read(silent, &byte, 1) <= 0)
        #expect(done.wait(timeout: .now() + 10) == .success)
    }

    @Test("questions in a row while the notes' store read hangs: every one answered, none held busy; one refresh waits")
    func questionsInARowWhileNotesHang() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // The note's store read blocks until the test lets it go, as a loaded store's would take its time.
        let held = DispatchSemaphore(value: 0)
        let reads = Mutex(0)
        let notes = try AvailabilityNotes(directory: directory + "/notes") { _ throws(AuthenticationError) in
            reads.withLock { $0 += 1 }
            held.wait()
            return (concealing: [], plain: [FactorKind(rawValue: "scripted")])
        }
        let done = DispatchSemaphore(value: 0)
        // Two connections at once for root (this test's uid): a refresh that kept its connection's place would
        // leave the third question busy.
        try serve(idle: 1500, done: done, notes: notes, rootConnections: 2)
        let client = DaemonVault(socketPath: socket, via: "test")
        let alice = UserContext(name: "alice")
        // A place is given back just after its answer is sent, so on a loaded machine a question can still find
        // both taken for a moment: asked again after a pause, as a person would. The refreshes themselves hold no
        // place: with them holding one (the old way) every question after the second stays busy while the read hangs.
        let answers = (0..<12).map { _ in
            var answer = client.availability(of: kind, for: alice)
            for _ in 0..<3 where answer != .available {
                usleep(100_000)
                answer = client.availability(of: kind, for: alice)
            }
            return answer
        }
        #expect(answers.allSatisfy { $0 == .available }, "\(answers)")
        // One thread reads for the note; the other eleven questions each left a name that was already waiting.
        #expect(eventually { reads.withLock { $0 } >= 1 })
        #expect(reads.withLock { $0 } == 1)
        // Let every read go (more than can ever be asked for: none may be left waiting).
        for _ in 0..<100 { held.signal() }
        // The name asked while the first read hung is read again once it returns, and the note written. (How many
        // reads follow is the scheduler's: a thread that answered long ago may reach its refresh after a drain ended.)
        let note = directory + "/notes/" + (AvailabilityNote.fileName(for: "alice") ?? "")
        #expect(eventually { reads.withLock { $0 } >= 2 && FileManager.default.fileExists(atPath: note) })
        #expect(done.wait(timeout: .now() + 10) == .success)
        notes.removeAll()
    }

    @Test("an answer a worker gives at once (a repeat) is sent in the time a guess takes, the worker freed first")
    func repeatTakesAGuessTime() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let done = DispatchSemaphore(value: 0)
        try serve(idle: 1500, done: done, slow: 80)
        let client = DaemonVault(socketPath: socket, via: "test")
        let alice = UserContext(name: "alice")
        func timed(_ typed: String) throws -> (Verdict, Int64) {
            let began = MonotonicClock.milliseconds()
            let verdict = try client.verify(.secret(Secret(copying: Array(typed.utf8))), of: kind, for: alice)
            return (verdict, MonotonicClock.milliseconds() - began)
        }
        // The first answer, before any guess was timed, is as fast as it is.
        for guess in ["slow-1", "slow-2", "slow-3"] { #expect(try timed(guess).0 == .failure(.mismatch)) }
        let (verdict, took) = try timed("slow-1")
        #expect(verdict == .failure(.repeatedMismatch))
        // Every guess took a worker 80 ms, so the average is at least that: the repeat waited it out (load only adds).
        #expect(took >= 80, "a repeat answered in \(took) ms, a guess takes 80")
        #expect(try store.attempts(user: "alice")[kind].consecutiveFailures == 3, "the repeat counted nothing")
        #expect(done.wait(timeout: .now() + 10) == .success)
    }
}

/// The scripted keeper behind a slow hash: a secret starting "slow" takes a worker `milliseconds` before it is judged;
/// a repeat of a remembered one is answered at once, as a knowledge keeper's is.
final class SlowKeeper: FactorKeeper {
    let gate: AttemptGate
    let milliseconds: UInt32
    let repeats = RepeatMemory()
    init(gate: AttemptGate, milliseconds: UInt32) {
        self.gate = gate
        self.milliseconds = milliseconds
    }
    var factor: FactorKind { gate.factor }
    var store: any Store { gate.store }

    func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        gate.availability(of: book, whenAllowed: .available)
    }

    func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        guard case .secret(let secret) = evidence else { throw AuthenticationError(.invalidPolicy, "a secret") }
        let typed = Array(secret.withUnsafeBytes { Array($0) })
        if repeats.contains(typed, for: user.name) { return .failure(.repeatedMismatch) }
        usleep(milliseconds * 1000)
        let reservation = try gate.reserve(for: user.name)
        repeats.remember(typed, for: user.name)
        return .failure(try gate.settleFailure(reservation, fingerprint: typed))
    }

    func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        throw AuthenticationError(.invalidPolicy, "not enrolled here")
    }
}
