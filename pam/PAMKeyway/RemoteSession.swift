import CKeywayLibc
import KeywayPlatform

/// Whether a PAM call comes from a person at this machine, proven by what the user cannot forge; anything missing
/// or unknown is remote (pam_keyway(8), "LOCAL AND REMOTE", the table; docs/ARCHITECTURE.md §5). Consulted for
/// `when = local` and the sensor's `remote = deny`.
///
/// The evidence, in order: PAM_RHOST (set by sshd, login -h, a remote greeter); utmp, which only root and sshd
/// write; the device PAM_TTY names (a virtual console is local, a serial line is not known to be); and for a
/// pseudo-terminal, the process that holds its master side in the same devpts instance (found in /proc): a remote
/// server (sshd, telnetd, mosh-server, …) or one started by one makes it remote, logind's record of the holder's
/// session decides when there is one, and otherwise a holder root runs vouches only through its own terminal, judged
/// the same way (a virtual console, or a chain of terminals back to one): a root process holding a master proves
/// nothing by itself (`su --pty`, `systemd-run -t` run one for anyone), and a user can give their own processes any
/// name.
enum RemoteSession {
    /// The verdict and the evidence, for the log.
    struct Finding: Equatable {
        var isRemote: Bool
        var reason: String

        static func local(_ reason: String) -> Finding { Finding(isRemote: false, reason: reason) }
        static func remote(_ reason: String) -> Finding { Finding(isRemote: true, reason: reason) }
    }

    /// Programs that serve logins from other machines: a pseudo-terminal whose master one of them (or a process one
    /// of them started) holds is remote.
    static let remoteServers: [String] = [
        "sshd", "sshd-session", "sshd-auth", "dropbear", "telnetd", "in.telnetd", "in.rlogind", "rlogind",
        "mosh-server", "xrdp", "xrdp-sesman", "xrdp-chansrv", "shellinaboxd", "ttyd", "gotty", "tmate",
        "cockpit-session", "cockpit-bridge", "wayvnc", "x11vnc", "vncserver", "Xvnc", "guacd",
    ]

    /// The finding for one PAM call, made at most once: by `Configuration.resolve` when a `when` asks, else before the
    /// evaluation (where attempts are counted decides which counters they go to).
    final class Lazy: @unchecked Sendable {  // one PAM call, on one thread
        private let rhost: String?
        private let tty: String?
        /// The finding, once made.
        private(set) var made: Finding?

        init(rhost: String?, tty: String?) {
            self.rhost = rhost
            self.tty = tty
        }

        /// The finding, made now if it was not yet.
        var finding: Finding {
            if let made { return made }
            let found = RemoteSession.locate(rhost: rhost, tty: tty)
            made = found
            return found
        }
    }

    /// Where the session is, from PAM_RHOST and PAM_TTY.
    static func locate(rhost: String?, tty: String?) -> Finding {
        if let rhost, !rhost.isEmpty { return .remote("PAM_RHOST is set (\(rhost))") }
        guard var line = tty, !line.isEmpty else { return .remote("PAM_TTY is not set") }
        if line.hasPrefix("/dev/") { line.removeFirst(5) }
        if line.hasPrefix(":"), line.dropFirst().allSatisfy({ ("0"..."9").contains($0) || $0 == "." }),
            line.count > 1
        {
            if let host = utmpHost(of: line) { return .remote("utmp records \(line) as logged in from \(host)") }
            return .local("PAM_TTY is the local X display \(line)")
        }
        var info = stat()
        guard !line.split(separator: "/").contains(where: { $0 == ".." }), stat("/dev/" + line, &info) == 0,
            info.st_mode & mode_t(S_IFMT) == mode_t(S_IFCHR)
        else {
            return .remote("PAM_TTY \(line) is not a terminal device")
        }
        return terminal(line, info, depth: 0)
    }

    /// How far a chain of terminals is followed (a root process on a terminal made this one, on a terminal …).
    static let chainLimit = 4

    /// What a character device is, by its number (`st_rdev`).
    enum Kind: Equatable {
        case virtualConsole, systemConsole, other
        /// A pseudo-terminal's slave side, N of /dev/pts/N.
        case pseudoTerminal(index: Int)

        init(_ info: stat) {
            let device = UInt64(info.st_rdev)
            let major = ((device >> 8) & 0xfff) | ((device >> 32) & ~0xfff)
            let minor = (device & 0xff) | ((device >> 12) & ~0xff)
            if major == 4 && (1...63).contains(minor) {
                self = .virtualConsole
            } else if major == 5 && minor == 1 {
                self = .systemConsole
            } else if (136...143).contains(major) {
                self = .pseudoTerminal(index: Int((major - 136) * 256 + minor))
            } else {
                self = .other
            }
        }
    }

