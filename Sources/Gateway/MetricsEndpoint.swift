import Engine
import HTTP1
import Prometheus
import Server
import Store
import Synchronization
import Webhooks

/// `GET /metrics` (BX-2): the swift-metrics backend's registry (webhook delivery metrics and
/// anything else recorded through swift-metrics), then the server's and store's own counters,
/// which live in per-loop atomics and are read at scrape time.
final class MetricsEndpoint: Sendable {
    let registry: PrometheusCollectorRegistry?
    let store: Store
    let webhooks: WebhookService
    let beforeSend: BeforeSendService
    /// The HTTP server's counters (none in-process).
    private let server: ServerMetrics?
    let fanout = FanoutCounters()
    /// Cluster mode: how many log entries this node has still to apply (OP-4's apply-lag alert);
    /// nil on a single node.
    private let applyLag: (@Sendable () -> Int64)?

    /// QS-7: messages admitted and refused at the rooms, by class.
    let messages: MessageCounters
    /// QS-7: how long the loops took to get events out, by class.
    let fanoutDelay: FanoutDelay

    init(registry: PrometheusCollectorRegistry?, store: Store, webhooks: WebhookService, beforeSend: BeforeSendService, server: ServerMetrics?,
         messages: MessageCounters, fanoutDelay: FanoutDelay, applyLag: (@Sendable () -> Int64)? = nil) {
        self.messages = messages
        self.fanoutDelay = fanoutDelay
        self.server = server
        self.applyLag = applyLag
        self.beforeSend = beforeSend
        self.registry = registry
        self.store = store
        self.webhooks = webhooks
    }

    /// `render()` and the webhook deliveries pending in the store, owned by this node run and
    /// parked for others (CL-6), which are read on the store's reader thread.
    func render(_ completion: @escaping @Sendable (Response) -> Void) {
        let base = render()
        webhooks.pendingCounts { owned, parked in
            var response = base
            let text = "# HELP roomcast_webhook_deliveries_owned Pending webhook deliveries in the store that this node run owns and sends.\n"
                + "# TYPE roomcast_webhook_deliveries_owned gauge\nroomcast_webhook_deliveries_owned \(owned)\n"
                + "# HELP roomcast_webhook_deliveries_parked Pending webhook deliveries in the store owned by other node runs (cluster: their owner sends them; when its run ends a live run takes them over).\n"
                + "# TYPE roomcast_webhook_deliveries_parked gauge\nroomcast_webhook_deliveries_parked \(parked)\n"
            response.body += Array(text.utf8)
            completion(response)
        }
    }

