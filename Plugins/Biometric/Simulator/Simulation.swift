public import KeywayBiometric
public import KeywayCore

/// The simulated sensor as the biometric factor's built-in backend (Plugins/Biometric/Factor/Sensing.swift): its
/// setting, the sensor a person's process reads, the noise model as the keeper's matcher, keywayd's listener, and
/// the conformance specimen. `Factors.all` hands it to `BiometricAuthenticator.plugin(simulation:)`.
extension SimulatedSensor {
    /// `[biometric] false-match-rate`.
    public static var falseMatchSetting: Setting {
        Setting(
            "false-match-rate", .rate(1000...10_000_000), default: .rate(50_000), enforcedBy: .daemon,
            help: "the chance that a stranger's finger matches, which sets the match threshold (1/50000, as Touch ID)")
    }

    /// The noise model for the configured false-match rate, or nil for the default (derived only when first used,
    /// so a module whose policy never touches the sensor does not load libm).
    public static func model(_ settings: FactorSettings) -> NoiseModel? {
        let denominator = settings.rate(falseMatchSetting)
        guard denominator != 50_000 else { return nil }
        return try? NoiseModel(falseMatchRate: 1.0 / Double(denominator))
    }

    /// What the simulation offers the factor.
    public static var simulation: BiometricSimulation {
        BiometricSimulation(
            settings: [falseMatchSetting],
            sensor: { settings, directory, owner in
                SimulatedSensor(
                    .init(
                        biometry: BiometricAuthenticator.biometry(settings), model: model(settings),
                        timeout: settings.duration(BiometricAuthenticator.timeoutSetting) ?? .seconds(30)),
                    events: SocketSensorEvents(directory: directory, owner: owner))
            },
            matcher: { settings in (model(settings) ?? .default).matcher },
            listener: { side in
                SimulatorListener(directory: side.controlDirectory, settings: side.settings, limit: side.limit)
            },
            specimen: FactorPlugin.Specimen { vault, user, _ throws(AuthenticationError) in
                // The simulated world's seeded samples: the user's own finger, and a stranger's.
                let sensor = SimulatedSensor(events: ScriptedSensorEvents())
                let finger = SensorEvent.present(user: user, finger: "right-index")
                let samples = (0..<sensor.configuration.model.enrollmentSamples).compactMap {
                    _ in sensor.sample(of: finger)?.components
                }
                try vault.enroll(.samples(samples), of: .biometric, for: user, label: "right-index", by: "conformance")
                return .init(
                    right: .samples([sensor.sample(of: finger)?.components ?? []]),
                    wrong: .samples([sensor.sample(of: .presentStranger)?.components ?? []]))
            })
    }
}

extension SimulatedSensor: BiometricSensor {
    public var biometry: BiometryType { configuration.biometry }

    public var timeout: Duration { configuration.timeout }

    public var samplesToEnroll: Int { configuration.model.enrollmentSamples }

    public func nextReading(cancellation: CancellationFlag) -> SensorReading? {
        while let event = next(cancellation: cancellation) {
            switch event {
            case .plug:
                continue
            case .present, .presentStranger:
                guard let sample = sample(of: event) else { return .failure("the sensor produced no sample") }
                return .sample(sample.components)
            case .retry(let reason): return .retry(reason)
            case .cancel: return .cancel
            case .fallback: return .fallback
            case .unplug: return .unplug
            case .failure(let reason): return .failure(reason)
            }
        }
        return nil
    }

    public func scripted(user: String, finger: String, count: Int) -> (any BiometricSensor)? {
        SimulatedSensor(
            .init(biometry: configuration.biometry, model: configuration.model, seed: configuration.seed),
            events: ScriptedSensorEvents(Array(repeating: .present(user: user, finger: finger), count: count)))
    }
}

extension NoiseModel {
    /// The model as the keeper's matcher: templates in `Template`'s encoding, matched by score.
    public var matcher: TemplateMatcher {
        TemplateMatcher(
            template: { samples throws(AuthenticationError) in
                do throws(NoiseModelError) {
                    return try enroll(samples.map(FeatureVector.init(components:))).encoded()
                } catch {
                    throw AuthenticationError(.enrollmentRefused, "could not build a template: \(error)")
                }
            },
            matches: { sample, template in
                guard let template = try? Template(decoding: template) else { return false }
                return matches(FeatureVector(components: sample), against: template)
            },
            problem: { template in
                do throws(NoiseModelError) {
                    _ = try Template(decoding: template)
                    return nil
                } catch {
                    return "\(error)"
                }
            })
    }
}

extension BiometricKeeper {
    /// A keeper matching with the simulated sensor's `model` (tests and tools that own a store).
    public convenience init(
        store: any Store, clock: any Clock, biometry: BiometryType = .fingerprint, model: NoiseModel = .default,
        schedule: ThrottleSchedule = .biometric, passcodeMaxAge: Duration? = nil,
        newDomainState: (@Sendable () -> [UInt8])? = nil, reader: (any DeviceBackend)? = nil
    ) {
        self.init(
            store: store, clock: clock, biometry: biometry, matcher: model.matcher, schedule: schedule,
            passcodeMaxAge: passcodeMaxAge, newDomainState: newDomainState, reader: reader)
    }
}

extension BiometricAuthenticator {
    /// The factor over a local vault of its own, with `sensor`'s model: for tests and tools that own the store.
    /// Domain states come from the system's random generator unless given.
    public convenience init(
        store: any Store, clock: any Clock, sensor: SimulatedSensor, schedule: ThrottleSchedule = .biometric,
        newDomainState: (@Sendable () -> [UInt8])? = nil
    ) {
        let keeper = BiometricKeeper(
            store: store, clock: clock, biometry: sensor.configuration.biometry, model: sensor.configuration.model,
            schedule: schedule, newDomainState: newDomainState)
        self.init(vault: LocalVault(store: store, clock: clock, keepers: [keeper]), sensor: sensor)
    }
}
