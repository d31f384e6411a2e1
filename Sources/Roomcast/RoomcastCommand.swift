import ArgumentParser
import Chat
import Engine
import Foundation
import ClusterNode
import CShims
import Gateway
import HTTP1
import Logging
import Metrics
import Prometheus
import Reactor
import Server
import Store
import Synchronization
import Webhooks
import WebSocket
import Wire
#if canImport(Glibc)
import Glibc
#endif

func environment(_ name: String) -> String? {
    guard let v = getenv(name) else { return nil }
    return String(cString: v)
}

/// A numeric environment variable: nil when unset or empty, and when it is not a number of that
/// kind, which is noted for `refuseInvalidEnvironment` (a flag given for it wins; other commands,
/// `--help` among them, are not stopped by it).
func environment<T: FixedWidthInteger>(_ name: String, as type: T.Type) -> T? {
    guard let text = environment(name), !text.isEmpty else { return nil }
    guard let value = T(text) else {
        let kind = T.self == Int.self || T.self == Int64.self ? "an integer" : "an integer from \(T.min) to \(T.max)"
        invalidEnvironment.withLock { $0[name] = "\(name) must be \(kind) (got \"\(text)\")" }
        return nil
    }
    return value
}

/// The numeric variables that were not numbers, by name, with what to say.
let invalidEnvironment = Mutex<[String: String]>([:])

/// Refuses the first numeric variable that was not a number, unless its flag was given as well
/// (`ROOMCAST_SEND_TIMEOUT`: `--send-timeout`; `ROOMCAST_KEEPALIVE_TIMEOUT`: `--keep-alive-timeout`,
/// so the two are compared without their separators).
func refuseInvalidEnvironment(arguments: [String] = CommandLine.arguments) throws {
    let bad = invalidEnvironment.withLock { $0 }
    for name in bad.keys.sorted() {
        let key = name.dropFirst("ROOMCAST_".count).lowercased().replacingOccurrences(of: "_", with: "")
        let given = arguments.contains { a in
            a.hasPrefix("--") && a.dropFirst(2).prefix { $0 != "=" }.replacingOccurrences(of: "-", with: "") == key
        }
        if !given { throw ValidationError(bad[name]!) }
    }
}

