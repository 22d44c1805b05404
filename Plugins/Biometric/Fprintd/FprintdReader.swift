import CKeywayLibc
public import KeywayCore
public import KeywayDBus
import KeywayPlatform

/// fprintd's reader, as keywayd uses it (`[biometric] backend = fprintd`, docs/ARCHITECTURE.md §18): keywayd is
/// fprintd's only client on the system bus. Each use opens its own private connection, so one stalled call holds up
/// nothing else, and a lease's device is claimed for exactly that lease.
public final class FprintdReader: DeviceBackend {
    /// The bus fprintd is on (the system bus unless `keywayd --system-bus` says otherwise).
    public let busAddress: String
    /// How long one method call may take before it counts as fprintd not answering.
    public let callTimeout: Int32
    /// Where a failure of fprintd is logged (keywayd's log, rate-limited), with fprintd's error name.
    public let log: @Sendable (String) -> Void

    static let service = "net.reactivated.Fprint"
    static let managerPath = "/net/reactivated/Fprint/Manager"
    static let managerInterface = "net.reactivated.Fprint.Manager"
    static let deviceInterface = "net.reactivated.Fprint.Device"

    /// A reader on the bus at `busAddress`.
    public init(
        busAddress: String = DBusConnection.systemBusAddress, callTimeout: Int32 = 3000,
        log: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.busAddress = busAddress
        self.callTimeout = callTimeout
        self.log = log
    }

    public var name: String { "fprintd" }

    public var place: String { "on \(busAddress)" }

    /// Asks fprintd for root's fingers: whether the reader answers at all.
    public func check() throws(AuthenticationError) { _ = try labels(of: "root") }

    public func listener(_ side: FactorPlugin.DeviceSide) -> any DeviceListener {
        FprintdListener(reader: self, user: side.user.name)
    }

    /// A connection to fprintd: the bus, the default device's object path, and fprintd's unique name, to which
    /// every call goes and whose signals alone are believed.
    struct Link {
        let bus: DBusConnection
        let device: String
        let owner: String
    }

    /// Connects and finds fprintd: the unique name that owns `net.reactivated.Fprint`, believed only when its
    /// process is root's (fprintd runs as root): on a bus that lets any user own the name, a user's impostor would
    /// otherwise answer "verify-match" to anyone. Then the default device, asked of that unique name.
    func connect() throws(AuthenticationError) -> Link {
        let bus: DBusConnection
        do { bus = try DBusConnection.open(address: busAddress) } catch {
            throw failed(
                AuthenticationError(.biometryNotAvailable, "fprintd cannot be reached: the system bus: \(error)"))
        }
        let busName = "org.freedesktop.DBus"
        func ask(_ method: String, _ argument: String, doing what: String) throws(AuthenticationError) -> DBusValue? {
            do {
                return try bus.call(
                    busName, "/org/freedesktop/DBus", busName, method, [.string(argument)],
                    timeout: callTimeout
                ).first
            } catch {
                throw failed(Self.outcome(error, doing: what))
            }
        }
        guard let owner = try ask("GetNameOwner", Self.service, doing: "finding fprintd on the bus")?.text,
            !owner.isEmpty
        else {
            throw failed(AuthenticationError(.biometryNotAvailable, "fprintd has no name on the bus"))
        }
        guard case .uint32(let uid)? = try ask("GetConnectionUnixUser", owner, doing: "asking who runs fprintd")
        else {
            throw failed(AuthenticationError(.biometryNotAvailable, "the bus did not say who owns \(Self.service)"))
        }
        guard uid == 0 else {
            throw failed(
                AuthenticationError(
                    .biometryNotAvailable,
                    "\(Self.service) is owned by a process of uid \(uid), not root's: not fprintd, so not believed"))
        }
        let reply: [DBusValue]
        do {
            reply = try bus.call(
                owner, Self.managerPath, Self.managerInterface, "GetDefaultDevice", timeout: callTimeout)
        } catch {
            throw failed(Self.outcome(error, doing: "finding the reader"))
        }
        guard let path = reply.first?.text else {
            throw failed(AuthenticationError(.biometryNotAvailable, "fprintd named no default reader"))
        }
        return Link(bus: bus, device: path, owner: owner)
    }

    public func labels(of user: String) throws(AuthenticationError) -> [String] {
        let link = try connect()
        do {
            let reply = try link.bus.call(
                link.owner, link.device, Self.deviceInterface, "ListEnrolledFingers", [.string(user)],
                timeout: callTimeout)
            guard case .array(let names)? = reply.first else { return [] }
            return names.compactMap { $0.text }.sorted()
        } catch {
            if error.name == "net.reactivated.Fprint.Error.NoEnrolledPrints" { return [] }
            throw failed(Self.outcome(error, doing: "listing \(user.escapingControlCharacters)'s fingers"))
        }
    }

