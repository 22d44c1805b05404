import CKeywayLibc
public import KeywayBiometricSimulator
public import KeywayCore

/// fprintd's reader, as keywayd uses it (`[biometric] backend = fprintd`, docs/ARCHITECTURE.md §18): keywayd is
/// fprintd's only client on the system bus. Each use opens its own private connection, so one stalled call holds up
/// nothing else, and a lease's device is claimed for exactly that lease.
public final class FprintdReader: EnrollingDevice {
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

    /// The connection and the default device's object path.
    func connect() throws(AuthenticationError) -> (DBusConnection, String) {
        let bus: DBusConnection
        do { bus = try DBusConnection.open(address: busAddress) } catch {
            throw failed(
                AuthenticationError(.biometryNotAvailable, "fprintd cannot be reached: the system bus: \(error)"))
        }
        let reply: [DBusValue]
        do {
            reply = try bus.call(
                Self.service, Self.managerPath, Self.managerInterface, "GetDefaultDevice", timeout: callTimeout)
        } catch {
            throw failed(Self.outcome(error, doing: "finding the reader"))
        }
        guard let path = reply.first?.text else {
            throw failed(AuthenticationError(.biometryNotAvailable, "fprintd named no default reader"))
        }
        return (bus, path)
    }

    public func labels(of user: String) throws(AuthenticationError) -> [String] {
        let (bus, device) = try connect()
        do {
            let reply = try bus.call(
                Self.service, device, Self.deviceInterface, "ListEnrolledFingers", [.string(user)],
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
    private var bus: DBusConnection?
    private var device = ""
    private var fprintdOwner = ""
    private var claimed = false
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
        let bus: DBusConnection
        do throws(AuthenticationError) {
            (bus, device) = try reader.connect()
            // fprintd leaving the bus (killed, restarted) ends the wait: its unique name is the one to watch.
            let owner = try call(
                bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetNameOwner",
                [.string(FprintdReader.service)], doing: "finding fprintd on the bus")
            fprintdOwner = owner.first?.text ?? ""
            guard !fprintdOwner.isEmpty else {
                throw reader.failed(AuthenticationError(.biometryNotAvailable, "fprintd has no name on the bus"))
            }
            try match(
                bus,
                "type='signal',sender='org.freedesktop.DBus',interface='org.freedesktop.DBus',"
                    + "member='NameOwnerChanged',arg0='\(FprintdReader.service)'")
            try match(
                bus,
                "type='signal',sender='\(fprintdOwner)',interface='\(FprintdReader.deviceInterface)',"
                    + "path='\(device)'")
        } catch {
            throw .unavailable(error)
        }
        self.bus = bus
        do {
            try bus.call(
                FprintdReader.service, device, FprintdReader.deviceInterface, "Claim", [.string(user)],
                timeout: reader.callTimeout)
        } catch {
            release()
            if error.name == "net.reactivated.Fprint.Error.AlreadyInUse" { throw .busy }
            throw .unavailable(reader.failed(FprintdReader.outcome(error, doing: "claiming the reader")))
        }
        claimed = true
        do throws(AuthenticationError) { try startVerify() } catch {
            release()
            throw .unavailable(error)
        }
    }

    private func call(
        _ bus: DBusConnection, _ destination: String, _ path: String, _ interface: String, _ method: String,
        _ arguments: [DBusValue] = [], doing what: String
    ) throws(AuthenticationError) -> [DBusValue] {
        do {
            return try bus.call(destination, path, interface, method, arguments, timeout: reader.callTimeout)
        } catch {
            throw reader.failed(FprintdReader.outcome(error, doing: what))
        }
    }

    private func match(_ bus: DBusConnection, _ rule: String) throws(AuthenticationError) {
        do { try bus.addMatch(rule) } catch {
            throw reader.failed(FprintdReader.outcome(error, doing: "watching the reader"))
        }
    }

    private func startVerify() throws(AuthenticationError) {
        guard let bus else { return }
        _ = try call(
            bus, FprintdReader.service, device, FprintdReader.deviceInterface, "VerifyStart", [.string("any")],
            doing: "starting a verification")
        started = true
        verifying = true
        restart = false
    }

    /// Stops the verification; the statuses it queued meanwhile are dropped, except fprintd leaving the bus.
    private func stopVerify() -> DeviceEvent? {
        guard let bus, started else { return nil }
        verifying = false
        started = false
        _ = try? bus.call(
            FprintdReader.service, device, FprintdReader.deviceInterface, "VerifyStop", timeout: reader.callTimeout)
        while case .signal(let signal) = bus.nextSignal(within: 0) {
            if let event = event(of: signal) { return event }
        }
        return nil
    }

    public func next(cancellation: CancellationFlag) -> DeviceEvent? {
        // A lease that wants no more must not start another verification: fprintd would verify a finger nobody
        // counts.
        guard let bus, !cancellation.isCancelled else { return nil }
        if restart {
            if let gone = stopVerify() { return gone }
            do throws(AuthenticationError) { try startVerify() } catch { return .ended(error) }
        }
        while !cancellation.isCancelled {
            switch bus.nextSignal(within: 100) {
            case .timedOut:
                continue
            case .disconnected:
                verifying = false
                started = false
                return .ended(AuthenticationError(.systemCancel, "the system bus closed while fprintd verified"))
            case .signal(let signal):
                if let event = event(of: signal) { return event }
            }
        }
        return nil
    }

    /// The event a signal means, or nil for one that changes nothing.
    private func event(of signal: DBusSignal) -> DeviceEvent? {
        if signal.member == "NameOwnerChanged", signal.sender == "org.freedesktop.DBus",
            signal.arguments.first?.text == FprintdReader.service
        {
            let newOwner = signal.arguments.count > 2 ? signal.arguments[2].text ?? "" : ""
            guard newOwner != fprintdOwner else { return nil }
            verifying = false
            started = false
            claimed = false
            return .ended(
                AuthenticationError(.biometryNotAvailable, "fprintd stopped while it verified (it left the bus)"))
        }
        guard verifying, signal.sender == fprintdOwner, signal.interface == FprintdReader.deviceInterface,
            signal.path == device, signal.member == "VerifyStatus", let result = signal.arguments.first?.text
        else { return nil }
        if case .boolean(true)? = signal.arguments.dropFirst().first {
            // This verification is over: nothing more of it is the person's until the next VerifyStart.
            restart = true
            verifying = false
        }
        switch result {
        case "verify-match":
            return .evidence(.readerVerdict(matched: true))
        case "verify-no-match":
            return .evidence(.readerVerdict(matched: false))
        case "verify-retry-scan":
            return .unusable("the reader could not read the finger; try again")
        case "verify-swipe-too-short":
            return .unusable("the swipe was too short; try again")
        case "verify-finger-not-centered":
            return .unusable("center your finger on the reader")
        case "verify-remove-and-retry":
            return .unusable("remove your finger and try again")
        case "verify-disconnected":
            return .ended(
                AuthenticationError(.biometryNotAvailable, "the reader was disconnected (verify-disconnected)"))
        default:
            return .ended(AuthenticationError(.biometryNotAvailable, "fprintd's verification failed (\(result))"))
        }
    }

    public func handled() {}

    public func release() {
        _ = stopVerify()
        if let bus, claimed {
            _ = try? bus.call(
                FprintdReader.service, device, FprintdReader.deviceInterface, "Release", timeout: reader.callTimeout)
        }
        claimed = false
        bus = nil
    }
}
