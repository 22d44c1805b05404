public import KeywayCore

/// The vault's side of the biometric factor: the enrolled templates, matched by the simulated sensor's matcher (a
/// score against its model's threshold), or the verdicts of a reader that matches itself; the attempt gate (5
/// consecutive failures lock until the passcode succeeds), and LocalAuthentication's rule that biometrics need a
/// passcode to fall back on. Runs where the store is (keywayd).
public final class BiometricKeeper: FactorKeeper {
    public var factor: FactorKind { .biometric }

    /// The kind of biometry reported as available.
    public let biometry: BiometryType
    /// How the simulated sensor's samples become templates and are matched.
    public let matcher: TemplateMatcher
    /// Counts attempts.
    public let gate: AttemptGate

    public var codes: FactorCodes { gate.codes }
    /// Biometrics need a passcode entry within this window (`[biometric] passcode-max-age`), or nil.
    public let passcodeMaxAge: Duration?
    /// Makes a new domain-state value on each enrollment change.
    private let newDomainState: @Sendable () -> [UInt8]
    /// The reader that keeps and matches the prints itself (`[biometric] backend = fprintd`), or nil for the
    /// simulator, whose templates are in the store.
    public let reader: (any DeviceBackend)?

    /// Creates the keeper; domain states come from the system's random generator unless given.
    public init(
        store: any Store, clock: any Clock, biometry: BiometryType = .fingerprint, matcher: TemplateMatcher,
        schedule: ThrottleSchedule = .biometric, passcodeMaxAge: Duration? = nil,
        newDomainState: (@Sendable () -> [UInt8])? = nil, reader: (any DeviceBackend)? = nil
    ) {
        self.reader = reader
        self.biometry = biometry
        self.passcodeMaxAge = passcodeMaxAge
        self.matcher = matcher
        gate = AttemptGate(
            factor: .biometric, store: store, clock: clock, schedule: schedule, codes: BiometricAuthenticator.codes)
        self.newDomainState = newDomainState ?? { randomBytes(BiometricEnrollment.domainStateLength) }
    }

    /// Why `finger` cannot name a finger, or nil.
    public static func fingerNameProblem(_ finger: String) -> String? {
        guard !finger.isEmpty, finger.utf8.count <= 64, finger.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" })
        else { return "a finger name is 1–64 letters, digits or '-'" }
        return nil
    }

    public var store: any Store { gate.store }

    public func availability(for user: UserContext, records: [Enrollment], book: AttemptBook) -> Availability {
        availability(for: user, records: records, book: book, reader: .ask)
    }

    /// Enrolled, switched on, the reader answering, and not locked. With a reader it is asked once, unless the owner
    /// turned the factor off: its list of fingers brings the store's record up to date, and whether it answered says
    /// whether it can serve now (the default, a refresh and then the check, asked fprintd twice, each time on a new
    /// connection). Without one, the default: the account read once.
    public func availability(for user: UserContext, switchedOff: ([String: String]) -> Availability?) -> Availability {
        guard let reader else { return availabilityReadingOnce(for: user, switchedOff: switchedOff) }
        do {
            if let off = switchedOff(try gate.store.preferences(user: user.name)) { return off }
            var answer = ReaderAnswer.answered
            var fingers: [String]? = nil
            do throws(AuthenticationError) { fingers = try reader.labels(of: user.name) } catch {
                answer = .unreachable(error.reason)  // the record is left as it was
            }
            if let fingers {
                try mirror(fingers, of: user.name, by: Attribution("\(reader.name)'s own list", at: gate.clock.now()))
            }
            return availability(
                for: user, records: try gate.store.enrollments(user: user.name),
                book: try gate.store.attempts(user: user.name), reader: answer)
        } catch {
            return .failed(error)
        }
    }

    /// What the reader said about whether it can serve: not asked yet, answered, or why it could not be reached.
    private enum ReaderAnswer {
        case ask
        case answered
        case unreachable(String)
    }

