import CSQLite

/// An SQLite failure: the result code, SQLite's own message, and what it means for a Keyway store.
struct SQLiteError: Error, Sendable, CustomStringConvertible {
    /// The extended result code.
    var code: Int32
    /// SQLite's message.
    var message: String

    /// The primary result code.
    var primary: Int32 { code & 0xFF }

    /// What the failure means for an administrator.
    var meaning: String {
        switch primary {
        case SQLITE_FULL: "the disk is full"
        case SQLITE_READONLY: "the store is read-only (read-only filesystem or file)"
        case SQLITE_CORRUPT, SQLITE_NOTADB: "the file is damaged or not a database; restore it from a backup"
        case SQLITE_BUSY, SQLITE_LOCKED: "the store stayed locked by another process"
        case SQLITE_CANTOPEN: "the file cannot be opened"
        case SQLITE_IOERR: "an I/O error occurred"
        case SQLITE_PERM, SQLITE_AUTH: "permission denied"
        case SQLITE_CONSTRAINT: "refused"
        default: "SQLite error \(code)"
        }
    }

    var description: String { "\(meaning) (\(message))" }
}

/// One SQLite connection: the only caller of `sqlite3_*` in Keyway. Opened with SQLITE_OPEN_NOMUTEX, so it is not
/// thread-safe by itself: `SQLiteStore` serializes every use behind its lock, which is why it may be shared.
///
/// Statements are prepared once per connection and kept (`query`): parsing the SQL was half of keywayd's
/// instructions per authentication outside the hash (docs/BENCHMARKS.md, "Instructions counted").
final class SQLiteConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// The prepared statements by their SQL, each reset after use so none holds a read transaction open.
    private var statements: [String: OpaquePointer] = [:]
    /// More distinct statements than Keyway's SQL has: past it the cache is emptied rather than grown.
    private static let statementLimit = 64
    /// False once `commitWithoutSync()` has set `synchronous = NORMAL`: a durable `transaction` then syncs the
    /// write-ahead log itself after its commit.
    private var commitSyncs = true
    /// Syncs of the write-ahead log made by `syncLog` (for tests: which writes are made durable).
    private(set) var logSyncs = 0

    private init(handle: OpaquePointer) { self.handle = handle }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// `sqlite3_open_v2` read-write, never following a symlink, never creating (the store creates the file itself).
    static func open(path: String) -> Result<SQLiteConnection, SQLiteError> {
        var handle: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let status = sqlite3_open_v2(path, &handle, flags, nil)
        guard let handle else { return .failure(SQLiteError(code: status, message: "out of memory")) }
        guard status == SQLITE_OK else {
            let error = SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)))
            sqlite3_close_v2(handle)
            return .failure(error)
        }
        sqlite3_extended_result_codes(handle, 1)
        return .success(SQLiteConnection(handle: handle))
    }

    private func error(_ status: Int32) -> SQLiteError {
        SQLiteError(code: status, message: String(cString: sqlite3_errmsg(handle)))
    }

    /// `sqlite3_busy_timeout`.
    func setBusyTimeout(milliseconds: Int32) { sqlite3_busy_timeout(handle, milliseconds) }

    /// Runs statements that return no rows (`sqlite3_exec`).
    func execute(_ sql: String) throws(SQLiteError) {
        let status = sqlite3_exec(handle, sql, nil, nil, nil)
        guard status == SQLITE_OK else { throw error(status) }
    }

    /// Runs one statement with bound values and returns every row.
    @discardableResult
    func query(_ sql: String, _ values: [Value] = []) throws(SQLiteError) -> [[Value]] {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        var status = SQLITE_OK
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case .null: status = sqlite3_bind_null(statement, index)
            case .integer(let number): status = sqlite3_bind_int64(statement, index, number)
            case .text(let text): status = keyway_sqlite3_bind_text(statement, index, text, -1)
            case .blob(let bytes):
                status = bytes.withUnsafeBytes {
                    keyway_sqlite3_bind_blob(statement, index, $0.baseAddress, Int32($0.count))
                }
            }
            guard status == SQLITE_OK else { throw error(status) }
        }
        var rows: [[Value]] = []
        while true {
            status = sqlite3_step(statement)
            if status == SQLITE_DONE { return rows }
            guard status == SQLITE_ROW else { throw error(status) }
            rows.append((0..<sqlite3_column_count(statement)).map { column(statement, $0) })
        }
    }

    /// The kept statement for `sql`, prepared now if it is new (`SQLITE_PREPARE_PERSISTENT`: it will be reused).
    private func prepared(_ sql: String) throws(SQLiteError) -> OpaquePointer {
        if let kept = statements[sql] { return kept }
        if statements.count >= Self.statementLimit {
            for statement in statements.values { sqlite3_finalize(statement) }
            statements.removeAll()
        }
        var statement: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard status == SQLITE_OK, let statement else { throw error(status) }
        statements[sql] = statement
        return statement
    }

    private func column(_ statement: OpaquePointer, _ index: Int32) -> Value {
        switch sqlite3_column_type(statement, index) {
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(statement, index))
        case SQLITE_TEXT: return .text(String(cString: sqlite3_column_text(statement, index)))
        case SQLITE_BLOB:
            let count = Int(sqlite3_column_bytes(statement, index))
            guard count > 0, let bytes = sqlite3_column_blob(statement, index) else { return .blob([]) }
            return .blob(Array(UnsafeRawBufferPointer(start: bytes, count: count)))
        default: return .null
        }
    }

    /// Puts on disk what is committed to the write-ahead log: the log file's sync, as a commit at
    /// `synchronous = FULL` does it (`SQLITE_SYNC_NORMAL`, fdatasync), for commits made at `NORMAL`.
    func syncLog() throws(SQLiteError) {
        var file: UnsafeMutablePointer<sqlite3_file>?
        let status = withUnsafeMutablePointer(to: &file) {
            sqlite3_file_control(handle, "main", SQLITE_FCNTL_JOURNAL_POINTER, $0)
        }
        guard status == SQLITE_OK else { throw error(status) }
        guard let file, let methods = file.pointee.pMethods, let sync = methods.pointee.xSync else {
            throw SQLiteError(code: SQLITE_IOERR, message: "the write-ahead log is not open")
        }
        let synced = sync(file, SQLITE_SYNC_NORMAL)
        guard synced == SQLITE_OK else { throw SQLiteError(code: synced, message: "the write-ahead log's sync failed") }
        logSyncs += 1
    }

    /// From now on commits at `synchronous = NORMAL` (in the write-ahead log, seen by every connection, kept by a
    /// crash of the process) and leaves the log's sync to `transaction`: set once, when the store is configured,
    /// because a changed `synchronous` makes SQLite prepare the pragma's statement anew at every run, and toggling
    /// it around each reservation cost keywayd four of those per authentication.
    func commitWithoutSync() throws(SQLiteError) {
        try execute("PRAGMA synchronous = NORMAL")
        commitSyncs = false
    }

    /// Runs `body` in a transaction (`BEGIN IMMEDIATE` takes the write lock at once), committing on return and
    /// rolling back on a throw. A `durable` transaction is on disk when this returns (its log synced as a commit at
    /// `synchronous = FULL` syncs it); a sync that fails throws, so a write is never reported kept that a power cut
    /// could lose (it may then be kept though reported failed). One that is not durable may still be only in the log.
    func transaction<T>(durable: Bool = true, _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try run(beginning: "BEGIN IMMEDIATE", syncing: { _ in durable }, body)
    }

    /// `transaction`, durable only when `durable` says so of what `body` returned (a check that wrote nothing costs
    /// no sync).
    func transaction<T>(durableIf durable: (T) -> Bool, _ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try run(beginning: "BEGIN IMMEDIATE", syncing: durable, body)
    }

    /// Runs `body` in one read transaction (a deferred `BEGIN`: the first read takes the snapshot the others share),
    /// ended on return or throw.
    func reading<T>(_ body: () throws(SQLiteError) -> T) throws(SQLiteError) -> T {
        try run(beginning: "BEGIN", syncing: { _ in false }, body)
    }

    /// `body` between `begin` and COMMIT, rolled back on a throw; when `syncing` says so of its result, the log
    /// synced after the commit when commits do not sync it themselves.
    private func run<T>(beginning begin: String, syncing: (T) -> Bool, _ body: () throws(SQLiteError) -> T)
        throws(SQLiteError) -> T
    {
        try query(begin)
        let result: T
        do {
            result = try body()
            try query("COMMIT")
        } catch {
            try? execute("ROLLBACK")
            throw error
        }
        if syncing(result) && !commitSyncs { try syncLog() }
        return result
    }

    /// A value bound to or read from a statement.
    enum Value: Equatable {
        case null
        case integer(Int64)
        case text(String)
        case blob([UInt8])

        var integer: Int64? { if case .integer(let number) = self { number } else { nil } }
        var text: String? { if case .text(let text) = self { text } else { nil } }
        var blob: [UInt8]? {
            switch self {
            case .blob(let bytes): bytes
            case .null: nil
            case .text(let text): Array(text.utf8)
            case .integer: nil
            }
        }
    }
}
