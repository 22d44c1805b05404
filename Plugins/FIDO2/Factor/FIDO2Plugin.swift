public import KeywayCore

/// Security keys as a plugin: their settings, how keywayd arms them, and how their two sides are built.
public enum FIDO2Plugin {
    /// `[fido2] relying-party`.
    public static var relyingPartySetting: Setting {
        Setting(
            "relying-party", .word(maxLength: 255), default: .word("pam://keyway"), enforcedBy: .daemon,
            help: "the relying party id credentials are made for; the same on every host of a fleet lets one "
                + "enrollment serve them all")
    }

    /// `[fido2] user-verification`.
    public static var userVerificationSetting: Setting {
        Setting(
            "user-verification", .choice(["required", "preferred", "discouraged"]), default: .choice("preferred"),
            enforcedBy: .daemon,
            help: "required: the key must verify its user (its PIN or its own reader) as well as a touch; preferred: "
                + "asked of keys that can; discouraged: a touch alone")
    }

    /// `[fido2] pin`.
    public static var pinSetting: Setting {
        Setting(
            "pin", .choice(["ask", "never"]), default: .choice("never"),
            help: "ask: the person types the key's PIN before touching it, and the key checks it (user verification "
                + "by PIN); it goes to keywayd for that one attempt and is never stored; never: no PIN is asked (keys "
                + "without one, or with their own fingerprint reader)")
    }

    /// `[fido2] timeout`.
    public static var timeoutSetting: Setting { .deviceTimeout(waiting: "for a touch") }

    /// `[fido2] remote`.
    public static var remoteSetting: Setting { .remote(device: "key") }

    /// `[fido2] lockout-after`.
    public static var lockoutSetting: Setting {
        Setting(
            "lockout-after", .integer(1...20), default: .integer(5), enforcedBy: .daemon,
            help: "consecutive failures, across evaluations, after which the key is locked until an administrator "
                + "resets it (keyway reset fido2)")
    }

    /// What its refusals are called: Keyway's own.
    public static var codes: FactorCodes { FactorCodes(unlockedBy: "an administrator must reset it") }

    /// The plugin.
    public static var plugin: FactorPlugin {
        FactorPlugin(
            .fido2, aliases: ["security-key", "u2f"],
            summary: "a FIDO2/U2F security key (YubiKey, SoloKey, Nitrokey), touched; keywayd checks its signature "
                + "and its signature counter",
            input: .presented, enrollment: .atDevice, part: "key",
            enrollmentHelp: "keywayd makes a credential at the key, touched once, kept under --name (default key); "
                + "several keys per account",
            codes: codes, device: "security key",
            settings: [
                Setting.attempts(), relyingPartySetting, userVerificationSetting, pinSetting, timeoutSetting,
                remoteSetting, lockoutSetting,
            ],
            specimen: specimen, arming: arming,
            servesRemoteSessions: { settings in settings.choice(remoteSetting) == "allow" },
            spendable: FIDO2Keys.spendable,
            personSide: { side in
                FIDO2Authenticator(
                    vault: side.vault, timeout: side.settings.duration(timeoutSetting) ?? .seconds(30),
                    servesRemoteSessions: side.settings.choice(remoteSetting) == "allow",
                    asksPIN: side.settings.choice(pinSetting) == "ask")
            },
            vaultSide: { side in
                FIDO2Keeper(
                    store: side.store, clock: side.clock,
                    schedule: ThrottleSchedule(lockAfter: side.settings.integer(lockoutSetting)),
                    requiresVerification: side.settings.choice(userVerificationSetting) == "required",
                    settings: side.settings, device: side.devices[backend])
            })
    }

    /// The backend keywayd builds for keys: libfido2 (Plugins/FIDO2/Key).
    public static let backend = "libfido2"

    /// How keywayd arms a key: the sensor's rule, the libfido2 backend's listener.
    static var arming: FactorPlugin.Arming {
        FactorPlugin.Arming(
            waitSetting: timeoutSetting, rule: .ownerOrLocalRoot, backends: { _ in [backend] }, readsEnrollment: true,
            listener: { side in
                guard let keys = side.backends[backend] else {
                    return UnavailableListener(
                        AuthenticationError(.factorNotAvailable, "keywayd has no \(backend) backend for keys"))
                }
                return keys.listener(side)
            })
    }

    /// A registered key and two presentations: its signature with a higher counter, and another key's.
    static var specimen: FactorPlugin.Specimen {
        FactorPlugin.Specimen { vault, user, _ throws(AuthenticationError) in
            let id: [UInt8] = Array(repeating: 7, count: 32)
            let made = FIDO2Credential(
                name: "key", id: id, algorithm: FIDO2Credential.eddsa, publicKey: Array(repeating: 9, count: 32),
                counter: 1)
            try vault.enroll(.device(made.made), of: .fido2, for: user, label: "key", by: "conformance")
            return .init(
                right: .device(
                    FIDO2Presentation(
                        outcome: .signed, credentialID: id, counter: 2, userPresent: true, userVerified: false
                    ).encoded),
                wrong: .device(FIDO2Presentation.nothingSigned(.unknownKey).encoded))
        }
    }
}
