import KeywayCore
import KeywayFIDO2
import Testing

/// The security key's records (Plugins/FIDO2/Factor/FIDO2Records.swift): the registered keys as the store keeps them,
/// what a listener found as `Evidence.device` carries it, and the parts a fleet's database lets a use raise. Each is
/// read from bytes a store or a client hands over, so every damaged form is refused, none crashes, and none reads as
/// an empty list (docs/ARCHITECTURE.md §19).
@Suite("fido2: the records, their codec and their spendable parts")
struct FIDO2RecordTests {
    static let keys = FIDO2Keys([
        FIDO2Credential(
            name: "yubikey", id: Array(repeating: 0xA1, count: 64), algorithm: FIDO2Credential.es256,
            publicKey: Array(0..<64), counter: 41),
        FIDO2Credential(
            name: "solo é", id: [1, 2, 3], algorithm: FIDO2Credential.eddsa, publicKey: Array(repeating: 7, count: 32),
            counter: UInt32.max, cloneSuspected: true),
    ])

    func refused(_ bytes: [UInt8]) -> AuthenticationError? {
        do {
            _ = try FIDO2Keys(decoding: bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test("two keys, ES256 and EdDSA, a counter at its ceiling and a clone mark: read back as written")
    func roundTrip() throws {
        let bytes = Self.keys.encoded
        #expect(bytes.first == 1 && bytes[1] == 2)
        #expect(try FIDO2Keys(decoding: bytes) == Self.keys)
        #expect(try FIDO2Keys(decoding: FIDO2Keys([]).encoded).credentials.isEmpty)
    }

    @Test("every cut of a record, a byte more, another version, more keys than allowed: a store failure, never a list")
    func damagedRecords() {
        let bytes = Self.keys.encoded
        for length in 0..<bytes.count {
            let error = refused(Array(bytes.prefix(length)))
            #expect(error?.code == .storeFailure, "a record cut to \(length) of \(bytes.count) bytes was read")
        }
        #expect(refused(bytes + [0])?.reason == "the stored security keys run on")
        #expect(refused([2] + bytes.dropFirst())?.code == .storeFailure)
        #expect(refused([1, UInt8(FIDO2Keys.maximum + 1)])?.code == .storeFailure)
    }

    @Test("a field that claims more bytes than there are, or than any key has, is refused without reading on")
    func hostileLengths() {
        for length: [UInt8] in [[0xFF, 0xFF, 0xFF, 0xFF], [0, 0, 0x10, 0x01], [0, 0, 0, 9]] {
            // One key whose name claims `length` bytes, with five bytes after it.
            #expect(refused([1, 1] + length + Array("short".utf8))?.code == .storeFailure)
        }
        // A name that is not UTF-8.
        let invalid: [UInt8] =
            [1, 1, 0, 0, 0, 2, 0xC3, 0x28] + [0, 0, 0, 0] + [0, 0, 0, 0] + [0, 0, 0, 0] + [0, 0, 0, 0, 0]
        #expect(refused(invalid)?.code == .storeFailure)
    }

    @Test("a presentation: each outcome and flag read back; an unknown outcome, a cut or a byte more: nothing")
    func presentations() {
        for outcome in [FIDO2Presentation.Outcome.signed, .unknownKey, .badSignature, .wrongPIN] {
            for (present, verified) in [(false, false), (true, false), (true, true)] {
                let presentation = FIDO2Presentation(
                    outcome: outcome, credentialID: [9, 8, 7], counter: 1234, userPresent: present,
                    userVerified: verified)
                #expect(FIDO2Presentation(decoding: presentation.encoded) == presentation)
            }
        }
        let bytes = FIDO2Presentation.nothingSigned(.wrongPIN).encoded
        #expect(FIDO2Presentation(decoding: bytes)?.outcome == .wrongPIN)
        for length in 0..<bytes.count { #expect(FIDO2Presentation(decoding: Array(bytes.prefix(length))) == nil) }
        #expect(FIDO2Presentation(decoding: bytes + [0]) == nil)
        var unknown = bytes
        unknown[1] = 5
        #expect(FIDO2Presentation(decoding: unknown) == nil)
    }

    @Test("spendable parts: a counter and a clone mark per key; joined back the same; a use raises one of them")
    func spendable() throws {
        let layout = FIDO2Keys.spendable
        let bytes = Self.keys.encoded
        let parts = try #require(layout.split(bytes))
        #expect(
            parts.items.map(\.name) == [
                "counter of yubikey", "clone mark of yubikey", "counter of solo é", "clone mark of solo é",
            ])
        #expect(parts.items.map(\.value) == [41, 0, Int64(UInt32.max), 1])
        #expect(layout.join(parts) == bytes)
        // A use: the first key's counter rises; the fixed part is the same.
        var used = Self.keys
        used.credentials[0].counter = 50
        let after = try #require(layout.split(used.encoded))
        #expect(SpendableUse.between(parts, after) == SpendableUse(name: "counter of yubikey", from: 41, to: 50))
        // A record that is not a keys record, or whose fixed part carries a counter, has no parts.
        #expect(layout.split([1, 2, 3]) == nil)
        var fixedWithCounter = parts
        fixedWithCounter.fixed = bytes
        #expect(layout.join(fixedWithCounter) == nil)
    }
}
