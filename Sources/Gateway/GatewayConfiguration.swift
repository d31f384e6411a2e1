import Chat
import ClusterNode
import Prometheus
import Store
import Webhooks
import Wire

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
    /// OP-1, OP-2: the operator API and the apps watcher.
    public var operations = OperationsConfiguration()

    /// QS-3: bytes a connection may hold queued before its normal messages are dropped (low and
    /// transient ones past a quarter of it); below `ServerConfiguration.maxOutboundBytes`.
    public var outboundSoftBytes = Limits.defaultOutboundSoftBytes
    /// QS-2: how far behind the I/O loops may be before large rooms refuse all but high-priority
    /// messages.
    public var fanoutLatencyBudgetMilliseconds = Limits.defaultFanoutLatencyBudgetMilliseconds
    /// TR-2: what a long-poll session holds for its client at most (bytes): a connection's output
    /// bound (`ServerConfiguration.maxOutboundBytes`, `--max-outbound-bytes`).
    public var pollBufferBytes = Limits.defaultOutboundSoftBytes * Limits.outboundSoftFraction
    /// TR-1: seconds between heartbeat comments on an idle event stream (`--sse-heartbeat`).
    public var sseHeartbeatSeconds = Limits.defaultSSEHeartbeatSeconds

    public init() {}
}
