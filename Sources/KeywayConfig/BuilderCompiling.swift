import KeywayCore

/// Checking and compiling (`finish`): the factors' sections checked against what the plugins declare, every policy
/// and variant defined and its rule compiled against the others, and the problems sorted into what fails the whole
/// configuration and what fails one policy.
extension Builder {
    mutating func finish() -> Result<Configuration, ConfigurationProblems> {
        var configuration = Configuration(plugins: plugins, settings: SettingsBook())
        // Factor sections first: policies read the global settings (attempts) when compiling.
        for identity in bodyOrder where !identity.hasPrefix("policy ") {
            readFactorSection(bodies[identity]!)
        }
        configuration.settings = settings
        configuration.settingOrigins = settingOrigins

        var policyNames: [String] = []
        for identity in bodyOrder where identity.hasPrefix("policy ") {
            let body = bodies[identity]!
            if body.words.count == 2 {
                policyNames.append(body.words[1])
                policyBodies[body.words[1]] = body
            }
        }
        if policyNames.count > Self.maximumPolicies {
            let extra = policyBodies[policyNames[Self.maximumPolicies]]!
            diagnostics.append(extra.place.error("more than \(Self.maximumPolicies) policies are defined"))
        }

        for (name, require, builtIn) in builtInRules {
            let place = Place(file: "built-in", line: 0, column: 1, length: 1, text: require)
            var definition = Configuration.Definition(name: name, rule: Self.unsatisfiable, origin: .builtIn)
            definition.origins["require"] = .builtIn
            if let rule = compile(RuleSyntax.node(of: builtIn, at: place), in: name, overrides: [:], stack: [name]) {
                definition.rule = rule
                definition.impossible = impossibleContexts(rule, when: .any, settings: settings)
                configuration.policies.append(.init(base: definition, variants: [], isBuiltIn: true))
            }
        }
        var defined: [String: Int] = [:]
        for name in policyNames.prefix(Self.maximumPolicies) {
            guard let definition = define(name, body: policyBodies[name]!, base: nil) else { continue }
            defined[name] = configuration.policies.count
            configuration.policies.append(.init(base: definition, variants: [], isBuiltIn: false))
        }
        // Variants, in file order.
        for identity in bodyOrder where identity.hasPrefix("policy ") {
            let body = bodies[identity]!
            guard body.words.count == 5 else { continue }
            let name = body.words[1]
            guard let base = policyBodies[name] else {
                diagnostics.append(
                    body.place.error(
                        "a variant of policy '\(name)', which is not defined",
                        help: Suggest.help(name, in: policyNames).map {
                            "\($0) Otherwise define [policy \(name)] first."
                        }
                            ?? "define [policy \(name)] first"))
                continue
            }
            guard let index = defined[name] else { continue }  // the base had errors, already reported
            guard configuration.policies[index].variants.count < Self.maximumVariants else {
                diagnostics.append(body.place.error("policy '\(name)' has more than \(Self.maximumVariants) variants"))
                continue
            }
            var merged = base
            merged.place = body.place
            for key in body.order {
                if merged.entries[key] == nil { merged.order.append(key) }
                merged.entries[key] = body.entries[key]
            }
            let variant = Configuration.Variant(kind: body.words[3], name: body.words[4])
            guard var definition = define(name, body: merged, base: variant) else { continue }
            definition.origin = Self.origin(body.place)
            configuration.policies[index].variants.append(definition)
        }
        configuration.files = files
        let errors = syntax.filter { $0.severity == .error } + diagnostics.filter { $0.severity == .error }
        let warnings = syntax.filter { $0.severity == .warning } + diagnostics.filter { $0.severity == .warning }
        // An error inside a policy's section (or a variant's) is that policy's: it, and every policy that names it,
        // cannot be used, and everything else can. Any other error fails the whole configuration, closed.
        var unusable: [String: [Diagnostic]] = [:]
        var anyone: [Diagnostic] = syntax.filter { $0.severity == .error }
        for error in diagnostics where error.severity == .error {
            if let policy = owner(of: error) {
                unusable[policy, default: []].append(error)
            } else {
                anyone.append(error)
            }
        }
        guard anyone.isEmpty else { return .failure(ConfigurationProblems(sorted(errors) + sorted(warnings))) }
        var spreading = true
        while spreading {
            spreading = false
            for name in policyNames where unusable[name] == nil {
                guard let broken = references[name, default: []].first(where: { unusable[$0] != nil }),
                    let body = policyBodies[name]
                else { continue }
                let place = body.entries["require"]?.valuePlace ?? body.place
                unusable[name] = [place.error("policy '\(name)' names policy '\(broken)', which has errors")]
                spreading = true
            }
        }
        configuration.policies.removeAll { unusable[$0.base.name] != nil }
        configuration.unusable = unusable.mapValues { sorted($0) }
        configuration.warnings = warnings
        return .success(configuration)
    }

