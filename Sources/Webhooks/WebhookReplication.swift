import Chat
import Foundation
import GRDB
import Store
import Synchronization
import Replication

/// Webhooks in a cluster (CL-6, CLUSTER.md §7).
///
/// Every node stages every log entry's messages in its replica, with ids and sequence numbers
/// derived from the entry (`MessageNaming`), so every node holds the same messages. Each pending
/// delivery has an owner: the node run that appended the entry. Only the owner hands it to its
/// delivery thread; the others keep it parked in their replica. The owner's outcomes (delivered,
/// dead) travel through the log (`LogRecord.webhookOutcomes`), so every node records them alike;
/// when a run ends (`endSessions`), its pending deliveries pass to a run chosen from the log
/// (`adopt`), which sends them. Endpoints change only by log records (`apply`), so every node
/// stages for the same endpoints at the same entry.
///
/// What is decided from the log only (and so the same on every node): endpoints, messages,
/// pending deliveries and their owners, outcomes, pruning (at the entries' times). What stays a
/// node's own: the owner's attempts while a delivery is pending, and the egress policy each
/// owner applies when it sends.
extension WebhookService {
    /// How this node's webhook deliveries relate to the engine's log, given at construction (a
    /// property of the log the node follows).
    public struct Sharing: Sendable {
        /// This node run: it sends the deliveries it owns (a single node: 0, every delivery).
        public var run: UInt64
        /// Shared with other nodes through the log: messages and endpoints are named after the
        /// log entry that makes them (`MessageNaming`, the same on every node), and the outcomes
        /// of this run's deliveries go through the log (`takeOutcomes`), so every node records
        /// them alike. Otherwise names are fresh (unique across restarts: a single node's log
        /// positions start again with each run) and the delivery thread records outcomes itself.
        public var shared: Bool
        /// A delivery still pending this long after it was queued is dead.
        public var maxPendingMilliseconds: Int64

        /// A single node, or the service on its own: it owns and records everything.
        public static let local = Sharing(run: 0, shared: false, maxPendingMilliseconds: .max)

        /// A cluster node run (CL-6): every node holds every message, so a delivery is dead after
        /// `Limits.clusterWebhookMaxPendingMilliseconds`.
        public static func cluster(run: UInt64) -> Sharing {
            Sharing(run: run, shared: true, maxPendingMilliseconds: Limits.clusterWebhookMaxPendingMilliseconds)
        }
    }

    /// The outcomes of this run's deliveries written since the last call, for the engine to append
    /// to the log (any thread).
    public func takeOutcomes() -> [WebhookOutcome] {
        reported.withLock { r in
            defer { r.removeAll(keepingCapacity: true) }
            return r
        }
    }

    /// Ids and sequence numbers of the messages a log entry causes, derived from its position (and
    /// a counter within the entry), never from a node's clock or random generator: every node that
    /// applies the same entries names the same messages the same way. The sequence is
    /// `position << sequenceBits` plus the counter (always past the previous entry's last one, so
    /// it only grows), so positions up to 2^43 fit. Confined to the thread that applies the log.
    public struct MessageNaming: Sendable {
        public static let sequenceBits: Int64 = 20
        private var position: Int64 = 0
        private var counter: Int64 = 0
        private var last: Int64 = 0

        public init() {}

        /// Called before each entry is applied.
        public mutating func begin(position: Int64) {
            self.position = position
            counter = 0
        }

        public mutating func next() -> (id: String, sequence: Int64) {
            counter += 1
            last = max(last + 1, position << Self.sequenceBits)
            return ("msg_" + hexPadded(position, 16) + hexPadded(counter, 8), last)
        }
    }

    /// The id of an endpoint created through REST in a cluster: from its entry's position.
    public static func createdID(position: Int64) -> String {
        "ep_" + hexPadded(position, 24)
    }

    // MARK: Changes through REST (on the node that receives them)

