/// A CBOR data item (RFC 8949), as much of it as CTAP2 uses: integers, byte and text strings, arrays, maps, booleans
/// and null. No tags, floats or indefinite lengths: the decoder rejects them.
enum CBOR: Equatable, Sendable {
    /// An unsigned integer (major type 0).
    case unsigned(UInt64)
    /// A negative integer (major type 1): the value is -1 - n.
    case negative(UInt64)
    case bytes([UInt8])
    case text(String)
    case array([CBOR])
    /// A map, its entries in the order given; `encoded()` writes them in CTAP2's canonical order.
    case map([Entry])
    case bool(Bool)
    case null

    /// One key and value of a map.
    struct Entry: Equatable, Sendable {
        var key: CBOR
        var value: CBOR
    }

    /// Why some bytes are not one CBOR item this decoder takes.
    enum Failure: Error, Equatable, Sendable {
        /// The input ended inside an item.
        case truncated
        /// Bytes follow the item.
        case trailingBytes
        /// Well-formed CBOR this decoder does not take (a tag, a float, an indefinite length), or malformed.
        case unsupported
        /// A text string that is not UTF-8.
        case invalidText
        /// Nested deeper than `maximumDepth`.
        case tooDeep
        /// A map with the same key twice.
        case duplicateKey
    }

    /// How deep arrays and maps may nest in decoded input.
    static let maximumDepth = 16

    /// An integer item.
    static func int(_ value: Int) -> CBOR {
        value >= 0 ? .unsigned(UInt64(value)) : .negative(UInt64(-(value + 1)))
    }

    /// A map from (key, value) pairs.
    static func map(_ pairs: KeyValuePairs<CBOR, CBOR>) -> CBOR {
        .map(pairs.map { Entry(key: $0.key, value: $0.value) })
    }

    /// The value as an Int, when it is an integer that fits.
    var int: Int? {
        switch self {
        case .unsigned(let n): n <= UInt64(Int.max) ? Int(n) : nil
        case .negative(let n): n <= UInt64(Int.max) ? -Int(n) - 1 : nil
        default: nil
        }
    }

    var byteString: [UInt8]? {
        if case .bytes(let bytes) = self { bytes } else { nil }
    }

    var textString: String? {
        if case .text(let text) = self { text } else { nil }
    }

    var boolean: Bool? {
        if case .bool(let value) = self { value } else { nil }
    }

    var arrayItems: [CBOR]? {
        if case .array(let items) = self { items } else { nil }
    }

    var mapEntries: [Entry]? {
        if case .map(let entries) = self { entries } else { nil }
    }

    /// The value under `key` when this is a map that has it.
    subscript(key: CBOR) -> CBOR? {
        mapEntries?.first { $0.key == key }?.value
    }

    /// The value under the integer key `key`.
    subscript(int key: Int) -> CBOR? { self[.int(key)] }

    /// The value under the text key `key`.
    subscript(text key: String) -> CBOR? { self[.text(key)] }
}

// MARK: - Encoding

extension CBOR {
    /// The item's bytes, maps in CTAP2's canonical order (CTAP 2.0 §6: keys sorted by their encoding, shorter
    /// first, then bytewise: so 1, 3, -1, -2 for a COSE key, and "id" before "type").
    func encoded() -> [UInt8] {
        var out: [UInt8] = []
        encode(into: &out)
        return out
    }

    private func encode(into out: inout [UInt8]) {
        switch self {
        case .unsigned(let n): Self.head(0, n, into: &out)
        case .negative(let n): Self.head(1, n, into: &out)
        case .bytes(let bytes):
            Self.head(2, UInt64(bytes.count), into: &out)
            out += bytes
        case .text(let text):
            Self.head(3, UInt64(text.utf8.count), into: &out)
            out += Array(text.utf8)
        case .array(let items):
            Self.head(4, UInt64(items.count), into: &out)
            for item in items { item.encode(into: &out) }
        case .map(let entries):
            Self.head(5, UInt64(entries.count), into: &out)
            let sorted = entries.map { (key: $0.key.encoded(), value: $0.value) }.sorted { a, b in
                a.key.count != b.key.count ? a.key.count < b.key.count : a.key.lexicographicallyPrecedes(b.key)
            }
            for entry in sorted {
                out += entry.key
                entry.value.encode(into: &out)
            }
        case .bool(let value): out.append(value ? 0xF5 : 0xF4)
        case .null: out.append(0xF6)
        }
    }

