public import KeywayCore

/// Argon2id through libsodium: enrollment hashes in the standard `$argon2id$v=19$m=…,t=…,p=1$salt$hash` form.
///
/// Verification derives the key itself (rather than `crypto_pwhash_str_verify`) so that a wrong secret's
/// fingerprint can come from the slow hash's output: recognising a repeated wrong secret then costs an attacker
/// with the database as much as guessing the enrollment.
public final class Argon2idHasher: SecretHasher {
    /// The Argon2id cost: passes over memory and memory in bytes.
    public struct Cost: Sendable, Equatable, CustomStringConvertible {
        /// Passes (Argon2's t).
        public var opsLimit: UInt64
        /// Memory in bytes (Argon2's m × 1024).
        public var memLimit: Int

        /// Creates a cost.
        public init(opsLimit: UInt64, memLimit: Int) {
            self.opsLimit = opsLimit
            self.memLimit = memLimit
        }

        /// A cost in the units keyway.conf writes: passes and MiB (`hash-passes`, `hash-memory`).
        public init(passes: Int, mebibytes: Int) {
            self.init(opsLimit: UInt64(passes), memLimit: mebibytes << 20)
        }

        /// Keyway's default: t=3, m=64 MiB, p=1 (libsodium's "interactive" memory with one more pass), the
        /// defaults of `hash-passes` and `hash-memory`. One verification takes ~190 ms on the reference machine
        /// (`keyway bench`); see docs/BENCHMARKS.md, and `keyway calibrate` for this machine's.
        public static let `default` = Cost(opsLimit: 3, memLimit: 64 << 20)

        /// libsodium's minimum, for tests that need many hashes quickly. Never for real enrollments.
        public static var minimum: Cost {
            let floor = Sodium.minimumCost
            return Cost(opsLimit: floor.opsLimit, memLimit: floor.memLimit)
        }

        public var description: String { "Argon2id t=\(opsLimit) m=\(memLimit >> 10) KiB p=1" }
    }

    /// The cost used for new hashes and for `burnWork`.
    public let cost: Cost

    /// Creates a hasher; fails only when libsodium cannot initialize.
    public init(cost: Cost = .default) throws(AuthenticationError) {
        guard Sodium.initialize() else { throw AuthenticationError(.internalFailure, "libsodium failed to initialize") }
        self.cost = cost
    }

    static let saltLength = 16
    static let keyLength = 32
    static let fingerprintLength = 16
    static let fingerprintKey = Array("keyway wrong-secret fingerprint v1".utf8)
    static let burnSalt = [UInt8](repeating: 0x6b, count: saltLength)

    public func hash(_ secret: Secret) throws(AuthenticationError) -> String { try hash(secret, at: cost) }

    /// A hash of 16 random bytes at `encoded`'s cost (nil for a hash this hasher cannot read).
    public func decoy(like encoded: String) -> String? {
        guard let parsed = try? Self.parse(encoded) else { return nil }
        return try? hash(Secret(copying: Sodium.randomBytes(16)), at: parsed.cost)
    }

    private func hash(_ secret: Secret, at cost: Cost) throws(AuthenticationError) -> String {
        let encoded = secret.withUnsafeBytes {
            Sodium.passwordHashString($0, opsLimit: cost.opsLimit, memLimit: cost.memLimit)
        }
        guard let encoded else {
            throw AuthenticationError(.internalFailure, "Argon2id hashing failed (\(cost); out of memory?)")
        }
        return encoded
    }

