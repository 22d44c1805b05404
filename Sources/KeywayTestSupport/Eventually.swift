import Glibc

/// Whether `condition` comes true within `seconds` (10 unless given: a loaded machine can take that long to run a
/// thread), looking every 10 ms; for a test awaiting another thread's or process's work, never timing it.
public func eventually(within seconds: Double = 10, _ condition: () throws -> Bool) rethrows -> Bool {
    func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
    let end = now() + seconds
    while now() < end {
        if try condition() { return true }
        usleep(10_000)
    }
    return try condition()
}
