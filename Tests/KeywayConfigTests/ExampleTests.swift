import Foundation
import KeywayBiometric
import KeywayBiometricSimulator
import KeywayConfig
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayRuntime
import KeywayTestSupport
import Testing

/// The package's directory, from this file's place in it.
let packageDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// keyway.conf(5)'s example, read from man/examples.
func example(_ name: String) throws -> Configuration {
    let path = packageDirectory + "/man/examples/" + name
    let text = try String(contentsOfFile: path, encoding: .utf8)
    switch Configuration.parse([ConfigSource(path: path, text: text)], plugins: Factors.all) {
    case .success(let configuration): return configuration
    case .failure(let problems): throw problems
    }
}

/// A configuration's factors over an in-memory store, as keywayd and the module build them: the keepers with the
/// global settings, the person's side with the policy's.
final class ConfigRig: @unchecked Sendable {
    let configuration: Configuration
    let store = InMemoryStore()
    let clock = ManualClock()
    let vault: LocalVault

    init(_ configuration: Configuration) throws {
        self.configuration = configuration
        let hasher = try Argon2idHasher(cost: .minimum)
        let (store, clock) = (store, clock)
        vault = LocalVault(
            store: store, clock: clock,
            keepers: Factors.all.map { plugin in
                plugin.vaultSide(
                    .init(store: store, clock: clock, hasher: hasher, settings: configuration.settings[plugin.kind]))
            })
    }

    func runtime(_ settings: SettingsBook? = nil) -> Runtime {
        var options = Runtime.Options()
        options.sensorDirectory = "/nonexistent/keyway-sensor"
        return Runtime(vault: vault, options: options, settings: settings ?? configuration.settings)
    }

    func enroll(_ factor: FactorKind, _ user: String, _ secret: String) throws(AuthenticationError) {
        try vault.enroll(.secret(Secret(copying: Array(secret.utf8))), of: factor, for: user, label: nil, by: "test")
    }

    func enrollFinger(_ user: String) throws {
        let touches = ScriptedSensorEvents(Array(repeating: .present(user: user, finger: "right-index"), count: 16))
        let sensor = BiometricAuthenticator(vault: vault, sensor: SimulatedSensor(events: touches))
        try sensor.enroll(user: user, finger: "right-index", by: "test", conversation: ScriptedConversation())
    }

    /// Evaluates the policy as the module does: resolved for the user, with its settings.
    func evaluate(
        _ name: String, _ user: String, groups: Set<String> = [], remote: Bool = false, typing lines: [String]
    ) -> (Evaluation, ScriptedConversation) {
        let subject = Configuration.Subject(user: user, isRemote: remote) { .success(groups.contains($0)) }
        let conversation = ScriptedConversation(lines.map { .type($0) })
        switch configuration.resolve(name, for: subject) {
        case .failure(let error):
            var evaluation = Evaluation(policy: name, user: user)
            evaluation.error = error
            return (evaluation, conversation)
        case .success(let resolved):
            let evaluation = runtime(resolved.settings).context().evaluate(
                resolved.policy, for: UserContext(name: user, isRemote: remote), reason: "test",
                conversation: conversation)
            return (evaluation, conversation)
        }
    }
}

@Suite("keyway.conf(5)'s examples mean what the page says")
struct ExampleTests {
    @Test("sudo-pattern.conf: the pattern, or the passcode when the pattern fails or is not set")
    func sudoPattern() throws {
        let rig = try ConfigRig(try example("sudo-pattern.conf"))
        try rig.enroll(.gesture, "alice", "2-4-9-3")
        try rig.enroll(.passcode, "alice", "739155")
        try rig.enroll(.passcode, "bob", "739155")
        let (right, _) = rig.evaluate("sudo", "alice", typing: ["2-4-9-3"])
        #expect(right.succeeded && right.factorsUsed == [.gesture], "\(right)")
        let (fallback, _) = rig.evaluate("sudo", "alice", typing: ["3-4-9-2", "6-1-8-3", "4-3-8-1-6", "739155"])
        #expect(fallback.succeeded && fallback.factorsUsed == [.gesture, .passcode], "\(fallback)")
        let (noPattern, asked) = rig.evaluate("sudo", "bob", typing: ["739155"])
        #expect(noPattern.succeeded && noPattern.factorsUsed == [.passcode], "\(noPattern)")
        #expect(asked.prompts.count == 1)
    }

