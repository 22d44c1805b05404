/// Walks a policy rule with one k-of-n mechanism, for both the capability check and the evaluation.
enum RuleCombinator {
    /// Decides what a factor step did: nil for success, or the error it ended with.
    /// `fallback` is the factor tried next if this one fails, if any.
    typealias Leaf = (_ factor: FactorKind, _ attempts: Int, _ fallback: FactorKind?) -> AuthenticationError?
    /// Decides what factors armed at once did (`first of`): nil for success, or the error it ended with.
    typealias Together = (_ members: [(factor: FactorKind, attempts: Int)], _ fallback: FactorKind?) ->
        AuthenticationError?

    /// Combines leaf results: nil when the rule is satisfied, otherwise the error that explains why not.
    ///
    /// Rules are tried in order. A success counts; a failure falls through to the next rule while the count can
    /// still be reached; an error that stops evaluation (cancel, store failure…) ends everything at once.
    /// The error reported is the last rule's when it is a lockout with a time to wait, else `.authenticationFailed`
    /// if any rule really failed to authenticate (with every such rule's reason, in order: "3 failed biometric
    /// attempts; then 3 failed passcode attempts"), otherwise the last rule's error (so "biometrics unavailable,
    /// passcode not set" reports `.passcodeNotSet`).
    /// Without `together`, `first of` is combined as `anyOf` of its factors: what could succeed is the same.
    /// A factor is offered as the next one to try (`fallback`) only when `offerable` says the person can use it: a
    /// person with no recovery codes is not told "Enter: use recovery". The first later alternative that is
    /// offerable is named, else the caller's own fallback.
    static func combine(
        _ rule: Policy.Rule, fallback: FactorKind? = nil, leaf: Leaf, together: Together? = nil,
        offerable: (FactorKind) -> Bool = { _ in true }
    ) -> AuthenticationError? {
        switch rule {
        case .factor(let kind, let attempts):
            return leaf(kind, attempts, fallback)
        case .firstOf(let rules):
            guard let together else {
                return combine(.atLeast(1, of: rules), fallback: fallback, leaf: leaf, offerable: offerable)
            }
            var members: [(factor: FactorKind, attempts: Int)] = []
            for case .factor(let kind, let attempts) in rules { members.append((kind, attempts)) }
            guard members.count == rules.count else {
                return AuthenticationError(.invalidPolicy, "rule \(rule) lists something other than factors")
            }
            return together(members, fallback)
        case .atLeast(let required, let rules):
            guard required >= 1, required <= rules.count else {
                return AuthenticationError(.invalidPolicy, "rule \(rule) can never be satisfied")
            }
            var successes = 0
            var errors: [AuthenticationError] = []
            for (index, child) in rules.enumerated() {
                let remainingAfter = rules.count - index - 1
                guard successes < required, successes + remainingAfter + 1 >= required else { break }
                let failureLeavesHope = successes + remainingAfter >= required
                var childFallback = fallback
                if failureLeavesHope {
                    for later in rules[(index + 1)...] {
                        if let next = later.factors.first, offerable(next) {
                            childFallback = next
                            break
                        }
                    }
                }
                if let error = combine(
                    child, fallback: childFallback, leaf: leaf, together: together, offerable: offerable)
                {
                    if error.code.stopsEvaluation { return error }
                    errors.append(error)
                } else {
                    successes += 1
                }
            }
            if successes >= required { return nil }
            return explain(errors) ?? AuthenticationError(.invalidPolicy, "rule \(rule) was not satisfied")
        }
    }

    /// The one error that explains why rules that ended with `errors` (in order) were not satisfied, or nil for none.
    static func explain(_ errors: [AuthenticationError]) -> AuthenticationError? {
        // A lockout at the end is what the person can act on ("try again after ..."), so it wins; so does one followed
        // only by alternatives the person does not have (a throttled code, then no recovery codes).
        if let at = errors.lastIndex(where: { [.throttled, .lockedOut].contains($0.code) }),
            errors[(at + 1)...].allSatisfy({ absent.contains($0.code) })
        {
            return errors[at]
        }
        let failed = errors.filter { $0.code == .authenticationFailed }
        if !failed.isEmpty {
            return AuthenticationError(.authenticationFailed, failed.map { $0.reason }.joined(separator: "; then "))
        }
        return errors.last
    }

    /// What a factor the person does not have ends with. Computed: a stored set would be lost at each unload of the
    /// module (docs/ARCHITECTURE.md §8).
    static var absent: Set<AuthenticationError.Code> { [.biometryNotEnrolled, .passcodeNotSet, .factorNotEnrolled] }
}
