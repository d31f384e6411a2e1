import Chat
import CoreMetrics
import Crypto
import Foundation
import GRDB
import Logging
import Reactor
import Store
import Synchronization
import Replication

/// Webhooks (SPEC §9): endpoints per app, a durable outbox written in the transaction of the change
/// that caused each message, and one delivery thread driving libcurl's multi interface.
///
/// The way of a message: the engine asks `stage` which endpoints want each of an outcome's records,
/// `persist` writes the messages and their pending deliveries with the outcome's mutations, and once
/// that transaction is durable `enqueue` hands them to the delivery thread. Every attempt's result is
/// written back (attempt log, delivery status) through the store's writer. A crash between the
/// commit and a recorded success re-sends the message after the restart, with the same id:
/// at-least-once.
///
/// Ordering per endpoint: first attempts leave in the order the events happened, at most
/// `maxInFlightPerEndpoint` at a time; a message being retried can arrive after newer ones. Receivers
/// order by `time`/`webhook-timestamp` and de-duplicate by the message id.
///
/// Fairness between apps: the `maxInFlight` delivery slots are not handed out first come. An app
/// holds at most its share of them (`perAppLimit`: all when it is the only app with endpoints, half
/// with two, a third with three, a quarter with four or more), so the receivers of one app, or of a
/// few, that stall leave slots to the others however much they have queued. Free slots go
/// round-robin over the apps with something to send, apps below an equal share of the slots first,
/// and within an app round-robin over its endpoints.
public final class WebhookService: @unchecked Sendable {
    // Safety: `registry`, `inbox`, `operatorEndpoints` and `operatorSpecs` are Mutexes and
    // `sequence`/`stopping` atomics, reachable from any thread. Everything under "Delivery thread"
    // is touched only by the thread `start` creates (the only caller of `run`); other threads reach
    // it through `inbox` and `CurlTransport.wakeup`. `multi` is written once before that thread
    // starts; `sharing` is immutable; `reported` is a Mutex.

    public struct Configuration: Sendable {
        public var retry = RetrySchedule.standard
        public var timeoutMs = 10_000
        public var connectTimeoutMs = 3_000
        public var maxInFlight = 256
        public var maxInFlightPerEndpoint = 32
        /// Slots one app may hold; nil derives it from the number of apps with endpoints (`perAppLimit`).
        public var maxInFlightPerApp: Int?
        /// Apps whose endpoints may reach loopback, private and link-local addresses when they set
        /// `allowPrivateNetwork` (the operator's `--webhook-allow-private`); `*` is every app.
        /// Endpoints from the command line (`configure`) are the operator's own and need no entry.
        public var privateNetworkApps: Set<String> = []
        /// Delivered and dead messages are kept this long for the delivery log and replays.
        public var retentionMs: Int64 = 7 * 24 * 3_600_000
        /// After a rotation, the previous secret keeps signing this long.
        public var secretGraceMs: Int64 = 24 * 3_600_000
        public var maxEndpointsPerApp = 20
        public init() {}

        /// Slots one app may hold when `apps` apps have endpoints: `maxInFlightPerApp`, or else an
        /// equal share of `maxInFlight` among them, but never less than a quarter (at least 1).
        func perAppLimit(apps: Int) -> Int {
            if let limit = maxInFlightPerApp { return max(1, limit) }
            return max(1, maxInFlight / min(max(apps, 1), 4))
        }
    }

    public let configuration: Configuration
    let store: Store
    let logger: Logger
    let clock: @Sendable () -> Int64
    let random: @Sendable () -> Double
    let makeID: @Sendable () -> String
    let appSecret: @Sendable (String) -> String?

    struct Registry {
        var byId: [String: WebhookEndpoint] = [:]
        var byApp: [String: [String]] = [:]

        mutating func put(_ e: WebhookEndpoint) {
            if byId.updateValue(e, forKey: e.id) == nil { byApp[e.app, default: []].append(e.id) }
        }

        mutating func remove(_ id: String) {
            guard let e = byId.removeValue(forKey: id) else { return }
            byApp[e.app]?.removeAll { $0 == id }
            if byApp[e.app]?.isEmpty == true { byApp[e.app] = nil }
        }
    }

