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
}
