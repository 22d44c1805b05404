import Synchronization

/// A flag shared between an evaluation and whoever may cancel it, safe across threads.
public final class CancellationFlag: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let parent: CancellationFlag?
    private let personStopped: (@Sendable () -> Bool)?

    /// Creates an unset flag.
    public init() {
        parent = nil
        personStopped = nil
    }

    /// A flag that is also set while `parent` is, or while `personStopped` says the person asked to stop (Ctrl-C
    /// while a factor waits without a prompt: see `Conversation.personHasStopped`).
    public init(following parent: CancellationFlag, orWhen personStopped: @escaping @Sendable () -> Bool) {
        self.parent = parent
        self.personStopped = personStopped
    }

    /// Sets the flag; every later check sees it.
    public func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }

    /// True once `cancel()` was called (on this flag or its parent), or while the person has asked to stop.
    public var isCancelled: Bool {
        cancelled.load(ordering: .sequentiallyConsistent) || (parent?.isCancelled ?? false)
            || (personStopped?() ?? false)
    }
}
