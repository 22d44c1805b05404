import Foundation
import KeywayCore
import Testing

@testable import KeywayStore

@Suite("SQLite store across processes", .serialized)
struct MultiProcessTests {
    @Test("48 processes guessing at once: at most 5 slow-hash checks, every other attempt refused, the count exact")
    func parallelGuessesNeverExceedTheLimit() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        #expect(try Probe.run(["enroll", scratch.store, "alice", "739155"]) == ["committed alice"])
        let attack = try GuessAttack(store: scratch.store, processes: 48, in: scratch.directory)
        #expect(attack.kdfRuns <= 5, "the slow hash ran \(attack.kdfRuns) times")
        #expect(attack.verified == attack.kdfRuns)
        #expect(attack.verified + attack.refused == 48, "\(attack.outcomes)")
        #expect(attack.verified == 5)
        let store = try scratch.open(create: false)
        #expect(try store.attempts(user: "alice")[.passcode].consecutiveFailures == 5)
        #expect(try store.integrityCheck() == "ok")
    }

    @Test("different users authenticating at once do not disturb each other's counts")
    func parallelDifferentUsers() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let kdfLog = scratch.directory + "/kdf.log"
        let barrier = scratch.directory + "/go"
        let users = (0..<8).map { "user-\($0)" }
        for user in users { _ = try Probe.run(["enroll", scratch.store, user, "739155"]) }
        let probes = try users.flatMap { user in
            try (0..<3).map { try Probe(["attempt", scratch.store, user, "wrong-\($0)", kdfLog, barrier]) }
        }
        release(probes.count, at: barrier)
        let outcomes = probes.map { $0.finish().joined() }
        #expect(outcomes.allSatisfy { $0 == "mismatch" }, "\(outcomes)")
        let store = try scratch.open(create: false)
        for user in users { #expect(try store.attempts(user: user)[.passcode].consecutiveFailures == 3) }
    }

    @Test("SIGKILL at random points during 200+ operations: integrity ok, every reported commit present")
    func killedWriters() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        do { _ = try scratch.open() }
        var committed: Set<String> = []
        var lastCount: [String: Int] = [:]
        var operations = 0
        var generator = SystemRandomNumberGenerator()
        var round = 0
        // Rounds of three writers killed at a random moment, until at least 200 operations were reported
        // and at least 25 rounds (75 kills); more rounds on a slow machine, where writers take longer to start.
        while (operations < 200 || round < 25) && round < 400 {
            defer { round += 1 }
            let writers = try (0..<3).map { writer in
                try Probe(["churn", scratch.store, "r\(round)w\(writer)", "400"])
            }
            usleep(UInt32.random(in: 5_000...60_000, using: &generator))
            // Only a writer still running: one that ended was reaped, and its pid may be another process's by now
            // (a stray SIGKILL once ended a hostile-peer test running beside this one).
            for writer in writers where writer.process.isRunning { kill(writer.process.processIdentifier, SIGKILL) }
            for (writer, probe) in writers.enumerated() {
                for line in probe.finish() {
                    let words = line.split(separator: " ")
                    if words.first == "committed", words.count == 2 {
                        committed.insert(String(words[1])); operations += 1
                    }
                    if words.first == "counted", words.count == 3, let count = Int(words[2]) {
                        lastCount["r\(round)w\(writer)"] = count
                        operations += 1
                    }
                }
            }
        }
        #expect(operations >= 200, "only \(operations) operations were reported before the kills")
        print("SIGKILL test: \(round) rounds, \(operations) reported operations, \(committed.count) enrollments")
        let store = try scratch.open(create: false)
        #expect(try store.integrityCheck() == "ok")
        for user in committed {
            #expect(try store.enrollment(user: user, factor: .passcode)?.payload == Array("payload of \(user)".utf8))
        }
        for (user, count) in lastCount {
            let stored = try store.attempts(user: user)[.gesture].consecutiveFailures
            #expect(stored == count || stored == count + 1, "\(user): reported \(count), stored \(stored)")
        }
    }
}
