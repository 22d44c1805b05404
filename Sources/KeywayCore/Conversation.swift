/// The only way a factor talks to a person: a terminal through PAM, a greeter, the CLI, or a test script.
///
/// Implementation requirements:
/// - `ask` returns `.secret` with exactly what was entered (no trailing newline), `.fallback` when the person
///   chose the fallback (a PAM conversation maps an empty reply to it when the prompt offers one), and `.cancel`
///   when the person cancelled (end of input, Ctrl-C, the greeter's cancel button).
/// - `ask` throws `.conversationFailure` when the channel itself failed, never for a wrong answer.
/// - `tell` must not block waiting for the person; a channel that cannot show messages drops them.
public protocol Conversation: AnyObject {
    /// Asks the person for a reply.
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply
    /// Shows the person a message that needs no reply.
    func tell(_ message: Message)

    /// True when the person has asked to stop although nothing is being asked (Ctrl-C while the sensor waits): a
    /// factor that waits without a prompt checks it, and ends with `.userCancel`. Cheap: it is polled.
    var personHasStopped: Bool { get }

    /// True when a message marked `isSecret` reaches only the person (a terminal), never a file or a log that
    /// stands in for one: a factor that must show a new secret asks this before it makes one.
    var showsSecrets: Bool { get }
}

extension Conversation {
    /// Most conversations learn of a stop only through their prompts.
    public var personHasStopped: Bool { false }

    /// Unless a conversation knows where its messages go, a secret is not shown through it.
    public var showsSecrets: Bool { false }
}

/// A request for input.
public struct Prompt: Sendable, Equatable {
    /// The text shown, e.g. "Pattern: ".
    public var text: String
    /// Whether the reply is echoed (never for secrets).
    public var echo: Bool
    /// The fallback offered with this prompt, e.g. "Use passcode", or nil if none.
    public var fallbackLabel: String?
    /// Something else that may end the prompt (a sensor armed while the prompt waits, `first of`), or nil.
    public var wake: Wake?
    /// The factor whose entry the reply is (`.gesture` for a pattern), or nil for other questions. A conversation
    /// that can show more than a line of text uses it (the lock screen draws the grid for `.gesture`;
    /// pam_keyway(8), MARKED PROMPTS).
    public var factor: FactorKind?
    /// What else the person may do while this prompt waits ("Touch the sensor"), or nil.
    public var invitation: String?

    /// What else may end a prompt: a conversation able to wait on the person and on `descriptor` together (the
    /// module reading the terminal itself, `read-tty`) shows `text` instead and, when the descriptor becomes readable,
    /// ends the prompt as an empty reply, as if the person had pressed Enter. Any other conversation ignores it.
    public struct Wake: Sendable, Equatable {
        /// Becomes readable when something happened at the armed factor.
        public var descriptor: Int32
        /// The prompt's text when no Enter is needed ("Touch the sensor, or type your pattern: ").
        public var text: String
        /// True when the descriptor's other end keeps a terminal's settings deposited with it and restores them if
        /// this process goes first (`ArmedFactor.keepsTerminalSettings`).
        public var keepsTerminalSettings: Bool

        /// Creates a wake.
        public init(descriptor: Int32, text: String, keepsTerminalSettings: Bool = false) {
            self.descriptor = descriptor
            self.text = text
            self.keepsTerminalSettings = keepsTerminalSettings
        }
    }

    /// The text for a channel that has only a line to type on (a terminal, a prompt-only greeter): the fallback,
    /// if any, is offered as an empty reply. "Pattern (dots 1-9): " becomes
    /// "Pattern (dots 1-9; Enter: use passcode): ", "Passcode: " becomes "Passcode (Enter: use passcode): ".
    public var textWithFallback: String {
        guard let fallback = fallbackLabel else { return text }
        let offer = "Enter: \(fallback.lowercased())"
        let bare = text.hasSuffix(": ") ? String(text.dropLast(2)) : text
        if bare.hasSuffix(")") { return bare.dropLast() + "; \(offer)): " }
        return bare + " (\(offer)): "
    }

    /// Creates a prompt; secrets are asked with `echo: false`.
    public init(
        _ text: String, echo: Bool = false, fallbackLabel: String? = nil, wake: Wake? = nil, factor: FactorKind? = nil,
        invitation: String? = nil
    ) {
        self.text = text
        self.echo = echo
        self.fallbackLabel = fallbackLabel
        self.wake = wake
        self.factor = factor
        self.invitation = invitation
    }
}

/// What the person answered.
public enum Reply: Sendable, Equatable {
    /// The entered text.
    case secret(Secret)
    /// The person chose the offered fallback.
    case fallback
    /// The person cancelled.
    case cancel
}

/// A message shown without waiting for a reply.
public struct Message: Sendable, Equatable, CustomStringConvertible {
    /// Informational (PAM_TEXT_INFO) or an error (PAM_ERROR_MSG).
    public enum Kind: Sendable, Equatable { case info, error }

    /// How the message is shown.
    public var kind: Kind
    /// The text.
    public var text: String
    /// True when the person cannot go on without it ("Place your finger on the sensor."): shown even when the
    /// caller asked for silence (PAM_SILENT, which sudo always sets), as pam_fprintd does.
    public var isInstruction = false
    /// True when the text should also be drawn as a QR code (`scannable`).
    public var isScannable = false
    /// True when the text is a secret (a new TOTP key): shown only where `Conversation.showsSecrets` holds.
    public var isSecret = false
    /// The factor whose typed entry this message explains (the numbered grid before the pattern's prompt), or nil:
    /// a conversation that lets the person draw that factor's entry need not show it.
    public var explains: FactorKind?
    /// When the lock this message announces ends, or nil: a conversation that knows the time says how long is left
    /// ("try again after 14:02 (in 30 seconds)") instead of the text's "later".
    public var until: Timestamp?

    /// A message of `kind`; `isInstruction` makes it one the person cannot go on without.
    public init(kind: Kind, text: String, isInstruction: Bool = false) {
        self.kind = kind
        self.text = text
        self.isInstruction = isInstruction
    }

    /// An informational message.
    public static func info(_ text: String) -> Message { Message(kind: .info, text: text) }
    /// An error message.
    public static func error(_ text: String) -> Message { Message(kind: .error, text: text) }
    /// How to type `factor`'s entry (a preamble), shown before its first prompt.
    public static func explaining(_ factor: FactorKind, _ text: String) -> Message {
        var message = Message(kind: .info, text: text)
        message.explains = factor
        return message
    }
    /// An instruction the person must see to proceed.
    public static func instruction(_ text: String) -> Message { Message(kind: .info, text: text, isInstruction: true) }
    /// A text to be shown as a scannable (QR) code as well, where the conversation can draw one (`keyway` on a
    /// terminal does; the PAM module shows the text): an `otpauth://` URI an authenticator app reads.
    /// It carries a secret, so it is a `secret` message too.
    public static func scannable(_ text: String) -> Message {
        var message = secret(text)
        message.isScannable = true
        return message
    }
    /// A text that holds a secret the person must copy (a new TOTP key): never written where others may read it.
    public static func secret(_ text: String) -> Message {
        var message = Message(kind: .info, text: text)
        message.isSecret = true
        return message
    }

    public var description: String { "\(kind == .info ? "info" : "error"): \(text)" }
}
