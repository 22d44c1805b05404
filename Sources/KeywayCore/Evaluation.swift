/// What one policy evaluation did: the outcome and every step that led to it, for PAM logs and the CLI.
public struct Evaluation: Sendable, Equatable, CustomStringConvertible {
    /// The policy evaluated.
    public var policy: String
    /// The user.
    public var user: String
    /// Why it failed, or nil when it succeeded. Starts as a failure: only a completed success clears it.
    public var error: AuthenticationError? = AuthenticationError(.internalFailure, "the evaluation did not finish")
    /// The steps, in order.
    public var steps: [Step] = []

    /// Creates an unfinished (failed) evaluation.
    public init(policy: String, user: String) {
        self.policy = policy
        self.user = user
    }

    /// True only when the policy was satisfied.
    public var succeeded: Bool { error == nil }

    /// The factors that were actually attempted, in order of first use.
    public var factorsUsed: [FactorKind] {
        var used: [FactorKind] = []
        for step in steps where step.outcome.wasAttempted && !used.contains(step.factor) { used.append(step.factor) }
        return used
    }

    /// One line for syslog: user, policy, outcome, steps. Never a secret.
    public var description: String {
        let outcome = error.map { "failure(\($0.code.rawValue))" } ?? "success"
        let trail = steps.map { $0.description }.joined(separator: ", ")
        let why = error.map { " reason=\"\($0.reason)\"" } ?? ""
        return "user=\(user) policy=\(policy) outcome=\(outcome) steps=[\(trail)]\(why)"
    }

    /// One thing that happened to one factor.
    public struct Step: Sendable, Equatable, CustomStringConvertible {
        /// The factor.
        public var factor: FactorKind
        /// The attempt number within the evaluation (0 when the factor was not attempted).
        public var attempt: Int
        /// What happened.
        public var outcome: Outcome

        /// Creates a step.
        public init(factor: FactorKind, attempt: Int, outcome: Outcome) {
            self.factor = factor
            self.attempt = attempt
            self.outcome = outcome
        }

        public var description: String { "\(factor)#\(attempt):\(outcome)" }
    }

    /// What happened in a step.
    public enum Outcome: Sendable, Equatable, CustomStringConvertible {
        /// Verified.
        case succeeded
        /// Not verified, and why.
        case failed(Verdict.Failure)
        /// The factor could not be used (not enrolled, locked, unavailable), so it was skipped.
        case skipped(AuthenticationError)
        /// The factor ended with an error (cancel, fallback, lockout reached mid-evaluation).
        case ended(AuthenticationError)
        /// The factor used up its attempts.
        case exhausted

        /// True when the person was actually asked for this factor.
        public var wasAttempted: Bool {
            if case .skipped = self { false } else { true }
        }

        public var description: String {
            switch self {
            case .succeeded: "succeeded"
            case .failed(.mismatch): "mismatch"
            case .failed(.repeatedMismatch): "repeated-mismatch"
            case .failed(.malformed): "malformed"
            case .failed(.noSample): "no-sample"
            case .failed(.notEnrolled): "not-enrolled"
            case .skipped(let error): "skipped(\(error.code.rawValue))"
            case .ended(let error): "ended(\(error.code.rawValue))"
            case .exhausted: "attempts-exhausted"
            }
        }
    }
}
