import Foundation
import KeywayBiometric
import KeywayBiometricSimulator
import KeywayCore
import KeywayCrypto
import KeywayGesture
import KeywayPasscode
import KeywayPlatform
import KeywayRuntime
import KeywayStore
import KeywayVault
import Testing

/// The package root, found from the test binary.
let packageRoot: String = {
    var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("Package.swift").path),
        directory.path != "/"
    {
        directory = directory.deletingLastPathComponent()
    }
    return directory.path
}()

/// The deployable module and the helpers `make test` builds first (`make module cli harness`).
let modulePath = packageRoot + "/build/pam_keyway.so"
/// `KEYWAY_HARNESS` names another build of the C host: `make harden` runs these suites with one built with ASan and
/// UBSan.
let harnessPath = ProcessInfo.processInfo.environment["KEYWAY_HARNESS"] ?? packageRoot + "/build/pam-harness"
let cliPath = packageRoot + "/build/keyway"
/// `KEYWAY_DAEMON` names another build of keywayd: `make harden` runs the suite with one built with ASan.
let daemonPath = ProcessInfo.processInfo.environment["KEYWAY_DAEMON"] ?? packageRoot + "/build/keywayd"
/// True when the tests drive the deployable keywayd (not a sanitizer build, whose memory use is not the product's).
let deployableDaemon = ProcessInfo.processInfo.environment["KEYWAY_DAEMON"] == nil

/// Tests that add users or write `/etc`, utmp or `/dev/log` run only inside `scripts/test-isolated.sh` (which
/// `make test` uses): there those are copies in a private mount namespace, so a test killed midway can leave nothing
/// in the real system. Run directly on a real system, such a test fails with this explanation instead of writing.
struct NotIsolated: Error, CustomStringConvertible {
    let description =
        "this test adds users and writes /etc, utmp or /dev/log; run it through `make test` or "
        + "`scripts/test-isolated.sh swift test …`, where those are private copies"
}

/// Throws `NotIsolated` unless this process runs inside `scripts/test-isolated.sh`'s namespace: `KEYWAY_TEST_ROOT` is
/// set *and* `/etc` is that run's copy (same device and inode), so a stray variable cannot let a test write the real
/// `/etc`.
func requireIsolation() throws {
    guard let root = ProcessInfo.processInfo.environment["KEYWAY_TEST_ROOT"] else { throw NotIsolated() }
    var etc = stat(), copy = stat()
    guard stat("/etc", &etc) == 0, stat(root + "/etc", &copy) == 0, etc.st_dev == copy.st_dev, etc.st_ino == copy.st_ino
    else { throw NotIsolated() }
}

/// Held by every test that puts another file in place of a shared stack in /etc/pam.d (LoginTests and ExampleStackTests
/// both replace /etc/pam.d/login): suites run side by side, and one must not take the other's stack for the
/// original, nor log in through it. Recursive, since a test may replace a stack inside another replacement.
let systemStackLock = NSRecursiveLock()

/// A throwaway root-owned directory with a store, a keywayd serving it, a sensor directory and a PAM service
/// directory. The daemon starts with the first service written (or `startDaemon()`) and stops in `remove()`; if a
/// test dies first, it exits by itself after two idle minutes.
struct PAMFixture {
    let directory: String
    var store: String { directory + "/lib/keyway.db" }
    var sensor: String { directory + "/run" }
    var services: String { directory + "/pam.d" }
    var socket: String { directory + "/keywayd.sock" }
    /// Where the fixture's keywayd writes its metrics (node_exporter's textfile).
    var metrics: String { directory + "/keyway.prom" }
    private let daemon = DaemonBox()

    /// The module arguments that point at this fixture: socket= and sensor=.
    var moduleArguments: String { "socket=\(socket) sensor=\(sensor)" }

