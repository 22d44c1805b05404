import Foundation
import KeywayTestSupport
import Synchronization
import Testing

/// Hosts of a fleet on one machine: each a keywayd with its own socket, PAM services and configuration, sharing one
/// PostgreSQL database of the test's own (or, to compare, each with its own SQLite store). Every keywayd runs with
/// count-hash.so preloaded, so each slow hash it runs is a line in its own log: an independent count.
final class FleetHosts: @unchecked Sendable {
    let cluster: PostgresCluster?
    let hosts: [PAMFixture]

    /// Cheap hashes, so a test's many verifications stay fast; the limits are the defaults.
    static let cheap = "[gesture]\nhash-passes = 1\nhash-memory = 8\n[passcode]\nhash-passes = 1\nhash-memory = 8\n"

    init(count: Int = 3, shared: Bool = true, config: String = FleetHosts.cheap) throws {
        cluster = shared ? try PostgresCluster() : nil
        hosts = (0..<count).map { _ in PAMFixture() }
        if let cluster {
            let migrate = try run(
                cliPath,
                ["store", "migrate", cluster.ownerURI, "--grant", "keyway_host", "--passfile", cluster.passfile])
            #expect(migrate.status == 0, "\(migrate.text)")
        }
        for index in hosts.indices { start(index, config: config) }
    }

    /// The host's name ("host-a"…).
    func name(_ index: Int) -> String { "host-" + String(UnicodeScalar(UInt8(97 + index))) }

    /// Starts (or restarts) host `index`'s keywayd and writes its services.
    func start(_ index: Int, config: String? = nil) {
        let host = hosts[index]
        if let config { host.writeConfig(config) }
        var extra = ["--config", host.configPath, "--host", name(index)]
        if let cluster { extra += ["--store", cluster.uri, "--passfile", cluster.passfile] }
        host.startDaemon(
            extra,
            environment: ["LD_PRELOAD": packageRoot + "/build/count-hash.so", "COUNT_HASH_LOG": hashLog(index)])
        for name in ["pattern", "passcode"] where !FileManager.default.fileExists(atPath: host.services + "/" + name) {
            host.service(name, "policy=\(name) config=\(host.configPath)")
        }
    }

    func hashLog(_ index: Int) -> String { hosts[index].directory + "/hashes.log" }

    /// Slow hashes host `index`'s keywayd has run.
    func hashes(_ index: Int) -> Int {
        ((try? String(contentsOfFile: hashLog(index), encoding: .utf8)) ?? "").split(separator: "\n").count
    }

    /// `keyway --socket HOST ARGS`.
    func keyway(_ index: Int, _ arguments: [String], input: String? = nil) throws -> Run {
        try run(cliPath, ["--socket", hosts[index].socket] + arguments, input: input)
    }

    func remove() {
        for host in hosts { host.remove() }
        cluster?.stop()
    }
}

/// Wrong passcodes at `user` from `count` separate processes spread over the hosts in turn, all released at once:
/// each started and waiting at its prompt until one file appears (as `Benchmarks/run` section 4 does).
func parallelGuesses(_ fleet: FleetHosts, user: String, count: Int, tag: String) throws -> [String] {
    let barrier = fleet.hosts[0].directory + "/go-\(tag)"
    let guesses = try (0..<count).map { index in
        try Started(
            harnessPath,
            [
                "--answer-when", barrier, "wrong-\(tag)-\(index)", fleet.hosts[index % fleet.hosts.count].services,
                "passcode", user,
            ])
    }
    usleep(1_500_000)  // every process at its prompt
    _ = FileManager.default.createFile(atPath: barrier, contents: Data())
    return guesses.map { $0.finish().result ?? "none" }
}

