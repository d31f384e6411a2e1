import Chat
import Engine
import Foundation
import HTTP1
import Logging
import Reactor
import Server
import Prometheus
import Store
import Synchronization
import Webhooks
import Wire
import Replication

/// Gateway options (the CLI maps flags and environment variables onto these).
public struct GatewayConfiguration: Sendable {
    /// Where the SQLite database lives (created if missing).
    public var dataDirectory = "./roomcast-data"
    /// Apps given on the command line (`--app KEY:SECRET`); they replace nothing else.
    public var apps: [(key: String, secret: String)] = []
    public var durability = Store.Durability.normal
    /// WebSocket URLs handed out by the NIM-3 address lookup; default derived from host:port.
    public var publicURLs: [String] = []
    /// An expired client token may be refreshed for this long before the connection closes.
    public var tokenGraceSeconds: Int64 = 60
    /// A new WebSocket must send `connect` within this time.
    public var connectTimeoutSeconds: Int64 = 10
    /// Lifetime of tokens issued by `POST /v1/users/{userId}/tokens` when none is asked for.
    public var defaultTokenTTLSeconds: Int64 = 24 * 3600
    /// Resume window per room (BX-1).
    public var resumeMaxEvents = 1024
    public var resumeMaxAgeSeconds: Int64 = 300
    /// Webhook delivery (retry schedule, timeouts, concurrency).
    public var webhooks = WebhookService.Configuration()
    /// Endpoints from the command line (`--webhook`), created or updated at start.
    public var webhookEndpoints: [(app: String, spec: WebhookService.EndpointSpec)] = []
    /// Where `/metrics` reads from (the process's swift-metrics backend); nil serves no metrics.
    public var metrics: PrometheusCollectorRegistry?
    /// Numbers for the rooms NIM's `create` makes (1…2^53-1; injected so tests choose them).
    public var roomNumber: @Sendable () -> Int64 = { Int64.random(in: 1...NIMV1.maxRoomNumber) }
    /// PX-1: new WebSocket connections one client IP may open per second (all apps together).
    public var connectsPerIPPerSecond = Limits.defaultConnectsPerIPPerSecond
    /// PX-3: seconds after a user's last connection closes before `user.offline` is sent (a
    /// connection within them sends nothing); 0 sends it at once.
    public var presenceGraceSeconds: Int64 = 5
    /// Serve the client library and the console from this directory (a checkout's `clients/`)
    /// instead of the copies built in: for working on them without a rebuild.
    public var assetsDirectory: String?
    /// The console's charting library (Debian's libjs-chart.js); nil or missing: no charts.
    public var chartJSPath: String? = "/usr/share/javascript/chart.js/chart.min.js"
    /// Cluster mode (CL-1, CLUSTER.md): the shared log in PostgreSQL; nil runs one node on its
    /// SQLite file.
    public var cluster: ClusterConfiguration?

    public init() {}
}

/// What sessions and REST handlers share. Immutable after start.
final class GatewayContext: Sendable {
    let engine: Engine
    let apps: AppRegistry
    let authenticator: RequestAuthenticator
    let clock: @Sendable () -> Int64
    /// NIM-3 address lookup: the WebSocket URLs handed out (derived from the bound port at start
    /// when none are configured; in a cluster, the live nodes').
    let publicURLs: PublicURLs
    /// This node's own WebSocket URLs (in a cluster, one node's among the lookup's).
    let nodeURLs: PublicURLs
    let tokenGraceMilliseconds: Int64
    let connectTimeoutMilliseconds: Int64
    let defaultTokenTTLSeconds: Int64
    let webhooks: WebhookService
    let roomNumber: @Sendable () -> Int64
    /// Every I/O loop's hub (PX-5: a user's connections, wherever they are).
    let hubs: HubTable
    /// PX-2: answers of requests sent with an Idempotency-Key.
    let idempotency: Idempotency
    /// This node is one of a cluster (CL-1).
    let inCluster: Bool
    /// In a cluster, set once the node has applied the log as it was at start: until then signed
    /// REST calls and WebSocket upgrades are refused with 503 (nil on a single node).
    let catchingUp: ReadyFlag?
    /// Cluster mode: the link to the shared log (membership, this node run's incarnation).
    let cluster: ClusterLink?

