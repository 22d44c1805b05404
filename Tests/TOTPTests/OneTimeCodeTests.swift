import Foundation
import KeywayCore
import Testing

@testable import KeywayTOTP

/// The codes are RFC 6238's and oathtool's: the RFC's own test vectors, and Debian's oath-toolkit for random secrets
/// and times, so the codes are not only checked against this implementation.
@Suite("TOTP codes")
struct OneTimeCodeTests {
    /// RFC 6238 appendix B's SHA-1 secret.
    let rfcSecret = Array("12345678901234567890".utf8)

    /// What `oathtool --totp -b -d DIGITS -N @SECONDS KEY` prints.
    static func oathtool(_ key: String, at seconds: Int64, digits: Int = 6) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/oathtool")
        process.arguments = ["--totp", "-b", "-d", "\(digits)", "-N", "@\(seconds)", key]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("SHA-1 and HMAC-SHA-1 give the FIPS 180 and RFC 2202 vectors")
    func hashVectors() {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(HMAC.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
        #expect(hex(HMAC.sha1([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(
            hex(HMAC.sha1(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "84983e441c3bd26ebaae4aa1f95129e5e54670f1")
        #expect(
            hex(HMAC.sha1(key: [UInt8](repeating: 0x0B, count: 20), Array("Hi There".utf8)))
                == "b617318655057264e28bc0b6fb378c8ef146be00")
        #expect(
            hex(HMAC.sha1(key: Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)))
                == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
        #expect(
            hex(
                HMAC.sha1(
                    key: [UInt8](repeating: 0xAA, count: 80),
                    Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)))
                == "aa4ae5e15272d00e95705637ce8a3b55ed402112")
    }

    @Test(
        "RFC 6238's SHA-1 vectors",
        arguments: [
            (59, "94287082"), (1_111_111_109, "07081804"), (1_111_111_111, "14050471"), (1_234_567_890, "89005924"),
            (2_000_000_000, "69279037"), (20_000_000_000, "65353130"),
        ] as [(Int64, String)])
    func rfcVectors(seconds: Int64, expected: String) {
        let generator = OneTimeCode(secret: rfcSecret, digits: 8)
        let code = generator.code(step: generator.step(at: Timestamp(seconds: seconds)))
        #expect(String(decoding: code, as: UTF8.self) == expected)
    }

    @Test("the same codes as oathtool for random secrets, times and both lengths")
    func againstOathtool() throws {
        var generator = SystemRandomNumberGenerator()
        for round in 0..<12 {
            let secret = (0..<OneTimeCode.secretLength).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let seconds = Int64.random(in: 0...4_000_000_000, using: &generator)
            let digits = round % 3 == 0 ? 8 : 6
            let ours = OneTimeCode(secret: secret, digits: digits)
            let code = String(decoding: ours.code(step: ours.step(at: Timestamp(seconds: seconds))), as: UTF8.self)
            #expect(code == (try Self.oathtool(Base32.encode(secret), at: seconds, digits: digits)), "round \(round)")
        }
    }

    @Test("base32 as RFC 4648 writes it, read back whatever the case and spacing")
    func base32() {
        #expect(Base32.encode(Array("foobar".utf8)) == "MZXW6YTBOI")
        #expect(Base32.encode(rfcSecret) == "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ")
        #expect(Base32.decode("mzxw 6ytb oi") == Array("foobar".utf8))
        #expect(Base32.decode("MZXW6YTBOI======") == Array("foobar".utf8))
        #expect(Base32.decode("MZXW1") == nil)
    }

    @Test("the step of a time, including the first second of a step and before the epoch")
    func steps() {
        let generator = OneTimeCode(secret: rfcSecret)
        #expect(generator.step(at: Timestamp(seconds: 0)) == 0)
        #expect(generator.step(at: Timestamp(seconds: 29)) == 0)
        #expect(generator.step(at: Timestamp(seconds: 30)) == 1)
        #expect(generator.step(at: Timestamp(milliseconds: -1)) == -1)
        #expect(generator.start(of: 2) == Timestamp(seconds: 60))
    }
}