@Suite("a fleet: several keywayd sharing one PostgreSQL database", .serialized)
struct FleetTests {
    @Test("64 parallel wrong guesses over 3 hosts: 5 verified in all on PostgreSQL, 5 per host with SQLite stores")
    func parallelGuessesAcrossHosts() throws {
        try requireIsolation()
        for shared in [true, false] {
            let fleet = try FleetHosts(shared: shared)
            defer { fleet.remove() }
            for index in shared ? [0] : [0, 1, 2] {
                let enroll = try fleet.keyway(
                    index, ["enroll", "passcode", "--user", "daemon", "--stdin"], input: "739155\n")
                #expect(enroll.status == 0, "\(enroll.text)")
            }
            let before = (0..<3).map { fleet.hashes($0) }
            let results = try parallelGuesses(fleet, user: "daemon", count: 64, tag: shared ? "pg" : "sqlite")
            let verified = (0..<3).map { fleet.hashes($0) - before[$0] }
            print("fleet attack, \(shared ? "one PostgreSQL" : "three SQLite stores"): verified per host \(verified)")
            #expect(!results.contains("PAM_SUCCESS"))
            if shared {
                #expect(verified.reduce(0, +) == 5, "hashes per host: \(verified)")
                let status = try fleet.keyway(2, ["status", "--user", "daemon"])
                #expect(status.text.contains("5 consecutive failures"), "\(status.text)")
            } else {
                #expect(verified == [5, 5, 5], "hashes per host: \(verified)")
            }
        }
    }

