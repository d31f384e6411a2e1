import Chat
import Crypto
import Foundation
import GRDB
import Replication
import Store

/// Managing endpoints (WH-1), the delivery log and replays (WH-4). Changes are answered once durable.
extension WebhookService {
    public typealias Completion<T> = @Sendable (Result<T, ChatError>) -> Void

    /// What a create or update asks for; nil fields are left as they are.
    /// (Also the body of `POST` and `PATCH /v1/webhooks`; in a cluster it travels in the log.)
    public typealias EndpointSpec = WebhookEndpointSpec

    // MARK: Who may reach private addresses (WH-5)

    /// Whether the operator lets `app`'s endpoints reach loopback, private and link-local addresses
    /// (`--webhook-allow-private`). An app cannot grant this to itself.
    public func operatorAllowsPrivate(app: String) -> Bool {
        configuration.privateNetworkApps.contains(app) || configuration.privateNetworkApps.contains("*")
    }

    /// Whether an endpoint may reach private addresses: it asks for it (`allowPrivateNetwork`) and
    /// the operator allowed it, by configuring this endpoint on the command line in this run or by
    /// listing its app. What the store holds is not enough (an endpoint an app created before the
    /// operator's list existed, or one the command line no longer configures, does not count).
    public func mayReachPrivate(_ e: WebhookEndpoint) -> Bool {
        guard e.allowPrivateNetwork else { return false }
        return operatorAllowsPrivate(app: e.app) || (e.origin == "config" && operatorEndpoints.withLock { $0.contains(e.id) })
    }

    /// Applies a spec to an endpoint, refusing bad input with the field's name. `byOperator`: the
    /// command line, which may let any endpoint reach private addresses; through the API only apps
    /// the operator listed may (403 on `allowPrivateNetwork` otherwise).
    func apply(_ spec: EndpointSpec, to e: inout WebhookEndpoint, byOperator: Bool) throws(ChatError) {
        try Self.apply(spec, to: &e, mayGrant: byOperator || operatorAllowsPrivate(app: e.app), granted: mayReachPrivate(e))
    }

    /// `apply` with the operator's decisions given: `mayGrant`, the caller may let the endpoint
    /// reach private addresses; `granted`, the endpoint reaches them now. Depends on nothing else
    /// (a cluster's nodes apply a change with the decisions its receiving node made).
    static func apply(_ spec: EndpointSpec, to e: inout WebhookEndpoint, mayGrant: Bool, granted: Bool) throws(ChatError) {
        if let v = spec.allowPrivateNetwork {
            guard !v || mayGrant || granted else {
                throw ChatError(.permissionDenied,
                                "only the server's operator can let an app's webhooks reach loopback, private and link-local addresses "
                                    + "(--webhook-allow-private); app \(e.app) is not allowed", field: "allowPrivateNetwork")
            }
            e.allowPrivateNetwork = v
        }
        if let url = spec.url {
            // An endpoint the command line lets reach private addresses keeps the URL the operator gave.
            guard url == e.url || mayGrant || !(granted && e.allowPrivateNetwork) else {
                throw ChatError(.permissionDenied, "this endpoint reaches private addresses by the operator's --webhook; its url changes only there",
                                field: "url")
            }
            e.url = url
        }
        do {
            e.url = try WebhookURL(e.url, allowPrivate: e.allowPrivateNetwork && (mayGrant || granted)).string
        } catch {
            throw ChatError(.invalidParameter, error.description, field: "url")
        }
        if let secret = spec.secret {
            guard StandardWebhooks.isValidSecret(secret) else {
                throw ChatError(.invalidParameter, "secret must be whsec_ followed by the base64 of 16 to 64 bytes", field: "secret")
            }
            e.secret = secret
        }
        if let events = spec.events {
            var types: [WebhookEventType] = []
            for name in events where name != "*" {
                guard let t = WebhookEventType(rawValue: name) else {
                    throw ChatError(.invalidParameter, "unknown event type \(name); use * or " + WebhookEventType.allCases.map(\.rawValue).joined(separator: ", "),
                                    field: "events")
                }
                if !types.contains(t) { types.append(t) }
            }
            e.events = events.contains("*") ? [] : types
        }
        if let f = spec.format {
            guard let format = WebhookFormat(rawValue: f) else { throw ChatError(.invalidParameter, "format must be standard, rongcloud or nim", field: "format") }
            e.format = format
        }
        if let enabled = spec.enabled {
            e.enabled = enabled
            if enabled { e.disabledReason = "" } else if e.disabledReason.isEmpty { e.disabledReason = "disabled through the API" }
        }
    }

