// keyway-hostile: what a hostile local user does to keywayd, as that user (the tests run it with setpriv), for the
// hostile-peer tests (keywayd(8), "Descriptors"). Not installed; built with the tests. Each prints one line of
// counts and exits 0; an unexpected failure prints "error ..." and exits 2.
//
//   keyway-hostile refused SOCKET SECONDS [KIND]   hold this user's connections and pass a descriptor of KIND on
//                                                  every connection beyond them, for SECONDS
//   keyway-hostile admitted SOCKET SECONDS [KIND]  pass a descriptor of KIND on admitted connections, for SECONDS
//                                                  KIND: tcp (a lingering TCP socket, the default), listener (a
//                                                  listening Unix socket whose unaccepted connection carries one),
//                                                  pty (a pseudo-terminal's master side), fuse:PATH (a file whose
//                                                  close waits for its FUSE server: the same open file each time)
//   keyway-hostile churn SOCKET COUNT              COUNT connections one after another, each asking a status:
//                                                  how many were answered
//   keyway-hostile lease SOCKET USER COUNT PER     arm USER's sensor, send COUNT messages of PER descriptors each
//                                                  (PER 0: one lingering TCP socket); says whether keywayd
//                                                  then ended the lease (within 3 s)
//   keyway-hostile rearm SOCKET USER SECONDS        arm USER's sensor, keep each lease until keywayd ends it, and arm
//                                                  again at once, for SECONDS: how many leases it got
//   keyway-hostile names SOCKET PREFIX COUNT        COUNT wrong patterns, each for a name PREFIX-N never enrolled, under
//                                                  concealment (a flood of made-up names): how many were answered
//   keyway-hostile set SOCKET USER COUNT            COUNT `set gesture.show-trail` requests, on and off in turn,
//                                                  each on its own connection: how many were done and refused
//   keyway-hostile deposit SOCKET USER KIND        arm USER's sensor and deposit a descriptor of KIND (file, fifo,
//                                                  tty, fuse:PATH) as if it were a terminal; whether keywayd ended
//                                                  the lease
//   keyway-hostile busy SOCKET                     hold this user's 4 connections and ask a status on a fifth: what
//                                                  keywayd answered it, and in how many milliseconds
//
// With KEYWAY_HOSTILE_READY set (a file the test made, writable by this user), `refused` and `admitted` write a line
// to it once their first round is done: the attack is in place, and the test times its victims from then on.
import Glibc
import KeywayCore
import KeywayPlatform
import KeywayWire

func say(_ line: String) {
    Descriptor.write(line + "\n", to: 1)
}

func fail(_ line: String) -> Never {
    say("error " + line)
    exit(2)
}

func connectOrFail(_ path: String) -> Int32 {
    switch UnixSocket.connect(to: path) {
    case .success(let fd): return fd
    case .failure(let failure): fail("\(failure)")
    }
}

/// Lingering TCP connections: the sending end with SO_LINGER 60 s and a full send queue, the receiving end kept
/// open here and never read, so the sending end's last close blocks for a minute wherever it happens.
nonisolated(unsafe) var receivingEnds: [Int32] = []

func lingeringSocket() -> Int32 {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
            bind(listener, pointer, length) == 0 && listen(listener, 4) == 0
                && getsockname(listener, pointer, &length) == 0
        }
    }
    guard bound else { fail("tcp listener: \(String(cString: strerror(errno)))") }
    let sender = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var small: Int32 = 4096
    setsockopt(sender, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(4))
    let connected = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(sender, $0, length) == 0 }
    }
    guard connected else { fail("tcp connect: \(String(cString: strerror(errno)))") }
    let receiver = accept(listener, nil, nil)
    setsockopt(receiver, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(4))
    close(listener)
    receivingEnds.append(receiver)
    _ = fcntl(sender, F_SETFL, fcntl(sender, F_GETFL) | O_NONBLOCK)
    var block = [UInt8](repeating: 0x41, count: 65536)
    while block.withUnsafeMutableBytes({ send(sender, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) > 0 {}
    var linger = linger(l_onoff: 1, l_linger: 60)
    setsockopt(sender, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
    return sender
}

/// Listeners made so far (each gets an abstract name of its own).
nonisolated(unsafe) var listenersMade = 0

/// A listening Unix socket (abstract address) with one connection it has not accepted, whose queue carries `carried`
/// (closed here, so the queue holds its last reference): the listener's last close would release it.
func listenerCarrying(_ carried: Int32) -> Int32 {
    listenersMade += 1
    let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let name = Array("keyway-hostile-\(getpid())-\(listenersMade)".utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { path in
        for (index, byte) in name.enumerated() { path[index + 1] = byte }  // path[0] = 0: abstract
    }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) == 0 }
    }
    guard bound, listen(listener, 8) == 0 else { fail("unix listener: \(String(cString: strerror(errno)))") }
    let client = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, length) == 0 }
    }
    guard connected, pass([carried], over: client) else { fail("unix connect: \(String(cString: strerror(errno)))") }
    close(client)
    close(carried)  // the connection's queue holds it now
    return listener
}