    public func verify(_ secret: Secret, against encoded: String) throws(AuthenticationError) -> SecretCheck {
        let parsed = try Self.parse(encoded)
        var derived = [UInt8](repeating: 0, count: parsed.hash.count)
        defer { derived.withUnsafeMutableBytes { Sodium.wipe($0) } }
        let ok = secret.withUnsafeBytes { password in
            derived.withUnsafeMutableBytes { output in
                Sodium.deriveKey(
                    into: output, password: password, salt: parsed.salt,
                    opsLimit: parsed.cost.opsLimit, memLimit: parsed.cost.memLimit)
            }
        }
        guard ok else { throw AuthenticationError(.internalFailure, "Argon2id verification failed (out of memory?)") }
        let matches = derived.withUnsafeBytes { d in parsed.hash.withUnsafeBytes { Sodium.constantTimeEqual(d, $0) } }
        if matches { return .match }
        let fingerprint = derived.withUnsafeBytes {
            Sodium.keyedHash($0, key: Self.fingerprintKey, length: Self.fingerprintLength)
        }
        return .mismatch(fingerprint: fingerprint)
    }

    /// One salt for the set, so that a check derives once (`verify(_:againstSet:)`): 10 codes cost one
    /// verification to check, and an attacker with the store tests a guess against all 10 with one derivation too,
    /// which the codes' 59 bits are chosen for (Plugins/Recovery).
    public func hashSet(_ secrets: [Secret]) throws(AuthenticationError) -> [String] {
        let salt = Sodium.randomBytes(Self.saltLength)
        var hashes: [String] = []
        for secret in secrets {
            var derived = try derive(secret, salt: salt, cost: cost)
            defer { derived.withUnsafeMutableBytes { Sodium.wipe($0) } }
            hashes.append(
                "$argon2id$v=19$m=\(cost.memLimit >> 10),t=\(cost.opsLimit),p=1$\(Sodium.encodeBase64(salt))"
                    + "$\(Sodium.encodeBase64(derived))")
        }
        return hashes
    }

    public func verify(_ secret: Secret, againstSet encoded: [String]) throws(AuthenticationError) -> SetCheck {
        var parsed: [(cost: Cost, salt: [UInt8], hash: [UInt8])] = []
        for hash in encoded { parsed.append(try Self.parse(hash)) }
        guard let first = parsed.first else { return .mismatch(fingerprint: burnWork(secret)) }
        guard parsed.allSatisfy({ $0.cost == first.cost && $0.salt == first.salt }) else {
            throw AuthenticationError(.storeFailure, "the stored set of hashes does not share one salt and cost")
        }
        var derived = try derive(secret, salt: first.salt, cost: first.cost)
        defer { derived.withUnsafeMutableBytes { Sodium.wipe($0) } }
        var matched: Int? = nil
        for (index, member) in parsed.enumerated() {  // every member compared, whichever matches
            let equal = derived.withUnsafeBytes { d in member.hash.withUnsafeBytes { Sodium.constantTimeEqual(d, $0) } }
            if equal && matched == nil { matched = index }
        }
        if let matched { return .match(matched) }
        return .mismatch(
            fingerprint: derived.withUnsafeBytes {
                Sodium.keyedHash($0, key: Self.fingerprintKey, length: Self.fingerprintLength)
            })
    }

    /// The raw Argon2id output for `secret` with `salt` at `cost`.
    private func derive(_ secret: Secret, salt: [UInt8], cost: Cost) throws(AuthenticationError) -> [UInt8] {
        var derived = [UInt8](repeating: 0, count: Self.keyLength)
        let ok = secret.withUnsafeBytes { password in
            derived.withUnsafeMutableBytes { output in
                Sodium.deriveKey(
                    into: output, password: password, salt: salt, opsLimit: cost.opsLimit, memLimit: cost.memLimit)
            }
        }
        guard ok else { throw AuthenticationError(.internalFailure, "Argon2id derivation failed (out of memory?)") }
        return derived
    }

    /// The key of `quickFingerprint`: random, made with the hasher, never written anywhere.
    private let quickKey = Sodium.randomBytes(32)

