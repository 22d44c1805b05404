/// Runs one evaluation: asks each factor in the order the rule gives, counts attempts, talks to the person,
/// and records every step.
final class PolicyRunner {
    private let registry: FactorRegistry
    private let user: UserContext
    private let reason: String
    private let options: EvaluationContext.Options
    private let cancellation: CancellationFlag
    private let conversation: any Conversation
    /// What happened, in order.
    private(set) var steps: [Evaluation.Step] = []

    init(
        registry: FactorRegistry, user: UserContext, reason: String, options: EvaluationContext.Options,
        cancellation: CancellationFlag, conversation: any Conversation
    ) {
        self.registry = registry
        self.user = user
        self.reason = reason
        self.options = options
        self.cancellation = cancellation
        self.conversation = conversation
    }

    /// Runs `rule`; nil means satisfied.
    func run(_ rule: Policy.Rule, fallbackTo fallback: FactorKind?) -> AuthenticationError? {
        RuleCombinator.combine(
            rule, fallback: fallback,
            leaf: { kind, attempts, next in runFactor(kind, attempts: attempts, fallback: next) },
            together: { [self] members, next in runTogether(members, fallback: next) },
            offerable: { [self] kind in offerable(kind) })
    }

    /// Whether `kind` may be offered as the next factor to try: not when the person does not have it, unless
    /// concealment keeps every name looking alike (then it is offered as it would be to anyone).
    private func offerable(_ kind: FactorKind) -> Bool {
        guard let plugin = registry[kind] else { return false }
        guard let unavailable = plugin.availability(for: user).error(for: kind, codes: plugin.codes) else {
            return true
        }
        return !RuleCombinator.absent.contains(unavailable.code) || user.concealsEnrollment
    }

    /// The label offered for leaving a factor: the options', "Use <next factor>", or the handover.
    private func label(before fallback: FactorKind?) -> String? {
        options.fallbackLabel.map { $0.isEmpty ? nil : $0 } ?? fallback.map { "Use \($0)" } ?? options.handoverLabel
    }

    /// A member of `first of` while it can still succeed.
    private struct Member {
        let kind: FactorKind
        let plugin: any Authenticator
        let attempts: Int
        var counted = 0
        var armed: (any ArmedFactor)? = nil
    }

    /// `first of` (docs/ARCHITECTURE.md §14): arms the factors that can wait in the background, asks once for the
    /// typed one, and takes whichever succeeds first. An empty reply (or one character, for the askpass agents that
    /// refuse an empty entry) asks the armed factors what was presented; anything longer is the typed factor's.
    /// Each factor counts its own failures. Members that cannot be arranged so (one left, two typed, no prompt
    /// allowed) are tried in turn, as `or` would.
    private func runTogether(_ members: [(factor: FactorKind, attempts: Int)], fallback: FactorKind?)
        -> AuthenticationError?
    {
        if let cancelled { return record(members[0].factor, 0, .ended(cancelled), cancelled) }
        var errors: [AuthenticationError] = []
        var usable: [Member] = []
        for (kind, attempts) in members {
            guard let plugin = registry[kind] else {
                let error = AuthenticationError(.invalidPolicy, "no plugin provides the factor '\(kind)'")
                return record(kind, 0, .skipped(error), error)
            }
            if let unavailable = plugin.availability(for: user).error(for: kind, codes: plugin.codes) {
                if unavailable.code.stopsEvaluation { return record(kind, 0, .skipped(unavailable), unavailable) }
                _ = record(kind, 0, .skipped(unavailable), nil)
                // Why the prompt does not offer it (locked, unplugged); not for a factor never enrolled, which
                // would be said at every authentication of someone who does not use it.
                if !Self.revealsEnrollment.contains(unavailable.code) {
                    var message = Message.info(unavailable.code.summary)
                    message.until = unavailable.retryAt
                    conversation.tell(message)
                }
                errors.append(unavailable)
                continue
            }
            usable.append(Member(kind: kind, plugin: plugin, attempts: attempts))
        }
        let typed = usable.filter { $0.plugin.typedEntry != nil }
        let waiting = usable.filter { $0.plugin.invitation != nil }
        if usable.count < 2 || typed.count > 1 || typed.count + waiting.count < usable.count
            || options.interactionNotAllowed
        {
            return inTurn(usable, errors: errors, fallback: fallback)
        }
        var live: [Member] = typed
        for var member in waiting {
            let request = AuthenticationRequest(
                user: user, reason: reason, attemptsAllowed: member.attempts, cancellation: cancellation)
            do {
                member.armed = try member.plugin.arm(request)
                live.append(member)
            } catch {
                if error.code.stopsEvaluation {
                    for other in live { other.armed?.release() }
                    return record(member.kind, 0, .ended(error), error)
                }
                _ = record(member.kind, 0, .skipped(error), nil)
                conversation.tell(.info(error.spoken))
                errors.append(error)
            }
        }
        defer { for member in live { member.armed?.release() } }
        if live.count < 2 { return inTurn(live, errors: errors, fallback: fallback) }
        return together(&live, errors: errors, fallback: fallback)
    }

