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
                admin = try Fleet.open(cluster.ownerURI, cluster, host: "admin")
                #expect(try admin.migrate(granting: ["keyway_host"], parts: Fleet.parts) == 0)
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
                        payload: OneTimeCode(secret: secret).record,
                        changedAt: Timestamp(milliseconds: 1_700_000_000_000),
                        changedBy: "root via keyway enroll")
                )
            } catch {
                cluster.stop()
                throw error
            }
        }

        /// One security key as Plugins/FIDO2 stores it: a version byte, a count, then a name, an id, an algorithm,
        /// a public key (each field a 4-byte length and its bytes), a 4-byte signature counter (at byte 27 with these
        /// fields) and a clone mark.
        static func securityKey(publicKey: [UInt8] = [1, 2, 3], counter: UInt32, flag: UInt8 = 0) -> [UInt8] {
            func field(_ bytes: [UInt8]) -> [UInt8] { [0, 0, 0, UInt8(bytes.count)] + bytes }
            let counterBytes = (0..<4).map { UInt8(truncatingIfNeeded: counter >> (24 - 8 * $0)) }
            return [1, 1] + field(Array("key".utf8)) + field([9, 9]) + [0xFF, 0xFF, 0xFF, 0xF8] + field(publicKey)
                + counterBytes + [flag]
        }

        /// `bytes` as a bytea literal for psql.
        static func hex(_ bytes: [UInt8]) -> String {
            "'\\x" + bytes.map { String(format: "%02x", $0) }.joined() + "'"
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
        func check(_ code: [UInt8], user: String = "alice") throws(AuthenticationError) -> OneTimeCodeCheck? {
            try host.reserveOneTimeCode(user: user, factor: totp, code: code, remote: false)
            return try host.checkOneTimeCode(
                user: user, factor: totp, code: code, window: 1, remote: false, at: host.clock.now())
        }
        let now = host.clock.now()
        let step = generator.step(at: now)
        let right = try check(generator.code(step: step))
        #expect(right?.step.map { abs($0 - step) <= 1 } == true, "\(String(describing: right))")
        #expect(try check(generator.code(step: step))?.step == nil, "a code matches once")
        let wrongCode = generator.code(step: step + 7)
        let wrong = try check(wrongCode)
        let local = generator.check(wrongCode, window: 1, at: now)
        #expect(wrong?.step == nil)
        #expect(wrong?.fingerprint == local.fingerprint || generator.step(at: host.clock.now()) != step)
        #expect(try check(wrongCode, user: "bob") == nil)
        // No search for a code through the database: at most 8 wrong codes per step from this role and channel,
        // the ninth not booked, "not available".
        var refused: AuthenticationError? = nil
        for guess in 0..<40 where refused == nil {
            do {
                _ = try check(Array(String(100_000 + guess).utf8))
            } catch {
                refused = error
            }
        }
        #expect(refused?.code == .factorNotAvailable, "\(String(describing: refused))")
        #expect(refused?.reason.contains("8 wrong codes") == true, "\(String(describing: refused))")
    }

    @Test("as a host's role in psql: 1,000 checks by rollback, exception block or savepoint: at most the budget")
    func budgetsBind() throws {
        let granted = try Granted()
        defer { granted.fleet.cluster.stop() }
        // No guess is alice's code of a step near the run, so every answer is a wrong code's (counted).
        let generator = OneTimeCode(secret: granted.secret)
        let now = generator.step(at: StoreConformance.wallClock())
        var hers: Set<String> = []
        for step in now - 3...now + 60 { hers.insert(String(decoding: generator.code(step: step), as: UTF8.self)) }
        func codes(_ count: Int) -> [String] {
            var picked: [String] = []
            var index = 0
            while picked.count < count {
                let code = String(format: "%06d", index * 997 % 1_000_000)
                if !hers.contains(code) { picked.append(code) }
                index += 1
            }
            return picked
        }
        // Booked and checked in one transaction (a savepoint, then an exception block around each pair): the check
        // finds nothing committed, so it never answers.
        var script = ""
        for code in codes(100) {
            script +=
                "BEGIN; SAVEPOINT s; SELECT keyway_reserve_code('alice', 'totp', '\(code)', false); "
                + "RELEASE SAVEPOINT s; SELECT 'answer ' || coalesce(step::text, 'none') "
                + "FROM keyway_check_code('alice', 'totp', '\(code)', 1, false); ROLLBACK;\n"
        }
        script += """
            DO $$
            DECLARE
                answers integer := 0;
                found bigint;
            BEGIN
                FOR guess IN 0 .. 999 LOOP
                    BEGIN
                        PERFORM keyway_reserve_code('alice', 'totp', lpad((guess * 7)::text, 6, '0'), false);
                        SELECT step INTO found FROM keyway_check_code('alice', 'totp', lpad((guess * 7)::text, 6, '0'),
                            1, false);
                        answers := answers + 1;
                        RAISE EXCEPTION 'undo';
                    EXCEPTION WHEN OTHERS THEN
                        NULL;
                    END;
                END LOOP;
                RAISE NOTICE 'exception block answers: %', answers;
            END $$;

            """
        let inOne = try granted.fleet.cluster.psql(as: "keyway_host", script: script)
        #expect(!inOne.contains("answer "), "a check answered in the booking's transaction: \(inOne.prefix(2000))")
        #expect(inOne.contains("reserved and committed before this transaction"), "\(inOne.prefix(2000))")
        #expect(inOne.contains("exception block answers: 0"), "\(inOne.suffix(2000))")
        // Booked and committed, then each check rolled back, 1,000 times: the bookings past the budget are refused,
        // so at most 8 answers per step the run spans.
        script = ""
        for code in codes(1000) {
            script +=
                "BEGIN; SELECT keyway_reserve_code('alice', 'totp', '\(code)', false); COMMIT;\n"
                + "BEGIN; SELECT 'answer ' || coalesce(step::text, 'none') "
                + "FROM keyway_check_code('alice', 'totp', '\(code)', 1, false); ROLLBACK;\n"
        }
        let period: Int64 = 30_000
        let started = StoreConformance.wallClock().milliseconds / period
        let rolledBack = try granted.fleet.cluster.psql(as: "keyway_host", script: script)
        let steps = StoreConformance.wallClock().milliseconds / period - started + 1
        let answers = rolledBack.split(separator: "\n").filter { $0.hasPrefix("answer ") }.count
        #expect(answers >= 8 && answers <= 8 * steps, "\(answers) answers over \(steps) steps")
        #expect(
            rolledBack.contains("8 wrong codes of totp of alice from keyway_host (local)"), "\(rolledBack.prefix(800))")
        // The window is the database's.
        granted.refused(
            "SELECT * FROM keyway_check_code('alice', 'totp', '123456', 10, false)",
            "checks codes of totp within 1 steps either side, not 10")
        // The budget left no row a host could read, the record the checks read is not a host's to call, and the
        // old function is gone.
        granted.refused("SELECT * FROM code_reservations", "permission denied")
        granted.refused("SELECT * FROM keyway_code_record('alice', 'totp')", "permission denied")
        granted.refused("SELECT * FROM keyway_check_code('alice', 'totp', '123456', 1)", "does not exist")
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
        // Security keys (Granted.securityKey).
        let fido2 = try enroll("carol", "fido2", Granted.securityKey(counter: 5))
        refused(fido2, Granted.securityKey(publicKey: [6, 6, 6], counter: 6), "a key's public key replaced")
        refused(fido2, Granted.securityKey(counter: 4), "a counter moved back")
        refused(fido2, Granted.securityKey(counter: 6, flag: 1), "a counter raised and a mark set in one use")
        #expect(try swap(fido2, Granted.securityKey(counter: 6)), "a counter raised")
        let raised = try #require(try granted.host.enrollment(user: "carol", factor: FactorKind(rawValue: "fido2")))
        #expect(raised.payload == Granted.securityKey(counter: 6), "read back joined as the factor wrote it")
        #expect(try swap(raised, Granted.securityKey(counter: 6, flag: 1)), "a clone mark set")
        refused(
            try #require(try granted.host.enrollment(user: "carol", factor: FactorKind(rawValue: "fido2"))),
            Granted.securityKey(counter: 6), "a clone mark taken off")
        // Another factor's record is not a use at all.
        refused(
            try #require(try granted.admin.enrollment(user: "alice", factor: .gesture)), Array("mine".utf8),
            "a pattern replaced")
        let uses = try granted.fleet.cluster.sql(
            "SELECT count(*) FROM audit WHERE action = 'use' AND role = 'keyway_host'")
        #expect(uses == "4", "each use is one audit row in the host's role's name")
    }
}

