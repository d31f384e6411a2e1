import Chat
import Cluster
import Engine
import Foundation
import Logging
import Reactor
import Replication
import Store
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The threads that join a cluster node's engine to the shared log (CLUSTER.md), each with its own
/// PostgreSQL connection: the appender (batches this node's records, one transaction each), the
/// reader (reads the log in order and hands it to the engine; a `NOTIFY` wakes it), membership
/// (heartbeats, the leader lock, ending dead nodes, the live nodes' URLs) and snapshots (the
/// leader publishes them and trims the log). Made with the link and the engine it joins; `start`
/// runs the threads, `stop` ends them and leaves the cluster.
public final class ClusterReplicator: @unchecked Sendable {
    // Safety: `threads` is written by `start` and `stop`, both on the owner's thread; every other
    // mutable state is an `Atomic` or a `Mutex`; each PostgreSQL connection is used only by the
    // thread that made it.
    let link: ClusterLink
    let engine: Engine
    let halt: Halt
    private let onMembers: @Sendable ([String]) -> Void
    private var configuration: ClusterConfiguration { link.configuration }
    private var logger: Logger { link.logger }
    private var origin: String { link.origin }
    private let running = Atomic<Bool>(true)
    private let pause = DispatchSemaphore(value: 0)
    /// The leader's snapshot on its way: taken by the engine, then published by the snapshot
    /// thread (one at a time).
    private let snapshotTaking = Atomic<Bool>(false)
    private let snapshotWaiting = Mutex<Snapshot?>(nil)
    private let snapshotWake = DispatchSemaphore(value: 0)
    private let snapshotClock = Atomic<Int64>(0)
    private var threads: [PosixThread] = []

    /// Heartbeat interval. A leader whose own rounds are further apart than three of these (a
    /// PostgreSQL outage, a stall) observes afresh: it ends a node only after watching it for a
    /// whole node timeout, so nodes reconnecting after an outage are not taken for dead.
    static let beatMilliseconds = 1_000

    /// CL-6: how long a node whose PostgreSQL session is gone may go without beating before the
    /// leader ends its run: three rounds, and never more than half the node timeout.
    static func goneGraceMilliseconds(_ nodeTimeout: Int64) -> Int64 { min(3 * Int64(beatMilliseconds), max(nodeTimeout / 2, 1)) }

    /// `onMembers`: the live nodes' URLs after each membership round (the address lookup, CL-5).
    public init(link: ClusterLink, engine: Engine, halt: Halt, onMembers: @escaping @Sendable ([String]) -> Void) {
        self.link = link
        self.engine = engine
        self.halt = halt
        self.onMembers = onMembers
    }

    public func start() {
        threads = [
            PosixThread.start(name: "roomcast-append") { [self] in appendLoop() },
            PosixThread.start(name: "roomcast-logread") { [self] in readLoop() },
            PosixThread.start(name: "roomcast-members") { [self] in membershipLoop() },
            PosixThread.start(name: "roomcast-snapshot") { [self] in snapshotLoop() },
        ]
    }

    /// Stops the threads, then leaves the cluster.
    public func stop() {
        running.store(false, ordering: .relaxed)
        link.wake.signal()
        for _ in 0..<2 { pause.signal() }
        snapshotWake.signal()
        for t in threads { t.join() }
        threads = []
        link.leave()
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
        var db: PGConnection?
        var lastAppend: Int64 = 0
        while running.load(ordering: .relaxed) {
            _ = link.wake.wait(timeout: .now() + .milliseconds(500))
            if db == nil {
                db = try? ClusterLink.connect(configuration.url)
                link.writable.store(db != nil, ordering: .relaxed)
                if db == nil {
                    failQueued(engine)
                    continue
                }
                logger.info("cluster: the log can be appended to")
            }
            while running.load(ordering: .relaxed), let conn = db {
                // The previous batch is done (appended, or handed back to the engine).
                link.appending.store(0, ordering: .releasing)
                // A connection the server already closed (PostgreSQL stopped): nothing is sent,
                // so nothing can have changed.
                guard conn.isAlive else {
                    // Nothing was sent: connect again at once (an idle connection closed by the
                    // server or a proxy); only if that fails are the waiting writes refused.
                    logger.warning("cluster: the connection to the log was closed; reconnecting")
                    db = try? ClusterLink.connect(configuration.url)
                    if db == nil {
                        link.writable.store(false, ordering: .relaxed)
                        failQueued(engine)
                        break
                    }
                    continue
                }
                if wallClockMilliseconds() - lastAppend <= Self.coalesceAfterMilliseconds, link.queue.withLock({ $0.count }) < Self.coalesceBelow {
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
                            link.writable.store(false, ordering: .relaxed)
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
                    if let again = try? ClusterLink.connect(configuration.url),
                       let present = try? ClusterLog.present(again, origin: origin, seqs: seqs.map { Int64($0) }) {
                        db = again
                        engine.appendFailed(seqs.filter { !present.contains(Int64($0)) }, ambiguous: false)
                    } else {
                        link.writable.store(false, ordering: .relaxed)
                        engine.appendFailed(seqs, ambiguous: true)
                        failQueued(engine)
                    }
                }
            }
            link.appending.store(0, ordering: .releasing)
        }
    }