    init() {
        var template = Array("/tmp/keyway-pam-test.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        mkdir(services, 0o755)
    }

    func remove() {
        daemon.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Starts keywayd on this fixture's store and socket (once), and waits until it accepts connections.
    func startDaemon(_ extra: [String] = [], environment: [String: String] = [:]) {
        daemon.start(
            [
                daemonPath, "--socket", socket, "--store", store, "--sensor", sensor, "--idle-exit", "120",
                "--metrics", metrics,
            ] + extra,
            socket: socket,
            environment: environment)
    }

    /// Stops the daemon (SIGKILL, as a crash would).
    func stopDaemon() { daemon.stop() }

    /// What keywayd has logged (its standard error) since it started.
    var daemonLog: String { (try? String(contentsOfFile: directory + "/keywayd.log", encoding: .utf8)) ?? "" }

    /// The daemon's process, while it runs.
    var daemonProcess: Process? { daemon.process }

    /// Writes `service` with auth and account lines for pam_keyway.so and `arguments` (socket= and sensor= added),
    /// and starts the daemon.
    func service(_ name: String, _ arguments: String, account: Bool = true) {
        let line = "\(modulePath) \(moduleArguments) \(arguments)"
        var text = "auth required \(line)\n"
        if account { text += "account required \(line)\n" }
        _ = FileManager.default.createFile(atPath: services + "/" + name, contents: Data(text.utf8))
        startDaemon()
    }

    /// The store's vault in this process (creating the store) with a cheap Argon2id cost so tests stay fast; the
    /// daemon reads the cost from each hash, so it verifies these as it would any other.
    func vault() throws -> LocalVault {
        var options = SystemVault.Options()
        options.storePath = store
        options.createStore = true
        options.hashCost = .minimum
        return try SystemVault.open(options)
    }

    /// The factors over `vault()`.
    func runtime() throws -> Runtime {
        var options = Runtime.Options()
        options.sensorDirectory = sensor
        return Runtime(vault: try vault(), options: options)
    }

    func enrollPattern(_ user: String, _ pattern: String) throws {
        let text = Array(pattern.utf8)
        let gesture = try runtime().authenticator(.gesture) as! GestureAuthenticator
        try gesture.enroll(user: user, by: "test", conversation: Answers([text, text]))
    }

    func enrollPasscode(_ user: String, _ passcode: String) throws {
        let text = Array(passcode.utf8)
        let passcode = try runtime().authenticator(.passcode) as! PasscodeAuthenticator
        try passcode.enroll(user: user, by: "test", conversation: Answers([text, text]))
    }

    /// Where `writeConfig` puts the configuration (`config=` names it).
    var configPath: String { directory + "/keyway.conf" }

    /// Writes the configuration as root would (owned by root, mode 0644) and returns `config=PATH`.
    @discardableResult
    func writeConfig(_ text: String, mode: mode_t = 0o644) -> String {
        _ = FileManager.default.createFile(atPath: configPath, contents: Data(text.utf8))
        chmod(configPath, mode)
        return "config=\(configPath)"
    }

    /// Puts sudoers `rules` in place at `path` (a drop-in in /etc/sudoers.d) as root would: written beside the
    /// fixture (mode 0440), checked by `visudo -cf`, then copied. Throws, installing nothing, when visudo refuses them.
    func installSudoers(_ rules: String, at path: String) throws {
        let draft = directory + "/sudoers-" + (path.split(separator: "/").last.map(String.init) ?? "drop-in")
        _ = FileManager.default.createFile(
            atPath: draft, contents: Data(rules.utf8), attributes: [.posixPermissions: 0o440])
        let check = try run("/usr/sbin/visudo", ["-cf", draft])
        guard check.status == 0 else { throw SudoersRefused(text: check.text) }
        try FileManager.default.copyItem(atPath: draft, toPath: path)
    }

    func enrollFinger(_ user: String, _ finger: String) throws {
        let touches = ScriptedSensorEvents(Array(repeating: .present(user: user, finger: finger), count: 5))
        let plugin = BiometricAuthenticator(vault: try vault(), sensor: SimulatedSensor(events: touches))
        try plugin.enroll(user: user, finger: finger, by: "test", conversation: Answers([]))
    }
}

/// What visudo said about rules it refused.
struct SudoersRefused: Error, CustomStringConvertible {
    let text: String
    var description: String { "visudo refused the sudoers rules: \(text)" }
}

/// The fixture's keywayd process (a class, so the fixture struct can start it lazily).
final class DaemonBox: @unchecked Sendable {  // used from one test at a time
    private(set) var process: Process?

    func start(_ command: [String], socket: String, environment: [String: String]) {
        if let running = process, running.isRunning { return }
        process = nil
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: command[0])
        daemon.arguments = Array(command.dropFirst())
        if !environment.isEmpty {
            daemon.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        daemon.standardOutput = FileHandle.nullDevice
        // keywayd logs to standard error: kept beside its socket, for the tests that read what it said.
        let log = (socket as NSString).deletingLastPathComponent + "/keywayd.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        daemon.standardError = FileHandle(forWritingAtPath: log) ?? FileHandle.nullDevice
        spawning.lock()
        let started = (try? daemon.run()) != nil
        spawning.unlock()
        guard started else {
            Issue.record("keywayd could not be started: \(command)")
            return
        }
        process = daemon
        for _ in 0..<500 where daemon.isRunning {  // up to 5 s for the socket to appear
            if case .success(let fd) = UnixSocket.connect(to: socket) {
                close(fd)
                return
            }
            usleep(10_000)
        }
        Issue.record("keywayd did not start serving \(socket) within 5 s (running: \(daemon.isRunning))")
    }

    func stop() {
        guard let daemon = process else { return }
        if daemon.isRunning { kill(daemon.processIdentifier, SIGKILL) }
        daemon.waitUntilExit()
        process = nil
    }
}

/// Fixed answers, for enrolling in-process.
final class Answers: Conversation {
    var lines: [[UInt8]]
    init(_ lines: [[UInt8]]) { self.lines = lines }
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply {
        lines.isEmpty ? .cancel : .secret(Secret(copying: lines.removeFirst()))
    }
    func tell(_ message: Message) {}
}

/// What a program printed and how it ended.
struct Run {
    var status: Int32
    /// Standard output and standard error, interleaved as the program wrote them (one pipe), split in lines.
    var output: [String]
    var text: String { output.joined(separator: "\n") }
    /// Standard output alone, when collected separately.
    var standardOutput: [String] = []

    /// The harness's final "result: NAME (code)" name.
    var result: String? {
        output.last { $0.hasPrefix("result: ") }.map { String($0.dropFirst(8).split(separator: " ")[0]) }
    }
}

/// Starts a program; `finish()` collects it.
/// Held from making a child's pipes until the child runs, and while keywayd is started: Foundation makes pipes
/// without close-on-exec, so a keywayd started meanwhile on another thread would inherit the write end of a client's
/// output pipe and keep it open for its whole life, and that client's reader would never see the end of file.
let spawning = NSLock()

final class Started: @unchecked Sendable {
    let process = Process()
    private let pipe: Pipe
    private let errors: Pipe?
    /// Signalled when the input has been written (or refused because the program closed its input).
    private let inputDone = DispatchSemaphore(value: 0)

    init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: String? = nil,
        separateErrors: Bool = false
    ) throws {
        // A program that exits before reading its input (a usage error) closes the pipe under our write: that
        // must be an EPIPE we ignore, never a SIGPIPE that kills the whole test process.
        BrokenPipe.ignoreSignal()
        spawning.lock()
        defer { spawning.unlock() }
        pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        errors = separateErrors ? Pipe() : nil
        process.standardOutput = pipe
        process.standardError = errors ?? pipe
        guard let input else {
            process.standardInput = FileHandle.nullDevice
            try process.run()
            inputDone.signal()
            return
        }
        let stdin = Pipe()
        process.standardInput = stdin
        try process.run()
        let writer = stdin.fileHandleForWriting
        if input.utf8.count <= 4096 {  // fits in the pipe: written and closed before another child can inherit it
            try? writer.write(contentsOf: Data(input.utf8))
            try? writer.close()
            inputDone.signal()
            return
        }
        // Written from another thread, so input larger than the pipe never blocks the test while the program
        // waits for us to read its output.
        let done = inputDone
        Thread {
            try? writer.write(contentsOf: Data(input.utf8))
            try? writer.close()
            done.signal()
        }.start()
    }

    func finish() -> Run {
        func lines(_ data: Data) -> [String] {
            String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init).filter { !$0.isEmpty }
        }
        let errorHandle = errors?.fileHandleForReading
        nonisolated(unsafe) var errorData = Data()
        let reader = errorHandle.map { handle in Thread { errorData = handle.readDataToEndOfFile() } }
        reader?.start()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        inputDone.wait()
        while reader != nil && !(reader?.isFinished ?? true) { usleep(1000) }
        guard errors != nil else { return Run(status: process.terminationStatus, output: lines(data)) }
        return Run(
            status: process.terminationStatus, output: lines(errorData) + lines(data), standardOutput: lines(data))
    }
}