    init(engine: Engine, apps: AppRegistry, clock: @escaping @Sendable () -> Int64, configuration: GatewayConfiguration,
         publicURLs: [String], webhooks: WebhookService, authenticator: RequestAuthenticator, hubs: HubTable, idempotency: Idempotency,
         cluster: ClusterLink? = nil) {
        self.cluster = cluster
        self.inCluster = configuration.cluster != nil
        self.catchingUp = configuration.cluster != nil ? ReadyFlag() : nil
        self.hubs = hubs
        self.idempotency = idempotency
        self.engine = engine
        self.webhooks = webhooks
        self.apps = apps
        self.authenticator = authenticator
        self.clock = clock
        self.publicURLs = PublicURLs(publicURLs)
        self.nodeURLs = PublicURLs(publicURLs)
        self.tokenGraceMilliseconds = configuration.tokenGraceSeconds * 1000
        self.connectTimeoutMilliseconds = configuration.connectTimeoutSeconds * 1000
        self.defaultTokenTTLSeconds = configuration.defaultTokenTTLSeconds
        self.roomNumber = configuration.roomNumber
    }
}

/// The gateway without its sockets: apps, the domain restored from the store, webhooks, the
/// engine, the routes, and the feed from the engine to each I/O loop's hub. `Gateway` serves it
/// over the HTTP server; tests drive it in-process (an in-memory store, a manual clock).
final class GatewayCore: Sendable {
    let store: Store
    let webhooks: WebhookService
    /// PX-4: the before-send hook's thread (started and stopped with the webhooks).
    let beforeSend: BeforeSendService
    let engine: Engine
    let context: GatewayContext
    let router: Router
    let hubs: HubTable
    let window: ResumeWindow
    let metrics: MetricsEndpoint
    let publisher: Publisher
    let ready = ReadyFlag()
    /// The development app created on first start, if one was.
    let createdDevelopmentApp: AppRegistry.App?
    /// The kept room-stream events (BX-1) each hub's resume window starts with, and when each
    /// happened.
    private let restored: [Published]
    private let restoredTimes: [Int64]
    /// Cluster mode: the link to the shared log (nil on a single node).
    let cluster: ClusterLink?

