import CSodium
import KeywayCore

/// The soft key's cryptography, all through libsodium: SHA-256, Ed25519 from a 32-byte seed, random bytes.
enum Sodium {
    /// sodium_init; false when libsodium cannot be used.
    static func start() -> Bool { sodium_init() >= 0 }

    /// SHA-256 of `bytes`.
    static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: 32)
        crypto_hash_sha256(&digest, bytes, UInt64(bytes.count))
        return digest
    }

    /// `count` random bytes.
    static func random(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, count)
        return bytes
    }

    /// What `body` makes of the Ed25519 key pair of `seed`: the public key (32 bytes) and the secret key (64 bytes,
    /// wiped after).
    private static func withKeyPair<R>(seed: [UInt8], _ body: ([UInt8], [UInt8]) -> R) -> R {
        precondition(seed.count == 32, "an Ed25519 seed is 32 bytes")
        var publicKey = [UInt8](repeating: 0, count: 32)
        var secretKey = [UInt8](repeating: 0, count: 64)
        defer { secretKey.withUnsafeMutableBytes { secureZero($0) } }
        crypto_sign_seed_keypair(&publicKey, &secretKey, seed)
        return body(publicKey, secretKey)
    }

    /// The Ed25519 public key of `seed`.
    static func publicKey(seed: [UInt8]) -> [UInt8] { withKeyPair(seed: seed) { key, _ in key } }

    /// The Ed25519 signature (64 bytes) of `message` by the key of `seed`.
    static func sign(_ message: [UInt8], seed: [UInt8]) -> [UInt8] {
        withKeyPair(seed: seed) { _, secretKey in
            var signature = [UInt8](repeating: 0, count: 64)
            crypto_sign_detached(&signature, nil, message, UInt64(message.count), secretKey)
            return signature
        }
    }
}
