/// authenticatorMakeCredential (CTAP 2.0 §5.1): ES256 or Ed25519, the first of the client's choices the knobs allow,
/// with a packed attestation: signed by the key's attestation key, certified by its own certificate (x5c), or with
/// `attestation = self` by the new credential itself (no x5c).
extension SoftKey {
    /// COSE's EdDSA.
    static let eddsa = -8
    /// COSE's ES256 (ECDSA on P-256 with SHA-256).
    static let es256 = -7

    /// Makes a credential for `parameters`' relying party: {1: clientDataHash, 2: rp, 3: user, 4: pubKeyCredParams,
    /// 5: excludeList?, 6: extensions?, 7: options?, 8: pinAuth?, 9: pinProtocol?}.
    func makeCredential(_ parameters: CBOR, knobs: Knobs, presence: PresenceWait) throws -> Reply {
        let clientDataHash = try parameters.requiredBytes(1)
        guard let rpID = try parameters.required(2)[text: "id"]?.textString else { throw CTAPStatus.missingParameter }
        guard try parameters.required(3)[text: "id"]?.byteString != nil else { throw CTAPStatus.missingParameter }
        guard let algorithms = try parameters.required(4).arrayItems else { throw CTAPStatus.cborUnexpectedType }
        let rpIDHash = Sodium.sha256(Array(rpID.utf8))

        let offered = algorithms.compactMap {
            $0[text: "type"]?.textString == "public-key" ? $0[text: "alg"]?.int : nil
        }
        guard let algorithm = offered.first(where: { knobs.algorithms.contains($0) }) else {
            throw CTAPStatus.unsupportedAlgorithm
        }

        let options = parameters[int: 7] ?? .map([])
        if try options.option("rk") == true { throw CTAPStatus.unsupportedOption }
        var verify = try options.option("uv") == true
        if verify && knobs.verification != .builtin { throw CTAPStatus.unsupportedOption }

        if let excluded = parameters[int: 5] {
            let state = KeyState.load(from: directory)
            let ids = try excluded.credentialIDs()
            if ids.contains(where: { state.credential(id: $0, rpIDHash: rpIDHash) != nil }) {
                try requirePresence(knobs, presence)
                throw CTAPStatus.credentialExcluded
            }
        }
        if knobs.pin == nil, parameters[int: 8] != nil {
            // A pinAuth (empty: "touch to select") to a key with no PIN: after a touch, CTAP2_ERR_PIN_NOT_SET.
            try requirePresence(knobs, presence)
            throw CTAPStatus.pinNotSet
        }
        if knobs.pin != nil {
            // A key with a PIN makes credentials only for a client that proved it (CTAP 2.0 §5.1, step 6).
            guard try pinAuthVerified(parameters, at: 8, protocolAt: 9, clientDataHash: clientDataHash) else {
                throw CTAPStatus.pinRequired
            }
            verify = true
        }
        try requirePresence(knobs, presence)

        guard let credential = StoredCredential.make(algorithm: algorithm, rpIDHash: rpIDHash),
            let coseKey = credential.coseKey
        else { throw CTAPStatus.other }
        guard KeyState.update(in: directory, { $0.credentials.append(credential) }) != nil else {
            throw CTAPStatus.other  // the state could not be written: no credential to give out
        }
        var flags = AuthenticatorData.userPresent
        if verify { flags |= AuthenticatorData.userVerified }
        let authData = AuthenticatorData.make(
            rpIDHash: rpIDHash, flags: flags, counter: credential.counter,
            credential: (Self.aaguid, credential.id, coseKey))
        let statement: CBOR
        if knobs.selfAttestation {
            guard let signature = credential.sign(authData + clientDataHash) else { throw CTAPStatus.other }
            statement = .map([.text("alg"): .int(algorithm), .text("sig"): .bytes(signature)])
        } else {
            guard let attestation = Attestation.shared,
                let signature = P256.sign(authData + clientDataHash, secret: attestation.secret)
            else { throw CTAPStatus.other }
            statement = .map([
                .text("alg"): .int(Self.es256), .text("sig"): .bytes(signature),
                .text("x5c"): .array([.bytes(attestation.certificate)]),
            ])
        }
        let body = CBOR.map([.int(1): .text("packed"), .int(2): .bytes(authData), .int(3): statement])
        return Reply(
            status: .ok, body: body, detail: (algorithm == Self.es256 ? "es256" : "eddsa") + (verify ? " uv" : ""))
    }
}

/// The key's attestation key and its self-signed certificate, made when the process starts (a model's batch key).
struct Attestation: Sendable {
    let secret: [UInt8]
    let certificate: [UInt8]

    static let shared: Attestation? = {
        guard let secret = P256.generate(), let certificate = P256.certificate(secret) else { return nil }
        return Attestation(secret: secret, certificate: certificate)
    }()
}
