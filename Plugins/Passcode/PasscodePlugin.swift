public import KeywayCore

extension PasscodeAuthenticator {
    /// `[passcode] min-length`.
    public static var minimumLengthSetting: Setting {
        Setting(
            "min-length", .integer(6...64), default: .integer(6), enforcedBy: .daemon,
            help: "the fewest characters a new passcode may have (6, as iOS, is the floor)")
    }

    /// `[passcode] refuse-common`.
    public static var refuseCommonSetting: Setting {
        Setting(
            "refuse-common", .boolean, default: .boolean(true), enforcedBy: .daemon,
            help: "refuse runs (123456), repetitions (121212) and commonly chosen passcodes")
    }

    /// The passcode as a plugin.
    public static var plugin: FactorPlugin {
        FactorPlugin(
            .passcode, summary: "the passcode, the fallback that also unlocks a biometric lockout",
            enrollmentHelp: "typed twice (--stdin: one line, used twice)", codes: codes,
            settings: [
                Setting.attempts(), minimumLengthSetting, refuseCommonSetting, Setting.hashPasses(),
                Setting.hashMemory(),
            ],
            specimen: .typed("739164", wrong: "739165", of: .passcode),
            personSide: { side in PasscodeAuthenticator(vault: side.vault, rules: rules(side.settings)) },
            vaultSide: { side in
                keeper(store: side.store, clock: side.clock, hasher: side.hasher, rules: rules(side.settings))
            })
    }

    /// The enrollment rules the settings ask for.
    public static func rules(_ settings: FactorSettings) -> PasscodeRules {
        PasscodeRules(
            minimumLength: settings.integer(minimumLengthSetting), refuseCommon: settings.boolean(refuseCommonSetting))
    }
}
