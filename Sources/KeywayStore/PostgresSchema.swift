/// The fleet store's schema in PostgreSQL, versioned with forward migrations like the SQLite one (Schema.swift):
/// `keyway_schema` holds the version; `keyway store migrate` applies what is missing as the database's owner, and
/// keywayd, whose role may not change the schema, refuses a version other than its own (keywayd(8), FLEETS).
enum PostgresSchema {
    /// Migration N (1-based) brings the schema from version N-1 to N. Append only; never edit a shipped one.
    /// Text keys compare byte by byte (`COLLATE "C"`), as SQLite's do, whatever the database's locale.
    static let migrations: [String] = [
        """
        CREATE TABLE enrollments (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            payload bytea NOT NULL,
            changed_at bigint NOT NULL,
            changed_by text NOT NULL,
            PRIMARY KEY (account, factor)
        );
        CREATE TABLE attempts (
            account text COLLATE "C" NOT NULL,
            factor text COLLATE "C" NOT NULL,
            failures integer NOT NULL CHECK (failures >= 0),
            last_failure bigint,
            recent_mismatches bytea NOT NULL,
            last_success bigint,
            PRIMARY KEY (account, factor)
        );
        CREATE TABLE audit (
            id bigserial PRIMARY KEY,
            at bigint NOT NULL,
            host text,
            actor text NOT NULL,
            account text COLLATE "C" NOT NULL,
            action text NOT NULL,
            factor text,
            detail text
        );
        CREATE INDEX audit_by_account ON audit (account, id);
        CREATE TABLE preferences (
            account text COLLATE "C" NOT NULL,
            key text COLLATE "C" NOT NULL,
            value text NOT NULL,
            PRIMARY KEY (account, key)
        );
        """
    ]

    /// The newest schema this build knows.
    static var currentVersion: Int { migrations.count }

    /// What keywayd's role is granted: rows, never the schema (no DDL after migration).
    static func grants(to role: String) -> String {
        """
        GRANT SELECT ON keyway_schema TO \(role);
        GRANT SELECT, INSERT, UPDATE, DELETE ON enrollments, attempts, audit, preferences TO \(role);
        GRANT USAGE ON SEQUENCE audit_id_seq TO \(role);
        """
    }

    /// The advisory lock that serializes migrations: the two-key form, a key space apart from the accounts' locks.
    static let migrationLock = "SELECT pg_advisory_xact_lock(19301, 31095)"
}
