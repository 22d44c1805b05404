import Foundation
import KeywayCore
import KeywayPlatform
import KeywayRuntime
import KeywayWire
import Testing

@testable import KeywayProcessFixture

/// keywayd's availability notes with the real keywayd and the real module (docs/ARCHITECTURE.md §10, "Notes"): the
/// prompt without a round trip, and each way a note could mislead: written by someone else, out of date, about
/// names nobody enrolled, a flood of names.
@Suite("availability notes", .serialized)
struct NotesTests {
    let fixture = PAMFixture()

    var notes: String { fixture.socket + ".notes" }

    func notePath(_ user: String) -> String { notes + "/" + AvailabilityNote.fileName(for: user)! }

    func note(_ user: String) -> AvailabilityNote? {
        guard let data = FileManager.default.contents(atPath: notePath(user)) else { return nil }
        return try? AvailabilityNote(decoding: Array(data))
    }

    /// The note keywayd writes after its answer, waited for (up to 30 s: a loaded machine) until `ready` holds of it.
    func awaitNote(_ user: String, _ ready: (AvailabilityNote?) -> Bool) -> AvailabilityNote? {
        let deadline = MonotonicClock.milliseconds() + 30_000
        while !ready(note(user)) && MonotonicClock.milliseconds() < deadline { usleep(5000) }
        return note(user)
    }

    @Test("after an authentication the account's note lists the passcode: the next prompt needs no keywayd")
    func promptFromNote() throws {
        defer { fixture.remove() }
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("passcode", "policy=passcode")
        let first = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(first.result == "PAM_SUCCESS", "\(first.text)")
        let written = awaitNote("alice") { $0 != nil }
        #expect(written?.lists(.passcode, concealing: true) == true, "\(String(describing: written))")
        #expect(written?.lists(.passcode, concealing: false) == true, "\(String(describing: written))")
        var info = stat()
        #expect(stat(notePath("alice"), &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(notes, &info) == 0 && info.st_uid == 0 && info.st_mode & 0o777 == 0o700)
        // keywayd killed, its socket left behind: the prompt comes from the note; only the answer finds keywayd gone.
        fixture.stopDaemon()
        let killed = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(killed.text.contains("prompt: Passcode: "), "\(killed.text)")
        #expect(killed.result == "PAM_AUTHINFO_UNAVAIL", "\(killed.text)")
        // No socket: keywayd is not there, so the note is not read and that is said before any prompt.
        unlink(fixture.socket)
        let gone = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(!gone.text.contains("prompt:"), "\(gone.text)")
        #expect(gone.result == "PAM_AUTHINFO_UNAVAIL", "\(gone.text)")
        // Stopped in order (SIGTERM, as systemd and kill stop it): keywayd takes its socket and its notes with it.
        fixture.startDaemon()
        let again = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(again.result == "PAM_SUCCESS", "\(again.text)")
        #expect(awaitNote("alice") { $0 != nil } != nil)
        guard let daemon = fixture.daemonProcess else {
            Issue.record("keywayd is not running")
            return
        }
        kill(daemon.processIdentifier, SIGTERM)
        daemon.waitUntilExit()
        #expect(daemon.terminationStatus == 0 && daemon.terminationReason == .exit)
        #expect(!FileManager.default.fileExists(atPath: notes), "\(fixture.daemonLog)")
        #expect(!FileManager.default.fileExists(atPath: fixture.socket))
        #expect(fixture.daemonLog.contains("stopping on signal \(SIGTERM)"), "\(fixture.daemonLog)")
        let stopped = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(!stopped.text.contains("prompt:"), "\(stopped.text)")
        #expect(stopped.result == "PAM_AUTHINFO_UNAVAIL", "\(stopped.text)")
    }

