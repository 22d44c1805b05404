// The 3×3 unlock pattern: parsing what a person typed, normalizing it the way a finger draws it,
// and enumerating the whole pattern space. See docs/ARCHITECTURE.md §1 ("The 3×3 pattern lock").
//
// Grid, in reading order:
//
//     1 2 3
//     4 5 6
//     7 8 9
//
// A straight move over an unvisited dot picks that dot up, because a finger dragged across the
// screen cannot skip it; a move over a visited dot, or a knight move, connects directly. Storing
// the normalized form means "1-3" and "1-2-3" are one secret, so they hash to the same bytes.

/// A validated, normalized unlock pattern: dots 1…9, none twice, midpoints picked up.
public struct Pattern: Sendable, Hashable, CustomStringConvertible {
    /// The normalized dots, so that equal drawings compare and hash equal.
    public let dots: [UInt8]

    /// Longest input `parse` reads; a bound keeps hostile input from costing time or memory.
    static let maximumInputBytes = 64

    /// Wraps dots that are already known to be valid and normalized (enumeration, symmetries).
    init(normalized dots: [UInt8]) {
        self.dots = dots
    }

    /// Builds from dot numbers with the same normalization and checks as `parse`, for callers holding numbers.
    public init(dots: [UInt8]) throws(PatternError) {
        // Character errors take precedence over structural ones, as in `parse`.
        for dot in dots where !Self.isDot(dot) {
            throw .invalidCharacter
        }
        self.dots = try Self.normalize(dots)
    }

