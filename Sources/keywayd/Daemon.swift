import CKeywayLibc
import Glibc
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayDBus
import KeywayDaemon
import KeywayFactors
import KeywayFprintd
import KeywayPlatform
import KeywayStore
import KeywayVault
import KeywayWire
import Synchronization

/// keywayd: the one process that opens Keyway's store and runs the slow hash (docs/ARCHITECTURE.md §10, keywayd(8)).
///
/// One request per connection. A connection must deliver its whole request within the request deadline or it is
/// closed; every store transaction begins and ends inside one request's handler and never waits on a client, so a
/// client that stops, dies or stalls holds nothing but its own connection slot, and only until the deadline.
@main
struct Keywayd {
    static let usage = """
        usage: keywayd [--foreground] [--socket PATH] [--store PATH|URI] [--host NAME] [--passfile FILE]
                       [--timeline FILE] [--config FILE] [--workers N] [--queue N] [--request-timeout MS] [--idle-exit SECONDS]
                       [--sensor DIR] [--system-bus ADDRESS] [--notes N] [--metrics FILE|none]
                       [--journal SOCKET|none]

          --foreground          stay in the foreground (keywayd never forks; accepted for init scripts)
          --socket PATH         where to listen (default /run/keyway/keywayd.sock); ignored when systemd passes
                                the socket (keywayd.socket)
          --store PATH|URI      the store: this host's SQLite file (default /var/lib/keyway/keyway.db, created
                                if missing), or a fleet's PostgreSQL database as a libpq URI
                                (postgresql://keyway@db.example/keyway?sslmode=verify-full), shared by every
                                host's keywayd; its schema is made by keyway store migrate
          --host NAME           this host's name in a shared store's audit trail (default: the host name)
          --passfile FILE       the database's password file (default /etc/keyway/pgpass; root's, mode 0600)
          --timeline FILE       where the database's newest timeline used is kept, so a former primary is
                                refused after a restart too (default /var/lib/keyway/fleet-timeline)
          --config FILE         the configuration (default /etc/keyway/keyway.conf and its .conf.d): the
                                factors' rules, lockouts, passcode-max-age and the hashing cost are enforced
                                here; read at start
          --workers N           requests running the slow hash at once (default: the number of cores)
          --queue N             requests waiting for a worker before new ones are answered "busy" (default 32)
          --request-timeout MS  how long a client may take to send its request (default 2000)
          --idle-exit SECONDS   exit after this long without a connection (default 0: never)
          --sensor DIR          the simulated sensor's control directory, where keywayd listens while an
                                authentication has armed the sensor (default /run/keyway/sensor)
          --system-bus ADDRESS  the D-Bus address fprintd is on, with [biometric] backend = fprintd (default
                                $DBUS_SYSTEM_BUS_ADDRESS, else unix:path=/run/dbus/system_bus_socket)
          --audit-rows N        rows of the audit trail kept (default 100000, the latest; checked every minute)
          --passed-descriptors refuse|receive
                                refuse (the default): the kernel refuses descriptors a client passes where none
                                is asked for (Linux 6.16 and later); receive: keywayd receives and disposes of
                                them itself, as it must on older kernels
          --notes N             availability notes kept for the module, one per account recently asked about, in
                                the socket's path with .notes (default 1024; 0: none, every prompt waits for a
                                round trip; always none with a shared database)
          --metrics FILE|none   where keywayd writes its metrics for node_exporter's textfile collector, at
                                most once a second, and reads its counts back after an idle exit (default
                                /var/lib/prometheus/node-exporter/keyway.prom; the directory must exist);
                                keyway metrics prints the same
          --journal SOCKET|none where keywayd sends its events as structured journal entries (default
                                /run/systemd/journal/socket)
          --unenrolled-counters N
                                names without an enrollment whose counters are kept (default 100000; the
                                latest failures win, a throttled or locked name is always kept; checked every
                                minute)
        """

