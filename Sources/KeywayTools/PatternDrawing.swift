// The 3×3 pattern drawn on a terminal, as on a phone's lock screen: a cursor moved by keys, dots chosen in order
// with the finger's midpoint rule, and the screen that shows them. Nothing here touches a terminal: the `keyway`
// command's GridConversation reads the keys, hands them to `apply`, and writes the lines `render` returns.
public import KeywayCore
import KeywayGesture

/// A pattern being drawn: where the cursor is, which dots are chosen, and what the screen shows.
///
/// Dots are numbered as everywhere in Keyway, in reading order (1 2 3 / 4 5 6 / 7 8 9). Choosing a dot after
/// another across an unchosen one picks that one up first (1 then 3 gives 1, 2, 3), as a dragged finger would, so
/// `chosen` is always a normalized pattern and `secret` is what the gesture factor's normalizer accepts.
public struct PatternDrawing: Sendable, Equatable {
    /// What a person can press while drawing.
    public enum Key: Sendable, Equatable {
        /// Moves the cursor one row up (stays in the top row).
        case up
        /// Moves the cursor one row down (stays in the bottom row).
        case down
        /// Moves the cursor one column left (stays in the left column).
        case left
        /// Moves the cursor one column right (stays in the right column).
        case right
        /// Chooses the dot under the cursor.
        case select
        /// Moves the cursor to dot n (1…9) and chooses it; other numbers are ignored.
        case digit(Int)
        /// Takes back the last chosen dot.
        case undo
        /// The pattern is complete.
        case finish
        /// The person gives up.
        case cancel
    }

    /// Where the drawing stands after a key.
    public enum Outcome: Sendable, Equatable {
        /// Still drawing: show the screen again and wait for the next key.
        case drawing
        /// The person finished; `secret` is the pattern.
        case finished
        /// The person cancelled.
        case cancelled
    }

    /// The dot under the cursor, 1…9.
    public private(set) var cursor: UInt8
    /// The chosen dots in order, midpoints included; never a dot twice.
    public private(set) var chosen: [UInt8] = []

    /// A drawing with nothing chosen and the cursor on `cursor` (the centre unless told; clamped to 1…9).
    public init(cursor: UInt8 = 5) {
        self.cursor = min(max(cursor, 1), 9)
        chosen.reserveCapacity(9)
    }

    /// The pattern as the gesture factor reads it: the chosen dots as ASCII digits ("24569"); empty when none.
    public var secret: Secret {
        Secret(copying: chosen.lazy.map { UInt8(ascii: "0") &+ $0 })
    }

    /// Applies one key and says whether drawing goes on.
    public mutating func apply(_ key: Key) -> Outcome {
        switch key {
        case .up: move(rows: -1, columns: 0)
        case .down: move(rows: 1, columns: 0)
        case .left: move(rows: 0, columns: -1)
        case .right: move(rows: 0, columns: 1)
        case .select: choose(cursor)
        case .digit(let number):
            guard (1...9).contains(number) else { break }
            cursor = UInt8(number)
            choose(cursor)
        case .undo: undo()
        case .finish: return .finished
        case .cancel: return .cancelled
        }
        return .drawing
    }

    /// Zeroes the chosen dots and forgets them, so the pattern does not stay in memory after it was handed on.
    public mutating func wipe() {
        chosen.withUnsafeMutableBytes { secureZero($0) }
        chosen.removeAll(keepingCapacity: true)
    }

    /// Moves the cursor by whole rows and columns, stopping at the edges of the grid.
    private mutating func move(rows: Int, columns: Int) {
        let index = Int(cursor) - 1
        let row = min(max(index / 3 + rows, 0), 2)
        let column = min(max(index % 3 + columns, 0), 2)
        cursor = UInt8(row * 3 + column + 1)
    }

    /// Chooses `dot` by the finger rule (`Pattern.choose`).
    private mutating func choose(_ dot: UInt8) { Pattern.choose(dot, after: &chosen) }

    /// Takes back the last chosen dot (a picked-up midpoint is a dot like any other), zeroing its slot.
    private mutating func undo() {
        guard !chosen.isEmpty else { return }
        chosen[chosen.count - 1] = 0
        chosen.removeLast()
    }
}

