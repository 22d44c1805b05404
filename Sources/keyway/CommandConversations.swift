import Glibc
import KeywayBiometricSimulator
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayPlatform
import KeywayRuntime
import KeywayTools
import KeywayVault

/// Gives the same secret for both enrollment prompts (`enroll --stdin`).
final class RepeatingConversation: Conversation {
    /// Where a QR code goes instead of the terminal (`--qr-file`).
    private let qrFile: String?
    init(qrFile: String? = nil) { self.qrFile = qrFile }
    /// The line, once read: only when first asked, so what is shown before (a new secret) is on screen by then.
    private var line: Secret? = nil
    private var hasRead = false
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        if !hasRead {
            line = TerminalConversation.readLine(from: 0)
            hasRead = true
        }
        return line.map(Reply.secret) ?? .cancel
    }
    func tell(_ message: Message) { TerminalConversation.show(message, qrFile: qrFile) }
    var showsSecrets: Bool { TerminalConversation.showsSecrets }
}

/// `change --stdin`: the current secret, then the new one for both entries.
final class ChangeConversation: Conversation {
    private var current: Secret?
    private let new: Secret?
    init() {
        current = TerminalConversation.readLine(from: 0)
        new = TerminalConversation.readLine(from: 0)
    }
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        if let first = current {
            current = nil
            return .secret(first)
        }
        return new.map(Reply.secret) ?? .cancel
    }
    func tell(_ message: Message) { Keyway.printError(message.text) }
}
