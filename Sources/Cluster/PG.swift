import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

/// A refusal from PostgreSQL or libpq: the SQLSTATE (empty when the connection itself failed)
/// and PostgreSQL's message. The one place libpq's errors become Swift values.
public struct PGError: Error, Equatable, Sendable, CustomStringConvertible {
    public let sqlState: String
    public let message: String
    /// The connection was unusable when the error was raised (libpq's status, not a guess from
    /// the code): reconnect before retrying.
    public let connectionLost: Bool
    /// Raised by a transaction's COMMIT: if the connection was lost, the transaction may or may
    /// not have committed. An error raised before COMMIT was sent leaves nothing committed.
    public internal(set) var duringCommit = false

    public init(sqlState: String, message: String, connectionLost: Bool = false) {
        self.sqlState = sqlState
        self.message = message
        self.connectionLost = connectionLost
    }

    public var description: String { sqlState.isEmpty ? message : "\(sqlState): \(message)" }

    /// The connection is gone (server down, network, administrator shutdown): retry after
    /// reconnecting. Errors of the project's own (a schema too new) are not.
    public var isConnectionLost: Bool {
        connectionLost || sqlState.hasPrefix("08") || ["57P01", "57P02", "57P03", "57P05", "25P03"].contains(sqlState)
    }
}

/// Rows of a result in PostgreSQL's text format (nil: SQL NULL).
public struct PGRows: Sendable {
    public let columns: [String]
    public let rows: [[String?]]
    /// The command tag ("INSERT 0 3", "COMMIT", "ROLLBACK", …).
    public var command = ""

    public var count: Int { rows.count }
    /// The first column of the first row.
    public var scalar: String? { rows.first?.first ?? nil }
}

/// One PostgreSQL connection through libpq, with blocking calls. Not `Sendable`: it belongs to
/// the thread that uses it (the cluster's log thread, or a test).
public final class PGConnection {
    private let conn: OpaquePointer

