import KeywayCore
import KeywayGesture
import KeywayTools
import Testing

/// The pattern drawn on the terminal grid, without a terminal: keys in, dots and screen lines out.
@Suite("Pattern drawing")
struct PatternDrawingTests {
    /// A drawing after `keys`, from the default start (the centre).
    func drawn(_ keys: [PatternDrawing.Key], from cursor: UInt8 = 5) -> PatternDrawing {
        var drawing = PatternDrawing(cursor: cursor)
        for key in keys { _ = drawing.apply(key) }
        return drawing
    }

    /// The digits the gesture factor reads.
    func text(_ secret: Secret) -> String {
        secret.withUnsafeBytes { String(decoding: $0, as: UTF8.self) }
    }

    @Test("the cursor starts in the centre and moves one dot per key")
    func moves() {
        #expect(PatternDrawing().cursor == 5)
        #expect(drawn([.up]).cursor == 2)
        #expect(drawn([.down]).cursor == 8)
        #expect(drawn([.left]).cursor == 4)
        #expect(drawn([.right]).cursor == 6)
        #expect(drawn([.up, .left]).cursor == 1)
        #expect(drawn([.down, .right]).cursor == 9)
    }

    @Test("moves stop at the edges of the grid")
    func clamped() {
        #expect(drawn([.up, .up, .up]).cursor == 2)
        #expect(drawn([.left, .left, .left, .up, .up]).cursor == 1)
        #expect(drawn([.down, .down, .right, .right, .right]).cursor == 9)
        #expect(drawn([.right, .down, .down, .down]).cursor == 9)
        #expect(drawn([.left, .down, .down, .left]).cursor == 7)
        #expect(PatternDrawing(cursor: 0).cursor == 1)
        #expect(PatternDrawing(cursor: 12).cursor == 9)
    }

    @Test(
        "hjkl and the arrows (ESC [ and ESC O) are the same keys",
        arguments: [
            ("k", "A", PatternDrawing.Key.up), ("j", "B", .down), ("l", "C", .right), ("h", "D", .left),
        ])
    func viKeys(letter: String, final: String, key: PatternDrawing.Key) {
        let vi = PatternDrawing.Key(terminalBytes: Array(letter.utf8))
        #expect(vi == key)
        #expect(PatternDrawing.Key(terminalBytes: [0x1B] + Array("[\(final)".utf8)) == vi)
        #expect(PatternDrawing.Key(terminalBytes: [0x1B] + Array("O\(final)".utf8)) == vi)
    }

    @Test("the other keys: space, digits, Enter, Backspace, a lone Esc, Ctrl-C; unknown bytes mean nothing")
    func terminalBytes() {
        #expect(PatternDrawing.Key(terminalBytes: [0x20]) == .select)
        #expect(PatternDrawing.Key(terminalBytes: Array("7".utf8)) == .digit(7))
        #expect(PatternDrawing.Key(terminalBytes: Array("0".utf8)) == nil)
        #expect(PatternDrawing.Key(terminalBytes: [0x0D]) == .finish)
        #expect(PatternDrawing.Key(terminalBytes: [0x0A]) == .finish)
        #expect(PatternDrawing.Key(terminalBytes: [0x7F]) == .undo)
        #expect(PatternDrawing.Key(terminalBytes: [0x08]) == .undo)
        #expect(PatternDrawing.Key(terminalBytes: [0x1B]) == .cancel)
        #expect(PatternDrawing.Key(terminalBytes: [0x03]) == .cancel)
        #expect(PatternDrawing.Key(terminalBytes: Array("x".utf8)) == nil)
        #expect(PatternDrawing.Key(terminalBytes: [0x1B] + Array("[Z".utf8)) == nil)
        #expect(PatternDrawing.Key(terminalBytes: [0x1B] + Array("[1;5A".utf8)) == nil)
    }

