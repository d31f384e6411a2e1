import Foundation
import GRDBSQLite
import Reactor
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// CL-9: a replica's image at one commit's place in commit order (`Store.Commit.image`), read in
/// pieces, so that a cluster leader publishes a snapshot of its replica without holding the whole
/// of it in memory.
///
/// A file store's image is a read transaction on a connection of its own, begun right after the
/// commit (before anything else is written), so it sees exactly what the commits up to it wrote
/// while the store goes on. Reading copies it page by page (SQLite's backup) into a file beside
/// the replica (`DataDirectory.replicaSnapshotSuffix`), which ends the read transaction, marks the
/// copy rollback journal (as a deserialized image must be), and unlinks the file at once: the open
/// descriptor keeps it readable until `close`, and no copy is left behind however the process
/// ends. An in-memory store's image is its bytes (SQLite's serialization: tests).
public final class ReplicaImage: @unchecked Sendable {
    // Safety: every mutable state is inside `state`'s Mutex.
    private enum State {
        case bytes([UInt8])
        /// The read connection (in its read transaction) and where to copy it.
        case pinned(OpaquePointer, copy: String)
        /// The copy, unlinked, open for reading.
        case file(Int32, size: Int)
        case closed
    }

    private let state: Mutex<State>

    /// Copies are made one at a time (they share the file name beside the replica).
    private static let copying = Mutex(())

    init(bytes: [UInt8]) {
        state = Mutex(.bytes(bytes))
    }

    /// Begins a read transaction on a new read-only connection to the store file at `path` (after
    /// a commit, on the store's writer, before anything else is written).
    init(pinning path: String) throws {
        var connection: OpaquePointer?
        guard sqlite3_open_v2(path, &connection, SQLITE_OPEN_READONLY, nil) == SQLITE_OK, let connection else {
            sqlite3_close(connection)
            throw Store.ImageError.sqlite(SQLITE_CANTOPEN, "opening the replica for its image")
        }
        // The read transaction begins with its first read: from then on it sees this state only.
        guard sqlite3_exec(connection, "BEGIN; SELECT count(*) FROM sqlite_master", nil, nil, nil) == SQLITE_OK else {
            let code = sqlite3_errcode(connection)
            sqlite3_close(connection)
            throw Store.ImageError.sqlite(code, "beginning the replica's image")
        }
        state = Mutex(.pinned(connection, copy: path + DataDirectory.replicaSnapshotSuffix))
    }

    deinit { close() }

    /// Ends the read transaction, or closes (and so frees) the copy. Reading after it fails.
    public func close() {
        let previous = state.withLock { s -> State in
            defer { s = .closed }
            return s
        }
        switch previous {
        case .pinned(let connection, _): sqlite3_close(connection)
        case .file(let fd, _): Glibc.close(fd)
        case .bytes, .closed: break
        }
    }

    /// A file store's image is copied to disk now (page by page), and its read transaction ends;
    /// otherwise nothing is done. `read` does it first when it was not done.
    public func copy() throws {
        try state.withLock { s in
            if case .pinned(let connection, let copy) = s {
                s = .closed
                defer { sqlite3_close(connection) }
                let (fd, size) = try Self.copying.withLock { _ in try Self.copy(connection, to: copy) }
                s = .file(fd, size: size)
            }
        }
    }

    /// Hands `body` the image's bytes in order, in pieces of at most `pieceBytes` (each lent for
    /// the call), and returns how many there were. A file store's image is copied first, at the
    /// first read; reading again reads the copy again.
    @discardableResult
    public func read(pieceBytes: Int, _ body: (UnsafeRawBufferPointer) throws -> Void) throws -> Int {
        precondition(pieceBytes > 0, "a piece holds at least one byte")
        try copy()
        // Not under the lock: `body` may take long (compressing, uploading).
        switch state.withLock({ $0 }) {
        case .bytes(let bytes):
            try bytes.withUnsafeBytes { all in
                var offset = 0
                while offset < all.count {
                    let n = min(pieceBytes, all.count - offset)
                    try body(UnsafeRawBufferPointer(rebasing: all[offset..<offset + n]))
                    offset += n
                }
            }
            return bytes.count
        case .file(let fd, let size):
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: min(pieceBytes, max(size, 1)), alignment: 16)
            defer { buffer.deallocate() }
            var offset = 0
            while offset < size {
                let n = try syscallChecked("pread") { pread(fd, buffer.baseAddress, min(buffer.count, size - offset), off_t(offset)) }
                guard n > 0 else {
                    throw Store.ImageError.sqlite(SQLITE_IOERR, "reading the replica's image (it ended at \(offset) of \(size) bytes)")
                }
                try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                offset += n
            }
            return size
        case .pinned, .closed:
            throw Store.ImageError.sqlite(SQLITE_MISUSE, "reading a closed replica image")
        }
    }

    /// The whole image in memory (tests, and loading an in-memory store).
    public func bytes() throws -> [UInt8] {
        var all: [UInt8] = []
        try read(pieceBytes: 1 << 20) { all.append(contentsOf: $0) }
        return all
    }

    /// Copies the database of `source` (in its read transaction) to `path` page by page, in
    /// rollback journal mode, and returns the copy open for reading, already unlinked.
    private static func copy(_ source: OpaquePointer, to path: String) throws -> (Int32, Int) {
        for file in [path, path + "-journal"] { unlink(file) }
        defer { unlink(path) }
        var destination: OpaquePointer?
        guard sqlite3_open_v2(path, &destination, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nil) == SQLITE_OK, let destination else {
            sqlite3_close(destination)
            throw Store.ImageError.sqlite(SQLITE_CANTOPEN, "creating the replica's image at \(path)")
        }
        do {
            defer { sqlite3_close(destination) }
            // Nothing to roll back to (the file is new and thrown away on failure), and nothing to
            // sync: SQLite writes the pages out as its cache fills, so memory stays its cache's.
            guard sqlite3_exec(destination, "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF", nil, nil, nil) == SQLITE_OK else {
                throw Store.ImageError.sqlite(sqlite3_errcode(destination), "preparing the replica's image")
            }
            guard let backup = sqlite3_backup_init(destination, "main", source, "main") else {
                throw Store.ImageError.sqlite(sqlite3_errcode(destination), "copying the replica's image")
            }
            let step = sqlite3_backup_step(backup, -1)
            let finish = sqlite3_backup_finish(backup)
            guard step == SQLITE_DONE, finish == SQLITE_OK else {
                throw Store.ImageError.sqlite(step == SQLITE_DONE ? finish : step, "copying the replica's image")
            }
        }
        let fd = try syscallChecked("open") { open(path, O_RDWR | O_CLOEXEC) }
        do {
            var info = stat()
            var header: [UInt8] = [0, 0]
            try syscallChecked("fstat") { fstat(fd, &info) }
            guard try syscallChecked("pread", { header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 2, 18) } }) == 2 else {
                throw Store.ImageError.sqlite(SQLITE_IOERR, "reading the replica's image (shorter than its header)")
            }
            // The copy has the replica's first page: WAL (header bytes 18 and 19 are 2). An image
            // says rollback journal (1), as `Store.image` does (see there).
            if header == [2, 2] {
                let rollback: [UInt8] = [1, 1]
                guard try syscallChecked("pwrite", { rollback.withUnsafeBytes { pwrite(fd, $0.baseAddress, 2, 18) } }) == 2 else {
                    throw Store.ImageError.sqlite(SQLITE_IOERR, "writing the replica's image's header")
                }
            }
            return (fd, Int(info.st_size))
        } catch {
            Glibc.close(fd)
            throw error
        }
    }
}
