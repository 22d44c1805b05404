import CKeywayLibc
import Glibc
import KeywayCore
import KeywayPlatform
import Synchronization

/// A counting semaphore with a deadline (sem_timedwait): the store's connections in use.
final class Slots: @unchecked Sendable {
    private let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)

    init(_ count: Int) { sem_init(semaphore, 0, UInt32(count)) }

    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }

    /// Takes a slot, waiting at most until `deadline` (monotonic milliseconds; one passed: no wait).
    func acquire(until deadline: Int64) -> Bool {
        var wall = timespec()
        clock_gettime(CLOCK_REALTIME, &wall)
        let left = max(0, deadline - MonotonicClock.milliseconds())
        var until = timespec(
            tv_sec: wall.tv_sec + Int(left / 1000), tv_nsec: wall.tv_nsec + Int(left % 1000) * 1_000_000)
        if until.tv_nsec >= 1_000_000_000 {
            until.tv_sec += 1
            until.tv_nsec -= 1_000_000_000
        }
        while sem_timedwait(semaphore, &until) != 0 {
            guard errno == EINTR else { return false }
        }
        return true
    }

    func release() { sem_post(semaphore) }
}
