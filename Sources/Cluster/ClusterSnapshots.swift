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

    /// Publishes a snapshot (a second one at the same position changes nothing).
    public static func put(_ db: PGConnection, _ s: Stored, createdAt: Int64) throws(PGError) {
        try db.execute(prepared: "roomcast_snapshot_put", """
            INSERT INTO roomcast_snapshots (position, at, node, created_at, format, state, replica) VALUES ($1, $2, $3, $4, $5, $6, $7)
            ON CONFLICT (position) DO NOTHING
            """, [.int8(s.position), .int8(s.at), PGBinary(type: PGBinary.textOID, bytes: Array(s.node.utf8)), .int8(createdAt),
                  .int8(Int64(s.format)), PGBinary(type: PGBinary.byteaOID, bytes: s.state), PGBinary(type: PGBinary.byteaOID, bytes: s.replica)]) { _ throws(PGError) in }
    }

    /// The newest snapshot, if there is one.
    public static func latest(_ db: PGConnection) throws(PGError) -> Stored? {
        var found: Stored?
        try db.execute(prepared: "roomcast_snapshot_latest",
                       "SELECT position, at, node, format::bigint, state, replica FROM roomcast_snapshots ORDER BY position DESC LIMIT 1", []) { r throws(PGError) in
            guard let p = r.int64(0), let at = r.int64(1), let node = r.string(2), let f = r.int64(3), let state = r.bytes(4), let replica = r.bytes(5) else {
                throw PGError(sqlState: "XX001", message: "the newest snapshot does not read back")
            }
            found = Stored(position: p, at: at, node: node, format: Int(f), state: state, replica: replica)
        }
        return found
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
    /// applied, and every snapshot but the newest `kept`. The entry at `position` stays, so the
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