    /// The members one after the other, as `or` (the combinator's own walk), after the `errors` of those skipped.
    private func inTurn(_ members: [Member], errors: [AuthenticationError], fallback: FactorKind?)
        -> AuthenticationError?
    {
        let none = AuthenticationError(.authenticationFailed, "no factor of 'first of' could be used")
        guard !members.isEmpty else { return RuleCombinator.explain(errors) ?? none }
        guard let error = run(.anyOf(members.map { .factor($0.kind, attempts: $0.attempts) }), fallbackTo: fallback)
        else { return nil }
        if error.code.stopsEvaluation { return error }
        return RuleCombinator.explain(errors + [error]) ?? error
    }

    /// Where one round of the shared prompt stands: no member has succeeded yet, or one has (which ends the
    /// evaluation; every failure is recorded as it is settled).
    private enum Round {
        case undecided
        case succeeded
    }

    /// The shared prompt, until a member succeeds or none is left.
    private func together(_ live: inout [Member], errors: [AuthenticationError], fallback: FactorKind?)
        -> AuthenticationError?
    {
        var errors = errors
        let offered = label(before: fallback)
        var attempt = 0
        var uncounted = 0
        guard let opening = live.first?.kind else { return inTurn(live, errors: errors, fallback: fallback) }
        /// The member a verdict of the whole is recorded under: the first still live, or the first there was.
        var firstKind: FactorKind { live.first?.kind ?? opening }
        /// Settles one verdict of `live[index]`; `round` becomes `.succeeded` when it ends the evaluation.
        func settle(_ verdict: Verdict, of index: Int, round: inout Round) {
            let kind = live[index].kind
            switch verdict {
            case .success:
                _ = record(kind, attempt, .succeeded, nil)
                round = .succeeded
            case .failure(let failure) where failure.countsAsAttempt:
                live[index].counted += 1
                _ = record(kind, attempt, .failed(failure), nil)
                let left = live[index].attempts - live[index].counted
                if let locked = sayFailure(of: kind, live[index].plugin, left: left, sayingLock: true) {
                    _ = record(kind, attempt, .ended(locked), nil)
                    errors.append(locked)
                    live[index].counted = live[index].attempts
                    return
                }
                if left <= 0 {
                    let error = AuthenticationError(
                        .authenticationFailed, "\(live[index].attempts) failed \(kind) attempts")
                    _ = record(kind, attempt, .exhausted, nil)
                    errors.append(error)
                }
            case .failure(let failure):
                _ = record(kind, attempt, .failed(failure), nil)
                if case .malformed(let why) = failure { conversation.tell(.error(why)) }
                if case .noSample(let why) = failure { conversation.tell(.error(why)) }
                uncounted += 1
            }
        }
        while !live.isEmpty {
            if let cancelled { return record(firstKind, attempt, .ended(cancelled), cancelled) }
            if uncounted >= 3 {
                let error = AuthenticationError(.authenticationFailed, "too many unusable entries")
                return record(firstKind, attempt, .exhausted, error)
            }
            attempt += 1
            let typed = live.firstIndex { $0.plugin.typedEntry != nil }
            let invitation = live.compactMap { $0.armed == nil ? nil : $0.plugin.invitation }.joined(separator: " or ")
            var text = invitation + " and press Enter: "
            var waking = invitation + ": "
            if let typed, let entry = live[typed].plugin.typedEntry {
                if attempt == 1, let preamble = entry.preamble {
                    conversation.tell(.explaining(live[typed].kind, preamble))
                }
                let asked = entry.promptText.prefix(1).lowercased() + entry.promptText.dropFirst()
                text = invitation + " and press Enter, or type your " + asked
                waking = invitation + ", or type your " + asked
            }
            let waker = live.lazy.compactMap { $0.armed }.first { $0.wakeDescriptor != nil }
            let wake = waker.flatMap { armed in
                armed.wakeDescriptor.map {
                    Prompt.Wake(descriptor: $0, text: waking, keepsTerminalSettings: armed.keepsTerminalSettings)
                }
            }
            let reply: Reply
            do {
                let prompt = Prompt(
                    text, echo: false, fallbackLabel: offered, wake: wake, factor: typed.map { live[$0].kind },
                    invitation: invitation.isEmpty ? nil : invitation)
                reply = try conversation.ask(prompt)
            } catch {
                return record(firstKind, attempt, .ended(error), error)
            }
            var entered: Secret? = nil
            switch reply {
            case .cancel:
                let error = AuthenticationError(.userCancel)
                return record(firstKind, attempt, .ended(error), error)
            case .fallback: break
            case .secret(let secret): if secret.count > 1 { entered = secret }
            }
            var round = Round.undecided
            if let entered, let typed, let entry = live[typed].plugin.typedEntry {
                do {
                    settle(try entry.verify(entered, for: user), of: typed, round: &round)
                } catch {
                    if error.code.stopsEvaluation { return record(live[typed].kind, attempt, .ended(error), error) }
                    _ = record(live[typed].kind, attempt, .ended(error), nil)
                    conversation.tell(.error(error.spoken))  // the sensor goes on alone: say why the typed one ended
                    errors.append(error)
                    live[typed].counted = live[typed].attempts
                }
            } else {
                // Enter, a one-character confirmation, or the armed factor woke the prompt: ask what happened.
                var presented = false
                for index in live.indices where live[index].armed != nil && round == .undecided {
                    let verdicts: [Verdict]
                    do { verdicts = try live[index].armed!.collect() } catch {
                        if error.code.stopsEvaluation { return record(live[index].kind, attempt, .ended(error), error) }
                        _ = record(live[index].kind, attempt, .ended(error), nil)
                        conversation.tell(.error(error.spoken))
                        errors.append(error)
                        live[index].counted = live[index].attempts
                        continue
                    }
                    for verdict in verdicts where round == .undecided {
                        presented = true
                        settle(verdict, of: index, round: &round)
                    }
                }
                if !presented && round == .undecided {
                    if reply == .fallback {
                        let error = AuthenticationError(.userFallback)
                        return record(firstKind, attempt, .ended(error), error)
                    }
                    conversation.tell(.error("Nothing was presented to the sensor."))
                    uncounted += 1
                }
            }
            switch round {
            case .succeeded: return nil
            case .undecided: break
            }
            for member in live where member.counted >= member.attempts { member.armed?.release() }
            live.removeAll { $0.counted >= $0.attempts }
            if live.count == 1, live[0].armed == nil {
                // Only the typed factor is left: its own prompt, with what it has left.
                let error = runFactor(live[0].kind, attempts: live[0].attempts - live[0].counted, fallback: fallback)
                guard let error else { return nil }
                errors.append(error)
                live.removeAll()
            }
        }
        return RuleCombinator.explain(errors)
            ?? AuthenticationError(.authenticationFailed, "no factor of 'first of' succeeded")
    }

