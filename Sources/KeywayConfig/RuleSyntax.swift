import KeywayCore

/// The `require =` expression language: factor names, `and`, `or`, `K of (…)`, `first of (…)`, parentheses, `factor*N`, and
/// other policies' names as terms. `and` binds tighter than `or`; both are n-ary, so `a or b or c` is one
/// fallback list, and `a or (b or c)` keeps its nesting.
enum RuleSyntax {
    /// The parsed expression, before names are resolved.
    indirect enum Node: Sendable {
        /// A factor or a policy name, with `*N` if given.
        case name(String, attempts: Int?, place: Place)
        /// `K of (…)`; `and` is `count == terms.count`, `or` is `count == 1`.
        case atLeast(Int, [Node], place: Place)
        /// `first of (…)`: the terms armed at once, the first success wins.
        case firstOf([Node], place: Place)
    }

    /// The deepest nesting and the most tokens one expression may have.
    static let maximumDepth = 16
    static let maximumTokens = 256

    struct Token {
        enum Kind: Equatable { case word(String), number(Int), open, close, comma, star, end }
        var kind: Kind
        var place: Place
    }

    /// Parses `text`, found at `place` (its first column).
    static func parse(_ text: String, at place: Place) -> Result<Node, Diagnostic> {
        var tokens: [Token] = []
        switch tokenize(text, at: place) {
        case .success(let list): tokens = list
        case .failure(let problem): return .failure(problem)
        }
        var parser = Parser(tokens: tokens)
        do throws(ParseError) {
            let node = try parser.expression(depth: 0)
            let next = parser.peek
            guard next.kind == .end else {
                if next.kind == .close {
                    throw ParseError(next.place.error("unbalanced ')': nothing opened it"))
                }
                throw ParseError(
                    next.place.error(
                        "expected 'and', 'or' or the end of the rule, found \(describe(next.kind))",
                        help: "join terms with 'and' or 'or'"))
            }
            return .success(node)
        } catch {
            return .failure(error.diagnostic)
        }
    }

    struct ParseError: Error {
        let diagnostic: Diagnostic; init(_ diagnostic: Diagnostic) { self.diagnostic = diagnostic }
    }

    static func describe(_ kind: Token.Kind) -> String {
        switch kind {
        case .word(let word): "'\(word)'"
        case .number(let number): "'\(number)'"
        case .open: "'('"
        case .close: "')'"
        case .comma: "','"
        case .star: "'*'"
        case .end: "the end of the rule"
        }
    }

    private static func tokenize(_ text: String, at place: Place) -> Result<[Token], Diagnostic> {
        let bytes = Array(text.utf8)
        var tokens: [Token] = []
        var index = 0
        func spot(_ start: Int, _ end: Int) -> Place {
            place.at(
                column: place.column + INI.scalars(bytes[..<start]), length: max(1, INI.scalars(bytes[start..<end])))
        }
        while index < bytes.count {
            let byte = bytes[index]
            if INI.isSpace(byte) {
                index += 1
                continue
            }
            let start = index
            let kind: Token.Kind
            switch byte {
            case UInt8(ascii: "("): kind = .open; index += 1
            case UInt8(ascii: ")"): kind = .close; index += 1
            case UInt8(ascii: ","): kind = .comma; index += 1
            case UInt8(ascii: "*"): kind = .star; index += 1
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 { index += 1 }
                guard index - start <= 4, let number = Int(String(decoding: bytes[start..<index], as: UTF8.self))
                else {
                    return .failure(spot(start, index).error("the number is too large"))
                }
                kind = .number(number)
            case UInt8(ascii: "a")...UInt8(ascii: "z"):
                while index < bytes.count, INI.isNameByte(bytes[index]), bytes[index] != UInt8(ascii: ".") {
                    index += 1
                }
                kind = .word(String(decoding: bytes[start..<index], as: UTF8.self))
            default:
                var end = index + 1
                while end < bytes.count && bytes[end] & 0xC0 == 0x80 { end += 1 }
                let shown = String(decoding: bytes[start..<end], as: UTF8.self)
                return .failure(
                    spot(start, end).error(
                        "unexpected '\(Diagnostic.printable(shown))' in the rule",
                        help:
                            "a rule is made of factor and policy names, 'and', 'or', 'K of (…)', 'first of (…)', '(', ')' "
                            + "and '*N'"))
            }
            tokens.append(Token(kind: kind, place: spot(start, index)))
            guard tokens.count <= maximumTokens else {
                return .failure(spot(start, index).error("the rule is longer than \(maximumTokens) terms"))
            }
        }
        tokens.append(
            Token(
                kind: .end,
                place: spot(bytes.count, bytes.count).at(column: place.column + INI.scalars(bytes[...]), length: 1)))
        return .success(tokens)
    }

    private struct Parser {
        let tokens: [Token]
        var index = 0

        var peek: Token { tokens[index] }

        mutating func take() -> Token {
            let token = tokens[index]
            if index < tokens.count - 1 { index += 1 }
            return token
        }

        /// expression := conjunction ('or' conjunction)*
        mutating func expression(depth: Int) throws(ParseError) -> Node {
            guard depth < RuleSyntax.maximumDepth else {
                throw ParseError(peek.place.error("the rule nests deeper than \(RuleSyntax.maximumDepth) levels"))
            }
            let first = peek.place
            var terms = [try conjunction(depth: depth)]
            while peek.kind == .word("or") {
                _ = take()
                terms.append(try conjunction(depth: depth))
            }
            return terms.count == 1 ? terms[0] : .atLeast(1, terms, place: first)
        }