    /// The terminal device `info` (its devpts instance in `st_dev`, its number in `st_rdev`), named `line`.
    private static func terminal(_ line: String, _ info: stat, depth: Int) -> Finding {
        if let host = utmpHost(of: line) {
            // A multiplexer's pane (tmux writes "tmux(PID).%N") names no other machine: the pane is followed to the
            // multiplexer that holds its master, and that one's session decides, as for any terminal. A user can
            // write such a record for their own terminal (utempter), which gains nothing: the holder still decides.
            guard let pane = multiplexerPane(host), case .pseudoTerminal(let index) = Kind(info) else {
                return .remote("utmp records \(line) as logged in from \(host)")
            }
            let found = pseudoTerminal(line, instance: UInt64(info.st_dev), index: index, depth: depth)
            return Finding(isRemote: found.isRemote, reason: "utmp records \(line) as \(pane): \(found.reason)")
        }
        switch Kind(info) {
        case .virtualConsole: return .local("\(line) is a virtual console")
        case .systemConsole: return .local("\(line) is the system console")
        case .other:
            return .remote("\(line) is neither a console nor a pseudo-terminal (a serial line may be remote)")
        case .pseudoTerminal(let index):
            return pseudoTerminal(line, instance: UInt64(info.st_dev), index: index, depth: depth)
        }
    }

    /// How long the search of /proc for a master's holders may take, in milliseconds. Its cost is what the machine's
    /// processes hold: any user can hold hundreds of thousands of descriptors of /dev/ptmx, each of which costs a
    /// readlink and a read of its fdinfo (400,000 of them took 4 to 6 s). Past it the search stops, and the session
    /// is remote (fail closed); the test machine's 69 processes and 332 descriptors take a few milliseconds.
    static let searchLimit: Int64 = 500

    /// The pseudo-terminal's case: who holds its master side, in its own devpts instance.
    private static func pseudoTerminal(_ line: String, instance: UInt64, index: Int, depth: Int) -> Finding {
        guard let holders = masterHolders(of: index, in: instance, until: MonotonicClock.milliseconds() + searchLimit)
        else {
            return .remote(
                "the search for the master side of \(line) ran past \(searchLimit) ms (processes hold very many "
                    + "descriptors)")
        }
        guard !holders.isEmpty else { return .remote("no process in sight holds the master side of \(line)") }
        for holder in holders {
            if let server = remoteAncestor(of: holder) {
                return .remote("the master side of \(line) is held by \(describe(holder)), started by \(server)")
            }
        }
        for holder in holders {
            if let session = logindSession(of: holder) {
                let remote = session.remote
                return Finding(
                    isRemote: remote,
                    reason: "logind records the session of \(describe(holder)) as \(remote ? "remote" : "local")"
                        + " (session \(session.id))")
            }
        }
        if let user = holders.first(where: { owner(of: $0) != 0 }) {
            return .remote(
                "the master side of \(line) is held by \(describe(user)), a user's process, and no logind session"
                    + " vouches for it")
        }
        // Root's holders, outside any logind session: each vouches only through the terminal it runs on.
        for holder in holders {
            guard depth < chainLimit, let (name, info) = terminalOf(holder, besides: instance, index) else { continue }
            let found = terminal(name, info, depth: depth + 1)
            let reason = "the master side of \(line) is held by \(describe(holder)), on \(name): \(found.reason)"
            return Finding(isRemote: found.isRemote, reason: reason)
        }
        return .remote(
            "the master side of \(line) is held by \(describe(holders[0])), run by root on no terminal a person is"
                + " known to sit at, and no logind session vouches for it")
    }

    /// The processes holding the master side of pseudo-terminal `index` of the devpts instance `instance` (at most
    /// 8), or nil when the search ran past `deadline` (monotonic milliseconds). Another instance's terminal of the
    /// same index (a container's, another namespace's) is not this one.
    private static func masterHolders(of index: Int, in instance: UInt64, until deadline: Int64) -> [Int32]? {
        // The likely holders first: the host itself (a program that made its own terminal), then the parent of its
        // session's leader (sshd for a login shell's sudo, the terminal emulator, tmux's server).
        switch holdsMaster(getpid(), index, instance, until: deadline) {
        case true?: return [getpid()]
        case nil: return nil
        case false?: break
        }
        let leader = getsid(0)
        if leader > 0, let parent = process(leader).parent, parent > 1 {
            switch holdsMaster(parent, index, instance, until: deadline) {
            case true?: return [parent]
            case nil: return nil
            case false?: break
            }
        }
        var found: [Int32] = []
        guard let directory = opendir("/proc") else { return [] }
        defer { closedir(directory) }
        while let entry = readdir(directory), found.count < 8 {
            let name = String(cString: keyway_dirent_name(entry))
            guard let pid = Int32(name), pid > 0 else { continue }
            guard let holds = holdsMaster(pid, index, instance, until: deadline) else { return nil }
            if holds { found.append(pid) }
        }
        return found
    }

