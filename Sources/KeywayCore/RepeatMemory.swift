import Synchronization

/// The wrong secrets a keeper has seen lately, by a fast keyed fingerprint (`SecretHasher.quickFingerprint`), held
/// in memory only: a guess that repeats one is answered as the failure it was without the slow hash and without
/// counting, so no one can hold a hash worker by repeating a guess (docs/ARCHITECTURE.md §10, "Fair to the owner").
/// The fingerprint binds the enrolled hash, so a changed enrollment remembers nothing. Bounded: `perUser`
/// fingerprints for each of at most `users` names, the oldest name forgotten first; a forgotten repeat merely pays
/// the slow hash again, which the stored fingerprints then refund as before.
public final class RepeatMemory: Sendable {
    private struct Table {
        var byUser: [String: [[UInt8]]] = [:]
        var order: [String] = []
    }
    private let table = Mutex(Table())
    /// Names remembered at once.
    public let users: Int
    /// Fingerprints remembered per name.
    public let perUser: Int

    /// Creates an empty memory.
    public init(users: Int = 10_000, perUser: Int = AttemptState.rememberedMismatches) {
        self.users = users
        self.perUser = perUser
    }

    /// True when `fingerprint` is one of `user`'s remembered wrong secrets.
    public func contains(_ fingerprint: [UInt8], for user: String) -> Bool {
        table.withLock { $0.byUser[user]?.contains(fingerprint) ?? false }
    }

    /// Remembers a wrong secret of `user`.
    public func remember(_ fingerprint: [UInt8], for user: String) {
        table.withLock { table in
            if var known = table.byUser[user] {
                guard !known.contains(fingerprint) else { return }
                known.append(fingerprint)
                if known.count > perUser { known.removeFirst(known.count - perUser) }
                table.byUser[user] = known
                return
            }
            table.byUser[user] = [fingerprint]
            table.order.append(user)
            if table.order.count > users {
                let dropped = table.order.count - users
                for name in table.order.prefix(dropped) { table.byUser[name] = nil }
                table.order.removeFirst(dropped)
            }
        }
    }
}
