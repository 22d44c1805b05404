public import KeywayCore

extension GestureAuthenticator {
    /// `[gesture] min-dots`: the shortest pattern accepted at enrollment and change.
    public static var minimumDotsSetting: Setting {
        Setting(
            "min-dots", .integer(PatternRules.minimumDotsRange), default: .integer(4), enforcedBy: .daemon,
            help: "the fewest dots a new pattern may have (patterns already enrolled keep working)")
    }

    /// `[gesture] blocklist`: refuse the most common shapes.
    public static var blocklistSetting: Setting {
        Setting(
            "blocklist", .boolean, default: .boolean(true), enforcedBy: .daemon,
            help: "refuse common shapes (L, Z, the square, straight lines) and their rotations and mirror images")
    }

    /// The per-user `show-trail` switch (phones' "make pattern visible"): off, the grid shows no trail while the
    /// pattern is drawn.
    public static var showTrailSetting: UserSetting {
        UserSetting(
            .gesture, "show-trail", default: true, help: "draw the trail between the dots while the pattern is drawn")
    }

    /// The pattern lock as a plugin: its settings, and how its two sides are built from them.
    public static var plugin: FactorPlugin {
        FactorPlugin(
            .gesture, aliases: ["pattern"], summary: "the 3×3 pattern lock",
            enrollmentHelp: "drawn twice on a grid when standard input is a terminal (--stdin: one line, used twice)",
            settings: [
                Setting.attempts(), minimumDotsSetting, blocklistSetting, Setting.hashPasses(), Setting.hashMemory(),
            ],
            userSettings: [showTrailSetting],
            specimen: .typed("2493", wrong: "1235", of: .gesture),
            personSide: { side in GestureAuthenticator(vault: side.vault, rules: rules(side.settings)) },
            vaultSide: { side in
                keeper(store: side.store, clock: side.clock, hasher: side.hasher, rules: rules(side.settings))
            })
    }

    /// The enrollment rules the settings ask for.
    public static func rules(_ settings: FactorSettings) -> PatternRules {
        PatternRules(
            minimumDots: settings.integer(minimumDotsSetting),
            blocklist: settings.boolean(blocklistSetting) ? .builtIn : .empty)
    }
}