    init(configuration: GatewayConfiguration, store: Store, publicURLs: [String], logger: Logger, clock: @escaping @Sendable () -> Int64,
         cluster: ClusterLink? = nil) throws {
        self.store = store
        self.cluster = cluster
        let hubs = HubTable()
        self.hubs = hubs
        // Apps: the configured ones, or a development app made once on first start.
        let now = clock()
        for app in configuration.apps {
            try store.upsertApp(key: app.key, secret: app.secret, origin: "config", settings: AppSettings(), now: now)
        }
        var created: AppRegistry.App?
        let existing = try store.apps()
        if configuration.apps.isEmpty && existing.isEmpty {
            let dev = AppRegistry.App(key: "dev" + randomHex(6), secret: randomHex(24), allowedOrigins: nil)
            try store.upsertApp(key: dev.key, secret: dev.secret, origin: "dev", settings: AppSettings(), now: now)
            created = dev
        }
        createdDevelopmentApp = created
        let registry = AppRegistry()
        // A cluster node serves the apps on its own command line (a replica loaded from another
        // node's snapshot also lists that node's).
        let configured = Set(configuration.apps.map(\.key))
        for row in try store.apps() where cluster == nil || configured.contains(row.key) {
            let settings = (try? JSONDecoder().decode(AppSettings.self, from: Data(row.settings.utf8))) ?? AppSettings()
            registry.set(AppRegistry.App(key: row.key, secret: row.secret,
                                         allowedOrigins: row.allowedOrigins.isEmpty ? nil : row.allowedOrigins.split(separator: "\n").map(String.init),
                                         settings: settings))
        }

        // The domain, restored from the store; in a cluster, made only by applying the log, with
        // ids derived from its entries.
        let ids = IDGenerator(clock: clock)
        let entryIDs = EntryIDs()
        let snapshot = try cluster?.startSnapshot.map { try SnapshotState.decode($0.state) }
        let domain = try snapshot.map { try ChatDomain(image: $0.domain, makeID: { entryIDs.next() }) }
            ?? ChatDomain(makeID: cluster == nil ? { ids.next() } : { entryIDs.next() })
        // In a cluster, the grace is the cluster's (it decides what applying the log does).
        domain.presenceGraceMilliseconds = cluster?.settings.presenceGraceMilliseconds ?? configuration.presenceGraceSeconds * 1000
        if cluster == nil { try store.restore(into: domain, now: now) }

        // Webhooks: endpoints from the command line, then the service (started with the store).
        let apps = registry
        var webhookConfiguration = configuration.webhooks
        if cluster != nil {
            // The replica is in memory: delivered and dead messages are kept an hour, not a week.
            webhookConfiguration.retentionMs = min(webhookConfiguration.retentionMs, Limits.clusterWebhookRetentionMilliseconds)
        }
        // Replay protection survives restarts: accepted nonces are stored, recent ones reloaded. In a
        // cluster every node learns them from the shared log instead (the replica is rebuilt from
        // it at every start), and the engine judges the ones that reach the log alike everywhere.
        let authenticator = cluster == nil
            ? RequestAuthenticator(apps: registry, clock: clock, seen: try store.nonces(since: now - 2 * Signing.windowMilliseconds),
                                   record: { [store] app, nonce, at in store.recordNonce(app: app, nonce: nonce, at: at) })
            : RequestAuthenticator(apps: registry, clock: clock)
        webhooks = WebhookService(store: store, configuration: webhookConfiguration, logger: logger, clock: clock,
                                  random: { Double.random(in: 0..<1) }, makeID: { randomHex(12) }, appSecret: { apps.secret($0) })
        for (app, spec) in configuration.webhookEndpoints {
            guard registry.app(app) != nil else { throw ChatError(.unknownApp, "--webhook names unknown app \(app)", field: "app") }
            // In a cluster the endpoint is made through the log once the node has caught up
            // (`Gateway.catchUp`), so every node has it, with one secret.
            if cluster != nil { try webhooks.configureInCluster(app: app, spec) } else { try webhooks.configure(app: app, spec) }
        }

        // BX-1: room streams continue where they were, and their recent events can be resumed.
        let retention = Engine.Retention(maxEvents: configuration.resumeMaxEvents, maxAgeMilliseconds: configuration.resumeMaxAgeSeconds * 1000)
        let kept = try store.roomEvents(since: now - retention.maxAgeMilliseconds).filter {
            domain.epoch(app: $0.room.app, roomId: $0.room.roomId) == $0.epoch
        }
        restored = kept.map { e in
            // The sender a message was not echoed to is gone with the old run: it goes to the room.
            .deliver(frame: Frames.text(e.payload), audience: e.exceptUsers.isEmpty ? .room(e.room) : .roomExceptUsers(e.room, e.exceptUsers),
                     offset: e.offset, epoch: e.epoch)
        }
        restoredTimes = kept.map(\.at)
        publisher = Publisher()
        let webhooks = self.webhooks
        beforeSend = BeforeSendService(allowsPrivate: { webhooks.operatorAllowsPrivate(app: $0) }, appSecret: { apps.secret($0) },
                                       clock: clock, makeID: { randomHex(12) }, logger: logger)
        engine = try Engine(domain: domain, store: store, publisher: publisher, webhooks: webhooks, beforeSend: beforeSend, clock: clock,
                            retention: retention,
                            positions: try store.lastOffsets(), reload: { [store] in
                                let fresh = ChatDomain(makeID: { ids.next() })
                                fresh.presenceGraceMilliseconds = configuration.presenceGraceSeconds * 1000
                                try store.restore(into: fresh, now: clock())
                                return fresh
                            },
                            cluster: cluster.map { ClusterRole(log: $0, origin: $0.origin, incarnation: UInt64($0.incarnation), ids: entryIDs, logFormat: $0.settings.logFormat) },
                            onAppSettings: { key, settings in
                                // The REST layer's view of an app follows the domain (on every node).
                                guard var entry = registry.app(key) else { return }
                                entry.allowedOrigins = settings.allowedOrigins
                                entry.restCallsPerSecond = settings.restCallsPerSecond
                                entry.clientMessagesPerSecond = settings.clientMessagesPerSecond
                                registry.set(entry)
                            },
                            onNonceLearned: { n, at in authenticator.learn(app: n.app, nonce: n.nonce, at: at) },
                            logger: logger)
        if let snapshot {
            engine.restore(snapshot)
            // The nonces the ledger holds are refused by this node's own checks too.
            for app in snapshot.ledgerNonces { authenticator.learn(app: app.app, nonce: app.nonce, at: app.at) }
        }
        // A failed commit (e.g. a full disk) reloads the durable state instead of stopping.
        let engine = self.engine
        if let cluster {
            // CL-6: this run sends the deliveries it owns; their outcomes go through the log.
            webhooks.replicate(WebhookService.Replication(run: UInt64(cluster.incarnation), report: { engine.webhookOutcomes($0) },
                                                          maxPendingMilliseconds: Limits.clusterWebhookMaxPendingMilliseconds))
        }
        store.onFailure = { engine.storeFailed() }
        context = GatewayContext(engine: engine, apps: registry, clock: clock, configuration: configuration, publicURLs: publicURLs,
                                 webhooks: webhooks, authenticator: authenticator, hubs: hubs,
                                 idempotency: Idempotency(store: store, clock: clock, cluster: cluster == nil ? nil : engine), cluster: cluster)
        window = ResumeWindow(maxEvents: configuration.resumeMaxEvents, maxAgeMilliseconds: configuration.resumeMaxAgeSeconds * 1000,
                              stream: try cluster?.settings.id ?? store.streamID(orCreate: { randomHex(8) }))

        let ready = self.ready
        var routes = Router.Builder()
        let healthy = Response.json(.ok, "{\"status\":\"ok\"}")
        let readyResponse = Response.json(.ok, "{\"status\":\"ready\"}")
        let notReady = Response.json(.serviceUnavailable, JSONWriter.object { w in
            w.field("status", "starting or draining")
            w.field("code", GatewayErrorCode.unavailable.rawValue)
            w.field("message", "the server is starting or shutting down")
        })
        routes.add(.GET, "/healthz", sync: { _ in healthy })
        let readOnly = Response.json(.serviceUnavailable, JSONWriter.object { w in
            w.field("status", "read-only: storage unavailable")
            w.field("code", ChatErrorCode.storageUnavailable.rawValue)
            w.field("message", "a commit failed (e.g. the disk is full): changes are refused until the server can save again")
        })
        if let cluster {
            // CL-5: membership and how far this node has applied the log.
            let engine = self.engine
            let unreachable = Response.json(.serviceUnavailable, JSONWriter.object { w in
                w.field("status", "read-only: the cluster's log (PostgreSQL) cannot be reached")
                w.field("code", ChatErrorCode.storageUnavailable.rawValue)
                w.field("message", "changes are refused until the node reaches PostgreSQL again; reads and connections continue")
            })
            routes.add(.GET, "/readyz", sync: { [store] _ in
                guard ready.isReady else { return notReady }
                guard store.isWritable else { return readOnly }
                guard cluster.isWritable else { return unreachable }
                let (members, head) = cluster.snapshot
                let applied = engine.applied
                return Response.json(.ok, JSONWriter.object { w in
                    w.field("status", "ready")
                    w.key("cluster")
                    w.beginObject()
                    w.field("node", cluster.configuration.nodeID)
                    w.field("incarnation", cluster.incarnation)
                    w.field("leader", cluster.isLeader)
                    w.field("applied", applied)
                    w.field("head", max(head, applied))
                    w.field("lag", max(0, head - applied))
                    w.field("snapshot", cluster.snapshotPosition)
                    w.key("members")
                    w.beginArray()
                    for m in members {
                        w.beginObject()
                        w.field("node", m.id)
                        w.field("urls", m.urls)
                        w.field("applied", m.applied)
                        w.endObject()
                    }
                    w.endArray()
                    w.endObject()
                })
            })
        } else {
            routes.add(.GET, "/readyz", sync: { [store] _ in !ready.isReady ? notReady : store.isWritable ? readyResponse : readOnly })
        }
        let spec = Response.json(.ok, Array(OpenAPIDocument.json.utf8))
        routes.add(.GET, "/openapi.json", sync: { _ in spec })
        let wsSpec = Response.json(.ok, Array(WebSocketDocument.json.utf8))
        routes.add(.GET, "/websocket.json", sync: { _ in wsSpec })
        let metrics = MetricsEndpoint(registry: configuration.metrics, store: store, webhooks: webhooks, beforeSend: beforeSend)
        self.metrics = metrics
        routes.add(.GET, "/metrics", sync: { _ in metrics.render() })
        RESTAPI(context: context).register(&routes)
        let assets = StaticAssets(directory: configuration.assetsDirectory, chartJSPath: configuration.chartJSPath)
        if !assets.assets.contains(where: { $0.path == "/console/" }) {
            logger.warning("the console and client library files were not found: /console/ and /client/ are not served",
                           metadata: ["assets-dir": "\(configuration.assetsDirectory ?? "built in")"])
        }
        assets.register(&routes)
        router = routes.build()
    }

