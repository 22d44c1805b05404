import Synchronization

/// What keywayd made for a person and showed once (a TOTP secret, recovery codes, a pass), kept in memory by user
/// until an enrollment confirms it (`FactorKeeper.offer`): each for `lifetime` milliseconds, at most `limit` at once
/// (the oldest dropped first), a later offer for the same user replacing the earlier. Never written anywhere.
public final class PendingOffers<Value: Sendable>: Sendable {
    /// How long an offer waits, in milliseconds.
    public let lifetime: Int64
    /// Offers kept at once.
    public let limit: Int
    private let table = Mutex<[String: (value: Value, at: Int64)]>([:])

    /// Offers that last `lifetime` ms, `limit` at most.
    public init(lifetime: Int64, limit: Int = 1000) {
        self.lifetime = lifetime
        self.limit = limit
    }

    /// Keeps `value` for `user` from `now` (milliseconds).
    public func keep(_ value: Value, for user: String, now: Int64) {
        let lifetime = lifetime
        let limit = limit
        table.withLock { table in
            table = table.filter { now - $0.value.at < lifetime }
            if table.count >= limit, let oldest = table.min(by: { $0.value.at < $1.value.at }) {
                table.removeValue(forKey: oldest.key)
            }
            table[user] = (value, now)
        }
    }

    /// The offer kept for `user`, while it lasts.
    public func current(for user: String, now: Int64) -> Value? {
        guard let kept = table.withLock({ $0[user] }), now - kept.at < lifetime else { return nil }
        return kept.value
    }

    /// Forgets the offer for `user` (it was confirmed).
    public func remove(_ user: String) { table.withLock { _ = $0.removeValue(forKey: user) } }
}
