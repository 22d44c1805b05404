/// SHA-1 (FIPS 180-4) and HMAC-SHA-1 (RFC 2104), the hash RFC 6238 and every authenticator app use for TOTP.
///
/// Written here because libsodium, the one crypto library every Keyway program links, has no SHA-1, and a TOTP
/// needs nothing else from one; in the core because every store computes it for the secrets it keeps
/// (`Store.macs`). SHA-1's collision weakness does not touch HMAC-SHA-1 as a keyed function (RFC 6194 §3.3), which
/// is why RFC 6238's default and Google Authenticator's only choice is still safe here. Checked against the RFC 2202
/// and RFC 6238 test vectors and against oathtool (Tests/TOTPTests).
public enum HMAC {
    /// SHA-1 of `message`: 20 bytes.
    public static func sha1(_ message: [UInt8]) -> [UInt8] {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0
        )
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) {
            padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift)))
        }
        var w = [UInt32](repeating: 0, count: 80)
        var block = 0
        while block < padded.count {
            for i in 0..<16 {
                let o = block + 4 * i
                w[i] =
                    UInt32(padded[o]) << 24 | UInt32(padded[o + 1]) << 16 | UInt32(padded[o + 2]) << 8
                    | UInt32(padded[o + 3])
            }
            for i in 16..<80 { w[i] = rotate(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1) }
            var (a, b, c, d, e) = h
            for i in 0..<80 {
                let f: UInt32
                let k: UInt32
                switch i {
                case 0..<20:
                    f = (b & c) | (~b & d)
                    k = 0x5A82_7999
                case 20..<40:
                    f = b ^ c ^ d
                    k = 0x6ED9_EBA1
                case 40..<60:
                    f = (b & c) | (b & d) | (c & d)
                    k = 0x8F1B_BCDC
                default:
                    f = b ^ c ^ d
                    k = 0xCA62_C1D6
                }
                let t = rotate(a, 5) &+ f &+ e &+ k &+ w[i]
                e = d
                d = c
                c = rotate(b, 30)
                b = a
                a = t
            }
            h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
            block += 64
        }
        var digest: [UInt8] = []
        digest.reserveCapacity(20)
        for word in [h.0, h.1, h.2, h.3, h.4] {
            for shift in stride(from: 24, through: 0, by: -8) {
                digest.append(UInt8(truncatingIfNeeded: word >> UInt32(shift)))
            }
        }
        padded.withUnsafeMutableBytes { secureZero($0) }
        w.withUnsafeMutableBytes { secureZero($0) }
        return digest
    }

    /// HMAC-SHA-1 of `message` under `key`.
    public static func sha1(key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        var block = key.count > 64 ? sha1(key) : key
        block += [UInt8](repeating: 0, count: 64 - block.count)
        var inner = block.map { $0 ^ 0x36 } + message
        var outer = block.map { $0 ^ 0x5C }
        outer += sha1(inner)
        let mac = sha1(outer)
        inner.withUnsafeMutableBytes { secureZero($0) }
        outer.withUnsafeMutableBytes { secureZero($0) }
        block.withUnsafeMutableBytes { secureZero($0) }
        return mac
    }

    private static func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { x << n | x >> (32 - n) }
}
