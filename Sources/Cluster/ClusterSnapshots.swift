import Reactor
#if canImport(Glibc)
import Glibc
#endif

/// Snapshots of the shared log (CLUSTER.md "Snapshots and trimming"): a node's state at a log
/// position, published by the leader, so a node starts from the newest one instead of the log's
/// first entry; the entries every live node and the newest snapshot have passed are deleted.
public enum ClusterSnapshots {
    public struct Stored: Sendable {
        public var position: Int64
        public var at: Int64
        public var node: String
        public var format: Int
        public var state: [UInt8]
        public var replica: [UInt8]

        public init(position: Int64, at: Int64, node: String, format: Int, state: [UInt8], replica: [UInt8]) {
            self.position = position
            self.at = at
            self.node = node
            self.format = format
            self.state = state
            self.replica = replica
        }
    }

    /// Snapshots kept: the newest and the one before it (a node starting from the older one while
    /// the newer was made still finds it).
    public static let kept = 2
    /// Entries one trimming statement deletes at most (it goes on until it is done).
    public static let trimChunk: Int64 = 50_000

    /// zlib's level for snapshots: its fastest, as the snapshot thread compresses the whole state
    /// while the leader runs (see CLUSTER.md "Snapshots and trimming" for what it gives).
    public static let compressionLevel: Int32 = 1

    /// How a snapshot row holds its parts (`roomcast_snapshots.encoding`).
    enum Encoding {
        /// In its `state` and `replica` columns, as they are (schema versions up to 6: each part
        /// at most 1 GB, PostgreSQL's `bytea`). Still read: a node of the previous version may
        /// have published the newest snapshot.
        static let inline: Int64 = 0
        /// Each part one zlib stream in `roomcast_snapshot_chunks` (part 0 the state, 1 the
        /// replica), its length, CRC-32 and chunk count in the row.
        static let zlibChunks: Int64 = 1
    }

    /// What publishing wrote.
    public struct Published: Sendable {
        /// False: a snapshot at that position was already there (nothing was written).
        public var stored: Bool
        /// Compressed bytes and chunks of both parts.
        public var compressedBytes: Int
        public var chunks: Int
    }

