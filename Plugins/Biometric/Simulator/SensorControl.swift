import CKeywayLibc
import KeywayCore
import KeywayPlatform

/// The simulated sensor reachable from other processes: while an authentication waits, it listens on a root-only
/// Unix socket for one-line commands, in the spirit of libfprint's virtual_device. `keyway sensor …` speaks it.
///
/// Protocol (one line in, one line out): `present USER FINGER`, `stranger`, `retry REASON`, `cancel`, `fallback`,
/// `unplug`, `plug`, `error REASON`; the answer is `ok` or `error WHY`.
public enum SensorControl {
    /// Where the socket and the unplugged flag live by default.
    public static var defaultDirectory: String { FactorPlugin.DeviceSide.defaultControlDirectory }

    /// The socket in `directory`.
    public static func socketPath(in directory: String) -> String { directory + "/sensor.sock" }

    /// The flag file whose presence means the sensor is unplugged.
    public static func unpluggedFlag(in directory: String) -> String { directory + "/sensor-unplugged" }

    /// The commands `parse` accepts, for usage text.
    public static let commandSummary =
        "present USER FINGER | stranger | retry REASON | cancel | fallback | unplug | plug | error REASON"

    /// The commands' first words, for completion.
    public static let verbs = ["present", "stranger", "retry", "cancel", "fallback", "unplug", "plug", "error"]

    /// Parses a command line into an event, or says why not.
    public static func parse(_ line: Substring) -> Result<SensorEvent, SensorControlError> {
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        guard let verb = words.first else { return .failure(SensorControlError("empty command")) }
        let rest = words.dropFirst().joined(separator: " ")
        switch (verb, words.count) {
        case ("present", 3): return .success(.present(user: String(words[1]), finger: String(words[2])))
        case ("stranger", 1): return .success(.presentStranger)
        case ("retry", _): return .success(.retry(rest.isEmpty ? "Try again." : rest))
        case ("cancel", 1): return .success(.cancel)
        case ("fallback", 1): return .success(.fallback)
        case ("unplug", 1): return .success(.unplug)
        case ("plug", 1): return .success(.plug)
        case ("error", _): return .success(.failure(rest.isEmpty ? "sensor error" : rest))
        default:
            return .failure(
                SensorControlError(
                    "unknown command '\(verb)' with \(words.count - 1) arguments; expected \(commandSummary)"))
        }
    }

    /// The command line for an event.
    public static func line(for event: SensorEvent) -> String {
        switch event {
        case .present(let user, let finger): "present \(user) \(finger)"
        case .presentStranger: "stranger"
        case .retry(let reason): "retry \(reason)"
        case .cancel: "cancel"
        case .fallback: "fallback"
        case .unplug: "unplug"
        case .plug: "plug"
        case .failure(let reason): "error \(reason)"
        }
    }

    /// Sends `event` to the authentication waiting at the sensor, retrying for up to `wait` while none is waiting.
    /// `unplug` and `plug` also set or clear the persistent flag, so they work when nobody waits.
    public static func send(_ event: SensorEvent, directory: String = defaultDirectory, wait: Duration = .zero)
        -> Result<Void, SensorControlError>
    {
        if event == .unplug || event == .plug {
            if case .failure(let error) = setPluggedIn(event == .plug, directory: directory) { return .failure(error) }
        }
        let deadline = MonotonicClock.milliseconds() + wait.milliseconds
        while true {
            switch exchange(SensorControl.line(for: event), path: socketPath(in: directory)) {
            case .success(let reply) where reply == "ok":
                return .success(())
            case .success(let reply):
                return .failure(SensorControlError(reply.hasPrefix("error ") ? String(reply.dropFirst(6)) : reply))
            case .failure(let failure):
                if event == .unplug || event == .plug { return .success(()) }  // the flag is enough
                // Only a command nobody took is sent again: one that was written may have been acted on, and a
                // touch delivered twice would reach the next authentication.
                guard !failure.delivered, MonotonicClock.milliseconds() < deadline else {
                    return .failure(failure.error)
                }
                usleep(50_000)
            }
        }
    }

