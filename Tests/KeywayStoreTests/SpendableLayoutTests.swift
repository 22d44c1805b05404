import KeywayCore
import KeywayFactors
import Testing

/// The factors' layouts (`SpendableLayout`), which a fleet's database keeps records by: each splits only a record its
/// factor writes, joins it back byte for byte, and refuses parts that make no record; a use is one part changed.
@Suite("Spendable parts: the factors' layouts")
struct SpendableLayoutTests {
    static let key = PostgresLeastPrivilegeTests.Granted.securityKey(publicKey:counter:flag:)

    /// Records each factor writes, and bytes that are not one of its records (a version it does not know, numbers
    /// written another way, a record cut short).
    static let records: [(FactorKind, written: [[UInt8]], foreign: [[UInt8]])] = [
        (
            FactorKind(rawValue: "recovery"),
            [
                [1, 3] + Array("h1\nh2\nh3".utf8), [1, 10] + Array("h9".utf8), [1, 2],
                [2, 10] + Array("3 $a$x\n7 $a$y".utf8), [2, 3],
            ],
            [
                [2, 3] + Array("h1".utf8), [2, 3] + Array("2 h\n1 h".utf8), [2, 3] + Array("4 h".utf8),
                [3, 3] + Array("h1".utf8), [1, 1] + Array("h1\nh2".utf8), [1, 0], [1],
            ]
        ),
        (
            FactorKind(rawValue: "pass"),
            [Array("1\ngesture\n9999999999999\n2\n2\n$argon2id$x".utf8), Array("1\ntotp\n5\n0\n3\nh".utf8)],
            [
                Array("1\ngesture\n9999999999999\n02\n2\n$argon2id$x".utf8),
                Array("1\ngesture\n9999999999999\n-\n2\n$argon2id$x".utf8), Array("2\ng\n1\n1\n1\nh".utf8),
            ]
        ),
        (
            FactorKind(rawValue: "fido2"),
            [key([1, 2, 3], 5, 0), key([1, 2, 3], 0xFFFF_FFFF, 1), [1, 0]],
            [Array(key([1, 2, 3], 5, 0).dropLast()), key([1, 2, 3], 5, 2), [2, 0]]
        ),
    ]

    @Test("each factor's records split and join back byte for byte; anything else is refused, never read short")
    func roundTrip() throws {
        let layouts = Factors.spendable
        #expect(Set(layouts.factors.map(\.rawValue)) == ["pass", "recovery", "fido2"])
        for (factor, written, foreign) in Self.records {
            let layout = try #require(layouts[factor])
            for record in written {
                let parts = try #require(layout.split(record), "\(factor) \(record)")
                #expect(layout.join(parts) == record, "\(factor): \(parts)")
                #expect(!parts.items.contains { $0.name.contains("\n") || $0.name.isEmpty })
            }
            for bytes in foreign { #expect(layout.split(bytes) == nil, "\(factor) split \(bytes)") }
        }
        // Parts that make no record: the pass's uses beyond what it may have, a key's counter beyond 32 bits, a
        // recovery code with two uses, a count of parts that does not fit.
        let pass = try #require(layouts[FactorKind(rawValue: "pass")])
        var parts = try #require(pass.split(Array("1\ngesture\n9\n2\n2\nh".utf8)))
        parts.items[0].value = 11
        #expect(pass.join(parts) == nil)
        parts.items = []
        #expect(pass.join(parts) == nil)
        let keys = try #require(layouts[FactorKind(rawValue: "fido2")])
        parts = try #require(keys.split(Self.key([1, 2, 3], 5, 0)))
        parts.items[0].value = 1 << 32
        #expect(keys.join(parts) == nil)
        parts.items.removeLast()
        #expect(keys.join(parts) == nil)
        let recovery = try #require(layouts[FactorKind(rawValue: "recovery")])
        parts = try #require(recovery.split([1, 3] + Array("h1\nh2".utf8)))
        parts.items[0].value = 2
        #expect(recovery.join(parts) == nil)
        parts.items[0].value = 0
        #expect(recovery.join(parts) == [1, 3] + Array("h2".utf8), "a code spent is left out of the record")
    }

    @Test("a use is one part changed as its rule allows; anything more is not a use")
    func uses() throws {
        #expect(SpendRule.fallsByOne.allows(from: 2, to: 1))
        #expect(!SpendRule.fallsByOne.allows(from: 2, to: 0))
        #expect(!SpendRule.fallsByOne.allows(from: 0, to: -1))
        #expect(!SpendRule.fallsByOne.allows(from: 1, to: 2))
        let counter = SpendRule.rises(step: 65_536, ceiling: 0xFFFF_FFFF)
        #expect(counter.allows(from: 5, to: 6) && counter.allows(from: 5, to: 65_541))
        #expect(
            !counter.allows(from: 5, to: 65_542) && !counter.allows(from: 5, to: 5) && !counter.allows(from: 5, to: 4))
        #expect(!SpendRule.rises(step: 1, ceiling: 1).allows(from: 1, to: 2))

        let recovery = try #require(Factors.spendable[FactorKind(rawValue: "recovery")])
        let set = try #require(recovery.split([1, 3] + Array("h1\nh2\nh3".utf8)))
        func use(_ bytes: [UInt8]) throws -> SpendableUse? {
            SpendableUse.between(set, try #require(recovery.split(bytes)))
        }
        #expect(try use([1, 3] + Array("h1\nh3".utf8)) == SpendableUse(name: "h2", from: 1, to: 0))
        #expect(try use([1, 3] + Array("h1\nh2\nh3".utf8)) == SpendableUse(name: nil, from: 0, to: 0))
        #expect(try use([1, 3] + Array("h3".utf8)) == nil, "two codes in one use")
        #expect(try use([1, 3] + Array("h1\nh2\nh4".utf8)) == nil, "a code put in")
        #expect(try use([1, 2] + Array("h1\nh2".utf8)) == nil, "the fixed part changed")
        let keys = try #require(Factors.spendable[FactorKind(rawValue: "fido2")])
        let before = try #require(keys.split(Self.key([1, 2, 3], 5, 0)))
        #expect(
            SpendableUse.between(before, try #require(keys.split(Self.key([1, 2, 3], 9, 0))))
                == SpendableUse(name: "counter of key", from: 5, to: 9))
        #expect(SpendableUse.between(before, try #require(keys.split(Self.key([1, 2, 3], 9, 1)))) == nil)
        #expect(SpendableUse.between(before, try #require(keys.split(Self.key([6, 6, 6], 5, 0)))) == nil)
    }
}
