import Glibc
public import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayPlatform

/// What `keyway calibrate` measured and proposes.
public struct Calibration: Sendable {
    /// One memory size: one verification at one and at two passes, the passes that reach the target, and one
    /// verification at those passes.
    public struct Row: Sendable {
        public var mebibytes: Int
        /// Milliseconds, median, at t=1 and t=2 (nil when one pass already takes the target or more).
        public var onePass: Double
        public var twoPasses: Double?
        public var passes: Int
        /// Milliseconds, median, at `passes`.
        public var measured: Double
    }

    public static let defaultTarget = 250
    public static let dropInName = "50-calibrate.conf"
    /// The memory sizes tried, within what hash-memory allows; 64, 128 and 256 MiB first.
    static let ladder = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    static let first = [64, 128, 256]
    /// Passes at or above which more memory is preferred (memory-hard first).
    static let preferredPasses = 2

    public var target: Int
    public var runs: Int
    public var rows: [Row]
    /// The index in `rows` of the proposal.
    public var proposed: Int

    public var proposal: Row { rows[proposed] }

    /// The factors that hash a secret: those that declare hash-passes and hash-memory.
    public static var hashingFactors: [FactorPlugin] {
        Factors.all.filter {
            $0.setting(Setting.hashPasses().key) != nil && $0.setting(Setting.hashMemory().key) != nil
        }
    }

    /// Runs per timing: a median of 5 for short targets, of 3 up to a second, one above (a few seconds each).
    static func runs(for target: Int) -> Int { target <= 300 ? 5 : target <= 1000 ? 3 : 1 }

    /// Measures one and two passes at 64, 128 and 256 MiB (within `memoryAvailable`/4), more memory while the
    /// largest still allows 2 passes within the target, less while the smallest does not; derives each size's
    /// passes, measures that cost, and proposes the most memory at 2 passes or more (or, when no size allows 2,
    /// the most passes).
    ///
    /// The first pass costs more than the others (it fills the memory, page by page), so the passes come from a
    /// line through the one- and two-pass times rather than from the one-pass time alone.
    public static func run(target: Int, memoryAvailable: Int?) throws(AuthenticationError) -> Calibration {
        let runs = runs(for: target)
        let limit = min(4096, (memoryAvailable ?? Int.max) / 4)
        let sizes = ladder.filter { $0 <= limit }
        guard !sizes.isEmpty else {
            throw AuthenticationError(
                .internalFailure,
                "too little memory available (\(memoryAvailable ?? 0) MiB) to propose even 8 MiB")
        }
        var timed: [Int: (one: Double, two: Double?)] = [:]
        func measureSize(_ mebibytes: Int) throws(AuthenticationError) {
            let one = try measure(mebibytes: mebibytes, passes: 1, runs: runs)
            let two = one < Double(target) ? try measure(mebibytes: mebibytes, passes: 2, runs: runs) : nil
            timed[mebibytes] = (one, two)
        }
        func passes(_ mebibytes: Int) -> Int {
            guard let (one, two) = timed[mebibytes], let two else { return 1 }
            let perPass = max(two - one, 0.01)
            let estimate = ((Double(target) - (one - perPass)) / perPass).rounded()
            return estimate >= 10 ? 10 : max(1, Int(estimate))
        }
        let start = sizes.filter { first.contains($0) }
        for size in start.isEmpty ? Array(sizes.suffix(first.count)) : start { try measureSize(size) }
        while let top = timed.keys.max(), passes(top) >= preferredPasses, let next = sizes.first(where: { $0 > top }) {
            try measureSize(next)
        }
        while let bottom = timed.keys.min(), passes(bottom) < preferredPasses,
            let next = sizes.last(where: { $0 < bottom })
        {
            try measureSize(next)
        }
        var rows: [Row] = []
        for size in timed.keys.sorted() {
            let (one, two) = timed[size]!
            var count = passes(size)
            var measured: Double
            switch count {
            case 1: measured = one
            case 2: measured = two ?? one
            default:
                measured = try measure(mebibytes: size, passes: count, runs: runs)
                // Off by more than 15 %: once more, from the line through one pass and this wider point.
                if abs(measured - Double(target)) > 0.15 * Double(target) {
                    let perPass = max((measured - one) / Double(count - 1), 0.01)
                    let estimate = ((Double(target) - (one - perPass)) / perPass).rounded()
                    let refined = estimate >= 10 ? 10 : max(1, Int(estimate))
                    if refined != count {
                        count = refined
                        measured =
                            refined == 1 ? one : try measure(mebibytes: size, passes: refined, runs: runs)
                    }
                }
            }
            rows.append(Row(mebibytes: size, onePass: one, twoPasses: two, passes: count, measured: measured))
        }
        let proposed =
            rows.lastIndex { $0.passes >= preferredPasses }
            ?? rows.indices.max { (rows[$0].passes, rows[$0].mebibytes) < (rows[$1].passes, rows[$1].mebibytes) }!
        return Calibration(target: target, runs: runs, rows: rows, proposed: proposed)
    }

    /// The median milliseconds of one verification at the cost: Argon2id over the memory, as keywayd runs it for
    /// every attempt (`burnWork` is that derivation, without a stored hash to compare with).
    static func measure(mebibytes: Int, passes: Int, runs: Int) throws(AuthenticationError) -> Double {
        let hasher = try Argon2idHasher(cost: Argon2idHasher.Cost(passes: passes, mebibytes: mebibytes))
        let secret = Secret(copying: Array("2-4-9-3".utf8))
        let samples = try Timings.of(runs) { () throws(AuthenticationError) in
            _ = hasher.burnWork(secret)
        }
        return samples[samples.count / 2] / 1000
    }