    /// Logs `error` and returns it.
    func failed(_ error: AuthenticationError) -> AuthenticationError {
        log("biometric: \(error.reason)")
        return error
    }

    /// LocalAuthentication's outcome for a D-Bus failure, naming fprintd's error (the log line keywayd writes).
    static func outcome(_ error: DBusFailure, doing what: String) -> AuthenticationError {
        if error.isServiceGone {
            return AuthenticationError(.biometryNotAvailable, "fprintd is not running (\(what): \(error.name))")
        }
        switch error.name {
        case "org.freedesktop.DBus.Error.NoReply", "org.freedesktop.DBus.Error.Timeout":
            return AuthenticationError(.biometryNotAvailable, "fprintd did not answer (\(what): \(error))")
        case "net.reactivated.Fprint.Error.NoSuchDevice":
            return AuthenticationError(.biometryNotAvailable, "fprintd has no reader (\(what): \(error))")
        case "net.reactivated.Fprint.Error.NoEnrolledPrints":
            return AuthenticationError(.biometryNotEnrolled, "no finger is enrolled at the reader (\(error.name))")
        default:
            return AuthenticationError(.biometryNotAvailable, "fprintd failed \(what): \(error)")
        }
    }
}

/// keywayd's wait at fprintd's reader for one lease: Claim for the user, VerifyStart("any"), each VerifyStatus
/// signal turned into a `DeviceEvent`, VerifyStop and Release at the end. A match or no-match is evidence the vault
/// counts in the attempt gate; a scan the reader could not use is not counted; fprintd leaving the bus mid-verify
/// ends the wait (biometryNotAvailable, so the policy's fallback runs) with nothing counted. Only fprintd's own
/// signals count: any peer on the system bus may emit a signal on fprintd's paths, so the sender is checked against
/// the unique name fprintd had when the device was claimed; and a status after keywayd stopped the verify (fprintd
/// answers VerifyStop with a no-match) is not the person's.
public final class FprintdListener: DeviceListener {
    private let reader: FprintdReader
    private let user: String
    private var session: FprintdSession?
    /// A verification is running: its statuses are the person's.
    private var verifying = false
    /// VerifyStart was called and VerifyStop not yet.
    private var started = false
    /// The last verify finished (a status with done): the next wait starts another.
    private var restart = false

    /// A listener for `user` at `reader`.
    public init(reader: FprintdReader, user: String) {
        self.reader = reader
        self.user = user
    }

    public func hold() throws(DeviceHoldFailure) {
        let session = try FprintdSession(reader, user: user)
        self.session = session
        do throws(AuthenticationError) { try startVerify() } catch {
            release()
            throw .unavailable(error)
        }
    }

    private func startVerify() throws(AuthenticationError) {
        guard let session else { return }
        _ = try session.call("VerifyStart", [.string("any")], doing: "starting a verification")
        started = true
        verifying = true
        restart = false
    }

    /// Stops the verification; the statuses it queued meanwhile are dropped, except fprintd leaving the bus.
    private func stopVerify() -> DeviceEvent? {
        guard let session, started else { return nil }
        verifying = false
        started = false
        session.callIgnoringErrors("VerifyStop")
        while true {
            switch session.next(within: 0) {
            case .status: continue
            case .quiet: return nil
            case .gone(let why): return .ended(why)
            }
        }
    }

    public func next(cancellation: CancellationFlag) -> DeviceEvent? {
        // A lease that wants no more must not start another verification: fprintd would verify a finger nobody
        // counts.
        guard let session, !cancellation.isCancelled else { return nil }
        if restart {
            if let gone = stopVerify() { return gone }
            do throws(AuthenticationError) { try startVerify() } catch { return .ended(error) }
        }
        while !cancellation.isCancelled {
            switch session.next(within: 100) {
            case .quiet:
                continue
            case .gone(let why):
                verifying = false
                started = false
                return .ended(why)
            case .status(let member, let result, let done):
                guard verifying, member == "VerifyStatus" else { continue }
                if done {
                    // This verification is over: nothing more of it is the person's until the next VerifyStart.
                    restart = true
                    verifying = false
                }
                return Self.event(of: result)
            }
        }
        return nil
    }

    /// The event a VerifyStatus result means.
    static func event(of result: String) -> DeviceEvent {
        switch result {
        case "verify-match":
            return .evidence(.device([1]))  // the verdict's form: one byte, 1 for a match (BiometricKeeper)
        case "verify-no-match":
            return .evidence(.device([0]))
        case "verify-disconnected":
            return .ended(
                AuthenticationError(.biometryNotAvailable, "the reader was disconnected (verify-disconnected)"))
        default:
            if let retry = FprintdSession.retryReason(result) { return .unusable(retry) }
            return .ended(AuthenticationError(.biometryNotAvailable, "fprintd's verification failed (\(result))"))
        }
    }

