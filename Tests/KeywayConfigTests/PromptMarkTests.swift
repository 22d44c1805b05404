import KeywayCore
import KeywayRuntime
import Testing

/// The marked prompts' one type (pam_keyway(8), MARKED PROMPTS): what the module writes, keyway-lock reads back.
@Suite("marked prompts: one type both ends use")
struct PromptMarkTests {
    @Test("every field written is read back, in the order of the table, and the text after it is the prompt's")
    func roundTrip() {
        var mark = PromptMark()
        mark.factor = "gesture"
        mark.invitation = "Touch the sensor"
        mark.fallback = "Use password"
        mark.wake = 7
        let written = mark.text + "Pattern: "
        #expect(
            written
                == "\u{1E}keyway\u{1F}factor=gesture\u{1F}invitation=Touch the sensor\u{1F}fallback=Use password\u{1F}wake=7\u{1E}Pattern: "
        )
        let read = PromptMark.read(written)
        #expect(read.mark == mark)
        #expect(read.text == "Pattern: ")
        let explaining = PromptMark(explaining: .gesture)
        #expect(PromptMark.read(explaining.text + "1 2 3").mark?.explains == "gesture")
    }

    @Test(
        "a value cannot break the mark; unknown keys, a wake that is no number and text without a mark are read safely")
    func hostileText() {
        var mark = PromptMark()
        mark.invitation = "a\u{1E}b\u{1F}c\nd\re"
        #expect(PromptMark.read(mark.text + "x").mark?.invitation == "abcde")
        let unknown = PromptMark.read("\u{1E}keyway\u{1F}colour=red\u{1F}factor=totp\u{1E}Code: ")
        #expect(unknown.mark?.factor == "totp")
        #expect(unknown.text == "Code: ")
        #expect(PromptMark.read("\u{1E}keyway\u{1F}wake=seven\u{1E}x").mark?.wake == nil)
        // The password's prompt, and a mark never closed: text alone.
        #expect(PromptMark.read("Password: ").mark == nil)
        let unclosed = PromptMark.read("\u{1E}keyway\u{1F}factor=gesture Pattern: ")
        #expect(unclosed.mark == nil)
        #expect(unclosed.text == "\u{1E}keyway\u{1F}factor=gesture Pattern: ")
    }
}
