public import KeywayCore

/// What a recovery code is: 12 characters of a 31-character alphabet (59 bits), written in three groups of four
/// (`k7m2-x9pq-4rtw`). The alphabet has no 0, 1, i, l or o, so nothing read off paper is mistaken for another
/// character; typing ignores case, hyphens and spaces.
public enum RecoveryCode {
    /// The characters a code is made of.
    public static let alphabet = Array("23456789abcdefghjkmnpqrstuvwxyz".utf8)
    /// Characters in a code.
    public static let length = 12
    /// Codes in a set.
    public static let setSize = 10

    /// `count` codes, each drawn uniformly from `random`'s bytes (a byte at or above 248, 8 × 31, is drawn again).
    public static func generate(_ count: Int, random: (Int) -> [UInt8]) -> [[UInt8]] {
        var codes: [[UInt8]] = []
        while codes.count < count {
            var code: [UInt8] = []
            while code.count < length {
                for byte in random(length * 2) where byte < 248 && code.count < length {
                    code.append(alphabet[Int(byte) % alphabet.count])
                }
            }
            if !codes.contains(code) { codes.append(code) }
        }
        return codes
    }

    /// The code as it is written: three groups of four, joined by hyphens.
    public static func written(_ code: [UInt8]) -> String {
        var out: [UInt8] = []
        for (index, byte) in code.enumerated() {
            if index > 0 && index % 4 == 0 { out.append(UInt8(ascii: "-")) }
            out.append(byte)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The canonical code in what was typed (lower case, no hyphens or spaces), or why it is not one.
    public static let normalize: KnowledgeFactor.Normalizer = { entered in
        var canonical: [UInt8] = []
        var wellFormed = true
        entered.withUnsafeBytes { bytes in
            for byte in bytes {
                if byte == UInt8(ascii: "-") || byte == UInt8(ascii: " ") { continue }
                let lower = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
                guard alphabet.contains(lower) else {
                    wellFormed = false
                    return
                }
                canonical.append(lower)
            }
        }
        defer { canonical.withUnsafeMutableBytes { secureZero($0) } }
        guard wellFormed, canonical.count == length else {
            return .failure(.init("A recovery code is 12 letters and digits, as written: xxxx-xxxx-xxxx."))
        }
        return .success(Secret(copying: canonical))
    }
}
