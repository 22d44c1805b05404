import Foundation
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayPasscode
import KeywayRuntime
import KeywayVault
import Testing

@testable import KeywayProcessFixture

/// What `keyway calibrate` prints: the table's rows and the proposal.
struct CalibrationOutput {
    struct Row: Equatable {
        var mebibytes: Int
        var onePass: Int
        var twoPasses: Int?
        var passes: Int
        var measured: Int
        var proposed: Bool
    }

    var rows: [Row] = []
    /// The `[gesture]` … lines, as printed.
    var configuration = ""

    var proposal: Row? { rows.first { $0.proposed } }

    /// Reads the table (`  128 MiB  169 ms  216 ms  3  272 ms  ← proposed`) and the configuration lines (from the
    /// first `[` line to the blank line before "Nothing was written" or the end).
    init(_ lines: [String]) {
        for line in lines {
            let words = line.split(separator: " ").map(String.init)
            guard words.count >= 8, words[1] == "MiB", words[3] == "ms", let mebibytes = Int(words[0]),
                let one = Int(words[2])
            else { continue }
            let twoPasses = Int(words[4])
            let rest = Array(words[(twoPasses == nil ? 5 : 6)...])
            guard rest.count >= 3, let passes = Int(rest[0]), let measured = Int(rest[1]), rest[2] == "ms" else {
                continue
            }
            rows.append(
                Row(
                    mebibytes: mebibytes, onePass: one, twoPasses: twoPasses, passes: passes, measured: measured,
                    proposed: rest.count == 5 && rest[3] == "←" && rest[4] == "proposed"))
        }
        var taking = false
        for line in lines {
            if line.hasPrefix("[") { taking = true }
            if taking && (line.hasPrefix("Nothing was written") || line.hasPrefix("Wrote ")) { break }
            if taking { configuration += line + "\n" }
        }
    }
}

/// `keyway calibrate`: Argon2id measured on this machine, a cost proposed for a target time, written as a drop-in
/// that keywayd enforces for new enrollments.
@Suite("keyway calibrate", .serialized)
struct CalibrateTests {
    let fixture = PAMFixture()

    /// The calibrated settings of a configuration text, per knowledge factor: (passes, MiB).
    static func costs(of text: String, path: String = "proposal.conf") throws -> [FactorKind: (Int, Int)] {
        let configuration = try Configuration.parse([ConfigSource(path: path, text: text)], plugins: Factors.all)
            .get()
        var costs: [FactorKind: (Int, Int)] = [:]
        for factor in [FactorKind.gesture, .passcode] {
            let settings = configuration.settings[factor]
            #expect(settings.isSet("hash-passes") && settings.isSet("hash-memory"), "\(factor): \(text)")
            costs[factor] = (settings.integer(Setting.hashPasses()), settings.integer(Setting.hashMemory()))
        }
        return costs
    }

