import CKeywayLibc
import Dispatch
public import KeywayCore
import KeywayPlatform
public import KeywayWire
import Synchronization

/// What an operator watches, from what keywayd sees (docs/ARCHITECTURE.md §20): every answered request, every audit
/// row its store writes (`ObservedStore`), the fleet's database going away and coming back, and the decisions the
/// module reports. Each becomes counts in `metrics` and, for the kinds an operator acts on, an `Event` sent to the
/// journal; the metrics are written for node_exporter's textfile collector at most once a second.
public final class Telemetry: Sendable {
    // The families, in the order the exposition lists them (keywayd(8), METRICS).
    public static let up = Metrics.Family(
        "keyway_up", .gauge, "1 while keywayd runs; 0 in the file it leaves when it exits (idle, or stopped).")
    public static let decisions = Metrics.Family(
        "keyway_decisions_total", .counter,
        "Decisions the PAM module reported, by service, policy and result; caller=\"user\" for a module running as "
            + "the person (a screen locker), whose report is that person's claim.",
        labels: ["service", "policy", "result", "caller"])
    public static let decisionSeconds = Metrics.Family(
        "keyway_decision_duration_seconds", .histogram,
        "How long a decision took in the module, prompts included.", labels: ["result"],
        buckets: [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120])
    public static let attempts = Metrics.Family(
        "keyway_attempts_total", .counter,
        "Verifications keywayd answered, by factor (unknown: a name keywayd keeps no factor of) and result (success, "
            + "mismatch, repeat: a recent wrong secret again, refunded; malformed, no-sample, not-enrolled; refused: "
            + "locked or made to wait; error).",
        labels: ["factor", "result"])
    public static let events = Metrics.Family(
        "keyway_events_total", .counter,
        "Events sent to the journal, by kind (lockout, unlocked, reset, enrollment, recovery-code-used, pass-issued, "
            + "pass-used, possible-clone, database-away, database-back) and factor.",
        labels: ["event", "factor"])
    public static let lockedAccounts = Metrics.Family(
        "keyway_locked_accounts", .gauge,
        "Accounts whose factor is locked or made to wait now, local or remote (of at most 10000 with failures).",
        labels: ["factor"])
    public static let storeUp = Metrics.Family(
        "keyway_store_up", .gauge, "1 when the store answered keywayd's last reading of it, else 0.")
    public static let storeSeconds = Metrics.Family(
        "keyway_store_operation_seconds", .histogram, "How long the store took to read or write, per call.",
        labels: ["operation"], buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1])
    public static let storeErrors = Metrics.Family(
        "keyway_store_errors_total", .counter, "Store calls that failed, by operation.", labels: ["operation"])
    public static let requestSeconds = Metrics.Family(
        "keyway_request_duration_seconds", .histogram,
        "How long keywayd took to answer, by request (verify includes the slow hash).", labels: ["request"],
        buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10])
    public static let hashQueue = Metrics.Family(
        "keyway_hash_queue_length", .gauge, "Requests waiting for a worker of the slow hash now.")
    public static let hashBusy = Metrics.Family(
        "keyway_hash_workers_busy", .gauge, "Workers running the slow hash now.")

    /// Every family, in order.
    public static let families = [
        up, decisions, decisionSeconds, attempts, events, lockedAccounts, storeUp, storeSeconds, storeErrors,
        requestSeconds, hashQueue, hashBusy,
    ]

    /// Where and how keywayd reports.
    public struct Options: Sendable {
        /// The textfile collector's file (`--metrics`), or nil for none (`keyway metrics` still answers).
        public var file: String? = "/var/lib/prometheus/node-exporter/keyway.prom"
        /// The journal's socket, or nil to send nothing there (`--journal no`).
        public var journal: String? = Journal.socketPath
        /// Accounts with failures read for `keyway_locked_accounts`.
        public var lockScanLimit = 10_000
        /// Milliseconds between readings of the lockouts when nothing changed them.
        public var lockScanInterval: Int64 = 15_000

        public init() {}
    }

    public let metrics = Metrics(Telemetry.families)
    public let options: Options
    /// The vault, to read an account's lockouts before and after a verification (`attach`): nil until then.
    private let attached = Mutex<LocalVault?>(nil)
    var vault: LocalVault? { attached.withLock { $0 } }
    /// Distinct services and policies named in the decisions' labels so far (bounded: `boundedLabel`).
    private let named = Mutex<(services: Set<String>, policies: Set<String>)>(([], []))
    /// Set when the file is behind the counts; cleared by the writer.
    private let dirty = Atomic<Bool>(true)
    /// True while the writer runs (`startWriting` to `finish`).
    private let writing = Atomic<Bool>(false)
    /// The lockout gauge's last reading, when it was made, and whether something may have changed it since.
    private let lockReading = Mutex<(counts: [FactorKind: Int], at: Int64?, stale: Bool, up: Bool)>(
        ([:], nil, true, false))
    /// The worker pool's load (waiting, running), from the server once it runs.
    let poolLoad = Mutex<(@Sendable () -> (waiting: Int, running: Int))?>(nil)
    /// The last store write that failed, and when (monotonic ms), until a later write succeeds.
    let lastWriteFailure = Mutex<(at: Int64, reason: String)?>(nil)

    /// The last store write that failed, and when (monotonic ms), unless a later write succeeded.
    public var lastWriteFailed: (at: Int64, reason: String)? { lastWriteFailure.withLock { $0 } }
    /// Why the last attempt to write the textfile failed, or nil when it was written (or none was tried).
    let fileFailure = Mutex<String?>(nil)
    /// Why the metrics file could not be written the last time it was tried, for `keyway health`.
    public var fileProblem: String? { fileFailure.withLock { $0 } }

    /// Creates the telemetry, taking back the counts of the file the last keywayd wrote. The vault comes later
    /// (`attach`): its store reports here (`ObservedStore`), so it is opened after this.
    public init(options: Options) {
        self.options = options
        if let file = options.file {
            switch KeptFiles.read(file, limit: 4 << 20) {
            case .success(let bytes?):
                let taken = metrics.restore(String(decoding: bytes, as: UTF8.self))
                Server.log("metrics: \(file), \(taken) samples taken back from the last keywayd")
            case .success(nil): Server.log("metrics: \(file)")
            case .failure(let failure): Server.log("metrics: \(file): not taken back: \(failure.reason)")
            }
        }
    }

    /// The vault whose accounts' lockouts are read. Series of `keyway_attempts_total` taken back from the last
    /// keywayd for a factor this one does not keep are forgotten: only keepers' names are labels.
    public func attach(_ vault: LocalVault) {
        attached.withLock { $0 = vault }
        let known = Set(vault.keepers.map { $0.factor.rawValue } + [Self.unknownFactor])
        metrics.forget(Self.attempts) { labels in !known.contains(labels[0]) }
    }

    /// The factor label of a verification of a factor keywayd keeps no keeper for: the name came off the wire, from
    /// any local user, so it never becomes a label of its own.
    static let unknownFactor = "unknown"

    /// `factor` as a label: its name when keywayd keeps it, else `unknownFactor`.
    func label(of factor: FactorKind) -> String {
        vault?.keepers.contains { $0.factor == factor } == true ? factor.rawValue : Self.unknownFactor
    }

    // MARK: Events

    /// Counts `event` and sends it to the journal.
    public func record(_ event: Event) {
        metrics.add(Self.events, [event.kind.rawValue, event["KEYWAY_FACTOR"] ?? ""])
        if let journal = options.journal { Journal.send(event, identifier: "keywayd", to: journal) }
        Server.logLimited(event.message)
        switch event.kind {
        case .lockout, .unlocked, .reset, .enrollment: lockReading.withLock { $0.stale = true }
        case .success, .failure, .recoveryCodeUsed, .passIssued, .passUsed, .possibleClone, .databaseAway,
            .databaseBack:
            break
        }
        dirty.store(true, ordering: .relaxed)
    }

    /// The event of an audit row the store wrote, if it is one an operator watches (a switch is not).
    public func audited(_ entry: AuditEntry) {
        let factor = entry.factor?.rawValue ?? "all"
        var fields = [Event.Field("KEYWAY_USER", entry.user), Event.Field("KEYWAY_ACTOR", entry.actor)]
        if let factor = entry.factor { fields.append(Event.Field("KEYWAY_FACTOR", factor.rawValue)) }
        if let detail = entry.detail { fields.append(Event.Field("KEYWAY_DETAIL", detail)) }
        let event: Event
        switch entry.action {
        case .enroll where entry.factor == .pass:
            event = Event(.passIssued, "\(entry.actor) issued a temporary pass for \(entry.user)", fields)
        case .enroll:
            event = Event(.enrollment, "\(entry.actor) enrolled the \(factor) of \(entry.user)", fields)
        case .remove:
            event = Event(.enrollment, "\(entry.actor) removed the \(factor) of \(entry.user)", fields)
        case .reset:
            event = Event(.reset, "\(entry.actor) reset the \(factor) counters of \(entry.user)", fields)
        case .use where entry.factor == .pass:
            event = Event(.passUsed, "\(entry.user) used a temporary pass", fields)
        case .use:
            event = Event(.recoveryCodeUsed, "\(entry.user) used a \(factor) code", fields)
        case .mark:
            event = Event(
                .possibleClone, "the \(factor) of \(entry.user) may have been cloned: \(entry.detail ?? "")", fields)
        case .set:
            return
        }
        record(event)
    }

    /// The fleet's database went away (`away`) or came back.
    public func database(away: Bool, _ line: String) {
        record(Event(away ? .databaseAway : .databaseBack, line, [Event.Field("KEYWAY_STORE", "database")]))
    }

    /// A store call's time and outcome (`ObservedStore`).
    public func stored(_ operation: ObservedStore.Operation, nanoseconds: Int64, _ error: AuthenticationError?) {
        metrics.observe(Self.storeSeconds, [operation.rawValue], Double(nanoseconds) / 1e9)
        if error != nil { metrics.add(Self.storeErrors, [operation.rawValue]) }
        if operation == .write {
            lastWriteFailure.withLock { last in
                last = error.map { (MonotonicClock.milliseconds(), $0.reason) }
            }
        }
        dirty.store(true, ordering: .relaxed)
    }

    // MARK: Requests

    /// The account whose lockouts a request may change (a verification that was allowed), read before it runs.
    public func lockoutsBefore(_ request: Request, by caller: VaultService.Caller) -> (String, Set<FactorKind>)? {
        guard let vault, VaultService.refusal(of: request, by: caller) == nil else { return nil }
        switch request {
        case .verify(_, let user, _), .claim(_, let user, _):
            return (try? vault.lockedFactors(of: user.name)).map { (user.name, $0) }
        case .availability, .enroll, .offer, .change, .remove, .status, .reset, .audit, .set, .arm,
            .enrollAtDevice, .report, .metrics, .health:
            return nil
        }
    }

    /// Counts what `request` was answered and what it changed: the attempts it settled, the lockouts it started or
    /// ended (from `before`), the decision it reported.
    public func answered(
        _ request: Request, by caller: VaultService.Caller, _ answer: Response, milliseconds: Int64,
        before: (String, Set<FactorKind>)?
    ) {
        metrics.observe(Self.requestSeconds, [request.name], Double(milliseconds) / 1000)
        dirty.store(true, ordering: .relaxed)
        // One enum at a time: a switch over the pair of them made the optimizer take minutes.
        let asked: (FactorKind, UserContext)
        switch request {
        case .verify(let factor, let user, _), .claim(let factor, let user, _): asked = (factor, user)
        case .report(let decision):
            if answer == .done { reported(decision, by: caller) }
            return
        case .availability, .enroll, .offer, .change, .remove, .status, .reset, .audit, .set, .arm,
            .enrollAtDevice, .metrics, .health:
            return
        }
        let (factor, context) = asked
        let verdicts: [Verdict]
        switch answer {
        case .verdict(let verdict): verdicts = [verdict]
        case .verdicts(let list): verdicts = list
        case .failure(let error):
            if error.code != .notPermitted {
                metrics.add(Self.attempts, [label(of: factor), error.code.isLockout ? "refused" : "error"])
            }
            return
        case .done, .removed, .availability, .status, .audit, .armed, .offered, .progress, .text, .health:
            return
        }
        for verdict in verdicts { metrics.add(Self.attempts, [label(of: factor), Self.result(verdict)]) }
        guard let (user, locked) = before, user == context.name, let vault else { return }
        let failed = verdicts.contains { $0 != .success }
        let succeeded = verdicts.contains(.success)
        guard failed || (succeeded && !locked.isEmpty), let after = try? vault.lockedFactors(of: user) else { return }
        var fields = [
            Event.Field("KEYWAY_USER", user), Event.Field("KEYWAY_SERVICE", context.service),
            Event.Field("KEYWAY_REMOTE", context.isRemote ? "yes" : "no"),
        ]
        for newly in after.subtracting(locked).sorted() {
            var reason = "too many failed attempts"
            let channel = AttemptBook.Channel(remote: context.isRemote)
            if case .lockedOut(let until, let why)? = try? vault.keeper(newly).gate.availability(
                for: user, in: channel, whenAllowed: .notEnrolled)
            {
                reason = until.map { "\(why); until \($0)" } ?? why
            }
            record(
                Event(
                    .lockout, "\(newly) locked for \(user): \(reason)",
                    fields + [Event.Field("KEYWAY_FACTOR", newly.rawValue), Event.Field("KEYWAY_REASON", reason)]))
        }
        if succeeded {
            fields.append(Event.Field("KEYWAY_BY", factor.rawValue))
            for cleared in locked.subtracting(after).sorted() {
                record(
                    Event(
                        .unlocked, "\(cleared) unlocked for \(user) by the \(factor)",
                        fields + [Event.Field("KEYWAY_FACTOR", cleared.rawValue)]))
            }
        }
    }

    /// A decision the module reported, in `keyway_decisions_total` and the duration histogram.
    private func reported(_ decision: Decision, by caller: VaultService.Caller) {
        let service = boundedLabel(decision.service, \.services)
        let policy = boundedLabel(decision.policy, \.policies)
        metrics.add(Self.decisions, [service, policy, decision.result.rawValue, caller.isRoot ? "root" : "user"])
        metrics.observe(Self.decisionSeconds, [decision.result.rawValue], Double(decision.milliseconds) / 1000)
    }

    /// A verdict's word in `keyway_attempts_total`.
    static func result(_ verdict: Verdict) -> String {
        switch verdict {
        case .success: "success"
        case .failure(.mismatch): "mismatch"
        case .failure(.repeatedMismatch): "repeat"
        case .failure(.malformed): "malformed"
        case .failure(.noSample): "no-sample"
        case .failure(.notEnrolled): "not-enrolled"
        }
    }

    /// A service's or policy's name as a label: printable ASCII, at most 64 bytes, and at most 32 distinct names
    /// of each (the rest are `other`), so no caller can grow the series without bound.
    private func boundedLabel(
        _ text: String, _ set: WritableKeyPath<(services: Set<String>, policies: Set<String>), Set<String>>
    ) -> String {
        let kept = text.unicodeScalars.filter { (0x21...0x7E).contains($0.value) }.prefix(64)
        let label = String(String.UnicodeScalarView(kept))
        guard !label.isEmpty else { return "other" }
        return named.withLock { named in
            if named[keyPath: set].contains(label) { return label }
            guard named[keyPath: set].count < 32 else { return "other" }
            named[keyPath: set].insert(label)
            return label
        }
    }

    // MARK: The exposition

    /// The exposition now: the counts, and the gauges read as it is made (the lockouts at most every
    /// `lockScanInterval` unless an event changed them; the pool's load). `running` is false for the file
    /// keywayd leaves as it exits.
    public func exposition(running: Bool = true) -> String {
        var gauges: [(Metrics.Family, [String], Double)] = [(Self.up, [], running ? 1 : 0)]
        let (counts, up) = lockouts()
        for factor in (vault?.keepers.map { $0.factor } ?? []) {
            gauges.append((Self.lockedAccounts, [factor.rawValue], Double(counts[factor] ?? 0)))
        }
        gauges.append((Self.storeUp, [], up ? 1 : 0))
        if running, let load = poolLoad.withLock({ $0 })?() {
            gauges.append((Self.hashQueue, [], Double(load.waiting)))
            gauges.append((Self.hashBusy, [], Double(load.running)))
        }
        return metrics.render(gauges: gauges)
    }

    /// The lockout gauge and whether the store answered, read again when stale or old.
    private func lockouts() -> ([FactorKind: Int], Bool) {
        let now = MonotonicClock.milliseconds()
        let reading = lockReading.withLock { $0 }
        if !reading.stale, let at = reading.at, now - at < options.lockScanInterval {
            return (reading.counts, reading.up)
        }
        guard let vault else { return ([:], false) }
        let fresh: ([FactorKind: Int], Bool)
        do { fresh = (try vault.lockedAccounts(limit: options.lockScanLimit), true) } catch { fresh = ([:], false) }
        lockReading.withLock { $0 = (fresh.0, now, false, fresh.1) }
        return fresh
    }

    /// Writes the textfile now if anything changed since it was last written; false when it could not be written.
    @discardableResult
    public func write(running: Bool = true, force: Bool = false) -> Bool {
        guard let file = options.file else { return true }
        guard force || dirty.exchange(false, ordering: .relaxed) else { return true }
        let slash = file.lastIndex(of: "/")
        let directory = slash.map { $0 == file.startIndex ? "/" : String(file[..<$0]) } ?? "."
        let name = slash.map { String(file[file.index(after: $0)...]) } ?? file
        let dir = keyway_open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0)
        let written =
            dir >= 0 && KeptFiles.replace(name, in: dir, with: Array(exposition(running: running).utf8), mode: 0o644)
        if !written {
            let why = String(cString: strerror(keyway_errno()))
            fileFailure.withLock { $0 = "cannot write \(file) (\(why)): its directory must exist and be writable" }
            dirty.store(true, ordering: .relaxed)  // tried again next second
        } else {
            fileFailure.withLock { $0 = nil }
        }
        if dir >= 0 { close(dir) }
        return written
    }

    /// Starts the writer: the file at most once a second while counts change, on a thread of its own, until `finish`.
    public func startWriting() {
        guard options.file != nil, !writing.exchange(true, ordering: .relaxed) else { return }
        if !spawn({ [self] in writeEverySecond() }) { Server.log("metrics: no thread to write them; written at exit") }
    }

    private func writeEverySecond() {
        var warned = false
        while writing.load(ordering: .relaxed) {
            if !write(), !warned {
                Server.log(
                    "metrics: cannot write \(options.file ?? ""): its directory must exist and be writable "
                        + "(keyway metrics still answers)")
                warned = true
            }
            usleep(1_000_000)
        }
    }

    /// Stops the writer and writes the file a last time, with `keyway_up 0`: keywayd is exiting.
    public func finish() {
        writing.store(false, ordering: .relaxed)
        write(running: false, force: true)
    }
}
