import GRDB
import GRDBSQLite

/// A cluster node's replica as bytes (CLUSTER.md, snapshots): SQLite's own serialization of the
/// database, taken inside a commit's transaction so that it holds exactly what the commits before
/// it wrote, and loaded into a new node's in-memory replica before it starts.
extension Store {
    public enum ImageError: Error, CustomStringConvertible {
        case sqlite(Int32, String)

        public var description: String {
            switch self {
            case .sqlite(let code, let what): "SQLite error \(code) while \(what)"
            }
        }
    }

    /// The database's bytes, from inside a commit's `extra` (its transaction has written every
    /// commit before it, and none after).
    public static func image(_ tx: Transaction) throws -> [UInt8] {
        guard let connection = tx.database.sqliteConnection else { throw ImageError.sqlite(SQLITE_MISUSE, "serializing a closed database") }
        var size: sqlite3_int64 = 0
        guard let bytes = sqlite3_serialize(connection, "main", &size, 0) else {
            throw ImageError.sqlite(sqlite3_errcode(connection), "serializing the replica")
        }
        defer { sqlite3_free(bytes) }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(size)))
    }

    /// Replaces this in-memory store's database with `bytes` (an `image`), then brings its schema
    /// to this version. Only before `start`, and only for an in-memory store. The bytes are read
    /// into a scratch connection and copied page by page (SQLite's backup) into this store's own
    /// database, which stays an ordinary in-memory database: its later images are read through its
    /// pager (with the open transaction's changes), and it has no size cap of its own.
    public func load(image bytes: [UInt8]) throws {
        precondition(path == ":memory:", "only an in-memory replica loads an image")
        var scratch: OpaquePointer?
        guard sqlite3_open_v2(":memory:", &scratch, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let scratch else {
            sqlite3_close(scratch)
            throw ImageError.sqlite(SQLITE_CANTOPEN, "opening a scratch database")
        }
        defer { sqlite3_close(scratch) }
        // SQLite owns (and frees) its copy of the bytes.
        guard let buffer = sqlite3_malloc64(sqlite3_uint64(max(1, bytes.count)))?.assumingMemoryBound(to: UInt8.self) else {
            throw ImageError.sqlite(SQLITE_NOMEM, "allocating \(bytes.count) bytes for the replica")
        }
        bytes.withUnsafeBufferPointer { src in if let base = src.baseAddress { buffer.update(from: base, count: bytes.count) } }
        let rc = sqlite3_deserialize(scratch, "main", buffer, sqlite3_int64(bytes.count), sqlite3_int64(bytes.count),
                                     UInt32(SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY))
        guard rc == SQLITE_OK else { throw ImageError.sqlite(rc, "reading the replica's image") }
        guard sqlite3_exec(scratch, "PRAGMA quick_check", nil, nil, nil) == SQLITE_OK else {
            throw ImageError.sqlite(sqlite3_errcode(scratch), "checking the replica's image")
        }
        try database.writeWithoutTransaction { db in
            guard let connection = db.sqliteConnection else { throw ImageError.sqlite(SQLITE_MISUSE, "loading into a closed database") }
            guard let backup = sqlite3_backup_init(connection, "main", scratch, "main") else {
                throw ImageError.sqlite(sqlite3_errcode(connection), "copying the replica's image")
            }
            let step = sqlite3_backup_step(backup, -1)
            let finish = sqlite3_backup_finish(backup)
            guard step == SQLITE_DONE, finish == SQLITE_OK else { throw ImageError.sqlite(step == SQLITE_DONE ? finish : step, "copying the replica's image") }
            // GRDB's cached statements and schema knowledge were of the database that was replaced.
            db.clearSchemaCache()
        }
        // An image made by a newer roomcast (a schema this one does not know) is refused.
        guard try !database.read({ try Schema.migrator.hasBeenSuperseded($0) }) else {
            throw ImageError.sqlite(SQLITE_ERROR, "loading a replica image from a newer roomcast (its schema is ahead of this one)")
        }
        try Schema.migrator.migrate(database)
    }
}