    /// How this node's deliveries relate to the engine's log (CL-6, WebhookReplication.swift).
    public let sharing: Sharing
    /// Outcomes of this node's deliveries, written here and waiting for the engine to append them
    /// (`takeOutcomes`; `Sharing.shared`). At most one per delivery this run owns.
    let reported = Mutex<[WebhookOutcome]>([])

    enum Work: Sendable {
        case deliveries([Queued])
        case endpointRemoved(String)
        case task(@Sendable (WebhookService) -> Void)
    }

    struct Queued: Sendable {
        var endpointId: String
        var message: WebhookMessage
        var attempts: Int
        var dueAt: Int64
        /// When the delivery was queued (in a cluster it is dead once
        /// `Replication.maxPendingMilliseconds` have passed since).
        var since: Int64
    }

    let registry = Mutex(Registry())
    /// Ids of the endpoints the command line configured in this run (`configure`).
    let operatorEndpoints = Mutex<Set<String>>([])
    private let inbox = Mutex<[Work]>([])
    private let sequence = Atomic<Int64>(0)
    private let stopping = Atomic<Bool>(false)
    private var multi: UnsafeMutableRawPointer?
    private var thread: PosixThread?

    // MARK: Metrics (swift-metrics: exported by the backend the process bootstrapped)

    private let attemptsCounter = Counter(label: "roomcast_webhook_attempts_total")
    private let failedAttemptsCounter = Counter(label: "roomcast_webhook_failed_attempts_total")
    private let deliveredCounter = Counter(label: "roomcast_webhook_delivered_total")
    private let deadCounter = Counter(label: "roomcast_webhook_dead_total")
    private let withdrawnCounter = Counter(label: "roomcast_webhook_withdrawn_total")
    private let depthGauge = Gauge(label: "roomcast_webhook_queue_depth")
    private let latencyTimer = CoreMetrics.Timer(label: "roomcast_webhook_attempt_duration")

    /// Counters for the service's own status answers and benchmarks.
    public final class Stats: Sendable {
        public let attempts = Atomic<Int>(0)
        public let delivered = Atomic<Int>(0)
        public let failedAttempts = Atomic<Int>(0)
        public let dead = Atomic<Int>(0)
        public let queueDepth = Atomic<Int>(0)
        /// CL-6: deliveries dropped because another run's late outcome reported them.
        public let withdrawn = Atomic<Int>(0)
    }
    public let stats = Stats()

    // MARK: Delivery thread

    private struct EndpointQueue {
        var items: [Item] = []
        var head = 0
        var inFlight = 0
        var isEmpty: Bool { head >= items.count }

        mutating func push(_ i: Item) { items.append(i) }

        mutating func pop() -> Item? {
            guard head < items.count else { return nil }
            defer {
                head += 1
                if head > 64 && head * 2 > items.count {
                    items.removeFirst(head)
                    head = 0
                }
            }
            return items[head]
        }

        var count: Int { items.count - head }
    }

    private struct Item {
        var messageId: String
        var attempts: Int
        var since: Int64
    }

    private struct RetryKey: Hashable {
        var endpointId: String
        var messageId: String
        var attempts: Int
        var since: Int64
    }

    private struct InFlight {
        var app: String
        var endpointId: String
        var messageId: String
        var attempts: Int
        var since: Int64
    }

    struct DeliveryKey: Hashable {
        var endpointId: String
        var messageId: String
    }

    private var transport: CurlTransport?
    private var queues: [String: EndpointQueue] = [:]
    private var messages: [String: (message: WebhookMessage, refs: Int)] = [:]
    private var retries = DeadlineQueue<RetryKey>()
    private var waitingRetries = 0
    private var flights: [Int: InFlight] = [:]
    /// Slots each app holds (transfers in flight).
    private var appInFlight: [String: Int] = [:]
    /// Round-robin positions: the app served last, and per app the endpoint served last.
    private var lastApp = ""
    private var lastEndpoint: [String: String] = [:]
    private var nextTag = 0
    private var writes: [@Sendable (Database) throws -> Void] = []
    /// What becomes visible once `writes` are durable (e.g. an endpoint shown as disabled only
    /// together with the dead delivery that disabled it).
    private var afterWrites: [@Sendable () -> Void] = []
    /// Endpoints disabled here whose change is not yet durable (and so not yet in the registry).
    var disabling: Set<String> = []
    private var nextPrune: Int64 = 0
    /// Outcomes through the log: the attempts of this node's unfinished deliveries (for their
    /// outcomes, at most `Limits.maxWebhookOutcomeAttempts` each), and the outcomes to report once
    /// what led to them is written.
    var histories: [DeliveryKey: [DeliveryAttempt]] = [:]
    var outcomes: [WebhookOutcome] = []
    /// CL-6: deliveries this run holds (queued or waiting for a retry) whose outcome another run
    /// reported after this run took them over: dropped, not sent, when they come up. Each is kept
    /// at most `withdrawnTTLMilliseconds` (a delivery removed another way takes its entry with it
    /// then), so the set is bounded by the late outcomes of that long.
    private var withdrawn: [DeliveryKey: Int64] = [:]
    static let withdrawnTTLMilliseconds: Int64 = 3_600_000

