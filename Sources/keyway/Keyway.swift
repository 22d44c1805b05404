import Glibc
import KeywayBiometricSimulator
import KeywayConfig
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayPasscode
import KeywayPlatform
import KeywayRuntime
import KeywayTools
import KeywayVault

/// The `keyway` command: enroll, change, remove, status, reset, unlock, sensor, policies, calibrate, bench.
@main
struct Keyway {
    static func main() {
        BrokenPipe.ignoreSignal()
        let words = Array(CommandLine.arguments.dropFirst())
        // First pass: which words are operands and which are option values, whatever the command.
        switch CommandLineParser(options: Subcommand.everyOption).parse(words) {
        case .failure(let error):
            fail(usage: error.description)
        case .success(let parsed):
            switch Subcommand.match(parsed.positional) {
            case .help:
                print(usage)
                finish(parsed.has("--help") ? ExitStatus.success : ExitStatus.usage)
            case .problem(let message):
                if parsed.has("--help") {
                    print(usage)
                    finish(ExitStatus.success)
                }
                fail(usage: message)
            case .command(let subcommand, let operands):
                if parsed.has("--help") {
                    print(subcommand.help)
                    finish(ExitStatus.success)
                }
                if let problem = subcommand.problem(operands: operands, parsed: parsed) {
                    fail(usage: problem, command: subcommand)
                }
                finish(subcommand.run(Command(parsed: parsed, subcommand: subcommand, operands: operands)))
            }
        }
    }

    /// `keyway --help`: every command's synopsis and summary, from the subcommand types.
    static var usage: String {
        var lines = [
            "usage: keyway [--socket PATH | --store PATH|URI [--passfile FILE]] [--sensor DIR] [--config FILE] "
                + "COMMAND ...", "",
        ]
        for command in Subcommand.all {
            lines.append("  \(command.synopsis.dropFirst("keyway ".count))")
            lines.append("      \(command.summary)")
        }
        lines += [
            "",
            """
            keyway asks keywayd (--socket, default /run/keyway/keywayd.sock); --store PATH|URI works on a store
            directly instead (root, e.g. while keywayd is stopped): an SQLite file, or a fleet's PostgreSQL URI. --config names the configuration (default
            /etc/keyway/keyway.conf and its keyway.conf.d/*.conf; see keyway.conf(5)). Users other than root may
            verify themselves (unlock), change their own pattern or passcode, and see their own status.
            'keyway COMMAND --help' shows a command's options.

            Exit status: 0 success, 1 failed (doctor: a warning), 2 locked out, 3 not enrolled or unavailable,
            4 cancelled, 5 enrollment refused (nothing saved), 64 usage, 65 configuration errors, 66 configuration file missing, 67 no such user,
            69 keywayd unreachable or busy, 70 internal, 73 cannot write a file, 74 store, 77 not permitted,
            78 configuration.
            """,
        ]
        return lines.joined(separator: "\n")
    }

    /// Flushes standard output and exits. A reader that stopped reading (`keyway status | head -1`) is not an
    /// error: the command did its work and ends with its own status. Any other failure to write is (exit 74).
    static func finish(_ status: Int32) -> Never {
        if fflush(nil) != 0 {  // every stream; glibc keeps a failed buffer, so an earlier failure shows here too
            let reason = errno
            if reason != EPIPE && !BrokenPipe.readerLeft(1) {
                printError("keyway: cannot write to standard output: \(String(cString: strerror(reason)))")
                exit(ExitStatus.outputFailure)
            }
        }
        exit(status)
    }

    static func fail(usage message: String, command: Subcommand? = nil) -> Never {
        let help = command.map { "keyway \($0.name) --help" } ?? "keyway --help"
        printError("Error: \(message)\nSee '\(help)'.")
        finish(ExitStatus.usage)
    }

    static func report(_ error: AuthenticationError) -> Never {
        printError("keyway: \(error.reason)")
        finish(ExitStatus.status(for: error))
    }

    static func printError(_ text: String) {
        _ = (text + "\n").withCString { write(2, $0, strlen($0)) }
    }
}

/// One command with its parsed arguments.
struct Command {
    let parsed: CommandLineParser.Parsed
    let subcommand: Subcommand
    /// The words after the command's name, checked against its operands.
    let operands: [String]

    // MARK: Helpers

