import KeywayConfigFiles
import KeywayCore
import KeywayRuntime
import KeywayTools
import KeywayWire

/// `keyway metrics` and `keyway health`: what an operator's monitoring asks keywayd (keyway(8), keywayd(8) HEALTH
/// and METRICS). Both ask keywayd only: there is no `--store` form, since what they report is the daemon's.
extension Command {
    /// keywayd at `--socket`, or the system's.
    private var daemon: DaemonVault {
        if parsed.value("--store") != nil { Keyway.fail(usage: "\(tool) asks keywayd; give --socket, not --store.") }
        return DaemonVault(socketPath: parsed.value("--socket") ?? DaemonVault.defaultSocket, via: tool)
    }

    func metrics() -> Int32 {
        let daemon = daemon
        return attempt { () throws(AuthenticationError) in
            guard case .text(let text) = try daemon.ask(.metrics) else {
                throw AuthenticationError(.internalFailure, "keywayd answered metrics with something else")
            }
            print(text, terminator: "")
        }
    }

    /// The monitoring plugins' convention: `KEYWAY OK|WARNING|CRITICAL - summary` and one line per check, exit
    /// 0, 1 or 2 by the worst check; keywayd not answering is CRITICAL. With `--json`, one object instead.
    func health() -> Int32 {
        let socket = parsed.value("--socket") ?? DaemonVault.defaultSocket
        var checks: [HealthCheck]
        do throws(AuthenticationError) {
            switch try daemon.ask(.health) {
            case .health(let answer): checks = answer
            default: checks = [HealthCheck("keywayd", .critical, "answered health with something else")]
            }
        } catch {
            checks = [HealthCheck("keywayd", .critical, "does not answer at \(socket): \(error.reason)")]
        }
        if let stacks = Self.failingStacks(in: parsed.value("--pam-dir") ?? Self.pamDirectory) { checks.append(stacks) }
        let worst = checks.map(\.level).max() ?? .critical
        let troubled = checks.filter { $0.level == worst && worst != .ok }
        let summary =
            troubled.isEmpty
            ? "\(checks.count) checks passed"
            : troubled.map { "\($0.name) \($0.detail)" }.joined(separator: "; ")
        if parsed.has("--json") {
            let items = checks.map { check in
                "{\"name\": \(Self.json(check.name)), \"status\": \(Self.json(check.level.word)), "
                    + "\"code\": \(check.level.rawValue), \"detail\": \(Self.json(check.detail))}"
            }
            print(
                "{\"status\": \(Self.json(worst.word)), \"code\": \(worst.rawValue), \"summary\": \(Self.json(summary)), "
                    + "\"checks\": [\(items.joined(separator: ", "))]}")
        } else {
            print("KEYWAY \(worst.word) - \(summary.escapingControlCharacters)")
            for check in checks {
                print("\(check.level.word): \(check.name): \(check.detail.escapingControlCharacters)")
            }
        }
        return Int32(worst.rawValue)
    }

    /// CRITICAL when a Keyway line fails every login through it now (`StackDoctor.Finding.critical`: a policy with
    /// errors, or a configuration that does not load, on a line whose failure fails the stack). keywayd does not
    /// read the PAM stacks, so this command does, as `keyway doctor` does; nil when none does (or none can be read).
    static func failingStacks(in directory: String) -> HealthCheck? {
        guard case .success(let files) = readPAMFiles(directory) else { return nil }
        let report = StackDoctor(directory: PAMDirectory(path: directory, files: files)).examine(
            configuration: { ConfigurationFiles.load($0) }, keywayd: { _ in nil })
        let failing = report.findings.filter(\.critical)
        guard let first = failing.first else { return nil }
        let place = first.file.map { "\(directory)/\($0):\(first.line): " } ?? ""
        let more = failing.count > 1 ? " (and \(failing.count - 1) more)" : ""
        return HealthCheck("stacks", .critical, place + first.reason + more + "; keyway doctor")
    }

    /// `text` as a JSON string.
    static func json(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
