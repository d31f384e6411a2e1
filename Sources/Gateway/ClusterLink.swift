import Chat
import Cluster
import Engine
import Foundation
import Logging
import Reactor
import Synchronization
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
    // Safety: `engine`, `ownURLs` setter and the threads are set once in `start` before any thread
    // runs; every other mutable state is an `Atomic` or a `Mutex`; each PostgreSQL connection is
    // used only by the thread that made it.
    let configuration: ClusterConfiguration
    let incarnation: Int64
    /// This run's name in the log's `origin` column.
    let origin: String
    /// The last position in the log at start: the node is ready once it has applied it.
    let headAtStart: Int64
    /// The cluster's identity: the resume stream every node hands out (BX-1).
    let clusterID: String
    private let logger: Logger
    private let writable = Atomic<Bool>(true)
    private let leading = Atomic<Bool>(false)
    private let running = Atomic<Bool>(true)
    private let queue = Mutex<[(seq: UInt64, payload: [UInt8])]>([])
    private let wake = DispatchSemaphore(value: 0)
    private let pause = DispatchSemaphore(value: 0)
    private let state = Mutex<(members: [ClusterNodes.Node], head: Int64, ownURLs: [String])>(([], 0, []))
    private var engine: Engine?
    private var onMembers: @Sendable ([String]) -> Void = { _ in }
    private var threads: [PosixThread] = []

    /// Bytes of records one append may carry (and `ClusterLog.maxBatch` records).
    static let maxBatchBytes = 4 << 20
    /// How long a node that became leader waits before ending other nodes: after PostgreSQL
    /// comes back, every node has this long to beat again.
    static let leaderGraceMilliseconds: Int64 = 3_000

    /// libpq defaults (a URL may override them): a dead server or path is noticed in seconds,
    /// not after the kernel's keepalive time.
    static let connectionDefaults: [(String, String)] = [
        ("connect_timeout", "5"), ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"),
        ("keepalives_count", "3"), ("tcp_user_timeout", "10000"), ("application_name", "roomcast"),
    ]

    static func connect(_ url: String) throws(PGError) -> PGConnection {
        let db = try PGConnection(url, defaults: connectionDefaults)
        // A node cut off mid-append cannot hold the append lock (or a transaction) for long.
        try db.query("SET idle_in_transaction_session_timeout = '10s'")
        try db.query("SET lock_timeout = '10s'")
        return db
    }

    /// Connects, migrates the schema (once for the cluster) and registers this node run.
    init(configuration: ClusterConfiguration, logger: Logger) throws {
        self.configuration = configuration
        self.logger = logger
        let db = try Self.connect(configuration.url)
        try ClusterSchema.migrate(db)
        // The origin names the run; the incarnation is only known from the registration, so
        // the run is named after the node and a fresh random part, and the registration's
        // previous-run entry is appended under it.
        let run = configuration.nodeID + "#" + randomHex(6)
        incarnation = try ClusterNodes.register(db, id: configuration.nodeID, urls: [], origin: run, endPrevious: { previous in
            (try? LogRecord.encode(.endSessions(incarnation: UInt64(previous)))) ?? []
        })
        origin = run
        headAtStart = try ClusterLog.head(db)
        clusterID = try ClusterSchema.clusterID(db, orCreate: { randomHex(8) })
    }

    var isWritable: Bool { writable.load(ordering: .relaxed) }
    var isLeader: Bool { leading.load(ordering: .relaxed) }

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
        ]
    }

    func stop() {
        running.store(false, ordering: .relaxed)
        wake.signal()
        for _ in 0..<2 { pause.signal() }
        for t in threads { t.join() }
        threads = []
    }

    private func sleep(milliseconds: Int) {
        _ = pause.wait(timeout: .now() + .milliseconds(milliseconds))
    }

    // MARK: Appender

    private func appendLoop() {
        guard let engine else { return }
        var db: PGConnection?
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
                let batch = takeBatch()
                if batch.isEmpty { break }
                let now = wallClockMilliseconds()
                let seqs = batch.map(\.seq)
                do {
                    _ = try ClusterLog.append(conn, batch.map { LogAppend(origin: origin, seq: Int64($0.seq), at: now, payload: $0.payload) })
                } catch {
                    guard error.isConnectionLost || !conn.isConnected else {
                        // Refused by PostgreSQL (rolled back): nothing of the batch is in the log.
                        logger.error("cluster: an append was refused", metadata: ["error": "\(error)"])
                        engine.appendFailed(seqs, ambiguous: false)
                        continue
                    }
                    // Lost during the append: the COMMIT may or may not have happened. What is
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

    /// Entries handed to the engine but not yet applied, at most (the reader waits past it).
    static let maxUnapplied: Int64 = 10_000

    private func readLoop() {
        guard let engine else { return }
        var db: PGConnection?
        var last = engine.applied
        while running.load(ordering: .relaxed) {
            if db == nil {
                do {
                    let conn = try Self.connect(configuration.url)
                    try ClusterLog.listen(conn)
                    db = conn
                } catch {
                    sleep(milliseconds: 500)
                    continue
                }
            }
            guard let conn = db else { continue }
            do {
                while last - engine.applied > Self.maxUnapplied && running.load(ordering: .relaxed) { usleep(1_000) }
                let entries = try ClusterLog.read(conn, after: last, limit: ClusterLog.maxBatch)
                if let end = entries.last?.position {
                    engine.apply(entries: entries.map {
                        ReplicatedEntry(position: $0.position, origin: $0.origin, seq: UInt64(max(0, $0.seq)), at: $0.at, payload: $0.payload)
                    })
                    last = end
                    state.withLock { $0.head = max($0.head, end) }
                    continue
                }
                // Wait for a wake-up: those libpq already queued first, then the socket.
                if try conn.notifications().isEmpty {
                    var pfd = pollfd(fd: conn.socket, events: Int16(POLLIN), revents: 0)
                    _ = try? syscall("poll") { poll(&pfd, 1, 1_000) }
                    _ = try conn.notifications()
                }
            } catch {
                logger.warning("cluster: reading the log failed; reconnecting", metadata: ["error": "\(error)"])
                db = nil
                sleep(milliseconds: 500)
            }
        }
    }

    // MARK: Membership

    private func membershipLoop() {
        guard let engine else { return }
        var db: PGConnection?
        var leaderSince: Int64 = 0
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
                    if !isLeader, try ClusterNodes.tryLead(conn) {
                        leading.store(true, ordering: .relaxed)
                        leaderSince = now
                        logger.info("cluster: this node leads (time and failure entries)")
                    }
                    if isLeader && now - leaderSince >= Self.leaderGraceMilliseconds {
                        let ended = try ClusterNodes.endDead(conn, timeout: configuration.nodeTimeoutMilliseconds, origin: origin) { incarnation in
                            (try? LogRecord.encode(.endSessions(incarnation: UInt64(incarnation)))) ?? []
                        }
                        for node in ended {
                            logger.warning("cluster: a node stopped beating; its sessions end", metadata: ["node": "\(node.id)"])
                        }
                    }
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
            sleep(milliseconds: 1_000)
        }
    }
}
