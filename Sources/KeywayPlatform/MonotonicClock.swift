import CKeywayLibc

/// The one reading of the monotonic clock (`CLOCK_MONOTONIC`): for deadlines and durations, which a wall clock set
/// back or forward must not stretch or cut. The wall clock is `SystemClock`.
public enum MonotonicClock {
    /// Nanoseconds since an arbitrary start (the boot, on Linux).
    public static func nanoseconds() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return Int64(spec.tv_sec) * 1_000_000_000 + Int64(spec.tv_nsec)
    }

    /// Milliseconds since the same start.
    public static func milliseconds() -> Int64 { nanoseconds() / 1_000_000 }
}