    @Test("enroll on A, authenticate on B; 5 failures on A lock the pattern on B; keyway reset on C unlocks all")
    func oneEnrollmentOneLockout() throws {
        try requireIsolation()
        let fleet = try FleetHosts()
        defer { fleet.remove() }
        let enroll = try fleet.keyway(0, ["enroll", "gesture", "--user", "daemon", "--stdin"], input: "2-4-9-3\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        #expect(try harness(fleet.hosts[1], "pattern", "daemon", answers("2-4-9-3")).result == "PAM_SUCCESS")
        for wrong in ["1-6-7-2-9", "3-5-7-8", "1-5-9-8", "7-5-3-6", "1-2-6-9-8"] {
            let guess = try harness(fleet.hosts[0], "pattern", "daemon", answers(wrong))
            #expect(guess.result != "PAM_SUCCESS", "\(guess.text)")
        }
        let locked = try harness(fleet.hosts[1], "pattern", "daemon", answers("2-4-9-3"))
        #expect(locked.result == "PAM_MAXTRIES", "\(locked.text)")
        let status = try fleet.keyway(2, ["status", "--user", "daemon"])
        #expect(status.text.contains("locked"), "\(status.text)")
        #expect(try fleet.keyway(2, ["reset", "--user", "daemon"]).status == 0)
        #expect(try harness(fleet.hosts[1], "pattern", "daemon", answers("2-4-9-3")).result == "PAM_SUCCESS")
        #expect(try harness(fleet.hosts[0], "pattern", "daemon", answers("2-4-9-3")).result == "PAM_SUCCESS")
        // The trail names the host of each change.
        let audit = try fleet.keyway(1, ["audit", "--user", "daemon"])
        #expect(audit.text.contains("on host-a enroll daemon gesture"), "\(audit.text)")
        #expect(audit.text.contains("on host-c reset daemon all"), "\(audit.text)")
    }

    @Test("a keywayd SIGKILLed mid-hash: the reserved guess stays counted, once")
    func killedMidHash() throws {
        try requireIsolation()
        // A slow hash (512 MiB), so the kill lands while it runs.
        let fleet = try FleetHosts(count: 2, config: "[passcode]\nhash-passes = 2\nhash-memory = 512\n")
        defer { fleet.remove() }
        let enroll = try fleet.keyway(0, ["enroll", "passcode", "--user", "daemon", "--stdin"], input: "739155\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        let cluster = try #require(fleet.cluster)
        let guess = try Started(harnessPath, answers("wrong-once") + [fleet.hosts[0].services, "passcode", "daemon"])
        var counted = ""
        for _ in 0..<500 {  // the reservation is committed before the hash starts
            counted = try cluster.sql("SELECT failures FROM attempts WHERE account = 'daemon' AND factor = 'passcode'")
            if counted == "1" { break }
            usleep(5_000)
        }
        #expect(counted == "1")
        #expect(fleet.hashes(0) == 0, "the hash had already finished: the kill would not be mid-hash")
        fleet.hosts[0].stopDaemon()
        let answered = guess.finish()
        #expect(answered.result != "PAM_SUCCESS", "\(answered.text)")
        let status = try fleet.keyway(1, ["status", "--user", "daemon"])
        #expect(status.text.contains("1 consecutive failure"), "\(status.text)")
        // Host A again: its next guess is the second, not a free first.
        fleet.start(0)
        let again = try harness(fleet.hosts[0], "passcode", "daemon", answers("wrong-twice"))
        #expect(again.result != "PAM_SUCCESS", "\(again.text)")
        #expect(
            try cluster.sql("SELECT failures FROM attempts WHERE account = 'daemon' AND factor = 'passcode'") == "2")
    }

    @Test("PostgreSQL stopped: sudo through default=ignore reaches the password at once; started: Keyway works")
    func databaseStoppedSudo() throws {
        try requireIsolation()
        let fleet = try FleetHosts(count: 1)
        let user = "kwfleet\(getpid() % 100_000)"
        let service = "keyway-test-\(user)"
        let sudoers = "/etc/sudoers.d/keyway-test-\(user)"
        let pamFile = "/etc/pam.d/\(service)"
        defer {
            unlink(sudoers)
            unlink(pamFile)
            TestAccounts.remove(user)
            fleet.remove()
        }
        let host = fleet.hosts[0]
        #expect(try TestAccounts.add(user))
        #expect(try TestAccounts.setPassword(user, "Correct-horse-739"))
        try host.installSudoers(
            "Defaults:\(user) pam_service=\(service), !lecture, passwd_tries=1\n\(user) ALL=(ALL) ALL\n", at: sudoers)
        let stack = """
            auth     [success=done default=ignore] \(modulePath) policy=pattern \(host.moduleArguments)
            auth     required pam_unix.so
            account  required pam_permit.so
            session  required pam_permit.so

            """
        _ = FileManager.default.createFile(atPath: pamFile, contents: Data(stack.utf8))
        let enroll = try fleet.keyway(0, ["enroll", "gesture", "--user", user, "--stdin"], input: "2-4-9-3\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        func sudo(_ input: String) throws -> (Run, Double) {
            let started = Date()
            let result = try Started(
                "/usr/bin/su", [user, "-c", "sudo -S -k id -u"], input: input, separateErrors: true
            ).finish()
            return (result, Date().timeIntervalSince(started))
        }
        let (pattern, _) = try sudo("2-4-9-3\n")
        #expect(pattern.standardOutput == ["0"], "\(pattern.text)")
        let cluster = try #require(fleet.cluster)
        try cluster.halt()
        let (password, seconds) = try sudo("Correct-horse-739\n")
        #expect(password.standardOutput == ["0"], "the password below Keyway: \(password.text)")
        #expect(seconds < 2, "sudo took \(seconds) s to reach the password")
        #expect(password.text.contains("[sudo] password for \(user)"), "\(password.text)")
        #expect(host.daemonLog.contains("the database is unavailable"), "\(host.daemonLog)")
        try cluster.resume()
        let (back, _) = try sudo("2-4-9-3\n")
        #expect(back.standardOutput == ["0"], "Keyway again, keywayd not restarted: \(back.text)")
        #expect(!back.text.contains("[sudo] password"), "\(back.text)")
        #expect(host.daemonLog.contains("the database answers again"), "\(host.daemonLog)")
        print("fleet: with PostgreSQL stopped, sudo reached the password and succeeded in \(Int(seconds * 1000)) ms")
    }

    @Test("200 requests over 3 hosts, keywayd SIGKILLed at random, PostgreSQL crashed once: nothing acknowledged lost")
    func chaos() throws {
        try requireIsolation()
        let fleet = try FleetHosts(config: FleetHosts.cheap + "attempts = 1\n")
        defer { fleet.remove() }
        let cluster = try #require(fleet.cluster)
        // Accounts that exist in every test system's /etc: half have their passcode re-enrolled over and over, half
        // are guessed at.
        let writers = ["daemon", "bin", "sys", "games", "man", "lp"]
        let guessed = ["mail", "news", "uucp", "proxy", "backup", "list", "irc", "nobody"]
        for user in guessed {
            #expect(
                try fleet.keyway(0, ["enroll", "passcode", "--user", user, "--stdin"], input: "739155\n").status == 0)
        }
        let enrolled = Mutex<[String: Int]>([:])  // acknowledged enrollments per user
        let failed = Mutex<[String: Int]>([:])  // guesses answered "wrong" per user
        let issued = Mutex(0)
        let endings = Mutex<[String: Int]>([:])  // how the guesses ended
        let workers = (0..<4).map { worker in
            Thread {
                var generator = SystemRandomNumberGenerator()
                while true {
                    let number = issued.withLock { count -> Int in
                        count += 1
                        return count
                    }
                    guard number <= 200 else { return }
                    let host = Int.random(in: 0..<3, using: &generator)
                    if number % 2 == 0 {
                        let user = writers.randomElement(using: &generator)!
                        let code = String(UInt32.random(in: 10_000_000...99_999_999, using: &generator))
                        let enroll = try? fleet.keyway(
                            host, ["enroll", "passcode", "--user", user, "--stdin"], input: code + "\n")
                        if enroll?.status == 0 { enrolled.withLock { $0[user, default: 0] += 1 } }
                    } else {
                        let user = guessed.randomElement(using: &generator)!
                        let guess = try? harness(fleet.hosts[host], "passcode", user, answers("wrong-\(number)"))
                        if guess?.result == "PAM_AUTH_ERR" { failed.withLock { $0[user, default: 0] += 1 } }
                        endings.withLock { $0[guess?.result ?? "not run", default: 0] += 1 }
                    }
                }
            }
        }
        workers.forEach { $0.start() }
        var kills = 0
        var crashed = false
        while workers.contains(where: { !$0.isFinished }) {
            usleep(UInt32.random(in: 30_000...120_000))
            let host = Int.random(in: 0..<3)
            fleet.hosts[host].stopDaemon()  // SIGKILL, whatever it was doing
            kills += 1
            if !crashed && issued.withLock({ $0 }) >= 100 {
                try cluster.halt()
                usleep(300_000)
                try cluster.resume()
                crashed = true
            }
            fleet.start(host)
        }
        #expect(crashed)
        let acknowledged = enrolled.withLock { $0 }
        let answered = failed.withLock { $0 }
        print(
            "fleet chaos: \(kills) SIGKILLs, \(acknowledged.values.reduce(0, +)) acknowledged enrollments, "
                + "\(answered.values.reduce(0, +)) answered failures; guesses ended \(endings.withLock { $0 })")
        #expect(acknowledged.values.reduce(0, +) >= 20, "too few requests got through: \(acknowledged)")
        for (user, count) in acknowledged {
            let stored =
                Int(try cluster.sql("SELECT count(*) FROM audit WHERE account = '\(user)' AND action = 'enroll'")) ?? 0
            #expect(stored >= count, "\(user): \(count) enrollments acknowledged, \(stored) in the trail")
            #expect(try cluster.sql("SELECT count(*) FROM enrollments WHERE account = '\(user)'") == "1")
        }
        for (user, count) in answered {
            let stored =
                Int(
                    try cluster.sql(
                        "SELECT failures FROM attempts WHERE account = '\(user)' AND factor = 'passcode'")) ?? 0
            #expect(stored >= count, "\(user): \(count) failures answered, \(stored) counted")
        }
    }

