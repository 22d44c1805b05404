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

    /// `time` as a person here reads it, in this machine's time zone: the time of day ("17:20:27") when it falls on
    /// the same local day as `now`, else with the day ("Sun 06 Dec 17:20"). Logs and the store keep UTC
    /// (`Timestamp.description`); this is only what a screen says.
    public static func local(_ time: Timestamp, now: Timestamp) -> String {
        func parts(_ instant: Timestamp) -> tm {
            var seconds = time_t(instant.milliseconds / 1000)
            var result = tm()
            _ = localtime_r(&seconds, &result)
            return result
        }
        var when = parts(time)
        let today = parts(now)
        let sameDay = when.tm_year == today.tm_year && when.tm_yday == today.tm_yday
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, sameDay ? "%H:%M:%S" : "%a %d %b %H:%M", &when)
        guard count > 0 else { return time.description }
        return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