    /// Connects with a libpq connection string or `postgres://` URI.
    /// `defaults`: libpq connection keywords applied unless `conninfo` sets them itself.
    public init(_ conninfo: String, defaults: [(String, String)] = []) throws(PGError) {
        let keywords = defaults.map(\.0) + ["dbname"]
        let values = defaults.map(\.1) + [conninfo]
        let made: OpaquePointer? = withCStrings(keywords + [nil]) { k in
            withCStrings(values + [nil]) { v in PQconnectdbParams(k, v, 1) }
        }
        guard let c = made else { throw PGError(sqlState: "", message: "libpq could not allocate a connection") }
        guard PQstatus(c) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(c)).trimmingTrailingNewlines()
            PQfinish(c)
            throw PGError(sqlState: "", message: message, connectionLost: true)
        }
        conn = c
        _ = PQsetClientEncoding(conn, "UTF8")
        // What the log's correctness relies on, whatever the database's defaults: hex bytea
        // output (read back byte for byte), commits durable before they are acknowledged, and
        // read-committed statements (each append's max() sees the previous holder's commit).
        try query("SET bytea_output = 'hex'")
        // NOTICEs (e.g. "already exists, skipping" while migrating) would go to stderr.
        try query("SET client_min_messages = warning")
        try query("SET synchronous_commit = on")
        try query("SET default_transaction_isolation = 'read committed'")
    }

    private func failure(_ fallback: String = "") -> PGError {
        let message = String(cString: PQerrorMessage(conn)).trimmingTrailingNewlines()
        return PGError(sqlState: "", message: message.isEmpty ? fallback : message, connectionLost: PQstatus(conn) == CONNECTION_BAD)
    }

    deinit { PQfinish(conn) }

    public var isConnected: Bool { PQstatus(conn) == CONNECTION_OK }

    /// Reads what the server sent without waiting: false if the connection is found closed (a
    /// server that went away), so a statement sent now would certainly not reach it.
    public var isAlive: Bool {
        // A server that went away may have sent its last message before closing: the first read
        // takes the message, the second finds the end of the stream.
        PQconsumeInput(conn) == 1 && PQconsumeInput(conn) == 1 && PQstatus(conn) == CONNECTION_OK
    }

    /// The connection's socket (for a poll loop waiting on notifications).
    public var socket: Int32 { PQsocket(conn) }

    /// Runs one statement with text parameters ($1, $2, …) and returns its rows.
    @discardableResult
    public func query(_ sql: String, _ parameters: [String?] = []) throws(PGError) -> PGRows {
        let result: OpaquePointer? = withCStrings(parameters) { values in
            PQexecParams(conn, sql, Int32(parameters.count), nil, values, nil, nil, 0)
        }
        guard let result else { throw failure("libpq returned no result") }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PGRows(columns: [], rows: [], command: String(cString: PQcmdStatus(result)))
        case PGRES_TUPLES_OK:
            let n = Int(PQntuples(result)), m = Int(PQnfields(result))
            let columns = (0..<m).map { String(cString: PQfname(result, Int32($0))) }
            var rows: [[String?]] = []
            rows.reserveCapacity(n)
            for r in 0..<n {
                rows.append((0..<m).map { c in
                    PQgetisnull(result, Int32(r), Int32(c)) == 1 ? nil : String(cString: PQgetvalue(result, Int32(r), Int32(c)))
                })
            }
            return PGRows(columns: columns, rows: rows, command: String(cString: PQcmdStatus(result)))
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let message = String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines()
            guard !message.isEmpty else { throw failure() }
            throw PGError(sqlState: state, message: message, connectionLost: PQstatus(conn) == CONNECTION_BAD)
        }
    }

    /// Statements this connection has prepared (by name).
    private var prepared: Set<String> = []

    /// Runs a statement prepared once per connection (parsed and planned once, not per call) with
    /// parameters in PostgreSQL's binary format, and hands `body` each row of its binary result
    /// while the result is alive. The log's hot statements use it: no text to escape or parse.
    public func execute(prepared name: String, _ sql: String, _ parameters: [PGBinary],
                        row body: (PGBinaryRow) throws(PGError) -> Void) throws(PGError) {
        if !prepared.contains(name) {
            let types = parameters.map(\.type)
            let made = PQprepare(conn, name, sql, Int32(types.count), types)
            guard let made else { throw failure("libpq returned no result") }
            defer { PQclear(made) }
            try check(made)
            prepared.insert(name)
        }
        var lengths: [Int32] = []
        for p in parameters {
            guard let n = Int32(exactly: p.bytes?.count ?? 0) else {
                throw PGError(sqlState: "54000", message: "a parameter of \(p.bytes?.count ?? 0) bytes is more than PostgreSQL takes")
            }
            lengths.append(n)
        }
        let formats = [Int32](repeating: 1, count: parameters.count)
        let result: OpaquePointer? = withBuffers(parameters.map(\.bytes)) { values in
            PQexecPrepared(conn, name, Int32(parameters.count), values, lengths, formats, 1)
        }
        guard let result else { throw failure("libpq returned no result") }
        defer { PQclear(result) }
        try check(result)
        let n = PQntuples(result)
        for r in 0..<n { try body(PGBinaryRow(result: result, row: r)) }
    }

    /// Throws the error a result carries, if it carries one.
    private func check(_ result: OpaquePointer) throws(PGError) {
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY, PGRES_TUPLES_OK:
            return
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) } ?? ""
            let message = String(cString: PQresultErrorMessage(result)).trimmingTrailingNewlines()
            guard !message.isEmpty else { throw failure() }
            throw PGError(sqlState: state, message: message, connectionLost: PQstatus(conn) == CONNECTION_BAD)
        }
    }

    /// How a transaction sees the database.
    public enum TransactionMode: String, Sendable {
        /// Each statement sees what was committed before it (the log's appends rely on it).
        case readCommitted = "ISOLATION LEVEL READ COMMITTED"
        /// Every statement sees the database as of the first, and nothing is written (a read
        /// made of several statements, e.g. a snapshot and its chunks).
        case repeatableReadOnly = "ISOLATION LEVEL REPEATABLE READ READ ONLY"
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws. A
    /// COMMIT that PostgreSQL turned into a rollback (the transaction had failed) throws. A
    /// connection lost during COMMIT leaves the outcome unknown: callers that must know (the log)
    /// check for their own rows after reconnecting.
    public func transaction<T>(_ mode: TransactionMode = .readCommitted, _ body: () throws(PGError) -> T) throws(PGError) -> T {
        try query("BEGIN " + mode.rawValue)
        do throws(PGError) {
            let value = try body()
            let done: PGRows
            do {
                done = try query("COMMIT")
            } catch {
                var e = error
                e.duringCommit = true
                throw e
            }
            guard done.command == "COMMIT" else {
                throw PGError(sqlState: "40000", message: "the transaction was rolled back (\(done.command))")
            }
            return value
        } catch {
            if isConnected { _ = try? query("ROLLBACK") }
            throw error
        }
    }

    /// Notifications received so far (after `LISTEN`), without waiting: those libpq already
    /// queued (while answering a query on this connection) and those the socket holds. Call it
    /// before waiting on `socket`: a queued notification does not make the socket readable.
    public func notifications() throws(PGError) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(conn) == 1 else { throw failure() }
        var out: [(String, String)] = []
        while let n = PQnotifies(conn) {
            out.append((String(cString: n.pointee.relname), String(cString: n.pointee.extra)))
            PQfreemem(n)
        }
        return out
    }

    /// A string as a SQL literal is never built by hand: parameters carry every value. This
    /// quotes an identifier (a channel name for LISTEN/NOTIFY, which take no parameters).
    public func quotedIdentifier(_ s: String) -> String {
        guard let p = PQescapeIdentifier(conn, s, s.utf8.count) else { return "\"\"" }
        defer { PQfreemem(p) }
        return String(cString: p)
    }
}

