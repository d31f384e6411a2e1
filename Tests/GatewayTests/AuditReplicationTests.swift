import Chat
import Engine
import Foundation
import Logging
import Store
import Synchronization
import Testing
import Replication

/// MO-8 through the engine's one path, without PostgreSQL (the harness of `ClusterEngineTests`):
/// the audit entries a node's moderation calls make are applied alike by every node from the
/// log, a node started from a snapshot plus the log after it has the same trail (its replica's
/// rows included), and so does a node that replays the whole log.
@Suite("Audit trail through the log and snapshots (MO-8)")
struct AuditReplicationTests {
    typealias Node = ClusterEngineTests.Node

    /// A node made from `snapshot` (its domain from the image, its replica from the snapshot's
    /// bytes), as a cluster node starts from the newest snapshot.
    final class SnapshotNode: Sendable {
        let engine: Engine
        let store: Store

        init(_ snapshot: Snapshot) throws {
            let log = ClusterEngineTests.CapturingLog(origin: "n3", incarnation: 3)
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let publisher = Publisher(sink: ClusterEngineTests.RecordingSink(ClusterEngineTests.Collected<Published>()))
            store = try Store(inMemory: logger, afterBatch: publisher.flush)
            try store.load(image: snapshot.replica.bytes())
            let ids = log.traits.ids
            let domain = try ChatDomain(image: snapshot.state.domain, makeID: { ids.next() })
            engine = try Engine(domain: domain, store: store, log: log, publisher: publisher, webhooks: nil,
                                clock: { 1_800_000_000_000 }, retention: .init(maxEvents: 100, maxAgeMilliseconds: 60_000),
                                reload: { ChatDomain(makeID: { ids.next() }) }, logger: logger)
            engine.restore(snapshot.state)
            store.start()
            engine.start()
        }

        func query(_ q: Query) -> Result<Reply, ChatError>? {
            let answer = ClusterEngineTests.Answer()
            engine.query(q) { answer.set($0) }
            return answer.wait()
        }

        func stop() {
            engine.stop()
            store.stop()
        }
    }

    static let trail = Query.audit(app: "app", roomId: nil, before: nil, limit: Limits.maxAuditPage)

    static func entries(_ r: Result<Reply, ChatError>?) -> [AuditEntry] {
        if case .success(.audit(let list, _))? = r { return list }
        Issue.record("no audit page: \(String(describing: r))")
        return []
    }

    @Test("MO-8: every node applies the same entries from the log; a node from a snapshot plus the later log, and one replaying the whole log, have the same trail")
    func sameTrailFromTheLogAndFromASnapshot() throws {
        let n1 = try Node(origin: "n1", incarnation: 1), n2 = try Node(origin: "n2", incarnation: 2)
        defer { n1.stop(); n2.stop() }
        let log = ClusterEngineTests.Log([n1, n2])
        var nonce = 0
        func run(_ node: Node, _ command: Command) throws {
            nonce += 1
            let (answer, _) = node.submit(command, nonce: "n\(nonce)")
            try log.commit(from: node)
            if case .failure(let e)? = answer.wait() { Issue.record("\(command): \(e)") }
        }
        try log.add(origin: "a#1", .ensureApp("app"))
        log.applyAll()
        try run(n1, .createRoom(app: "app", RoomConfig(roomId: "r")))
        try run(n1, .block(app: "app", roomId: "r", ["bob"], minutes: 5, .server, rc: nil, nim: nil))
        try run(n2, Command.mute(app: "app", roomId: "r", ["carol"], .minutes(3), .server, rc: nil, nim: nil).via(.rongCloud))
        try run(n1, .editSensitiveWords(app: "app", add: [SensitiveWord(word: "spam")], remove: []))
        // A refused call is in the log too, and records nothing on any node.
        nonce += 1
        let (refused, _) = n2.submit(.kick(app: "app", roomId: "r", target: "nobody", .server, notifyExt: ""), nonce: "n\(nonce)")
        try log.commit(from: n2)
        if case .success? = refused.wait() { Issue.record("the kick of an absent user succeeded") }

        let first = Self.entries(n1.query(Self.trail))
        #expect(first.map(\.action) == [.sensitiveWordAdd, .mute, .block] && first.map(\.surface) == [.native, .rongCloud, .native])
        #expect(Self.entries(n2.query(Self.trail)) == first, "every node applies the same entries")
        // Each entry's time is its log entry's time, the same on every node.
        #expect(first.last?.time == log.entries[2].at)

        let taken = Mutex<Result<Snapshot, Error>?>(nil)
        n1.engine.snapshot { r in taken.withLock { $0 = r } }
        var snapshot: Snapshot?
        for _ in 0..<5_000 where snapshot == nil {
            switch taken.withLock({ $0 }) {
            case .success(let s)?: snapshot = s
            case .failure(let e)?: Issue.record("snapshot failed: \(e)"); return
            case nil: usleep(1_000)
            }
        }
        let s = try #require(snapshot)
        try run(n2, Command.unblock(app: "app", roomId: "r", ["bob"], .server, rc: nil, nim: nil).via(.nexconn))

        let n3 = try SnapshotNode(s)
        defer { n3.stop() }
        n3.engine.apply(entries: log.entries)
        for _ in 0..<5_000 where n3.engine.applied < Int64(log.entries.count) { usleep(1_000) }
        let now = Self.entries(n1.query(Self.trail))
        #expect(now.count == 4 && now.first?.action == .unblock && now.first?.surface == .nexconn && now.first?.id == 4)
        #expect(Self.entries(n3.query(Self.trail)) == now, "snapshot plus the later log gives the same trail")
        let rows = try n3.store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM auditEntry WHERE app = 'app'") }
        #expect(rows == 4, "the replica holds the entries too")

        // A node that replays the whole log from its start.
        let n4 = try Node(origin: "n4", incarnation: 4)
        defer { n4.stop() }
        n4.engine.apply(entries: log.entries)
        for _ in 0..<5_000 where n4.engine.applied < Int64(log.entries.count) { usleep(1_000) }
        #expect(Self.entries(n4.query(Self.trail)) == now)
    }
}