    @Test(
        "a throttled account's note drops the passcode; a note keywayd did not write is not read; a stale one is refused"
    )
    func misleadingNotes() throws {
        defer { fixture.remove() }
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("passcode", "policy=passcode")
        var throttled = false
        // Different wrong passcodes each time: a repeated one is not counted again.
        for run in 0..<8 where !throttled {
            let wrong = try harness(
                fixture, "passcode", "alice", answers("20000\(run)", "30000\(run)", "40000\(run)"))
            #expect(wrong.result != "PAM_SUCCESS", "\(wrong.text)")
            throttled = wrong.text.contains("Too many failed attempts")
        }
        #expect(throttled)
        let after = awaitNote("alice") { !($0?.lists(.passcode, concealing: true) ?? false) }
        #expect(after?.lists(.passcode, concealing: true) != true, "\(String(describing: after))")
        #expect(after?.lists(.passcode, concealing: false) != true, "\(String(describing: after))")
        // Asked, keywayd says so before any prompt.
        func expectToldFirst(_ why: String) throws {
            let run = try harness(fixture, "passcode", "alice", answers("739155"))
            #expect(!run.text.contains("prompt:"), "\(why): \(run.text)")
            #expect(run.text.contains("Too many failed attempts"), "\(why): \(run.text)")
            #expect(run.result != "PAM_SUCCESS", "\(why): \(run.text)")
        }
        try expectToldFirst("keywayd's own note")
        let forged = AvailabilityNote(user: "alice", concealing: [.passcode], plain: [.passcode]).encoded
        // A note owned by someone else, in keywayd's directory.
        _ = FileManager.default.createFile(atPath: notePath("alice"), contents: Data(forged))
        chown(notePath("alice"), 65534, 65534)
        try expectToldFirst("a note owned by uid 65534")
        // Root's note in a directory anyone may write.
        chown(notePath("alice"), 0, 0)
        chmod(notes, 0o777)
        try expectToldFirst("a directory of mode 0777")
        chmod(notes, 0o700)
        // A note about someone else under alice's name.
        let other = AvailabilityNote(user: "bob", concealing: [.passcode], plain: [.passcode]).encoded
        _ = FileManager.default.createFile(atPath: notePath("alice"), contents: Data(other))
        try expectToldFirst("bob's note")
        // Root's own note, out of date (as after an edit of the store behind keywayd's back): the person is asked,
        // and keywayd, which judges every attempt, refuses the right passcode with its reason.
        _ = FileManager.default.createFile(atPath: notePath("alice"), contents: Data(forged))
        let stale = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(stale.text.contains("prompt: Passcode: "), "\(stale.text)")
        #expect(stale.text.contains("Too many failed attempts"), "\(stale.text)")
        #expect(stale.result != "PAM_SUCCESS", "\(stale.text)")
        // The account's answer never trusts a note: keywayd says the account is locked.
        _ = FileManager.default.createFile(atPath: notePath("alice"), contents: Data(forged))
        let account = try harness(fixture, "passcode", "alice", ["--acct-only"])
        #expect(account.result == "PAM_PERM_DENIED", "\(account.text)")
        #expect(account.text.contains("Too many failed attempts"), "\(account.text)")
    }

