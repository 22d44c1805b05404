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
        let mac = HMAC.sha1(key: secret, Self.counter(step))
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

    /// The message whose HMAC gives `step`'s code: the step as eight big-endian bytes.
    public static func counter(_ step: Int64) -> [UInt8] {
        stride(from: 56, through: 0, by: -8).map { UInt8(truncatingIfNeeded: step >> Int64($0)) }
    }

    /// The step within `window` steps either side of `step` whose code is `entered`, compared in constant time for
    /// each candidate; nil when none is. Steps at or before `used` (codes already accepted) are not candidates.
    public func matchingStep(_ entered: [UInt8], around step: Int64, window: Int64, after used: Int64 = .min) -> Int64?
    {
        var found: Int64? = nil
        for candidate in (step - window)...(step + window) where candidate > used {
            let expected = code(step: candidate)
            var difference = UInt8(expected.count == entered.count ? 0 : 1)
            for index in 0..<min(expected.count, entered.count) { difference |= expected[index] ^ entered[index] }
            if difference == 0 && found == nil { found = candidate }
        }
        return found
    }

    /// How an enrollment keeps a one-time code: a version byte, the digits, the period, then the secret. The first
    /// `header` bytes are all a fleet's database gives a host (`Store.checkOneTimeCode`).
    public static let header = 3

    /// The enrollment's bytes.
    public var record: [UInt8] { [1, UInt8(digits), UInt8(period)] + secret }

    /// The generator a record keeps, or nil when it is not a version-1 record (with a secret of `secretLength`
    /// bytes). With `needsSecret` false, a header alone is enough (the digits and the period, with no secret: what
    /// a host reads from a fleet's database).
    public init?(record bytes: [UInt8], needsSecret: Bool = true) {
        guard bytes.count >= Self.header, bytes[0] == 1, bytes[1] == 6 || bytes[1] == 8, bytes[2] > 0,
            !needsSecret || bytes.count == Self.header + Self.secretLength
        else { return nil }
        self.init(secret: Array(bytes[Self.header...]), digits: Int(bytes[1]), period: Int64(bytes[2]))
    }

    /// Checks `entered` against the codes of the steps within `window` either side of the step `now` falls in:
    /// which step matched, if any, and the fingerprint `entered` has as a wrong code of that step, keyed by the
    /// secret (a repeat of it within the step is refunded; the same digits later are a new guess, and the
    /// fingerprint says nothing about another secret's codes).
    public func check(_ entered: [UInt8], window: Int64, at now: Timestamp, after used: Int64 = .min)
        -> OneTimeCodeCheck
    {
        let step = step(at: now)
        return OneTimeCodeCheck(
            step: matchingStep(entered, around: step, window: window, after: used),
            fingerprint: Self.mismatchFingerprint(entered, step: step, key: secret))
    }

    /// The fingerprint of a wrong code judged in `step`: 16 bytes of an HMAC keyed by `key`.
    public static func mismatchFingerprint(_ code: [UInt8], step: Int64, key: [UInt8]) -> [UInt8] {
        Array(HMAC.sha1(key: key, Array("mismatch".utf8) + counter(step) + code).prefix(16))
    }
}

/// What `OneTimeCode.check` found.
public struct OneTimeCodeCheck: Sendable, Equatable {
    /// The step whose code was entered, or nil when none in the window was.
    public var step: Int64?
    /// The entered code's fingerprint as a wrong one (`OneTimeCode.mismatchFingerprint`).
    public var fingerprint: [UInt8]

    public init(step: Int64?, fingerprint: [UInt8]) {
        self.step = step
        self.fingerprint = fingerprint
    }
}

/// The step of the last one-time code a store accepted, for the enrollment made at `changedAt` (a new secret starts
/// over): what makes a code work once (`Store.checkOneTimeCode`).
public struct OneTimeMark: Sendable, Equatable {
    /// The step of the last code accepted.
    public var step: Int64
    /// When the enrollment it was accepted for was made.
    public var changedAt: Timestamp

    public init(step: Int64, changedAt: Timestamp) {
        self.step = step
        self.changedAt = changedAt
    }
}

extension Enrollment {
    /// `Store.checkOneTimeCode` over this record, for a store that holds the secret itself: `mark` is the last step
    /// the store accepted (ignored when it belongs to an earlier record). A code of a step at or before the mark, or
    /// at or before the step the record was made in (the code that confirmed it), is used and does not match. The
    /// check, and the mark to keep when a code matched; nil when this is not a version-1 record.
    public func checkOneTimeCode(_ code: [UInt8], window: Int64, at now: Timestamp, mark: OneTimeMark?)
        -> (check: OneTimeCodeCheck, mark: OneTimeMark?)?
    {
        guard let generator = OneTimeCode(record: payload) else { return nil }
        let made = generator.step(at: changedAt)
        let used = max(mark.flatMap { $0.changedAt == changedAt ? $0.step : nil } ?? made, made)
        let check = generator.check(code, window: window, at: now, after: used)
        return (check, check.step.map { OneTimeMark(step: $0, changedAt: changedAt) })
    }
}
