/// The authenticator data a credential's signatures cover (WebAuthn §6.1): the relying party's id hash, the flags,
/// the signature counter, and at creation the attested credential data with the public key as a COSE key.
enum AuthenticatorData {
    /// User present.
    static let userPresent: UInt8 = 0x01
    /// User verified.
    static let userVerified: UInt8 = 0x04
    /// Attested credential data included.
    static let attestedCredentialData: UInt8 = 0x40

    /// `rpIDHash | flags | counter (4 bytes, big-endian)`, then for a new credential `aaguid | id length (2 bytes,
    /// big-endian) | id | COSE key`.
    static func make(
        rpIDHash: [UInt8], flags: UInt8, counter: UInt32,
        credential: (aaguid: [UInt8], id: [UInt8], coseKey: [UInt8])? = nil
    ) -> [UInt8] {
        var data = rpIDHash
        data.append(credential == nil ? flags : flags | attestedCredentialData)
        data += bigEndian(counter)
        if let credential {
            data += credential.aaguid
            data += [UInt8(credential.id.count >> 8 & 0xFF), UInt8(credential.id.count & 0xFF)]
            data += credential.id
            data += credential.coseKey
        }
        return data
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
    }
}
