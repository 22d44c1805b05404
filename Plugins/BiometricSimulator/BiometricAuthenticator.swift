public import KeywayCore

/// The person's side of the biometric factor over the simulated sensor: it waits for touches and hands the samples
/// to the vault, which matches them against the enrolled templates by score (`BiometricKeeper`), counts failures
/// and applies the 5-failure lockout.
public final class BiometricAuthenticator: Authenticator {
    public var factor: FactorKind { .biometric }

    public var codes: FactorCodes { Self.codes }

    /// The device.
    public let sensor: SimulatedSensor
    /// Where samples are matched and templates kept.
    public let vault: any Vault
    /// Whether a remote session may use this machine's sensor (`[biometric] remote = allow`).
    public let servesRemoteSessions: Bool
    /// True with `[biometric] backend = fprintd`: keywayd waits at fprintd's reader, and `sensor` only names it.
    public let atReader: Bool

    /// Creates the person's side of the factor over a vault (keywayd's, or a local one).
    public init(vault: any Vault, sensor: SimulatedSensor, servesRemoteSessions: Bool = false, atReader: Bool = false) {
        self.vault = vault
        self.sensor = sensor
        self.servesRemoteSessions = servesRemoteSessions
        self.atReader = atReader
    }

    /// Creates the factor over a local vault of its own (with the sensor's model): for tests and tools that own the
    /// store. Domain states come from the system's random generator unless given.
    public convenience init(
        store: any Store, clock: any Clock, sensor: SimulatedSensor, schedule: ThrottleSchedule = .biometric,
        newDomainState: (@Sendable () -> [UInt8])? = nil
    ) {
        let keeper = BiometricKeeper(
            store: store, clock: clock, biometry: sensor.configuration.biometry, model: sensor.configuration.model,
            schedule: schedule, newDomainState: newDomainState)
        self.init(vault: LocalVault(store: store, clock: clock, keepers: [keeper]), sensor: sensor)
    }

    public func availability(for user: UserContext) -> Availability {
        if let reason = unusableReason(for: user) { return .notAvailable(reason) }
        let state = vault.availability(of: .biometric, for: user)
        return state.isAvailable ? .available(sensor.configuration.biometry) : state
    }

