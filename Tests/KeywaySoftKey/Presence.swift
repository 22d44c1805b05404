import KeywayPlatform

/// How a wait for the user's touch ended.
enum PresenceOutcome: Sendable {
    /// Touched: go on.
    case given
    /// The client sent CANCEL: CTAP2_ERR_KEEPALIVE_CANCEL.
    case cancelled
    /// Nobody touched in time: CTAP2_ERR_USER_ACTION_TIMEOUT.
    case timedOut
    /// The client went away: no answer.
    case disconnected
}

/// What the connection saw while the key waited for a touch.
enum Interruption: Sendable {
    case cancel
    case closed
}

/// The wait for user presence, as the `presence` knob says: at once (auto), until the file `DIR/touch` appears (wait,
/// which takes the file away), or never; wait and never give up after the request's limit, or at a CANCEL frame.
struct PresenceWait {
    /// The soft key's directory, where a test leaves `touch`.
    let directory: KeyDirectory
    /// Watches the connection for up to the given milliseconds: a CANCEL frame, the client gone, or nil for neither.
    let watch: (Int32) -> Interruption?

    static let touchFile = "touch"

    /// Waits as `knobs` say.
    func wait(_ knobs: Knobs) -> PresenceOutcome {
        if knobs.presence == .auto { return .given }
        let deadline = MonotonicClock.milliseconds() + Int64(knobs.presenceTimeoutSeconds) * 1000
        while true {
            if knobs.presence == .wait && directory.remove(Self.touchFile) { return .given }
            let left = deadline - MonotonicClock.milliseconds()
            if left <= 0 { return .timedOut }
            switch watch(Int32(min(left, 50))) {
            case .cancel: return .cancelled
            case .closed: return .disconnected
            case nil: continue
            }
        }
    }
}