    public init(store: Store, configuration: Configuration = Configuration(), logger: Logger, clock: @escaping @Sendable () -> Int64,
                random: @escaping @Sendable () -> Double, makeID: @escaping @Sendable () -> String,
                appSecret: @escaping @Sendable (String) -> String?, sharing: Sharing = .local) {
        self.sharing = sharing
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.clock = clock
        self.random = random
        self.makeID = makeID
        self.appSecret = appSecret
    }

    // MARK: Start and stop

    /// Loads endpoints and the pending deliveries this run owns, then starts the delivery thread.
    /// (A single node owns every delivery it ever queued; a cluster node run owns none at start:
    /// its replica's pending deliveries belong to other runs, which send them, or the log hands
    /// them to this one.)
    public func start() throws {
        let (endpoints, loaded, maxSeq) = try store.database.read { db in
            (try WebhookDatabase.endpoints(db), try WebhookDatabase.pending(owner: sharing.run, db), try WebhookDatabase.maxSequence(db))
        }
        let pending = loaded
        sequence.store(maxSeq, ordering: .relaxed)
        registry.withLock { r in for e in endpoints { r.put(e) } }
        let now = clock()
        if !pending.isEmpty {
            post(.deliveries(pending.map {
                Queued(endpointId: $0.endpointId, message: $0.message, attempts: $0.attempts, dueAt: max($0.nextAttemptAt, now), since: $0.message.time)
            }))
            logger.info("webhook deliveries resumed", metadata: ["pending": "\(pending.count)"])
        }
        let t = CurlTransport(maxConnectionsPerHost: configuration.maxInFlightPerEndpoint)
        transport = t
        multi = t.handle
        thread = PosixThread.start(name: "roomcast-webhooks") { [self] in run() }
    }

    /// Stops the delivery thread after recording what finished (in-flight attempts are retried after a restart).
    public func stop() {
        stopping.store(true, ordering: .releasing)
        if let multi { CurlTransport.wakeup(multi) }
        thread?.join()
        thread = nil
    }

    func post(_ w: Work) {
        inbox.withLock { $0.append(w) }
        if let multi { CurlTransport.wakeup(multi) }
    }

    // MARK: The outbox (engine thread)

    /// Messages of one outcome and the endpoints that want each.
    public struct Staged: Sendable {
        public var messages: [WebhookMessage]
        public var deliveries: [(endpointId: String, message: Int)]
        /// The node run that sends them (0 on a single node).
        public var owner: UInt64 = 0
        public var isEmpty: Bool { deliveries.isEmpty }
    }

    /// Which endpoints want these records; nil when none does (the common case costs one lock).
    /// Fresh ids and sequence numbers (the service on its own).
    public func stage(_ records: [WebhookRecord]) -> Staged? {
        stage(records, owner: sharing.run) { ("msg_" + makeID(), sequence.add(1, ordering: .relaxed).newValue) }
    }

    /// `stage` for a log entry (the engine): `owner`, the run that appended the entry, sends them;
    /// with outcomes through the log the ids and sequence numbers come from the entry (`naming`),
    /// so every node stages the same messages.
    public func stage(_ records: [WebhookRecord], owner: UInt64, naming: inout MessageNaming) -> Staged? {
        guard sharing.shared else { return stage(records) }
        return stage(records, owner: owner) { naming.next() }
    }

