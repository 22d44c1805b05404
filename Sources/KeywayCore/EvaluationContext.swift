import Synchronization

/// A reusable evaluation context in the spirit of `LAContext`: options, a capability check, evaluation,
/// and `invalidate()`.
public final class EvaluationContext: Sendable {
    /// Options set before evaluating.
    public struct Options: Sendable, Equatable {
        /// Fail with `.notInteractive` instead of asking the person (LAContext.interactionNotAllowed).
        public var interactionNotAllowed = false
        /// The fallback label offered while another factor can follow; nil gives "Use <next factor>",
        /// an empty string offers no fallback.
        public var fallbackLabel: String?
        /// The label of the cancel action, for conversations that show one.
        public var cancelLabel: String?
        /// The way out offered where no factor of the policy follows ("Use password": the PAM stack's next module);
        /// choosing it ends the evaluation with `.userFallback`. nil offers nothing there.
        public var handoverLabel: String?

        /// Default options: interactive, default labels.
        public init(
            interactionNotAllowed: Bool = false, fallbackLabel: String? = nil, cancelLabel: String? = nil,
            handoverLabel: String? = nil
        ) {
            self.interactionNotAllowed = interactionNotAllowed
            self.fallbackLabel = fallbackLabel
            self.cancelLabel = cancelLabel
            self.handoverLabel = handoverLabel
        }
    }

    private struct State {
        var options: Options
        var invalidated = false
        var inFlight: [CancellationFlag] = []
    }

    private let registry: FactorRegistry
    private let state: Mutex<State>

    /// Creates a context over the given factor plugins.
    public init(registry: FactorRegistry, options: Options = Options()) {
        self.registry = registry
        self.state = Mutex(State(options: options))
    }

    /// The options; changing them affects later evaluations.
    public var options: Options {
        get { state.withLock { $0.options } }
        set { state.withLock { $0.options = newValue } }
    }

    /// Ends any in-flight evaluation with `.appCancel`; every later use fails with `.invalidContext`.
    public func invalidate() {
        let flags = state.withLock { state in
            state.invalidated = true
            return state.inFlight
        }
        for flag in flags { flag.cancel() }
    }

    /// True once `invalidate()` was called.
    public var isInvalidated: Bool { state.withLock { $0.invalidated } }

    /// Whether `policy` could succeed for `user` now, without prompting (LAContext.canEvaluatePolicy).
    /// Returns the error the evaluation would fail with at once, or nil.
    public func canEvaluate(_ policy: Policy, for user: UserContext) -> AuthenticationError? {
        if isInvalidated { return AuthenticationError(.invalidContext) }
        let problems = policy.problems(knownFactors: registry.factors)
        if !problems.isEmpty { return AuthenticationError(.invalidPolicy, problems.joined(separator: "; ")) }
        return RuleCombinator.combine(policy.rule) { kind, _, _ in
            guard let plugin = registry[kind] else { return AuthenticationError(.invalidPolicy) }
            return plugin.availability(for: user).error(for: kind, codes: plugin.codes)
        }
    }

    /// The biometry type of the registered biometric plugin for `user`, or `.none` (LAContext.biometryType).
    public func biometryType(for user: UserContext) -> BiometryType {
        guard let plugin = registry[.biometric] else { return .none }
        if case .available(let type) = plugin.availability(for: user) { return type }
        return .none
    }

    /// The domain state of the biometric enrollments of `user` (empty when none), to detect enrollment changes.
    public func domainState(for user: UserContext) throws(AuthenticationError) -> [UInt8] {
        guard let plugin = registry[.biometric] else { return [] }
        return try plugin.domainState(for: user.name)
    }

    /// Evaluates `policy` for `user`, talking through `conversation`. Never throws: the result says what happened,
    /// and it is a failure unless the policy was satisfied.
    public func evaluate(
        _ policy: Policy, for user: UserContext, reason: String,
        conversation: any Conversation
    ) -> Evaluation {
        var evaluation = Evaluation(policy: policy.name, user: user.name)
        let flag = CancellationFlag()
        let (invalidated, options) = state.withLock { state in
            if !state.invalidated { state.inFlight.append(flag) }
            return (state.invalidated, state.options)
        }
        defer { state.withLock { $0.inFlight.removeAll { $0 === flag } } }
        if invalidated {
            evaluation.error = AuthenticationError(.invalidContext)
            return evaluation
        }
        let problems = policy.problems(knownFactors: registry.factors)
        guard problems.isEmpty else {
            evaluation.error = AuthenticationError(.invalidPolicy, problems.joined(separator: "; "))
            return evaluation
        }
        let runner = PolicyRunner(
            registry: registry, user: user, reason: reason, options: options,
            cancellation: flag, conversation: conversation)
        let error = runner.run(policy.rule, fallbackTo: nil)
        evaluation.steps = runner.steps
        evaluation.error = flag.isCancelled ? AuthenticationError(.appCancel, "the context was invalidated") : error
        return evaluation
    }
}