    /// The policy whose section `diagnostic` is in (the last section to start at or before its line in its file),
    /// or nil when it is in no policy's.
    func owner(of diagnostic: Diagnostic) -> String? {
        var found: String? = nil
        for start in sectionStarts where start.file == diagnostic.file && start.line <= diagnostic.line {
            found = start.policy
        }
        return found
    }

    /// In file order, then line and column: how a person reads them.
    func sorted(_ list: [Diagnostic]) -> [Diagnostic] {
        func rank(_ file: String) -> Int { files.firstIndex(of: file) ?? files.count }
        return list.enumerated().sorted { a, b in
            let left = (rank(a.element.file), a.element.line, a.element.column, a.offset)
            let right = (rank(b.element.file), b.element.line, b.element.column, b.offset)
            return left < right
        }.map { $0.element }
    }

    static func origin(_ place: Place) -> Configuration.Origin {
        Configuration.Origin(file: place.file, line: place.line, missing: "")
    }

    mutating func readFactorSection(_ body: Body) {
        let factor = FactorKind(rawValue: body.words[0])
        guard let plugin = plugins.plugin(factor) else { return }
        var values = settings[factor]
        for key in body.order {
            let entry = body.entries[key]!
            guard let setting = plugin.setting(key) else {
                diagnostics.append(
                    entry.keyPlace.error(
                        "unknown setting '\(key)' for \(factor)",
                        help: Suggest.help(key, in: plugin.settings.map { $0.key })
                            ?? "\(factor) settings are \(Setting.list(plugin.settings.map { $0.key }))"))
                continue
            }
            switch setting.parse(entry.value) {
            case .success(let value):
                values.set(key, value)
                settingOrigins["\(factor).\(key)"] = Self.origin(entry.keyPlace)
            case .failure(let problem):
                diagnostics.append(entry.valuePlace.error(problem.message))
            }
        }
        settings[factor] = values
    }

    /// A definition's rule until its `require =` compiles: one that nothing satisfies, so a definition whose rule
    /// never compiled could only fail closed.
    static var unsatisfiable: Policy.Rule { .atLeast(1, of: []) }

    /// Checks one policy body's keys and compiles its rule; nil when it has errors (reported).
    mutating func define(_ name: String, body: Body, base variant: Configuration.Variant?) -> Configuration.Definition?
    {
        let before = diagnostics.count
        var definition = Configuration.Definition(
            name: name, variant: variant, rule: Self.unsatisfiable, origin: Self.origin(body.place))
        var requireEntry: INI.Entry? = nil
        for key in body.order {
            let entry = body.entries[key]!
            definition.origins[key] = Self.origin(entry.keyPlace)
            switch key {
            case "require":
                requireEntry = entry
            case "when":
                if let value = choice(entry, Configuration.When.self) { definition.when = value }
            case "mode":
                if let value = choice(entry, Configuration.Mode.self) { definition.mode = value }
            case "unenrolled":
                if let value = choice(entry, Configuration.Unenrolled.self) { definition.unenrolled = value }
            case "first-enrollment":
                if let value = choice(entry, Configuration.FirstEnrollment.self) { definition.firstEnrollment = value }
            case "failmode":
                if let value = choice(entry, Configuration.FailMode.self) { definition.failMode = value }
            default:
                readOverride(entry, into: &definition)
            }
        }
        guard let requireEntry else {
            diagnostics.append(
                body.place.error(
                    "policy '\(name)' has no 'require =' line",
                    help: "say what must succeed, e.g. require = gesture or passcode"))
            return nil
        }
        let keysHaveErrors = diagnostics.count != before
        switch RuleSyntax.parse(requireEntry.value, at: requireEntry.valuePlace) {
        case .failure(let problem):
            diagnostics.append(problem)
            return nil
        case .success(let node):
            guard let rule = compile(node, in: name, overrides: definition.overrides, stack: [name]), !keysHaveErrors
            else { return nil }
            if let repeated = Self.repeatedFactor(in: rule) {
                diagnostics.append(
                    requireEntry.valuePlace.error(
                        "the factor '\(repeated)' appears more than once in the rule of policy '\(name)'",
                        help:
                            "a factor counts once: name it in one place (a policy used as a term brings its factors too)"
                    ))
                return nil
            }
            definition.rule = rule
            definition.impossible = impossibleContexts(
                rule, when: definition.when,
                settings: Configuration.overlay(settings, with: definition.overrides, plugins: plugins))
            let possible = Self.contexts(definition.when).count > definition.impossible.count
            if !possible {
                diagnostics.append(
                    requireEntry.valuePlace.error(
                        "policy '\(name)'\(variant.map { " \($0)" } ?? "") can never succeed: "
                            + definition.impossible.joined(separator: "; ")))
                return nil
            }
            for reason in definition.impossible {
                diagnostics.append(requireEntry.valuePlace.warning("policy '\(name)' cannot succeed in a \(reason)"))
            }
        }
        return definition
    }