    /// The initial byte and argument of an item of major type `major`, in the shortest form.
    private static func head(_ major: UInt8, _ argument: UInt64, into out: inout [UInt8]) {
        let type = major << 5
        switch argument {
        case 0..<24: out.append(type | UInt8(argument))
        case 24...0xFF: out += [type | 24, UInt8(argument)]
        case 0x100...0xFFFF: out += [type | 25, UInt8(argument >> 8), UInt8(argument & 0xFF)]
        case 0x1_0000...0xFFFF_FFFF:
            out.append(type | 26)
            for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8((argument >> UInt64(shift)) & 0xFF)) }
        default:
            out.append(type | 27)
            for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8((argument >> UInt64(shift)) & 0xFF)) }
        }
    }
}

// MARK: - Decoding

extension CBOR {
    /// The one item `bytes` hold, all of them.
    static func decode(_ bytes: some Collection<UInt8>) throws(Failure) -> CBOR {
        var reader = Reader(bytes: Array(bytes))
        let item = try reader.item(depth: 0)
        guard reader.offset == reader.bytes.count else { throw .trailingBytes }
        return item
    }

    /// A cursor over the input; every length is checked against what is left before anything is read or reserved.
    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        var remaining: Int { bytes.count - offset }

        mutating func byte() throws(Failure) -> UInt8 {
            guard offset < bytes.count else { throw .truncated }
            defer { offset += 1 }
            return bytes[offset]
        }

        mutating func take(_ count: UInt64) throws(Failure) -> ArraySlice<UInt8> {
            guard count <= UInt64(remaining) else { throw .truncated }
            let end = offset + Int(count)
            defer { offset = end }
            return bytes[offset..<end]
        }

        /// The argument that follows an initial byte whose low five bits are `info`.
        mutating func argument(_ info: UInt8) throws(Failure) -> UInt64 {
            switch info {
            case 0..<24: return UInt64(info)
            case 24...27:
                let size = 1 << Int(info - 24)
                return try take(UInt64(size)).reduce(0) { $0 << 8 | UInt64($1) }
            default: throw .unsupported  // 28-30 are reserved, 31 is an indefinite length
            }
        }

        mutating func item(depth: Int) throws(Failure) -> CBOR {
            guard depth <= CBOR.maximumDepth else { throw .tooDeep }
            let initial = try byte()
            let major = initial >> 5
            let info = initial & 0x1F
            if major == 7 {
                switch info {
                case 20: return .bool(false)
                case 21: return .bool(true)
                case 22: return .null
                default: throw .unsupported
                }
            }
            let argument = try argument(info)
            switch major {
            case 0: return .unsigned(argument)
            case 1: return .negative(argument)
            case 2: return .bytes(Array(try take(argument)))
            case 3:
                let utf8 = try take(argument)
                guard let text = String(validating: utf8, as: UTF8.self) else { throw .invalidText }
                return .text(text)
            case 4:
                // Every item is at least one byte: a count beyond what is left is truncated input, not an allocation.
                guard argument <= UInt64(remaining) else { throw .truncated }
                var items: [CBOR] = []
                items.reserveCapacity(Int(argument))
                for _ in 0..<argument { items.append(try item(depth: depth + 1)) }
                return .array(items)
            case 5:
                guard argument <= UInt64(remaining / 2) else { throw .truncated }
                var entries: [Entry] = []
                entries.reserveCapacity(Int(argument))
                for _ in 0..<argument {
                    let key = try item(depth: depth + 1)
                    guard !entries.contains(where: { $0.key == key }) else { throw .duplicateKey }
                    entries.append(Entry(key: key, value: try item(depth: depth + 1)))
                }
                return .map(entries)
            default: throw .unsupported  // tags
            }
        }
    }
}