    /// The codes that tell whether a factor is enrolled.
    private static var revealsEnrollment: Set<AuthenticationError.Code> {
        RuleCombinator.absent
    }

    private var cancelled: AuthenticationError? {
        cancellation.isCancelled ? AuthenticationError(.appCancel, "the context was invalidated") : nil
    }

    private func runFactor(_ kind: FactorKind, attempts: Int, fallback: FactorKind?) -> AuthenticationError? {
        if let cancelled { return record(kind, 0, .ended(cancelled), cancelled) }
        guard let plugin = registry[kind] else {
            let error = AuthenticationError(.invalidPolicy, "no plugin provides the factor '\(kind)'")
            return record(kind, 0, .skipped(error), error)
        }
        if let unavailable = plugin.availability(for: user).error(for: kind, codes: plugin.codes) {
            if fallback != nil && !(user.concealsEnrollment && Self.revealsEnrollment.contains(unavailable.code)) {
                var message = Message.info(unavailable.code.summary)
                message.until = unavailable.retryAt
                conversation.tell(message)
            }
            return record(kind, 0, .skipped(unavailable), unavailable)
        }
        if options.interactionNotAllowed {
            let error = AuthenticationError(.notInteractive, "\(kind) needs the person, and interaction is not allowed")
            return record(kind, 0, .ended(error), error)
        }
        let label = label(before: fallback)
        var counted = 0
        var uncounted = 0
        while counted < attempts {
            let attempt = counted + uncounted + 1
            let request = AuthenticationRequest(
                user: user, reason: reason, attempt: attempt,
                attemptsAllowed: attempts, fallbackLabel: label,
                cancellation: cancellation)
            let verdict: Verdict
            do {
                verdict = try plugin.authenticate(request, conversation: conversation)
            } catch {
                let final = cancelled ?? error
                if fallback != nil, !final.code.stopsEvaluation, final.code != .userFallback {
                    conversation.tell(.error(final.spoken))
                }
                return record(kind, attempt, .ended(final), final)
            }
            if let cancelled { return record(kind, attempt, .ended(cancelled), cancelled) }
            switch verdict {
            case .success:
                return record(kind, attempt, .succeeded, nil)
            case .failure(let failure) where failure.countsAsAttempt:
                counted += 1
                _ = record(kind, attempt, .failed(failure), nil)
                // Without a fallback, the module's last word says the lock's own words (until when, what unlocks it).
                if let locked = sayFailure(of: kind, plugin, left: attempts - counted, sayingLock: fallback != nil) {
                    return record(kind, attempt, .ended(locked), locked)
                }
            case .failure(let failure):
                uncounted += 1
                _ = record(kind, attempt, .failed(failure), nil)
                if case .malformed(let why) = failure { conversation.tell(.error(why)) }
                if case .noSample(let why) = failure { conversation.tell(.error(why)) }
                if uncounted >= max(attempts, 3) {
                    let error = AuthenticationError(.authenticationFailed, "too many unusable \(kind) entries")
                    return record(kind, attempt, .exhausted, error)
                }
            }
        }
        let error = AuthenticationError(.authenticationFailed, "\(attempts) failed \(kind) attempts")
        return record(kind, counted + uncounted, .exhausted, error)
    }

    /// What the person hears after a counted failure of `kind` with `left` attempts left in this evaluation. The failure
    /// that triggers a lockout says so: no "attempts left", and no prompt whose answer would only be refused; it is
    /// returned, and its summary said when `sayingLock`.
    private func sayFailure(of kind: FactorKind, _ plugin: any Authenticator, left: Int, sayingLock: Bool)
        -> AuthenticationError?
    {
        if let locked = plugin.availability(for: user).error(for: kind, codes: plugin.codes), locked.code.isLockout {
            conversation.tell(.error("Not recognized."))
            if sayingLock {
                var message = Message.error(locked.code.summary)
                message.until = locked.retryAt
                conversation.tell(message)
            }
            return locked
        }
        conversation.tell(
            .error(left > 0 ? "Not recognized. \(left) \(left == 1 ? "attempt" : "attempts") left." : "Not recognized.")
        )
        return nil
    }

    private func record(
        _ kind: FactorKind, _ attempt: Int, _ outcome: Evaluation.Outcome,
        _ error: AuthenticationError?
    ) -> AuthenticationError? {
        steps.append(Evaluation.Step(factor: kind, attempt: attempt, outcome: outcome))
        return error
    }
}
