public import KeywayCore

/// Keyway's configuration: the factors' settings and the policies, built-in and configured, checked and compiled.
///
/// Built from `keyway.conf` and its drop-ins (read by `ConfigurationFiles` in KeywayConfigFiles, which checks who owns
/// them); this type knows no files, so the fuzzer and the tests drive it with text (docs/ARCHITECTURE.md §11).
public struct Configuration: Sendable {
    /// Where a policy applies: `when =`.
    public enum When: String, Sendable, CaseIterable { case local, remote, any }
    /// `mode =`: enforce the outcome, or only log it (a roll-out).
    public enum Mode: String, Sendable, CaseIterable { case enforce, audit }
    /// `unenrolled =`: what a user without the needed factors gets.
    public enum Unenrolled: String, Sendable, CaseIterable {
        /// Prompted like anyone, at the same cost, never a success: nobody learns who has enrolled.
        case conceal
        /// Fails at once, without a prompt.
        case fail
        /// PAM_IGNORE at once: the stack decides (a roll-out).
        case skip
        /// PAM_SUCCESS at once for an account that exists and has none of the policy's factors enrolled: a roll-out
        /// where Keyway is the only module asked (sshd after a key; google-authenticator's `nullok`). Never the
        /// default; the module logs every use (`outcome=allowed`), and `keyway doctor` warns while it is set.
        case allow
    }
    /// `failmode =` (Duo's word): what a stack gets while keywayd is not running.
    public enum FailMode: String, Sendable, CaseIterable {
        /// Refused (PAM_AUTHINFO_UNAVAIL), as any failure of Keyway itself: the default.
        case secure
        /// Let in without Keyway (PAM_SUCCESS), logged, only while keywayd is not running at all (no socket, or
        /// nobody listening on it): never when it is busy, slow, stopped or answers anything.
        case safe
    }
    /// `first-enrollment =`: who enrolls the first second factor (TOTP, recovery codes) of an account that has none.
    public enum FirstEnrollment: String, Sendable, CaseIterable {
        /// An administrator (root), or the person after proving a factor they have (the default).
        case root
        /// The person themselves, as themselves, while the account has no second factor: a roll-out where people
        /// enroll their own phone (keywayd checks it: `VaultService.selfService`). Only the first: any later one
        /// needs one the account has.
        case person = "self"
    }

    /// Where a value was set: `file:line`, or the default.
    public struct Origin: Sendable, Equatable, CustomStringConvertible {
        /// The file, or nil for a default or a built-in.
        public var file: String?
        /// The line in it.
        public var line: Int
        /// What stands in for a file: "default" or "built-in".
        public var missing: String

        /// A default.
        public static let defaulted = Origin(file: nil, line: 0, missing: "default")
        /// A built-in policy.
        public static let builtIn = Origin(file: nil, line: 0, missing: "built-in")

        /// Creates an origin.
        public init(file: String?, line: Int, missing: String) {
            self.file = file
            self.line = line
            self.missing = missing
        }

        public var description: String { file.map { "\($0):\(line)" } ?? missing }
    }

    /// Whom a variant is for: `[policy NAME for group G]` or `[policy NAME for user U]`.
    public struct Variant: Sendable, Equatable, CustomStringConvertible {
        /// `group` or `user`.
        public var kind: String
        /// The group's or user's name.
        public var name: String

        /// Creates a variant.
        public init(kind: String, name: String) {
            self.kind = kind
            self.name = name
        }

        public var description: String { "for \(kind) \(name)" }
    }

    /// One policy body, compiled: the base of a policy or one of its variants (with the base's keys it does not set).
    public struct Definition: Sendable {
        /// The policy's name.
        public var name: String
        /// The variant, or nil for the base.
        public var variant: Variant?
        /// The rule, with every factor's attempts resolved.
        public var rule: Policy.Rule
        /// `when =`.
        public var when: When = .any
        /// `mode =`.
        public var mode: Mode = .enforce
        /// `unenrolled =`, or nil when not set (the caller's default applies).
        public var unenrolled: Unenrolled?
        /// `first-enrollment =`, or nil when not set (root).
        public var firstEnrollment: FirstEnrollment?
        /// `failmode =`, or nil when not set (secure, unless the module's `failmode=` says).
        public var failMode: FailMode?
        /// Factor settings set for this policy only (`gesture.attempts = 5`).
        public var overrides: [FactorKind: FactorSettings] = [:]
        /// Where each key was set (`require`, `when`, `gesture.attempts`…).
        public var origins: [String: Origin] = [:]
        /// Where the section starts.
        public var origin: Origin
        /// Contexts in which the rule can never succeed ("remote: biometric does not serve remote sessions").
        public var impossible: [String] = []

