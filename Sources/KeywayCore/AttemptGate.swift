/// Reserves an attempt before a factor verifies anything, then settles it: the one mechanism that keeps
/// parallel guesses from ever verifying more than the schedule allows (docs/ARCHITECTURE.md §5).
///
/// Reserve: in one store transaction, check the lockout and count the attempt as a failure. Verify outside the
/// transaction (the slow hash, the sensor match). Settle: a success resets the factor (and the factors it clears);
/// a failure stays counted; a repeat of a recent wrong secret is refunded. A crash between the two leaves the
/// attempt counted, never free.
public struct AttemptGate: Sendable {
    /// The factor whose attempts this gate counts.
    public let factor: FactorKind
    /// Where the counters live.
    public let store: any Store
    /// The time source.
    public let clock: any Clock
    /// The factor's delay ladder and lock rule.
    public let schedule: ThrottleSchedule
    /// Other factors whose counters a success of this one resets (the passcode clears the biometric lockout).
    public let clears: [FactorKind]
    /// The account-wide limit of consecutive failures.
    public let accountLimit: Int
    /// What the factor's refusals are called.
    public let codes: FactorCodes

    /// Creates a gate.
    public init(
        factor: FactorKind, store: any Store, clock: any Clock, schedule: ThrottleSchedule,
        clears: [FactorKind] = [], accountLimit: Int = ThrottleSchedule.accountLimit, codes: FactorCodes = FactorCodes()
    ) {
        self.codes = codes
        self.factor = factor
        self.store = store
        self.clock = clock
        self.schedule = schedule
        self.clears = clears
        self.accountLimit = accountLimit
    }

    /// A reserved attempt, to be settled once verified.
    public struct Reservation: Sendable {
        /// The user the attempt is counted for.
        public let user: String
        /// The counters it is counted in.
        public let channel: AttemptBook.Channel
        /// The count on its way to the disk while the factor verifies; every settle waits for it first.
        let onDisk: any DiskWrite

        /// Waits until the counted attempt is on disk; a failure to put it there is thrown (and no verdict given).
        public func confirm() throws(AuthenticationError) { try onDisk.wait() }
    }

    /// The availability implied by the user's counters of `channel`, for a factor that is otherwise ready.
    public func availability(
        for user: String, in channel: AttemptBook.Channel = .local, whenAllowed ready: Availability
    ) -> Availability {
        do { return availability(of: try store.attempts(user: user), in: channel, whenAllowed: ready) } catch {
            return .failed(error)
        }
    }

    /// The availability implied by counters already read, as `channel` counts them.
    public func availability(
        of book: AttemptBook, in channel: AttemptBook.Channel = .local, whenAllowed ready: Availability
    ) -> Availability {
        let decision = AttemptDecision.decide(
            book.viewed(from: channel), factor: factor, schedule: schedule, accountLimit: accountLimit,
            now: clock.now())
        switch decision {
        case .allowed: return ready
        case .wait(let until): return .lockedOut(until: until, reason: "too many failed attempts" + channel.words)
        case .lockedUntilCleared: return .lockedOut(until: nil, reason: lockReason(.lockedUntilCleared, in: channel))
        case .lockedOut: return .lockedOut(until: nil, reason: lockReason(.lockedOut, in: channel))
        }
    }

    /// Throws the lockout that would forbid an attempt now, counting nothing.
    public func check(for user: String, in channel: AttemptBook.Channel = .local) throws(AuthenticationError) {
        let decision = AttemptDecision.decide(
            try store.attempts(user: user).viewed(from: channel), factor: factor, schedule: schedule,
            accountLimit: accountLimit, now: clock.now())
        guard decision == .allowed else { throw error(for: decision, in: channel) }
    }

    /// Counts an attempt now, or throws the lockout that forbids it. The count is committed (every reader sees it,
    /// a crash of keywayd keeps it) when this returns, and reaches the disk while the caller verifies: the slow
    /// hash overlaps the disk's wait instead of following it. Each settle waits for the disk before anything is
    /// recorded or returned, so no verdict leaves keywayd before its attempt is on disk; a power cut before then
    /// loses the count and the answer with it (docs/ARCHITECTURE.md §5).
    /// In `channel`'s counters: a remote session's attempts are counted apart from a local one's
    /// (`AttemptBook.Channel`).
    public func reserve(for user: String, in channel: AttemptBook.Channel = .local) throws(AuthenticationError)
        -> Reservation
    {
        let now = clock.now()
        var decision = AttemptDecision.allowed
        let onDisk = try store.updateAttemptsWritingInBackground(user: user) { stored in
            var book = stored.viewed(from: channel)
            decision = AttemptDecision.decide(
                book, factor: factor, schedule: schedule,
                accountLimit: accountLimit, now: now)
            guard decision == .allowed else { return }
            book[factor].consecutiveFailures += 1
            book[factor].lastFailure = now
            book.accountStreak += 1
            stored.absorb(book, from: channel)
        }
        guard decision == .allowed else { throw error(for: decision, in: channel) }
        return Reservation(user: user, channel: channel, onDisk: onDisk)
    }

