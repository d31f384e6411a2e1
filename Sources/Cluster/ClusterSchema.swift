/// The cluster's tables in PostgreSQL (CLUSTER.md). Migrations are plain SQL, frozen once shipped,
/// and run under a session advisory lock, so nodes that start together apply each exactly once:
/// the first takes the lock and migrates, the others wait for it and find nothing left to do.
public enum ClusterSchema {
    /// `pg_advisory_lock` keys of the cluster (one 64-bit key space per database).
    public enum LockKey {
        /// Held while migrating.
        public static let migrate: Int64 = 0x526F_6F6D_6361_0001
        /// Held (per transaction) while appending to the log, so positions commit in order.
        public static let append: Int64 = 0x526F_6F6D_6361_0002
        /// Held (per session) by the node that appends time and failure entries.
        public static let leader: Int64 = 0x526F_6F6D_6361_0003
        /// Held (per transaction) by each chunk of a trim, from reading the nodes' applied
        /// positions to its delete, and by a node's registration: a node that registers during a
        /// trim waits for the chunk in progress, and the next chunk sees its `applied` of 0 and
        /// keeps everything, so the start position the node then reads stays in the log.
        public static let trim: Int64 = 0x526F_6F6D_6361_0004
    }

    /// In order, each a list of statements; the index + 1 is the schema version. (Versions 1 to 3
    /// were changed while being built, before any release carried them.)
    public static let migrations: [[String]] = [[
        """
        CREATE TABLE roomcast_log (
            position bigint PRIMARY KEY CHECK (position > 0),
            origin text NOT NULL,
            at bigint NOT NULL,
            payload bytea NOT NULL
        )
        """,
        """
        CREATE TABLE roomcast_nodes (
            node_id text PRIMARY KEY,
            urls text NOT NULL,
            started_at bigint NOT NULL,
            heartbeat_at bigint NOT NULL,
            applied bigint NOT NULL DEFAULT 0
        )
        """,
    ], [
        // Each append of a node run carries its sequence number: after a connection lost during
        // COMMIT the node looks for its own (origin, seq) to learn whether the append happened.
        "ALTER TABLE roomcast_log ADD COLUMN seq bigint NOT NULL DEFAULT 0",
        "CREATE UNIQUE INDEX roomcast_log_origin_seq ON roomcast_log (origin, seq) WHERE seq > 0",
        // Every start of a node takes an incarnation; its sessions' ids carry it (20 bits).
        // No CYCLE: a wrapped incarnation could be a live node's (its sessions would end).
        "CREATE SEQUENCE roomcast_incarnation MINVALUE 1 MAXVALUE 1048575",
        "ALTER TABLE roomcast_nodes ADD COLUMN incarnation bigint NOT NULL DEFAULT 0",
        // The cluster's identity: the stream name resume positions carry (BX-1), the same on
        // every node.
        // and the settings every node must apply the log with (the first node's, kept).
        """
        CREATE TABLE roomcast_cluster (
            single boolean PRIMARY KEY DEFAULT true CHECK (single),
            id text NOT NULL,
            presence_grace_ms bigint NOT NULL,
            log_format integer NOT NULL
        )
        """,
    ], [
        // One round trip an append: the lock, the tail, the rows and the wake-up in one call
        // (each statement of a PL/pgSQL function takes a fresh snapshot, so the tail read after
        // the lock sees the previous holder's commit). Times: PostgreSQL's clock where none is
        // given, read once the lock is held, never going back along the log. Payloads arrive as hex.
        """
        CREATE FUNCTION roomcast_append(p_origins text[], p_seqs bigint[], p_ats bigint[], p_payloads text[]) RETURNS bigint
        LANGUAGE plpgsql AS $fn$
        DECLARE
            last_position bigint;
            last_at bigint;
            now_ms bigint;
            n integer := coalesce(array_length(p_seqs, 1), 0);
        BEGIN
            PERFORM pg_advisory_xact_lock(\(LockKey.append));
            now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            SELECT position, at INTO last_position, last_at FROM roomcast_log ORDER BY position DESC LIMIT 1;
            last_position := coalesce(last_position, 0);
            INSERT INTO roomcast_log (position, origin, seq, at, payload)
                SELECT last_position + i, p_origins[i], p_seqs[i],
                       greatest(coalesce(last_at, -9223372036854775808),
                                max(coalesce(p_ats[i], now_ms)) OVER (ORDER BY i)),
                       decode(p_payloads[i], 'hex')
                FROM generate_subscripts(p_seqs, 1) AS i;
            PERFORM pg_notify('roomcast_log', (last_position + n)::text);
            RETURN last_position + 1;
        END
        $fn$
        """,
    ], [
        // The same append with its payloads as bytea[] (sent in PostgreSQL's binary format by a
        // prepared statement: no hex to build, parse and decode). The text[] form stays for nodes
        // of the previous version during a rolling upgrade.
        """
        CREATE FUNCTION roomcast_append(p_origins text[], p_seqs bigint[], p_ats bigint[], p_payloads bytea[]) RETURNS bigint
        LANGUAGE plpgsql AS $fn$
        DECLARE
            last_position bigint;
            last_at bigint;
            now_ms bigint;
            n integer := coalesce(array_length(p_seqs, 1), 0);
        BEGIN
            PERFORM pg_advisory_xact_lock(\(LockKey.append));
            now_ms := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
            SELECT position, at INTO last_position, last_at FROM roomcast_log ORDER BY position DESC LIMIT 1;
            last_position := coalesce(last_position, 0);
            INSERT INTO roomcast_log (position, origin, seq, at, payload)
                SELECT last_position + i, p_origins[i], p_seqs[i],
                       greatest(coalesce(last_at, -9223372036854775808),
                                max(coalesce(p_ats[i], now_ms)) OVER (ORDER BY i)),
                       p_payloads[i]
                FROM generate_subscripts(p_seqs, 1) AS i;
            PERFORM pg_notify('roomcast_log', (last_position + n)::text);
            RETURN last_position + 1;
        END
        $fn$
        """,
    ], [
        // Snapshots (CLUSTER.md "Snapshots and trimming"): a node's state at a log position, so a
        // starting node need not apply the whole log, and the entries before it can go.
        """
        CREATE TABLE roomcast_snapshots (
            position bigint PRIMARY KEY CHECK (position > 0),
            at bigint NOT NULL,
            node text NOT NULL,
            created_at bigint NOT NULL,
            format integer NOT NULL,
            state bytea NOT NULL,
            replica bytea NOT NULL
        )
        """,
    ], [
        // CL-6: the PostgreSQL backend of each node run's membership connection, so the leader
        // can see a node run is gone (its session ended: the process died) without waiting for
        // the node timeout. 0: not known (a node of the previous version).
        "ALTER TABLE roomcast_nodes ADD COLUMN backend_pid integer NOT NULL DEFAULT 0",
    ], [
        // Issue 31: snapshots of any size. Each part (the engine's state, the replica's image) is
        // one zlib stream stored in chunks of at most `Limits.snapshotChunkBytes`, its length,
        // CRC-32 and chunk count in the snapshot's row (encoding 1). Rows written before (encoding
        // 0, the parts inline; also those a node of version 6 publishes during a rolling upgrade)
        // stay as they are and are still read.
        """
        ALTER TABLE roomcast_snapshots
            ALTER COLUMN state DROP NOT NULL,
            ALTER COLUMN replica DROP NOT NULL,
            ADD COLUMN encoding integer NOT NULL DEFAULT 0,
            ADD COLUMN state_bytes bigint,
            ADD COLUMN state_crc bigint,
            ADD COLUMN state_chunks integer,
            ADD COLUMN replica_bytes bigint,
            ADD COLUMN replica_crc bigint,
            ADD COLUMN replica_chunks integer,
            ADD CONSTRAINT roomcast_snapshots_parts CHECK (
                (encoding = 0 AND state IS NOT NULL AND replica IS NOT NULL)
                OR (encoding = 1 AND state IS NULL AND replica IS NULL AND state_bytes IS NOT NULL AND state_crc IS NOT NULL
                    AND state_chunks IS NOT NULL AND replica_bytes IS NOT NULL AND replica_crc IS NOT NULL AND replica_chunks IS NOT NULL))
        """,
        // A snapshot's chunks go with it (trimming deletes the row).
        """
        CREATE TABLE roomcast_snapshot_chunks (
            position bigint NOT NULL REFERENCES roomcast_snapshots (position) ON DELETE CASCADE,
            part smallint NOT NULL CHECK (part IN (0, 1)),
            seq integer NOT NULL CHECK (seq >= 0),
            data bytea NOT NULL,
            PRIMARY KEY (position, part, seq)
        )
        """,
        // The chunks are compressed already: PostgreSQL's TOAST stores them without trying again.
        "ALTER TABLE roomcast_snapshot_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
    ]]