// MARK: - The screen

extension PatternDrawing {
    /// The keys, as the last line of the screen says them.
    public static let help = "arrows/hjkl move · space/1-9 select · Enter done · Backspace undo · Esc cancel"

    /// The screen: the title, the grid with the cursor (and, with `showTrail`, the chosen dots and the lines
    /// between them), how many dots are chosen, the message if any, and the keys. Always the same number of lines,
    /// so a redraw covers the previous one; plain text (the terminal adds nothing but cursor movement).
    ///
    /// With `showTrail` false (phones' "make pattern visible" turned off) every dot is drawn unchosen and no line is
    /// drawn: only the cursor and the count show that anything happened.
    public func render(showTrail: Bool, title: String, message: String?) -> [String] {
        var canvas = Canvas()
        if showTrail {
            for (from, to) in zip(chosen, chosen.dropFirst()) {
                canvas.drawSegment(from: Self.position(of: from), to: Self.position(of: to))
            }
        }
        for dot in UInt8(1)...9 {
            canvas.put(showTrail && chosen.contains(dot) ? "●" : "○", at: Self.position(of: dot))
        }
        let (row, column) = Self.position(of: cursor)
        canvas.put("[", at: (row, column - 1))
        canvas.put("]", at: (row, column + 1))
        let count = chosen.count == 1 ? "1 dot" : "\(chosen.count) dots"
        return [title, ""] + canvas.lines.map { Self.indent + $0 } + ["", count, message ?? "", "", Self.help]
    }

    /// Where the grid starts on each line.
    static let indent = "    "
    /// Columns between neighbouring dots; with `rowStep` it makes the grid about square in a terminal's cells.
    static let columnStep = 8
    /// Rows between neighbouring dots.
    static let rowStep = 4

    /// The canvas cell of a dot's centre; column 0 is left free for the cursor's bracket.
    static func position(of dot: UInt8) -> (row: Int, column: Int) {
        let index = Int(dot) - 1
        return (index / 3 * rowStep, 1 + index % 3 * columnStep)
    }
}

/// The grid's characters, one per terminal cell, on which the trail is rasterised.
struct Canvas {
    /// Rows of cells: the three rows of dots and the rows between them.
    private(set) var cells: [[Character]]

    /// A blank canvas just large enough for the dots and the cursor's brackets.
    init() {
        let width = 2 * PatternDrawing.columnStep + 3
        let height = 2 * PatternDrawing.rowStep + 1
        cells = Array(repeating: Array(repeating: " ", count: width), count: height)
    }

    /// The rows as text, trailing blanks removed.
    var lines: [String] {
        cells.map { row in
            var text = String(row)
            while text.last == " " { text.removeLast() }
            return text
        }
    }

    /// Sets one cell.
    mutating func put(_ character: Character, at cell: (row: Int, column: Int)) {
        cells[cell.row][cell.column] = character
    }

    /// Draws the line between two dots' centres, leaving the dots' own cells alone: `─` and `│` for rows and
    /// columns, `╲` and `╱` for diagonals (one cell per row, as a terminal cell is about twice as tall as wide),
    /// `·` along any other move (a knight's move such as 1→6). A line crossing another makes `┼` or `╳`.
    mutating func drawSegment(from start: (row: Int, column: Int), to end: (row: Int, column: Int)) {
        let rows = end.row - start.row
        let columns = end.column - start.column
        if rows == 0 {
            for column in stride(from: start.column, through: end.column, by: columns.signum()) {
                mark("─", at: (start.row, column))
            }
        } else if columns == 0 {
            for row in stride(from: start.row, through: end.row, by: rows.signum()) {
                mark("│", at: (row, start.column))
            }
        } else if abs(columns) * PatternDrawing.rowStep == abs(rows) * PatternDrawing.columnStep {
            let stroke: Character = rows.signum() == columns.signum() ? "╲" : "╱"
            for row in stride(from: start.row, through: end.row, by: rows.signum()) {
                mark(stroke, at: (row, start.column + (row - start.row) * columns / rows))
            }
        } else {
            // Steps of about two columns or one row, whichever the move has more of, rounded to the nearest cell.
            let steps = max(abs(rows), (abs(columns) + 1) / 2)
            for step in 1..<steps {
                let cell = (
                    row: rounded(start.row, rows, step, steps), column: rounded(start.column, columns, step, steps)
                )
                if !Self.isBesideDot(cell) { mark("·", at: cell) }
            }
        }
    }

