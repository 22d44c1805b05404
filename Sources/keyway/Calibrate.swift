import Glibc
import KeywayConfig
import KeywayConfigFiles
import KeywayCore
import KeywayCrypto
import KeywayFactors
import KeywayPlatform
import KeywayRuntime
import KeywayTools

/// `keyway calibrate [--target-ms N] [--write]`: Argon2id measured on this machine, as `cryptsetup benchmark` does,
/// and the `hash-passes` and `hash-memory` that make one verification take about N ms, memory first.
extension Command {
    func calibrate() -> Int32 {
        let write = parsed.has("--write")
        if write && getuid() != 0 {
            Keyway.printError(
                "keyway: calibrate --write changes keyway.conf, which only root may do; without --write it only "
                    + "measures and proposes")
            return ExitStatus.notPermitted
        }
        let configuration = configuration()
        let path = parsed.value("--config") ?? ConfigurationFiles.defaultPath
        let directory = path + ".d"
        let file = directory + "/" + Calibration.dropInName
        // Before seconds of measuring: a directory that cannot be written (or made) fails now.
        if write, let problem = Calibration.writeProblem(directory) {
            Keyway.printError("keyway: cannot write \(file): \(problem)")
            return ExitStatus.cannotCreate
        }
        let target = parsed.value("--target-ms").flatMap { Int($0) } ?? Calibration.defaultTarget
        let available = Calibration.availableMemory()
        let calibration: Calibration
        do {
            calibration = try Calibration.run(target: target, memoryAvailable: available)
        } catch {
            Keyway.report(error)
        }
        print(calibration.report(memoryAvailable: available))
        print("")
        let factors = Calibration.hashingFactors
        let now = factors.map { plugin in
            let settings = configuration.settings[plugin.kind]
            return "\(plugin.kind) \(settings.integer(Setting.hashMemory())) MiB, "
                + "\(settings.integer(Setting.hashPasses())) passes"
        }
        print("Configured now: \(now.joined(separator: "; ")). The configuration lines:")
        print("")
        print(calibration.configurationLines, terminator: "")
        print("")
        guard write else {
            print("Nothing was written. As root, add --write to write the proposal to \(file).")
            return ExitStatus.success
        }
        return writeCalibration(calibration, configuration: path, directory: directory, file: file)
    }

    /// Writes the drop-in atomically (a temporary file in the same directory, fsync, rename), checks that the
    /// configuration still loads with it, and puts back what was there when it does not.
    func writeCalibration(_ calibration: Calibration, configuration path: String, directory: String, file: String)
        -> Int32
    {
        // What the file held before, to put back if the configuration does not load with the new one.
        var previous: [UInt8]? = nil
        if case .success(let sources) = ConfigurationFiles.sources(path) {
            previous = sources.first { $0.path == file }?.bytes
        }
        if mkdir(directory, 0o755) == 0 {
            chmod(directory, 0o755)  // whatever the umask
        } else if errno != EEXIST {
            Keyway.printError("keyway: cannot create \(directory): \(String(cString: strerror(errno)))")
            return ExitStatus.cannotCreate
        }
        let text = calibration.dropIn(written: Calibration.timestamp())
        if let problem = Calibration.replace(file, in: directory, with: Array(text.utf8)) {
            Keyway.printError("keyway: cannot write \(file): \(problem)")
            return ExitStatus.cannotCreate
        }
        switch ConfigurationFiles.load(path) {
        case .failure(let problems):
            let undone: String
            if let previous {
                undone =
                    Calibration.replace(file, in: directory, with: previous) == nil
                    ? "the file it replaced was put back" : "the file it replaced could not be put back"
            } else {
                undone = unlink(file) == 0 ? "it was removed" : "it could not be removed"
            }
            Keyway.printError(problems.description)
            Keyway.printError("keyway: the configuration does not load with \(file); \(undone)")
            return ExitStatus.dataError
        case .success(let loaded):
            for warning in loaded.warnings { Keyway.printError(warning.description) }
            print("Wrote \(file) (root, 0644); the configuration loads with it.")
            for plugin in Calibration.hashingFactors {
                for setting in [Setting.hashPasses(), Setting.hashMemory()] {
                    let key = "\(plugin.kind).\(setting.key)"
                    if let origin = loaded.settingOrigins[key], origin.file != file {
                        print("Warning: \(key) is set again at \(origin), which is read later and wins.")
                    }
                }
            }
            print("Restart keywayd to use it (systemctl restart keywayd): it reads the configuration when it starts.")
            print(
                "The cost applies to patterns and passcodes enrolled or changed from then on; those stored before "
                    + "keep their own cost until they are changed.")
            return ExitStatus.success
        }
    }
}
