import Chat
import Cluster
import Engine
import Foundation
import Logging
import Reactor
import Synchronization
import Wire
#if canImport(Glibc)
import Glibc
import Replication
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

/// A node's link to the cluster's shared log in PostgreSQL (CLUSTER.md), on three threads of its
/// own, each with its own connection: the appender (batches this node's records, one
/// transaction each), the reader (reads the log in order and hands it to the engine; a `NOTIFY`
/// wakes it) and membership (heartbeats, the leader lock, ending dead nodes, the live nodes'
/// URLs). Every connection reconnects by itself; while the appender cannot reach PostgreSQL,
/// `isWritable` is false and the engine refuses changes with 50301 (CL-3).
final class ClusterLink: ReplicatedLog, @unchecked Sendable {
    // Safety: `engine`, `onMembers` and `threads` are set in `start` before any of the threads
    // runs (and `threads` read again only by `stop`, on the owner's thread); every other mutable
    // state is an `Atomic` or a `Mutex`; each PostgreSQL connection is used only by the thread
    // that made it.
    let configuration: ClusterConfiguration
    let incarnation: Int64
    /// This run's name in the log's `origin` column.
    let origin: String
    /// The last position in the log at start: the node is ready once it has applied it.
    let headAtStart: Int64
    /// The cluster's identity (the resume stream every node hands out, BX-1) and the settings
    /// every node applies the log with.
    let settings: ClusterSchema.ClusterSettings
    private let logger: Logger
    private let writable = Atomic<Bool>(true)
    private let leading = Atomic<Bool>(false)
    private let offset = Atomic<Int64>(0)
    private let running = Atomic<Bool>(true)
    private let queue = Mutex<[(seq: UInt64, payload: [UInt8])]>([])
    /// Records of the batch being appended (taken from `queue` under its lock): `flush` waits
    /// for them too.
    private let appending = Atomic<Int>(0)
    private let wake = DispatchSemaphore(value: 0)
    private let pause = DispatchSemaphore(value: 0)
    private let state = Mutex<(members: [ClusterNodes.Node], head: Int64, ownURLs: [String])>(([], 0, []))
    private var engine: Engine?
    /// The newest snapshot when this node started (it starts from it), if there was one.
    let startSnapshot: ClusterSnapshots.Stored?
    /// The newest snapshot's position this node knows of (published by it or read back).
    private let lastSnapshot = Atomic<Int64>(0)
    /// The leader's snapshot on its way: taken by the engine, then published by the snapshot
    /// thread (one at a time).
    private let snapshotTaking = Atomic<Bool>(false)
    private let snapshotWaiting = Mutex<Snapshot?>(nil)
    private let snapshotWake = DispatchSemaphore(value: 0)
    private let snapshotClock = Atomic<Int64>(0)
    private var onMembers: @Sendable ([String]) -> Void = { _ in }
    private var threads: [PosixThread] = []

    /// Bytes of records one append may carry (and `ClusterLog.maxBatch` records).
    static let maxBatchBytes = 4 << 20
    /// Heartbeat interval. A leader whose own rounds are further apart than three of these (a
    /// PostgreSQL outage, a stall) observes afresh: it ends a node only after watching it for a
    /// whole node timeout, so nodes reconnecting after an outage are not taken for dead.
    static let beatMilliseconds = 1_000

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

    /// Connects, migrates the schema (once for the cluster), reads the cluster's settings (this
    /// node's `presenceGraceMilliseconds` if it is the first) and registers this node run.
    init(configuration: ClusterConfiguration, presenceGraceMilliseconds: Int64, logger: Logger) throws {
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
        (incarnation, origin) = try ClusterNodes.register(db, id: node, urls: [], origin: { ClusterRun.origin(node: node, incarnation: $0) },
                                                          endPrevious: { previous in
            (try? LogRecord.encode(.endSessions(incarnation: UInt64(previous)), format: format)) ?? []
        })
        headAtStart = try ClusterLog.head(db)
        // Read after registering: this node's row (applied 0) keeps the log from being trimmed
        // past what it needs while it starts.
        // A large snapshot takes longer than the usual statement limit to download.
        try db.query("SET statement_timeout = 0")
        let latest = try ClusterSnapshots.latest(db)
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
    }

