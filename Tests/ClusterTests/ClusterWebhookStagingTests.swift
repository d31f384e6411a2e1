import Chat
import Engine
import Foundation
import GRDB
import Logging
import Store
import Synchronization
import Testing
import TestKit
import Webhooks
import Replication
#if canImport(Glibc)
import Glibc
#endif

/// CL-6 without PostgreSQL: two engines, as two nodes of one cluster, fed the same log entries,
/// stage the same webhook messages (ids and sequence numbers from the entries), give their
/// deliveries the same owners (takeover included), record the same endpoints (secrets included)
/// and, once the owner's outcomes come back through the log, the same delivery log. Only the
/// owner sends.
@Suite("CL-6: webhooks staged alike on every node")
struct ClusterWebhookStagingTests {
    /// The log as one node appends to it: what it appends is kept for the test to feed back.
    final class Log: ReplicatedLog, Sendable {
        let appended = Mutex<[(seq: UInt64, payload: [UInt8])]>([])
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
    }

    /// The I/O loops are not part of this test.
    struct NoLoops: PublishedSink {
        func deliver(_ batch: [Published]) {}
    }

    struct Node {
        let run: UInt64
        let origin: String
        let engine: Engine
        let store: Store
        let webhooks: WebhookService
        let log: Log

        /// Waits until the engine has applied `position` and the replica has committed what that
        /// caused.
        func settle(_ position: Int64) throws {
            let deadline = Date().addingTimeInterval(10)
            while engine.applied < position {
                guard Date() < deadline else { throw TestKitError.timeout("the engine did not apply \(position)") }
                usleep(1_000)
            }
            // The engine's thread has finished the entry once it answers a query; the store's
            // commits run in order.
            let asked = Atomic<Bool>(false)
            engine.query(.appSettings(app: "app")) { _ in asked.store(true, ordering: .releasing) }
            while !asked.load(ordering: .acquiring) { usleep(1_000) }
            let written = Atomic<Bool>(false)
            store.submit(Store.Commit(mutations: [], extra: { _ in }, onDurable: { written.store(true, ordering: .releasing) }))
            while !written.load(ordering: .acquiring) { usleep(1_000) }
        }

        func rows(_ sql: String) throws -> [String] {
            try store.database.read { db in
                try Row.fetchAll(db, sql: sql).map { row in row.columnNames.map { "\($0)=\(row[$0] as DatabaseValue)" }.joined(separator: " ") }
            }
        }
    }

    static func node(run: UInt64, receiver: Bool, retry: RetrySchedule = .standard) throws -> Node {
        var logger = Logger(label: "cl6-test")
        logger.logLevel = .critical
        let store = try Store(inMemory: logger)
        try store.upsertApp(key: "app", secret: "app-secret", origin: "config", settings: AppSettings(), now: 0)
        store.start()
        var configuration = WebhookService.Configuration()
        configuration.privateNetworkApps = ["app"]
        configuration.retentionMs = Limits.clusterWebhookRetentionMilliseconds
        configuration.retry = retry
        let webhooks = WebhookService(store: store, configuration: configuration, logger: logger, clock: Self.clock, random: { 0.5 },
                                      makeID: { UUID().uuidString }, appSecret: { _ in "app-secret" }, sharing: .cluster(run: run))
        let origin = ClusterRun.origin(node: "n\(run)", incarnation: Int64(run))
        let log = Log(origin: origin, incarnation: run)
        let ids = log.traits.ids
        let engine = try Engine(domain: ChatDomain(makeID: { ids.next() }), store: store, log: log, publisher: Publisher(sink: NoLoops()),
                                webhooks: webhooks, clock: Self.clock, retention: .init(maxEvents: 100, maxAgeMilliseconds: 60_000),
                                reload: { throw ChatError(.storageUnavailable, "no reload in this test", field: nil) }, logger: logger)
        if receiver { try webhooks.start() }
        engine.start()
        return Node(run: run, origin: origin, engine: engine, store: store, webhooks: webhooks, log: log)
    }

    @Sendable static func clock() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func run(_ n: UInt64) -> String { ClusterRun.origin(node: "n\(n)", incarnation: Int64(n)) }

