import Glibc
public import KeywayCore
import KeywayPlatform

/// Wall-clock timings of a body, for `keyway bench` and `keyway calibrate`.
public enum Timings {
    /// Runs `body` `count` times, each after `pause` microseconds untimed (0: back to back); the durations in
    /// microseconds (`MonotonicClock`), sorted.
    public static func of(
        _ count: Int, apart pause: UInt32 = 0, _ body: () throws(AuthenticationError) -> Void
    ) throws(AuthenticationError) -> [Double] {
        var samples: [Double] = []
        for _ in 0..<count {
            if pause > 0 { usleep(pause) }
            let start = MonotonicClock.nanoseconds()
            try body()
            samples.append(Double(MonotonicClock.nanoseconds() - start) / 1e3)
        }
        return samples.sorted()
    }
}