    /// True when `pid` holds the master side of terminal `index` of devpts instance `instance`. A master opened
    /// through an instance's own `ptmx` node lives on that instance; one opened through the device node /dev/ptmx
    /// belongs to the instance mounted at /dev/pts beside it, in the holder's own mount namespace.
    /// Nil when the search ran past `deadline`, looked at every 64 descriptors.
    private static func holdsMaster(_ pid: Int32, _ index: Int, _ instance: UInt64, until deadline: Int64) -> Bool? {
        guard MonotonicClock.milliseconds() < deadline else { return nil }
        let base = "/proc/\(pid)/fd"
        guard let directory = opendir(base) else { return false }
        defer { closedir(directory) }
        var link = [CChar](repeating: 0, count: 256)
        var looked = 0
        while let entry = readdir(directory) {
            looked += 1
            if looked % 64 == 0 && MonotonicClock.milliseconds() >= deadline { return nil }
            let fd = String(cString: keyway_dirent_name(entry))
            guard fd.first.map({ ("0"..."9").contains($0) }) ?? false else { continue }
            let length = readlink(base + "/" + fd, &link, link.count - 1)
            guard length > 0 else { continue }
            let target = String(decoding: link[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            guard target == "/dev/ptmx" || target.hasSuffix("/ptmx") else { continue }
            guard let text = bytes("/proc/\(pid)/fdinfo/\(fd)"), field(text, "tty-index:") == "\(index)" else {
                continue
            }
            var node = stat()
            guard stat(base + "/" + fd, &node) == 0 else { continue }
            if UInt64(node.st_dev) == instance { return true }
            var pts = stat()
            if target == "/dev/ptmx", stat("/proc/\(pid)/root/dev/pts", &pts) == 0, UInt64(pts.st_dev) == instance {
                return true
            }
        }
        return false
    }

    /// The terminal `pid` runs on: the first of its standard descriptors that is a terminal device other than
    /// terminal `index` of `instance` itself, with the name its holder sees it by.
    private static func terminalOf(_ pid: Int32, besides instance: UInt64, _ index: Int) -> (String, stat)? {
        var link = [CChar](repeating: 0, count: 256)
        for fd in 0...2 {
            let path = "/proc/\(pid)/fd/\(fd)"
            var info = stat()
            guard stat(path, &info) == 0, info.st_mode & mode_t(S_IFMT) == mode_t(S_IFCHR) else { continue }
            switch Kind(info) {
            case .other: continue
            case .virtualConsole, .systemConsole: break
            case .pseudoTerminal(let number):
                // Not the terminal being judged (a holder with its own terminal on its standard input).
                if UInt64(info.st_dev) == instance && number == index { continue }
            }
            var name = "fd \(fd) of pid \(pid)"
            let length = readlink(path, &link, link.count - 1)
            if length > 0 {
                name = String(decoding: link[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                if name.hasPrefix("/dev/") { name.removeFirst(5) }
            }
            return (name, info)
        }
        return nil
    }

    /// The first remote server among `pid` and its ancestors (its name and pid), or nil.
    private static func remoteAncestor(of pid: Int32) -> String? {
        var current = pid
        for _ in 0..<64 {
            guard current > 1 else { return nil }
            let (name, parent) = process(current)
            if let name, remoteServers.contains(name) { return "\(name) (pid \(current))" }
            guard let next = parent, next != current else { return nil }
            current = next
        }
        return nil
    }

    /// logind's record of the session whose scope holds `pid`, or, for a process of a user's service manager
    /// (where a desktop's terminal runs), the user's active session on a seat: nil when logind says nothing.
    private static func logindSession(of pid: Int32) -> (id: String, remote: Bool)? {
        // Bytes split on bytes: splitting Strings by Character costs grapheme breaking, for ASCII files.
        guard let groups = bytes("/proc/\(pid)/cgroup") else { return nil }
        let components = groups.split(separator: UInt8(ascii: "\n")).flatMap { $0.split(separator: UInt8(ascii: "/")) }
        if let scope = components.first(where: {
            $0.starts(with: "session-".utf8) && $0.suffix(6).elementsEqual(".scope".utf8)
        }) {
            let id = String(decoding: scope.dropFirst(8).dropLast(6), as: UTF8.self)
            guard let record = bytes("/run/systemd/sessions/\(id)") else { return nil }
            return (id, field(record, "REMOTE=") != "0")
        }
        let uid = owner(of: pid)
        let service = Array("user@\(uid).service".utf8)
        guard uid != 0, components.contains(where: { $0.elementsEqual(service) }),
            let directory = opendir("/run/systemd/sessions")
        else { return nil }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let id = String(cString: keyway_dirent_name(entry))
            guard !id.hasPrefix("."), !id.hasSuffix(".ref"), let record = bytes("/run/systemd/sessions/" + id) else {
                continue
            }
            if field(record, "UID=") == "\(uid)", field(record, "REMOTE=") == "0", field(record, "ACTIVE=") == "1",
                !(field(record, "SEAT=") ?? "").isEmpty
            {
                return (id, false)
            }
        }
        return nil
    }

    private static func describe(_ pid: Int32) -> String {
        let name = process(pid).name ?? "an unnamed process"
        return "\(name) (pid \(pid), uid \(owner(of: pid)))"
    }

    /// The process's name and its parent's pid, from one read of /proc/PID/stat ("pid (comm) state ppid …"), which
    /// holds the same name as /proc/PID/comm: one file per ancestor, on every call (docs/ARCHITECTURE.md §5). The
    /// name may hold spaces and parentheses, so it ends at the last ')'.
    private static func process(_ pid: Int32) -> (name: String?, parent: Int32?) {
        guard let stat = bytes("/proc/\(pid)/stat"), let open = stat.firstIndex(of: UInt8(ascii: "(")),
            let close = stat.lastIndex(of: UInt8(ascii: ")")), open < close
        else { return (nil, nil) }
        let comm = stat[(open + 1)..<close]
        let name = comm.isEmpty ? nil : String(decoding: comm, as: UTF8.self)
        // After the ')': the state, then the parent's pid.
        let fields = stat[(close + 1)...].split(separator: UInt8(ascii: " "), maxSplits: 3)
        guard fields.count > 2, case let digits = fields[1], (1...9).contains(digits.count),
            digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
        else { return (name, nil) }
        return (name, digits.reduce(Int32(0)) { $0 * 10 + Int32($1 - UInt8(ascii: "0")) })
    }

    private static func owner(of pid: Int32) -> UInt32 {
        var info = stat()
        return stat("/proc/\(pid)", &info) == 0 ? info.st_uid : UInt32.max
    }

    /// The value after `key` on the line that starts with it, up to the end of the line, trimmed.
    private static func field(_ text: [UInt8], _ key: String) -> String? {
        for line in text.split(separator: UInt8(ascii: "\n")) where line.starts(with: key.utf8) {
            let value = line.dropFirst(key.utf8.count).drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            return String(decoding: value, as: UTF8.self)
        }
        return nil
    }

    /// The first 8 KiB of a small file of /proc or /run, or nil.
    private static func bytes(_ path: String) -> [UInt8]? {
        let fd = keyway_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 8192)
        var total = 0
        while total < bytes.count {
            let got = bytes.withUnsafeMutableBytes { CKeywayLibc.read(fd, $0.baseAddress! + total, $0.count - total) }
            if got <= 0 { break }
            total += got
        }
        bytes.removeLast(bytes.count - total)
        return bytes
    }

    /// The host utmp records `line` as logged in from, when that is not a local X display; nil otherwise.
    private static func utmpHost(of line: String) -> String? {
        setutxent()
        defer { endutxent() }
        while let entry = getutxent() {
            guard entry.pointee.ut_type == USER_PROCESS else { continue }
            let entryLine = withUnsafeBytes(of: entry.pointee.ut_line) { cString($0) }
            guard entryLine == line else { continue }
            let host = withUnsafeBytes(of: entry.pointee.ut_host) { cString($0) }
            if !host.isEmpty && !host.hasPrefix(":") { return host }
        }
        return nil
    }

    /// "a pane of tmux (pid N)" for the utmp host a terminal multiplexer writes for its panes (`tmux(N).%M`), or nil
    /// for any other host. GNU screen's start with ':' and are not hosts at all (`utmpHost`).
    static func multiplexerPane(_ host: String) -> String? {
        guard host.hasPrefix("tmux("), let close = host.firstIndex(of: ")") else { return nil }
        let pid = host[host.index(host.startIndex, offsetBy: 5)..<close]
        guard !pid.isEmpty, pid.allSatisfy({ ("0"..."9").contains($0) }) else { return nil }
        return "a pane of tmux (pid \(pid))"
    }

    /// The bytes up to the first NUL of a fixed-size C field.
    private static func cString(_ bytes: UnsafeRawBufferPointer) -> String {
        String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
    }
}
