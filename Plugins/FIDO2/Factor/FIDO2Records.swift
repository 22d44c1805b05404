public import KeywayCore

extension FactorKind {
    /// A FIDO2/U2F security key (YubiKey, SoloKey, Nitrokey, a phone's passkey over USB): touched, keywayd checks
    /// its signature (docs/ARCHITECTURE.md §19).
    public static let fido2 = FactorKind(rawValue: "fido2")
}

/// One registered security key as keywayd keeps it: the credential the key made for Keyway's relying party, the
/// public key it signs with, and the last signature counter it sent. The private key never leaves the security key;
/// nothing here is secret, and a copy of it lets no one sign.
public struct FIDO2Credential: Sendable, Equatable {
    /// The name it was enrolled under (`keyway enroll fido2 --name`).
    public var name: String
    /// The credential id the key made (it finds its key pair by it).
    public var id: [UInt8]
    /// The COSE algorithm: -7 (ES256) or -8 (EdDSA).
    public var algorithm: Int32
    /// The public key: ES256's x and y (64 bytes), or EdDSA's 32 bytes.
    public var publicKey: [UInt8]
    /// The highest signature counter the key has sent.
    public var counter: UInt32
    /// Set once a counter that did not increase was presented: the key may have been cloned.
    public var cloneSuspected: Bool

    /// Creates a credential record.
    public init(
        name: String, id: [UInt8], algorithm: Int32, publicKey: [UInt8], counter: UInt32, cloneSuspected: Bool = false
    ) {
        self.name = name
        self.id = id
        self.algorithm = algorithm
        self.publicKey = publicKey
        self.counter = counter
        self.cloneSuspected = cloneSuspected
    }

    /// COSE's ES256 (ECDSA P-256 with SHA-256), what most keys make.
    public static let es256: Int32 = -7
    /// COSE's EdDSA (Ed25519).
    public static let eddsa: Int32 = -8
}

/// The keys one account has registered, as the store keeps them (a version byte, then each credential).
public struct FIDO2Keys: Sendable, Equatable {
    /// The registered keys, in the order they were enrolled.
    public var credentials: [FIDO2Credential]
    /// The most keys one account may register.
    public static let maximum = 16

    /// Keys from a list.
    public init(_ credentials: [FIDO2Credential]) { self.credentials = credentials }

    /// Reads a stored record; a damaged one is a store failure, never an empty list.
    public init(decoding bytes: [UInt8]) throws(AuthenticationError) {
        var reader = FIDO2Bytes.Reader(bytes)
        guard reader.u8() == 1, let count = reader.u8(), count <= Self.maximum else {
            throw AuthenticationError(.storeFailure, "the stored security keys are not a version-1 record")
        }
        var credentials: [FIDO2Credential] = []
        for _ in 0..<count {
            guard let name = reader.text(), let id = reader.field(), let algorithm = reader.u32(),
                let publicKey = reader.field(), let counter = reader.u32(), let flags = reader.u8()
            else { throw AuthenticationError(.storeFailure, "a stored security key is cut short") }
            credentials.append(
                FIDO2Credential(
                    name: name, id: id, algorithm: Int32(bitPattern: algorithm), publicKey: publicKey,
                    counter: counter, cloneSuspected: flags & 1 != 0))
        }
        guard reader.atEnd else { throw AuthenticationError(.storeFailure, "the stored security keys run on") }
        self.credentials = credentials
    }

    /// The stored form.
    public var encoded: [UInt8] {
        var writer = FIDO2Bytes.Writer()
        writer.u8(1)
        writer.u8(UInt8(credentials.count))
        for credential in credentials {
            writer.text(credential.name)
            writer.field(credential.id)
            writer.u32(UInt32(bitPattern: credential.algorithm))
            writer.field(credential.publicKey)
            writer.u32(credential.counter)
            writer.u8(credential.cloneSuspected ? 1 : 0)
        }
        return writer.bytes
    }
}

/// What keywayd's listener found at the key for one attempt (the evidence `Evidence.device` carries): the assertion
/// the key made for a fresh random challenge, already checked against the account's public keys by libfido2.
public struct FIDO2Presentation: Sendable, Equatable {
    /// What the check found.
    public enum Outcome: UInt8, Sendable {
        /// Signed by the credential `credentialID` names, over this attempt's challenge.
        case signed = 1
        /// The key holds none of the account's credentials: another person's key, or none registered here.
        case unknownKey = 2
        /// A credential of the account was named, but the signature does not verify.
        case badSignature = 3
        /// The key refused the PIN typed for it: a guess, counted like a wrong pattern (the key counts it too).
        case wrongPIN = 4
    }

    /// What the check found.
    public var outcome: Outcome
    /// The credential that signed (empty for an unknown key).
    public var credentialID: [UInt8]
    /// The signature counter the key sent.
    public var counter: UInt32
    /// The key's flags: someone touched it (user presence), and it verified its user (a PIN or its own reader).
    public var userPresent: Bool
    public var userVerified: Bool

