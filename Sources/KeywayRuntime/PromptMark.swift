public import KeywayCore

/// The mark that starts a prompt when the application asked for marked prompts (pam_keyway(8), MARKED PROMPTS): a
/// graphical client learns what is asked without reading English. It is `RS "keyway" (US key=value)* RS`, where RS
/// is U+001E and US U+001F, and the prompt's usual text follows. The keys are `Field`: `factor` (`gesture` for a
/// pattern, so a client draws the grid; `passcode`, `totp`…), `invitation` (what else the person may do meanwhile,
/// "Touch the sensor"), `fallback` (what an empty reply chooses, "Use passcode"), `wake` (a descriptor of the
/// module's process that becomes readable when an armed factor has something: a client that waits on it too answers
/// an empty reply then, as read-tty does), and `explains` on a message that shows how to type a factor's entry (the
/// numbered grid). No value holds RS, US or a line break. Any other application gets the text alone.
///
/// One type for both ends: the module writes it (`PAMConversation`), keyway-lock reads it (`read`).
public struct PromptMark: Equatable {
    /// The PAM environment variable an application sets, and its value.
    public static var variable: String { "KEYWAY_PROMPTS" }
    public static var requested: String { "marked" }

    /// The mark's keys, in the order they are written.
    public enum Field: String, CaseIterable {
        case factor, invitation, fallback, wake, explains
    }

    /// The factor asked for (its raw name).
    public var factor: String?
    /// What else the person may do while it is asked.
    public var invitation: String?
    /// What an empty reply chooses.
    public var fallback: String?
    /// The descriptor that becomes readable when an armed factor has something.
    public var wake: Int32?
    /// The factor a message explains.
    public var explains: String?

    /// An empty mark.
    public init() {}

    /// The mark of `prompt`.
    public init(_ prompt: Prompt) {
        factor = prompt.factor?.rawValue
        invitation = prompt.invitation
        fallback = prompt.fallbackLabel
        wake = prompt.wake?.descriptor
    }

    /// The mark of a message that explains how to type `factor`'s entry.
    public init(explaining factor: FactorKind) { explains = factor.rawValue }

    /// The value of `field`, as written.
    public subscript(field: Field) -> String? {
        get {
            switch field {
            case .factor: factor
            case .invitation: invitation
            case .fallback: fallback
            case .wake: wake.map { "\($0)" }
            case .explains: explains
            }
        }
        set {
            switch field {
            case .factor: factor = newValue
            case .invitation: invitation = newValue
            case .fallback: fallback = newValue
            case .wake: wake = newValue.flatMap { Int32($0) }
            case .explains: explains = newValue
            }
        }
    }

    private static var opening: [Unicode.Scalar] { ["\u{1E}", "k", "e", "y", "w", "a", "y"] }

    /// The mark, to put before the text.
    public var text: String {
        var out = String(String.UnicodeScalarView(Self.opening))
        for field in Field.allCases {
            guard let value = self[field] else { continue }
            out += "\u{1F}" + field.rawValue + "="
            for scalar in value.unicodeScalars where !["\u{1E}", "\u{1F}", "\n", "\r"].contains(scalar) {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\u{1E}"
    }

    /// A prompt or message as a client that asked for marks reads it: its mark (nil for text without one, as
    /// another module's prompt or the password's) and the text after it. Unknown keys are skipped.
    public static func read(_ raw: String) -> (mark: PromptMark?, text: String) {
        let scalars = Array(raw.unicodeScalars)
        let opening = Self.opening
        guard scalars.starts(with: opening), let end = scalars[opening.count...].firstIndex(of: "\u{1E}") else {
            return (nil, raw)
        }
        var mark = PromptMark()
        var field: [Unicode.Scalar] = []
        func take() {
            guard let equals = field.firstIndex(of: "=") else { return }
            let key = String(String.UnicodeScalarView(field[..<equals]))
            guard let known = Field(rawValue: key) else { return }
            mark[known] = String(String.UnicodeScalarView(field[(equals + 1)...]))
        }
        for scalar in scalars[opening.count..<end] {
            if scalar == "\u{1F}" {
                take()
                field = []
            } else {
                field.append(scalar)
            }
        }
        take()
        return (mark, String(String.UnicodeScalarView(scalars[(end + 1)...])))
    }
}
