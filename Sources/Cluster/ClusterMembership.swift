import Dispatch
import Reactor
import Synchronization

/// Membership as the running nodes keep it (CL-4, CL-5): on PostgreSQL's clock, never a node's.
extension ClusterNodes {
    /// PostgreSQL's clock in milliseconds.
    public static func serverTime(_ db: PGConnection) throws(PGError) -> Int64 {
        Int64(try db.query("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint").scalar ?? "") ?? 0
    }

    /// A node run joins: it takes a new incarnation and records its first heartbeat. If the
    /// node's previous run is still listed, the entry `endPrevious(itsIncarnation)` is appended in
    /// the same transaction, so the sessions that run left behind end exactly once, before the
    /// new run serves anyone. The run's name in the log (`origin`) is made from its incarnation.
    public static func register(_ db: PGConnection, id: String, urls: [String], origin: (Int64) -> String,
                                endPrevious: (Int64) -> [UInt8]) throws(PGError) -> (incarnation: Int64, origin: String) {
        try db.transaction { () throws(PGError) -> (incarnation: Int64, origin: String) in
            // Not in the middle of a trim (ClusterSchema.LockKey.trim).
            try db.query("SELECT pg_advisory_xact_lock($1)", [String(ClusterSchema.LockKey.trim)])
            let previous = try db.query("SELECT incarnation FROM roomcast_nodes WHERE node_id = $1 FOR UPDATE", [id]).scalar.flatMap { Int64($0) }
            let incarnation = Int64(try db.query("SELECT nextval('roomcast_incarnation')").scalar ?? "") ?? 0
            guard incarnation > 0 else { throw PGError(sqlState: "XX000", message: "no incarnation was given out") }
            let now = try serverTime(db)
            try db.query("""
                INSERT INTO roomcast_nodes (node_id, urls, started_at, heartbeat_at, applied, incarnation, backend_pid) VALUES ($1, $2, $3, $3, 0, $4, 0)
                ON CONFLICT (node_id) DO UPDATE SET urls = EXCLUDED.urls, started_at = EXCLUDED.started_at,
                    heartbeat_at = EXCLUDED.heartbeat_at, applied = 0, incarnation = EXCLUDED.incarnation, backend_pid = 0
                """, [id, urls.joined(separator: "\n"), String(now), String(incarnation)])
            let run = origin(incarnation)
            if let previous, previous > 0 {
                _ = try ClusterLog.appendInTransaction(db, [LogAppend(origin: run, payload: endPrevious(previous))])
            }
            return (incarnation, run)
        }
    }

    /// (The connection a run beats on is not known until its first beat: `backend_pid` 0, which
    /// `endGone` passes over. Left at the previous run's, a restarted node whose first beat came
    /// later than `endGone`'s grace was taken for its dead predecessor and ended.)
    ///
    /// This node run's heartbeat with its URLs and applied position; false if the run is no
    /// longer listed (the cluster declared it dead).
    public static func beat(_ db: PGConnection, id: String, incarnation: Int64, urls: [String], applied: Int64) throws(PGError) -> Bool {
        let r = try db.query("""
            UPDATE roomcast_nodes SET heartbeat_at = (extract(epoch FROM clock_timestamp()) * 1000)::bigint, urls = $3, applied = $4,
                backend_pid = pg_backend_pid()
            WHERE node_id = $1 AND incarnation = $2
            """, [id, String(incarnation), urls.joined(separator: "\n"), String(applied)])
        return r.command == "UPDATE 1"
    }

    /// Nodes whose heartbeat is at most `timeout` ms old on PostgreSQL's clock.
    public static func live(_ db: PGConnection, timeout: Int64) throws(PGError) -> [Node] {
        try live(db, now: try serverTime(db), timeout: timeout)
    }

    /// The leader's round: each node whose heartbeat is older than `timeout` is removed and, in
    /// the same transaction, `endSessions(incarnation)` is appended, so its sessions end exactly
    /// once; a node that beat in between is left alone. Returns the nodes ended.
    public static func endDead(_ db: PGConnection, timeout: Int64, origin: String, except: String,
                               endSessions: (Int64) -> [UInt8]) throws(PGError) -> [Node] {
        try end(try dead(db, now: try serverTime(db), timeout: timeout), db, origin: origin, except: except, endSessions: endSessions)
    }