    public enum AdminRequest: Sendable {
        case create(app: String, EndpointSpec)
        case update(app: String, id: String, EndpointSpec)
        case delete(app: String, id: String)
        case rotateSecret(app: String, id: String)
        case replay(app: String, id: String, messageIds: [String]?, since: Int64?)
    }

    public enum AdminResult: Sendable {
        case endpoint(WebhookEndpoint)
        case removed
        case queued(Int)
    }

    /// The log record of a change asked of this node, checked first against its replica (bad
    /// input is refused here, with the field, and nothing is appended). What this node's operator
    /// and random generator decide goes in the record.
    public func record(for request: AdminRequest) throws(ChatError) -> LogRecord {
        switch request {
        case .create(let app, var spec):
            guard spec.url != nil else { throw ChatError(.invalidParameter, "url is required", field: "url") }
            guard endpoints(app: app).count < configuration.maxEndpointsPerApp else {
                throw ChatError(.limitExceeded, "an app has at most \(configuration.maxEndpointsPerApp) webhook endpoints", field: "url")
            }
            var e = WebhookEndpoint(id: "", app: app, url: "", secret: "", events: [], format: .standard, allowPrivateNetwork: false, origin: "api",
                                    createdAt: 0)
            try Self.apply(spec, to: &e, mayGrant: operatorAllowsPrivate(app: app), granted: false)
            spec.events = spec.events.map { _ in Self.eventNames(e) }
            return .webhookEndpoint(WebhookEndpointChange(action: .create, app: app, id: nil, spec: spec, generatedSecret: Self.newSecret(),
                                                          operatorAllowsPrivate: operatorAllowsPrivate(app: app), operatorEndpoint: false))
        case .update(let app, let id, var spec):
            var e = try lookup(app: app, id: id)
            try apply(spec, to: &e, byOperator: false)
            spec.events = spec.events.map { _ in Self.eventNames(e) }
            return .webhookEndpoint(WebhookEndpointChange(action: .update, app: app, id: id, spec: spec, generatedSecret: nil,
                                                          operatorAllowsPrivate: operatorAllowsPrivate(app: app),
                                                          operatorEndpoint: operatorEndpoints.withLock { $0.contains(id) }))
        case .delete(let app, let id):
            _ = try lookup(app: app, id: id)
            return .webhookEndpoint(WebhookEndpointChange(action: .delete, app: app, id: id, spec: EndpointSpec(), generatedSecret: nil,
                                                          operatorAllowsPrivate: false, operatorEndpoint: false))
        case .rotateSecret(let app, let id):
            _ = try lookup(app: app, id: id)
            return .webhookEndpoint(WebhookEndpointChange(action: .rotateSecret, app: app, id: id, spec: EndpointSpec(), generatedSecret: Self.newSecret(),
                                                          operatorAllowsPrivate: false, operatorEndpoint: false))
        case .replay(let app, let id, let messageIds, let since):
            let e = try lookup(app: app, id: id)
            try Self.checkReplay(e, messageIds: messageIds, since: since)
            return .webhookReplay(WebhookReplayChange(app: app, endpointId: id, messageIds: messageIds, since: since))
        }
    }

    /// What a replay must give (the same checks as on a single node).
    static func checkReplay(_ e: WebhookEndpoint, messageIds: [String]?, since: Int64?) throws(ChatError) {
        guard e.enabled else { throw ChatError(.permissionDenied, "the endpoint is disabled; enable it first", field: "id") }
        guard (messageIds == nil) != (since == nil) else {
            throw ChatError(.invalidParameter, "give messageIds or since, not both", field: "messageIds")
        }
        if let ids = messageIds, ids.isEmpty || ids.count > 1000 {
            throw ChatError(.invalidParameter, "messageIds holds 1 to 1000 ids", field: "messageIds")
        }
    }

    static func newSecret() -> String { StandardWebhooks.makeSecret { UInt8.random(in: 0...255) } }