    @Test("two-of-three.conf: any two, in order; one factor alone is not enough")
    func twoOfThree() throws {
        let rig = try ConfigRig(try example("two-of-three.conf"))
        try rig.enroll(.gesture, "alice", "2-4-9-3")
        try rig.enroll(.passcode, "alice", "739155")
        let (both, _) = rig.evaluate("ssh", "alice", typing: ["2-4-9-3", "739155"])
        #expect(both.succeeded && both.factorsUsed == [.gesture, .passcode], "\(both)")
        // The pattern fails three times; the passcode alone is one of two, and the sensor has no finger enrolled.
        let (one, _) = rig.evaluate("ssh", "alice", typing: ["3-4-9-2", "6-1-8-3", "4-3-8-1-6", "739155"])
        #expect(!one.succeeded, "\(one)")
        #expect(one.steps.contains { $0.factor == .passcode && $0.outcome == .succeeded }, "\(one)")
        // Remote: the sensor is out, and the pattern and the passcode still make two.
        let (remote, _) = rig.evaluate("ssh", "alice", remote: true, typing: ["2-4-9-3", "739155"])
        #expect(remote.succeeded, "\(remote)")
        #expect(rig.configuration.policy(named: "ssh")?.base.unenrolled == .conceal)
    }

    @Test("ssh-roll-out.conf: a code or a recovery code; in without one meanwhile; the person enrolls the first")
    func sshRollOut() throws {
        let rig = try ConfigRig(try example("ssh-roll-out.conf"))
        let ssh = try #require(rig.configuration.policy(named: "ssh"))
        #expect(ssh.base.rule.factors == ["totp", "recovery"].map(FactorKind.init(rawValue:)))
        #expect(ssh.base.unenrolled == .allow)
        let anyone = Configuration.Subject(user: "carol")
        #expect(rig.configuration.letsEnrollFirst(FactorKind(rawValue: "totp"), for: anyone))
        #expect(rig.configuration.letsEnrollFirst(FactorKind(rawValue: "recovery"), for: anyone))
        #expect(!rig.configuration.letsEnrollFirst(.gesture, for: anyone))
    }

    @Test("wheel.conf: members of wheel need the pattern and the passcode; everyone else either")
    func wheel() throws {
        let rig = try ConfigRig(try example("wheel.conf"))
        try rig.enroll(.gesture, "alice", "2-4-9-3")
        try rig.enroll(.passcode, "alice", "739155")
        let (member, asked) = rig.evaluate("sudo", "alice", groups: ["wheel"], typing: ["2-4-9-3", "739155"])
        #expect(member.succeeded && member.factorsUsed == [.gesture, .passcode], "\(member)")
        #expect(asked.remainingAnswers == 0)
        let (memberPatternOnly, _) = rig.evaluate("sudo", "alice", groups: ["wheel"], typing: ["2-4-9-3"])
        #expect(!memberPatternOnly.succeeded)
        let (other, _) = rig.evaluate("sudo", "alice", groups: ["users"], typing: ["2-4-9-3"])
        #expect(other.succeeded && other.factorsUsed == [.gesture], "\(other)")
    }

    @Test("console.conf: refused from a remote session; five tries at the pattern, then the passcode")
    func console() throws {
        let rig = try ConfigRig(try example("console.conf"))
        try rig.enroll(.gesture, "alice", "2-4-9-3")
        try rig.enroll(.passcode, "alice", "739155")
        let (remote, _) = rig.evaluate("console", "alice", remote: true, typing: ["2-4-9-3", "739155"])
        #expect(remote.error?.code == .notPermitted, "\(remote)")
        #expect(remote.error?.reason.contains("when = local") == true)
        // No finger: the pattern, with five tries (the policy's gesture.attempts), then the passcode.
        let wrong = ["3-4-9-2", "6-1-8-3", "4-3-8-1-6", "7-5-3-6"]
        let (local, _) = rig.evaluate("console", "alice", typing: wrong + ["2-4-9-3", "739155"])
        #expect(local.succeeded, "\(local)")
        #expect(local.steps.filter { $0.factor == .gesture && $0.outcome == .failed(.mismatch) }.count == 4)
    }

    @Test("roll-out.conf: audit mode, so the module logs the outcome and returns PAM_IGNORE")
    func rollOut() throws {
        let configuration = try example("roll-out.conf")
        let definition = try #require(configuration.policy(named: "roll-out")?.base)
        #expect(definition.mode == .audit)
        #expect(definition.rule == .factor(.gesture, attempts: 3))
    }

