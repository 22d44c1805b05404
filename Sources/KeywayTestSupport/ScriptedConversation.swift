public import KeywayCore
import Synchronization

/// A `Conversation` that answers prompts from a script and records everything said, for deterministic tests.
///
/// Running out of script answers `.cancel`, so a test that asks more than it planned fails visibly.
public final class ScriptedConversation: Conversation, Sendable {
    /// One scripted answer.
    public enum Answer: Sendable, Equatable {
        /// Type this text.
        case type(String)
        /// Choose the fallback.
        case fallback
        /// Cancel.
        case cancel
        /// The channel breaks (`.conversationFailure`).
        case channelFailure
    }

    /// What the person saw, in order.
    public enum Event: Sendable, Equatable {
        /// A prompt was shown.
        case asked(Prompt)
        /// A message was shown.
        case told(Message)
    }

    private struct State {
        var answers: [Answer]
        var events: [Event] = []
        var onAsk: (@Sendable (Int) -> Void)?
    }

    private let state: Mutex<State>

    /// Creates a conversation that gives `answers` in order.
    public init(_ answers: [Answer] = []) { state = Mutex(State(answers: answers)) }

    /// Creates a conversation that types each string in order.
    public convenience init(typing lines: String...) { self.init(lines.map(Answer.type)) }

    /// Calls `action` with the prompt number (from 1) each time a prompt is shown, before answering.
    /// Lets a test invalidate a context in the middle of an evaluation.
    public func onAsk(_ action: @escaping @Sendable (Int) -> Void) { state.withLock { $0.onAsk = action } }

    /// A script stands for a person at a terminal.
    public var showsSecrets: Bool { true }

    /// Everything shown so far.
    public var events: [Event] { state.withLock { $0.events } }

    /// The prompts shown so far.
    public var prompts: [Prompt] {
        events.compactMap { if case .asked(let prompt) = $0 { prompt } else { nil } }
    }

    /// The messages shown so far.
    public var messages: [Message] {
        events.compactMap { if case .told(let message) = $0 { message } else { nil } }
    }

    /// Script answers not yet used.
    public var remainingAnswers: Int { state.withLock { $0.answers.count } }

    public func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        let (answer, hook, number) = state.withLock { state in
            state.events.append(.asked(prompt))
            let answer = state.answers.isEmpty ? Answer.cancel : state.answers.removeFirst()
            return (answer, state.onAsk, state.events.count { if case .asked = $0 { true } else { false } })
        }
        hook?(number)
        switch answer {
        case .type(let text): return .secret(Secret(copying: Array(text.utf8)))
        case .fallback: return .fallback
        case .cancel: return .cancel
        case .channelFailure: throw AuthenticationError(.conversationFailure, "scripted channel failure")
        }
    }

    public func tell(_ message: Message) { state.withLock { $0.events.append(.told(message)) } }
}
