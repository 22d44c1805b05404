import Glibc

/// A throwaway fprintd of the test's own (scripts/fprintd-bus.sh): a private D-Bus bus, polkit mocked to allow
/// fprintd's actions, fprintd with libfprint's virtual reader and its prints in a temporary directory. Stopped and
/// removed by `stop()`, or by its watchdog when the test process dies first. Root only.
public final class FprintdBus: @unchecked Sendable {
    /// The directory: the bus socket, the reader's socket, the prints, the logs.
    public let directory: String
    /// The bus address keywayd is given (`--system-bus`).
    public let address: String

    static let script: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path + "/scripts/fprintd-bus.sh"
    }()

    /// Starts the bus, the mock and fprintd (a second or two). With `systemSocket` the bus also listens at
    /// /run/dbus/system_bus_socket, where a module in a setuid program looks (only under scripts/test-isolated.sh).
    public init(systemSocket: Bool = false) throws(BusError) {
        var template = Array("/tmp/keyway-fprintd-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw BusError("mkdtemp failed: errno \(errno)")
        }
        directory = String(cString: made)
        let (status, output) = PostgresCluster.run(
            "\(Self.script) start \(directory)" + (systemSocket ? " system" : ""))
        guard status == 0, let line = output.split(separator: "\n").last, line.hasPrefix("unix:") else {
            throw BusError("fprintd-bus.sh start failed (\(status)): \(output)")
        }
        address = String(line)
    }

    /// Runs a subcommand of the script (`scan`, `cmd`, `kill-fprintd`, `restart-fprintd`, `run`); its status and
    /// output.
    @discardableResult
    public func script(_ arguments: String...) -> (status: Int32, output: String) {
        let quoted = arguments.map {
            "'" + $0.split(separator: "'", omittingEmptySubsequences: false).joined(separator: "'\\''") + "'"
        }
        let (status, output) = PostgresCluster.run(
            "\(Self.script) \(quoted[0]) \(directory) \(quoted.dropFirst().joined(separator: " "))")
        return (status, output)
    }

    /// Puts finger `id` on the reader.
    public func scan(_ id: String) { script("scan", id) }

    /// fprintd's own log.
    public var fprintdLog: String { (try? readText(directory + "/fprintd.log")) ?? "" }

    /// A bus that could not be started.
    public struct BusError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// How many verifications fprintd has started (its log's "start verification" lines).
    public var verificationsStarted: Int {
        fprintdLog.split(separator: "\n").filter { $0.contains("start verification device") }.count
    }

    /// Waits up to `seconds` for fprintd to start its verification number `count + 1` (so a scan sent then reaches
    /// it: the virtual reader drops scans while nobody has the device); false when it did not.
    public func awaitVerification(after count: Int, within seconds: Int = 20) -> Bool {
        for _ in 0..<(seconds * 20) {
            if verificationsStarted > count { return true }
            usleep(50_000)
        }
        return false
    }

    /// Enrolls `finger` for `user` with fprintd-enroll and five scans of print `id`, as an administrator would
    /// without Keyway; returns fprintd-enroll's output.
    public func enrollWithFprintd(_ user: String, finger: String = "right-index-finger", print id: String) -> String {
        let log = directory + "/enroll-\(user).out"
        _ = PostgresCluster.run(
            "\(Self.script) run \(directory) fprintd-enroll -f \(finger) \(user) </dev/null >\(log) 2>&1 &")
        for _ in 0..<5 {
            for _ in 0..<100 {
                if let text = try? readText(log), text.contains("Enrolling") { break }
                usleep(20_000)
            }
            usleep(300_000)
            scan(id)
        }
        for _ in 0..<100 {
            if let text = try? readText(log), text.contains("enroll-completed") || text.contains("failed") { break }
            usleep(50_000)
        }
        return (try? readText(log)) ?? ""
    }

    private func readText(_ path: String) throws -> String {
        guard let file = fopen(path, "r") else { return "" }
        defer { fclose(file) }
        return String(decoding: readAll(file), as: UTF8.self)
    }

    /// Stops everything and removes the directory.
    public func stop() { _ = PostgresCluster.run("\(Self.script) stop \(directory)") }
}
