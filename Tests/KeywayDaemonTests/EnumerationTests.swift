import Foundation
import KeywayPlatform
import Testing

@testable import KeywayProcessFixture

/// What a stranger at a login prompt sees for an enrolled name, an account with nothing enrolled, a name no account
/// has, and a name whose owner switched the pattern off: the same prompts, codes and throttle state, also after a
/// flood of made-up names and after a change of the hashing cost (docs/ARCHITECTURE.md §5 and §10).
@Suite("hostile peers: enumeration", .serialized)
struct EnumerationTests {
    let fixture = PAMFixture()
    /// "daemon" is an account on every Debian system, with nothing enrolled.
    let people = ["kwenrolled", "daemon", "kw-no-such-name", "kwswitchedoff"]

    func normalized(_ run: Run) -> String {
        run.text.replacingOccurrences(of: "[0-9]", with: "#", options: .regularExpression)
    }

    func costConfig(passes: Int, mebibytes: Int) -> String {
        fixture.writeConfig("[gesture]\nhash-passes = \(passes)\nhash-memory = \(mebibytes)\n")
    }

    func restart(_ extra: [String]) {
        fixture.stopDaemon()
        fixture.startDaemon(["--config", fixture.configPath] + extra)
    }

    /// Forgets `person`'s counters (as `keyway reset` would, for any name).
    func clear(_ person: String) throws {
        _ = try run("/usr/bin/sqlite3", [fixture.store, "DELETE FROM attempts WHERE user = '\(person)'"])
    }

    /// Milliseconds of a wrong pattern for `person` through the harness, the median of three, from cleared counters (none is
    /// throttled); cleared again after.
    func wrongTime(_ person: String) throws -> Int64 {
        try clear(person)
        defer { try? clear(person) }
        // Different wrong patterns, so each pays the slow hash (a repeat is answered without it).
        let times = try ["1-5-9-8", "3-5-7-4", "7-8-9-6"].map { pattern -> Int64 in
            let start = MonotonicClock.milliseconds()
            _ = try harness(fixture, "pattern", person, answers(pattern))
            return MonotonicClock.milliseconds() - start
        }
        return times.sorted()[1]
    }

    @Test("prompts, codes and throttle state match for all four, after a 10,000-name flood and a cost change")
    func table() throws {
        try requireIsolation()
        defer {
            TestAccounts.remove("kwenrolled")
            TestAccounts.remove("kwswitchedoff")
            fixture.remove()
        }
        #expect(try TestAccounts.add("kwenrolled"))
        #expect(try TestAccounts.add("kwswitchedoff"))
        _ = costConfig(passes: 1, mebibytes: 8)
        fixture.startDaemon(["--config", fixture.configPath, "--unenrolled-counters", "1000"])
        fixture.service("pattern", "policy=pattern")
        for person in ["kwenrolled", "kwswitchedoff"] {
            let enroll = try run(
                cliPath, ["--socket", fixture.socket, "enroll", "gesture", "--user", person, "--stdin"],
                input: "2-4-9-3\n")
            #expect(enroll.status == 0, "\(enroll.text)")
        }
        let off = try run(cliPath, ["--socket", fixture.socket, "disable", "gesture", "--user", "kwswitchedoff"])
        #expect(off.status == 0, "\(off.text)")
        var table: [String] = []
        func row(_ label: String, _ values: [String]) { table.append("\(label): " + values.joined(separator: " | ")) }

        // One wrong pattern each: the same conversation and code.
        let first = try people.map { try harness(fixture, "pattern", $0, answers("3-4-9-2", "6-1-8-3", "4-3-8-1-6")) }
        #expect(Set(first.map(normalized)).count == 1, "\(first.map(\.text))")
        row("three wrong patterns", first.map { $0.result ?? "?" })
        // Two more: locked for a while, all alike.
        _ = try people.map { try harness(fixture, "pattern", $0, answers("7-5-3-6", "9-5-1-4")) }
        let locked = try people.map { try harness(fixture, "pattern", $0, answers("2-4-9-3")) }
        #expect(locked.allSatisfy { $0.result == "PAM_MAXTRIES" }, "\(locked.map(\.text))")
        #expect(Set(locked.map(normalized)).count == 1, "\(locked.map(\.text))")
        row("after 5 failures", locked.map { $0.result ?? "?" })
        let stateBefore = try run(
            "/usr/bin/sqlite3",
            [fixture.store, "SELECT user, failures FROM attempts WHERE factor = 'gesture' ORDER BY 1"])

        // A flood of 10,000 made-up names, 4 at once; keywayd keeps 1,000 and prunes at its next start.
        let floods = try (0..<4).map { part in
            try Started(hostilePath, ["names", fixture.socket, "kwflood\(part)", "2500"])
        }.map { $0.finish() }
        #expect(floods.allSatisfy { $0.text.contains("answered 2500") }, "\(floods.map(\.text))")
        restart(["--unenrolled-counters", "1000"])
        var pruned = false
        for _ in 0..<100 where !pruned {
            pruned = fixture.daemonLog.contains("cleared the counters of")
            usleep(50_000)
        }
        #expect(pruned, "\(fixture.daemonLog)")
        // The throttle state survived the flood for every name (read before anyone tries again).
        let stateAfter = try run(
            "/usr/bin/sqlite3",
            [
                fixture.store,
                "SELECT user, failures FROM attempts WHERE factor = 'gesture' AND user NOT LIKE 'kwflood%' ORDER BY 1",
            ])
        #expect(stateAfter.output == stateBefore.output.filter { !$0.hasPrefix("kwflood") }, "\(stateAfter.text)")
        row("gesture failures after the flood", stateAfter.output)
        let afterFlood = try people.map { try harness(fixture, "pattern", $0, answers("1-4-7-8")) }
        #expect(Set(afterFlood.map(normalized)).count == 1, "\(afterFlood.map(\.text))")
        row("a wrong pattern after the flood", afterFlood.map { $0.result ?? "?" })
        row("milliseconds of a wrong pattern", try people.map { "\(try wrongTime($0))" })

        // A cost change: new hashes cost 2 passes over 16 MiB. An enrolled name still pays the cost its hash was made
        // with; a name without an enrollment pays a decoy at a cost in use, so the two stay alike (the figures).
        _ = costConfig(passes: 2, mebibytes: 16)
        restart([])
        row("milliseconds of a wrong pattern after the cost change", try people.map { "\(try wrongTime($0))" })
        print("enumeration table (\(people.joined(separator: " | "))):\n" + table.joined(separator: "\n"))
    }
}
