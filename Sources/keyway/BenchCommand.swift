import Glibc
import KeywayBiometricSimulator
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayGesture
import KeywayPlatform
import KeywayRuntime
import KeywayTools
import KeywayVault

extension Command {
    /// What keywayd adds to an authentication besides the slow hash: one request on a fresh connection and its
    /// answer (an availability question, which reads the store and hashes nothing), back to back, then 50 ms apart
    /// as a real authentication's requests come: both processes then start cold, which back to back hides.
    func roundTrips(_ socket: String, count: Int) throws(AuthenticationError) {
        let vault = DaemonVault(socketPath: socket, via: tool)
        let user = UserContext(name: "keyway-bench")
        func request() throws(AuthenticationError) {
            if case .failed(let error) = vault.availability(of: Factors.all[0].kind, for: user) { throw error }
        }
        func p99(_ samples: [Double]) -> String { "p99 \(Int(samples[(samples.count * 99) / 100].rounded())) µs" }
        let warm = try Timings.of(max(count, 1), request)
        print(
            "keywayd round trip (one request, no slow hash): \(Self.summary(warm, in: 1, "µs")), \(p99(warm)) "
                + "over \(warm.count) requests")
        let cold = try Timings.of(100, apart: 50_000, request)
        print(
            "keywayd round trip, 50000 µs apart: \(Self.summary(cold, in: 1, "µs")), \(p99(cold)) "
                + "over \(cold.count) requests")
    }

    /// What the module does first on every call: read keyway.conf and its drop-ins, check them and compile every
    /// policy (here in full Swift; the module runs the same code in Embedded Swift).
    func configurationReads(count: Int) {
        let named = parsed.value("--config")
        guard case .success(let configuration) = ConfigurationFiles.load(named) else { return }
        let samples = try? Timings.of(max(count, 1)) { () throws(AuthenticationError) in
            _ = ConfigurationFiles.load(named)
        }
        guard let samples else { return }
        print(
            "keyway.conf read and compiled (\(configuration.files.count) file\(configuration.files.count == 1 ? "" : "s"), "
                + "\(configuration.policies.count) "
                + "policies): \(Self.summary(samples, in: 1, "µs")) over \(samples.count) reads")
    }

    /// "median M UNIT, min A UNIT, max B UNIT" of sorted microsecond samples, in whole units of `scale` µs (the
    /// benchmark script parses this wording).
    static func summary(_ samples: [Double], in scale: Double, _ unit: String) -> String {
        func show(_ value: Double) -> String { "\(Int((value / scale).rounded())) \(unit)" }
        return
            "median \(show(samples[samples.count / 2])), min \(show(samples[0])), max \(show(samples[samples.count - 1]))"
    }
}
