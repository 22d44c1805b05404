import Dispatch
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayVault
import KeywayWire
import Synchronization

/// keywayd: the one process that opens Keyway's store and runs the slow hash (docs/ARCHITECTURE.md §10, keywayd(8)).
///
/// One request per connection. A connection must deliver its whole request within the request deadline or it is
/// closed; every store transaction begins and ends inside one request's handler and never waits on a client, so a
/// client that stops, dies or stalls holds nothing but its own connection slot, and only until the deadline.
@main
struct KeywayDaemon {
    static let usage = """
        usage: keywayd [--foreground] [--socket PATH] [--store PATH] [--workers N] [--queue N]
                       [--request-timeout MS] [--idle-exit SECONDS]

          --foreground          stay in the foreground (keywayd never forks; accepted for init scripts)
          --socket PATH         where to listen (default /run/keyway/keywayd.sock); ignored when systemd passes
                                the socket (keywayd.socket)
          --store PATH          the store (default /var/lib/keyway/keyway.db), created if missing
          --workers N           requests running the slow hash at once (default: the number of cores)
          --queue N             requests waiting for a worker before new ones are answered "busy" (default 32)
          --request-timeout MS  how long a client may take to send its request (default 2000)
          --idle-exit SECONDS   exit after this long without a connection (default 0: never)
          --unenrolled-counters N
                                names without an enrollment whose counters are kept (default 10000; the
                                latest failures win; checked every minute)
        """