    /// The HTTP server's own refusals (no route, malformed framing, limits), from the error table.
    static let errorRenderer: ErrorRenderer = { refusal in
        .json(refusal.status, ErrorTable.body(httpStatus: refusal.status.code, message: refusal.message))
    }

    /// This loop's hub; call on the loop's thread before it serves.
    @discardableResult
    func startHub(loop: EventLoop, index: Int) -> Hub {
        let hub = Hub(loopIndex: index, incarnation: cluster.map { UInt64($0.incarnation) } ?? 0, loop: loop, resumeWindow: window, clock: context.clock, counters: metrics.fanout)
        hub.restore(restored, at: restoredTimes)
        hubs.set(index, LoopBound(hub, loop: loop))
        return hub
    }

    /// A new session on `hub`'s loop.
    func session(hub: Hub, origin: String?) -> ClientSession {
        ClientSession(context: context, hub: hub, origin: origin, now: context.clock())
    }

    /// Each committed batch reaches every loop's hub once, in commit order.
    func feed(_ loops: [EventLoop]) {
        let hubs = self.hubs
        publisher.deliver = { items in
            for (index, loop) in loops.enumerated() {
                loop.execute {
                    if let hub = hubs.hub(index) { hub.apply(items) }
                }
            }
        }
        let publisher = self.publisher
        store.afterBatch = { publisher.flush() }
    }
}

