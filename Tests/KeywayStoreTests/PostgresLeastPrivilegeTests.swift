import Foundation
import KeywayCore
import KeywayTestSupport
import Testing

@testable import KeywayStore

/// A host's role as `keyway store migrate --grant` leaves it (keywayd(8), FLEETS, "Trust"): root on one host holds
/// that role's password, so what the role cannot do is what root on one host cannot do to the others.
@Suite("PostgreSQL store: a host's least privilege", .serialized)
struct PostgresLeastPrivilegeTests {
    /// A cluster migrated with keyway_host granted as a host (no table), an administrator's store (the owner) that
    /// enrolled alice's pattern and TOTP, and a store as the host sees it.
    struct Granted {
        let fleet: Fleet
        let admin: PostgresStore
        let host: PostgresStore
        let secret: [UInt8] = (0..<20).map { UInt8($0 * 7 + 3) }

        init() throws {
            let cluster = try PostgresCluster()
            do {
                admin = try PostgresStore(.init(uri: cluster.ownerURI, host: "admin", passfile: cluster.passfile))
                #expect(try admin.migrate(granting: ["keyway_host"]) == 0)
                host = try Fleet.open(cluster.uri, cluster, host: "host-a")
                fleet = Fleet(cluster: cluster, store: host)
                let at = admin.clock.now()
                try admin.save(
                    Enrollment(
                        user: "alice", factor: .gesture, payload: Array("a pattern's hash".utf8), changedAt: at,
                        changedBy: "root via keyway enroll"))
                try admin.save(
                    Enrollment(
                        user: "alice", factor: FactorKind(rawValue: "totp"),
                        payload: OneTimeCode(secret: secret).record, changedAt: at, changedBy: "root via keyway enroll")
                )
            } catch {
                cluster.stop()
                throw error
            }
        }

        /// psql as the host's role must fail, saying `reason`.
        func refused(_ statement: String, _ reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
            let (status, output) = fleet.psql(as: "keyway_host", statement)
            #expect(status != 0, "allowed to a host: \(statement): \(output)", sourceLocation: sourceLocation)
            #expect(output.contains(reason), "\(statement): \(output)", sourceLocation: sourceLocation)
        }
    }

