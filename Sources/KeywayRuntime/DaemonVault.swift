import CKeywayLibc
public import KeywayCore
import KeywayPlatform
public import KeywayWire
import Synchronization

/// The vault as keywayd keeps it: every call is one request on a fresh connection to its socket, so this process
/// never holds a lock or a connection between calls, and stopping it stalls nobody (docs/ARCHITECTURE.md §10).
/// An unreachable or busy daemon is `.serviceUnavailable`; nothing is counted then.
public final class DaemonVault: Vault {
    /// The default socket.
    public static let defaultSocket = "/run/keyway/keywayd.sock"

    /// Where keywayd listens.
    public let socketPath: String
    /// The tool named in the audit trail ("keyway enroll", "pam_keyway sudo").
    public let via: String
    /// How long one request may take, queueing for the slow hash included.
    public let timeoutMilliseconds: Int64
    /// Where keywayd leaves its availability notes, when this client reads them (the module does; beside the
    /// socket): a factor a note lists is available without asking (docs/ARCHITECTURE.md §10, "Notes").
    public let notesDirectory: String?
    /// What the connections so far found: whether one reached a listener, and whether one found none.
    private let reached = Mutex<(listening: Bool, absent: Bool)>((false, false))

    /// True when every connection this client tried found keywayd not running: no socket at its path, or nobody
    /// listening on it (ENOENT, ECONNREFUSED). Never once one connected: busy, slow, stopped (SIGSTOP) and wrong
    /// answers are not "not running", and a full queue of connections is EAGAIN (`failmode = safe`).
    public var foundNotRunning: Bool { reached.withLock { !$0.listening && $0.absent } }

    /// Creates a client of the daemon at `socketPath`; with `readsNotes`, one that reads keywayd's notes beside it.
    public init(
        socketPath: String = defaultSocket, via: String, timeoutMilliseconds: Int64 = 60_000, readsNotes: Bool = false
    ) {
        self.socketPath = socketPath
        self.via = via
        self.timeoutMilliseconds = timeoutMilliseconds
        notesDirectory = readsNotes ? AvailabilityNote.directory(besideSocket: socketPath) : nil
    }

    /// keywayd's note about `user`, or nil: no note, a note root alone could not have written (the directory and the
    /// file must be root's and writable by nobody else), a malformed one, one about someone else, or no keywayd
    /// socket (a note outlives a stopped keywayd, which would then only be found after the person typed). Only a
    /// root process can read the notes; any other asks.
    func note(about user: String) -> AvailabilityNote? {
        guard let notesDirectory, geteuid() == 0, let name = AvailabilityNote.fileName(for: user) else { return nil }
        var socket = stat()
        guard stat(socketPath, &socket) == 0, socket.st_mode & 0o170000 == 0o140000 else { return nil }
        let dir = keyway_open(notesDirectory, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0)
        guard dir >= 0 else { return nil }
        defer { close(dir) }
        guard case .success = TrustedFile.rootOnly(.directory).check(descriptor: dir),
            case .read(let bytes) = TrustedFile.rootOnly(.regularFile).read(
                name, at: dir, limit: AvailabilityNote.maximumSize),
            let note = try? AvailabilityNote(decoding: bytes), Array(note.user.utf8) == Array(user.utf8)
        else { return nil }
        return note
    }

    /// Sends one request and reads its answer; a failure answer is thrown.
    public func ask(_ request: Request) throws(AuthenticationError) -> Response {
        let (response, fd) = try exchange(request)
        close(fd)
        return response
    }

