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
        RuleCombinator.combine(rule, fallback: fallback) { kind, attempts, next in
            runFactor(kind, attempts: attempts, fallback: next)
        }
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
        if let unavailable = plugin.availability(for: user).error(for: kind) {
            let revealsEnrollment: Set<AuthenticationError.Code> = [
                .biometryNotEnrolled, .passcodeNotSet, .factorNotEnrolled,
            ]
            if fallback != nil && !(user.concealsEnrollment && revealsEnrollment.contains(unavailable.code)) {
                conversation.tell(.info(unavailable.code.summary))
            }
            return record(kind, 0, .skipped(unavailable), unavailable)
        }
        if options.interactionNotAllowed {
            let error = AuthenticationError(.notInteractive, "\(kind) needs the person, and interaction is not allowed")
            return record(kind, 0, .ended(error), error)
        }
        let label =
            options.fallbackLabel.map { $0.isEmpty ? nil : $0 } ?? fallback.map { "Use \($0)" } ?? options.handoverLabel
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
                // The failure that triggers a lockout says so: no "attempts left", and no prompt whose answer
                // would only be refused. The lock's own words (until when, what unlocks it) come with the error.
                if let locked = plugin.availability(for: user).error(for: kind), locked.code.isLockout {
                    conversation.tell(.error("Not recognized."))
                    if fallback != nil { conversation.tell(.error(locked.code.summary)) }
                    return record(kind, attempt, .ended(locked), locked)
                }
                let left = attempts - counted
                conversation.tell(
                    .error(
                        left > 0
                            ? "Not recognized. \(left) \(left == 1 ? "attempt" : "attempts") left."
                            : "Not recognized."))
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

    private func record(
        _ kind: FactorKind, _ attempt: Int, _ outcome: Evaluation.Outcome,
        _ error: AuthenticationError?
    ) -> AuthenticationError? {
        steps.append(Evaluation.Step(factor: kind, attempt: attempt, outcome: outcome))
        return error
    }
}
