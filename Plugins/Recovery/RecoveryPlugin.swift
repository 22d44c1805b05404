public import KeywayCore

extension RecoveryAuthenticator {
    /// Recovery codes as a plugin.
    public static var plugin: FactorPlugin {
        FactorPlugin(
            .recovery, summary: "single-use recovery codes, for when the usual factor is lost (ten, shown once)",
            enrollment: .sharedSecret, settings: [Setting.attempts()],
            personSide: { side in RecoveryAuthenticator(vault: side.vault) },
            vaultSide: { side in RecoveryKeeper(store: side.store, clock: side.clock, hasher: side.hasher) })
    }
}
