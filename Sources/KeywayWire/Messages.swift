public import KeywayCore

/// A question to keywayd: one `Vault` call. The caller's identity is never in it: keywayd takes it from the
/// socket (`SO_PEERCRED`). Actors are the tool's words ("keyway change"); keywayd prefixes the caller's name.
public enum Request: Sendable, Equatable {
    case availability(FactorKind, UserContext)
    case verify(FactorKind, UserContext, Evidence)
    case enroll(FactorKind, user: String, label: String?, Evidence, via: String)
    /// A new shared secret for the factor (`Vault.offer`): answered with `.offered`, kept by keywayd until an
    /// `enroll` confirms it.
    case offer(FactorKind, user: String, via: String)
    case change(FactorKind, user: String, current: Secret, new: Secret, via: String)
    case remove(FactorKind, user: String, label: String?, via: String)
    case status(user: String?)
    case reset(FactorKind?, user: String, via: String)
    case audit(user: String?)
    /// Sets one of the user's switches (`keyway enable|disable|set`).
    case set(key: String, user: String, value: Bool, via: String)
    /// Arms the factor for this authentication (`first of`): keywayd waits at the device, matching and counting
    /// what is presented, at most `attempts` counted failures, for as long as this connection stays open; the
    /// answer is `.armed` with the nonce that `claim` names. With `waits`, a sensor another authentication holds is
    /// waited for in line (the sequential wait); without, it is "in use" at once (`first of` asks the typed factor).
    /// `typed` is what the person typed for the device (a security key's PIN): used for this lease only, never kept.
    case arm(FactorKind, UserContext, attempts: Int, waits: Bool = false, typed: Secret? = nil)
    /// What was presented since the arming named by `nonce` (or since the last claim): `.verdicts`.
    case claim(FactorKind, UserContext, nonce: [UInt8])
    /// Enrolls `label` at the device keywayd drives (fprintd's reader; `Vault.enrollAtDevice`): answered by a
    /// `.progress` for each step, then `.done` or `.failure`. Root only. `typed` as for `arm`.
    case enrollAtDevice(FactorKind, user: String, label: String?, via: String, typed: Secret? = nil)
    /// The module's decision, for keywayd's metrics (`.done`): root may report any account's, anyone else only
    /// their own (a screen locker), counted apart (docs/ARCHITECTURE.md §20).
    case report(Decision)
    /// keywayd's metrics in Prometheus's text format (`.text`). Anyone: they name no account.
    case metrics
    /// keywayd's checks of itself, the store, the configuration and the readers (`.health`). Anyone.
    case health

    /// The kind byte of each request.
    enum Kind: UInt8 {
        case availability = 1, verify, enroll, change, remove, status, reset, audit, set, arm, claim, offer,
            enrollAtDevice, report, metrics, health
    }

    /// The request's name, for logs.
    public var name: String {
        switch self {
        case .availability: "availability"
        case .verify: "verify"
        case .enroll: "enroll"
        case .offer: "offer"
        case .change: "change"
        case .remove: "remove"
        case .status: "status"
        case .reset: "reset"
        case .audit: "audit"
        case .set: "set"
        case .arm: "arm"
        case .claim: "claim"
        case .enrollAtDevice: "enroll at the device"
        case .report: "report"
        case .metrics: "metrics"
        case .health: "health"
        }
    }

    /// The user the request is about, if one.
    /// Who started the authentication this request belongs to (`UserContext.startedBy`), for the requests that
    /// carry a context.
    public var startedBy: UInt32? {
        switch self {
        case .availability(_, let context), .verify(_, let context, _), .arm(_, let context, _, _, _),
            .claim(_, let context, _):
            context.startedBy
        case .enroll, .offer, .change, .remove, .reset, .status, .audit, .set, .enrollAtDevice, .report, .metrics,
            .health:
            nil
        }
    }

    /// The request with `startedBy` set to `uid` in its context (a request without one is returned as it is).
    public func started(by uid: UInt32) -> Request {
        func with(_ context: UserContext) -> UserContext {
            var context = context
            context.startedBy = uid
            return context
        }
        switch self {
        case .availability(let factor, let context): return .availability(factor, with(context))
        case .verify(let factor, let context, let evidence): return .verify(factor, with(context), evidence)
        case .arm(let factor, let context, let attempts, let waits, let typed):
            return .arm(factor, with(context), attempts: attempts, waits: waits, typed: typed)
        case .claim(let factor, let context, let nonce): return .claim(factor, with(context), nonce: nonce)
        case .enroll, .offer, .change, .remove, .reset, .status, .audit, .set, .enrollAtDevice, .report, .metrics,
            .health:
            return self
        }
    }

