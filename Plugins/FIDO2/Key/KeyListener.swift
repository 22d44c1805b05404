import CFido2
import KeywayCore
import KeywayFIDO2

/// keywayd's wait at a security key for one armed authentication: the first key plugged in is held for the lease;
/// each `next` asks it for an assertion over a fresh random challenge, allowed only the account's credentials, with
/// user presence required and user verification as `[fido2] user-verification` says, and checks the signature
/// against the stored public key (`fido_assert_verify`). What it found is the evidence the keeper counts
/// (`FIDO2Presentation`), a PIN the key refused included. A key that times out waiting for a touch is asked again
/// until the lease ends; a key that is pulled out, whose PIN is blocked or nearly so (`KeyDevice.refusesPIN`), or
/// that cannot verify its user when that is required ends the wait, so the policy's fallback runs. The PIN the person typed (`side.typed`) is used for this
/// lease only and wiped with the listener.
final class KeyListener: DeviceListener {
    private let relyingParty: String
    private let verification: String
    private let credentials: [FIDO2Credential]
    private let pin: PINText
    private var key: KeyDevice?

    init(_ side: FactorPlugin.DeviceSide) {
        relyingParty = side.settings.word(FIDO2Plugin.relyingPartySetting)
        verification = side.settings.choice(FIDO2Plugin.userVerificationSetting)
        credentials = side.enrollment.flatMap { try? FIDO2Keys(decoding: $0.payload).credentials } ?? []
        pin = PINText(side.typed)
    }

    func hold() throws(DeviceHoldFailure) {
        guard !credentials.isEmpty else {
            throw .unavailable(
                AuthenticationError(.factorNotEnrolled, "no security key is registered for this account"))
        }
        do throws(AuthenticationError) {
            guard let key = try KeyDevice.first() else {
                throw AuthenticationError(.factorNotAvailable, "no security key is plugged in")
            }
            self.key = key
        } catch {
            throw .unavailable(error)
        }
    }

    func next(cancellation: CancellationFlag) -> DeviceEvent? {
        guard let key else { return nil }
        while !cancellation.isCancelled {
            let verify: fido_opt_t =
                switch verification {
                case "required": FIDO_OPT_TRUE
                case "preferred": key.verifiesUsers ? FIDO_OPT_TRUE : FIDO_OPT_OMIT
                default: FIDO_OPT_OMIT
                }
            // A PIN verifies the user itself: libfido2 sends the key a PIN token instead of the uv option.
            let assertion = Assertion(
                relyingParty: relyingParty, allowing: credentials.map { $0.id },
                verify: pin.pointer == nil ? verify : FIDO_OPT_OMIT)
            let pin = self.pin
            if pin.pointer != nil, let refusal = key.refusesPIN() { return .ended(refusal) }
            guard
                let code = key.run(
                    stop: { cancellation.isCancelled }, { device in assertion.get(from: device, pin: pin) })
            else { return nil }
            switch code {
            case FIDO_OK:
                return .evidence(.device(assertion.checked(against: credentials).encoded))
            case FIDO_ERR_PIN_INVALID:
                return .evidence(.device(FIDO2Presentation.nothingSigned(.wrongPIN).encoded))
            case FIDO_ERR_NO_CREDENTIALS:
                // Another person's key, or one not registered here: a counted failure, like a wrong finger.
                return .evidence(.device(FIDO2Presentation.nothingSigned(.unknownKey).encoded))
            case FIDO_ERR_USER_ACTION_TIMEOUT, FIDO_ERR_ACTION_TIMEOUT, FIDO_ERR_TIMEOUT:
                continue  // nobody touched it in the key's own time; ask again with a new challenge
            default:
                return .ended(Self.outcome(of: code, at: key, doing: "waiting for a touch"))
            }
        }
        return nil
    }

    func handled() {}

    func release() { key = nil }

