public import KeywayCore
import Synchronization

/// The simulated device: what it senses (fingerprint or face), its noise, whether it is plugged in,
/// and where its events come from. The biometric factor reads it as a `BiometricSensor` (Simulation.swift).
public final class SimulatedSensor: Sendable {
    /// How the sensor is built.
    public struct Configuration: Sendable, Equatable {
        /// Fingerprint, face, or none (no sensor fitted).
        public var biometry: BiometryType
        /// The statistics of samples and matching (sets the false-match and false-non-match rates).
        public var model: NoiseModel {
            get { chosenModel ?? .default }
            set { chosenModel = newValue }
        }
        /// The seed of the simulated world: who has which fingers, and the sensor noise.
        public var seed: UInt64
        /// How long to wait for a finger before giving up.
        public var timeout: Duration
        /// The model given, or nil for the default, which is derived (with libm) only when first used: a PAM
        /// module whose policy never touches the sensor neither computes it nor loads libm.
        private var chosenModel: NoiseModel?

        /// Creates a configuration; the defaults are a fingerprint sensor with a 1 in 50,000 false-match rate.
        public init(
            biometry: BiometryType = .fingerprint, model: NoiseModel? = nil, seed: UInt64 = 0x6B65_7977_6179,
            timeout: Duration = .seconds(30)
        ) {
            self.biometry = biometry
            self.chosenModel = model
            self.seed = seed
            self.timeout = timeout
        }

        public static func == (lhs: Configuration, rhs: Configuration) -> Bool {
            lhs.biometry == rhs.biometry && lhs.seed == rhs.seed && lhs.timeout == rhs.timeout
                && lhs.model == rhs.model
        }
    }

    private struct State {
        var pluggedIn = true
        var noise: SeededGenerator
    }

    /// How the sensor is built.
    public let configuration: Configuration
    /// Where events come from.
    public let events: any SensorEventSource
    private let state: Mutex<State>

    /// Creates a sensor reading events from `events`.
    public init(_ configuration: Configuration = Configuration(), events: any SensorEventSource) {
        self.configuration = configuration
        self.events = events
        state = Mutex(State(noise: SeededGenerator(seed: configuration.seed ^ 0x9E37_79B9_7F4A_7C15)))
    }

    /// Whether the sensor is plugged in.
    public var isPluggedIn: Bool {
        get { state.withLock { $0.pluggedIn } && events.pluggedIn }
        set { state.withLock { $0.pluggedIn = newValue } }
    }

    /// The next event, with plug and unplug events applied to the sensor's state.
    public func next(cancellation: CancellationFlag) -> SensorEvent? {
        let event = events.next(timeout: configuration.timeout, cancellation: cancellation)
        if event == .unplug { isPluggedIn = false }
        if event == .plug { isPluggedIn = true }
        return event
    }

    /// A noisy sample of what was presented.
    public func sample(of event: SensorEvent) -> FeatureVector? {
        let model = configuration.model
        switch event {
        case .present(let user, let finger):
            let identity = model.identity(seed: configuration.seed, user: user, finger: finger)
            return state.withLock { model.sample(of: identity, using: &$0.noise) }
        case .presentStranger:
            return state.withLock { state in
                let stranger = model.randomIdentity(using: &state.noise)
                return model.sample(of: stranger, using: &state.noise)
            }
        case .retry, .cancel, .fallback, .unplug, .plug, .failure:
            return nil
        }
    }
}
