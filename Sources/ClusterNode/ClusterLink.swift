import Chat
import Cluster
import Engine
import Foundation
import Logging
import Reactor
import Replication
import Store
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
    /// Where this node starts from: the cluster's log (nothing before), the newest snapshot, or
    /// its own replica at the position it recorded when its last run stopped (CL-9).
    public enum StartPoint: Sendable, Equatable {
        case log
        case snapshot(position: Int64)
        case ownReplica(position: Int64)

        /// `/readyz`'s name for it.
        public var name: String {
            switch self {
            case .log: "log"
            case .snapshot: "snapshot"
            case .ownReplica: "own-replica"
            }
        }

        /// Whether the replica on disk is kept as it is.
        public var keepsReplica: Bool {
            if case .ownReplica = self { return true }
            return false
        }

        public var position: Int64 {
            switch self {
            case .log: 0
            case .snapshot(let p), .ownReplica(let p): p
            }
        }
    }
    public let start: StartPoint
    /// The engine's state to start from: the snapshot's, or the one recorded beside this node's
    /// own replica.
    public let startState: SnapshotState?
    /// Where a cleanly stopping run records its replica's position (`LocalCheckpoint`).
    let checkpointFile: String?
    /// This run's heartbeats until the membership thread beats (`ClusterReplicator`).
    let starting: StartingBeats
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

    /// `replica`: the path of this node's replica (CL-9). The newest snapshot's replica is
    /// written beside it piece by piece (without it, it is read into memory), and a run that
    /// stopped cleanly left its checkpoint beside it: when the log still holds the checkpoint's
    /// position, the node starts from its own replica there instead.
    public init(configuration: ClusterConfiguration, presenceGraceMilliseconds: Int64, logger: Logger, replica: String? = nil) throws {
        let replicaDownload = replica.map { $0 + DataDirectory.replicaDownloadSuffix }
        checkpointFile = replica.map { $0 + DataDirectory.replicaCheckpointSuffix }
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
        // Beats while the node starts (a snapshot's download, the replica's check, the domain),
        // until the membership thread's first round (CL-4).
        let url = configuration.url
        let beats = StartingBeats(id: node, incarnation: run, connect: { try ClusterLink.connect(url) })
        starting = beats
        do {
            headAtStart = try ClusterLog.head(db)
            // Read after registering: this node's row (applied 0) keeps the log from being trimmed
            // past what it needs while it starts.
            // CL-9: this node's own replica, where its last run stopped cleanly, when the log still
            // holds that entry (entries are trimmed from the start only, so it holds all after it).
            if let replica, let checkpointFile, let own = LocalCheckpoint.take(checkpointFile, logger: logger) {
                let entry = try ClusterLog.entryKey(db, at: own.position)
                if own.cluster == settings.id, own.node == configuration.nodeID, FileManager.default.fileExists(atPath: replica),
                   let entry, entry.origin == own.origin, entry.seq == own.seq {
                    lastSnapshot.store(try ClusterSnapshots.latestPosition(db), ordering: .relaxed)
                    startSnapshot = nil
                    startReplicaFile = nil
                    startState = own.state
                    start = .ownReplica(position: own.position)
                    traits = LogTraits(keepsResumeEvents: false, replicaLoss: .rebuildFromLog, ids: EntryIDs())
                    logger.notice("cluster: catching up from this node's own replica", metadata: [
                        "position": "\(own.position)", "head": "\(headAtStart)",
                    ])
                    return
                }
                logger.notice("cluster: the log no longer holds this node's own position; starting from the cluster's snapshot",
                            metadata: ["position": "\(own.position)"])
            }
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
                guard (1...Int(SnapshotState.version)).contains(Int(latest.format)) else {
                    throw GatewayError(.unavailable, "the cluster's newest snapshot has format \(latest.format); this roomcast reads formats 1 to \(SnapshotState.version): upgrade it")
                }
                lastSnapshot.store(latest.position, ordering: .relaxed)
            }
            startSnapshot = latest
            startReplicaFile = latest == nil ? nil : replicaDownload
            startState = try latest.map { try SnapshotState.decode($0.state) }
            start = latest.map { .snapshot(position: $0.position) } ?? .log
            traits = LogTraits(keepsResumeEvents: false, replicaLoss: .rebuildFromLog, ids: EntryIDs())
        } catch {
            // The run ends here: its starting beats stop with it.
            beats.stop()
            throw error
        }
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

    /// CL-9: after a clean stop (the log reader stopped, the engine and the store drained, the
    /// replica synced to disk), records the replica's position and the engine's `state` there, with
    /// the log's entry at that position, so that the next start catches up from it. Nothing is
    /// recorded when PostgreSQL cannot say which entry that is (the next start loads the snapshot).
    /// `applied`: what the engine applied and the replica committed.
    public func saveCheckpoint(_ state: SnapshotState, replica: Store, applied: Int64) {
        guard let checkpointFile else { return }
        // Only when every commit up to the state's position is in the replica and nothing after
        // it (a failed commit would have halted the node; a read-only store records nothing).
        guard replica.isWritable, applied == state.position else {
            logger.info("cluster: the replica does not hold the stopping engine's position; no checkpoint",
                        metadata: ["applied": "\(applied)", "position": "\(state.position)"])
            return
        }
        do {
            try replica.syncToDisk()
            let db = try Self.connect(configuration.url)
            guard let entry = try ClusterLog.entryKey(db, at: state.position) else {
                logger.info("cluster: the log no longer holds this node's position; no checkpoint", metadata: ["position": "\(state.position)"])
                return
            }
            try LocalCheckpoint(cluster: settings.id, node: configuration.nodeID, position: state.position, origin: entry.origin, seq: entry.seq,
                                state: state).write(to: checkpointFile)
            logger.info("cluster: the replica's position is recorded for the next start", metadata: ["position": "\(state.position)"])
        } catch {
            logger.warning("cluster: the replica's position could not be recorded; the next start loads the snapshot", metadata: ["error": "\(error)"])
        }
    }

    /// Leaves the cluster: this run's row goes and its sessions end on every node at once (its
    /// clients were closed with 1001 and reconnect elsewhere).
    func leave() {
        starting.stop()
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
