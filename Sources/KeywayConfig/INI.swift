/// One configuration file's text and where it came from.
public struct ConfigSource: Sendable, Equatable {
    /// The path, as shown in diagnostics.
    public var path: String
    /// The bytes read.
    public var bytes: [UInt8]

    /// Creates a source.
    public init(path: String, bytes: [UInt8]) {
        self.path = path
        self.bytes = bytes
    }

    /// Creates a source from text (tests, examples).
    public init(path: String, text: String) { self.init(path: path, bytes: Array(text.utf8)) }

    /// The largest file read: a configuration is a few hundred lines, and a bound keeps a hostile one cheap.
    public static let maximumSize = 64 * 1024
}

/// A place in a file: a line, and a span of it in Unicode scalars.
struct Place: Sendable, Equatable {
    var file: String
    var line: Int
    var column: Int
    var length: Int
    var text: String

    /// The same line, another span.
    func at(column: Int, length: Int) -> Place {
        Place(file: file, line: line, column: column, length: length, text: text)
    }

    func error(_ message: String, help: String? = nil) -> Diagnostic {
        Diagnostic(
            .error, file: file, line: line, column: column, length: length, message, help: help, source: text)
    }

    func warning(_ message: String, help: String? = nil) -> Diagnostic {
        Diagnostic(
            .warning, file: file, line: line, column: column, length: length, message, help: help, source: text)
    }

    /// `file:line`, for origins.
    var origin: String { "\(file):\(line)" }
}

/// The INI layer: sections and `key = value` lines, systemd's shape, with `#` and `;` comments (also after a value,
/// following whitespace).
enum INI {
    /// A `[section]` line and the entries under it in one file.
    struct Section: Sendable {
        /// The words between the brackets.
        var words: [(text: String, place: Place)]
        var place: Place
        var entries: [Entry] = []
    }

    /// One `key = value` line.
    struct Entry: Sendable {
        var key: String
        var keyPlace: Place
        var value: String
        var valuePlace: Place
    }

