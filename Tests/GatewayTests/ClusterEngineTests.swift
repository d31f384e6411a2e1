import Chat
import Engine
import Foundation
import Logging
import Store
import Synchronization
import Testing
import Wire
import Replication

/// The engine's side of CLUSTER.md "Nonces and idempotency keys" and "A user's connections",
/// without PostgreSQL: engines of three node runs apply the same log entries (built here from
/// what each appended), and every one of them judges the signed calls alike — a replayed nonce
/// and a claimed idempotency key refused (SPEC §2, PX-2), a user's connections counted
/// cluster-wide and closed by each node (PX-5).
@Suite("Cluster engine: signed calls through the log")
struct ClusterEngineTests {
    /// A log that keeps what the engine appends; the test decides the order of the entries.
    final class CapturingLog: ReplicatedLog {
        private let appended = Mutex<[(seq: UInt64, payload: [UInt8])]>([])
        let origin: String
        let incarnation: UInt64
        let traits = LogTraits(keepsResumeEvents: false, replicaLoss: .rebuildFromLog, ids: EntryIDs())
        init(origin: String, incarnation: UInt64) {
            self.origin = origin
            self.incarnation = incarnation
        }
        var isWritable: Bool { true }
        var isLeader: Bool { false }
        var clockOffsetMilliseconds: Int64 { 0 }
        func encode(_ record: LogRecord) throws -> LogPayload { .bytes(try LogRecord.encode(record)) }
        func append(_ payload: LogPayload, seq: UInt64) -> LogEntry? {
            if case .bytes(let b) = payload { appended.withLock { $0.append((seq, b)) } }
            return nil
        }
        func take() -> [(seq: UInt64, payload: [UInt8])] { appended.withLock { a in defer { a = [] }; return a } }
    }

    /// One node run: its engine, its replica, what it published to its I/O loops and the nonces
    /// it learned from the log.
    final class Node: Sendable {
        let origin: String
        let log: CapturingLog
        let engine: Engine
        let store: Store
        let published = Collected<Published>()
        let learned = Collected<RequestNonce>()

        init(origin: String, incarnation: UInt64) throws {
            self.origin = origin
            log = CapturingLog(origin: origin, incarnation: incarnation)
            var logger = Logger(label: "test")
            logger.logLevel = .critical
            let publisher = Publisher(sink: RecordingSink(published))
            store = try Store(inMemory: logger, afterBatch: publisher.flush)
            // As a node given `--app` has it in its replica before it applies the log.
            try store.upsertApp(key: "app", secret: "secret", origin: "config", settings: AppSettings(), now: 0)
            let ids = log.traits.ids
            let learned = self.learned
            engine = try Engine(domain: ChatDomain(makeID: { ids.next() }), store: store, log: log, publisher: publisher, webhooks: nil,
                                clock: { 1_800_000_000_000 }, retention: .init(maxEvents: 100, maxAgeMilliseconds: 60_000),
                                reload: { ChatDomain(makeID: { ids.next() }) },
                                onNonceLearned: { n, _ in learned.append([n]) }, logger: logger)
            store.start()
            engine.start()
        }

        func stop() {
            engine.stop()
            store.stop()
        }

        /// Submits a signed call's command; its answer, and its stamp (what the log said of it).
        func submit(_ command: Command, nonce: String, key: (String, String)? = nil) -> (Answer, RequestStamp) {
            let stamp = RequestStamp(nonce: RequestNonce(app: "app", nonce: nonce), nonceField: "Nonce")
            if let key { stamp.setKey(key.0, fingerprint: key.1, header: "Idempotency-Key") }
            let answer = Answer()
            engine.submit(command, stamp: stamp, replyTo: .callback { answer.set($0) })
            return (answer, stamp)
        }

        func query(_ q: Query) -> Result<Reply, ChatError>? {
            let answer = Answer()
            engine.query(q) { answer.set($0) }
            return answer.wait()
        }
    }

    /// What the publisher hands the I/O loops, recorded.
    struct RecordingSink: PublishedSink {
        let published: Collected<Published>
        init(_ published: Collected<Published>) { self.published = published }
        func deliver(_ batch: [Published]) { published.append(batch) }
    }

    final class Collected<T: Sendable>: Sendable {
        private let items = Mutex<[T]>([])
        func append(_ more: [T]) { items.withLock { $0 += more } }
        var all: [T] { items.withLock { $0 } }
    }

