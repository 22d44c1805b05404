import CKeywayLibc
import Dispatch
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// The bounded pool of slow-hash workers: a request waits its turn in a queue of bounded length, and one caller's
/// share of it is bounded too (docs/ARCHITECTURE.md §10, "Threads").
extension Server {
    /// Runs `body` on one of the pool's workers, or returns nil (busy) when the queue is full or the wait too long.
    /// A request beyond its share's places waits for one (within `queueWait`) instead of being refused; a request
    /// whose client has gone by the time a worker is free is dropped unrun. Every busy answer is logged with who
    /// held the places (rate-limited).
    func onPool(
        _ share: Share, for holder: Holder, client fd: Int32, _ body: () -> Response
    ) -> Response? {
        let deadline = MonotonicClock.milliseconds() + options.queueWait
        enum Admission { case admitted, queueFull, shareFull([Holder]) }
        while true {
            let admission = pool.withLock { state -> Admission in
                guard state.admitted < options.workers + options.queueLimit else { return .queueFull }
                let holders = state.byShare[share, default: []]
                guard holders.count < options.perAccountLimit else { return .shareFull(holders) }
                state.admitted += 1
                state.byShare[share, default: []].append(holder)
                return .admitted
            }
            switch admission {
            case .admitted: break
            case .queueFull:
                logBusy(share, for: holder, "the queue is full (\(options.workers + options.queueLimit) admitted)")
                return nil
            case .shareFull(let holders):
                if UnixSocket.peerHasClosed(fd) { return .failure(busy("the client left before its turn")) }
                guard MonotonicClock.milliseconds() < deadline else {
                    let by = holders.map { $0.description }.joined(separator: ", ")
                    logBusy(share, for: holder, "its places were held for \(options.queueWait) ms by \(by)")
                    return nil
                }
                _ = shareFreed.wait(timeout: .now() + .milliseconds(20))
                continue
            }
            break
        }
        defer {
            pool.withLock { state in
                state.admitted -= 1
                var holders = state.byShare[share, default: []]
                if let index = holders.firstIndex(of: holder) { holders.remove(at: index) }
                state.byShare[share] = holders.isEmpty ? nil : holders
            }
            shareFreed.signal()
        }
        let left = deadline - MonotonicClock.milliseconds()
        guard left > 0, workers.wait(timeout: .now() + .milliseconds(Int(left))) == .success else {
            logBusy(share, for: holder, "no worker was free within \(options.queueWait) ms")
            return nil
        }
        defer { workers.signal() }
        if UnixSocket.peerHasClosed(fd) { return .failure(busy("the client left before its turn")) }
        return body()
    }

    func logBusy(_ share: Share, for holder: Holder, _ why: String) {
        let account = String(decoding: share.account, as: UTF8.self)
        Self.logLimited(
            "busy: answered \(holder) about \(account.escapingControlCharacters) "
                + "(\(share.owner ? "the owner's" : "others'") share): "
                + why)
    }
}
