public import KeywayCore

/// RFC 6238's time-based one-time password over RFC 4226's HOTP: the codes an authenticator app shows.
public struct OneTimeCode: Sendable, Equatable {
    /// The shared secret (20 random bytes: RFC 4226 §4 asks for at least 16, recommends 20).
    public var secret: [UInt8]
    /// How many digits a code has (6 or 8).
    public var digits: Int
    /// How long one code is valid, in seconds (30, which every app assumes).
    public var period: Int64

    /// Bytes of a new secret.
    public static let secretLength = 20

    /// Creates a generator.
    public init(secret: [UInt8], digits: Int = 6, period: Int64 = 30) {
        self.secret = secret
        self.digits = digits
        self.period = period
    }

    /// The time step `at` falls in (RFC 6238's T, counted from the Unix epoch).
    public func step(at time: Timestamp) -> Int64 {
        let length = period * 1000  // floor division, so the millisecond before the epoch is step -1
        let milliseconds = time.milliseconds
        return milliseconds >= 0 ? milliseconds / length : (milliseconds - length + 1) / length
    }

    /// When `step` begins.
    public func start(of step: Int64) -> Timestamp { Timestamp(milliseconds: step * period * 1000) }

    /// The code of `step`: HOTP with the step as its counter (RFC 4226 §5.3, dynamic truncation).
    public func code(step: Int64) -> [UInt8] {
        var counter: [UInt8] = []
        for shift in stride(from: 56, through: 0, by: -8) {
            counter.append(UInt8(truncatingIfNeeded: step >> Int64(shift)))
        }
        let mac = HMAC.sha1(key: secret, counter)
        let offset = Int(mac[19] & 0x0F)
        let binary =
            UInt32(mac[offset] & 0x7F) << 24 | UInt32(mac[offset + 1]) << 16 | UInt32(mac[offset + 2]) << 8
            | UInt32(mac[offset + 3])
        var modulus: UInt32 = 1
        for _ in 0..<digits { modulus *= 10 }
        var value = binary % modulus
        var text = [UInt8](repeating: UInt8(ascii: "0"), count: digits)
        var index = digits - 1
        while value > 0 && index >= 0 {
            text[index] = UInt8(ascii: "0") + UInt8(value % 10)
            value /= 10
            index -= 1
        }
        return text
    }

    /// The step within `window` steps either side of `step` whose code is `entered`, compared in constant time for
    /// each candidate; nil when none is.
    public func matchingStep(_ entered: [UInt8], around step: Int64, window: Int64) -> Int64? {
        var found: Int64? = nil
        for candidate in (step - window)...(step + window) {
            let expected = code(step: candidate)
            var difference = UInt8(expected.count == entered.count ? 0 : 1)
            for index in 0..<min(expected.count, entered.count) { difference |= expected[index] ^ entered[index] }
            if difference == 0 && found == nil { found = candidate }
        }
        return found
    }
}

/// RFC 4648 base32, as otpauth:// URIs and authenticator apps write secrets: upper case, no padding.
public enum Base32 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)

    /// `bytes` in base32.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= 5 {
                out.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 31)])
                bits -= 5
            }
        }
        if bits > 0 { out.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The bytes of base32 `text` (case and spaces ignored), or nil when it is not base32.
    public static func decode(_ text: String) -> [UInt8]? {
        var out: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for character in text.utf8 where character != UInt8(ascii: " ") && character != UInt8(ascii: "=") {
            let upper = character >= UInt8(ascii: "a") && character <= UInt8(ascii: "z") ? character - 32 : character
            guard let value = alphabet.firstIndex(of: upper) else { return nil }
            buffer = buffer << 5 | UInt32(value)
            bits += 5
            if bits >= 8 {
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits - 8)))
                bits -= 8
            }
        }
        return out
    }
}