    func render() -> Response {
        var out: [UInt8] = []
        registry?.emit(into: &out)
        var text = ""
        func metric(_ name: String, _ type: String, _ help: String, _ value: Int) {
            text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n\(name) \(value)\n"
        }
        if let s = server {
            metric("roomcast_connections_accepted_total", "counter", "TCP connections accepted.", s.accepted)
            metric("roomcast_connections_open", "gauge", "Connections open now.", s.open)
            metric("roomcast_http_requests_total", "counter", "HTTP requests answered.", s.requests)
            metric("roomcast_websockets_opened_total", "counter", "WebSocket upgrades.", s.webSocketsOpened)
            metric("roomcast_websockets_open", "gauge", "WebSockets open now.", s.webSocketsOpen)
            metric("roomcast_slow_consumers_total", "counter", "WebSockets closed for not reading (4008).", s.slowConsumers)
            metric("roomcast_send_timeouts_total", "counter", "Connections closed because their output made no progress for the send timeout (QS-3).", s.sendTimeouts)
            metric("roomcast_outbound_shed_total", "counter", "Connections closed because all connections together held more output than the budget (QS-3).", s.shedForBudget)
            metric("roomcast_outbound_bytes", "gauge", "Bytes all connections hold queued for their peers, as of each loop's last sweep.", s.outboundBytes)
            let name = "roomcast_http_request_duration_seconds"
            text += "# HELP \(name) HTTP requests from the event-loop iteration that read them until their answer was written or queued (long-polls wait by design).\n"
            text += "# TYPE \(name) histogram\n" + s.requestDurations.render(name)
        }
        metric("roomcast_events_total", "counter", "Events published (room streams, users, sessions).", fanout.events.load(ordering: .relaxed))
        metric("roomcast_deliveries_total", "counter", "Event frames handed to WebSocket connections.", fanout.deliveries.load(ordering: .relaxed))
        metric("roomcast_store_batches_total", "counter", "Store transactions committed.", store.batchesCommitted.load(ordering: .relaxed))
        metric("roomcast_store_commits_total", "counter", "Changes made durable (group-committed in batches).", store.commitsCommitted.load(ordering: .relaxed))
        // OP-4: what the alert rules (docker/prometheus-alerts.yaml) watch.
        metric("roomcast_store_writable", "gauge", "1 while the store accepts changes; 0 while it is read-only after a failed commit (e.g. a full disk).",
               store.isWritable ? 1 : 0)
        metric("roomcast_cluster_apply_lag_entries", "gauge", "Cluster: log entries appended but not yet applied by this node (0 on a single node).",
               Int(applyLag?() ?? 0))
        let w = webhooks.stats
        metric("roomcast_webhook_pending", "gauge", "Webhook deliveries queued, waiting to retry or in flight.", w.queueDepth.load(ordering: .relaxed))
        let b = beforeSend.stats
        text += "# HELP roomcast_before_send_verdicts_total Room messages judged by apps' before-send hooks (PX-4), by verdict.\n"
        text += "# TYPE roomcast_before_send_verdicts_total counter\n"
        let counts = [("pass", b.passed.load(ordering: .relaxed)), ("drop", b.dropped.load(ordering: .relaxed)),
                      ("replace", b.replaced.load(ordering: .relaxed)), ("failed", b.failed.load(ordering: .relaxed)),
                      ("overloaded", b.overloaded.load(ordering: .relaxed))]
        for (verdict, n) in counts { text += "roomcast_before_send_verdicts_total{verdict=\"\(verdict)\"} \(n)\n" }
        metric("roomcast_before_send_waiting", "gauge", "Room messages waiting for a before-send verdict.", beforeSend.waiting)
        // QS-7: what overload did with messages, by class.
        let classes: [Lane] = [.high, .normal, .low, .transient]
        text += "# HELP roomcast_messages_admitted_total Room messages the rooms took, by class (QS-7).\n"
        text += "# TYPE roomcast_messages_admitted_total counter\n"
        for lane in classes { text += "roomcast_messages_admitted_total{class=\"\(lane.name)\"} \(messages.admitted(of: lane))\n" }
        text += "# HELP roomcast_messages_refused_total Room messages refused by a room's budget or the fan-out latency budget (42902), by class (QS-7).\n"
        text += "# TYPE roomcast_messages_refused_total counter\n"
        for lane in classes { text += "roomcast_messages_refused_total{class=\"\(lane.name)\"} \(messages.refused(of: lane))\n" }
        text += "# HELP roomcast_events_dropped_total Event deliveries dropped for connections reading slower than their rooms (told in room.gap), by class (QS-3, QS-7).\n"
        text += "# TYPE roomcast_events_dropped_total counter\n"
        for (name, n) in [("normal", fanout.droppedNormal.load(ordering: .relaxed)), ("low", fanout.droppedLow.load(ordering: .relaxed)),
                          ("transient", fanout.droppedTransient.load(ordering: .relaxed))] {
            text += "roomcast_events_dropped_total{class=\"\(name)\"} \(n)\n"
        }
        text += fanoutDelay.render()
        out += Array(text.utf8)
        var headers = HTTPHeaders()
        headers.add("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        return Response(status: .ok, headers: headers, body: out)
    }
}
