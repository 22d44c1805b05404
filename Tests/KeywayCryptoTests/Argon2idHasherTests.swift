import KeywayCore
import Testing

@testable import KeywayCrypto

@Suite("Argon2id through libsodium")
struct Argon2idHasherTests {
    let hasher: Argon2idHasher
    init() throws { hasher = try Argon2idHasher(cost: .minimum) }

    func secret(_ text: String) -> Secret { Secret(copying: Array(text.utf8)) }

    @Test("hashes are standard Argon2id strings with a fresh salt")
    func format() throws {
        let first = try hasher.hash(secret("12369"))
        let second = try hasher.hash(secret("12369"))
        #expect(first.hasPrefix("$argon2id$v=19$m="))
        #expect(first != second)
        #expect(!first.contains("12369"))
    }

    @Test(
        "our verification agrees with libsodium's crypto_pwhash_str_verify",
        arguments: [
            ("12369", "12369", true), ("12369", "12368", false), ("", "", true), ("passcode", "Passcode", false),
            ("a", "a\u{0}", false),
        ])
    func agreesWithLibsodium(enrolled: String, entered: String, matches: Bool) throws {
        let encoded = try hasher.hash(secret(enrolled))
        let ours = try hasher.verify(secret(entered), against: encoded)
        let theirs = secret(entered).withUnsafeBytes { Sodium.verifyHashString(encoded, $0) }
        #expect((ours == .match) == matches)
        #expect(theirs == matches)
    }

    @Test("a wrong secret's fingerprint is stable for one enrollment and differs between secrets and enrollments")
    func fingerprints() throws {
        let encoded = try hasher.hash(secret("right"))
        guard case .mismatch(let a1) = try hasher.verify(secret("wrong-a"), against: encoded),
            case .mismatch(let a2) = try hasher.verify(secret("wrong-a"), against: encoded),
            case .mismatch(let b) = try hasher.verify(secret("wrong-b"), against: encoded),
            case .mismatch(let other) = try hasher.verify(secret("wrong-a"), against: try hasher.hash(secret("right")))
        else {
            Issue.record("expected mismatches")
            return
        }
        #expect(a1 == a2)
        #expect(a1 != b)
        #expect(a1 != other)
        #expect(a1.count == 16)
    }

    @Test(
        "a stored hash that is not a usable Argon2id string is a store failure naming why",
        arguments: [
            ("", "5 '$'-separated"), ("$argon2i$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "not argon2id"),
            ("$argon2id$v=16$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "version"),
            ("$argon2id$v=19$m=99999999,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "memory"),
            // hash-memory allows 4096 MiB: up to 4 GiB parses (and fails later, here on the short hash), above not.
            ("$argon2id$v=19$m=4194305,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "memory outside 8 KiB…4 GiB"),
            ("$argon2id$v=19$m=4194304,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "hash is not 32 bytes"),
            ("$argon2id$v=19$m=8,t=0,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "passes"),
            ("$argon2id$v=19$m=8,t=1,p=4$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "lane"),
            ("$argon2id$v=19$m=8,t=1,p=1$!!!$aGFzaA", "salt"),
            ("$argon2id$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "hash is not 32 bytes"),
            ("$argon2id$v=19$m=8,t=1,x=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "unknown parameter"),
            ("$argon2id$v=19$mm=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "unknown parameter"),
            ("$argon2id$v=19$m8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "malformed parameter"),
            ("$argon2id$v=19$m=8,t=1,p=one$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "lane"),
            // Split as bytes, a combining mark after a '$' or in a name leaves no field that passes.
            ("$argon2id\u{301}$v=19$m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "not argon2id"),
            ("$argon2id$v=19$\u{301}m=8,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$aGFzaA", "parameter"),
        ])
    func malformedHashes(encoded: String, reason: String) {
        do {
            _ = try hasher.verify(secret("x"), against: encoded)
            Issue.record("accepted \(encoded)")
        } catch {
            #expect(error.code == .storeFailure)
            #expect(error.reason.contains(reason))
        }
    }

    @Test("the default cost is t=3, m=64 MiB, and it verifies")
    func defaultCost() throws {
        let strong = try Argon2idHasher()
        #expect(strong.cost == Argon2idHasher.Cost(opsLimit: 3, memLimit: 64 << 20))
        #expect(strong.cost == Argon2idHasher.Cost(passes: 3, mebibytes: 64))
        let encoded = try strong.hash(secret("1-5-9-6"))
        #expect(encoded.contains("m=65536,t=3,p=1"))
        #expect(try strong.verify(secret("1-5-9-6"), against: encoded) == .match)
        strong.burnWork(secret("anything"))
    }

    @Test("a set hashed together: one salt, each a hash libsodium accepts, and a check that finds the member")
    func sets() throws {
        let members = ["k7m2x9pq4rtw", "abcdefghjkmn", "23456789abcd"]
        let hashes = try hasher.hashSet(members.map(secret))
        #expect(Set(hashes.map { $0.split(separator: "$")[3] }).count == 1, "one salt: \(hashes)")
        #expect(Set(hashes).count == 3)
        for (hash, member) in zip(hashes, members) {
            #expect(secret(member).withUnsafeBytes { Sodium.verifyHashString(hash, $0) })
            #expect(try hasher.verify(secret(member), against: hash) == .match)
        }
        for (index, member) in members.enumerated() {
            #expect(try hasher.verify(secret(member), againstSet: hashes) == .match(index))
        }
        guard case .mismatch(let first) = try hasher.verify(secret("wrong"), againstSet: hashes),
            case .mismatch(let again) = try hasher.verify(secret("wrong"), againstSet: hashes),
            case .mismatch(let other) = try hasher.verify(secret("other"), againstSet: hashes)
        else {
            Issue.record("a wrong secret matched")
            return
        }
        #expect(first == again && first != other)
        // Hashes of different salts are not a set: refused, not checked one by one.
        let mixed = [hashes[0], try hasher.hash(secret("abcdefghjkmn"))]
        #expect(throws: AuthenticationError(.storeFailure)) { try hasher.verify(secret("x"), againstSet: mixed) }
    }
}