/// The running gateway: the core served by the HTTP/WebSocket server with the REST API and the
/// client protocol. ARCHITECTURE §2: I/O loops, one engine thread, one store thread.
public final class Gateway: Sendable {
    public let configuration: GatewayConfiguration
    public let server: HTTPServer
    let core: GatewayCore
    private let logger: Logger

    public var store: Store { core.store }
    public var webhooks: WebhookService { core.webhooks }
    public var stream: String { core.window.stream }
    /// The development app created on first start, if one was.
    public var createdDevelopmentApp: AppRegistry.App? { core.createdDevelopmentApp }

    public init(configuration: GatewayConfiguration, server serverConfiguration: ServerConfiguration, logger: Logger,
                clock: @escaping @Sendable () -> Int64 = wallClockMilliseconds) throws {
        self.configuration = configuration
        self.logger = logger
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        let store: Store
        var link: ClusterLink?
        if let cluster = configuration.cluster {
            // The node's replica of the shared log lives in memory: it is rebuilt from the log at
            // every start (CLUSTER.md), PostgreSQL is what is durable.
            store = try Store(inMemory: logger)
            link = try ClusterLink(configuration: cluster, presenceGraceMilliseconds: configuration.presenceGraceSeconds * 1000, logger: logger)
            // A node starts from the cluster's newest snapshot, when there is one: its replica first.
            if let snapshot = link?.startSnapshot { try store.load(image: snapshot.replica) }
        } else {
            store = try Store(path: configuration.dataDirectory + "/roomcast.sqlite", durability: configuration.durability, logger: logger)
        }
        let core = try GatewayCore(configuration: configuration, store: store, publicURLs: configuration.publicURLs, logger: logger, clock: clock,
                                   cluster: link)
        self.core = core
        let hubs = core.hubs
        let connects = ConnectLimiter(perSecond: configuration.connectsPerIPPerSecond)
        server = try HTTPServer(
            configuration: serverConfiguration, router: core.router,
            upgradeHandler: { head, peer, loopIndex in
                guard let hub = hubs.hub(loopIndex), core.context.catchingUp?.isReady != false else {
                    return .reject(.json(.serviceUnavailable, ErrorTable.body(GatewayError(.unavailable, "starting"))))
                }
                guard connects.take(peer.host, now: clock()) else {
                    var refusal = Response.json(.tooManyRequests, ErrorTable.body(ChatError(.rateLimited, "too many new connections from this address", field: nil)))
                    refusal.headers.add("Retry-After", String(Limits.rateLimitRetryAfterSeconds))
                    return .reject(refusal)
                }
                return .accept(core.session(hub: hub, origin: head.headers["origin"]))
            },
            errorRenderer: GatewayCore.errorRenderer,
            onLoopStart: { loop, index in
                let hub = core.startHub(loop: loop, index: index)
                loop.scheduleRepeating(every: .seconds(1)) { hub.tick() }
                loop.scheduleRepeating(every: .seconds(30)) { hub.sweepRings() }
            },
            logger: logger)
        core.metrics.attach(server.metrics)
        core.feed(server.loops)
    }