    private func stage(_ records: [WebhookRecord], owner: UInt64, name: () -> (id: String, sequence: Int64)) -> Staged? {
        guard !records.isEmpty else { return nil }
        let targets: [[WebhookEndpoint]] = registry.withLock { r in
            guard !r.byApp.isEmpty else { return [] }
            return records.map { rec in (r.byApp[rec.app] ?? []).compactMap { r.byId[$0] }.filter { $0.wants(rec.type) } }
        }
        guard targets.contains(where: { !$0.isEmpty }) else { return nil }
        var staged = Staged(messages: [], deliveries: [], owner: owner)
        for (rec, eps) in zip(records, targets) where !eps.isEmpty {
            var details: [String: String] = [:]
            for p in rec.details { details[p.key] = p.value }
            let (id, sequence) = name()
            let m = WebhookMessage(id: id, app: rec.app, type: rec.type, time: rec.time, roomId: rec.roomId, userIds: rec.userIds,
                                   cause: rec.cause, details: details, sequence: sequence)
            staged.messages.append(m)
            for e in eps { staged.deliveries.append((e.id, staged.messages.count - 1)) }
        }
        return staged
    }

    /// The write of the staged messages and their pending deliveries, for the outcome's commit
    /// (`Store.Commit.extra`): it runs inside the transaction that makes the outcome durable.
    public static func persist(_ s: Staged) -> @Sendable (Store.Transaction) throws -> Void {
        { tx in
            let db = tx.database
            for m in s.messages { try WebhookDatabase.insert(m, db) }
            for d in s.deliveries {
                try WebhookDatabase.queue(endpointId: d.endpointId, s.messages[d.message], at: s.messages[d.message].time, owner: s.owner, db)
            }
        }
    }

    /// Hands durable messages to the delivery thread.
    public func enqueue(_ s: Staged) {
        post(.deliveries(s.deliveries.map {
            Queued(endpointId: $0.endpointId, message: s.messages[$0.message], attempts: 0, dueAt: 0, since: s.messages[$0.message].time)
        }))
    }

    // MARK: The delivery loop

    private func run() {
        guard let transport else { return }
        while !stopping.load(ordering: .acquiring) {
            take(inbox.withLock { w -> [Work] in
                let all = w
                w.removeAll(keepingCapacity: true)
                return all
            })
            var now = clock()
            if !withdrawn.isEmpty { withdrawn = withdrawn.filter { now - $0.value < Self.withdrawnTTLMilliseconds } }
            for key in retries.popDue(now) {
                waitingRetries -= 1
                queues[key.endpointId, default: EndpointQueue()].push(Item(messageId: key.messageId, attempts: key.attempts, since: key.since))
            }
            // Start what may start, let curl work (new transfers need a perform before a poll can
            // wait on their sockets), and go round while transfers finish.
            while true {
                startTransfers(transport, now: clock())
                let done = transport.perform()
                for (tag, result) in done { complete(tag, result) }
                if done.isEmpty { break }
            }
            flushWrites()
            now = clock()
            // In a cluster the replica is pruned as the log is applied (the same on every node).
            if !sharing.shared && now >= nextPrune {
                nextPrune = now + 600_000
                let before = now - configuration.retentionMs
                writes.append { db in try WebhookDatabase.prune(before: before, db) }
                flushWrites()
            }
            let depth = queues.values.reduce(0) { $0 + $1.count } + waitingRetries + transport.inFlight
            stats.queueDepth.store(depth, ordering: .relaxed)
            depthGauge.record(depth)
            var wait: Int64 = 1000
            if let due = retries.nextDeadline { wait = min(wait, max(0, due - now)) }
            if inbox.withLock({ $0.isEmpty }) { transport.poll(timeoutMs: Int32(wait)) }
        }
        flushWrites()
    }

    private func take(_ work: [Work]) {
        for w in work {
            switch w {
            case .deliveries(let list):
                let now = clock()
                for q in list {
                    if var held = messages[q.message.id] {
                        held.refs += 1
                        messages[q.message.id] = held
                    } else {
                        messages[q.message.id] = (q.message, 1)
                    }
                    if q.dueAt > now {
                        retries.push(q.dueAt, RetryKey(endpointId: q.endpointId, messageId: q.message.id, attempts: q.attempts, since: q.since))
                        waitingRetries += 1
                    } else {
                        queues[q.endpointId, default: EndpointQueue()].push(Item(messageId: q.message.id, attempts: q.attempts, since: q.since))
                    }
                }
            case .endpointRemoved(let id):
                if var q = queues.removeValue(forKey: id) {
                    while let item = q.pop() { release(item.messageId) }
                }
                if sharing.shared { forgetHistories(of: id) }
            case .task(let body):
                body(self)
            }
        }
    }

