import CKeywayLibc
import Dispatch
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire
import Synchronization

/// How long a worker takes to answer a request that runs the slow hash, as a moving average of the answers that took
/// at least `GuessTime.floor` (a guess that ran the hash); faster answers (a repeat of a remembered wrong secret, a
/// lockout) are padded to it, so their timing does not tell an attacker which wrong secrets the account's owner
/// typed lately (docs/ARCHITECTURE.md §10, "Fair to the owner").
final class GuessTime: Sendable {
    /// Answers faster than this ran no slow hash and do not move the average.
    static let floor: Int64 = 5
    /// No answer is padded beyond this.
    static let ceiling: Int64 = 2000
    private let average = Mutex<Int64?>(nil)

    /// Records an answer that took `took` ms of a worker, and returns how many more ms it should take.
    func padding(after took: Int64) -> Int64 {
        average.withLock { average in
            if took >= Self.floor {
                // An eighth of each new answer: a slow machine's average follows within a few guesses.
                average = average.map { $0 + (min(took, Self.ceiling) - $0) / 8 } ?? min(took, Self.ceiling)
                return 0
            }
            return max(0, (average ?? 0) - took)
        }
    }
}