    public var user: String? {
        switch self {
        case .availability(_, let context), .verify(_, let context, _), .arm(_, let context, _, _, _),
            .claim(_, let context, _):
            context.name
        case .enroll(_, let user, _, _, _), .change(_, let user, _, _, _), .remove(_, let user, _, _),
            .reset(_, let user, _), .offer(_, let user, _), .enrollAtDevice(_, let user, _, _, _):
            user
        case .status(let user), .audit(let user): user
        case .set(_, let user, _, _): user
        case .report(let decision): decision.user
        case .metrics, .health: nil
        }
    }

    /// The body, unframed. Holds secrets: wipe it after sending.
    public var encoded: [UInt8] {
        var out: WireWriter
        switch self {
        case .availability(let factor, let user):
            out = WireWriter(kind: Kind.availability.rawValue)
            out.string(factor.rawValue)
            out.context(user)
        case .verify(let factor, let user, let evidence):
            out = WireWriter(kind: Kind.verify.rawValue, capacity: room(user.name, user.service, evidence: evidence))
            out.string(factor.rawValue)
            out.context(user)
            out.evidence(evidence)
        case .enroll(let factor, let user, let label, let evidence, let via):
            out = WireWriter(kind: Kind.enroll.rawValue, capacity: room(user, label ?? "", via, evidence: evidence))
            out.string(factor.rawValue)
            out.string(user)
            out.optional(label) { $0.string($1) }
            out.evidence(evidence)
            out.string(via)
        case .offer(let factor, let user, let via):
            out = WireWriter(kind: Kind.offer.rawValue)
            out.string(factor.rawValue)
            out.string(user)
            out.string(via)
        case .change(let factor, let user, let current, let new, let via):
            out = WireWriter(
                kind: Kind.change.rawValue, capacity: room(user, via) + current.count + new.count)
            out.string(factor.rawValue)
            out.string(user)
            out.secret(current)
            out.secret(new)
            out.string(via)
        case .remove(let factor, let user, let label, let via):
            out = WireWriter(kind: Kind.remove.rawValue)
            out.string(factor.rawValue)
            out.string(user)
            out.optional(label) { $0.string($1) }
            out.string(via)
        case .status(let user):
            out = WireWriter(kind: Kind.status.rawValue)
            out.optional(user) { $0.string($1) }
        case .reset(let factor, let user, let via):
            out = WireWriter(kind: Kind.reset.rawValue)
            out.optional(factor) { $0.string($1.rawValue) }
            out.string(user)
            out.string(via)
        case .audit(let user):
            out = WireWriter(kind: Kind.audit.rawValue)
            out.optional(user) { $0.string($1) }
        case .set(let key, let user, let value, let via):
            out = WireWriter(kind: Kind.set.rawValue)
            out.string(key)
            out.string(user)
            out.bool(value)
            out.string(via)
        case .arm(let factor, let user, let attempts, let waits, let typed):
            out = WireWriter(kind: Kind.arm.rawValue)
            out.string(factor.rawValue)
            out.context(user)
            out.u32(attempts)
            out.bool(waits)
            out.optional(typed) { $0.secret($1) }
        case .claim(let factor, let user, let nonce):
            out = WireWriter(kind: Kind.claim.rawValue)
            out.string(factor.rawValue)
            out.context(user)
            out.data(nonce)
        case .enrollAtDevice(let factor, let user, let label, let via, let typed):
            out = WireWriter(kind: Kind.enrollAtDevice.rawValue)
            out.string(factor.rawValue)
            out.string(user)
            out.optional(label) { $0.string($1) }
            out.string(via)
            out.optional(typed) { $0.secret($1) }
        case .report(let decision):
            out = WireWriter(kind: Kind.report.rawValue)
            out.string(decision.user)
            out.string(decision.service)
            out.string(decision.policy)
            out.string(decision.result.rawValue)
            out.i64(decision.milliseconds)
        case .metrics:
            out = WireWriter(kind: Kind.metrics.rawValue)
        case .health:
            out = WireWriter(kind: Kind.health.rawValue)
        }
        return out.bytes
    }

