public import KeywayCore
public import KeywayCrypto
import KeywayFactors
import KeywayPlatform
import KeywayStore

/// The vault keywayd serves: the store (this host's SQLite file, or a fleet's PostgreSQL database), Argon2id, and every
/// factor's keeper built from its settings. `keyway --store` and the tests open one directly.
public enum SystemVault {
    /// Where the store is and how new secrets are hashed.
    public struct Options: Sendable, Equatable {
        /// The store: an SQLite file's path, or a `postgresql://` URI (Stores.open).
        public var storePath = SQLiteStore.Options.defaultPath
        /// This host's name in a shared store's audit trail (nil: the machine's).
        public var host: String? = nil
        /// A PostgreSQL store's password file (root's, 0600).
        public var passfile = PostgresStore.Options.defaultPassfile
        /// Where a PostgreSQL store's timeline is kept between runs (nil: in memory only; keywayd keeps one).
        public var timelineFile: String? = nil
        /// Accept a store owned by the current user instead of root: tests and the demo only.
        public var storeOwnedByCurrentUser = false
        /// Create the store if it is missing.
        public var createStore = false
        /// The Argon2id cost for new enrollments and changes of every factor, replacing the factors' own
        /// `hash-passes` and `hash-memory` settings (tests use `.minimum`); nil, the default, takes each factor's
        /// from its settings. Verification reads the cost from each hash, so either applies to new hashes only.
        public var hashCost: Argon2idHasher.Cost? = nil
        /// The factors' settings (keyway.conf): rules, lockouts, the passcode's maximum age.
        public var settings = SettingsBook()

        /// Defaults: the system store.
        public init() {}
    }

    /// Opens the store and builds the keepers; `devices` are the backends keywayd offers the plugins by name
    /// (`FactorPlugin.VaultSide.devices`: fprintd's reader); `observing` wraps the store every keeper uses (keywayd's
    /// `ObservedStore`, which turns its audit rows into events).
    public static func open(
        _ options: Options, devices: [String: any DeviceBackend] = [:], observing: ((any Store) -> any Store)? = nil
    )
        throws(AuthenticationError)
        -> LocalVault
    {
        var storeOptions = Stores.Options(location: options.storePath)
        storeOptions.create = options.createStore
        storeOptions.ownedByCurrentUser = options.storeOwnedByCurrentUser
        storeOptions.host = options.host
        storeOptions.passfile = options.passfile
        storeOptions.timelineFile = options.timelineFile
        storeOptions.spendable = Factors.spendable
        let (opened, storeClock) = try Stores.open(storeOptions)
        let store = observing?(opened) ?? opened
        // A shared store dates lockouts by the database's clock, so every host agrees on when a wait ends.
        let clock = storeClock ?? SystemClock()
        var keepers: [any FactorKeeper] = []
        for plugin in Factors.all {
            let hasher = try Argon2idHasher(cost: hashCost(of: plugin, options))
            keepers.append(
                plugin.vaultSide(
                    FactorPlugin.VaultSide(
                        store: store, clock: clock, hasher: hasher, settings: options.settings[plugin.kind],
                        devices: devices)))
        }
        // An administrator's temporary pass stands in for a factor (keyway pass issue), hashed at the default cost.
        keepers.append(
            PassKeeper(store: store, clock: clock, hasher: try Argon2idHasher(cost: options.hashCost ?? .default)))
        return LocalVault(store: store, clock: clock, keepers: keepers, userSettings: Factors.all.userSettings)
    }

    /// The Argon2id cost of new hashes of `plugin`'s secrets: `options.hashCost` when set; otherwise the plugin's
    /// `hash-passes` and `hash-memory` settings when it declares them (the knowledge factors); otherwise (the
    /// biometric, which keeps templates, not hashes) the default.
    public static func hashCost(of plugin: FactorPlugin, _ options: Options) -> Argon2idHasher.Cost {
        if let cost = options.hashCost { return cost }
        guard let passes = plugin.setting(Setting.hashPasses().key),
            let memory = plugin.setting(Setting.hashMemory().key)
        else { return .default }
        let settings = options.settings[plugin.kind]
        return Argon2idHasher.Cost(passes: settings.integer(passes), mebibytes: settings.integer(memory))
    }
}
