public import KeywayCore
import Synchronization

/// The factors keywayd holds armed (`first of`, docs/ARCHITECTURE.md §14): one lease per device at a time, bound to
/// a nonce keywayd made, to the uid of the connection that armed it, and to the user and factor. What the device
/// sees while armed is matched and counted at once, and kept here until the client claims it. Pure bookkeeping:
/// the daemon listens at the device and ends the lease when the arming connection closes.
///
/// - A match is claimed once, only with the nonce, only by the same uid for the same user and factor, and only
///   within `matchLifetime` of the touch.
/// - Nothing presented before arming can be here: nobody listens then.
/// - A lease ends when its connection closes (a killed client included), and lasts at most `maximumDuration`.
public final class Leases: Sendable {
    /// How long a match may wait to be claimed, in milliseconds.
    public static let matchLifetime: Int64 = 60_000
    /// The longest a device stays armed for one authentication, in milliseconds.
    public static let maximumDuration: Int64 = 600_000
    /// The nonce's length in bytes.
    public static let nonceLength = 16

    struct Lease {
        let nonce: [UInt8]
        let uid: UInt32
        let user: [UInt8]
        let factor: FactorKind
        let attempts: Int
        let armedAt: Int64
        var failures = 0
        /// What was presented and not yet claimed, with when.
        var pending: [(verdict: Verdict, at: Int64)] = []
        /// Why the device stopped for this lease (cancel, unplugged, locked), reported once nothing is pending.
        var ended: AuthenticationError? = nil
        /// A success was claimed: nothing more counts.
        var spent = false
        /// The lease still holds the device; once released it is only claimable.
        var holding = true

        var wantsMore: Bool {
            ended == nil && !spent && failures < attempts && !pending.contains { $0.verdict == .success }
        }
    }

    private let table = Mutex<[Lease]>([])
    private let now: @Sendable () -> Int64
    private let random: @Sendable () -> [UInt8]

    /// Creates the table; `now` reads monotonic milliseconds, `random` makes nonces (tests pass their own).
    public init(
        now: @escaping @Sendable () -> Int64,
        random: @escaping @Sendable () -> [UInt8] = { randomBytes(Leases.nonceLength) }
    ) {
        self.now = now
        self.random = random
    }

    /// Arms `factor` for `user` on behalf of `uid`: the new lease's nonce, or nil while another lease holds the device.
    /// With `inLine`, the lease waits in the daemon's line for the device instead: it is made without it, whoever
    /// holds it, and holds it once `hold` is called on its turn.
    public func open(_ factor: FactorKind, user: String, uid: UInt32, attempts: Int, inLine: Bool = false)
        -> [UInt8]?
    {
        let nonce = random()
        let time = now()
        return table.withLock { table in
            table.removeAll { time - $0.armedAt >= Self.maximumDuration }
            guard inLine || !table.contains(where: { $0.factor == factor && $0.holding }) else { return nil }
            var lease = Lease(
                nonce: nonce, uid: uid, user: Array(user.utf8), factor: factor, attempts: attempts, armedAt: time)
            lease.holding = !inLine
            table.append(lease)
            return nonce
        }
    }

    /// The lease `nonce`, made in line, holds the device now: its turn has come. False when another lease holds it.
    public func hold(_ nonce: [UInt8]) -> Bool {
        table.withLock { table in
            guard let index = table.firstIndex(where: { Self.same($0.nonce, nonce) }) else { return false }
            let factor = table[index].factor
            guard !table.contains(where: { $0.factor == factor && $0.holding }) else { return false }
            table[index].holding = true
            return true
        }
    }

    /// Records what the device saw for the lease `nonce`; a counted failure counts toward its attempts.
    public func record(_ verdict: Verdict, for nonce: [UInt8]) {
        let time = now()
        update(nonce) { lease in
            if case .failure(let failure) = verdict, failure.countsAsAttempt { lease.failures += 1 }
            lease.pending.append((verdict, time))
        }
    }

    /// Ends the device's part in the lease `nonce` with `error` (reported to the next claim once nothing else is).
    public func end(_ nonce: [UInt8], with error: AuthenticationError) {
        update(nonce) { lease in if lease.ended == nil { lease.ended = error } }
    }

    /// True while the lease `nonce` exists, is younger than `maximumDuration` and can still use the device.
    public func wantsMore(_ nonce: [UInt8]) -> Bool {
        let time = now()
        return table.withLock { table in
            guard let lease = table.first(where: { Self.same($0.nonce, nonce) }) else { return false }
            return lease.wantsMore && time - lease.armedAt < Self.maximumDuration
        }
    }

    /// Gives the device back for the lease `nonce`, which stays claimable until it is closed: a lease ends at the
    /// device as soon as it has what it can use, so the next authentication need not wait for its client.
    public func release(_ nonce: [UInt8]) {
        update(nonce) { $0.holding = false }
    }

    /// Removes the lease `nonce` (its connection closed).
    public func close(_ nonce: [UInt8]) {
        table.withLock { table in table.removeAll { Self.same($0.nonce, nonce) } }
    }

    /// What was presented since arming or the last claim, for the caller that armed it, about the same user and
    /// factor; a match older than `matchLifetime` is dropped. Anything else is the same refusal, so a guessed or
    /// borrowed nonce learns nothing.
    public func claim(_ nonce: [UInt8], factor: FactorKind, user: String, uid: UInt32)
        -> Result<[Verdict], AuthenticationError>
    {
        let time = now()
        let name = Array(user.utf8)
        return table.withLock { table in
            guard let index = table.firstIndex(where: { Self.same($0.nonce, nonce) }),
                table[index].uid == uid, table[index].user == name, table[index].factor == factor
            else {
                return .failure(
                    AuthenticationError(.invalidContext, "no armed \(factor) of this authentication has that nonce"))
            }
            var lease = table[index]
            if lease.spent { return .success([]) }
            let fresh = lease.pending.filter { $0.verdict != .success || time - $0.at < Self.matchLifetime }
            lease.pending = []
            var verdicts = fresh.map { $0.verdict }
            if let success = verdicts.firstIndex(of: .success) {
                verdicts = Array(verdicts[...success])
                lease.spent = true
            }
            table[index] = lease
            if verdicts.isEmpty, let ended = lease.ended { return .failure(ended) }
            return .success(verdicts)
        }
    }

    private func update(_ nonce: [UInt8], _ change: (inout Lease) -> Void) {
        table.withLock { table in
            guard let index = table.firstIndex(where: { Self.same($0.nonce, nonce) }) else { return }
            change(&table[index])
        }
    }

    /// Compares nonces in time that does not depend on where they differ.
    static func same(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count, !a.isEmpty else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }
}