    /// `origin + distance × step / steps`, rounded half away from the origin.
    private func rounded(_ origin: Int, _ distance: Int, _ step: Int, _ steps: Int) -> Int {
        let scaled = 2 * distance * step
        return origin + (scaled + steps * scaled.signum()) / (2 * steps)
    }

    /// Draws a stroke on a cell that is not a dot's, merging with a crossing stroke.
    private mutating func mark(_ stroke: Character, at cell: (row: Int, column: Int)) {
        guard !Self.isDot(cell) else { return }
        let current = cells[cell.row][cell.column]
        switch (current, stroke) {
        case ("─", "│"), ("│", "─"): cells[cell.row][cell.column] = "┼"
        case ("╲", "╱"), ("╱", "╲"): cells[cell.row][cell.column] = "╳"
        default: cells[cell.row][cell.column] = stroke
        }
    }

    /// Whether a cell is a dot's centre.
    private static func isDot(_ cell: (row: Int, column: Int)) -> Bool {
        cell.row % PatternDrawing.rowStep == 0 && (cell.column - 1) % PatternDrawing.columnStep == 0
    }

    /// Whether a cell is where the cursor's bracket goes beside a dot, which a dotted line leaves free.
    private static func isBesideDot(_ cell: (row: Int, column: Int)) -> Bool {
        isDot((cell.row, cell.column - 1)) || isDot((cell.row, cell.column + 1))
    }
}

// MARK: - Keys from a terminal

extension PatternDrawing.Key {
    /// The key a terminal's bytes stand for, or nil for keys that mean nothing here.
    ///
    /// Arrows come as `ESC [ A`…`D` (or `ESC O A`…`D` in application mode), `h j k l` move as in vi, space chooses,
    /// a digit 1–9 jumps and chooses, Enter (CR or LF) finishes, Backspace (DEL or ^H) undoes, and a lone ESC,
    /// Ctrl-C or Ctrl-D cancels. Telling a lone ESC from the start of an arrow's sequence takes timing, which is
    /// the terminal layer's: it passes the bytes that arrived together.
    public init?(terminalBytes bytes: [UInt8]) {
        if bytes.count == 3, bytes[0] == 0x1B, bytes[1] == UInt8(ascii: "[") || bytes[1] == UInt8(ascii: "O") {
            guard let arrow = Self.arrow(bytes[2]) else { return nil }
            self = arrow
            return
        }
        guard bytes.count == 1, let key = Self.single(bytes[0]) else { return nil }
        self = key
    }

    /// The arrow an escape sequence's final byte names.
    private static func arrow(_ final: UInt8) -> Self? {
        switch final {
        case UInt8(ascii: "A"): .up
        case UInt8(ascii: "B"): .down
        case UInt8(ascii: "C"): .right
        case UInt8(ascii: "D"): .left
        default: nil
        }
    }

    /// The key a single byte names.
    private static func single(_ byte: UInt8) -> Self? {
        switch byte {
        case UInt8(ascii: "k"), UInt8(ascii: "K"): .up
        case UInt8(ascii: "j"), UInt8(ascii: "J"): .down
        case UInt8(ascii: "h"), UInt8(ascii: "H"): .left
        case UInt8(ascii: "l"), UInt8(ascii: "L"): .right
        case UInt8(ascii: " "): .select
        case UInt8(ascii: "1")...UInt8(ascii: "9"): .digit(Int(byte - UInt8(ascii: "0")))
        case 0x0D, 0x0A: .finish
        case 0x7F, 0x08: .undo
        case 0x1B, 0x03, 0x04: .cancel
        default: nil
        }
    }
}