    /// Parses one file; problems are appended to `diagnostics`, and lines with problems are left out.
    static func parse(_ source: ConfigSource, into diagnostics: inout [Diagnostic]) -> [Section] {
        var sections: [Section] = []
        guard source.bytes.count <= ConfigSource.maximumSize else {
            diagnostics.append(
                Diagnostic(
                    .error, file: source.path,
                    "the file is \(source.bytes.count) bytes; at most \(ConfigSource.maximumSize) are read"))
            return []
        }
        var lineNumber = 0
        for rawLine in source.bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            lineNumber += 1
            var bytes = Array(rawLine)
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                diagnostics.append(
                    Diagnostic(.error, file: source.path, line: lineNumber, "the line is not valid UTF-8"))
                continue
            }
            let line = Place(file: source.path, line: lineNumber, column: 0, length: 1, text: text)
            if let bad = bytes.firstIndex(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                let column = Self.column(of: bad, in: bytes)
                diagnostics.append(line.at(column: column, length: 1).error("a control character is not allowed here"))
                continue
            }
            let start = bytes.firstIndex { !isSpace($0) } ?? bytes.count
            guard start < bytes.count, bytes[start] != UInt8(ascii: "#"), bytes[start] != UInt8(ascii: ";") else {
                continue
            }
            let end = Self.endOfContent(bytes, from: start)
            if bytes[start] == UInt8(ascii: "[") {
                guard let section = header(bytes, start, end, line, &diagnostics) else { continue }
                sections.append(section)
                continue
            }
            guard let equals = bytes[start..<end].firstIndex(of: UInt8(ascii: "=")) else {
                diagnostics.append(
                    line.at(column: column(of: start, in: bytes), length: scalars(bytes[start..<end]))
                        .error("expected 'key = value', a [section] or a comment"))
                continue
            }
            var keyEnd = equals
            while keyEnd > start && isSpace(bytes[keyEnd - 1]) { keyEnd -= 1 }
            var valueStart = equals + 1
            while valueStart < end && isSpace(bytes[valueStart]) { valueStart += 1 }
            let key = String(decoding: bytes[start..<keyEnd], as: UTF8.self)
            let keyPlace = line.at(column: column(of: start, in: bytes), length: scalars(bytes[start..<keyEnd]))
            guard keyEnd > start else {
                diagnostics.append(keyPlace.at(column: keyPlace.column, length: 1).error("a key is missing before '='"))
                continue
            }
            guard key.utf8.allSatisfy(isNameByte) else {
                diagnostics.append(
                    keyPlace.error("'\(key)' is not a key: keys are lower-case letters, digits, '-' and '.'"))
                continue
            }
            let valuePlace = line.at(
                column: column(of: valueStart, in: bytes), length: max(1, scalars(bytes[valueStart..<end])))
            guard valueStart < end else {
                diagnostics.append(
                    line.at(column: column(of: equals, in: bytes), length: 1).error("'\(key)' has no value"))
                continue
            }
            guard var section = sections.popLast() else {
                diagnostics.append(
                    keyPlace.error(
                        "'\(key)' is outside any section",
                        help: "put it under a [section], such as [gesture] or [policy sudo]"))
                continue
            }
            section.entries.append(
                Entry(
                    key: key, keyPlace: keyPlace, value: String(decoding: bytes[valueStart..<end], as: UTF8.self),
                    valuePlace: valuePlace))
            sections.append(section)
        }
        return sections
    }

    /// `[words …]`, with only a comment after the bracket.
    private static func header(
        _ bytes: [UInt8], _ start: Int, _ end: Int, _ line: Place, _ diagnostics: inout [Diagnostic]
    ) -> Section? {
        let wholeLine = line.at(column: column(of: start, in: bytes), length: scalars(bytes[start..<end]))
        guard let close = bytes[start..<end].firstIndex(of: UInt8(ascii: "]")) else {
            diagnostics.append(wholeLine.error("the section name has no closing ']'"))
            return nil
        }
        guard close == end - 1 else {
            let extra = bytes[(close + 1)..<end].firstIndex { !isSpace($0) } ?? close + 1
            diagnostics.append(
                line.at(column: column(of: extra, in: bytes), length: scalars(bytes[extra..<end]))
                    .error("unexpected text after the section name"))
            return nil
        }
        var words: [(text: String, place: Place)] = []
        var index = start + 1
        while index < close {
            if isSpace(bytes[index]) {
                index += 1
                continue
            }
            var wordEnd = index
            while wordEnd < close && !isSpace(bytes[wordEnd]) { wordEnd += 1 }
            let word = String(decoding: bytes[index..<wordEnd], as: UTF8.self)
            words.append((word, line.at(column: column(of: index, in: bytes), length: scalars(bytes[index..<wordEnd]))))
            index = wordEnd
        }
        guard !words.isEmpty else {
            diagnostics.append(wholeLine.error("the section has no name"))
            return nil
        }
        return Section(words: words, place: wholeLine)
    }

    /// Where the content ends: before trailing spaces and before a `#` or `;` comment that follows whitespace.
    private static func endOfContent(_ bytes: [UInt8], from start: Int) -> Int {
        var end = bytes.count
        var index = start + 1
        while index < bytes.count {
            let byte = bytes[index]
            if (byte == UInt8(ascii: "#") || byte == UInt8(ascii: ";")) && isSpace(bytes[index - 1]) {
                end = index
                break
            }
            index += 1
        }
        while end > start && isSpace(bytes[end - 1]) { end -= 1 }
        return end
    }

    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// Letters, digits, '-', '_' and '.': what keys and names are made of.
    static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x2E
            || byte == 0x5F
    }

    /// The 1-based column of a byte offset, in Unicode scalars.
    static func column(of offset: Int, in bytes: [UInt8]) -> Int {
        scalars(bytes[..<min(offset, bytes.count)]) + 1
    }

    /// How many Unicode scalars the UTF-8 bytes hold.
    static func scalars(_ bytes: ArraySlice<UInt8>) -> Int { bytes.count { $0 & 0xC0 != 0x80 } }
}
