/// One entry of the shared log: a position in the cluster's single order, the node that appended
/// it, the time it was appended (the `now` every node applies it with), and the encoded command.
public struct LogRow: Equatable, Sendable {
    public var position: Int64
    public var origin: String
    /// The appending node run's sequence number for the entry (0: none).
    public var seq: Int64
    public var at: Int64
    public var payload: [UInt8]

    public init(position: Int64, origin: String, seq: Int64 = 0, at: Int64, payload: [UInt8]) {
        self.position = position
        self.origin = origin
        self.seq = seq
        self.at = at
        self.payload = payload
    }
}

/// An entry to append: `seq` > 0 is unique per `origin` (the log refuses a second one). `at`
/// nil takes PostgreSQL's clock (what nodes append with: one clock for the cluster); tests give
/// times of their own.
public struct LogAppend: Sendable {
    public var origin: String
    public var seq: Int64
    public var at: Int64?
    public var payload: [UInt8]

    public init(origin: String, seq: Int64 = 0, at: Int64? = nil, payload: [UInt8]) {
        self.origin = origin
        self.seq = seq
        self.at = at
        self.payload = payload
    }
}

/// The shared ordered log in PostgreSQL (CLUSTER.md). Appends take a transaction-scoped advisory
/// lock, so positions are assigned and committed in order: a reader that has seen position p
/// never later finds an entry below p appear (no gaps, whatever the number of appending nodes).
/// Every append commits, then `NOTIFY roomcast_log` wakes the readers (the payload is the last
/// position, a hint only: readers read the table). An entry's `at` is never before the previous
/// entry's, so the time the domain is given never goes back when nodes' clocks disagree.
public enum ClusterLog {
    public static let channel = "roomcast_log"
    /// Entries one append may carry (one statement; four parameters each).
    public static let maxBatch = 1000

    /// Appends `entries` (origin, at, payload) in one transaction; returns their positions.
    public static func append(_ db: PGConnection, _ entries: [(origin: String, at: Int64, payload: [UInt8])]) throws(PGError) -> [Int64] {
        try append(db, entries.map { LogAppend(origin: $0.origin, at: $0.at, payload: $0.payload) })
    }

    /// Appends `entries` in one statement (its own transaction); returns their positions. An
    /// error with the connection lost leaves the outcome unknown (`duringCommit`).
    public static func append(_ db: PGConnection, _ entries: [LogAppend]) throws(PGError) -> [Int64] {
        guard !entries.isEmpty else { return [] }
        do {
            return try appendInTransaction(db, entries)
        } catch {
            var e = error
            e.duringCommit = true
            throw e
        }
    }

    /// Appends inside the caller's transaction (which then commits or rolls back with it).
    public static func appendInTransaction(_ db: PGConnection, _ entries: [LogAppend]) throws(PGError) -> [Int64] {
        guard !entries.isEmpty else { return [] }
        precondition(entries.count <= maxBatch, "at most \(maxBatch) entries per append")
        // Prepared once per connection; the arrays travel in binary (payloads as they are).
        var first: Int64?
        try db.execute(prepared: "roomcast_append", "SELECT roomcast_append($1, $2, $3, $4)", [
            .textArray(entries.map(\.origin)),
            .int8Array(entries.map(\.seq)),
            .int8Array(entries.map(\.at)),
            .byteaArray(entries.map(\.payload)),
        ]) { row throws(PGError) in first = row.int64(0) }
        guard let first else { throw PGError(sqlState: "XX000", message: "roomcast_append returned no position") }
        return (0..<Int64(entries.count)).map { first + $0 }
    }

    /// Which of `seqs` the node run `origin` has in the log (after a connection was lost during
    /// an append, whose COMMIT may or may not have happened).
    /// It first takes the append lock: an append whose COMMIT is still under way (its backend
    /// has not noticed the lost connection yet) holds it, so the answer is final.
    public static func present(_ db: PGConnection, origin: String, seqs: [Int64]) throws(PGError) -> Set<Int64> {
        guard !seqs.isEmpty else { return [] }
        return try db.transaction { () throws(PGError) -> Set<Int64> in
            try db.query("SELECT pg_advisory_xact_lock($1)", [String(ClusterSchema.LockKey.append)])
            let rows = try db.query("SELECT seq FROM roomcast_log WHERE origin = $1 AND seq >= $2 AND seq <= $3",
                                    [origin, String(seqs.min()!), String(seqs.max()!)])
            return Set(rows.rows.compactMap { $0[0].flatMap { Int64($0) } })
        }
    }

    /// The origin and sequence number of the entry at `position`, if there is one (a node checks,
    /// after reconnecting, that the log it applied is still the database's).
    public static func entryKey(_ db: PGConnection, at position: Int64) throws(PGError) -> (origin: String, seq: Int64)? {
        guard let row = try db.query("SELECT origin, seq FROM roomcast_log WHERE position = $1", [String(position)]).rows.first,
              let origin = row[0], let seq = row[1].flatMap({ Int64($0) }) else { return nil }
        return (origin, seq)
    }

    /// Payload bytes one read returns at most (beyond its first entry, which always comes).
    public static let maxReadBytes = 16 << 20

