public import KeywayCore

extension BiometricAuthenticator {
    /// `[biometric] type`.
    public static var typeSetting: Setting {
        Setting(
            "type", .choice(["fingerprint", "face"]), default: .choice("fingerprint"),
            help: "what the sensor reads; the prompt and `keyway status` say so")
    }

    /// `[biometric] backend`.
    public static var backendSetting: Setting {
        Setting(
            "backend", .choice(["simulator", "fprintd"]), default: .choice("simulator"), enforcedBy: .daemon,
            help: "simulator: the simulated sensor (no hardware); fprintd: the reader fprintd drives, with keywayd "
                + "its only client (keywayd(8), READERS)")
    }

    /// True when the settings choose fprintd's reader.
    public static func usesReader(_ settings: FactorSettings) -> Bool { settings.choice(backendSetting) == "fprintd" }

    /// `[biometric] timeout`.
    public static var timeoutSetting: Setting { .deviceTimeout(waiting: "at the sensor") }

    /// `[biometric] remote`.
    public static var remoteSetting: Setting { .remote(device: "sensor") }

    /// `[biometric] lockout-after`.
    public static var lockoutSetting: Setting {
        Setting(
            "lockout-after", .integer(1...20), default: .integer(5), enforcedBy: .daemon,
            help: "consecutive failures, across evaluations, after which only the passcode unlocks the sensor")
    }

    /// `[biometric] passcode-max-age`.
    public static var passcodeMaxAgeSetting: Setting {
        Setting(
            "passcode-max-age", .duration(3_600_000...7_776_000_000, offAllowed: true), default: .duration(nil),
            enforcedBy: .daemon,
            help: "biometrics need a passcode entry within this window; after it only the passcode unlocks "
                + "(iOS asks after 48h, Android's CDD after 72h)")
    }

    /// LocalAuthentication's codes for biometrics: only the passcode unlocks a lockout.
    public static var codes: FactorCodes { .biometry }

    /// The factor as a plugin, with `simulation` (Plugins/Biometric/Simulator) as its built-in backend and fprintd's
    /// reader, which keywayd's composition offers as the backend "fprintd", as its other.
    public static func plugin(simulation: BiometricSimulation) -> FactorPlugin {
        FactorPlugin(
            .biometric, aliases: ["fingerprint", "face"],
            summary: "a fingerprint or face sensor (simulated, or fprintd's reader)",
            input: .presented, enrollment: .atDevice, part: "finger",
            enrollmentHelp:
                "a finger (--name, default right-index) from 5 touches of the sensor (--simulate-touches: genuine "
                + "touches made in-process), or at fprintd's reader",
            codes: codes, device: "sensor",
            settings: [
                Setting.attempts(), backendSetting, typeSetting, timeoutSetting, remoteSetting, lockoutSetting,
            ] + simulation.settings + [passcodeMaxAgeSetting],
            specimen: simulation.specimen,
            arming: arming(simulation),
            servesRemoteSessions: { settings in settings.choice(remoteSetting) == "allow" },
            personSide: { side in
                BiometricAuthenticator(
                    vault: side.vault, sensor: simulation.sensor(side.settings, side.sensorDirectory, side.sensorOwner),
                    servesRemoteSessions: side.settings.choice(remoteSetting) == "allow",
                    atReader: usesReader(side.settings))
            },
            vaultSide: { side in
                BiometricKeeper(
                    store: side.store, clock: side.clock, biometry: biometry(side.settings),
                    matcher: simulation.matcher(side.settings),
                    schedule: ThrottleSchedule(lockAfter: side.settings.integer(lockoutSetting)),
                    passcodeMaxAge: side.settings.duration(passcodeMaxAgeSetting),
                    reader: usesReader(side.settings) ? side.devices["fprintd"] : nil)
            })
    }

    /// How keywayd arms the sensor: the simulated one at its control directory, or fprintd's reader, which keywayd's
    /// composition offers as the backend "fprintd".
    static func arming(_ simulation: BiometricSimulation) -> FactorPlugin.Arming {
        FactorPlugin.Arming(
            waitSetting: timeoutSetting, rule: .ownerOrLocalRoot,
            backends: { settings in usesReader(settings) ? ["fprintd"] : [] },
            listener: { side in
                guard usesReader(side.settings) else { return simulation.listener(side) }
                guard let reader = side.backends["fprintd"] else {
                    return UnavailableListener(
                        AuthenticationError(.biometryNotAvailable, "keywayd has no fprintd client"))
                }
                return reader.listener(side)
            })
    }

    /// The sensor kind the settings name.
    public static func biometry(_ settings: FactorSettings) -> BiometryType {
        settings.choice(typeSetting) == "face" ? .face : .fingerprint
    }
}
