// keyway-probe: a separate process that drives a real store (an SQLite path or a postgresql:// URI), for the
// stores' multi-process tests and the store benchmark. Not installed; built with the tests.
//
//   keyway-probe attempt STORE USER PASSCODE KDFLOG [BARRIER]   one passcode attempt; prints the outcome
//   keyway-probe enroll STORE USER PASSCODE                     sets a passcode (no conversation rules)
//   keyway-probe enroll-cost STORE USER PASSCODE OPSLIMIT MEMKIB   the same at a chosen Argon2id cost (benchmarks)
//   keyway-probe churn STORE PREFIX COUNT                       enrollments + counter updates, printing each commit
//   keyway-probe fill STORE PREFIX                              enrollments of 4 KiB until the store refuses
//   keyway-probe bench STORE USERS ROUNDS                       store latency per authentication, in microseconds
import Glibc
import KeywayCore
import KeywayCrypto
import KeywayPasscode
import KeywayPlatform
import KeywayStore

/// Writes a line to standard output at once (no buffering), so a SIGKILL never loses a reported commit.
func say(_ line: String) {
    Descriptor.write(line + "\n", to: 1)
}

func fail(_ line: String) -> Never {
    say("error " + line)
    exit(2)
}

/// A hasher that appends a line to a log before every verification: an independent count of slow-hash runs.
final class CountingHasher: SecretHasher {
    let inner: Argon2idHasher
    let log: String

    init(inner: Argon2idHasher, log: String) {
        self.inner = inner
        self.log = log
    }

    func hash(_ secret: Secret) throws(AuthenticationError) -> String { try inner.hash(secret) }

    func verify(_ secret: Secret, against encoded: String) throws(AuthenticationError) -> SecretCheck {
        let descriptor = open(log, O_WRONLY | O_APPEND | O_CREAT, 0o600)
        if descriptor >= 0 {
            _ = "kdf \(getpid())\n".withCString { write(descriptor, $0, strlen($0)) }
            close(descriptor)
        }
        return try inner.verify(secret, against: encoded)
    }

    func burnWork(_ secret: Secret) -> [UInt8] { inner.burnWork(secret) }
}

/// Answers the one prompt with a fixed line.
final class OneLine: Conversation {
    let line: String
    init(_ line: String) { self.line = line }
    func ask(_ prompt: Prompt) throws(AuthenticationError) -> Reply { .secret(Secret(copying: Array(line.utf8))) }
    func tell(_ message: Message) {}
}

/// The store at a path (SQLite, created if missing) or a postgresql:// URI (its password file in
/// KEYWAY_PROBE_PASSFILE).
func openStore(_ location: String) -> any LoadableStore {
    var options = Stores.Options(location: location)
    options.create = true
    options.ownedByCurrentUser = true
    if let passfile = getenv("KEYWAY_PROBE_PASSFILE") { options.passfile = String(cString: passfile) }
    do { return try Stores.open(options).store } catch {
        fail("\(error.code.rawValue) \(error.reason)")
    }
}

/// The time source of `store`'s lockouts: the database's for PostgreSQL, the host's for SQLite.
func clock(of store: any Store) -> any Clock { (store as? PostgresStore)?.clock ?? SystemClock() }

func now() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

BrokenPipe.ignoreSignal()  // a parent that stopped reading gets our EPIPE, not our death by SIGPIPE
let arguments = CommandLine.arguments
guard arguments.count >= 3 else { fail("usage: see the comment at the top of main.swift") }