    /// Enough bytes for a request with these strings and this evidence, so its buffer is allocated once.
    private func room(_ strings: String..., evidence: Evidence? = nil) -> Int {
        var total = 256 + strings.reduce(0) { $0 + $1.utf8.count + 4 }
        switch evidence {
        case .secret(let secret)?: total += secret.count + 4
        case .samples(let samples)?: total += samples.reduce(4) { $0 + 4 + 8 * $1.count }
        case .device?, nil: break
        }
        return total
    }

    /// Reads a request body, refusing anything that is not exactly one well-formed request.
    public init(decoding bytes: [UInt8]) throws(WireError) {
        guard bytes.count <= Wire.maximumRequest else {
            throw WireError("a request of \(bytes.count) bytes is larger than the \(Wire.maximumRequest) accepted")
        }
        var input = try WireReader(bytes)
        guard let kind = Kind(rawValue: input.kind) else { throw WireError("request kind \(input.kind) is unknown") }
        switch kind {
        case .availability:
            self = .availability(try input.factor(), try input.context())
        case .verify:
            self = .verify(try input.factor(), try input.context(), try input.evidence())
        case .enroll:
            let factor = try input.factor()
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            let label = try input.optional("the label") { reader throws(WireError) in try reader.string("the label") }
            self = .enroll(factor, user: user, label: label, try input.evidence(), via: try input.string("the tool"))
        case .offer:
            let factor = try input.factor()
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            self = .offer(factor, user: user, via: try input.string("the tool"))
        case .change:
            let factor = try input.factor()
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            let current = try input.secret("the current secret")
            self = .change(
                factor, user: user, current: current, new: try input.secret("the new secret"),
                via: try input.string("the tool"))
        case .remove:
            let factor = try input.factor()
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            let label = try input.optional("the label") { reader throws(WireError) in try reader.string("the label") }
            self = .remove(factor, user: user, label: label, via: try input.string("the tool"))
        case .status:
            self = .status(user: try input.optionalUser())
        case .reset:
            let factor = try input.optional("the factor") { reader throws(WireError) in try reader.factor() }
            self = .reset(
                factor, user: try input.string("the user", limit: UserContext.maximumNameLength),
                via: try input.string("the tool"))
        case .audit:
            self = .audit(user: try input.optionalUser())
        case .set:
            let key = try input.string("the switch", limit: 64)
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            self = .set(key: key, user: user, value: try input.bool("the value"), via: try input.string("the tool"))
        case .arm:
            let factor = try input.factor()
            let user = try input.context()
            let attempts = try input.u32("the attempts")
            guard (1...20).contains(attempts) else { throw WireError("\(attempts) attempts is not from 1 to 20") }
            let waits = try input.bool("waits")
            self = .arm(factor, user, attempts: attempts, waits: waits, typed: try input.typedForDevice())
        case .claim:
            self = .claim(try input.factor(), try input.context(), nonce: Array(try input.data("the nonce", limit: 64)))
        case .enrollAtDevice:
            let factor = try input.factor()
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            let label = try input.optional("the label") { reader throws(WireError) in try reader.string("the label") }
            let via = try input.string("the tool")
            self = .enrollAtDevice(factor, user: user, label: label, via: via, typed: try input.typedForDevice())
        case .report:
            let user = try input.string("the user", limit: UserContext.maximumNameLength)
            let service = try input.string("the service", limit: 256)
            let policy = try input.string("the policy", limit: 256)
            guard let result = Decision.Result(rawValue: try input.string("the result", limit: 16)) else {
                throw WireError("the result is not success, failure or ignored")
            }
            let milliseconds = try input.i64("the time")
            guard milliseconds >= 0 else { throw WireError("a decision cannot take \(milliseconds) ms") }
            self = .report(
                Decision(user: user, service: service, policy: policy, result: result, milliseconds: milliseconds))
        case .metrics:
            self = .metrics
        case .health:
            self = .health
        }
        try input.finish()
    }
}

/// keywayd's answer to one request.
public enum Response: Sendable, Equatable {
    /// Done (enroll, change, reset).
    case done
    /// Whether something was removed.
    case removed(Bool)
    case availability(Availability)
    case verdict(Verdict)
    case status([UserStatus])
    case audit([AuditEntry])
    /// The factor is armed for this authentication; `claim` names it by this nonce.
    case armed(nonce: [UInt8])
    /// What was presented since arming or the last claim, oldest first.
    case verdicts([Verdict])
    /// A new shared secret (`offer`), to be shown once.
    case offered([UInt8])
    /// One step of an enrollment at the device ("Place your finger on the reader (2 of 5)"); more frames follow.
    case progress(String)
    /// Text to print as it is (`metrics`: Prometheus's text format).
    case text(String)
    /// keywayd's checks (`health`), in order.
    case health([HealthCheck])
    /// The request failed, was refused, or keywayd was busy: nothing was counted unless the error says so.
    case failure(AuthenticationError)

