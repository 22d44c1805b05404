import CKeywayLibc
import CPAM
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayFactors
import KeywayPlatform
import KeywayRuntime
import KeywayWire

/// One call into the module: parse the arguments, build the request, evaluate the policy, map the outcome.
/// Everything is built per call and released before returning.
struct ModuleCall {
    let handle: PAMHandle
    let arguments: [String]

    /// pam_sm_authenticate.
    func authenticate() -> Int32 {
        let conversation = PAMConversation(handle)
        var audit = false
        var handedOver = false  // the person chose what follows Keyway (next=): nothing to explain
        var lockoutIsAuthError = false
        let outcome = run { call in
            audit = call.definition.mode == .audit
            lockoutIsAuthError = call.lockoutIsAuthError
            handedOver = call.options.handoverLabel != nil
            let policy = call.definition.policy
            if call.readTTY {
                switch DirectTerminal.open(
                    tty: handle.item(PAM_TTY), isRemote: call.user.isRemote, because: call.locality ?? "")
                {
                case .success(let terminal): conversation.terminal = terminal
                case .failure(let why): log(LOG_INFO, "read-tty: \(why.reason); default mode (Enter after a touch)")
                }
            }
            defer { conversation.terminal = nil }
            let began = MonotonicClock.milliseconds()
            let evaluation = call.runtime.context(call.options).evaluate(
                policy, for: call.user, reason: "\(call.user.service) authentication",
                conversation: conversation)
            // A failure of Keyway itself (keywayd, the store) is an error for the administrator; a person's is not.
            let broken: Set<AuthenticationError.Code> = [.serviceUnavailable, .storeFailure, .internalFailure]
            var priority = evaluation.succeeded ? LOG_INFO : LOG_NOTICE
            if let error = evaluation.error, broken.contains(error.code) { priority = LOG_ERR }
            let mode = audit ? " mode=audit (not enforced: PAM_IGNORE)" : ""
            log(priority, "\(evaluation) service=\(call.user.service)\(call.where)\(mode)")
            // The same decision as a structured journal entry, and to keywayd's metrics (pam_keyway(8), LOGGING).
            Journal.send(
                Event.decision(
                    evaluation, service: call.user.service, remote: call.user.isRemote, rhost: handle.item(PAM_RHOST),
                    audit: audit),
                identifier: "pam_keyway")
            let result: Decision.Result = audit ? .ignored : evaluation.succeeded ? .success : .failure
            _ = try? call.daemon.ask(
                .report(
                    Decision(
                        user: call.user.name, service: call.user.service, policy: policy.name, result: result,
                        milliseconds: MonotonicClock.milliseconds() - began)))
            if audit { return .ignored }
            guard let error = evaluation.error else { return .success }
            if letInWhileAway(call, error) {
                handle.show(.info("Keyway is not available; let in without it (failmode=safe)."))
                return .success
            }
            return .failure(error)
        }
        if case .failure(let error) = outcome, !(error.code == .userFallback && handedOver) {
            // The module's last word: why it gave up, after anything PAM_SILENT held back. Shown even then, once:
            // without it the person meets the next module's prompt (sudo's password) with no idea why.
            let words = conversation.held + [Self.explanation(error)]
            handle.show(Message(kind: .error, text: words.joined(separator: "\n"), isInstruction: true))
        }
        // `lockout=auth_err` (sshd): the lock is said above, and the client may ask again, to be told again.
        return outcome.code(lockoutIsAuthError: lockoutIsAuthError)
    }

    /// pam_sm_acct_mgmt: refuses a user whose policy is locked right now, so an account stack can use it.
    /// Succeeds only when the policy could run, or cannot for reasons that are authentication's business
    /// (not enrolled, no sensor); a store or configuration failure fails.
    func accountManagement() -> Int32 {
        let harmless: Set<AuthenticationError.Code> = [
            .factorNotEnrolled, .passcodeNotSet, .biometryNotEnrolled, .biometryNotAvailable, .factorNotAvailable,
        ]
        // A note only ever says "available", and may be older than a lockout: the account's answer asks keywayd.
        let outcome = run(readingNotes: false, authenticating: false) { call in
            let policy = call.definition.policy
            guard let error = call.runtime.context().canEvaluate(policy, for: call.user) else { return .success }
            if harmless.contains(error.code) || letInWhileAway(call, error) { return .success }
            if call.definition.mode == .audit {
                log(
                    LOG_NOTICE,
                    "user=\(call.user.name) policy=\(policy.name) mode=audit account would be refused: \(error.reason)")
                return .ignored
            }
            log(LOG_NOTICE, "user=\(call.user.name) policy=\(policy.name) account refused: \(error.reason)")
            return .failure(error)
        }
        if case .failure(let error) = outcome, error.code.isLockout {
            handle.show(.error(Self.explanation(error)))
            return PAM_PERM_DENIED
        }
        return outcome.code(lockoutIsAuthError: false)  // an account stack refuses a lock as PAM_PERM_DENIED above
    }

