import Chat
import Cluster
import Engine
import Foundation
import Logging
import Reactor
import Replication
import Synchronization
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// Cluster options (`--cluster`, `--node-id`, `--node-timeout`).
public struct ClusterConfiguration: Sendable {
    /// libpq connection string or `postgres://` URL of the cluster's database.
    public var url: String
    /// This node's stable name in the cluster.
    public var nodeID: String
    /// A node whose heartbeat is older than this is dead: its sessions end (CL-4).
    public var nodeTimeoutMilliseconds: Int64 = 10_000
    /// The leader publishes a snapshot once the log has this many entries past the newest one
    /// (and at most one a minute); the entries every node and the snapshot have passed are then
    /// deleted. 0: no snapshots (the log is never trimmed).
    public var snapshotEvery: Int64 = 100_000
    /// ... and at most one snapshot this often.
    public var snapshotIntervalMilliseconds: Int64 = 60_000

    public init(url: String, nodeID: String) {
        self.url = url
        self.nodeID = nodeID
    }
}

/// A cluster node's log (CL-1, CLUSTER.md): the shared log in PostgreSQL, as the engine's
/// `ReplicatedLog`. Made before the engine: it connects, migrates the schema (once for the
/// cluster), reads the cluster's settings and its newest snapshot, and registers this node run.
/// `append` queues a record's bytes for the appender thread; entries come back to the engine from
/// the reader thread (`ClusterReplicator` runs both, and membership and snapshots). Every
/// connection reconnects by itself; while the appender cannot reach PostgreSQL, `isWritable` is
/// false and the engine refuses changes with 50301 (CL-3).
public final class ClusterLink: ReplicatedLog, @unchecked Sendable {
    // Safety: every mutable state is an `Atomic` or a `Mutex`; the rest is set in `init`.
    public let configuration: ClusterConfiguration
    let run: Int64
    /// This run's name in the log's `origin` column.
    public let origin: String
    /// The last position in the log at start: the node is ready once it has applied it.
    public let headAtStart: Int64
    /// The cluster's identity (the resume stream every node hands out, BX-1) and the settings
    /// every node applies the log with.
    public let settings: ClusterSchema.ClusterSettings
    /// The newest snapshot when this node started (it starts from it), if there was one.
    public let startSnapshot: ClusterSnapshots.Stored?
    /// CL-9: where that snapshot's replica was written (`replicaDownload`; its `replica` is
    /// then empty), when there was one.
    public let startReplicaFile: String?
    /// Every node derives the domain's ids from the entries (the same ids on every node).
    public let traits: LogTraits
    let logger: Logger
    let writable = Atomic<Bool>(true)
    let leading = Atomic<Bool>(false)
    let offset = Atomic<Int64>(0)
    let queue = Mutex<[(seq: UInt64, payload: [UInt8])]>([])
    /// Records of the batch being appended (taken from `queue` under its lock): `flush` waits
    /// for them too.
    let appending = Atomic<Int>(0)
    let wake = DispatchSemaphore(value: 0)
    let state = Mutex<(members: [ClusterNodes.Node], head: Int64, ownURLs: [String])>(([], 0, []))
    /// The newest snapshot's position this node knows of (published by it or read back).
    let lastSnapshot = Atomic<Int64>(0)

    /// Bytes of records one append may carry (and `ClusterLog.maxBatch` records).
    static let maxBatchBytes = 4 << 20