    /// CL-6: another run reported these deliveries' outcomes (late: this run took them over when
    /// that run's end was seen). Those held here are withdrawn: a queued one is not sent, one in
    /// flight is not tried again if it fails (if it was already on its way, the receiver may see
    /// it twice, as at-least-once allows).
    func withdraw(_ keys: [DeliveryKey]) {
        let now = clock()
        for k in keys where messages[k.messageId] != nil { withdrawn[k] = now }
    }

    private func release(_ messageId: String) {
        guard var held = messages[messageId] else { return }
        held.refs -= 1
        messages[messageId] = held.refs > 0 ? held : nil
    }

    /// Starts what may start, fairly: round-robin over the apps with something to send, one transfer
    /// per turn; in a first pass only apps below an equal share of `maxInFlight` take turns, in a
    /// second any app below its limit (`perAppLimit`). Within an app, round-robin over its endpoints, each
    /// in its queue's order and below `maxInFlightPerEndpoint`.
    private func startTransfers(_ transport: CurlTransport, now: Int64) {
        guard !queues.isEmpty, transport.inFlight < configuration.maxInFlight else { return }
        let (endpoints, apps) = registry.withLock { ($0.byId, $0.byApp.count) }
        // The endpoints that could start a transfer, by app.
        var ready: [String: [String]] = [:]
        for (id, q) in queues {
            guard let e = endpoints[id] else {
                // The endpoint was deleted: its deliveries went with it.
                var gone = q
                while let item = gone.pop() { release(item.messageId) }
                queues[id] = nil
                if sharing.shared { forgetHistories(of: id) }
                continue
            }
            if !q.isEmpty && q.inFlight < configuration.maxInFlightPerEndpoint { ready[e.app, default: []].append(id) }
        }
        guard !ready.isEmpty else { return }
        for app in ready.keys { ready[app]?.sort() }
        let active = Set(ready.keys).union(appInFlight.keys).count
        let perApp = configuration.perAppLimit(apps: apps)
        let equalShare = max(1, configuration.maxInFlight / max(1, active))
        var order = ready.keys.sorted()
        let first = order.firstIndex { $0 > lastApp } ?? 0
        order = Array(order[first...] + order[..<first])
        for limit in Set([min(equalShare, perApp), perApp]).sorted() {
            var turn = order
            while !turn.isEmpty {
                var again: [String] = []
                for app in turn where appInFlight[app, default: 0] < limit {
                    guard transport.inFlight < configuration.maxInFlight else { return }
                    guard var ids = ready[app] else { continue }
                    if startNext(app, &ids, endpoints, transport, now: now) {
                        lastApp = app
                        again.append(app)
                    }
                    ready[app] = ids
                }
                turn = again
            }
        }
    }

    /// Starts one transfer for `app` from the next of its endpoints (after the one served last)
    /// that can; `ids` loses the endpoints that cannot start anything now.
    private func startNext(_ app: String, _ ids: inout [String], _ endpoints: [String: WebhookEndpoint], _ transport: CurlTransport,
                           now: Int64) -> Bool {
        let first = ids.firstIndex { $0 > lastEndpoint[app, default: ""] } ?? 0
        for id in ids[first...] + ids[..<first] {
            guard let e = endpoints[id] else { continue }
            if start(e, transport, now: now) {
                lastEndpoint[app] = id
                return true
            }
            ids.removeAll { $0 == id }
        }
        return false
    }