    enum Kind: UInt8 {
        case done = 1, removed, availability, verdict, status, audit, failure, armed, verdicts, offered, progress,
            text, health
    }

    /// The body, unframed.
    public var encoded: [UInt8] {
        var out: WireWriter
        switch self {
        case .done:
            out = WireWriter(kind: Kind.done.rawValue)
        case .removed(let removed):
            out = WireWriter(kind: Kind.removed.rawValue)
            out.bool(removed)
        case .availability(let availability):
            out = WireWriter(kind: Kind.availability.rawValue)
            out.availability(availability)
        case .armed(let nonce):
            out = WireWriter(kind: Kind.armed.rawValue)
            out.data(nonce)
        case .offered(let secret):
            out = WireWriter(kind: Kind.offered.rawValue)
            out.data(secret)
        case .progress(let text):
            out = WireWriter(kind: Kind.progress.rawValue)
            out.string(text)
        case .text(let text):
            out = WireWriter(kind: Kind.text.rawValue)
            out.string(text)
        case .health(let checks):
            out = WireWriter(kind: Kind.health.rawValue)
            out.u32(checks.count)
            for check in checks {
                out.string(check.name)
                out.u8(check.level.rawValue)
                out.string(check.detail)
            }
        case .verdicts(let verdicts):
            out = WireWriter(kind: Kind.verdicts.rawValue)
            out.u32(verdicts.count)
            for verdict in verdicts { out.verdict(verdict) }
        case .verdict(let verdict):
            out = WireWriter(kind: Kind.verdict.rawValue)
            out.verdict(verdict)
        case .status(let users):
            out = WireWriter(kind: Kind.status.rawValue)
            out.u32(users.count)
            for user in users {
                out.string(user.user)
                out.u32(user.factors.count)
                for factor in user.factors {
                    out.string(factor.factor.rawValue)
                    out.optional(factor.enrolled) { out, enrolled in
                        out.i64(enrolled.at.milliseconds)
                        out.string(enrolled.by)
                    }
                    out.u32(factor.labels.count)
                    for label in factor.labels { out.string(label) }
                    out.u32(factor.failures)
                    out.availability(factor.availability)
                    out.data(factor.domainState)
                    out.optional(factor.usesLeft) { out, left in out.u32(left) }
                    out.u32(factor.remoteFailures)
                    out.optional(factor.remoteAvailability) { out, availability in out.availability(availability) }
                    out.optional(factor.nextUse) { out, next in out.u32(next) }
                }
                out.u32(user.switches.count)
                for (key, value) in user.switches.sorted(by: { $0.key < $1.key }) {
                    out.string(key)
                    out.bool(value)
                }
            }
        case .audit(let entries):
            out = WireWriter(kind: Kind.audit.rawValue)
            out.u32(entries.count)
            for entry in entries {
                out.i64(entry.at.milliseconds)
                out.string(entry.actor)
                out.string(entry.user)
                out.string(entry.action.rawValue)
                out.optional(entry.factor) { $0.string($1.rawValue) }
                out.optional(entry.detail) { $0.string($1) }
                out.optional(entry.host) { $0.string($1) }
            }
        case .failure(let error):
            out = WireWriter(kind: Kind.failure.rawValue)
            out.error(error)
        }
        return out.bytes
    }