    /// Dots joined by "-" for people; it shows the secret itself, so never log it.
    public var description: String {
        var text: [UInt8] = []
        text.reserveCapacity(dots.count * 2)
        for dot in dots {
            if !text.isEmpty {
                text.append(0x2D)  // "-"
            }
            text.append(0x30 &+ dot)  // "0" + dot
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes that are hashed: ASCII digits without separators, so every input format yields one hash.
    public var canonicalBytes: [UInt8] {
        dots.map { UInt8(ascii: "0") &+ $0 }
    }

    /// Parses typed input; a Result rather than throws because callers map each failure to a prompt.
    ///
    /// Accepts "1-2-3-6-9", "12369", "1 2 3 6 9", commas and tabs as separators (which may repeat),
    /// and ignores leading/trailing whitespace including a trailing "\n" or "\r\n". A line break inside
    /// the pattern is refused, since it means two lines were pasted. The minimum length is not applied
    /// here (that is `PatternRules`), so verification and enrollment share one parser.
    public static func parse<Bytes: Collection>(
        _ bytes: Bytes
    ) -> Result<Pattern, PatternError> where Bytes.Element == UInt8 {
        var entered: [UInt8] = []
        entered.reserveCapacity(16)
        var length = 0
        var sawInvalid = false
        // Set once a line break follows entered content: only trailing whitespace may come after it.
        var inTrailingLineEnd = false

        for byte in bytes {
            length += 1
            if length > maximumInputBytes {
                return .failure(.tooLong)
            }
            // Byte values as literals and plain comparisons: range patterns and UInt8(ascii:) are calls in
            // unoptimized builds, and tests parse every one of the 389,112 patterns.
            let digit = byte &- 0x30  // "0"
            if digit >= 1 && digit <= 9 {
                if inTrailingLineEnd {
                    sawInvalid = true
                } else {
                    entered.append(digit)
                }
            } else if byte == 0x2D || byte == 0x2C {  // "-" ","
                if inTrailingLineEnd {
                    sawInvalid = true
                }
            } else if byte == 0x20 || byte == 0x09 {  // " " "\t"
                continue
            } else if byte == 0x0A || byte == 0x0D {  // "\n" "\r"
                // Leading line breaks are whitespace; after content they must end the input.
                if !entered.isEmpty {
                    inTrailingLineEnd = true
                }
            } else {
                sawInvalid = true
            }
        }

        if sawInvalid {
            return .failure(.invalidCharacter)
        }
        do {
            return .success(Pattern(normalized: try normalize(entered)))
        } catch {
            return .failure(error)
        }
    }

    /// Calls body with every valid normalized pattern whose length is in lengths; tests and audits use it.
    ///
    /// A straight move over an unvisited dot is not a separate pattern: it is the pattern with the
    /// midpoint included, so it is produced once. Lengths outside 1…9 are ignored.
    public static func forEach(lengths: ClosedRange<Int>, _ body: (Pattern) -> Void) {
        let low = max(lengths.lowerBound, 1)
        let high = min(lengths.upperBound, 9)
        guard low <= high else {
            return
        }
        var path: [UInt8] = []
        path.reserveCapacity(9)
        var first: UInt8 = 1
        while first <= 9 {
            path.append(first)
            extend(&path, visited: bit(first), low: low, high: high, body)
            path.removeLast()
            first += 1
        }
    }

    /// Depth-first step of `forEach`: emits the current path if long enough, then tries each next dot.
    private static func extend(
        _ path: inout [UInt8], visited: UInt16, low: Int, high: Int, _ body: (Pattern) -> Void
    ) {
        if path.count >= low {
            body(Pattern(normalized: path))
        }
        guard path.count < high, let last = path.last else {
            return
        }
        // Plain loops and bit tests: tests enumerate all 389,112 patterns in unoptimized builds.
        var next: UInt8 = 1
        while next <= 9 {
            defer { next += 1 }
            if visited & bit(next) != 0 {
                continue
            }
            // A move over an unvisited dot would pick it up: that drawing is reached through the midpoint.
            if let middle = midpoint(last, next), visited & bit(middle) == 0 {
                continue
            }
            path.append(next)
            extend(&path, visited: visited | bit(next), low: low, high: high, body)
            path.removeLast()
        }
    }

    /// Applies the finger rule to dots already checked to be 1…9; shared by `parse` and `init(dots:)`.
    static func normalize(_ entered: [UInt8]) throws(PatternError) -> [UInt8] {
        guard !entered.isEmpty else {
            throw .empty
        }
        var result: [UInt8] = []
        result.reserveCapacity(9)
        var visited: UInt16 = 0
        for dot in entered {
            guard isDot(dot) else {
                throw .invalidCharacter
            }
            guard visited & bit(dot) == 0 else {
                throw .repeatedDot
            }
            if let last = result.last, let middle = midpoint(last, dot), visited & bit(middle) == 0 {
                result.append(middle)
                visited |= bit(middle)
            }
            result.append(dot)
            visited |= bit(dot)
        }
        return result
    }

    /// The finger rule for one more dot as a pattern is entered dot by dot (the terminal grid, a drawn grid): `dot`
    /// is added to `chosen` unless it is there already, after the unused dot a straight move from the last one
    /// passes over.
    public static func choose(_ dot: UInt8, after chosen: inout [UInt8]) {
        guard !chosen.contains(dot) else { return }
        if let last = chosen.last, let middle = midpoint(last, dot), !chosen.contains(middle) { chosen.append(middle) }
        chosen.append(dot)
    }

    /// The dot a straight move from a to b passes over, or nil for neighbours and knight moves.
    public static func midpoint(_ a: UInt8, _ b: UInt8) -> UInt8? {
        guard a != b, isDot(a), isDot(b) else {
            return nil
        }
        let first = Int(a) - 1
        let second = Int(b) - 1
        let rowSum = first / 3 + second / 3
        let columnSum = first % 3 + second % 3
        // Only when both coordinates differ by 0 or 2 does the segment cross the centre of a dot.
        guard rowSum % 2 == 0, columnSum % 2 == 0 else {
            return nil
        }
        return UInt8((rowSum / 2) * 3 + columnSum / 2 + 1)
    }

    /// Whether a number names a dot; a plain comparison because it runs for every dot enumerated.
    static func isDot(_ value: UInt8) -> Bool {
        value >= 1 && value <= 9
    }

    /// One bit per dot, so a visited set fits in a register; callers pass 1…9 (the mask keeps others harmless).
    private static func bit(_ dot: UInt8) -> UInt16 {
        1 &<< UInt16(dot & 15)
    }
}

/// Why an entry is not a valid pattern; messages carry no input so they are safe to show and to log.
public enum PatternError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Nothing but whitespace or separators was entered.
    case empty
    /// A byte other than 1…9, a separator or surrounding whitespace; the byte itself is not kept.
    case invalidCharacter
    /// A dot appears twice, possibly because a straight move already picked it up.
    case repeatedDot
    /// Fewer dots than the rules require; carries the rule's minimum, never the entry's length.
    case tooShort(minimum: Int)
    /// The input is longer than any pattern could be written, so it is refused before reading on.
    case tooLong
    /// The pattern is one of the common shapes refused at enrollment.
    case blocklisted

    /// Fixed wording shown to the person at the terminal; it never echoes what they typed.
    public var description: String {
        switch self {
        case .empty:
            "No pattern was entered."
        case .invalidCharacter:
            "Use the dot numbers 1 to 9 (for example 2-7-6-1)."
        case .repeatedDot:
            "A dot can be used only once."
        case .tooShort(let minimum):
            "Connect at least \(minimum) dots."
        case .tooLong:
            "That is longer than any pattern."
        case .blocklisted:
            "That pattern is too common; choose another."
        }
    }
}
