import KeywayCore
import KeywayDaemon
import KeywayFIDO2Key
import KeywayFprintd
import KeywayPlatform

/// The device backends keywayd links, by the name a factor's settings choose one with (`FactorPlugin.Arming`'s
/// `backends`): the one list on keywayd's side, as `Factors.all` is the one list of factors (docs/ARCHITECTURE.md
/// §14). Only keywayd links a backend's C library; the module and the CLI never do.
enum DeviceBackends {
    /// The backend called `name`, or nil when keywayd has none by that name.
    static func make(_ name: String, systemBus: String) -> (any DeviceBackend)? {
        switch name {
        case "fprintd": FprintdReader(busAddress: systemBus, log: { Server.logLimited($0) })
        case "libfido2": SecurityKeys()
        default: nil
        }
    }
}