    /// Starts the store writer, the engine and the server; returns once they serve.
    public func start() throws {
        store.start()
        try webhooks.start(resumePending: core.cluster == nil)
        core.beforeSend.start()
        core.engine.start()
        try server.start()
        let own = configuration.publicURLs.isEmpty ? [Self.derivedURL(server.configuration, port: server.port, logger: logger)] : configuration.publicURLs
        core.context.nodeURLs.set(own)
        core.context.publicURLs.set(own)
        if let link = core.cluster {
            let lookup = core.context.publicURLs
            link.start(engine: core.engine, onMembers: { urls in if !urls.isEmpty { lookup.set(urls) } })
            try catchUp(link)
            core.context.catchingUp?.set(true)
            // CL-5: announced (and so handed out by the address lookup) once it can serve.
            link.setOwnURLs(own)
        }
        core.ready.set(true)
        logger.info("gateway ready", metadata: ["apps": "\(core.context.apps.all.map(\.key))", "data": "\(configuration.dataDirectory)"])
    }

    /// A cluster node serves once it has applied the log as it was at start and the apps it was
    /// given exist in the cluster.
    private func catchUp(_ link: ClusterLink) throws {
        let engine = core.engine
        let deadline = wallClockMilliseconds() + 300_000
        func wait(_ what: String, until done: () -> Bool) throws {
            while !done() {
                guard wallClockMilliseconds() < deadline else { throw GatewayError(.unavailable, "cluster: gave up waiting for \(what)") }
                usleep(5_000)
            }
        }
        try wait("the log to be applied") { engine.applied >= link.headAtStart }
        let keys = configuration.apps.map(\.key)
        var asked: Int64 = 0
        for key in keys {
            try wait("app \(key)") {
                // Asked again now and then: an append refused while PostgreSQL was away is not retried.
                if wallClockMilliseconds() - asked > 2_000 {
                    asked = wallClockMilliseconds()
                    engine.ensureApps(keys)
                }
                let found = Mutex<Bool?>(nil)
                engine.query(.appSettings(app: key)) { result in found.withLock { if case .success = result { $0 = true } else { $0 = false } } }
                while found.withLock({ $0 }) == nil { usleep(1_000) }
                return found.withLock { $0 } == true
            }
        }
        // CL-6: the endpoints of the command line exist in the cluster as it gives them. Asked
        // again now and then (an append refused while PostgreSQL was away is not retried); after
        // three asks an endpoint that exists but differs is left as the cluster has it (another
        // node's command line gives it otherwise): the nodes do not take turns changing it.
        let hooks = configuration.webhookEndpoints
        let webhooks = self.webhooks
        asked = 0
        var asks = 0
        try wait("the --webhook endpoints") {
            let missing = hooks.filter { h in
                do {
                    return try webhooks.ensureChange(app: h.app, h.spec) != nil
                } catch {
                    return false // refused at start (`configureInCluster`): not reached
                }
            }
            if missing.isEmpty { return true }
            let absent = missing.filter { h in webhooks.endpoint(app: h.app, id: WebhookService.configuredID(app: h.app, url: h.spec.url ?? "")) == nil }
            if absent.isEmpty && asks >= 3 {
                logger.warning("cluster: a --webhook endpoint differs from this node's command line; another node's gives it otherwise: give every node the same --webhook list",
                               metadata: ["endpoints": "\(missing.map { WebhookService.configuredID(app: $0.app, url: $0.spec.url ?? "") })"])
                return true
            }
            if wallClockMilliseconds() - asked > 2_000 {
                asked = wallClockMilliseconds()
                asks += 1
                engine.ensureWebhookEndpoints(missing)
            }
            return false
        }
        logger.info("cluster: caught up", metadata: ["node": "\(link.configuration.nodeID)", "applied": "\(engine.applied)"])
    }

