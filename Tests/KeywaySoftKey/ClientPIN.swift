import Synchronization

/// authenticatorClientPIN (CTAP 2.0 §5.5) with PIN protocol one: getRetries, getKeyAgreement and getPINToken, and
/// the pinAuth that makeCredential and getAssertion carry. The PIN is the `pin` knob; its tries left are kept in
/// `DIR/pin-retries` (the key's own counter, surviving a restart); the key-agreement key, the PIN token and the
/// count of wrong PINs in a row live as long as the process does (a power cycle).
extension SoftKey {
    /// The file that keeps the PIN's tries left.
    static let retriesFile = "pin-retries"

    /// {1: pinProtocol, 2: subCommand, 3: keyAgreement?, 4: pinAuth?, 5: newPinEnc?, 6: pinHashEnc?}.
    func clientPIN(_ parameters: CBOR, knobs: Knobs) throws -> Reply {
        guard try parameters.required(1).int == 1 else { throw CTAPStatus.invalidParameter }
        guard let subCommand = try parameters.required(2).int else { throw CTAPStatus.cborUnexpectedType }
        switch subCommand {
        case 1:  // getRetries
            return Reply(status: .ok, body: .map([.int(3): .int(retries(knobs))]), detail: "retries")
        case 2:  // getKeyAgreement
            guard let key = PINSession.shared.agreementKey(), let point = P256.publicKey(key) else {
                throw CTAPStatus.other
            }
            let cose = CBOR.map([
                .int(1): .int(2), .int(3): .int(-25), .int(-1): .int(1), .int(-2): .bytes(point.x),
                .int(-3): .bytes(point.y),
            ])
            return Reply(status: .ok, body: .map([.int(1): cose]), detail: "key-agreement")
        case 5:  // getPINToken
            return try pinToken(parameters, knobs: knobs)
        default:
            throw CTAPStatus.invalidParameter  // setPIN and changePIN: the knobs set the PIN
        }
    }

    /// getPINToken: the PIN's hash, encrypted under the ECDH secret, checked against the knob's; each try counts
    /// before it is checked, a right PIN gives the tries back.
    private func pinToken(_ parameters: CBOR, knobs: Knobs) throws -> Reply {
        guard let pin = knobs.pin else { throw CTAPStatus.pinNotSet }
        let platform = try parameters.required(3)
        let hashEnc = try parameters.requiredBytes(6)
        guard let x = platform[int: -2]?.byteString, let y = platform[int: -3]?.byteString else {
            throw CTAPStatus.missingParameter
        }
        let left = retries(knobs)
        guard left > 0 else { throw CTAPStatus.pinBlocked }
        guard !PINSession.shared.authBlocked else { throw CTAPStatus.pinAuthBlocked }
        guard let key = PINSession.shared.agreementKey(), let z = P256.sharedX(key, x: x, y: y) else {
            throw CTAPStatus.invalidParameter
        }
        let shared = Sodium.sha256(z)
        setRetries(left - 1)
        let wanted = Array(Sodium.sha256(Array(pin.utf8)).prefix(16))
        guard hashEnc.count == 16, let hash = P256.cbc(encrypting: false, key: shared, hashEnc), hash == wanted else {
            let inRow = PINSession.shared.wrongPIN()
            if left - 1 == 0 { throw CTAPStatus.pinBlocked }
            if inRow >= 3 { throw CTAPStatus.pinAuthBlocked }
            return Reply(status: .pinInvalid, detail: "retries=\(left - 1)")
        }
        setRetries(knobs.pinRetries)
        guard let token = PINSession.shared.rightPIN(),
            let tokenEnc = P256.cbc(encrypting: true, key: shared, token)
        else { throw CTAPStatus.other }
        return Reply(status: .ok, body: .map([.int(2): .bytes(tokenEnc)]), detail: "token")
    }

    /// Whether a request's pinAuth (key 6 of getAssertion, 8 of makeCredential) verifies: HMAC-SHA-256 of the
    /// client data hash under this power cycle's PIN token, its first 16 bytes. Throws when it does not; false when
    /// there is none.
    func pinAuthVerified(_ parameters: CBOR, at key: Int, protocolAt protocolKey: Int, clientDataHash: [UInt8])
        throws -> Bool
    {
        guard let auth = parameters[int: key] else { return false }
        guard let given = auth.byteString else { throw CTAPStatus.cborUnexpectedType }
        guard parameters[int: protocolKey]?.int == 1 else { throw CTAPStatus.invalidParameter }
        guard let token = PINSession.shared.token,
            Array(P256.hmac(key: token, clientDataHash).prefix(16)) == given
        else { throw CTAPStatus.pinAuthInvalid }
        return true
    }

    /// The PIN's tries left: the file's count, or the knob's maximum when it has none.
    func retries(_ knobs: Knobs) -> Int {
        guard let bytes = directory.read(Self.retriesFile, limit: 16),
            let count = Int(String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace })
        else { return knobs.pinRetries }
        return max(0, min(count, 8))
    }

    private func setRetries(_ count: Int) { _ = directory.replace(Self.retriesFile, with: Array("\(count)\n".utf8)) }
}

/// What the key forgets when it loses power: its ECDH key, its PIN token, wrong PINs in a row.
final class PINSession: Sendable {
    static let shared = PINSession()

    private struct State {
        var agreement: [UInt8]? = nil
        var token: [UInt8]? = nil
        var wrongInRow = 0
    }
    private let state = Mutex(State())

    /// This power cycle's key-agreement key (made when first asked for).
    func agreementKey() -> [UInt8]? {
        state.withLock { state in
            if state.agreement == nil { state.agreement = P256.generate() }
            return state.agreement
        }
    }

    /// The PIN token given out, if a right PIN was given this power cycle.
    var token: [UInt8]? { state.withLock { $0.token } }

    /// After three wrong PINs in a row only a power cycle lets the key take another (CTAP2_ERR_PIN_AUTH_BLOCKED).
    var authBlocked: Bool { state.withLock { $0.wrongInRow >= 3 } }

    /// A wrong PIN: a new key-agreement key, the token withdrawn; returns how many in a row.
    func wrongPIN() -> Int {
        state.withLock { state in
            state.agreement = P256.generate()
            state.token = nil
            state.wrongInRow += 1
            return state.wrongInRow
        }
    }

    /// A right PIN: a new token (32 bytes), the row of wrong ones ended.
    func rightPIN() -> [UInt8]? {
        state.withLock { state in
            state.wrongInRow = 0
            state.token = Sodium.random(32)
            return state.token
        }
    }
}
