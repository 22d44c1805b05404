import Foundation
import KeywayCore
import KeywayTestSupport
import Testing

@testable import KeywayProcessFixture

/// Receives what processes send to the journal: a datagram socket bound at journald's own path in the test's private
/// /run (scripts/test-isolated.sh), as journald would be; each datagram parsed as journald parses the native
/// protocol. One capture at a time: the path is one.
final class JournalCapture: @unchecked Sendable {
    private static let exclusive = DispatchSemaphore(value: 1)  // not a lock: no owning thread
    static let path = "/run/systemd/journal/socket"
    private let sink: DatagramSink

    init() throws {
        try requireIsolation()  // binds in /run
        Self.exclusive.wait()
        mkdir("/run/systemd", 0o755)
        mkdir("/run/systemd/journal", 0o755)
        unlink(Self.path)
        guard let sink = DatagramSink(at: Self.path) else {
            Self.exclusive.signal()
            throw CocoaError(.fileWriteUnknown)
        }
        self.sink = sink
    }

    /// Every entry so far, each parsed into its fields; an entry that is not exactly the native protocol is nil.
    var entries: [[String: String]?] { sink.datagrams.map(Self.parse) }

    /// Every entry so far, once `needed` holds of them (keywayd sends its own on its own time); an issue, with the
    /// last entries seen, when it does not within `seconds`.
    func entries(waitingFor what: String, seconds: Double = 15, _ needed: ([[String: String]?]) -> Bool)
        -> [[String: String]?]
    {
        var seen: [[String: String]?] = []
        _ = waitUntil(what, seconds: seconds, seen: { "\(seen.suffix(10))" }) {
            seen = entries
            return needed(seen)
        }
        return seen
    }

    /// The native protocol: `NAME=value\n`, or `NAME\n`, a 64-bit little-endian length, the value and `\n`.
    static func parse(_ bytes: [UInt8]) -> [String: String]? {
        var fields: [String: String] = [:]
        var rest = bytes[...]
        while !rest.isEmpty {
            guard let newline = rest.firstIndex(of: 10) else { return nil }
            let line = rest[..<newline]
            if let equals = line.firstIndex(of: 61) {
                fields[String(decoding: line[..<equals], as: UTF8.self)] = String(
                    decoding: line[line.index(after: equals)...], as: UTF8.self)
                rest = rest[rest.index(after: newline)...]
                continue
            }
            let start = rest.index(after: newline)
            guard rest.count >= start - rest.startIndex + 8 else { return nil }
            var size = 0
            for (shift, byte) in rest[start..<start + 8].enumerated() { size |= Int(byte) << (8 * shift) }
            guard rest.endIndex > start + 8 + size, rest[start + 8 + size] == 10 else { return nil }
            fields[String(decoding: line, as: UTF8.self)] = String(
                decoding: rest[(start + 8)..<(start + 8 + size)], as: UTF8.self)
            rest = rest[(start + 9 + size)...]
        }
        return fields
    }

    func stop() {
        sink.stop()
        Self.exclusive.signal()
    }
}

/// A Prometheus exposition as Prometheus's own Python parser reads it (python3-prometheus-client's
/// `text_string_to_metric_families`): one sample per line, `[name, {labels}, value]`. A text it refuses throws.
struct Exposition {
    struct Sample {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    let samples: [Sample]