    /// `entry`'s value as one of `T`'s choices, or nil once it is reported as none of them.
    mutating func choice<T: RawRepresentable<String> & CaseIterable>(_ entry: INI.Entry, _: T.Type) -> T? {
        guard let value = T(rawValue: entry.value) else {
            badChoice(entry, T.allCases.map { $0.rawValue })
            return nil
        }
        return value
    }

    mutating func badChoice(_ entry: INI.Entry, _ choices: [String]) {
        diagnostics.append(
            entry.valuePlace.error(
                "'\(entry.value)' is not valid for \(entry.key): expected \(Setting.list(choices))",
                help: Suggest.help(entry.value, in: choices)))
    }

    /// `factor.key = value` in a policy.
    mutating func readOverride(_ entry: INI.Entry, into definition: inout Configuration.Definition) {
        let policyKeys = ["require", "when", "mode", "unenrolled", "first-enrollment", "failmode"]
        let parts = entry.key.split(separator: ".", maxSplits: 1).map(String.init)
        guard parts.count == 2, let plugin = plugins.plugin(FactorKind(rawValue: parts[0])) else {
            let overridable = plugins.flatMap { plugin in
                plugin.settings.filter { $0.perPolicy }.map { "\(plugin.kind).\($0.key)" }
            }
            diagnostics.append(
                entry.keyPlace.error(
                    "unknown key '\(entry.key)' in a policy",
                    help: Suggest.help(entry.key, in: policyKeys + overridable)
                        ?? "a policy takes \(Setting.list(policyKeys)), and factor settings such as gesture.attempts"))
            return
        }
        guard let setting = plugin.setting(parts[1]) else {
            diagnostics.append(
                entry.keyPlace.error(
                    "unknown setting '\(parts[1])' for \(plugin.kind)",
                    help: Suggest.help(parts[1], in: plugin.settings.map { $0.key }).map { $0 }))
            return
        }
        guard setting.perPolicy else {
            diagnostics.append(
                entry.keyPlace.error(
                    "\(plugin.kind).\(setting.key) cannot be set per policy",
                    help: "set it in the [\(plugin.kind)] section; it applies to every policy"))
            return
        }
        switch setting.parse(entry.value) {
        case .success(let value): definition.overrides[plugin.kind, default: FactorSettings()].set(setting.key, value)
        case .failure(let problem): diagnostics.append(entry.valuePlace.error(problem.message))
        }
    }