    /// The URL clients reach this server at when no `--public-url` is given: the bound port (not
    /// the configured 0), and for a wildcard listener the loopback address, with a warning.
    static func derivedURL(_ c: ServerConfiguration, port: UInt16, logger: Logger) -> String {
        let path = c.webSocket.path ?? "/ws"
        var host = c.host
        if ["0.0.0.0", "::", "[::]", ""].contains(host) {
            logger.warning("listening on a wildcard address without --public-url: the address lookup hands out the loopback address; set --public-url to what clients can reach")
            host = host.contains(":") ? "[::1]" : "127.0.0.1"
        } else if host.contains(":") && !host.hasPrefix("[") {
            host = "[\(host)]"
        }
        return "ws://\(host):\(port)\(path)"
    }

    public var port: UInt16 { server.port }
    public var apps: [AppRegistry.App] { core.context.apps.all }

    /// Drains: not ready, stop accepting, close WebSockets with 1001, let the engine finish what
    /// the closing connections caused, commit it, stop.
    public func shutdown() {
        core.ready.set(false)
        // No longer handed out by the other nodes' address lookup while it drains.
        core.cluster?.setOwnURLs([])
        server.shutdown()
        core.beforeSend.stop()
        if let link = core.cluster {
            // CL-6: no attempt starts any more, and what finished is in the log before this run
            // leaves (its unfinished deliveries pass to another run, which sends them).
            webhooks.stop()
            core.engine.settleWebhookOutcomes(timeoutMilliseconds: 3_000)
            // What the drained calls left for the log (their nonces, kept answers) is appended
            // before this run ends, so the other nodes replay those answers rather than call
            // them lost.
            core.engine.barrier()
            link.flush(milliseconds: 3_000)
        }
        core.cluster?.stop()
        core.engine.stop()
        if core.cluster == nil { webhooks.stop() }
        store.stop()
    }
}

/// The WebSocket URLs the address lookup hands out; set once the port is bound.
final class PublicURLs: Sendable {
    private let urls: Mutex<[String]>
    init(_ urls: [String]) { self.urls = Mutex(urls) }
    var value: [String] { urls.withLock { $0 } }
    func set(_ v: [String]) { urls.withLock { $0 = v } }
}

/// PX-1: new WebSocket connections per client address, in token buckets shared by every loop.
/// At most `maxAddresses` are remembered: past that, the full (idle) ones are forgotten, and if
/// that is not enough all are (a flood from that many addresses is not one client's).
final class ConnectLimiter: Sendable {
    let perSecond: Int
    static let maxAddresses = 65_536
    private let buckets = Mutex<[String: TokenBucket]>([:])

    init(perSecond: Int) { self.perSecond = perSecond }

    var addressCount: Int { buckets.withLock { $0.count } }

    func take(_ address: String, now: Int64) -> Bool {
        buckets.withLock { b in
            if b.count >= Self.maxAddresses {
                b = b.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
                if b.count >= Self.maxAddresses { b = [:] }
            }
            var bucket = b[address] ?? TokenBucket(rate: perSecond, now: now)
            let ok = bucket.take(now: now)
            b[address] = bucket
            return ok
        }
    }
}

/// Whether /readyz says ready.
final class ReadyFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isReady: Bool { value.load(ordering: .relaxed) }
    func set(_ v: Bool) { value.store(v, ordering: .relaxed) }
}

/// Per-loop hubs, looked up from the upgrade handler and the publisher.
final class HubTable: Sendable {
    private let table = Mutex<[Int: LoopBound<Hub>]>([:])

    func set(_ index: Int, _ hub: LoopBound<Hub>) { table.withLock { $0[index] = hub } }

    /// The hub of `index`; call on that loop's thread.
    func hub(_ index: Int) -> Hub? { table.withLock { $0[index] }?.value }

    /// Runs `body` on every hub, each on its own loop, and hands the results to `done` (on the
    /// loop that finishes last).
    func gather<T: Sendable>(_ body: @escaping @Sendable (Hub) -> T, done: @escaping @Sendable ([T]) -> Void) {
        let hubs = table.withLock { Array($0.values) }
        guard !hubs.isEmpty else { return done([]) }
        let collected = Mutex<(results: [T], left: Int)>(([], hubs.count))
        for bound in hubs {
            bound.loop.execute {
                let result = body(bound.value)
                let all: [T]? = collected.withLock { c in
                    c.results.append(result)
                    c.left -= 1
                    return c.left == 0 ? c.results : nil
                }
                if let all { done(all) }
            }
        }
    }
}
