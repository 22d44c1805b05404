import CSodium

/// The only caller of libsodium: every C call of KeywayPlatform goes through here.
enum Sodium {
    /// Initializes libsodium once per process (`sodium_init`; idempotent and thread-safe).
    static func initialize() -> Bool { sodium_init() >= 0 }

    /// The bytes as a C char pointer; an empty buffer (nil base) becomes a valid pointer to nothing.
    private static func chars(_ bytes: UnsafeRawBufferPointer) -> UnsafePointer<CChar> {
        let empty: StaticString = ""
        return UnsafeRawPointer(bytes.baseAddress ?? UnsafeRawPointer(empty.utf8Start)).assumingMemoryBound(
            to: CChar.self)
    }

    /// `crypto_pwhash_str`, Argon2id: a self-describing hash string.
    static func passwordHashString(_ password: UnsafeRawBufferPointer, opsLimit: UInt64, memLimit: Int) -> String? {
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        let status = out.withUnsafeMutableBufferPointer { buffer in
            crypto_pwhash_str_alg(
                buffer.baseAddress!, chars(password),
                UInt64(password.count), opsLimit, memLimit, crypto_pwhash_ALG_ARGON2ID13)
        }
        guard status == 0 else { return nil }
        return out.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// `crypto_pwhash_str_verify`: libsodium's own check, used to cross-check ours in tests.
    static func verifyHashString(_ hash: String, _ password: UnsafeRawBufferPointer) -> Bool {
        crypto_pwhash_str_verify(
            hash, chars(password),
            UInt64(password.count)) == 0
    }

    /// `crypto_pwhash` with Argon2id: the raw derived key.
    static func deriveKey(
        into output: UnsafeMutableRawBufferPointer, password: UnsafeRawBufferPointer,
        salt: [UInt8], opsLimit: UInt64, memLimit: Int
    ) -> Bool {
        salt.withUnsafeBufferPointer { saltBuffer in
            crypto_pwhash(
                output.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt64(output.count),
                chars(password), UInt64(password.count),
                saltBuffer.baseAddress!, opsLimit, memLimit, crypto_pwhash_ALG_ARGON2ID13) == 0
        }
    }

    /// `sodium_base642bin` with the unpadded original alphabet (the encoding in Argon2 hash strings).
    static func decodeBase64(_ text: ArraySlice<UInt8>, maxLength: Int) -> [UInt8]? {
        var output = [UInt8](repeating: 0, count: maxLength)
        var length = 0
        let encoded = Array(text)
        let status = encoded.withUnsafeBufferPointer { input in
            input.withMemoryRebound(to: CChar.self) { chars in
                sodium_base642bin(
                    &output, maxLength, chars.baseAddress, chars.count, nil, &length, nil,
                    sodium_base64_VARIANT_ORIGINAL_NO_PADDING)
            }
        }
        guard status == 0 else { return nil }
        return Array(output.prefix(length))
    }

    /// `sodium_bin2base64` with the unpadded original alphabet (the encoding in Argon2 hash strings).
    static func encodeBase64(_ bytes: [UInt8]) -> String {
        let size = sodium_base64_encoded_len(bytes.count, sodium_base64_VARIANT_ORIGINAL_NO_PADDING)
        var out = [CChar](repeating: 0, count: size)
        _ = out.withUnsafeMutableBufferPointer { buffer in
            sodium_bin2base64(
                buffer.baseAddress!, size, bytes, bytes.count, sodium_base64_VARIANT_ORIGINAL_NO_PADDING)
        }
        return out.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// `sodium_memcmp`: constant-time comparison of equal-length buffers.
    static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        a.count == b.count && sodium_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
    }

    /// `crypto_generichash` (BLAKE2b) with a key.
    static func keyedHash(_ input: UnsafeRawBufferPointer, key: [UInt8], length: Int) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: length)
        _ = crypto_generichash(
            &output, length, input.baseAddress?.assumingMemoryBound(to: UInt8.self),
            UInt64(input.count), key, key.count)
        return output
    }

    /// `randombytes_buf`: `count` bytes from the system's generator.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, count)
        return bytes
    }

    /// `sodium_memzero`: a wipe the compiler cannot remove.
    static func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress else { return }
        sodium_memzero(base, buffer.count)
    }

    /// `crypto_pwhash_OPSLIMIT_MIN` and `crypto_pwhash_MEMLIMIT_MIN`: the smallest accepted Argon2id cost.
    static var minimumCost: (opsLimit: UInt64, memLimit: Int) {
        (UInt64(crypto_pwhash_OPSLIMIT_MIN), Int(crypto_pwhash_MEMLIMIT_MIN))
    }
}