    /// Entries after `position`, in order: at most `limit`, and no more payload than `maxBytes`
    /// past the first entry (a page of large entries stays bounded in memory).
    public static func read(_ db: PGConnection, after position: Int64, limit: Int = 1000, maxBytes: Int = maxReadBytes) throws(PGError) -> [LogRow] {
        var entries: [LogRow] = []
        entries.reserveCapacity(min(limit, 1000))
        try db.execute(prepared: "roomcast_read", """
            SELECT position, origin, at, payload, seq FROM (
                SELECT position, origin, at, payload, seq,
                       sum(octet_length(payload)) OVER (ORDER BY position) - octet_length(payload) AS before
                FROM (SELECT * FROM roomcast_log WHERE position > $1 ORDER BY position LIMIT $2) page
            ) sized WHERE before < $3 ORDER BY position
            """, [.int8(position), .int8(Int64(limit)), .int8(Int64(maxBytes))]) { r throws(PGError) in
            // A row that does not read back is an error, never skipped: skipping would lose an entry.
            guard r.columns == 5, let p = r.int64(0), let origin = r.string(1), let at = r.int64(2), let payload = r.bytes(3),
                  let seq = r.int64(4) else {
                throw PGError(sqlState: "XX001", message: "log entry after position \(entries.last?.position ?? position) does not read back")
            }
            entries.append(LogRow(position: p, origin: origin, seq: seq, at: at, payload: payload))
        }
        return entries
    }

    /// The last position (0 for an empty log).
    public static func head(_ db: PGConnection) throws(PGError) -> Int64 {
        Int64(try db.query("SELECT coalesce(max(position), 0) FROM roomcast_log").scalar ?? "0") ?? 0
    }

    /// Starts receiving the log's wake-ups on this connection.
    public static func listen(_ db: PGConnection) throws(PGError) {
        try db.query("LISTEN " + db.quotedIdentifier(channel))
    }

    /// Whether these wake-ups may announce entries after `position`, the last one a reader has.
    /// An append's wake-up names its last position; one at or below `position` announces
    /// entries the reader already read (they came with a read that ran after their commit), so
    /// it need not read again. Anything else (another channel's, a payload that is not a
    /// position) may announce something and wakes it: a wrong payload can only cost a read, or
    /// delay one until the reader's next timed read, never lose an entry.
    public static func announcesEntries(after position: Int64, in notifications: [(channel: String, payload: String)]) -> Bool {
        notifications.contains { n in
            guard n.channel == channel, let last = Int64(n.payload) else { return true }
            return last > position
        }
    }

}

/// The cluster's members (CL-5): each node's public URLs and heartbeat; a node whose heartbeat is
/// older than the failure timeout is dead (CL-4).
public enum ClusterNodes {
    public struct Node: Equatable, Sendable {
        public var id: String
        public var incarnation: Int64 = 0
        public var urls: [String]
        public var startedAt: Int64
        public var heartbeatAt: Int64
        public var applied: Int64
    }

    /// Records this node's heartbeat (and URLs, and the log position it has applied).
    public static func heartbeat(_ db: PGConnection, id: String, urls: [String], startedAt: Int64, now: Int64, applied: Int64) throws(PGError) {
        try db.query("""
            INSERT INTO roomcast_nodes (node_id, urls, started_at, heartbeat_at, applied) VALUES ($1, $2, $3, $4, $5)
            ON CONFLICT (node_id) DO UPDATE SET urls = EXCLUDED.urls, heartbeat_at = EXCLUDED.heartbeat_at, applied = EXCLUDED.applied,
                started_at = EXCLUDED.started_at
            """, [id, urls.joined(separator: "\n"), String(startedAt), String(now), String(applied)])
    }

    /// Nodes whose heartbeat is at most `timeout` ms old at `now`, by id.
    public static func live(_ db: PGConnection, now: Int64, timeout: Int64) throws(PGError) -> [Node] {
        try nodes(db, "WHERE heartbeat_at >= $1", [String(now - timeout)])
    }

    /// Nodes whose heartbeat is older than `timeout` ms at `now`: dead, their sessions to be ended.
    public static func dead(_ db: PGConnection, now: Int64, timeout: Int64) throws(PGError) -> [Node] {
        try nodes(db, "WHERE heartbeat_at < $1", [String(now - timeout)])
    }

    /// Forgets a node (after its sessions have been ended).
    public static func remove(_ db: PGConnection, id: String) throws(PGError) {
        try db.query("DELETE FROM roomcast_nodes WHERE node_id = $1", [id])
    }

    static func nodes(_ db: PGConnection, _ condition: String, _ parameters: [String?]) throws(PGError) -> [Node] {
        try db.query("SELECT node_id, urls, started_at, heartbeat_at, applied, incarnation FROM roomcast_nodes \(condition) ORDER BY node_id",
                     parameters).rows
            .compactMap { r in
                guard let id = r[0], let urls = r[1], let s = r[2].flatMap({ Int64($0) }), let h = r[3].flatMap({ Int64($0) }),
                      let a = r[4].flatMap({ Int64($0) }), let i = r[5].flatMap({ Int64($0) }) else { return nil }
                return Node(id: id, incarnation: i, urls: urls.split(separator: "\n").map(String.init), startedAt: s, heartbeatAt: h, applied: a)
            }
    }

    /// Tries to become the leader (the node that appends time and failure entries): a session
    /// advisory lock, held until this connection ends — a killed leader's lock is released by
    /// PostgreSQL when its connection drops.
    public static func tryLead(_ db: PGConnection) throws(PGError) -> Bool {
        try db.query("SELECT pg_try_advisory_lock($1)", [String(ClusterSchema.LockKey.leader)]).scalar == "t"
    }
}
