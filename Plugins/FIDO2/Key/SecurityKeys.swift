import CFido2
public import KeywayCore
import KeywayFIDO2

/// Security keys through libfido2: the backend keywayd offers the FIDO2 factor as "libfido2" (docs/ARCHITECTURE.md
/// §19). It makes credentials (`enroll`) and, for each armed authentication, a `KeyListener` that asks the key for
/// assertions over fresh challenges and checks them against the account's public keys. Only keywayd links it.
public final class SecurityKeys: DeviceBackend {
    public var name: String { FIDO2Plugin.backend }
    public var place: String { "(keys come and go; each wait looks for one)" }

    /// Starts libfido2.
    public init() { fido_init(0) }

    public func listener(_ side: FactorPlugin.DeviceSide) -> any DeviceListener { KeyListener(side) }

    /// Makes a credential for `side.user` at the first key found (a touch), excluding the keys already registered,
    /// and hands it over in the stored form (`FIDO2Credential.made`). ES256 first, as most keys make it; EdDSA for
    /// a key that makes only that.
    public func enroll(
        _ side: FactorPlugin.DeviceSide, label: String, progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) -> [UInt8] {
        guard let key = try KeyDevice.first() else {
            throw AuthenticationError(.factorNotAvailable, "no security key is plugged in")
        }
        let relyingParty = side.settings.word(FIDO2Plugin.relyingPartySetting)
        let verification = side.settings.choice(FIDO2Plugin.userVerificationSetting)
        let registered =
            try side.enrollment.map { record throws(AuthenticationError) in
                try FIDO2Keys(decoding: record.payload).credentials.map { $0.id }
            } ?? []
        let user = Array(side.user.name.utf8)
        progress("Touch your security key to register it (\(label)).")
        let pin = PINText(side.typed)
        if pin.pointer != nil, let refusal = key.refusesPIN() { throw refusal }
        for algorithm in [COSE_ES256, COSE_EDDSA] {
            let verify = verification == "required" && pin.pointer == nil
            let made = Credential(
                relyingParty: relyingParty, user: user, algorithm: algorithm, exclude: registered, verify: verify)
            guard let code = key.run(stop: cancelled, { device in made.make(on: device, pin: pin) }) else {
                throw AuthenticationError(.appCancel, "the enrollment stopped before the key was touched")
            }
            switch code {
            case FIDO_OK:
                // The attestation proves the key holds the new credential's private key: its signature over this
                // enrollment's challenge, by the key's attestation certificate (x5c) or by the credential itself.
                guard made.attestationVerifies else {
                    throw AuthenticationError(
                        .enrollmentRefused, "the key's attestation does not verify; nothing was registered")
                }
                return FIDO2Credential(
                    name: label, id: made.id, algorithm: made.type, publicKey: made.publicKey, counter: made.counter
                ).made
            case FIDO_ERR_UNSUPPORTED_ALGORITHM where algorithm == COSE_ES256:
                continue
            case FIDO_ERR_CREDENTIAL_EXCLUDED:
                throw AuthenticationError(
                    .enrollmentRefused, "this key is already registered for \(side.user.name.escapingControlCharacters)"
                )
            default:
                throw KeyListener.outcome(of: code, at: key, doing: "registering the key")
            }
        }
        throw AuthenticationError(.enrollmentRefused, "the key makes neither ES256 nor EdDSA credentials")
    }
}

/// One credential being made (libfido2's `fido_cred_t`), and what it was once made.
final class Credential: @unchecked Sendable {
    private let credential: OpaquePointer
    let type: Int32

    init(relyingParty: String, user: [UInt8], algorithm: Int32, exclude: [[UInt8]], verify: Bool) {
        credential = fido_cred_new()
        type = algorithm
        _ = fido_cred_set_type(credential, algorithm)
        let challenge = KeyDevice.challenge()
        _ = fido_cred_set_clientdata_hash(credential, challenge, challenge.count)
        _ = fido_cred_set_rp(credential, relyingParty, "Keyway")
        _ = fido_cred_set_user(credential, user, user.count, String(decoding: user, as: UTF8.self), nil, nil)
        _ = fido_cred_set_rk(credential, FIDO_OPT_FALSE)
        _ = fido_cred_set_uv(credential, verify ? FIDO_OPT_TRUE : FIDO_OPT_OMIT)
        for id in exclude { _ = fido_cred_exclude(credential, id, id.count) }
    }

    deinit {
        var handle: OpaquePointer? = credential
        fido_cred_free(&handle)
    }

    /// Asks the key to make it (waits for a touch), with the person's PIN if one was typed.
    func make(on device: OpaquePointer, pin: PINText) -> Int32 {
        fido_dev_make_cred(device, credential, pin.pointer)
    }

    /// Whether the attestation statement's signature verifies: with the certificate it carries (x5c), or for self
    /// attestation with the new credential's own public key.
    var attestationVerifies: Bool {
        fido_cred_x5c_ptr(credential) != nil
            ? fido_cred_verify(credential) == FIDO_OK : fido_cred_verify_self(credential) == FIDO_OK
    }

    var id: [UInt8] {
        Array(UnsafeBufferPointer(start: fido_cred_id_ptr(credential), count: fido_cred_id_len(credential)))
    }
    var publicKey: [UInt8] {
        Array(UnsafeBufferPointer(start: fido_cred_pubkey_ptr(credential), count: fido_cred_pubkey_len(credential)))
    }
    var counter: UInt32 { fido_cred_sigcount(credential) }
}
