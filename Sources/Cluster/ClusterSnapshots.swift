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

    /// Publishes a snapshot (a second one at the same position changes nothing): each part is
    /// compressed and stored in chunks of at most `chunkBytes` bytes, the row and all its chunks in
    /// one transaction. Besides the parts, one chunk at a time is held (and libpq's copy of it).
    @discardableResult
    public static func put(_ db: PGConnection, _ s: Stored, createdAt: Int64, chunkBytes: Int,
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
            for (index, bytes) in [s.state, s.replica].enumerated() {
                var seq: Int64 = 0
                parts.append(try SnapshotCompression.compress(bytes, chunkBytes: chunkBytes, level: level) { chunk throws(PGError) in
                    try db.execute(prepared: "roomcast_snapshot_chunk_put",
                                   "INSERT INTO roomcast_snapshot_chunks (position, part, seq, data) VALUES ($1, $2, $3, $4)",
                                   [.int8(s.position), .int8(Int64(index)), .int8(seq), PGBinary(type: PGBinary.byteaOID, bytes: chunk)]) { _ throws(PGError) in }
                    seq += 1
                })
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
    public static func latest(_ db: PGConnection) throws(PGError) -> Stored? {
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
                    found?.replica = replica
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
                let bytes: [UInt8]
                do throws(PGError) {
                    bytes = try read(db, position: snapshot.position, index: index, part)
                } catch {
                    throw PGError(sqlState: error.sqlState, message: "the newest snapshot (position \(snapshot.position)), "
                                  + "\(index == 0 ? "the engine's state" : "the replica's image"): \(error.message)", connectionLost: error.connectionLost)
                }
                if index == 0 { snapshot.state = bytes } else { snapshot.replica = bytes }
            }
            return snapshot
        }
    }

    /// A part of a snapshot in chunks, put back together (one chunk read at a time).
    private static func read(_ db: PGConnection, position: Int64, index: Int, _ part: SnapshotCompression.Part) throws(PGError) -> [UInt8] {
        try SnapshotCompression.decompress(part) { seq, body throws(PGError) in
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
        // A node that registered and has not applied anything yet reports 0: nothing is deleted
        // while it starts.
        let applied = Int64(try db.query("SELECT coalesce(min(applied), $1) FROM roomcast_nodes", [String(position)]).scalar ?? "0") ?? 0
        let bound = min(position, applied)
        var deleted: Int64 = 0
        while bound > 1 {
            let r = try db.query("""
                DELETE FROM roomcast_log WHERE position < least($1::bigint, (SELECT min(position) FROM roomcast_log) + $2::bigint)
                """, [String(bound), String(trimChunk)])
            let n = Int64(r.command.split(separator: " ").last ?? "0") ?? 0
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
