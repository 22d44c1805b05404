import CKeywayLibc
import Dispatch
import Glibc
import KeywayCore
public import KeywayPlatform
public import KeywayWire
import Synchronization

/// The accept loop, the connection threads and the bounded pool for the slow hash.
public final class Server: Sendable {
    public struct Options: Sendable {
        /// The defaults keywayd(8) lists.
        public init() {}

        /// Requests running the slow hash at once.
        public var workers = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        /// Requests waiting for a worker; beyond this a request is answered "busy" at once.
        public var queueLimit = 32
        /// Slow-hash requests of one share (an account's owner's, or everyone else's at that account) admitted at
        /// once: half the workers, at least one. A user may have sudo hash their own right pattern over and over (a
        /// success resets the counter), or have su guess at someone else's; one share can then never hold every
        /// worker, so other users' hashes always find one free, and an account's owner always has a share of
        /// their own. Beyond it a request waits (`queueWait`) rather than being refused.
        public var perAccountLimit: Int { max(1, workers / 2) }
        /// Milliseconds a client has to send its request (and to take its answer).
        public var requestTimeout: Int64 = 2000
        /// Milliseconds a queued request may wait for a worker before it is answered "busy".
        public var queueWait: Int64 = 10_000
        /// Exit after this many milliseconds without a connection; 0 never.
        public var idleExit: Int64 = 0
        /// Connections from root open at once (the module inside sudo, su, login), kept apart from everyone
        /// else's, so users cannot crowd root's out.
        public var maximumRootConnections = 128
        /// Connections from all other users together.
        public var maximumOtherConnections = 128
        /// Connections open at once for one person other than root: a user and their subordinate uids together
        /// (`SubordinateIDs`).
        public var maximumPerUser = 4
        /// Names without an enrollment whose counters are kept.
        public var unenrolledCounterLimit = 100_000
        /// Rows of the audit trail kept, the latest.
        public var auditRowLimit = 100_000
        /// Milliseconds between runs of the maintenance.
        public var maintenanceInterval: Int64 = 60_000
    }

    /// Open connections, and when the last one ended; `byUser` is by person (`SubordinateIDs.person`).
    struct Connections {
        var byUser: [UInt32: Int] = [:]
        var root = 0
        var others = 0
        var lastActivity: Int64 = 0
        var total: Int { root + others }
    }

    /// Slow-hash requests admitted (running or waiting), in all and per share, with who holds each share's places.
    struct Pool {
        var admitted = 0
        var byShare: [Share: [Holder]] = [:]
    }

    /// One account's places on the pool: its owner's own requests (sudo, a screen locker: the authentication's
    /// starter is the account) apart from everyone else's (su, login, sshd), so guesses others make at an account
    /// never take the places its owner needs (docs/ARCHITECTURE.md §10, "Fair to the owner").
    struct Share: Hashable {
        var account: [UInt8]
        var owner: Bool
    }

    /// Who holds a place, for the log line of a busy answer.
    struct Holder: Equatable, CustomStringConvertible {
        var pid: Int32
        var uid: UInt32
        var startedBy: UInt32?

        var description: String { "pid \(pid) uid \(uid) started by uid \(startedBy.map { "\($0)" } ?? "unknown")" }
    }

    /// Wakes requests waiting for a place in their share.
    let shareFreed = DispatchSemaphore(value: 0)