/// A parameter in PostgreSQL's binary format: its type's OID and its bytes (nil: SQL NULL).
public struct PGBinary: Sendable {
    public var type: UInt32
    public var bytes: [UInt8]?

    public static let int8OID: UInt32 = 20
    public static let textOID: UInt32 = 25
    public static let byteaOID: UInt32 = 17
    static let int8ArrayOID: UInt32 = 1016
    static let textArrayOID: UInt32 = 1009
    static let byteaArrayOID: UInt32 = 1001

    public static func int8(_ v: Int64) -> PGBinary { PGBinary(type: int8OID, bytes: bigEndian(v)) }

    /// A one-dimensional array (PostgreSQL's binary array format: dimensions, element type, then
    /// each element's length and bytes, -1 for NULL).
    static func array(_ elements: [[UInt8]?], element: UInt32, type: UInt32) -> PGBinary {
        var out: [UInt8] = []
        out.reserveCapacity(20 + elements.reduce(0) { $0 + 4 + ($1?.count ?? 0) })
        func put(_ v: Int32) { withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) } }
        put(1)
        put(elements.contains { $0 == nil } ? 1 : 0)
        put(Int32(bitPattern: element))
        put(Int32(elements.count))
        put(1)
        for e in elements {
            if let e {
                put(Int32(e.count))
                out.append(contentsOf: e)
            } else {
                put(-1)
            }
        }
        return PGBinary(type: type, bytes: out)
    }

    public static func int8Array(_ values: [Int64?]) -> PGBinary {
        array(values.map { $0.map(bigEndian) }, element: int8OID, type: int8ArrayOID)
    }

    public static func textArray(_ values: [String]) -> PGBinary {
        array(values.map { Array($0.utf8) }, element: textOID, type: textArrayOID)
    }

    public static func byteaArray(_ values: [[UInt8]]) -> PGBinary {
        array(values, element: byteaOID, type: byteaArrayOID)
    }

    static func bigEndian(_ v: Int64) -> [UInt8] { withUnsafeBytes(of: v.bigEndian) { Array($0) } }
}

/// A row of a binary result, valid only inside the `execute(prepared:)` call that hands it out.
public struct PGBinaryRow {
    let result: OpaquePointer
    let row: Int32

    public var columns: Int { Int(PQnfields(result)) }

    public func isNull(_ column: Int) -> Bool { PQgetisnull(result, row, Int32(column)) == 1 }

    /// The cell's bytes (nil: NULL).
    public func withBytes<R>(_ column: Int, _ body: (UnsafeRawBufferPointer?) -> R) -> R {
        guard !isNull(column), let p = PQgetvalue(result, row, Int32(column)) else { return body(nil) }
        return body(UnsafeRawBufferPointer(start: p, count: Int(PQgetlength(result, row, Int32(column)))))
    }

    /// An `int8` column; nil if NULL or not 8 bytes.
    public func int64(_ column: Int) -> Int64? {
        withBytes(column) { b in
            guard let b, b.count == 8 else { return nil }
            var v: Int64 = 0
            withUnsafeMutableBytes(of: &v) { $0.copyMemory(from: b) }
            return Int64(bigEndian: v)
        }
    }

    /// A `text` column as a string (its UTF-8); nil if NULL.
    public func string(_ column: Int) -> String? {
        withBytes(column) { b in b.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// A `bytea` column's bytes; nil if NULL.
    public func bytes(_ column: Int) -> [UInt8]? {
        withBytes(column) { b in b.map { Array($0) } }
    }
}

/// Calls `body` with pointers to `values`' bytes (nil stays NULL), alive for the call.
private func withBuffers<R>(_ values: [[UInt8]?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = []
    pointers.reserveCapacity(values.count)
    for v in values {
        guard let v else {
            pointers.append(nil)
            continue
        }
        let p = UnsafeMutablePointer<CChar>.allocate(capacity: max(1, v.count))
        v.withUnsafeBytes { src in if let base = src.baseAddress { UnsafeMutableRawPointer(p).copyMemory(from: base, byteCount: v.count) } }
        pointers.append(p)
    }
    defer { for p in pointers { p?.deallocate() } }
    return body(pointers.map { $0.map { UnsafePointer($0) } })
}

extension String {
    func trimmingTrailingNewlines() -> String {
        var s = self
        while s.hasSuffix("\n") { s.removeLast() }
        return s
    }
}

/// Calls `body` with C strings for `values` (nil stays NULL), alive for the call.
private func withCStrings<R>(_ values: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let pointers: [UnsafeMutablePointer<CChar>?] = values.map { $0.map { strdup($0) } ?? nil }
    defer { for p in pointers { free(p) } }
    return body(pointers.map { $0.map { UnsafePointer($0) } })
}
