import Glibc
import KeywayDBus
import KeywayDaemon
import KeywayPlatform

/// keywayd follows the machine's sleep (docs/ARCHITECTURE.md §14, "Sleep"): a delay inhibitor from logind while
/// awake; at `PrepareForSleep(true)` the leases give their devices back (fprintd's reader released, a security key's
/// wait ended) and then the inhibitor is closed, so the machine sleeps with no device held; at `PrepareForSleep(false)`
/// the leases take their devices again and a new inhibitor is taken. Only logind's own signals count: the sender must
/// be the unique name that owns `org.freedesktop.login1` and whose process is root's, so a user's program on the bus
/// cannot make keywayd let go of the readers.
enum SleepWatch {
    static let logind = "org.freedesktop.login1"
    static let path = "/org/freedesktop/login1"
    static let manager = "org.freedesktop.login1.Manager"
    static let busName = "org.freedesktop.DBus"
    /// How long keywayd lets the leases give their devices back before it lets the machine sleep anyway (logind's
    /// own limit, InhibitDelayMaxSec, is 5 s by default).
    static let releaseLimit: Int64 = 3000

    /// Starts the watch on a thread of its own; it reconnects when the bus goes, every 10 s.
    static func start(systemBus: String, state: SleepState) {
        let started = spawn {
            var told = false
            while true {
                do throws(DBusFailure) {
                    let bus = try DBusConnection.open(address: systemBus)
                    told = false
                    try follow(bus, state)
                } catch {
                    if !told { Server.log("sleep: not followed yet (the system bus at \(systemBus): \(error))") }
                    told = true
                }
                state.resumed()
                sleep(10)
            }
        }
        if !started { Server.log("sleep: not followed (no thread could be started)") }
    }

    /// The watch on one connection, until the bus goes.
    private static func follow(_ bus: DBusConnection, _ state: SleepState) throws(DBusFailure) {
        try bus.addMatch(
            "type='signal',sender='\(logind)',path='\(path)',interface='\(manager)',member='PrepareForSleep'")
        try bus.addMatch(
            "type='signal',sender='\(busName)',interface='\(busName)',member='NameOwnerChanged',arg0='\(logind)'")
        var owner = logindOwner(bus)
        state.isFollowed = owner != nil
        defer { state.isFollowed = false }
        var inhibitor: Int32? = owner.flatMap { inhibit(bus, $0) }
        if owner != nil {
            Server.log("sleep: followed through logind (\(inhibitor == nil ? "no" : "a") delay inhibitor)")
        }
        defer { if let inhibitor { close(inhibitor) } }
        while true {
            switch bus.nextSignal(within: 60_000) {
            case .timedOut: continue
            case .disconnected: throw DBusFailure.disconnected
            case .signal(let signal):
                if signal.member == "NameOwnerChanged" {
                    // logind started again (or for the first time): its new unique name, and a new inhibitor.
                    if let old = inhibitor { close(old) }
                    inhibitor = nil
                    state.resumed()
                    owner = logindOwner(bus)
                    state.isFollowed = owner != nil
                    if let owner { inhibitor = inhibit(bus, owner) }
                    continue
                }
                guard let owner, signal.sender == owner, signal.member == "PrepareForSleep",
                    case .boolean(let going)? = signal.arguments.first
                else { continue }
                if going {
                    state.sleeping()
                    let released = state.awaitReleased(within: releaseLimit)
                    Server.log(
                        released
                            ? "sleep: the devices are given back; the machine may sleep"
                            : "sleep: \(state.held) devices still held after \(releaseLimit / 1000) s; sleeping anyway")
                    if let held = inhibitor { close(held) }
                    inhibitor = nil
                } else {
                    state.resumed()
                    inhibitor = inhibit(bus, owner)
                    Server.log("sleep: resumed; waiting authentications take their devices again")
                }
            }
        }
    }

    /// logind's unique name, when the process that owns `org.freedesktop.login1` is root's.
    private static func logindOwner(_ bus: DBusConnection) -> String? {
        guard
            let owner = try? bus.call(
                busName, "/org/freedesktop/DBus", busName, "GetNameOwner", [.string(logind)], timeout: 3000
            ).first?.text
        else { return nil }
        guard
            case .uint32(let uid)? = try? bus.call(
                busName, "/org/freedesktop/DBus", busName, "GetConnectionUnixUser", [.string(owner)], timeout: 3000
            ).first
        else { return nil }
        guard uid == 0 else {
            Server.log("sleep: \(logind) is owned by a process of uid \(uid), not root's: not logind, not followed")
            return nil
        }
        return owner
    }

    /// A delay inhibitor for sleep: logind waits for it to be closed (or for its limit) before the machine sleeps.
    private static func inhibit(_ bus: DBusConnection, _ owner: String) -> Int32? {
        do {
            let reply = try bus.call(
                owner, path, manager, "Inhibit",
                [
                    .string("sleep"), .string("keywayd"), .string("Giving the authentication devices back"),
                    .string("delay"),
                ], timeout: 3000)
            guard case .fileDescriptor(let descriptor)? = reply.first, descriptor >= 0 else { return nil }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            return descriptor
        } catch {
            Server.log("sleep: logind refused a delay inhibitor (\(error)); the devices are given back without it")
            return nil
        }
    }
}
