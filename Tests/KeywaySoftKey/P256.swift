import SoftKeyCrypto

/// The soft key's NIST P-256, AES and HMAC, through the C helper over libcrypto (Tests/SoftKeyCrypto): ES256
/// credentials, and the ECDH, AES-256-CBC and HMAC-SHA-256 of CTAP2's PIN protocol one.
enum P256 {
    /// A new private key (a 32-byte scalar), or nil when libcrypto fails.
    static func generate() -> [UInt8]? {
        var secret = [UInt8](repeating: 0, count: 32)
        return softkey_p256_generate(&secret) == 1 ? secret : nil
    }

    /// The public point of `secret`, as (x, y).
    static func publicKey(_ secret: [UInt8]) -> (x: [UInt8], y: [UInt8])? {
        var x = [UInt8](repeating: 0, count: 32)
        var y = [UInt8](repeating: 0, count: 32)
        guard secret.count == 32, softkey_p256_public(secret, &x, &y) == 1 else { return nil }
        return (x, y)
    }

    /// The DER ECDSA signature over SHA-256(`message`).
    static func sign(_ message: [UInt8], secret: [UInt8]) -> [UInt8]? {
        var signature = [UInt8](repeating: 0, count: 72)
        var length = 0
        guard secret.count == 32, softkey_p256_sign(secret, message, message.count, &signature, &length) == 1 else {
            return nil
        }
        return Array(signature[..<length])
    }

    /// A self-signed certificate (DER) for `secret`'s public key.
    static func certificate(_ secret: [UInt8]) -> [UInt8]? {
        var certificate = [UInt8](repeating: 0, count: 1024)
        var length = 0
        guard secret.count == 32, softkey_p256_certificate(secret, &certificate, &length) == 1 else { return nil }
        return Array(certificate[..<length])
    }

    /// ECDH's shared x coordinate of `secret` and the point (x, y); nil for a point not on the curve.
    static func sharedX(_ secret: [UInt8], x: [UInt8], y: [UInt8]) -> [UInt8]? {
        var z = [UInt8](repeating: 0, count: 32)
        guard secret.count == 32, x.count == 32, y.count == 32, softkey_p256_ecdh(secret, x, y, &z) == 1 else {
            return nil
        }
        return z
    }

    /// AES-256-CBC with a zero IV and no padding, in either direction; nil unless `input` is whole blocks.
    static func cbc(encrypting: Bool, key: [UInt8], _ input: [UInt8]) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: input.count)
        guard key.count == 32, softkey_aes256_cbc(encrypting ? 1 : 0, key, input, input.count, &output) == 1 else {
            return nil
        }
        return output
    }

    /// HMAC-SHA-256.
    static func hmac(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        _ = softkey_hmac_sha256(key, key.count, message, message.count, &mac)
        return mac
    }
}