/// Runs a program to completion.
func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, input: String? = nil)
    throws -> Run
{
    try Started(executable, arguments, environment: environment, input: input).finish()
}

/// Runs the harness against a service in the fixture.
func harness(_ fixture: PAMFixture, _ service: String, _ user: String, _ options: [String] = []) throws -> Run {
    try run(harnessPath, options + [fixture.services, service, user])
}

/// `--answer X` for each answer.
func answers(_ texts: String...) -> [String] { texts.flatMap { ["--answer", $0] } }

/// Throwaway accounts in the private /etc (scripts/test-isolated.sh). Suites run in parallel, and useradd and
/// userdel each lock /etc/passwd and give up when another holds it, so every call goes through one lock and is
/// retried while the files are busy. A leftover of an earlier test (its processes still running under the uid,
/// so that a plain userdel refused) is removed first.
enum TestAccounts {
    private static let lock = NSLock()

    /// Adds `name` (no home directory, bash, no subordinate ids: /etc/subuid is one more file to lock, and a test
    /// that needs a range writes its own); true on success.
    static func add(_ name: String) throws -> Bool {
        try requireIsolation()
        return try lock.withLock {
            _ = try? remove(locked: name)
            var last = ""
            for _ in 0..<100 {
                let added = try run(
                    "/usr/sbin/useradd",
                    ["-M", "-s", "/bin/bash", "-K", "SUB_UID_COUNT=0", "-K", "SUB_GID_COUNT=0", name])
                if added.status == 0 { return true }
                last = added.text
                // 1, 10: the files are busy (a program a test runs, such as login or passwd, holds their lock).
                guard added.status == 1 || added.status == 10 else { break }
                usleep(100_000)
            }
            print("useradd \(name) failed: \(last)")
            return false
        }
    }