    @Test("as a host's role in psql: no TOTP secret, no enrollment written, no counter reset, no audit row changed")
    func refusedByTheDatabase() throws {
        let granted = try Granted()
        defer { granted.fleet.cluster.stop() }
        try granted.host.updateAttempts(user: "alice", durable: true) { $0[.gesture].consecutiveFailures = 4 }
        let trail = try granted.fleet.cluster.sql("SELECT count(*) || ' ' || md5(string_agg(actor, ',')) FROM audit")
        let denied = "permission denied"
        // Reading a secret.
        granted.refused("SELECT payload FROM enrollments", denied)
        let (_, header) = granted.fleet.psql(
            as: "keyway_host", "SELECT encode(payload, 'hex') FROM keyway_enrollment_rows('alice', 'totp')")
        #expect(header.trimmingCharacters(in: .whitespacesAndNewlines) == "01061e", "a host reads \(header)")
        #expect(
            try granted.fleet.cluster.sql("SELECT length(payload) FROM enrollments WHERE factor = 'totp'") == "23")
        // Writing an enrollment: a known pattern for root, or alice's replaced.
        granted.refused("INSERT INTO enrollments VALUES ('root', 'gesture', '\\x00', 0, 'intruder')", denied)
        granted.refused("UPDATE enrollments SET payload = '\\x00'", denied)
        granted.refused("DELETE FROM enrollments", denied)
        granted.refused(
            "SELECT keyway_replace(account, factor, payload, '\\x00', changed_at, changed_by, 0, 'host-a', 'x', "
                + "'use', NULL) FROM keyway_enrollment_rows('alice', 'gesture')", "may not change the gesture of alice")
        // Resetting a counter.
        granted.refused("UPDATE attempts SET failures = 0", denied)
        granted.refused("DELETE FROM attempts", denied)
        granted.refused(
            "SELECT keyway_put_attempts('alice', 'gesture', 0, NULL, '', NULL)",
            "lowers the counter of gesture of alice only with a success")
        granted.refused(
            "SELECT keyway_put_attempts('alice', 'gesture', 0, NULL, '', 9000000000000)",
            "may not record a success of gesture of alice in the future")
        // The audit trail.
        granted.refused("DELETE FROM audit", denied)
        granted.refused("UPDATE audit SET actor = 'nobody'", denied)
        granted.refused("INSERT INTO audit (at, actor, account, action) VALUES (0, 'x', 'alice', 'enroll')", denied)
        granted.refused("TRUNCATE audit", denied)
        // Becoming someone else, or changing the rules.
        granted.refused("SET ROLE keyway_owner", "permission denied to set role")
        granted.refused(
            "CREATE OR REPLACE FUNCTION keyway_privileged() RETURNS boolean AS 'SELECT true' LANGUAGE sql", denied)
        granted.refused("DELETE FROM sealed", denied)
        // Nothing changed.
        #expect(try granted.admin.attempts(user: "alice")[.gesture].consecutiveFailures == 4)
        #expect(
            try granted.fleet.cluster.sql("SELECT count(*) || ' ' || md5(string_agg(actor, ',')) FROM audit") == trail)
        #expect(
            try granted.admin.enrollment(user: "alice", factor: .gesture)?.payload == Array("a pattern's hash".utf8))
        // What a host does as keywayd is refused the same way, with the reason.
        do {
            try granted.host.save(
                Enrollment(
                    user: "root", factor: .gesture, payload: [0], changedAt: Timestamp(milliseconds: 0),
                    changedBy: "intruder"))
            Issue.record("a host enrolled")
        } catch {
            #expect(error.reason.contains("may not"), "\(error.reason)")
        }
        #expect(throws: AuthenticationError.self) {
            try granted.host.resetAttempts(
                user: "alice", factor: nil, by: Attribution("intruder", at: .init(milliseconds: 0)))
        }
        #expect(try granted.host.pruneAudit(keeping: 0) == 0)
        #expect(
            try granted.fleet.cluster.sql("SELECT count(*) || ' ' || md5(string_agg(actor, ',')) FROM audit") == trail)
    }

    @Test("a host's role counts, succeeds, refunds a repeat, and checks a code whose secret it never holds")
    func hostStillAuthenticates() throws {
        let granted = try Granted()
        defer { granted.fleet.cluster.stop() }
        let host = granted.host
        let gate = AttemptGate(factor: .gesture, store: host, clock: host.clock, schedule: .gesture)
        // Three wrong patterns, one of them repeated (refunded), from both channels; then a success clears all.
        for (fingerprint, channel) in [([1], AttemptBook.Channel.local), ([2], .remote), ([1], .local)] {
            let reservation = try gate.reserve(for: "alice", in: channel)
            _ = try gate.settleFailure(reservation, fingerprint: fingerprint.map { UInt8($0) })
        }
        var book = try host.attempts(user: "alice")
        #expect(book.viewed(from: .local)[.gesture].consecutiveFailures == 1, "the repeat was refunded: \(book)")
        #expect(book.viewed(from: .remote)[.gesture].consecutiveFailures == 1)
        let reservation = try gate.reserve(for: "alice", in: .remote)
        try gate.settleSuccess(reservation)
        book = try host.attempts(user: "alice")
        #expect(book.viewed(from: .local)[.gesture].consecutiveFailures == 0, "\(book)")
        #expect(book.viewed(from: .remote)[.gesture].consecutiveFailures == 0, "\(book)")
        #expect(book.accountStreak == 0)
        #expect(
            try granted.fleet.cluster.sql(
                "SELECT DISTINCT lowered_by FROM attempts WHERE account = 'alice' AND lowered_by IS NOT NULL")
                == "keyway_host", "each fall names the role that made it")
        // The database checks a code as the host's own store would, and gives the same fingerprint for a wrong one.
        let totp = FactorKind(rawValue: "totp")
        let generator = OneTimeCode(secret: granted.secret)
        let now = host.clock.now()
        let step = generator.step(at: now)
        let right = try host.checkOneTimeCode(
            user: "alice", factor: totp, code: generator.code(step: step), window: 1, at: now)
        #expect(right?.step.map { abs($0 - step) <= 1 } == true, "\(String(describing: right))")
        let wrongCode = generator.code(step: step + 7)
        let wrong = try host.checkOneTimeCode(user: "alice", factor: totp, code: wrongCode, window: 1, at: now)
        let local = generator.check(wrongCode, window: 1, at: now)
        #expect(wrong?.step == nil)
        #expect(wrong?.fingerprint == local.fingerprint || generator.step(at: host.clock.now()) != step)
        #expect(try host.checkOneTimeCode(user: "bob", factor: totp, code: wrongCode, window: 1, at: now) == nil)
        // No search for a code through the database: at most 16 checks of one account's code in one step.
        var refused: AuthenticationError? = nil
        for _ in 0..<40 where refused == nil {
            do {
                _ = try host.checkOneTimeCode(user: "alice", factor: totp, code: wrongCode, window: 1, at: now)
            } catch {
                refused = error
            }
        }
        #expect(refused?.reason.contains("more than 16 codes") == true, "\(String(describing: refused))")
    }
}

