import Glibc
import KeywayBiometric
import KeywayBiometricSimulator
import KeywayConfig
import KeywayCore
import KeywayPlatform
import KeywayRuntime
import KeywayTools

/// `keyway sensor roc [--svg FILE]`: the simulator's error rates across thresholds, at the configured operating
/// point, as a table and optionally a plot.
extension Command {
    func sensorRoc() -> Int32 {
        let settings = configuration().settings[.biometric]
        let model = SimulatedSensor.model(settings) ?? NoiseModel.default
        let curve = RocCurve(model: model)
        print(RocPlot.table(curve))
        guard let path = parsed.value("--svg") else { return ExitStatus.success }
        let svg = RocPlot.svg(curve, title: "Keyway's simulated \(BiometricAuthenticator.biometry(settings)) sensor")
        guard let file = fopen(path, "w") else {
            Keyway.printError("keyway: cannot write \(path): \(String(cString: strerror(errno)))")
            return ExitStatus.cannotCreate
        }
        let written = fputs(svg + "\n", file) >= 0
        guard fclose(file) == 0, written else {
            Keyway.printError("keyway: cannot write \(path): \(String(cString: strerror(errno)))")
            return ExitStatus.cannotCreate
        }
        print("Wrote the plot to \(path).")
        return ExitStatus.success
    }
}