    var isWritable: Bool { writable.load(ordering: .relaxed) }
    var isLeader: Bool { leading.load(ordering: .relaxed) }
    /// PostgreSQL's clock minus this node's, as last measured (the log's time is PostgreSQL's).
    var clockOffsetMilliseconds: Int64 { offset.load(ordering: .relaxed) }

    func append(_ payload: [UInt8], seq: UInt64) {
        queue.withLock { $0.append((seq, payload)) }
        wake.signal()
    }

    /// This node's own URLs (announced in its heartbeats).
    func setOwnURLs(_ urls: [String]) { state.withLock { $0.ownURLs = urls } }

    /// The live nodes, the log's head as last seen, for /readyz.
    var snapshot: (members: [ClusterNodes.Node], head: Int64) { state.withLock { ($0.members, $0.head) } }

    func start(engine: Engine, onMembers: @escaping @Sendable ([String]) -> Void) {
        self.engine = engine
        self.onMembers = onMembers
        threads = [
            PosixThread.start(name: "roomcast-append") { [self] in appendLoop() },
            PosixThread.start(name: "roomcast-logread") { [self] in readLoop() },
            PosixThread.start(name: "roomcast-members") { [self] in membershipLoop() },
            PosixThread.start(name: "roomcast-snapshot") { [self] in snapshotLoop() },
        ]
    }

    /// Stops the threads, then leaves the cluster: this run's row goes and its sessions end on
    /// every node at once (its clients were closed with 1001 and reconnect elsewhere).
    func stop() {
        running.store(false, ordering: .relaxed)
        wake.signal()
        for _ in 0..<2 { pause.signal() }
        snapshotWake.signal()
        for t in threads { t.join() }
        threads = []
        do {
            let db = try Self.connect(configuration.url)
            try db.transaction { () throws(PGError) in
                let gone = try db.query("DELETE FROM roomcast_nodes WHERE node_id = $1 AND incarnation = $2",
                                        [configuration.nodeID, String(incarnation)])
                if gone.command == "DELETE 1" {
                    _ = try ClusterLog.appendInTransaction(db, [LogAppend(origin: origin,
                                                                          payload: (try? LogRecord.encode(.endSessions(incarnation: UInt64(incarnation)), format: settings.logFormat)) ?? [])])
                }
            }
        } catch {
            logger.warning("cluster: could not leave the cluster cleanly; the node timeout will end this run's sessions", metadata: ["error": "\(error)"])
        }
    }

    private func sleep(milliseconds: Int) {
        _ = pause.wait(timeout: .now() + .milliseconds(milliseconds))
    }

    // MARK: Appender

    /// Under load, an append waits this long for more records before it goes, and a reader woken
    /// again this soon after its last read waits as long for more entries: PostgreSQL's cost is
    /// mostly per transaction and per statement, not per entry. After a pause (no append or read in
    /// the last `coalesceAfterMilliseconds`) they go at once, so a lone change waits for nothing.
    static let coalesceMicroseconds: UInt32 = 1_000
    static let coalesceAfterMilliseconds: Int64 = 3
    /// A batch this large goes without waiting.
    static let coalesceBelow = 64

