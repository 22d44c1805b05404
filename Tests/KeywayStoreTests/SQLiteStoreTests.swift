import Foundation
import KeywayCore
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayStore

@Suite("SQLite store: schema, permissions, bad state")
struct SQLiteStoreTests {
    @Test("passes the store conformance checks")
    func conformance() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let problems = StoreConformance.check(try scratch.open())
        #expect(problems.isEmpty, "\(problems)")
    }

    @Test("a new store is a 0600 file in a 0700 directory, in WAL mode, at the current schema")
    func creation() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let nested = scratch.directory + "/lib"
        let store = try SQLiteStore(.ownedByCurrentUser(path: nested + "/keyway.db"))
        #expect(scratch.mode(nested) == 0o700)
        #expect(scratch.mode(nested + "/keyway.db") == 0o600)
        #expect(try store.integrityCheck() == "ok")
        _ = store
        let db = try #require(try? sqliteQuery(nested + "/keyway.db", "PRAGMA user_version; PRAGMA journal_mode"))
        #expect(db == ["\(Schema.currentVersion)", "wal"])
    }

    @Test("a reservation written in the background is seen by another connection before its disk write is waited for")
    func backgroundWriteIsCommitted() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let store = try scratch.open()
        let disk = try store.updateAttemptsWritingInBackground(user: "bob") { $0[.passcode].consecutiveFailures += 1 }
        let other = try scratch.open(create: false)
        #expect(try other.attempts(user: "bob")[.passcode].consecutiveFailures == 1)
        try disk.wait()
        try disk.wait()  // again: the outcome is kept
        #expect(try store.integrityCheck() == "ok")
    }

    @Test("32 threads reserving at once on one store: every background write finishes, every attempt is counted")
    func backgroundWritesUnderFlood() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let store = try scratch.open()
        let threads = 32
        let done = DispatchSemaphore(value: 0)
        let failures = Mutex<[String]>([])
        for index in 0..<threads {
            Thread.detachNewThread {
                do {
                    let disk = try store.updateAttemptsWritingInBackground(user: "bob") { book in
                        book[.passcode].consecutiveFailures += 1
                    }
                    // Others' reads and writes go on while this write is under way.
                    _ = try store.attempts(user: "user\(index)")
                    try disk.wait()
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
                done.signal()
            }
        }
        for _ in 0..<threads { #expect(done.wait(timeout: .now() + 60) == .success) }
        #expect(failures.withLock { $0 }.isEmpty)
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == threads)
    }

    @Test("every durable write syncs the log before it returns; a settle and a read sync nothing")
    func durableWritesSync() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let store = try scratch.open()
        let synced = store.logSyncs
        let enrollment = Enrollment(
            user: "bob", factor: .passcode, payload: [7], changedAt: Timestamp(seconds: 1), changedBy: "root")
        try store.save(enrollment)  // an enrollment: durable
        #expect(store.logSyncs == synced + 1)
        try store.updateAttempts(user: "bob", durable: false) { $0[.passcode].consecutiveFailures += 1 }
        #expect(store.logSyncs == synced + 1)  // a settle: in the log only
        try store.updateAttempts(user: "bob", durable: true) { $0[.passcode].consecutiveFailures += 1 }
        #expect(store.logSyncs == synced + 2)
        _ = try store.enrollments(user: "bob")  // a read syncs nothing
        #expect(store.logSyncs == synced + 2)
        try store.updateAttemptsWritingInBackground(user: "bob") { $0[.passcode].consecutiveFailures += 1 }.wait()
        #expect(store.logSyncs == synced + 3)
        #expect(try store.attempts(user: "bob")[.passcode].consecutiveFailures == 3)
    }

    @Test("data survives closing and reopening")
    func durable() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        do {
            let store = try scratch.open()
            try store.save(
                Enrollment(
                    user: "alice", factor: .gesture, payload: [7], changedAt: Timestamp(seconds: 1),
                    changedBy: "root"))
            try store.updateAttempts(user: "alice") { $0[.gesture].consecutiveFailures = 3 }
        }
        let reopened = try scratch.open(create: false)
        #expect(try reopened.enrollment(user: "alice", factor: .gesture)?.payload == [7])
        #expect(try reopened.attempts(user: "alice")[.gesture].consecutiveFailures == 3)
    }

    /// How each unsafe state is produced, and what the refusal must say.
    enum Unsafe: String, CaseIterable, Sendable {
        case symlinkFile, symlinkDirectory, wrongOwner, groupReadable, worldWritableDirectory, hardLink, missing

        var fragment: String {
            switch self {
            case .symlinkFile: "it is a symbolic link"
            case .symlinkDirectory: "is a symbolic link; use the real directory"
            case .wrongOwner: "is owned by uid 65534, not"
            case .groupReadable: "accessible to group or others (mode 0640); fix with `chmod 600"
            case .worldWritableDirectory: "writable by group or others (mode 0777); fix with `chmod 700"
            case .hardLink: "has 2 hard links"
            case .missing: "it does not exist"
            }
        }
    }

    @Test(
        "an unsafe store is refused, saying which problem and how to fix it, and nothing is lost",
        arguments: Unsafe.allCases)
    func unsafeStoreRefused(kind: Unsafe) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let real = scratch.directory + "/real"
        mkdir(real, 0o700)
        let path = real + "/keyway.db"
        do {
            let store = try SQLiteStore(.ownedByCurrentUser(path: path))
            try store.save(
                Enrollment(
                    user: "alice", factor: .passcode, payload: [42], changedAt: Timestamp(seconds: 1),
                    changedBy: "root"))
        }
        var opened = path
        var create = true
        switch kind {
        case .symlinkFile:
            symlink(path, scratch.directory + "/link.db")
            opened = scratch.directory + "/link.db"
        case .symlinkDirectory:
            symlink(real, scratch.directory + "/linkdir")
            opened = scratch.directory + "/linkdir/keyway.db"
        case .wrongOwner:
            chown(path, 65534, 65534)
        case .groupReadable:
            chmod(path, 0o640)
        case .worldWritableDirectory:
            chmod(real, 0o777)
        case .hardLink:
            link(path, real + "/second-name.db")
        case .missing:
            opened = real + "/absent.db"
            create = false
        }
        let before = scratch.bytes(path)
        do {
            _ = try SQLiteStore(.ownedByCurrentUser(path: opened, create: create))
            Issue.record("an unsafe store (\(kind)) was opened")
        } catch {
            #expect(error.code == .storeFailure)
            #expect(error.reason.contains(kind.fragment), "\(error.reason)")
            #expect(error.reason.contains("Keyway store /"))
        }
        #expect(scratch.bytes(path) == before)
        chown(path, geteuid(), getegid())
        chmod(path, 0o600)
        chmod(real, 0o700)
        unlink(real + "/second-name.db")
        let fixed = try SQLiteStore(.ownedByCurrentUser(path: path, create: false))
        #expect(try fixed.enrollment(user: "alice", factor: .passcode)?.payload == [42])
    }

    @Test("the default options demand root, at /var/lib/keyway/keyway.db")
    func rootByDefault() {
        #expect(SQLiteStore.Options().owner == 0)
        #expect(SQLiteStore.Options().path == "/var/lib/keyway/keyway.db")
    }

    @Test("a file that is not a database is refused and left as it was")
    func garbage() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let junk = Data((0..<8192).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        _ = FileManager.default.createFile(
            atPath: scratch.store, contents: junk, attributes: [.posixPermissions: 0o600])
        #expect(throws: AuthenticationError(.storeFailure)) { try scratch.open() }
        do { _ = try scratch.open() } catch { #expect(error.reason.contains("damaged or not a database")) }
        #expect(scratch.bytes(scratch.store) == junk)
    }

    @Test("a truncated database fails closed: it never reads as an empty or different store")
    func truncated() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        do {
            let store = try scratch.open()
            for index in 0..<300 {
                try store.save(
                    Enrollment(
                        user: "user-\(index)", factor: .passcode, payload: Array(repeating: 1, count: 200),
                        changedAt: Timestamp(seconds: 1), changedBy: "root"))
            }
        }
        let size = try #require(scratch.bytes(scratch.store)).count
        truncate(scratch.store, off_t(size / 2))
        do {
            let store = try scratch.open(create: false)
            let check = try store.integrityCheck()
            #expect(check != "ok")
            var readable = 0
            for index in 0..<300 where (try? store.enrollment(user: "user-\(index)", factor: .passcode)) != nil {
                readable += 1
            }
            #expect(readable < 300)
        } catch {
            #expect(error.code == .storeFailure)
        }
    }

    @Test("a store written by a newer Keyway is refused, unchanged, with the versions named")
    func newerSchema() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        do { _ = try scratch.open() }
        #expect(shell("sqlite3 \(scratch.store) 'PRAGMA user_version = 99'") == 0)
        let before = scratch.bytes(scratch.store)
        do {
            _ = try scratch.open()
            Issue.record("a newer schema was opened")
        } catch {
            #expect(
                error.reason.contains(
                    "written by a newer Keyway (schema version 99; this version knows up to \(Schema.currentVersion))"))
        }
        #expect(scratch.bytes(scratch.store) == before)
    }

    @Test("another application's database is refused, not altered")
    func foreignDatabase() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        #expect(
            shell(
                "sqlite3 \(scratch.store) 'CREATE TABLE t(x); INSERT INTO t VALUES (1)' && chmod 600 \(scratch.store)")
                == 0)
        let before = scratch.bytes(scratch.store)
        do {
            _ = try scratch.open()
            Issue.record("a foreign database was opened")
        } catch {
            #expect(error.reason.contains("not a Keyway store"))
        }
        #expect(scratch.bytes(scratch.store) == before)
    }

    @Test(
        "an emptied store (0 bytes, or a database without Keyway's mark) is refused, never set up afresh",
        arguments: ["truncate -s 0", "sqlite3 {} 'PRAGMA journal_mode' && chmod 600"])
    func emptiedStoreRefused(damage: String) throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        do {
            let store = try scratch.open()
            try store.save(
                Enrollment(
                    user: "alice", factor: .gesture, payload: [1], changedAt: Timestamp(seconds: 1),
                    changedBy: "root"))
        }
        unlink(scratch.store + "-wal")
        unlink(scratch.store + "-shm")
        unlink(scratch.store)
        let command =
            damage.contains("{}")
            ? damage.replacingOccurrences(of: "{}", with: scratch.store)
                + " \(scratch.store)" : "\(damage) \(scratch.store) && chmod 600 \(scratch.store)"
        #expect(shell("touch \(scratch.store) && " + command) == 0)
        let before = scratch.bytes(scratch.store)
        for create in [false, true] {
            do {
                _ = try scratch.open(create: create)
                Issue.record("an emptied store was opened (create: \(create))")
            } catch {
                #expect(error.reason.contains("it is empty (no Keyway data"), "\(error.reason)")
            }
        }
        #expect(scratch.bytes(scratch.store) == before)
    }

    @Test("a store below a directory others can change is refused")
    func unsafeAncestor() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let open = scratch.directory + "/open"
        mkdir(open, 0o777)
        chmod(open, 0o777)
        mkdir(open + "/lib", 0o700)
        do {
            _ = try SQLiteStore(.ownedByCurrentUser(path: open + "/lib/keyway.db"))
            Issue.record("a store under a world-writable, non-sticky directory was opened")
        } catch {
            #expect(error.reason.contains("can be changed by other users"), "\(error.reason)")
        }
        chmod(open, 0o1777)  // sticky, as /tmp: nobody else can replace our entries
        _ = try SQLiteStore(.ownedByCurrentUser(path: open + "/lib/keyway.db"))
    }

    @Test("an older schema (Keyway's mark, version 0) is migrated forward")
    func migration() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        #expect(
            shell(
                "sqlite3 \(scratch.store) 'PRAGMA application_id = \(Schema.applicationID); PRAGMA user_version = 0' "
                    + "&& chmod 600 \(scratch.store)") == 0)
        let store = try scratch.open(create: false)
        #expect(try store.users() == [])
        #expect(try sqliteQuery(scratch.store, "PRAGMA user_version") == ["\(Schema.currentVersion)"])
    }

    @Test("a full disk fails the write with a clear error; everything committed before stays")
    func fullDisk() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let mount = try #require(scratch.mountTmpfs("small", size: "400k"), "a tmpfs mount needs root")
        defer { _ = shell("umount \(mount)") }
        let path = mount + "/keyway.db"
        let lines = try Probe.run(["fill", path, "u"])
        let committed = lines.filter { $0.hasPrefix("committed ") }.map { String($0.dropFirst(10)) }
        #expect(committed.count > 5)
        #expect(lines.last?.hasPrefix("error storeFailure") == true, "\(lines.suffix(2))")
        #expect(lines.last?.contains("the disk is full") == true, "\(lines.suffix(1))")
        let store = try SQLiteStore(.ownedByCurrentUser(path: path, create: false))
        #expect(try store.integrityCheck() == "ok")
        for user in committed { #expect(try store.enrollment(user: user, factor: .passcode)?.payload.count == 4096) }
    }

    @Test("a read-only filesystem fails writes with a clear error and keeps what is stored")
    func readOnly() throws {
        let scratch = Scratch()
        defer { scratch.remove() }
        let mount = try #require(scratch.mountTmpfs("ro", size: "4m"), "a tmpfs mount needs root")
        defer { _ = shell("umount \(mount)") }
        let path = mount + "/keyway.db"
        do {
            let store = try SQLiteStore(.ownedByCurrentUser(path: path))
            try store.save(
                Enrollment(
                    user: "alice", factor: .passcode, payload: [5], changedAt: Timestamp(seconds: 1),
                    changedBy: "root"))
        }
        #expect(remount(mount, "ro") == 0)
        do {
            let store = try SQLiteStore(.ownedByCurrentUser(path: path, create: false))
            try store.updateAttempts(user: "alice") { $0[.passcode].consecutiveFailures += 1 }
            Issue.record("a write on a read-only filesystem succeeded")
        } catch {
            #expect(error.code == .storeFailure)
            #expect(error.reason.contains("read-only") || error.reason.contains("cannot be opened"), "\(error.reason)")
        }
        #expect(remount(mount, "rw") == 0)
        let store = try SQLiteStore(.ownedByCurrentUser(path: path, create: false))
        #expect(try store.enrollment(user: "alice", factor: .passcode)?.payload == [5])
        #expect(try store.attempts(user: "alice")[.passcode].consecutiveFailures == 0)
    }
}

/// Runs sqlite3 and returns its output lines.
func sqliteQuery(_ path: String, _ sql: String) throws -> [String] {
    let process = Process()
    let pipe = Pipe()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    process.arguments = [path, sql]
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self).split(separator: "\n").map(String.init)
}