    public static var version: Int { migrations.count }

    /// Brings the database to `version`; returns how many migrations this call applied.
    @discardableResult
    public static func migrate(_ db: PGConnection) throws(PGError) -> Int {
        try db.query("SELECT pg_advisory_lock($1)", [String(LockKey.migrate)])
        defer { _ = try? db.query("SELECT pg_advisory_unlock($1)", [String(LockKey.migrate)]) }
        try db.query("CREATE TABLE IF NOT EXISTS roomcast_schema (version integer NOT NULL)")
        let current = Int(try db.query("SELECT max(version) FROM roomcast_schema").scalar ?? "0") ?? 0
        // OP-3: a schema from a newer roomcast is refused before anything is changed (this node
        // could not read what the newer nodes write); upgrade this node instead.
        guard current <= version else {
            throw PGError(sqlState: "", message: "the cluster's PostgreSQL schema is version \(current), written by a newer roomcast; "
                          + "this roomcast knows versions up to \(version). Nothing was changed: run the newer roomcast on this node")
        }
        for v in current..<version {
            try db.transaction { () throws(PGError) in
                for statement in migrations[v] { try db.query(statement) }
                try db.query("INSERT INTO roomcast_schema (version) VALUES ($1)", [String(v + 1)])
            }
        }
        return version - current
    }

