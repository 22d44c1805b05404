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
        // 5: the step of the last one-time code accepted, per enrollment (Store.checkOneTimeCode), carried over from
        // when a TOTP last succeeded, which held the start of that step until now.
        """
        CREATE TABLE code_marks (
            user TEXT NOT NULL,
            factor TEXT NOT NULL,
            step INTEGER NOT NULL,
            changed_at INTEGER NOT NULL,
            PRIMARY KEY (user, factor)
        ) WITHOUT ROWID;
        INSERT INTO code_marks
            SELECT a.user, a.factor, a.last_success / 1000 / unicode(CAST(substr(e.payload, 3, 1) AS TEXT)),
                e.changed_at
            FROM attempts a JOIN enrollments e ON e.user = a.user AND e.factor = a.factor
            WHERE a.factor = 'totp' AND a.last_success > 0 AND length(e.payload) > 3
                AND unicode(CAST(substr(e.payload, 3, 1) AS TEXT)) BETWEEN 1 AND 127;
        """,
    ]

    /// The newest schema this build knows.
    static var currentVersion: Int64 { Int64(migrations.count) }
}
