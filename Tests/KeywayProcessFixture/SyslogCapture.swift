import Foundation
import Testing

/// Receives what processes send to syslog: a datagram socket at /dev/log (bound there when no syslog daemon owns
/// it, or bind-mounted over it in a private mount namespace when one does). One capture at a time in this process:
/// two in suites running side by side raced for /dev/log (the second saw the first's socket and bind-mounted over
/// it, which the first then removed).
final class SyslogCapture: @unchecked Sendable {
    /// Held from a capture's start to its `stop()`.
    private static let exclusive = DispatchSemaphore(value: 1)  // not a lock: no owning thread
    var socketPath: String { sink.path }
    private let sink: DatagramSink
    private let ownsDevLog: Bool

    init(directory: String) throws {
        try requireIsolation()  // may create /dev/log
        Self.exclusive.wait()
        ownsDevLog = !FileManager.default.fileExists(atPath: "/dev/log")
        guard let sink = DatagramSink(at: ownsDevLog ? "/dev/log" : directory + "/log.sock") else {
            Self.exclusive.signal()
            throw CocoaError(.fileWriteUnknown)
        }
        self.sink = sink
    }

    /// Runs a command so that its syslog reaches this capture.
    private func command(_ executable: String, _ arguments: [String]) -> (String, [String]) {
        if ownsDevLog { return (executable, arguments) }
        let quoted = ([executable] + arguments).map { "'\($0.replacingOccurrences(of: "'", with: "'\\''"))'" }
        return (
            "/usr/bin/unshare",
            [
                "--mount", "/bin/sh", "-c",
                "mount --bind \(socketPath) /dev/log && exec \(quoted.joined(separator: " "))",
            ]
        )
    }

    /// Runs the PAM harness with `arguments`, its syslog reaching this capture.
    func harness(_ arguments: [String]) throws -> Run {
        let (executable, arguments) = command(harnessPath, arguments)
        return try run(executable, arguments)
    }

    /// Every line sent so far (a harness that has ended has sent all of its own).
    var lines: [String] { sink.datagrams.map { String(decoding: $0, as: UTF8.self) } }

    /// Every line sent so far, once one of them is `needed` (for what another process, such as sshd, sends on its
    /// own time); an issue, with the last lines seen, when none is within `seconds`.
    func lines(waitingFor what: String, seconds: Double = 15, _ needed: (String) -> Bool) -> [String] {
        var seen: [String] = []
        _ = waitUntil(what, seconds: seconds, seen: { seen.suffix(20).joined(separator: "\n") }) {
            seen = lines
            return seen.contains(where: needed)
        }
        return seen
    }

    func stop() {
        sink.stop()
        Self.exclusive.signal()
    }
}
