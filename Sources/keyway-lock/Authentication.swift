import CPAM
import Glibc
import KeywayPlatform
import KeywayRuntime

/// The authentication process: one PAM transaction of the `keyway-lock` service as the user who locked the screen,
/// its conversation carried over standard input and output to the locking process (`Line`). It asks for marked
/// prompts (`KEYWAY_PROMPTS=marked`, pam_keyway(8) MARKED PROMPTS), so the module says which prompt is the pattern,
/// and waits on the descriptor a marked prompt names (`wake=`) beside its input, answering an empty reply when an
/// armed reader has something, as the module does itself at a terminal. Exits 0 only after PAM_SUCCESS from
/// pam_authenticate and pam_acct_mgmt.
enum Authentication {
    /// The conversation's state: one transaction in one single-threaded process.
    nonisolated(unsafe) static var input = LineReader(0)
    nonisolated(unsafe) static var queued: [Line] = []
    nonisolated(unsafe) static var promptNumber = 0

    static func run(service: String, directory: String?) -> Never {
        BrokenPipe.ignoreSignal()
        guard let account = getpwuid(getuid()), let name = account.pointee.pw_name else {
            say(Line(.result, "failure this process's account has no name"))
            exit(1)
        }
        let user = String(cString: name)
        var conversation = pam_conv(conv: converse, appdata_ptr: nil)
        var handle: OpaquePointer?
        let started =
            directory.map { pam_start_confdir(service, user, &conversation, $0, &handle) }
            ?? pam_start(service, user, &conversation, &handle)
        guard started == PAM_SUCCESS, let handle else {
            say(Line(.result, "failure PAM could not start the \(service) service (code \(started))"))
            exit(1)
        }
        _ = pam_putenv(handle, "KEYWAY_PROMPTS=marked")
        // The X display is the terminal (pam_keyway judges ":0" a local display; pam_keyway(8), LOCAL AND REMOTE).
        if let display = getenv("DISPLAY") { _ = pam_set_item(handle, PAM_TTY, display) }
        _ = pam_set_item(handle, PAM_RUSER, user)
        var status = pam_authenticate(handle, 0)
        if status == PAM_SUCCESS { status = pam_acct_mgmt(handle, 0) }
        if status == PAM_SUCCESS { _ = pam_setcred(handle, Int32(PAM_REFRESH_CRED)) }
        let explanation = String(cString: pam_strerror(handle, status))
        pam_end(handle, status)
        if status == PAM_SUCCESS {
            say(Line(.result, "success"))
            exit(0)
        }
        say(Line(.result, "failure \(explanation)"))
        exit(1)
    }

    static func say(_ line: Line) { send(line, to: 1) }

    /// The next line from the locking process, waiting on `wake` too when a prompt names one; nil when the input
    /// ended (the locker is gone) or the wake fired (`.woken`).
    static func next(wake: Int32?) -> Line? {
        while true {
            if !queued.isEmpty { return queued.removeFirst() }
            if input.ended { return nil }
            var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0)]
            if let wake { fds.append(pollfd(fd: wake, events: Int16(POLLIN), revents: 0)) }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            if fds.count > 1 && fds[1].revents != 0 { return Line(.woken) }
            if fds[0].revents != 0 { queued += input.drain() }
        }
    }

    /// One answer for prompt `number`: answers to earlier prompts (sent before a wake ended them) are dropped.
    static func answer(to prompt: PromptLine) -> String? {
        promptNumber += 1
        let number = promptNumber
        say(Line(.prompt, "\(number) \(prompt.echo ? "shown" : "hidden") \(prompt.text)"))
        while let line = next(wake: prompt.wake) {
            if line.verb == .woken {
                say(Line(.woken, "\(number)"))
                return ""
            }
            guard line.verb == .answer else { continue }
            let (id, text) = line.split
            if id == "\(number)" { return text }
        }
        return nil
    }

    /// A prompt as the module sent it.
    struct PromptLine {
        var text: String
        var echo: Bool
        /// The `wake=` descriptor of a marked prompt, when it is one this process has open.
        var wake: Int32? {
            guard let descriptor = PromptMark.read(text).mark?.wake,
                descriptor > 2, fcntl(descriptor, F_GETFD) >= 0
            else { return nil }
            return descriptor
        }
    }
}

/// The PAM conversation function: each message goes to the locking process; each prompt waits for its answer.
/// Every failure is PAM_CONV_ERR with nothing allocated left behind, so the module fails closed.
private func converse(
    count: Int32, messages: UnsafeMutablePointer<UnsafePointer<pam_message>?>?,
    responses: UnsafeMutablePointer<UnsafeMutablePointer<pam_response>?>?, data: UnsafeMutableRawPointer?
) -> Int32 {
    guard count > 0, count <= PAM_MAX_NUM_MSG, let messages, let responses else { return PAM_CONV_ERR }
    guard
        let replies = calloc(Int(count), MemoryLayout<pam_response>.stride)?.bindMemory(
            to: pam_response.self, capacity: Int(count))
    else { return PAM_BUF_ERR }
    func abandon() -> Int32 {
        for index in 0..<Int(count) {
            if let text = replies[index].resp {
                memset(text, 0, strlen(text))
                free(text)
            }
        }
        free(replies)
        return PAM_CONV_ERR
    }
    for index in 0..<Int(count) {
        guard let message = messages[index]?.pointee, let raw = message.msg else { return abandon() }
        let text = String(cString: raw)
        switch message.msg_style {
        case PAM_PROMPT_ECHO_OFF, PAM_PROMPT_ECHO_ON:
            let prompt = Authentication.PromptLine(text: text, echo: message.msg_style == PAM_PROMPT_ECHO_ON)
            guard let answer = Authentication.answer(to: prompt) else { return abandon() }
            replies[index].resp = strdup(answer)
        case PAM_ERROR_MSG: Authentication.say(Line(.error, text))
        case PAM_TEXT_INFO: Authentication.say(Line(.info, text))
        default: return abandon()
        }
    }
    responses.pointee = replies
    return PAM_SUCCESS
}
