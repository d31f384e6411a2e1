import Chat
import Engine
import Foundation
import Logging
import Reactor
import Server
import Store
import Webhooks
import Wire

/// The running gateway: the core (built for its log by `GatewayCore.singleNode` or
/// `.clusterNode`) served by the HTTP server with the REST API and the client protocol.
/// ARCHITECTURE §2: I/O loops, one engine thread, one store thread.
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
        let serverMetrics = ServerMetrics(for: serverConfiguration)
        let core: GatewayCore
        if let cluster = configuration.cluster {
            core = try GatewayCore.clusterNode(configuration: configuration, cluster: cluster, publicURLs: configuration.publicURLs, logger: logger,
                                               clock: clock, serverMetrics: serverMetrics)
        } else {
            core = try GatewayCore.singleNode(configuration: configuration,
                                              storage: .file(path: configuration.dataDirectory + "/roomcast.sqlite", durability: configuration.durability),
                                              publicURLs: configuration.publicURLs, logger: logger, clock: clock, serverMetrics: serverMetrics)
        }
        self.core = core
        let hubs = core.hubs
        let caughtUp = core.context.caughtUp
        let connects = core.context.connects
        server = try HTTPServer(
            configuration: serverConfiguration, router: core.router,
            upgradeHandler: { head, peer, loopIndex in
                guard let hub = hubs.hub(loopIndex), caughtUp.isReady else {
                    return .reject(.json(.serviceUnavailable, ErrorTable.body(GatewayError(.unavailable, "starting"))))
                }
                guard connects.take(peer.host, now: clock()) else {
                    var refusal = Response.json(.tooManyRequests, ErrorTable.body(ChatError(.rateLimited, "too many new connections from this address", field: nil)))
                    refusal.headers.add("Retry-After", String(Limits.rateLimitRetryAfterSeconds))
                    return .reject(refusal)
                }
                // TR-5: the event encoding the client asked for (none: JSON, nothing echoed).
                switch WireEncoding.negotiate(offers: head.headers.values("sec-websocket-protocol")) {
                case .failure(let refusal):
                    return .reject(.json(.badRequest, ErrorTable.body(GatewayError(.badRequest, refusal.message, field: "Sec-WebSocket-Protocol"))))
                case .success(let chosen):
                    let session = core.session(hub: hub, origin: head.headers["origin"], encoding: chosen.encoding)
                    guard let name = chosen.echo else { return .accept(session) }
                    return .acceptSpeaking(session, subprotocol: name)
                }
            },
            errorRenderer: GatewayCore.errorRenderer,
            onLoopStart: { loop, index, output in
                let hub = core.startHub(loop: loop, index: index, writeDelay: serverConfiguration.writeDelay, output: output)
                loop.scheduleRepeating(every: .seconds(1)) { hub.tick() }
                loop.scheduleRepeating(every: .seconds(30)) { hub.sweepRings() }
                loop.scheduleRepeating(every: .seconds(max(1, configuration.sseHeartbeatSeconds))) { hub.heartbeat() }
            },
            metrics: serverMetrics,
            logger: logger)
    }

    /// Starts the server, then the store, the engine and the node's part of its log; returns once
    /// the node has caught up with its log and serves (until then `/readyz` says starting, signed
    /// calls and upgrades get 503).
    public func start() throws {
        try server.start()
        let own = configuration.publicURLs.isEmpty ? [Self.derivedURL(server.configuration, port: server.port, logger: logger)] : configuration.publicURLs
        try core.start(ownURLs: own)
        logger.info("gateway ready", metadata: ["apps": "\(core.context.apps.all.map(\.key))", "data": "\(configuration.dataDirectory)"])
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

    /// Drains: not ready, no longer handed out by the other nodes' address lookup, stop accepting,
    /// close WebSockets with 1001, then let the engine finish what the closing connections caused,
    /// commit it and leave the log (`GatewayCore.stop`).
    public func shutdown() {
        core.ready.set(false)
        core.role.announce([])
        server.shutdown()
        core.stop()
    }
}