    /// What one call works with: the factors with the policy's settings, the policy as it applies to this user,
    /// and the user.
    struct Call {
        let runtime: Runtime
        let definition: Configuration.Definition
        let user: UserContext
        /// The evaluation's options: the way out to the next module (`next=`).
        let options: EvaluationContext.Options
        /// `read-tty`: read the terminal directly where it can.
        let readTTY: Bool
        /// Why the session counts as local or remote (RemoteSession), or nil when nothing asked.
        let locality: String?
        /// keywayd, as the runtime asks it (and the decision is reported to it).
        let daemon: DaemonVault
        /// What the stack gets while keywayd is not running: the module's `failmode=`, else the policy's.
        let failMode: Configuration.FailMode
        /// `lockout=auth_err`: a lockout returns PAM_AUTH_ERR rather than PAM_MAXTRIES.
        let lockoutIsAuthError: Bool

        /// " remote=yes (why)" for a session found remote, for logs.
        var `where`: String {
            guard let locality, user.isRemote else { return "" }
            return " remote=yes (\(locality.escapingControlCharacters))"
        }
    }

    /// Parses, reads the configuration, resolves the policy for the user, builds the runtime, and runs `body`; any
    /// error before or inside becomes a logged failure.
    /// With `readingNotes`, a factor keywayd's note lists is taken as available without asking (authentication's
    /// first prompt); without, keywayd is asked. `authenticating`: the auth stack, whose decision is the one the person
    /// is told about and keywayd counts (the account stack's is not).
    private func run(readingNotes: Bool = true, authenticating: Bool = true, _ body: (Call) -> PAMOutcome)
        -> PAMOutcome
    {
        let parsed: ModuleArguments
        switch ModuleArguments.parse(arguments) {
        case .success(let arguments): parsed = arguments
        case .failure(let error):
            log(LOG_ERR, "configuration error, failing closed: \(error.reason)")
            return .failure(error)
        }
        // Read on every call, so an edit applies to the next authentication; compiled only when the compiled form
        // kept beside keywayd's socket is not of exactly these bytes (ConfigurationCache).
        let plugins = Factors.all
        let configuration: Configuration
        let cache = ConfigurationCache.besideSocket(parsed.socket)
        switch ConfigurationFiles.load(parsed.config, plugins: plugins, cache: cache) {
        case .success(let loaded): configuration = loaded
        case .failure(let problems):
            for problem in problems.errors { log(LOG_ERR, "configuration error, failing closed: \(problem.headline)") }
            let first = problems.errors.first?.headline ?? "the configuration could not be read"
            return .failure(AuthenticationError(.invalidPolicy, first))
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
        let service = handle.item(PAM_SERVICE) ?? "unknown"
        // Local is proven, never assumed (pam_keyway(8), LOCAL AND REMOTE), where something depends on it: a `when`
        // (asked by resolve), a factor at a device, read-tty. The finding and its evidence are logged.
        let locality = RemoteSession.Lazy(rhost: handle.item(PAM_RHOST), tty: handle.item(PAM_TTY))
        let subject = Configuration.Subject(user: user, locate: { locality.finding.isRemote }) { group in
            Accounts.isMember(user, of: group).mapError { AuthenticationError(.invalidPolicy, $0.description) }
        }
        let resolved: Configuration.Resolved
        switch configuration.resolve(parsed.policy, for: subject) {
        case .success(let found): resolved = found
        case .failure(let error):
            let priority = error.code == .invalidPolicy ? LOG_ERR : LOG_NOTICE
            log(priority, "user=\(user) service=\(service) policy=\(parsed.policy) refused: \(error.reason)")
            return .failure(error)
        }
        var settings = resolved.settings
        if let seconds = parsed.sensorTimeout { settings.setSensorTimeout(seconds: seconds) }
        var options = Runtime.Options()
        options.sensorDirectory = parsed.sensorDirectory
        // keywayd owns the store and the slow hash; this process only talks (docs/ARCHITECTURE.md §10).
        let named = Set(resolved.policy.rule.factors)
        let daemon = DaemonVault(socketPath: parsed.socket, via: "pam_keyway \(service)", readsNotes: readingNotes)
        let runtime = Runtime(
            vault: daemon,
            options: options,
            settings: settings, plugins: plugins.filter { named.contains($0.kind) })
        // Located on every call: a device serves local sessions only, and every factor counts a remote session's
        // failures apart from a local one's (AttemptBook.Channel), so the network cannot lock the console out.
        let remote = locality.finding.isRemote
        // conceal hides who has enrolled a pattern or passcode (docs/ARCHITECTURE.md §5), except from the account's
        // owner proving who they are (sudo): see AccountOwner. skip must tell, to skip.
        let unenrolled = parsed.unenrolled ?? resolved.definition.unenrolled ?? .conceal
        let context = UserContext(
            name: user, service: service, isRemote: remote,
            concealsEnrollment: unenrolled == .conceal && !AccountOwner.isCaller(user), startedBy: getuid())
        let policy = resolved.policy
        if parsed.debug {
            let variant = resolved.definition.variant.map { " (\($0))" } ?? ""
            log(
                LOG_DEBUG,
                "user=\(user) service=\(service) policy=\(policy)\(variant) unenrolled=\(unenrolled.rawValue) "
                    + "socket=\(parsed.socket)")
        }
        if unenrolled == .skip || unenrolled == .allow, !hasAnyFactor(of: policy, runtime, context, unenrolled) {
            return unenrolled == .skip ? .ignored : allowed(context, policy, authenticating ? daemon : nil)
        }
        let evaluating = EvaluationContext.Options(handoverLabel: parsed.next.map { "Use \($0)" })
        return body(
            Call(
                runtime: runtime, definition: resolved.definition, user: context, options: evaluating,
                readTTY: parsed.readTTY, locality: locality.made?.reason, daemon: daemon,
                failMode: parsed.failMode ?? resolved.definition.failMode ?? .secure,
                lockoutIsAuthError: parsed.lockoutIsAuthError))
    }

    /// `failmode=safe` while keywayd is not running at all (`DaemonVault.foundNotRunning`): the stack goes on without
    /// Keyway, logged as a warning. Never for a keywayd that is busy, slow or stopped, which a local user could cause.
    private func letInWhileAway(_ call: Call, _ error: AuthenticationError) -> Bool {
        guard call.failMode == .safe, error.code == .serviceUnavailable, call.daemon.foundNotRunning else {
            return false
        }
        log(
            LOG_WARNING,
            "user=\(call.user.name) service=\(call.user.service) policy=\(call.definition.name) outcome=allowed "
                + "(keywayd is not running, failmode=safe: in without Keyway)")
        return true
    }

    /// True when the user has at least one of the policy's factors enrolled (or keywayd cannot say: then the
    /// evaluation reports that failure instead of passing the user by).
    private func hasAnyFactor(
        of policy: Policy, _ runtime: Runtime, _ user: UserContext, _ unenrolled: Configuration.Unenrolled
    ) -> Bool {
        guard let status = try? runtime.vault.status(of: user.name).first,
            Set(status.factors.filter { $0.enrolled != nil }.map { $0.factor }).isDisjoint(with: policy.rule.factors)
        else { return true }
        if unenrolled == .skip {
            log(LOG_INFO, "user=\(user.name) policy=\(policy.name) outcome=ignored (nothing enrolled, unenrolled=skip)")
        }
        return false
    }

    /// `unenrolled=allow` for a user with nothing enrolled: a success, logged as one no factor gave, for an account
    /// that exists; a name no account has is refused as not enrolled (nothing to roll out to). In the auth stack
    /// (given keywayd) the person is told how to enroll (a line, held back under PAM_SILENT), and keywayd counts
    /// the login in its metrics.
    private func allowed(_ user: UserContext, _ policy: Policy, _ daemon: DaemonVault?) -> PAMOutcome {
        guard case .success(_?) = Accounts.uid(of: user.name) else {
            log(
                LOG_NOTICE,
                "user=\(user.name) policy=\(policy.name) outcome=failure (nothing enrolled, unenrolled=allow: no such "
                    + "account)")
            return .failure(AuthenticationError(.factorNotEnrolled, "nothing is enrolled and no account has this name"))
        }
        log(
            LOG_NOTICE,
            "user=\(user.name) service=\(user.service) policy=\(policy.name) outcome=allowed (nothing enrolled, "
                + "unenrolled=allow: in without Keyway)")
        guard let daemon else { return .success }
        if let first = policy.rule.factors.first {
            handle.show(
                .info(
                    "Keyway: no second factor is set up for you yet, and soon logins will ask for one; "
                        + "`keyway enroll \(first)` sets it up."))
        }
        _ = try? daemon.ask(
            .report(
                Decision(user: user.name, service: user.service, policy: policy.name, result: .allowed, milliseconds: 0)
            ))
        return .success
    }

    private func log(_ priority: Int32, _ message: String) { handle.log(priority, message) }

    /// A lock that ends at `until`, in words: "Too many failed attempts; try again after 14:02 (in 30 seconds)."
    static func waitWords(_ until: Timestamp) -> String {
        let now = SystemClock().now()
        let wait = now.duration(to: until)
        return "Too many failed attempts; try again after \(SystemClock.local(until, now: now)) "
            + "(in \(wait.spokenDescription))."
    }

    /// What the person is told when the module fails.
    static func explanation(_ error: AuthenticationError) -> String {
        switch error.code {
        case .throttled:
            guard let until = error.retryAt else { return error.code.summary }
            return waitWords(until)
        case .timeout, .biometryNotAvailable:
            return error.spoken
        case .factorNotEnrolled, .passcodeNotSet, .biometryNotEnrolled:
            return "Not set up for you yet (`keyway enroll` sets it up)."
        case .invalidPolicy, .storeFailure, .internalFailure, .serviceUnavailable, .enrollmentRefused:
            return "Keyway is not available (see the system log)."
        case .notPermitted:
            return "Keyway does not allow this here: \(error.reason)."
        case .authenticationFailed, .userCancel, .userFallback, .systemCancel, .biometryLockout, .appCancel,
            .invalidContext, .notInteractive, .factorNotAvailable, .lockedOut, .conversationFailure, .invalidUserName:
            return error.code.summary
        }
    }
}
