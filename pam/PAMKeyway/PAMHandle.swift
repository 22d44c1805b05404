import CKeywayLibc
import CPAM
import KeywayCore

/// The PAM handle and the only caller of libpam: items, the user, prompts, syslog.
struct PAMHandle {
    let raw: OpaquePointer
    /// PAM_SILENT: show no informational or error messages.
    let silent: Bool

    /// `pam_get_user`: the user being authenticated (asks for it through the conversation if unknown). Fails when
    /// libpam has no name, and when the name is not valid UTF-8: decoding would replace the bad bytes with U+FFFD,
    /// and two different legacy names (`jos\xe9`, `jos\xe8`) would then share one enrollment.
    func user() -> Result<String, AuthenticationError> {
        var name: UnsafePointer<CChar>?
        guard pam_get_user(raw, &name, nil) == PAM_SUCCESS, let name else {
            return .failure(AuthenticationError(.conversationFailure, "no user name"))
        }
        guard let user = String(validatingCString: name) else {
            return .failure(AuthenticationError(.invalidUserName, "the user name is not valid UTF-8"))
        }
        return .success(user)
    }

    /// `pam_get_item` for a string item (PAM_SERVICE, PAM_RHOST, PAM_TTY).
    func item(_ type: Int32) -> String? {
        var value: UnsafeRawPointer?
        guard pam_get_item(raw, type, &value) == PAM_SUCCESS, let value else { return nil }
        let text = String(cString: value.assumingMemoryBound(to: CChar.self))
        return text.isEmpty ? nil : text
    }

    /// `pam_getenv`: a variable of the PAM environment, which the application sets with `pam_putenv` (a lock screen
    /// asking for marked prompts, `KEYWAY_PROMPTS=marked`), or nil.
    func environment(_ name: String) -> String? {
        guard let value = pam_getenv(raw, name) else { return nil }
        return String(cString: value)
    }

    /// `pam_syslog` at authpriv. Control characters are escaped (`String.escapingControlCharacters`): a user name
    /// typed at a login prompt must not be able to start a forged log line.
    func log(_ priority: Int32, _ message: String) {
        keyway_pam_syslog(raw, priority, message.escapingControlCharacters)
    }

    /// The longest reply accepted; anything longer is refused as a hostile or broken reply.
    static let maximumReply = 4096

    /// `pam_prompt` with echo on or off. The reply is copied into a `Secret`, then wiped and freed in the C buffer.
    func prompt(_ text: String, echo: Bool) -> Result<Secret?, AuthenticationError> {
        var response: UnsafeMutablePointer<CChar>?
        let status = keyway_pam_prompt(raw, echo ? PAM_PROMPT_ECHO_ON : PAM_PROMPT_ECHO_OFF, &response, text)
        defer {
            if let response {
                secureZero(UnsafeMutableRawBufferPointer(start: response, count: strlen(response)))
                free(response)
            }
        }
        guard status == PAM_SUCCESS else {
            return .failure(AuthenticationError(.conversationFailure, "the conversation failed (PAM code \(status))"))
        }
        guard let response else { return .success(nil) }  // no answer: the person gave up
        let length = strlen(response)
        guard length <= Self.maximumReply else {
            return .failure(AuthenticationError(.conversationFailure, "a reply of \(length) bytes was refused"))
        }
        return .success(Secret(copying: UnsafeRawBufferPointer(start: response, count: length)))
    }

    /// `pam_prompt` with PAM_TEXT_INFO or PAM_ERROR_MSG; under PAM_SILENT only instructions.
    func show(_ message: Message) {
        guard !silent || message.isInstruction else { return }
        var response: UnsafeMutablePointer<CChar>?
        _ = keyway_pam_prompt(raw, message.kind == .info ? PAM_TEXT_INFO : PAM_ERROR_MSG, &response, message.text)
        free(response)
    }
}