    /// CL-6: the leader's quick round: each node run whose membership connection PostgreSQL no
    /// longer has (its backend is gone from `pg_stat_activity`: the process died and its socket
    /// was closed) and that has not beaten for `grace` ms is ended as `endDead` ends it, without
    /// waiting for the node timeout, so its pending webhook deliveries pass to a live run at
    /// once. A node that merely lost its connection beats again from a new one within a round or
    /// two (and records the new backend), so `grace` is a few rounds. Only a backend recorded by a
    /// beat since PostgreSQL's own start counts (after a restart every backend is new, and a node
    /// that has not beaten since is left to the timeout). A paused or partitioned node keeps its
    /// backend and is left to the timeout too.
    public static func endGone(_ db: PGConnection, grace: Int64, origin: String, except: String,
                               endSessions: (Int64) -> [UInt8]) throws(PGError) -> [Node] {
        let now = try serverTime(db)
        let gone = try nodes(db, """
            WHERE backend_pid <> 0 AND heartbeat_at < $1
              AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = roomcast_nodes.backend_pid)
              AND heartbeat_at > (extract(epoch FROM pg_postmaster_start_time()) * 1000)::bigint
            """, [String(now - grace)])
        return try end(gone, db, origin: origin, except: except, endSessions: endSessions)
    }

    /// Removes each node (unless it beat meanwhile) and appends `endSessions` for its run, in one
    /// transaction each.
    private static func end(_ candidates: [Node], _ db: PGConnection, origin: String, except: String,
                            endSessions: (Int64) -> [UInt8]) throws(PGError) -> [Node] {
        var ended: [Node] = []
        for node in candidates where node.id != except {
            let gone = try db.transaction { () throws(PGError) -> Bool in
                let r = try db.query("DELETE FROM roomcast_nodes WHERE node_id = $1 AND incarnation = $2 AND heartbeat_at = $3",
                                     [node.id, String(node.incarnation), String(node.heartbeatAt)])
                guard r.command == "DELETE 1" else { return false }
                if node.incarnation > 0 {
                    _ = try ClusterLog.appendInTransaction(db, [LogAppend(origin: origin, payload: endSessions(node.incarnation))])
                }
                return true
            }
            if gone { ended.append(node) }
        }
        return ended
    }
}

/// A node run's heartbeats while it starts (CL-4): between registering and its membership
/// thread's first round a node may download a snapshot, check and open its replica and build its
/// domain, which can take longer than the node timeout. This thread beats every second on a
/// connection of its own (applied 0, which also keeps the log from being trimmed past what the
/// node needs) until `stop`, so the leader does not end a run that is only starting.
public final class StartingBeats: @unchecked Sendable {
    // Safety: `thread` is written by `init`, and then only by the one `stop` call that turns
    // `running` off (the exchange lets one caller through); the flags are atomics.
    private let running = Atomic<Bool>(true)
    private let wake = DispatchSemaphore(value: 0)
    private var thread: PosixThread?
    /// The run was no longer listed at a beat: the cluster ended it while it started.
    public var ended: Bool { endedFlag.load(ordering: .relaxed) }
    private let endedFlag = Atomic<Bool>(false)

    /// `connect`: a connection to the cluster's database (called again after a failure).
    public init(id: String, incarnation: Int64, everyMilliseconds: Int = 1_000, connect: @escaping @Sendable () throws -> PGConnection) {
        // (The thread holds this object until `stop`: its owner stops it.)
        thread = PosixThread.start(name: "roomcast-startbeat") { [self] in
            var db: PGConnection?
            while running.load(ordering: .relaxed) {
                do {
                    let conn = try db ?? connect()
                    db = conn
                    if try !ClusterNodes.beat(conn, id: id, incarnation: incarnation, urls: [], applied: 0) {
                        endedFlag.store(true, ordering: .relaxed)
                        return
                    }
                } catch {
                    db = nil
                }
                _ = wake.wait(timeout: .now() + .milliseconds(everyMilliseconds))
            }
        }
    }

    /// Stops the beats (the membership thread beats from now on); returns once the thread ended.
    public func stop() {
        guard running.exchange(false, ordering: .relaxed) else { return }
        wake.signal()
        thread?.join()
        thread = nil
    }

}