extension PostgresLeastPrivilegeTests {
    @Test("a host spends one use of a recovery set, a pass or a security key, and can put nothing new in its place")
    func spendsOnlyUses() throws {
        let granted = try Granted()
        defer { granted.fleet.cluster.stop() }
        let at = granted.admin.clock.now()
        func enroll(_ user: String, _ factor: String, _ payload: [UInt8]) throws -> Enrollment {
            let record = Enrollment(
                user: user, factor: FactorKind(rawValue: factor), payload: payload, changedAt: at, changedBy: "root")
            try granted.admin.save(record)
            return record
        }
        func swap(_ record: Enrollment, _ payload: [UInt8]) throws -> Bool {
            var new = record
            new.payload = payload
            return try granted.host.replace(
                record, with: new,
                recording: AuditEntry(
                    at: at, actor: record.user, user: record.user, action: .use, factor: record.factor))
        }
        func refused(_ record: Enrollment, _ payload: [UInt8], _ what: String) {
            #expect(throws: AuthenticationError.self, "\(what) was allowed to a host") { try swap(record, payload) }
        }
        // Recovery: a version byte, the count made, hashes one per line.
        let recovery = try enroll("carol", "recovery", [1, 3] + Array("h1\nh2\nh3".utf8))
        refused(recovery, [1, 3] + Array("h1\nh2\nh3\nmine".utf8), "a code added to a set")
        refused(recovery, [1, 3] + Array("mine".utf8), "a set replaced")
        #expect(try swap(recovery, [1, 3] + Array("h1\nh3".utf8)), "a code spent")
        // A pass: six lines, the fourth the uses left.
        let pass = try enroll("carol", "pass", Array("1\ngesture\n9999999999999\n2\n2\n$argon2id$x".utf8))
        refused(pass, Array("1\ngesture\n9999999999999\n9\n9\n$argon2id$x".utf8), "uses added to a pass")
        refused(pass, Array("1\ngesture\n9999999999999\n1\n2\n$argon2id$mine".utf8), "a pass's hash changed")
        #expect(try swap(pass, Array("1\ngesture\n9999999999999\n1\n2\n$argon2id$x".utf8)), "a use spent")
        // Security keys: version, count, then name, id, algorithm, public key, counter, flag.
        func keys(publicKey: [UInt8], counter: UInt8, flag: UInt8) -> [UInt8] {
            func field(_ bytes: [UInt8]) -> [UInt8] { [0, 0, 0, UInt8(bytes.count)] + bytes }
            return [1, 1] + field(Array("key".utf8)) + field([9, 9]) + [0xFF, 0xFF, 0xFF, 0xF8] + field(publicKey)
                + [0, 0, 0, counter, flag]
        }
        let fido2 = try enroll("carol", "fido2", keys(publicKey: [1, 2, 3], counter: 5, flag: 0))
        refused(fido2, keys(publicKey: [6, 6, 6], counter: 6, flag: 0), "a key's public key replaced")
        refused(fido2, keys(publicKey: [1, 2, 3], counter: 4, flag: 0), "a counter moved back")
        #expect(try swap(fido2, keys(publicKey: [1, 2, 3], counter: 6, flag: 1)), "a counter raised and a mark set")
        // Another factor's record is not a use at all.
        refused(
            try #require(try granted.admin.enrollment(user: "alice", factor: .gesture)), Array("mine".utf8),
            "a pattern replaced")
        let uses = try granted.fleet.cluster.sql(
            "SELECT count(*) FROM audit WHERE action = 'use' AND role = 'keyway_host'")
        #expect(uses == "3", "each use is one audit row in the host's role's name")
    }
}