    final class Answer: Sendable {
        private let value = Mutex<Result<Reply, ChatError>?>(nil)
        /// Keeps the first answer (a second one would be a defect the tests catch by comparing).
        func set(_ r: Result<Reply, ChatError>) { value.withLock { if $0 == nil { $0 = r } } }
        /// The answer so far, without waiting.
        var peek: Result<Reply, ChatError>? { value.withLock { $0 } }
        /// The answer, once it came (nil after 5 s).
        func wait() -> Result<Reply, ChatError>? {
            for _ in 0..<5_000 {
                if let v = value.withLock({ $0 }) { return v }
                usleep(1_000)
            }
            return nil
        }
        var code: Int? {
            if case .failure(let e) = wait() { return e.code.rawValue }
            return nil
        }
    }

    /// The shared log: entries in the order the test appends them, applied by every node.
    final class Log {
        var entries: [LogEntry] = []
        let nodes: [Node]
        var at: Int64 = 1_800_000_000_000
        init(_ nodes: [Node]) { self.nodes = nodes }

        /// Takes what `node` appended since the last call into the log (in its order), then has
        /// every node apply the whole log so far.
        func commit(from node: Node, expecting count: Int = 1) throws {
            var appended: [(seq: UInt64, payload: [UInt8])] = []
            for _ in 0..<5_000 where appended.count < count {
                appended += node.log.take()
                if appended.count < count { usleep(1_000) }
            }
            #expect(appended.count == count, "\(node.origin) appended \(appended.count) records, not \(count)")
            for a in appended { add(origin: node.origin, seq: a.seq, payload: a.payload) }
            applyAll()
        }

        /// An entry of a run no engine here plays (its node died).
        func add(origin: String, seq: UInt64 = 0, _ record: LogRecord) throws {
            add(origin: origin, seq: seq, payload: try LogRecord.encode(record))
        }

        private func add(origin: String, seq: UInt64, payload: [UInt8]) {
            at += 10
            entries.append(LogEntry(position: Int64(entries.count + 1), origin: origin, seq: seq, at: at, payload: payload))
        }

        func applyAll() {
            for n in nodes { n.engine.apply(entries: entries) }
            for n in nodes {
                for _ in 0..<5_000 where n.engine.applied < Int64(entries.count) { usleep(1_000) }
            }
        }
    }

    static func messages(_ node: Node) -> [String] {
        guard case .success(.messages(let list)) = node.query(.history(app: "app", roomId: "r", start: 0, limit: 100, .ascending, kinds: [])) else { return [] }
        return list.map(\.content)
    }

    static func send(_ content: String) -> Command {
        .sendMessage(app: "app", roomId: "r", .server(userId: "admin", nickname: "", avatar: ""), .text, content: content)
    }

