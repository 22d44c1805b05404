/// How failures of one factor slow down and finally stop further attempts.
///
/// Defaults follow the references in docs/ARCHITECTURE.md §1; all are configurable.
public struct ThrottleSchedule: Sendable, Equatable {
    /// After `failures` consecutive failures, the next attempt waits `delay` after the last failure.
    public struct Step: Sendable, Equatable {
        /// Consecutive failures from which this step applies (until the next step).
        public var failures: Int
        /// The wait after the last failure.
        public var delay: Duration

        /// Creates a step.
        public init(failures: Int, delay: Duration) {
            self.failures = failures
            self.delay = delay
        }
    }

    /// The delay ladder, ordered by `failures`.
    public var steps: [Step]
    /// Consecutive failures after which the factor is locked until a success of a clearing factor
    /// (the biometric rule: 5, cleared by the passcode), or nil for no such lock.
    public var lockAfter: Int?

    /// Creates a schedule; the steps are sorted.
    public init(steps: [Step] = [], lockAfter: Int? = nil) {
        self.steps = steps.sorted { $0.failures < $1.failures }
        self.lockAfter = lockAfter
    }

    /// The wait that applies after `failures` consecutive failures, or nil for none.
    public func delay(afterFailures failures: Int) -> Duration? {
        steps.last { $0.failures <= failures }.map { $0.delay }
    }

    /// Biometrics: 5 consecutive failures lock the sensor until the passcode succeeds (LocalAuthentication).
    public static let biometric = ThrottleSchedule(lockAfter: 5)

    /// The pattern, in the manner of Android's Gatekeeper: 30 s after 5 failures, growing.
    public static let gesture = ThrottleSchedule(steps: [
        Step(failures: 5, delay: .seconds(30)),
        Step(failures: 10, delay: .seconds(60)),
        Step(failures: 15, delay: .seconds(5 * 60)),
        Step(failures: 20, delay: .seconds(15 * 60)),
        Step(failures: 30, delay: .seconds(60 * 60)),
        Step(failures: 50, delay: .seconds(4 * 60 * 60)),
    ])

    /// The passcode, as iOS: 5 → 1 min, 6 → 5 min, 7–8 → 15 min, 9 and more → 1 h.
    public static let passcode = ThrottleSchedule(steps: [
        Step(failures: 5, delay: .seconds(60)),
        Step(failures: 6, delay: .seconds(5 * 60)),
        Step(failures: 7, delay: .seconds(15 * 60)),
        Step(failures: 9, delay: .seconds(60 * 60)),
    ])

    /// Consecutive failures per user, over all factors, after which only an administrator can unlock
    /// (NIST SP 800-63B: no more than 100).
    public static let accountLimit = 100
}

/// Whether an attempt may be made now.
public enum AttemptDecision: Sendable, Equatable {
    /// Go ahead.
    case allowed
    /// Wait until the given time (the delay ladder).
    case wait(until: Timestamp)
    /// Locked until a clearing factor succeeds (the biometric rule).
    case lockedUntilCleared
    /// Locked until an administrator resets the counters (the account limit).
    case lockedOut

    /// Decides for `factor` from the user's counters.
    public static func decide(
        _ book: AttemptBook, factor: FactorKind, schedule: ThrottleSchedule,
        accountLimit: Int, now: Timestamp
    ) -> AttemptDecision {
        if book.accountStreak >= accountLimit { return .lockedOut }
        let state = book[factor]
        if let lockAfter = schedule.lockAfter, state.consecutiveFailures >= lockAfter { return .lockedUntilCleared }
        if let delay = schedule.delay(afterFailures: state.consecutiveFailures), let last = state.lastFailure {
            let until = last.adding(delay)
            if now < until { return .wait(until: until) }
        }
        return .allowed
    }
}
