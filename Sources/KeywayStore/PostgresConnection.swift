import CPostgres
import Glibc
import KeywayPlatform

/// A PostgreSQL failure: the SQLSTATE when the server sent one, the message, and whether the database is away
/// (unreachable, restarted, timed out, failed over) rather than the request or the schema being wrong.
struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// The five-character SQLSTATE, when the server answered with one.
    var state: String?
    /// libpq's or the server's message, on one line.
    var message: String
    /// The connection is gone or unusable: it must be closed, never reused.
    var connectionLost: Bool

    init(state: String? = nil, _ message: String, connectionLost: Bool = false) {
        self.state = state
        self.message = message.split(whereSeparator: \.isNewline).joined(separator: " ")
        self.connectionLost = connectionLost
    }

    /// The database is away or refusing this host for now: the authentication fails closed as "unavailable"
    /// (PAM_AUTHINFO_UNAVAIL), and a later request may succeed. Everything else is an error of the store itself.
    var databaseAway: Bool {
        if connectionLost { return true }
        guard let state else { return false }
        // 08: connection exceptions; 57P01–03: shut down, crashed, starting; 53: out of resources (too many
        // connections); 57014: canceled (statement_timeout); 55P03: lock_timeout; 40001/40P01: serialization and
        // deadlock; 25006: a read-only transaction (a standby after a failover); 28: this host's role may not log in
        // (cut off, keywayd(8)); KW004: a former primary (`formerPrimary`).
        return state.hasPrefix("08") || state.hasPrefix("57P") || state.hasPrefix("53") || state.hasPrefix("28")
            || ["57014", "55P03", "40001", "40P01", "25006", Self.formerPrimary].contains(state)
    }

    var description: String { state.map { "\(message) (SQLSTATE \($0))" } ?? message }

    /// Keyway's state for a server refused as a former primary (`PostgresStore.check`): away, as a standby is.
    static let formerPrimary = "KW004"
    /// The state a function of the schema raises when a budget it keeps is spent (PostgresSchema, migration 4): the
    /// factor waits for the next step, and nothing is counted.
    static let budgetSpent = "KWB01"
}