    /// The event filter as a spec gives it back (every type: "*").
    static func eventNames(_ e: WebhookEndpoint) -> [String] { e.events.isEmpty ? ["*"] : e.events.map(\.rawValue) }

    // MARK: The command line's endpoints

    /// Checks an endpoint of the command line and lets it reach private addresses as the operator
    /// says; it is made through the log (`ensureChange`, when the node catches up), not here.
    /// Runs before `start`.
    public func acceptConfigured(app: String, _ spec: EndpointSpec) throws {
        guard let url = spec.url else { throw ChatError(.invalidParameter, "url is required", field: "url") }
        var e = WebhookEndpoint(id: Self.configuredID(app: app, url: url), app: app, url: url, secret: Self.newSecret(), events: [], format: .standard,
                                allowPrivateNetwork: false, origin: "config", createdAt: 0)
        try apply(spec, to: &e, byOperator: true)
        operatorEndpoints.withLock { _ = $0.insert(e.id) }
    }

    /// The record that makes the command line's endpoint exist as it gives it; nil when it does.
    public func ensureChange(app: String, _ spec: EndpointSpec) throws(ChatError) -> WebhookEndpointChange? {
        guard let url = spec.url else { throw ChatError(.invalidParameter, "url is required", field: "url") }
        let id = Self.configuredID(app: app, url: url)
        if let existing = registry.withLock({ $0.byId[id] }) {
            var e = existing
            try Self.apply(spec, to: &e, mayGrant: true, granted: false)
            if e == existing { return nil }
        }
        return WebhookEndpointChange(action: .ensure, app: app, id: id, spec: spec, generatedSecret: Self.newSecret(), operatorAllowsPrivate: true,
                                     operatorEndpoint: true)
    }

    // MARK: Applying the log (on every node, on the engine's thread, in log order)

    /// A change applied at a log entry: the write for the replica (in the entry's commit order),
    /// and, once it is durable, the answer for the caller (the origin node's) and what follows.
    public struct Applied: Sendable {
        public var write: (@Sendable (Store.Transaction) throws -> Void)?
        public var done: @Sendable () -> Result<AdminResult, ChatError>
    }

    /// Applies an endpoint change. The registry changes at once (the next entry stages for it);
    /// a change that no longer fits the endpoints changes nothing, on every node alike.
    public func apply(_ c: WebhookEndpointChange, position: Int64, at: Int64) -> Applied {
        let e: WebhookEndpoint
        do throws(ChatError) {
            switch c.action {
            case .create:
                guard c.spec.url != nil else { throw ChatError(.invalidParameter, "url is required", field: "url") }
                guard endpoints(app: c.app).count < configuration.maxEndpointsPerApp else {
                    throw ChatError(.limitExceeded, "an app has at most \(configuration.maxEndpointsPerApp) webhook endpoints", field: "url")
                }
                var new = WebhookEndpoint(id: sharing.shared ? Self.createdID(position: position) : "ep_" + makeID(), app: c.app, url: "", secret: c.generatedSecret ?? "", events: [],
                                          format: .standard, allowPrivateNetwork: false, origin: "api", createdAt: at)
                try Self.apply(c.spec, to: &new, mayGrant: c.operatorAllowsPrivate, granted: false)
                try Self.checkSecret(new)
                e = new
            case .ensure:
                guard let url = c.spec.url else { throw ChatError(.invalidParameter, "url is required", field: "url") }
                let id = Self.configuredID(app: c.app, url: url)
                let existing = registry.withLock { $0.byId[id] }
                var changed = existing ?? WebhookEndpoint(id: id, app: c.app, url: url, secret: c.generatedSecret ?? "", events: [], format: .standard,
                                                          allowPrivateNetwork: false, origin: "config", createdAt: at)
                try Self.apply(c.spec, to: &changed, mayGrant: true, granted: false)
                try Self.checkSecret(changed)
                if changed == existing {
                    let same = changed
                    return Applied(write: nil, done: { .success(.endpoint(same)) })
                }
                e = changed
            case .update:
                var changed = try lookup(app: c.app, id: c.id ?? "")
                let granted = changed.allowPrivateNetwork && (c.operatorAllowsPrivate || (changed.origin == "config" && c.operatorEndpoint))
                try Self.apply(c.spec, to: &changed, mayGrant: c.operatorAllowsPrivate, granted: granted)
                e = changed
            case .rotateSecret:
                var changed = try lookup(app: c.app, id: c.id ?? "")
                guard let secret = c.generatedSecret, StandardWebhooks.isValidSecret(secret) else {
                    throw ChatError(.invalidParameter, "the new secret is not a whsec_ secret", field: "secret")
                }
                changed.previousSecret = changed.secret
                changed.previousSecretExpiresAt = at + configuration.secretGraceMs
                changed.secret = secret
                e = changed
            case .delete:
                let gone = try lookup(app: c.app, id: c.id ?? "")
                registry.withLock { $0.remove(gone.id) }
                return Applied(write: { tx in try WebhookDatabase.deleteEndpoint(gone.id, tx.database) }, done: { [self] in
                    post(.endpointRemoved(gone.id))
                    return .success(.removed)
                })
            }
        } catch {
            return Applied(write: nil, done: { .failure(error) })
        }
        registry.withLock { $0.put(e) }
        return Applied(write: { tx in try WebhookDatabase.save(e, tx.database) }, done: { .success(.endpoint(e)) })
    }