/// Files opened on a FUSE file system, by path: each is opened once and passed again and again (its server answers
/// keywayd's flush never, and this user's at once).
nonisolated(unsafe) var stalling: [String: Int32] = [:]

func stallingFile(_ path: String) -> Int32 {
    if let fd = stalling[path] { return fd }
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { fail("\(path): \(String(cString: strerror(errno)))") }
    stalling[path] = fd
    return fd
}

/// Whether `fd` is kept for the whole run (passed again and again), so the attacker must not close it after a pass.
func kept(_ fd: Int32) -> Bool { fd == lingering || stalling.values.contains(fd) }

/// The descriptor of `kind` to pass.
func descriptor(_ kind: String) -> Int32 {
    if kind.hasPrefix("fuse:") { return stallingFile(String(kind.dropFirst(5))) }
    switch kind {
    case "tcp": return lingering
    case "listener": return listenerCarrying(lingeringSocket())
    case "pty":
        let master = open("/dev/ptmx", O_RDWR | O_NOCTTY)
        guard master >= 0 else { fail("/dev/ptmx: \(String(cString: strerror(errno)))") }
        return master
    default: fail("unknown kind \(kind)")
    }
}

/// Sends one byte with `fds` (SCM_RIGHTS); true when the kernel took it (false with EPERM: the receiver refuses).
func pass(_ fds: [Int32], over connection: Int32, byte: UInt8 = 0x41) -> Bool {
    var data = byte
    var control = [UInt8](repeating: 0, count: 16 + 4 * fds.count + 8)
    var part = iovec(iov_base: withUnsafeMutablePointer(to: &data) { UnsafeMutableRawPointer($0) }, iov_len: 1)
    return control.withUnsafeMutableBytes { raw -> Bool in
        let header = raw.baseAddress!.assumingMemoryBound(to: cmsghdr.self)
        header.pointee.cmsg_len = 16 + 4 * fds.count
        header.pointee.cmsg_level = SOL_SOCKET
        header.pointee.cmsg_type = Int32(SCM_RIGHTS)
        for (index, fd) in fds.enumerated() { raw.storeBytes(of: fd, toByteOffset: 16 + 4 * index, as: Int32.self) }
        var message = msghdr()
        return withUnsafeMutablePointer(to: &part) { partPointer in
            message.msg_iov = partPointer
            message.msg_iovlen = 1
            message.msg_control = raw.baseAddress
            message.msg_controllen = (16 + 4 * fds.count + 7) & ~7
            return sendmsg(connection, &message, Int32(MSG_NOSIGNAL)) == 1
        }
    }
}

func request(_ request: Request, over fd: Int32) {
    _ = UnixSocket.send(WireWriter.frame(request.encoded), to: fd, until: MonotonicClock.milliseconds() + 2000)
}

func answer(_ fd: Int32) -> Response? {
    guard
        case .success(let bytes) = UnixSocket.receiveFrame(
            from: fd, limit: Wire.maximumResponse, until: MonotonicClock.milliseconds() + 5000)
    else { return nil }
    return try? Response(decoding: bytes)
}

/// Waits up to 3 s for keywayd to close `fd`; true when it did.
func endedByKeywayd(_ fd: Int32) -> Bool {
    let end = MonotonicClock.milliseconds() + 3000
    while MonotonicClock.milliseconds() < end {
        var byte: UInt8 = 0
        let got = recv(fd, &byte, 1, Int32(MSG_DONTWAIT))
        if got == 0 || (got < 0 && errno != EAGAIN) { return true }
        usleep(20_000)
    }
    return false
}

