import Glibc
import KeywayBiometricSimulator
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayPlatform
import KeywayRuntime
import KeywayTools
import KeywayVault

/// What an account shows and how an administrator gives it back: status, reset, unlock, the sensor, the audit
/// trail.
extension Command {
    func status() -> Int32 {
        if parsed.has("--all") { return statusOfAll() }
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            // Root sees everyone; anyone else their own account, which is all keywayd shows them.
            let users = try runtime.vault.status(of: parsed.value("--user") ?? (getuid() == 0 ? nil : callerName()))
            if users.isEmpty { print("No users are enrolled.") }
            for status in users {
                print("\(status.user.escapingControlCharacters):")
                for factor in status.factors {
                    // What is no factor of its own (an administrator's pass) is listed only while an account holds it.
                    let plugin = Factors.all.plugin(factor.factor)
                    if plugin == nil && factor.enrolled == nil { continue }
                    var line = "  \(factor.factor): "
                    // A pass whose uses are all spent is kept (its audit and its last use), but says so first.
                    let spent = plugin == nil && factor.usesLeft == 0
                    let made = spent ? "spent, every use; issued" : plugin == nil ? "issued" : "enrolled"
                    line += factor.enrolled.map { "\(made) \($0.at) by \($0.by)" } ?? "not enrolled"
                    if !factor.labels.isEmpty {
                        let noun = plugin?.part.map { "\($0)s: " } ?? ""
                        line += " (\(noun)\(factor.labels.joined(separator: ", ")))"
                    }
                    if let left = factor.usesLeft, factor.enrolled != nil, !spent {
                        line += "; \(left) \(left == 1 ? "use" : "uses") left"
                        if left <= Self.fewUsesLeft && plugin != nil {
                            line += " (WARNING: make a new set soon: keyway enroll \(factor.factor))"
                        }
                    }
                    if factor.failures > 0 { line += "; \(factor.failures) consecutive failures" }
                    line += Self.lock(factor.availability, enrolled: factor.enrolled != nil)
                    // Remote sessions count apart (AttemptBook.Channel): said only when there is something to say.
                    var remote = factor.remoteFailures > 0 ? "\(factor.remoteFailures) consecutive failures" : ""
                    if case .lockedOut = factor.remoteAvailability, let availability = factor.remoteAvailability {
                        remote += Self.lock(availability, enrolled: true)
                    }
                    if !remote.isEmpty {
                        line += "; remote: " + (remote.hasPrefix("; ") ? String(remote.dropFirst(2)) : remote)
                    }
                    print(line.escapingControlCharacters)
                }
                let switches = status.switches.sorted { $0.key < $1.key }
                if !switches.isEmpty {
                    print(
                        "  switches: "
                            + switches.map { "\($0.key) \(UserSetting.text($0.value))" }.joined(separator: ", "))
                }
            }
        }
    }

    /// What `availability` adds to a status line: a lock and until when (local time, then UTC), or why not.
    static func lock(_ availability: Availability, enrolled: Bool) -> String {
        switch availability {
        case .lockedOut(let until?, _):
            "; locked until \(SystemClock.local(until, now: SystemClock().now())) (\(until))"
        case .lockedOut(nil, let reason): "; LOCKED (\(reason))"
        case .notAvailable(let reason) where enrolled: "; unavailable: \(reason)"
        case .failed(let error): "; ERROR: \(error.reason)"
        case .available, .notEnrolled, .notAvailable: ""
        }
    }

    /// At or below this many uses left, `keyway status` warns (recovery codes: two left of ten).
    static let fewUsesLeft = 2

    func reset() -> Int32 {
        let user = user()
        let factor = parsed.value("--factor").map { _ in self.factorOption() }
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            try runtime.vault.reset(factor, of: user, by: actor)
            print("Reset the \(factor?.rawValue ?? "failure") counters of \(user).")
        }
    }

    func factorOption() -> FactorKind { Self.factor(named: parsed.value("--factor") ?? "") }

    func unlock() -> Int32 {
        let user = user()
        let name = parsed.value("--policy") ?? Policy.biometricsOrPasscode.name
        // As the module: the variant for this user, its settings, `when` (the CLI is a local session).
        let subject = Configuration.Subject(user: user, isRemote: false) {
            Accounts.isMember(user, of: $0).mapError { AuthenticationError(.invalidPolicy, "\($0)") }
        }
        let resolved: Configuration.Resolved
        switch configuration().resolve(name, for: subject) {
        case .success(let found): resolved = found
        case .failure(let error): Keyway.report(error)
        }
        let policy = resolved.policy
        let runtime = runtime(settings: resolved.settings)
        let evaluation = runtime.context().evaluate(
            policy, for: UserContext(name: user, service: "keyway", startedBy: getuid()),
            reason: "keyway unlock", conversation: conversation)
        print(evaluation.description.escapingControlCharacters)
        if resolved.definition.mode == .audit {
            print("mode = audit: the module logs this outcome and returns PAM_IGNORE, whatever it is")
        }
        if let error = evaluation.error { Keyway.printError("keyway: \(error.reason)") }
        return ExitStatus.status(for: evaluation.error)
    }

    func sensor() -> Int32 {
        let line = operands.joined(separator: " ")
        let event: SensorEvent
        switch SensorControl.parse(line[...]) {
        case .success(let parsedEvent): event = parsedEvent
        case .failure(let error): Keyway.fail(usage: error.description)
        }
        let wait = parsed.value("--wait").flatMap(Double.init) ?? 0
        let directory = parsed.value("--sensor") ?? SensorControl.defaultDirectory
        switch SensorControl.send(event, directory: directory, wait: .milliseconds(Int64(wait * 1000))) {
        case .success: return ExitStatus.success
        case .failure(let error):
            Keyway.printError("keyway: sensor: \(error)")
            return 3
        }
    }

    func audit() -> Int32 {
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            for entry in try runtime.vault.audit(of: parsed.value("--user")) { print(entry.description) }
        }
    }

    func bench() -> Int32 {
        let rounds = parsed.value("--rounds").flatMap { Int($0) } ?? 20
        return attempt { () throws(AuthenticationError) in
            let hasher = try Argon2idHasher()
            let secret = Secret(copying: Array("2-4-9-3".utf8))
            let encoded = try hasher.hash(secret)
            let samples = try Timings.of(rounds) { () throws(AuthenticationError) in
                _ = try hasher.verify(secret, against: encoded)
            }
            print("\(hasher.cost): one verification \(Self.summary(samples, in: 1000, "ms")) over \(rounds) rounds")
            if let socket = parsed.value("--socket") { try roundTrips(socket, count: max(rounds * 10, 1000)) }
            configurationReads(count: rounds * 10)
            SimulatorBench.run(rounds: rounds)
        }
    }
}