    @Test("passcode-max-age.conf: after 72 hours without the passcode, the finger waits for it")
    func passcodeMaxAge() throws {
        let rig = try ConfigRig(try example("passcode-max-age.conf"))
        try rig.enroll(.passcode, "alice", "739155")
        try rig.enrollFinger("alice")
        let alice = UserContext(name: "alice")
        rig.clock.advance(by: .seconds(71 * 3600))
        #expect(rig.vault.availability(of: .biometric, for: alice).isAvailable)
        rig.clock.advance(by: .seconds(2 * 3600))
        guard case .lockedOut(nil, let reason) = rig.vault.availability(of: .biometric, for: alice) else {
            Issue.record("the finger is still usable after 73 hours")
            return
        }
        #expect(reason.contains("passcode-max-age"), "\(reason)")
        let (evaluation, asked) = rig.evaluate("unlock", "alice", typing: ["739155"])
        #expect(evaluation.succeeded && evaluation.factorsUsed == [.passcode], "\(evaluation)")
        #expect(asked.prompts.map { $0.text } == ["Passcode: "])
        #expect(rig.vault.availability(of: .biometric, for: alice).isAvailable, "the passcode entry renews the window")
    }

    @Test("settings.conf: the rules are the ones set, and login allows five pattern tries")
    func settings() throws {
        let rig = try ConfigRig(try example("settings.conf"))
        // 2-4-8-6 has four dots (no dot lies between two of them); the file asks for five.
        #expect(throws: AuthenticationError.self) { try rig.enroll(.gesture, "alice", "2-4-8-6") }
        try rig.enroll(.gesture, "alice", "2-4-8-6-1")
        #expect(throws: AuthenticationError.self) { try rig.enroll(.passcode, "alice", "7391552") }
        try rig.enroll(.passcode, "alice", "73915528")
        let login = try #require(rig.configuration.policy(named: "login")?.base)
        #expect(
            login.rule
                == .allOf([
                    .anyOf([.factor(.biometric, attempts: 3), .factor(.gesture, attempts: 5)]),
                    .factor(.passcode, attempts: 3),
                ]))
        #expect(rig.configuration.settings[.biometric].integer(BiometricAuthenticator.lockoutSetting) == 5)
        #expect(rig.configuration.settingOrigins["gesture.min-dots"]?.line == 3)
    }

    @Test("every stack in pam/examples gives the module arguments it accepts and a policy that exists")
    func pamExamples() throws {
        let directory = packageDirectory + "/pam/examples"
        let builtIns = Configuration.builtInsOnly(plugins: Factors.all)
        var lines = 0
        for file in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let text = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            for line in text.split(separator: "\n") where !line.hasPrefix("#") && line.contains("pam_keyway.so") {
                let words = line.split(separator: " ").map(String.init).filter { !$0.isEmpty }
                let arguments = Array(words.drop { $0 != "pam_keyway.so" }.dropFirst())
                guard case .success(let parsed) = ModuleArguments.parse(arguments) else {
                    Issue.record("pam/examples/\(file): '\(line)' is refused")
                    continue
                }
                #expect(builtIns.policy(named: parsed.policy) != nil, "pam/examples/\(file): \(parsed.policy)")
                lines += 1
            }
        }
        #expect(lines >= 3)
    }

    @Test("every example is in keyway.conf(5), line for line")
    func examplesAreInTheManual() throws {
        let manual = try String(contentsOfFile: packageDirectory + "/man/keyway.conf.5", encoding: .utf8)
            .replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\(bu", with: "")
        let files = try FileManager.default.contentsOfDirectory(atPath: packageDirectory + "/man/examples")
        #expect(files.count >= 7)
        for file in files {
            let text = try String(contentsOfFile: packageDirectory + "/man/examples/" + file, encoding: .utf8)
            #expect(manual.contains(text), "man/keyway.conf.5 lacks man/examples/\(file) as it is")
        }
    }

    @Test("every setting a plugin declares is documented in keyway.conf(5), with its range and default")
    func declaredKeysAreDocumented() throws {
        let manual = try String(contentsOfFile: packageDirectory + "/man/keyway.conf.5", encoding: .utf8)
            .replacingOccurrences(of: "\\-", with: "-")
        for plugin in Factors.all {
            #expect(manual.contains(".SS [\(plugin.kind)]"), "no section for [\(plugin.kind)]")
            for setting in plugin.settings {
                #expect(manual.contains(".B \(setting.key) = "), "\(plugin.kind).\(setting.key) is not documented")
                #expect(manual.contains(setting.expected), "\(plugin.kind).\(setting.key): '\(setting.expected)'")
                #expect(manual.contains("default \(setting.defaultValue)"), "\(plugin.kind).\(setting.key) default")
            }
        }
    }
}

