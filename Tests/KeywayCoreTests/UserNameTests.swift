import KeywayCore
import Testing

@Suite("UserContext.nameProblem")
struct UserNameTests {
    /// The rule written out as keyway(8) states it, scalar by scalar: the byte scan that keywayd runs on every request
    /// must agree with it everywhere. ('/' and ':' are looked for among the scalars: a Character-wise `contains("/")`,
    /// as the check was written until 2026-12-05, missed a '/' after a character that joins the next one, U+0600.)
    static func rule(_ name: String) -> String? {
        let length = name.utf8.count
        if length == 0 { return "the user name is empty" }
        if length > UserContext.maximumNameLength {
            return "a user name of \(length) bytes is longer than \(UserContext.maximumNameLength)"
        }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F..<0xA0).contains($0.value) }) {
            return "the user name contains a control character"
        }
        if name.unicodeScalars.contains(where: { $0 == "/" || $0 == ":" }) {
            return "the user name contains '/' or ':'"
        }
        if name == "." || name == ".." { return "the user name is '.' or '..'" }
        return nil
    }

    @Test(
        "names an account can have pass; the others are refused with their reason",
        arguments: [
            ("alice", nil),
            ("DOMAIN\\john smith", nil),
            ("José", nil),
            ("ü\u{A0}x", nil),
            ("", "the user name is empty"),
            ("a\nb", "the user name contains a control character"),
            ("csi\u{9B}2J", "the user name contains a control character"),
            ("del\u{7F}", "the user name contains a control character"),
            ("a/b", "the user name contains '/' or ':'"),
            ("a:b", "the user name contains '/' or ':'"),
            ("a/\u{1B}", "the user name contains a control character"),
            ("\u{600}/etc", "the user name contains '/' or ':'"),
            (".", "the user name is '.' or '..'"),
            ("..", "the user name is '.' or '..'"),
            ("...", nil),
            (String(repeating: "a", count: 256), "a user name of 256 bytes is longer than 255"),
        ] as [(String, String?)])
    func table(_ name: String, _ expected: String?) {
        #expect(UserContext.nameProblem(name) == expected)
        #expect(Self.rule(name) == expected)
    }

    /// Every scalar up to U+07FF (all one- and two-byte UTF-8, where C0, DEL and C1 live) and a sample beyond,
    /// alone, before and after text, and beside '/': the byte scan agrees with the rule for each.
    @Test("the byte scan agrees with the rule for every one- and two-byte scalar")
    func everyScalar() {
        var scalars = (0...0x7FF).compactMap { Unicode.Scalar(UInt32($0)) }
        scalars += [0xFFFD, 0x1F511, 0x10FFFF, 0xC280, 0x9F].compactMap { Unicode.Scalar(UInt32($0)) }
        for scalar in scalars {
            let character = String(Character(scalar))
            for name in [character, "a" + character, character + "b", "x\u{C2}" + character, character + "/"] {
                #expect(UserContext.nameProblem(name) == Self.rule(name), "U+\(String(scalar.value, radix: 16))")
            }
        }
    }
}
