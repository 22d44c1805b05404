import KeywayCore

/// Reads INI sections into a `Configuration`: checks every key and value against what the plugins declare, then
/// compiles every policy's rule. Collects every problem instead of stopping at the first.
struct Builder {
    /// The most policies, and variants of one policy, a configuration may define.
    static let maximumPolicies = 256
    static let maximumVariants = 32

    /// One logical section: a factor's, a policy's base, or a variant, continued across files.
    struct Body {
        var words: [String]
        var place: Place
        /// The values by key, with where each was set (a later file's value replaces an earlier one).
        var entries: [String: INI.Entry] = [:]
        /// The keys in the order they were first set.
        var order: [String] = []
    }

    let plugins: [FactorPlugin]
    /// The built-in policies' rules, as text: `Policy.builtIns` and one per factor (`Configuration.builtInRules`).
    let builtInRules: [(name: String, require: String, rule: Policy.Rule)]
    var diagnostics: [Diagnostic] = []
    var settings = SettingsBook()
    var settingOrigins: [String: Configuration.Origin] = [:]
    var bodies: [String: Body] = [:]
    var bodyOrder: [String] = []
    var files: [String] = []
    /// Errors of the files' form (a line that is not `key = value`, a header without its `]`): they are nobody's,
    /// so they fail the whole configuration (`finish`).
    var syntax: [Diagnostic] = []
    /// Where each section starts, and the policy it is of (nil for a factor's section, or a header naming none):
    /// an error inside a policy's section is that policy's alone (`finish`).
    var sectionStarts: [(file: String, line: Int, policy: String?)] = []
    /// The policies each policy's rule names, as compiling found them.
    var references: [String: [String]] = [:]

    // Compilation state.
    var compiled: [String: Policy.Rule] = [:]
    var policyBodies: [String: Body] = [:]

    init(plugins: [FactorPlugin]) {
        self.plugins = plugins
        builtInRules = Configuration.builtInRules(plugins: plugins)
    }

    var factorNames: [String] { plugins.map { $0.kind.rawValue } }
}
