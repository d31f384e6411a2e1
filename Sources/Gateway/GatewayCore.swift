import Chat
import ClusterNode
import Engine
import Foundation
import HTTP1
import Logging
import Reactor
import Replication
import Server
import Store
import Synchronization
import Webhooks
import Wire

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
    /// Every I/O loop's hub.
    let hubs: HubTable
    /// PX-2: answers of requests sent with an Idempotency-Key.
    let idempotency: Idempotency
    /// Set once the node has caught up with its log (`Engine.catchUp`): until then signed REST
    /// calls and WebSocket upgrades are refused with 503.
    let caughtUp = ReadyFlag()
    /// The nodes that follow the log: this one alone, or a cluster's members.
    let role: any NodeRole
    /// PX-1: new client connections (WebSocket upgrades, event streams, poll sessions) per IP.
    let connects: ConnectLimiter
    /// TR-5: the node's room aliases, shared by its I/O loops.
    let roomAliases = RoomAliases()

    init(engine: Engine, apps: AppRegistry, clock: @escaping @Sendable () -> Int64, configuration: GatewayConfiguration,
         publicURLs: PublicURLs, nodeURLs: PublicURLs, webhooks: WebhookService, authenticator: RequestAuthenticator, hubs: HubTable,
         idempotency: Idempotency, role: any NodeRole) {
        self.role = role
        self.hubs = hubs
        self.idempotency = idempotency
        self.engine = engine
        self.webhooks = webhooks
        self.apps = apps
        self.authenticator = authenticator
        self.clock = clock
        self.publicURLs = publicURLs
        self.nodeURLs = nodeURLs
        self.tokenGraceMilliseconds = configuration.tokenGraceSeconds * 1000
        self.connectTimeoutMilliseconds = configuration.connectTimeoutSeconds * 1000
        self.defaultTokenTTLSeconds = configuration.defaultTokenTTLSeconds
        self.roomNumber = configuration.roomNumber
        self.connects = ConnectLimiter(perSecond: configuration.connectsPerIPPerSecond)
    }
}

