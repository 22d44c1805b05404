import Foundation
import KeywayCore
import KeywayCrypto
import KeywayFIDO2
import KeywayRecovery
import KeywayTOTP
import KeywayTestSupport
import Testing

@testable import KeywayStore

/// A fleet's database made by an earlier Keyway (schema version 3, and today's 4), with what that Keyway wrote in it,
/// moved forward by `keyway store migrate`: nothing lost, and each single-use secret still works once.
@Suite("PostgreSQL store: migrating a fleet forward", .serialized)
struct PostgresMigrationTests {
    /// The grants of schema version 3 (PostgresSchema.grants as it was): the old keyway_check_code among them.
    static let version3Grants = """
        GRANT SELECT ON keyway_schema TO keyway_host;
        GRANT EXECUTE ON FUNCTION keyway_privileged(), keyway_enrollment_rows(text, text), keyway_enrollments_of(text),
            keyway_attempt_rows(text), keyway_preference_rows(text),
            keyway_put_attempts(text, text, integer, bigint, bytea, bigint), keyway_check_code(text, text, text, integer),
            keyway_replace(text, text, bytea, bytea, bigint, text, bigint, text, text, text, text),
            keyway_prune_counters(integer, integer), keyway_failing_accounts(integer, integer) TO keyway_host;
        """

    /// The grants of schema version 4 (PostgresSchema.grants as today's main, before migration 5, wrote them).
    static let version4Grants = """
        GRANT SELECT ON keyway_schema TO keyway_host;
        GRANT EXECUTE ON FUNCTION keyway_privileged(), keyway_enrollment_rows(text, text), keyway_enrollments_of(text),
            keyway_attempt_rows(text), keyway_preference_rows(text),
            keyway_put_attempts(text, text, integer, bigint, bytea, bigint),
            keyway_reserve_code(text, text, text, boolean), keyway_check_code(text, text, text, integer, boolean),
            keyway_replace(text, text, bytea, bytea, bigint, text, bigint, text, text, text, text),
            keyway_prune_counters(integer, integer), keyway_failing_accounts(integer, integer) TO keyway_host;
        """

    @Test("a version-3 fleet migrated: enrollments, counters and a used code kept; a code, a recovery use, a key's use")
    func fromVersion3() throws { try migrated(from: 3, grants: Self.version3Grants) }

    @Test("today's fleet (version 4) migrated: records split, nothing lost; a code, a recovery code, a key's assertion")
    func fromVersion4() throws { try migrated(from: 4, grants: Self.version4Grants) }

