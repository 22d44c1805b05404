import CKeywayLibc
import CPAM
import KeywayCore
import KeywayPlatform
import KeywayRuntime

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
