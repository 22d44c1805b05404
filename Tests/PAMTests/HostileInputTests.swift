import Foundation
import Testing

@testable import KeywayProcessFixture

/// Hostile input through the real module in a C host over the real libpam: every answer and every user name an
/// attacker can choose gets a clean refusal with the right code, never a crash, never PAM_SUCCESS, and the
/// enrollment keeps working afterwards.
@Suite("hostile input through the real module")
struct HostileInputTests {
    /// Hex of bytes, for answers that argv cannot carry (a NUL, invalid UTF-8).
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static let hostileAnswers: [(String, [String], String)] = [
        ("empty", ["--answer", ""], "PAM_AUTH_ERR"),
        ("4 KiB, the longest reply taken", ["--huge-answer", "4096"], "PAM_AUTH_ERR"),
        ("4 KiB + 1", ["--huge-answer", "4097"], "PAM_CONV_ERR"),
        ("1 MiB", ["--huge-answer", "1048576"], "PAM_CONV_ERR"),
        ("64 MiB", ["--huge-answer", "67108864"], "PAM_CONV_ERR"),
        // The module reads a C string: what precedes the NUL is the answer (as for every PAM module); the right
        // pattern after it is never read.
        ("a NUL, then the right pattern", ["--answer-hex", hex([0] + Array("2-4-9-3".utf8))], "PAM_AUTH_ERR"),
        ("invalid UTF-8", ["--answer-hex", hex([0xFF, 0xFE, 0xC0, 0x80, 0x32, 0xED, 0xA0, 0x80])], "PAM_AUTH_ERR"),
        ("control and escape sequences", ["--answer", "\u{1B}[2J\u{1B}]0;owned\u{07}\r\u{08}2-4-9-3"], "PAM_AUTH_ERR"),
        ("10,000 dots", ["--answer", String(repeating: "1-", count: 5000)], "PAM_CONV_ERR"),
        (
            "1,000 dashed dots", ["--answer", Array(repeating: "1-2-3-4", count: 250).joined(separator: "-")],
            "PAM_AUTH_ERR"
        ),
        ("letters", ["--answer", "abcd-efgh"], "PAM_AUTH_ERR"),
        ("non-ASCII digits", ["--answer", "٢-٤-٩-٣"], "PAM_AUTH_ERR"),
        ("full-width digits", ["--answer", "２４９３"], "PAM_AUTH_ERR"),
        ("format directives", ["--answer", "%n%n%s%s%x"], "PAM_AUTH_ERR"),
    ]

    @Test(
        "a hostile answer is refused (malformed entries cost no try), wrong ones end the evaluation; nothing is lost",
        arguments: hostileAnswers)
    func hostileAnswer(name: String, hostile: [String], expected: String) throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("kw", "policy=pattern")
        let run = try harness(fixture, "kw", "alice", hostile + answers("6-1-8-3", "4-3-8-1-6", "7-5-3-6"))
        #expect(run.status == 0, "the host crashed: \(run.text)")
        #expect(run.result == expected, "\(name): \(run.text)")
        // Nothing was lost: the enrollment is intact and the right pattern succeeds.
        let after = try harness(fixture, "kw", "alice", answers("2-4-9-3"))
        #expect(after.result == "PAM_SUCCESS", "\(name): \(after.text)")
    }

    static let hostileUsers: [(String, String, String)] = [
        ("100 kB", String(repeating: "a", count: 100_000), "PAM_USER_UNKNOWN"),
        ("256 bytes", String(repeating: "b", count: 256), "PAM_USER_UNKNOWN"),
        ("a newline", "alice\nroot", "PAM_USER_UNKNOWN"),
        ("a slash", "../alice", "PAM_USER_UNKNOWN"),
        ("dot-dot", "..", "PAM_USER_UNKNOWN"),
        ("an escape sequence", "eve\u{1B}[2J", "PAM_USER_UNKNOWN"),
        ("a colon", "root:x:0:0", "PAM_USER_UNKNOWN"),
        ("empty", "", "PAM_USER_UNKNOWN"),
        // Invalid UTF-8 (a Latin-1 "josé"): never decoded into U+FFFD, where "jos\xe9" and "jos\xe8" would meet.
        ("invalid UTF-8", "hex:6a6f73e9", "PAM_USER_UNKNOWN"),
        ("a lone continuation byte", "hex:80", "PAM_USER_UNKNOWN"),
        // Names an account could have: concealed like any unenrolled user (asked, hashed, refused).
        ("format directives", "%n%n%s%x", "PAM_AUTH_ERR"),
        ("quotes", "a'b\"c", "PAM_AUTH_ERR"),
        ("255 bytes", String(repeating: "c", count: 255), "PAM_AUTH_ERR"),
        ("a space and a backslash", "DOMAIN\\john smith", "PAM_AUTH_ERR"),
    ]

    @Test(
        "hostile user names: refused at once when no account can have them, concealed otherwise",
        arguments: hostileUsers)
    func hostileUserName(name: String, user: String, expected: String) throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("alice", "2-4-9-3")
        fixture.service("kw", "policy=pattern")
        // "hex:…" names bytes that a Swift string (and so argv here) cannot carry; the C host passes them on.
        let bytes = user.hasPrefix("hex:") ? ["--user-hex", String(user.dropFirst(4))] : []
        let run = try harness(
            fixture, "kw", bytes.isEmpty ? user : "unused",
            bytes + ["--acct"] + answers("6-1-8-3", "4-3-8-1-6", "7-5-3-6"))
        #expect(run.status == 0, "the host crashed: \(run.text)")
        let authentication = run.output.first { $0.hasPrefix("authenticate: ") }
        #expect(authentication?.hasPrefix("authenticate: \(expected)") == true, "\(name): \(run.text)")
        #expect(run.result != "PAM_SUCCESS" || expected == "PAM_AUTH_ERR", "\(name): \(run.text)")
        if expected == "PAM_USER_UNKNOWN" {
            #expect(!run.output.contains { $0.hasPrefix("prompt") }, "\(name): asked for a pattern: \(run.text)")
            #expect(run.result == "PAM_USER_UNKNOWN", "\(name): account management: \(run.text)")
        }
    }
}