    /// libpq defaults (a URL may override them): a dead server or path is noticed in seconds,
    /// not after the kernel's keepalive time.
    static let connectionDefaults: [(String, String)] = [
        ("connect_timeout", "5"), ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "10000"), ("application_name", "roomcast"),
    ]

    static func connect(_ url: String) throws(PGError) -> PGConnection {
        let db = try PGConnection(url, defaults: connectionDefaults)
        try limit(db)
        return db
    }

    /// A node cut off mid-append cannot hold the append lock, a transaction or (as leader) the
    /// leader lock for long: the server drops a silent client after its own keepalives, and no
    /// statement or lock wait lasts more than seconds.
    static func limit(_ db: PGConnection) throws(PGError) {
        for setting in ["idle_in_transaction_session_timeout = '10s'", "lock_timeout = '10s'", "statement_timeout = '15s'",
                        "tcp_keepalives_idle = 5", "tcp_keepalives_interval = 2", "tcp_keepalives_count = 3", "tcp_user_timeout = 10000"] {
            try db.query("SET " + setting)
        }
    }

    /// `replicaDownload`: the file the newest snapshot's replica is written to, piece by piece
    /// (CL-9; without it, it is read into memory).
    public init(configuration: ClusterConfiguration, presenceGraceMilliseconds: Int64, logger: Logger, replicaDownload: String? = nil) throws {
        self.configuration = configuration
        self.logger = logger
        let db = try PGConnection(configuration.url, defaults: Self.connectionDefaults)
        // Migrating may wait for another node's migration: no lock or statement limit yet.
        try ClusterSchema.migrate(db)
        try Self.limit(db)
        var found = try ClusterSchema.settings(db, proposing: .init(id: randomHex(8), presenceGraceMilliseconds: presenceGraceMilliseconds,
                                                                    logFormat: LogRecord.format))
        guard found.logFormat <= LogRecord.format else {
            throw GatewayError(.unavailable, "the cluster's log format is \(found.logFormat); this roomcast writes \(LogRecord.format): upgrade it")
        }
        // A cluster made by an older roomcast: this node raises its format (it writes records an
        // older node cannot read; such a node stops at the first one, and refuses to start again
        // until it is upgraded). A rolling upgrade therefore upgrades every node.
        if found.logFormat < LogRecord.format {
            try ClusterSchema.raiseLogFormat(db, to: LogRecord.format)
            logger.warning("cluster: the log format is raised; nodes of an older roomcast stop until upgraded",
                           metadata: ["from": "\(found.logFormat)", "to": "\(LogRecord.format)"])
            found.logFormat = LogRecord.format
        }
        settings = found
        if settings.presenceGraceMilliseconds != presenceGraceMilliseconds {
            logger.warning("cluster: --presence-grace differs from the cluster's; the cluster's applies",
                           metadata: ["cluster": "\(settings.presenceGraceMilliseconds / 1000) s"])
        }
        // The origin names the run after the node and its incarnation (so every node can tell
        // which run appended an entry: the one that sends its webhooks, CL-6); the registration's
        // previous-run entry is appended under it.
        let node = configuration.nodeID
        let format = settings.logFormat
        (run, origin) = try ClusterNodes.register(db, id: node, urls: [], origin: { ClusterRun.origin(node: node, incarnation: $0) },
                                                          endPrevious: { previous in
            (try? LogRecord.encode(.endSessions(incarnation: UInt64(previous)), format: format)) ?? []
        })
        headAtStart = try ClusterLog.head(db)
        // Read after registering: this node's row (applied 0) keeps the log from being trimmed
        // past what it needs while it starts.
        // A large snapshot takes longer than the usual statement limit to download.
        try db.query("SET statement_timeout = 0")
        let latest = try ClusterSnapshots.latest(db, replicaFile: replicaDownload, pieceBytes: Limits.snapshotPieceBytes)
        try db.query("SET statement_timeout = '15s'")
        let first = try ClusterSnapshots.firstPosition(db)
        if first > 1 {
            guard let latest, latest.position >= first - 1 else {
                throw GatewayError(.unavailable, "the cluster's log starts at position \(first) and no snapshot reaches it: this node cannot start")
            }
        }
        if let latest {
            guard latest.format == SnapshotState.version else {
                throw GatewayError(.unavailable, "the cluster's newest snapshot has format \(latest.format); this roomcast reads \(SnapshotState.version): upgrade it")
            }
            lastSnapshot.store(latest.position, ordering: .relaxed)
        }
        startSnapshot = latest
        startReplicaFile = latest == nil ? nil : replicaDownload
        traits = LogTraits(keepsResumeEvents: false, replicaLoss: .rebuildFromLog, ids: EntryIDs())
    }


    public var incarnation: UInt64 { UInt64(run) }
    public var isWritable: Bool { writable.load(ordering: .relaxed) }
    public var isLeader: Bool { leading.load(ordering: .relaxed) }
    /// PostgreSQL's clock minus this node's, as last measured (the log's time is PostgreSQL's).
    public var clockOffsetMilliseconds: Int64 { offset.load(ordering: .relaxed) }

    /// A record's bytes in the cluster's log format (`settings.logFormat`: what every node reads).
    public func encode(_ record: LogRecord) throws -> LogPayload {
        .bytes(try LogRecord.encode(record, format: settings.logFormat))
    }

    /// Queued for the appender thread; the entry comes back through the reader.
    public func append(_ payload: LogPayload, seq: UInt64) -> LogEntry? {
        guard case .bytes(let bytes) = payload else { preconditionFailure("a cluster's log carries encoded records (`encode`)") }
        queue.withLock { $0.append((seq, bytes)) }
        wake.signal()
        return nil
    }

    /// This node's own URLs (announced in its heartbeats).
    public func setOwnURLs(_ urls: [String]) { state.withLock { $0.ownURLs = urls } }

    /// The live nodes, the log's head as last seen, for /readyz.
    public var members: (members: [ClusterNodes.Node], head: Int64) { state.withLock { ($0.members, $0.head) } }

    /// The newest snapshot's position this node knows of (for /readyz).
    public var snapshotPosition: Int64 { lastSnapshot.load(ordering: .relaxed) }

    /// Waits, at most `milliseconds`, until every record queued so far is in the log or was handed
    /// back as refused: a stopping node's last records (the answers and nonces of the calls it
    /// answered while draining) reach the other nodes before its run ends.
    public func flush(milliseconds: Int) {
        let deadline = wallClockMilliseconds() + Int64(milliseconds)
        wake.signal()
        while queue.withLock({ !$0.isEmpty || appending.load(ordering: .acquiring) > 0 }), wallClockMilliseconds() < deadline {
            usleep(2_000)
        }
    }

    /// Leaves the cluster: this run's row goes and its sessions end on every node at once (its
    /// clients were closed with 1001 and reconnect elsewhere).
    func leave() {
        do {
            let db = try Self.connect(configuration.url)
            try db.transaction { () throws(PGError) in
                let gone = try db.query("DELETE FROM roomcast_nodes WHERE node_id = $1 AND incarnation = $2",
                                        [configuration.nodeID, String(run)])
                if gone.command == "DELETE 1" {
                    _ = try ClusterLog.appendInTransaction(db, [LogAppend(origin: origin,
                                                                          payload: (try? LogRecord.encode(.endSessions(incarnation: UInt64(run)), format: settings.logFormat)) ?? [])])
                }
            }
        } catch {
            logger.warning("cluster: could not leave the cluster cleanly; the node timeout will end this run's sessions", metadata: ["error": "\(error)"])
        }
    }
}