    /// The factors over keywayd's vault, or over the store named by `--store` (created when `creating`).
    func runtime(creating: Bool = false, settings chosen: SettingsBook? = nil) -> Runtime {
        var options = Runtime.Options()
        if let sensor = parsed.value("--sensor") { options.sensorDirectory = sensor }
        let configuration = configuration()
        let settings = chosen ?? configuration.settings
        guard let store = parsed.value("--store") else {
            let socket = parsed.value("--socket") ?? DaemonVault.defaultSocket
            return Runtime(vault: DaemonVault(socketPath: socket, via: tool), options: options, settings: settings)
        }
        if parsed.value("--socket") != nil { Keyway.fail(usage: "Give --socket or --store, not both.") }
        guard getuid() == 0 else {
            Keyway.printError(
                "keyway: --store works on the store file directly, which only root may do; without --store, "
                    + "keywayd answers for you (your own status, unlock and change)")
            Keyway.finish(77)
        }
        var vaultOptions = SystemVault.Options()
        vaultOptions.storePath = store
        vaultOptions.createStore = creating
        if let passfile = parsed.value("--passfile") { vaultOptions.passfile = passfile }
        vaultOptions.settings = configuration.settings
        do { return Runtime(vault: try SystemVault.open(vaultOptions), options: options, settings: settings) } catch {
            Keyway.report(error)
        }
    }

    /// The configuration (--config, or /etc/keyway/keyway.conf); its errors end the command (65, or 66 for a named
    /// file that is missing), its warnings go to standard error.
    func configuration() -> Configuration {
        switch ConfigurationFiles.load(parsed.value("--config")) {
        case .success(let configuration):
            for warning in configuration.warnings { Keyway.printError(warning.description) }
            // Policies with errors fail closed where a stack names them; everything else works, so commands go on.
            if !configuration.policyErrors.isEmpty {
                Keyway.printError(ConfigurationProblems(configuration.policyErrors).description)
            }
            return configuration
        case .failure(let problems):
            Keyway.printError(problems.description)
            Keyway.finish(problems.isMissingFile ? ExitStatus.noInput : ExitStatus.dataError)
        }
    }

    func user() -> String {
        guard let user = parsed.value("--user"), !user.isEmpty else { Keyway.fail(usage: "Missing '--user <user>'.") }
        if let problem = UserContext.nameProblem(user) {
            Keyway.fail(usage: "'\(user.escapingControlCharacters)' is not a valid user name: \(problem).")
        }
        return user
    }

    /// The factor the first operand names (checked against the command's operands before it runs).
    func factor() -> FactorKind { Self.factor(named: operands[0]) }

    /// The factor a command-line word names (its name or an alias), from the plugins' declarations.
    static func factor(named word: String) -> FactorKind {
        guard let plugin = Factors.all.plugin(named: word) else {
            Keyway.fail(usage: "Unknown factor '\(word)'; use \(factorNames).")
        }
        return plugin.kind
    }

    static var factorNames: String { Setting.list(Subcommand.factorNames) }

    /// This command, as the audit trail names the tool.
    var tool: String { "keyway \(subcommand.name)" }

    /// Who makes the change: keywayd names the caller itself from the socket, so it is told only the tool.
    var actor: String {
        guard parsed.value("--store") != nil else { return tool }
        let uid = getuid()
        let name = Accounts.name(of: uid) ?? "uid \(uid)"
        return "\(name) via \(tool)"
    }

    var conversation: TerminalConversation {
        TerminalConversation(fromStandardInput: parsed.has("--stdin"), qrFile: parsed.value("--qr-file"))
    }

    /// Runs an operation, reporting its error with the right exit status.
    func attempt(_ body: () throws(AuthenticationError) -> Void) -> Int32 {
        do {
            try body()
            return ExitStatus.success
        } catch {
            Keyway.report(error)
        }
    }

    // MARK: Commands

    /// The named part `--name` (or its older spelling `--finger`) gives, if any.
    var partName: String? { parsed.value("--name") ?? parsed.value("--finger") }

