import KeywayCore
import Testing

@Suite("String.escapingControlCharacters")
struct EscapingTests {
    @Test(
        "control characters and backslashes are escaped; everything else is kept",
        arguments: [
            ("user=alice service=sudo outcome=success", "user=alice service=sudo outcome=success"),
            ("a\nb", "a\\x0ab"),
            ("\u{1B}[31mred", "\\x1b[31mred"),
            ("tab\there", "tab\\x09here"),
            ("del\u{7F}", "del\\x7f"),
            ("back\\slash", "back\\\\slash"),
            ("next line\u{85}", "next line\\x85"),
            ("csi\u{9B}2J", "csi\\x9b2J"),
            ("\u{80}\u{9F}", "\\x80\\x9f"),
            ("no-break\u{A0}space", "no-break\u{A0}space"),
            ("José Ā € 🔑", "José Ā € 🔑"),
            ("", ""),
        ])
    func table(_ input: String, _ expected: String) {
        #expect(input.escapingControlCharacters == expected)
    }

    /// Every scalar up to U+07FF (all one- and two-byte UTF-8, where C0, DEL and C1 live), alone and inside text,
    /// against the rule written out scalar by scalar: the quick scan must never let one through.
    @Test("the quick scan agrees with the rule for every one- and two-byte scalar")
    func everyScalar() {
        func rule(_ text: String) -> String {
            text.unicodeScalars.map { scalar -> String in
                switch scalar.value {
                case 0x00..<0x20, 0x7F..<0xA0:
                    let hex = String(scalar.value, radix: 16)
                    return "\\x" + (hex.count == 1 ? "0" + hex : hex)
                case 0x5C: return "\\\\"
                default: return String(scalar)
                }
            }.joined()
        }
        for value in UInt32(0)...0x7FF {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let text = "user=al\(scalar)ice"
            #expect(text.escapingControlCharacters == rule(text), "U+\(String(value, radix: 16))")
        }
    }
}