    private func takeBatch() -> [(seq: UInt64, payload: [UInt8])] {
        link.queue.withLock { q in
            var n = 0, bytes = 0
            while n < q.count && n < ClusterLog.maxBatch && (n == 0 || bytes + q[n].payload.count <= ClusterLink.maxBatchBytes) {
                bytes += q[n].payload.count
                n += 1
            }
            let batch = Array(q.prefix(n))
            q.removeFirst(n)
            link.appending.store(n, ordering: .releasing)
            return batch
        }
    }

    private func failQueued(_ engine: Engine) {
        let seqs = link.queue.withLock { q in
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
                    let conn = try ClusterLink.connect(configuration.url)
                    try ClusterLog.listen(conn)
                    // The log this node applied must still be the database's (not a failover to
                    // a standby that lacks the last entries, nor a restored backup).
                    if let lastKey {
                        let found = try ClusterLog.entryKey(conn, at: last)
                        guard let found, found.origin == lastKey.origin, found.seq == lastKey.seq else {
                            halt("the cluster's log no longer has the entry this node applied last (failover or restore?)",
                                 metadata: ["position": "\(last)"])
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
                        LogEntry(position: $0.position, origin: $0.origin, seq: UInt64(max(0, $0.seq)), at: $0.at, payload: $0.payload)
                    })
                    last = end
                    lastKey = entries.last.map { ($0.origin, $0.seq) }
                    let bytes = entries.reduce(0) { $0 + $1.payload.count }
                    handed.append((end, bytes))
                    handedBytes += bytes
                    link.state.withLock { $0.head = max($0.head, end) }
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
    var snapshotPosition: Int64 { link.lastSnapshot.load(ordering: .relaxed) }

    private var lastSnapshotAt: Int64 {
        get { snapshotClock.load(ordering: .relaxed) }
        set { snapshotClock.store(newValue, ordering: .relaxed) }
    }

    /// The leader asks the engine for a snapshot when enough entries were applied since the last.
    private func snapshotIfDue(_ engine: Engine, now: Int64) {
        let every = configuration.snapshotEvery
        guard every > 0, engine.applied - link.lastSnapshot.load(ordering: .relaxed) >= every,
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
                let published = link.lastSnapshot.load(ordering: .relaxed)
                if link.isLeader, configuration.snapshotEvery > 0, published > 0, running.load(ordering: .relaxed) {
                    do {
                        let conn: PGConnection
                        if let db, db.isAlive { conn = db } else { conn = try ClusterLink.connect(configuration.url) }
                        db = conn
                        try ClusterSnapshots.trim(conn, below: published)
                    } catch {
                        db = nil
                    }
                }
                continue
            }
            defer {
                // The replica's read transaction, or its copy, is let go.
                s.replica.close()
                snapshotTaking.store(false, ordering: .relaxed)
            }
            do {
                let conn: PGConnection
                if let db, db.isAlive { conn = db } else { conn = try ClusterLink.connect(configuration.url) }
                db = conn
                // No statement limit for the upload of a large snapshot.
                try conn.query("SET statement_timeout = 0")
                let state = try s.state.encoded()
                // Before the upload's transaction (which may not stay idle long).
                try s.replica.copy()
                // CL-9: the replica is copied to disk page by page and compressed as it is read
                // from there, a piece at a time: the leader never holds it whole.
                var replicaBytes = 0
                let published = try ClusterSnapshots.put(
                    conn, ClusterSnapshots.Stored(position: s.state.position, at: s.state.at, node: configuration.nodeID,
                                                  format: SnapshotState.version, state: state, replica: []),
                    replica: { (consume: (UnsafeRawBufferPointer) throws(PGError) -> Void) throws(PGError) in
                        do {
                            replicaBytes = try s.replica.read(pieceBytes: Limits.snapshotPieceBytes) { piece in try consume(piece) }
                        } catch let error as PGError {
                            throw error
                        } catch {
                            throw PGError(sqlState: "58030", message: "the replica's image could not be read: \(error)")
                        }
                    },
                    createdAt: try ClusterNodes.serverTime(conn), chunkBytes: Limits.snapshotChunkBytes)
                try conn.query("SET statement_timeout = '15s'")
                // (Another leader may have published a later one meanwhile.)
                link.lastSnapshot.max(s.state.position, ordering: .relaxed)
                let deleted = try ClusterSnapshots.trim(conn, below: s.state.position)
                logger.info("cluster: snapshot published; log trimmed", metadata: [
                    "position": "\(s.state.position)", "bytes": "\(state.count + replicaBytes)",
                    "bytes.stored": "\(published.compressedBytes)", "chunks": "\(published.chunks)", "entries.deleted": "\(deleted)",
                ])
            } catch {
                logger.warning("cluster: the snapshot could not be published", metadata: ["error": "\(error)"])
                db = nil
            }
        }
    }