        /// conjunction := term ('and' term)*
        mutating func conjunction(depth: Int) throws(ParseError) -> Node {
            let first = peek.place
            var terms = [try term(depth: depth)]
            while peek.kind == .word("and") {
                _ = take()
                terms.append(try term(depth: depth))
            }
            return terms.count == 1 ? terms[0] : .atLeast(terms.count, terms, place: first)
        }

        /// term := (NUMBER | 'first') 'of' '(' expression (',' expression)* ')' | '(' expression ')'
        ///       | NAME ('*' NUMBER)?
        mutating func term(depth: Int) throws(ParseError) -> Node {
            let token = take()
            if token.kind == .word("first") && peek.kind == .word("of") {
                _ = take()
                return .firstOf(try list(after: "first of", depth: depth), place: token.place)
            }
            switch token.kind {
            case .open:
                let inner = try expression(depth: depth + 1)
                try expect(.close, "')' to close the '(' at column \(token.place.column)")
                return inner
            case .number(let count):
                guard peek.kind == .word("of") else {
                    throw ParseError(
                        peek.place.error(
                            "expected 'of' after \(count), found \(RuleSyntax.describe(peek.kind))",
                            help: "write '\(count) of (a, b, c)'"))
                }
                _ = take()
                return .atLeast(count, try list(after: "\(count) of", depth: depth), place: token.place)
            case .word(let word) where word == "and" || word == "or" || word == "of":
                throw ParseError(token.place.error("expected a factor or policy name before '\(word)'"))
            case .word(let word):
                guard peek.kind == .star else { return .name(word, attempts: nil, place: token.place) }
                _ = take()
                let count = take()
                guard case .number(let attempts) = count.kind else {
                    throw ParseError(
                        count.place.error(
                            "expected a number of attempts after '\(word)*', found \(RuleSyntax.describe(count.kind))"))
                }
                return .name(
                    word, attempts: attempts,
                    place: token.place.at(
                        column: token.place.column, length: count.place.column + count.place.length - token.place.column
                    ))
            case .end:
                throw ParseError(token.place.error("the rule ends where a factor or policy name was expected"))
            default:
                throw ParseError(
                    token.place.error("expected a factor or policy name, found \(RuleSyntax.describe(token.kind))"))
            }
        }

        /// '(' expression (',' expression)* ')', after `words` ("2 of", "first of").
        mutating func list(after words: String, depth: Int) throws(ParseError) -> [Node] {
            let open = peek
            try expect(.open, "'(' after '\(words)'")
            var terms = [try expression(depth: depth + 1)]
            while peek.kind == .comma {
                _ = take()
                terms.append(try expression(depth: depth + 1))
            }
            try expect(.close, "',' or ')' to close the '(' at column \(open.place.column)")
            return terms
        }

        mutating func expect(_ kind: Token.Kind, _ what: String) throws(ParseError) {
            guard peek.kind == kind else {
                throw ParseError(peek.place.error("expected \(what), found \(RuleSyntax.describe(peek.kind))"))
            }
            _ = take()
        }
    }

    /// The tree parsing `text(of: rule, attempts: false)` gives, built from the rule itself (the built-ins, which the
    /// module compiles on every call, so it need not render and parse them): `or` and `and` are `atLeast`, and no
    /// name carries attempts.
    static func node(of rule: Policy.Rule, at place: Place) -> Node {
        switch rule {
        case .factor(let kind, _): .name(kind.rawValue, attempts: nil, place: place)
        case .atLeast(let count, let rules): .atLeast(count, rules.map { node(of: $0, at: place) }, place: place)
        case .firstOf(let rules): .firstOf(rules.map { node(of: $0, at: place) }, place: place)
        }
    }

    /// The rule as `require =` writes it; parsing the text gives the same rule. Every factor carries its attempts,
    /// so the text means the same whatever the settings.
    static func text(of rule: Policy.Rule, attempts written: Bool = true) -> String {
        func text(of rule: Policy.Rule) -> String { RuleSyntax.text(of: rule, attempts: written) }
        switch rule {
        case .factor(let kind, let attempts):
            return written ? "\(kind)*\(attempts)" : "\(kind)"
        case .atLeast(let count, let rules) where count == 1 && rules.count > 1:
            return rules.map { child in
                if case .atLeast(1, let inner) = child, inner.count > 1 { return "(\(text(of: child)))" }
                return text(of: child)
            }.joined(separator: " or ")
        case .atLeast(let count, let rules) where count == rules.count && count > 1:
            return rules.map { child in
                if case .atLeast(let innerCount, let inner) = child, inner.count > 1,
                    innerCount == 1 || innerCount == inner.count
                {
                    return "(\(text(of: child)))"
                }
                return text(of: child)
            }.joined(separator: " and ")
        case .atLeast(let count, let rules):
            return "\(count) of (\(rules.map { text(of: $0) }.joined(separator: ", ")))"
        case .firstOf(let rules):
            return "first of (\(rules.map { text(of: $0) }.joined(separator: ", ")))"
        }
    }
}
