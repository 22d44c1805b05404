import Foundation
import KeywayTools
import Testing

/// The QR code `keyway enroll totp` draws is the real symbol for its text: the same lines, character for character,
/// as Debian's `qrencode` tool draws for the same text, level and margin.
@Suite("QR code on a terminal")
struct QRCodeTests {
    /// What `qrencode -l L -m MARGIN -t UTF8i TEXT` prints, line by line.
    func qrencode(_ text: String, margin: Int = 2) throws -> [String] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/qrencode")
        process.arguments = ["-l", "L", "-m", "\(margin)", "-t", "UTF8i", text]
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
        for margin in [1, 2] {
            let ours = try #require(QRCode.lines(text, margin: margin))
            #expect(ours == (try qrencode(text, margin: margin)))
            #expect(ours.count > 10)
        }
    }

    @Test("a TOTP URI of a long account name fits an 80×24 terminal, in black on white")
    func fits() throws {
        let uri =
            "otpauth://totp/Keyway:a-long-user-name%40build-server-01.example.com"
            + "?secret=ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
        let lines = try #require(QRCode.lines(uri, margin: 2))
        #expect(lines.count <= 21 && lines.allSatisfy { $0.count <= 80 }, "\(lines.count) lines")
        let coloured = QRCode.inColour(lines)
        #expect(coloured.allSatisfy { $0.hasPrefix("\u{1B}[30;47m") && $0.hasSuffix("\u{1B}[0m") })
        let svg = try #require(QRCode.svg(uri))
        #expect(svg.hasPrefix("<svg") && svg.contains("fill=\"#ffffff\""))
    }
}
