/// A named rule saying which factors must succeed: the built-in LocalAuthentication equivalents or a custom one.
public struct Policy: Sendable, Equatable, CustomStringConvertible {
    /// The name used in configuration and in `pam_keyway.so policy=NAME`.
    public var name: String
    /// What must succeed.
    public var rule: Rule

    /// Creates a policy.
    public init(name: String, rule: Rule) {
        self.name = name
        self.rule = rule
    }

    /// What must succeed. Any-of and all-of are both `atLeast`: one general k-of-n rule.
    public indirect enum Rule: Sendable, Equatable, CustomStringConvertible {
        /// One factor, with at most `attempts` counted failures in one evaluation.
        case factor(FactorKind, attempts: Int)
        /// At least `count` of the rules, tried in order; a failed, unavailable or declined rule falls through
        /// to the next while `count` can still be reached.
        case atLeast(Int, of: [Rule])
        /// Every listed factor armed at once, the first to succeed wins: a sensor waits while the prompt for a typed
        /// factor does (docs/ARCHITECTURE.md §14). The members are factors, at least two, each once, at most one of
        /// them typed; each counts its own failures. For what could succeed it is `anyOf` of the same factors.
        case firstOf([Rule])

        /// The first rule that succeeds, tried in order (the fallback order).
        public static func anyOf(_ rules: [Rule]) -> Rule { .atLeast(1, of: rules) }
        /// Every rule, in order.
        public static func allOf(_ rules: [Rule]) -> Rule { .atLeast(rules.count, of: rules) }

        public var description: String {
            switch self {
            case .factor(let kind, let attempts):
                return "\(kind)×\(attempts)"
            case .atLeast(let count, let rules):
                let list = rules.map { $0.description }.joined(separator: ", ")
                if count == 1 { return "any-of(\(list))" }
                if count == rules.count { return "all-of(\(list))" }
                return "\(count)-of(\(list))"
            case .firstOf(let rules):
                return "first-of(\(rules.map { $0.description }.joined(separator: ", ")))"
            }
        }

        /// Every factor the rule mentions, in order of first appearance.
        public var factors: [FactorKind] {
            switch self {
            case .factor(let kind, _):
                return [kind]
            case .atLeast(_, let rules), .firstOf(let rules):
                var seen: [FactorKind] = []
                for kind in rules.flatMap({ $0.factors }) where !seen.contains(kind) { seen.append(kind) }
                return seen
            }
        }

        /// Whether the rule can succeed for an account holding `enrolled`: a factor not enrolled never does. What
        /// `keyway status --all` and `keyway doctor` call ready.
        public func canSucceed(with enrolled: Set<FactorKind>) -> Bool {
            switch self {
            case .factor(let kind, _):
                return enrolled.contains(kind)
            case .atLeast(let count, let rules):
                return rules.filter { $0.canSucceed(with: enrolled) }.count >= count
            case .firstOf(let rules):
                return rules.contains { $0.canSucceed(with: enrolled) }
            }
        }
    }

    /// Why the policy can never succeed with the given factors, or an empty list when it can.
    /// An empty or unsatisfiable policy fails closed; this says why before anyone is prompted.
    public func problems(knownFactors: Set<FactorKind>) -> [String] {
        Self.problems(of: rule, knownFactors: knownFactors, path: name)
    }

    private static func problems(of rule: Rule, knownFactors: Set<FactorKind>, path: String) -> [String] {
        switch rule {
        case .factor(let kind, let attempts):
            var found: [String] = []
            if !knownFactors.contains(kind) { found.append("\(path): no plugin provides the factor '\(kind)'") }
            if attempts < 1 { found.append("\(path): '\(kind)' allows \(attempts) attempts; it needs at least 1") }
            return found
        case .atLeast(let count, let rules):
            var found: [String] = []
            if rules.isEmpty {
                found.append("\(path): the rule lists no factors")
            } else if count < 1 {
                found.append("\(path): a rule must require at least one factor, not \(count)")
            } else if count > rules.count {
                found.append("\(path): requires \(count) factors but lists only \(rules.count)")
            }
            for (index, child) in rules.enumerated() {
                found += problems(of: child, knownFactors: knownFactors, path: "\(path)[\(index + 1)]")
            }
            return found
        case .firstOf(let rules):
            var found: [String] = []
            var seen: [FactorKind] = []
            for (index, child) in rules.enumerated() {
                guard case .factor(let kind, _) = child else {
                    found.append("\(path)[\(index + 1)]: 'first of' lists factors, not rules")
                    continue
                }
                if seen.contains(kind) { found.append("\(path): '\(kind)' is listed twice in 'first of'") }
                seen.append(kind)
                found += problems(of: child, knownFactors: knownFactors, path: "\(path)[\(index + 1)]")
            }
            if rules.count < 2 { found.append("\(path): 'first of' lists at least two factors") }
            return found
        }
    }

    public var description: String { "\(name): \(rule)" }
}

// The built-ins are computed, not stored: a stored `static let` would be process-global state that outlives
// `pam_end` in every host (docs/ARCHITECTURE.md §8), and its indirect-enum boxes,
// reached only through spare-bit-tagged pointers, were the 64 bytes valgrind reported as "definitely lost".
extension Policy {
    /// LocalAuthentication's `deviceOwnerAuthenticationWithBiometrics`: the sensor only. Not available,
    /// not enrolled and locked out fail at once with their own codes; the fallback returns `.userFallback`.
    public static var biometricsOnly: Policy {
        Policy(name: "biometrics-only", rule: .factor(.biometric, attempts: 3))
    }

    /// LocalAuthentication's `deviceOwnerAuthentication`: the sensor, or the passcode. An unusable sensor goes
    /// straight to the passcode, and a passcode success also clears the biometric lockout.
    public static var biometricsOrPasscode: Policy {
        Policy(
            name: "biometrics-or-passcode",
            rule: .anyOf([.factor(.biometric, attempts: 3), .factor(.passcode, attempts: 3)]))
    }

    /// The pattern alone, 3 tries per evaluation: `sudo` with a pattern.
    public static var pattern: Policy { Policy(name: "pattern", rule: .factor(.gesture, attempts: 3)) }

    /// The passcode alone, 3 tries per evaluation.
    public static var passcode: Policy { Policy(name: "passcode", rule: .factor(.passcode, attempts: 3)) }

    /// The pattern, or the passcode when the pattern fails, is locked or is not set.
    public static var patternOrPasscode: Policy {
        Policy(
            name: "pattern-or-passcode",
            rule: .anyOf([.factor(.gesture, attempts: 3), .factor(.passcode, attempts: 3)]))
    }

    /// The policies every installation has.
    public static var builtIns: [Policy] {
        [.biometricsOnly, .biometricsOrPasscode, .pattern, .passcode, .patternOrPasscode]
    }

    /// The built-in policy with this name, if any.
    public static func builtIn(named name: String) -> Policy? { builtIns.first { $0.name == name } }
}
