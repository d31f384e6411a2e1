import Cluster
import Foundation
import Synchronization
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// The cluster's foundations against a real PostgreSQL 15 (CLUSTER.md): migrations that several
/// nodes start together (CL-1), one gap-free order of appends from several nodes, the wake-up,
/// the node registry and the leader lock (CL-4, CL-5), durability across a PostgreSQL crash (CL-3).
@Suite("Cluster log on PostgreSQL", .serialized)
struct ClusterLogTests {
    static func database(_ pg: PostgresServer, _ name: String) throws -> String {
        let admin = try PGConnection(pg.url())
        try admin.query("CREATE DATABASE " + admin.quotedIdentifier(name))
        return pg.url(name)
    }

    // CL-1: three nodes starting together migrate the schema exactly once, and none fails.
    @Test func migrationsRunOnceWhenNodesStartTogether() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "migrate")
        let applied = Mutex<[Int]>([]), failures = Mutex<[String]>([])
        let group = DispatchGroup()
        for _ in 0..<3 {
            DispatchQueue.global().async(group: group) {
                do {
                    let db = try PGConnection(url)
                    let n = try ClusterSchema.migrate(db)
                    applied.withLock { $0.append(n) }
                } catch {
                    failures.withLock { $0.append("\(error)") }
                }
            }
        }
        group.wait()
        #expect(failures.withLock { $0 } == [])
        #expect(applied.withLock { $0 }.sorted() == [0, 0, ClusterSchema.version])
        let db = try PGConnection(url)
        #expect(try db.query("SELECT count(*) FROM roomcast_schema").scalar == String(ClusterSchema.version))
        #expect(try ClusterSchema.migrate(db) == 0)

        // OP-3: a schema a newer roomcast wrote is refused with a message that says so, and
        // nothing is changed.
        try db.query("INSERT INTO roomcast_schema (version) VALUES ($1)", [String(ClusterSchema.version + 1)])
        do {
            try ClusterSchema.migrate(db)
            Issue.record("a newer cluster schema was accepted")
        } catch {
            #expect(error.message.contains("version \(ClusterSchema.version + 1), written by a newer roomcast")
                    && error.message.contains("knows versions up to \(ClusterSchema.version)") && error.message.contains("Nothing was changed"))
        }
        #expect(try db.query("SELECT count(*) FROM roomcast_schema").scalar == String(ClusterSchema.version + 1))
    }

    // Several nodes append at once: positions form one order without gaps — a reader tailing the
    // log never sees an entry appear below one it has read — and each node's entries keep the
    // order it appended them in.
    @Test func appendsFromSeveralNodesFormOneGapFreeOrder() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "order")
        try ClusterSchema.migrate(try PGConnection(url))
        let appenders = 3, batches = 60
        let returned = Mutex<[String: [Int64]]>([:])
        let done = Atomic<Int>(0)
        let problems = Mutex<[String]>([])
        let group = DispatchGroup()
        for a in 0..<appenders {
            DispatchQueue.global().async(group: group) {
                do {
                    let db = try PGConnection(url)
                    var seq = 0
                    for b in 0..<batches {
                        let n = 1 + (b % 4)
                        let entries = (0..<n).map { _ -> (origin: String, at: Int64, payload: [UInt8]) in
                            defer { seq += 1 }
                            return ("node\(a)", Int64(seq), Array("node\(a)-\(seq)".utf8))
                        }
                        let positions = try ClusterLog.append(db, entries)
                        returned.withLock { $0["node\(a)", default: []] += positions }
                    }
                } catch {
                    problems.withLock { $0.append("appender \(a): \(error)") }
                }
                done.add(1, ordering: .relaxed)
            }
        }
        // A reader tails the log while they append.
        let reader = try PGConnection(url)
        var seen: [LogRow] = []
        var last: Int64 = 0
        while true {
            let finished = done.load(ordering: .relaxed) == appenders
            let batch = try ClusterLog.read(reader, after: last, limit: 100)
            for e in batch {
                if e.position != last + 1 { problems.withLock { $0.append("gap: \(last) then \(e.position)") } }
                last = e.position
                seen.append(e)
            }
            if batch.isEmpty { if finished { break } else { usleep(1000) } }
        }
        group.wait()
        #expect(problems.withLock { $0 } == [])
        let total = appenders * (0..<batches).reduce(0) { $0 + 1 + ($1 % 4) }
        #expect(seen.count == total && seen.last?.position == Int64(total))
        #expect(try ClusterLog.head(reader) == Int64(total))
        for a in 0..<appenders {
            let mine = seen.filter { $0.origin == "node\(a)" }
            #expect(mine.map(\.position) == returned.withLock { $0["node\(a)"] ?? [] })
            #expect(mine.map { String(decoding: $0.payload, as: UTF8.self) } == (0..<mine.count).map { "node\(a)-\($0)" })
            // Each entry's time is at least the time it was appended with (raised, never lowered,
            // to keep the log's time from going back).
            #expect(zip(mine.map(\.at), 0...).allSatisfy { $0.0 >= Int64($0.1) })
        }
        // Time never goes back along the log.
        #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.0.at <= $0.1.at })
    }

    // The wake-up: a listener's socket becomes readable and it is told the last position.
    @Test func anAppendWakesTheListeners() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "notify")
        try ClusterSchema.migrate(try PGConnection(url))
        let listener = try PGConnection(url)
        try ClusterLog.listen(listener)
        let writer = try PGConnection(url)
        let positions = try ClusterLog.append(writer, [("n1", 1, [1, 2, 3]), ("n1", 2, [])])
        #expect(positions == [1, 2])
        var fds = [pollfd(fd: listener.socket, events: Int16(POLLIN), revents: 0)]
        #expect(poll(&fds, 1, 5000) == 1)
        var notes: [(channel: String, payload: String)] = []
        for _ in 0..<50 where notes.isEmpty {
            notes = try listener.notifications()
            if notes.isEmpty { usleep(10_000) }
        }
        #expect(notes.map(\.channel) == [ClusterLog.channel] && notes.map(\.payload) == ["2"])
        // The wake-up announces entries to a reader that has less than its position, not to one
        // that read up to it already.
        #expect(ClusterLog.announcesEntries(after: 1, in: notes))
        #expect(!ClusterLog.announcesEntries(after: 2, in: notes))
        #expect(try ClusterLog.read(listener, after: 0).map(\.payload) == [[1, 2, 3], []])
        // A node whose clock is behind appends after one whose clock is ahead: the log's time holds.
        _ = try ClusterLog.append(writer, [("ahead", 1_000, [])])
        _ = try ClusterLog.append(writer, [("behind", 400, []), ("behind", 1_200, [])])
        #expect(try ClusterLog.read(writer, after: 2).map(\.at) == [1_000, 1_000, 1_200])
    }

    // A reader passes over wake-ups for entries it already read, and over nothing else: any
    // wake-up it cannot read as a later position (another channel, a payload that is not a
    // position) makes it read. Pure: no PostgreSQL.
    @Test func wakeUpsForEntriesAlreadyReadAreSkipped() {
        let log = ClusterLog.channel
        #expect(!ClusterLog.announcesEntries(after: 10, in: []))
        #expect(!ClusterLog.announcesEntries(after: 10, in: [(log, "3"), (log, "10")]))
        #expect(ClusterLog.announcesEntries(after: 10, in: [(log, "3"), (log, "11")]))
        #expect(ClusterLog.announcesEntries(after: 10, in: [(log, "")]))
        #expect(ClusterLog.announcesEntries(after: 10, in: [(log, "ten")]))
        #expect(ClusterLog.announcesEntries(after: 10, in: [(log, " 9")]))
        #expect(ClusterLog.announcesEntries(after: 10, in: [("other", "9")]))
        #expect(ClusterLog.announcesEntries(after: Int64.max - 1, in: [(log, String(Int64.max))]))
        #expect(ClusterLog.announcesEntries(after: 10, in: [(log, "99999999999999999999")]))
    }

    // CL-4, CL-5: nodes' heartbeats say who is alive at an injected time; one node leads, and
    // when its connection drops (a killed node) another can take the lead.
    @Test func nodeRegistryAndTheLeaderLock() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "nodes")
        let db = try PGConnection(url)
        try ClusterSchema.migrate(db)
        try ClusterNodes.heartbeat(db, id: "a", urls: ["ws://a:1/ws"], startedAt: 0, now: 10_000, applied: 5)
        try ClusterNodes.heartbeat(db, id: "b", urls: ["ws://b:1/ws", "wss://b.example/ws"], startedAt: 0, now: 1_000, applied: 3)
        #expect(try ClusterNodes.live(db, now: 15_000, timeout: 10_000).map(\.id) == ["a"])
        #expect(try ClusterNodes.dead(db, now: 15_000, timeout: 10_000).map(\.id) == ["b"])
        try ClusterNodes.heartbeat(db, id: "b", urls: ["ws://b:1/ws", "wss://b.example/ws"], startedAt: 0, now: 14_000, applied: 9)
        let live = try ClusterNodes.live(db, now: 15_000, timeout: 10_000)
        #expect(live.map(\.id) == ["a", "b"] && live[1].urls == ["ws://b:1/ws", "wss://b.example/ws"] && live[1].applied == 9)
        try ClusterNodes.remove(db, id: "a")
        #expect(try ClusterNodes.live(db, now: 15_000, timeout: 10_000).map(\.id) == ["b"])

        var first: PGConnection? = try PGConnection(url)
        let second = try PGConnection(url)
        #expect(try ClusterNodes.tryLead(first!) == true)
        #expect(try ClusterNodes.tryLead(second) == false)
        first = nil  // the leader's connection ends
        var took = false
        for _ in 0..<100 where !took {
            took = try ClusterNodes.tryLead(second)
            if !took { usleep(20_000) }
        }
        #expect(took)
    }

    // CL-9: a trim and a node's registration exclude each other (ClusterSchema.LockKey.trim). A
    // trim reads the nodes' applied positions and then deletes: a node that registered in
    // between (applied 0) and read its start position could find it deleted. Here a session
    // holds the trim lock as a trim's chunk does: a registration and a trim both wait for it;
    // once the registration is in, a trim keeps every entry (its applied is 0).
    @Test func aTrimAndARegistrationExcludeEachOther() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "trimlock")
        let db = try PGConnection(url)
        try ClusterSchema.migrate(db)
        _ = try ClusterLog.append(db, (1...20).map { LogAppend(origin: "w", payload: Array("e\($0)".utf8)) })
        let endSessions: @Sendable (Int64) -> [UInt8] = { Array("end \($0)".utf8) }
        let holder = try PGConnection(url)
        try holder.query("SELECT pg_advisory_lock($1)", [String(ClusterSchema.LockKey.trim)])
        let registered = Atomic<Bool>(false), trimmed = Atomic<Bool>(false)
        let failures = Mutex<[String]>([])
        let group = DispatchGroup()
        DispatchQueue.global().async(group: group) {
            do {
                _ = try ClusterNodes.register(try PGConnection(url), id: "starting", urls: [], origin: { "s/\($0)" }, endPrevious: endSessions)
                registered.store(true, ordering: .relaxed)
            } catch { failures.withLock { $0.append("register: \(error)") } }
        }
        usleep(500_000)
        let early = registered.load(ordering: .relaxed)
        #expect(!early, "registered during a trim")
        #expect(try Self.scalarCount(db, "SELECT count(*) FROM roomcast_nodes WHERE node_id = 'starting'") == 0)
        try holder.query("SELECT pg_advisory_unlock($1)", [String(ClusterSchema.LockKey.trim)])
        group.wait()
        let done = registered.load(ordering: .relaxed)
        #expect(done && failures.withLock { $0 } == [])

        // A trim waits for a trim in progress, too; after the registration it deletes nothing.
        try holder.query("SELECT pg_advisory_lock($1)", [String(ClusterSchema.LockKey.trim)])
        DispatchQueue.global().async(group: group) {
            do {
                let deleted = try ClusterSnapshots.trim(try PGConnection(url), below: 15)
                if deleted != 0 { failures.withLock { $0.append("deleted \(deleted) while a node started") } }
                trimmed.store(true, ordering: .relaxed)
            } catch { failures.withLock { $0.append("trim: \(error)") } }
        }
        usleep(500_000)
        let trimmedEarly = trimmed.load(ordering: .relaxed)
        #expect(!trimmedEarly, "trimmed during a trim")
        try holder.query("SELECT pg_advisory_unlock($1)", [String(ClusterSchema.LockKey.trim)])
        group.wait()
        let trimDone = trimmed.load(ordering: .relaxed)
        #expect(trimDone && failures.withLock { $0 } == [])
        #expect(try Self.scalarCount(db, "SELECT count(*) FROM roomcast_log") >= 20)
        // The lock is free again once the trim is over: registering does not wait.
        _ = try ClusterNodes.register(holder, id: "another", urls: [], origin: { "a/\($0)" }, endPrevious: endSessions)
    }

    static func scalarCount(_ db: PGConnection, _ sql: String) throws -> Int { Int(try db.query(sql).scalar ?? "") ?? -1 }

    // CL-4, CL-6: a restarted node is not taken for its dead predecessor while it starts. Its
    // registration forgets the previous run's connection (endGone waits for the new run's first
    // beat), and its starting beats keep it listed past the node timeout until its membership
    // thread beats; once they stop, the timeout ends it as any silent node.
    @Test func aStartingRunIsNotEndedForItsPredecessorOrASlowStart() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "starting")
        let leader = try PGConnection(url)
        try ClusterSchema.migrate(leader)
        let endSessions: (Int64) -> [UInt8] = { Array("end \($0)".utf8) }
        func ended(grace: Int64) throws -> [String] {
            try ClusterNodes.endGone(leader, grace: grace, origin: "leader", except: "leader", endSessions: endSessions).map(\.id)
        }
        // The first run beats on a connection of its own, then dies with it (kill -9).
        var first: PGConnection? = try PGConnection(url)
        let one = try ClusterNodes.register(first!, id: "n", urls: [], origin: { "n/\($0)" }, endPrevious: endSessions)
        #expect(try ClusterNodes.beat(first!, id: "n", incarnation: one.incarnation, urls: [], applied: 0))
        first = nil
        // The second run registers; its first beat is late (a slow start). Its row does not carry
        // the dead connection: endGone leaves it alone past its grace.
        let restart = try PGConnection(url)
        let two = try ClusterNodes.register(restart, id: "n", urls: [], origin: { "n/\($0)" }, endPrevious: endSessions)
        #expect(two.incarnation > one.incarnation)
        usleep(400_000)
        #expect(try ended(grace: 200) == [])
        #expect(try leader.query("SELECT backend_pid FROM roomcast_nodes WHERE node_id = 'n'").scalar == "0")

        // Starting beats keep the run listed past a node timeout of 600 ms.
        let beats = StartingBeats(id: "n", incarnation: two.incarnation, everyMilliseconds: 100, connect: { try PGConnection(url) })
        for _ in 0..<3 {
            usleep(400_000)
            #expect(try ClusterNodes.endDead(leader, timeout: 600, origin: "leader", except: "leader", endSessions: endSessions).isEmpty)
        }
        #expect(!beats.ended)
        beats.stop()
        // Stopped (and their connection gone): the run is silent, and ended like any other.
        usleep(800_000)
        #expect(try ClusterNodes.endDead(leader, timeout: 600, origin: "leader", except: "leader", endSessions: endSessions).map(\.id) == ["n"])
        // A run that was ended while it started is told so by its starting beats.
        let three = try ClusterNodes.register(restart, id: "n", urls: [], origin: { "n/\($0)" }, endPrevious: endSessions)
        try ClusterNodes.remove(leader, id: "n")
        let late = StartingBeats(id: "n", incarnation: three.incarnation, everyMilliseconds: 50, connect: { try PGConnection(url) })
        for _ in 0..<40 where !late.ended { usleep(50_000) }
        #expect(late.ended)
        late.stop()
    }

    // CL-3 foundation: committed appends survive a PostgreSQL crash; while it is down a call
    // fails as a lost connection; after the restart a new connection continues the order.
    @Test func appendsSurvivePostgresKillNine() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "crash")
        let db = try PGConnection(url)
        try ClusterSchema.migrate(db)
        for i in 0..<20 { _ = try ClusterLog.append(db, [("n", Int64(i), Array("e\(i)".utf8))]) }
        pg.kill9()
        do {
            _ = try ClusterLog.append(db, [("n", 99, [])])
            Issue.record("an append with PostgreSQL down must fail")
        } catch {
            #expect(error.isConnectionLost, "\(error)")
        }
        #expect(throws: PGError.self) { try PGConnection(url) }
        try pg.start()
        let again = try PGConnection(url)
        #expect(try ClusterLog.read(again, after: 0).map { String(decoding: $0.payload, as: UTF8.self) } == (0..<20).map { "e\($0)" })
        #expect(try ClusterLog.append(again, [("n", 20, [])]) == [21])
    }

    // Errors carry PostgreSQL's SQLSTATE; values travel as parameters, never as SQL text.
    @Test func errorsAndParameters() throws {
        let pg = try PostgresServer()
        let db = try PGConnection(pg.url())
        do {
            try db.query("SELEC 1")
            Issue.record("a syntax error must throw")
        } catch {
            #expect(error.sqlState == "42601" && !error.isConnectionLost)
        }
        let hostile = "'); DROP TABLE x; --\u{00e9}\u{1F600}"
        #expect(try db.query("SELECT $1::text", [hostile]).scalar == hostile)
        #expect(try db.query("SELECT $1::text IS NULL", [nil]).scalar == "t")
        // Binary parameters and results (the log's prepared statements): every byte value through
        // bytea[] and back, text with every kind of character, int8 at both ends, NULL elements.
        let all = (0...255).map { UInt8($0) }
        var got: [[UInt8]?] = []
        var texts: [String?] = []
        var ints: [Int64?] = []
        try db.execute(prepared: "t", "SELECT b, t, i FROM unnest($1::bytea[], $2::text[], $3::int8[]) AS u(b, t, i)", [
            .byteaArray([all, [], [0]]), .textArray([hostile, "", "a"]), .int8Array([.min, nil, .max]),
        ]) { row throws(PGError) in
            got.append(row.bytes(0))
            texts.append(row.string(1))
            ints.append(row.int64(2))
        }
        #expect(got == [all, [], [0]])
        #expect(texts == [hostile, "", "a"])
        #expect(ints == [.min, nil, .max])
        // Prepared once per connection: a second call reuses it.
        var n: Int64?
        try db.execute(prepared: "t", "SELECT b, t, i FROM unnest($1::bytea[], $2::text[], $3::int8[]) AS u(b, t, i)", [
            .byteaArray([]), .textArray([]), .int8Array([]),
        ]) { row throws(PGError) in n = row.int64(2) }
        #expect(n == nil)
        // A refused prepared statement throws with its SQLSTATE and leaves the connection usable.
        do {
            try db.execute(prepared: "bad", "SELECT 1/$1", [.int8(0)]) { _ throws(PGError) in }
            Issue.record("division by zero must throw")
        } catch {
            #expect(error.sqlState == "22012")
        }
        #expect(try db.query("SELECT 1").scalar == "1")
    }

    // A read is bounded in bytes as well as entries, but always returns the first entry.
    @Test func readsAreBoundedInBytes() throws {
        let pg = try PostgresServer()
        let url = try Self.database(pg, "bytes")
        let db = try PGConnection(url)
        try ClusterSchema.migrate(db)
        let big = [UInt8](repeating: 7, count: 1000)
        _ = try ClusterLog.append(db, (0..<10).map { _ in LogAppend(origin: "n", payload: big) })
        #expect(try ClusterLog.read(db, after: 0, limit: 100, maxBytes: 2500).map(\.position) == [1, 2, 3])
        #expect(try ClusterLog.read(db, after: 0, limit: 100, maxBytes: 1).map(\.position) == [1])
        #expect(try ClusterLog.read(db, after: 8, limit: 100, maxBytes: 1 << 20).map(\.position) == [9, 10])
        #expect(try ClusterLog.read(db, after: 0, limit: 4).map(\.payload) == [big, big, big, big])
    }
}
