import Foundation
import KeywayCore
import KeywayTOTP
import KeywayTestSupport
import Testing

@testable import KeywayStore

/// A fleet's database made by the Keyway before migration 4 (schema version 3), with what that Keyway wrote in it,
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

    @Test("a version-3 fleet migrated: enrollments, counters and a used code kept; a code, a recovery use, a key's use")
    func fromVersion3() throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        // The schema as version 3 left it, granted to keyway_host as it was.
        var schema =
            "CREATE TABLE keyway_schema (version integer NOT NULL, "
            + "one boolean PRIMARY KEY DEFAULT true CHECK (one)); INSERT INTO keyway_schema VALUES (3);"
        for migration in PostgresSchema.migrations.prefix(3) {
            schema += migration.replacing("@schema", with: "public")
        }
        _ = try cluster.sql(schema + Self.version3Grants)
        // What that Keyway wrote: alice's TOTP (its last success the start of the step of the code she used now, as
        // the old once-mark was), her pattern with 3 failures, carol's recovery set and security key.
        let secret = (0..<20).map { UInt8($0 * 5 + 1) }
        let generator = OneTimeCode(secret: secret)
        let used = generator.step(at: StoreConformance.wallClock())
        let made: Int64 = 1_700_000_000_000
        let hex = PostgresLeastPrivilegeTests.Granted.hex
        let keys = PostgresLeastPrivilegeTests.Granted.securityKey(counter: 5)
        let recovery: [UInt8] = [1, 3] + Array("h1\nh2\nh3".utf8)
        let gesture = Array("a pattern's hash".utf8)
        _ = try cluster.sql(
            """
            INSERT INTO enrollments VALUES
                ('alice', 'totp', \(hex(generator.record)), \(made), 'root via keyway enroll'),
                ('alice', 'gesture', \(hex(gesture)), \(made), 'root via keyway enroll'),
                ('carol', 'recovery', \(hex(recovery)), \(made), 'root via keyway enroll'),
                ('carol', 'fido2', \(hex(keys)), \(made), 'root via keyway enroll');
            INSERT INTO attempts (account, factor, failures, recent_mismatches, last_success) VALUES
                ('alice', 'totp', 0, '', \(generator.start(of: used).milliseconds)),
                ('alice', 'gesture', 3, '\\x0201020103', NULL);
            INSERT INTO code_checks VALUES ('alice', 'totp', \(used), 4);
            INSERT INTO audit (at, host, actor, account, action, factor) VALUES
                (\(made), 'host-a', 'root via keyway enroll', 'alice', 'enroll', 'totp');
            """)
        let rows = """
            SELECT (SELECT string_agg(concat_ws(' ', account, factor, encode(payload, 'hex'), changed_at, changed_by),
                ',' ORDER BY account, factor) FROM enrollments)
            || ' | ' || (SELECT string_agg(concat_ws(' ', account, factor, failures, last_failure,
                encode(recent_mismatches, 'hex'), last_success), ',' ORDER BY account, factor) FROM attempts)
            || ' | ' || (SELECT string_agg(concat_ws(' ', id, at, host, actor, account, action, factor), ','
                ORDER BY id) FROM audit)
            """
        let before = try cluster.sql(rows)
        let admin = try PostgresStore(.init(uri: cluster.ownerURI, host: "admin", passfile: cluster.passfile))
        // Migrated with no --grant: the host's role keeps what it could do, through the new functions.
        #expect(try admin.migrate(granting: []) == 3)
        #expect(try cluster.sql("SELECT version FROM keyway_schema") == String(PostgresSchema.currentVersion))
        #expect(try cluster.sql(rows) == before, "every enrollment, counter and audit row as it was")
        #expect(try cluster.sql("SELECT step FROM code_marks WHERE account = 'alice'") == String(used))
        // As the host: the code used before the migration is still used; the next one works, once.
        let host = try PostgresStore(.init(uri: cluster.uri, host: "host-a", passfile: cluster.passfile))
        let keeper = TOTPKeeper(store: host, clock: host.clock)
        func verify(_ step: Int64) throws -> Verdict {
            try keeper.verify(.secret(Secret(copying: generator.code(step: step))), for: UserContext(name: "alice"))
        }
        #expect(try verify(used) == .failure(.mismatch), "the code used before the migration")
        #expect(try verify(used + 1) == .success, "the next code")
        #expect(try verify(used + 1) == .failure(.mismatch), "and only once")
        // A recovery code and a security key's assertion spent as a host spends them.
        func spend(_ user: String, _ factor: String, _ payload: [UInt8]) throws -> Bool {
            let current = try #require(try host.enrollment(user: user, factor: FactorKind(rawValue: factor)))
            var new = current
            new.payload = payload
            return try host.replace(
                current, with: new,
                recording: AuditEntry(
                    at: host.clock.now(), actor: user, user: user, action: .use, factor: current.factor))
        }
        #expect(try spend("carol", "recovery", [1, 3] + Array("h1\nh3".utf8)), "a recovery code's use")
        #expect(
            try spend("carol", "fido2", PostgresLeastPrivilegeTests.Granted.securityKey(counter: 6)),
            "a security key's signature counter raised by one")
        #expect(try host.attempts(user: "alice")[.gesture].consecutiveFailures == 3)
    }
}