    @Test("a small target: a table of sane rows, one proposal near the target, lines that parse as keyway.conf")
    func proposal() throws {
        defer { fixture.remove() }
        // Timing on a shared machine is noisy: the structure must hold every time, the time near the target in
        // one of two runs.
        var nearTarget: [Int] = []
        for _ in 0..<2 {
            let result = try Started(cliPath, ["calibrate", "--target-ms", "60"], separateErrors: true).finish()
            #expect(result.status == 0, "\(result.text)")
            #expect(result.standardOutput.first?.hasPrefix("Argon2id on this machine") == true, "\(result.text)")
            #expect(result.text.contains("target 60 ms"), "\(result.text)")
            #expect(result.text.contains("Nothing was written"), "\(result.text)")
            let output = CalibrationOutput(result.standardOutput)
            #expect(output.rows.count >= 3, "\(result.text)")
            for row in output.rows {
                #expect((8...4096).contains(row.mebibytes) && row.mebibytes & (row.mebibytes - 1) == 0, "\(row)")
                #expect((1...10).contains(row.passes), "\(row)")
                #expect(row.onePass > 0 && row.measured > 0, "\(row)")
                #expect(row.passes == 1 ? row.measured == row.onePass : row.measured > row.onePass / 2, "\(row)")
            }
            let memories = output.rows.map(\.mebibytes)
            #expect(memories == memories.sorted() && Set(memories).count == memories.count, "\(memories)")
            #expect(output.rows.contains { $0.mebibytes == 64 }, "64 MiB is always measured: \(memories)")
            #expect(output.rows.filter(\.proposed).count == 1, "\(result.text)")
            let proposal = try #require(output.proposal, "\(result.text)")
            // Memory first: nothing larger also takes 2 passes; or, when nothing takes 2, the most passes.
            if proposal.passes >= 2 {
                #expect(!output.rows.contains { $0.mebibytes > proposal.mebibytes && $0.passes >= 2 }, "\(output.rows)")
            } else {
                #expect(output.rows.allSatisfy { $0.passes <= proposal.passes }, "\(output.rows)")
            }
            #expect(
                result.text.contains("Proposed: \(proposal.mebibytes) MiB and \(proposal.passes) pass"),
                "\(result.text)")
            let costs = try Self.costs(of: output.configuration)
            #expect(costs[.gesture]! == (proposal.passes, proposal.mebibytes), "\(output.configuration)")
            #expect(costs[.passcode]! == (proposal.passes, proposal.mebibytes), "\(output.configuration)")
            nearTarget.append(proposal.measured)
            if (30...120).contains(proposal.measured) { break }
        }
        #expect(nearTarget.contains { (30...120).contains($0) }, "60 ms wanted within a factor of 2: \(nearTarget)")
    }

    @Test(
        "--write: a root-owned 0644 drop-in that policy show reports and keywayd uses for new hashes; old ones verify"
    )
    func write() throws {
        defer { fixture.remove() }
        fixture.writeConfig("[gesture]\nattempts = 4\n")
        // Enrolled before, at the fixture's minimum cost: it keeps verifying after the cost changes.
        try fixture.enrollPattern("daemon", "2-4-9-3")
        let result = try run(cliPath, ["calibrate", "--target-ms", "60", "--write", "--config", fixture.configPath])
        #expect(result.status == 0, "\(result.text)")
        let directory = fixture.configPath + ".d"
        let file = directory + "/50-calibrate.conf"
        #expect(result.text.contains("Wrote \(file) (root, 0644); the configuration loads with it."), "\(result.text)")
        #expect(result.text.contains("Restart keywayd"), "\(result.text)")
        #expect(result.text.contains("enrolled or changed from then on"), "\(result.text)")
        var info = stat()
        #expect(stat(file, &info) == 0)
        #expect(info.st_uid == 0 && info.st_gid == 0, "owner \(info.st_uid):\(info.st_gid)")
        #expect(
            info.st_mode & 0o170000 == 0o100000 && info.st_mode & 0o7777 == 0o644, "\(String(info.st_mode, radix: 8))")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == ["50-calibrate.conf"])
        let text = try String(contentsOfFile: file, encoding: .utf8)
        let output = CalibrationOutput(result.output)
        let proposal = try #require(output.proposal, "\(result.text)")
        let costs = try Self.costs(of: text, path: file)
        #expect(costs[.gesture]! == (proposal.passes, proposal.mebibytes), "\(text)")
        #expect(costs[.passcode]! == (proposal.passes, proposal.mebibytes), "\(text)")
        let (passes, mebibytes) = costs[.passcode]!
        let lines = text.components(separatedBy: "\n")
        let passesLine = try #require(lines.firstIndex(of: "hash-passes = \(passes)")) + 1
        let memoryLine = try #require(lines.firstIndex(of: "hash-memory = \(mebibytes)")) + 1

        for (policy, factor) in [("pattern", "gesture"), ("passcode", "passcode")] {
            let shown = try run(cliPath, ["--config", fixture.configPath, "policy", "show", policy])
            #expect(shown.status == 0, "\(shown.text)")
            let offset = factor == "gesture" ? 0 : 4  // the second section, four lines further
            #expect(
                shown.text.contains(
                    "\(factor).hash-passes = \(passes)  (\(file):\(passesLine + offset), enforced by keywayd)"),
                "\(shown.text)")
            #expect(
                shown.text.contains(
                    "\(factor).hash-memory = \(mebibytes)  (\(file):\(memoryLine + offset), enforced by keywayd)"),
                "\(shown.text)")
        }

        // keywayd started with that configuration hashes a new passcode at the calibrated cost.
        fixture.startDaemon(["--config", fixture.configPath])
        defer { fixture.stopDaemon() }
        let socket = ["--socket", fixture.socket, "--config", fixture.configPath]
        let enroll = try run(
            cliPath, socket + ["enroll", "passcode", "--user", "daemon", "--stdin"], input: "739155\n")
        #expect(enroll.status == 0, "\(enroll.text)")
        func storedHash(_ factor: String) throws -> String {
            let query = "SELECT CAST(payload AS TEXT) FROM enrollments WHERE user = 'daemon' AND factor = '\(factor)'"
            return try run("/usr/bin/sqlite3", [fixture.store, query]).text
        }
        let passcodeHash = try storedHash("passcode")
        #expect(
            passcodeHash.hasPrefix("$argon2id$v=19$m=\(mebibytes * 1024),t=\(passes),p=1$"),
            "\(passcodeHash) for \(mebibytes) MiB, \(passes) passes")
        // The pattern enrolled before keeps its own cost, and verifies through the same daemon.
        let minimum = Argon2idHasher.Cost.minimum
        #expect(
            try storedHash("gesture").hasPrefix("$argon2id$v=19$m=\(minimum.memLimit >> 10),t=\(minimum.opsLimit),"))
        let unlock = try run(
            cliPath, socket + ["unlock", "--user", "daemon", "--policy", "pattern", "--stdin"], input: "2-4-9-3\n")
        #expect(unlock.status == 0, "\(unlock.text)")
        let passcode = try run(
            cliPath, socket + ["unlock", "--user", "daemon", "--policy", "passcode", "--stdin"], input: "739155\n")
        #expect(passcode.status == 0, "\(passcode.text)")
    }

    @Test("--write that would leave a configuration keyway cannot load: the errors, exit 65, the file removed")
    func writeThatBreaksTheConfiguration() throws {
        defer { fixture.remove() }
        fixture.writeConfig("")
        let directory = fixture.configPath + ".d"
        #expect(mkdir(directory, 0o755) == 0)
        // As many drop-ins as are read: the configuration loads, and one more (the calibration's) is too many.
        let names = (0..<ConfigurationFiles.maximumDropIns).map { String(format: "%03d-empty.conf", $0) }
        for name in names {
            #expect(FileManager.default.createFile(atPath: directory + "/" + name, contents: Data("# empty\n".utf8)))
            chmod(directory + "/" + name, 0o644)
        }
        #expect(try run(cliPath, ["--config", fixture.configPath, "policy", "check"]).status == 0)
        let result = try run(cliPath, ["calibrate", "--target-ms", "50", "--write", "--config", fixture.configPath])
        #expect(result.status == 65, "\(result.text)")
        #expect(result.text.contains("it holds 129 drop-ins; at most 128 are read"), "\(result.text)")
        #expect(
            result.text.contains(
                "keyway: the configuration does not load with \(directory)/50-calibrate.conf; it was removed"),
            "\(result.text)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).sorted() == names)
        #expect(try run(cliPath, ["--config", fixture.configPath, "policy", "check"]).status == 0)
    }

    @Test("--write as another user than root exits 77 before measuring, and writes nothing")
    func notRoot() throws {
        defer { fixture.remove() }
        fixture.writeConfig("")
        chmod(fixture.directory, 0o755)
        let result = try run(
            "/usr/bin/setpriv",
            ["--reuid=nobody", "--regid=nogroup", "--clear-groups", cliPath]
                + ["calibrate", "--write", "--config", fixture.configPath])
        #expect(result.status == 77, "\(result.text)")
        #expect(result.text.contains("calibrate --write changes keyway.conf, which only root may do"), "\(result.text)")
        #expect(!result.text.contains("Argon2id on this machine"), "\(result.text)")
        #expect(access(fixture.configPath + ".d", F_OK) != 0)
    }

    @Test("a drop-in directory that cannot be written: the path and the reason, exit 73, nothing measured or left")
    func unwritable() throws {
        defer { fixture.remove() }
        fixture.writeConfig("")
        let directory = fixture.configPath + ".d"
        #expect(mkdir(directory, 0o555) == 0)
        chmod(directory, 0o555)
        // Root without CAP_DAC_OVERRIDE is held to the directory's mode, as on a read-only /etc.
        let drop = "-dac_override,-dac_read_search,-fowner"
        let result = try run(
            "/usr/bin/setpriv",
            ["--inh-caps=\(drop)", "--bounding-set=\(drop)", "--", cliPath]
                + ["calibrate", "--write", "--config", fixture.configPath])
        #expect(result.status == 73, "\(result.text)")
        #expect(
            result.text.contains("keyway: cannot write \(directory)/50-calibrate.conf: Permission denied"),
            "\(result.text)")
        #expect(!result.text.contains("Argon2id on this machine"), "\(result.text)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty)
        // The same where the directory is missing and cannot be made.
        rmdir(directory)
        chmod(fixture.directory, 0o555)
        defer { chmod(fixture.directory, 0o700) }
        let parent = try run(
            "/usr/bin/setpriv",
            ["--inh-caps=\(drop)", "--bounding-set=\(drop)", "--", cliPath]
                + ["calibrate", "--write", "--config", fixture.configPath])
        #expect(parent.status == 73, "\(parent.text)")
        #expect(
            parent.text.contains("cannot write \(directory)/50-calibrate.conf: Permission denied"), "\(parent.text)")
        #expect(access(directory, F_OK) != 0)
    }
}