    /// Sets `name`'s password with chpasswd, retried while the files are busy; true on success.
    static func setPassword(_ name: String, _ password: String) throws -> Bool {
        try lock.withLock {
            var last = ""
            for _ in 0..<100 {
                let set = try run("/usr/sbin/chpasswd", [], input: "\(name):\(password)\n")
                if set.status == 0 { return true }
                last = set.text
                usleep(100_000)
            }
            print("chpasswd \(name) failed: \(last)")
            return false
        }
    }

    /// Adds the group `name` with `members` (groupadd, then gpasswd -M), retried while the files are busy; true on
    /// success. A leftover group of that name is removed first.
    static func addGroup(_ name: String, members: [String]) throws -> Bool {
        try requireIsolation()
        return try lock.withLock {
            _ = try? run("/usr/sbin/groupdel", [name])
            var last = ""
            for command in [
                ("/usr/sbin/groupadd", [name]), ("/usr/bin/gpasswd", ["-M", members.joined(separator: ","), name]),
            ] {
                var done = false
                for _ in 0..<100 {
                    let result = try run(command.0, command.1)
                    if result.status == 0 {
                        done = true
                        break
                    }
                    last = result.text
                    usleep(100_000)
                }
                guard done else {
                    print("\(command.0) \(name) failed: \(last)")
                    return false
                }
            }
            return true
        }
    }