    /// Keyed BLAKE2b of the secret, then the binding, under this process's own random key.
    public func quickFingerprint(_ secret: Secret, boundTo binding: [UInt8]) -> [UInt8]? {
        var input = [UInt8]()
        input.reserveCapacity(secret.count + binding.count + 1)
        secret.withUnsafeBytes { input.append(contentsOf: $0) }
        input.append(0)
        input.append(contentsOf: binding)
        defer { input.withUnsafeMutableBytes { Sodium.wipe($0) } }
        return input.withUnsafeBytes { Sodium.keyedHash($0, key: quickKey, length: 32) }
    }

    @discardableResult
    public func burnWork(_ secret: Secret) -> [UInt8] {
        var derived = [UInt8](repeating: 0, count: Self.keyLength)
        defer { derived.withUnsafeMutableBytes { Sodium.wipe($0) } }
        _ = secret.withUnsafeBytes { password in
            derived.withUnsafeMutableBytes { output in
                Sodium.deriveKey(
                    into: output, password: password, salt: Self.burnSalt,
                    opsLimit: cost.opsLimit, memLimit: cost.memLimit)
            }
        }
        return derived.withUnsafeBytes {
            Sodium.keyedHash($0, key: Self.fingerprintKey, length: Self.fingerprintLength)
        }
    }

    /// Parses `$argon2id$v=19$m=M,t=T,p=1$SALT$HASH`, refusing anything else with a reason.
    static func parse(_ encoded: String) throws(AuthenticationError) -> (cost: Cost, salt: [UInt8], hash: [UInt8]) {
        func bad(_ why: String) -> AuthenticationError {
            AuthenticationError(.storeFailure, "the stored hash is not a usable Argon2id string: \(why)")
        }
        // Split as bytes: the string is ASCII when it is sound, and String.split compares Characters (grapheme
        // breaking), which cost keywayd 40,000 instructions a verification for this one line.
        let bytes = Array(encoded.utf8)
        let fields = bytes.split(separator: UInt8(ascii: "$"), omittingEmptySubsequences: false)
        func number<T: FixedWidthInteger>(_ field: ArraySlice<UInt8>) -> T? {
            T(String(decoding: field, as: UTF8.self))
        }
        guard fields.count == 6, fields[0].isEmpty else { throw bad("expected 5 '$'-separated fields") }
        guard fields[1].elementsEqual("argon2id".utf8) else { throw bad("algorithm is not argon2id") }
        guard fields[2].elementsEqual("v=19".utf8) else { throw bad("version is not 19") }
        var memoryKiB: Int?
        var passes: UInt64?
        var lanes: Int?
        for parameter in fields[3].split(separator: UInt8(ascii: ",")) {
            let pair = parameter.split(separator: UInt8(ascii: "="), maxSplits: 1)
            guard pair.count == 2, pair[0].count == 1 else {
                throw bad(pair.count == 2 ? "unknown parameter" : "malformed parameter")
            }
            switch pair[0].first {
            case UInt8(ascii: "m"): memoryKiB = number(pair[1])
            case UInt8(ascii: "t"): passes = number(pair[1])
            case UInt8(ascii: "p"): lanes = number(pair[1])
            default: throw bad("unknown parameter")
            }
        }
        // Up to 4 GiB: the most `hash-memory` allows (4096 MiB).
        guard let memoryKiB, (8...(4 << 20)).contains(memoryKiB) else { throw bad("memory outside 8 KiB…4 GiB") }
        guard let passes, (1...64).contains(passes) else { throw bad("passes outside 1…64") }
        guard lanes == 1 else { throw bad("only one lane is supported") }
        guard let salt = Sodium.decodeBase64(fields[4], maxLength: 64), salt.count == saltLength else {
            throw bad("salt is not 16 bytes of base64")
        }
        guard let hash = Sodium.decodeBase64(fields[5], maxLength: 128), hash.count == keyLength else {
            throw bad("hash is not 32 bytes of base64")
        }
        return (Cost(opsLimit: passes, memLimit: memoryKiB << 10), salt, hash)
    }
}
