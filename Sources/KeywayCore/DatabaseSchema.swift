/// What a factor checked inside a fleet's database adds to its schema (TOTP, whose secret never leaves the database):
/// the factor's own SQL, which `keyway store migrate` composes into the schema's migrations by version, and what a
/// host's role is granted of it (docs/ARCHITECTURE.md §17). The store's own SQL names no factor.
public struct DatabaseSchema: Sendable, Equatable {
    /// SQL run at the end of migration N (its key), in the same transaction; `@schema` stands for the schema's name.
    public var migrations: [Int: String]
    /// The functions a host's role is granted, as `name(argument types)`.
    public var hostFunctions: [String]
    /// Its tables, of which a host's role gets nothing.
    public var tables: [String]

    /// Declares a factor's part of the schema.
    public init(migrations: [Int: String], hostFunctions: [String], tables: [String]) {
        self.migrations = migrations
        self.hostFunctions = hostFunctions
        self.tables = tables
    }

    /// SQL that grants `functions` (`name(argument types), …`) to every role other than the owner that may run
    /// `existing` now: a migration's new functions follow the ones a host already had, so a fleet migrated without
    /// `--grant` keeps working.
    public static func grants(following existing: String, of functions: String) -> String {
        """
        DO $$
        DECLARE
            grantee text;
        BEGIN
            FOR grantee IN SELECT DISTINCT p.grantee FROM information_schema.routine_privileges p
                WHERE p.routine_name = '\(existing)' AND p.routine_schema = current_schema()
                    AND p.privilege_type = 'EXECUTE' AND p.grantee NOT IN (current_user, 'PUBLIC')
            LOOP
                EXECUTE format('GRANT EXECUTE ON FUNCTION \(functions) TO %I', grantee);
            END LOOP;
        END $$;
        """
    }
}
