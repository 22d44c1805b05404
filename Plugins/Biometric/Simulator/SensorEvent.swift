public import KeywayCore
import Synchronization

/// Something that happens at the simulated sensor, in the spirit of libfprint's virtual_device commands.
public enum SensorEvent: Sendable, Equatable {
    /// A finger (or face) is presented: a genuine sample of `user`'s `finger`, as the world knows it.
    /// Presented while someone else authenticates, it is an impostor sample for them.
    case present(user: String, finger: String)
    /// A sample of a stranger nobody enrolled.
    case presentStranger
    /// The sensor saw something it could not use (moved too fast, too dry, partial); the reason is shown.
    case retry(String)
    /// The person pressed cancel.
    case cancel
    /// The person chose the fallback ("Use passcode").
    case fallback
    /// The sensor was unplugged.
    case unplug
    /// The sensor was plugged back in.
    case plug
    /// The sensor reported a hardware error, with its reason.
    case failure(String)
}

/// Where sensor events come from: a scripted queue in tests, a control socket for `sudo` and demos.
///
/// Implementation requirements: `next` returns nil when `timeout` passes with no event, and returns promptly
/// (with nil) once `cancellation` is set.
public protocol SensorEventSource: AnyObject, Sendable {
    /// The next event, or nil on timeout or cancellation.
    func next(timeout: Duration, cancellation: CancellationFlag) -> SensorEvent?
    /// Whether the device is plugged in as far as the source knows (the control socket keeps a flag file).
    var pluggedIn: Bool { get }
}

extension SensorEventSource {
    /// A source that knows nothing of plugging reports the device as plugged in.
    public var pluggedIn: Bool { true }
}

/// A queue of events fed by the test (or a demo) itself; an empty queue times out at once.
public final class ScriptedSensorEvents: SensorEventSource {
    private let queue: Mutex<[SensorEvent]>

    /// Creates a queue holding `events`.
    public init(_ events: [SensorEvent] = []) { queue = Mutex(events) }

    /// Appends events.
    public func push(_ events: SensorEvent...) { queue.withLock { $0.append(contentsOf: events) } }

    /// Events not yet consumed.
    public var pending: [SensorEvent] { queue.withLock { $0 } }

    public func next(timeout: Duration, cancellation: CancellationFlag) -> SensorEvent? {
        if cancellation.isCancelled { return nil }
        return queue.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }
}