    /// Reads an answer body.
    public init(decoding bytes: [UInt8]) throws(WireError) {
        var input = try WireReader(bytes)
        guard let kind = Kind(rawValue: input.kind) else { throw WireError("answer kind \(input.kind) is unknown") }
        switch kind {
        case .done:
            self = .done
        case .removed:
            self = .removed(try input.bool("removed"))
        case .availability:
            self = .availability(try input.availability())
        case .verdict:
            self = .verdict(try input.verdict())
        case .armed:
            self = .armed(nonce: Array(try input.data("the nonce", limit: 64)))
        case .offered:
            self = .offered(Array(try input.data("the secret", limit: 256)))
        case .progress:
            self = .progress(try input.string("the step", limit: 256))
        case .text:
            self = .text(try input.string("the text", limit: Wire.maximumResponse))
        case .health:
            var checks: [HealthCheck] = []
            for _ in 0..<(try input.count("checks", limit: 256)) {
                let name = try input.string("the check", limit: 256)
                guard let level = HealthCheck.Level(rawValue: try input.u8("the level")) else {
                    throw WireError("a check's level is not 0, 1 or 2")
                }
                checks.append(HealthCheck(name, level, try input.string("the detail", limit: 4096)))
            }
            self = .health(checks)
        case .verdicts:
            var verdicts: [Verdict] = []
            for _ in 0..<(try input.count("verdicts", limit: 64)) { verdicts.append(try input.verdict()) }
            self = .verdicts(verdicts)
        case .status:
            var users: [UserStatus] = []
            for _ in 0..<(try input.count("users", limit: 1_000_000)) {
                let name = try input.string("the user")
                var factors: [UserStatus.FactorStatus] = []
                for _ in 0..<(try input.count("factors", limit: 64)) {
                    let factor = try input.factor()
                    let enrolled = try input.optional("enrolled") { reader throws(WireError) in
                        (
                            Timestamp(milliseconds: try reader.i64("the time")),
                            try reader.string("the actor", limit: 4096)
                        )
                    }
                    var labels: [String] = []
                    for _ in 0..<(try input.count("labels", limit: 64)) { labels.append(try input.string("a label")) }
                    let failures = try input.u32("the failures")
                    let availability = try input.availability()
                    let domainState = Array(try input.data("the domain state", limit: 64))
                    let usesLeft = try input.optional("the uses left") { reader throws(WireError) in
                        try reader.u32("the uses left")
                    }
                    var status = UserStatus.FactorStatus(
                        factor: factor, enrolled: enrolled, labels: labels, failures: failures,
                        availability: availability, domainState: domainState, usesLeft: usesLeft)
                    status.remoteFailures = try input.u32("the remote failures")
                    status.remoteAvailability = try input.optional("the remote availability") {
                        reader throws(WireError) in try reader.availability()
                    }
                    status.nextUse = try input.optional("the next use") { reader throws(WireError) in
                        try reader.u32("the next use")
                    }
                    factors.append(status)
                }
                var switches: [String: Bool] = [:]
                for _ in 0..<(try input.count("switches", limit: 256)) {
                    let key = try input.string("a switch", limit: 64)
                    switches[key] = try input.bool("its value")
                }
                users.append(UserStatus(user: name, factors: factors, switches: switches))
            }
            self = .status(users)
        case .audit:
            var entries: [AuditEntry] = []
            for _ in 0..<(try input.count("entries", limit: 10_000_000)) {
                let at = Timestamp(milliseconds: try input.i64("the time"))
                let actor = try input.string("the actor", limit: 4096)
                let user = try input.string("the user")
                guard let action = AuditEntry.Action(rawValue: try input.string("the action")) else {
                    throw WireError("the audit action is unknown")
                }
                let factor = try input.optional("the factor") { reader throws(WireError) in try reader.factor() }
                let detail = try input.optional("the detail") { reader throws(WireError) in
                    try reader.string("the detail", limit: 256)
                }
                let host = try input.optional("the host") { reader throws(WireError) in
                    try reader.string("the host", limit: 256)
                }
                entries.append(
                    AuditEntry(
                        at: at, actor: actor, user: user, action: action, factor: factor, detail: detail, host: host))
            }
            self = .audit(entries)
        case .failure:
            self = .failure(try input.error())
        }
        try input.finish()
    }
}

extension WireWriter {
    mutating func context(_ user: UserContext) {
        string(user.name)
        string(user.service)
        bool(user.isRemote)
        bool(user.concealsEnrollment)
        bool(user.startedBy != nil)
        if let uid = user.startedBy { u32(Int(uid)) }
    }

    mutating func verdict(_ verdict: Verdict) {
        switch verdict {
        case .success: u8(0)
        case .failure(.mismatch): u8(1)
        case .failure(.repeatedMismatch): u8(2)
        case .failure(.malformed(let why)):
            u8(3)
            string(why)
        case .failure(.noSample(let why)):
            u8(4)
            string(why)
        case .failure(.notEnrolled): u8(5)
        }
    }