@Suite("keyway.conf: rules read back from what `keyway policy show` prints")
struct RoundTripTests {
    @Test(
        "parse, print, parse again: the same rule",
        arguments: [
            "gesture", "gesture or passcode", "gesture and passcode", "(biometric or gesture) and passcode",
            "2 of (gesture, passcode, biometric)", "gesture or (passcode and biometric)",
            "gesture or (passcode or biometric)", "1 of (gesture)", "2 of (gesture, passcode)",
            "gesture*5 or 2 of (passcode*2, biometric*1)", "pattern-or-passcode and biometric",
            "(gesture and passcode) or biometric", "gesture and (passcode and biometric)",
        ])
    func roundTrip(rule: String) throws {
        func compile(_ text: String) throws -> Policy.Rule {
            let source = ConfigSource(path: "r.conf", text: "[policy r]\nrequire = \(text)\n")
            switch Configuration.parse([source], plugins: Factors.all) {
            case .success(let configuration): return try #require(configuration.policy(named: "r")).base.rule
            case .failure(let problems): throw problems
            }
        }
        let first = try compile(rule)
        let printed = Configuration.text(of: first)
        #expect(try compile(printed) == first, "\(rule) → \(printed)")
    }

    @Test("and binds tighter than or; or is an ordered fallback list")
    func precedence() throws {
        let source = ConfigSource(path: "p.conf", text: "[policy p]\nrequire = gesture or passcode and biometric\n")
        guard case .success(let configuration) = Configuration.parse([source], plugins: Factors.all) else {
            Issue.record("refused")
            return
        }
        #expect(
            configuration.policy(named: "p")?.base.rule
                == .anyOf([
                    .factor(.gesture, attempts: 3),
                    .allOf([.factor(.passcode, attempts: 3), .factor(.biometric, attempts: 3)]),
                ]))
    }

    @Test("drop-ins: a later file replaces a key, continues a section, and the built-ins cannot be redefined")
    func dropIns() throws {
        let main = ConfigSource(
            path: "keyway.conf", text: "[gesture]\nattempts = 4\n[policy sudo]\nrequire = gesture\n")
        let later = ConfigSource(
            path: "keyway.conf.d/50.conf", text: "[gesture]\nattempts = 2\n[policy sudo]\nwhen = local\n")
        guard case .success(let configuration) = Configuration.parse([main, later], plugins: Factors.all) else {
            Issue.record("refused")
            return
        }
        let sudo = try #require(configuration.policy(named: "sudo")?.base)
        #expect(sudo.rule == .factor(.gesture, attempts: 2))
        #expect(sudo.when == .local)
        #expect(configuration.settingOrigins["gesture.attempts"]?.description == "keyway.conf.d/50.conf:2")
        #expect(configuration.policy(named: "pattern")?.base.rule == .factor(.gesture, attempts: 2))
        let builtIns = Configuration.builtInsOnly(plugins: Factors.all)
        let policies: [Policy] = builtIns.policies.map { $0.base.policy }
        #expect(Array(policies.prefix(Policy.builtIns.count)) == Policy.builtIns)
        // Then every factor alone, named as the factor, where no built-in has its name (passcode has one).
        let named = Set(Policy.builtIns.map { $0.name })
        let alone: [Policy] = Factors.all.map { $0.kind }.filter { !named.contains($0.rawValue) }
            .sorted { $0.rawValue < $1.rawValue }.map { Policy(name: $0.rawValue, rule: .factor($0, attempts: 3)) }
        #expect(Array(policies.dropFirst(Policy.builtIns.count)) == alone)
    }

    @Test("every factor is a policy of its own: policy=totp asks a code alone; a policy cannot take a factor's name")
    func factorPolicies() throws {
        let builtIns = Configuration.builtInsOnly(plugins: Factors.all)
        for kind in Factors.all.map(\.kind) {
            let rule = builtIns.policy(named: kind.rawValue)?.base.rule
            #expect(rule == .factor(kind, attempts: 3), "\(kind): \(String(describing: rule))")
        }
        // A configured totp attempts setting applies to the built-in, as to every built-in.
        guard
            case .success(let configured) = Configuration.parse(
                [ConfigSource(path: "keyway.conf", text: "[totp]\nattempts = 5\n")], plugins: Factors.all)
        else {
            Issue.record("the configuration was refused")
            return
        }
        #expect(configured.policy(named: "totp")?.base.rule == .factor(FactorKind(rawValue: "totp"), attempts: 5))
        guard
            case .failure(let refused) = Configuration.parse(
                [ConfigSource(path: "keyway.conf", text: "[policy totp]\nrequire = passcode\n")], plugins: Factors.all)
        else {
            Issue.record("a policy named after a factor was accepted")
            return
        }
        #expect("\(refused)".contains("a policy cannot be named 'totp'"), "\(refused)")
    }
}
