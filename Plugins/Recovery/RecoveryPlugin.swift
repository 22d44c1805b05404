public import KeywayCore

extension RecoveryAuthenticator {
    /// Recovery codes as a plugin.
    public static var plugin: FactorPlugin {
        FactorPlugin(
            .recovery, summary: "single-use recovery codes, for when the usual factor is lost (ten, shown once)",
            enrollment: .sharedSecret,
            enrollmentHelp: "keywayd makes ten single-use codes, shown once; typing one back saves them and voids any "
                + "earlier set", settings: [Setting.attempts()],
            specimen: FactorPlugin.Specimen { vault, user, _ throws(AuthenticationError) in
                // The set is confirmed with its first code, which keeps working; a code of no set never does.
                let codes = try vault.offer(.recovery, for: user, by: "conformance").split(
                    separator: UInt8(ascii: "\n"))
                let first = Evidence.secret(Secret(copying: Array(codes[0])))
                try vault.enroll(first, of: .recovery, for: user, label: nil, by: "conformance")
                return .init(right: first, wrong: .secret(Secret(copying: Array("abcd-efgh-jkmn".utf8))))
            },
            spendable: RecoverySet.spendable,
            personSide: { side in RecoveryAuthenticator(vault: side.vault) },
            vaultSide: { side in RecoveryKeeper(store: side.store, clock: side.clock, hasher: side.hasher) })
    }
}
