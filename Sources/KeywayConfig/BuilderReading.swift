import KeywayCore

/// Reading: each file's sections gathered into bodies (a section continued across files is one body, a later value
/// replacing an earlier one), and the sections' names checked.
extension Builder {
    mutating func read(_ sources: [ConfigSource]) {
        for source in sources {
            files.append(source.path)
            var seenInFile: [String: [String: Place]] = [:]
            for section in INI.parse(source, into: &syntax) {
                sectionStarts.append((source.path, section.place.line, policyName(of: section)))
                guard let identity = classify(section) else { continue }
                var body = bodies[identity] ?? Body(words: section.words.map { $0.text }, place: section.place)
                for entry in section.entries {
                    if let first = seenInFile[identity]?[entry.key] {
                        diagnostics.append(
                            entry.keyPlace.error(
                                "duplicate key '\(entry.key)' in [\(body.words.joined(separator: " "))]",
                                help: "it is already set at line \(first.line); a later drop-in file may replace it"))
                        continue
                    }
                    seenInFile[identity, default: [:]][entry.key] = entry.keyPlace
                    if body.entries[entry.key] == nil { body.order.append(entry.key) }
                    body.entries[entry.key] = entry
                }
                if bodies[identity] == nil { bodyOrder.append(identity) }
                bodies[identity] = body
            }
        }
    }

    /// The section's identity ("gesture", "policy sudo", "policy sudo for group wheel"), or nil when it is wrong.
    mutating func classify(_ section: INI.Section) -> String? {
        let words = section.words
        let first = words[0]
        if plugins.plugin(FactorKind(rawValue: first.text)) != nil {
            guard words.count == 1 else {
                diagnostics.append(
                    words[1].place.error("unexpected '\(words[1].text)' after the factor name '\(first.text)'"))
                return nil
            }
            return first.text
        }
        guard first.text == "policy" else {
            let candidates = factorNames + ["policy"]
            diagnostics.append(
                first.place.error(
                    "unknown section '\(first.text)'",
                    help: Suggest.help(first.text, in: candidates)
                        ?? "sections are \(factorNames.map { "[\($0)]" }.joined(separator: ", ")) and [policy NAME]"))
            return nil
        }
        guard words.count >= 2 else {
            diagnostics.append(section.place.error("the policy has no name", help: "write [policy NAME]"))
            return nil
        }
        let name = words[1]
        if let problem = Self.nameProblem(name.text) {
            diagnostics.append(name.place.error("'\(name.text)' cannot name a policy: \(problem)"))
            return nil
        }
        if plugins.plugin(FactorKind(rawValue: name.text)) != nil {
            diagnostics.append(
                name.place.error(
                    "a policy cannot be named '\(name.text)': that is a factor's name, and a rule could not tell them apart"
                ))
            return nil
        }
        if builtInRules.contains(where: { $0.name == name.text }) {
            diagnostics.append(
                name.place.error(
                    "'\(name.text)' is a built-in policy and cannot be redefined",
                    help: words.count > 2
                        ? "define a policy of your own with the built-in as its rule: [policy my-\(name.text)], "
                            + "require = \(name.text), then add the variant to it"
                        : "choose another name; a rule may use '\(name.text)' as a term"))
            return nil
        }
        if words.count == 2 { return "policy \(name.text)" }
        guard words.count == 5, words[2].text == "for", words[3].text == "group" || words[3].text == "user" else {
            let extra = words[2]
            diagnostics.append(
                extra.place.at(
                    column: extra.place.column,
                    length: section.place.column + section.place.length - extra.place.column - 1
                )
                .error(
                    "expected 'for group NAME' or 'for user NAME' after the policy name",
                    help: "a variant is written [policy \(name.text) for group wheel]"))
            return nil
        }
        let who = words[4]
        if who.text.isEmpty || who.text.utf8.count > 256 || who.text.utf8.contains(UInt8(ascii: "/")) {
            diagnostics.append(who.place.error("'\(who.text)' cannot name a \(words[3].text)"))
            return nil
        }
        return "policy \(name.text) for \(words[3].text) \(who.text)"
    }

    /// The policy a section header is of, when it names one a configuration may define (its variants' too).
    func policyName(of section: INI.Section) -> String? {
        let words = section.words.map { $0.text }
        guard words.count >= 2, words[0] == "policy", Self.nameProblem(words[1]) == nil,
            plugins.plugin(FactorKind(rawValue: words[1])) == nil,
            !builtInRules.contains(where: { $0.name == words[1] })
        else { return nil }
        return words[1]
    }

    /// Why `name` cannot name a policy, or nil: a letter, then letters, digits and '-', at most 64.
    static func nameProblem(_ name: String) -> String? {
        let bytes = Array(name.utf8)
        guard let first = bytes.first, first >= 0x61, first <= 0x7A else {
            return "a name starts with a lower-case letter"
        }
        guard bytes.count <= 64 else { return "a name has at most 64 characters" }
        guard bytes.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }) else {
            return "a name is lower-case letters, digits and '-'"
        }
        if ["and", "or", "of"].contains(name) { return "'\(name)' is a word of the rule language" }
        return nil
    }
}
