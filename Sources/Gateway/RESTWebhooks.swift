import Chat
import HTTP1
import Server
import Webhooks
import Wire

/// REST for webhook endpoints, their delivery log and replays (SPEC §9, WH-1..WH-5). An app may set
/// `allowPrivateNetwork` only when the operator listed it (`--webhook-allow-private`): otherwise
/// 403 (40301) on that field.
extension RESTAPI {
    /// `allowPrivateNetwork` is what holds: asked for by the endpoint and allowed by the operator.
    static func endpointJSON(_ e: WebhookEndpoint, reachesPrivate: Bool, withSecret: Bool, now: Int64, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("id", e.id)
        w.field("url", e.url)
        w.field("events", e.events.isEmpty ? ["*"] : e.events.map(\.rawValue))
        w.field("format", e.format.rawValue)
        w.field("allowPrivateNetwork", reachesPrivate)
        w.field("enabled", e.enabled)
        w.field("disabledReason", e.disabledReason)
        w.field("origin", e.origin)
        w.field("createdAt", e.createdAt)
        w.field("rotating", e.signingSecrets(now: now).count > 1)
        if withSecret { w.field("secret", e.secret) }
        w.endObject()
    }

    static func endpointBody(_ e: WebhookEndpoint, reachesPrivate: Bool, withSecret: Bool, now: Int64) -> [UInt8] {
        JSONWriter.object { w in
            w.key("endpoint")
            endpointJSON(e, reachesPrivate: reachesPrivate, withSecret: withSecret, now: now, &w)
        }
    }

    static func deliveriesBody(_ page: WebhookService.DeliveryPage) -> [UInt8] {
        JSONWriter.object { w in
            w.key("deliveries")
            w.beginArray()
            for d in page.deliveries {
                w.beginObject()
                w.field("messageId", d.messageId)
                w.field("type", d.type.rawValue)
                w.field("messageTime", d.messageTime)
                w.field("status", d.status.rawValue)
                w.field("attempts", d.attempts)
                w.field("nextAttemptAt", d.nextAttemptAt)
                w.field("lastStatus", d.lastStatus)
                w.field("lastError", d.lastError)
                w.field("updatedAt", d.updatedAt)
                w.key("history")
                w.beginArray()
                for a in d.history {
                    w.beginObject()
                    w.field("attempt", a.attempt)
                    w.field("time", a.time)
                    w.field("status", a.status)
                    w.field("error", a.error)
                    w.field("durationMs", a.durationMs)
                    w.endObject()
                }
                w.endArray()
                w.endObject()
            }
            w.endArray()
            w.key("next")
            if let n = page.next { w.int(n) } else { w.null() }
        }
    }

    func registerWebhooks(_ routes: inout SignedRoutes<NativeRoute>) {
        let hooks = context.webhooks
        let clock = context.clock
        // WH-1, WH-4, CL-6: changes go through the engine's log (in a cluster every node applies
        // them alike) and are answered once this node has applied them.
        let engine = context.engine
        @Sendable func change(_ request: WebhookService.AdminRequest, _ writer: ResponseWriter, status: HTTPStatus = .ok, withSecret: Bool) {
            engine.webhookChange(request) { result in
                switch result {
                case .success(.endpoint(let e)):
                    writer.send(.json(status, Self.endpointBody(e, reachesPrivate: hooks.mayReachPrivate(e), withSecret: withSecret, now: clock())))
                case .success(.removed): writer.send(.json(.ok, "{}"))
                case .success(.queued(let n)): writer.send(.json(.ok, JSONWriter.object { w in w.field("queued", n) }))
                case .failure(let e): writer.send(Self.error(e))
                }
            }
        }

        routes.signed(.createWebhook) { req, caller, writer in
            do throws(ChatError) {
                let b = try decodeBody(WebhookService.EndpointSpec.self, from: req.body)
                change(.create(app: caller.app, b), writer, status: .created, withSecret: true)
            } catch {
                writer.send(Self.error(error))
            }
        }
        routes.signed(.listWebhooks) { _, caller, writer in
            let app = caller.app
            let now = clock()
            writer.send(.json(.ok, JSONWriter.object { w in
                w.key("endpoints")
                w.beginArray()
                for e in hooks.endpoints(app: app) { Self.endpointJSON(e, reachesPrivate: hooks.mayReachPrivate(e), withSecret: false, now: now, &w) }
                w.endArray()
            }))
        }
        routes.signed(.getWebhook) { req, caller, writer in
            let app = caller.app
            guard let e = hooks.endpoint(app: app, id: Self.param(req, "id")) else {
                writer.send(Self.error(ChatError(.notFound, "no webhook endpoint \(Self.param(req, "id"))", field: "id")))
                return
            }
            writer.send(.json(.ok, Self.endpointBody(e, reachesPrivate: hooks.mayReachPrivate(e), withSecret: false, now: clock())))
        }
        routes.signed(.updateWebhook) { req, caller, writer in
            do throws(ChatError) {
                let b = try decodeBody(WebhookService.EndpointSpec.self, from: req.body)
                change(.update(app: caller.app, id: Self.param(req, "id"), b), writer, withSecret: false)
            } catch {
                writer.send(Self.error(error))
            }
        }
        routes.signed(.deleteWebhook) { req, caller, writer in
            change(.delete(app: caller.app, id: Self.param(req, "id")), writer, withSecret: false)
        }
        routes.signed(.rotateWebhookSecret) { req, caller, writer in
            change(.rotateSecret(app: caller.app, id: Self.param(req, "id")), writer, withSecret: true)
        }
        routes.signed(.webhookDeliveries) { req, caller, writer in
            let app = caller.app
            do throws(ChatError) {
                var status: DeliveryStatus?
                if let s = req.query("status") {
                    guard let v = DeliveryStatus(rawValue: s) else {
                        throw ChatError(.invalidParameter, "status must be pending, delivered or dead", field: "status")
                    }
                    status = v
                }
                let before = try Self.query(req).int("before").map(Int64.init)
                hooks.deliveries(app: app, id: Self.param(req, "id"), status: status, before: before, limit: try Self.query(req).int("limit") ?? 20) { result in
                    switch result {
                    case .success(let page): writer.send(.json(.ok, Self.deliveriesBody(page)))
                    case .failure(let e): writer.send(Self.error(e))
                    }
                }
            } catch {
                writer.send(Self.error(error))
            }
        }
        routes.signed(.replayWebhook) { req, caller, writer in
            do throws(ChatError) {
                let b = try decodeBody(WebhookReplayRequest.self, from: req.body)
                change(.replay(app: caller.app, id: Self.param(req, "id"), messageIds: b.messageIds, since: b.since), writer, withSecret: false)
            } catch {
                writer.send(Self.error(error))
            }
        }
    }
}