extension PostgresLeastPrivilegeTests {
    @Test("the database's clock and names: no future success, no forged time or host, no empty or doubled use")
    func databaseClockAndNames() throws {
        let granted = try Granted()
        defer { granted.fleet.cluster.stop() }
        let nowMs = "(extract(epoch FROM clock_timestamp()) * 1000)::bigint"
        // A success 10 s ahead is refused; one within the 2 s margin for clock skew is not.
        try granted.host.updateAttempts(user: "alice", durable: true) { $0[.gesture].consecutiveFailures = 2 }
        granted.refused(
            "SELECT keyway_put_attempts('alice', 'gesture', 0, NULL, '', \(nowMs) + 10000)",
            "may not record a success of gesture of alice in the future")
        let (near, said) = granted.fleet.psql(
            as: "keyway_host", "SELECT keyway_put_attempts('alice', 'gesture', 0, NULL, '', \(nowMs) + 1000)")
        #expect(near == 0, "a success 1 s ahead: \(said)")
        // The administrator names the host's role; a use is then that host's, at the database's time, whatever the
        // caller writes.
        _ = try granted.fleet.cluster.sql("INSERT INTO host_names VALUES ('keyway_host', 'host-a')")
        let at = granted.admin.clock.now()
        func enroll(_ user: String, _ factor: String, _ payload: [UInt8]) throws -> Enrollment {
            let record = Enrollment(
                user: user, factor: FactorKind(rawValue: factor), payload: payload, changedAt: at, changedBy: "root")
            try granted.admin.save(record)
            return record
        }
        // A host writes through keyway_spend: the record it read (its fixed part, when it was made), one part by
        // name, from and to. It names no time, and the host it names is not the one written.
        func use(_ user: String, _ factor: String, _ name: String?, _ from: Int64, _ to: Int64) -> String {
            "SELECT keyway_spend('\(user)', '\(factor)', payload, changed_at, "
                + (name.map { "'\($0)'" } ?? "NULL") + ", \(from), \(to), 'host-b', 'root via keyway enroll', 'use', "
                + "NULL) FROM keyway_enrollment_rows('\(user)', '\(factor)')"
        }
        _ = try enroll("carol", "recovery", [1, 4] + Array("h1\nh2\nh3\nh4".utf8))
        let (spent, output) = granted.fleet.psql(as: "keyway_host", use("carol", "recovery", "h2", 1, 0))
        #expect(spent == 0 && output.contains("t"), "a real use: \(output)")
        let row = try granted.fleet.cluster.sql(
            "SELECT host || ' ' || role || ' ' || (at > \(nowMs) - 60000)::text FROM audit "
                + "WHERE account = 'carol' AND action = 'use'")
        #expect(row == "host-a keyway_host true", "the row names the role's host and the database's time: \(row)")
        #expect(
            try granted.admin.enrollment(user: "carol", factor: FactorKind(rawValue: "recovery"))?.payload
                == [1, 4] + Array("h1\nh3\nh4".utf8))
        // A spent code given back, a use that changes nothing, two uses of one code in one: each refused by rule.
        granted.refused(
            use("carol", "recovery", "h2", 0, 1), "may not take \"h2\" from 0 to 1 (its rule: falls by one)")
        granted.refused(use("carol", "recovery", "h1", 1, 1), "may not take \"h1\" from 1 to 1")
        granted.refused(use("carol", "recovery", "h1", 1, -1), "may not take \"h1\" from 1 to -1")
        let (again, againSaid) = granted.fleet.psql(as: "keyway_host", use("carol", "recovery", "h2", 1, 0))
        #expect(again == 0 && againSaid.contains("f"), "a code already spent is no use: \(againSaid)")
        let (nothing, nothingSaid) = granted.fleet.psql(as: "keyway_host", use("carol", "recovery", nil, 0, 0))
        #expect(nothing == 0 && nothingSaid.contains("t"), "a use that changes nothing: \(nothingSaid)")
        #expect(
            try granted.fleet.cluster.sql("SELECT count(*) FROM audit WHERE account = 'carol' AND action = 'use'")
                == "1", "only the real use wrote a row")
        // The rows and their rules are the administrator's: a host neither reads the table nor writes it.
        granted.refused("UPDATE spendables SET value = 1", "permission denied")
        granted.refused("UPDATE spendables SET rule = 'rises', step = 9, ceiling = 9", "permission denied")
        granted.refused(
            "INSERT INTO spendables VALUES ('carol', 'recovery', 9, 'mine', 1, 'falls', NULL, NULL)",
            "permission denied")
        granted.refused("DELETE FROM spendables", "permission denied")
        granted.refused(
            "SELECT keyway_spend('carol', 'recovery', payload, changed_at, 'h1', 1, 0, 'x', 'x', 'enroll', NULL) "
                + "FROM keyway_enrollment_rows('carol', 'recovery')", "recorded as a use or a mark, not enroll")

        _ = try enroll("carol", "fido2", Granted.securityKey(counter: 5))
        granted.refused(use("carol", "fido2", "counter of key", 5, 5), "may not take \"counter of key\" from 5 to 5")
        granted.refused(
            use("carol", "fido2", "counter of key", 5, 0xFFFF_FFFF),
            "from 5 to 4294967295 (its rule: rises by at most 65536, to at most 4294967295)")
        let (raised, raisedSaid) = granted.fleet.psql(
            as: "keyway_host", use("carol", "fido2", "counter of key", 5, 5 + 65_536))
        #expect(raised == 0 && raisedSaid.contains("t"), "a raise within the bound: \(raisedSaid)")
        granted.refused(
            use("carol", "fido2", "clone mark of key", 0, 2), "may not take \"clone mark of key\" from 0 to 2")
        // Pruning decides by its own constant: a name with 7 failures stays whatever the caller says decides.
        try granted.host.updateAttempts(user: "ghost", durable: true) { $0[.gesture].consecutiveFailures = 7 }
        let (_, pruned) = granted.fleet.psql(as: "keyway_host", "SELECT keyway_prune_counters(100, 0)")
        #expect(try granted.admin.attempts(user: "ghost")[.gesture].consecutiveFailures == 7, "pruned: \(pruned)")
        // The administrator's audit shows who wrote each row.
        let trail = try granted.admin.auditTrail(user: "carol").map(\.description)
        #expect(
            trail.contains { $0.contains(" use carol ") && $0.hasSuffix(" on host-a (role keyway_host)") }, "\(trail)")
    }
}