    @Test func twoEnginesFedTheSameEntriesStageAlikeAndOnlyTheOwnerSends() throws {
        let receiver = try HTTPReceiver()
        defer { receiver.stop() }
        // Node A is run 1, which appends entries; node B is run 5, which appends none.
        let a = try Self.node(run: 1, receiver: true), b = try Self.node(run: 5, receiver: true)
        defer {
            for n in [a, b] {
                n.engine.stop()
                n.webhooks.stop()
                n.store.stop()
            }
        }
        let t0 = Self.clock()
        let s1 = SessionID.make(incarnation: 1, loop: 0, counter: 1), s2 = SessionID.make(incarnation: 2, loop: 0, counter: 1)
        let configured = WebhookService.configuredID(app: "app", url: receiver.url())
        let records: [(UInt64, LogRecord)] = [
            (1, .ensureApp("app")),
            (1, .webhookEndpoint(WebhookEndpointChange(action: .ensure, app: "app", id: configured,
                                                       spec: WebhookEndpointSpec(url: receiver.url(), allowPrivateNetwork: true),
                                                       generatedSecret: StandardWebhooks.makeSecret { UInt8.random(in: 0...255) },
                                                       operatorAllowsPrivate: true, operatorEndpoint: true))),
            (2, .webhookEndpoint(WebhookEndpointChange(action: .create, app: "app", id: nil,
                                                       spec: WebhookEndpointSpec(url: receiver.url("/two"), events: ["message.sent"],
                                                                                 allowPrivateNetwork: true),
                                                       generatedSecret: StandardWebhooks.makeSecret { UInt8.random(in: 0...255) },
                                                       operatorAllowsPrivate: true, operatorEndpoint: false))),
            (2, .command(.createRoom(app: "app", RoomConfig(roomId: "r")))),
            (1, .command(.connect(s1, app: "app", userId: "alice", deviceId: "phone", anonymous: nil))),
            (1, .command(.join(s1, roomId: "r", EnterProfile(nickname: "Alice"), .join))),
            (2, .command(.connect(s2, app: "app", userId: "bob", deviceId: "web", anonymous: nil))),
            (2, .command(.join(s2, roomId: "r", EnterProfile(nickname: "Bob"), .join))),
            (1, .command(.sendMessage(app: "app", roomId: "r", .session(s1), .text, content: "from-1"))),
            (3, .command(.sendMessage(app: "app", roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "from-3"))),
            (2, .command(.sendMessage(app: "app", roomId: "r", .session(s2), .text, content: "from-2"))),
            // Run 3 found dead by run 1 (the leader): run 1 takes its deliveries.
            (1, .endSessions(incarnation: 3)),
            // Run 2 leaves by itself: the next entry of another run takes its deliveries ...
            (2, .endSessions(incarnation: 2)),
            (4, .command(.sendMessage(app: "app", roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "from-4"))),
            // ... and an entry run 2 appended after its end has no owner until the next live run's.
            (2, .command(.sendMessage(app: "app", roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "late-2"))),
            (1, .tick),
        ]
        var entries: [LogEntry] = []
        for (i, (run, record)) in records.enumerated() {
            entries.append(LogEntry(position: Int64(i + 1), origin: Self.run(run), seq: UInt64(i + 1), at: t0 + Int64(i), payload: try LogRecord.encode(record)))
        }
        // Node A's own entries would answer callers with those sequence numbers: it has none waiting.
        for n in [a, b] {
            n.engine.apply(entries: entries)
            try n.settle(Int64(entries.count))
        }

        let messages = "SELECT id, app, type, time, roomId, userIds, cause, details, sequence FROM webhookMessage ORDER BY sequence"
        let deliveries = "SELECT endpointId, messageId, sequence, status, owner FROM webhookDelivery ORDER BY sequence, endpointId"
        let endpoints = "SELECT * FROM webhookEndpoint ORDER BY id"
        let staged = try a.rows(messages)
        #expect(staged.count > 10)
        let stagedB = try b.rows(messages)
        #expect(staged == stagedB, "\(zip(staged, stagedB).filter { $0.0 != $0.1 }.prefix(3))")
        #expect(try a.rows(deliveries) == (try b.rows(deliveries)))
        #expect(try a.rows(endpoints) == (try b.rows(endpoints)))
        // Endpoints: one from the command line and one created through REST, with the id its entry gives.
        #expect(a.webhooks.endpoints(app: "app").map(\.id).sorted() == [configured, WebhookService.createdID(position: 3)].sorted())

        // Ids and sequence numbers come from the entry: message k of entry p is msg_<p><k> and
        // its sequence p << 20 + k - 1.
        let owners: [(id: String, sequence: Int64, owner: Int64)] = try a.store.database.read { db in
            try Row.fetchAll(db, sql: "SELECT m.id, m.sequence, d.owner FROM webhookDelivery d JOIN webhookMessage m ON m.id = d.messageId").map {
                ($0["id"], $0["sequence"], $0["owner"])
            }
        }
        var runOf: [Int64: UInt64] = [:]
        for (i, (run, _)) in records.enumerated() { runOf[Int64(i + 1)] = run }
        for o in owners {
            let position = Int64(o.id.dropFirst(4).prefix(16), radix: 16)!
            let k = Int64(o.id.dropFirst(20), radix: 16)!
            #expect(o.sequence == position << WebhookService.MessageNaming.sequenceBits + k - 1, "\(o)")
            // Takeover, decided from the log alone: run 3's go to run 1 (it ended run 3); run 2's
            // (before its end, and its end's own) to run 4 (the next entry of another run); the
            // entry run 2 appended after its end to run 1 (the next live run's entry).
            let expected: UInt64
            switch (runOf[position]!, position) {
            case (3, _): expected = 1
            case (2, ...13): expected = 4
            case (2, _): expected = 1
            case (let run, _): expected = run
            }
            #expect(o.owner == Int64(expected), "message \(o.id) of entry \(position)")
        }
        #expect(Set(owners.map(\.owner)) == [1, 4])

        // Only the owner sends: node A (run 1) sends each of its deliveries once; node B (run 5)
        // and run 4 (no engine here) send nothing.
        let mine = owners.filter { $0.owner == 1 }
        var expectedSends: [String] = []
        try a.store.database.read { db in
            expectedSends = try String.fetchAll(db, sql: "SELECT messageId || ' ' || endpointId FROM webhookDelivery WHERE owner = 1 ORDER BY 1")
        }
        #expect(expectedSends.count >= mine.count)
        receiver.wait(timeout: 10) { $0.count >= expectedSends.count }
        usleep(300_000)
        let sent = receiver.requests.map { ($0.header("webhook-id") ?? "?") + " " + ($0.target.hasPrefix("/two") ? WebhookService.createdID(position: 3) : configured) }
        #expect(sent.sorted() == expectedSends)

        // The owner's outcomes come back through the log (node A appended them): applied on both,
        // the delivery log is the same on both, attempts included.
        var outcomes: [LogEntry] = []
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            let appended = a.log.appended.withLock { $0 }
            let count = appended.compactMap { try? LogRecord.decode($0.payload) }.reduce(0) {
                if case .webhookOutcomes(let list) = $1 { return $0 + list.count } else { return $0 }
            }
            if count >= expectedSends.count {
                outcomes = appended.enumerated().map {
                    LogEntry(position: Int64(entries.count + $0.offset + 1), origin: a.origin, seq: $0.element.seq, at: t0 + 100, payload: $0.element.payload)
                }
                break
            }
            usleep(20_000)
        }
        #expect(!outcomes.isEmpty)
        #expect(b.log.appended.withLock { $0.isEmpty })
        for n in [a, b] {
            n.engine.apply(entries: outcomes)
            try n.settle(Int64(entries.count + outcomes.count))
        }
        let log = "SELECT endpointId, messageId, status, attempts, lastStatus, lastError, updatedAt, owner FROM webhookDelivery ORDER BY sequence, endpointId"
        let attempts = "SELECT endpointId, messageId, attempt, time, status, error, durationMs FROM webhookAttempt ORDER BY endpointId, messageId, attempt"
        #expect(try a.rows(log) == (try b.rows(log)))
        #expect(try a.rows(attempts) == (try b.rows(attempts)))
        let statuses: [(Int64, String)] = try b.store.database.read { db in
            try Row.fetchAll(db, sql: "SELECT owner, status FROM webhookDelivery").map { ($0["owner"], $0["status"]) }
        }
        #expect(statuses.allSatisfy { $0.0 == 1 ? $0.1 == "delivered" : $0.1 == "pending" })
        #expect(try b.rows(attempts).count == expectedSends.count)
    }

    /// CL-6: a run whose end was seen is not always dead: its outcome may reach the log after
    /// another run took its deliveries over. The new owner, still holding the delivery (here
    /// waiting for a retry after a 503), withdraws it: the receiver gets it no more from there.
    @Test func aLateOutcomeWithdrawsTheNewOwnersQueuedCopy() throws {
        let answered = Atomic<Int>(0)
        let receiver = try HTTPReceiver { _ in
            // The first attempt fails: the delivery waits for its retry.
            answered.add(1, ordering: .relaxed).newValue == 1 ? HTTPReceiver.Answer(status: 503) : HTTPReceiver.Answer(status: 204)
        }
        defer { receiver.stop() }
        // Node B is run 5, which finds run 3 dead and takes its deliveries over.
        let b = try Self.node(run: 5, receiver: true, retry: RetrySchedule(delays: [1_500], jitter: 0))
        defer {
            b.engine.stop()
            b.webhooks.stop()
            b.store.stop()
        }
        let t0 = Self.clock()
        let configured = WebhookService.configuredID(app: "app", url: receiver.url())
        let records: [(UInt64, LogRecord)] = [
            (1, .ensureApp("app")),
            (1, .webhookEndpoint(WebhookEndpointChange(action: .ensure, app: "app", id: configured,
                                                       spec: WebhookEndpointSpec(url: receiver.url(), events: ["message.sent"], allowPrivateNetwork: true),
                                                       generatedSecret: StandardWebhooks.makeSecret { UInt8.random(in: 0...255) },
                                                       operatorAllowsPrivate: true, operatorEndpoint: true))),
            (1, .command(.createRoom(app: "app", RoomConfig(roomId: "r")))),
            (3, .command(.sendMessage(app: "app", roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "from-3"))),
            (5, .endSessions(incarnation: 3)),
        ]
        var entries: [LogEntry] = []
        for (i, (run, record)) in records.enumerated() {
            entries.append(LogEntry(position: Int64(i + 1), origin: Self.run(run), seq: UInt64(i + 1), at: t0 + Int64(i), payload: try LogRecord.encode(record)))
        }
        b.engine.apply(entries: entries)
        try b.settle(Int64(entries.count))
        let owned: [(endpoint: String, message: String)] = try b.store.database.read { db in
            try Row.fetchAll(db, sql: "SELECT endpointId, messageId FROM webhookDelivery WHERE owner = 5").map { ($0["endpointId"], $0["messageId"]) }
        }
        #expect(owned.count == 1)
        let delivery = try #require(owned.first)
        // B's first attempt: 503, a retry 1.5 s later.
        receiver.wait(timeout: 10) { $0.count >= 1 }

        // Run 3's late outcome: it had delivered the message after all.
        let late = LogRecord.webhookOutcomes([WebhookOutcome(endpointId: delivery.endpoint, messageId: delivery.message, delivered: true,
                                                             attempts: 1, lastStatus: 200, lastError: "", at: t0 + 10, history: [])])
        b.engine.apply(entries: [LogEntry(position: Int64(entries.count + 1), origin: Self.run(3), seq: 99, at: t0 + 20,
                                          payload: try LogRecord.encode(late))])
        try b.settle(Int64(entries.count + 1))
        // When its retry comes up (1.5 s after the 503, later on a loaded machine) B withdraws it:
        // it sent it once (the 503), never again.
        let deadline = Date().addingTimeInterval(15)
        while b.webhooks.stats.withdrawn.load(ordering: .relaxed) == 0 && Date() < deadline { usleep(20_000) }
        #expect(b.webhooks.stats.withdrawn.load(ordering: .relaxed) == 1)
        usleep(200_000)
        #expect(receiver.requests.count == 1)
        let status: String? = try b.store.database.read { db in
            try String.fetchOne(db, sql: "SELECT status FROM webhookDelivery WHERE messageId = ?", arguments: [delivery.message])
        }
        #expect(status == "delivered")
    }

    @Test func runNamesCarryTheIncarnation() {
        #expect(ClusterRun.incarnation(ofOrigin: ClusterRun.origin(node: "n1", incarnation: 42)) == 42)
        #expect(ClusterRun.incarnation(ofOrigin: ClusterRun.origin(node: "a#r7", incarnation: 8)) == 8)
        // Names of other shapes name no run.
        for other in ["n1", "n1#", "n1#r", "n1#abc123", "n1#123456", "n1#r12x", "n1#r99999999999999999999"] {
            #expect(ClusterRun.incarnation(ofOrigin: other) == nil, "\(other)")
        }
    }

    @Test func messageNamesFollowTheEntry() {
        var naming = WebhookService.MessageNaming()
        naming.begin(position: 7)
        let first = naming.next(), second = naming.next()
        #expect(first.id == "msg_000000000000000700000001" && second.id == "msg_000000000000000700000002")
        #expect(first.sequence == 7 << 20 && second.sequence == 7 << 20 + 1)
        naming.begin(position: 8)
        #expect(naming.next().sequence == 8 << 20)
        // An entry with more messages than its share of sequence numbers pushes the next one on:
        // sequence numbers only grow.
        naming.begin(position: 9)
        var last: Int64 = 0
        for _ in 0..<(1 << 20) + 5 { last = naming.next().sequence }
        naming.begin(position: 10)
        #expect(naming.next().sequence == last + 1)
    }
}
