// The built-in blocklist: the pattern shapes people choose most, refused at enrollment (docs/ARCHITECTURE.md §1).
//
// Where the shapes come from. Published studies of Android unlock patterns agree on what people draw:
// - M. Løge, "Tell Me Who You Are and I Will Tell You Your Unlock Pattern" (NTNU master's thesis, 2015;
//   PasswordsCon 2015): of ~4,000 patterns, 44% start in the top-left corner and 77% in a corner, many
//   use few dots, and roughly 10% are letters of the alphabet (often an initial: C, L, M, N, S, Z …).
// - S. Uellenbeck, M. Dürmuth, C. Wolf, T. Holz, "Quantifying the Security of Graphical Passwords: The
//   Case of Android Unlock Patterns" (ACM CCS 2013): strong preference for the top-left start, for
//   moves to neighbouring dots, for straight rows and columns, and for left-to-right, top-to-bottom
//   drawing, so a few simple shapes cover a large share of real patterns.
// - A. J. Aviv, D. Budzitowski, R. Kuber, "Is Bigger Better? Comparing User-Generated Passwords on 3x3
//   vs. 4x4 Grid Sizes for Android's Pattern Unlock" (ACSAC 2015), and Aviv et al.'s earlier smudge
//   and pattern-strength work: the same corner starts, letters and box/ring shapes recur.
// None of these papers publishes a frequency table this code could copy, so the base list below is a
// curated set of the shapes they describe, named so a reviewer can check each one. Every base shape is
// then expanded by the 8 symmetries of the square and by drawing direction, because a Z mirrored or
// drawn backwards is exactly as guessable as a Z. The result must stay well under 1% of the 389,112
// patterns (a test checks it), so enrollment never becomes a search for an allowed pattern.

/// The built-in list of the most common pattern shapes, refused at enrollment.
public struct PatternBlocklist: Sendable, Equatable {
    /// The blocked patterns, normalized; a set because enrollment asks only "is this one in it?". The built-in
    /// list is expanded on its first use, not when the rules are made: only enrollment reads it, and every
    /// authentication builds the gesture's rules (the expansion was a quarter of the module's instructions).
    private enum Contents: Sendable, Equatable {
        case builtIn
        case patterns(Set<Pattern>)
    }

    private let contents: Contents

    private var patterns: Set<Pattern> {
        switch contents {
        case .builtIn: Self.builtInPatterns
        case .patterns(let patterns): patterns
        }
    }

    /// The built-in list's patterns, expanded once (a `static let` is initialised on first use).
    private static let builtInPatterns = expanded(baseShapes)

    /// Common shapes, one orientation each, in the order of the grid 1 2 3 / 4 5 6 / 7 8 9.
    ///
    /// Each must be a valid normalized pattern of at least 4 dots (a test checks it); rotations,
    /// reflections and reversals are added by `expanded`, so listing them here would only repeat.
    static let baseShapes: [[UInt8]] = [
        [1, 2, 3, 5, 7, 8, 9],  // Z
        [1, 4, 7, 8, 9],  // L
        [3, 2, 1, 4, 7, 8, 9],  // C
        [1, 4, 7, 8, 9, 6, 3],  // U
        [7, 4, 1, 5, 9, 6, 3],  // N
        [7, 4, 1, 5, 3, 6, 9],  // M (its reflection is W)
        [3, 2, 1, 4, 5, 6, 9, 8, 7],  // S (its reflection is the digit 2)
        [1, 2, 3, 5, 8],  // T
        [1, 4, 8, 6, 3],  // V
        [1, 2, 3, 5, 7],  // the digit 7
        [1, 2, 3, 6, 9, 8, 7, 4],  // the square ring
        [1, 2, 3, 6, 9, 8, 7, 4, 5],  // the ring spiralling into the centre
        [1, 2, 3, 4, 5, 6, 7, 8, 9],  // every dot in reading (keypad) order
        [1, 2, 3, 4],  // the start of reading order
        [1, 2, 3, 6],  // top row plus a corner (its reflection is a short L)
        [1, 2, 3, 5],  // top row then the centre
        [1, 2, 3, 6, 5, 4],  // two rows as a snake
        [1, 2, 5, 4],  // the small square in a corner
        [2, 6, 8, 4],  // the diamond
        [1, 2, 3, 5, 7, 4],  // a triangle: top row, diagonal, back up
        [1, 5, 9, 8],  // the diagonal plus one step
        [1, 5, 9, 8, 7],  // the diagonal plus an edge
        [1, 5, 9, 8, 7, 4],  // the closed triangle
        [1, 2, 5, 8],  // a hook down the middle column
        [1, 2, 5, 8, 9],  // the middle column with both ends turned
    ]

    /// The shipped list, built once from `baseShapes` so its origin stays reviewable.
    public static let builtIn = PatternBlocklist(contents: .builtIn)

    /// No blocked patterns, for deployments that enforce their own list or none.
    public static let empty = PatternBlocklist(patterns: [])

    /// Wraps an already normalized set; internal so the shipped list cannot be altered from outside.
    init(patterns: Set<Pattern>) {
        self.contents = .patterns(patterns)
    }

    private init(contents: Contents) {
        self.contents = contents
    }

    /// Whether enrollment must refuse this pattern.
    public func contains(_ pattern: Pattern) -> Bool {
        patterns.contains(pattern)
    }

    /// How many patterns are blocked, so tests and audits can bound the list's cost to users.
    public var count: Int {
        patterns.count
    }

    /// Every shape under the 8 symmetries of the square, in both drawing directions, deduplicated.
    ///
    /// Invalid entries are skipped rather than trapped on, so a typo cannot crash a login; a test
    /// checks that every base shape is valid. A reversed drawing can be invalid (the forward move
    /// crossed a dot visited earlier, the backward one would pick it up again): it is skipped too.
    static func expanded(_ shapes: [[UInt8]]) -> Set<Pattern> {
        var result: Set<Pattern> = []
        for shape in shapes {
            for symmetry in 0..<8 {
                let image = shape.map { transform($0, by: symmetry) }
                for drawing in [image, Array(image.reversed())] {
                    // Normalization must not change the drawing, or it would block a different pattern.
                    if let pattern = try? Pattern(dots: drawing), pattern.dots == drawing {
                        result.insert(pattern)
                    }
                }
            }
        }
        return result
    }

    /// The image of one dot under one of the 8 symmetries of the square (0 is the identity).
    static func transform(_ dot: UInt8, by symmetry: Int) -> UInt8 {
        guard (1...9).contains(dot) else {
            return dot
        }
        let row = Int(dot - 1) / 3
        let column = Int(dot - 1) % 3
        let (newRow, newColumn): (Int, Int)
        switch symmetry {
        case 1: (newRow, newColumn) = (column, 2 - row)  // rotate a quarter turn clockwise
        case 2: (newRow, newColumn) = (2 - row, 2 - column)  // rotate a half turn
        case 3: (newRow, newColumn) = (2 - column, row)  // rotate a quarter turn anticlockwise
        case 4: (newRow, newColumn) = (row, 2 - column)  // mirror left-right
        case 5: (newRow, newColumn) = (2 - row, column)  // mirror top-bottom
        case 6: (newRow, newColumn) = (column, row)  // mirror in the 1-5-9 diagonal
        case 7: (newRow, newColumn) = (2 - column, 2 - row)  // mirror in the 3-5-7 diagonal
        default: (newRow, newColumn) = (row, column)
        }
        return UInt8(newRow * 3 + newColumn + 1)
    }
}