    /// Removes the group `name`.
    static func removeGroup(_ name: String) {
        lock.withLock { _ = try? run("/usr/sbin/groupdel", [name]) }
    }

    /// Runs `body` while no other test adds or removes an account (for a test that edits /etc/group itself).
    static func withAccountFilesLocked<T>(_ body: () throws -> T) throws -> T {
        try requireIsolation()
        return try lock.withLock { try body() }
    }

    /// The uid and primary gid of `name`, as `id` prints them (for setpriv).
    static func ids(_ name: String) throws -> (uid: String, gid: String) {
        (
            try run("/usr/bin/id", ["-u", name]).output.first ?? "",
            try run("/usr/bin/id", ["-g", name]).output.first ?? ""
        )
    }

    /// Removes `name` and ends whatever still runs under its uid.
    static func remove(_ name: String) {
        lock.withLock { _ = try? remove(locked: name) }
    }

    private static func remove(locked name: String) throws {
        guard try run("/usr/bin/id", ["-u", name]).status == 0 else { return }
        _ = try run("/usr/bin/pkill", ["-KILL", "-U", name])
        _ = try run("/usr/bin/pkill", ["-KILL", "-u", name])
        for _ in 0..<50 {
            let removed = try run("/usr/sbin/userdel", ["-f", name])
            if removed.status == 0 || removed.status == 6 { return }  // 6: no such user
            usleep(100_000)
        }
    }
}

/// A pseudo-terminal whose master side a process of the test's choosing holds (python3, renamed with prctl so that
/// /proc shows `name`, run as `user` when given): the evidence pam_keyway(8)'s LOCAL AND REMOTE table reads. Ended by
/// `stop()` (or when the test process goes: the holder exits when its standard input closes).
final class PseudoTerminalHolder: @unchecked Sendable {  // used from one test at a time
    let process = Process()
    private let input = Pipe()
    /// The terminal's path, /dev/pts/N.
    let path: String
    /// The process that holds the master side (a child of `process` with a user or `startedBy`).
    let pid: Int32

    /// The process that holds the master side, when it was moved out of the run's local session.
    private var outside: Cgroup? = nil

    /// `startedBy`: the holder is the child of a process of that name (as a shell's terminal under sshd).
    /// `session` false: the holder is moved out of the run's local login session (scripts/test-isolated.sh), so no
    /// logind record vouches for it. `on`: a terminal the holder runs on (its standard error), as a program run at a
    /// console, or in another terminal, makes one.
    init(
        name: String = "python3", user: String? = nil, startedBy: String? = nil, session: Bool = true,
        on terminal: String? = nil
    ) throws {
        let script = """
            import ctypes, os, pty, sys
            name = lambda n: ctypes.CDLL(None).prctl(15, n.encode(), 0, 0, 0)
            if sys.argv[2] and os.fork() != 0:
                name(sys.argv[2])
                os.wait()
                sys.exit(0)
            name(sys.argv[1])
            if sys.argv[3]:
                os.dup2(os.open(sys.argv[3], os.O_RDWR | os.O_NOCTTY), 2)
            master, slave = pty.openpty()
            print(os.ttyname(slave), os.getpid(), flush=True)
            sys.stdin.read()
            """
        var arguments = ["/usr/bin/python3", "-c", script, name, startedBy ?? "", terminal ?? ""]
        if let user { arguments = ["/usr/sbin/runuser", "-u", user, "--"] + arguments }
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let words = String(decoding: line, as: UTF8.self).split(separator: " ")
        path = words.first.map { String($0) } ?? ""
        pid = words.count > 1 ? Int32(words[1].trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0 : 0
        if !session {
            let cgroup = try Cgroup("outside-\(pid)")
            try cgroup.add(pid)
            outside = cgroup
        }
    }

    /// The terminal's index in its devpts instance (N of /dev/pts/N).
    var index: Int { Int(path.split(separator: "/").last ?? "") ?? -1 }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        outside?.remove()
    }
}

