/// authenticatorMakeCredential (CTAP 2.0 §5.1), Ed25519 alone, with self attestation ("packed", no x5c).
extension SoftKey {
    /// COSE's EdDSA.
    static let eddsa = -8

    /// Makes a credential for `parameters`' relying party: {1: clientDataHash, 2: rp, 3: user, 4: pubKeyCredParams,
    /// 5: excludeList?, 6: extensions?, 7: options?, 8: pinAuth?, 9: pinProtocol?}.
    func makeCredential(_ parameters: CBOR, knobs: Knobs, presence: PresenceWait) throws -> Reply {
        let clientDataHash = try parameters.requiredBytes(1)
        guard let rpID = try parameters.required(2)[text: "id"]?.textString else { throw CTAPStatus.missingParameter }
        guard try parameters.required(3)[text: "id"]?.byteString != nil else { throw CTAPStatus.missingParameter }
        guard let algorithms = try parameters.required(4).arrayItems else { throw CTAPStatus.cborUnexpectedType }
        let rpIDHash = Sodium.sha256(Array(rpID.utf8))

        let offersEdDSA = algorithms.contains {
            $0[text: "alg"]?.int == Self.eddsa && $0[text: "type"]?.textString == "public-key"
        }
        guard offersEdDSA else { throw CTAPStatus.unsupportedAlgorithm }

        let options = parameters[int: 7] ?? .map([])
        if try options.option("rk") == true { throw CTAPStatus.unsupportedOption }
        let verify = try options.option("uv") == true
        if verify && knobs.verification != .builtin { throw CTAPStatus.unsupportedOption }

        if let excluded = parameters[int: 5] {
            let state = KeyState.load(from: directory)
            let ids = try excluded.credentialIDs()
            if ids.contains(where: { state.credential(id: $0, rpIDHash: rpIDHash) != nil }) {
                try requirePresence(knobs, presence)
                throw CTAPStatus.credentialExcluded
            }
        }
        if parameters[int: 8] != nil {
            // A pinAuth (empty: "touch to select") to a key with no PIN: after a touch, CTAP2_ERR_PIN_NOT_SET.
            try requirePresence(knobs, presence)
            throw CTAPStatus.pinNotSet
        }
        try requirePresence(knobs, presence)

        let credential = StoredCredential(
            id: Sodium.random(32), seed: Sodium.random(32), rpIDHash: rpIDHash, counter: 0)
        guard KeyState.update(in: directory, { $0.credentials.append(credential) }) != nil else {
            throw CTAPStatus.other  // the state could not be written: no credential to give out
        }
        var flags = AuthenticatorData.userPresent
        if verify { flags |= AuthenticatorData.userVerified }
        let authData = AuthenticatorData.make(
            rpIDHash: rpIDHash, flags: flags, counter: credential.counter,
            credential: (Self.aaguid, credential.id, Sodium.publicKey(seed: credential.seed)))
        let signature = Sodium.sign(authData + clientDataHash, seed: credential.seed)
        let body = CBOR.map([
            .int(1): .text("packed"), .int(2): .bytes(authData),
            .int(3): .map([.text("alg"): .int(Self.eddsa), .text("sig"): .bytes(signature)]),
        ])
        return Reply(status: .ok, body: body, detail: verify ? "uv" : "")
    }
}
