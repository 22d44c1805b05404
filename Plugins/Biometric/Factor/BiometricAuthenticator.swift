public import KeywayCore

/// The person's side of the biometric factor. Where keywayd holds the sensor (fprintd's reader, or the simulated
/// sensor with keywayd as the vault), every wait is an arming there; a local vault's sensor (`keyway --store`) is
/// read here and its samples handed to the vault, which matches them against the enrolled templates
/// (`BiometricKeeper`), counts failures and applies the 5-failure lockout.
public final class BiometricAuthenticator: Authenticator {
    public var factor: FactorKind { .biometric }

    public var codes: FactorCodes { Self.codes }

    /// The sensor: read here for a local vault; for keywayd, what it reads and how long a wait lasts.
    public let sensor: any BiometricSensor
    /// Where samples are matched and templates kept.
    public let vault: any Vault
    /// Whether a remote session may use this machine's sensor (`[biometric] remote = allow`).
    public let servesRemoteSessions: Bool
    /// True with `[biometric] backend = fprintd`: keywayd waits at fprintd's reader, and `sensor` only names it.
    public let atReader: Bool

    /// Creates the person's side of the factor over a vault (keywayd's, or a local one).
    public init(
        vault: any Vault, sensor: any BiometricSensor, servesRemoteSessions: Bool = false, atReader: Bool = false
    ) {
        self.vault = vault
        self.sensor = sensor
        self.servesRemoteSessions = servesRemoteSessions
        self.atReader = atReader
    }

    public func availability(for user: UserContext) -> Availability {
        if let reason = unusableReason(for: user) { return .notAvailable(reason) }
        let state = vault.availability(of: .biometric, for: user)
        return state.isAvailable ? .available(sensor.biometry) : state
    }

    public func authenticate(_ request: AuthenticationRequest, conversation: any Conversation)
        throws(AuthenticationError) -> Verdict
    {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.biometryNotAvailable, reason) }
        // keywayd owns the sensor: the wait is an arming there, one touch long, so no client holds the device.
        if vault.waitsAtDevices { return try waitInDaemon(request, conversation: conversation) }
        conversation.tell(.instruction(instruction))
        // The wait has no prompt for Ctrl-C to end: the conversation says when the person has asked to stop.
        nonisolated(unsafe) let person = conversation
        let cancellation = CancellationFlag(following: request.cancellation) { person.personHasStopped }
        while true {
            guard let reading = sensor.nextReading(cancellation: cancellation) else {
                if request.cancellation.isCancelled { throw AuthenticationError(.appCancel) }
                if conversation.personHasStopped {
                    throw AuthenticationError(.userCancel, "the person stopped the wait at the sensor (Ctrl-C)")
                }
                throw AuthenticationError(
                    .timeout,
                    "nothing was presented to the sensor within "
                        + sensor.timeout.spokenDescription)
            }
            switch reading {
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
            case .sample(let sample):
                return try vault.verify(.samples([sample]), of: .biometric, for: request.user)
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
        conversation.tell(.instruction(instruction))
        return try ArmedWaiting.verdict(
            of: armed, within: sensor.timeout, device: "the sensor", codes: codes, request: request,
            conversation: conversation)
    }

    /// The sensor waits in the background while a prompt does (`first of`).
    public var invitation: String? { sensor.biometry == .face ? "Look at the camera" : "Touch the sensor" }

    /// What the person is told to do at the sensor.
    public var instruction: String {
        sensor.biometry == .face ? "Look at the camera." : "Place your finger on the sensor."
    }

    /// Has the vault (keywayd, beside the sensor) listen for this authentication.
    public func arm(_ request: AuthenticationRequest) throws(AuthenticationError) -> any ArmedFactor {
        if let reason = unusableReason(for: request.user) { throw AuthenticationError(.biometryNotAvailable, reason) }
        return try vault.arm(.biometric, for: request.user, attempts: request.attemptsAllowed, waits: false, typed: nil)
    }

    /// Why the sensor cannot serve this user at all, or nil. fprintd's reader is keywayd's to judge (only keywayd
    /// talks to fprintd), and it waits nowhere else.
    private func unusableReason(for user: UserContext) -> String? {
        if sensor.biometry == .none { return "no biometric sensor is fitted" }
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
        let needed = sensor.samplesToEnroll
        var samples: [[Double]] = []
        var unusable = 0
        while samples.count < needed {
            conversation.tell(.instruction("\(instruction) (\(samples.count + 1) of \(needed))"))
            guard let reading = sensor.nextReading(cancellation: cancellation) else {
                throw AuthenticationError(
                    cancellation.isCancelled ? .appCancel : .timeout,
                    "enrollment stopped waiting for the sensor")
            }
            switch reading {
            case .sample(let sample):
                samples.append(sample)
            case .retry(let reason):
                conversation.tell(.error(reason))
                unusable += 1
                if unusable >= 3 * needed {
                    throw AuthenticationError(.authenticationFailed, "too many unusable samples")
                }
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
            guard let touched = sensor.scripted(user: request.user, finger: finger, count: 16) else {
                throw AuthenticationError(.enrollmentRefused, "this sensor is touched by real fingers only")
            }
            enroller = BiometricAuthenticator(vault: vault, sensor: touched)
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
