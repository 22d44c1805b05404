public import KeywayCore

/// What the biometric factor asks of a sensor, whatever drives it. Two backends answer (docs/ARCHITECTURE.md §18):
/// fprintd's reader (Plugins/Biometric/Fprintd), which matches prints itself and which only keywayd talks to, through
/// the device contract (`DeviceBackend`); and the simulated sensor (Plugins/Biometric/Simulator), whose samples are
/// matched here, in the keeper, against templates the store keeps, and which a person's process may also read itself
/// (`keyway --store`). This file is that second contract: the factor names no backend's types.

/// A sensor the person's side reads in its own process: each reading a sample or why there is none.
public protocol BiometricSensor: AnyObject, Sendable {
    /// What it reads.
    var biometry: BiometryType { get }
    /// How long a wait for a touch lasts.
    var timeout: Duration { get }
    /// False while it is unplugged.
    var isPluggedIn: Bool { get }
    /// How many touches an enrollment takes.
    var samplesToEnroll: Int { get }
    /// The next reading, or nil when the wait ended (`cancellation`, or the timeout).
    func nextReading(cancellation: CancellationFlag) -> SensorReading?
    /// The same sensor touched `count` times by `user`'s `finger`, by no one at it (`keyway enroll
    /// --simulate-touches`); nil for a sensor that only real fingers touch.
    func scripted(user: String, finger: String, count: Int) -> (any BiometricSensor)?
}

/// One thing that happened at a sensor.
public enum SensorReading: Sendable, Equatable {
    /// A touch, as a point in the sensor's feature space.
    case sample([Double])
    /// A touch too poor to use ("move your finger more slowly").
    case retry(String)
    /// The person cancelled at the sensor.
    case cancel
    /// The person chose the fallback at the sensor.
    case fallback
    /// The sensor was pulled out.
    case unplug
    /// The sensor failed.
    case failure(String)
}

/// How samples become templates and are matched against them: the simulated sensor's score model. Functions, not a
/// protocol: the model is a value, and Embedded Swift (the module) has existentials of classes only.
public struct TemplateMatcher: Sendable {
    /// A template from an enrollment's samples, or why not (`enrollmentRefused`).
    public var template: @Sendable (_ samples: [[Double]]) throws(AuthenticationError) -> [UInt8]
    /// Whether a sample matches a stored template (false for one it cannot read).
    public var matches: @Sendable (_ sample: [Double], _ template: [UInt8]) -> Bool
    /// Why a stored template cannot be read, or nil.
    public var problem: @Sendable (_ template: [UInt8]) -> String?

    /// Creates a matcher.
    public init(
        template: @escaping @Sendable (_ samples: [[Double]]) throws(AuthenticationError) -> [UInt8],
        matches: @escaping @Sendable (_ sample: [Double], _ template: [UInt8]) -> Bool,
        problem: @escaping @Sendable (_ template: [UInt8]) -> String?
    ) {
        self.template = template
        self.matches = matches
        self.problem = problem
    }
}

/// What a simulated sensor hands the factor (`BiometricAuthenticator.plugin(simulation:)`): its settings, the sensor
/// a person's process reads, the matcher keywayd's keeper uses, keywayd's listener at it, and the conformance
/// specimen.
public struct BiometricSimulation: Sendable {
    /// Settings it adds to `[biometric]` (the false-match rate that sets its threshold).
    public var settings: [Setting]
    /// The sensor for these settings, reading events from `directory` (the sensor's control socket) sent by `owner`
    /// (or root).
    public var sensor:
        @Sendable (_ settings: FactorSettings, _ directory: String, _ owner: UInt32) -> any BiometricSensor
    /// The matcher for these settings.
    public var matcher: @Sendable (FactorSettings) -> TemplateMatcher
    /// keywayd's listener at the simulated sensor for one arming.
    public var listener: @Sendable (FactorPlugin.DeviceSide) -> any DeviceListener
    /// Enrolls a simulated finger and gives a matching and a stranger's touch (`FactorPlugin.Specimen`).
    public var specimen: FactorPlugin.Specimen

    /// Creates the simulation's offer.
    public init(
        settings: [Setting],
        sensor:
            @escaping @Sendable (_ settings: FactorSettings, _ directory: String, _ owner: UInt32) ->
            any BiometricSensor,
        matcher: @escaping @Sendable (FactorSettings) -> TemplateMatcher,
        listener: @escaping @Sendable (FactorPlugin.DeviceSide) -> any DeviceListener,
        specimen: FactorPlugin.Specimen
    ) {
        self.settings = settings
        self.sensor = sensor
        self.matcher = matcher
        self.listener = listener
        self.specimen = specimen
    }
}