    @Test func everyNodeJudgesNoncesKeysAndDisconnectsAlike() throws {
        let a = try Node(origin: "a#1", incarnation: 1), b = try Node(origin: "b#1", incarnation: 2)
        defer { a.stop(); b.stop() }
        let log = Log([a, b])
        try log.add(origin: "a#1", .ensureApp("app"))
        try log.add(origin: "a#1", .command(.createRoom(app: "app", RoomConfig(roomId: "r"))))
        log.applyAll()

        // SPEC §2: node a's call, then the same signed call replayed to node b before b saw it.
        let (first, _) = a.submit(Self.send("once"), nonce: "n1")
        try log.commit(from: a)
        let (replayed, replayStamp) = b.submit(Self.send("once"), nonce: "n1")
        try log.commit(from: b)
        #expect(first.code == nil)
        #expect(replayed.code == 40104 && replayStamp.refusal == .nonceReused)
        for n in [a, b] { #expect(Self.messages(n) == ["once"], "\(n.origin)") }
        // Both learned the nonce from the log (so their authenticators refuse it from now on).
        #expect(a.learned.all == b.learned.all && a.learned.all.map(\.nonce) == ["n1"])

        // PX-2: a claims k1; b's retry (another nonce) is not applied while a has not answered,
        // and replays a's answer once it is kept; another request with k1 is 42200.
        let (claimed, claimStamp) = a.submit(Self.send("kept"), nonce: "n2", key: ("k1", "f1"))
        try log.commit(from: a)
        #expect(claimed.code == nil)
        let (early, earlyStamp) = b.submit(Self.send("kept"), nonce: "n3", key: ("k1", "f1"))
        try log.commit(from: b)
        #expect(early.code == 40900 && earlyStamp.refusal == .duplicate(.inProgress))
        a.engine.keepAnswer(claimStamp, status: 201, contentType: "application/json", body: Array("{\"kept\":1}".utf8)) {}
        a.engine.finish(claimStamp)
        try log.commit(from: a)
        let (late, lateStamp) = b.submit(Self.send("kept"), nonce: "n4", key: ("k1", "f1"))
        try log.commit(from: b)
        #expect(late.code != nil && lateStamp.refusal == .duplicate(.answered))
        // Every node keeps the answer in its replica (where a retry is answered from).
        for n in [a, b] {
            let kept = try? n.store.storedAnswer(app: "app", key: "k1", now: log.at)
            #expect(kept?.body == Array("{\"kept\":1}".utf8) && kept?.fingerprint == "f1", "\(n.origin)")
        }
        let (other, otherStamp) = b.submit(Self.send("other"), nonce: "n5", key: ("k1", "f2"))
        try log.commit(from: b)
        #expect(other.code == 42200 && otherStamp.refusal == .duplicate(.otherRequest))

        // A run that claimed k2 and died before its answer was kept: the change was made, its
        // answer is lost (40903) — on every node, for every retry.
        try log.add(origin: "c#1", .signed(SignedCall(.command(Self.send("lost")), nonce: RequestNonce(app: "app", nonce: "n6"),
                                                      key: IdempotencyClaim(app: "app", key: "k2", fingerprint: "f3", claim: ClaimID(incarnation: 3, serial: 1)))))
        try log.add(origin: "c#1", .endSessions(incarnation: 3))
        log.applyAll()
        let (lost, lostStamp) = b.submit(Self.send("lost"), nonce: "n7", key: ("k2", "f3"))
        try log.commit(from: b)
        #expect(lost.code == 40903 && lostStamp.refusal == .duplicate(.answerLost))
        for n in [a, b] { #expect(Self.messages(n) == ["once", "kept", "lost"], "\(n.origin)") }

        // PX-5: alice on both nodes (and bob on b); a's disconnect counts both of hers, and each
        // node is told to close its own.
        let phone = SessionID.make(incarnation: 1, loop: 0, counter: 1), web = SessionID.make(incarnation: 2, loop: 0, counter: 1)
        let bob = SessionID.make(incarnation: 2, loop: 0, counter: 2)
        a.engine.submit(.connect(phone, app: "app", userId: "alice", deviceId: "phone", anonymous: nil), replyTo: .none)
        try log.commit(from: a)
        b.engine.submit(.connect(web, app: "app", userId: "alice", deviceId: "web", anonymous: nil), replyTo: .none)
        b.engine.submit(.connect(bob, app: "app", userId: "bob", deviceId: "web", anonymous: nil), replyTo: .none)
        try log.commit(from: b, expecting: 2)
        let stamp = RequestStamp(nonce: RequestNonce(app: "app", nonce: "n8"), nonceField: "Nonce")
        let count = Answer()
        a.engine.disconnectUser(UserDisconnect(app: "app", userId: "alice", device: nil, closeCode: 4010, reason: "bye"), stamp: stamp,
                                replyTo: .callback { count.set($0) })
        try log.commit(from: a)
        #expect(count.wait() == .success(.disconnected(2)))
        // One device only: the web one.
        let one = Answer()
        a.engine.disconnectUser(UserDisconnect(app: "app", userId: "alice", device: "web", closeCode: 4011, reason: ""), stamp: nil,
                                replyTo: .callback { one.set($0) })
        try log.commit(from: a)
        #expect(one.wait() == .success(.disconnected(1)))
        usleep(50_000)
        for n in [a, b] {
            let closes = n.published.all.compactMap { item -> String? in
                guard case .disconnectUser(let app, let user, let device, let code, let reason) = item else { return nil }
                return "\(app)/\(user)/\(device ?? "*")/\(code)/\(reason)"
            }
            #expect(closes == ["app/alice/*/4010/bye", "app/alice/web/4011/"], "\(n.origin)")
        }
        // The listing is the same on every node: every node's sessions, in connect order.
        for n in [a, b] {
            guard case .success(.connections(let list)) = n.query(.connections(app: "app", userId: "alice")) else {
                Issue.record("no listing on \(n.origin)")
                continue
            }
            #expect(list.map(\.session) == [phone, web] && list.map(\.device) == ["phone", "web"])
        }
    }
}
