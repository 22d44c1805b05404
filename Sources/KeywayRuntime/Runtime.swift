import CKeywayLibc
public import KeywayBiometricSimulator
public import KeywayCore
public import KeywayGesture
public import KeywayPasscode

/// The person's side of the three factors over one vault: keywayd's (`DaemonVault`, the PAM module and the CLI) or
/// a local one (keywayd itself, tests, `keyway --store`). The module and the CLI share it, so they cannot drift
/// apart. Built per call: nothing here outlives a `pam_end`.
public struct Runtime: Sendable {
    /// The sensor's settings.
    public struct Options: Sendable, Equatable {
        /// The simulated sensor's control directory.
        public var sensorDirectory = SensorControl.defaultDirectory
        /// Accept a sensor directory owned by the current user instead of root: tests and the demo only.
        public var sensorOwnedByCurrentUser = false
        /// How long the sensor waits for a touch.
        public var sensorTimeout: Duration = .seconds(30)
        /// The simulated sensor's kind.
        public var biometry: BiometryType = .fingerprint

        /// Defaults: the system sensor.
        public init() {}
    }

    /// The options used.
    public let options: Options
    /// Where state is kept and secrets checked.
    public let vault: any Vault
    /// The pattern factor.
    public let gesture: GestureAuthenticator
    /// The passcode factor.
    public let passcode: PasscodeAuthenticator
    /// The simulated biometric factor.
    public let biometric: BiometricAuthenticator

    /// Builds the factors over `vault`.
    public init(vault: any Vault, options: Options = Options()) {
        self.options = options
        self.vault = vault
        gesture = GestureAuthenticator(vault: vault)
        passcode = PasscodeAuthenticator(vault: vault)
        let events = SocketSensorEvents(
            directory: options.sensorDirectory, owner: options.sensorOwnedByCurrentUser ? geteuid() : 0)
        let sensor = SimulatedSensor(.init(biometry: options.biometry, timeout: options.sensorTimeout), events: events)
        biometric = BiometricAuthenticator(vault: vault, sensor: sensor)
    }

    /// The registry of the three factors.
    public var registry: FactorRegistry { FactorRegistry([gesture, biometric, passcode]) }

    /// A fresh evaluation context over the three factors.
    public func context(_ options: EvaluationContext.Options = .init()) -> EvaluationContext {
        EvaluationContext(registry: registry, options: options)
    }
}