    init(_ text: String) throws {
        let script = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            for family in text_string_to_metric_families(sys.stdin.read()):
                for s in family.samples:
                    print(json.dumps([s.name, s.labels, s.value]))
            """
        let parsed = try run("/usr/bin/python3", ["-c", script], input: text)
        guard parsed.status == 0 else { throw CocoaError(.coderReadCorrupt, userInfo: ["parser": parsed.text]) }
        samples = try parsed.output.filter { !$0.isEmpty }.map { line in
            let row = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [Any] ?? []
            return Sample(
                name: row.first as? String ?? "", labels: row.dropFirst().first as? [String: String] ?? [:],
                value: (row.last as? NSNumber)?.doubleValue ?? .nan)
        }
    }

    /// The value of the sample `name` with exactly these labels (others it has are not compared), summed over
    /// the samples that match.
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples.filter { sample in
            sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value }
        }
        return matching.isEmpty ? nil : matching.reduce(0) { $0 + $1.value }
    }
}

@Suite("what an operator watches: metrics, the journal, keyway health", .serialized)
struct OperatorTests {
    static let wrong = ["3-4-9-2", "6-1-8-3", "4-3-8-1-6", "7-5-3-6", "1-2-3-6", "9-8-7-4", "1-5-9-6"]

    @Test("metrics: a scripted run counted as it was done, read by Prometheus's parser; no label names an account")
    func metricsCountWhatWasDone() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        try fixture.enrollPattern("kwmeter", "2-4-9-3")
        fixture.service("kwmetrics", "policy=pattern")
        // Two successes (one after a wrong pattern), then two failures whose fifth wrong pattern locks the pattern
        // (the lockout reached mid-evaluation ends it: PAM_MAXTRIES).
        let script: [([String], String)] = [
            (["2-4-9-3"], "PAM_SUCCESS"), ([Self.wrong[0], "2-4-9-3"], "PAM_SUCCESS"),
            (Array(Self.wrong[1...3]), "PAM_AUTH_ERR"), (Array(Self.wrong[4...6]), "PAM_MAXTRIES"),
        ]
        for (typed, expected) in script {
            let result = try harness(fixture, "kwmetrics", "kwmeter", typed.flatMap { ["--answer", $0] })
            #expect(result.result == expected, "\(typed): \(result.text)")
        }
        func check(_ text: String, _ origin: String) throws {
            let exposition = try Exposition(text)
            let decision = ["service": "kwmetrics", "policy": "pattern", "caller": "root"]
            #expect(
                exposition.value("keyway_decisions_total", decision.merging(["result": "success"]) { $1 }) == 2,
                "\(origin): \(text)")
            #expect(
                exposition.value("keyway_decisions_total", decision.merging(["result": "failure"]) { $1 }) == 2,
                "\(origin)")
            #expect(exposition.value("keyway_decision_duration_seconds_count") == 4, "\(origin)")
            #expect(exposition.value("keyway_attempts_total", ["factor": "gesture", "result": "success"]) == 2)
            #expect(exposition.value("keyway_attempts_total", ["factor": "gesture", "result": "mismatch"]) == 6)
            #expect(exposition.value("keyway_events_total", ["event": "lockout", "factor": "gesture"]) == 1)
            #expect(exposition.value("keyway_locked_accounts", ["factor": "gesture"]) == 1, "\(origin)")
            #expect(exposition.value("keyway_store_up") == 1)
            #expect((exposition.value("keyway_store_operation_seconds_count", ["operation": "write"]) ?? 0) > 0)
            #expect(!exposition.samples.contains { $0.labels.values.contains { $0.contains("kwmeter") } }, "\(origin)")
            #expect(
                !exposition.samples.contains { $0.labels.keys.contains("user") || $0.labels.keys.contains("account") })
        }
        let printed = try run(cliPath, ["--socket", fixture.socket, "metrics"])
        #expect(printed.status == 0, "\(printed.text)")
        try check(printed.text + "\n", "keyway metrics")
        // The textfile is written at most once a second: waited for until it holds the last decision.
        var textfile = ""
        waitUntil("the textfile's fourth decision", seen: { textfile }) {
            textfile = (try? String(contentsOfFile: fixture.metrics, encoding: .utf8)) ?? ""
            return (try? Exposition(textfile))?.value("keyway_decision_duration_seconds_count") == 4
        }
        try check(textfile, "the textfile")
        // An idle exit (here a kill) loses no count: the next keywayd takes them back from its file.
        fixture.stopDaemon()
        fixture.startDaemon()
        let again = try Exposition(try run(cliPath, ["--socket", fixture.socket, "metrics"]).text + "\n")
        #expect(again.value("keyway_decisions_total", ["service": "kwmetrics", "result": "failure"]) == 2)
        #expect(again.value("keyway_attempts_total", ["factor": "gesture", "result": "mismatch"]) == 6)
        #expect(again.value("keyway_up") == 1)
    }

    @Test("the journal: decisions from the module, lockout, reset, enrollment and pass from keywayd, field by field")
    func journalEntries() throws {
        let fixture = PAMFixture()
        let user = "kwjrnl\(getpid() % 100_000)"
        defer {
            fixture.remove()
            TestAccounts.remove(user)
        }
        #expect(try TestAccounts.add(user))
        let capture = try JournalCapture()
        defer { capture.stop() }
        fixture.service("kwjournal", "policy=pattern")
        let enroll = try run(
            cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", user, "--stdin"], input: "2-4-9-3\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        for typed in [["2-4-9-3"], Array(Self.wrong[1...3]), Array(Self.wrong[4...6])] {
            _ = try harness(fixture, "kwjournal", user, ["--no-tty"] + typed.flatMap { ["--answer", $0] })
        }
        let reset = try run(cliPath, ["--socket", fixture.socket, "reset", "--user", user])
        #expect(reset.status == 0, "\(reset.text)")
        let pass = try run(cliPath, ["--socket", fixture.socket, "pass", "issue", "--user", user])
        #expect(pass.status == 0, "\(pass.text)")
        // Each event's entry, the module's and keywayd's, waited for: keywayd may send its own after it has answered.
        let expected: [(Event.Kind, Int)] = [
            (.success, 1), (.failure, 2), (.lockout, 1), (.enrollment, 1), (.reset, 1), (.passIssued, 1),
        ]
        let all = capture.entries(waitingFor: "every event's journal entry for \(user)") { all in
            let mine = all.compactMap { $0 }.filter { $0["KEYWAY_USER"] == user }
            return expected.allSatisfy { kind, count in
                mine.filter { $0["MESSAGE_ID"] == kind.messageID }.count >= count
            }
        }
        #expect(all.allSatisfy { $0 != nil }, "an entry is not the native protocol")
        let entries = all.compactMap { $0 }.filter { $0["KEYWAY_USER"] == user }
        func kind(_ kind: Event.Kind) -> [[String: String]] { entries.filter { $0["MESSAGE_ID"] == kind.messageID } }
        let successes = kind(.success)
        #expect(successes.count == 1, "\(entries)")
        if let entry = successes.first {
            #expect(entry["SYSLOG_IDENTIFIER"] == "pam_keyway")
            #expect(entry["PRIORITY"] == "6" && entry["SYSLOG_FACILITY"] == "10")
            #expect(entry["KEYWAY_SERVICE"] == "kwjournal" && entry["KEYWAY_POLICY"] == "pattern")
            #expect(entry["KEYWAY_RESULT"] == "success" && entry["KEYWAY_FACTOR"] == "gesture")
            #expect(entry["KEYWAY_REMOTE"] == "yes", "no terminal: remote (pam_keyway(8))")
            #expect(entry["KEYWAY_STEPS"] == "gesture#1:succeeded", "\(entry)")
            #expect(entry["MESSAGE"] == "kwjournal: \(user) succeeded policy pattern", "\(entry)")
        }
        let failures = kind(.failure)
        #expect(failures.count == 2, "\(entries)")
        #expect(failures.allSatisfy { $0["KEYWAY_RESULT"] == "failure" && $0["PRIORITY"] == "5" })
        #expect(failures.allSatisfy { $0["KEYWAY_CODE"] != nil && $0["KEYWAY_REASON"] != nil })
        let lockouts = kind(.lockout)
        #expect(lockouts.count == 1, "\(lockouts)")
        if let lockout = lockouts.first {
            #expect(lockout["SYSLOG_IDENTIFIER"] == "keywayd" && lockout["PRIORITY"] == "4")
            #expect(lockout["KEYWAY_FACTOR"] == "gesture" && lockout["KEYWAY_SERVICE"] == "kwjournal")
            #expect(lockout["KEYWAY_REASON"]?.contains("too many failed attempts") == true, "\(lockout)")
            // The harness has no terminal, so the session is remote, and the lock is the remote counters'.
            #expect(lockout["KEYWAY_REMOTE"] == "yes", "\(lockout)")
            #expect(lockout["MESSAGE"]?.contains("from remote sessions") == true, "\(lockout)")
        }
        let enrollments = kind(.enrollment)
        #expect(enrollments.count == 1 && enrollments.first?["KEYWAY_FACTOR"] == "gesture", "\(entries)")
        #expect(enrollments.first?["KEYWAY_ACTOR"] == "root via keyway enroll", "\(enrollments)")
        #expect(kind(.reset).count == 1 && kind(.reset).first?["KEYWAY_ACTOR"] == "root via keyway reset")
        #expect(kind(.passIssued).count == 1, "\(entries)")
        // Never a secret: no pattern typed, right or wrong, and not the pass.
        let secrets = ["2-4-9-3"] + Self.wrong + pass.output.filter { $0.count >= 16 && !$0.contains(" ") }
        for entry in entries {
            for value in entry.values { #expect(!secrets.contains { value.contains($0) }, "\(value)") }
        }
    }

    @Test("the message catalog: journalctl indexes it in a temporary root and lists every event's MESSAGE_ID")
    func catalog() throws {
        var template = Array("/tmp/keyway-catalog.XXXXXX".utf8CString)
        let root = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(
            atPath: root + "/usr/lib/systemd/catalog", withIntermediateDirectories: true)
        try FileManager.default.copyItem(
            atPath: packageRoot + "/systemd/keyway.catalog", toPath: root + "/usr/lib/systemd/catalog/keyway.catalog")
        let update = try run("/usr/bin/journalctl", ["--root", root, "--update-catalog"])
        #expect(update.status == 0, "\(update.text)")
        #expect(FileManager.default.fileExists(atPath: root + "/var/lib/systemd/catalog/database"))
        let listed = try run("/usr/bin/journalctl", ["--root", root, "--list-catalog"])
        #expect(listed.status == 0, "\(listed.text)")
        for kind in Event.Kind.allCases {
            #expect(listed.output.contains { $0.hasPrefix(kind.messageID + " ") }, "\(kind): \(listed.text)")
        }
        #expect(listed.output.filter { !$0.isEmpty }.count == Event.Kind.allCases.count, "\(listed.text)")
        let lockout = try run("/usr/bin/journalctl", ["--root", root, "--dump-catalog", Event.Kind.lockout.messageID])
        #expect(lockout.text.contains("keyway status --user @KEYWAY_USER@\" shows the counters"), "\(lockout.text)")
    }

    /// The alert rules keywayd(8) and the guide give, as an administrator would paste them: the man page's block
    /// whole, the guide's rule inside a group.
    static func documentedRules() throws -> (manual: String, guide: String) {
        let manual = try String(contentsOfFile: packageRoot + "/man/keywayd.8", encoding: .utf8)
            .components(separatedBy: "\n")
        let start = try #require(manual.firstIndex { $0.hasPrefix("An alert on many lockouts") })
        let open = try #require(manual[start...].firstIndex(of: ".nf"))
        let close = try #require(manual[open...].firstIndex(of: ".fi"))
        let block = manual[(open + 1)..<close].joined(separator: "\n")
            .replacingOccurrences(of: "\\-", with: "-").replacingOccurrences(of: "\\\\", with: "\\")
        let guide = try String(contentsOfFile: packageRoot + "/docs/GUIDE.md", encoding: .utf8)
            .components(separatedBy: "\n")
        let intro = try #require(guide.firstIndex { $0.hasPrefix("An alert on a guessing attack") })
        let fence = try #require(guide[intro...].firstIndex(of: "```yaml"))
        let end = try #require(guide[(fence + 1)...].firstIndex(of: "```"))
        let rules = guide[(fence + 1)..<end].map { "      " + $0 }.joined(separator: "\n")
        return (block + "\n", "groups:\n  - name: guide\n    rules:\n" + rules + "\n")
    }

    @Test("the documented alert rules: promtool accepts them, and they fire on a lockout burst and a store away only")
    func documentedAlerts() throws {
        let promtool = packageRoot + "/build/promtool"  // make tools: unpacked from Debian's prometheus package
        var template = Array("/tmp/keyway-alerts.XXXXXX".utf8CString)
        let directory = String(cString: mkdtemp(&template)!)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (manual, guide) = try Self.documentedRules()
        try manual.write(toFile: directory + "/keywayd.8.yml", atomically: true, encoding: .utf8)
        try guide.write(toFile: directory + "/guide.yml", atomically: true, encoding: .utf8)
        let checked = try run(promtool, ["check", "rules", directory + "/keywayd.8.yml", directory + "/guide.yml"])
        #expect(checked.status == 0, "\(checked.text)")
        #expect(checked.text.contains("SUCCESS: 2 rules found") && checked.text.contains("SUCCESS: 1 rules found"))

        // Every series the rules read is one keywayd writes, with the labels they select on.
        let fixture = PAMFixture()
        defer { fixture.remove() }
        fixture.startDaemon()
        let exposition = try run(cliPath, ["--socket", fixture.socket, "metrics"])
        #expect(exposition.text.contains("# TYPE keyway_events_total counter"), "\(exposition.text)")
        #expect(exposition.text.contains("# TYPE keyway_store_up gauge"), "\(exposition.text)")
        let selected = (manual + guide).components(separatedBy: "event=\"").dropFirst().map {
            String($0.prefix { $0 != "\"" })
        }
        #expect(!selected.isEmpty)
        for event in selected {
            #expect(
                Event.Kind(rawValue: event) != nil, "the rules select event=\"\(event)\", which keywayd never counts")
        }

        // Eleven minutes of two hosts: one locked out 3 times a minute from the start, one once a minute whose store
        // goes away at minute 3. Only the first is attacked; only the second's store is away.
        let tests = """
            rule_files: [keywayd.8.yml, guide.yml]
            evaluation_interval: 1m
            tests:
              - interval: 1m
                input_series:
                  - series: 'keyway_events_total{event="lockout",factor="gesture",instance="attacked"}'
                    values: '0+3x10'
                  - series: 'keyway_events_total{event="lockout",factor="gesture",instance="quiet"}'
                    values: '0+1x10'
                  - series: 'keyway_store_up{instance="attacked"}'
                    values: '1x10'
                  - series: 'keyway_store_up{instance="quiet"}'
                    values: '1 1 1 0 0 0 0 0 0 0 0'
                alert_rule_test:
                  - eval_time: 2m
                    alertname: KeywayManyLockouts
                    exp_alerts: []
                  - eval_time: 6m
                    alertname: KeywayManyLockouts
                    exp_alerts:
                      - exp_labels: { severity: warning, instance: attacked }
                        exp_annotations: { summary: "15 Keyway lockouts in 5 minutes on attacked" }
                      - exp_labels: { severity: warning, instance: attacked }
                        exp_annotations: { summary: "15 Keyway lockouts in 5 minutes on attacked" }
                  - eval_time: 2m
                    alertname: KeywayDatabaseAway
                    exp_alerts: []
                  - eval_time: 4m
                    alertname: KeywayDatabaseAway
                    exp_alerts:
                      - exp_labels: { severity: critical, instance: quiet }
            """
        try tests.write(toFile: directory + "/tests.yml", atomically: true, encoding: .utf8)
        let tested = try run(promtool, ["test", "rules", directory + "/tests.yml"])
        #expect(tested.status == 0, "\(tested.text)")
        #expect(tested.text.contains("SUCCESS"), "\(tested.text)")
    }

    @Test("keyway health: all well 0; store read-only 2; keywayd stopped 2; the fleet's database stopped 2")
    func healthInFourStates() throws {
        try requireIsolation()  // mounts in the private namespace
        let fixture = PAMFixture()
        defer { fixture.remove() }
        fixture.startDaemon()
        chmod(fixture.directory, 0o711)  // the socket within reach of a user other than root
        func health(_ socket: String, json: Bool = false, as uid: String? = nil) throws -> Run {
            // The stacks read from the fixture's own (empty) PAM directory: what other tests put in /etc/pam.d is theirs.
            let arguments = ["--socket", socket, "health", "--pam-dir", fixture.services] + (json ? ["--json"] : [])
            guard let uid else { return try run(cliPath, arguments) }
            return try run(
                "/usr/bin/setpriv", ["--reuid", uid, "--regid", uid, "--clear-groups", cliPath] + arguments)
        }
        let well = try health(fixture.socket)
        #expect(well.status == 0, "\(well.text)")
        #expect(well.output.first?.hasPrefix("KEYWAY OK - ") == true, "\(well.text)")
        for check in ["OK: keywayd: answering", "OK: store: ", "OK: configuration: valid"] {
            #expect(well.output.contains { $0.hasPrefix(check) }, "\(check): \(well.text)")
        }
        // The files read, or the one that is missing: never an empty name ("valid: , 10 policies").
        let configuration = well.output.first { $0.hasPrefix("OK: configuration: valid") } ?? ""
        #expect(configuration.contains(".conf") && !configuration.contains("valid: ,"), "\(configuration)")
        // Anyone may ask: a monitoring agent runs as its own user.
        let nobody = try health(fixture.socket, as: "65534")
        #expect(nobody.status == 0, "\(nobody.text)")
        let json = try health(fixture.socket, json: true)
        let object = try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any]
        #expect(object?["status"] as? String == "OK" && object?["code"] as? Int == 0, "\(json.text)")
        let names = (object?["checks"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
        #expect(Array(names.prefix(4)) == ["keywayd", "store", "configuration", "metrics"], "\(names)")
        #expect(names.dropFirst(4).allSatisfy { $0.hasPrefix("reader ") }, "\(names)")

        // The store's file system made read-only under keywayd: nothing can be counted, so CRITICAL.
        let library = fixture.directory + "/lib"
        #expect(try run("/usr/bin/mount", ["--bind", library, library]).status == 0)
        let remounted = try run("/usr/bin/mount", ["-o", "remount,bind,ro", library])
        defer { _ = try? run("/usr/bin/umount", [library]) }
        #expect(remounted.status == 0, "\(remounted.text)")
        usleep(1_100_000)  // past the answer keywayd keeps for a second
        let readOnly = try health(fixture.socket)
        #expect(readOnly.status == 2, "\(readOnly.text)")
        #expect(readOnly.output.first?.hasPrefix("KEYWAY CRITICAL - store ") == true, "\(readOnly.text)")
        #expect(readOnly.text.contains("is mounted read-only"), "\(readOnly.text)")
        _ = try run("/usr/bin/umount", [library])

        // The metrics file in a directory that does not exist: node_exporter would show old figures, so WARNING.
        fixture.stopDaemon()
        fixture.startDaemon(["--metrics", fixture.directory + "/no-such-directory/keyway.prom"])
        var unwritten = try health(fixture.socket)
        #expect(
            try eventually {
                unwritten = try health(fixture.socket)
                return unwritten.status == 1
            }, "\(unwritten.text)")
        #expect(unwritten.output.first?.hasPrefix("KEYWAY WARNING - metrics ") == true, "\(unwritten.text)")
        #expect(
            unwritten.output.contains { $0.hasPrefix("WARNING: metrics: cannot write \(fixture.directory)/no-such") },
            "\(unwritten.text)")

        fixture.stopDaemon()
        let stopped = try health(fixture.socket, json: true)
        #expect(stopped.status == 2, "\(stopped.text)")
        let down = try JSONSerialization.jsonObject(with: Data(stopped.text.utf8)) as? [String: Any]
        #expect(down?["status"] as? String == "CRITICAL" && down?["code"] as? Int == 2, "\(stopped.text)")
        #expect((down?["summary"] as? String)?.contains("keywayd does not answer at \(fixture.socket)") == true)

        let fleet = try FleetHosts(count: 1, writers: false)
        defer { fleet.remove() }
        let serving = try fleet.keyway(0, ["health", "--pam-dir", fixture.services])
        #expect(serving.status == 0, "\(serving.text)")
        #expect(serving.text.contains("OK: database: the database answers"), "\(serving.text)")
        #expect(serving.text.contains("no synchronous standby"), "\(serving.text)")
        // Another host's role holds an account's lock in an open transaction: every host answers that account
        // unavailable. Health sees the lock held in two looks 5 s apart and names the role and its server process.
        let cluster = try #require(fleet.cluster)
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/bin/sh")
        holder.arguments = [
            "-c",
            "PGPASSFILE=\(cluster.passfile) exec psql -X -q 'postgresql://keyway_host_z@/keyway?host=\(cluster.directory)' "
                + "-c 'BEGIN' -c \"SELECT pg_advisory_xact_lock(hashtextextended('daemon', 0))\" -c 'SELECT pg_sleep(120)'",
        ]
        holder.standardOutput = FileHandle.nullDevice
        try holder.run()
        defer { if holder.isRunning { kill(holder.processIdentifier, SIGKILL) } }
        waitUntil("the lock held", seconds: 30, seen: { "" }) {
            (try? cluster.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")) == "1"
        }
        usleep(1_100_000)  // past the answer keywayd keeps for a second
        let first = try fleet.keyway(0, ["health", "--pam-dir", fixture.services])
        #expect(first.status == 0, "a lock seen once is not yet long held: \(first.text)")
        usleep(5_200_000)  // the limit health waits for, by its design; nothing here races
        let held = try fleet.keyway(0, ["health", "--pam-dir", fixture.services])
        #expect(held.status == 1, "\(held.text)")
        #expect(
            held.text.contains("WARNING: database: role keyway_host_z (server process ")
                && held.text.contains("pg_terminate_backend("), "\(held.text)")
        // What the warning says to do.
        _ = try cluster.sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'keyway_host_z'")
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
        waitUntil("the lock released", seconds: 30, seen: { "" }) {
            (try? cluster.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted")) == "0"
        }
        usleep(1_100_000)  // past the answer keywayd keeps for a second
        #expect(try fleet.keyway(0, ["health", "--pam-dir", fixture.services]).status == 0)
        fleet.cluster?.stop()
        usleep(1_100_000)
        let away = try fleet.keyway(0, ["health", "--pam-dir", fixture.services])
        #expect(away.status == 2, "\(away.text)")
        #expect(away.output.first?.hasPrefix("KEYWAY CRITICAL - ") == true, "\(away.text)")
        #expect(away.text.contains("CRITICAL: database: cannot be used"), "\(away.text)")
    }
}
