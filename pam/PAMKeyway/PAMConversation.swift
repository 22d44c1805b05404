import CKeywayLibc
import CPAM
import KeywayCore
import KeywayPlatform

/// The person at the terminal or greeter, through the application's PAM conversation.
///
/// A prompt that offers a fallback says so in its own text ("press Enter for the passcode"), because some greeters
/// show only prompts; an empty reply to it chooses the fallback. No reply at all (end of input) is a cancel.
///
/// Under PAM_SILENT (which sudo always sets) no message is sent on its own, yet the person must still learn what
/// happened: messages wait, and lead the text of the next prompt ("Not recognized. 2 attempts left." above
/// "Pattern (dots 1-9): "); what is still waiting when the module gives up goes into its last word
/// (`ModuleCall.authenticate`). Instructions the person cannot go on without are shown at once, as before.
final class PAMConversation: Conversation {
    let handle: PAMHandle
    /// Messages held back by PAM_SILENT, oldest first.
    private(set) var held: [String] = []

    /// The terminal the module reads itself for a prompt that can be woken (`read-tty`), or nil.
    var terminal: DirectTerminal?

    /// True when the application asked for marked prompts (`KEYWAY_PROMPTS=marked` in the PAM environment): each
    /// prompt and each explaining message then starts with a mark that says what it asks (`PromptMark`).
    let marked: Bool

    init(_ handle: PAMHandle) {
        self.handle = handle
        marked = handle.environment(PromptMark.variable) == PromptMark.requested
    }

    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        if let wake = prompt.wake, let terminal {
            // Messages go through the host's conversation as usual; only the prompt is ours.
            for message in held { handle.show(Message(kind: .error, text: message, isInstruction: true)) }
            held = []
            let text = Prompt(wake.text, fallbackLabel: prompt.fallbackLabel).textWithFallback
            switch terminal.read(text, wake: wake.descriptor, deposit: wake.keepsTerminalSettings) {
            case .failure(let error): throw error
            case .success(.cancel): return .cancel
            case .success(.woken): return .secret(Secret(copying: [UInt8]()))
            case .success(.line(let secret)):
                if secret.isEmpty && prompt.fallbackLabel != nil { return .fallback }
                return .secret(secret)
            }
        }
        var text = (held + [prompt.textWithFallback]).joined(separator: "\n")
        held = []
        if marked { text = PromptMark(prompt).text + text }
        switch handle.prompt(text, echo: prompt.echo) {
        case .failure(let error): throw error
        case .success(nil): return .cancel
        case .success(let secret?):
            if secret.isEmpty && prompt.fallbackLabel != nil { return .fallback }
            return .secret(secret)
        }
    }

    /// Ctrl-C while nothing is asked: sudo blocks SIGINT while it authenticates, so the key leaves the signal
    /// pending, and the sensor's wait sees it here within its 100 ms poll. The module never takes the signal: the
    /// host gets it when it unblocks it, as after Ctrl-C at a prompt.
    var personHasStopped: Bool { keyway_interrupt_pending() != 0 }

    func tell(_ message: Message) {
        var message = message
        if let until = message.until, until > SystemClock().now() { message.text = ModuleCall.waitWords(until) }
        if marked, let factor = message.explains { message.text = PromptMark(explaining: factor).text + message.text }
        guard handle.silent && !message.isInstruction else { return handle.show(message) }
        held.append(message.text)
    }
}

/// The mark that starts a prompt when the application asked for marked prompts (pam_keyway(8), MARKED PROMPTS): a
/// graphical client learns what is asked without reading English. It is `RS "keyway" (US key=value)* RS`, where RS
/// is U+001E and US U+001F, and the prompt's usual text follows. The keys: `factor` (`gesture` for a pattern, so a
/// client draws the grid; `passcode`, `totp`…), `invitation` (what else the person may do meanwhile, "Touch the
/// sensor"), `fallback` (what an empty reply chooses, "Use passcode"), `wake` (a descriptor of this process that
/// becomes readable when an armed factor has something: a client that waits on it too answers an empty reply then,
/// as read-tty does), and `explains` on a message that shows how to type a factor's entry (the numbered grid). No
/// value holds RS, US or a line break. Any other application gets the text alone, as before.
struct PromptMark {
    /// The PAM environment variable an application sets, and its value.
    static let variable = "KEYWAY_PROMPTS"
    static let requested = "marked"

    private var fields: [(String, String)] = []

    init(_ prompt: Prompt) {
        if let factor = prompt.factor { fields.append(("factor", factor.rawValue)) }
        if let invitation = prompt.invitation { fields.append(("invitation", invitation)) }
        if let fallback = prompt.fallbackLabel { fields.append(("fallback", fallback)) }
        if let wake = prompt.wake { fields.append(("wake", "\(wake.descriptor)")) }
    }

    init(explaining factor: FactorKind) { fields = [("explains", factor.rawValue)] }

    /// The mark, to put before the text.
    var text: String {
        let separators: Set<Character> = ["\u{1E}", "\u{1F}", "\n", "\r"]
        let pairs = fields.map { "\($0.0)=" + String($0.1.filter { !separators.contains($0) }) }
        return "\u{1E}keyway" + pairs.map { "\u{1F}" + $0 }.joined() + "\u{1E}"
    }
}
