/// A prompt or message from pam_keyway read as a client that asked for marks (pam_keyway(8), MARKED PROMPTS):
/// `RS "keyway" (US key=value)* RS text`, RS U+001E, US U+001F. Text without a mark (another module's prompt, the
/// password's) has no fields.
struct PromptMarkReader {
    /// The mark's fields (`factor`, `invitation`, `fallback`, `wake`, `explains`).
    var fields: [String: String] = [:]
    /// The text after the mark.
    var text: String

    init(_ raw: String) {
        let scalars = Array(raw.unicodeScalars)
        let opening: [Unicode.Scalar] = ["\u{1E}", "k", "e", "y", "w", "a", "y"]
        guard scalars.starts(with: opening),
            let end = scalars.dropFirst(opening.count).firstIndex(of: "\u{1E}")
        else {
            text = raw
            return
        }
        text = String(String.UnicodeScalarView(scalars[(end + 1)...]))
        let mark = String(String.UnicodeScalarView(scalars[opening.count..<end]))
        for field in mark.split(separator: "\u{1F}") {
            guard let equals = field.firstIndex(of: "=") else { continue }
            fields[String(field[..<equals])] = String(field[field.index(after: equals)...])
        }
    }

    /// The factor the prompt asks for, or that a message explains.
    var factor: String? { fields["factor"] }
}