    public let service: VaultService
    public let options: Options
    /// Where presented factors' devices are listened to for an armed authentication.
    let arming: ArmingOptions
    /// Run at start and every `maintenanceInterval`, on a thread of its own.
    let maintenance: @Sendable () -> Void
    /// The availability notes left for the module, when this keywayd keeps them (a store on this host).
    public let notes: AvailabilityNotes?
    let connections = Mutex(Connections())
    let pool = Mutex(Pool())
    let workers: DispatchSemaphore
    let maintaining = Mutex(false)
    /// Threads in `accept` now, or about to be (`lead`).
    let accepting = Mutex(0)
    /// Set when a thread has found keywayd idle: the others leave `accept` at their next timeout.
    let stopping = Mutex(false)
    /// When the accept loop last started the maintenance (nil: not yet).
    let maintained = Mutex<Int64?>(nil)
    /// Where refused connections are answered and let go of, off the accept loop.
    let disposer = Disposer()
    /// Each presented factor's device: its declaration, its line, its wait.
    let seats: [FactorKind: DeviceSeat]
    /// How long a slow-hash request takes a worker, so faster answers can be made to take as long.
    let guessTime = GuessTime()
    /// Whose subordinate uids are whose: a person's connection places count them all.
    let subordinates: SubordinateIDs
    /// The metrics and the journal's events (docs/ARCHITECTURE.md §20), when this server reports.
    public let telemetry: Telemetry?
    /// keywayd's own checks beyond the server's (the store, the configuration, the readers, the database).
    let checks: @Sendable () -> [HealthCheck]
    /// The last answer to `health` and when it was made: at most one a second is computed, whoever asks.
    let lastHealth = Mutex<(at: Int64, checks: [HealthCheck])?>(nil)
    /// When this server was made, for `health`.
    let started = MonotonicClock.milliseconds()

    /// A server answering with `service`; `maintenance` runs at start and every `maintenanceInterval`.
    public init(
        service: VaultService, options: Options, arming: ArmingOptions = ArmingOptions(),
        notes: AvailabilityNotes? = nil, subordinates: SubordinateIDs = SubordinateIDs(),
        telemetry: Telemetry? = nil, checks: @escaping @Sendable () -> [HealthCheck] = { [] },
        maintenance: @escaping @Sendable () -> Void
    ) {
        self.subordinates = subordinates
        self.telemetry = telemetry
        self.checks = checks
        self.service = service
        self.options = options
        self.arming = arming
        self.seats = DeviceSeat.all(service.factors, arming)
        self.notes = notes
        self.maintenance = maintenance
        workers = DispatchSemaphore(value: options.workers)
        telemetry?.poolLoad.withLock {
            $0 = { [weak self] in self?.load ?? (0, 0) }
        }
    }

    /// Slow-hash requests waiting for a worker, and running, now.
    var load: (waiting: Int, running: Int) {
        let admitted = pool.withLock { $0.admitted }
        return (max(0, admitted - options.workers), min(admitted, options.workers))
    }

    /// The answer to `health`: the server's own check, then keywayd's (`checks`); computed at most once a second.
    func health() -> [HealthCheck] {
        let now = MonotonicClock.milliseconds()
        if let last = lastHealth.withLock({ $0 }), now - last.at < 1000 { return last.checks }
        let (waiting, running) = load
        let open = connections.withLock { $0.total }
        var answer = [
            HealthCheck(
                "keywayd", .ok,
                "answering: pid \(getpid()), up \((now - started) / 1000) s, \(open) connections, "
                    + "\(running) of \(options.workers) hash workers busy")
        ]
        if waiting > options.queueLimit / 2 {
            answer.append(
                HealthCheck(
                    "hash queue", .warning,
                    "\(waiting) requests wait for the slow hash (more than \(options.queueLimit) are answered busy)"))
        }
        answer += checks()
        lastHealth.withLock { $0 = (now, answer) }
        return answer
    }

    /// Threads that wait in `accept` at once when keywayd is quiet (docs/ARCHITECTURE.md §10, "Threads").
    static let acceptingThreads = 2

    /// Accepts until idle for `options.idleExit` (never, when 0); false, having served nothing, when the listener's
    /// accept cannot be made to wait (and give up every second, for the maintenance and the idle exit).
    ///
    /// Several threads wait in `accept` on the listener, and the kernel wakes one of them for each connection; that
    /// thread serves the connection itself, after starting another to accept (`spawn`) if no other thread was
    /// left in `accept`. So a request wakes the one thread that serves it, and the accept loop still never reads,
    /// waits on or closes a client's connection: another thread is accepting before the connection is read.
    public func run(_ listener: Int32) -> Bool {
        if case .failure(let failure) = UnixSocket.waitInAccept(atMost: 1000, on: listener) {
            Self.log("cannot \(failure)")
            return false
        }
        connections.withLock { $0.lastActivity = MonotonicClock.milliseconds() }
        let finished = DispatchSemaphore(value: 0)
        accepting.withLock { $0 += 1 }
        lead(listener, finished: finished)
        finished.wait()
        return true
    }

