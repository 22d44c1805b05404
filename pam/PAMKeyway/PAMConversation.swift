import CPAM
import KeywayCore

/// The person at the terminal or greeter, through the application's PAM conversation.
///
/// A prompt that offers a fallback says so in its own text ("press Enter for the passcode"), because some greeters
/// show only prompts; an empty reply to it chooses the fallback. No reply at all (end of input) is a cancel.
final class PAMConversation: Conversation {
    let handle: PAMHandle

    init(_ handle: PAMHandle) { self.handle = handle }

    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        let text = prompt.textWithFallback
        switch handle.prompt(text, echo: prompt.echo) {
        case .failure(let error): throw error
        case .success(nil): return .cancel
        case .success(let secret?):
            if secret.isEmpty && prompt.fallbackLabel != nil { return .fallback }
            return .secret(secret)
        }
    }

    func tell(_ message: Message) { handle.show(message) }
}
