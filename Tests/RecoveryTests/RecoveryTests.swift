import Foundation
import KeywayCore
import KeywayCrypto
import KeywayStore
import KeywayTestSupport
import Synchronization
import Testing

@testable import KeywayRecovery

/// Recovery codes over the real Argon2id hasher and a real SQLite store: ten codes of 59 bits, shown once, stored
/// only as hashes, each accepted once (also when two keepers race for it), counted as every factor is.
@Suite("recovery codes")
struct RecoveryTests {
    let directory: String
    let store: SQLiteStore
    let clock = ManualClock(Timestamp(seconds: 1_800_000_000))
    let hasher: Argon2idHasher
    let keeper: RecoveryKeeper
    let vault: LocalVault

    init() throws {
        var template = Array("/tmp/keyway-recovery-test.XXXXXX".utf8CString)
        directory = String(cString: mkdtemp(&template)!)
        store = try SQLiteStore(.ownedByCurrentUser(path: directory + "/keyway.db"))
        hasher = try Argon2idHasher(cost: .minimum)
        keeper = RecoveryKeeper(store: store, clock: clock, hasher: hasher)
        vault = LocalVault(store: store, clock: clock, keepers: [keeper])
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// A new set for `user`, confirmed with its third code; the codes as written.
    func enroll(_ user: String = "alice") throws -> [String] {
        let codes = String(decoding: try vault.offer(.recovery, for: user, by: "root"), as: UTF8.self)
            .split(separator: "\n").map(String.init)
        try vault.enroll(
            .secret(Secret(copying: Array(codes[2].utf8))), of: .recovery, for: user, label: nil, by: "root")
        return codes
    }

    func verify(_ code: String, user: String = "alice") throws -> Verdict {
        try vault.verify(.secret(Secret(copying: Array(code.utf8))), of: .recovery, for: UserContext(name: user))
    }

    @Test("a code: 12 characters of an alphabet without 0, 1, i, l, o (at least 50 bits), written in groups of four")
    func codeForm() throws {
        let alphabet = String(decoding: RecoveryCode.alphabet, as: UTF8.self)
        for ambiguous in "01ilo" { #expect(!alphabet.contains(ambiguous)) }
        #expect(Set(RecoveryCode.alphabet).count == RecoveryCode.alphabet.count)
        let bits = Double(RecoveryCode.length) * log2(Double(RecoveryCode.alphabet.count))
        #expect(bits >= 50, "\(bits) bits")
        var generator = SystemRandomNumberGenerator()
        let codes = RecoveryCode.generate(2000) { count in
            (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        #expect(Set(codes).count == 2000)
        // Every character of the alphabet is drawn, about equally (24,000 draws: 774 each expected).
        var seen: [UInt8: Int] = [:]
        for code in codes { for byte in code { seen[byte, default: 0] += 1 } }
        #expect(seen.count == RecoveryCode.alphabet.count)
        #expect(seen.values.allSatisfy { (600...950).contains($0) }, "\(seen.values.sorted())")
        let written = RecoveryCode.written(codes[0])
        #expect(written.count == 14 && written.split(separator: "-").map(\.count) == [4, 4, 4], "\(written)")
        // Typed in capitals, without hyphens, with spaces: the same code. An ambiguous character is refused.
        let canonical = Secret(copying: codes[0])
        for typed in [
            written.uppercased(), written.replacingOccurrences(of: "-", with: ""),
            written.replacingOccurrences(of: "-", with: " "),
        ] {
            #expect(try RecoveryCode.normalize(Secret(copying: Array(typed.utf8))).get() == canonical, "\(typed)")
        }
        for typed in ["abcd-efgh-jk0m", "abcd-efgh-jk", "abcd-efgh-jkmn-p", ""] {
            guard case .failure = RecoveryCode.normalize(Secret(copying: Array(typed.utf8))) else {
                Issue.record("\(typed) was accepted")
                continue
            }
        }
    }

    @Test("a set is saved only when one of its codes is typed back; each code then works once; status counts them")
    func enrollAndUse() throws {
        defer { remove() }
        #expect(throws: AuthenticationError(.enrollmentRefused)) {
            try vault.enroll(
                .secret(Secret(copying: Array("abcd-efgh-jkmn".utf8))), of: .recovery, for: "alice",
                label: nil, by: "root")
        }
        let offered = String(decoding: try vault.offer(.recovery, for: "alice", by: "root"), as: UTF8.self)
        let codes = offered.split(separator: "\n").map(String.init)
        #expect(codes.count == 10)
        #expect(throws: AuthenticationError(.enrollmentRefused), "a code of no set") {
            try vault.enroll(
                .secret(Secret(copying: Array("abcd-efgh-jkmn".utf8))), of: .recovery, for: "alice",
                label: nil, by: "root")
        }
        #expect(try store.enrollment(user: "alice", factor: .recovery) == nil)
        try vault.enroll(
            .secret(Secret(copying: Array(codes[4].utf8))), of: .recovery, for: "alice", label: nil, by: "root")
        #expect(try vault.status(of: "alice").first?[.recovery]?.usesLeft == 10)
        #expect(try vault.status(of: "alice").first?[.recovery]?.nextUse == 1)
        // Asked in order (NIST's look-up secrets): code 1 first; code 5, the one typed back, is refused at code 1's
        // prompt, counted as one failure, and left for its turn.
        #expect(try verify(codes[4]) == .failure(.mismatch), "not its turn")
        #expect(try store.attempts(user: "alice")[.recovery].consecutiveFailures == 1)
        #expect(try verify(codes[0].uppercased()) == .success)
        #expect(try verify(codes[0]) == .failure(.mismatch), "once")
        #expect(try vault.status(of: "alice").first?[.recovery]?.nextUse == 2)
        #expect(try vault.status(of: "alice").first?[.recovery]?.usesLeft == 9)
        let uses = try store.auditTrail(user: "alice").filter { $0.action == .use }
        #expect(uses.count == 1 && uses.last?.detail == "recovery code 1, 9 of 10 left", "\(uses)")
        for code in codes.dropFirst() { #expect(try verify(code) == .success) }
        #expect(try vault.status(of: "alice").first?[.recovery]?.usesLeft == 0)
        #expect(vault.availability(of: .recovery, for: UserContext(name: "alice")) == .notEnrolled)
    }

    @Test("each code has its own salt and hash, numbered; a set made before numbering takes any code, once each")
    func saltPerCode() throws {
        defer { remove() }
        _ = try enroll()
        let record = try #require(try store.enrollment(user: "alice", factor: .recovery))
        #expect(record.payload.prefix(2) == [2, 10])
        let lines = String(decoding: record.payload.dropFirst(2), as: UTF8.self).split(separator: "\n")
        #expect(lines.map { $0.split(separator: " ").first.map(String.init) } == (1...10).map { "\($0)" })
        // "$argon2id$v=19$m=…,t=…,p=…$SALT$HASH": ten salts, all different.
        let salts = Set(lines.compactMap { $0.split(separator: "$").dropLast().last.map(String.init) })
        #expect(salts.count == 10, "\(lines)")
        // A set as Keyway stored it before: one salt for the set, no numbers. Any code, in any order, once.
        let old = RecoveryCode.generate(10, random: randomBytes)
        let hashes = try hasher.hashSet(old.map { Secret(copying: $0) })
        try store.save(
            Enrollment(
                user: "bob", factor: .recovery, payload: [1, 10] + Array(hashes.joined(separator: "\n").utf8),
                changedAt: clock.now(), changedBy: "root"))
        #expect(try vault.status(of: "bob").first?[.recovery]?.nextUse == nil)
        let written = old.map(RecoveryCode.written)
        #expect(try verify(written[6], user: "bob") == .success)
        #expect(try verify(written[2], user: "bob") == .success)
        #expect(try verify(written[6], user: "bob") == .failure(.mismatch))
        #expect(try vault.status(of: "bob").first?[.recovery]?.usesLeft == 8)
    }

    @Test("the prompt names the next code's number, except where enrollment is concealed")
    func prompts() throws {
        defer { remove() }
        let codes = try enroll()
        #expect(try verify(codes[0]) == .success)
        #expect(try verify(codes[1]) == .success)
        let person = RecoveryAuthenticator(vault: vault)
        #expect(person.prompt(for: UserContext(name: "alice")) == "Recovery code 3: ")
        // Concealed, the number would tell that the name has codes and how many were used.
        let next = RecoveryAuthenticator.nextPrompt
        #expect(person.prompt(for: UserContext(name: "alice", concealsEnrollment: true)) == next)
        #expect(person.prompt(for: UserContext(name: "nobody", concealsEnrollment: true)) == next)
    }

    @Test("a new set voids the old one; a wrong code is counted and locks as every factor's does")
    func newSetAndCounting() throws {
        defer { remove() }
        let old = try enroll()
        let new = try enroll()
        #expect(try verify(old[0]) == .failure(.mismatch))
        #expect(try verify(new[0]) == .success)
        #expect(try store.attempts(user: "alice")[.recovery].consecutiveFailures == 0)
        for index in 1...4 { _ = try verify(old[index]) }
        #expect(try store.attempts(user: "alice")[.recovery].consecutiveFailures == 4)
        #expect(try verify(old[4]) == .failure(.repeatedMismatch), "the same wrong code again is not counted twice")
        _ = try verify(old[5])
        #expect(throws: AuthenticationError.self) { try verify(new[1]) }
        if case .lockedOut = vault.availability(of: .recovery, for: UserContext(name: "alice")) {
        } else {
            Issue.record("five wrong codes did not throttle")
        }
    }

    @Test("the store holds no code: its file and every payload are searched for each code, written and canonical")
    func noPlaintext() throws {
        defer { remove() }
        let codes = try enroll()
        #expect(try verify(codes[0]) == .success)
        let file = try Data(contentsOf: URL(fileURLWithPath: directory + "/keyway.db"))
        var everything = file
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) where name != "keyway.db" {
            everything += try Data(contentsOf: URL(fileURLWithPath: directory + "/" + name))
        }
        #expect(everything.count > 0)
        for code in codes {
            for form in [code, code.replacingOccurrences(of: "-", with: "")] {
                #expect(everything.range(of: Data(form.utf8)) == nil, "\(form) is in the store")
            }
        }
        let payload = try #require(try store.enrollment(user: "alice", factor: .recovery)).payload
        #expect(String(decoding: payload.dropFirst(2), as: UTF8.self).hasPrefix("2 $argon2id$"), "code 1 spent")
    }

    @Test("two keepers on one store race with the same code 20 times: exactly one wins each time")
    func race() throws {
        defer { remove() }
        let other = RecoveryKeeper(
            store: try SQLiteStore(.ownedByCurrentUser(path: directory + "/keyway.db")), clock: clock, hasher: hasher)
        let vaults = [vault, LocalVault(store: other.store, clock: clock, keepers: [other])]
        for round in 0..<20 {
            let codes = try enroll()
            let wins = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: 2) { index in
                let verdict = try? vaults[index].verify(
                    .secret(Secret(copying: Array(codes[0].utf8))), of: .recovery,
                    for: UserContext(name: "alice"))
                if verdict == .success { wins.withLock { $0 += 1 } }
            }
            #expect(wins.withLock { $0 } == 1, "round \(round)")
            try store.resetAttempts(user: "alice", factor: nil, by: Attribution("test", at: clock.now()))
        }
    }
}
