import Synchronization

/// A flag shared between an evaluation and whoever may cancel it, safe across threads.
public final class CancellationFlag: Sendable {
    private let cancelled = Atomic<Bool>(false)

    /// Creates an unset flag.
    public init() {}

    /// Sets the flag; every later check sees it.
    public func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    /// True once `cancel()` was called.
    public var isCancelled: Bool { cancelled.load(ordering: .sequentiallyConsistent) }
}