/// SystemVault builds each knowledge factor's hasher from its `hash-passes` and `hash-memory`.
@Suite("SystemVault: the hashing cost from the settings")
struct HashCostSettingsTests {
    /// The cost of each keeper's hasher.
    static func costs(_ vault: LocalVault) -> [FactorKind: Argon2idHasher.Cost] {
        var costs: [FactorKind: Argon2idHasher.Cost] = [:]
        for keeper in vault.keepers {
            if let knowledge = keeper as? KnowledgeKeeper, let hasher = knowledge.hasher as? Argon2idHasher {
                costs[keeper.factor] = hasher.cost
            }
        }
        return costs
    }

    @Test("hash-passes and hash-memory reach the hasher of their factor and the hashes it stores; hashCost overrides")
    func settingsReachTheHasher() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        var settings = SettingsBook()
        settings[.gesture].set("hash-passes", .integer(2))
        settings[.gesture].set("hash-memory", .integer(8))
        settings[.passcode].set("hash-passes", .integer(1))
        settings[.passcode].set("hash-memory", .integer(9))
        var options = SystemVault.Options()
        options.storePath = fixture.store
        options.createStore = true
        options.settings = settings
        #expect(options.hashCost == nil, "nil by default: the factors' own settings")
        let vault = try SystemVault.open(options)
        let costs = Self.costs(vault)
        #expect(costs[.gesture] == Argon2idHasher.Cost(opsLimit: 2, memLimit: 8 << 20))
        #expect(costs[.passcode] == Argon2idHasher.Cost(opsLimit: 1, memLimit: 9 << 20))
        let biometric = try #require(Factors.all.plugin(.biometric))
        #expect(SystemVault.hashCost(of: biometric, options) == .default, "the biometric declares no hash cost")