    private func appendLoop() {
        guard let engine else { return }
        var db: PGConnection?
        var lastAppend: Int64 = 0
        while running.load(ordering: .relaxed) {
            _ = wake.wait(timeout: .now() + .milliseconds(500))
            if db == nil {
                db = try? Self.connect(configuration.url)
                writable.store(db != nil, ordering: .relaxed)
                if db == nil {
                    failQueued(engine)
                    continue
                }
                logger.info("cluster: the log can be appended to")
            }
            while running.load(ordering: .relaxed), let conn = db {
                // The previous batch is done (appended, or handed back to the engine).
                appending.store(0, ordering: .releasing)
                // A connection the server already closed (PostgreSQL stopped): nothing is sent,
                // so nothing can have changed.
                guard conn.isAlive else {
                    // Nothing was sent: connect again at once (an idle connection closed by the
                    // server or a proxy); only if that fails are the waiting writes refused.
                    logger.warning("cluster: the connection to the log was closed; reconnecting")
                    db = try? Self.connect(configuration.url)
                    if db == nil {
                        writable.store(false, ordering: .relaxed)
                        failQueued(engine)
                        break
                    }
                    continue
                }
                if wallClockMilliseconds() - lastAppend <= Self.coalesceAfterMilliseconds, queue.withLock({ $0.count }) < Self.coalesceBelow {
                    usleep(Self.coalesceMicroseconds)
                }
                let batch = takeBatch()
                if batch.isEmpty { break }
                defer { lastAppend = wallClockMilliseconds() }
                let seqs = batch.map(\.seq)
                do {
                    _ = try ClusterLog.append(conn, batch.map { LogAppend(origin: origin, seq: Int64($0.seq), payload: $0.payload) })
                } catch {
                    // Failed before COMMIT was sent (or refused by PostgreSQL): nothing of the
                    // batch is in the log.
                    guard error.duringCommit && (error.isConnectionLost || !conn.isConnected) else {
                        if error.isConnectionLost || !conn.isConnected {
                            db = nil
                            writable.store(false, ordering: .relaxed)
                            logger.warning("cluster: the connection to the log was lost", metadata: ["error": "\(error)"])
                            engine.appendFailed(seqs, ambiguous: false)
                            failQueued(engine)
                            break
                        }
                        // Refused by PostgreSQL (rolled back): nothing of the batch is in the log.
                        logger.error("cluster: an append was refused", metadata: ["error": "\(error)"])
                        engine.appendFailed(seqs, ambiguous: false)
                        continue
                    }
                    // Lost during COMMIT: it may or may not have happened. What is
                    // in the log is applied and answered by the reader; the rest is refused.
                    db = nil
                    logger.warning("cluster: the connection to the log was lost", metadata: ["error": "\(error)"])
                    if let again = try? Self.connect(configuration.url),
                       let present = try? ClusterLog.present(again, origin: origin, seqs: seqs.map { Int64($0) }) {
                        db = again
                        engine.appendFailed(seqs.filter { !present.contains(Int64($0)) }, ambiguous: false)
                    } else {
                        writable.store(false, ordering: .relaxed)
                        engine.appendFailed(seqs, ambiguous: true)
                        failQueued(engine)
                    }
                }
            }
            appending.store(0, ordering: .releasing)
        }
    }

    /// Waits, at most `milliseconds`, until every record queued so far is in the log or was handed
    /// back as refused: a stopping node's last records (the answers and nonces of the calls it
    /// answered while draining) reach the other nodes before its run ends.
    func flush(milliseconds: Int) {
        let deadline = wallClockMilliseconds() + Int64(milliseconds)
        wake.signal()
        while queue.withLock({ !$0.isEmpty || appending.load(ordering: .acquiring) > 0 }), wallClockMilliseconds() < deadline {
            usleep(2_000)
        }
    }

    private func takeBatch() -> [(seq: UInt64, payload: [UInt8])] {
        queue.withLock { q in
            var n = 0, bytes = 0
            while n < q.count && n < ClusterLog.maxBatch && (n == 0 || bytes + q[n].payload.count <= Self.maxBatchBytes) {
                bytes += q[n].payload.count
                n += 1
            }
            let batch = Array(q.prefix(n))
            q.removeFirst(n)
            appending.store(n, ordering: .releasing)
            return batch
        }
    }

    private func failQueued(_ engine: Engine) {
        let seqs = queue.withLock { q in
            defer { q = [] }
            return q.map(\.seq)
        }
        if !seqs.isEmpty { engine.appendFailed(seqs, ambiguous: false) }
    }

    // MARK: Reader

    /// Entries, and their bytes, handed to the engine but not yet applied, at most (the reader
    /// waits past either).
    static let maxUnapplied: Int64 = 10_000
    static let maxUnappliedBytes = 64 << 20

