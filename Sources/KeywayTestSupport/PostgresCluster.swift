import Glibc

/// A throwaway PostgreSQL cluster of the test's own (scripts/pg-cluster.sh): initdb in a temporary directory, a
/// Unix socket there (and TCP loopback when a port is given), stopped and removed by `stop()`, or by its watchdog
/// when the test process dies first. Root only (the server runs as the system's postgres user).
public final class PostgresCluster: @unchecked Sendable {
    /// The cluster's directory: the data, the socket, the log, `pgpass`.
    public let directory: String
    /// The URI keywayd uses (role keyway_host, no password: it is in `passfile`).
    public let uri: String
    /// The TCP port, when the cluster listens on 127.0.0.1 too.
    public let port: Int?

    /// The password file holding every login role's password (root's, 0600).
    public var passfile: String { directory + "/pgpass" }
    /// The owner's URI (its password in `passfile`): what `keyway store migrate` connects as.
    public var ownerURI: String { "postgresql://keyway_owner@/keyway?host=\(directory)&port=\(port ?? 5432)" }

    /// The repository's scripts directory, found from this file's path.
    static let script: String = {
        var path = #filePath
        for _ in 0..<3 { path = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)]) }
        return path + "/scripts/pg-cluster.sh"
    }()

    /// Starts a cluster (about a second). With `tls` (and a port), TCP takes TLS only, as the guide sets a server up,
    /// and `uri` is the TCP one with `sslrootcert=DIRECTORY/ca.crt`.
    public init(port: Int? = nil, tls: Bool = false) throws(ClusterError) {
        var template = Array("/tmp/keyway-pg-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        self.port = port
        let arguments = (port.map { " \($0)" } ?? "") + (tls ? " tls" : "")
        let (status, output) = Self.run("\(Self.script) start \(directory)\(arguments)")
        guard status == 0, let line = output.split(separator: "\n").last, line.hasPrefix("postgresql://") else {
            throw ClusterError("pg-cluster.sh start failed (\(status)): \(output)")
        }
        uri = String(line)
    }

    /// Starts a standby of `primary` (pg_basebackup -R) on a socket of its own; `synchronous`: the primary waits for
    /// it at every commit (it must then stay running, or every commit on the primary waits).
    public init(standbyOf primary: PostgresCluster, synchronous: Bool) throws(ClusterError) {
        var template = Array("/tmp/keyway-pg-standby.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw ClusterError("mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        port = primary.port
        let mode = synchronous ? "sync" : "async"
        let (status, output) = Self.run("\(Self.script) standby \(directory) \(primary.directory) \(mode)")
        guard status == 0, let line = output.split(separator: "\n").last, line.hasPrefix("postgresql://") else {
            throw ClusterError("pg-cluster.sh standby failed (\(status)): \(output)")
        }
        uri = String(line)
    }

    /// Promotes a standby to a primary, on a new timeline.
    public func promote() throws(ClusterError) {
        let (status, output) = Self.run("\(Self.script) promote \(directory)")
        guard status == 0 else { throw ClusterError("promote failed: \(output)") }
    }

    /// Starts PgBouncer 1.18 in transaction mode in front of the server, keeping at most `size` server connections;
    /// returns the URI keywayd's role connects to it with (its socket in `directory`, or 127.0.0.1:`port`).
    public func pooler(port: Int, size: Int) throws(ClusterError) -> String {
        let (status, output) = Self.run("\(Self.script) pooler \(directory) \(port) \(size)")
        guard status == 0, let line = output.split(separator: "\n").last, line.hasPrefix("postgresql://") else {
            throw ClusterError("pg-cluster.sh pooler failed (\(status)): \(output)")
        }
        return String(line)
    }

    /// Runs SQL as the owner; the output, one row per line, columns separated by |.
    @discardableResult
    public func sql(_ statement: String) throws(ClusterError) -> String {
        let quoted = "'" + statement.replacingAll("'", with: "'\\''") + "'"
        let (status, output) = Self.run("\(Self.script) sql \(directory) \(quoted)")
        guard status == 0 else { throw ClusterError("SQL failed (\(status)): \(statement): \(output)") }
        return output
    }

    /// psql as `role` (its password from `passfile`) reading `script`, going on after an error (each printed, with
    /// everything else psql says): a client's session, as root on a host with that role's password would run it.
    public func psql(as role: String, script: String) throws(ClusterError) -> String {
        let file = directory + "/script-\(getpid()).sql"
        guard let handle = fopen(file, "w") else { throw ClusterError("cannot write \(file)") }
        fputs(script, handle)
        fclose(handle)
        defer { unlink(file) }
        let quoted = "'postgresql://\(role)@/keyway?host=\(directory)&port=\(port ?? 5432)'"
        return Self.run("PGPASSFILE=\(passfile) psql -X -q -At \(quoted) -f \(file)").1
    }

    /// Creates a login role with its own password (in `passfile`) and returns the URI it connects with.
    public func role(_ name: String) throws(ClusterError) -> String {
        let (status, output) = Self.run("\(Self.script) role \(directory) \(name)")
        guard status == 0 else { throw ClusterError("creating role \(name) failed: \(output)") }
        return "postgresql://\(name)@/keyway?host=\(directory)&port=\(port ?? 5432)"
    }

    /// Stops the server at once, as a crash would, keeping its data; `resume()` starts it again.
    public func halt() throws(ClusterError) {
        let (status, output) = Self.run("\(Self.script) halt \(directory)")
        guard status == 0 else { throw ClusterError("halt failed: \(output)") }
    }

    /// Starts a halted server.
    public func resume() throws(ClusterError) {
        let (status, output) = Self.run("\(Self.script) resume \(directory)")
        guard status == 0 else { throw ClusterError("resume failed: \(output)") }
    }

    /// Stops (SIGSTOP) the server and every backend: a database that hangs, or a network partition, mid-request.
    public func freeze() throws(ClusterError) {
        let (status, output) = Self.run("\(Self.script) freeze \(directory)")
        guard status == 0 else { throw ClusterError("freeze failed: \(output)") }
    }

    /// Lets a frozen server go on (SIGCONT).
    public func thaw() throws(ClusterError) {
        let (status, output) = Self.run("\(Self.script) thaw \(directory)")
        guard status == 0 else { throw ClusterError("thaw failed: \(output)") }
    }

    /// Stops the server and removes the directory.
    public func stop() { _ = Self.run("\(Self.script) stop \(directory)") }

    /// Runs a shell command, returning its status and its output (standard error included).
    public static func run(_ command: String) -> (Int32, String) {
        guard let pipe = popen("WATCH_PID=\(getpid()) " + command + " 2>&1", "r") else { return (-1, "popen failed") }
        let output = readAll(pipe)
        let status = pclose(pipe)
        let text = String(decoding: output, as: UTF8.self)
        return ((status >> 8) & 0xFF, text.hasSuffix("\n") ? String(text.dropLast()) : text)
    }

    /// A cluster that could not be started or used.
    public struct ClusterError: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}

/// Everything left to read from `stream` (a file or a popen pipe), read until end of file.
func readAll(_ stream: UnsafeMutablePointer<FILE>) -> [UInt8] {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = fread(&buffer, 1, buffer.count, stream)
        if count <= 0 { break }
        bytes += buffer[0..<count]
    }
    return bytes
}

extension String {
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