    /// What a failed call on the key means for the policy: LocalAuthentication outcomes, so the fallback runs.
    static func outcome(of code: Int32, at key: KeyDevice, doing what: String) -> AuthenticationError {
        let name = KeyDevice.describe(code)
        switch code {
        case FIDO_ERR_PIN_BLOCKED, FIDO_ERR_PIN_AUTH_BLOCKED, FIDO_ERR_UV_BLOCKED:
            return AuthenticationError(
                .factorNotAvailable, "the key's own PIN or reader is blocked after too many tries (\(name))")
        case FIDO_ERR_PIN_REQUIRED:
            return AuthenticationError(
                .factorNotAvailable, "the key has a PIN and none was given ([fido2] pin = ask asks for it) (\(name))")
        case FIDO_ERR_PIN_INVALID:
            return AuthenticationError(.authenticationFailed, "the security key refused the PIN (\(name))")
        case FIDO_ERR_PIN_NOT_SET, FIDO_ERR_UV_INVALID, FIDO_ERR_UNSUPPORTED_OPTION:
            return AuthenticationError(
                .factorNotAvailable, "the key cannot verify its user as [fido2] user-verification asks (\(name))")
        case FIDO_ERR_OPERATION_DENIED, FIDO_ERR_KEEPALIVE_CANCEL:
            return AuthenticationError(.userCancel, "cancelled at the key (\(name))")
        case FIDO_ERR_TX, FIDO_ERR_RX:
            return AuthenticationError(
                .factorNotAvailable, "the security key at \(key.path) was pulled out or stopped answering (\(name))")
        default:
            return AuthenticationError(.factorNotAvailable, "the security key failed \(what) (\(name))")
        }
    }
}

/// One assertion being asked for (libfido2's `fido_assert_t`), and how it checks out.
final class Assertion: @unchecked Sendable {
    private let assertion: OpaquePointer

    init(relyingParty: String, allowing ids: [[UInt8]], verify: fido_opt_t) {
        assertion = fido_assert_new()
        _ = fido_assert_set_rp(assertion, relyingParty)
        let challenge = KeyDevice.challenge()
        _ = fido_assert_set_clientdata_hash(assertion, challenge, challenge.count)
        for id in ids { _ = fido_assert_allow_cred(assertion, id, id.count) }
        _ = fido_assert_set_up(assertion, FIDO_OPT_TRUE)
        _ = fido_assert_set_uv(assertion, verify)
    }

    deinit {
        var handle: OpaquePointer? = assertion
        fido_assert_free(&handle)
    }

    /// Asks the key (waits for a touch), with the person's PIN if one was typed.
    func get(from device: OpaquePointer, pin: PINText) -> Int32 { fido_dev_get_assert(device, assertion, pin.pointer) }

    /// The first assertion checked against the registered credentials: which one signed, whether its signature over
    /// this challenge verifies with the stored public key, the counter and the flags.
    func checked(against credentials: [FIDO2Credential]) -> FIDO2Presentation {
        guard fido_assert_count(assertion) >= 1 else { return .nothingSigned(.unknownKey) }
        let id = Array(
            UnsafeBufferPointer(start: fido_assert_id_ptr(assertion, 0), count: fido_assert_id_len(assertion, 0)))
        let flags = fido_assert_flags(assertion, 0)
        let counter = fido_assert_sigcount(assertion, 0)
        let present = flags & 0x01 != 0
        let verified = flags & 0x04 != 0
        guard let credential = credentials.first(where: { $0.id == id }) else {
            return FIDO2Presentation(
                outcome: .unknownKey, credentialID: id, counter: counter, userPresent: present, userVerified: verified)
        }
        let signed = verifies(credential)
        return FIDO2Presentation(
            outcome: signed ? .signed : .badSignature, credentialID: id, counter: counter, userPresent: present,
            userVerified: verified)
    }

    private func verifies(_ credential: FIDO2Credential) -> Bool {
        switch credential.algorithm {
        case FIDO2Credential.es256:
            var key = es256_pk_new()
            defer { es256_pk_free(&key) }
            guard es256_pk_from_ptr(key, credential.publicKey, credential.publicKey.count) == FIDO_OK else {
                return false
            }
            return fido_assert_verify(assertion, 0, COSE_ES256, UnsafeRawPointer(key)) == FIDO_OK
        case FIDO2Credential.eddsa:
            var key = eddsa_pk_new()
            defer { eddsa_pk_free(&key) }
            guard eddsa_pk_from_ptr(key, credential.publicKey, credential.publicKey.count) == FIDO_OK else {
                return false
            }
            return fido_assert_verify(assertion, 0, COSE_EDDSA, UnsafeRawPointer(key)) == FIDO_OK
        default:
            return false
        }
    }
}
