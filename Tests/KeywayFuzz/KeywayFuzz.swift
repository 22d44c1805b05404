// keyway-fuzz: one libFuzzer entry point for the parsers that read hostile or damaged input: what a person types
// as a pattern, what arrives on the sensor socket, stored biometric payloads and Argon2id strings, stored
// wrong-secret fingerprints. `make fuzz` builds it with -sanitize=fuzzer,address and runs it; in a normal build it
// replays the files given on the command line, so the target always compiles.
import Glibc
import KeywayBiometricSimulator
import KeywayCore
import KeywayGesture

@testable import KeywayPlatform
@testable import KeywayStore

/// Feeds one input to the parser its first byte selects; any crash or sanitizer report is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    switch data[0] % 5 {
    case 0:
        if case .success(let pattern) = Pattern.parse(bytes) {
            precondition((1...9).contains(pattern.dots.count) && Set(pattern.dots).count == pattern.dots.count)
            precondition(Pattern.parse(Array(pattern.description.utf8)) == .success(pattern))
        }
    case 1:
        if case .success(let event) = SensorControl.parse(Substring(String(decoding: bytes, as: UTF8.self))) {
            _ = SensorControl.line(for: event)
        }
    case 2:
        if let decoded = try? BiometricEnrollment(decoding: bytes) {
            precondition((try? BiometricEnrollment(decoding: decoded.encoded())) == decoded)
        }
    case 3:
        _ = try? Argon2idHasher.parse(String(decoding: bytes, as: UTF8.self))
    default:
        let fingerprints = SQLiteStore.decode(bytes)
        precondition(SQLiteStore.decode(SQLiteStore.encode(fingerprints)) == fingerprints)
    }
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

    /// Runs libFuzzer with the command line's options (`-max_total_time=60`, a corpus directory, …).
    @main
    struct Fuzz {
        static func main() {
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