    public func handled() {}

    /// The verification stops before the machine sleeps; the claim is kept until `release` after the resume. fprintd
    /// suspends its readers on the same signal, and a Release while it does fails ("still busy with another
    /// operation") and leaves the reader open inside fprintd, so every later Claim fails until fprintd restarts
    /// (docs/ARCHITECTURE.md §14, "Sleep").
    public func sleeping() { _ = stopVerify() }

    public func release() {
        _ = stopVerify()
        session?.release()
        session = nil
    }
}

extension FprintdReader {
    /// Enrolls `finger` for `user` at the reader (`keyway enroll biometric` with `backend = fprintd`): Claim,
    /// EnrollStart, each EnrollStatus told through `progress` ("Place your finger on the reader (2 of 5)", "center
    /// your finger on the reader"), EnrollStop and Release. `cancelled` is asked every 100 ms: keywayd's client gone,
    /// or the enrollment's time up. Only fprintd's own signals count, as for a verification.
    public func enroll(
        _ side: FactorPlugin.DeviceSide, label finger: String, progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) -> [UInt8] {
        let user = side.user.name
        let session: FprintdSession
        do throws(DeviceHoldFailure) { session = try FprintdSession(self, user: user) } catch {
            switch error {
            case .busy: throw AuthenticationError(.factorNotAvailable, "the reader is in use by another authentication")
            case .unavailable(let why): throw why
            }
        }
        defer { session.release() }
        let stages = Int(session.integerProperty("num-enroll-stages") ?? 0)
        let touch =
            session.textProperty("scan-type") == "swipe"
            ? "Swipe your finger across the reader" : "Place your finger on the reader"
        func step(_ number: Int) -> String { stages > 0 ? "\(touch) (\(number) of \(stages))" : touch }
        _ = try session.call("EnrollStart", [.string(finger)], doing: "starting an enrollment")
        defer { session.callIgnoringErrors("EnrollStop") }
        var passed = 0
        progress(step(1))
        while !cancelled() {
            switch session.next(within: 100) {
            case .quiet:
                continue
            case .gone(let why):
                throw failed(why)
            case .status(let member, let result, _):
                guard member == "EnrollStatus" else { continue }
                switch result {
                case "enroll-completed":
                    return []  // fprintd keeps the print
                case "enroll-stage-passed":
                    passed += 1
                    progress(step(passed + 1))
                case "enroll-duplicate":
                    throw AuthenticationError(
                        .enrollmentRefused, "that finger is already enrolled at the reader (enroll-duplicate)")
                case "enroll-data-full":
                    throw AuthenticationError(
                        .enrollmentRefused, "the reader has no room for another finger (enroll-data-full)")
                case "enroll-disconnected":
                    throw failed(
                        AuthenticationError(.biometryNotAvailable, "the reader was disconnected (enroll-disconnected)"))
                default:
                    if let retry = FprintdSession.retryReason(result) {
                        progress(retry)
                        continue
                    }
                    throw failed(
                        AuthenticationError(.authenticationFailed, "fprintd could not enroll the finger (\(result))"))
                }
            }
        }
        throw AuthenticationError(
            .appCancel, "the enrollment stopped: its client went away, or it took longer than keywayd allows")
    }
}

/// One claim of fprintd's default reader for one user, on a private bus connection of its own: the device's path,
/// and the unique name fprintd had when it was claimed, whose signals alone are believed (docs/ARCHITECTURE.md §18).
/// The wait at the reader and an enrollment each hold one; closing the connection releases the claim in any case.
final class FprintdSession {
    private let reader: FprintdReader
    private let bus: DBusConnection
    private let device: String
    private let owner: String
    private var claimed = false

    /// What waiting on the session found.
    enum Next {
        /// One of fprintd's device signals: its name, its result, and whether the operation is over.
        case status(String, result: String, done: Bool)
        /// fprintd left the bus, or the bus closed: nothing more will come.
        case gone(AuthenticationError)
        /// Nothing within the wait.
        case quiet
    }

    /// Connects, finds the reader and claims it for `user`: busy when another client has it.
    init(_ reader: FprintdReader, user: String) throws(DeviceHoldFailure) {
        self.reader = reader
        do throws(AuthenticationError) {
            let link = try reader.connect()
            (bus, device, owner) = (link.bus, link.device, link.owner)
            // fprintd leaving the bus (killed, restarted) ends the wait: its unique name is the one to watch.
            for rule in [
                "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                    + "member='NameOwnerChanged',arg0='\(FprintdReader.service)'",
                "type='signal',sender='\(owner)',interface='\(FprintdReader.deviceInterface)',path='\(device)'",
            ] {
                do { try bus.addMatch(rule) } catch {
                    throw reader.failed(FprintdReader.outcome(error, doing: "watching the reader"))
                }
            }
        } catch {
            throw .unavailable(error)
        }
        do {
            try bus.call(
                owner, device, FprintdReader.deviceInterface, "Claim", [.string(user)],
                timeout: reader.callTimeout)
        } catch {
            if error.name == "net.reactivated.Fprint.Error.AlreadyInUse" { throw .busy }
            throw .unavailable(reader.failed(FprintdReader.outcome(error, doing: "claiming the reader")))
        }
        claimed = true
    }