    /// MemAvailable in /proc/meminfo, in MiB; nil when it cannot be read.
    public static func availableMemory() -> Int? {
        guard let file = fopen("/proc/meminfo", "r") else { return nil }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>? = nil
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            guard text.hasPrefix("MemAvailable:") else { continue }
            let fields = text.split(separator: " ")
            guard fields.count >= 3, fields[2].hasPrefix("kB"), let kibibytes = Int(fields[1]) else { return nil }
            return kibibytes / 1024
        }
        return nil
    }

    /// The table and the proposal, as printed.
    public func report(memoryAvailable: Int?) -> String {
        let memoryNote =
            memoryAvailable.map { "memory up to a quarter of MemAvailable (\($0) MiB)" } ?? "MemAvailable unknown"
        var lines = [
            "Argon2id on this machine, one lane as keywayd runs it; target \(target) ms per verification.",
            "Each time is the median of \(runs) run\(runs == 1 ? "" : "s"); \(memoryNote).",
            "",
            "    memory    1 pass  2 passes  passes  per verification",
        ]
        for (index, row) in rows.enumerated() {
            let memory = "\(row.mebibytes) MiB".leftPadded(to: 10)
            let one = Self.milliseconds(row.onePass).leftPadded(to: 8)
            let two = (row.twoPasses.map(Self.milliseconds) ?? "-").leftPadded(to: 8)
            let passes = "\(row.passes)".leftPadded(to: 6)
            let measured = Self.milliseconds(row.measured).leftPadded(to: 16)
            lines.append(
                "  \(memory)  \(one)  \(two)  \(passes)  \(measured)" + (index == proposed ? "  ← proposed" : ""))
        }
        let row = proposal
        let why =
            row.passes >= Self.preferredPasses
            ? "The most memory that still takes \(Self.preferredPasses) passes or more within the target (memory "
                + "first: RFC 9106 and OWASP trade passes for memory, which costs an attacker's hardware more)."
            : "No size measured takes \(Self.preferredPasses) passes within the target; this one takes the most."
        let workers = max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        lines += [
            "",
            "Proposed: \(row.mebibytes) MiB and \(row.passes) pass\(row.passes == 1 ? "" : "es"), "
                + "\(Self.milliseconds(row.measured)) per verification.",
            why,
        ]
        lines.append(
            "keywayd hashes up to \(workers) at once (--workers, default the cores): up to "
                + "\(workers * row.mebibytes) MiB while under attack.")
        return lines.joined(separator: "\n")
    }

    /// The `[factor]` sections with hash-passes and hash-memory, as the drop-in holds them.
    public var configurationLines: String {
        Self.hashingFactors.map { plugin in
            "[\(plugin.kind)]\n\(Setting.hashPasses().key) = \(proposal.passes)\n"
                + "\(Setting.hashMemory().key) = \(proposal.mebibytes)\n"
        }.joined(separator: "\n")
    }

    /// The drop-in's text: what wrote it and when, then the sections.
    public func dropIn(written: String) -> String {
        """
        # Written by `keyway calibrate --target-ms \(target)` on \(written): Argon2id with \(proposal.mebibytes) MiB \
        and \(proposal.passes) passes
        # took \(Self.milliseconds(proposal.measured)) per verification here. keywayd reads this file when it starts; \
        the cost applies to
        # patterns and passcodes enrolled or changed from then on (stored hashes keep their own).

        """ + configurationLines
    }

    static func milliseconds(_ value: Double) -> String { "\(Int(value.rounded())) ms" }

    /// Now, in UTC, as `2026-12-01 20:53 UTC`.
    public static func timestamp() -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M UTC", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Why a file cannot be made in `directory` (or `directory` in its parent, when it does not exist yet), or nil.
    public static func writeProblem(_ directory: String) -> String? {
        if access(directory, W_OK) == 0 { return nil }
        guard errno == ENOENT else { return String(cString: strerror(errno)) }
        let parent = directory.lastIndex(of: "/").map { String(directory[..<$0]) } ?? "."
        if access(parent.isEmpty ? "/" : parent, W_OK) == 0 { return nil }
        return String(cString: strerror(errno))
    }

    /// Replaces `path` with `bytes` atomically: a hidden temporary file in `directory` (which the configuration
    /// never reads), owned by root, mode 0644, written and fsynced, then renamed over `path`, and the directory
    /// fsynced. The reason on failure, with nothing left behind.
    public static func replace(_ path: String, in directory: String, with bytes: [UInt8]) -> String? {
        func reason() -> String { String(cString: strerror(errno)) }
        var template = Array("\(directory)/.\(dropInName).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { return reason() }
        let temporary = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        var problem: String? = nil
        if fchown(fd, 0, 0) != 0 || fchmod(fd, 0o644) != 0 { problem = reason() }
        if problem == nil && !Descriptor.write(bytes, to: fd) { problem = reason() }
        if problem == nil && fsync(fd) != 0 { problem = reason() }
        if close(fd) != 0 && problem == nil { problem = reason() }
        if problem == nil && rename(temporary, path) != 0 { problem = reason() }
        if let problem {
            unlink(temporary)
            return problem
        }
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
        return nil
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