switch arguments[1] {
case "attempt" where arguments.count >= 6:
    if arguments.count >= 7 {  // wait at the barrier so every process attempts at the same moment
        close(open(arguments[6] + "-\(getpid())", O_CREAT | O_WRONLY, 0o644))  // arrived: the test counts these
        while access(arguments[6], F_OK) != 0 { usleep(500) }
    }
    let store = openStore(arguments[2])
    let hasher = CountingHasher(inner: try! Argon2idHasher(), log: arguments[5])
    let plugin = PasscodeAuthenticator(store: store, clock: clock(of: store), hasher: hasher)
    do {
        let verdict = try plugin.authenticate(
            AuthenticationRequest(user: UserContext(name: arguments[3])),
            conversation: OneLine(arguments[4]))
        switch verdict {
        case .success: say("success")
        case .failure(.mismatch): say("mismatch")
        case .failure(let other): say("failure \(other)")
        }
    } catch {
        say("refused \(error.code.rawValue)")
    }

case "enroll" where arguments.count >= 5, "enroll-cost" where arguments.count >= 7:
    let store = openStore(arguments[2])
    var cost = Argon2idHasher.Cost.default
    if arguments[1] == "enroll-cost" {
        guard let passes = UInt64(arguments[5]), let kib = Int(arguments[6]) else { fail("bad OPSLIMIT or MEMKIB") }
        cost = Argon2idHasher.Cost(opsLimit: passes, memLimit: kib << 10)
    }
    let hasher = try! Argon2idHasher(cost: cost)
    do {
        // Straight to the store, past the enrollment rules: the probe sets up whatever a test needs.
        let hash = try hasher.hash(Secret(copying: Array(arguments[4].utf8)))
        try store.save(
            Enrollment(
                user: arguments[3], factor: .passcode, payload: Array(hash.utf8), changedAt: SystemClock().now(),
                changedBy: "keyway-probe"))
        say("committed \(arguments[3])")
    } catch {
        fail("\(error.code.rawValue) \(error.reason)")
    }

case "churn" where arguments.count >= 5:
    let store = openStore(arguments[2])
    let count = Int(arguments[4]) ?? 0
    for index in 0..<count {
        let user = "\(arguments[3])-\(index)"
        let payload = Array("payload of \(user)".utf8)
        do {
            try store.save(
                Enrollment(
                    user: user, factor: .passcode, payload: payload,
                    changedAt: SystemClock().now(), changedBy: "churn"))
            say("committed \(user)")
            var failures = 0
            try store.updateAttempts(user: arguments[3]) { book in
                book[.gesture].consecutiveFailures += 1
                failures = book[.gesture].consecutiveFailures
            }
            say("counted \(arguments[3]) \(failures)")
        } catch {
            fail("\(error.code.rawValue) \(error.reason)")
        }
    }

case "fill" where arguments.count >= 4:
    let store = openStore(arguments[2])
    var generator = SystemRandomNumberGenerator()
    for index in 0..<100_000 {
        let user = "\(arguments[3])-\(index)"
        let payload = (0..<4096).map { _ in UInt8.random(in: 0...255, using: &generator) }
        do {
            try store.save(
                Enrollment(
                    user: user, factor: .passcode, payload: payload, changedAt: SystemClock().now(),
                    changedBy: "fill"))
            say("committed \(user)")
        } catch {
            fail("\(error.code.rawValue) \(error.reason)")
        }
    }

case "bench" where arguments.count >= 5:
    // The store's part of one authentication: read the enrollment, reserve, settle (a failure, so the counter row
    // is written, then a success that deletes it). keywayd opens its store once, when it starts, and keeps it (an
    // SQLite file, or its database connections), so the store is opened once here too, and "open" is that once (a
    // database's first connection may come with the first read instead).
    let users = Int(arguments[3]) ?? 1
    let rounds = Int(arguments[4]) ?? 200
    let opening = now()
    let store = openStore(arguments[2])
    let open = Int((now() - opening) * 1e6)
    var phases: [[Double]] = Array(repeating: [], count: 4)  // read, reserve, settle, total
    for round in 0..<rounds {
        let user = "user-\(round * 7919 % users)"
        var marks = [now()]
        let gate = AttemptGate(factor: .passcode, store: store, clock: clock(of: store), schedule: .passcode)
        do {
            guard try store.enrollment(user: user, factor: .passcode) != nil else { fail("\(user) is not enrolled") }
            marks.append(now())
            let reservation = try gate.reserve(for: user)
            marks.append(now())
            try gate.settleSuccess(reservation)
            marks.append(now())
        } catch {
            fail("\(error.code.rawValue) \(error.reason)")
        }
        for phase in 0..<3 { phases[phase].append((marks[phase + 1] - marks[phase]) * 1e6) }
        phases[3].append((marks[3] - marks[0]) * 1e6)
    }
    func median(_ values: [Double]) -> Int { Int(values.sorted()[values.count / 2]) }
    let totals = phases[3].sorted()
    let p95 = Int(totals[totals.count * 95 / 100])
    say(
        "median \(median(phases[3])) µs (p95 \(p95) µs) = read \(median(phases[0])) + reserve \(median(phases[1]))"
            + " + settle \(median(phases[2])); open once \(open) µs; min \(Int(totals[0])) µs,"
            + " max \(Int(totals[totals.count - 1])) µs")

default:
    fail("unknown or incomplete command \(arguments[1])")
}
