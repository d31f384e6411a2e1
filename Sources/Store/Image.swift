import Foundation
import GRDB
import GRDBSQLite
import Logging
import Reactor
#if canImport(Glibc)
import Glibc
#endif

/// A cluster node's replica as bytes (CLUSTER.md, snapshots): the database at one commit's place
/// in commit order (exactly what the commits before it wrote), loaded into a new node's replica
/// before it starts.
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
    /// commit before it, and none after), whole in memory, twice for a moment (SQLite's
    /// serialization and this copy): an in-memory store's images (`Commit.image`), and tests. A
    /// file store's images are copied page by page instead (`ReplicaImage`).
    public static func image(_ tx: Transaction) throws -> [UInt8] {
        guard let connection = tx.database.sqliteConnection else { throw ImageError.sqlite(SQLITE_MISUSE, "serializing a closed database") }
        var size: sqlite3_int64 = 0
        guard let bytes = sqlite3_serialize(connection, "main", &size, 0) else {
            throw ImageError.sqlite(sqlite3_errcode(connection), "serializing the replica")
        }
        defer { sqlite3_free(bytes) }
        var image = Array(UnsafeBufferPointer(start: bytes, count: Int(size)))
        // A replica on disk is in WAL mode (header bytes 18 and 19 are 2). The image says
        // rollback journal (1), as an in-memory database's does: SQLite's deserialization does not
        // open WAL-mode bytes, and a file made from them turns to WAL again when it is opened.
        if image.count >= 20, image[18] == 2, image[19] == 2 {
            image[18] = 1
            image[19] = 1
        }
        return image
    }

    /// CL-9: a cluster node's replica on its own disk, at `path` (its data directory's
    /// `DataDirectory.replicaName`): what an earlier run left there is removed (the replica is
    /// made from the log, and from `image`, the cluster snapshot's, when the node starts from
    /// one), then it is opened as an ordinary file store, whose memory is SQLite's page cache
    /// rather than the whole database. Commits are not synced one by one (`synchronous = OFF`):
    /// PostgreSQL holds what is durable, and a node rebuilds its replica at every start.
    public static func replica(path: String, image: [UInt8]?, logger: Logger, afterBatch: (@Sendable () -> Void)? = nil) throws -> Store {
        guard let image else { return try replica(path: path, imageFile: nil, logger: logger, afterBatch: afterBatch) }
        let file = path + DataDirectory.replicaDownloadSuffix
        try? FileManager.default.removeItem(atPath: file)
        guard FileManager.default.createFile(atPath: file, contents: Data(image)) else {
            throw ImageError.sqlite(SQLITE_CANTOPEN, "writing the replica's image to \(file)")
        }
        return try replica(path: path, imageFile: file, logger: logger, afterBatch: afterBatch)
    }

    /// CL-9: the same, from an image already in a file (`imageFile`, beside `path`: a starting
    /// node downloads the cluster snapshot's replica there, chunk by chunk), which is moved into
    /// place and checked before the store opens it. An image that is not a sound SQLite database
    /// is refused, and neither it nor a replica is left behind.
    ///
    /// `keepExisting`: the replica an earlier run of this node left is opened as it is (it catches
    /// up from its own position: the run stopped cleanly and recorded where, `LocalCheckpoint`);
    /// only a snapshot's copy or a download it left is removed.
    public static func replica(path: String, imageFile: String?, keepExisting: Bool = false, logger: Logger,
                               afterBatch: (@Sendable () -> Void)? = nil) throws -> Store {
        precondition(!(keepExisting && imageFile != nil), "a replica is either kept or made from an image")
        // An earlier run's replica, its companions, and a snapshot's copy or a download it left.
        let leftovers = keepExisting ? [DataDirectory.replicaSnapshotSuffix, DataDirectory.replicaDownloadSuffix]
            : ["", "-wal", "-shm", "-journal", DataDirectory.replicaSnapshotSuffix, DataDirectory.replicaDownloadSuffix]
        for companion in leftovers {
            let file = path + companion
            if file != imageFile, FileManager.default.fileExists(atPath: file) { try FileManager.default.removeItem(atPath: file) }
        }
        if let imageFile {
            do {
                try isDatabase(imageFile)
                try syscallChecked("rename") { rename(imageFile, path) }
                try check(path: path)
            } catch {
                for file in [imageFile, path, path + "-journal"] { try? FileManager.default.removeItem(atPath: file) }
                throw error
            }
        }
        return try Store(path: path, synchronous: "OFF", logger: logger, afterBatch: afterBatch)
    }

    /// CL-9: after `stop`, a replica's file holds every commit and is on disk (its WAL folded
    /// into it, the file synced): what a stopping node records its position against.
    public func syncToDisk() throws {
        try database.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
        try DataDirectory.syncFile(path)
    }

    /// The file at `path` starts as an SQLite database does.
    private static func isDatabase(_ path: String) throws {
        let magic = Array("SQLite format 3\0".utf8)
        var header = [UInt8](repeating: 0, count: 100)
        let fd = try syscallChecked("open") { open(path, O_RDONLY | O_CLOEXEC) }
        defer { close(fd) }
        let n = try syscallChecked("pread") { header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 100, 0) } }
        guard n == 100, header.starts(with: magic) else {
            throw ImageError.sqlite(SQLITE_NOTADB, "reading the replica's image (it is not an SQLite database)")
        }
    }

    /// `PRAGMA quick_check` of the file at `path`, before anything opens it for writing.
    private static func check(path: String) throws {
        var connection: OpaquePointer?
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let connection else {
            sqlite3_close(connection)
            throw ImageError.sqlite(SQLITE_CANTOPEN, "opening the replica's image")
        }
        defer { sqlite3_close(connection) }
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection, "PRAGMA quick_check", -1, &statement, nil) == SQLITE_OK, let statement else {
            throw ImageError.sqlite(sqlite3_errcode(connection), "checking the replica's image")
        }
        defer { sqlite3_finalize(statement) }
        guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0), String(cString: text) == "ok" else {
            throw ImageError.sqlite(SQLITE_CORRUPT, "checking the replica's image (quick_check did not answer ok)")
        }
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
