import Foundation
import Testing

@testable import KeywayProcessFixture

/// Pipes whose other end went away, and output that reaches a person's terminal: Keyway's programs and this test
/// process must end with a status, never be killed by SIGPIPE, and never print a user name raw.
@Suite("broken pipes and hostile names in output")
struct BrokenPipeTests {
    @Test("a child that exits at once while 1 MiB is written to its input: EPIPE is ignored, the test lives on")
    func childExitsBeforeReading() throws {
        // 1 MiB cannot fit in the pipe (64 KiB), so the write is still going on when /bin/true exits and closes
        // its end: without SIGPIPE ignored this test process would die with signal 13.
        let input = String(repeating: "2-4-9-3\n", count: 1 << 17)
        for _ in 0..<3 {
            let result = try run("/bin/true", [], input: input)
            #expect(result.status == 0)
        }
        let usage = try run(cliPath, ["no-such-command"], input: input)
        #expect(usage.status == 64, "\(usage.text)")
    }

    /// A store with `count` users besides alice, bulk-loaded with sqlite3 (their payload is alice's).
    func crowdedStore(_ fixture: PAMFixture, users count: Int, extra: [String] = []) throws {
        try fixture.enrollPattern("alice", "2-4-9-3")
        let names = extra.map { "('\($0.replacingOccurrences(of: "'", with: "''"))')" }.joined(separator: ",")
        let sql = """
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < \(count))
            INSERT INTO enrollments SELECT 'user-' || i, 'gesture',
                (SELECT payload FROM enrollments WHERE user = 'alice'), 0, 'test' FROM n;
            \(extra.isEmpty ? "" : "WITH x(name) AS (VALUES \(names)) INSERT INTO enrollments SELECT name, 'gesture', (SELECT payload FROM enrollments WHERE user = 'alice'), 0, 'test' FROM x;")
            """
        let load = try run("/usr/bin/sqlite3", [fixture.store, sql])
        #expect(load.status == 0, "\(load.text)")
    }

    @Test("`keyway status | head -1` exits 0 with the first line, not by SIGPIPE; a full disk is exit 74")
    func closedStandardOutput() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try crowdedStore(fixture, users: 3000)  // ~200 kB of status: far more than the pipe holds
        // env --default-signal=PIPE: keyway starts with SIGPIPE at its default, as from any shell, whatever this
        // test process ignores.
        let script = """
            /usr/bin/env --default-signal=PIPE \(cliPath) --store \(fixture.store) status | head -1
            echo "status ${PIPESTATUS[0]}"
            """
        for _ in 0..<3 {
            let result = try run("/bin/bash", ["-c", script])
            #expect(result.output.first == "alice:", "\(result.text)")
            #expect(result.output.last == "status 0", "\(result.text)")
        }
        let full = try run("/bin/bash", ["-c", "\(cliPath) policies > /dev/full"])
        #expect(full.status == 74, "\(full.text)")
        #expect(full.text.contains("keyway: cannot write to standard output: No space left on device"), "\(full.text)")
    }

    @Test("`keyway status` and `keyway audit` escape control characters in user names: no forged line, no escape")
    func hostileNamesAreEscaped() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        let forged = "mallory\nroot:\n  gesture: not enrolled"
        let escape = "eve\u{1B}[2J\u{1B}]0;owned\u{07}"
        try crowdedStore(fixture, users: 1, extra: [forged, escape, "back\\slash"])
        let status = try run(cliPath, ["--store", fixture.store, "status"])
        #expect(status.status == 0, "\(status.text)")
        #expect(!status.text.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" }, "\(status.text)")
        #expect(status.output.contains("mallory\\x0aroot:\\x0a  gesture: not enrolled:"), "\(status.text)")
        #expect(status.output.contains("eve\\x1b[2J\\x1b]0;owned\\x07:"), "\(status.text)")
        #expect(status.output.contains("back\\\\slash:"), "\(status.text)")
        #expect(!status.output.contains("root:"), "\(status.text)")
        // The CLI refuses such names itself, saying why, with the name escaped.
        let refused = try run(cliPath, ["--store", fixture.store, "reset", "--user", escape])
        #expect(refused.status == 64, "\(refused.text)")
        #expect(refused.text.contains("'eve\\x1b[2J\\x1b]0;owned\\x07' is not a valid user name"), "\(refused.text)")
        // An audit line written by a tool that did not refuse the name is escaped as well.
        let insert =
            "INSERT INTO audit (at, actor, user, action, factor) VALUES (0, 'x\u{1B}[31m', 'a\nb', 'reset', NULL)"
        #expect(try run("/usr/bin/sqlite3", [fixture.store, insert]).status == 0)
        let audit = try run(cliPath, ["--store", fixture.store, "audit"])
        #expect(audit.output.contains { $0.hasSuffix("reset a\\x0ab all; by x\\x1b[31m") }, "\(audit.text)")
    }
}