    /// Starts the first delivery of an endpoint's queue that can be sent (those that cannot are
    /// dead letters); false when it has nothing to start or no slot of its own left.
    private func start(_ e: WebhookEndpoint, _ transport: CurlTransport, now: Int64) -> Bool {
        guard var q = queues[e.id] else { return false }
        defer { queues[e.id] = q.isEmpty && q.inFlight == 0 ? nil : q }
        while q.inFlight < configuration.maxInFlightPerEndpoint, let item = q.pop() {
            guard let m = messages[item.messageId]?.message else { continue }
            if !withdrawn.isEmpty, withdrawn.removeValue(forKey: DeliveryKey(endpointId: e.id, messageId: item.messageId)) != nil {
                // Its outcome is in the log already (another run delivered it): not again.
                histories[DeliveryKey(endpointId: e.id, messageId: item.messageId)] = nil
                release(item.messageId)
                stats.withdrawn.add(1, ordering: .relaxed)
                withdrawnCounter.increment()
                continue
            }
            guard e.enabled, !disabling.contains(e.id) else {
                finish(e.id, item, status: .dead, attempts: item.attempts, next: 0, lastStatus: 0,
                       error: "endpoint disabled: \(e.disabledReason)", now: now)
                continue
            }
            let nonce = String(UInt32.random(in: 0...UInt32.max))
            guard let request = WebhookRenderer.render(m, for: e, appSecret: appSecret(e.app) ?? "", now: clock(), nonce: nonce) else {
                finish(e.id, item, status: .dead, attempts: item.attempts, next: 0, lastStatus: 0,
                       error: "the \(e.format.rawValue) format cannot express \(m.type.rawValue)", now: now)
                continue
            }
            let url = request.query.isEmpty ? e.url : e.url + (e.url.contains("?") ? "&" : "?") + request.query
            nextTag += 1
            flights[nextTag] = InFlight(app: e.app, endpointId: e.id, messageId: m.id, attempts: item.attempts, since: item.since)
            q.inFlight += 1
            appInFlight[e.app, default: 0] += 1
            transport.start(TransferJob(tag: nextTag, url: url, headers: request.headers, body: request.body,
                                        allowPrivateNetwork: mayReachPrivate(e), timeoutMs: configuration.timeoutMs,
                                        connectTimeoutMs: configuration.connectTimeoutMs))
            return true
        }
        return false
    }

    private func complete(_ tag: Int, _ result: TransferResult) {
        guard let f = flights.removeValue(forKey: tag) else { return }
        let held = appInFlight[f.app, default: 1] - 1
        appInFlight[f.app] = held > 0 ? held : nil
        if var q = queues[f.endpointId] {
            q.inFlight -= 1
            queues[f.endpointId] = q.isEmpty && q.inFlight == 0 ? nil : q
        }
        let now = clock()
        let attempts = f.attempts + 1
        let attempt = DeliveryAttempt(attempt: attempts, time: now, status: result.status, error: result.error, durationMs: result.durationMs)
        stats.attempts.add(1, ordering: .relaxed)
        attemptsCounter.increment()
        latencyTimer.recordMilliseconds(result.durationMs)
        let verdict: AttemptVerdict = result.status > 0 ? .of(status: result.status) : .retry
        let error = result.error.isEmpty && verdict != .delivered ? "HTTP \(result.status)" : result.error
        writes.append { db in try WebhookDatabase.record(attempt, endpointId: f.endpointId, messageId: f.messageId, db) }
        if sharing.shared { remember(attempt, DeliveryKey(endpointId: f.endpointId, messageId: f.messageId)) }
        let item = Item(messageId: f.messageId, attempts: attempts, since: f.since)
        switch verdict {
        case .delivered:
            stats.delivered.add(1, ordering: .relaxed)
            deliveredCounter.increment()
            finish(f.endpointId, item, status: .delivered, attempts: attempts, next: 0, lastStatus: result.status, error: "", now: now)
        case .gone:
            failed()
            let reason = "the receiver answered 410 Gone at \(now)"
            disable(f.endpointId, reason: reason)
            finish(f.endpointId, item, status: .dead, attempts: attempts, next: 0, lastStatus: result.status, error: "410 Gone: endpoint disabled", now: now,
                   disabling: reason)
        case .retry:
            failed()
            let key = DeliveryKey(endpointId: f.endpointId, messageId: f.messageId)
            if !withdrawn.isEmpty, withdrawn.removeValue(forKey: key) != nil {
                // Another run's outcome came meanwhile: not again.
                histories[key] = nil
                release(f.messageId)
                stats.withdrawn.add(1, ordering: .relaxed)
                withdrawnCounter.increment()
                return
            }
            if let next = configuration.retry.nextAttempt(afterFailed: attempts, now: now, random: random()),
               next - f.since <= sharing.maxPendingMilliseconds {
                retries.push(next, RetryKey(endpointId: f.endpointId, messageId: f.messageId, attempts: attempts, since: f.since))
                waitingRetries += 1
                let (e, m, s) = (f.endpointId, f.messageId, result.status)
                writes.append { db in
                    try WebhookDatabase.update(endpointId: e, messageId: m, status: .pending, attempts: attempts, nextAttemptAt: next, lastStatus: s,
                                               lastError: error, now: now, db)
                }
            } else if configuration.retry.nextAttempt(afterFailed: attempts, now: now, random: 0) != nil {
                // A cluster keeps a delivery pending at most this long (every node holds it).
                finish(f.endpointId, item, status: .dead, attempts: attempts, next: 0, lastStatus: result.status,
                       error: "not delivered within \(sharing.maxPendingMilliseconds / 60_000) minutes (the cluster's limit); last: \(error)", now: now)
            } else {
                finish(f.endpointId, item, status: .dead, attempts: attempts, next: 0, lastStatus: result.status,
                       error: "retries exhausted; last: \(error)", now: now)
            }
        }
    }

