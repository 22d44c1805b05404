// keyway-fuzz: the libFuzzer entry point for every parser that reads hostile or damaged input (the table
// `fuzzTargets`): what a person types as a pattern or a passcode, a user name, the module's arguments, what arrives
// on the sensor socket, keywayd's requests and answers, stored biometric payloads, Argon2id strings and wrong-secret fingerprints.
//
// KEYWAY_FUZZ_TARGET=NAME fuzzes one parser (what `make harden` does, a fixed number of executions each); without
// it the first byte of each input picks the parser (`make fuzz`). Built with -sanitize=fuzzer,address it is
// libFuzzer; in a normal build it replays the files given on the command line, so the target always compiles.
import Glibc
import KeywayBiometric
import KeywayBiometricSimulator
import KeywayConfig
import KeywayCore
import KeywayFactors
import KeywayGesture
import KeywayRuntime
import KeywayWire

@testable import KeywayCrypto
@testable import KeywayPasscode
@testable import KeywayStore

/// One parser under test: a name for `KEYWAY_FUZZ_TARGET`, and a body that must never crash or trip a sanitizer,
/// whatever the bytes. Preconditions state what must hold of whatever the parser accepts.
struct FuzzTarget: Sendable {
    let name: String
    let body: @Sendable ([UInt8]) -> Void
}

let fuzzTargets: [FuzzTarget] = [
    FuzzTarget(name: "keywayd-request") { bytes in
        // What any local user may send to keywayd's socket: refused or read exactly, and read back the same.
        if let request = try? Request(decoding: bytes) {
            // Compared as bytes: a sample may hold a NaN, which is never == itself.
            precondition((try? Request(decoding: request.encoded))?.encoded == request.encoded)
            if let user = request.user { precondition(user.utf8.count <= UserContext.maximumNameLength) }
        }
    },
    FuzzTarget(name: "keywayd-response") { bytes in
        // What a client reads back (from a daemon it trusts, but a damaged answer must still fail closed).
        if let response = try? Response(decoding: bytes) {
            precondition((try? Response(decoding: response.encoded))?.encoded == response.encoded)
        }
    },
    FuzzTarget(name: "availability-note") { bytes in
        // What the module reads before its first prompt (root's file, but a damaged one must be no note).
        if let note = try? AvailabilityNote(decoding: bytes) {
            precondition((try? AvailabilityNote(decoding: note.encoded)) == note)
            precondition(note.user.utf8.count <= AvailabilityNote.maximumNameBytes)
        }
    },
    FuzzTarget(name: "pattern") { bytes in
        if case .success(let pattern) = Pattern.parse(bytes) {
            precondition((1...9).contains(pattern.dots.count) && Set(pattern.dots).count == pattern.dots.count)
            precondition(Pattern.parse(Array(pattern.description.utf8)) == .success(pattern))
        }
    },
    FuzzTarget(name: "passcode") { bytes in
        let entered = Secret(copying: bytes)
        if case .success(let canonical) = PasscodeAuthenticator.normalize(entered) {
            _ = PasscodeRules.default.violation(of: canonical)
        }
    },
    FuzzTarget(name: "user-name") { bytes in
        let name = String(decoding: bytes, as: UTF8.self)
        let escaped = name.escapingControlCharacters
        precondition(!escaped.unicodeScalars.contains { $0.value < 0x20 || (0x7F..<0xA0).contains($0.value) })
        if UserContext.nameProblem(name) == nil {
            precondition(!name.isEmpty && name.utf8.count <= UserContext.maximumNameLength && !name.contains("/"))
        }
    },
    FuzzTarget(name: "module-arguments") { bytes in
        // argv as libpam builds it from a stack line: words split at blanks, none empty.
        let words = bytes.split(whereSeparator: { $0 == 0x20 || $0 == 0x09 || $0 == 0 })
            .map { String(decoding: $0, as: UTF8.self) }
        if case .success(let parsed) = ModuleArguments.parse(words) {
            precondition(parsed.socket.hasPrefix("/") && parsed.sensorDirectory.hasPrefix("/"))
            precondition(parsed.sensorTimeout.map { (1...600).contains($0) } ?? true)
            let keys = words.map { $0.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)[0] }
            precondition(Set(keys).count == keys.count)
        }
    },
    FuzzTarget(name: "config") { bytes in
        // keyway.conf as a damaged disk or a careless edit leaves it: a configuration or diagnostics, never a crash;
        // every accepted rule reads back the same from what `keyway policy show` prints.
        switch Configuration.parse([ConfigSource(path: "fuzz.conf", bytes: bytes)], plugins: Factors.all) {
        case .success(let configuration):
            // Every rule printed into one file, read back at once.
            var text = ""
            for (index, named) in configuration.policies.enumerated() {
                text += "[policy round-trip-\(index)]\nrequire = \(Configuration.text(of: named.base.rule))\n"
            }
            let again = Configuration.parse([ConfigSource(path: "again.conf", text: text)], plugins: Factors.all)
            guard case .success(let reread) = again else { preconditionFailure("'\(text)' is refused") }
            for (index, named) in configuration.policies.enumerated() {
                precondition(
                    reread.policy(named: "round-trip-\(index)")?.base.rule == named.base.rule,
                    "the rule of \(named.base.name) does not read back")
            }
        case .failure(let problems):
            precondition(!problems.errors.isEmpty)
            for problem in problems.diagnostics {
                // Shown on terminals and in syslog: no control character but the line breaks between its parts.
                precondition(
                    !problem.description.unicodeScalars.contains {
                        ($0.value < 0x20 && $0 != "\n") || (0x7F..<0xA0).contains($0.value)
                    })
            }
        }
    },
    FuzzTarget(name: "sensor-command") { bytes in
        if case .success(let event) = SensorControl.parse(Substring(String(decoding: bytes, as: UTF8.self))) {
            _ = SensorControl.line(for: event)
        }
    },
    FuzzTarget(name: "biometric-payload") { bytes in
        if let decoded = try? BiometricEnrollment(decoding: bytes) {
            precondition((try? BiometricEnrollment(decoding: decoded.encoded())) == decoded)
            // Each template as the simulated sensor's matcher reads it (the keeper's check when it loads one).
            for (_, template) in decoded.templates { _ = NoiseModel.default.matcher.problem(template) }
        }
    },
    FuzzTarget(name: "argon2id-string") { bytes in
        _ = try? Argon2idHasher.parse(String(decoding: bytes, as: UTF8.self))
    },
    FuzzTarget(name: "stored-fingerprints") { bytes in
        let fingerprints = SQLiteStore.decode(bytes)
        precondition(SQLiteStore.decode(SQLiteStore.encode(fingerprints)) == fingerprints)
    },
]