    mutating func evidence(_ evidence: Evidence) {
        switch evidence {
        case .secret(let value):
            u8(1)
            secret(value)
        case .samples(let samples):
            u8(2)
            u32(samples.count)
            for sample in samples {
                u32(sample.count)
                for value in sample { double(value) }
            }
        case .device:
            u8(3)  // never sent by keywayd's clients; the decoder refuses it (below)
        }
    }

    mutating func error(_ error: AuthenticationError) {
        string(error.code.rawValue)
        string(error.reason)
        optional(error.retryAt) { $0.i64($1.milliseconds) }
    }

    mutating func availability(_ availability: Availability) {
        switch availability {
        case .available(let biometry):
            u8(0)
            string(biometry.rawValue)
        case .notEnrolled:
            u8(1)
        case .notAvailable(let reason):
            u8(2)
            string(reason)
        case .lockedOut(let until, let reason):
            u8(3)
            optional(until) { $0.i64($1.milliseconds) }
            string(reason)
        case .failed(let failure):
            u8(4)
            error(failure)
        }
    }
}

extension WireReader {
    mutating func factor() throws(WireError) -> FactorKind {
        let name = try string("the factor", limit: 64)
        guard !name.isEmpty else { throw WireError("the factor is empty") }
        return FactorKind(rawValue: name)
    }

    /// What the person typed for a device (a security key's PIN: CTAP2 allows 63 bytes), if anything.
    mutating func typedForDevice() throws(WireError) -> Secret? {
        try optional("the typed secret") { reader throws(WireError) in try reader.secret("the typed secret", limit: 63)
        }
    }

    mutating func optionalUser() throws(WireError) -> String? {
        try optional("the user") { reader throws(WireError) in
            try reader.string("the user", limit: UserContext.maximumNameLength)
        }
    }

    mutating func context() throws(WireError) -> UserContext {
        UserContext(
            name: try string("the user", limit: UserContext.maximumNameLength), service: try string("the service"),
            isRemote: try bool("remote"), concealsEnrollment: try bool("concealing"),
            startedBy: try bool("started by") ? UInt32(truncatingIfNeeded: try u32("the starting uid")) : nil)
    }

    mutating func verdict() throws(WireError) -> Verdict {
        switch try u8("the verdict") {
        case 0: return .success
        case 1: return .failure(.mismatch)
        case 2: return .failure(.repeatedMismatch)
        case 3: return .failure(.malformed(try string("the reason")))
        case 4: return .failure(.noSample(try string("the reason")))
        case 5: return .failure(.notEnrolled)
        case let other: throw WireError("verdict \(other) is unknown")
        }
    }

    mutating func evidence() throws(WireError) -> Evidence {
        switch try u8("the evidence") {
        case 1:
            return .secret(try secret("the secret"))
        case 2:
            var samples: [[Double]] = []
            for _ in 0..<(try count("samples", limit: 64)) {
                var sample: [Double] = []
                for _ in 0..<(try count("sample values", limit: 256)) { sample.append(try double("a sample value")) }
                samples.append(sample)
            }
            return .samples(samples)
        case 3:
            throw WireError("what a device produced is keywayd's own; no client may send it")
        case let other:
            throw WireError("evidence kind \(other) is unknown")
        }
    }

    mutating func error() throws(WireError) -> AuthenticationError {
        let name = try string("the error code")
        guard let code = AuthenticationError.Code(rawValue: name) else {
            throw WireError("error code '\(name)' is unknown")
        }
        let reason = try string("the reason", limit: 64 * 1024)
        let retry = try optional("the retry time") { reader throws(WireError) in
            Timestamp(milliseconds: try reader.i64("the retry time"))
        }
        return AuthenticationError(code, reason, retryAt: retry)
    }

    mutating func availability() throws(WireError) -> Availability {
        switch try u8("the availability") {
        case 0:
            guard let biometry = BiometryType(rawValue: try string("the biometry")) else {
                throw WireError("the biometry is unknown")
            }
            return .available(biometry)
        case 1: return .notEnrolled
        case 2: return .notAvailable(try string("the reason", limit: 64 * 1024))
        case 3:
            let until = try optional("the lock's end") { reader throws(WireError) in
                Timestamp(milliseconds: try reader.i64("the lock's end"))
            }
            return .lockedOut(until: until, reason: try string("the reason", limit: 64 * 1024))
        case 4: return .failed(try error())
        case let other: throw WireError("availability \(other) is unknown")
        }
    }
}
