public import KeywayBiometricSimulator
public import KeywayCore
public import KeywayCrypto
import KeywayPlatform
import KeywayRuntime
public import KeywayStore

/// The vault keywayd serves: the SQLite store, Argon2id, and every factor's keeper built from its settings.
/// `keyway --store` and the tests open one directly.
public enum SystemVault {
    /// Where the store is and how new secrets are hashed.
    public struct Options: Sendable, Equatable {
        /// The SQLite store.
        public var storePath = SQLiteStore.Options.defaultPath
        /// Accept a store owned by the current user instead of root: tests and the demo only.
        public var storeOwnedByCurrentUser = false
        /// Create the store if it is missing.
        public var createStore = false
        /// The Argon2id cost for new enrollments (verification reads the cost from each hash).
        public var hashCost: Argon2idHasher.Cost = .default
        /// The factors' settings (keyway.conf): rules, lockouts, the passcode's maximum age.
        public var settings = SettingsBook()

        /// Defaults: the system store.
        public init() {}
    }

    /// Opens the store and builds the keepers.
    public static func open(_ options: Options) throws(AuthenticationError) -> LocalVault {
        var storeOptions = SQLiteStore.Options(path: options.storePath, create: options.createStore)
        if options.storeOwnedByCurrentUser {
            storeOptions = .ownedByCurrentUser(path: options.storePath, create: options.createStore)
        }
        let store = try SQLiteStore(storeOptions)
        let clock = SystemClock()
        let hasher = try Argon2idHasher(cost: options.hashCost)
        return LocalVault(
            store: store, clock: clock,
            keepers: Runtime.plugins.map { plugin in
                plugin.vaultSide(
                    FactorPlugin.VaultSide(
                        store: store, clock: clock, hasher: hasher, settings: options.settings[plugin.kind]))
            },
            userSettings: Runtime.plugins.userSettings)
    }
}