        /// Creates a definition; the builder's, or one restored from a compiled form (ConfigurationCache).
        public init(
            name: String, variant: Variant? = nil, rule: Policy.Rule, when: When = .any, mode: Mode = .enforce,
            unenrolled: Unenrolled? = nil, firstEnrollment: FirstEnrollment? = nil, failMode: FailMode? = nil,
            overrides: [FactorKind: FactorSettings] = [:], origins: [String: Origin] = [:], origin: Origin,
            impossible: [String] = []
        ) {
            self.name = name
            self.variant = variant
            self.rule = rule
            self.when = when
            self.mode = mode
            self.unenrolled = unenrolled
            self.firstEnrollment = firstEnrollment
            self.failMode = failMode
            self.overrides = overrides
            self.origins = origins
            self.origin = origin
            self.impossible = impossible
        }

        /// The policy the engine evaluates.
        public var policy: Policy { Policy(name: name, rule: rule) }
    }

    /// A policy: its base and its variants in file order.
    public struct NamedPolicy: Sendable {
        /// The base.
        public var base: Definition
        /// The variants, in file order; the first that matches is used.
        public var variants: [Definition]
        /// True for the five built-ins.
        public var isBuiltIn: Bool

        /// Creates a policy from its definitions.
        public init(base: Definition, variants: [Definition], isBuiltIn: Bool) {
            self.base = base
            self.variants = variants
            self.isBuiltIn = isBuiltIn
        }
    }

    /// Who is authenticating, for variants and `when`.
    public struct Subject: Sendable {
        /// The account name.
        public var user: String
        /// True for a remote session (asked only when the definition that applies has a `when`: finding out reads
        /// /proc).
        public var isRemote: @Sendable () -> Bool
        /// Whether the account is a member of a group (asked only when a variant names one); a failure when that
        /// cannot be told, which fails the resolution closed rather than choosing a weaker variant.
        public var isMember: @Sendable (String) -> Result<Bool, AuthenticationError>

        /// Creates a subject whose session is known to be remote or not.
        public init(
            user: String, isRemote: Bool = false,
            isMember: @escaping @Sendable (String) -> Result<Bool, AuthenticationError> = { _ in .success(false) }
        ) {
            self.init(user: user, locate: { isRemote }, isMember: isMember)
        }

        /// Creates a subject whose session is located only if a `when` asks.
        public init(
            user: String, locate: @escaping @Sendable () -> Bool,
            isMember: @escaping @Sendable (String) -> Result<Bool, AuthenticationError> = { _ in .success(false) }
        ) {
            self.user = user
            self.isRemote = locate
            self.isMember = isMember
        }
    }

    /// A policy chosen for a subject: the definition that applies and the settings in effect.
    public struct Resolved: Sendable {
        /// The base or the variant that matched.
        public var definition: Definition
        /// The factors' settings: global, overlaid with the policy's.
        public var settings: SettingsBook
        /// The policy to evaluate.
        public var policy: Policy { definition.policy }
    }

    /// The plugins whose settings and factors the configuration uses.
    public let plugins: [FactorPlugin]
    /// The factors' global settings.
    public internal(set) var settings: SettingsBook
    /// Where each global setting was set, by `factor.key`.
    public internal(set) var settingOrigins: [String: Origin] = [:]
    /// Every policy: the built-ins first, then the configured ones in the order they first appear.
    public internal(set) var policies: [NamedPolicy] = []
    /// Problems that do not stop the configuration from being used.
    public internal(set) var warnings: [Diagnostic] = []
    /// Policies the files define that cannot be used, each with its errors (in its own section, a variant's, or a
    /// policy it names): a service naming one fails closed, and every other goes on (`resolve`). Not in `policies`.
    public internal(set) var unusable: [String: [Diagnostic]] = [:]

    /// The errors of the unusable policies, in file order: what `keyway policy check` reports and fails on.
    public var policyErrors: [Diagnostic] {
        unusable.values.flatMap { $0 }.sorted { ($0.file, $0.line, $0.column) < ($1.file, $1.line, $1.column) }
    }
    /// The files read, in order.
    public internal(set) var files: [String] = []

    /// The built-in policies: `Policy.builtIns`, then one per factor of `plugins` named as the factor (`totp`: that
    /// factor alone) where no built-in has its name, so every factor can be a stack's whole policy. Each comes with
    /// its rule and that rule as `require =` text without attempts, so that the factors' `attempts` settings apply to
    /// them too. They exist without any file and cannot be redefined.
    public static func builtInRules(plugins: [FactorPlugin]) -> [(name: String, require: String, rule: Policy.Rule)] {
        let named = Set(Policy.builtIns.map { $0.name })
        let alone = plugins.map { $0.kind }.sorted().filter { !named.contains($0.rawValue) }.map {
            Policy(name: $0.rawValue, rule: .factor($0, attempts: 3))
        }
        return (Policy.builtIns + alone).map { ($0.name, RuleSyntax.text(of: $0.rule, attempts: false), $0.rule) }
    }

    /// The built-ins and default settings only: what a system without `keyway.conf` has.
    public static func builtInsOnly(plugins: [FactorPlugin]) -> Configuration {
        switch parse([], plugins: plugins) {
        case .success(let configuration): return configuration
        case .failure: return Configuration(plugins: plugins, settings: SettingsBook())
        }
    }

    init(plugins: [FactorPlugin], settings: SettingsBook) {
        self.plugins = plugins
        self.settings = settings
    }

