public import KeywayCore

/// keywayd's framing (docs/ARCHITECTURE.md §10): every message is a 4-byte big-endian length, then that many bytes:
/// a version byte, a kind byte, and the kind's fields in a fixed order. Fields are big-endian integers, bytes and
/// strings with a 4-byte length, optionals with a 0/1 byte. A decoder consumes exactly the body or refuses it.
public enum Wire {
    /// The protocol version spoken; a frame with another version is refused.
    public static let version: UInt8 = 2
    /// The largest body accepted in either direction. A request is far smaller (a secret is at most 4 KiB, a
    /// biometric enrollment 64 samples of 64 values); an answer (status of every user, the audit trail) may be larger.
    public static let maximumRequest = 64 * 1024
    /// The largest answer (the status of every user of a large site is tens of MiB).
    public static let maximumResponse = 256 * 1024 * 1024
}

/// Why bytes are not a valid message, in words for a log.
public struct WireError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The explanation.
    public var description: String
    /// Creates an explanation.
    public init(_ description: String) { self.description = description }
}

/// Appends fields to a message body.
public struct WireWriter {
    /// The body so far.
    public private(set) var bytes: [UInt8] = []

    /// Starts a body with the version and the kind, with room for `capacity` bytes: a request that carries a
    /// secret is written into one buffer that never moves, so no freed copy of the secret is left behind.
    public init(kind: UInt8, capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
        bytes.append(Wire.version)
        bytes.append(kind)
    }

    /// One byte.
    public mutating func u8(_ value: UInt8) { bytes.append(value) }
    /// A boolean as 0 or 1.
    public mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }
    /// A big-endian 32-bit length or count.
    public mutating func u32(_ value: Int) {
        let word = UInt32(clamping: value)
        for shift in stride(from: 24, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> shift)) }
    }
    /// A big-endian 64-bit integer.
    public mutating func i64(_ value: Int64) {
        let word = UInt64(bitPattern: value)
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> shift)) }
    }
    /// A double, by its bit pattern.
    public mutating func double(_ value: Double) { i64(Int64(bitPattern: value.bitPattern)) }
    /// Bytes with their length.
    public mutating func data(_ value: some Collection<UInt8>) {
        u32(value.count)
        bytes.append(contentsOf: value)
    }
    /// A string as UTF-8 with its length.
    public mutating func string(_ value: String) { data(Array(value.utf8)) }
    /// A secret's bytes with their length (the caller wipes the body after sending it).
    public mutating func secret(_ value: Secret) { value.withUnsafeBytes { data($0) } }
    /// An optional: 0, or 1 then the value.
    public mutating func optional<T>(_ value: T?, _ write: (inout WireWriter, T) -> Void) {
        guard let value else { return u8(0) }
        u8(1)
        write(&self, value)
    }

    /// `body` inside its frame: the 4-byte big-endian length first.
    public static func frame(_ body: [UInt8]) -> [UInt8] {
        var frame: [UInt8] = []
        frame.reserveCapacity(body.count + 4)
        let count = UInt32(clamping: body.count)
        for shift in stride(from: 24, through: 0, by: -8) { frame.append(UInt8(truncatingIfNeeded: count >> shift)) }
        frame.append(contentsOf: body)
        return frame
    }
}

/// Reads fields from a message body, refusing anything short, long or malformed.
public struct WireReader {
    private let bytes: [UInt8]
    private var offset: Int

    /// The kind byte, read with the version when the reader is made.
    public let kind: UInt8

    /// Checks the version and reads the kind.
    public init(_ bytes: [UInt8]) throws(WireError) {
        guard bytes.count >= 2 else { throw WireError("a message of \(bytes.count) bytes is too short") }
        guard bytes[0] == Wire.version else {
            throw WireError("protocol version \(bytes[0]) is not spoken here (this is version \(Wire.version))")
        }
        self.bytes = bytes
        kind = bytes[1]
        offset = 2
    }

    private mutating func take(_ count: Int, _ what: String) throws(WireError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= bytes.count - offset else {
            throw WireError("\(what) runs past the end of the message")
        }
        defer { offset += count }
        return bytes[offset..<offset + count]
    }

    /// One byte.
    public mutating func u8(_ what: String) throws(WireError) -> UInt8 { try take(1, what).first! }
    /// A boolean: exactly 0 or 1.
    public mutating func bool(_ what: String) throws(WireError) -> Bool {
        switch try u8(what) {
        case 0: return false
        case 1: return true
        case let other: throw WireError("\(what) is \(other), not 0 or 1")
        }
    }
    /// A big-endian 32-bit length or count.
    public mutating func u32(_ what: String) throws(WireError) -> Int {
        try take(4, what).reduce(0) { $0 << 8 | Int($1) }
    }
    /// A big-endian 64-bit integer.
    public mutating func i64(_ what: String) throws(WireError) -> Int64 {
        Int64(bitPattern: try take(8, what).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }
    /// A double, by its bit pattern.
    public mutating func double(_ what: String) throws(WireError) -> Double {
        Double(bitPattern: UInt64(bitPattern: try i64(what)))
    }
    /// Bytes with their length, at most `limit`.
    public mutating func data(_ what: String, limit: Int) throws(WireError) -> ArraySlice<UInt8> {
        let count = try u32(what)
        guard count <= limit else { throw WireError("\(what) is \(count) bytes; at most \(limit) are accepted") }
        return try take(count, what)
    }
    /// A UTF-8 string with its length, at most `limit` bytes.
    public mutating func string(_ what: String, limit: Int = 1024) throws(WireError) -> String {
        guard let text = String(validating: try data(what, limit: limit), as: UTF8.self) else {
            throw WireError("\(what) is not UTF-8")
        }
        return text
    }
    /// A secret of at most `limit` bytes.
    public mutating func secret(_ what: String, limit: Int = 4096) throws(WireError) -> Secret {
        Secret(copying: try data(what, limit: limit))
    }
    /// An optional: 0, or 1 then the value.
    public mutating func optional<T>(_ what: String, _ read: (inout WireReader) throws(WireError) -> T)
        throws(WireError) -> T?
    {
        try bool(what) ? try read(&self) : nil
    }
    /// A count of at most `limit` items.
    public mutating func count(_ what: String, limit: Int) throws(WireError) -> Int {
        let count = try u32(what)
        guard count <= limit else { throw WireError("\(count) \(what) are more than the \(limit) accepted") }
        return count
    }

    /// Refuses bytes left over after the last field.
    public func finish() throws(WireError) {
        guard offset == bytes.count else { throw WireError("\(bytes.count - offset) bytes follow the last field") }
    }
}