/// One libpq connection: the only caller of `PQ*` functions in Keyway. Not thread-safe by itself: `PostgresStore`
/// lends each connection to one caller at a time. Every wait is bounded by a deadline (poll(2) on the socket), so a
/// database that stops answering mid-request costs at most that long, never a hung keywayd thread.
///
/// Statements go out unnamed (the extended protocol's unnamed statement, parsed at each run), never as named
/// prepared statements: a named one lives in one server session, and a pooler in transaction mode (PgBouncer 1.18,
/// Debian 12's) gives each transaction whichever session is free (keywayd(8), FLEETS; BENCHMARKS.md for the cost).
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer

    /// Round trips made since the store lent this connection out (a failure in the first may be retried).
    var roundTrips = 0
    /// Statements `send` sent whose answers `answers` has not read yet.
    private var expected = 0
    /// A pipeline was sent and its answers are still to be read: the connection belongs to whoever reads them
    /// (`PostgresStore`'s reservation hands it to another thread), and may not be pooled or used meanwhile.
    var awaitsAnswers: Bool { expected > 0 }
    /// The store's slot this connection holds while its answers are read on another thread (`PostgresStore`),
    /// released when it is given back.
    var slot: Slots?
    /// The warnings the server sent while a request's answers were read (`receiveNotice`).
    private var warnings: [PostgresError] = []

    private init(handle: OpaquePointer) { self.handle = handle }

    /// Where this connection went: the host (or socket directory) and port of the server that answered.
    var server: String {
        let host = PQhost(handle).map { String(cString: $0) } ?? ""
        let port = PQport(handle).map { String(cString: $0) } ?? ""
        return host + ":" + port
    }

    /// libpq's notice receiver: keeps the server's warnings for the request being read. A WARNING is how the
    /// server says a COMMIT it answered is not what was asked: "canceling wait for synchronous replication ...
    /// committed locally, but might not have been replicated" comes with a plain COMMIT. Notices below WARNING
    /// are dropped.
    private static let receiveNotice: PQnoticeReceiver = { context, result in
        guard let context, let result else { return }
        let severity = PQresultErrorField(result, Int32(UInt8(ascii: "V"))).map { String(cString: $0) }
        guard severity == "WARNING" else { return }
        let connection = Unmanaged<PostgresConnection>.fromOpaque(context).takeUnretainedValue()
        connection.warnings.append(failure(of: result))
    }

    /// Throws the first warning the server sent since the last check, as a lost connection: the request's effect
    /// is not known, so it is answered as the database being away, and the connection is not used again.
    private func checkWarnings() throws(PostgresError) {
        guard let warning = warnings.first else { return }
        warnings = []
        throw PostgresError(
            state: warning.state,
            "the database warned that it did not do what was asked (\(warning.message)); nothing it answered is "
                + "relied on", connectionLost: true)
    }

    deinit { PQfinish(handle) }

    /// Connects with libpq's keywords (the last occurrence of a keyword wins; `dbname` may be a URI, which is
    /// expanded), waiting at most until `deadline` (monotonic milliseconds).
    static func connect(_ parameters: [(String, String)], deadline: Int64) throws(PostgresError) -> PostgresConnection {
        let keywords = parameters.map { strdup($0.0) } + [nil]
        let values = parameters.map { strdup($0.1) } + [nil]
        defer { for pointer in keywords + values { free(pointer) } }
        let started: OpaquePointer? = keywords.map { UnsafePointer($0) }.withUnsafeBufferPointer { keys in
            values.map { UnsafePointer($0) }.withUnsafeBufferPointer { vals in
                PQconnectStartParams(keys.baseAddress, vals.baseAddress, 1)
            }
        }
        guard let started else { throw PostgresError("out of memory", connectionLost: true) }
        let connection = PostgresConnection(handle: started)
        // The receiver holds no reference: the connection owns the handle and finishes it in deinit.
        PQsetNoticeReceiver(started, receiveNotice, Unmanaged.passUnretained(connection).toOpaque())
        guard PQstatus(started) != CONNECTION_BAD else { throw connection.lost() }
        var polling = PGRES_POLLING_WRITING
        while true {
            switch polling {
            case PGRES_POLLING_OK:
                return connection
            case PGRES_POLLING_READING:
                try connection.wait(for: Int16(POLLIN), until: deadline, doing: "connecting")
            case PGRES_POLLING_WRITING:
                try connection.wait(for: Int16(POLLOUT), until: deadline, doing: "connecting")
            default:
                throw connection.lost()
            }
            polling = PQconnectPoll(started)
        }
    }

    /// The connection's error as a lost connection.
    private func lost() -> PostgresError {
        PostgresError(String(cString: PQerrorMessage(handle)), connectionLost: true)
    }

    /// Waits until the socket is ready for `events` or the deadline passes (then the connection is lost: a request
    /// may be half sent or half answered).
    private func wait(for events: Int16, until deadline: Int64, doing what: String) throws(PostgresError) {
        while true {
            let left = deadline - MonotonicClock.milliseconds()
            guard left > 0 else {
                throw PostgresError("no answer from the database within the deadline (\(what))", connectionLost: true)
            }
            var entry = pollfd(fd: PQsocket(handle), events: events, revents: 0)
            guard entry.fd >= 0 else { throw lost() }
            let ready = poll(&entry, 1, Int32(clamping: left))
            if ready > 0 { return }
            if ready < 0 && errno != EINTR { throw PostgresError("poll failed: errno \(errno)", connectionLost: true) }
        }
    }

    /// Runs one statement with text parameters (nil is NULL) and returns its rows as text (nil for NULL), waiting at
    /// most until `deadline`. One with parameters is a pipeline of one (`pipeline`); several statements separated
    /// by semicolons are allowed only without parameters.
    @discardableResult
    func query(_ sql: String, _ parameters: [String?] = [], deadline: Int64) throws(PostgresError) -> [[String?]] {
        if !parameters.isEmpty { return try query(Statement(sql: sql, parameters: parameters), deadline: deadline) }
        roundTrips += 1
        warnings = []
        guard PQsendQuery(handle, sql) == 1 else { throw lost() }
        let (rows, failure) = try results(until: deadline)
        if PQstatus(handle) == CONNECTION_BAD { throw lost(after: failure) }
        if let failure { throw failure }
        try checkWarnings()
        return rows
    }

    /// `query` of one `Statement`: a pipeline of one.
    @discardableResult
    func query(_ statement: Statement, deadline: Int64) throws(PostgresError) -> [[String?]] {
        try pipeline([statement], deadline: deadline)[0]
    }

    /// One statement of a `pipeline`: SQL with text parameters (nil is NULL).
    struct Statement {
        var sql: String
        var parameters: [String?] = []
    }

    /// Runs `statements` in order in one round trip (libpq's pipeline mode) and returns each one's rows, waiting at
    /// most until `deadline`. The server runs them as separate statements, each after the one before it has
    /// finished and with its own snapshot, so a read sent behind a lock reads what the lock's last holder
    /// committed. It skips every statement after the first that fails, whose error is thrown once the whole
    /// pipeline has been read (an explicit transaction is then left aborted, for the caller to roll back).
    @discardableResult
    func pipeline(_ statements: [Statement], deadline: Int64) throws(PostgresError) -> [[[String?]]] {
        try send(statements)
        return try answers(until: deadline)
    }

    /// The first half of `pipeline`: sends `statements` and the end of the pipeline, and returns without waiting;
    /// `answers` reads what the server says. Nothing else may be sent on the connection in between.
    func send(_ statements: [Statement]) throws(PostgresError) {
        roundTrips += 1
        expected = 0
        warnings = []
        guard PQenterPipelineMode(handle) == 1 else { throw lost() }
        for statement in statements {
            let copies = statement.parameters.map { $0.map { strdup($0) } ?? nil }
            defer { for pointer in copies { free(pointer) } }
            let sent = copies.map { UnsafePointer($0) }.withUnsafeBufferPointer { values in
                PQsendQueryParams(
                    handle, statement.sql, Int32(statement.parameters.count), nil, values.baseAddress, nil, nil, 0)
            }
            guard sent == 1 else { throw lost() }
            expected += 1
        }
        guard PQpipelineSync(handle) == 1 else { throw lost() }
    }

    /// The second half of `pipeline`: the rows of each statement `send` sent, waiting at most until `deadline`.
    func answers(until deadline: Int64) throws(PostgresError) -> [[[String?]]] {
        var answers: [[[String?]]] = []
        var failure: PostgresError? = nil
        let expected = self.expected
        self.expected = 0
        for _ in 0..<expected {
            let (rows, failed) = try results(until: deadline)
            failure = failure ?? failed
            answers.append(rows)
            if PQstatus(handle) == CONNECTION_BAD { break }
        }
        // Then the end of the pipeline, after which the connection takes ordinary statements again.
        if PQstatus(handle) != CONNECTION_BAD, let end = try nextResult(until: deadline) {
            let status = PQresultStatus(end)
            PQclear(end)
            if status == PGRES_PIPELINE_SYNC && PQexitPipelineMode(handle) == 1 {
                if let failure { throw failure }
                try checkWarnings()
                return answers
            }
        }
        throw lost(after: failure)
    }

    /// One statement's results, read up to the null result that ends them: its rows, or why it failed (nothing
    /// when a failure before it in its pipeline skipped it).
    private func results(until deadline: Int64) throws(PostgresError) -> (rows: [[String?]], failure: PostgresError?) {
        var rows: [[String?]] = []
        var failure: PostgresError? = nil
        while let result = try nextResult(until: deadline) {
            defer { PQclear(result) }
            switch PQresultStatus(result) {
            case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_PIPELINE_ABORTED:
                continue
            case PGRES_TUPLES_OK:
                rows = Self.rows(of: result)
            default:
                failure = failure ?? Self.failure(of: result)
            }
        }
        return (rows, failure)
    }

    /// The connection is gone: `failure`, the server's last word, as a lost connection, or libpq's message.
    private func lost(after failure: PostgresError?) -> PostgresError {
        failure.map { PostgresError(state: $0.state, $0.message, connectionLost: true) } ?? lost()
    }

    /// The next result once it has arrived (nil: the statement's results are complete), waiting at most until
    /// `deadline`.
    private func nextResult(until deadline: Int64) throws(PostgresError) -> OpaquePointer? {
        while PQisBusy(handle) == 1 {
            try wait(for: Int16(POLLIN), until: deadline, doing: "waiting for an answer")
            guard PQconsumeInput(handle) == 1 else { throw lost() }
        }
        return PQgetResult(handle)
    }

    /// A failed result's SQLSTATE and message.
    private static func failure(of result: OpaquePointer) -> PostgresError {
        let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
        return PostgresError(state: state, String(cString: PQresultErrorMessage(result)))
    }

    private static func rows(of result: OpaquePointer) -> [[String?]] {
        let columns = PQnfields(result)
        return (0..<PQntuples(result)).map { row in
            (0..<columns).map { column in
                PQgetisnull(result, row, column) == 1 ? nil : String(cString: PQgetvalue(result, row, column))
            }
        }
    }

    /// Whether the server is still in a transaction (a failed statement left it aborted, or a body threw).
    var inTransaction: Bool { PQtransactionStatus(handle) != PQTRANS_IDLE }

    /// libpq's keywords in a connection string or URI, or the reason it cannot be parsed.
    static func keywords(of conninfo: String) -> Result<[String: String], PostgresError> {
        var message: UnsafeMutablePointer<CChar>? = nil
        guard let options = PQconninfoParse(conninfo, &message) else {
            let text = message.map { String(cString: $0) } ?? "out of memory"
            if let message { PQfreemem(message) }
            return .failure(PostgresError(text))
        }
        defer { PQconninfoFree(options) }
        var found: [String: String] = [:]
        var index = 0
        while let keyword = options[index].keyword {
            if let value = options[index].val { found[String(cString: keyword)] = String(cString: value) }
            index += 1
        }
        return .success(found)
    }

    /// `bytea` as a text parameter (hex format).
    static func bytea(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        text.reserveCapacity(2 + bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// A `bytea` column read as text (`bytea_output = hex`, the default since PostgreSQL 9.0), or nil if it is not.
    static func bytes(fromBytea text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else {
            return nil
        }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}
