import CKeywayLibc
import KeywayConfig
public import KeywayCore
public import KeywayFactors

/// The person's side of the factors over one vault: keywayd's (`DaemonVault`, the PAM module and the CLI) or a
/// local one (keywayd itself, tests, `keyway --store`). The module and the CLI share it, so they cannot drift
/// apart. Built per call: nothing here outlives a `pam_end`.
public struct Runtime: Sendable {
    /// Where the factors find their devices.
    public struct Options: Sendable, Equatable {
        /// The simulated sensor's control directory.
        public var sensorDirectory = FactorPlugin.DeviceSide.defaultControlDirectory
        /// Accept a sensor directory owned by the current user instead of root: tests and the demo only.
        public var sensorOwnedByCurrentUser = false

        /// Defaults: the system sensor.
        public init() {}
    }

    /// The options used.
    public let options: Options
    /// Where state is kept and secrets checked.
    public let vault: any Vault
    /// The factors' settings in effect (global, or a policy's).
    public let settings: SettingsBook
    /// The factors built, in `plugins` order.
    public let authenticators: [any Authenticator]

    /// Builds the person side of each of `plugins` (every factor Keyway has, unless told) over `vault` with
    /// `settings`. The module passes only the factors its policy names, from the list it read the configuration
    /// with, so it builds that list once and no factor it will not ask.
    public init(
        vault: any Vault, options: Options = Options(), settings: SettingsBook = SettingsBook(),
        plugins: [FactorPlugin] = Factors.all
    ) {
        self.options = options
        self.vault = vault
        self.settings = settings
        let owner = options.sensorOwnedByCurrentUser ? geteuid() : 0
        authenticators = plugins.map { plugin in
            plugin.personSide(
                FactorPlugin.PersonSide(
                    vault: vault, settings: settings[plugin.kind], sensorDirectory: options.sensorDirectory,
                    sensorOwner: owner))
        }
    }

    /// The factor's plugin, if Keyway has it.
    public func authenticator(_ kind: FactorKind) -> (any Authenticator)? {
        authenticators.first { $0.factor == kind }
    }

    /// The registry of the factors.
    public var registry: FactorRegistry { FactorRegistry(authenticators) }

    /// A fresh evaluation context over the factors.
    public func context(_ options: EvaluationContext.Options = .init()) -> EvaluationContext {
        EvaluationContext(registry: registry, options: options)
    }
}

extension SettingsBook {
    /// Replaces the wait setting of every factor with a device (`[biometric] timeout`: the module's `timeout=`).
    public mutating func setSensorTimeout(seconds: Int) {
        for plugin in Factors.all {
            guard let arming = plugin.arming else { continue }
            self[plugin.kind].set(arming.waitSetting.key, .duration(Int64(seconds) * 1000))
        }
    }
}
