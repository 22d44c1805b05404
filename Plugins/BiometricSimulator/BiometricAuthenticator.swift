public import KeywayCore

/// The biometric factor over the simulated sensor: enrollment from several touches, matching by score against
/// a threshold, availability, cancellation and the 5-failure lockout.
public struct BiometricAuthenticator: Authenticator, DomainStateProviding {
    public var factor: FactorKind { .biometric }

    /// The device.
    public let sensor: SimulatedSensor
    /// Counts attempts (5 consecutive failures lock until the passcode succeeds).
    public let gate: AttemptGate
    /// Makes a new domain-state value on each enrollment change.
    private let newDomainState: @Sendable () -> [UInt8]

    /// Creates the factor; domain states come from the system's random generator unless given.
    public init(
        store: any Store, clock: any Clock, sensor: SimulatedSensor, schedule: ThrottleSchedule = .biometric,
        newDomainState: (@Sendable () -> [UInt8])? = nil
    ) {
        self.sensor = sensor
        gate = AttemptGate(factor: .biometric, store: store, clock: clock, schedule: schedule)
        self.newDomainState =
            newDomainState ?? {
                var generator = SystemRandomNumberGenerator()
                return (0..<BiometricEnrollment.domainStateLength).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            }
    }

    public func availability(for user: UserContext) -> Availability {
        if let reason = unusableReason(for: user) { return .notAvailable(reason) }
        do {
            guard let enrollment = try load(user.name), !enrollment.templates.isEmpty else { return .notEnrolled }
            if let missing = try passcodeMissing(for: user.name) { return .failed(missing) }
        } catch {
            return .failed(error)
        }
        return gate.availability(for: user.name, whenAllowed: .available(sensor.configuration.biometry))
    }

