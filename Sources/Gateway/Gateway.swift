import Chat
import Foundation
import HTTP1
import Logging
import Reactor
import Server
import Prometheus
import Store
import Synchronization
import Webhooks

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

    public init() {}
}

/// What sessions and REST handlers share. Immutable after start.
final class GatewayContext: Sendable {
    let engine: Engine
    let apps: AppRegistry
    let authenticator: RequestAuthenticator
    let clock: @Sendable () -> Int64
    let publicURLs: [String]
    let tokenGraceMilliseconds: Int64
    let connectTimeoutMilliseconds: Int64
    let defaultTokenTTLSeconds: Int64
    let persistOrigins: @Sendable (String, [String]?) -> Void
    let webhooks: WebhookService

    init(engine: Engine, apps: AppRegistry, clock: @escaping @Sendable () -> Int64, configuration: GatewayConfiguration,
         publicURLs: [String], webhooks: WebhookService, persistOrigins: @escaping @Sendable (String, [String]?) -> Void) {
        self.engine = engine
        self.webhooks = webhooks
        self.apps = apps
        self.authenticator = RequestAuthenticator(apps: apps, clock: clock)
        self.clock = clock
        self.publicURLs = publicURLs
        self.tokenGraceMilliseconds = configuration.tokenGraceSeconds * 1000
        self.connectTimeoutMilliseconds = configuration.connectTimeoutSeconds * 1000
        self.defaultTokenTTLSeconds = configuration.defaultTokenTTLSeconds
        self.persistOrigins = persistOrigins
    }
}

/// The running gateway: store, engine, and the HTTP/WebSocket server with the REST API and the
/// client protocol. ARCHITECTURE §2: I/O loops, one engine thread, one store thread.
public final class Gateway: Sendable {
    public let configuration: GatewayConfiguration
    public let server: HTTPServer
    public let store: Store
    public let webhooks: WebhookService
    let engine: Engine
    let context: GatewayContext
    private let hubs: HubTable
    private let logger: Logger
    public let stream: String
    /// The development app created on first start, if one was.
    public let createdDevelopmentApp: AppRegistry.App?
    private let ready = ReadyFlag()

