import CKeywayLibc
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// One presented factor's device as keywayd serves it: the plugin's declaration, its line, and its wait.
struct DeviceSeat: Sendable {
    let plugin: FactorPlugin
    let arming: FactorPlugin.Arming
    let line = DeviceLine()
    /// The wait setting, in milliseconds.
    let timeout: Int64

    /// The seats of every factor in `factors` that declares a device.
    static func all(_ factors: [FactorPlugin], _ options: ArmingOptions) -> [FactorKind: DeviceSeat] {
        var seats: [FactorKind: DeviceSeat] = [:]
        for plugin in factors {
            guard let arming = plugin.arming else { continue }
            seats[plugin.kind] = DeviceSeat(plugin: plugin, arming: arming, timeout: options.timeout(plugin, arming))
        }
        return seats
    }

    /// What people call the device ("the sensor").
    var name: String { "the \(plugin.device ?? "device")" }
}

/// Who has one factor's device and who waits for it, first come first served (docs/ARCHITECTURE.md §14): a lease
/// that keeps it while someone waits ends after the factor's wait setting, and a holder that arms again queues behind
/// the waiters, so no one holds the device against another user's waiting authentication for longer than that.
/// keywayd keeps one line per factor that has a device.
final class DeviceLine: Sendable {
    private struct State {
        var next: UInt64 = 0
        var holder: UInt64? = nil
        var waiting: [UInt64] = []
    }
    private let state = Mutex(State())

    /// How much longer than the timeout a waiter stays in line: a holder that overstays is cut when its lease next
    /// checks (every 100 ms, later on a loaded machine), so the waiter must outlast that check, not race it.
    static let handover: Int64 = 1000

    /// A ticket for the device: at once when it is free and nobody waits; otherwise, with `waits`, in turn within
    /// `limit` milliseconds while `gone()` stays false; nil when not given.
    func take(waits: Bool, within limit: Int64, gone: () -> Bool) -> UInt64? {
        let (ticket, now) = state.withLock { state -> (UInt64, Bool) in
            let ticket = state.next
            state.next += 1
            if state.holder == nil && state.waiting.isEmpty {
                state.holder = ticket
                return (ticket, true)
            }
            if waits { state.waiting.append(ticket) }
            return (ticket, false)
        }
        if now { return ticket }
        guard waits else { return nil }
        let deadline = MonotonicClock.milliseconds() + limit
        while true {
            let taken = state.withLock { state -> Bool in
                guard state.holder == nil, state.waiting.first == ticket else { return false }
                state.waiting.removeFirst()
                state.holder = ticket
                return true
            }
            if taken { return ticket }
            if gone() || MonotonicClock.milliseconds() >= deadline {
                state.withLock { $0.waiting.removeAll { $0 == ticket } }
                return nil
            }
            usleep(20_000)
        }
    }

    /// Gives the device back.
    func release(_ ticket: UInt64) {
        state.withLock { state in if state.holder == ticket { state.holder = nil } }
    }

    /// True while another authentication waits in line.
    var othersWaiting: Bool { state.withLock { !$0.waiting.isEmpty } }
}
