import Dispatch
public import KeywayCore
import Synchronization

/// A store's write to the disk, run on one of Dispatch's shared threads (no thread is created for it) while the
/// caller goes on: `wait()` returns once it has finished, and throws what it threw.
final class BackgroundDiskWrite: DiskWrite {
    private let finished = DispatchGroup()
    private let failure = Mutex<AuthenticationError?>(nil)

    init(_ write: @escaping @Sendable () throws(AuthenticationError) -> Void) {
        finished.enter()
        DispatchQueue.global().async { [self] in
            do throws(AuthenticationError) { try write() } catch { failure.withLock { $0 = error } }
            finished.leave()
        }
    }

    /// Starts Dispatch's threads and the descriptors it keeps for them (an epoll instance and its event descriptors)
    /// now, with the store, so that keywayd's open descriptors are what they will stay before the first
    /// authentication, not after it (the hostile-peer tests count them: a count that grows is a leak).
    static func prepare() {
        let started = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { started.signal() }
        started.wait()
    }

    func wait() throws(AuthenticationError) {
        finished.wait()
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