    /// Sets or clears the persistent unplugged flag: the one place that knows how the plug state is kept.
    static func setPluggedIn(_ pluggedIn: Bool, directory: String) -> Result<Void, SensorControlError> {
        let flag = unpluggedFlag(in: directory)
        if pluggedIn {
            unlink(flag)
            return .success(())
        }
        if case .failure(let error) = makeDirectory(directory) { return .failure(error) }
        let descriptor = keyway_open(flag, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return .failure(SensorControlError("cannot write \(flag): \(errnoText())")) }
        close(descriptor)
        return .success(())
    }

    /// Creates the control directory (0700) and, when missing, its parent (0755: `/run/keyway` also holds keywayd's
    /// socket, which every user must reach).
    static func makeDirectory(_ directory: String) -> Result<Void, SensorControlError> {
        if let slash = directory.lastIndex(of: "/"), slash != directory.startIndex {
            mkdir(String(directory[..<slash]), 0o755)  // an existing parent is kept as it is
        }
        if mkdir(directory, 0o700) != 0 && keyway_errno() != EEXIST {
            return .failure(SensorControlError("cannot create \(directory): \(errnoText())"))
        }
        return .success(())
    }

    /// The answer to a command that reached the socket as its wait ended: nothing was done with it, so it may be
    /// sent again, like a command that found no socket.
    static let notTaken = "not taken"

    /// Why an exchange failed, and whether the command may have been acted on.
    private struct ExchangeFailure: Error {
        let error: SensorControlError
        let delivered: Bool
        init(_ description: String, delivered: Bool = false) {
            error = SensorControlError(description)
            self.delivered = delivered
        }
    }

    /// Connects, writes one line, reads one line.
    private static func exchange(_ line: String, path: String) -> Result<String, ExchangeFailure> {
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return .failure(ExchangeFailure("socket: \(errnoText())")) }
        defer { close(descriptor) }
        var address = unixAddress(path)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard connected == 0 else {
            let reason = keyway_errno()
            if reason == EACCES || reason == EPERM {
                // The control directory is root's (0700): the simulated sensor is driven as root, like the hardware
                // it stands for, whether or not an authentication waits.
                return .failure(
                    ExchangeFailure(
                        "only root may drive the simulated sensor (\(path): \(errnoText())); run the command as root"))
            }
            return .failure(ExchangeFailure("no authentication is waiting at the sensor (\(path): \(errnoText()))"))
        }
        reply(descriptor, line)
        guard let reply = readLine(descriptor, until: MonotonicClock.milliseconds() + 5000) else {
            return .failure(ExchangeFailure("no reply from the sensor", delivered: true))
        }
        if reply == notTaken {
            return .failure(ExchangeFailure("no authentication is waiting at the sensor (\(path): its wait ended)"))
        }
        return .success(reply)
    }

    static func unixAddress(_ path: String) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            let bytes = Array(path.utf8.prefix(buffer.count - 1))
            buffer.copyBytes(from: bytes)
            buffer[bytes.count] = 0
        }
        return address
    }

    /// Writes one line; `MSG_NOSIGNAL`, so a peer that went away cannot kill us with SIGPIPE (inside login or su).
    static func reply(_ descriptor: Int32, _ text: String) {
        _ = (text + "\n").withCString { CKeywayLibc.send(descriptor, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    }

    /// Reads up to a newline (at most 512 bytes), giving up at `until` (monotonic milliseconds).
    static func readLine(_ descriptor: Int32, until: Int64) -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while bytes.count < 512 {
            let left = until - MonotonicClock.milliseconds()
            guard left > 0 else { break }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, Int32(min(left, 1000))) > 0 else { continue }
            let count = read(descriptor, &byte, 1)
            if count <= 0 { break }
            if byte == UInt8(ascii: "\n") { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self)
    }

    static func errnoText() -> String { String(cString: strerror(keyway_errno())) }
}

/// Why a sensor command failed.
public struct SensorControlError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The explanation.
    public var description: String
    /// True when another authentication holds the sensor.
    public var isBusy: Bool
    /// Creates an explanation.
    public init(_ description: String, isBusy: Bool = false) {
        self.description = description
        self.isBusy = isBusy
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