    static func checkSecret(_ e: WebhookEndpoint) throws(ChatError) {
        guard StandardWebhooks.isValidSecret(e.secret) else {
            throw ChatError(.invalidParameter, "secret must be whsec_ followed by the base64 of 16 to 64 bytes", field: "secret")
        }
    }

    /// Queues messages again for an endpoint, chosen from the replica as it is at the entry:
    /// messages not older than the retention (`at` minus it, so when a node pruned does not
    /// matter), not pending for that endpoint, and (for `since`) of the types it wants. `owner`
    /// sends them.
    public func apply(_ r: WebhookReplayChange, at: Int64, owner: UInt64) -> Applied {
        let e: WebhookEndpoint
        do throws(ChatError) {
            e = try lookup(app: r.app, id: r.endpointId)
            try Self.checkReplay(e, messageIds: r.messageIds, since: r.since)
        } catch {
            return Applied(write: nil, done: { .failure(error) })
        }
        let oldest = at - configuration.retentionMs
        let found = Mutex<[WebhookMessage]>([])
        let write: @Sendable (Store.Transaction) throws -> Void = { tx in
            let db = tx.database
            let list = try r.messageIds.map { try WebhookDatabase.messages(app: r.app, ids: $0, db) }
                ?? WebhookDatabase.messages(app: r.app, since: max(r.since ?? 0, oldest), limit: 100_000, db)
            let pending = Set(try String.fetchAll(db, sql: "SELECT messageId FROM webhookDelivery WHERE endpointId = ? AND status = 'pending'",
                                                   arguments: [e.id]))
            let chosen = list.filter { $0.time >= oldest && !pending.contains($0.id) && (r.messageIds != nil || e.wants($0.type)) && e.format.supports($0.type) }
            for m in chosen { try WebhookDatabase.queue(endpointId: e.id, m, at: at, owner: owner, db) }
            found.withLock { $0 = chosen }
        }
        let mine = owner == sharing.run
        return Applied(write: write, done: { [self] in
            let chosen = found.withLock { $0 }
            if mine { post(.deliveries(chosen.map { Queued(endpointId: e.id, message: $0, attempts: 0, dueAt: 0, since: at) })) }
            return .success(.queued(chosen.count))
        })
    }

