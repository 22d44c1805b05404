import KeywayConfig
import KeywayCore
import KeywayFactors
import KeywayGesture
import KeywayRuntime
import Testing

/// Every malformed configuration is refused with the place and the reason, as a compiler would.
@Suite("keyway.conf: malformed files")
struct MalformedConfigTests {
    static func problems(_ text: String) -> [Diagnostic] {
        problems(bytes: Array(text.utf8))
    }

    static func problems(bytes: [UInt8]) -> [Diagnostic] {
        switch Configuration.parse([ConfigSource(path: "t.conf", bytes: bytes)], plugins: Factors.all) {
        // A policy's own errors leave the rest usable (`Configuration.unusable`); either way they are reported.
        case .success(let configuration): return configuration.policyErrors
        case .failure(let problems): return problems.errors
        }
    }

    static let deep = String(repeating: "(", count: 16) + "gesture" + String(repeating: ")", count: 16)

    /// The file, and the first error's headline exactly (`file:line:col: error: message`).
    @Test(
        "each is refused with file:line:col and the reason",
        arguments: [
            ("[gestur]\n", "t.conf:1:2: error: unknown section 'gestur'"),
            ("[Gesture]\n", "t.conf:1:2: error: unknown section 'Gesture'"),
            ("[gesture]\nmin-dot = 5\n", "t.conf:2:1: error: unknown setting 'min-dot' for gesture"),
            (
                "[gesture]\nmin-dots = 12\n",
                "t.conf:2:12: error: min-dots = 12 is out of range: expected a whole number from 4 to 9"
            ),
            (
                "[gesture]\nmin-dots = five\n",
                "t.conf:2:12: error: 'five' is not valid for min-dots: expected a whole number from 4 to 9"
            ),
            (
                "[biometric]\ntimeout = 30 parsecs\n",
                "t.conf:2:11: error: '30 parsecs' is not valid for timeout: expected a duration from 1s to 10m "
                    + "(e.g. 500ms, 30s, 5m, 72h, 2d)"
            ),
            (
                "[biometric]\ntimeout = 20m\n",
                "t.conf:2:11: error: timeout = 20m is out of range: expected a duration from 1s to 10m "
                    + "(e.g. 500ms, 30s, 5m, 72h, 2d)"
            ),
            (
                "[biometric]\ntype = iris\n",
                "t.conf:2:8: error: 'iris' is not valid for type: expected fingerprint or face"
            ),
            (
                "[biometric]\nfalse-match-rate = 0.001\n",
                "t.conf:2:20: error: '0.001' is not valid for false-match-rate: expected 1/N with N from 1000 to 10000000"
            ),
            (
                "[biometric]\nfalse-match-rate = 1/10\n",
                "t.conf:2:20: error: false-match-rate = 1/10 is out of range: expected 1/N with N from 1000 to 10000000"
            ),
            (
                "[gesture]\nblocklist = maybe\n",
                "t.conf:2:13: error: 'maybe' is not valid for blocklist: expected yes or no"
            ),
            (
                "[biometric]\npasscode-max-age = 10m\n",
                "t.conf:2:20: error: passcode-max-age = 10m is out of range: expected a duration from 1h to 90d "
                    + "(e.g. 500ms, 30s, 5m, 72h, 2d), or off"
            ),
            (
                "[passcode]\nmin-length = 4\n",
                "t.conf:2:14: error: min-length = 4 is out of range: expected a whole number from 6 to 64"
            ),
            ("min-dots = 5\n", "t.conf:1:1: error: 'min-dots' is outside any section"),
            ("[gesture]\nmin-dots 5\n", "t.conf:2:1: error: expected 'key = value', a [section] or a comment"),
            ("[gesture]\nmin-dots =\n", "t.conf:2:10: error: 'min-dots' has no value"),
            ("[gesture]\n= 5\n", "t.conf:2:1: error: a key is missing before '='"),
            (
                "[gesture]\nMin = 3\n",
                "t.conf:2:1: error: 'Min' is not a key: keys are lower-case letters, digits, '-' and '.'"
            ),
            ("[gesture\n", "t.conf:1:1: error: the section name has no closing ']'"),
            ("[gesture] x\n", "t.conf:1:11: error: unexpected text after the section name"),
            ("[]\n", "t.conf:1:1: error: the section has no name"),
            ("[gesture]\nmin-dots = 5\nmin-dots = 6\n", "t.conf:3:1: error: duplicate key 'min-dots' in [gesture]"),
            ("[gesture extra]\n", "t.conf:1:10: error: unexpected 'extra' after the factor name 'gesture'"),
            ("[policy]\n", "t.conf:1:1: error: the policy has no name"),
            (
                "[policy Sudo]\nrequire = gesture\n",
                "t.conf:1:9: error: 'Sudo' cannot name a policy: a name starts with a lower-case letter"
            ),
            (
                "[policy pattern]\nrequire = passcode\n",
                "t.conf:1:9: error: 'pattern' is a built-in policy and cannot be redefined"
            ),
            (
                "[policy gesture]\nrequire = passcode\n",
                "t.conf:1:9: error: a policy cannot be named 'gesture': that is a factor's name, and a rule could not "
                    + "tell them apart"
            ),
            (
                "[policy sudo for wheel]\nrequire = gesture\n",
                "t.conf:1:14: error: expected 'for group NAME' or 'for user NAME' after the policy name"
            ),
            (
                "[policy sudo for group wheel]\nrequire = gesture\n",
                "t.conf:1:1: error: a variant of policy 'sudo', which is not defined"
            ),
            ("[policy sudo]\nwhen = local\n", "t.conf:1:1: error: policy 'sudo' has no 'require =' line"),
            ("[policy sudo]\nrequire = gesture or pascode\n", "t.conf:2:22: error: unknown factor 'pascode'"),
            ("[policy sudo]\nrequire = gesture or sudoo\n", "t.conf:2:22: error: unknown policy 'sudoo'"),
            ("[policy sudo]\nrequire = gesture or retina\n", "t.conf:2:22: error: unknown factor or policy 'retina'"),
            (
                "[policy sudo]\nrequire = gesture or\n",
                "t.conf:2:21: error: the rule ends where a factor or policy name was expected"
            ),
            (
                "[policy sudo]\nrequire = (gesture or passcode\n",
                "t.conf:2:31: error: expected ')' to close the '(' at column 11, found the end of the rule"
            ),
            (
                "[policy sudo]\nrequire = gesture or passcode)\n",
                "t.conf:2:30: error: unbalanced ')': nothing opened it"
            ),
            ("[policy sudo]\nrequire = 2 of (gesture)\n", "t.conf:2:11: error: '2 of' lists only 1 term"),
            ("[policy sudo]\nrequire = 0 of (gesture, passcode)\n", "t.conf:2:11: error: '0 of' requires nothing"),
            (
                "[policy sudo]\nrequire = 2 (gesture, passcode)\n",
                "t.conf:2:13: error: expected 'of' after 2, found '('"
            ),
            ("[policy sudo]\nrequire = gesture*0\n", "t.conf:2:11: error: gesture*0: attempts must be from 1 to 20"),
            ("[policy sudo]\nrequire = gesture*21\n", "t.conf:2:11: error: gesture*21: attempts must be from 1 to 20"),
            (
                "[policy sudo]\nrequire = gesture*\n",
                "t.conf:2:19: error: expected a number of attempts after 'gesture*', found the end of the rule"
            ),
            (
                "[policy sudo]\nrequire = gesture passcode\n",
                "t.conf:2:19: error: expected 'and', 'or' or the end of the rule, found 'passcode'"
            ),
            ("[policy sudo]\nrequire = gesture & passcode\n", "t.conf:2:19: error: unexpected '&' in the rule"),
            ("[policy sudo]\nrequire = GESTURE\n", "t.conf:2:11: error: unexpected 'G' in the rule"),
            (
                "[policy sudo]\nrequire = or gesture\n",
                "t.conf:2:11: error: expected a factor or policy name before 'or'"
            ),
            (
                "[policy sudo]\nrequire = gesture and gesture\n",
                "t.conf:2:11: error: the factor 'gesture' appears more than once in the rule of policy 'sudo'"
            ),
            (
                "[policy sudo]\nrequire = pattern-or-passcode and passcode\n",
                "t.conf:2:11: error: the factor 'passcode' appears more than once in the rule of policy 'sudo'"
            ),
            ("[policy a]\nrequire = a\n", "t.conf:2:11: error: policy 'a' refers to itself: a → a"),
            (
                "[policy a]\nrequire = b\n[policy b]\nrequire = a\n",
                "t.conf:2:11: error: policy 'b' refers to itself: b → a → b"
            ),
            (
                "[policy sudo]\nrequire = pattern*2\n",
                "t.conf:2:11: error: '*N' counts a factor's attempts; 'pattern' is a policy"
            ),
            (
                "[policy sudo]\nrequire = biometric\nwhen = remote\n",
                "t.conf:2:11: error: policy 'sudo' can never succeed: remote session: biometric cannot serve remote sessions"
            ),
            (
                "[policy sudo]\nrequire = gesture\nmode = dry-run\n",
                "t.conf:3:8: error: 'dry-run' is not valid for mode: expected enforce or audit"
            ),
            (
                "[policy sudo]\nrequire = gesture\nunenrolled = ignore\n",
                "t.conf:3:14: error: 'ignore' is not valid for unenrolled: expected conceal, fail, skip or allow"
            ),
            (
                "[policy ssh]\nrequire = totp\nfirst-enrollment = user\n",
                "t.conf:3:20: error: 'user' is not valid for first-enrollment: expected root or self"
            ),
            (
                "[policy sudo]\nrequire = gesture\ngesture.min-dots = 5\n",
                "t.conf:3:1: error: gesture.min-dots cannot be set per policy"
            ),
            (
                "[policy sudo]\nrequire = gesture\nretina.attempts = 2\n",
                "t.conf:3:1: error: unknown key 'retina.attempts' in a policy"
            ),
            (
                "[policy sudo]\nrequire = gesture\ngesture.attempt = 2\n",
                "t.conf:3:1: error: unknown setting 'attempt' for gesture"
            ),
            (
                "[policy sudo]\nrequire = gesture\nrequire = passcode\n",
                "t.conf:3:1: error: duplicate key 'require' in [policy sudo]"
            ),
            ("[gesture]\nmin-dots = 5\u{1}\n", "t.conf:2:13: error: a control character is not allowed here"),
            ("[policy sudo]\nrequire = \(deep)\n", "t.conf:2:27: error: the rule nests deeper than 16 levels"),
            (
                "[policy sudo]\nrequire = first of (biometric, gesture or passcode)\n",
                "t.conf:2:32: error: 'first of' lists factors, not rules or policies"
            ),
            (
                "[policy sudo]\nrequire = first of (biometric, pattern)\n",
                "t.conf:2:32: error: 'first of' lists factors, not rules or policies"
            ),
            (
                "[policy sudo]\nrequire = first of (biometric)\n",
                "t.conf:2:11: error: 'first of' lists at least two factors"
            ),
            (
                "[policy sudo]\nrequire = first of (biometric, gesture, passcode)\n",
                "t.conf:2:11: error: 'first of' can wait for one typed factor at most (gesture and passcode are both typed)"
            ),
            (
                "[policy sudo]\nrequire = first of (gesture, gesture*2)\n",
                "t.conf:2:30: error: 'gesture' is listed twice in 'first of'"
            ),
            (
                "[policy sudo]\nrequire = first (biometric, gesture)\n",
                "t.conf:2:17: error: expected 'and', 'or' or the end of the rule, found '('"
            ),
        ])
    func refused(text: String, expected: String) {
        let errors = Self.problems(text)
        #expect(errors.first?.headline == expected, "\(errors.map { $0.headline })")
    }