/// A virtual console (or the system console) a test's process may run on: a terminal only a person at this machine
/// types on.
let consoleDevice = ["/dev/tty63", "/dev/console"].first { FileManager.default.fileExists(atPath: $0) } ?? "/dev/tty63"

/// A cgroup of a test's own, beside the run's local session (scripts/test-isolated.sh): a process moved into one is
/// outside that session, or, named `session-ID.scope` with a record in /run/systemd/sessions, in a session of the
/// test's making.
struct Cgroup {
    let path: String

    /// Makes `name` (a path: parents are made too) under the run's cgroup.
    init(_ name: String) throws {
        guard let base = ProcessInfo.processInfo.environment["KEYWAY_TEST_CGROUP"] else {
            throw TerminalError(text: "KEYWAY_TEST_CGROUP is not set: run the suite through scripts/test-isolated.sh")
        }
        path = base + "/" + name
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Moves `pid` into this cgroup.
    func add(_ pid: Int32) throws {
        try "\(pid)\n".write(toFile: path + "/cgroup.procs", atomically: false, encoding: .utf8)
    }

    /// Removes it (and its parents up to the run's), once its processes have gone.
    func remove() {
        guard let base = ProcessInfo.processInfo.environment["KEYWAY_TEST_CGROUP"] else { return }
        var current = path
        while current.count > base.count, current.hasPrefix(base + "/") {
            rmdir(current)
            current = String(current[..<(current.lastIndex(of: "/") ?? current.startIndex)])
        }
    }
}

/// A pseudo-terminal of index `index` in a devpts instance of its own (another mount namespace's /dev/pts, as a
/// container's), its master held by a process named `name`, on `terminal` when given: a stranger's terminal that
/// shares a number with the test's.
final class ForeignTerminal: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()

    init(index: Int, name: String, on terminal: String? = nil) throws {
        let script = """
            import ctypes, os, sys
            ctypes.CDLL(None).prctl(15, sys.argv[1].encode(), 0, 0, 0)
            if sys.argv[3]:
                os.dup2(os.open(sys.argv[3], os.O_RDWR | os.O_NOCTTY), 2)
            held = []
            while True:
                master = os.open("/dev/pts/ptmx", os.O_RDWR | os.O_NOCTTY)
                held.append(master)
                number = int(open("/proc/self/fdinfo/%d" % master).read().split("tty-index:")[1].split()[0])
                if number >= int(sys.argv[2]):
                    break
            print(number, flush=True)
            sys.stdin.read()
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/unshare")
        process.arguments = [
            "--mount", "/bin/sh", "-c",
            "mount -t devpts -o newinstance,ptmxmode=0666 keyway-test-foreign /dev/pts && exec \"$@\"", "foreign",
            "/usr/bin/python3", "-c", script, name, "\(index)", terminal ?? "",
        ]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) == index else {
            stop()
            throw TerminalError(text: "the foreign devpts instance gave no terminal \(index): \(line)")
        }
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}

/// Waits until `condition` holds, looking every 50 ms for at most `seconds` (30 unless given: on a loaded machine a
/// process can take that long to start), and returns whether it did. On the deadline it records an issue naming
/// `what` was awaited and what `seen` shows then, so a failure says where things stood rather than that time ran out.
@discardableResult
func waitUntil(
    _ what: String, seconds: Double = 30, seen: () -> String, sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () -> Bool
) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        guard Date() < deadline else {
            Issue.record(
                "\(what) did not happen within \(Int(seconds)) s; last seen: \(seen())", sourceLocation: sourceLocation)
            return false
        }
        usleep(50_000)
    }
    return true
}
