/// The contract between a presented factor and the device it is presented to, below every plugin and backend
/// (docs/ARCHITECTURE.md §14): keywayd's arming loop, the simulated sensor, fprintd's reader and any later device
/// know only these types.

/// What keywayd's wait at a presented factor's device found.
public enum DeviceEvent: Sendable, Equatable {
    /// Something to verify and count in the attempt gate: the simulator's sample, a reader's own match verdict.
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
/// give it back. keywayd's arming loop knows only this; each factor says how to make one (`FactorPlugin.Arming`).
public protocol DeviceListener: AnyObject {
    /// Takes the device for this authentication, before the client is told to present.
    func hold() throws(DeviceHoldFailure)
    /// The next event, or nil once `cancellation` is set.
    func next(cancellation: CancellationFlag) -> DeviceEvent?
    /// The last event has been verified and counted: the device (or whoever drove it) may be told.
    func handled()
    /// Gives the device back; safe to call more than once.
    func release()
    /// The machine is about to sleep: stop using the device, keeping only what cannot be given back until the resume
    /// (`release` follows after it). By default the device is released at once.
    func sleeping()
}

extension DeviceListener {
    public func sleeping() { release() }
}

/// A device that cannot be held, and why: what a factor answers when the backend its settings choose is missing.
public final class UnavailableListener: DeviceListener {
    private let why: AuthenticationError

    /// A listener that refuses every hold with `why`.
    public init(_ why: AuthenticationError) { self.why = why }

    public func hold() throws(DeviceHoldFailure) { throw .unavailable(why) }
    public func next(cancellation: CancellationFlag) -> DeviceEvent? { nil }
    public func handled() {}
    public func release() {}
}

/// A device backend that keywayd's composition offers the factors by name (fprintd's reader as "fprintd"): what
/// the factor's keeper asks it, and the listener for one armed authentication. Only keywayd ever holds one; it is
/// class-bound so the module's Embedded Swift build can still name the type.
public protocol DeviceBackend: AnyObject, Sendable {
    /// What the log and the audit trail call it ("fprintd").
    var name: String { get }
    /// Where it is, for keywayd's log at start ("on unix:path=/run/dbus/system_bus_socket").
    var place: String { get }
    /// Throws why it cannot serve now (keywayd's log at start; the policies fall back meanwhile).
    func check() throws(AuthenticationError)
    /// The listener for one armed authentication (`side.user`, waiting at most `side.limit`).
    func listener(_ side: FactorPlugin.DeviceSide) -> any DeviceListener
    /// The labels (fingers) enrolled at the device for `user` ([] when none), or why the device cannot tell; a
    /// backend that keeps no enrollments of its own throws.
    func labels(of user: String) throws(AuthenticationError) -> [String]
    /// Enrolls `label` for `side.user` at the device, telling the person each step through `progress`; `cancelled`
    /// is asked while the device waits, and true ends the enrollment (appCancel). Returns what the device made for
    /// the factor's keeper to keep (a security key's credential), or nothing when the device keeps the enrollment
    /// itself (fprintd's prints).
    func enroll(
        _ side: FactorPlugin.DeviceSide, label: String, progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) -> [UInt8]
}

extension DeviceBackend {
    public var place: String { "" }

    public func check() throws(AuthenticationError) {}

    public func labels(of user: String) throws(AuthenticationError) -> [String] {
        throw AuthenticationError(.factorNotAvailable, "\(name) keeps no enrollments of its own")
    }

    public func enroll(
        _ side: FactorPlugin.DeviceSide, label: String, progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) -> [UInt8] {
        throw AuthenticationError(.factorNotAvailable, "\(name) enrolls nothing")
    }
}

/// Who may have keywayd arm a presented factor's device for an authentication: a presentation proves only that
/// someone is at the device, so it may answer only authentications that person could be making.
public enum ArmingRule: Sendable, Equatable {
    /// The account's owner started it (sudo, a screen locker: the starter's uid is the account's), or root started
    /// it on a local seat (a console login, a greeter). Never `su OTHER` from someone else's session; unknown means
    /// no (docs/ARCHITECTURE.md §10, "The sensor answers only the person").
    case ownerOrLocalRoot
}

extension FactorPlugin {
    /// What keywayd needs to arm a presented factor's device: declared by the plugin, read by keywayd for every
    /// factor that has one, so keywayd names no factor (docs/ARCHITECTURE.md §14).
    public struct Arming: Sendable {
        /// The setting that says how long an authentication waits in line for the device, and how long a lease may
        /// keep it while another authentication waits.
        public var waitSetting: Setting
        /// Who may arm it.
        public var rule: ArmingRule
        /// The backends (by name) these settings choose, which keywayd's composition builds and offers.
        public var backends: @Sendable (FactorSettings) -> [String]
        /// The listener for one armed authentication.
        public var listener: @Sendable (DeviceSide) -> any DeviceListener
        /// True when the listener needs the user's stored enrollment (`DeviceSide.enrollment`: a security key is
        /// told which credentials to sign with); keywayd reads the store for it only then.
        public var readsEnrollment: Bool

        /// Declares the arming of a factor.
        public init(
            waitSetting: Setting, rule: ArmingRule = .ownerOrLocalRoot,
            backends: @escaping @Sendable (FactorSettings) -> [String] = { _ in [] }, readsEnrollment: Bool = false,
            listener: @escaping @Sendable (DeviceSide) -> any DeviceListener
        ) {
            self.waitSetting = waitSetting
            self.rule = rule
            self.backends = backends
            self.readsEnrollment = readsEnrollment
            self.listener = listener
        }
    }

    /// What a factor's device listener (or an enrollment at its device) is made from, in keywayd.
    public struct DeviceSide: Sendable {
        /// The factor's global settings.
        public var settings: FactorSettings
        /// Whose authentication it is.
        public var user: UserContext
        /// The longest one lease may wait.
        public var limit: Duration
        /// Where simulated devices take their events (keywayd's `--sensor`).
        public var controlDirectory: String
        /// The control directory unless keywayd is told another.
        public static var defaultControlDirectory: String { "/run/keyway/sensor" }
        /// The backends keywayd's composition built, by name.
        public var backends: [String: any DeviceBackend]
        /// The user's stored enrollment of the factor, if any (a key signs only for the credentials it is told of).
        public var enrollment: Enrollment?
        /// What the person typed for the device (a security key's PIN), for this arming or enrollment only.
        public var typed: Secret?

        /// Creates the inputs.
        public init(
            settings: FactorSettings, user: UserContext, limit: Duration,
            controlDirectory: String = DeviceSide.defaultControlDirectory, backends: [String: any DeviceBackend] = [:],
            enrollment: Enrollment? = nil, typed: Secret? = nil
        ) {
            self.typed = typed
            self.settings = settings
            self.user = user
            self.limit = limit
            self.controlDirectory = controlDirectory
            self.backends = backends
            self.enrollment = enrollment
        }
    }
}
