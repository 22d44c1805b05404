/// The store's schema, versioned with forward migrations (`PRAGMA user_version`).
enum Schema {
    /// Marks the file as a Keyway store (`PRAGMA application_id`), so a wrong file is refused, not altered.
    static let applicationID: Int64 = 0x4B65_7977  // "Keyw"

    /// Migration N (1-based) brings the schema from version N-1 to N. Append only; never edit a shipped one.
    static let migrations: [String] = [
        """
        CREATE TABLE enrollments (
            user TEXT NOT NULL,
            factor TEXT NOT NULL,
            payload BLOB NOT NULL,
            changed_at INTEGER NOT NULL,
            changed_by TEXT NOT NULL,
            PRIMARY KEY (user, factor)
        ) WITHOUT ROWID;
        CREATE TABLE attempts (
            user TEXT NOT NULL,
            factor TEXT NOT NULL,
            failures INTEGER NOT NULL CHECK (failures >= 0),
            last_failure INTEGER,
            recent_mismatches BLOB NOT NULL,
            PRIMARY KEY (user, factor)
        ) WITHOUT ROWID;
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at INTEGER NOT NULL,
            actor TEXT NOT NULL,
            user TEXT NOT NULL,
            action TEXT NOT NULL,
            factor TEXT
        );
        CREATE INDEX audit_by_user ON audit (user, id);
        """,
        // 2: when each factor last succeeded ([biometric] passcode-max-age).
        """
        ALTER TABLE attempts ADD COLUMN last_success INTEGER;
        """,
        // 3: per-user switches and preferences (keyway enable|disable|set), and what an audit entry set.
        """
        CREATE TABLE preferences (
            user TEXT NOT NULL,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (user, key)
        ) WITHOUT ROWID;
        ALTER TABLE audit ADD COLUMN detail TEXT;
        """,
        // 4: which host made a change, for entries copied from a store many hosts share (keyway store copy).
        """
        ALTER TABLE audit ADD COLUMN host TEXT;
        """,
    ]

    /// The newest schema this build knows.
    static var currentVersion: Int64 { Int64(migrations.count) }
}