    static func main() {
        BrokenPipe.ignoreSignal()
        Termination.holdSignals()  // before any thread: each inherits it
        var options = Server.Options()
        var socketPath = "/run/keyway/keywayd.sock"
        var vaultOptions = SystemVault.Options()
        vaultOptions.createStore = true
        vaultOptions.timelineFile = "/var/lib/keyway/fleet-timeline"  // read and written only with a database
        var configPath: String? = nil
        var arming = ArmingOptions()
        var kernelRefusal = true
        var noteLimit = 1024
        var systemBus = DBusConnection.systemBusAddress
        var telemetryOptions = Telemetry.Options()
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
            case "--passed-descriptors":
                switch value(word) {
                case "refuse": kernelRefusal = true
                case "receive": kernelRefusal = false
                case let other: fail("--passed-descriptors \(other): give refuse or receive")
                }
            case "--socket": socketPath = value(word)
            case "--store": vaultOptions.storePath = value(word)
            case "--host": vaultOptions.host = value(word)
            case "--passfile": vaultOptions.passfile = value(word)
            case "--timeline": vaultOptions.timelineFile = value(word)
            case "--config": configPath = value(word)
            case "--workers": options.workers = number(word, 1...256)
            case "--queue": options.queueLimit = number(word, 0...4096)
            case "--request-timeout": options.requestTimeout = Int64(number(word, 10...600_000))
            case "--idle-exit": options.idleExit = Int64(number(word, 0...86_400)) * 1000
            case "--unenrolled-counters": options.unenrolledCounterLimit = number(word, 0...100_000_000)
            case "--audit-rows": options.auditRowLimit = number(word, 100...100_000_000)
            case "--notes": noteLimit = number(word, 0...1_000_000)
            case "--sensor":
                arming.controlDirectory = value(word)
                guard arming.controlDirectory.hasPrefix("/") else {
                    fail("--sensor \(arming.controlDirectory): give an absolute path")
                }
            case "--system-bus": systemBus = value(word)
            case "--metrics", "--journal":
                let path = value(word)
                guard path == "none" || path.hasPrefix("/") else {
                    fail("\(word) \(path): give an absolute path or none")
                }
                if word == "--metrics" { telemetryOptions.file = path == "none" ? nil : path }
                if word == "--journal" { telemetryOptions.journal = path == "none" ? nil : path }
            case "--help":
                print(usage)
                exit(ExitStatus.success)
            default: fail("unknown argument '\(word)'")
            }
        }
        let loaded: Configuration
        switch ConfigurationFiles.load(configPath) {
        case .success(let configuration):
            loaded = configuration
            for warning in configuration.warnings { Server.log(warning.description) }
            for (name, errors) in configuration.unusable.sorted(by: { $0.key < $1.key }) {
                Server.log(
                    "policy '\(name)' has errors; stacks naming it fail closed, the others go on: "
                        + errors.map { $0.headline }.joined(separator: "; "))
            }
            vaultOptions.settings = configuration.settings
            arming.settings = configuration.settings
        case .failure(let problems):
            Descriptor.printError("keywayd: refusing to start: the configuration has errors\n\(problems)")
            exit(ExitStatus.configuration)
        }
        // The device backends the factors' settings choose (fprintd's reader with `[biometric] backend = fprintd`,
        // keywayd then its one client): built once, offered to the keepers and to each armed wait
        // (docs/ARCHITECTURE.md §14 and §18).
        for plugin in Factors.all {
            guard let declared = plugin.arming else { continue }
            for name in declared.backends(arming.settings[plugin.kind]) where arming.backends[name] == nil {
                guard let backend = DeviceBackends.make(name, systemBus: systemBus) else {
                    Server.log("\(plugin.kind): keywayd has no device backend '\(name)'; the policies fall back")
                    continue
                }
                arming.backends[name] = backend
                do throws(AuthenticationError) {
                    try backend.check()
                    Server.log("\(plugin.kind): \(backend.name) \(backend.place)")
                } catch {
                    Server.log(
                        "\(plugin.kind): \(backend.name) cannot be used yet (the policies fall back): \(error.reason)")
                }
            }
        }
        // The devices are given back before the machine sleeps, and taken again after (docs/ARCHITECTURE.md §14).
        SleepWatch.start(systemBus: systemBus, state: arming.sleep)
        // Every audit row the store writes is an event, every call a latency sample (docs/ARCHITECTURE.md §20).
        let telemetry = Telemetry(options: telemetryOptions)
        let vault: LocalVault
        do {
            vault = try SystemVault.open(vaultOptions, devices: arming.backends) { store in
                ObservedStore(
                    store, nanoseconds: MonotonicClock.nanoseconds,
                    timed: { telemetry.stored($0, nanoseconds: $1, $2) }, audited: { telemetry.audited($0) })
            }
        } catch {
            Server.log("cannot open the store: \(error.reason)")
            exit(ExitStatus.ioError)
        }
        telemetry.attach(vault)
        let store = (vault.store as? ObservedStore)?.base ?? vault.store
        // The cost of new hashes, as keyway.conf's hash-passes and hash-memory set it (existing hashes keep theirs).
        let costs = Factors.all.filter { $0.setting(Setting.hashPasses().key) != nil }.map { plugin in
            "\(plugin.kind) \(SystemVault.hashCost(of: plugin, vaultOptions))"
        }
        if !costs.isEmpty { Server.log("new hashes: \(costs.joined(separator: ", "))") }
        // A shared database may be away at start: keywayd serves "unavailable" meanwhile and reconnects by itself.
        if let database = store as? PostgresStore {
            database.onAvailabilityChange { away, line in telemetry.database(away: away, line) }
            switch database.probe() {
            case .success(let line): Server.log(line)
            case .failure(let problem):
                Server.log(
                    "the database cannot be used yet (authentications fail closed until it can): \(problem.reason)")
            }
        }
        // Notes let the module prompt without asking first (docs/ARCHITECTURE.md §10, "Notes"). Not for a shared
        // database: another host's changes would not refresh them. Emptied before the socket is made, so no module
        // reads an earlier keywayd's note once this one can be reached.
        if let slash = socketPath.lastIndex(of: "/"), slash != socketPath.startIndex {
            mkdir(String(socketPath[..<slash]), 0o755)  // /run/keyway, for the notes and the socket; kept as it is
        }
        let notesDirectory = AvailabilityNote.directory(besideSocket: socketPath)
        let notes: AvailabilityNotes?
        if noteLimit == 0 || store is PostgresStore {
            AvailabilityNotes.discard(directory: notesDirectory)
            notes = nil
        } else {
            do {
                notes = try AvailabilityNotes(directory: notesDirectory, limit: noteLimit) {
                    user throws(AuthenticationError) in try vault.noted(user)
                }
                Server.log("availability notes: \(notesDirectory), at most \(noteLimit)")
            } catch {
                Server.log("availability notes are off (every prompt asks first): \(error.reason)")
                notes = nil
            }
        }
        let listener: Int32
        var ownSocket: String? = nil
        if let inherited = inheritedSocket() {
            listener = inherited
        } else {
            switch UnixSocket.listen(at: socketPath, mode: 0o666) {
            case .success(let fd): listener = fd
            case .failure(let failure):
                Server.log("\(failure)")
                exit(ExitStatus.systemError)
            }
            ownSocket = socketPath
        }
        // No request but the arming lease of a root host carries a descriptor: the kernel refuses the rest before
        // they reach keywayd (Linux 6.16 and later); elsewhere each is received and disposed of (keywayd(8)).
        if kernelRefusal && UnixSocket.acceptDescriptors(false, on: listener) {
            Server.log("passed descriptors: refused by the kernel (SO_PASSRIGHTS)")
        } else {
            Server.log("passed descriptors: received and disposed of by keywayd (no SO_PASSRIGHTS)")
        }
        // Room for what the limits let clients make keywayd hold at once: every connection place with a message's
        // worth of passed descriptors in hand, at each depth a Unix socket can nest them (keywayd(8), DESCRIPTORS).
        let places = options.maximumRootConnections + options.maximumOtherConnections + 64
        let wanted = UInt64(places * Int(KEYWAY_MAX_PASSED) * 5 + 1024)
        switch DescriptorLimit.raise(to: wanted) {
        case .success(let limit): Server.log("descriptors: up to \(limit) open at once")
        case .failure(let limit):
            Server.log("descriptors: up to \(limit.limit) open at once, fewer than the \(wanted) the limits need")
        }
        var bound = stat()
        let ownInode = ownSocket.flatMap { stat($0, &bound) == 0 ? bound.st_ino : nil }
        Server.log(
            "serving \(vaultOptions.storePath) on \(ownSocket ?? "the socket systemd passed") "
                + "with \(options.workers) workers, queue \(options.queueLimit)")
        let limit = options.unenrolledCounterLimit
        let auditRows = options.auditRowLimit
        let server = Server(
            service: VaultService(
                vault: vault, factors: Factors.all,
                now: MonotonicClock.milliseconds,
                accountUID: { name in if case .success(let uid?) = Accounts.uid(of: name) { uid } else { nil } },
                firstEnrollment: { user, factor in
                    // The policies that apply to the account, as the module would choose its variant.
                    loaded.letsEnrollFirst(
                        factor,
                        for: Configuration.Subject(user: user) {
                            Accounts.isMember(user, of: $0).mapError { AuthenticationError(.invalidPolicy, "\($0)") }
                        })
                }),
            options: options, arming: arming, notes: notes, telemetry: telemetry,
            checks: { [vaultOptions, configPath, backends = arming.backends] in
                Health.checks(
                    store: store, vault: vault, storePath: vaultOptions.storePath, telemetry: telemetry,
                    configPath: configPath, settings: vaultOptions.settings, backends: backends)
            }
        ) {
            // Names without an enrollment keep counters (concealment); cap them (Store.pruneCounters).
            do throws(AuthenticationError) {
                let cleared = try vault.store.pruneCounters(ofUnenrolledKeeping: limit)
                if cleared > 0 { Server.log("cleared the counters of \(cleared) names without an enrollment") }
            } catch {
                Server.log("cannot prune counters: \(error.reason)")
            }
            do throws(AuthenticationError) {
                let dropped = try vault.store.pruneAudit(keeping: auditRows)
                if dropped > 0 { Server.log("dropped the \(dropped) oldest audit rows (the trail keeps \(auditRows))") }
            } catch {
                Server.log("cannot prune the audit trail: \(error.reason)")
            }
        }
        // Only the socket this process made: another keywayd may have replaced it since.
        let madeSocket = ownSocket
        @Sendable func removeOwnSocket() {
            var now = stat()
            if let madeSocket, let ownInode, stat(madeSocket, &now) == 0, now.st_ino == ownInode { unlink(madeSocket) }
        }
        // Stopped: no note may outlive the keywayd that wrote it, or a module would prompt for what nobody can check.
        // An idle exit keeps them: the socket (systemd's) starts the next keywayd, which empties them.
        let stopping = Termination.onSignal { signal in
            removeOwnSocket()
            notes?.removeAll()
            telemetry.finish()
            Server.log("stopping on signal \(signal)")
        }
        if !stopping { Server.log("cannot wait for SIGTERM: keywayd will stop without removing its socket and notes") }
        telemetry.startWriting()
        guard server.run(listener) else { exit(ExitStatus.systemError) }
        removeOwnSocket()
        telemetry.finish()
        Server.log("idle for \(options.idleExit / 1000) s; exiting")
        exit(ExitStatus.success)
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
        exit(ExitStatus.usage)
    }
}