/// The gateway without its sockets: apps, the domain, webhooks, the engine and its log, the
/// routes, and the feed from the engine to each I/O loop's hub. Built whole by one factory per
/// kind of log (`singleNode`, `clusterNode`): every part is given its dependencies when it is
/// made, none afterwards. `Gateway` serves it over the HTTP server; tests drive it in-process (an
/// in-memory store, a manual clock).
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
    let ready = ReadyFlag()
    let role: any NodeRole
    let logger: Logger
    /// QS-3: each hub's drop marks.
    let marks: DropMarks
    /// The development app created on first start, if one was.
    let createdDevelopmentApp: AppRegistry.App?
    /// The kept room-stream events (BX-1) each hub's resume window starts with, and when each
    /// happened.
    private let restored: [Published]
    private let restoredTimes: [Int64]
    /// The command line's webhook endpoints, made through the log when the node catches up.
    private let configuredEndpoints: [(app: String, spec: WebhookService.EndpointSpec)]
    private let configuredApps: [String]
    /// OP-1, OP-2: the apps watcher and the operator API.
    let operations: Operations

    /// Where a single node keeps its data.
    enum Storage {
        case file(path: String, durability: Store.Durability)
        /// In memory, for in-process tests.
        case memory
    }

    // MARK: Factories

    /// A single node: its SQLite store is its durable state, its log is local (`LocalLog`).
    static func singleNode(configuration: GatewayConfiguration, storage: Storage, publicURLs: [String], logger: Logger,
                           clock: @escaping @Sendable () -> Int64, serverMetrics: ServerMetrics? = nil) throws -> GatewayCore {
        let hubs = HubTable()
        let publisher = Publisher(sink: hubs)
        let store: Store
        switch storage {
        case .file(let path, let durability): store = try Store(path: path, durability: durability, logger: logger, afterBatch: publisher.flush)
        case .memory: store = try Store(inMemory: logger, afterBatch: publisher.flush)
        }
        let now = clock()
        let created = try ensureApps(configuration, store: store, now: now, makeDevelopmentApp: true)
        let registry = try AppRegistry.load(store, only: nil)
        let ids = IDGenerator(clock: clock)
        let grace = configuration.presenceGraceSeconds * 1000
        let domain = ChatDomain(makeID: { ids.next() })
        domain.presenceGraceMilliseconds = grace
        try store.restore(into: domain, now: now)
        // Replay protection survives restarts: accepted nonces are stored, recent ones reloaded.
        let authenticator = RequestAuthenticator(apps: registry, clock: clock, seen: try store.nonces(since: now - 2 * Signing.windowMilliseconds),
                                                 record: { [store] app, nonce, at in store.recordNonce(app: app, nonce: nonce, at: at) })
        let webhooks = makeWebhooks(configuration, configuration.webhooks, store: store, registry: registry, sharing: .local, logger: logger, clock: clock)
        let log = LocalLog(store: store, clock: clock, ids: ids)
        let own = PublicURLs(publicURLs)
        return try GatewayCore(configuration: configuration, store: store, log: log, publisher: publisher, hubs: hubs, domain: domain,
                               registry: registry, authenticator: authenticator, webhooks: webhooks, createdDevelopmentApp: created,
                               stream: try store.streamID(orCreate: { randomHex(8) }), publicURLs: PublicURLs(publicURLs), ownURLs: own,
                               serverMetrics: serverMetrics,
                               reload: {
                                   let fresh = ChatDomain(makeID: { ids.next() })
                                   fresh.presenceGraceMilliseconds = grace
                                   try store.restore(into: fresh, now: clock())
                                   return fresh
                               },
                               role: { _ in SingleNode(ownURLs: own) }, snapshot: nil, logger: logger, clock: clock)
    }

    /// A member of a cluster on PostgreSQL (CL-1): its log is the shared one (`ClusterLink`, which
    /// connects and registers this node run first); its store is a replica in its data directory
    /// made only by applying the log, from the cluster's newest snapshot when there is one.
    static func clusterNode(configuration: GatewayConfiguration, cluster: ClusterConfiguration, publicURLs: [String], logger: Logger,
                            clock: @escaping @Sendable () -> Int64, serverMetrics: ServerMetrics? = nil) throws -> GatewayCore {
        // CL-9: the newest snapshot's replica goes straight to a file beside the replica's.
        let replicaPath = configuration.dataDirectory + "/" + DataDirectory.replicaName
        let link = try ClusterLink(configuration: cluster, presenceGraceMilliseconds: configuration.presenceGraceSeconds * 1000, logger: logger,
                                   replica: replicaPath)
        let hubs = HubTable()
        let publisher = Publisher(sink: hubs)
        // CL-9: the replica lives in the node's data directory, so it costs the node SQLite's page
        // cache rather than its whole size in memory. PostgreSQL is what is durable: the replica
        // is made anew from the log (from the newest snapshot's image when there is one), unless
        // the last run stopped cleanly and the log still holds its position (it goes on from there).
        let store = try Store.replica(path: replicaPath, imageFile: link.startReplicaFile, keepExisting: link.start.keepsReplica, logger: logger,
                                      afterBatch: publisher.flush)
        _ = try ensureApps(configuration, store: store, now: clock(), makeDevelopmentApp: false)
        // A node serves the apps on its own command line (a replica loaded from another node's
        // snapshot also lists that node's).
        let registry = try AppRegistry.load(store, only: Set(configuration.apps.map(\.key)))
        let snapshot = link.startState
        let ids = link.traits.ids
        let domain = try snapshot.map { try ChatDomain(image: $0.domain, makeID: { ids.next() }) } ?? ChatDomain(makeID: { ids.next() })
        // The grace is the cluster's (it decides what applying the log does).
        domain.presenceGraceMilliseconds = link.settings.presenceGraceMilliseconds
        // Nonces are learned from the shared log (the replica is rebuilt from it at every start),
        // and the engine judges the ones that reach the log alike everywhere.
        let authenticator = RequestAuthenticator(apps: registry, clock: clock)
        var webhookConfiguration = configuration.webhooks
        // Delivered and dead messages are kept an hour, not a week: every node's replica holds
        // every node's outbox.
        webhookConfiguration.retentionMs = min(webhookConfiguration.retentionMs, Limits.clusterWebhookRetentionMilliseconds)
        let webhooks = makeWebhooks(configuration, webhookConfiguration, store: store, registry: registry, sharing: .cluster(run: link.incarnation),
                                    logger: logger, clock: clock)
        // The address lookup hands out the live nodes' URLs (CL-5); this node's own are its own.
        let lookup = PublicURLs(publicURLs), own = PublicURLs(publicURLs)
        let core = try GatewayCore(configuration: configuration, store: store, log: link, publisher: publisher, hubs: hubs, domain: domain,
                                   registry: registry, authenticator: authenticator, webhooks: webhooks, createdDevelopmentApp: nil,
                                   stream: link.settings.id, publicURLs: lookup, ownURLs: own, serverMetrics: serverMetrics,
                                   reload: { throw GatewayError(.unavailable, "a cluster node's replica is rebuilt from the log, not reloaded") },
                                   role: { engine in
                                       ClusterMember(link: link, replicator: ClusterReplicator(link: link, engine: engine, halt: Halt(logger: logger), onMembers: { live in
                                           if !live.isEmpty { lookup.set(live) }
                                       }), engine: engine, store: store, ownURLs: own)
                                   },
                                   snapshot: snapshot, logger: logger, clock: clock)
        return core
    }

    /// The apps of the command line in the store (they replace nothing else), and on a single node
    /// a development app made once on first start when there are none.
    private static func ensureApps(_ configuration: GatewayConfiguration, store: Store, now: Int64, makeDevelopmentApp: Bool) throws -> AppRegistry.App? {
        for app in configuration.apps {
            try store.upsertApp(key: app.key, secret: app.secret, origin: "config", settings: AppSettings(), now: now)
        }
        guard makeDevelopmentApp, configuration.apps.isEmpty, try store.apps().isEmpty else { return nil }
        let dev = AppRegistry.App(key: "dev" + randomHex(6), secret: randomHex(24), allowedOrigins: nil)
        try store.upsertApp(key: dev.key, secret: dev.secret, origin: "dev", settings: AppSettings(), now: now)
        return dev
    }

    private static func makeWebhooks(_ configuration: GatewayConfiguration, _ webhookConfiguration: WebhookService.Configuration, store: Store,
                                     registry: AppRegistry, sharing: WebhookService.Sharing, logger: Logger,
                                     clock: @escaping @Sendable () -> Int64) -> WebhookService {
        WebhookService(store: store, configuration: webhookConfiguration, logger: logger, clock: clock, random: { Double.random(in: 0..<1) },
                       makeID: { randomHex(12) }, appSecret: { registry.secret($0) }, sharing: sharing)
    }

    // MARK: Assembly

    private init(configuration: GatewayConfiguration, store: Store, log: any ReplicatedLog, publisher: Publisher, hubs: HubTable,
                 domain: ChatDomain, registry: AppRegistry, authenticator: RequestAuthenticator, webhooks: WebhookService,
                 createdDevelopmentApp: AppRegistry.App?, stream: String, publicURLs: PublicURLs, ownURLs: PublicURLs, serverMetrics: ServerMetrics?,
                 reload: @escaping @Sendable () throws -> ChatDomain, role: (Engine) -> any NodeRole, snapshot: SnapshotState?,
                 logger: Logger, clock: @escaping @Sendable () -> Int64) throws {
        self.store = store
        self.hubs = hubs
        self.webhooks = webhooks
        self.logger = logger
        self.createdDevelopmentApp = createdDevelopmentApp
        marks = DropMarks(soft: configuration.outboundSoftBytes)
        configuredApps = configuration.apps.map(\.key)
        // The command line's endpoints are checked now and made through the log at catch-up, so
        // every node of a cluster has them, with one secret.
        for (app, spec) in configuration.webhookEndpoints {
            guard registry.app(app) != nil else { throw ChatError(.unknownApp, "--webhook names unknown app \(app)", field: "app") }
            try webhooks.acceptConfigured(app: app, spec)
        }
        configuredEndpoints = configuration.webhookEndpoints

        // BX-1: room streams continue where they were, and their recent events can be resumed.
        let retention = Engine.Retention(maxEvents: configuration.resumeMaxEvents, maxAgeMilliseconds: configuration.resumeMaxAgeSeconds * 1000)
        let kept = try store.roomEvents(since: clock() - retention.maxAgeMilliseconds).filter {
            domain.epoch(app: $0.room.app, roomId: $0.room.roomId) == $0.epoch
        }
        restored = kept.map { e in
            // The sender a message was not echoed to is gone with the old run: it goes to the room.
            .deliver(frame: Frames.text(e.payload), audience: restoredAudience(e), offset: e.offset, epoch: e.epoch, lane: .system)
        }
        restoredTimes = kept.map(\.at)
        beforeSend = BeforeSendService(allowsPrivate: { webhooks.operatorAllowsPrivate(app: $0) }, appSecret: { registry.secret($0) },
                                       clock: clock, makeID: { randomHex(12) }, logger: logger)
        engine = try Engine(domain: domain, store: store, log: log, publisher: publisher, webhooks: webhooks, beforeSend: beforeSend, clock: clock,
                            retention: retention, positions: try store.lastOffsets(), reload: reload,
                            onAppSettings: { key, settings in
                                // The REST layer's view of an app follows the domain (on every node).
                                guard var entry = registry.app(key) else { return }
                                entry.allowedOrigins = settings.allowedOrigins
                                entry.restCallsPerSecond = settings.restCallsPerSecond
                                entry.clientMessagesPerSecond = settings.clientMessagesPerSecond
                                registry.set(entry)
                            },
                            onNonceLearned: { n, at in authenticator.learn(app: n.app, nonce: n.nonce, at: at) },
                            halt: Halt(logger: logger),
                            overload: OverloadPolicy(pressure: hubs, latencyBudgetMilliseconds: configuration.fanoutLatencyBudgetMilliseconds),
                            logger: logger)
        // MO-1: the kept messages' places, for recalls after this restart.
        engine.rememberMessagePlaces(kept.compactMap { e in
            guard let object = try? JSONSerialization.jsonObject(with: Data(e.payload)) as? [String: Any], object["ev"] as? String == "room.message",
                  let data = object["data"] as? [String: Any], let message = data["message"] as? [String: Any],
                  let id = message["messageId"] as? String else { return nil }
            return (e.room, e.epoch, e.offset, e.at, id)
        })
        if let snapshot {
            engine.restore(snapshot)
            // The nonces the ledger holds are refused by this node's own checks too.
            for app in snapshot.ledgerNonces { authenticator.learn(app: app.app, nonce: app.nonce, at: app.at) }
        }
        let role = role(engine)
        self.role = role
        context = GatewayContext(engine: engine, apps: registry, clock: clock, configuration: configuration, publicURLs: publicURLs,
                                 nodeURLs: ownURLs, webhooks: webhooks, authenticator: authenticator, hubs: hubs,
                                 idempotency: Idempotency(store: store, clock: clock, engine: engine), role: role)
        window = ResumeWindow(maxEvents: configuration.resumeMaxEvents, maxAgeMilliseconds: configuration.resumeMaxAgeSeconds * 1000, stream: stream)
        metrics = MetricsEndpoint(registry: configuration.metrics, store: store, webhooks: webhooks, beforeSend: beforeSend, server: serverMetrics,
                                  messages: engine.messageCounters, fanoutDelay: hubs.delay, applyLag: role.applyLag(engine))
        operations = try Operations(configuration: configuration, store: store, registry: registry, engine: engine, hubs: hubs,
                                    appsInOwnStore: role.appsInOwnStore, clock: clock, logger: logger)

        var routes = Router.Builder()
        Self.registerHealth(&routes, ready: ready, store: store, role: role, engine: engine)
        let spec = Response.json(.ok, Array(OpenAPIDocument.json.utf8))
        routes.add(.GET, "/openapi.json", sync: { _ in spec })
        let wsSpec = Response.json(.ok, Array(WebSocketDocument.json.utf8))
        routes.add(.GET, "/websocket.json", sync: { _ in wsSpec })
        let metrics = self.metrics
        routes.add(.GET, "/metrics") { _, writer in metrics.render { writer.send($0) } }
        RESTAPI(context: context).register(&routes)
        ClientHTTPRoutes(context: context, pollBufferBytes: configuration.pollBufferBytes).register(&routes)
        operations.register(&routes)
        let assets = StaticAssets(directory: configuration.assetsDirectory, chartJSPath: configuration.chartJSPath)
        if !assets.assets.contains(where: { $0.path == "/console/" }) {
            logger.warning("the console and client library files were not found: /console/ and /client/ are not served",
                           metadata: ["assets-dir": "\(configuration.assetsDirectory ?? "built in")"])
        }
        assets.register(&routes)
        router = routes.build()
    }

    /// `/healthz` and `/readyz` (BX-2): ready once the node has started, its store can write and
    /// its log can be appended (a cluster also shows its members and how far it applied the log).
    private static func registerHealth(_ routes: inout Router.Builder, ready: ReadyFlag, store: Store, role: any NodeRole, engine: Engine) {
        let healthy = Response.json(.ok, "{\"status\":\"ok\"}")
        let notReady = Response.json(.serviceUnavailable, JSONWriter.object { w in
            w.field("status", "starting or draining")
            w.field("code", ErrorCode.unavailable.rawValue)
            w.field("message", "the server is starting or shutting down")
        })
        let readOnly = Response.json(.serviceUnavailable, JSONWriter.object { w in
            w.field("status", "read-only: storage unavailable")
            w.field("code", ErrorCode.storageUnavailable.rawValue)
            w.field("message", "a commit failed (e.g. the disk is full): changes are refused until the server can save again")
        })
        routes.add(.GET, "/healthz", sync: { _ in healthy })
        routes.add(.GET, "/readyz", sync: { _ in
            guard ready.isReady else { return notReady }
            guard store.isWritable else { return readOnly }
            if let unavailable = role.unavailable { return unavailable }
            let applied = engine.applied
            return Response.json(.ok, JSONWriter.object { w in
                w.field("status", "ready")
                role.describe(&w, applied: applied)
            })
        })
    }

    /// The HTTP server's own refusals (no route, malformed framing, limits), from the error table.
    static let errorRenderer: ErrorRenderer = { refusal in
        .json(refusal.status, ErrorTable.body(httpStatus: refusal.status.code, message: refusal.message))
    }

    // MARK: Hubs and sessions

    /// This loop's hub; call on the loop's thread before it serves.
    @discardableResult
    /// `output`: the server's loop output (nil in process: what a hub hands over counts as written).
    func startHub(loop: EventLoop, index: Int, writeDelay: Duration = .zero, output: LoopOutput? = nil) -> Hub {
        let hub = Hub(loopIndex: index, incarnation: engine.log.incarnation, loop: loop, context: context, resumeWindow: window, clock: context.clock,
                      counters: metrics.fanout, marks: marks, aliases: context.roomAliases)
        hub.writeDelay = writeDelay
        hub.output = output
        hub.restore(restored, at: restoredTimes)
        hubs.set(index, LoopBound(hub, loop: loop))
        return hub
    }

    /// A new session on `hub`'s loop.
    func session(hub: Hub, origin: String?, encoding: WireEncoding = .json) -> ClientSession {
        ClientSession(hub: hub, origin: origin, now: context.clock(), encoding: encoding, roomAliases: encoding == .compact)
    }

    // MARK: Start and stop

    /// Starts the store writer, the webhooks, the engine and the node's part of its log, then
    /// returns once the node has caught up (`Engine.catchUp`: at most five minutes). `tickEvery`:
    /// the engine's timer (in-process tests move a manual clock and tick themselves).
    func start(ownURLs: [String], tickEvery: Duration = .milliseconds(250)) throws {
        store.start()
        try webhooks.start()
        beforeSend.start()
        engine.start(tickEvery: tickEvery)
        context.nodeURLs.set(ownURLs)
        context.publicURLs.set(ownURLs)
        role.start()
        let caught = DispatchSemaphore(value: 0)
        engine.catchUp(to: role.headAtStart, apps: configuredApps, endpoints: configuredEndpoints) { caught.signal() }
        guard caught.wait(timeout: .now() + .seconds(300)) == .success else {
            throw GatewayError(.unavailable, "gave up waiting to catch up with the log (five minutes)")
        }
        context.caughtUp.set(true)
        operations.start()
        // CL-5: announced (and so handed out by the address lookup) once it can serve.
        role.announce(ownURLs)
        ready.set(true)
    }

    /// Drains what the engine and the webhooks hold and stops them (after the server stopped):
    /// the delivery thread first, what it finished goes into the log, the calls' last records
    /// reach the log, then the node leaves it.
    func stop() {
        ready.set(false)
        operations.stop()
        beforeSend.stop()
        // No attempt starts any more; what finished is in the log before this run leaves (in a
        // cluster its unfinished deliveries pass to another run, which sends them).
        webhooks.stop()
        engine.settleWebhookOutcomes(timeoutMilliseconds: 3_000)
        // What the drained calls left for the log (their nonces, kept answers) is appended
        // before this run ends, so the other nodes replay those answers rather than call them lost.
        engine.barrier()
        role.flush()
        role.stop()
        // CL-9: nothing is applied any more; a cluster node records where its replica is, once
        // the engine and the store have drained, so that its next start goes on from there.
        let checkpoint = role.keepsCheckpoint ? engine.checkpointState() : nil
        engine.stop()
        store.stop()
        if let checkpoint { role.saveCheckpoint(checkpoint) }
        // Nothing delivers to the hubs any more: let them (and, through them, this context) go.
        hubs.removeAll()
    }
}

/// Whom a kept event reaches when a client resumes after a restart (BX-1): its addressed members
/// (AU-1, AU-2) or the room, less the users it left out. The sender a message was not echoed to
/// is gone with the old run: it goes to the room.
func restoredAudience(_ e: StoredRoomEvent) -> Audience {
    let except: Exclusion = e.exceptUsers.count == 1 ? .user(e.exceptUsers[0]) : .none
    switch e.addressed {
    case .users(let users)?: return .roomUsers(e.room, users, except: except)
    case .tags(let tags)?: return .roomTagged(e.room, tags, except: except)
    case nil: return e.exceptUsers.isEmpty ? .room(e.room) : .roomExceptUsers(e.room, e.exceptUsers)
    }
}
