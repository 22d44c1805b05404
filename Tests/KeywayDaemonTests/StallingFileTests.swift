import Foundation
import KeywayPlatform
import Testing

@testable import KeywayProcessFixture

/// A FUSE file system whose server never answers root's flush (and answers everyone else's at once): a file on it
/// is a descriptor whose close, in keywayd, waits until the server goes. Built from C with libfuse3 (the test
/// packages install `fuse3` and `libfuse3-dev`) and mounted by the test, as root with `allow_other`, as a user
/// with `/dev/fuse` (or fusermount3) would mount their own.
final class StallingFUSE {
    static let source = """
        #define FUSE_USE_VERSION 31
        #include <fuse3/fuse.h>
        #include <errno.h>
        #include <string.h>
        #include <unistd.h>
        static int attributes(const char *path, struct stat *st, struct fuse_file_info *fi) {
            (void)fi;
            memset(st, 0, sizeof *st);
            if (!strcmp(path, "/")) { st->st_mode = S_IFDIR | 0755; st->st_nlink = 2; return 0; }
            if (!strcmp(path, "/file")) { st->st_mode = S_IFREG | 0444; st->st_nlink = 1; return 0; }
            return -ENOENT;
        }
        static int opened(const char *path, struct fuse_file_info *fi) { (void)fi; return strcmp(path, "/file") ? -ENOENT : 0; }
        /* Root's flush (keywayd closing a passed copy) is never answered; the owner's own closes are. */
        static int flushed(const char *path, struct fuse_file_info *fi) {
            (void)path; (void)fi;
            if (fuse_get_context()->uid == 0) for (;;) sleep(1);
            return 0;
        }
        static const struct fuse_operations operations = { .getattr = attributes, .open = opened, .flush = flushed };
        int main(int argc, char **argv) { return fuse_main(argc, argv, &operations, NULL); }
        """

    let directory: String
    var mountPoint: String { directory + "/mnt" }
    /// The file whose close stalls.
    var file: String { mountPoint + "/file" }
    private let server: Started

    struct Failure: Error, CustomStringConvertible { let description: String }

    init() throws {
        var template = Array("/tmp/keyway-fuse.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        chmod(directory, 0o755)
        mkdir(directory + "/mnt", 0o755)
        try Data(Self.source.utf8).write(to: URL(fileURLWithPath: directory + "/stall.c"))
        let built = try run(
            "/bin/sh",
            ["-c", "cc -o \"$1/stall\" \"$1/stall.c\" $(pkg-config --cflags --libs fuse3)", "sh", directory])
        guard built.status == 0 else { throw Failure(description: "cannot build the FUSE server: \(built.text)") }
        server = try Started(directory + "/stall", ["-f", "-o", "allow_other,fsname=keyway-stall", directory + "/mnt"])
        // Up to 30 s: a loaded machine can take that long to start the server.
        let mounted = directory + "/mnt/file"
        for _ in 0..<600 where !FileManager.default.fileExists(atPath: mounted) && server.process.isRunning {
            usleep(50_000)
        }
        guard FileManager.default.fileExists(atPath: mounted) else {
            let running = server.process.isRunning
            stop()
            throw Failure(description: "the FUSE file system did not mount in 30 s (its server running: \(running))")
        }
    }

    /// Kills the server (every close waiting on it then fails and returns) and lets go of the mount.
    func stop() {
        kill(server.process.processIdentifier, SIGKILL)
        _ = server.finish()
        _ = try? run("/bin/umount", ["-l", mountPoint])
        try? FileManager.default.removeItem(atPath: directory)
    }
}

extension HostilePeerTests {
    /// The hostile program as the toucher (a second person), asking a status on a fifth connection: what it was
    /// answered, and in how long.
    func busyProbe(_ mode: String) throws -> Run {
        let (uid, gid) = try TestAccounts.ids(Self.toucher(mode))
        return try run(
            "/usr/bin/setpriv",
            ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "--", hostilePath, "busy", fixture.socket])
    }

    /// The toucher's biometric authentication (as sudo runs it for them), and their touch: the result.
    func touchAuthenticates(_ mode: String) throws -> String? {
        let name = Self.toucher(mode)
        let (uid, _) = try TestAccounts.ids(name)
        let waiting = try Started(
            "/usr/bin/setpriv", ["--ruid=\(uid)", "--euid=0", "--", harnessPath, fixture.services, "bio", name])
        let touched = try run(
            cliPath, ["sensor", "present", name, "right-index", "--wait", "10", "--sensor", fixture.sensor])
        let result = waiting.finish()
        #expect(touched.status == 0, "the touch reached no one: \(touched.text); \(result.text)")
        return result.result
    }

    @Test(
        "a FUSE file whose close never returns, on refused and admitted connections and a lease: no one else waits",
        arguments: ["refuse", "receive"])
    func stallingFile(mode: String) throws {
        defer { tearDown(mode) }
        let attacker = try setUp(mode)
        let fuse = try StallingFUSE()
        var stopped = false
        defer { if !stopped { fuse.stop() } }
        let normal = try normalTime()
        let before = descriptors()
        // On a lease first (the admitted connections below keep the attacker's own places while their closes wait):
        // the thread that holds the sensor never closes what the attacker passed, so the sensor is free for the next
        // person at once.
        let deposit = try attack(mode, attacker, ["deposit", fixture.socket, Self.attacker(mode), "fuse:" + fuse.file])
        #expect(deposit.status == 0, "\(deposit.text)")
        #expect(
            deposit.text.contains(mode == "refuse" ? "deposited false" : "ended true"), "\(mode): \(deposit.text)")
        #expect(try touchAuthenticates(mode) == "PAM_SUCCESS", "\(mode): \(fixture.daemonLog)")
        for kind in ["refused", "admitted"] {
            let running = try startAttackInPlace(attacker, [kind, fixture.socket, "3", "fuse:" + fuse.file])
            var slowest: Int64 = 0
            for _ in 0..<3 { slowest = max(slowest, try victim()) }
            // Another person over their own connections is still answered "busy" at once: their refusal is not
            // queued behind the attacker's stalled close.
            let probe = try busyProbe(mode)
            let report = running.finish()
            #expect(report.status == 0, "\(report.text)")
            #expect(slowest <= normal + 1000, "\(mode) \(kind): \(slowest) ms, \(normal) ms normally")
            #expect(probe.text.contains("answered busy"), "\(mode) \(kind): \(probe.text)")
            let milliseconds = probe.output.last.flatMap { line in
                line.split(separator: " ").dropLast().last.flatMap { Int($0) }
            }
            #expect((milliseconds ?? Int.max) <= 1000, "\(mode) \(kind): \(probe.text)")
            #expect(report.text.contains("passed 0 ") == (mode == "refuse"), "\(mode) \(kind): \(report.text)")
        }
        #expect(try victim() <= normal + 1000, "after: \(mode)")
        // The server gone, every stalled close returns: keywayd holds what it held before.
        fuse.stop()
        stopped = true
        #expect(settle(to: before) <= before, "\(mode): \(before) descriptors before, \(descriptors()) after")
        let churn = try attack(mode, attacker, ["churn", fixture.socket, "1200"])
        #expect(churn.text.contains("served 1200"), "\(churn.text)")
    }
}