    private static func call(
        _ reader: FprintdReader, _ bus: DBusConnection, _ destination: String, _ path: String, _ interface: String,
        _ method: String, _ arguments: [DBusValue] = [], doing what: String
    ) throws(AuthenticationError) -> [DBusValue] {
        do {
            return try bus.call(destination, path, interface, method, arguments, timeout: reader.callTimeout)
        } catch {
            throw reader.failed(FprintdReader.outcome(error, doing: what))
        }
    }

    /// Calls one of the device's methods.
    func call(_ method: String, _ arguments: [DBusValue] = [], doing what: String) throws(AuthenticationError)
        -> [DBusValue]
    {
        try Self.call(
            reader, bus, owner, device, FprintdReader.deviceInterface, method, arguments, doing: what)
    }

    /// Calls one of the device's methods whose failure changes nothing (VerifyStop, EnrollStop, Release).
    func callIgnoringErrors(_ method: String) {
        _ = try? bus.call(owner, device, FprintdReader.deviceInterface, method, timeout: reader.callTimeout)
    }

    private func property(_ name: String) -> DBusValue? {
        let reply = try? bus.call(
            owner, device, "org.freedesktop.DBus.Properties", "Get",
            [.string(FprintdReader.deviceInterface), .string(name)], timeout: reader.callTimeout)
        return reply?.first
    }

    /// A whole-number property of the device (`num-enroll-stages`), or nil.
    func integerProperty(_ name: String) -> Int32? {
        switch property(name) {
        case .int32(let value)?: value
        case .uint32(let value)?: Int32(clamping: value)
        default: nil
        }
    }

    /// A text property of the device (`scan-type`: "press" or "swipe"), or nil.
    func textProperty(_ name: String) -> String? { property(name)?.text }

    /// Waits up to `milliseconds` for fprintd's next signal on the device, or its leaving. The wait ends then however
    /// many other messages arrive meanwhile: any peer may send signals straight to this connection (a unicast
    /// signal passes no match rule), and each one skipped must not start the wait again, or a flood of them would
    /// keep the caller from ever looking at its cancellation (docs/ARCHITECTURE.md §18).
    func next(within milliseconds: Int32) -> Next {
        let deadline = MonotonicClock.milliseconds() + Int64(milliseconds)
        while true {
            let left = Int32(clamping: max(0, deadline - MonotonicClock.milliseconds()))
            let signal: DBusSignal
            switch bus.nextSignal(within: left) {
            case .timedOut: return .quiet
            case .disconnected:
                return .gone(AuthenticationError(.systemCancel, "the system bus closed while fprintd had the reader"))
            case .signal(let received): signal = received
            }
            if signal.member == "NameOwnerChanged", signal.sender == "org.freedesktop.DBus",
                signal.arguments.first?.text == FprintdReader.service
            {
                let newOwner = signal.arguments.count > 2 ? signal.arguments[2].text ?? "" : ""
                guard newOwner != owner else { continue }
                claimed = false
                return .gone(
                    AuthenticationError(
                        .biometryNotAvailable, "fprintd stopped while it had the reader (it left the bus)"))
            }
            // Any peer may emit a signal on fprintd's path: only the claimed fprintd's own count.
            guard signal.sender == owner, signal.interface == FprintdReader.deviceInterface, signal.path == device,
                let result = signal.arguments.first?.text
            else {
                if left == 0 { return .quiet }
                continue
            }
            var done = false
            if case .boolean(true)? = signal.arguments.dropFirst().first { done = true }
            return .status(signal.member, result: result, done: done)
        }
    }

    /// What to tell the person for a scan the reader could not use (not counted), or nil for another result.
    static func retryReason(_ result: String) -> String? {
        switch result {
        case "verify-retry-scan", "enroll-retry-scan": "the reader could not read the finger; try again"
        case "verify-swipe-too-short", "enroll-swipe-too-short": "the swipe was too short; try again"
        case "verify-finger-not-centered", "enroll-finger-not-centered": "center your finger on the reader"
        case "verify-remove-and-retry", "enroll-remove-and-retry": "remove your finger and try again"
        default: nil
        }
    }

    /// Gives the reader back (Release); closing the connection would too.
    func release() {
        if claimed { callIgnoringErrors("Release") }
        claimed = false
    }
}
