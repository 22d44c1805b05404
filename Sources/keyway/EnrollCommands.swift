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

/// Enrolling, changing and removing a factor, and proving who you are first.
extension Command {
    /// The named part `--name` (or its older spelling `--finger`) gives, if any.
    var partName: String? { parsed.value("--name") ?? parsed.value("--finger") }

    func enroll() -> Int32 {
        let factor = factor()
        // A person enrolls their own without naming it; root always names the account (never its own by mistake).
        let user = parsed.value("--user") == nil && getuid() != 0 ? callerName() : user()
        guard Accounts.exists(user) else {
            // An enrollment for a name that is no account would never be asked for; a typo ("KWALICE") would
            // leave the real account's owner with "Not recognized".
            Keyway.printError(
                "keyway: '\(user.escapingControlCharacters)' is not an account of this system (getpwnam found none); "
                    + "enroll an existing user (names are case-sensitive)")
            return ExitStatus.noUser
        }
        let plugin = Factors.all.plugin(factor)
        if plugin?.part == nil, let option = ["--name", "--finger", "--simulate-touches"].first(where: parsed.isGiven) {
            Keyway.fail(usage: "'\(option)' applies to a factor enrolled in named parts only.", command: subcommand)
        }
        let runtime = runtime(creating: true)
        return attempt { () throws(AuthenticationError) in
            guard let authenticator = runtime.authenticator(factor) else {
                throw AuthenticationError(.invalidPolicy, "Keyway has no \(factor)")
            }
            let request = EnrollmentRequest(
                user: user, actor: actor, label: partName, scripted: parsed.has("--simulate-touches"))
            let talk = repeatingConversation(factor, of: user, in: runtime)
            let lines: [String]
            // A person's own TOTP or recovery codes: keywayd offers a new one when they have proved who they are:
            // with the current code or a recovery code when the account has one (or the administrator's pass that
            // let them in), with another factor of theirs, or nothing where a policy says first-enrollment = self,
            // only for a first one (VaultService.selfService). keywayd is asked first; the proof only when it
            // refuses for want of one.
            if getuid() != 0 && plugin?.enrollment == .sharedSecret && parsed.value("--store") == nil {
                do throws(AuthenticationError) {
                    lines = try authenticator.enroll(request, conversation: talk)
                } catch  where error.code == .notPermitted {
                    try prove(user, before: "set your \(factor)", preferring: factor, in: runtime, refused: error)
                    lines = try authenticator.enroll(request, conversation: talk)
                }
            } else {
                lines = try authenticator.enroll(request, conversation: talk)
            }
            for line in lines { print(line) }
        }
    }

    /// Verifies `user` with a typed factor of theirs that is available now (`first` if it is, then the others in
    /// order, each offered after the last): keywayd records the success as the proof a self-service change needs.
    /// With none, `refused` (keywayd's refusal without a proof) is what the person is told.
    func prove(
        _ user: String, before reason: String, preferring first: FactorKind, in runtime: Runtime,
        refused: AuthenticationError
    ) throws(AuthenticationError) {
        let context = UserContext(name: user, service: "keyway", startedBy: getuid())
        let typed = Factors.all.filter { $0.input == .typed }.map(\.kind)
        var candidates = ([first] + typed.filter { $0 != first }).filter {
            runtime.vault.availability(of: $0, for: context) == .available
        }
        // An account with a second factor proves a new one with a second factor (VaultService.selfService): the
        // pattern or the passcode is not offered.
        let second = Set(Factors.all.filter { $0.enrollment == .sharedSecret }.map(\.kind))
        if candidates.contains(where: second.contains) { candidates.removeAll { !second.contains($0) } }
        guard !candidates.isEmpty else { throw refused }
        let rules: [Policy.Rule] = candidates.map { .factor($0, attempts: 3) }
        let proof = Policy(name: "prove it is you", rule: rules.count == 1 ? rules[0] : .atLeast(1, of: rules))
        let evaluation = runtime.context().evaluate(
            proof, for: context, reason: reason, conversation: repeatingConversation(first, of: user, in: runtime))
        if let error = evaluation.error { throw error }
    }

    /// With --stdin, enrollment reads one line and uses it for both entries.
    func repeatingConversation(_ factor: FactorKind, of user: String, in runtime: Runtime) -> any Conversation {
        guard parsed.has("--stdin") else { return conversation(for: factor, of: user, in: runtime) }
        return RepeatingConversation(qrFile: parsed.value("--qr-file"))
    }

    /// The person at the terminal: a pattern is drawn on the grid where the terminal allows it (with its trail
    /// unless the account's show-trail switch is off), the rest is typed.
    func conversation(for factor: FactorKind, of user: String, in runtime: Runtime) -> any Conversation {
        guard factor == .gesture else { return conversation }
        return GridConversation.forPattern(
            fromStandardInput: parsed.has("--stdin"),
            showTrail: switchValue(GestureAuthenticator.showTrailSetting, of: user, in: runtime))
    }

    func change() -> Int32 {
        let factor = factor()
        let user = user()
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            let talk: any Conversation =
                parsed.has("--stdin") ? ChangeConversation() : conversation(for: factor, of: user, in: runtime)
            guard Factors.all.plugin(factor)?.changeable == true,
                let knowledge = runtime.authenticator(factor) as? any KnowledgeAuthenticator
            else {
                Keyway.fail(
                    usage: "A \(factor) is changed by enrolling it again: keyway enroll \(factor) --user \(user).")
            }
            try knowledge.change(user: user, by: actor, conversation: talk)
            print("Changed the \(factor) of \(user).")
        }
    }

    func remove() -> Int32 {
        let factor = factor()
        let user = user()
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            let removed = try runtime.vault.remove(factor, of: user, label: partName, by: actor)
            guard removed else { throw AuthenticationError(.factorNotEnrolled, "\(user) has no \(factor) to remove") }
            print("Removed the \(factor) of \(user).")
        }
    }
}
