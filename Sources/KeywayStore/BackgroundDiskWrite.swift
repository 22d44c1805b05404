import Dispatch
import KeywayCore
import KeywayPlatform
import Synchronization

/// A store's write to the disk, run on another thread (`spawn`, which reuses a finished one) while the caller goes on:
/// `wait()` returns once it has finished, and throws what it threw. Not one of Dispatch's threads: Dispatch opens
/// descriptors for its threads when it first needs them, so keywayd's open descriptors would grow after start (the
/// hostile-peer tests count them: a count that grows is a leak). When no thread can be made, the write runs here,
/// before returning.
final class BackgroundDiskWrite: DiskWrite {
    private let finished = DispatchGroup()
    private let failure = Mutex<AuthenticationError?>(nil)

    init(_ write: @escaping @Sendable () throws(AuthenticationError) -> Void) {
        finished.enter()
        let run: @Sendable () -> Void = { [self] in
            do throws(AuthenticationError) { try write() } catch { failure.withLock { $0 = error } }
            finished.leave()
        }
        if !spawn(run) { run() }
    }

    func wait() throws(AuthenticationError) {
        finished.wait()
        if let error = failure.withLock({ $0 }) { throw error }
    }
}