    @Test("keyway store copy moves a host's SQLite store into PostgreSQL: keyway status the same before and after")
    func storeCopy() throws {
        try requireIsolation()
        let fleet = try FleetHosts(count: 1, shared: false)
        defer { fleet.remove() }
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        #expect(
            try run(
                cliPath,
                ["store", "migrate", cluster.ownerURI, "--grant", "keyway_host", "--passfile", cluster.passfile]
            )
            .status == 0)
        #expect(
            try fleet.keyway(0, ["enroll", "gesture", "--user", "daemon", "--stdin"], input: "2-4-9-3\n").status == 0)
        #expect(try fleet.keyway(0, ["enroll", "passcode", "--user", "bin", "--stdin"], input: "739155\n").status == 0)
        #expect(try harness(fleet.hosts[0], "pattern", "daemon", answers("1-6-7-2-9")).result != "PAM_SUCCESS")
        #expect(try fleet.keyway(0, ["disable", "passcode", "--user", "bin"]).status == 0)
        let store = fleet.hosts[0].store
        let before = try run(cliPath, ["--store", store, "status"])
        fleet.hosts[0].stopDaemon()
        let copy = try run(cliPath, ["--passfile", cluster.passfile, "store", "copy", store, cluster.uri])
        #expect(copy.status == 0, "\(copy.text)")
        #expect(copy.text.contains("copied 2 enrollments of 2 users"), "\(copy.text)")
        let after = try run(cliPath, ["--store", cluster.uri, "--passfile", cluster.passfile, "status"])
        #expect(after.status == 0, "\(after.text)")
        #expect(after.output == before.output, "before:\n\(before.text)\nafter:\n\(after.text)")
        let again = try run(cliPath, ["--passfile", cluster.passfile, "store", "copy", store, cluster.uri])
        #expect(again.status == 74, "\(again.text)")
        #expect(again.text.contains("not empty"), "\(again.text)")
    }
}
