import KeywayBiometric
public import KeywayCore

/// The simulated sensor as a device listener: its control socket, held by keywayd for the lease.
public final class SimulatorListener: DeviceListener {
    private let events: SocketSensorEvents
    private let sensor: SimulatedSensor

    /// A listener at the sensor's control directory, with the settings' biometry and model, waiting at most `limit`.
    public init(directory: String, settings: FactorSettings, limit: Duration) {
        events = SocketSensorEvents(directory: directory, owner: 0, acknowledgesAfterHandling: true)
        sensor = SimulatedSensor(
            .init(
                biometry: BiometricAuthenticator.biometry(settings), model: SimulatedSensor.model(settings),
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