    public func endpoints(app: String) -> [WebhookEndpoint] {
        registry.withLock { r in (r.byApp[app] ?? []).compactMap { r.byId[$0] } }
    }

    public func endpoint(app: String, id: String) -> WebhookEndpoint? {
        registry.withLock { r in r.byId[id].flatMap { $0.app == app ? $0 : nil } }
    }

    func lookup(app: String, id: String) throws(ChatError) -> WebhookEndpoint {
        guard let e = endpoint(app: app, id: id) else { throw ChatError(.notFound, "no webhook endpoint \(id)", field: "id") }
        return e
    }

    private func saveThen(_ e: WebhookEndpoint, _ completion: @escaping Completion<WebhookEndpoint>) {
        store.submit(Store.Commit(mutations: [], extra: { tx in try WebhookDatabase.save(e, tx.database) }, onDurable: { [self] in
            registry.withLock { $0.put(e) }
            completion(.success(e))
        }))
    }

    public func createEndpoint(app: String, _ spec: EndpointSpec, origin: String = "api", completion: @escaping Completion<WebhookEndpoint>) {
        do throws(ChatError) {
            guard spec.url != nil else { throw ChatError(.invalidParameter, "url is required", field: "url") }
            guard endpoints(app: app).count < configuration.maxEndpointsPerApp else {
                throw ChatError(.limitExceeded, "an app has at most \(configuration.maxEndpointsPerApp) webhook endpoints", field: "url")
            }
            var e = WebhookEndpoint(id: "ep_" + makeID(), app: app, url: "", secret: StandardWebhooks.makeSecret { UInt8.random(in: 0...255) },
                                    events: [], format: .standard, allowPrivateNetwork: false, origin: origin, createdAt: clock())
            try apply(spec, to: &e, byOperator: false)
            saveThen(e, completion)
        } catch {
            completion(.failure(error))
        }
    }

    public func updateEndpoint(app: String, id: String, _ spec: EndpointSpec, completion: @escaping Completion<WebhookEndpoint>) {
        do throws(ChatError) {
            var e = try lookup(app: app, id: id)
            try apply(spec, to: &e, byOperator: false)
            saveThen(e, completion)
        } catch {
            completion(.failure(error))
        }
    }

    /// A new secret; the previous one keeps signing (a second signature) for `secretGraceMs`.
    public func rotateSecret(app: String, id: String, completion: @escaping Completion<WebhookEndpoint>) {
        do throws(ChatError) {
            var e = try lookup(app: app, id: id)
            e.previousSecret = e.secret
            e.previousSecretExpiresAt = clock() + configuration.secretGraceMs
            e.secret = StandardWebhooks.makeSecret { UInt8.random(in: 0...255) }
            saveThen(e, completion)
        } catch {
            completion(.failure(error))
        }
    }

    public func deleteEndpoint(app: String, id: String, completion: @escaping Completion<Void>) {
        do throws(ChatError) {
            let e = try lookup(app: app, id: id)
            registry.withLock { $0.remove(e.id) }
            store.submit(Store.Commit(mutations: [], extra: { tx in try WebhookDatabase.deleteEndpoint(e.id, tx.database) }, onDurable: { [self] in
                post(.endpointRemoved(e.id))
                completion(.success(()))
            }))
        } catch {
            completion(.failure(error))
        }
    }