    /// A part's bytes as they are read: hands the function it is given the bytes in order, in
    /// pieces of any size (each lent for the call).
    public typealias PartReader = ((UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void

    /// Publishes a snapshot (a second one at the same position changes nothing): each part is
    /// compressed and stored in chunks of at most `chunkBytes` bytes, the row and all its chunks in
    /// one transaction. The replica's part is `s.replica`, or what `replica` reads (e.g. a file,
    /// piece by piece: CL-9, the leader does not hold its whole replica). Besides the parts (or
    /// one piece), one chunk at a time is held (and libpq's copy of it).
    @discardableResult
    public static func put(_ db: PGConnection, _ s: Stored, replica: PartReader? = nil, createdAt: Int64, chunkBytes: Int,
                           level: Int32 = compressionLevel) throws(PGError) -> Published {
        try db.transaction { () throws(PGError) -> Published in
            // The row first (its part descriptions once they are known): a concurrent publisher of
            // the same position waits here for this transaction, then finds the row and stops.
            var claimed = false
            try db.execute(prepared: "roomcast_snapshot_claim", """
                INSERT INTO roomcast_snapshots (position, at, node, created_at, format, encoding,
                    state_bytes, state_crc, state_chunks, replica_bytes, replica_crc, replica_chunks)
                VALUES ($1, $2, $3, $4, $5, \(Encoding.zlibChunks), 0, 0, 0, 0, 0, 0)
                ON CONFLICT (position) DO NOTHING RETURNING position
                """, [.int8(s.position), .int8(s.at), PGBinary(type: PGBinary.textOID, bytes: Array(s.node.utf8)), .int8(createdAt),
                      .int8(Int64(s.format))]) { _ throws(PGError) in claimed = true }
            guard claimed else { return Published(stored: false, compressedBytes: 0, chunks: 0) }
            var parts: [SnapshotCompression.Part] = []
            for index in 0..<2 {
                var seq: Int64 = 0
                func emit(_ chunk: [UInt8]) throws(PGError) {
                    try db.execute(prepared: "roomcast_snapshot_chunk_put",
                                   "INSERT INTO roomcast_snapshot_chunks (position, part, seq, data) VALUES ($1, $2, $3, $4)",
                                   [.int8(s.position), .int8(Int64(index)), .int8(seq), PGBinary(type: PGBinary.byteaOID, bytes: chunk)]) { _ throws(PGError) in }
                    seq += 1
                }
                if index == 1, let replica {
                    parts.append(try SnapshotCompression.compress(chunkBytes: chunkBytes, level: level, input: replica, emit: emit))
                } else {
                    parts.append(try SnapshotCompression.compress(index == 0 ? s.state : s.replica, chunkBytes: chunkBytes, level: level, emit: emit))
                }
            }
            try db.execute(prepared: "roomcast_snapshot_describe", """
                UPDATE roomcast_snapshots SET state_bytes = $2, state_crc = $3, state_chunks = $4,
                    replica_bytes = $5, replica_crc = $6, replica_chunks = $7 WHERE position = $1
                """, [.int8(s.position)] + parts.flatMap { p -> [PGBinary] in
                    [.int8(Int64(p.bytes)), .int8(Int64(p.crc)), .int8(Int64(p.chunks))]
                }) { _ throws(PGError) in }
            return Published(stored: true, compressedBytes: parts.reduce(0) { $0 + $1.compressedBytes }, chunks: parts.reduce(0) { $0 + $1.chunks })
        }
    }

    /// The newest snapshot, if there is one; one that is damaged (a chunk missing or changed, a
    /// length or CRC-32 that does not match) is an error, never a wrong state. Read in one
    /// repeatable-read transaction, so trimming cannot take its chunks away half-way.
    ///
    /// CL-9: with `replicaFile`, the replica's part is written to that file as it is decompressed
    /// (in pieces of at most `pieceBytes`), not returned (`replica` is empty): a starting node
    /// never holds it whole. The file is made anew; it is there only when a snapshot was returned
    /// (a damaged one leaves none).
    public static func latest(_ db: PGConnection, replicaFile: String? = nil, pieceBytes: Int = 1 << 20) throws(PGError) -> Stored? {
        if let replicaFile { unlink(replicaFile) }
        do throws(PGError) {
            return try latest(db, replicaFile: replicaFile.map { ($0, pieceBytes) })
        } catch {
            if let replicaFile { unlink(replicaFile) }
            throw error
        }
    }

    private static func latest(_ db: PGConnection, replicaFile: (path: String, pieceBytes: Int)?) throws(PGError) -> Stored? {
        try db.transaction(.repeatableReadOnly) { () throws(PGError) -> Stored? in
            var found: Stored?
            var parts: [SnapshotCompression.Part] = []
            try db.execute(prepared: "roomcast_snapshot_latest", """
                SELECT position, at, node, format::bigint, encoding::bigint, state, replica,
                    state_bytes, state_crc, state_chunks::bigint, replica_bytes, replica_crc, replica_chunks::bigint
                FROM roomcast_snapshots ORDER BY position DESC LIMIT 1
                """, []) { r throws(PGError) in
                guard let p = r.int64(0), let at = r.int64(1), let node = r.string(2), let f = r.int64(3), let encoding = r.int64(4) else {
                    throw PGError(sqlState: "XX001", message: "the newest snapshot does not read back")
                }
                found = Stored(position: p, at: at, node: node, format: Int(f), state: [], replica: [])
                switch encoding {
                case Encoding.inline:
                    guard let state = r.bytes(5), let replica = r.bytes(6) else {
                        throw PGError(sqlState: "XX001", message: "the newest snapshot does not read back")
                    }
                    found?.state = state
                    if let replicaFile {
                        try Self.write(replicaFile.path) { (write: (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) in
                            var failed: PGError?
                            replica.withUnsafeBytes { b in
                                do throws(PGError) { try write(b) } catch { failed = error }
                            }
                            if let failed { throw failed }
                        }
                    } else {
                        found?.replica = replica
                    }
                case Encoding.zlibChunks:
                    for column in [7, 10] {
                        guard let bytes = r.int64(column), let crc = r.int64(column + 1), let chunks = r.int64(column + 2),
                              let b = Int(exactly: bytes), let c = UInt32(exactly: crc), let n = Int(exactly: chunks) else {
                            throw PGError(sqlState: "XX001", message: "the newest snapshot's description is damaged")
                        }
                        parts.append(SnapshotCompression.Part(bytes: b, crc: c, chunks: n, compressedBytes: 0))
                    }
                default:
                    throw PGError(sqlState: "XX001", message: "the newest snapshot is stored as \(encoding), which this roomcast does not read")
                }
            }
            guard var snapshot = found, !parts.isEmpty else { return found }
            for index in parts.indices {
                var part = parts[index]
                // Every chunk is there (a missing one is found before anything is allocated).
                let present = try db.query("""
                    SELECT count(*), coalesce(sum(octet_length(data)), 0), coalesce(min(seq), 0), coalesce(max(seq), -1)
                    FROM roomcast_snapshot_chunks WHERE position = $1 AND part = $2
                    """, [String(snapshot.position), String(index)]).rows.first ?? []
                let counts = present.map { $0.flatMap { Int($0) } ?? -1 }
                guard counts.count == 4, counts[0] == part.chunks, counts[2] == 0, counts[3] == part.chunks - 1 else {
                    throw PGError(sqlState: "XX001", message: "the newest snapshot (position \(snapshot.position)) is damaged: "
                                  + "\(index == 0 ? "the engine's state" : "the replica's image") should have chunks 0 to \(part.chunks - 1); "
                                  + "it has \(counts.first ?? 0) numbered \(counts.count == 4 ? "\(counts[2]) to \(counts[3])" : "?")")
                }
                part.compressedBytes = counts[1]
                do throws(PGError) {
                    if index == 1, let replicaFile {
                        try Self.write(replicaFile.path) { (write: (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) in
                            try SnapshotCompression.decompress(part, outputBytes: replicaFile.pieceBytes,
                                                               chunk: chunks(db, position: snapshot.position, index: index), output: write)
                        }
                    } else {
                        let bytes = try SnapshotCompression.decompress(part, chunk: chunks(db, position: snapshot.position, index: index))
                        if index == 0 { snapshot.state = bytes } else { snapshot.replica = bytes }
                    }
                } catch {
                    throw PGError(sqlState: error.sqlState, message: "the newest snapshot (position \(snapshot.position)), "
                                  + "\(index == 0 ? "the engine's state" : "the replica's image"): \(error.message)", connectionLost: error.connectionLost)
                }
            }
            return snapshot
        }
    }

    /// Makes the file at `path` anew and writes to it what `body` hands the function it is given.
    private static func write(_ path: String, _ body: ((UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void) throws(PGError) {
        let fd: Int32
        do {
            fd = try syscallChecked("open") { open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644) }
        } catch {
            throw PGError(sqlState: "58030", message: "cannot create \(path): \(error)")
        }
        defer { close(fd) }
        try body { (bytes: UnsafeRawBufferPointer) throws(PGError) in
            var offset = 0
            while offset < bytes.count, let base = bytes.baseAddress {
                do {
                    offset += try syscallChecked("write") { Glibc.write(fd, base + offset, bytes.count - offset) }
                } catch {
                    throw PGError(sqlState: "58030", message: "cannot write \(path): \(error)")
                }
            }
        }
    }

    /// The chunks of a snapshot's part, one read at a time, for `SnapshotCompression.decompress`.
    private static func chunks(_ db: PGConnection, position: Int64, index: Int)
        -> (Int, (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) -> Void {
        { seq, body throws(PGError) in
            var seen = false
            try db.execute(prepared: "roomcast_snapshot_chunk_get",
                           "SELECT data FROM roomcast_snapshot_chunks WHERE position = $1 AND part = $2 AND seq = $3",
                           [.int8(position), .int8(Int64(index)), .int8(Int64(seq))]) { row throws(PGError) in
                seen = true
                // Straight from libpq's result: no copy of the chunk.
                let failed = row.withBytes(0) { b -> PGError? in
                    do throws(PGError) { try body(b ?? UnsafeRawBufferPointer(start: nil, count: 0)) } catch { return error }
                    return nil
                }
                if let failed { throw failed }
            }
            guard seen else { throw PGError(sqlState: "XX001", message: "the snapshot part is damaged: its chunk \(seq) is missing") }
        }
    }

    /// The newest snapshot's position (0: none).
    public static func latestPosition(_ db: PGConnection) throws(PGError) -> Int64 {
        Int64(try db.query("SELECT coalesce(max(position), 0) FROM roomcast_snapshots").scalar ?? "0") ?? 0
    }

    /// The log's first position (0: empty).
    public static func firstPosition(_ db: PGConnection) throws(PGError) -> Int64 {
        Int64(try db.query("SELECT coalesce(min(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
    }

    /// Deletes the entries before `position` (a published snapshot's) that every listed node has
    /// applied, and every snapshot but the newest `kept` (their chunks with them: the chunks'
    /// foreign key cascades, in the same statement). The entry at `position` stays, so the
    /// log is never empty once it had entries (appends go on from its last position). Returns
    /// how many entries were deleted.
    @discardableResult
    public static func trim(_ db: PGConnection, below position: Int64) throws(PGError) -> Int64 {
        var deleted: Int64 = 0
        while true {
            // One chunk per transaction, under the trim lock (ClusterSchema.LockKey.trim) with the
            // nodes' applied positions read afresh: a node that registers waits for at most one
            // chunk, and the next chunk sees its 0 (a node that registered and has not applied
            // anything yet keeps the whole log while it starts).
            let n = try db.transaction { () throws(PGError) -> Int64 in
                try db.query("SELECT pg_advisory_xact_lock($1)", [String(ClusterSchema.LockKey.trim)])
                let applied = Int64(try db.query("SELECT coalesce(min(applied), $1) FROM roomcast_nodes", [String(position)]).scalar ?? "0") ?? 0
                let bound = min(position, applied)
                guard bound > 1 else { return 0 }
                let r = try db.query("""
                    DELETE FROM roomcast_log WHERE position < least($1::bigint, (SELECT min(position) FROM roomcast_log) + $2::bigint)
                    """, [String(bound), String(trimChunk)])
                return Int64(r.command.split(separator: " ").last ?? "0") ?? 0
            }
            deleted += n
            if n == 0 { break }
        }
        try db.query("""
            DELETE FROM roomcast_snapshots WHERE position < (SELECT min(position) FROM (
                SELECT position FROM roomcast_snapshots ORDER BY position DESC LIMIT $1) newest)
            """, [String(kept)])
        return deleted
    }
}
