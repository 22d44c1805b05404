import CKeywayLibc
import Glibc
import KeywayPlatform
import Synchronization

/// Lets go of what a client handed keywayd but keywayd does not keep: connections the accept loop refuses, and
/// descriptors a client passed on a lease. Their close may block (a FUSE file's flush waits for its server, a
/// lingering socket for its peer; keywayd(8), "Descriptors"; docs/ARCHITECTURE.md §10), so it happens off the thread
/// that found them, on a line of the sender's own: each person (and root, and connections whose sender could not be
/// told) has one, worked by one thread while it holds anything. A close that never ends stalls only the line of the
/// person who sent it; everyone else's refusals are answered and closed on theirs.
final class Disposer: Sendable {
    /// Whose line: a connection place, or nil when the sender could not be told (SO_PEERCRED failed).
    typealias Owner = Server.Place?

    private enum Work: Sendable {
        /// A refused connection, with the frame to send it first (without waiting), if any.
        case refusal(Int32, answer: [UInt8]?)
        /// A descriptor a client passed.
        case passed(Int32)
    }
    private struct Line {
        var work: [Work] = []
        /// Whether a thread works this line now.
        var worked = false
    }
    private let lines = Mutex<[Owner: Line]>([:])

    /// Refusals a line may hold before a refused connection that has nothing queued on it is closed in place: one
    /// that is shut down with an empty queue holds no one's descriptors, so its close cannot block.
    static let lineLimit = 256

    init() {}

    /// Sends `answer` (a whole frame) without waiting, if there is one, then disposes of the connection `fd`, on
    /// `owner`'s line.
    func refuse(_ fd: Int32, answer: [UInt8]?, for owner: Owner) {
        let full = lines.withLock { $0[owner]?.work.count ?? 0 >= Self.lineLimit }
        if full && Self.closeIfEmpty(fd, answer: answer) { return }
        add([.refusal(fd, answer: answer)], for: owner)
    }

    /// Disposes of descriptors `owner` passed, on `owner`'s line.
    func dispose(_ fds: [Int32], for owner: Owner) {
        guard !fds.isEmpty else { return }
        add(fds.map { .passed($0) }, for: owner)
    }

    private func add(_ work: [Work], for owner: Owner) {
        let start = lines.withLock { lines -> Bool in
            var line = lines[owner, default: Line()]
            line.work.append(contentsOf: work)
            let start = !line.worked
            line.worked = true
            lines[owner] = line
            return start
        }
        guard start else { return }
        if !spawn({ [self] in drain(owner) }) {
            // No thread: the sender's work is done here, on the thread that found it (the accept loop only when no
            // thread at all can be started, and then it is logged).
            Server.logLimited("no thread could be started for a disposal line; closing in place")
            drain(owner)
        }
    }

    /// Works `owner`'s line until it is empty, then lets the line go.
    private func drain(_ owner: Owner) {
        while true {
            let batch = lines.withLock { lines -> [Work] in
                guard let work = lines[owner]?.work, !work.isEmpty else {
                    lines[owner] = nil  // the next work for this owner starts a thread again
                    return []
                }
                lines[owner]?.work = []
                return work
            }
            if batch.isEmpty { return }
            for item in batch { Self.finish(item) }
        }
    }

    private static func finish(_ work: Work) {
        switch work {
        case .refusal(let fd, let answer):
            send(answer, on: fd)
            UnixSocket.dispose(fd)
        case .passed(let fd):
            UnixSocket.dispose(fd)
        }
    }

    private static func send(_ answer: [UInt8]?, on fd: Int32) {
        guard let answer else { return }
        _ = answer.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    }

    /// Answers and closes the refused connection `fd` here when, once shut down, nothing is queued on it; false
    /// (and `fd` still open, shut down) otherwise.
    private static func closeIfEmpty(_ fd: Int32, answer: [UInt8]?) -> Bool {
        send(answer, on: fd)
        guard keyway_shut_and_empty(fd) == 1 else { return false }
        close(fd)
        return true
    }
}