    static func main() {
        BrokenPipe.ignoreSignal()
        var options = Server.Options()
        var socketPath = "/run/keyway/keywayd.sock"
        var vaultOptions = SystemVault.Options()
        vaultOptions.createStore = true
        var words = Array(CommandLine.arguments.dropFirst())[...]
        func value(_ flag: String) -> String {
            guard let next = words.popFirst() else { fail("\(flag) needs a value") }
            return next
        }
        func number(_ flag: String, _ range: ClosedRange<Int>) -> Int {
            let text = value(flag)
            guard let parsed = Int(text), range.contains(parsed) else {
                fail("\(flag) \(text): give a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return parsed
        }
        while let word = words.popFirst() {
            switch word {
            case "--foreground": break
            case "--socket": socketPath = value(word)
            case "--store": vaultOptions.storePath = value(word)
            case "--workers": options.workers = number(word, 1...256)
            case "--queue": options.queueLimit = number(word, 0...4096)
            case "--request-timeout": options.requestTimeout = Int64(number(word, 10...600_000))
            case "--idle-exit": options.idleExit = Int64(number(word, 0...86_400)) * 1000
            case "--unenrolled-counters": options.unenrolledCounterLimit = number(word, 0...100_000_000)
            case "--help":
                print(usage)
                exit(0)
            default: fail("unknown argument '\(word)'")
            }
        }
        let vault: LocalVault
        do { vault = try SystemVault.open(vaultOptions) } catch {
            Server.log("cannot open the store: \(error.reason)")
            exit(74)
        }
        let listener: Int32
        var ownSocket: String? = nil
        if let inherited = inheritedSocket() {
            listener = inherited
        } else {
            if let slash = socketPath.lastIndex(of: "/"), slash != socketPath.startIndex {
                mkdir(String(socketPath[..<slash]), 0o755)  // /run/keyway; an existing one is kept as it is
            }
            switch UnixSocket.listen(at: socketPath, mode: 0o666) {
            case .success(let fd): listener = fd
            case .failure(let failure):
                Server.log("\(failure)")
                exit(71)
            }
            ownSocket = socketPath
        }
        Server.log(
            "serving \(vaultOptions.storePath) on \(ownSocket ?? "the socket systemd passed") "
                + "with \(options.workers) workers, queue \(options.queueLimit)")
        let limit = options.unenrolledCounterLimit
        let server = Server(service: VaultService(vault: vault), options: options) {
            // Names without an enrollment keep counters (concealment); cap them (Store.pruneCounters).
            do throws(AuthenticationError) {
                let cleared = try vault.store.pruneCounters(ofUnenrolledKeeping: limit)
                if cleared > 0 { Server.log("cleared the counters of \(cleared) names without an enrollment") }
            } catch {
                Server.log("cannot prune counters: \(error.reason)")
            }
        }
        server.run(listener)
        if let ownSocket { unlink(ownSocket) }
        Server.log("idle for \(options.idleExit / 1000) s; exiting")
        exit(0)
    }

    /// The listening socket systemd passed (socket activation: `LISTEN_PID` is us and `LISTEN_FDS` is 1), or nil.
    static func inheritedSocket() -> Int32? {
        guard let pid = getenv("LISTEN_PID").map({ String(cString: $0) }), pid == String(getpid()),
            let count = getenv("LISTEN_FDS").map({ String(cString: $0) }), count == "1"
        else { return nil }
        unsetenv("LISTEN_PID")
        unsetenv("LISTEN_FDS")
        unsetenv("LISTEN_FDNAMES")
        _ = fcntl(3, F_SETFD, FD_CLOEXEC)
        return 3
    }

    static func fail(_ message: String) -> Never {
        Server.log("\(message)\n\(usage)")
        exit(64)
    }
}

/// The accept loop, the connection threads and the bounded pool for the slow hash.
final class Server: Sendable {
    struct Options: Sendable {
        /// Requests running the slow hash at once.
        var workers = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
        /// Requests waiting for a worker; beyond this a request is answered "busy" at once.
        var queueLimit = 32
        /// Milliseconds a client has to send its request (and to take its answer).
        var requestTimeout: Int64 = 2000
        /// Milliseconds a queued request may wait for a worker before it is answered "busy".
        var queueWait: Int64 = 10_000
        /// Exit after this many milliseconds without a connection; 0 never.
        var idleExit: Int64 = 0
        /// Connections open at once, in all.
        var maximumConnections = 256
        /// Connections open at once for one user other than root: a user who knows their own pattern can make
        /// keywayd hash it over and over, and this caps how many of the pool's slots they hold at a time.
        var maximumPerUser = 4
        /// Names without an enrollment whose counters are kept.
        var unenrolledCounterLimit = 10_000
        /// Milliseconds between runs of the maintenance.
        var maintenanceInterval: Int64 = 60_000
    }

    let service: VaultService
    let options: Options
    /// Run at start and every `maintenanceInterval` from the accept loop.
    let maintenance: @Sendable () -> Void
    /// Open connections per user id, and when the last one ended.
    private let connections = Mutex<(byUser: [UInt32: Int], total: Int, lastActivity: Int64)>(([:], 0, 0))
    private let pool: DispatchSemaphore
    private let waiting = Mutex(0)

    init(service: VaultService, options: Options, maintenance: @escaping @Sendable () -> Void) {
        self.service = service
        self.options = options
        self.maintenance = maintenance
        pool = DispatchSemaphore(value: options.workers)
    }

    static func log(_ message: String) {
        let line = "keywayd: \(message.escapingControlCharacters)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    /// Accepts until idle for `options.idleExit` (never, when 0).
    func run(_ listener: Int32) {
        connections.withLock { $0.lastActivity = UnixSocket.monotonicMilliseconds() }
        var maintained: Int64? = nil
        while true {
            let now = UnixSocket.monotonicMilliseconds()
            if maintained.map({ now - $0 >= options.maintenanceInterval }) ?? true {
                maintenance()
                maintained = now
            }
            var entry = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            let ready = poll(&entry, 1, 1000)
            if ready <= 0 {
                if options.idleExit > 0 {
                    let idle = connections.withLock { state in
                        state.total == 0 && UnixSocket.monotonicMilliseconds() - state.lastActivity > options.idleExit
                    }
                    if idle { return }
                }
                continue
            }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { continue }
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)  // keywayd runs no programs; this is for whoever adds one
            guard let peer = UnixSocket.peer(of: fd) else {
                close(fd)
                continue
            }
            let admitted = connections.withLock { state -> Bool in
                let mine = state.byUser[peer.uid, default: 0]
                guard state.total < options.maximumConnections, peer.uid == 0 || mine < options.maximumPerUser
                else { return false }
                state.byUser[peer.uid] = mine + 1
                state.total += 1
                return true
            }
            guard admitted else {
                Self.log("pid \(peer.pid) uid \(peer.uid): too many connections; answered busy")
                reply(.failure(busy("too many connections are open")), to: fd)
                close(fd)
                continue
            }
            let started = spawn { [self] in
                serve(fd, peer)
                close(fd)
                connections.withLock { state in
                    state.byUser[peer.uid, default: 1] -= 1
                    if state.byUser[peer.uid] == 0 { state.byUser[peer.uid] = nil }
                    state.total -= 1
                    state.lastActivity = UnixSocket.monotonicMilliseconds()
                }
            }
            if !started {
                reply(.failure(busy("no thread could be started")), to: fd)
                close(fd)
                connections.withLock { state in
                    state.byUser[peer.uid, default: 1] -= 1
                    state.total -= 1
                }
            }
        }
    }

    private func busy(_ why: String) -> AuthenticationError {
        AuthenticationError(.serviceUnavailable, "keywayd is busy (\(why)); nothing was counted, try again")
    }

    /// Reads one request, answers it, and returns; the caller closes the connection.
    private func serve(_ fd: Int32, _ peer: UnixSocket.Peer) {
        let deadline = UnixSocket.monotonicMilliseconds() + options.requestTimeout
        var body: [UInt8]
        switch UnixSocket.receiveFrame(from: fd, limit: Wire.maximumRequest, until: deadline) {
        case .success(let bytes): body = bytes
        case .failure(let failure):
            Self.log("pid \(peer.pid) uid \(peer.uid): request refused: \(failure.reason)")
            return
        }
        let request: Request
        do {
            request = try Request(decoding: body)
        } catch {
            for index in body.indices { body[index] = 0 }
            Self.log("pid \(peer.pid) uid \(peer.uid): malformed request: \(error)")
            reply(
                .failure(AuthenticationError(.internalFailure, "keywayd refused a malformed request: \(error)")), to: fd
            )
            return
        }
        for index in body.indices { body[index] = 0 }
        let caller = VaultService.Caller(uid: peer.uid, name: Self.name(of: peer.uid))
        let answer: Response
        if VaultService.isSlow(request) && VaultService.refusal(of: request, by: caller) == nil {
            answer = onPool { service.answer(request, from: caller) } ?? .failure(busy("the slow-hash queue is full"))
        } else {
            answer = service.answer(request, from: caller)
        }
        if case .failure(let error) = answer, error.code == .notPermitted {
            Self.log("pid \(peer.pid) \(caller.label): \(request.name) refused: \(error.reason)")
        }
        reply(answer, to: fd)
    }

    /// Runs `body` on one of the pool's workers, or returns nil (busy) when the queue is full or the wait too long.
    private func onPool(_ body: () -> Response) -> Response? {
        let admitted = waiting.withLock { count -> Bool in
            guard count < options.queueLimit + options.workers else { return false }
            count += 1
            return true
        }
        guard admitted else { return nil }
        let got = pool.wait(timeout: .now() + .milliseconds(Int(options.queueWait)))
        waiting.withLock { $0 -= 1 }
        guard got == .success else { return nil }
        defer { pool.signal() }
        return body()
    }

    private func reply(_ response: Response, to fd: Int32) {
        let deadline = UnixSocket.monotonicMilliseconds() + options.requestTimeout
        _ = UnixSocket.send(WireWriter.frame(response.encoded), to: fd, until: deadline)
    }

    /// The account name of `uid`, or nil. Root needs no lookup (it may ask everything; the name is for the audit
    /// trail), which spares every request from the module inside sudo or login a read of the password database.
    static func name(of uid: UInt32) -> String? {
        if uid == 0 { return "root" }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>? = nil
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name
        else { return nil }
        return String(cString: name)
    }
}

/// Runs `body` on a new detached thread with a 1 MiB stack; false when no thread could be made.
func spawn(_ body: @escaping @Sendable () -> Void) -> Bool {
    final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
    pthread_attr_init(attributes)
    defer {
        pthread_attr_destroy(attributes)
        attributes.deallocate()
    }
    pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
    pthread_attr_setstacksize(attributes, 1 << 20)
    var thread = pthread_t()
    let result = pthread_create(
        &thread, attributes,
        { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, box)
    if result != 0 { Unmanaged<Box>.fromOpaque(box).release() }
    return result == 0
}
