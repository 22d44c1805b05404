public import KeywayCore

/// What keywayd's wait at the biometric device found (docs/ARCHITECTURE.md §14 and §18).
public enum DeviceEvent: Sendable, Equatable {
    /// Something to verify and count in the attempt gate: the simulator's sample, or a reader's own match verdict.
    case evidence(Evidence)
    /// A presentation the device could not use ("center your finger"): not counted.
    case unusable(String)
    /// The wait is over, with the outcome the policy sees (cancelled at the device, the fallback, the device gone).
    case ended(AuthenticationError)
}

/// Why a device could not be taken.
public enum DeviceHoldFailure: Error, Sendable, Equatable {
    /// Another authentication (or another program) has it.
    case busy
    /// It cannot serve now, and why (a log line and the policy's fallback).
    case unavailable(AuthenticationError)
}

/// keywayd's side of a presented factor's device for one armed authentication: take it, wait for what is presented,
/// give it back. The simulated sensor (`SimulatorListener`) and fprintd's readers (KeywayFprintd) are two of these,
/// chosen by `[biometric] backend`; keywayd's arming loop knows only this.
public protocol DeviceListener: AnyObject {
    /// Takes the device for this authentication, before the client is told to present.
    func hold() throws(DeviceHoldFailure)
    /// The next event, or nil once `cancellation` is set.
    func next(cancellation: CancellationFlag) -> DeviceEvent?
    /// The last event has been verified and counted: the device (or whoever drove it) may be told.
    func handled()
    /// Gives the device back; safe to call more than once.
    func release()
}

/// The simulated sensor as a device listener: its control socket, held by keywayd for the lease.
public final class SimulatorListener: DeviceListener {
    private let events: SocketSensorEvents
    private let sensor: SimulatedSensor

    /// A listener at the sensor's control directory, with the settings' biometry and model, waiting at most `limit`.
    public init(directory: String, settings: FactorSettings, limit: Duration) {
        events = SocketSensorEvents(directory: directory, owner: 0, acknowledgesAfterHandling: true)
        sensor = SimulatedSensor(
            .init(
                biometry: BiometricAuthenticator.biometry(settings), model: BiometricAuthenticator.model(settings),
                timeout: limit),
            events: events)
    }

    public func hold() throws(DeviceHoldFailure) {
        if case .failure(let error) = events.hold() {
            throw error.isBusy
                ? .busy
                : .unavailable(
                    AuthenticationError(.biometryNotAvailable, "keywayd cannot listen at the sensor: \(error)"))
        }
    }

    public func next(cancellation: CancellationFlag) -> DeviceEvent? {
        while let event = sensor.next(cancellation: cancellation) {
            switch event {
            case .plug:
                continue
            case .present, .presentStranger:
                guard let sample = sensor.sample(of: event) else { continue }
                return .evidence(.samples([sample.components]))
            case .retry(let reason):
                return .unusable(reason)
            case .cancel:
                return .ended(AuthenticationError(.userCancel, "cancelled at the sensor"))
            case .fallback:
                return .ended(AuthenticationError(.userFallback, "the fallback was chosen at the sensor"))
            case .unplug:
                return .ended(AuthenticationError(.biometryNotAvailable, "the sensor was unplugged"))
            case .failure(let reason):
                return .ended(AuthenticationError(.biometryNotAvailable, "the sensor failed: \(reason)"))
            }
        }
        return nil
    }

    public func handled() { events.acknowledge() }  // the sender hears "ok" once a claim would see the touch

    public func release() { events.release() }
}