    /// Sends one request and reads its answer, leaving the connection open (the caller closes it); a failure
    /// answer is thrown, and its connection closed.
    private func exchange(_ request: Request, patient: Bool = false) throws(AuthenticationError) -> (Response, Int32) {
        func unavailable(_ failure: UnixSocket.Failure) -> AuthenticationError {
            AuthenticationError(.serviceUnavailable, "keywayd at \(socketPath): \(failure)")
        }
        let fd: Int32
        switch UnixSocket.connect(to: socketPath) {
        case .success(let connected):
            fd = connected
            reached.withLock { $0.listening = true }
        case .failure(let failure):
            if failure.errno == ENOENT || failure.errno == ECONNREFUSED { reached.withLock { $0.absent = true } }
            throw unavailable(failure)
        }
        var keep = false
        defer { if !keep { close(fd) } }
        // Only root's keywayd is trusted with a secret: a socket some user planted at the path is not it.
        guard let server = UnixSocket.peer(of: fd), server.uid == 0 else {
            throw AuthenticationError(
                .serviceUnavailable, "keywayd at \(socketPath): the process listening there is not root's")
        }
        // A place in the sensor's line is kept for at most the sensor's timeout (at most 10 minutes), by keywayd.
        let deadline = MonotonicClock.milliseconds() + timeoutMilliseconds + (patient ? 600_000 : 0)
        var body = request.encoded
        var frame = WireWriter.frame(body)
        let sent = UnixSocket.send(frame, to: fd, until: deadline)
        body.withUnsafeMutableBytes { secureZero($0) }
        frame.withUnsafeMutableBytes { secureZero($0) }
        if case .failure(let failure) = sent { throw unavailable(failure) }
        let response = try receive(from: fd, until: deadline)
        keep = true
        return (response, fd)
    }

    /// Reads the next answer on `fd`; a failure answer is thrown.
    private func receive(from fd: Int32, until deadline: Int64) throws(AuthenticationError) -> Response {
        let answer: [UInt8]
        switch UnixSocket.receiveFrame(from: fd, limit: Wire.maximumResponse, until: deadline) {
        case .success(let bytes): answer = bytes
        case .failure(let failure):
            throw AuthenticationError(.serviceUnavailable, "keywayd at \(socketPath): \(failure)")
        }
        let response: Response
        do { response = try Response(decoding: answer) } catch {
            throw AuthenticationError(.serviceUnavailable, "keywayd at \(socketPath) answered badly: \(error)")
        }
        if case .failure(let error) = response { throw error }
        return response
    }

    /// keywayd enrolls at its device (fprintd's reader) and sends each step, then `.done`; this waits as long as
    /// keywayd lets the enrollment take (it ends it after 2 minutes), telling each step through `progress`.
    public func enrollAtDevice(
        _ factor: FactorKind, for user: String, label: String?, by actor: String, typed: Secret?,
        progress: (String) -> Void, cancelled: () -> Bool
    ) throws(AuthenticationError) {
        var (response, fd) = try exchange(
            .enrollAtDevice(factor, user: user, label: label, via: actor, typed: typed), patient: true)
        defer { close(fd) }
        let deadline = MonotonicClock.milliseconds() + timeoutMilliseconds + 600_000
        while case .progress(let step) = response {
            progress(step)
            response = try receive(from: fd, until: deadline)
        }
        guard response == .done else { throw unexpected(response, "enroll at the device") }
    }

    private func unexpected(_ response: Response, _ request: String) -> AuthenticationError {
        AuthenticationError(.internalFailure, "keywayd answered \(request) with \(response)")
    }

    public func availability(of factor: FactorKind, for user: UserContext) -> Availability {
        if let note = note(about: user.name), note.lists(factor, concealing: user.concealsEnrollment) {
            return .available
        }
        do {
            let response = try ask(.availability(factor, user))
            guard case .availability(let availability) = response else {
                return .failed(unexpected(response, "availability"))
            }
            return availability
        } catch {
            return .failed(error)
        }
    }

    public func verify(_ evidence: Evidence, of factor: FactorKind, for user: UserContext) throws(AuthenticationError)
        -> Verdict
    {
        let response = try ask(.verify(factor, user, evidence))
        guard case .verdict(let verdict) = response else { throw unexpected(response, "verify") }
        return verdict
    }

    public func enroll(_ evidence: Evidence, of factor: FactorKind, for user: String, label: String?, by actor: String)
        throws(AuthenticationError)
    {
        let response = try ask(.enroll(factor, user: user, label: label, evidence, via: actor))
        guard response == .done else { throw unexpected(response, "enroll") }
    }

    public func offer(_ factor: FactorKind, for user: String, by actor: String) throws(AuthenticationError) -> [UInt8] {
        let response = try ask(.offer(factor, user: user, via: actor))
        guard case .offered(let secret) = response else { throw unexpected(response, "offer") }
        return secret
    }

    public func change(_ current: Secret, to new: Secret, of factor: FactorKind, for user: String, by actor: String)
        throws(AuthenticationError)
    {
        let response = try ask(.change(factor, user: user, current: current, new: new, via: actor))
        guard response == .done else { throw unexpected(response, "change") }
    }