    @Test("a flood of questions about one account writes its note once; the account still authenticates")
    func floodOfQuestions() throws {
        defer { fixture.remove() }
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("passcode", "policy=passcode")
        let client = DaemonVault(socketPath: fixture.socket, via: "keyway-tests")
        _ = client.availability(of: .passcode, for: UserContext(name: "alice"))
        guard awaitNote("alice", { $0 != nil }) != nil else {
            Issue.record("no note after the first question")
            return
        }
        var before = stat()
        stat(notePath("alice"), &before)
        // Four clients at once, 500 questions each: each answer is followed by a refresh, which finds the same note.
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<500 { _ = client.availability(of: .passcode, for: UserContext(name: "alice")) }
        }
        usleep(100_000)
        var after = stat()
        stat(notePath("alice"), &after)
        #expect(after.st_ino == before.st_ino && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec)
        let run = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(run.result == "PAM_SUCCESS", "\(run.text)")
    }

    @Test("a notes directory someone else made first: keywayd writes nothing there and the module reads nothing")
    func plantedDirectory() throws {
        defer { fixture.remove() }
        try fixture.enrollPasscode("alice", "739155")
        mkdir(notes, 0o755)
        chown(notes, 65534, 65534)
        let planted = notes + "/" + AvailabilityNote.fileName(for: "alice")!
        _ = FileManager.default.createFile(
            atPath: planted,
            contents: Data(AvailabilityNote(user: "alice", concealing: [.passcode], plain: [.passcode]).encoded))
        chown(planted, 65534, 65534)
        fixture.service("passcode", "policy=passcode unenrolled=fail")
        // keywayd says so once it has looked at the directory, which may be just after its socket answers.
        for _ in 0..<100 where !fixture.daemonLog.contains("availability notes are off") { usleep(50_000) }
        #expect(fixture.daemonLog.contains("availability notes are off"), "\(fixture.daemonLog)")
        // Switched off by its owner (told, without concealment), so keywayd says so before any prompt, whatever the
        // planted note claims.
        _ = try fixture.vault().set("passcode.enabled", to: false, of: "alice", by: "test")
        let run = try harness(fixture, "passcode", "alice", answers("739155"))
        #expect(!run.text.contains("prompt:"), "\(run.text)")
        #expect(run.result != "PAM_SUCCESS", "\(run.text)")
        usleep(100_000)
        let files = (try? FileManager.default.contentsOfDirectory(atPath: notes)) ?? []
        #expect(files == [AvailabilityNote.fileName(for: "alice")!], "\(files)")
    }

    @Test("a name with nothing enrolled gets the note an enrolled one gets, as a concealing prompt sees it")
    func concealed() throws {
        defer { fixture.remove() }
        try fixture.enrollPasscode("alice", "739155")
        fixture.service("passcode", "policy=passcode")
        for user in ["alice", "no-such-user-here"] {
            let run = try harness(fixture, "passcode", user, answers("000000", "000001", "000002"))
            #expect(run.text.contains("prompt: Passcode: "), "\(run.text)")
        }
        let enrolled = awaitNote("alice") { $0 != nil }
        let absent = awaitNote("no-such-user-here") { $0 != nil }
        #expect(enrolled != nil && enrolled?.concealing == absent?.concealing)
        #expect(enrolled?.plain == [.passcode])
        #expect(absent?.plain == [])
    }

    @Test("a flood of names keeps at most --notes notes, the latest; a new keywayd starts with none; 0 keeps none")
    func bounded() throws {
        defer { fixture.remove() }
        // Left by an earlier keywayd, in a directory others may enter: gone once this one serves, the directory
        // closed to them.
        mkdir(notes, 0o755)
        chmod(notes, 0o755)
        let leftover = notes + "/" + AvailabilityNote.fileName(for: "mallory")!
        _ = FileManager.default.createFile(
            atPath: leftover,
            contents: Data(AvailabilityNote(user: "mallory", concealing: [.passcode], plain: []).encoded))
        _ = try fixture.vault()
        fixture.startDaemon(["--notes", "8"])
        #expect(!FileManager.default.fileExists(atPath: leftover))
        var info = stat()
        #expect(stat(notes, &info) == 0 && info.st_mode & 0o777 == 0o700)
        let client = DaemonVault(socketPath: fixture.socket, via: "keyway-tests")
        let names = (0..<40).map { "flood-\($0)" }
        for name in names {
            let answer = client.availability(of: .passcode, for: UserContext(name: name, concealsEnrollment: true))
            #expect(answer == .available, "\(name): \(answer)")
        }
        // A name no account can have is refused, and gets no note.
        let refused = client.availability(of: .passcode, for: UserContext(name: "x/y", concealsEnrollment: true))
        #expect(refused != .available, "\(refused)")
        // Written after each answer, once its connection is closed, by one thread draining the names asked (at most
        // eight wait, the latest): waited for. Which eight are kept is nearly, not exactly, the last eight.
        _ = awaitNote(names.last!) { $0 != nil }
        var files: [String] = []
        waitUntil("the notes pruned to 8", seen: { "\(files)" }) {
            files = (try? FileManager.default.contentsOfDirectory(atPath: notes)) ?? []
            return files.count == 8
        }
        #expect(files.count == 8, "\(files)")
        #expect(note(names.last!) != nil, "\(files)")
        #expect(names.prefix(20).filter { note($0) != nil }.count <= 2, "\(files)")
        #expect(note("x/y") == nil && !files.contains(AvailabilityNote.fileName(for: "x/y")!), "\(files)")
        fixture.stopDaemon()
        // --notes 0: the directory and what an earlier keywayd left in it are removed, and nothing is written.
        fixture.startDaemon(["--notes", "0"])
        // keywayd removes it just after its socket answers (as it logs whether notes are on): waited for.
        for _ in 0..<100 where FileManager.default.fileExists(atPath: notes) { usleep(50_000) }
        #expect(!FileManager.default.fileExists(atPath: notes))
        _ = client.availability(of: .passcode, for: UserContext(name: "flood-0", concealsEnrollment: true))
        usleep(100_000)
        #expect(!FileManager.default.fileExists(atPath: notes))
    }
}
