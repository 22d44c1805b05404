import Foundation
import KeywayTools
import Testing

/// The QR code `keyway enroll totp` draws is the real symbol for its text: the same lines, character for character,
/// as Debian's `qrencode` tool draws for the same text, level and margin.
@Suite("QR code on a terminal")
struct QRCodeTests {
    /// What `qrencode -l M -m 2 -t UTF8 TEXT` prints, line by line.
    func qrencode(_ text: String) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/qrencode")
        process.arguments = ["-l", "M", "-m", "2", "-t", "UTF8", text]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        return String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init).filter { !$0.isEmpty }
    }

    @Test(
        "each line is qrencode's own",
        arguments: [
            "hi",
            "otpauth://totp/Keyway:alice%40host?secret=JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP&issuer=Keyway"
                + "&algorithm=SHA1&digits=6&period=30",
        ])
    func sameAsQrencode(text: String) throws {
        let ours = try #require(QRCode.lines(text))
        #expect(ours == (try qrencode(text)))
        #expect(ours.count > 10)
    }
}