/// `KEYWAY_FUZZ_TARGET=list` prints every target's name, one a line, and exits: `make harden` fuzzes each one it
/// lists, so a target added to the table is fuzzed without touching the script.
func listTargetsIfAsked() {
    guard getenv("KEYWAY_FUZZ_TARGET").map({ String(cString: $0) }) == "list" else { return }
    for target in fuzzTargets { print(target.name) }
    exit(0)
}

/// The target `KEYWAY_FUZZ_TARGET` names, read once; nil means "the first byte chooses".
let selectedTarget: FuzzTarget? = {
    guard let name = getenv("KEYWAY_FUZZ_TARGET").map({ String(cString: $0) }) else { return nil }
    guard let target = fuzzTargets.first(where: { $0.name == name }) else {
        let names = fuzzTargets.map(\.name).joined(separator: ", ")
        let message = "keyway-fuzz: unknown KEYWAY_FUZZ_TARGET '\(name)'; the targets are \(names)\n"
        _ = message.withCString { write(2, $0, strlen($0)) }
        exit(64)
    }
    return target
}()

/// Feeds one input to the selected parser; any crash or sanitizer report is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    if let target = selectedTarget {
        target.body(Array(UnsafeBufferPointer(start: data, count: size)))
        return 0
    }
    guard size > 0 else { return 0 }
    fuzzTargets[Int(data[0]) % fuzzTargets.count].body(Array(UnsafeBufferPointer(start: data + 1, count: size - 1)))
    return 0
}

#if FUZZING
    /// libFuzzer's driver (FuzzerDriver.cpp); SwiftPM makes `main` ours, so ours hands over to it.
    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
    ) -> CInt

    /// Runs libFuzzer with the command line's options (`-max_total_time=60`, `-runs=N`, a corpus directory, …).
    @main
    struct Fuzz {
        static func main() {
            listTargetsIfAsked()
            _ = selectedTarget  // an unknown name fails before fuzzing starts
            var argc = CommandLine.argc
            var argv = Optional(CommandLine.unsafeArgv)
            exit(runFuzzerDriver(&argc, &argv) { data, size in fuzzOne(data, size) })
        }
    }
#else
    /// Without libFuzzer: replays the given files (a corpus, a crash) through the same entry point.
    @main
    struct Replay {
        static func main() {
            listTargetsIfAsked()
            for path in CommandLine.arguments.dropFirst() {
                guard let file = fopen(path, "rb") else { continue }
                var bytes: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 4096)
                while case let count = fread(&buffer, 1, buffer.count, file), count > 0 {
                    bytes += buffer[0..<count]
                }
                fclose(file)
                _ = bytes.withUnsafeBufferPointer { fuzzOne($0.baseAddress ?? UnsafePointer(bitPattern: 1)!, $0.count) }
                print("replayed \(path)")
            }
        }
    }
#endif