    public func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.biometryNotAvailable, reason) }
        // keywayd owns the sensor: the wait is an arming there, one touch long, so no client holds the device.
        if vault.waitsAtDevices { return try waitInDaemon(request, conversation: conversation) }
        conversation.tell(.instruction(sensor.instruction))
        // The wait has no prompt for Ctrl-C to end: the conversation says when the person has asked to stop.
        nonisolated(unsafe) let person = conversation
        let cancellation = CancellationFlag(following: request.cancellation) { person.personHasStopped }
        while true {
            guard let event = sensor.next(cancellation: cancellation) else {
                if request.cancellation.isCancelled { throw AuthenticationError(.appCancel) }
                if conversation.personHasStopped {
                    throw AuthenticationError(.userCancel, "the person stopped the wait at the sensor (Ctrl-C)")
                }
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
                guard let sample = sensor.sample(of: event) else {
                    throw AuthenticationError(.internalFailure, "the sensor produced no sample")
                }
                return try vault.verify(.samples([sample.components]), of: .biometric, for: request.user)
            }
        }
    }

    /// The sequential wait where keywayd holds the sensor: arm for one counted failure (waiting in line if another
    /// authentication has the sensor), tell the person, and wait for what keywayd saw (`ArmedWaiting.verdict`).
    private func waitInDaemon(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        let armed = try vault.arm(.biometric, for: request.user, attempts: 1, waits: true, typed: nil)
        defer { armed.release() }
        conversation.tell(.instruction(sensor.instruction))
        return try ArmedWaiting.verdict(
            of: armed, within: sensor.configuration.timeout, device: "the sensor", request: request,
            conversation: conversation)
    }

    /// The sensor waits in the background while a prompt does (`first of`).
    public var invitation: String? {
        sensor.configuration.biometry == .face ? "Look at the camera" : "Touch the sensor"
    }

    /// Has the vault (keywayd, beside the sensor) listen for this authentication.
    public func arm(_ request: AuthenticationRequest) throws(AuthenticationError) -> any ArmedFactor {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.biometryNotAvailable, reason) }
        return try vault.arm(.biometric, for: request.user, attempts: request.attemptsAllowed, waits: false, typed: nil)
    }

    /// Why the sensor cannot serve this user at all, or nil. fprintd's reader is keywayd's to judge (only keywayd
    /// talks to fprintd), and it waits nowhere else.
    private func unusableReason(for user: UserContext) -> String? {
        if sensor.configuration.biometry == .none { return "no biometric sensor is fitted" }
        if atReader && !vault.waitsAtDevices { return "fprintd's reader is used through keywayd only" }
        if !atReader && !sensor.isPluggedIn { return "the sensor is unplugged" }
        if user.isRemote && !servesRemoteSessions { return "the sensor is local and this session is remote" }
        return nil
    }

    // MARK: Enrollment

    /// The enrolled finger names.
    public func fingers(of user: String) throws(AuthenticationError) -> [String] {
        try vault.status(of: user).first?[.biometric]?.labels ?? []
    }

    public func domainState(for user: String) throws(AuthenticationError) -> [UInt8] {
        try vault.status(of: user).first?[.biometric]?.domainState ?? []
    }

    /// Enrolls (or re-enrolls) `finger` from as many touches as the model asks for, telling the person each step;
    /// the vault builds the template.
    public func enroll(
        user: String, finger: String, by actor: String, conversation: any Conversation,
        cancellation: CancellationFlag = CancellationFlag()
    ) throws(AuthenticationError) {
        if let reason = unusableReason(for: UserContext(name: user)) {
            throw AuthenticationError(.biometryNotAvailable, reason)
        }
        if let problem = BiometricKeeper.fingerNameProblem(finger) {
            throw AuthenticationError(.enrollmentRefused, problem)
        }
        let needed = sensor.configuration.model.enrollmentSamples
        var samples: [[Double]] = []
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
                if let sample = sensor.sample(of: event) { samples.append(sample.components) }
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
        try vault.enroll(.samples(samples), of: .biometric, for: user, label: finger, by: actor)
    }

    /// `keyway enroll biometric`: `request.label` (default right-index) from touches at the sensor, or from scripted
    /// touches with `request.scripted` (tests and the demo, which have no one at the sensor).
    public func enroll(_ request: EnrollmentRequest, conversation: any Conversation) throws(AuthenticationError)
        -> [String]
    {
        if atReader { return try enrollAtReader(request, conversation: conversation) }
        let finger = request.label ?? "right-index"
        var enroller = self
        if request.scripted {
            let touches = ScriptedSensorEvents(
                Array(repeating: .present(user: request.user, finger: finger), count: 16))
            enroller = BiometricAuthenticator(
                vault: vault,
                sensor: SimulatedSensor(
                    .init(biometry: sensor.configuration.biometry, model: sensor.configuration.model), events: touches))
        }
        try enroller.enroll(user: request.user, finger: finger, by: request.actor, conversation: conversation)
        return try enrolled(finger, for: request.user)
    }

    /// With `backend = fprintd`: keywayd enrolls the finger at fprintd's reader and sends each step, shown here as
    /// it comes ("Place your finger on the reader (2 of 5)").
    private func enrollAtReader(_ request: EnrollmentRequest, conversation: any Conversation)
        throws(AuthenticationError) -> [String]
    {
        if request.scripted {
            throw AuthenticationError(
                .enrollmentRefused,
                "fprintd's reader enrolls real fingers only; --simulate-touches is for the simulator")
        }
        let finger = try BiometricKeeper.readerFinger(request.label)
        try vault.enrollAtDevice(
            .biometric, for: request.user, label: finger, by: request.actor, typed: nil,
            progress: { step in conversation.tell(.instruction(step)) }, cancelled: { false })
        return try enrolled(finger, for: request.user)
    }

    private func enrolled(_ finger: String, for user: String) throws(AuthenticationError) -> [String] {
        var lines = ["Enrolled \(finger) for \(user)."]
        if try vault.status(of: user).first?[.passcode]?.enrolled == nil {
            lines.append(
                "Note: biometrics need a passcode to fall back on; set one with "
                    + "`keyway enroll passcode --user \(user)`.")
        }
        return lines
    }

    /// Removes `finger`; returns false when it was not enrolled. Removing the last finger removes the enrollment.
    @discardableResult
    public func remove(user: String, finger: String, by actor: String) throws(AuthenticationError) -> Bool {
        try vault.remove(.biometric, of: user, label: finger, by: actor)
    }
}