    public func authenticate(_ request: AuthenticationRequest, conversation: some Conversation)
        throws(AuthenticationError) -> Verdict
    {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.biometryNotAvailable, reason) }
        conversation.tell(.instruction(sensor.instruction))
        while true {
            guard let event = sensor.next(cancellation: request.cancellation) else {
                if request.cancellation.isCancelled { throw AuthenticationError(.appCancel) }
                throw AuthenticationError(
                    .timeout,
                    "nothing was presented to the sensor within "
                        + sensor.configuration.timeout.spokenDescription)
            }
            switch event {
            case .plug:
                continue
            case .retry(let reason):
                return .failure(.noSample(reason))
            case .cancel:
                throw AuthenticationError(.userCancel)
            case .fallback:
                throw AuthenticationError(.userFallback)
            case .unplug:
                throw AuthenticationError(.biometryNotAvailable, "the sensor was unplugged")
            case .failure(let reason):
                throw AuthenticationError(.biometryNotAvailable, "the sensor failed: \(reason)")
            case .present, .presentStranger:
                return try match(event, for: request.user.name)
            }
        }
    }

    /// Reserves an attempt, then scores the sample against every enrolled template.
    private func match(_ event: SensorEvent, for user: String) throws(AuthenticationError) -> Verdict {
        guard let enrollment = try load(user), !enrollment.templates.isEmpty else {
            throw AuthenticationError(.biometryNotEnrolled, "no biometric is enrolled for \(user)")
        }
        if let missing = try passcodeMissing(for: user) { throw missing }
        let reservation = try gate.reserve(for: user)
        guard let sample = sensor.sample(of: event) else {
            throw AuthenticationError(.internalFailure, "the sensor produced no sample")
        }
        let model = sensor.configuration.model
        if enrollment.templates.contains(where: { model.matches(sample, against: $0.template) }) {
            try gate.settleSuccess(reservation)
            return .success
        }
        return .failure(try gate.settleFailure(reservation, fingerprint: nil))
    }

    /// As LocalAuthentication: biometrics are only usable with a passcode to fall back on, since only a passcode
    /// success clears a biometric lockout. Nil when the user has one.
    private func passcodeMissing(for user: String) throws(AuthenticationError) -> AuthenticationError? {
        guard try gate.store.enrollment(user: user, factor: .passcode) == nil else { return nil }
        return AuthenticationError(.passcodeNotSet, "biometrics need a passcode to fall back on; \(user) has none")
    }

    /// Why the sensor cannot serve this user at all, or nil.
    private func unusableReason(for user: UserContext) -> String? {
        if sensor.configuration.biometry == .none { return "no biometric sensor is fitted" }
        if !sensor.isPluggedIn { return "the sensor is unplugged" }
        if user.isRemote { return "the sensor is local and this session is remote" }
        return nil
    }

    // MARK: Enrollment

    /// The user's enrollment, or nil.
    public func load(_ user: String) throws(AuthenticationError) -> BiometricEnrollment? {
        try gate.store.enrollment(user: user, factor: .biometric).map { record throws(AuthenticationError) in
            try BiometricEnrollment(decoding: record.payload)
        }
    }

    /// The enrolled finger names.
    public func fingers(of user: String) throws(AuthenticationError) -> [String] {
        try load(user)?.templates.map(\.finger) ?? []
    }

    public func domainState(for user: String) throws(AuthenticationError) -> [UInt8] {
        try load(user)?.domainState ?? []
    }

    /// Enrolls (or re-enrolls) `finger` from as many touches as the model asks for, telling the person each step.
    public func enroll(
        user: String, finger: String, by actor: String, conversation: some Conversation,
        cancellation: CancellationFlag = CancellationFlag()
    ) throws(AuthenticationError) -> Enrollment {
        if let reason = unusableReason(for: UserContext(name: user)) {
            throw AuthenticationError(.biometryNotAvailable, reason)
        }
        guard !finger.isEmpty, finger.utf8.count <= 64, finger.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" })
        else {
            throw AuthenticationError(.invalidPolicy, "a finger name is 1–64 letters, digits or '-'")
        }
        var current = try load(user) ?? BiometricEnrollment(templates: [], domainState: [])
        let replacing = current.templates.contains { $0.finger == finger }
        guard replacing || current.templates.count < BiometricEnrollment.maximumFingers else {
            throw AuthenticationError(
                .internalFailure,
                "\(user) already has \(BiometricEnrollment.maximumFingers) "
                    + "fingers enrolled; remove one first")
        }
        let needed = sensor.configuration.model.enrollmentSamples
        var samples: [FeatureVector] = []
        var unusable = 0
        while samples.count < needed {
            conversation.tell(.instruction("\(sensor.instruction) (\(samples.count + 1) of \(needed))"))
            guard let event = sensor.next(cancellation: cancellation) else {
                throw AuthenticationError(
                    cancellation.isCancelled ? .appCancel : .timeout,
                    "enrollment stopped waiting for the sensor")
            }
            switch event {
            case .present, .presentStranger:
                if let sample = sensor.sample(of: event) { samples.append(sample) }
            case .retry(let reason):
                conversation.tell(.error(reason))
                unusable += 1
                if unusable >= 3 * needed {
                    throw AuthenticationError(.authenticationFailed, "too many unusable samples")
                }
            case .plug:
                continue
            case .cancel, .fallback:
                throw AuthenticationError(.userCancel)
            case .unplug:
                throw AuthenticationError(.biometryNotAvailable, "the sensor was unplugged")
            case .failure(let reason):
                throw AuthenticationError(.biometryNotAvailable, "the sensor failed: \(reason)")
            }
        }
        let template: Template
        do { template = try sensor.configuration.model.enroll(samples) } catch {
            throw AuthenticationError(.internalFailure, "could not build a template: \(error)")
        }
        current.templates.removeAll { $0.finger == finger }
        current.templates.append((finger, template))
        current.domainState = newDomainState()
        return try save(current, user: user, by: actor)
    }

    /// Removes `finger`; returns false when it was not enrolled. Removing the last finger removes the enrollment.
    @discardableResult
    public func remove(user: String, finger: String, by actor: String) throws(AuthenticationError) -> Bool {
        guard var current = try load(user), current.templates.contains(where: { $0.finger == finger }) else {
            return false
        }
        current.templates.removeAll { $0.finger == finger }
        if current.templates.isEmpty {
            try gate.store.removeEnrollment(
                user: user, factor: .biometric, by: Attribution(actor, at: gate.clock.now()))
        } else {
            current.domainState = newDomainState()
            _ = try save(current, user: user, by: actor)
        }
        return true
    }

    private func save(_ enrollment: BiometricEnrollment, user: String, by actor: String) throws(AuthenticationError)
        -> Enrollment
    {
        let record = Enrollment(
            user: user, factor: .biometric, payload: enrollment.encoded(),
            changedAt: gate.clock.now(), changedBy: actor)
        try gate.store.save(record)
        return record
    }
}