    private func availability(
        for user: UserContext, records: [Enrollment], book: AttemptBook, reader answer: ReaderAnswer
    )
        -> Availability
    {
        do {
            guard let record = records.first(where: { $0.factor == .biometric }),
                try !details(of: record).labels.isEmpty
            else { return .notEnrolled }
        } catch {
            return .failed(error)
        }
        // The record says what the reader had; whether it can answer now is the reader's to say.
        switch answer {
        case .answered:
            break
        case .unreachable(let reason):
            return .notAvailable(reason)
        case .ask:
            if let reader {
                do throws(AuthenticationError) { _ = try reader.labels(of: user.name) } catch {
                    return .notAvailable(error.reason)
                }
            }
        }
        guard let passcode = records.first(where: { $0.factor == .passcode }) else {
            return .failed(passcodeMissing(user.name))
        }
        if let stale = passcodeTooOld(passcode, book) { return .lockedOut(until: nil, reason: stale.reason) }
        return gate.availability(of: book, whenAllowed: .available(biometry))
    }

    /// Reserves an attempt, then scores the one sample against every enrolled template; or, with a reader that
    /// matches itself, counts the verdict it gave (reserved and settled at once: the match has happened, and its
    /// result reaches no one before the count is on disk).
    public func verify(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict {
        if reader != nil || { if case .device = evidence { true } else { false } }() {
            return try countReaderVerdict(evidence, for: user)
        }
        guard case .samples(let samples) = evidence, samples.count == 1 else {
            throw AuthenticationError(.invalidPolicy, "a biometric match takes exactly one sensor sample")
        }
        guard let enrollment = try load(user.name), !enrollment.templates.isEmpty else {
            throw AuthenticationError(.biometryNotEnrolled, "no biometric is enrolled for \(user.name)")
        }
        return try countedAttempt(for: user.name) {
            enrollment.templates.contains(where: { matcher.matches(samples[0], $0.template) })
        }
    }

    /// The passcode rule (the fallback is enrolled and not too old), then one counted attempt: reserved, matched by
    /// `matches` only then, and settled with what it says. The simulator's match and a reader's verdict share it.
    private func countedAttempt(for user: String, _ matches: () -> Bool) throws(AuthenticationError) -> Verdict {
        guard let passcode = try gate.store.enrollment(user: user, factor: .passcode) else {
            throw passcodeMissing(user)
        }
        if let stale = passcodeTooOld(passcode, try gate.store.attempts(user: user)) { throw stale }
        let reservation = try gate.reserve(for: user)
        if matches() {
            try gate.settleSuccess(reservation)
            return .success
        }
        return .failure(try gate.settleFailure(reservation, fingerprint: nil))
    }

    private func countReaderVerdict(_ evidence: Evidence, for user: UserContext) throws(AuthenticationError) -> Verdict
    {
        // A reader's verdict is one byte, 1 for a match (FprintdListener).
        guard reader != nil, case .device(let verdict) = evidence, verdict.count == 1 else {
            throw AuthenticationError(
                .invalidPolicy,
                reader == nil
                    ? "the simulated sensor matches samples, not a reader's verdict"
                    : "the reader matches prints itself ([biometric] backend = fprintd); it takes no samples")
        }
        guard try gate.store.enrollment(user: user.name, factor: .biometric) != nil else {
            throw AuthenticationError(.biometryNotEnrolled, "no finger is enrolled at the reader for \(user.name)")
        }
        return try countedAttempt(for: user.name) { verdict[0] == 1 }
    }

    /// With a reader: the store's record of its fingers brought up to date, with a new domain state whenever the
    /// list changed (a finger enrolled or deleted with fprintd-enroll or fprintd-delete as well as through Keyway).
    /// A reader that cannot answer leaves the record as it was.
    public func refresh(_ user: String) throws(AuthenticationError) {
        guard let reader else { return }
        try refresh(user, by: Attribution("\(reader.name)'s own list", at: gate.clock.now()), enrolled: false)
    }

    /// The record brought up to date, attributed to `by`; with `enrolled` (a finger enrolled through Keyway, perhaps
    /// the same one again) the domain state changes even when the list of names does not.
    private func refresh(_ user: String, by: Attribution, enrolled: Bool) throws(AuthenticationError) {
        guard let reader else { return }
        let fingers: [String]
        do throws(AuthenticationError) { fingers = try reader.labels(of: user) } catch {
            if enrolled { throw error }
            return
        }
        try mirror(fingers, of: user, by: by, enrolled: enrolled)
    }

    /// The store's record made to say `fingers`, the reader's list, attributed to `by`.
    private func mirror(_ fingers: [String], of user: String, by: Attribution, enrolled: Bool = false)
        throws(AuthenticationError)
    {
        let record = try gate.store.enrollment(user: user, factor: .biometric)
        let known = try record.map { record throws(AuthenticationError) in try details(of: record).labels }
        guard enrolled || known != fingers else { return }
        if fingers.isEmpty {
            if record != nil { _ = try gate.store.removeEnrollment(user: user, factor: .biometric, by: by) }
            return
        }
        let mirror = ReaderEnrollment(fingers: fingers, domainState: newDomainState())
        try gate.store.save(
            Enrollment(
                user: user, factor: .biometric, payload: mirror.encoded(), changedAt: by.at, changedBy: by.actor))
    }

    /// The fingers as fprintd names them.
    public static let readerFingers = [
        "left-thumb", "left-index-finger", "left-middle-finger", "left-ring-finger", "left-little-finger",
        "right-thumb", "right-index-finger", "right-middle-finger", "right-ring-finger", "right-little-finger",
    ]

    /// fprintd's name for `label` (Keyway's short "right-index" is fprintd's "right-index-finger"); the default is
    /// the right index finger.
    public static func readerFinger(_ label: String?) throws(AuthenticationError) -> String {
        let name = label ?? "right-index-finger"
        if readerFingers.contains(name) { return name }
        if readerFingers.contains(name + "-finger") { return name + "-finger" }
        throw AuthenticationError(
            .enrollmentRefused,
            "fprintd's reader knows the fingers as \(readerFingers.joined(separator: ", ")); "
                + "'\(name.escapingControlCharacters)' is none of them")
    }

    /// With a reader: enrolls `label` there, then records the new list (and a new domain state) as `actor`'s.
    public func enrollAtDevice(
        for user: String, label: String?, by actor: String, typed: Secret?, progress: (String) -> Void,
        cancelled: () -> Bool
    ) throws(AuthenticationError) {
        guard let reader else {
            throw AuthenticationError(
                .enrollmentRefused,
                "the simulated sensor is enrolled from touches that keyway enroll biometric collects")
        }
        let finger = try Self.readerFinger(label)
        _ = try reader.enroll(
            FactorPlugin.DeviceSide(
                settings: FactorSettings(), user: UserContext(name: user), limit: .milliseconds(120_000)),
            label: finger, progress: progress, cancelled: cancelled)
        try refresh(user, by: Attribution(actor, at: gate.clock.now()), enrolled: true)
    }

    /// Adds (or replaces) the finger `label` with a template built from the samples.
    public func enrollment(of evidence: Evidence, for user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Enrollment
    {
        if reader != nil {
            throw AuthenticationError(
                .enrollmentRefused,
                "the reader keeps its own prints ([biometric] backend = fprintd): enroll at the reader")
        }
        guard case .samples(let samples) = evidence, (1...64).contains(samples.count) else {
            throw AuthenticationError(.enrollmentRefused, "a biometric is enrolled from 1 to 64 sensor samples")
        }
        let finger = label ?? "right-index"
        if let problem = Self.fingerNameProblem(finger) { throw AuthenticationError(.enrollmentRefused, problem) }
        var current = try load(user) ?? BiometricEnrollment(templates: [], domainState: [])
        let replacing = current.templates.contains { $0.finger == finger }
        guard replacing || current.templates.count < BiometricEnrollment.maximumFingers else {
            throw AuthenticationError(
                .enrollmentRefused,
                "\(user) already has \(BiometricEnrollment.maximumFingers) fingers enrolled; remove one first")
        }
        let template = try matcher.template(samples)
        current.templates.removeAll { $0.finger == finger }
        current.templates.append((finger, template))
        current.domainState = newDomainState()
        return record(current, user: user, by: actor)
    }

    /// A reader keeps its own prints: removing the store's copy would change nothing (the next read brings them
    /// back, and the finger still unlocks), so it is refused with what does remove them.
    public func checkRemoval(of user: String) throws(AuthenticationError) {
        if reader != nil {
            throw AuthenticationError(
                .invalidPolicy,
                "the reader keeps its own prints ([biometric] backend = fprintd): fprintd-delete \(user) removes them")
        }
    }

    public func enrollment(removing label: String, from record: Enrollment, by actor: String)
        throws(AuthenticationError) -> Enrollment?
    {
        try checkRemoval(of: record.user)
        var current = try BiometricEnrollment(decoding: record.payload)
        current.templates.removeAll { $0.finger == label }
        guard !current.templates.isEmpty else { return nil }
        current.domainState = newDomainState()
        return self.record(current, user: record.user, by: actor)
    }

    public func details(of record: Enrollment) throws(AuthenticationError) -> (labels: [String], domainState: [UInt8]) {
        if ReaderEnrollment.isReaderRecord(record.payload) {
            let mirror = try ReaderEnrollment(decoding: record.payload)
            return (mirror.fingers, mirror.domainState)
        }
        let enrollment = try BiometricEnrollment(decoding: record.payload)
        return (enrollment.templates.map { $0.finger }, enrollment.domainState)
    }

    /// The user's enrollment, or nil.
    public func load(_ user: String) throws(AuthenticationError) -> BiometricEnrollment? {
        try gate.store.enrollment(user: user, factor: .biometric).map { record throws(AuthenticationError) in
            // A reader's record (the backend was fprintd) holds no templates the simulator could match.
            ReaderEnrollment.isReaderRecord(record.payload)
                ? BiometricEnrollment(
                    templates: [], domainState: try ReaderEnrollment(decoding: record.payload).domainState)
                : try checked(BiometricEnrollment(decoding: record.payload))
        }
    }

    /// `enrollment`, when the matcher can read each of its templates; a damaged one is a store failure.
    private func checked(_ enrollment: BiometricEnrollment) throws(AuthenticationError) -> BiometricEnrollment {
        for (finger, template) in enrollment.templates {
            if let problem = matcher.problem(template) {
                throw AuthenticationError(
                    .storeFailure, "the stored biometric enrollment is damaged: template '\(finger)': \(problem)")
            }
        }
        return enrollment
    }

    /// With a passcode maximum age, the lockout for a passcode last entered (or set) longer ago than that, or nil.
    /// Only a passcode success, which records its time, makes biometrics usable again.
    private func passcodeTooOld(_ passcode: Enrollment, _ book: AttemptBook) -> AuthenticationError? {
        guard let passcodeMaxAge else { return nil }
        let entered = max(book[.passcode].lastSuccess ?? passcode.changedAt, passcode.changedAt)
        guard entered.adding(passcodeMaxAge) <= gate.clock.now() else { return nil }
        return AuthenticationError(
            .biometryLockout,
            "the passcode was last entered more than \(passcodeMaxAge.spokenDescription) ago "
                + "(passcode-max-age); enter the passcode to use biometrics again")
    }

    /// As LocalAuthentication: biometrics are only usable with a passcode to fall back on, since only a passcode
    /// success clears a biometric lockout. The error for a user without one.
    private func passcodeMissing(_ user: String) -> AuthenticationError {
        AuthenticationError(.passcodeNotSet, "biometrics need a passcode to fall back on; \(user) has none")
    }

    private func record(_ enrollment: BiometricEnrollment, user: String, by actor: String) -> Enrollment {
        Enrollment(
            user: user, factor: .biometric, payload: enrollment.encoded(), changedAt: gate.clock.now(),
            changedBy: actor)
    }
}