        // What the keepers store carries that cost.
        var runtimeOptions = Runtime.Options()
        runtimeOptions.sensorDirectory = fixture.sensor
        let runtime = Runtime(vault: vault, options: runtimeOptions, settings: settings)
        let gesture = try #require(runtime.authenticator(.gesture) as? GestureAuthenticator)
        let pattern = Array("2-4-9-3".utf8)
        try gesture.enroll(user: "alice", by: "test", conversation: Answers([pattern, pattern]))
        let passcode = try #require(runtime.authenticator(.passcode) as? PasscodeAuthenticator)
        let code = Array("739155".utf8)
        try passcode.enroll(user: "alice", by: "test", conversation: Answers([code, code]))
        func stored(_ factor: FactorKind) throws -> String {
            let record = try #require(try vault.store.enrollment(user: "alice", factor: factor))
            return String(decoding: record.payload, as: UTF8.self)
        }
        #expect(try stored(.gesture).hasPrefix("$argon2id$v=19$m=8192,t=2,p=1$"))
        #expect(try stored(.passcode).hasPrefix("$argon2id$v=19$m=9216,t=1,p=1$"))

        // Tests' override: one cost for every factor, whatever the settings.
        options.hashCost = .minimum
        let cheap = Self.costs(try SystemVault.open(options))
        #expect(cheap[.gesture] == .minimum && cheap[.passcode] == .minimum)
    }

    @Test("nothing configured: the default cost, which is the settings' defaults")
    func defaults() throws {
        let fixture = PAMFixture()
        defer { fixture.remove() }
        var options = SystemVault.Options()
        options.storePath = fixture.store
        options.createStore = true
        let costs = Self.costs(try SystemVault.open(options))
        #expect(costs[.gesture] == .default && costs[.passcode] == .default)
        #expect(Setting.hashPasses().defaultValue == .integer(Int(Argon2idHasher.Cost.default.opsLimit)))
        #expect(Setting.hashMemory().defaultValue == .integer(Argon2idHasher.Cost.default.memLimit >> 20))
        for plugin in Factors.all where plugin.enrollment == .chosenSecret {  // the factors whose secret is hashed
            for key in ["hash-passes", "hash-memory"] {
                let setting = try #require(plugin.setting(key), "\(plugin.kind) declares \(key)")
                #expect(setting.enforcedBy == .daemon && !setting.perPolicy, "\(plugin.kind).\(key)")
            }
        }
        #expect(Factors.all.plugin(.biometric)?.setting("hash-passes") == nil)
    }
}
