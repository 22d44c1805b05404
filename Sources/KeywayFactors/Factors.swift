import KeywayBiometric
import KeywayBiometricSimulator
public import KeywayCore
import KeywayFIDO2
import KeywayGesture
import KeywayPasscode
import KeywayRecovery
import KeywayTOTP

/// Every factor Keyway has, as data: the one list of plugins (docs/ARCHITECTURE.md §11). It sits below both sides,
/// so the PAM module, the command line and keywayd read the same list and no side imports another's composition:
/// the configuration's sections, keywayd's keepers, the CLI's words and keyway.conf(5) all come from here.
///
/// A new factor is a folder under `Plugins/`, its targets in Package.swift, and one entry here; a factor with a
/// built-in backend (the biometric's simulated sensor) is given it here.
public enum Factors {
    /// The plugins, in the order `keyway status` and keyway.conf(5) list them.
    public static var all: [FactorPlugin] {
        [
            GestureAuthenticator.plugin, BiometricAuthenticator.plugin(simulation: SimulatedSensor.simulation),
            PasscodeAuthenticator.plugin,
            TOTPAuthenticator.plugin, RecoveryAuthenticator.plugin, FIDO2Plugin.plugin,
        ]
    }

    /// How the records of the factors whose uses change them split into their spendable parts: the plugins' and the
    /// pass's (`SpendableLayout`). A fleet's store is opened and migrated with these.
    public static var spendable: SpendableLayouts {
        var layouts: [SpendableLayout] = [PassKeeper.spendable]
        for plugin in all { if let layout = plugin.spendable { layouts.append(layout) } }
        return SpendableLayouts(layouts)
    }

    /// The factors' parts of a fleet's database schema (TOTP's), which `keyway store migrate` composes into the
    /// migrations.
    public static var database: [DatabaseSchema] {
        var parts: [DatabaseSchema] = []
        for plugin in all { if let part = plugin.database { parts.append(part()) } }
        return parts
    }
}