    /// Creates or updates an endpoint from the command line (id derived from app and URL, so a
    /// restart finds the same endpoint and its deliveries). Runs before `start`. The operator's own:
    /// it may reach private addresses with `allowPrivateNetwork` (`allow-private`).
    public func configure(app: String, _ spec: EndpointSpec) throws {
        guard let url = spec.url else { throw ChatError(.invalidParameter, "url is required", field: "url") }
        let id = Self.configuredID(app: app, url: url)
        let existing = try store.database.read { db in try WebhookDatabase.endpoints(db) }.first { $0.id == id }
        var e = existing ?? WebhookEndpoint(id: id, app: app, url: url, secret: StandardWebhooks.makeSecret { UInt8.random(in: 0...255) },
                                            events: [], format: .standard, allowPrivateNetwork: false, origin: "config", createdAt: clock())
        try apply(spec, to: &e, byOperator: true)
        let endpoint = e
        try store.database.write { db in try WebhookDatabase.save(endpoint, db) }
        operatorEndpoints.withLock { _ = $0.insert(id) }
    }

    /// The id of an endpoint the command line gives: derived from its app and URL, so a restart
    /// (and, in a cluster, every node) finds the same endpoint.
    public static func configuredID(app: String, url: String) -> String {
        "cfg_" + String(hex(SHA256.hash(data: Array((app + "\n" + url).utf8))).prefix(20))
    }

    // MARK: The delivery log and replays

    public struct DeliveryPage: Sendable {
        public var deliveries: [DeliveryRecord]
        /// Pass as `before` for the next (older) page; nil at the end.
        public var next: Int64?
    }

    /// The newest deliveries of an endpoint, each with its attempts (read on the delivery thread).
    public func deliveries(app: String, id: String, status: DeliveryStatus?, before: Int64?, limit: Int,
                           completion: @escaping Completion<DeliveryPage>) {
        do throws(ChatError) {
            _ = try lookup(app: app, id: id)
            guard limit >= 1 && limit <= 100 else { throw ChatError(.invalidParameter, "limit must be 1 to 100", field: "limit") }
            post(.task { s in
                do {
                    let rows = try s.store.database.read { db in
                        try WebhookDatabase.deliveries(endpointId: id, status: status, beforeSequence: before, limit: limit, db)
                    }
                    completion(.success(DeliveryPage(deliveries: rows.map(\.0), next: rows.count == limit ? rows.last?.1 : nil)))
                } catch {
                    completion(.failure(ChatError(.invalidParameter, "the delivery log could not be read", field: "id")))
                }
            })
        } catch {
            completion(.failure(error))
        }
    }

    /// Re-sends messages to an endpoint: the given ids, or every message since `since` (ms) that the
    /// endpoint wants. Messages already pending are left alone. Answers how many were queued.
    public func replay(app: String, id: String, messageIds: [String]?, since: Int64?, completion: @escaping Completion<Int>) {
        do throws(ChatError) {
            let e = try lookup(app: app, id: id)
            guard e.enabled else { throw ChatError(.permissionDenied, "the endpoint is disabled; enable it first", field: "id") }
            guard (messageIds == nil) != (since == nil) else {
                throw ChatError(.invalidParameter, "give messageIds or since, not both", field: "messageIds")
            }
            if let ids = messageIds, ids.isEmpty || ids.count > 1000 {
                throw ChatError(.invalidParameter, "messageIds holds 1 to 1000 ids", field: "messageIds")
            }
            post(.task { s in
                do {
                    let found = try s.store.database.read { db -> [WebhookMessage] in
                        let list = try messageIds.map { try WebhookDatabase.messages(app: app, ids: $0, db) }
                            ?? WebhookDatabase.messages(app: app, since: since ?? 0, limit: 100_000, db)
                        let pending = Set(try String.fetchAll(db, sql: "SELECT messageId FROM webhookDelivery WHERE endpointId = ? AND status = 'pending'",
                                                               arguments: [id]))
                        return list.filter { !pending.contains($0.id) && (messageIds != nil || e.wants($0.type)) && e.format.supports($0.type) }
                    }
                    let now = s.clock()
                    s.store.submit(Store.Commit(mutations: [], extra: { tx in
                        for m in found { try WebhookDatabase.queue(endpointId: id, m, at: now, tx.database) }
                    }, onDurable: {
                        s.post(.deliveries(found.map { Queued(endpointId: id, message: $0, attempts: 0, dueAt: 0, since: now) }))
                        completion(.success(found.count))
                    }))
                } catch {
                    completion(.failure(ChatError(.invalidParameter, "the messages could not be read", field: "id")))
                }
            })
        } catch {
            completion(.failure(error))
        }
    }
}
