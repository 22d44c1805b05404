import CKeywayLibc
public import KeywayCore

/// The real wall clock (`clock_gettime(CLOCK_REALTIME)`).
public final class SystemClock: KeywayCore.Clock {
    /// Creates the system clock.
    public init() {}

    public func now() -> Timestamp {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Timestamp(milliseconds: Int64(spec.tv_sec) * 1000 + Int64(spec.tv_nsec) / 1_000_000)
    }
}