    private func readLoop() {
        guard let engine else { return }
        var db: PGConnection?
        var last = engine.applied
        var lastKey: (origin: String, seq: Int64)?
        // Pages handed over and not yet applied: (last position, payload bytes).
        var handed: [(end: Int64, bytes: Int)] = []
        var lastRead: Int64 = 0
        var handedBytes = 0
        while running.load(ordering: .relaxed) {
            if db == nil {
                do {
                    let conn = try Self.connect(configuration.url)
                    try ClusterLog.listen(conn)
                    // The log this node applied must still be the database's (not a failover to
                    // a standby that lacks the last entries, nor a restored backup).
                    if let lastKey {
                        let found = try ClusterLog.entryKey(conn, at: last)
                        guard let found, found.origin == lastKey.origin, found.seq == lastKey.seq else {
                            logger.critical("cluster: the log no longer has the entry this node applied last (failover or restore?); stopping",
                                            metadata: ["position": "\(last)"])
                            exit(75)
                        }
                    }
                    db = conn
                } catch {
                    sleep(milliseconds: 500)
                    continue
                }
            }
            guard let conn = db else { continue }
            do {
                while running.load(ordering: .relaxed) {
                    let applied = engine.applied
                    while let first = handed.first, first.end <= applied {
                        handedBytes -= first.bytes
                        handed.removeFirst()
                    }
                    if last - applied <= Self.maxUnapplied && handedBytes <= Self.maxUnappliedBytes { break }
                    usleep(1_000)
                }
                let entries = try ClusterLog.read(conn, after: last, limit: ClusterLog.maxBatch)
                lastRead = wallClockMilliseconds()
                if let end = entries.last?.position {
                    engine.apply(entries: entries.map {
                        ReplicatedEntry(position: $0.position, origin: $0.origin, seq: UInt64(max(0, $0.seq)), at: $0.at, payload: $0.payload)
                    })
                    last = end
                    lastKey = entries.last.map { ($0.origin, $0.seq) }
                    let bytes = entries.reduce(0) { $0 + $1.payload.count }
                    handed.append((end, bytes))
                    handedBytes += bytes
                    state.withLock { $0.head = max($0.head, end) }
                    // A full page (in entries or bytes): there may be more. Otherwise what comes
                    // next sends a wake-up.
                    if entries.count == ClusterLog.maxBatch || bytes >= ClusterLog.maxReadBytes { continue }
                }
                // Wait for a wake-up that announces entries after `last`: those libpq already
                // queued first, then the socket. Under load most appends' wake-ups arrive after
                // a read that already returned their entries; those are passed over, not read
                // again (ClusterLog.announcesEntries). At most a second passes without a read.
                let deadline = Instant.now() + .seconds(1)
                while running.load(ordering: .relaxed), !ClusterLog.announcesEntries(after: last, in: try conn.notifications()) {
                    let now = Instant.now()
                    guard now < deadline else { break }
                    var pfd = pollfd(fd: conn.socket, events: Int16(POLLIN), revents: 0)
                    _ = try? syscall("poll") { poll(&pfd, 1, Int32((deadline.nanoseconds - now.nanoseconds) / 1_000_000 + 1)) }
                }
                // Woken again this soon: under load, let the next appends land and read them together.
                if wallClockMilliseconds() - lastRead <= Self.coalesceAfterMilliseconds { usleep(Self.coalesceMicroseconds) }
            } catch {
                logger.warning("cluster: reading the log failed; reconnecting", metadata: ["error": "\(error)"])
                db = nil
                sleep(milliseconds: 500)
            }
        }
    }

    // MARK: Snapshots

    /// The newest snapshot's position this node knows of (for /readyz).
    var snapshotPosition: Int64 { lastSnapshot.load(ordering: .relaxed) }

    private var lastSnapshotAt: Int64 {
        get { snapshotClock.load(ordering: .relaxed) }
        set { snapshotClock.store(newValue, ordering: .relaxed) }
    }