struct RoomcastCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "roomcast",
        abstract: "Roomcast: a self-hosted chat-room gateway (REST for app servers, WebSocket for clients).",
        discussion: """
            Without a subcommand, roomcast runs a node. Every option can also be set with an environment variable, \
            shown in brackets. SIGTERM or SIGINT drains: listeners close, in-flight responses finish, WebSockets get \
            close 1001, and the process exits 0.

            Operations (each subcommand's --help, and the README's Operations, say more):
              roomcast backup --data-dir D --to FILE     online, while the node serves
              roomcast restore --from FILE --data-dir D  with no node running on D
              roomcast apps list|add|rotate-secret|disable|enable|remove --data-dir D
              Upgrade: back up, stop the node, start the new roomcast on the same
              directory: it migrates it (one from a newer roomcast is refused).
              Logs: --log-format json, --log-level info,store=debug
              Metrics: GET /metrics; docker/grafana-dashboard.json and
              docker/prometheus-alerts.yaml
              Operator API (/v1/admin/apps, POST /v1/admin/backup): --operator-token
            """,
        subcommands: [BackupCommand.self, RestoreCommand.self, AppsCommand.self])

    @Option(help: "Address to listen on [ROOMCAST_HOST].")
    var host: String = environment("ROOMCAST_HOST") ?? "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one [ROOMCAST_PORT].")
    var port: UInt16 = environment("ROOMCAST_PORT", as: UInt16.self) ?? 8080

    @Option(help: "Event-loop threads, each with its own SO_REUSEPORT listener [ROOMCAST_EVENT_LOOPS]. Default: one per core.")
    var eventLoops: Int = environment("ROOMCAST_EVENT_LOOPS", as: Int.self) ?? Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))

    @Option(help: "glibc malloc arenas for all threads together (M_ARENA_MAX). 0 (the default): as many as --event-loops, or glibc's MALLOC_ARENA_MAX when that is set. A connection's records are made on its I/O loop and the domain's on the engine thread; with glibc's own choice (eight arenas per core) each thread's arena keeps its own free space, and each idle session added holds about a fifth more memory [ROOMCAST_MALLOC_ARENAS].")
    var mallocArenas: Int = environment("ROOMCAST_MALLOC_ARENAS", as: Int.self) ?? 0

    static let mallocArenasRange = 0...1024

    /// The arenas to ask glibc for (0: leave its choice, MALLOC_ARENA_MAX).
    var effectiveMallocArenas: Int {
        if mallocArenas > 0 { return mallocArenas }
        return environment("MALLOC_ARENA_MAX") == nil ? eventLoops : 0
    }

    @Option(help: "Log level: trace, debug, info, notice, warning, error, critical; per subsystem too: info,store=debug,webhooks=warning (server, gateway, engine, store, webhooks, cluster, reactor, roomcast) [ROOMCAST_LOG_LEVEL].")
    var logLevel: String = environment("ROOMCAST_LOG_LEVEL") ?? "info"

    @Option(help: "Log lines on standard error as text, or json: one object per line with time, level, subsystem, label, message and the call's metadata; credentials are never written [ROOMCAST_LOG_FORMAT].")
    var logFormat: String = environment("ROOMCAST_LOG_FORMAT") ?? "text"

    @Option(help: "The operator credential: a bearer token (at least 16 characters, not an app secret) that the operator API (/v1/admin/apps, POST /v1/admin/backup) requires; without it that API refuses every call. Prefer the environment variable: arguments are visible to other local users [ROOMCAST_OPERATOR_TOKEN].")
    var operatorToken: String = environment("ROOMCAST_OPERATOR_TOKEN") ?? ""

    @Option(help: "Where POST /v1/admin/backup writes its files; default: DATA_DIR/backups [ROOMCAST_BACKUP_DIR].")
    var backupDir: String = environment("ROOMCAST_BACKUP_DIR") ?? ""

    @Option(help: "Largest request body in bytes; larger gets 413 [ROOMCAST_MAX_BODY_BYTES].")
    var maxBodyBytes: Int = environment("ROOMCAST_MAX_BODY_BYTES", as: Int.self) ?? (1 << 20)

    @Option(help: "Seconds a request head may take after its first byte before 408 [ROOMCAST_HEADER_TIMEOUT].")
    var headerTimeout: Int = environment("ROOMCAST_HEADER_TIMEOUT", as: Int.self) ?? 10

    @Option(help: "Seconds a request body may take after its head before 408 [ROOMCAST_BODY_TIMEOUT].")
    var bodyTimeout: Int = environment("ROOMCAST_BODY_TIMEOUT", as: Int.self) ?? 30

    @Option(help: "Seconds an idle keep-alive connection is kept [ROOMCAST_KEEPALIVE_TIMEOUT].")
    var keepAliveTimeout: Int = environment("ROOMCAST_KEEPALIVE_TIMEOUT", as: Int.self) ?? 75

    @Option(help: "Requests served on one connection before it is closed [ROOMCAST_MAX_REQUESTS_PER_CONNECTION].")
    var maxRequestsPerConnection: Int = environment("ROOMCAST_MAX_REQUESTS_PER_CONNECTION", as: Int.self) ?? 10_000

    @Option(help: "Path that upgrades to WebSocket [ROOMCAST_WS_PATH].")
    var wsPath: String = environment("ROOMCAST_WS_PATH") ?? "/ws"

    @Option(help: "Largest WebSocket message in bytes; larger closes with 1009 [ROOMCAST_MAX_MESSAGE_BYTES].")
    var maxMessageBytes: Int = environment("ROOMCAST_MAX_MESSAGE_BYTES", as: Int.self) ?? (1 << 20)

    @Option(help: "Seconds without inbound WebSocket traffic before a ping [ROOMCAST_PING_INTERVAL].")
    var pingInterval: Int = environment("ROOMCAST_PING_INTERVAL", as: Int.self) ?? 25

    @Option(help: "Seconds to wait for a pong before closing [ROOMCAST_PONG_TIMEOUT].")
    var pongTimeout: Int = environment("ROOMCAST_PONG_TIMEOUT", as: Int.self) ?? 10

    @Option(help: "Bytes a connection may have queued for its client (responses, WebSocket frames): past it the connection is not read until the client catches up, and a WebSocket message past it closes the connection as a slow consumer (4008) [ROOMCAST_MAX_OUTBOUND_BYTES].")
    var maxOutboundBytes: Int = environment("ROOMCAST_MAX_OUTBOUND_BYTES", as: Int.self) ?? (4 << 20)

    @Option(help: "QS-3: once what a connection's socket did not take at its last write passes this many bytes (or its queue passes it by this much again), its normal room messages are dropped (low and transient ones past a quarter of it); the client is told what it lost with room.gap. 0 (the default): a sixteenth of --max-outbound-bytes (256 KiB) [ROOMCAST_OUTBOUND_SOFT_BYTES].")
    var outboundSoftBytes: Int = environment("ROOMCAST_OUTBOUND_SOFT_BYTES", as: Int.self) ?? 0

    /// The soft mark given, or a sixteenth of the hard bound.
    var effectiveOutboundSoftBytes: Int { outboundSoftBytes > 0 ? outboundSoftBytes : maxOutboundBytes / Limits.outboundSoftFraction }

    @Option(help: "QS-3: bytes of kernel send buffer per WebSocket (SO_SNDBUF; what a slow reader has not read waits beyond it in the connection's queue, where it is shed and told as room.gap); 0: the kernel's autotuning [ROOMCAST_WS_SEND_BUFFER].")
    var wsSendBuffer: Int = environment("ROOMCAST_WS_SEND_BUFFER", as: Int.self) ?? ServerConfiguration().webSocketSendBufferBytes

    @Option(help: "QS-3: seconds a connection's queued output may make no progress before the connection is closed (nginx's send_timeout) [ROOMCAST_SEND_TIMEOUT].")
    var sendTimeout: Int = environment("ROOMCAST_SEND_TIMEOUT", as: Int.self) ?? 60

    @Option(help: "QS-3: bytes all connections together may have queued; past it the connections that made progress least recently are closed first [ROOMCAST_MAX_TOTAL_OUTBOUND_BYTES].")
    var maxTotalOutboundBytes: Int = environment("ROOMCAST_MAX_TOTAL_OUTBOUND_BYTES", as: Int.self) ?? (1 << 30)

    @Option(help: "TR-5: milliseconds a WebSocket's room events may wait to be written together with the next ones (one write for several events: less CPU per delivery for busy rooms, at most this much more latency; only for a room that sent a normal, low or transient message in the window before, and never for high-priority or system events, events to users, or answers); 0 writes each before the loop sleeps [ROOMCAST_WRITE_DELAY].")
    var writeDelay: Int = environment("ROOMCAST_WRITE_DELAY", as: Int.self) ?? Limits.defaultWriteDelayMilliseconds

    @Option(help: "QS-2: milliseconds the I/O loops may be behind before rooms of 100 or more members refuse all but high-priority messages (42902) [ROOMCAST_FANOUT_LATENCY_BUDGET].")
    var fanoutLatencyBudget: Int = environment("ROOMCAST_FANOUT_LATENCY_BUDGET", as: Int.self) ?? Int(Limits.defaultFanoutLatencyBudgetMilliseconds)

    @Option(name: .customLong("allowed-origin"),
            help: "Origin allowed to open WebSockets (repeatable; `*` or `https://*.example.com` patterns) [ROOMCAST_ALLOWED_ORIGINS, comma-separated]. Default: any.")
    var allowedOrigins: [String] = environment("ROOMCAST_ALLOWED_ORIGINS").map { $0.split(separator: ",").map(String.init) } ?? []

    @Flag(inversion: .prefixedNo, help: "Offer permessage-deflate to WebSocket clients [ROOMCAST_DEFLATE=0 disables].")
    var deflate: Bool = environment("ROOMCAST_DEFLATE") != "0"

    @Option(help: "Seconds a shutdown waits for connections to finish [ROOMCAST_DRAIN_TIMEOUT].")
    var drainTimeout: Int = environment("ROOMCAST_DRAIN_TIMEOUT", as: Int.self) ?? 10

    @Flag(help: "Print the OpenAPI document of the REST API and exit.")
    var printOpenapi = false

    @Flag(help: "Print the error-code table (Markdown) and exit.")
    var printErrorTable = false

    @Flag(help: "Print the WebSocket protocol as JSON Schema and exit.")
    var printWebsocketSchema = false

    @Flag(help: "Print the WebSocket protocol reference (Markdown) and exit.")
    var printWebsocketDoc = false

    @Flag(help: "Print the Server-Sent Events and long-polling reference (Markdown) and exit.")
    var printSseDoc = false

    /// `--data-dir`: an option group, so that the subcommands, which share it, receive its value
    /// (the parser gives a parent's option the arguments after the subcommand's name too).
    @OptionGroup var data: DataDirectoryOption
    var dataDir: String { data.dataDir }

    @Option(name: .customLong("app"),
            help: "An app as KEY:SECRET (repeatable) [ROOMCAST_APPS=key:secret,key2:secret2]. With none, the first start creates a development app and prints it.")
    var apps: [String] = environment("ROOMCAST_APPS").map { $0.split(separator: ",").map(String.init) } ?? []

    @Option(name: .customLong("public-url"),
            help: "WebSocket URL handed out by the address lookup (repeatable) [ROOMCAST_PUBLIC_URLS, comma-separated]. Default: ws://HOST:PORT/ws.")
    var publicURLs: [String] = environment("ROOMCAST_PUBLIC_URLS").map { $0.split(separator: ",").map(String.init) } ?? []

    @Option(help: "New WebSocket connections one client IP address may open per second [ROOMCAST_CONNECTS_PER_IP].")
    var connectsPerIp: Int = environment("ROOMCAST_CONNECTS_PER_IP", as: Int.self) ?? 50

    @Option(help: "Seconds after a user's last connection closes before the user.offline webhook is sent; a connection within them sends nothing (0: at once) [ROOMCAST_PRESENCE_GRACE].")
    var presenceGrace: Int = environment("ROOMCAST_PRESENCE_GRACE", as: Int.self) ?? 5

    @Option(help: "Serve the client library and the console from this directory (a checkout's clients/) instead of the built-in copies, to work on them without a rebuild [ROOMCAST_ASSETS_DIR].")
    var assetsDir: String = environment("ROOMCAST_ASSETS_DIR") ?? ""

    @Option(help: "The console's charting library, Chart.js 3 UMD build (Debian's libjs-chart.js); missing: the console shows no charts [ROOMCAST_CHART_JS].")
    var chartJs: String = environment("ROOMCAST_CHART_JS") ?? "/usr/share/javascript/chart.js/chart.min.js"

    @Option(help: "normal (survives a killed process) or full (also power loss; fsync per batch) [ROOMCAST_DURABILITY].")
    var durability: String = environment("ROOMCAST_DURABILITY") ?? "normal"

    @Option(help: "Seconds an expired client token may still be refreshed before the connection closes with 4002 [ROOMCAST_TOKEN_GRACE].")
    var tokenGrace: Int = environment("ROOMCAST_TOKEN_GRACE", as: Int.self) ?? 60

    @Option(help: "Seconds a new WebSocket has to send connect before it is closed with 4001 [ROOMCAST_CONNECT_TIMEOUT].")
    var connectTimeout: Int = environment("ROOMCAST_CONNECT_TIMEOUT", as: Int.self) ?? 10

    @Option(help: "Seconds between heartbeat comments on an idle Server-Sent Events stream (GET /sse) [ROOMCAST_SSE_HEARTBEAT].")
    var sseHeartbeat: Int = environment("ROOMCAST_SSE_HEARTBEAT", as: Int.self) ?? Limits.defaultSSEHeartbeatSeconds

    @Option(help: "Events kept per room for resuming clients [ROOMCAST_RESUME_EVENTS].")
    var resumeEvents: Int = environment("ROOMCAST_RESUME_EVENTS", as: Int.self) ?? 1024

    @Option(help: "Seconds events are kept for resuming clients [ROOMCAST_RESUME_SECONDS].")
    var resumeSeconds: Int = environment("ROOMCAST_RESUME_SECONDS", as: Int.self) ?? 300

    @Option(name: .customLong("webhook"),
            help: "A webhook endpoint: 'APP URL [format=standard|rongcloud|nim] [events=member.joined,...] [secret=whsec_...] [allow-private]' (repeatable) [ROOMCAST_WEBHOOKS, ';'-separated].")
    var webhooks: [String] = environment("ROOMCAST_WEBHOOKS").map { $0.split(separator: ";").map(String.init) } ?? []

    @Option(help: "Delays between webhook attempts, e.g. '5s,30s,2m,10m,30m,2h,6h,12h' (the default) [ROOMCAST_WEBHOOK_RETRY_SCHEDULE].")
    var webhookRetrySchedule: String = environment("ROOMCAST_WEBHOOK_RETRY_SCHEDULE") ?? ""

    @Option(help: "Seconds a webhook attempt may take in all [ROOMCAST_WEBHOOK_TIMEOUT].")
    var webhookTimeout: Int = environment("ROOMCAST_WEBHOOK_TIMEOUT", as: Int.self) ?? 10

    @Option(help: "Webhook attempts in flight at once [ROOMCAST_WEBHOOK_CONCURRENCY].")
    var webhookConcurrency: Int = environment("ROOMCAST_WEBHOOK_CONCURRENCY", as: Int.self) ?? 256

    @Option(name: .customLong("webhook-allow-private"),
            help: "Apps whose webhook endpoints may reach loopback, private and link-local addresses (allowPrivateNetwork), comma-separated or repeated; * for every app. Others are refused with 403 [ROOMCAST_WEBHOOK_ALLOW_PRIVATE].")
    var webhookAllowPrivate: [String] = environment("ROOMCAST_WEBHOOK_ALLOW_PRIVATE").map { [$0] } ?? []

    @Option(help: "Join a cluster whose shared log is this PostgreSQL database (postgres://USER@HOST:PORT/DB or a libpq connection string); every node needs the same --app list. Without it, one node on its SQLite file [ROOMCAST_CLUSTER].")
    var cluster: String = environment("ROOMCAST_CLUSTER") ?? ""

    @Option(help: "This node's name in the cluster; default: the one stored in the data directory's node-id file, made from the host name on first start [ROOMCAST_NODE_ID].")
    var nodeId: String = environment("ROOMCAST_NODE_ID") ?? ""

    @Option(help: "Seconds without a node's heartbeat before the cluster ends its sessions [ROOMCAST_NODE_TIMEOUT].")
    var nodeTimeout: Int = environment("ROOMCAST_NODE_TIMEOUT", as: Int.self) ?? 10

    @Option(help: "Cluster: the leader publishes a snapshot every this many log entries (at most one a minute), and the log is trimmed below it; 0: never [ROOMCAST_SNAPSHOT_EVERY].")
    var snapshotEvery: Int = environment("ROOMCAST_SNAPSHOT_EVERY", as: Int.self) ?? 100_000

    @Option(help: "Cluster: seconds at least between two snapshots [ROOMCAST_SNAPSHOT_INTERVAL].")
    var snapshotInterval: Int = environment("ROOMCAST_SNAPSHOT_INTERVAL", as: Int.self) ?? 60

    @Option(help: "Testing only: milliseconds added to this node's clock (negative: behind), to check that a skewed clock changes nothing a cluster agrees on; the signature window still applies to signed calls [ROOMCAST_CLOCK_OFFSET_MS].")
    var clockOffsetMs: Int64 = environment("ROOMCAST_CLOCK_OFFSET_MS", as: Int64.self) ?? 0

    func validate() throws {
        try refuseInvalidEnvironment()
        do {
            _ = try LogLevels.parse(logLevel)
        } catch {
            throw ValidationError("\(error)")
        }
        guard RoomcastLogHandler.Format(rawValue: logFormat) != nil else { throw ValidationError("--log-format must be text or json") }
        if !operatorToken.isEmpty {
            guard operatorToken.utf8.count >= OperationsConfiguration.minimumTokenBytes, operatorToken.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw ValidationError("--operator-token must be at least \(OperationsConfiguration.minimumTokenBytes) visible ASCII characters")
            }
            if (try? parsedApps())?.contains(where: { $0.secret == operatorToken }) == true {
                throw ValidationError("--operator-token must not be an app's secret")
            }
        }
        guard eventLoops >= 1 && eventLoops <= 256 else { throw ValidationError("--event-loops must be between 1 and 256") }
        guard Self.mallocArenasRange.contains(mallocArenas) else {
            throw ValidationError("--malloc-arenas must be between \(Self.mallocArenasRange.lowerBound) and \(Self.mallocArenasRange.upperBound)")
        }
        guard maxBodyBytes >= 0 else { throw ValidationError("--max-body-bytes must not be negative") }
        guard wsPath.hasPrefix("/") else { throw ValidationError("--ws-path must start with /") }
        for (name, v) in [("--header-timeout", headerTimeout), ("--body-timeout", bodyTimeout), ("--keep-alive-timeout", keepAliveTimeout),
                          ("--ping-interval", pingInterval), ("--pong-timeout", pongTimeout), ("--drain-timeout", drainTimeout),
                          ("--connect-timeout", connectTimeout), ("--resume-events", resumeEvents), ("--resume-seconds", resumeSeconds),
                          ("--sse-heartbeat", sseHeartbeat)] {
            guard v > 0 else { throw ValidationError("\(name) must be positive") }
        }
        guard (5...3600).contains(nodeTimeout) else { throw ValidationError("--node-timeout must be 5 to 3600 seconds") }
        guard snapshotEvery == 0 || (10...100_000_000).contains(snapshotEvery) else {
            throw ValidationError("--snapshot-every must be 0 (never) or 10 to 100000000 entries")
        }
        guard (1...86_400).contains(snapshotInterval) else { throw ValidationError("--snapshot-interval must be 1 to 86400 seconds") }
        guard abs(clockOffsetMs) <= 86_400_000 else { throw ValidationError("--clock-offset-ms must be within a day (±86400000)") }
        if !nodeId.isEmpty, nodeId.utf8.count > 64 || nodeId.contains(where: { $0.isWhitespace || $0 == "#" }) {
            throw ValidationError("--node-id: at most 64 bytes, without spaces or '#'")
        }
        if !cluster.isEmpty, apps.isEmpty {
            throw ValidationError("--cluster needs --app KEY:SECRET (the same list on every node): a cluster makes no development app")
        }
        guard tokenGrace >= 0 else { throw ValidationError("--token-grace must not be negative") }
        guard outboundSoftBytes >= 0, effectiveOutboundSoftBytes >= 1024 && effectiveOutboundSoftBytes < maxOutboundBytes else {
            throw ValidationError("--outbound-soft-bytes must be at least 1024 and below --max-outbound-bytes (\(maxOutboundBytes))")
        }
        guard (1...3600).contains(sendTimeout) else { throw ValidationError("--send-timeout must be 1 to 3600 seconds") }
        guard wsSendBuffer == 0 || (4096...(16 << 20)).contains(wsSendBuffer) else { throw ValidationError("--ws-send-buffer must be 0 or 4096 to 16777216 bytes") }
        guard maxTotalOutboundBytes >= maxOutboundBytes else {
            throw ValidationError("--max-total-outbound-bytes must be at least --max-outbound-bytes (\(maxOutboundBytes))")
        }
        guard Limits.writeDelayMilliseconds.contains(writeDelay) else {
            throw ValidationError("--write-delay must be \(Limits.writeDelayMilliseconds.lowerBound) to \(Limits.writeDelayMilliseconds.upperBound) milliseconds")
        }
        // Held output makes no progress: a held connection must not reach the send timeout.
        guard writeDelay * 2 <= sendTimeout * 1000 else {
            throw ValidationError("--write-delay must be at most half of --send-timeout (\(sendTimeout) s)")
        }
        guard (10...60_000).contains(fanoutLatencyBudget) else { throw ValidationError("--fanout-latency-budget must be 10 to 60000 milliseconds") }
        guard Store.Durability(rawValue: durability) != nil else { throw ValidationError("--durability must be normal or full") }
        _ = try parsedApps()
        _ = try parsedWebhooks()
        if !webhookRetrySchedule.isEmpty, RetrySchedule.parse(webhookRetrySchedule) == nil {
            throw ValidationError("--webhook-retry-schedule: give delays like 5s,30s,2m,1h (ms, s, m, h)")
        }
        guard webhookTimeout >= 1 && webhookTimeout <= 120 else { throw ValidationError("--webhook-timeout must be 1 to 120 seconds") }
        guard webhookConcurrency >= 1 && webhookConcurrency <= 4096 else { throw ValidationError("--webhook-concurrency must be 1 to 4096") }
        for app in parsedWebhookAllowPrivate() where app.utf8.count > 64 {
            throw ValidationError("--webhook-allow-private: '\(app)' is not an app key")
        }
    }

    func parsedWebhookAllowPrivate() -> Set<String> {
        Set(webhookAllowPrivate.flatMap { $0.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) } }.filter { !$0.isEmpty })
    }

    func parsedApps() throws -> [(key: String, secret: String)] {
        try apps.map { spec in
            let parts = spec.split(separator: ":", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, parts[0].utf8.count <= 64, parts[1].utf8.count >= 8 else {
                // The secret is not echoed: error output is often kept in logs.
                throw ValidationError("--app must be KEY:SECRET with a secret of at least 8 characters (got '\(parts[0])' with \(parts.count == 2 ? "a secret of \(parts[1].utf8.count) characters" : "no secret"))")
            }
            return (key: parts[0], secret: parts[1])
        }
    }

    func gatewayConfiguration() throws -> GatewayConfiguration {
        var g = GatewayConfiguration()
        g.dataDirectory = dataDir
        g.apps = try parsedApps()
        g.durability = Store.Durability(rawValue: durability) ?? .normal
        g.publicURLs = publicURLs
        g.assetsDirectory = assetsDir.isEmpty ? nil : assetsDir
        guard (0...3600).contains(presenceGrace) else { throw ValidationError("--presence-grace must be 0 to 3600 seconds") }
        g.presenceGraceSeconds = Int64(presenceGrace)
        guard (1...1_000_000).contains(connectsPerIp) else { throw ValidationError("--connects-per-ip must be 1 to 1000000") }
        g.connectsPerIPPerSecond = connectsPerIp
        g.chartJSPath = chartJs
        g.tokenGraceSeconds = Int64(tokenGrace)
        g.outboundSoftBytes = effectiveOutboundSoftBytes
        g.pollBufferBytes = maxOutboundBytes
        g.sseHeartbeatSeconds = sseHeartbeat
        g.fanoutLatencyBudgetMilliseconds = Int64(fanoutLatencyBudget)
        g.connectTimeoutSeconds = Int64(connectTimeout)
        g.resumeMaxEvents = resumeEvents
        g.resumeMaxAgeSeconds = Int64(resumeSeconds)
        g.webhookEndpoints = try parsedWebhooks()
        if let schedule = RetrySchedule.parse(webhookRetrySchedule) { g.webhooks.retry = schedule }
        g.webhooks.timeoutMs = webhookTimeout * 1000
        g.webhooks.connectTimeoutMs = min(3000, webhookTimeout * 1000)
        g.webhooks.maxInFlight = webhookConcurrency
        g.webhooks.maxInFlightPerEndpoint = min(32, webhookConcurrency)
        g.webhooks.privateNetworkApps = parsedWebhookAllowPrivate()
        g.operations.operatorToken = operatorToken.isEmpty ? nil : operatorToken
        g.operations.backupDirectory = backupDir.isEmpty ? nil : backupDir
        if !cluster.isEmpty {
            var c = ClusterConfiguration(url: cluster, nodeID: try resolvedNodeID())
            c.nodeTimeoutMilliseconds = Int64(nodeTimeout) * 1000
            c.snapshotEvery = Int64(snapshotEvery)
            c.snapshotIntervalMilliseconds = Int64(snapshotInterval) * 1000
            g.cluster = c
        }
        return g
    }

    /// `--node-id`, or the one kept in the data directory (made once from the host name and a
    /// random part, so it is stable across restarts and unique on a shared host).
    func resolvedNodeID() throws -> String {
        if !nodeId.isEmpty { return nodeId }
        let file = dataDir + "/node-id"
        if let kept = try? String(contentsOfFile: file, encoding: .utf8) {
            let id = kept.trimmingCharacters(in: .whitespacesAndNewlines)
            if !id.isEmpty { return id }
        }
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "node"
        let id = String(host.filter { !$0.isWhitespace && $0 != "#" }.prefix(48)) + "-" + randomHex(3)
        try (id + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return id
    }

    /// `APP URL [format=...] [events=a,b] [secret=...] [allow-private]`.
    func parsedWebhooks() throws -> [(app: String, spec: WebhookService.EndpointSpec)] {
        try webhooks.map { line in
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count >= 2 else { throw ValidationError("--webhook '\(line)': give the app key and the URL") }
            var spec = WebhookService.EndpointSpec(url: parts[1])
            for option in parts.dropFirst(2) {
                if option == "allow-private" {
                    spec.allowPrivateNetwork = true
                } else if option.hasPrefix("format=") {
                    spec.format = String(option.dropFirst(7))
                } else if option.hasPrefix("events=") {
                    spec.events = option.dropFirst(7).split(separator: ",").map(String.init)
                } else if option.hasPrefix("secret=") {
                    spec.secret = String(option.dropFirst(7))
                } else {
                    throw ValidationError("--webhook '\(line)': unknown option \(option)")
                }
            }
            return (parts[0], spec)
        }
    }

    func serverConfiguration() -> ServerConfiguration {
        var c = ServerConfiguration()
        c.host = host
        c.port = port
        c.eventLoops = eventLoops
        c.http.limits.maxBodyBytes = maxBodyBytes
        c.http.headerTimeout = .seconds(headerTimeout)
        c.http.bodyTimeout = .seconds(bodyTimeout)
        c.http.keepAliveTimeout = .seconds(keepAliveTimeout)
        c.http.maxRequestsPerConnection = maxRequestsPerConnection
        c.webSocket.path = wsPath
        c.webSocket.maxMessageBytes = maxMessageBytes
        c.webSocket.pingInterval = .seconds(pingInterval)
        c.webSocket.pongTimeout = .seconds(pongTimeout)
        c.maxOutboundBytes = maxOutboundBytes
        c.sendTimeout = .seconds(sendTimeout)
        c.writeDelay = .milliseconds(writeDelay)
        // Half the lowest QS-3 mark, where low and transient messages start to drop.
        c.maxHeldBytes = effectiveOutboundSoftBytes / Limits.lowMarkFraction / 2
        c.webSocketSendBufferBytes = wsSendBuffer
        c.maxTotalOutboundBytes = maxTotalOutboundBytes
        c.webSocket.allowedOrigins = allowedOrigins.isEmpty ? nil : allowedOrigins
        c.webSocket.deflate.enabled = deflate
        c.drainTimeout = .seconds(drainTimeout)
        return c
    }

    /// The base URL people use: the listening address, with a wildcard one shown as loopback.
    func baseURL(port: UInt16) -> String {
        let shown = ["0.0.0.0", "::", "[::]", ""].contains(host) ? "127.0.0.1" : (host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host)
        return "http://\(shown):\(port)"
    }

    /// The first start's development app, with a signed `curl` that works in any POSIX sh.
    func printDevelopmentApp(_ app: AppRegistry.App, port: UInt16) {
        print("""
            Created a development app (stored in \(dataDir); see it again with: roomcast apps list --secrets --data-dir \(dataDir)):
              App-Key:    \(app.key)
              App-Secret: \(app.secret)
            Create a room with a signed request (Signature = hex(SHA1(secret + nonce + timestamp)); sh):
              nonce=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \\n'); ts=$(date +%s); sig=$(printf '%s' "\(app.secret)$nonce$ts" | sha1sum | cut -d' ' -f1)
              curl -s \(baseURL(port: port))/v1/rooms -H "App-Key: \(app.key)" -H "Nonce: $nonce" -H "Timestamp: $ts" \\
                -H "Signature: $sig" -H 'Content-Type: application/json' -d '{"roomId":"lobby","name":"Lobby"}'

            """)
    }

    /// Where to go next, printed at every start of a single node.
    func printNextSteps(port: UInt16) {
        print("""
              console: \(baseURL(port: port))/console/ (sign in with an app key and secret)
              apps:    roomcast apps list --data-dir \(dataDir) (add --secrets to see the secrets; roomcast apps --help)
            """)
    }

    func run() throws {
        if printOpenapi {
            print(OpenAPIDocument.json, terminator: "")
            return
        }
        if printErrorTable {
            print(ErrorTable.markdown, terminator: "")
            return
        }
        if printWebsocketSchema {
            print(WebSocketDocument.json, terminator: "")
            return
        }
        if printWebsocketDoc {
            print(WebSocketDocument.markdown, terminator: "")
            return
        }
        if printSseDoc {
            print(EventStreamDocument.markdown, terminator: "")
            return
        }
        let levels = (try? LogLevels.parse(logLevel)) ?? LogLevels(general: .info, bySubsystem: [:])
        let format = RoomcastLogHandler.Format(rawValue: logFormat) ?? .text
        LoggingSystem.bootstrap { label in RoomcastLogHandler(label: label, format: format, levels: levels) }
        let logger = Logger(label: "roomcast")
        // OP-1: one node per data directory (a cluster node's holds its replica, CL-9); a restore
        // waits for none (the lock is released when the process ends, however it ends).
        let lock: DataDirectoryLock
        do {
            try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
            lock = try DataDirectoryLock(directory: dataDir, waitMilliseconds: 2000)
        } catch {
            FileHandle.standardError.write(Data("roomcast: \(OperatorRefusal.from(error))\n".utf8))
            throw ExitCode(1)
        }
        defer { withExtendedLifetime(lock) {} }
        // Signals are received by this thread only: block them before any thread starts.
        blockSignals([SIGINT, SIGTERM])
        // Before any thread allocates: the arenas every later thread shares.
        if effectiveMallocArenas > 0 { _ = cshims_set_arena_max(Int32(effectiveMallocArenas)) }
        // Memory freed after a burst (a cluster leader's snapshot, a backlog of requests or
        // entries) stays resident in glibc's arenas as free pages until something trims them:
        // seen as hundreds of MB on a leader after snapshots of a replica with a million messages.
        // A thread of its own gives them back every 30 s, so no I/O loop or engine waits for it.
        _ = PosixThread.start(name: "roomcast-trim") {
            while true {
                sleep(30)
                _ = cshims_trim_heap()
            }
        }

        // swift-metrics goes to a Prometheus registry that /metrics serves.
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        var configuration = try gatewayConfiguration()
        configuration.metrics = registry
        let offset = clockOffsetMs
        let clock: @Sendable () -> Int64 = { wallClockMilliseconds() + offset }
        let gateway: Gateway
        do {
            gateway = try Gateway(configuration: configuration, server: serverConfiguration(), logger: logger, clock: clock)
        } catch let e as SchemaError {
            // OP-3: a directory from a newer roomcast is refused before anything is written to it.
            FileHandle.standardError.write(Data("roomcast: \(OperatorRefusal.from(e))\n".utf8))
            throw ExitCode(1)
        }
        try gateway.start()
        if let dev = gateway.createdDevelopmentApp {
            printDevelopmentApp(dev, port: gateway.port)
        }
        // Machine-readable line for scripts and tests that start us on port 0.
        print("roomcast listening on http://\(host):\(gateway.port)")
        if cluster.isEmpty { printNextSteps(port: gateway.port) }
        fflush(nil)

        let signal = waitForSignal([SIGINT, SIGTERM])
        logger.info("draining", metadata: ["signal": "\(signal == SIGTERM ? "SIGTERM" : "SIGINT")"])
        gateway.shutdown()
        logger.info("stopped")
    }
}