    @Test("a digit jumps there and chooses the dot; space chooses the dot under the cursor")
    func digitsAndSpace() {
        let jumped = drawn([.digit(3)])
        #expect(jumped.cursor == 3)
        #expect(jumped.chosen == [3])
        #expect(drawn([.select, .up, .select]).chosen == [5, 2])
        #expect(drawn([.digit(0), .digit(10)]).chosen.isEmpty)
    }

    @Test(
        "a straight move over an unchosen dot picks it up",
        arguments: [
            ([1, 3], [1, 2, 3]), ([1, 9], [1, 5, 9]), ([7, 1], [7, 4, 1]), ([3, 7], [3, 5, 7]), ([2, 8], [2, 5, 8]),
            ([1, 6], [1, 6]), ([1, 2], [1, 2]),
        ] as [([Int], [UInt8])])
    func midpoint(digits: [Int], chosen: [UInt8]) {
        #expect(drawn(digits.map { .digit($0) }).chosen == chosen)
    }

    @Test("a middle dot already chosen is not picked up again: the line passes over it")
    func middleAlreadyChosen() {
        #expect(drawn([.digit(2), .digit(1), .digit(3)]).chosen == [2, 1, 3])
        #expect(drawn([.digit(5), .digit(1), .digit(9)]).chosen == [5, 1, 9])
    }

    @Test("a dot is never chosen twice, by space or by digit")
    func noRepeats() {
        #expect(drawn([.select, .select, .digit(5)]).chosen == [5])
        #expect(drawn([.digit(1), .digit(3), .digit(2), .left, .select]).chosen == [1, 2, 3])
    }

    @Test("Backspace takes back the last dot, a picked-up midpoint like any other, and nothing on an empty drawing")
    func undo() {
        #expect(drawn([.digit(1), .digit(3), .undo]).chosen == [1, 2])
        #expect(drawn([.digit(1), .digit(3), .undo, .undo, .undo, .undo]).chosen.isEmpty)
        #expect(drawn([.undo]).chosen.isEmpty)
        #expect(drawn([.digit(4), .digit(6), .undo]).cursor == 6)
    }

    @Test("Enter finishes and Esc cancels; every other key goes on drawing")
    func outcomes() {
        var drawing = PatternDrawing()
        #expect(drawing.apply(.up) == .drawing)
        #expect(drawing.apply(.select) == .drawing)
        #expect(drawing.apply(.undo) == .drawing)
        #expect(drawing.apply(.finish) == .finished)
        #expect(drawing.apply(.cancel) == .cancelled)
    }

    @Test("the secret is the dots as digits, which the gesture factor's parser reads as the same pattern")
    func secret() throws {
        let drawing = drawn([.digit(2), .digit(4), .digit(6), .digit(9)])
        #expect(text(drawing.secret) == "24569")
        let parsed = try drawing.secret.withUnsafeBytes { Pattern.parse($0) }.get()
        #expect(parsed.dots == [2, 4, 5, 6, 9])
        #expect(drawing.secret == Secret(copying: parsed.canonicalBytes))
        #expect(PatternDrawing().secret.isEmpty)
    }

    @Test("wipe forgets the dots")
    func wipe() {
        var drawing = drawn([.digit(1), .digit(5)])
        drawing.wipe()
        #expect(drawing.chosen.isEmpty)
    }

    // MARK: The screen

    /// The grid's lines of a rendering (between the title's blank line and the one after the grid).
    func grid(_ drawing: PatternDrawing, showTrail: Bool = true) -> [String] {
        Array(drawing.render(showTrail: showTrail, title: "New pattern", message: nil)[2..<11])
    }

    @Test("an empty drawing: the title, nine unchosen dots with the cursor in brackets in the centre, the keys")
    func emptyScreen() {
        let screen = PatternDrawing().render(showTrail: true, title: "New pattern", message: nil)
        #expect(screen[0] == "New pattern")
        #expect(screen[2] == "     ○       ○       ○")
        #expect(screen[6] == "     ○      [○]      ○")
        #expect(screen[10] == "     ○       ○       ○")
        #expect(screen.joined().filter { $0 == "○" }.count == 9)
        #expect(screen.contains("0 dots"))
        #expect(screen.last == PatternDrawing.help)
        #expect(PatternDrawing.help == "arrows/hjkl move · space/1-9 select · Enter done · Backspace undo · Esc cancel")
    }