    func enroll() -> Int32 {
        let factor = factor()
        let user = user()
        guard Accounts.exists(user) else {
            // An enrollment for a name that is no account would never be asked for; a typo ("KWALICE") would
            // leave the real account's owner with "Not recognized".
            Keyway.printError(
                "keyway: '\(user.escapingControlCharacters)' is not an account of this system (getpwnam found none); "
                    + "enroll an existing user (names are case-sensitive)")
            return ExitStatus.noUser
        }
        let plugin = Factors.all.plugin(factor)
        if plugin?.part == nil, let option = ["--name", "--finger", "--simulate-touches"].first(where: parsed.isGiven) {
            Keyway.fail(usage: "'\(option)' applies to a factor enrolled in named parts only.", command: subcommand)
        }
        let runtime = runtime(creating: true)
        return attempt { () throws(AuthenticationError) in
            guard let authenticator = runtime.authenticator(factor) else {
                throw AuthenticationError(.invalidPolicy, "Keyway has no \(factor)")
            }
            // A person's own TOTP or recovery codes: keywayd offers a new one only just after they prove who they
            // are, with the current code or another factor of theirs (VaultService.selfService).
            if getuid() != 0 && plugin?.enrollment == .sharedSecret && parsed.value("--store") == nil {
                try prove(user, before: "set your \(factor)", preferring: factor, in: runtime)
            }
            let request = EnrollmentRequest(
                user: user, actor: actor, label: partName, scripted: parsed.has("--simulate-touches"))
            let lines = try authenticator.enroll(
                request, conversation: repeatingConversation(factor, of: user, in: runtime))
            for line in lines { print(line) }
        }
    }

    /// Verifies `user` with a typed factor of theirs that is available now (`first` if it is, then the others in
    /// order, each offered after the last): keywayd records the success as the proof a self-service change needs.
    func prove(_ user: String, before reason: String, preferring first: FactorKind, in runtime: Runtime)
        throws(AuthenticationError)
    {
        let context = UserContext(name: user, service: "keyway", startedBy: getuid())
        let typed = Factors.all.filter { $0.input == .typed }.map(\.kind)
        let candidates = ([first] + typed.filter { $0 != first }).filter {
            runtime.vault.availability(of: $0, for: context) == .available
        }
        guard !candidates.isEmpty else {
            throw AuthenticationError(
                .notPermitted,
                "\(user) has no factor to prove who they are with (a code, a passcode, a pattern, a recovery code); "
                    + "root can enroll it: keyway enroll \(first) --user \(user)")
        }
        let rules: [Policy.Rule] = candidates.map { .factor($0, attempts: 3) }
        let proof = Policy(name: "prove it is you", rule: rules.count == 1 ? rules[0] : .atLeast(1, of: rules))
        let evaluation = runtime.context().evaluate(
            proof, for: context, reason: reason, conversation: repeatingConversation(first, of: user, in: runtime))
        if let error = evaluation.error { throw error }
    }

    /// With --stdin, enrollment reads one line and uses it for both entries.
    func repeatingConversation(_ factor: FactorKind, of user: String, in runtime: Runtime) -> any Conversation {
        guard parsed.has("--stdin") else { return conversation(for: factor, of: user, in: runtime) }
        return RepeatingConversation(qrFile: parsed.value("--qr-file"))
    }

    /// The person at the terminal: a pattern is drawn on the grid where the terminal allows it (with its trail
    /// unless the account's show-trail switch is off), the rest is typed.
    func conversation(for factor: FactorKind, of user: String, in runtime: Runtime) -> any Conversation {
        guard factor == .gesture else { return conversation }
        return GridConversation.forPattern(
            fromStandardInput: parsed.has("--stdin"),
            showTrail: switchValue(GestureAuthenticator.showTrailSetting, of: user, in: runtime))
    }