    public func remove(_ factor: FactorKind, of user: String, label: String?, by actor: String)
        throws(AuthenticationError) -> Bool
    {
        let response = try ask(.remove(factor, user: user, label: label, via: actor))
        guard case .removed(let removed) = response else { throw unexpected(response, "remove") }
        return removed
    }

    public func status(of user: String?) throws(AuthenticationError) -> [UserStatus] {
        let response = try ask(.status(user: user))
        guard case .status(let users) = response else { throw unexpected(response, "status") }
        return users
    }

    public func reset(_ factor: FactorKind?, of user: String, by actor: String) throws(AuthenticationError) {
        let response = try ask(.reset(factor, user: user, via: actor))
        guard response == .done else { throw unexpected(response, "reset") }
    }

    public func audit(of user: String?) throws(AuthenticationError) -> [AuditEntry] {
        let response = try ask(.audit(user: user))
        guard case .audit(let entries) = response else { throw unexpected(response, "audit") }
        return entries
    }

    public func set(_ key: String, to value: Bool, of user: String, by actor: String) throws(AuthenticationError) {
        let response = try ask(.set(key: key, user: user, value: value, via: actor))
        guard response == .done else { throw unexpected(response, "set") }
    }
}

extension DaemonVault {
    /// keywayd waits at the devices: the sensor's sequential wait is an arming too (docs/ARCHITECTURE.md §14).
    public var waitsAtDevices: Bool { true }

    /// Arms the factor at keywayd, which listens at the device for as long as the returned factor keeps its
    /// connection open (docs/ARCHITECTURE.md §14).
    public func arm(_ factor: FactorKind, for user: UserContext, attempts: Int, waits: Bool, typed: Secret?)
        throws(AuthenticationError) -> any ArmedFactor
    {
        // Waiting in line may take up to the sensor's timeout: the answer's deadline is keywayd's, not ours.
        let (response, fd) = try exchange(
            .arm(factor, user, attempts: attempts, waits: waits, typed: typed), patient: waits)
        guard case .armed(let nonce) = response else {
            close(fd)
            throw AuthenticationError(.internalFailure, "keywayd answered arm with \(response)")
        }
        return DaemonArmedFactor(vault: self, factor: factor, user: user, nonce: nonce, connection: fd)
    }
}

/// A factor keywayd holds armed for this authentication: the open connection is the lease (closing it, or dying,
/// releases the device), and each claim names the nonce keywayd gave.
final class DaemonArmedFactor: ArmedFactor {
    let vault: DaemonVault
    let factor: FactorKind
    let user: UserContext
    let nonce: [UInt8]
    private var connection: Int32?

    init(vault: DaemonVault, factor: FactorKind, user: UserContext, nonce: [UInt8], connection: Int32) {
        self.vault = vault
        self.factor = factor
        self.user = user
        self.nonce = nonce
        self.connection = connection
    }

    deinit { release() }

    var wakeDescriptor: Int32? { connection }

    /// keywayd restores a terminal deposited on the arming connection when it closes first (`TerminalCustody`).
    var keepsTerminalSettings: Bool { true }

    func collect() throws(AuthenticationError) -> [Verdict] {
        if let connection {
            // The wake bytes keywayd wrote for each touch: read, so the descriptor waits for the next one.
            var bytes = [UInt8](repeating: 0, count: 64)
            while recv(connection, &bytes, bytes.count, Int32(MSG_DONTWAIT)) > 0 {}
        }
        let response = try vault.ask(.claim(factor, user, nonce: nonce))
        guard case .verdicts(let verdicts) = response else {
            throw AuthenticationError(.internalFailure, "keywayd answered claim with \(response)")
        }
        return verdicts
    }

    func awaitPresentation(milliseconds: Int32) -> ArmedWait {
        guard let connection else { return .ended }
        var entry = pollfd(fd: connection, events: Int16(POLLIN), revents: 0)
        if poll(&entry, 1, milliseconds) == 0 { return .quiet }
        return entry.revents & Int16(POLLHUP | POLLERR) != 0 ? .ended : .presented
    }

    func release() {
        if let connection { close(connection) }
        connection = nil
    }
}