    /// Takes one more thread into `accept` if fewer than `acceptingThreads` are there; false when enough are.
    func joinAccepting() -> Bool {
        if stopping.withLock({ $0 }) { return false }
        return accepting.withLock { count in
            guard count < Self.acceptingThreads else { return false }
            count += 1
            return true
        }
    }

    /// The accept loop, on one of the threads waiting in `accept` (counted in `accepting` before it is called, and
    /// until it leaves to serve a connection): returns when enough other threads accept after it has served one, or
    /// signals `finished` and returns when keywayd has been idle for `options.idleExit`.
    func lead(_ listener: Int32, finished: DispatchSemaphore) {
        while true {
            let now = MonotonicClock.milliseconds()
            let due = maintained.withLock { last -> Bool in
                guard last.map({ now - $0 >= options.maintenanceInterval }) ?? true else { return false }
                last = now
                return true
            }
            if due { maintainInBackground() }
            let fd = accept(listener, nil, nil)  // at most a second (waitInAccept)
            let failure = errno
            guard fd >= 0 else {
                if options.idleExit > 0 {
                    let idle = connections.withLock { state in
                        state.total == 0 && MonotonicClock.milliseconds() - state.lastActivity > options.idleExit
                    }
                    if idle {
                        stopping.withLock { $0 = true }
                        finished.signal()
                        return
                    }
                }
                if stopping.withLock({ $0 }) { return }  // another thread found keywayd idle: run has returned
                // Out of descriptors: the listener stays readable, so wait rather than spin.
                if failure == EMFILE || failure == ENFILE { usleep(100_000) }
                continue
            }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // keywayd runs no programs; this is for whoever adds one
            // The accept loop serves everyone, so it never reads, waits on or closes a client's connection: a refused
            // one goes to the disposer with its answer (keywayd(8), "Descriptors").
            guard let peer = UnixSocket.peer(of: fd) else {
                disposer.refuse(fd, answer: nil, for: nil)
                continue
            }
            let place = self.place(of: peer)
            guard admit(place) else {
                Self.logLimited("pid \(peer.pid) uid \(peer.uid): too many connections; answered busy")
                disposer.refuse(fd, answer: frame(busy("too many connections are open")), for: place)
                continue
            }
            // The loop goes on elsewhere before this thread touches the connection: on the threads still in accept,
            // or, when this was the last, on one started now; without another thread it stays here, and the
            // connection is refused. (Refused connections above go to the disposer: this thread stays counted.)
            let wasLast = accepting.withLock { count -> Bool in
                if count <= 1 { return true }  // the place stays counted: the new thread's, or this one's if none
                count -= 1
                return false
            }
            if wasLast {
                guard spawn({ [self] in lead(listener, finished: finished) }) else {
                    disposer.refuse(fd, answer: frame(busy("no thread could be started")), for: place)
                    release(place)
                    continue
                }
            }
            let later = ServedCaller.serving(root: place == .root) { serve(fd, peer, place) }
            UnixSocket.dispose(fd)  // on this connection's thread, before it is handed anyone else's work
            release(place)
            // The note a read asks for is written after the connection's place is given back: a client asking again
            // at once is never refused because its last answer's refresh is still running.
            if let later { notes?.refreshSoon(later) }
            guard joinAccepting() else { return }
        }
    }

    func maintainInBackground() {
        let claimed = maintaining.withLock { running -> Bool in
            if running { return false }
            running = true
            return true
        }
        guard claimed else { return }
        let started = spawn { [self] in
            maintenance()
            maintaining.withLock { $0 = false }
        }
        if !started { maintaining.withLock { $0 = false } }
    }

    func frame(_ error: AuthenticationError) -> [UInt8] { WireWriter.frame(Response.failure(error).encoded) }

    func busy(_ why: String) -> AuthenticationError {
        AuthenticationError(.serviceUnavailable, "keywayd is busy (\(why)); nothing was counted, try again")
    }