    func change() -> Int32 {
        let factor = factor()
        let user = user()
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            let talk: any Conversation =
                parsed.has("--stdin") ? ChangeConversation() : conversation(for: factor, of: user, in: runtime)
            guard Factors.all.plugin(factor)?.changeable == true,
                let knowledge = runtime.authenticator(factor) as? any KnowledgeAuthenticator
            else {
                Keyway.fail(
                    usage: "A \(factor) is changed by enrolling it again: keyway enroll \(factor) --user \(user).")
            }
            try knowledge.change(user: user, by: actor, conversation: talk)
            print("Changed the \(factor) of \(user).")
        }
    }

    func remove() -> Int32 {
        let factor = factor()
        let user = user()
        let runtime = runtime()
        return attempt { () throws(AuthenticationError) in
            let removed = try runtime.vault.remove(factor, of: user, label: partName, by: actor)
            guard removed else { throw AuthenticationError(.factorNotEnrolled, "\(user) has no \(factor) to remove") }
            print("Removed the \(factor) of \(user).")
        }
    }

    func status() -> Int32 {
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
                    line +=
                        factor.enrolled.map { "\(plugin == nil ? "issued" : "enrolled") \($0.at) by \($0.by)" }
                        ?? "not enrolled"
                    if !factor.labels.isEmpty {
                        let noun = plugin?.part.map { "\($0)s: " } ?? ""
                        line += " (\(noun)\(factor.labels.joined(separator: ", ")))"
                    }
                    if let left = factor.usesLeft, factor.enrolled != nil {
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

extension Command {
    /// What keywayd adds to an authentication besides the slow hash: one request on a fresh connection and its
    /// answer (an availability question, which reads the store and hashes nothing), back to back, then 50 ms apart
    /// as a real authentication's requests come: both processes then start cold, which back to back hides.
    func roundTrips(_ socket: String, count: Int) throws(AuthenticationError) {
        let vault = DaemonVault(socketPath: socket, via: tool)
        let user = UserContext(name: "keyway-bench")
        func request() throws(AuthenticationError) {
            if case .failed(let error) = vault.availability(of: Factors.all[0].kind, for: user) { throw error }
        }
        func p99(_ samples: [Double]) -> String { "p99 \(Int(samples[(samples.count * 99) / 100].rounded())) µs" }
        let warm = try Timings.of(max(count, 1), request)
        print(
            "keywayd round trip (one request, no slow hash): \(Self.summary(warm, in: 1, "µs")), \(p99(warm)) "
                + "over \(warm.count) requests")
        let cold = try Timings.of(100, apart: 50_000, request)
        print(
            "keywayd round trip, 50000 µs apart: \(Self.summary(cold, in: 1, "µs")), \(p99(cold)) "
                + "over \(cold.count) requests")
    }

    /// What the module does first on every call: read keyway.conf and its drop-ins, check them and compile every
    /// policy (here in full Swift; the module runs the same code in Embedded Swift).
    func configurationReads(count: Int) {
        let named = parsed.value("--config")
        guard case .success(let configuration) = ConfigurationFiles.load(named) else { return }
        let samples = try? Timings.of(max(count, 1)) { () throws(AuthenticationError) in
            _ = ConfigurationFiles.load(named)
        }
        guard let samples else { return }
        print(
            "keyway.conf read and compiled (\(configuration.files.count) file\(configuration.files.count == 1 ? "" : "s"), "
                + "\(configuration.policies.count) "
                + "policies): \(Self.summary(samples, in: 1, "µs")) over \(samples.count) reads")
    }

    /// "median M UNIT, min A UNIT, max B UNIT" of sorted microsecond samples, in whole units of `scale` µs (the
    /// benchmark script parses this wording).
    static func summary(_ samples: [Double], in scale: Double, _ unit: String) -> String {
        func show(_ value: Double) -> String { "\(Int((value / scale).rounded())) \(unit)" }
        return
            "median \(show(samples[samples.count / 2])), min \(show(samples[0])), max \(show(samples[samples.count - 1]))"
    }
}

/// Gives the same secret for both enrollment prompts (`enroll --stdin`).
final class RepeatingConversation: Conversation {
    /// Where a QR code goes instead of the terminal (`--qr-file`).
    private let qrFile: String?
    init(qrFile: String? = nil) { self.qrFile = qrFile }
    /// The line, once read: only when first asked, so what is shown before (a new secret) is on screen by then.
    private var line: Secret? = nil
    private var hasRead = false
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        if !hasRead {
            line = TerminalConversation.readLine(from: 0)
            hasRead = true
        }
        return line.map(Reply.secret) ?? .cancel
    }
    func tell(_ message: Message) { TerminalConversation.show(message, qrFile: qrFile) }
    var showsSecrets: Bool { TerminalConversation.showsSecrets }
}

/// `change --stdin`: the current secret, then the new one for both entries.
final class ChangeConversation: Conversation {
    private var current: Secret?
    private let new: Secret?
    init() {
        current = TerminalConversation.readLine(from: 0)
        new = TerminalConversation.readLine(from: 0)
    }
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        if let first = current {
            current = nil
            return .secret(first)
        }
        return new.map(Reply.secret) ?? .cancel
    }
    func tell(_ message: Message) { Keyway.printError(message.text) }
}
