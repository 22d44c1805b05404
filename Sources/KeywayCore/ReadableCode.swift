/// Codes a person reads off paper or a message and types (recovery codes, an administrator's pass): characters of a
/// 31-character alphabet without 0, 1, i, l or o, so none is mistaken for another, in groups of four; typing ignores
/// case, hyphens and spaces. Each character carries log2(31) ≈ 4.95 bits.
public struct ReadableCode: Sendable {
    /// The characters a code is made of.
    public static let alphabet = Array("23456789abcdefghjkmnpqrstuvwxyz".utf8)
    /// Characters in a code.
    public let length: Int

    /// Codes of `length` characters.
    public init(length: Int) { self.length = length }

    /// `count` distinct codes, each drawn uniformly from `random`'s bytes (a byte at or above 248, 8 × 31, is drawn
    /// again).
    public func generate(_ count: Int, random: (Int) -> [UInt8]) -> [[UInt8]] {
        var codes: [[UInt8]] = []
        while codes.count < count {
            var code: [UInt8] = []
            while code.count < length {
                for byte in random(length * 2) where byte < 248 && code.count < length {
                    code.append(Self.alphabet[Int(byte) % Self.alphabet.count])
                }
            }
            if !codes.contains(code) { codes.append(code) }
        }
        return codes
    }

    /// The code as it is written: groups of four, joined by hyphens.
    public func written(_ code: [UInt8]) -> String {
        var out: [UInt8] = []
        for (index, byte) in code.enumerated() {
            if index > 0 && index % 4 == 0 { out.append(UInt8(ascii: "-")) }
            out.append(byte)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The canonical code in what was typed (lower case, without hyphens or spaces), or nil when it is not one.
    public func canonical(_ entered: Secret) -> Secret? {
        var canonical: [UInt8] = []
        var wellFormed = true
        entered.withUnsafeBytes { bytes in
            for byte in bytes {
                if byte == UInt8(ascii: "-") || byte == UInt8(ascii: " ") { continue }
                let lower = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
                guard Self.alphabet.contains(lower) else {
                    wellFormed = false
                    return
                }
                canonical.append(lower)
            }
        }
        defer { canonical.withUnsafeMutableBytes { secureZero($0) } }
        guard wellFormed, canonical.count == length else { return nil }
        return Secret(copying: canonical)
    }
}
