import Foundation
import KeywayPlatform

@testable import KeywayProcessFixture

/// A real sshd (Debian's openssh-server) on a loopback port of its own, with a configuration, host key and authorized
/// keys of the test's making, and a client key that logs in as any user the test names. It runs as sshd.service would:
/// outside the run's local login session (scripts/test-isolated.sh), in a cgroup of its own, so nothing of the test's
/// session vouches for what it starts. Its PAM service is `sshd`: the test writes /etc/pam.d/sshd (the run's private
/// copy) and `stop()` puts back what was there.
final class SSHServer: @unchecked Sendable {  // used from one test at a time
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// Held from a server's start to its `stop()`: every sshd reads /etc/pam.d/sshd, so the suites that run one
    /// (side by side) take turns. A semaphore, not a lock: a test may stop on another thread than it started.
    private static let exclusive = DispatchSemaphore(value: 1)

    let directory: String
    let port: Int
    /// The client's private key (`ssh -i`).
    var clientKey: String { directory + "/client_key" }
    /// sshd's listening process.
    private var daemon: Int32 = 0
    private let cgroup: Cgroup
    private let savedStack: Data?

    /// `settings`: lines added to sshd_config (`AuthenticationMethods …`, `KbdInteractiveAuthentication yes`);
    /// `pam`: the text of /etc/pam.d/sshd; `users`: who may log in with the client key.
    init(settings: [String] = [], pam: String, users: [String]) throws {
        Self.exclusive.wait()
        var started = false
        defer { if !started { Self.exclusive.signal() } }  // a failed start lets the next one go
        var template = Array("/tmp/keyway-sshd.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        chmod(directory, 0o755)
        for (key, type) in [("host_key", "ed25519"), ("client_key", "ed25519")] {
            let made = try run("/usr/bin/ssh-keygen", ["-q", "-t", type, "-N", "", "-f", directory + "/" + key])
            guard made.status == 0 else { throw Failure(description: "ssh-keygen: \(made.text)") }
        }
        let publicKey = try String(contentsOfFile: directory + "/client_key.pub", encoding: .utf8)
        mkdir(directory + "/keys", 0o755)
        for user in users {
            guard
                FileManager.default.createFile(
                    atPath: directory + "/keys/" + user, contents: Data(publicKey.utf8),
                    attributes: [.posixPermissions: 0o644])
            else { throw Failure(description: "cannot write \(directory)/keys/\(user)") }
        }
        port = Self.freePort()
        let config =
            [
                "Port \(port)", "ListenAddress 127.0.0.1", "HostKey \(directory)/host_key",
                "PidFile \(directory)/sshd.pid", "AuthorizedKeysFile \(directory)/keys/%u", "StrictModes no",
                "UsePAM yes", "PermitRootLogin no", "UseDNS no", "LogLevel VERBOSE", "PrintMotd no",
                "PrintLastLog no", "Banner none",
            ] + settings
        try (config.joined(separator: "\n") + "\n").write(
            toFile: directory + "/sshd_config", atomically: true, encoding: .utf8)
        mkdir("/run/sshd", 0o755)  // sshd's privilege separation directory
        let check = try run("/usr/sbin/sshd", ["-t", "-f", directory + "/sshd_config"])
        guard check.status == 0 else { throw Failure(description: "sshd -t: \(check.text)") }
        cgroup = try Cgroup("sshd-\(port)")
        savedStack = FileManager.default.contents(atPath: "/etc/pam.d/sshd")
        do {
            try pam.write(toFile: "/etc/pam.d/sshd", atomically: true, encoding: .utf8)
        } catch {
            cleanUp()
            throw error
        }
        // Started as a daemon (its first process exits at once): sshd closes the descriptors it inherits, which
        // Foundation reads as its child's end, and it would then wait for a child that is still running.
        let launched = try run("/usr/sbin/sshd", ["-f", directory + "/sshd_config", "-E", directory + "/sshd.log"])
        var daemon: Int32 = 0
        for _ in 0..<100 {
            daemon =
                Int32(
                    ((try? String(contentsOfFile: directory + "/sshd.pid", encoding: .utf8)) ?? "")
                        .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            if daemon > 0 { break }
            usleep(50_000)
        }
        guard launched.status == 0, daemon > 0 else {
            let why = "sshd did not start: \(launched.text) \(log)"
            cleanUp()
            throw Failure(description: why)
        }
        self.daemon = daemon
        do {
            try cgroup.add(daemon)
        } catch {
            cleanUp()
            throw error
        }
        guard Self.waitForListener(port) else {
            cleanUp()
            throw Failure(description: "sshd did not listen on port \(port): \(log)")
        }
        started = true
    }

    /// What sshd has logged.
    var log: String { (try? String(contentsOfFile: directory + "/sshd.log", encoding: .utf8)) ?? "" }

    /// The ssh command line for `user` (a key, no host key checks), with `options` before the destination. ssh's own
    /// messages stay at their default level: what keyboard-interactive sends without a prompt is one of them.
    func command(_ user: String, _ options: [String] = []) -> String {
        let base = [
            "ssh", "-i", clientKey, "-p", "\(port)", "-o", "StrictHostKeyChecking=no", "-o",
            "UserKnownHostsFile=/dev/null",
        ]
        return (base + options + ["\(user)@127.0.0.1"]).joined(separator: " ")
    }

    /// Ends sshd and every session it started, and puts /etc/pam.d/sshd back.
    func stop() {
        cleanUp()
        Self.exclusive.signal()
    }

    /// What `stop` does but letting the next server go.
    private func cleanUp() {
        if let pids = try? String(contentsOfFile: cgroup.path + "/cgroup.procs", encoding: .utf8) {
            for pid in pids.split(separator: "\n").compactMap({ Int32($0) }) { kill(pid, SIGKILL) }
        }
        if daemon > 0 { kill(daemon, SIGKILL) }
        if ProcessInfo.processInfo.environment["KEYWAY_TEST_VERBOSE"] != nil { print(log) }
        for _ in 0..<50 {
            let left = (try? String(contentsOfFile: cgroup.path + "/cgroup.procs", encoding: .utf8)) ?? ""
            if left.isEmpty { break }
            usleep(20_000)
        }
        cgroup.remove()
        if let savedStack {
            _ = FileManager.default.createFile(atPath: "/etc/pam.d/sshd", contents: savedStack)
        } else {
            unlink("/etc/pam.d/sshd")
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// A loopback port nothing listens on now.
    static func freePort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : 0
    }

    static func waitForListener(_ port: Int) -> Bool {
        for _ in 0..<100 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
            address.sin_port = UInt16(port).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
                }
            }
            close(fd)
            if connected { return true }
            usleep(50_000)
        }
        return false
    }
}