    /// What every node applies the log with, set by the first node that starts.
    public struct ClusterSettings: Equatable, Sendable {
        public var id: String
        public var presenceGraceMilliseconds: Int64
        public var logFormat: Int
        public init(id: String, presenceGraceMilliseconds: Int64, logFormat: Int) {
            self.id = id
            self.presenceGraceMilliseconds = presenceGraceMilliseconds
            self.logFormat = logFormat
        }
    }

    /// Raises the cluster's log format to `format` (never lowers it).
    public static func raiseLogFormat(_ db: PGConnection, to format: Int) throws(PGError) {
        try db.query("UPDATE roomcast_cluster SET log_format = $1 WHERE log_format < $1", [String(format)])
    }

    /// The cluster's settings: `proposed` if this is the first node, else the first node's.
    public static func settings(_ db: PGConnection, proposing proposed: ClusterSettings) throws(PGError) -> ClusterSettings {
        try db.query("INSERT INTO roomcast_cluster (id, presence_grace_ms, log_format) VALUES ($1, $2, $3) ON CONFLICT (single) DO NOTHING",
                     [proposed.id, String(proposed.presenceGraceMilliseconds), String(proposed.logFormat)])
        guard let row = try db.query("SELECT id, presence_grace_ms, log_format FROM roomcast_cluster").rows.first,
              let id = row[0], let grace = row[1].flatMap({ Int64($0) }), let format = row[2].flatMap({ Int($0) }) else {
            throw PGError(sqlState: "XX000", message: "the cluster has no settings row")
        }
        return ClusterSettings(id: id, presenceGraceMilliseconds: grace, logFormat: format)
    }
}
