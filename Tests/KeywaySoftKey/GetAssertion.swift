/// authenticatorGetAssertion (CTAP 2.0 §5.2) for the credentials in the allow list; no resident keys.
extension SoftKey {
    /// Signs for the first credential of `parameters`' allow list this key holds for the relying party: {1: rpId,
    /// 2: clientDataHash, 3: allowList, 4: extensions?, 5: options?, 6: pinAuth?, 7: pinProtocol?}.
    func getAssertion(_ parameters: CBOR, knobs: Knobs, presence: PresenceWait) throws -> Reply {
        guard let rpID = try parameters.required(1).textString else { throw CTAPStatus.cborUnexpectedType }
        let clientDataHash = try parameters.requiredBytes(2)
        let allowed = try parameters[int: 3]?.credentialIDs() ?? []
        let rpIDHash = Sodium.sha256(Array(rpID.utf8))

        let options = parameters[int: 5] ?? .map([])
        var verify = try options.option("uv") == true
        if verify && knobs.verification != .builtin { throw CTAPStatus.unsupportedOption }
        let presenceWanted = try options.option("up") ?? true

        // Answered at once, before any touch: the key holds none of them.
        let state = KeyState.load(from: directory)
        guard let id = allowed.first(where: { state.credential(id: $0, rpIDHash: rpIDHash) != nil }) else {
            throw CTAPStatus.noCredentials
        }
        if knobs.pin == nil, parameters[int: 6] != nil {
            try requirePresence(knobs, presence)
            throw CTAPStatus.pinNotSet
        }
        // A pinAuth made with this power cycle's PIN token: the user verified by the PIN.
        if try pinAuthVerified(parameters, at: 6, protocolAt: 7, clientDataHash: clientDataHash) { verify = true }
        if presenceWanted { try requirePresence(knobs, presence) }

        // The counter as the knob says, read and written back under the state's lock (the file may have changed
        // while the key waited for the touch).
        let counted = KeyState.update(in: directory) { state -> StoredCredential? in
            guard let index = state.credentials.firstIndex(where: { $0.id == id && $0.rpIDHash == rpIDHash }) else {
                return nil
            }
            var credential = state.credentials[index]
            switch knobs.counter {
            case .count:
                credential.counter &+= 1
                state.credentials[index].counter = credential.counter
            case .repeated: break
            case .back: credential.counter = credential.counter == 0 ? 0 : credential.counter - 1
            }
            return credential
        }
        guard let found = counted else { throw CTAPStatus.other }  // the state could not be written
        guard let credential = found else { throw CTAPStatus.noCredentials }  // deleted while the key waited

        var flags: UInt8 = presenceWanted ? AuthenticatorData.userPresent : 0
        if verify { flags |= AuthenticatorData.userVerified }
        let authData = AuthenticatorData.make(rpIDHash: rpIDHash, flags: flags, counter: credential.counter)
        guard var signature = credential.sign(authData + clientDataHash) else { throw CTAPStatus.other }
        if knobs.badSignature { signature[signature.count - 1] ^= 1 }
        let body = CBOR.map([
            .int(1): .map([.text("id"): .bytes(credential.id), .text("type"): .text("public-key")]),
            .int(2): .bytes(authData), .int(3): .bytes(signature),
        ])
        // What was signed, for a test that checks it with fido2-assert -V: the hash, the authenticator data, the
        // signature, in hex.
        return Reply(
            status: .ok, body: body,
            detail: "counter=\(credential.counter)" + (verify ? " uv" : "")
                + " cdh=\(clientDataHash.hex) authdata=\(authData.hex) sig=\(signature.hex)")
    }
}
