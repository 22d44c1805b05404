import KeywayConfig
import KeywayCore
import KeywayPlatform
import KeywayRuntime

/// `keyway policy check | list | show`: the configuration, checked and explained (keyway.conf(5)).
extension Command {
    /// Nothing on standard output when valid; the diagnostics on standard error otherwise.
    func policyCheck() -> Int32 {
        configuration().policyErrors.isEmpty ? ExitStatus.success : ExitStatus.dataError
    }

    func policyList() -> Int32 {
        let configuration = configuration()
        let width = configuration.policies.map { $0.base.name.count }.max() ?? 0
        for named in configuration.policies {
            let name = named.base.name + String(repeating: " ", count: width - named.base.name.count)
            print("\(name)  \(Configuration.text(of: named.base.rule))  (\(named.base.origin))")
            for variant in named.variants {
                print(
                    "\(String(repeating: " ", count: width))    \(variant.variant!): "
                        + "\(Configuration.text(of: variant.rule))  (\(variant.origin))")
            }
        }
        return ExitStatus.success
    }

    func policyShow() -> Int32 {
        let configuration = configuration()
        let name = operands[0]
        guard let named = configuration.policy(named: name) else {
            let names = configuration.policies.map { $0.base.name }
            let near = names.first { EditDistance.between($0, name) <= 2 }
            Keyway.printError(
                "keyway: unknown policy '\(name)'" + (near.map { "; did you mean '\($0)'?" } ?? "")
                    + " (`keyway policy list` shows them)")
            return ExitStatus.dataError
        }
        let user = parsed.value("--user")
        let group = parsed.value("--group")
        let remote = parsed.has("--remote")
        let subject = Configuration.Subject(user: user ?? "", isRemote: remote) { wanted in
            if wanted == group { return .success(true) }
            guard let user else { return .success(false) }
            return Accounts.isMember(user, of: wanted).mapError { AuthenticationError(.invalidPolicy, "\($0)") }
        }
        print("policy \(name) (\(named.isBuiltIn ? "built-in" : "defined at \(named.base.origin)"))")
        let definition: Configuration.Definition
        switch configuration.resolve(name, for: subject) {
        case .success(let resolved):
            definition = resolved.definition
        case .failure(let error):
            print("refused here: \(error.reason)")
            definition = named.base
        }
        if let variant = definition.variant {
            print("variant: \(variant) (\(definition.origin)), which replaces the base's keys it sets")
        } else if !named.variants.isEmpty {
            print(
                "variant: none matches, so the base applies (variants: "
                    + named.variants.map { "\($0.variant!)" }.joined(separator: ", ") + ")")
        }
        print("require = \(Configuration.text(of: definition.rule))  (\(definition.origins["require"] ?? .builtIn))")
        print("when = \(definition.when.rawValue)  (\(definition.origins["when"] ?? .defaulted))")
        print("mode = \(definition.mode.rawValue)  (\(definition.origins["mode"] ?? .defaulted))")
        print(
            "unenrolled = \(definition.unenrolled?.rawValue ?? "conceal")  "
                + "(\(definition.origins["unenrolled"].map { "\($0)" } ?? "default; the module's unenrolled= replaces it"))"
        )
        print(
            "failmode = \(definition.failMode?.rawValue ?? "secure")  "
                + "(\(definition.origins["failmode"].map { "\($0)" } ?? "default; the module's failmode= replaces it"))"
        )
        print(
            "first-enrollment = \(definition.firstEnrollment?.rawValue ?? "root")  "
                + "(\(definition.origins["first-enrollment"] ?? .defaulted))")
        print("")
        print("what happens, in order:")
        for line in Self.tree(definition.rule, depth: 1, isTop: true) { print(line) }
        print("")
        print("settings in effect:")
        let settings = configuration.settings(for: definition)
        for factor in definition.rule.factors {
            guard let plugin = configuration.plugins.plugin(factor) else { continue }
            for setting in plugin.settings {
                let key = "\(factor).\(setting.key)"
                let origin = definition.origins[key] ?? configuration.settingOrigins[key] ?? .defaulted
                let by = setting.enforcedBy == .daemon ? ", enforced by keywayd" : ""
                print("  \(key) = \(settings[factor][setting])  (\(origin)\(by))")
            }
        }
        for reason in definition.impossible { print("warning: this policy can never succeed in a \(reason)") }
        return ExitStatus.success
    }

    /// The rule as an indented tree, each factor with what follows its outcomes.
    static func tree(_ rule: Policy.Rule, depth: Int, isTop: Bool) -> [String] {
        let indent = String(repeating: "  ", count: depth)
        if case .firstOf(let rules) = rule {
            let group = isTop ? "the policy" : "this group"
            var lines = [
                "\(indent)first of, at once: the sensor waits while the prompt does; the first success is enough:"
            ]
            for case .factor(let kind, let attempts) in rules {
                lines.append("\(indent)  \(kind), up to \(attempts) counted failure\(attempts == 1 ? "" : "s")")
            }
            lines += [
                "\(indent)  on a success of any: \(group) succeeds",
                "\(indent)  each failure counts for its own factor; one out of tries, the others go on",
                "\(indent)  when every one has failed or is unavailable: \(group) fails",
                "\(indent)  on cancel (Ctrl-C) or a failure of Keyway itself: the policy fails at once",
            ]
            return lines
        }
        guard case .atLeast(let count, let rules) = rule else {
            return outcomes(rule, index: 0, of: [rule], needing: 1, depth: depth, isTop: isTop)
        }
        let kind =
            count == 1
            ? "any of, tried in order (the first success is enough)"
            : count == rules.count ? "all of, in order" : "\(count) of these \(rules.count), tried in order"
        var lines = ["\(indent)\(kind):"]
        for (index, child) in rules.enumerated() {
            if case .factor = child {
                lines += outcomes(child, index: index, of: rules, needing: count, depth: depth + 1, isTop: isTop)
            } else {
                lines += tree(child, depth: depth + 1, isTop: false)
            }
        }
        return lines
    }

    /// One factor's line and what happens after each outcome, within its group.
    static func outcomes(
        _ rule: Policy.Rule, index: Int, of siblings: [Policy.Rule], needing count: Int, depth: Int, isTop: Bool
    ) -> [String] {
        guard case .factor(let kind, let attempts) = rule else { return [] }
        let indent = String(repeating: "  ", count: depth)
        let group = isTop ? "the policy" : "this group"
        let next = index + 1 < siblings.count ? siblings[index + 1].factors.first : nil
        let onSuccess: String
        if count == 1 || (count == siblings.count && index == siblings.count - 1) {
            onSuccess = "\(group) succeeds"
        } else if count == siblings.count {
            onSuccess = "\(next.map { "\($0)" } ?? "the next") is asked"
        } else {
            onSuccess = "counts toward \(count); \(group) succeeds once \(count) have"
        }
        let onFailure: String
        if count == siblings.count || next == nil {
            onFailure = "\(group) fails"
        } else if count == 1 {
            onFailure = "\(next!) is tried"
        } else {
            onFailure = "\(next!) is tried while \(count) can still be reached; otherwise \(group) fails"
        }
        return [
            "\(indent)\(kind), up to \(attempts) counted failure\(attempts == 1 ? "" : "s")",
            "\(indent)  on success: \(onSuccess)",
            "\(indent)  on failure, unavailable, fallback chosen or locked out: \(onFailure)",
            "\(indent)  on cancel (Ctrl-C) or a failure of Keyway itself: the policy fails at once",
        ]
    }
}