    @Test("bytes that are not text, and a file too large to be a configuration")
    func notText() {
        #expect(
            Self.problems(bytes: Array("[gesture]\n".utf8) + [0xFF, 0x0A]).first?.headline
                == "t.conf:2: error: the line is not valid UTF-8")
        let huge = [UInt8](repeating: UInt8(ascii: "#"), count: 70_000)
        #expect(
            Self.problems(bytes: huge).first?.headline
                == "t.conf: error: the file is 70000 bytes; at most 65536 are read")
    }

    @Test("the report shows the line, a caret under the problem, and a suggestion")
    func rendering() {
        let text = "[policy ssh]\nrequire = 2 of (gesture, pascode, biometric)\n"
        let report = Self.problems(text).first?.description
        #expect(
            report == """
                t.conf:2:26: error: unknown factor 'pascode'
                    require = 2 of (gesture, pascode, biometric)
                                             ^~~~~~~
                help: did you mean 'passcode'?
                """)
        #expect(
            Self.problems("[policy sudo]\nrequire = gesture\nwhen = lcoal\n").first?.help == "did you mean 'local'?")
        #expect(Self.problems("[gestur]\n").first?.help == "did you mean 'gesture'?")
        #expect(Self.problems("[gesture]\nmin-dot = 5\n").first?.help == "did you mean 'min-dots'?")
    }

    @Test("every error of every file is reported, in file order, not only the first")
    func allErrors() {
        let first = ConfigSource(path: "a.conf", text: "[gesture]\nmin-dots = 12\nblocklist = maybe\n")
        let second = ConfigSource(path: "b.conf", text: "[policy x]\nrequire = pascode\n[gestur]\n")
        guard case .failure(let problems) = Configuration.parse([first, second], plugins: Factors.all) else {
            Issue.record("accepted")
            return
        }
        #expect(
            problems.errors.map { "\($0.file):\($0.line)" } == ["a.conf:2", "a.conf:3", "b.conf:2", "b.conf:3"],
            "\(problems.errors.map { $0.headline })")
    }

    @Test("a control character in a file is never echoed to the terminal")
    func controlCharacters() {
        let report = Self.problems("[policy sudo]\nrequire = gesture\u{1B}[2J\n").first?.description ?? ""
        #expect(!report.unicodeScalars.contains { $0.value == 0x1B }, "\(report)")
    }

    @Test("an error in one policy makes it (and what names it) unusable; the rest, built-ins too, is usable")
    func oneBrokenPolicy() throws {
        let text = """
            [gesture]
            min-dots = 5
            [policy good]
            require = gesture or passcode
            [policy typo]
            require = totp or recovrey
            [policy uses-typo]
            require = typo and gesture
            [policy bad-variant]
            require = gesture
            [policy bad-variant for group wheel]
            when = lcoal
            [policy bad-key]
            require = passcode
            passcode.attemps = 2

            """
        guard
            case .success(let configuration) = Configuration.parse(
                [ConfigSource(path: "t.conf", text: text)], plugins: Factors.all)
        else {
            Issue.record("an error confined to policies failed the whole configuration")
            return
        }
        #expect(configuration.policy(named: "good") != nil)
        #expect(configuration.policy(named: "pattern") != nil)
        #expect(configuration.settings[.gesture].integer(GestureAuthenticator.minimumDotsSetting) == 5)
        #expect(Set(configuration.unusable.keys) == ["typo", "uses-typo", "bad-variant", "bad-key"])
        for name in ["typo", "uses-typo", "bad-variant", "bad-key"] {
            #expect(configuration.policy(named: name) == nil, "\(name) is still usable")
            guard case .failure(let error) = configuration.resolve(name, for: Configuration.Subject(user: "alice"))
            else {
                Issue.record("\(name) resolved")
                continue
            }
            #expect(error.code == .invalidPolicy)
            #expect(error.reason.contains("t.conf:"), "\(error.reason)")
        }
        #expect(configuration.unusable["typo"]?.first?.headline == "t.conf:6:19: error: unknown factor 'recovrey'")
        #expect(
            configuration.unusable["uses-typo"]?.contains { $0.message.contains("policy 'typo'") } == true,
            "\(configuration.unusable["uses-typo"] ?? [])")
        #expect(configuration.unusable["bad-variant"]?.first?.line == 12)
        #expect(configuration.policyErrors.map { $0.line } == configuration.policyErrors.map { $0.line }.sorted())
        guard case .success = configuration.resolve("good", for: Configuration.Subject(user: "alice")) else {
            Issue.record("good does not resolve")
            return
        }
    }

    @Test("first-enrollment = self lets the person enroll the policy's own factors, where its variant applies")
    func firstEnrollment() throws {
        let text = """
            [policy ssh]
            require = totp or recovery
            unenrolled = allow
            [policy ssh for group team]
            first-enrollment = self
            [policy sudo]
            require = gesture

            """
        guard
            case .success(let configuration) = Configuration.parse(
                [ConfigSource(path: "t.conf", text: text)], plugins: Factors.all)
        else {
            Issue.record("the configuration does not parse")
            return
        }
        let member = Configuration.Subject(user: "carol") { .success($0 == "team") }
        let other = Configuration.Subject(user: "dave") { _ in .success(false) }
        let unknown = Configuration.Subject(user: "erin") { _ in
            .failure(AuthenticationError(.invalidPolicy, "no answer"))
        }
        for factor in ["totp", "recovery"].map(FactorKind.init(rawValue:)) {
            #expect(configuration.letsEnrollFirst(factor, for: member))
            #expect(!configuration.letsEnrollFirst(factor, for: other), "the base says root")
            #expect(!configuration.letsEnrollFirst(factor, for: unknown), "membership unknown: no")
        }
        #expect(!configuration.letsEnrollFirst(.gesture, for: member), "a factor of another policy")
        #expect(configuration.policy(named: "ssh")?.variants.first?.firstEnrollment == .person)
        #expect(configuration.policy(named: "ssh")?.base.firstEnrollment == nil)
    }

    @Test("an error outside every policy still fails the whole configuration: a factor's section, the file's form")
    func globalErrors() {
        for text in [
            "[gesture]\nmin-dots = 12\n[policy good]\nrequire = gesture\n",
            "[policy good]\nrequire = gesture\n[gesture\nmin-dots = 9\n",
            "[policy good]\nrequire = gesture\nthis is not a setting\n",
            "[policy Bad]\nrequire = gesture\n",
        ] {
            guard case .failure = Configuration.parse([ConfigSource(path: "t.conf", text: text)], plugins: Factors.all)
            else {
                Issue.record("accepted: \(text)")
                continue
            }
        }
    }
}
