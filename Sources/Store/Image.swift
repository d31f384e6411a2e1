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
    /// to this version. Only before `start`, and only for an in-memory store.
    public func load(image bytes: [UInt8]) throws {
        precondition(path == ":memory:", "only an in-memory replica loads an image")
        try database.writeWithoutTransaction { db in
            guard let connection = db.sqliteConnection else { throw ImageError.sqlite(SQLITE_MISUSE, "loading into a closed database") }
            // SQLite owns (and frees) a copy it may grow.
            guard let buffer = sqlite3_malloc64(sqlite3_uint64(max(1, bytes.count)))?.assumingMemoryBound(to: UInt8.self) else {
                throw ImageError.sqlite(SQLITE_NOMEM, "allocating \(bytes.count) bytes for the replica")
            }
            bytes.withUnsafeBufferPointer { src in if let base = src.baseAddress { buffer.update(from: base, count: bytes.count) } }
            let flags = UInt32(SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_RESIZEABLE)
            let rc = sqlite3_deserialize(connection, "main", buffer, sqlite3_int64(bytes.count), sqlite3_int64(bytes.count), flags)
            guard rc == SQLITE_OK else { throw ImageError.sqlite(rc, "loading the replica's image") }
            // GRDB's cached statements were prepared against the database that was replaced.
            db.clearSchemaCache()
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        try Schema.migrator.migrate(database)
    }
}