    /// A reservation in the channel `user`'s session counts in.
    public func reserve(for user: UserContext) throws(AuthenticationError) -> Reservation {
        try reserve(for: user.name, in: AttemptBook.Channel(remote: user.isRemote))
    }

    /// Records a verified success: resets this factor (keeping when it succeeded) and the factors it clears.
    /// A success is dated after the one before it, even within one millisecond (two hosts of a fleet, or a fast
    /// loop): a fleet's database lets a host lower counters only with a success that moves forward.
    public func settleSuccess(_ reservation: Reservation) throws(AuthenticationError) {
        try reservation.confirm()
        let now = clock.now()
        try store.updateAttempts(user: reservation.user, durable: false) { book in  // lost: stays counted
            let after = book[factor].lastSuccess.map { Timestamp(milliseconds: $0.milliseconds + 1) } ?? now
            recordSuccess(at: max(now, after), in: &book)
        }
    }

    /// A success at `moment`: this factor's counters reset, the factors it clears unlocked, the account's streak
    /// ended, in both channels: the person proved who they are, wherever they did.
    private func recordSuccess(at moment: Timestamp, in stored: inout AttemptBook) {
        for channel in [AttemptBook.Channel.local, .remote] {
            var book = stored.viewed(from: channel)
            book[factor] = AttemptState(lastSuccess: moment)
            for cleared in clears { book[cleared] = AttemptState(lastSuccess: book[cleared].lastSuccess) }
            book.accountStreak = 0
            stored.absorb(book, from: channel)
        }
    }

    /// Settles a verified single-use secret kept in `record` (a recovery code, a pass): a success only if this
    /// request spends it, a counted failure if another spent it first. `spend` takes the use out of the payload it
    /// is given (the record as it is now) and says what is left, or gives nil when there is nothing of it to spend;
    /// the change is made by `Store.spendOnce` and recorded as a use by the account's owner.
    public func settleUse(
        _ reservation: Reservation, of record: Enrollment,
        _ spend: ([UInt8]) throws(AuthenticationError) -> (payload: [UInt8], detail: String)?
    ) throws(AuthenticationError) -> Verdict {
        let used = try store.spendOnce(record) { current throws(AuthenticationError) in
            guard let (payload, detail) = try spend(current.payload) else { return nil }
            var updated = current  // when and by whom it was made stay; the use is the audit row's
            updated.payload = payload
            let entry = AuditEntry(
                at: clock.now(), actor: current.user, user: current.user, action: .use, factor: current.factor,
                detail: detail)
            return (updated, entry)
        }
        guard used else { return .failure(try settleFailure(reservation, fingerprint: nil)) }
        try settleSuccess(reservation)
        return .success
    }

    /// Records a failed verification. With a fingerprint of the wrong secret, a repeat of a recent one is refunded.
    public func settleFailure(_ reservation: Reservation, fingerprint: [UInt8]?) throws(AuthenticationError)
        -> Verdict.Failure
    {
        try reservation.confirm()
        guard let fingerprint else { return .mismatch }
        var failure = Verdict.Failure.mismatch
        try store.updateAttempts(user: reservation.user, durable: false) { stored in  // lost: refund not given
            var book = stored.viewed(from: reservation.channel)
            defer { stored.absorb(book, from: reservation.channel) }
            var state = book[factor]
            if state.recentMismatches.contains(fingerprint) {
                state.consecutiveFailures = max(0, state.consecutiveFailures - 1)
                book[factor] = state
                book.accountStreak = max(0, book.accountStreak - 1)
                failure = .repeatedMismatch
                return
            }
            state.recentMismatches.append(fingerprint)
            if state.recentMismatches.count > AttemptState.rememberedMismatches {
                state.recentMismatches.removeFirst(state.recentMismatches.count - AttemptState.rememberedMismatches)
            }
            book[factor] = state
        }
        return failure
    }

    /// The error that a refusing decision is reported as, naming the channel whose counters decided a wait.
    public func error(for decision: AttemptDecision, in channel: AttemptBook.Channel = .local) -> AuthenticationError {
        switch decision {
        case .allowed:
            return AuthenticationError(.internalFailure, "an allowed attempt reported as an error")
        case .wait(let until):
            return AuthenticationError(
                .throttled, "too many failed \(factor) attempts\(channel.words); try again after \(until)",
                retryAt: until)
        case .lockedUntilCleared:
            return AuthenticationError(codes.locked, lockReason(decision, in: channel))
        case .lockedOut:
            return AuthenticationError(.lockedOut, lockReason(decision, in: channel))
        }
    }

    private func lockReason(_ decision: AttemptDecision, in channel: AttemptBook.Channel) -> String {
        switch decision {
        case .lockedUntilCleared:
            "\(schedule.lockAfter ?? 0) consecutive \(factor) failures\(channel.words); " + codes.unlockedBy
        case .allowed, .wait, .lockedOut:
            "\(accountLimit) consecutive failures on this account\(channel.words); an administrator must reset the "
                + "counters"
        }
    }
}