    private func failed() {
        stats.failedAttempts.add(1, ordering: .relaxed)
        failedAttemptsCounter.increment()
    }

    /// A delivery reached its end (delivered or dead): record it and let go of the message. In a
    /// cluster the end is recorded through the log, on every node alike (`outcomes`); `disabling`:
    /// the endpoint answered 410 and is disabled with this reason.
    private func finish(_ endpointId: String, _ item: Item, status: DeliveryStatus, attempts: Int, next: Int64, lastStatus: Int, error: String, now: Int64,
                        disabling reason: String? = nil) {
        if status == .dead {
            stats.dead.add(1, ordering: .relaxed)
            deadCounter.increment()
            logger.warning("webhook dead-lettered", metadata: ["endpoint": "\(endpointId)", "message": "\(item.messageId)", "error": "\(error)"])
        }
        let m = item.messageId
        if !withdrawn.isEmpty { withdrawn[DeliveryKey(endpointId: endpointId, messageId: m)] = nil }
        if sharing.shared {
            outcome(DeliveryKey(endpointId: endpointId, messageId: m), delivered: status == .delivered, attempts: attempts, lastStatus: lastStatus,
                    error: error, now: now, disabling: reason)
            release(m)
            return
        }
        writes.append { db in
            try WebhookDatabase.update(endpointId: endpointId, messageId: m, status: status, attempts: attempts, nextAttemptAt: next,
                                       lastStatus: lastStatus, lastError: error, now: now, db)
        }
        release(m)
    }

    /// 410 Gone: the endpoint stops receiving; what is queued for it becomes dead letters. It
    /// stops here at once; the API shows it disabled once that is durable, in the same
    /// transaction as the dead delivery.
    private func disable(_ id: String, reason: String) {
        guard !disabling.contains(id), var e = registry.withLock({ $0.byId[id] }), e.enabled else { return }
        disabling.insert(id)
        // In a cluster every node disables it when the outcome that says so is applied.
        if sharing.shared { return }
        e.enabled = false
        e.disabledReason = reason
        logger.warning("webhook endpoint disabled", metadata: ["endpoint": "\(id)", "reason": "\(reason)"])
        let disabled = e
        writes.append { db in try WebhookDatabase.save(disabled, db) }
        afterWrites.append { [self] in
            registry.withLock { r in
                guard var current = r.byId[id] else { return }
                current.enabled = false
                current.disabledReason = reason
                r.put(current)
            }
            post(.task { s in s.disabling.remove(id) })
        }
    }

    private func flushWrites() {
        if !outcomes.isEmpty {
            // Reported once the attempts that led to them are written.
            let done = outcomes
            outcomes.removeAll(keepingCapacity: true)
            afterWrites.append { [self] in reported.withLock { $0.append(contentsOf: done) } }
        }
        guard !writes.isEmpty || !afterWrites.isEmpty else { return }
        let batch = writes
        let after = afterWrites
        writes.removeAll(keepingCapacity: true)
        afterWrites.removeAll(keepingCapacity: true)
        var extra: (@Sendable (Store.Transaction) throws -> Void)?
        if !batch.isEmpty { extra = { tx in for w in batch { try w(tx.database) } } }
        store.submit(Store.Commit(mutations: [], extra: extra, onDurable: { for f in after { f() } }))
    }
}