    /// Compiles a parsed rule: names resolved (factors, then policies), attempts filled in, K checked.
    mutating func compile(
        _ node: RuleSyntax.Node, in policy: String, overrides: [FactorKind: FactorSettings], stack: [String]
    ) -> Policy.Rule? {
        switch node {
        case .name(let word, let attempts, let place):
            if let plugin = plugins.plugin(FactorKind(rawValue: word)) {
                let limit = plugin.setting("attempts") ?? Setting.attempts()
                let count =
                    attempts
                    ?? (overrides[plugin.kind].map { $0.integer(limit) } ?? settings[plugin.kind].integer(limit))
                guard case .integer(let range) = limit.kind, range.contains(count) else {
                    diagnostics.append(place.error("\(word)*\(count): attempts must be from 1 to 20"))
                    return nil
                }
                return .factor(plugin.kind, attempts: count)
            }
            let isPolicy = policyBodies[word] != nil || builtInRules.contains { $0.name == word }
            if isPolicy { references[policy, default: []].append(word) }
            guard isPolicy else {
                let policies = builtInRules.map { $0.name } + Array(policyBodies.keys).sorted()
                let near = Suggest.nearest(word, in: factorNames + policies)
                let what = near.map { factorNames.contains($0) ? "factor" : "policy" } ?? "factor or policy"
                diagnostics.append(
                    place.error(
                        "unknown \(what) '\(word)'",
                        help: near.map { "did you mean '\($0)'?" }
                            ?? "the factors are \(Setting.list(factorNames)); `keyway policy list` shows the policies"))
                return nil
            }
            if attempts != nil {
                diagnostics.append(
                    place.error(
                        "'*N' counts a factor's attempts; '\(word)' is a policy",
                        help: "set attempts in the policy '\(word)' itself"))
                return nil
            }
            if stack.contains(word) {
                var cycle = place.error(
                    "policy '\(stack[0])' refers to itself: \((stack + [word]).joined(separator: " → "))",
                    help: "a rule may use another policy only if that policy does not use it back")
                cycle.isCycle = true
                diagnostics.append(cycle)
                return nil
            }
            if let rule = compiled[word] { return rule }
            let rule: Policy.Rule?
            var cycle = false
            if let body = policyBodies[word] {
                guard let entry = body.entries["require"],
                    case .success(let inner) = RuleSyntax.parse(entry.value, at: entry.valuePlace)
                else { return nil }  // reported where that policy is defined
                var local: [FactorKind: FactorSettings] = [:]
                for key in body.order where key.contains(".") {
                    let parts = key.split(separator: ".", maxSplits: 1).map(String.init)
                    guard parts.count == 2, let plugin = plugins.plugin(FactorKind(rawValue: parts[0])),
                        let setting = plugin.setting(parts[1]), setting.perPolicy,
                        case .success(let value) = setting.parse(body.entries[key]!.value)
                    else { continue }
                    local[plugin.kind, default: FactorSettings()].set(setting.key, value)
                }
                (rule, cycle) = quietly { builder in
                    builder.compile(inner, in: word, overrides: local, stack: stack + [word])
                }
            } else {
                let builtIn = builtInRules.first { $0.name == word }!
                let place = Place(file: "built-in", line: 0, column: 1, length: 1, text: builtIn.require)
                rule = compile(
                    RuleSyntax.node(of: builtIn.rule, at: place), in: word, overrides: [:], stack: stack + [word])
            }
            if let rule { compiled[word] = rule }
            if rule == nil && !cycle {
                diagnostics.append(
                    place.error("policy '\(word)' has errors of its own, reported where it is defined"))
            }
            return rule
        case .atLeast(let count, let nodes, let place):
            var rules: [Policy.Rule] = []
            var failed = false
            for child in nodes {
                if let rule = compile(child, in: policy, overrides: overrides, stack: stack) {
                    rules.append(rule)
                } else {
                    failed = true
                }
            }
            guard count >= 1, count <= nodes.count else {
                let help = "K of (…) needs K from 1 to the number of terms listed (\(nodes.count))"
                diagnostics.append(
                    place.error(
                        count < 1
                            ? "'\(count) of' requires nothing"
                            : "'\(count) of' lists only \(nodes.count) term\(nodes.count == 1 ? "" : "s")",
                        help: help))
                return nil
            }
            return failed ? nil : .atLeast(count, of: rules)
        case .firstOf(let nodes, let place):
            return compileFirstOf(nodes, at: place, in: policy, overrides: overrides, stack: stack)
        }
    }

