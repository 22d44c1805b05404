import Glibc
import KeywayPlatform
import Synchronization

/// Whether the machine is going to sleep, and how many devices keywayd's leases hold, shared by the arming leases
/// and whoever follows the machine's sleep (keywayd's `SleepWatch`, on logind's `PrepareForSleep`;
/// docs/ARCHITECTURE.md §14, "Sleep"). While asleep a lease gives its device back and waits, with its prompt, for the
/// resume; then it takes the device again, so a touch after resume answers the same authentication.
public final class SleepState: Sendable {
    private let asleep = Atomic<Bool>(false)
    private let heldDevices = Atomic<Int>(0)
    private let followed = Atomic<Bool>(false)

    /// Awake, no device held.
    public init() {}

    /// True from `PrepareForSleep(true)` until `PrepareForSleep(false)`.
    public var isAsleep: Bool { asleep.load(ordering: .sequentiallyConsistent) }

    /// How many devices leases hold now.
    public var held: Int { heldDevices.load(ordering: .sequentiallyConsistent) }

    /// The machine is about to sleep: leases give their devices back at their next check (every 100 ms).
    public func sleeping() { asleep.store(true, ordering: .sequentiallyConsistent) }

    /// The machine has resumed: waiting leases take their devices again.
    public func resumed() { asleep.store(false, ordering: .sequentiallyConsistent) }

    /// Whether something tells this state of the machine's sleep (logind is on the bus).
    public var isFollowed: Bool {
        get { followed.load(ordering: .sequentiallyConsistent) }
        set { followed.store(newValue, ordering: .sequentiallyConsistent) }
    }

    /// A lease took its device.
    func took() { heldDevices.add(1, ordering: .sequentiallyConsistent) }

    /// A lease gave its device back.
    func gaveBack() { heldDevices.subtract(1, ordering: .sequentiallyConsistent) }

    /// Waits until no lease holds a device, at most `milliseconds`; true when none does.
    public func awaitReleased(within milliseconds: Int64) -> Bool {
        let deadline = MonotonicClock.milliseconds() + milliseconds
        while held > 0 {
            if MonotonicClock.milliseconds() >= deadline { return false }
            usleep(20_000)
        }
        return true
    }

    /// True when the machine is going to sleep or starts to within `milliseconds` (a device that ended its wait on
    /// the same signal may be heard before keywayd's watch is).
    func begins(within milliseconds: Int64) -> Bool {
        guard isFollowed else { return false }
        let deadline = MonotonicClock.milliseconds() + milliseconds
        while !isAsleep {
            if MonotonicClock.milliseconds() >= deadline { return false }
            usleep(20_000)
        }
        return true
    }

    /// Waits while asleep, at most until `deadline`, or until `stop` says the wait is no longer wanted; true when
    /// awake.
    func awaitResume(until deadline: Int64, unless stop: () -> Bool) -> Bool {
        while isAsleep {
            if stop() || MonotonicClock.milliseconds() >= deadline { return false }
            usleep(100_000)
        }
        return true
    }
}
