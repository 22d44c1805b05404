import Foundation
import KeywayCore
import KeywayDaemon
import KeywayPlatform
import KeywayTestSupport
import KeywayWire
import Testing

/// keywayd's metrics and journal entries in-process: the exposition's format and its reading back, the labels no
/// caller can grow, and the journal's native encoding. The real keywayd, module and parsers are in
/// Tests/PAMTests/OperatorTests.swift.
@Suite("keywayd's telemetry")
struct TelemetryTests {
    func telemetry() -> Telemetry {
        var options = Telemetry.Options()
        options.file = nil
        options.journal = nil
        return Telemetry(options: options)
    }

    @Test("counters and histograms are read back from the text they were written as; gauges and strangers are not")
    func restoreRoundTrip() {
        let first = telemetry()
        let root = VaultService.Caller(uid: 0, name: "root")
        for (result, milliseconds) in [(Decision.Result.success, 300), (.failure, 4000), (.success, 70)] {
            first.answered(
                .report(
                    Decision(
                        user: "alice", service: "sudo \"quoted\"\\", policy: "pattern", result: result,
                        milliseconds: Int64(milliseconds))), by: root, .done, milliseconds: 1, before: nil)
        }
        let text = first.exposition()
        let second = telemetry()
        let taken = second.metrics.restore(text + "keyway_unknown_total 5\nkeyway_up 1\nnot a sample\n")
        #expect(taken > 0)
        #expect(second.exposition() == text, "\(second.exposition())")
        #expect(
            second.metrics.value(Telemetry.decisions, ["sudo\"quoted\"\\", "pattern", "success", "root"]) == 2,
            "\(text)")
    }

    @Test("a flood of reports with new names grows no label beyond 32 names, and a user's is counted apart")
    func boundedLabels() {
        let telemetry = telemetry()
        let mallory = VaultService.Caller(uid: 1001, name: "mallory")
        for index in 0..<1000 {
            telemetry.answered(
                .report(
                    Decision(
                        user: "mallory", service: "svc\(index)\n", policy: "p\(index)", result: .failure,
                        milliseconds: 5)), by: mallory, .done, milliseconds: 1, before: nil)
        }
        let lines = telemetry.exposition().split(separator: "\n").filter { $0.hasPrefix("keyway_decisions_total{") }
        #expect(lines.count <= 33, "\(lines.count) series")
        #expect(lines.allSatisfy { $0.contains("caller=\"user\"") })
        #expect(lines.contains { $0.contains("service=\"other\"") && $0.hasSuffix(" 968") }, "\(lines.suffix(3))")
        #expect(!lines.contains { $0.contains("mallory") || $0.contains("\\n") })
    }

    @Test("300 made-up factor names from a user: counted as unknown, root's real factor by its name, not restored")
    func factorLabels() throws {
        let store = InMemoryStore()
        let clock = ManualClock()
        let gate = AttemptGate(factor: .passcode, store: store, clock: clock, schedule: .passcode)
        let vault = LocalVault(store: store, clock: clock, keepers: [ScriptedKeeper(gate: gate)])
        let mallory = VaultService.Caller(uid: 1001, name: "mallory")
        let root = VaultService.Caller(uid: 0, name: "root")
        // A file an older keywayd left with a stranger's series in it.
        let telemetry = telemetry()
        let older =
            "keyway_attempts_total{factor=\"made-up\",result=\"not-enrolled\"} 7\n"
            + "keyway_attempts_total{factor=\"passcode\",result=\"success\"} 2\n"
        #expect(telemetry.metrics.restore(older) == 2)
        telemetry.attach(vault)
        for index in 0..<300 {
            telemetry.answered(
                .verify(
                    FactorKind(rawValue: "made-up-\(index)"), UserContext(name: "mallory"),
                    .secret(Secret(copying: [1]))), by: mallory,
                index % 2 == 0 ? .verdict(.failure(.notEnrolled)) : .failure(AuthenticationError(.invalidPolicy)),
                milliseconds: 1, before: nil)
        }
        for _ in 0..<3 {
            telemetry.answered(
                .verify(.passcode, UserContext(name: "root"), .secret(Secret(copying: [1]))), by: root,
                .verdict(.failure(.mismatch)), milliseconds: 1, before: nil)
        }
        let lines = telemetry.exposition().split(separator: "\n").filter { $0.hasPrefix("keyway_attempts_total{") }
        #expect(
            lines.contains("keyway_attempts_total{factor=\"passcode\",result=\"mismatch\"} 3"), "\(lines)")
        #expect(
            lines.contains("keyway_attempts_total{factor=\"unknown\",result=\"not-enrolled\"} 150"), "\(lines)")
        #expect(!lines.contains { $0.contains("made-up") }, "\(lines)")
        #expect(lines.contains("keyway_attempts_total{factor=\"passcode\",result=\"success\"} 2"), "\(lines)")
        #expect(lines.count == 4, "\(lines)")
    }

    @Test("a journal entry: each field NAME=value, a value with a newline as its length, bad names left out")
    func journalEncoding() {
        let event = Event(
            .lockout, "gesture locked for alice",
            [Event.Field("KEYWAY_USER", "alice"), Event.Field("KEYWAY_REASON", "two\nlines"), Event.Field("_PID", "1")]
        )
        let bytes = Journal.entry(event, identifier: "keywayd")
        var fields: [String: String] = [:]
        var rest = bytes[...]
        while let newline = rest.firstIndex(of: 10) {
            let line = rest[rest.startIndex..<newline]
            if let equals = line.firstIndex(of: 61) {
                fields[String(decoding: line[..<equals], as: UTF8.self)] = String(
                    decoding: line[line.index(after: equals)...], as: UTF8.self)
                rest = rest[rest.index(after: newline)...]
            } else {
                let name = String(decoding: line, as: UTF8.self)
                let sizeStart = rest.index(after: newline)
                var size = 0
                for (shift, byte) in rest[sizeStart..<sizeStart + 8].enumerated() { size |= Int(byte) << (8 * shift) }
                let value = rest[(sizeStart + 8)..<(sizeStart + 8 + size)]
                fields[name] = String(decoding: value, as: UTF8.self)
                #expect(rest[sizeStart + 8 + size] == 10)
                rest = rest[(sizeStart + 9 + size)...]
            }
        }
        #expect(rest.isEmpty)
        #expect(fields["MESSAGE"] == "gesture locked for alice")
        #expect(fields["MESSAGE_ID"] == Event.Kind.lockout.messageID)
        #expect(fields["PRIORITY"] == "4")
        #expect(fields["SYSLOG_IDENTIFIER"] == "keywayd")
        #expect(fields["KEYWAY_EVENT"] == "lockout")
        #expect(fields["KEYWAY_REASON"] == "two\nlines")
        #expect(fields["_PID"] == nil)
        #expect(Set(Event.Kind.allCases.map(\.messageID)).count == Event.Kind.allCases.count)
        #expect(Event.Kind.allCases.allSatisfy { $0.messageID.count == 32 && $0.messageID.allSatisfy(\.isHexDigit) })
    }
}
