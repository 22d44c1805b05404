import Glibc
public import KeywayCore

/// Wall-clock timings of a body, for `keyway bench` and `keyway calibrate`.
public enum Timings {
    /// Runs `body` `count` times, each after `pause` microseconds untimed (0: back to back); the durations in
    /// microseconds (CLOCK_MONOTONIC), sorted.
    public static func of(
        _ count: Int, apart pause: UInt32 = 0, _ body: () throws(AuthenticationError) -> Void
    ) throws(AuthenticationError) -> [Double] {
        var samples: [Double] = []
        for _ in 0..<count {
            if pause > 0 { usleep(pause) }
            var start = timespec()
            var end = timespec()
            clock_gettime(CLOCK_MONOTONIC, &start)
            try body()
            clock_gettime(CLOCK_MONOTONIC, &end)
            samples.append(Double(end.tv_sec - start.tv_sec) * 1e6 + Double(end.tv_nsec - start.tv_nsec) / 1e3)
        }
        return samples.sorted()
    }
}