    /// `first of (…)`: factors only, at least two, each once, and at most one typed at the prompt (the others wait
    /// in the background), so that one prompt can ask for all of them (docs/ARCHITECTURE.md §14).
    mutating func compileFirstOf(
        _ nodes: [RuleSyntax.Node], at place: Place, in policy: String, overrides: [FactorKind: FactorSettings],
        stack: [String]
    ) -> Policy.Rule? {
        var rules: [Policy.Rule] = []
        var failed = false
        var typed: [FactorKind] = []
        for node in nodes {
            guard case .name(let word, _, let spot) = node, plugins.plugin(FactorKind(rawValue: word)) != nil else {
                let spot: Place
                switch node {
                case .name(_, _, let at), .atLeast(_, _, let at), .firstOf(_, let at): spot = at
                }
                diagnostics.append(
                    spot.error(
                        "'first of' lists factors, not rules or policies",
                        help: "write the factors themselves, e.g. first of (biometric, gesture)"))
                failed = true
                continue
            }
            guard case .factor(let kind, let attempts)? = compile(node, in: policy, overrides: overrides, stack: stack)
            else {
                failed = true
                continue
            }
            if rules.contains(where: { $0.factors == [kind] }) {
                diagnostics.append(spot.error("'\(word)' is listed twice in 'first of'"))
                failed = true
                continue
            }
            if plugins.plugin(kind)?.input == .typed { typed.append(kind) }
            rules.append(.factor(kind, attempts: attempts))
        }
        if nodes.count < 2 {
            diagnostics.append(
                place.error("'first of' lists at least two factors", help: "a single factor needs no 'first of'"))
            return nil
        }
        if typed.count > 1 {
            diagnostics.append(
                place.error(
                    "'first of' can wait for one typed factor at most (\(typed.map { $0.rawValue }.joined(separator: " and ")) "
                        + "are both typed)",
                    help: "one prompt cannot tell a pattern from a passcode; write 'first of (biometric, gesture) or "
                        + "passcode'"))
            return nil
        }
        return failed ? nil : .firstOf(rules)
    }

    /// Runs `body` and drops the diagnostics it adds: a referenced policy's own errors are reported once, where it
    /// is defined.
    /// True with the rule when the errors included a cycle, which is kept.
    mutating func quietly(_ body: (inout Builder) -> Policy.Rule?) -> (Policy.Rule?, Bool) {
        let before = diagnostics.count
        let rule = body(&self)
        guard diagnostics.count > before else { return (rule, false) }
        let cycle = diagnostics[before...].first { $0.isCycle }
        diagnostics.removeSubrange(before...)
        if let cycle { diagnostics.append(cycle) }
        return (rule, cycle != nil)
    }

    /// The first factor named twice in the rule.
    static func repeatedFactor(in rule: Policy.Rule) -> FactorKind? {
        var seen: [FactorKind] = []
        func walk(_ rule: Policy.Rule) -> FactorKind? {
            switch rule {
            case .factor(let kind, _):
                if seen.contains(kind) { return kind }
                seen.append(kind)
                return nil
            case .atLeast(_, let rules), .firstOf(let rules):
                for child in rules { if let repeated = walk(child) { return repeated } }
                return nil
            }
        }
        return walk(rule)
    }

    static func contexts(_ when: Configuration.When) -> [Bool] {
        switch when {
        case .local: [false]
        case .remote: [true]
        case .any: [false, true]
        }
    }

    /// The contexts `when` allows in which the rule cannot be satisfied, each with why.
    func impossibleContexts(_ rule: Policy.Rule, when: Configuration.When, settings: SettingsBook) -> [String] {
        var reasons: [String] = []
        for remote in Self.contexts(when) where remote {
            // Only the rule's own factors can make it unsatisfiable, so only theirs are asked (the module compiles
            // every policy on every call).
            let factors = rule.factors
            let unusable = plugins.filter { plugin in
                factors.contains(plugin.kind) && !plugin.servesRemoteSessions(settings[plugin.kind])
            }.map { $0.kind }
            if !Self.satisfiable(rule, without: unusable) {
                let names = unusable.map { $0.rawValue }
                reasons.append("remote session: \(Setting.list(names)) cannot serve remote sessions")
            }
        }
        return reasons
    }

    static func satisfiable(_ rule: Policy.Rule, without unusable: [FactorKind]) -> Bool {
        switch rule {
        case .factor(let kind, _): !unusable.contains(kind)
        case .atLeast(let count, let rules): rules.count { satisfiable($0, without: unusable) } >= count
        case .firstOf(let rules): rules.contains { satisfiable($0, without: unusable) }
        }
    }
}
