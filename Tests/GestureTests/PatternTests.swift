// Tests of the 3×3 pattern model, its enrollment rules and the built-in blocklist (docs/ARCHITECTURE.md §1).

import Testing

@testable import KeywayGesture

// MARK: - Helpers

/// Parses a string the way the terminal hands it over: as UTF-8 bytes.
private func parse(_ text: String) -> Result<Pattern, PatternError> {
    Pattern.parse(text.utf8)
}

/// The normalized dots of an input, or the error, so table rows can state either.
private func outcome(_ text: String) -> Result<[UInt8], PatternError> {
    parse(text).map(\.dots)
}

/// A pattern the test knows to be valid; records an issue (instead of trapping) when it is not.
private func pattern(_ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Pattern? {
    switch parse(text) {
    case .success(let pattern):
        return pattern
    case .failure(let error):
        Issue.record("\(text) did not parse: \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

/// A small deterministic generator (SplitMix64) so the robustness test is reproducible.
private struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}

// MARK: - Enumeration

@Suite("Pattern enumeration")
struct PatternEnumerationTests {
    @Test("There are 389,112 patterns of 4…9 dots, with the known count per length")
    func countsPerLength() {
        var perLength = [Int](repeating: 0, count: 10)
        var total = 0
        Pattern.forEach(lengths: 4...9) { pattern in
            total += 1
            if (4...9).contains(pattern.dots.count) {
                perLength[pattern.dots.count] += 1
            } else {
                perLength[0] += 1
            }
        }
        #expect(total == 389_112)
        #expect(perLength[0] == 0, "a pattern outside the requested lengths was produced")
        #expect(Array(perLength[4...9]) == [1_624, 7_152, 26_016, 72_912, 140_704, 140_704])
    }

    @Test("The lengths argument selects lengths, short ones included and impossible ones empty")
    func lengthsArgument() {
        var short = [Int](repeating: 0, count: 4)
        Pattern.forEach(lengths: 1...3) { short[min($0.dots.count, 3)] += 1 }
        // 9 single dots, 56 two-dot moves (72 ordered pairs less 16 that cross an unvisited dot), 320 of 3.
        #expect(Array(short[1...3]) == [9, 56, 320])

        var nothing = 0
        Pattern.forEach(lengths: 10...20) { _ in nothing += 1 }
        Pattern.forEach(lengths: -3...0) { _ in nothing += 1 }
        #expect(nothing == 0)
    }

    @Test("Every enumerated pattern is distinct, normalized, and round-trips through parse(description)")
    func distinctAndRoundTrips() {
        var seen = Set<Pattern>()
        seen.reserveCapacity(389_112)
        var duplicates = 0
        var notRoundTripped = 0
        Pattern.forEach(lengths: 4...9) { pattern in
            if !seen.insert(pattern).inserted {
                duplicates += 1
            }
            // parse normalizes, so getting the same dots back also proves the pattern was normalized.
            if Pattern.parse(pattern.description.utf8) != .success(pattern) {
                notRoundTripped += 1
            }
        }
        #expect(seen.count == 389_112)
        #expect(duplicates == 0)
        #expect(notRoundTripped == 0)
    }
}

// MARK: - Parsing

/// One row of the parse table: an input and the normalized dots or the error it must give.
struct PatternParseCase: Sendable, CustomTestStringConvertible {
    let input: String
    let expected: Result<[UInt8], PatternError>
    let why: String

    init(_ input: String, _ expected: [UInt8], _ why: String) {
        self.input = input
        self.expected = .success(expected)
        self.why = why
    }

    init(_ input: String, _ error: PatternError, _ why: String) {
        self.input = input
        self.expected = .failure(error)
        self.why = why
    }

    var testDescription: String {
        "\(why): \(String(reflecting: input))"
    }
}

@Suite("Pattern parsing")
struct PatternParsingTests {
    static let cases: [PatternParseCase] = [
        // Input formats.
        PatternParseCase("1-2-3-6-9", [1, 2, 3, 6, 9], "dashes"),
        PatternParseCase("12369", [1, 2, 3, 6, 9], "digits only"),
        PatternParseCase("1 2 3 6 9", [1, 2, 3, 6, 9], "spaces"),
        PatternParseCase("1,2,3,6,9", [1, 2, 3, 6, 9], "commas"),
        PatternParseCase("1\t2\t3\t6\t9", [1, 2, 3, 6, 9], "tabs"),
        PatternParseCase("  1-2-3-6-9 \t", [1, 2, 3, 6, 9], "surrounding whitespace"),
        PatternParseCase("1-2-3-6-9\n", [1, 2, 3, 6, 9], "trailing newline"),
        PatternParseCase("1-2-3-6-9\r\n", [1, 2, 3, 6, 9], "trailing CRLF"),
        PatternParseCase("1 2, 3-6\n", [1, 2, 3, 6], "mixed separators and a newline"),
        PatternParseCase("1\n2", .invalidCharacter, "a line break inside the pattern"),
        // Straight moves over an unvisited dot pick it up.
        PatternParseCase("1-3", [1, 2, 3], "top row"),
        PatternParseCase("2-1-3", [2, 1, 3], "over a visited dot the move is direct"),
        PatternParseCase("1-9", [1, 5, 9], "main diagonal"),
        PatternParseCase("3-7", [3, 5, 7], "anti-diagonal"),
        PatternParseCase("7-3", [7, 5, 3], "anti-diagonal upwards"),
        PatternParseCase("4-6", [4, 5, 6], "middle row"),
        PatternParseCase("1-7", [1, 4, 7], "left column"),
        PatternParseCase("2-8", [2, 5, 8], "middle column"),
        PatternParseCase("3-9", [3, 6, 9], "right column"),
        PatternParseCase("9-1", [9, 5, 1], "diagonal backwards"),
        PatternParseCase("1-3-9-7", [1, 2, 3, 6, 9, 8, 7], "three long moves"),
        PatternParseCase("5-1-9", [5, 1, 9], "over the visited centre"),
        // Knight moves and neighbours are direct.
        PatternParseCase("1-6", [1, 6], "knight move"),
        PatternParseCase("1-8", [1, 8], "knight move"),
        PatternParseCase("1-5", [1, 5], "diagonal neighbour"),
        // Errors.
        PatternParseCase("1-3-2", .repeatedDot, "2 was picked up by 1-3"),
        PatternParseCase("1-8-9-1", .repeatedDot, "back to a visited dot across an unvisited one"),
        PatternParseCase("1-1-2-3", .repeatedDot, "repeated dot"),
        PatternParseCase("1-2-3-4-5-6-7-8-9-1", .repeatedDot, "a tenth dot"),
        PatternParseCase("1-2-a", .invalidCharacter, "a letter"),
        PatternParseCase("0-1-2-3", .invalidCharacter, "zero is not a dot"),
        PatternParseCase("1-2-3-\u{E9}", .invalidCharacter, "a non-ASCII character"),
        PatternParseCase("1;2;3;4", .invalidCharacter, "an unsupported separator"),
        PatternParseCase("", .empty, "nothing"),
        PatternParseCase("  \n", .empty, "only whitespace"),
        PatternParseCase("\r\n", .empty, "only a line end"),
        PatternParseCase(String(repeating: "1", count: 100), .tooLong, "100 bytes"),
        PatternParseCase(String(repeating: "x", count: 65), .tooLong, "65 bytes, refused before being read"),
        PatternParseCase(String(repeating: " ", count: 60) + "1234", [1, 2, 3, 4], "64 bytes is still read"),
    ]

    @Test("Parse table", arguments: cases)
    func parseTable(_ row: PatternParseCase) {
        #expect(outcome(row.input) == row.expected)
    }

    @Test("init(dots:) normalizes and checks like parse")
    func initFromDots() throws {
        #expect(try Pattern(dots: [1, 3]).dots == [1, 2, 3])
        #expect(try Pattern(dots: [7, 3, 1]).dots == [7, 5, 3, 2, 1])
        #expect(throws: PatternError.empty) { try Pattern(dots: []) }
        #expect(throws: PatternError.invalidCharacter) { try Pattern(dots: [0, 1, 2, 3]) }
        #expect(throws: PatternError.invalidCharacter) { try Pattern(dots: [1, 1, 10]) }
        #expect(throws: PatternError.repeatedDot) { try Pattern(dots: [1, 3, 2]) }
        #expect(throws: PatternError.repeatedDot) { try Pattern(dots: [UInt8](repeating: 5, count: 1_000)) }
    }

    @Test("canonicalBytes are the normalized dots as ASCII digits, whatever the input format")
    func canonicalBytes() throws {
        for input in ["1-2-3-6-9", "12369", " 1, 2 3\t6-9\r\n"] {
            #expect(try parse(input).get().canonicalBytes == Array("12369".utf8))
        }
        #expect(try parse("1-9").get().canonicalBytes == Array("159".utf8))
        #expect(try parse("7-3-1").get().canonicalBytes == Array("75321".utf8))
        #expect(try parse("7-3-1").get().description == "7-5-3-2-1")
    }

    @Test("Any bytes give a result, never a crash, and a success is always a valid pattern")
    func robustAgainstArbitraryBytes() {
        var inputs: [[UInt8]] = (0...255).map { [UInt8($0)] }
        for first in 0...255 {
            for second in [0, 10, 13, 32, 44, 45, 48, 49, 53, 57, 58, 127, 128, 255] {
                inputs.append([UInt8(first), UInt8(second)])
            }
        }
        // Mostly pattern-like bytes, so long, deep and almost-valid inputs are covered too.
        let alphabet = Array("123456789123456789 -,\t\r\n0a\u{7F}".utf8) + [0x00, 0xC3, 0xFF]
        var generator = SplitMix64(state: 0x4B65_7977_6179)
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...80, using: &generator)
            inputs.append((0..<length).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
        }

        var invalidSuccesses = 0
        var successes = 0
        for input in inputs {
            switch Pattern.parse(input) {
            case .success(let pattern):
                successes += 1
                let valid = (try? Pattern(dots: pattern.dots)) == pattern && (1...9).contains(pattern.dots.count)
                if !valid || input.count > Pattern.maximumInputBytes {
                    invalidSuccesses += 1
                }
            case .failure:
                break
            }
        }
        #expect(invalidSuccesses == 0)
        #expect(successes > 0, "the generator should also produce some valid patterns")
    }
}

// MARK: - Error messages

@Suite("Pattern error messages")
struct PatternErrorMessageTests {
    /// Bad inputs whose digits differ from the "1-2-3-6-9" example in the fixed wording, plus a few that share it.
    static let badInputs = [
        "1-1-2-3", "7-7-8-4", "8-5-x", "0-4-8", "9-4-4-2", "4-8-3-8", "1-2-a", "5-9-5",
        "3-7-3", "6?9", "2-8-2-8", "98765-9", "1-2-3-6-9-1", String(repeating: "7-4", count: 30),
    ]

    @Test("Each error has fixed wording")
    func fixedWording() {
        #expect(PatternError.empty.description == "No pattern was entered.")
        #expect(PatternError.invalidCharacter.description == "Use the dot numbers 1 to 9 (for example 2-7-6-1).")
        // The hint's example must itself be a pattern one may enroll (it used to be refused as too common).
        guard case .success(let example) = Pattern.parse(Array("2-7-6-1".utf8)) else {
            Issue.record("the hint's example does not parse")
            return
        }
        #expect(PatternRules.default.violation(of: example) == nil)
        #expect(PatternError.repeatedDot.description == "A dot can be used only once.")
        #expect(PatternError.tooShort(minimum: 4).description == "Connect at least 4 dots.")
        #expect(PatternError.tooShort(minimum: 6).description == "Connect at least 6 dots.")
        #expect(PatternError.tooLong.description == "That is longer than any pattern.")
        #expect(PatternError.blocklisted.description == "That pattern is too common; choose another.")
    }

    @Test("A message never echoes the input", arguments: badInputs)
    func noEcho(_ input: String) throws {
        let error = try #require(parse(input).failureValue)
        let message = error.description
        let digits = String(input.filter { ("1"..."9").contains($0) })
        let trimmed = input.filter { !$0.isWhitespace }

        // The message depends only on the case: the same case from another input reads the same.
        let reference: PatternError? =
            switch error {
            case .empty: parse("").failureValue
            case .invalidCharacter: parse("x").failureValue
            case .repeatedDot: parse("5-5").failureValue
            case .tooLong: parse(String(repeating: "-", count: 65)).failureValue
            case .tooShort, .blocklisted: nil
            }
        #expect(reference?.description == message)

        if digits.count >= 2 {
            #expect(!message.contains(digits))
        }
        if !trimmed.isEmpty {
            #expect(!message.contains(trimmed))
        }
        // Only the invalid-character hint may show digits, and only its fixed example.
        let messageDigits = message.filter(\.isNumber)
        if error == .invalidCharacter {
            #expect(messageDigits == "192761")
        } else {
            #expect(messageDigits.isEmpty)
        }
    }
}

extension Result {
    /// The error of a failure, so tests can `#require` it.
    fileprivate var failureValue: Failure? {
        if case .failure(let error) = self {
            return error
        }
        return nil
    }
}

// MARK: - Rules

@Suite("Pattern rules")
struct PatternRulesTests {
    @Test("By default at least 4 dots are required")
    func defaultMinimum() {
        #expect(PatternRules.default.minimumDots == 4)
        guard let three = pattern("1-2-3"), let four = pattern("1-2-3-6") else {
            return
        }
        #expect(PatternRules.default.violation(of: three) == .tooShort(minimum: 4))
        // 1-2-3-6 is long enough; only the blocklist refuses it.
        #expect(PatternRules(blocklist: .empty).violation(of: four) == nil)
        #expect(PatternRules.default.violation(of: four) == .blocklisted)
    }

    @Test("A raised minimum refuses shorter patterns")
    func raisedMinimum() {
        let rules = PatternRules(minimumDots: 6)
        guard let five = pattern("4-3-8-1-6"), let six = pattern("4-3-8-1-6-7") else {
            return
        }
        #expect(rules.violation(of: five) == .tooShort(minimum: 6))
        #expect(rules.violation(of: six) == nil)
        #expect(PatternRules(minimumDots: 9).violation(of: six) == .tooShort(minimum: 9))
    }

    @Test(
        "The minimum can never go below 4 nor above 9",
        arguments: [
            (Int.min, 4), (-1, 4), (0, 4), (1, 4), (3, 4), (4, 4), (5, 5), (9, 9), (10, 9), (Int.max, 9),
        ])
    func minimumIsClamped(requested: Int, effective: Int) {
        #expect(PatternRules(minimumDots: requested).minimumDots == effective)
        var rules = PatternRules.default
        rules.minimumDots = requested
        #expect(rules.minimumDots == effective)
        if let three = pattern("1-5-9") {
            #expect(rules.violation(of: three) == .tooShort(minimum: effective))
        }
    }

    @Test(
        "Common shapes are refused",
        arguments: [
            "1-2-3-5-7-8-9",  // Z
            "1-4-7-8-9",  // L
            "1-2-3-6-9-8-7-4",  // the square ring
            "3-6-9-5-1-4-7",  // Z turned a quarter clockwise
            "9-8-7-4-1",  // L drawn backwards
            "3-2-1-5-9-8-7",  // Z mirrored
            "7-8-9-5-1-2-3",  // Z upside down
            "1-2-3-6-9",  // L mirrored in the diagonal
            "3-2-1-4-7-8-9",  // C
            "1-2-3-4-5-6-7-8-9",  // reading order
        ])
    func commonShapesRefused(_ input: String) {
        guard let shape = pattern(input) else {
            return
        }
        #expect(PatternRules.default.violation(of: shape) == .blocklisted)
        #expect(PatternRules(blocklist: .empty).violation(of: shape) == nil)
    }

    @Test(
        "Ordinary patterns are accepted",
        arguments: [
            "4-3-8-1-6", "2-9-4-3-8", "6-1-8-3-4-9", "5-1-6-7-2", "2-4-9-6-3-5-7", "8-1-6-7-2-9-4", "3-4-9-2-7",
        ])
    func ordinaryPatternsAccepted(_ input: String) {
        guard let ordinary = pattern(input) else {
            return
        }
        #expect(PatternRules.default.violation(of: ordinary) == nil)
    }
}

// MARK: - Blocklist

@Suite("Pattern blocklist")
struct PatternBlocklistTests {
    /// The 8 symmetries of the square as dot permutations, written out independently of the implementation.
    static let symmetries: [[UInt8]] = {
        let quarterTurn: [UInt8] = [3, 6, 9, 2, 5, 8, 1, 4, 7]  // where each dot 1…9 goes, clockwise
        let mirror: [UInt8] = [3, 2, 1, 6, 5, 4, 9, 8, 7]  // left-right
        func apply(_ map: [UInt8], _ dots: [UInt8]) -> [UInt8] { dots.map { map[Int($0) - 1] } }
        var result: [[UInt8]] = []
        var rotation: [UInt8] = Array(1...9)
        for _ in 0..<4 {
            result.append(rotation)
            result.append(apply(mirror, rotation))
            rotation = apply(quarterTurn, rotation)
        }
        return result
    }()

    @Test("Every base shape is a valid normalized pattern of at least 4 dots")
    func baseShapesAreValid() {
        #expect(PatternBlocklist.baseShapes.count >= 20)
        #expect(PatternBlocklist.baseShapes.count <= 30)
        for shape in PatternBlocklist.baseShapes {
            #expect(shape.count >= 4, "\(shape)")
            #expect((try? Pattern(dots: shape))?.dots == shape, "\(shape) is not valid and normalized")
        }
    }

    @Test("The built-in list holds every symmetry and reversal of every base shape")
    func expandedBySymmetryAndDirection() {
        #expect(Set(Self.symmetries).count == 8)
        let blocklist = PatternBlocklist.builtIn
        #expect(blocklist.count > PatternBlocklist.baseShapes.count)
        var missing: [[UInt8]] = []
        for shape in PatternBlocklist.baseShapes {
            for symmetry in Self.symmetries {
                let image = shape.map { symmetry[Int($0) - 1] }
                for drawing in [image, image.reversed()] {
                    // A reversal that is not a valid pattern cannot be drawn, so it cannot be blocked.
                    if let pattern = try? Pattern(dots: drawing), pattern.dots == drawing,
                        !blocklist.contains(pattern)
                    {
                        missing.append(drawing)
                    }
                }
            }
        }
        // Collected rather than expected one by one: a failure would otherwise print the whole list each time.
        #expect(missing.isEmpty)
    }

    @Test("Blocked entries are real patterns of 4…9 dots, and fewer than 1% of all patterns")
    func blocksLittle() {
        let blocklist = PatternBlocklist.builtIn
        var blocked = 0
        Pattern.forEach(lengths: 4...9) { pattern in
            if blocklist.contains(pattern) {
                blocked += 1
            }
        }
        // Equal counts mean every entry was met during enumeration, so none is malformed or too short.
        #expect(blocked == blocklist.count)
        #expect(blocked * 100 < 389_112)
    }

    @Test("The empty list blocks nothing")
    func emptyList() {
        #expect(PatternBlocklist.empty.count == 0)
        if let z = pattern("1-2-3-5-7-8-9") {
            #expect(!PatternBlocklist.empty.contains(z))
        }
        #expect(PatternBlocklist.empty != PatternBlocklist.builtIn)
    }
}