    /// Reads one request, answers it, and returns the account whose note to refresh once the connection is closed
    /// (a request that only read); the caller closes the connection.
    func serve(_ fd: Int32, _ peer: UnixSocket.Peer, _ place: Place) -> String? {
        let deadline = MonotonicClock.milliseconds() + options.requestTimeout
        var body: [UInt8]
        switch UnixSocket.receiveFrame(from: fd, limit: Wire.maximumRequest, until: deadline) {
        case .success(let bytes): body = bytes
        case .failure(let failure):
            Self.logLimited("pid \(peer.pid) uid \(peer.uid): request refused: \(failure.reason)")
            return nil
        }
        let decoded = Result<Request, WireError> { () throws(WireError) in try Request(decoding: body) }
        body.withUnsafeMutableBytes { secureZero($0) }
        let request: Request
        let caller = VaultService.Caller(uid: peer.uid, name: Accounts.name(of: peer.uid))
        switch decoded {
        case .success(let parsed): request = VaultService.vouched(parsed, by: caller)  // who started it, once
        case .failure(let error):
            Self.logLimited("pid \(peer.pid) uid \(peer.uid): malformed request: \(error)")
            let refusal = AuthenticationError(.internalFailure, "keywayd refused a malformed request: \(error)")
            reply(.failure(refusal), to: fd)
            return nil
        }
        if case .arm(let factor, let user, _, let waits, let typed) = request {
            serveArm(request, factor: factor, user: user, waits: waits, typed: typed, from: caller, at: place, on: fd)
            return nil
        }
        if case .enrollAtDevice(let factor, _, _, _, _) = request {
            serveEnrollmentAtDevice(request, factor: factor, from: caller, on: fd)
            return nil
        }
        switch request {
        case .metrics:
            reply(.text(telemetry?.exposition() ?? ""), to: fd)
            return nil
        case .health:
            reply(.health(health()), to: fd)
            return nil
        default: break
        }
        let began = MonotonicClock.milliseconds()
        let before = telemetry?.lockoutsBefore(request, by: caller)
        let answer: Response
        if VaultService.isSlow(request) && VaultService.refusal(of: request, by: caller) == nil {
            let startedBy = request.startedBy ?? (caller.isRoot ? nil : caller.uid)
            let account = request.user ?? ""
            let owner = service.startedByOwner(account, startedBy: request.startedBy, caller: caller)
            let share = Share(account: Array(account.utf8), owner: owner)
            var took: Int64? = nil
            answer =
                onPool(share, for: Holder(pid: peer.pid, uid: peer.uid, startedBy: startedBy), client: fd) {
                    let began = MonotonicClock.milliseconds()
                    defer { took = MonotonicClock.milliseconds() - began }
                    // On a worker: root's mark goes with the request.
                    return ServedCaller.serving(root: caller.isRoot) { service.answer(request, from: caller) }
                } ?? .failure(busy("too many requests wait for the slow hash"))
            // Answered in a guess's time: a request a worker answered faster (a repeat, a lockout) waits out the rest
            // here, on this connection's own thread, with the worker already free (docs/ARCHITECTURE.md §10).
            if let took, case let pad = guessTime.padding(after: took), pad > 0 { usleep(UInt32(pad) * 1000) }
        } else {
            answer = service.answer(request, from: caller)
        }
        if case .failure(let error) = answer, error.code == .notPermitted {
            Self.logLimited("pid \(peer.pid) \(caller.label): \(request.name) refused: \(error.reason)")
        }
        // The account's note from what the store holds now: before the answer when the request may have changed it
        // (the client's next question must find it current), after it, once the connection is closed, when it only
        // read. A refused request changed nothing.
        let noted = VaultService.refusal(of: request, by: caller) == nil ? request.user : nil
        let changed = VaultService.changesAccount(request)
        if changed, let noted { notes?.refresh(noted) }
        // What the answer changed (a lockout started or ended) is read before it is sent: once the client has it,
        // its next request could change the account again, and that change would be counted twice.
        telemetry?.answered(
            request, by: caller, answer, milliseconds: MonotonicClock.milliseconds() - began, before: before)
        reply(answer, to: fd)
        return changed ? nil : noted
    }

    func reply(_ response: Response, to fd: Int32) {
        let deadline = MonotonicClock.milliseconds() + options.requestTimeout
        _ = UnixSocket.send(WireWriter.frame(response.encoded), to: fd, until: deadline)
    }
}
