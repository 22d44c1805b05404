import CKeywayLibc
import Glibc
public import KeywayCore
import KeywayPlatform
import Synchronization

/// The database's clock as one host sees it: the host's monotonic clock plus the offset measured at the database's
/// last answer (the middle of the round trip), so every host dates lockouts by one clock whatever its own says.
/// Before the first answer it is the host's wall clock; a call that needs the database fails then anyway.
public final class DatabaseClock: Clock {
    private let offset = Atomic<Int64>(Int64.min)

    init() {}

    func measured(_ databaseMilliseconds: Int64?, sent: Int64) {
        guard let databaseMilliseconds else { return }
        let received = MonotonicClock.milliseconds()
        offset.store(databaseMilliseconds - (sent + received) / 2, ordering: .relaxed)
    }

    public func now() -> Timestamp {
        let known = offset.load(ordering: .relaxed)
        guard known != Int64.min else { return SystemClock().now() }
        return Timestamp(milliseconds: MonotonicClock.milliseconds() + known)
    }
}