    /// A configuration compiled earlier, from its parts: what `ConfigurationCache` restores. Nothing is checked:
    /// the parts must come from `parse` with the same plugins.
    public init(
        restoring plugins: [FactorPlugin], settings: SettingsBook, settingOrigins: [String: Origin],
        policies: [NamedPolicy], warnings: [Diagnostic], files: [String], unusable: [String: [Diagnostic]] = [:]
    ) {
        self.unusable = unusable
        self.plugins = plugins
        self.settings = settings
        self.settingOrigins = settingOrigins
        self.policies = policies
        self.warnings = warnings
        self.files = files
    }

    /// Checks and compiles the sources, in order (the main file, then the drop-ins in name order). On failure,
    /// every error of every file, then the warnings.
    public static func parse(_ sources: [ConfigSource], plugins: [FactorPlugin]) -> Result<
        Configuration, ConfigurationProblems
    > {
        var builder = Builder(plugins: plugins)
        builder.read(sources)
        return builder.finish()
    }

    /// The policy named `name`.
    public func policy(named name: String) -> NamedPolicy? { policies.first { $0.base.name == name } }

    /// The policy `name` as it applies to `subject`: the first matching variant or the base, its `when` checked.
    public func resolve(_ name: String, for subject: Subject) -> Result<Resolved, AuthenticationError> {
        if let errors = unusable[name], let first = errors.first {
            return .failure(
                AuthenticationError(
                    .invalidPolicy,
                    "policy '\(name)' has errors, so it fails closed (other policies are used as usual): "
                        + first.headline + (errors.count > 1 ? " (and \(errors.count - 1) more)" : "")))
        }
        guard let named = policy(named: name) else {
            let known = policies.map { $0.base.name }.joined(separator: ", ")
            return .failure(AuthenticationError(.invalidPolicy, "unknown policy '\(name)'; the policies are \(known)"))
        }
        let definition: Definition
        switch self.definition(of: named, for: subject) {
        case .success(let found): definition = found
        case .failure(let error): return .failure(error)
        }
        switch definition.when {
        case .local where subject.isRemote():
            return .failure(
                AuthenticationError(
                    .notPermitted,
                    "policy '\(name)' applies to local sessions only (when = local), and this one is remote"))
        case .remote where !subject.isRemote():
            return .failure(
                AuthenticationError(
                    .notPermitted,
                    "policy '\(name)' applies to remote sessions only (when = remote), and this one is local"))
        case .local, .remote, .any:
            break
        }
        return .success(Resolved(definition: definition, settings: settings(for: definition)))
    }

    /// The definition of `named` that applies to `subject`: the first matching variant, or the base (`when` is not
    /// checked here). A group membership that cannot be told fails: never the weaker variant or base below it.
    public func definition(of named: NamedPolicy, for subject: Subject) -> Result<Definition, AuthenticationError> {
        let name = named.base.name
        // The first variant that matches, in order; a membership that cannot be told stops here (unknown means no:
        // never the weaker variant or base below it).
        var matched: Definition? = nil
        for variant in named.variants {
            guard let matcher = variant.variant else { continue }
            if matcher.kind == "user" {
                if matcher.name == subject.user {
                    matched = variant
                    break
                }
                continue
            }
            switch subject.isMember(matcher.name) {
            case .success(true):
                matched = variant
            case .success(false):
                continue
            case .failure(let error):
                return .failure(
                    AuthenticationError(
                        .invalidPolicy,
                        "policy '\(name)' has a variant for group \(matcher.name), and whether \(subject.user) is a "
                            + "member cannot be told (\(error.reason)); refusing rather than choosing another"))
            }
            break
        }
        return .success(matched ?? named.base)
    }

    /// Whether a policy that applies to `subject` lets the person enroll `factor` as their first second factor
    /// (`first-enrollment = self` in a policy whose rule names it). A policy with errors, or whose variant cannot be
    /// told, lets nobody.
    public func letsEnrollFirst(_ factor: FactorKind, for subject: Subject) -> Bool {
        policies.contains { named in
            guard unusable[named.base.name] == nil, case .success(let definition) = definition(of: named, for: subject)
            else { return false }
            return definition.firstEnrollment == .person && definition.rule.factors.contains(factor)
        }
    }

    /// The global settings overlaid with the definition's.
    public func settings(for definition: Definition) -> SettingsBook {
        Self.overlay(settings, with: definition.overrides, plugins: plugins)
    }

    /// `settings` with a policy's overrides in place of the values they set.
    static func overlay(
        _ settings: SettingsBook, with overrides: [FactorKind: FactorSettings], plugins: [FactorPlugin]
    ) -> SettingsBook {
        var book = settings
        for (factor, given) in overrides {
            guard let plugin = plugins.plugin(factor) else { continue }
            for setting in plugin.settings where given.isSet(setting.key) {
                book[factor].set(setting.key, given[setting])
            }
        }
        return book
    }

    /// The rule as `keyway policy show` prints it and `require =` reads it.
    public static func text(of rule: Policy.Rule, attempts: Bool = true) -> String {
        RuleSyntax.text(of: rule, attempts: attempts)
    }
}
