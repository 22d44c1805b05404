import Foundation
import KeywayCore
import KeywayPlatform
import KeywayStore
import Testing

/// A fresh 0700 directory under /tmp, removed by `remove()`.
struct Scratch {
    let directory: String
    var store: String { directory + "/keyway.db" }

    init() {
        let template = "/tmp/keyway-store-test.XXXXXX"
        var bytes = Array(template.utf8CString)
        directory = String(cString: mkdtemp(&bytes)!)
    }

    func open(create: Bool = true) throws(AuthenticationError) -> SQLiteStore {
        try SQLiteStore(.ownedByCurrentUser(path: store, create: create))
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// Mounts a small tmpfs (root only) at `name` inside the scratch directory and returns its path.
    func mountTmpfs(_ name: String, size: String) -> String? {
        let mount = directory + "/" + name
        mkdir(mount, 0o700)
        return shell("mount -t tmpfs -o size=\(size),mode=0700 keyway-\(name) \(mount)") == 0 ? mount : nil
    }

    func mode(_ path: String) -> mode_t {
        var info = stat()
        stat(path, &info)
        return info.st_mode & 0o7777
    }

    func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }
}

/// The probe executable, built next to the test bundle.
let probePath: String = {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    var directory = executable.deletingLastPathComponent()
    while !FileManager.default.fileExists(atPath: directory.appendingPathComponent("keyway-probe").path),
        directory.path != "/"
    {
        directory = directory.deletingLastPathComponent()
    }
    return directory.appendingPathComponent("keyway-probe").path
}()

/// A running probe, its output collected.
final class Probe: @unchecked Sendable {
    let process = Process()
    private let pipe = Pipe()

    init(_ arguments: [String], shell prefix: String? = nil) throws {
        BrokenPipe.ignoreSignal()  // a write to a probe that already exited must fail with EPIPE, not kill us
        if let prefix {
            process.executableURL = URL(fileURLWithPath: "/bin/bash")
            process.arguments = ["-c", prefix + " exec \"$0\" \"$@\"", probePath] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: probePath)
            process.arguments = arguments
        }
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
    }

    /// Waits for the exit and returns the output lines.
    func finish() -> [String] {
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
    }

    /// Runs a probe to completion.
    static func run(_ arguments: [String], shell prefix: String? = nil) throws -> [String] {
        try Probe(arguments, shell: prefix).finish()
    }
}

/// Runs a shell command, returning its status.
@discardableResult
/// `mount -o remount,MODE MOUNT`, tried for up to 5 s while it fails. A remount read-only is refused while any
/// process holds a file there open for writing; in one parallel run of the suite it was refused (status 32) once,
/// the store already closed, so something beside this test held a descriptor for a moment. The cause is not
/// pinned down; a mount that stays busy still fails the test.
func remount(_ mount: String, _ mode: String) -> Int32 {
    var status: Int32 = 0
    for _ in 0..<50 {
        status = shell("mount -o remount,\(mode) \(mount)")
        if status == 0 { return 0 }
        usleep(100_000)
    }
    return status
}

func shell(_ command: String) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/bash")
    process.arguments = ["-c", command]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try? process.run()
    process.waitUntilExit()
    return process.terminationStatus
}

/// Parallel wrong guesses at alice's passcode from separate processes released at one barrier, each with its own
/// wrong passcode (so none is refunded as a repeat), and an independent count of slow-hash runs.
struct GuessAttack {
    /// How each process ended ("mismatch", "refused throttled", …).
    let outcomes: [String]
    /// Guesses that were verified (and did not match).
    var verified: Int { outcomes.filter { $0 == "mismatch" }.count }
    /// Guesses refused before any hash ran.
    var refused: Int { outcomes.filter { $0 == "refused throttled" }.count }
    /// Lines in the probes' hash log: slow-hash runs.
    let kdfRuns: Int

    /// Runs the attack on the store at `location` (a path or a URI); the probes' environment gets `environment`.
    init(store location: String, processes: Int, in directory: String, environment: String? = nil) throws {
        let kdfLog = directory + "/kdf.log"
        let barrier = directory + "/go"
        unlink(kdfLog)
        unlink(barrier)
        let probes = try (0..<processes).map { index in
            try Probe(["attempt", location, "alice", "wrong-\(index)", kdfLog, barrier], shell: environment)
        }
        release(processes, at: barrier)
        outcomes = probes.map { $0.finish().joined() }
        kdfRuns = (try? String(contentsOfFile: kdfLog, encoding: .utf8))?.split(separator: "\n").count ?? 0
    }
}

/// Opens `barrier` once all `count` probes wait at it (each leaves `BARRIER-PID` on arriving), so they attempt at
/// one moment however long a loaded machine takes to start them; a fixed pause let a late one attempt alone, after
/// the others. On the deadline (30 s) the issue says how many had arrived, and the barrier opens anyway.
func release(_ count: Int, at barrier: String) {
    let directory = (barrier as NSString).deletingLastPathComponent
    let prefix = (barrier as NSString).lastPathComponent + "-"
    func arrived() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { $0.hasPrefix(prefix) }
    }
    let deadline = Date().addingTimeInterval(30)
    while arrived().count < count && Date() < deadline { usleep(10_000) }
    let waiting = arrived()
    if waiting.count < count { Issue.record("\(waiting.count) of \(count) probes reached the barrier in 30 s") }
    for name in waiting { unlink(directory + "/" + name) }
    _ = FileManager.default.createFile(atPath: barrier, contents: Data())
}