    // MARK: Membership

    private func membershipLoop() {
        var db: PGConnection?
        var observingSince: Int64 = 0
        var lastRound: Int64 = 0
        while running.load(ordering: .relaxed) {
            if db == nil {
                db = try? ClusterLink.connect(configuration.url)
                link.leading.store(false, ordering: .relaxed)
            }
            if let conn = db {
                do {
                    // From now on this thread beats: the starting run's beats end first (joined),
                    // so none of theirs lands after this round's and overwrites it.
                    link.starting.stop()
                    let own = link.state.withLock { $0.ownURLs }
                    guard try ClusterNodes.beat(conn, id: configuration.nodeID, incarnation: link.run, urls: own, applied: engine.applied) else {
                        halt("the cluster ended this node's run (its heartbeats stopped for longer than the node timeout); the next start rejoins")
                    }
                    let now = try ClusterNodes.serverTime(conn)
                    link.offset.store(now - wallClockMilliseconds(), ordering: .relaxed)
                    if !link.isLeader, try ClusterNodes.tryLead(conn) {
                        link.leading.store(true, ordering: .relaxed)
                        observingSince = now
                        logger.info("cluster: this node leads (time and failure entries)")
                    }
                    // A gap in this leader's own rounds as long as half the timeout (an outage, a
                    // stall): the others may not have been able to beat either; watch afresh.
                    if now - lastRound > configuration.nodeTimeoutMilliseconds / 2 { observingSince = now }
                    lastRound = now
                    if link.isLeader && now - observingSince >= configuration.nodeTimeoutMilliseconds {
                        let ended = try ClusterNodes.endDead(conn, timeout: configuration.nodeTimeoutMilliseconds, origin: origin,
                                                             except: configuration.nodeID) { incarnation in
                            (try? LogRecord.encode(.endSessions(incarnation: UInt64(incarnation)), format: link.settings.logFormat)) ?? []
                        }
                        for node in ended {
                            logger.warning("cluster: a node stopped beating; its sessions end", metadata: ["node": "\(node.id)"])
                        }
                    }
                    if link.isLeader {
                        let gone = try ClusterNodes.endGone(conn, grace: Self.goneGraceMilliseconds(configuration.nodeTimeoutMilliseconds),
                                                            origin: origin,
                                                            except: configuration.nodeID) { incarnation in
                            (try? LogRecord.encode(.endSessions(incarnation: UInt64(incarnation)), format: link.settings.logFormat)) ?? []
                        }
                        for node in gone {
                            logger.warning("cluster: a node's connection to PostgreSQL is gone and it stopped beating; its sessions end and its webhook deliveries pass on",
                                           metadata: ["node": "\(node.id)"])
                        }
                    }
                    if link.isLeader { snapshotIfDue(engine, now: now) }
                    let live = try ClusterNodes.live(conn, timeout: configuration.nodeTimeoutMilliseconds)
                    let head = try ClusterLog.head(conn)
                    link.state.withLock {
                        $0.members = live
                        $0.head = max($0.head, head)
                    }
                    onMembers(live.flatMap(\.urls))
                } catch {
                    logger.warning("cluster: membership round failed; reconnecting", metadata: ["error": "\(error)"])
                    db = nil
                    link.leading.store(false, ordering: .relaxed)
                }
            }
            sleep(milliseconds: Self.beatMilliseconds)
        }
    }
}