    @Test("the trail: ─ between 1 and 2, │ between 2 and 5, ╲ between 1 and 5, ╱ between 3 and 5")
    func trail() {
        let across = grid(drawn([.digit(1), .digit(2), .down]))
        #expect(across[0] == "     ●───────●       ○")
        let down = grid(drawn([.digit(2), .digit(5), .right]))
        #expect(down[1...3].allSatisfy { $0 == "             │" })
        let diagonal = grid(drawn([.digit(1), .digit(5), .right]))
        #expect(diagonal[1] == "       ╲")
        #expect(diagonal[2] == "         ╲")
        #expect(diagonal[3] == "           ╲")
        #expect(diagonal[4] == "     ○       ●      [○]")
        let back = grid(drawn([.digit(3), .digit(5), .down]))
        #expect(back[1...3] == ["                   ╱", "                 ╱", "               ╱"])
    }

    @Test("the cursor's brackets sit on the trail; a picked-up midpoint is drawn chosen, the line passing through it")
    func cursorOnTrail() {
        let screen = grid(drawn([.digit(1), .digit(3)]))
        #expect(screen[0] == "     ●───────●──────[●]")
        let column = grid(drawn([.digit(1), .digit(7), .right]))
        #expect(column[4] == "     ●       ○       ○")
        #expect(column[1...3].allSatisfy { $0 == "     │" } && column[5...7].allSatisfy { $0 == "     │" })
    }

    @Test("a knight's move is a dotted line; crossing lines merge")
    func knightAndCrossing() {
        let knight = grid(drawn([.digit(1), .digit(6), .digit(9)]))
        #expect(knight.joined().contains("·"))
        #expect(!knight.joined().contains("─"))
        let crossing = grid(drawn([.digit(1), .digit(5), .digit(2), .digit(4), .digit(7)]))
        #expect(crossing[2] == "         ╳   │")
    }

    @Test("with the trail hidden: no lines, no chosen dot, only the cursor and the count show")
    func hiddenTrail() {
        let drawing = drawn([.digit(1), .digit(2), .digit(5), .digit(9), .digit(6)])
        let screen = drawing.render(showTrail: false, title: "New pattern", message: nil)
        let text = screen.dropLast().joined(separator: "\n")
        for stroke in ["●", "─", "│", "╲", "╱", "·", "┼", "╳"] {
            #expect(!text.contains(stroke), "\(stroke) in\n\(text)")
        }
        #expect(text.filter { $0 == "○" }.count == 9)
        #expect(screen[6] == "     ○       ○      [○]")
        #expect(screen.contains("5 dots"))
        #expect(drawing.render(showTrail: true, title: "", message: nil).joined().contains("●"))
    }

    @Test("the message is shown below the count; the screen has the same number of lines whatever it shows")
    func stableSize() {
        let empty = PatternDrawing().render(showTrail: true, title: "New pattern", message: nil)
        let message = "The patterns did not match; start again."
        let told = PatternDrawing().render(showTrail: true, title: "New pattern", message: message)
        #expect(told.contains(message))
        #expect(told.firstIndex(of: message) == told.firstIndex(of: "0 dots").map { $0 + 1 })
        var drawing = PatternDrawing(cursor: 1)
        for key in [PatternDrawing.Key.digit(1), .digit(9), .digit(3), .digit(7), .digit(2), .digit(4), .digit(6)] {
            _ = drawing.apply(key)
            for showTrail in [true, false] {
                let screen = drawing.render(showTrail: showTrail, title: "Draw the pattern again", message: message)
                #expect(screen.count == empty.count)
                #expect(screen.map { $0.unicodeScalars.count }.max() == PatternDrawing.help.unicodeScalars.count)
            }
        }
        #expect(told.count == empty.count)
        #expect(drawn([.digit(1)]).render(showTrail: true, title: "", message: nil).contains("1 dot"))
    }
}
