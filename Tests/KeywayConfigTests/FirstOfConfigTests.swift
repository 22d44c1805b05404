import KeywayConfig
import KeywayCore
import KeywayFactors
import KeywayRuntime
import Testing

/// `first of (…)` in `require =` (docs/ARCHITECTURE.md §14).
@Suite("keyway.conf: first of")
struct FirstOfConfigTests {
    func rule(_ require: String) throws -> Policy.Rule {
        let text = "[policy p]\nrequire = \(require)\n"
        let parsed = Configuration.parse(
            [ConfigSource(path: "t.conf", bytes: Array(text.utf8))], plugins: Factors.all)
        guard case .success(let configuration) = parsed else {
            Issue.record("refused: \(parsed)")
            throw ParseFailed()
        }
        guard case .success(let resolved) = configuration.resolve("p", for: Configuration.Subject(user: "alice")) else {
            throw ParseFailed()
        }
        return resolved.policy.rule
    }

    struct ParseFailed: Error {}

    @Test("compiles to the engine's first-of rule, each factor with its attempts, and composes with or, and, K of")
    func compiles() throws {
        #expect(
            try rule("first of (biometric, gesture*5)")
                == .firstOf([.factor(.biometric, attempts: 3), .factor(.gesture, attempts: 5)]))
        #expect(
            try rule("first of (biometric, gesture) or passcode")
                == .anyOf([
                    .firstOf([.factor(.biometric, attempts: 3), .factor(.gesture, attempts: 3)]),
                    .factor(.passcode, attempts: 3),
                ]))
        #expect(
            try rule("2 of (first of (biometric, gesture), passcode)")
                == .atLeast(
                    2,
                    of: [
                        .firstOf([.factor(.biometric, attempts: 3), .factor(.gesture, attempts: 3)]),
                        .factor(.passcode, attempts: 3),
                    ]))
    }

    @Test("printed back as text that compiles to the same rule")
    func roundTrip() throws {
        for text in [
            "first of (biometric, gesture)", "first of (biometric, passcode*2) and gesture",
            "gesture or first of (biometric, passcode)",
        ] {
            let compiled = try rule(text)
            let printed = Configuration.text(of: compiled)
            #expect(try rule(printed) == compiled, "\(text) → \(printed)")
            #expect(printed.contains("first of ("), "\(printed)")
        }
    }

    @Test("`first` alone is still a policy name")
    func firstIsAName() throws {
        let text = "[policy first]\nrequire = gesture\n[policy p]\nrequire = first or passcode\n"
        let parsed = Configuration.parse(
            [ConfigSource(path: "t.conf", bytes: Array(text.utf8))], plugins: Factors.all)
        guard case .success = parsed else {
            Issue.record("refused: \(parsed)")
            return
        }
    }
}