    /// Records the outcomes of an owner's deliveries; an endpoint that answered 410 is disabled
    /// (here at once, so the next entries stage nothing for it).
    /// `fromAnotherRun`: the entry was appended by another run than this node's: a delivery this
    /// run holds for one of them (taken over when that run's end was seen) is withdrawn.
    public func apply(_ outcomes: [WebhookOutcome], fromAnotherRun: Bool = false) -> Applied {
        var disabled: [WebhookEndpoint] = []
        registry.withLock { r in
            for o in outcomes {
                guard let reason = o.disabledReason, var e = r.byId[o.endpointId], e.enabled else { continue }
                e.enabled = false
                e.disabledReason = reason
                r.put(e)
                disabled.append(e)
            }
        }
        let changed = disabled
        return Applied(write: { tx in
            for e in changed { try WebhookDatabase.save(e, tx.database) }
            for o in outcomes { try WebhookDatabase.finish(o, tx.database) }
        }, done: { [self] in
            if !changed.isEmpty {
                let ids = changed.map(\.id)
                post(.task { s in for id in ids { s.disabling.remove(id) } })
            }
            if fromAnotherRun {
                let keys = outcomes.map { DeliveryKey(endpointId: $0.endpointId, messageId: $0.messageId) }
                post(.task { s in s.withdraw(keys) })
            }
            return .success(.removed)
        })
    }

    /// The pending deliveries of ended runs (`owners`) pass to `run`; if that is this node's run,
    /// they are handed to the delivery thread once that is written (their attempts start again).
    public func adopt(_ owners: [UInt64], by run: UInt64) -> Applied {
        let mine = run == sharing.run
        let found = Mutex<[WebhookDatabase.Pending]>([])
        return Applied(write: { tx in
            let rows = try WebhookDatabase.adopt(owners, by: run, returning: mine, tx.database)
            found.withLock { $0 = rows }
        }, done: { [self] in
            let rows = found.withLock { $0 }
            if !rows.isEmpty {
                logger.warning("cluster: this node sends the pending webhook deliveries of node runs that ended", metadata: ["deliveries": "\(rows.count)"])
                post(.deliveries(rows.map { Queued(endpointId: $0.endpointId, message: $0.message, attempts: 0, dueAt: 0, since: $0.updatedAt) }))
            }
            return .success(.queued(rows.count))
        })
    }

