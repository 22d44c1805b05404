import Glibc
public import KeywayBiometricSimulator
public import KeywayCore
public import KeywayGesture
public import KeywayPasscode
public import KeywayPlatform
public import KeywayStore

/// Everything one authentication or one CLI command needs, built from options: the store, the clock, the hasher
/// and the three factor plugins. The PAM module and the CLI share it, so they cannot drift apart.
/// Built per call: nothing here outlives a `pam_end`.
public struct Runtime: Sendable {
    /// Where things are.
    public struct Options: Sendable, Equatable {
        /// The SQLite store.
        public var storePath = SQLiteStore.Options.defaultPath
        /// Accept a store owned by the current user instead of root: tests and the demo only.
        public var storeOwnedByCurrentUser = false
        /// Create the store if it is missing (enrollment does; authentication does not).
        public var createStore = false
        /// The simulated sensor's control directory.
        public var sensorDirectory = SensorControl.defaultDirectory
        /// How long the sensor waits for a touch.
        public var sensorTimeout: Duration = .seconds(30)
        /// The simulated sensor's kind.
        public var biometry: BiometryType = .fingerprint
        /// The Argon2id cost for new enrollments.
        public var hashCost: Argon2idHasher.Cost = .default

        /// Defaults: the system store and sensor.
        public init() {}
    }

    /// The options used.
    public let options: Options
    /// The store.
    public let store: SQLiteStore
    /// The wall clock.
    public let clock: SystemClock
    /// The pattern factor.
    public let gesture: GestureAuthenticator
    /// The passcode factor.
    public let passcode: PasscodeAuthenticator
    /// The simulated biometric factor.
    public let biometric: BiometricAuthenticator

    /// Opens the store and builds the plugins.
    public init(_ options: Options) throws(AuthenticationError) {
        self.options = options
        var storeOptions =
            options.storeOwnedByCurrentUser
            ? SQLiteStore.Options.ownedByCurrentUser(path: options.storePath, create: options.createStore)
            : SQLiteStore.Options(path: options.storePath, create: options.createStore)
        storeOptions.create = options.createStore
        store = try SQLiteStore(storeOptions)
        clock = SystemClock()
        let hasher = try Argon2idHasher(cost: options.hashCost)
        gesture = GestureAuthenticator(store: store, clock: clock, hasher: hasher)
        passcode = PasscodeAuthenticator(store: store, clock: clock, hasher: hasher)
        let events = SocketSensorEvents(
            directory: options.sensorDirectory,
            owner: options.storeOwnedByCurrentUser ? geteuid() : 0)
        let sensor = SimulatedSensor(.init(biometry: options.biometry, timeout: options.sensorTimeout), events: events)
        biometric = BiometricAuthenticator(store: store, clock: clock, sensor: sensor)
    }

    /// The registry of the three factors.
    public var registry: FactorRegistry { FactorRegistry([gesture, biometric, passcode]) }

    /// A fresh evaluation context over the three factors.
    public func context(_ options: EvaluationContext.Options = .init()) -> EvaluationContext {
        EvaluationContext(registry: registry, options: options)
    }
}
