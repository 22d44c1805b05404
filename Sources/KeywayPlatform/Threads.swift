import CKeywayLibc

/// Runs `body` on a thread of its own, detached, with a 1 MiB stack; false when no thread could be had.
///
/// A thread that has finished its body waits up to 30 seconds for the next one before it exits (at most 16 wait at
/// once), so keywayd's connections and the store's background writes do not each pay for a new thread: its
/// creation, the page faults of a fresh stack and malloc arena, and its exit (docs/ARCHITECTURE.md §10, "Threads").
/// A waiting thread holds no descriptor and no lock. Never call this from the PAM module: libpam unloads the module
/// at `pam_end`, and a waiting thread's code would go with it.
public func spawn(_ body: @escaping @Sendable () -> Void) -> Bool {
    ParkedThreads.shared.run(body)
}

/// The threads `spawn` keeps waiting for work, and the work handed to them. One pthread mutex and condition guard
/// both; the invariant is `waiting >= work.count`: every queued body has a waiting thread that will take it.
final class ParkedThreads: @unchecked Sendable {
    /// The threads behind `spawn`.
    static let shared = ParkedThreads(limit: 16, idleMilliseconds: 30_000)

    /// At most this many threads wait for work at once; a thread finishing beyond it exits.
    let limit: Int
    /// A waiting thread exits after this long without work.
    let idleMilliseconds: Int

    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    /// Bodies handed over and not yet taken (guarded by `mutex`).
    private var work: [@Sendable () -> Void] = []
    /// Threads waiting on `condition`, taken or not (guarded by `mutex`).
    private var waiting = 0

    init(limit: Int, idleMilliseconds: Int) {
        self.limit = limit
        self.idleMilliseconds = idleMilliseconds
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)  // a wall clock set back must not keep a thread
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    /// Threads waiting for work now (for tests).
    var waitingCount: Int {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return waiting
    }

    /// Hands `body` to a waiting thread, or starts one for it.
    func run(_ body: @escaping @Sendable () -> Void) -> Bool {
        pthread_mutex_lock(mutex)
        if waiting > work.count {
            work.append(body)
            pthread_cond_signal(condition)
            pthread_mutex_unlock(mutex)
            return true
        }
        pthread_mutex_unlock(mutex)
        return start { [self] in
            var next: (@Sendable () -> Void)? = body
            while let body = next {
                body()
                next = nextBody()
            }
        }
    }

    /// The next body for a thread that has finished one, or nil when it should exit: too many wait already, or
    /// none came within `idleMilliseconds`.
    private func nextBody() -> (@Sendable () -> Void)? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard waiting < limit else { return nil }
        waiting += 1
        defer { waiting -= 1 }
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + (idleMilliseconds % 1000) * 1_000_000
        deadline.tv_sec += idleMilliseconds / 1000 + nanoseconds / 1_000_000_000
        deadline.tv_nsec = .init(nanoseconds % 1_000_000_000)
        while work.isEmpty {
            if pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT && work.isEmpty { return nil }
        }
        return work.removeFirst()
    }

    /// Starts a detached thread with a 1 MiB stack running `body`; false when none could be made.
    private func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        final class Box {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let attributes = UnsafeMutablePointer<pthread_attr_t>.allocate(capacity: 1)
        pthread_attr_init(attributes)
        defer {
            pthread_attr_destroy(attributes)
            attributes.deallocate()
        }
        pthread_attr_setdetachstate(attributes, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(attributes, 1 << 20)
        var thread = pthread_t()
        let result = pthread_create(
            &thread, attributes,
            { raw in
                Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            }, box)
        if result != 0 { Unmanaged<Box>.fromOpaque(box).release() }
        return result == 0
    }
}