    /// The leader asks the engine for a snapshot when enough entries were applied since the last.
    private func snapshotIfDue(_ engine: Engine, now: Int64) {
        let every = configuration.snapshotEvery
        guard every > 0, engine.applied - lastSnapshot.load(ordering: .relaxed) >= every,
              now - lastSnapshotAt >= configuration.snapshotIntervalMilliseconds,
              snapshotTaking.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return }
        lastSnapshotAt = now
        engine.snapshot { [self] result in
            switch result {
            case .success(let s):
                snapshotWaiting.withLock { $0 = s }
                snapshotWake.signal()
            case .failure(let error):
                logger.warning("cluster: no snapshot taken", metadata: ["error": "\(error)"])
                snapshotTaking.store(false, ordering: .relaxed)
            }
        }
    }

    /// Publishes the snapshots the engine took, then trims the log below them.
    private func snapshotLoop() {
        var db: PGConnection?
        while running.load(ordering: .relaxed) {
            _ = snapshotWake.wait(timeout: .now() + .seconds(5))
            guard let s = snapshotWaiting.withLock({ w -> Snapshot? in defer { w = nil }; return w }) else {
                // Now and then the leader trims again: nodes that lagged at the snapshot's time
                // have caught up since.
                let published = lastSnapshot.load(ordering: .relaxed)
                if isLeader, configuration.snapshotEvery > 0, published > 0, running.load(ordering: .relaxed) {
                    do {
                        let conn: PGConnection
                        if let db, db.isAlive { conn = db } else { conn = try Self.connect(configuration.url) }
                        db = conn
                        try ClusterSnapshots.trim(conn, below: published)
                    } catch {
                        db = nil
                    }
                }
                continue
            }
            defer { snapshotTaking.store(false, ordering: .relaxed) }
            do {
                let conn: PGConnection
                if let db, db.isAlive { conn = db } else { conn = try Self.connect(configuration.url) }
                db = conn
                // No statement limit for the upload of a large snapshot.
                try conn.query("SET statement_timeout = 0")
                let state = try s.state.encoded()
                guard state.count <= Limits.maxSnapshotPartBytes else {
                    throw SnapshotError("the engine's state takes \(state.count) bytes, more than a snapshot may (\(Limits.maxSnapshotPartBytes))")
                }
                try ClusterSnapshots.put(conn, ClusterSnapshots.Stored(position: s.state.position, at: s.state.at, node: configuration.nodeID,
                                                                       format: SnapshotState.version, state: state, replica: s.replica),
                                         createdAt: try ClusterNodes.serverTime(conn))
                try conn.query("SET statement_timeout = '15s'")
                // (Another leader may have published a later one meanwhile.)
                lastSnapshot.max(s.state.position, ordering: .relaxed)
                let deleted = try ClusterSnapshots.trim(conn, below: s.state.position)
                logger.info("cluster: snapshot published; log trimmed", metadata: [
                    "position": "\(s.state.position)", "bytes": "\(state.count + s.replica.count)", "entries.deleted": "\(deleted)",
                ])
            } catch {
                logger.warning("cluster: the snapshot could not be published", metadata: ["error": "\(error)"])
                db = nil
            }
        }
    }

    // MARK: Membership

    private func membershipLoop() {
        guard let engine else { return }
        var db: PGConnection?
        var observingSince: Int64 = 0
        var lastRound: Int64 = 0
        while running.load(ordering: .relaxed) {
            if db == nil {
                db = try? Self.connect(configuration.url)
                leading.store(false, ordering: .relaxed)
            }
            if let conn = db {
                do {
                    let own = state.withLock { $0.ownURLs }
                    guard try ClusterNodes.beat(conn, id: configuration.nodeID, incarnation: incarnation, urls: own, applied: engine.applied) else {
                        logger.critical("the cluster ended this node's run (its heartbeats stopped for longer than the node timeout); stopping to rejoin")
                        exit(75)
                    }
                    let now = try ClusterNodes.serverTime(conn)
                    offset.store(now - wallClockMilliseconds(), ordering: .relaxed)
                    if !isLeader, try ClusterNodes.tryLead(conn) {
                        leading.store(true, ordering: .relaxed)
                        observingSince = now
                        logger.info("cluster: this node leads (time and failure entries)")
                    }
                    // A gap in this leader's own rounds as long as half the timeout (an outage, a
                    // stall): the others may not have been able to beat either; watch afresh.
                    if now - lastRound > configuration.nodeTimeoutMilliseconds / 2 { observingSince = now }
                    lastRound = now
                    if isLeader && now - observingSince >= configuration.nodeTimeoutMilliseconds {
                        let ended = try ClusterNodes.endDead(conn, timeout: configuration.nodeTimeoutMilliseconds, origin: origin,
                                                             except: configuration.nodeID) { incarnation in
                            (try? LogRecord.encode(.endSessions(incarnation: UInt64(incarnation)), format: settings.logFormat)) ?? []
                        }
                        for node in ended {
                            logger.warning("cluster: a node stopped beating; its sessions end", metadata: ["node": "\(node.id)"])
                        }
                    }
                    if isLeader { snapshotIfDue(engine, now: now) }
                    let live = try ClusterNodes.live(conn, timeout: configuration.nodeTimeoutMilliseconds)
                    let head = try ClusterLog.head(conn)
                    state.withLock {
                        $0.members = live
                        $0.head = max($0.head, head)
                    }
                    onMembers(live.flatMap(\.urls))
                } catch {
                    logger.warning("cluster: membership round failed; reconnecting", metadata: ["error": "\(error)"])
                    db = nil
                    leading.store(false, ordering: .relaxed)
                }
            }
            sleep(milliseconds: Self.beatMilliseconds)
        }
    }
}