    /// What a key that signed nothing for the account gave: another person's key (`unknownKey`), or a PIN it
    /// refused (`wrongPIN`).
    public static func nothingSigned(_ outcome: Outcome) -> FIDO2Presentation {
        FIDO2Presentation(outcome: outcome, credentialID: [], counter: 0, userPresent: false, userVerified: false)
    }

    /// Creates a presentation.
    public init(outcome: Outcome, credentialID: [UInt8], counter: UInt32, userPresent: Bool, userVerified: Bool) {
        self.outcome = outcome
        self.credentialID = credentialID
        self.counter = counter
        self.userPresent = userPresent
        self.userVerified = userVerified
    }

    /// Reads what a listener made; nil when it is not one.
    public init?(decoding bytes: [UInt8]) {
        var reader = FIDO2Bytes.Reader(bytes)
        guard reader.u8() == 1, let raw = reader.u8(), let outcome = Outcome(rawValue: raw), let id = reader.field(),
            let counter = reader.u32(), let flags = reader.u8(), reader.atEnd
        else { return nil }
        self.init(
            outcome: outcome, credentialID: id, counter: counter, userPresent: flags & 1 != 0,
            userVerified: flags & 2 != 0)
    }

    /// The form `Evidence.device` carries.
    public var encoded: [UInt8] {
        var writer = FIDO2Bytes.Writer()
        writer.u8(1)
        writer.u8(outcome.rawValue)
        writer.field(credentialID)
        writer.u32(counter)
        writer.u8((userPresent ? 1 : 0) | (userVerified ? 2 : 0))
        return writer.bytes
    }
}

/// Length-prefixed fields, big-endian: the records above.
enum FIDO2Bytes {
    struct Writer {
        var bytes: [UInt8] = []
        mutating func u8(_ value: UInt8) { bytes.append(value) }
        mutating func u32(_ value: UInt32) {
            for shift in [24, 16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
        }
        mutating func field(_ value: [UInt8]) {
            u32(UInt32(value.count))
            bytes += value
        }
        mutating func text(_ value: String) { field(Array(value.utf8)) }
    }

    struct Reader {
        let input: [UInt8]
        var at = 0
        init(_ input: [UInt8]) { self.input = input }
        var atEnd: Bool { at == input.count }
        mutating func u8() -> UInt8? {
            guard at < input.count else { return nil }
            defer { at += 1 }
            return input[at]
        }
        mutating func u32() -> UInt32? {
            guard input.count - at >= 4 else { return nil }
            defer { at += 4 }
            return input[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
        mutating func field() -> [UInt8]? {
            guard let count = u32(), count <= 4096, input.count - at >= Int(count) else { return nil }
            defer { at += Int(count) }
            return Array(input[at..<at + Int(count)])
        }
        mutating func text() -> String? { field().flatMap { String(validating: $0, as: UTF8.self) } }
    }
}

extension FIDO2Keys {
    /// Each key's spendable parts are its signature counter, raised by a use by at most 65,536 (a key counts each
    /// signature, but may share its counter with other sites), and its clone mark, set once; the rest of the record,
    /// with both at 0, is fixed (`SpendableLayout`).
    public static let spendable = SpendableLayout(
        .fido2,
        split: { bytes in
            guard var keys = try? FIDO2Keys(decoding: bytes), keys.encoded == bytes else { return nil }
            var items: [SpendableItem] = []
            for index in keys.credentials.indices {
                let credential = keys.credentials[index]
                items.append(SpendableItem("counter of \(credential.name)", Int64(credential.counter), counterRule))
                items.append(
                    SpendableItem("clone mark of \(credential.name)", credential.cloneSuspected ? 1 : 0, markRule))
                keys.credentials[index].counter = 0
                keys.credentials[index].cloneSuspected = false
            }
            return SpendableParts(fixed: keys.encoded, items: items)
        },
        join: { parts in
            guard var keys = try? FIDO2Keys(decoding: parts.fixed), parts.items.count == keys.credentials.count * 2
            else { return nil }
            for index in keys.credentials.indices {
                let (counter, mark) = (parts.items[index * 2], parts.items[index * 2 + 1])
                guard keys.credentials[index].counter == 0, !keys.credentials[index].cloneSuspected,
                    let value = UInt32(exactly: counter.value), mark.value == 0 || mark.value == 1
                else { return nil }
                keys.credentials[index].counter = value
                keys.credentials[index].cloneSuspected = mark.value == 1
            }
            return keys.encoded
        })

    static let counterRule = SpendRule.rises(step: 65_536, ceiling: Int64(UInt32.max))
    static let markRule = SpendRule.rises(step: 1, ceiling: 1)
}