/// Arms `user`'s sensor: the lease's connection.
func arm(_ socketPath: String, _ user: String) -> Int32 {
    let fd = connectOrFail(socketPath)
    request(.arm(.biometric, UserContext(name: user), attempts: 3), over: fd)
    guard case .armed? = answer(fd) else { fail("arm was not answered armed") }
    return fd
}

/// Whether the attack has said it is in place (`markInPlace`).
nonisolated(unsafe) var markedInPlace = false

/// Writes `line` once to the file KEYWAY_HOSTILE_READY names, if it is set: the attack is in place.
func markInPlace(_ line: String) {
    guard !markedInPlace, let path = getenv("KEYWAY_HOSTILE_READY") else { return }
    markedInPlace = true
    let fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
    guard fd >= 0 else { fail("\(String(cString: path)): \(String(cString: strerror(errno)))") }
    Descriptor.write(line + "\n", to: fd)
    close(fd)
}

/// Bytes sent on `fd` that its peer has not read yet (SIOCOUTQ).
func unread(_ fd: Int32) -> Int32 {
    var pending: Int32 = 0
    return ioctl(fd, UInt(TIOCOUTQ), &pending) == 0 ? pending : -1
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else { fail("usage: see Tests/KeywayHostile/main.swift") }
let socketPath = arguments[1]
let lingering = lingeringSocket()
switch arguments[0] {
case "refused", "admitted":
    let end = MonotonicClock.milliseconds() + Int64(arguments[2])! * 1000
    let kind = arguments.count > 3 ? arguments[3] : "tcp"
    var passed = 0, refusedByKernel = 0, rounds = 0
    while MonotonicClock.milliseconds() < end {
        rounds += 1
        // The user's connections held open (each times out after keywayd's request deadline, so re-opened).
        let held = arguments[0] == "refused" ? (0..<4).map { _ in connectOrFail(socketPath) } : []
        usleep(20_000)
        // Made before connecting, so the pass follows the connect at once and is queued before keywayd has accepted
        // (and refused) the connection: what it disposes of on its way out.
        let passing = descriptor(kind)
        let extra = connectOrFail(socketPath)
        let took = pass([passing], over: extra)
        if took { passed += 1 } else { refusedByKernel += 1 }
        // The attacker's own copy goes at once, while the passed one is in flight, so keywayd's close is the last;
        // when the kernel refused the pass, this close is the last, and it goes on a thread of its own (releasing a
        // lingering socket would block this loop).
        if !kept(passing) {
            if took { close(passing) } else { _ = spawn { close(passing) } }
        }
        if arguments[0] == "admitted" { request(.status(user: "nobody-here"), over: extra) }
        usleep(50_000)
        close(extra)
        held.forEach { close($0) }
        markInPlace("in place after round 1: passed \(passed) refused-by-kernel \(refusedByKernel)")
    }
    say("rounds \(rounds) passed \(passed) refused-by-kernel \(refusedByKernel)")
case "lease":
    guard arguments.count == 5, let count = Int(arguments[3]), let per = Int(arguments[4]) else { fail("lease args") }
    let lease = arm(socketPath, arguments[2])
    let null = open("/dev/null", O_RDONLY)
    var passed = 0, refusedByKernel = 0, failed = 0
    for _ in 0..<count {
        let fds = per == 0 ? [lingering] : Array(repeating: null, count: per)
        if pass(fds, over: lease) {
            passed += 1
        } else if errno == EPERM {
            refusedByKernel += 1
        } else {
            failed += 1  // the lease was ended: keywayd closed it
            break
        }
    }
    let ended = endedByKeywayd(lease)
    close(lease)
    say("passed \(passed) refused-by-kernel \(refusedByKernel) after-close \(failed) ended \(ended)")
case "names":
    guard arguments.count == 4, let count = Int(arguments[3]) else { fail("names args") }
    var answered = 0
    for index in 0..<count {
        let fd = connectOrFail(socketPath)
        let context = UserContext(name: "\(arguments[2])-\(index)", concealsEnrollment: true)
        request(.verify(.gesture, context, .secret(Secret(copying: Array("1-2-3-6".utf8)))), over: fd)
        if case .verdict? = answer(fd) { answered += 1 }
        close(fd)
    }
    say("answered \(answered)")
case "rearm":
    guard arguments.count == 4, let seconds = Int64(arguments[3]) else { fail("rearm args") }
    let end = MonotonicClock.milliseconds() + seconds * 1000
    var leases = 0, busy = 0
    while MonotonicClock.milliseconds() < end {
        let fd = connectOrFail(socketPath)
        request(.arm(.biometric, UserContext(name: arguments[2]), attempts: 3), over: fd)
        guard case .armed? = answer(fd) else {
            busy += 1
            close(fd)
            usleep(5000)
            continue
        }
        leases += 1
        // Held until keywayd writes on the lease (it ended it) or closes it, or the time is up.
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        while MonotonicClock.milliseconds() < end && poll(&entry, 1, 100) == 0 {}
        close(fd)
    }
    say("leases \(leases) busy \(busy)")
case "churn":
    // One after another, each asked something and answered, as clients come.
    var served = 0
    for _ in 0..<Int(arguments[2])! {
        guard case .success(let fd) = UnixSocket.connect(to: socketPath) else { continue }
        request(.status(user: "nobody-here"), over: fd)
        if answer(fd) != nil { served += 1 }
        close(fd)
    }
    say("served \(served)")
case "set":
    guard arguments.count == 4, let count = Int(arguments[3]) else { fail("set args") }
    var done = 0, refused = 0, busy = 0, other = 0
    for index in 0..<count {
        let fd = connectOrFail(socketPath)
        request(
            .set(key: "gesture.show-trail", user: arguments[2], value: index % 2 == 0, via: "keyway-hostile"), over: fd)
        switch answer(fd) {
        case .done?: done += 1
        case .failure(let error)? where error.code == .notPermitted: refused += 1
        case .failure(let error)? where error.code == .serviceUnavailable: busy += 1  // over its 4 connections
        default: other += 1
        }
        close(fd)
    }
    say("done \(done) refused \(refused) busy \(busy) other \(other)")
case "deposit":
    guard arguments.count == 4 else { fail("deposit args") }
    let lease = arm(socketPath, arguments[2])
    var descriptor: Int32
    switch arguments[3] {
    case "file": descriptor = open("/etc/hostname", O_RDONLY)
    case "fifo":
        var ends: [Int32] = [0, 0]
        pipe(&ends)
        descriptor = ends[0]
    case "tty":
        descriptor = open("/dev/ptmx", O_RDWR | O_NOCTTY)  // a pseudo-terminal's master: a terminal of its own
    case let kind where kind.hasPrefix("fuse:"): descriptor = stallingFile(String(kind.dropFirst(5)))
    default: fail("kind")
    }
    var settings = termios()
    tcgetattr(descriptor, &settings)
    let sent = TerminalCustody.deposit(descriptor, settings: settings, over: lease)
    let ended = endedByKeywayd(lease)
    close(lease)
    say("deposited \(sent) ended \(ended)")
case "busy":
    // The first byte of a request's length on each of the four: keywayd reads it once it has admitted and serves
    // the connection, so when none is left unread here (SIOCOUTQ 0) keywayd holds all four, and the fifth comes then.
    let held = (0..<4).map { _ in connectOrFail(socketPath) }
    for fd in held {
        var zero: UInt8 = 0
        guard send(fd, &zero, 1, Int32(MSG_NOSIGNAL)) == 1 else { fail("send: \(String(cString: strerror(errno)))") }
    }
    let admittedBy = MonotonicClock.milliseconds() + 10_000
    while held.contains(where: { unread($0) != 0 }) {
        guard MonotonicClock.milliseconds() < admittedBy else {
            fail("keywayd did not read the four held connections in 10 s (unread bytes: \(held.map(unread)))")
        }
        usleep(1000)
    }
    let start = MonotonicClock.milliseconds()
    let fifth = connectOrFail(socketPath)
    request(.status(user: "nobody-here"), over: fifth)
    let answered = answer(fifth)
    let milliseconds = MonotonicClock.milliseconds() - start
    let what: String
    switch answered {
    case .failure(let error)? where error.code == .serviceUnavailable: what = "busy"
    case nil: what = "nothing"
    default: what = "other"
    }
    close(fifth)
    held.forEach { close($0) }
    say("answered \(what) in \(milliseconds) ms")
default:
    fail("unknown command \(arguments[0])")
}
