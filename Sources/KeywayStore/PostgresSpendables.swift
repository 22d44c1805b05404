public import KeywayCore

/// The fleet's records kept as a fixed part and spendable rows (PostgresSchema, migration 5; docs/ARCHITECTURE.md §17,
/// "Spendable parts"): split by the factor's layout when written, joined by it when read. The store itself knows no
/// factor's format; a factor without a layout is kept whole.
extension PostgresStore {
    /// `enrollment`'s parts as its layout splits them; a factor without a layout is all fixed.
    func split(_ enrollment: Enrollment) throws(AuthenticationError) -> SpendableParts {
        guard let layout = options.spendable[enrollment.factor] else {
            return SpendableParts(fixed: enrollment.payload, items: [])
        }
        guard let parts = layout.split(enrollment.payload) else {
            throw AuthenticationError(
                .storeFailure,
                "Keyway store \(options.uri): the \(enrollment.factor) of "
                    + "\(enrollment.user.escapingControlCharacters) is not a record this Keyway can store")
        }
        return parts
    }

    /// Enrollment rows (`enrollmentColumns`) with their spendable rows (`spendableColumns`), each record joined by
    /// its factor's layout. A record that has spendable rows but no layout here, or that its layout cannot join,
    /// is a store failure naming it, never a record read short.
    func joined(_ records: [[String?]], _ spendables: [[String?]]) throws(PostgresError) -> [Enrollment] {
        var parts: [String: [SpendableItem]] = [:]
        for row in spendables {
            guard row.count == 7, let user = row[0], let factor = row[1], let name = row[2],
                let value = row[3].flatMap({ Int64($0) }), let rule = row[4]
            else { throw PostgresError(state: "KW003", "a spendable row cannot be read") }
            let item: SpendRule
            if rule == "falls" {
                item = .fallsByOne
            } else if let step = row[5].flatMap({ Int64($0) }), let ceiling = row[6].flatMap({ Int64($0) }) {
                item = .rises(step: step, ceiling: ceiling)
            } else {
                throw PostgresError(state: "KW003", "a spendable row of \(factor) has no rule this Keyway knows")
            }
            parts[user + "\n" + factor, default: []].append(SpendableItem(name, value, item))
        }
        var enrollments: [Enrollment] = []
        for row in records {
            guard row.count == 5, let user = row[0], let factor = row[1],
                let fixed = row[2].flatMap(PostgresConnection.bytes(fromBytea:)),
                let changedAt = row[3].flatMap({ Int64($0) }), let changedBy = row[4]
            else { continue }
            let kind = FactorKind(rawValue: factor)
            let items = parts[user + "\n" + factor] ?? []
            var payload = fixed
            if let layout = options.spendable[kind] {
                guard let whole = layout.join(SpendableParts(fixed: fixed, items: items)) else {
                    throw PostgresError(
                        state: "KW003",
                        "the \(factor) of \(user.escapingControlCharacters) does not join with its spendable parts: "
                            + "run keyway store migrate with this Keyway")
                }
                payload = whole
            } else if !items.isEmpty {
                throw PostgresError(
                    state: "KW003",
                    "the \(factor) of \(user.escapingControlCharacters) has spendable parts, and this process has no "
                        + "layout for \(factor) to join them with")
            }
            enrollments.append(
                Enrollment(
                    user: user, factor: kind, payload: payload, changedAt: Timestamp(milliseconds: changedAt),
                    changedBy: changedBy))
        }
        return enrollments
    }

    /// Replaces the spendable rows of the user's record of `factor` with `items`, in the caller's transaction (an
    /// administrator's role: a host has no table rights).
    func writeSpendables(
        _ items: [SpendableItem], of user: String, _ factor: FactorKind, _ db: PostgresConnection, _ deadline: Int64
    ) throws(PostgresError) {
        var statements = [
            PostgresConnection.Statement(
                sql: "DELETE FROM spendables WHERE account = $1 AND factor = $2",
                parameters: [user, factor.rawValue])
        ]
        for (position, item) in items.enumerated() {
            let (rule, step, ceiling): (String, String?, String?) =
                switch item.rule {
                case .fallsByOne: ("falls", nil, nil)
                case .rises(let step, let ceiling): ("rises", String(step), String(ceiling))
                }
            statements.append(
                PostgresConnection.Statement(
                    sql: "INSERT INTO spendables (account, factor, position, name, value, rule, step, ceiling) "
                        + "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    parameters: [
                        user, factor.rawValue, String(position), item.name, String(item.value),
                        rule, step, ceiling,
                    ]))
        }
        _ = try db.pipeline(statements, deadline: deadline)
    }

    /// Splits the records a fleet kept whole before migration 5 (those of a factor with a layout and no spendable
    /// rows), in the migration's transaction: each keeps its bytes, now as a fixed part and rows. A record its layout
    /// cannot read stops the migration, naming it; nothing is changed then. Returns how many were split.
    func splitWholeRecords(_ db: PostgresConnection, _ deadline: Int64) throws(PostgresError) -> Int {
        var split = 0
        for layout in options.spendable.all {
            let rows = try db.query(
                "SELECT account, payload, changed_at, changed_by FROM enrollments e WHERE factor = $1 AND NOT EXISTS "
                    + "(SELECT 1 FROM spendables s WHERE s.account = e.account AND s.factor = e.factor) ORDER BY account",
                [layout.factor.rawValue], deadline: deadline)
            for row in rows {
                guard let user = row[0], let payload = row[1].flatMap(PostgresConnection.bytes(fromBytea:)) else {
                    continue
                }
                guard let parts = layout.split(payload) else {
                    if layout.join(SpendableParts(fixed: payload, items: [])) != nil { continue }  // split, no parts
                    throw PostgresError(
                        state: "KW003",
                        "the \(layout.factor) of \(user.escapingControlCharacters) is not a record this Keyway can "
                            + "read; nothing was changed (remove or re-enroll it with the Keyway that wrote it)")
                }
                if parts.items.isEmpty && parts.fixed == payload { continue }
                try db.query(
                    "UPDATE enrollments SET payload = $3 WHERE account = $1 AND factor = $2",
                    [user, layout.factor.rawValue, PostgresConnection.bytea(parts.fixed)], deadline: deadline)
                try writeSpendables(parts.items, of: user, layout.factor, db, deadline)
                split += 1
            }
        }
        return split
    }
}
