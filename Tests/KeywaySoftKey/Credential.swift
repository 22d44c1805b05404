/// What a credential's algorithm does with its private key: the public key as a COSE key, and signatures.
extension StoredCredential {
    /// A new credential of `algorithm` for the relying party whose id hashes to `rpIDHash`; nil when libcrypto
    /// fails.
    static func make(algorithm: Int, rpIDHash: [UInt8]) -> StoredCredential? {
        let secret = algorithm == SoftKey.es256 ? P256.generate() : Sodium.random(32)
        guard let secret else { return nil }
        return StoredCredential(
            id: Sodium.random(32), seed: secret, rpIDHash: rpIDHash, counter: 0, algorithm: algorithm)
    }

    /// The public key as a COSE_Key: Ed25519 {1: 1 (OKP), 3: -8, -1: 6, -2: x}; P-256 {1: 2 (EC2), 3: -7, -1: 1,
    /// -2: x, -3: y}.
    var coseKey: [UInt8]? {
        guard algorithm == SoftKey.es256 else {
            return CBOR.map([
                .int(1): .int(1), .int(3): .int(SoftKey.eddsa), .int(-1): .int(6),
                .int(-2): .bytes(Sodium.publicKey(seed: seed)),
            ]).encoded()
        }
        guard let point = P256.publicKey(seed) else { return nil }
        return CBOR.map([
            .int(1): .int(2), .int(3): .int(SoftKey.es256), .int(-1): .int(1), .int(-2): .bytes(point.x),
            .int(-3): .bytes(point.y),
        ]).encoded()
    }

    /// The signature of `message`: Ed25519's 64 bytes, or ECDSA's DER over SHA-256.
    func sign(_ message: [UInt8]) -> [UInt8]? {
        algorithm == SoftKey.es256 ? P256.sign(message, secret: seed) : Sodium.sign(message, seed: seed)
    }
}
