public import KeywayConfig
public import KeywayCore

/// Where each account stands with a policy while it is rolled out: `keyway status --all` shows it, and `keyway doctor`
/// lists the accounts a stack would refuse (docs/GUIDE.md, "Rolling out a policy"). Pure: the accounts, what each has
/// enrolled and group membership are given.
public enum RollOut {
    /// One account's standing.
    public enum Standing: Sendable, Equatable {
        /// What it has enrolled can satisfy the policy.
        case ready
        /// It has none of the policy's factors, and `unenrolled = allow` (or `skip`) lets it through without one.
        case letThrough
        /// The module would refuse it: it lacks what the policy asks (`needs`, as the policy writes it).
        case refused(needs: String)
        /// The policy cannot be told for it (a group's membership could not be read, errors in the policy).
        case unknown(String)

        /// One word for the JSON and the table: ready, unenrolled, refused, unknown.
        public var word: String {
            switch self {
            case .ready: "ready"
            case .letThrough: "unenrolled"
            case .refused: "refused"
            case .unknown: "unknown"
            }
        }
    }

    /// The standing of `user`, who has `enrolled`, with the policy `name` of `configuration`, as the module would
    /// decide it with `unenrolled` its `unenrolled=` argument (nil: the policy's). `isMember(group)` answers the
    /// variants' groups.
    public static func standing(
        of user: String, enrolled: Set<FactorKind>, policy name: String, in configuration: Configuration,
        unenrolled argument: Configuration.Unenrolled? = nil,
        isMember: @escaping @Sendable (String) -> Result<Bool, AuthenticationError>
    ) -> Standing {
        guard configuration.unusable[name] == nil, let named = configuration.policy(named: name) else {
            return .unknown("policy '\(name)' has errors or is not defined")
        }
        let subject = Configuration.Subject(user: user, isRemote: false, isMember: isMember)
        let definition: Configuration.Definition
        switch configuration.definition(of: named, for: subject) {
        case .success(let found): definition = found
        case .failure(let error): return .unknown(error.reason)
        }
        let rule = definition.rule
        if rule.canSucceed(with: enrolled) { return .ready }
        let unenrolled = argument ?? definition.unenrolled ?? .conceal
        if unenrolled == .allow || unenrolled == .skip, enrolled.isDisjoint(with: rule.factors) { return .letThrough }
        return .refused(needs: Configuration.text(of: rule, attempts: false))
    }
}
