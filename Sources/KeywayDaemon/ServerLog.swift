import CKeywayLibc
import Dispatch
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// What keywayd says on standard error (the journal under systemd): one line each, control characters escaped, and
/// what a client can provoke limited to 10 lines a second.
extension Server {
    /// One line on standard error, control characters escaped.
    public static func log(_ message: String) {
        Descriptor.printError("keywayd: \(message.escapingControlCharacters)")
    }

    /// At most 10 lines a second of what a client can provoke; then one line saying how many were left out.
    static let logWindow = Mutex<(start: Int64, lines: Int, suppressed: Int)>((0, 0, 0))

    public static func logLimited(_ message: String) {
        let now = MonotonicClock.milliseconds()
        let (write, dropped) = logWindow.withLock { window -> (Bool, Int) in
            var dropped = 0
            if now - window.start >= 1000 {
                dropped = window.suppressed
                window = (now, 0, 0)
            }
            guard window.lines < 10 else {
                window.suppressed += 1
                return (false, dropped)
            }
            window.lines += 1
            return (true, dropped)
        }
        if dropped > 0 { log("\(dropped) similar lines were left out in the last second") }
        if write { log(message) }
    }
}
