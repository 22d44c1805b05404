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
                exit(ExitStatus.ioError)
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

    static func printError(_ text: String) { Descriptor.printError(text) }
}