    /// Pending deliveries in this node's store (for `/metrics`): those this run owns and sends,
    /// and those parked for other node runs (a cluster's: their owners send them; a run that
    /// ends leaves its own to a live one). Counted on the store's reader thread; zeros if the
    /// store cannot be read.
    public func pendingCounts(_ completion: @escaping @Sendable (_ owned: Int, _ parked: Int) -> Void) {
        let run = Int64(bitPattern: sharing.run)
        store.read { store in
            let counts = try? store.database.read { db in
                (try Int.fetchOne(db, sql: "SELECT count(*) FROM webhookDelivery WHERE status = 'pending' AND owner = ?", arguments: [run]) ?? 0,
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM webhookDelivery WHERE status = 'pending' AND owner != ?", arguments: [run]) ?? 0)
            }
            completion(counts?.0 ?? 0, counts?.1 ?? 0)
        }
    }

    /// Forgets delivered and dead messages older than `before` (a log entry's time less the
    /// retention), as every node does at the same entries.
    public func prune(before: Int64) -> @Sendable (Store.Transaction) throws -> Void {
        { tx in try WebhookDatabase.prune(before: before, tx.database) }
    }

    // MARK: The owner's side (delivery thread)

    /// Keeps an attempt of one of this node's deliveries for its outcome.
    func remember(_ a: DeliveryAttempt, _ key: DeliveryKey) {
        var h = histories[key] ?? []
        if h.count >= Limits.maxWebhookOutcomeAttempts { h.removeFirst(h.count - Limits.maxWebhookOutcomeAttempts + 1) }
        h.append(a)
        histories[key] = h
    }

    func forgetHistories(of endpointId: String) {
        histories = histories.filter { $0.key.endpointId != endpointId }
    }

    /// One of this node's deliveries ended: its outcome goes to the log (after the attempts that
    /// led to it are written here).
    func outcome(_ key: DeliveryKey, delivered: Bool, attempts: Int, lastStatus: Int, error: String, now: Int64, disabling: String?) {
        let history = (histories.removeValue(forKey: key) ?? []).map {
            WebhookOutcome.Attempt(attempt: $0.attempt, time: $0.time, status: $0.status, error: Self.clip($0.error), durationMs: $0.durationMs)
        }
        outcomes.append(WebhookOutcome(endpointId: key.endpointId, messageId: key.messageId, delivered: delivered, attempts: attempts,
                                       lastStatus: lastStatus, lastError: Self.clip(error), at: now, history: history, disabledReason: disabling))
    }

    /// An error as an outcome carries it: at most `Limits.maxWebhookErrorBytes` bytes.
    static func clip(_ s: String) -> String {
        guard s.utf8.count > Limits.maxWebhookErrorBytes else { return s }
        var out = ""
        for c in s {
            if out.utf8.count + String(c).utf8.count > Limits.maxWebhookErrorBytes { break }
            out.append(c)
        }
        return out
    }
}

/// `v` in lowercase hex, padded with zeros to at least `width` digits.
func hexPadded(_ v: Int64, _ width: Int) -> String {
    let s = String(UInt64(bitPattern: v), radix: 16)
    return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
}

extension WebhookDatabase {
    /// An outcome recorded by the delivery's owner: its end and its attempts, as the owner has
    /// them (a delivery that is gone, with its endpoint, is left gone).
    static func finish(_ o: WebhookOutcome, _ db: Database) throws {
        try db.cachedStatement(sql: """
            UPDATE webhookDelivery SET status = ?, attempts = ?, nextAttemptAt = 0, lastStatus = ?, lastError = ?, updatedAt = ?
            WHERE endpointId = ? AND messageId = ?
            """).execute(arguments: [o.delivered ? DeliveryStatus.delivered.rawValue : DeliveryStatus.dead.rawValue, o.attempts, o.lastStatus,
                                     o.lastError, o.at, o.endpointId, o.messageId])
        guard db.changesCount > 0 else { return }
        try db.execute(sql: "DELETE FROM webhookAttempt WHERE endpointId = ? AND messageId = ?", arguments: [o.endpointId, o.messageId])
        for a in o.history {
            try db.cachedStatement(sql: """
                INSERT INTO webhookAttempt (endpointId, messageId, attempt, time, status, error, durationMs) VALUES (?, ?, ?, ?, ?, ?, ?)
                """).execute(arguments: [o.endpointId, o.messageId, a.attempt, a.time, a.status, a.error, a.durationMs])
        }
    }

    /// Pending deliveries of `owners` pass to `owner`; returned with their messages, oldest first,
    /// when `returning`.
    static func adopt(_ owners: [UInt64], by owner: UInt64, returning: Bool, _ db: Database) throws -> [Pending] {
        guard !owners.isEmpty else { return [] }
        let list = owners.map { String(Int64(bitPattern: $0)) }.joined(separator: ",")
        var rows: [Pending] = []
        if returning {
            rows = try Row.fetchAll(db, sql: """
                SELECT d.endpointId, d.attempts, d.nextAttemptAt, d.updatedAt, m.* FROM webhookDelivery d
                JOIN webhookMessage m ON m.id = d.messageId
                WHERE d.status = 'pending' AND d.owner IN (\(list)) ORDER BY d.sequence
                """).compactMap { row in
                guard let m = (try? MessageRow(row: row))?.message else { return nil }
                return Pending(endpointId: row["endpointId"], message: m, attempts: row["attempts"], nextAttemptAt: row["nextAttemptAt"],
                               updatedAt: row["updatedAt"])
            }
        }
        try db.execute(sql: "UPDATE webhookDelivery SET owner = ? WHERE status = 'pending' AND owner IN (\(list))", arguments: [Int64(bitPattern: owner)])
        return rows
    }
}
