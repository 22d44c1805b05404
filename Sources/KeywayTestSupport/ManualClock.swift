public import KeywayCore
import Synchronization

/// A clock that moves only when the test says so.
public final class ManualClock: KeywayCore.Clock, Sendable {
    private let current: Mutex<Timestamp>

    /// Creates a clock at `start` (default: 2026-01-01T00:00:00Z).
    public init(_ start: Timestamp = Timestamp(seconds: 1_767_225_600)) { current = Mutex(start) }

    public func now() -> Timestamp { current.withLock { $0 } }

    /// Moves the clock forward.
    public func advance(by duration: Duration) { current.withLock { $0 = $0.adding(duration) } }
}
