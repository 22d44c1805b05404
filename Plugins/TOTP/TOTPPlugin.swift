public import KeywayCore

extension TOTPAuthenticator {
    /// `[totp] digits`.
    public static var digitsSetting: Setting {
        Setting(
            "digits", .choice(["6", "8"]), default: .choice("6"), enforcedBy: .daemon,
            help: "digits per code for new enrollments (6, as every authenticator app; 8 where the app offers it)")
    }

    /// `[totp] window`.
    public static var windowSetting: Setting {
        Setting(
            "window", .integer(0...3), default: .integer(1), enforcedBy: .daemon,
            help: "30-second steps accepted either side of now, for clocks that drift (1: the previous, current and "
                + "next code, as RFC 6238 advises). A fleet's database keeps its own window (sealed.code_window, "
                + "default 1) and refuses a check that names another: keywayd(8), FLEETS")
    }

    /// Time-based one-time codes as a plugin.
    public static var plugin: FactorPlugin {
        FactorPlugin(
            .totp, aliases: ["otp"], summary: "a time-based one-time code from an authenticator app (RFC 6238)",
            enrollment: .sharedSecret,
            enrollmentHelp: "keywayd makes a secret, shown once as a QR code and a key (--qr-file: as an SVG image); "
                + "one code from the app confirms it",
            settings: [Setting.attempts(), digitsSetting, windowSetting],
            specimen: FactorPlugin.Specimen { vault, user, clock throws(AuthenticationError) in
                // Confirmed with this step's code, which is then spent; the next step's is within the window.
                let generator = OneTimeCode(secret: try vault.offer(.totp, for: user, by: "conformance"))
                let step = generator.step(at: clock.now())
                let confirm = Evidence.secret(Secret(copying: generator.code(step: step)))
                try vault.enroll(confirm, of: .totp, for: user, label: nil, by: "conformance")
                return .init(right: .secret(Secret(copying: generator.code(step: step + 1))), wrong: confirm)
            },
            database: { TOTPDatabase.schema },
            personSide: { side in TOTPAuthenticator(vault: side.vault, digits: digits(side.settings)) },
            vaultSide: { side in
                TOTPKeeper(
                    store: side.store, clock: side.clock, digits: digits(side.settings),
                    window: side.settings.integer(windowSetting))
            })
    }

    /// The digits the settings ask for.
    static func digits(_ settings: FactorSettings) -> Int { settings.choice(digitsSetting) == "8" ? 8 : 6 }
}
