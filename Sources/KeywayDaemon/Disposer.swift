import CKeywayLibc
import Dispatch
import Glibc
import KeywayPlatform
import Synchronization

/// Answers and lets go of connections the accept loop refuses, on a thread of its own: the accept loop serves
/// everyone, and a client's connection may hold descriptors whose release could block (keywayd(8), "Descriptors";
/// docs/ARCHITECTURE.md §10). Each refusal is one non-blocking send of the answer, then `UnixSocket.dispose`.
final class Disposer: Sendable {
    private struct Work: Sendable {
        var fd: Int32
        var answer: [UInt8]?
    }
    private final class Queue: Sendable {
        let work = Mutex<[Work]>([])
        let ready = DispatchSemaphore(value: 0)
    }
    private let queue = Queue()
    /// False when no thread could be started: refusals are then handled on the caller's thread.
    private let threaded: Bool

    /// Starts the disposer's thread.
    init() {
        let queue = self.queue
        threaded = spawn {
            while true {
                queue.ready.wait()
                let batch = queue.work.withLock { work -> [Work] in
                    defer { work.removeAll(keepingCapacity: true) }
                    return work
                }
                for work in batch { Self.finish(work) }
            }
        }
        if !threaded { Server.log("no thread could be started for the disposer; refused connections close in place") }
    }

    private static func finish(_ work: Work) {
        if let answer = work.answer {
            _ = answer.withUnsafeBytes { send(work.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        }
        UnixSocket.dispose(work.fd)
    }

    /// Sends `answer` (a whole frame) without waiting, if there is one, then disposes of `fd`.
    func refuse(_ fd: Int32, answer: [UInt8]?) {
        guard threaded else { return Self.finish(Work(fd: fd, answer: answer)) }
        queue.work.withLock { $0.append(Work(fd: fd, answer: answer)) }
        queue.ready.signal()
    }
}
