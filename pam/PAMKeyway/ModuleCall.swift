import CKeywayLibc
import CPAM
import KeywayCore
import KeywayPlatform
import KeywayRuntime

/// One call into the module: parse the arguments, build the request, evaluate the policy, map the outcome.
/// Everything is built per call and released before returning.
struct ModuleCall {
    let handle: PAMHandle
    let arguments: [String]

    /// pam_sm_authenticate.
    func authenticate() -> Int32 {
        let conversation = PAMConversation(handle)
        let outcome = run { runtime, policy, user in
            let evaluation = runtime.context().evaluate(
                policy, for: user, reason: "\(user.service) authentication",
                conversation: conversation)
            // A failure of Keyway itself (keywayd, the store) is an error for the administrator; a person's is not.
            let broken: Set<AuthenticationError.Code> = [.serviceUnavailable, .storeFailure, .internalFailure]
            var priority = evaluation.succeeded ? LOG_INFO : LOG_NOTICE
            if let error = evaluation.error, broken.contains(error.code) { priority = LOG_ERR }
            log(priority, "\(evaluation) service=\(user.service)" + (user.isRemote ? " remote=yes" : ""))
            guard let error = evaluation.error else { return .success }
            return .failure(error)
        }
        if case .failure(let error) = outcome {
            // The module's last word: why it gave up, after anything PAM_SILENT held back. Shown even then, once:
            // without it the person meets the next module's prompt (sudo's password) with no idea why.
            let words = conversation.held + [Self.explanation(error)]
            handle.show(Message(kind: .error, text: words.joined(separator: "\n"), isInstruction: true))
        }
        return outcome.code
    }

    /// pam_sm_acct_mgmt: refuses a user whose policy is locked right now, so an account stack can use it.
    /// Succeeds only when the policy could run, or cannot for reasons that are authentication's business
    /// (not enrolled, no sensor); a store or configuration failure fails.
    func accountManagement() -> Int32 {
        let harmless: Set<AuthenticationError.Code> = [
            .factorNotEnrolled, .passcodeNotSet, .biometryNotEnrolled, .biometryNotAvailable, .factorNotAvailable,
        ]
        let outcome = run { runtime, policy, user in
            guard let error = runtime.context().canEvaluate(policy, for: user) else { return .success }
            if harmless.contains(error.code) { return .success }
            log(LOG_NOTICE, "user=\(user.name) policy=\(policy.name) account refused: \(error.reason)")
            return .failure(error)
        }
        if case .failure(let error) = outcome, error.code.isLockout {
            handle.show(.error(Self.explanation(error)))
            return PAM_PERM_DENIED
        }
        return outcome.code
    }

    /// Parses, builds the runtime and the user, and runs `body`; any error before or inside becomes a logged failure.
    private func run(_ body: (Runtime, Policy, UserContext) -> PAMOutcome) -> PAMOutcome {
        let parsed: ModuleArguments
        switch ModuleArguments.parse(arguments) {
        case .success(let arguments): parsed = arguments
        case .failure(let error):
            log(LOG_ERR, "configuration error, failing closed: \(error.reason)")
            return .failure(error)
        }
        let user: String
        switch handle.user() {
        case .success(let name): user = name
        case .failure(let error):
            log(LOG_ERR, "\(error.reason); failing closed")
            return .failure(error)
        }
        if let problem = UserContext.nameProblem(user) {
            // No account has such a name, so refusing it at once reveals nothing about enrollment. The log shows
            // at most 64 Unicode scalars of it (a single character can carry thousands), escaped.
            let shown = user.unicodeScalars.count > 64 ? String(user.unicodeScalars.prefix(64)) + "…" : user
            log(LOG_NOTICE, "user=\(shown) refused: \(problem)")
            return .failure(AuthenticationError(.invalidUserName, problem))
        }
        let policy = parsed.policy
        let service = handle.item(PAM_SERVICE) ?? "unknown"
        var options = Runtime.Options()
        options.sensorDirectory = parsed.sensorDirectory
        options.sensorTimeout = .seconds(parsed.sensorTimeout)
        // keywayd owns the store and the slow hash; this process only talks (docs/ARCHITECTURE.md §10).
        let runtime = Runtime(
            vault: DaemonVault(socketPath: parsed.socket, via: "pam_keyway \(service)"), options: options)
        // unenrolled=fail hides who has enrolled a pattern or passcode (docs/ARCHITECTURE.md §5), except from the
        // account's owner proving who they are (sudo): see AccountOwner. ignore must tell, to ignore.
        let remote = handle.item(PAM_RHOST) != nil || RemoteSession.isRemote(tty: handle.item(PAM_TTY))
        let context = UserContext(
            name: user, service: service, isRemote: remote,
            concealsEnrollment: parsed.unenrolled == .fail && !AccountOwner.isCaller(user))
        if parsed.debug {
            log(LOG_DEBUG, "user=\(user) service=\(service) policy=\(policy) socket=\(parsed.socket)")
        }
        if parsed.unenrolled == .ignore && !hasAnyFactor(of: policy, runtime, context) { return .ignored }
        return body(runtime, policy, context)
    }

    /// True when the user has at least one of the policy's factors enrolled (or keywayd cannot say: then the
    /// evaluation reports that failure instead of ignoring the user).
    private func hasAnyFactor(of policy: Policy, _ runtime: Runtime, _ user: UserContext) -> Bool {
        guard let status = try? runtime.vault.status(of: user.name).first,
            Set(status.factors.filter { $0.enrolled != nil }.map { $0.factor }).isDisjoint(with: policy.rule.factors)
        else { return true }
        log(LOG_INFO, "user=\(user.name) policy=\(policy.name) outcome=ignored (nothing enrolled, unenrolled=ignore)")
        return false
    }

    private func log(_ priority: Int32, _ message: String) { handle.log(priority, message) }

    /// What the person is told when the module fails.
    static func explanation(_ error: AuthenticationError) -> String {
        switch error.code {
        case .throttled:
            guard let until = error.retryAt else { return error.code.summary }
            let wait = SystemClock().now().duration(to: until)
            return "Too many failed attempts; try again after \(until) (in \(wait.spokenDescription))."
        case .timeout, .biometryNotAvailable:
            return error.spoken
        case .factorNotEnrolled, .passcodeNotSet, .biometryNotEnrolled:
            return "Not set up for you yet (`keyway enroll` sets it up)."
        case .invalidPolicy, .storeFailure, .internalFailure, .serviceUnavailable:
            return "Keyway is not available (see the system log)."
        default:
            return error.code.summary
        }
    }
}