    @Test("the store's own SQL names no factor: TOTP's comes from its folder, and no function parses a record")
    func factorsComposed() throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        // A function whose source names a factor in quotes reads that factor's record by name.
        let naming = """
            SELECT coalesce(string_agg(p.proname, ',' ORDER BY p.proname), 'none') FROM pg_proc p
            JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = current_schema() AND p.prosrc ~ '''(totp|recovery|pass|fido2|gesture|biometric)'''
            """
        let codeFunctions = "SELECT count(*) FROM pg_proc WHERE proname IN ('keyway_reserve_code', 'keyway_check_code')"
        let owner = try Fleet.open(cluster.ownerURI, cluster, host: "admin")
        // The store's migrations alone: no factor named, nothing sealed, no code to check.
        #expect(try owner.migrate(granting: [], parts: []) == 0)
        #expect(try cluster.sql(naming) == "none")
        #expect(try cluster.sql(codeFunctions) == "0")
        #expect(try cluster.sql("SELECT count(*) FROM sealed") == "0")
        // With TOTP's part, as keyway store migrate composes it: its functions, and still none that names a factor.
        let fleet = try PostgresCluster()
        defer { fleet.stop() }
        #expect(try Fleet.open(fleet.ownerURI, fleet, host: "admin").migrate(granting: [], parts: Fleet.parts) == 0)
        #expect(try fleet.sql(naming) == "none")
        #expect(try fleet.sql(codeFunctions) == "2")
        #expect(try fleet.sql("SELECT factor || ' ' || header || ' ' || code_window FROM sealed") == "totp 3 1")
    }

    /// A database at schema `version`, granted to keyway_host as that version did, holding what that Keyway wrote,
    /// moved forward by `keyway store migrate` as the owner: every record reads back as it was written, every counter
    /// and audit row is kept, and as the host each factor still works once.
    func migrated(from version: Int, grants: String) throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        var schema =
            "CREATE TABLE keyway_schema (version integer NOT NULL, "
            + "one boolean PRIMARY KEY DEFAULT true CHECK (one)); INSERT INTO keyway_schema VALUES (\(version));"
        for migration in PostgresSchema.migrations(with: Fleet.parts).prefix(version) {
            schema += migration.replacing("@schema", with: "public")
        }
        _ = try cluster.sql(schema + grants)
        // What that Keyway wrote: alice's TOTP (the code she used now marked as that version marked it), her pattern
        // with 3 failures, carol's recovery set (three real codes), security key and pass.
        let secret = (0..<20).map { UInt8($0 * 5 + 1) }
        let generator = OneTimeCode(secret: secret)
        let used = generator.step(at: StoreConformance.wallClock())
        let made: Int64 = 1_700_000_000_000
        let hex = PostgresLeastPrivilegeTests.Granted.hex
        let keys = PostgresLeastPrivilegeTests.Granted.securityKey(counter: 5)
        let hasher = try Argon2idHasher(cost: .minimum)
        var seed: UInt8 = 0
        let codes = RecoveryCode.generate(3) { count in
            (0..<count).map { _ in
                seed &+= 37
                return seed
            }
        }
        let recovery: [UInt8] =
            [1, 3] + Array(try hasher.hashSet(codes.map { Secret(copying: $0) }).joined(separator: "\n").utf8)
        let pass = Array("1\ngesture\n9999999999999\n2\n2\n$argon2id$x".utf8)
        let gesture = Array("a pattern's hash".utf8)
        let once =
            version == 3
            ? "INSERT INTO code_checks VALUES ('alice', 'totp', \(used), 4);"
            : "INSERT INTO code_marks VALUES ('alice', 'totp', \(used), \(made));"
        _ = try cluster.sql(
            """
            INSERT INTO enrollments VALUES
                ('alice', 'totp', \(hex(generator.record)), \(made), 'root via keyway enroll'),
                ('alice', 'gesture', \(hex(gesture)), \(made), 'root via keyway enroll'),
                ('carol', 'recovery', \(hex(recovery)), \(made), 'root via keyway enroll'),
                ('carol', 'fido2', \(hex(keys)), \(made), 'root via keyway enroll'),
                ('carol', 'pass', \(hex(pass)), \(made), 'root via keyway pass');
            INSERT INTO attempts (account, factor, failures, recent_mismatches, last_success) VALUES
                ('alice', 'totp', 0, '', \(generator.start(of: used).milliseconds)),
                ('alice', 'gesture', 3, '\\x0201020103', NULL);
            \(once)
            INSERT INTO audit (at, host, actor, account, action, factor) VALUES
                (\(made), 'host-a', 'root via keyway enroll', 'alice', 'enroll', 'totp');
            """)
        let rows = """
            SELECT (SELECT string_agg(concat_ws(' ', account, factor, changed_at, changed_by), ','
                ORDER BY account, factor) FROM enrollments)
            || ' | ' || (SELECT string_agg(concat_ws(' ', account, factor, failures, last_failure,
                encode(recent_mismatches, 'hex'), last_success), ',' ORDER BY account, factor) FROM attempts)
            || ' | ' || (SELECT string_agg(concat_ws(' ', id, at, host, actor, account, action, factor), ','
                ORDER BY id) FROM audit)
            """
        let before = try cluster.sql(rows)
        let admin = try Fleet.open(cluster.ownerURI, cluster, host: "admin")
        // Migrated with no --grant: the host's role keeps what it could do, through the new functions.
        #expect(try admin.migrate(granting: [], parts: Fleet.parts) == version)
        #expect(try cluster.sql("SELECT version FROM keyway_schema") == String(PostgresSchema.currentVersion))
        #expect(try cluster.sql(rows) == before, "every enrollment, counter and audit row as it was")
        #expect(try cluster.sql("SELECT step FROM code_marks WHERE account = 'alice'") == String(used))
        // Each record split into its spendable rows, and read back as the factor wrote it.
        #expect(
            try cluster.sql("SELECT string_agg(factor || ':' || value, ',' ORDER BY factor, position) FROM spendables")
                == "fido2:5,fido2:0,pass:2,recovery:1,recovery:1,recovery:1")
        #expect(
            try cluster.sql("SELECT encode(payload, 'escape') FROM enrollments WHERE factor = 'pass'").contains("\n-\n")
        )
        let written: [String: [UInt8]] = [
            "totp": generator.record, "gesture": gesture, "recovery": recovery, "fido2": keys, "pass": pass,
        ]
        for user in ["alice", "carol"] {
            for record in try admin.enrollments(user: user) {
                #expect(record.payload == written[record.factor.rawValue], "\(user)'s \(record.factor)")
                #expect(record.changedAt.milliseconds == made)
            }
        }
        // A second migrate finds nothing to split and changes nothing.
        let split = try cluster.sql(
            "SELECT string_agg(encode(payload, 'hex'), ',' ORDER BY account, factor) FROM enrollments")
        #expect(try admin.migrate(granting: [], parts: Fleet.parts) == PostgresSchema.currentVersion)
        #expect(
            try cluster.sql("SELECT string_agg(encode(payload, 'hex'), ',' ORDER BY account, factor) FROM enrollments")
                == split)
        // As the host: the code used before the migration is still used; the next one works, once.
        let host = try Fleet.open(cluster.uri, cluster, host: "host-a")
        let keeper = TOTPKeeper(store: host, clock: host.clock)
        func verify(_ step: Int64) throws -> Verdict {
            try keeper.verify(.secret(Secret(copying: generator.code(step: step))), for: UserContext(name: "alice"))
        }
        #expect(try verify(used) == .failure(.mismatch), "the code used before the migration")
        #expect(try verify(used + 1) == .success, "the next code")
        #expect(try verify(used + 1) == .failure(.mismatch), "and only once")
        // A recovery code, as carol types it, works once; the others stay.
        let recoveryKeeper = RecoveryKeeper(store: host, clock: host.clock, hasher: hasher)
        let typed = Evidence.secret(Secret(copying: Array(RecoveryCode.written(codes[1]).utf8)))
        #expect(try recoveryKeeper.verify(typed, for: UserContext(name: "carol")) == .success, "a recovery code")
        #expect(try recoveryKeeper.verify(typed, for: UserContext(name: "carol")) != .success, "only once")
        #expect(recoveryKeeper.uses(of: try #require(try host.enrollment(user: "carol", factor: .recovery)))?.left == 2)
        // The security key's assertion, as keywayd's listener hands it over: counter 6 after 5, accepted once.
        let keyKeeper = FIDO2Keeper(store: host, clock: host.clock, schedule: .gesture, requiresVerification: false)
        let assertion = Evidence.device(
            FIDO2Presentation(
                outcome: .signed, credentialID: [9, 9], counter: 6, userPresent: true, userVerified: true
            )
            .encoded)
        #expect(try keyKeeper.verify(assertion, for: UserContext(name: "carol")) == .success, "a key's assertion")
        #expect(throws: AuthenticationError.self, "the same counter again") {
            try keyKeeper.verify(assertion, for: UserContext(name: "carol"))
        }
        #expect(
            try host.enrollment(user: "carol", factor: .fido2)?.payload
                == PostgresLeastPrivilegeTests.Granted.securityKey(counter: 6, flag: 1),
            "raised to 6, then marked as maybe cloned")
        #expect(try host.attempts(user: "alice")[.gesture].consecutiveFailures == 3)
        #expect(
            try cluster.sql(
                "SELECT string_agg(action || ' ' || role, ',' ORDER BY id) FROM audit WHERE account = 'carol'")
                == "use keyway_host,use keyway_host,mark keyway_host")
    }
}