    public init(configuration: GatewayConfiguration, server serverConfiguration: ServerConfiguration, logger: Logger,
                clock: @escaping @Sendable () -> Int64 = wallClockMilliseconds) throws {
        self.configuration = configuration
        self.logger = logger
        try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
        store = try Store(path: configuration.dataDirectory + "/roomcast.sqlite", durability: configuration.durability, logger: logger)

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
        for row in try store.apps() {
            registry.set(AppRegistry.App(key: row.key, secret: row.secret, allowedOrigins: row.allowedOrigins.isEmpty ? nil : row.allowedOrigins.split(separator: "\n").map(String.init)))
        }

        // The domain, restored from the store.
        let ids = IDGenerator(clock: clock)
        let domain = ChatDomain(makeID: { ids.next() })
        try store.restore(into: domain, now: now)

        // Webhooks: endpoints from the command line, then the service (started with the store).
        let apps = registry
        webhooks = WebhookService(store: store, configuration: configuration.webhooks, logger: logger, clock: clock,
                                  random: { Double.random(in: 0..<1) }, makeID: { randomHex(12) }, appSecret: { apps.app($0)?.secret })
        for (app, spec) in configuration.webhookEndpoints {
            guard registry.app(app) != nil else { throw ChatError(.unknownApp, "--webhook names unknown app \(app)", field: "app") }
            try webhooks.configure(app: app, spec)
        }

        let publisher = Publisher()
        engine = try Engine(domain: domain, store: store, publisher: publisher, webhooks: webhooks, clock: clock, logger: logger)
        stream = randomHex(8)

        var urls = configuration.publicURLs
        if urls.isEmpty {
            let path = serverConfiguration.webSocket.path ?? "/ws"
            urls = ["ws://\(serverConfiguration.host):\(serverConfiguration.port)\(path)"]
        }
        let store = self.store
        context = GatewayContext(engine: engine, apps: registry, clock: clock, configuration: configuration, publicURLs: urls,
                                 webhooks: webhooks, persistOrigins: { app, origins in try? store.setAllowedOrigins(app: app, origins) })

        let hubs = HubTable()
        self.hubs = hubs
        let window = ResumeWindow(maxEvents: configuration.resumeMaxEvents, maxAgeMilliseconds: configuration.resumeMaxAgeSeconds * 1000,
                                  stream: stream)
        let context = self.context
        let ready = self.ready

        var routes = Router.Builder()
        let healthy = Response.json(.ok, "{\"status\":\"ok\"}")
        let readyResponse = Response.json(.ok, "{\"status\":\"ready\"}")
        let notReady = Response.json(.serviceUnavailable, "{\"status\":\"starting or draining\"}")
        routes.add(.GET, "/healthz", sync: { _ in healthy })
        routes.add(.GET, "/readyz", sync: { _ in ready.isReady ? readyResponse : notReady })
        let spec = Response.json(.ok, Array(OpenAPIDocument.json.utf8))
        routes.add(.GET, "/openapi.json", sync: { _ in spec })
        let wsSpec = Response.json(.ok, Array(WebSocketDocument.json.utf8))
        routes.add(.GET, "/websocket.json", sync: { _ in wsSpec })
        let metrics = MetricsEndpoint(registry: configuration.metrics, store: store, webhooks: webhooks)
        routes.add(.GET, "/metrics", sync: { _ in metrics.render() })
        RESTAPI(context: context).register(&routes)

        server = try HTTPServer(
            configuration: serverConfiguration, router: routes.build(),
            upgradeHandler: { head, _, loopIndex in
                guard let hub = hubs.hub(loopIndex) else {
                    return .reject(.json(.serviceUnavailable, ErrorTable.body(GatewayError(.unavailable, "starting"))))
                }
                return .accept(ClientSession(context: context, hub: hub, origin: head.headers["origin"], now: context.clock()))
            },
            onLoopStart: { loop, index in
                let hub = Hub(loopIndex: index, loop: loop, resumeWindow: window, clock: clock)
                hubs.set(index, LoopBound(hub, loop: loop))
                loop.scheduleRepeating(every: .seconds(1)) { hub.tick() }
                loop.scheduleRepeating(every: .seconds(30)) { hub.sweepRings() }
            },
            logger: logger)
        metrics.attach(server.metrics)

        // Each committed batch reaches every loop once.
        let loops = server.loops
        publisher.deliver = { items in
            for (index, loop) in loops.enumerated() {
                loop.execute {
                    if let hub = hubs.hub(index) { hub.apply(items) }
                }
            }
        }
        store.afterBatch = { publisher.flush() }
    }

    /// Starts the store writer, the engine and the server; returns once they serve.
    public func start() throws {
        store.start()
        try webhooks.start()
        engine.start()
        try server.start()
        ready.set(true)
        logger.info("gateway ready", metadata: ["apps": "\(context.apps.all.map(\.key))", "data": "\(configuration.dataDirectory)"])
    }

    public var port: UInt16 { server.port }
    public var apps: [AppRegistry.App] { context.apps.all }

    /// Drains: not ready, stop accepting, close WebSockets with 1001, let the engine finish what
    /// the closing connections caused, commit it, stop.
    public func shutdown() {
        ready.set(false)
        server.shutdown()
        engine.stop()
        webhooks.stop()
        store.stop()
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
}

/// Ids for messages, room epochs and anonymous users: time-ordered and unique across restarts.
final class IDGenerator: @unchecked Sendable {
    // Safety: called only from the engine thread (the domain's single thread).
    private let clock: @Sendable () -> Int64
    private var counter: UInt32 = 0
    private let salt = randomHex(4)

    init(clock: @escaping @Sendable () -> Int64) {
        self.clock = clock
    }

    func next() -> String {
        counter &+= 1
        let t = String(UInt64(clock()), radix: 36)
        let c = String(counter % 1_679_616, radix: 36)
        return t + String(repeating: "0", count: max(0, 4 - c.count)) + c + salt
    }
}

func randomHex(_ bytes: Int) -> String {
    var g = SystemRandomNumberGenerator()
    return hex((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &g) })
}