extension PostgresLeastPrivilegeTests {
    @Test("a host's uses are bounded: 120 a minute per role, the 121st refused, so no host floods the trail")
    func usesPerMinute() throws {
        let granted = try Granted()
        defer { granted.fleet.cluster.stop() }
        // One key; its signature counter raised by one per use.
        let keys = Granted.securityKey(counter: 5)
        try granted.admin.save(
            Enrollment(
                user: "carol", factor: FactorKind(rawValue: "fido2"), payload: keys,
                changedAt: granted.admin.clock.now(), changedBy: "root"))
        let output = try granted.fleet.cluster.psql(
            as: "keyway_host",
            script: """
                DO $$
                DECLARE
                    fixed bytea;
                    made bigint;
                    uses integer := 0;
                BEGIN
                    FOR counter IN 6 .. 200 LOOP
                        SELECT payload, changed_at INTO fixed, made FROM keyway_enrollment_rows('carol', 'fido2');
                        BEGIN
                            PERFORM keyway_spend('carol', 'fido2', fixed, made, 'counter of key', counter - 1, counter,
                                'anywhere', 'carol', 'use', NULL);
                            uses := uses + 1;
                        EXCEPTION WHEN OTHERS THEN
                            RAISE NOTICE 'refused: %', SQLERRM;
                            EXIT;
                        END;
                    END LOOP;
                    RAISE NOTICE 'uses: %', uses;
                END $$;
                """)
        #expect(output.contains("refused: more than 120 uses a minute from keyway_host"), "\(output)")
        #expect(output.contains("uses: 120"), "\(output)")
    }
}
