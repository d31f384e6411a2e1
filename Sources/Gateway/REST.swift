import Chat
import Engine
import HTTP1
import Server
import Webhooks
import Wire
import Replication

/// The native REST API (`/v1`, API.md): JSON in and out, every call signed (SPEC §2). Each route
/// decodes the request's DTO (Wire), builds its domain command or query, and answers once it is
/// durable.
struct RESTAPI: Sendable {
    let context: GatewayContext

    private var engine: Engine { context.engine }

    // MARK: Plumbing

    typealias Handler = @Sendable (Request, Caller, ResponseWriter) -> Void

    /// Verifies the signature, then runs `handler` as the app server of the signing app.
    func signed(_ handler: @escaping Handler) -> @Sendable (Request, ResponseWriter) -> Void {
        let auth = context.authenticator
        let apps = context.apps
        let clock = context.clock
        let idempotency = context.idempotency
        let caughtUp = context.caughtUp
        let engine = context.engine
        return { request, writer in
            // A node that has not caught up with its log yet would answer from a stale replica.
            guard caughtUp.isReady else {
                return writer.send(Self.error(GatewayError(.unavailable, "the node is catching up with its log; try again shortly")))
            }
            switch auth.authenticate(request.head, body: request.body) {
            case .failure(let e): writer.send(Self.error(e))
            case .success(let accepted):
                let app = accepted.app
                // The call's nonce goes into the log (with its first change, or alone once it is
                // answered), so no node of a cluster accepts the call again.
                let writer = Self.stamped(writer, accepted, engine: engine)
                // PX-1: the app's calls per second; another app's bucket is not touched.
                guard apps.takeRESTCall(app, now: clock()) else {
                    return writer.send(Self.error(ChatError(.rateLimited, "the app's REST rate limit (calls per second) was reached", field: nil)))
                }
                // PX-2: a change sent with an Idempotency-Key is made once and its answer replayed.
                if request.head.method != .GET && request.head.method != .HEAD,
                   let (key, header) = Idempotency.key(request, vendorRequestID: false) {
                    return idempotency.run(request, app: app, key: key, header: header, writer: writer, refuse: { Self.refusal($0) }) { w in
                        handler(request, .server(app), w)
                    }
                }
                handler(request, .server(app), writer)
            }
        }
    }

    /// A writer that carries the call's stamp to the engine and, once the call is answered, sends
    /// its nonce to the log if none of its changes did.
    static func stamped(_ writer: ResponseWriter, _ accepted: RequestAuthenticator.Accepted, engine: Engine) -> ResponseWriter {
        let stamp = RequestStamp(nonce: RequestNonce(app: accepted.app, nonce: accepted.nonce), nonceField: accepted.nonceField)
        return ResponseWriter(attachment: CallAttachment(stamp: stamp, keeper: nil)) { response in
            engine.finish(stamp)
            writer.send(response)
        }
    }

    /// PX-2 refusals on the native surface.
    static func refusal(_ r: Idempotency.Refusal) -> Response {
        switch r {
        case .invalidKey(let header):
            return error(ChatError(.invalidParameter, "\(header) is 1 to \(Idempotency.maxKeyBytes) visible ASCII characters", field: header))
        case .reused(let header):
            return error(GatewayError(.idempotencyKeyReused, "this \(header) was used with another request", field: header))
        case .inFlight(let header):
            return error(GatewayError(.idempotencyKeyInFlight, "a request with this \(header) is still being answered", field: header))
        case .lost(let header):
            return error(Idempotency.lostError(header))
        }
    }

    static func error(_ e: GatewayError) -> Response {
        .json(HTTPStatus(code: e.code.httpStatus), ErrorTable.body(e))
    }

    static func error(_ e: ChatError) -> Response {
        var response = Response.json(HTTPStatus(code: e.code.httpStatus), ErrorTable.body(e))
        if let seconds = ErrorTable.retryAfter(e.code) { response.headers.add("Retry-After", String(seconds)) }
        return response
    }

    static func respond(_ result: Result<Reply, ChatError>, status: HTTPStatus = .ok) -> Response {
        switch result {
        case .success(let reply): return .json(status, Encode.replyBytes(reply))
        case .failure(let e): return error(e)
        }
    }

    /// Builds the command (refusing bad input with a field-named error), applies it, and answers
    /// once it is durable.
    func command(_ writer: ResponseWriter, status: HTTPStatus = .ok, _ build: () throws(ChatError) -> Command) {
        do {
            let command = try build()
            engine.submit(command, stamp: writer.stamp, replyTo: .answer(writer) { result in Self.respond(result, status: status) })
        } catch {
            writer.send(Self.error(error))
        }
    }

    /// Builds the query and answers it.
    func query(_ writer: ResponseWriter, _ build: () throws(ChatError) -> Query) {
        do {
            engine.query(try build()) { result in writer.send(Self.respond(result)) }
        } catch {
            writer.send(Self.error(error))
        }
    }

    static func param(_ request: Request, _ name: String) -> String { request.pathParameters[name] ?? "" }
    static func room(_ request: Request) -> String { param(request, "roomId") }
    static func query(_ request: Request) -> QueryParameters { QueryParameters { request.query($0) } }

    // MARK: Routes

    func register(_ r: inout Router.Builder) {
        let api = self
        typealias R = RESTAPI

        // Tokens (SPEC §2).
        r.add(.POST, "/v1/users/{userId}/tokens", signed { req, c, writer in api.issueToken(req, c.app, writer) })

        // App settings.
        r.add(.GET, "/v1/settings", signed { _, c, writer in api.settings(c.app, writer) })
        r.add(.PATCH, "/v1/settings", signed { req, c, writer in api.updateSettings(req, c.app, writer) })

        // Ultra groups and conversation status (SPEC §4, §5).
        registerGroups(&r)
        // Webhooks (SPEC §9).
        registerWebhooks(&r)
        // A user's connections and rooms (PX-5).
        registerUsers(&r)
        // The vendors' own server APIs (SPEC §8).
        registerVendors(&r)

        // Rooms (RC-9, NIM-1, NIM-10, ZIM-1/7/8).
        r.add(.POST, "/v1/rooms", signed { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in try decodeBody(RoomSpec.self, from: req.body).command(c) }
        })
        r.add(.GET, "/v1/rooms", signed { req, c, writer in
            let ids = R.query(req).list("ids")
            api.query(writer) { ids.isEmpty ? .roomIds(app: c.app) : .rooms(app: c.app, ids) }
        })
        // PX-5 / BX-3: the room directory, searched and paged with a cursor.
        r.add(.GET, "/v1/directory/rooms", signed { req, c, writer in
            api.query(writer) { () throws(ChatError) in .roomDirectory(app: c.app, try RoomDirectory.search(R.query(req))) }
        })
        r.add(.DELETE, "/v1/rooms", signed { req, c, writer in
            api.command(writer) { .destroyRooms(app: c.app, R.query(req).list("ids")) }
        })
        r.add(.GET, "/v1/rooms/{roomId}", signed { req, c, writer in api.query(writer) { .room(app: c.app, roomId: R.room(req)) } })
        r.add(.PATCH, "/v1/rooms/{roomId}", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(RoomUpdateSpec.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}", signed { req, c, writer in api.command(writer) { .destroyRooms(app: c.app, [R.room(req)]) } })
        r.add(.PUT, "/v1/rooms/{roomId}/open", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(OpenRoomRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.GET, "/v1/rooms/{roomId}/address", signed { req, c, writer in api.address(req, c.app, writer) })

        // Members (RC-9, NIM-12, NIM-13, NIM-6).
        r.add(.GET, "/v1/rooms/{roomId}/members", signed { req, c, writer in
            api.query(writer) { () throws(ChatError) in try MembersRequest(query: R.query(req)).query(c, roomId: R.room(req)) }
        })
        r.add(.POST, "/v1/rooms/{roomId}/members/query", signed { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                .isInRoom(app: c.app, roomId: R.room(req), try decodeBody(UserIdsRequest.self, from: req.body).userIds)
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/members/{userId}", signed { req, c, writer in
            api.query(writer) { .membersByIds(app: c.app, roomId: R.room(req), [R.param(req, "userId")]) }
        })
        r.add(.PUT, "/v1/rooms/{roomId}/members/{userId}/role", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(RoleRequest.self, from: req.body).command(c, roomId: R.room(req), userId: R.param(req, "userId"))
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/members/{userId}", signed { req, c, writer in
            api.command(writer) { KickRequest(query: R.query(req)).command(c, roomId: R.room(req), userId: R.param(req, "userId")) }
        })

        // Blocks (RC-5, NIM-12).
        r.add(.POST, "/v1/rooms/{roomId}/blocks", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(BlockRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/blocks", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try UnblockRequest(query: R.query(req)).command(c, roomId: R.room(req)) }
        })
        r.add(.GET, "/v1/rooms/{roomId}/blocks", signed { req, c, writer in api.query(writer) { .blocks(app: c.app, roomId: R.room(req)) } })

        // Mutes (RC-6 0/1, NIM-12, NIM-15).
        r.add(.POST, "/v1/rooms/{roomId}/mutes", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(MuteRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/mutes", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try UnmuteRequest(query: R.query(req)).command(c, roomId: R.room(req)) }
        })
        r.add(.GET, "/v1/rooms/{roomId}/mutes", signed { req, c, writer in api.query(writer) { .mutes(app: c.app, roomId: R.room(req)) } })

        // Room-wide mute and its allowlist (RC-6 2–5, NIM-17).
        r.add(.PUT, "/v1/rooms/{roomId}/mute", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(RoomMuteRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.POST, "/v1/rooms/{roomId}/mute-allowlist", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(AllowlistRequest.self, from: req.body).add(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/mute-allowlist", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try AllowlistRequest(query: R.query(req)).remove(c, roomId: R.room(req)) }
        })
        r.add(.GET, "/v1/rooms/{roomId}/mute-allowlist", signed { req, c, writer in
            api.query(writer) { .allowlist(app: c.app, roomId: R.room(req)) }
        })

        // Global mutes (RC-6 6/7, RC-7).
        r.add(.POST, "/v1/global-mutes", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(GlobalMuteRequest.self, from: req.body).command(c) }
        })
        r.add(.DELETE, "/v1/global-mutes", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try GlobalUnmuteRequest(query: R.query(req)).command(c) }
        })
        r.add(.GET, "/v1/global-mutes", signed { _, c, writer in api.query(writer) { .globalMutes(app: c.app) } })

        // Attributes (RC-10, ZIM-8).
        r.add(.PUT, "/v1/rooms/{roomId}/attributes", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(SetAttributesRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/attributes", signed { req, c, writer in
            api.command(writer) { AttributeKeysRequest(query: R.query(req)).remove(c, roomId: R.room(req)) }
        })
        r.add(.GET, "/v1/rooms/{roomId}/attributes", signed { req, c, writer in
            api.query(writer) { AttributeKeysRequest(query: R.query(req)).query(c, roomId: R.room(req)) }
        })

        // Queue (NIM-16).
        r.add(.GET, "/v1/rooms/{roomId}/queue", signed { req, c, writer in api.query(writer) { .queue(app: c.app, roomId: R.room(req)) } })
        r.add(.PUT, "/v1/rooms/{roomId}/queue/{key}", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(QueueOfferRequest.self, from: req.body).command(c, roomId: R.room(req), key: R.param(req, "key"))
            }
        })
        r.add(.POST, "/v1/rooms/{roomId}/queue/batch", signed { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(QueueBatchRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/queue/{key}", signed { req, c, writer in
            api.command(writer) { QueuePollRequest(key: R.param(req, "key")).command(c, roomId: R.room(req)) }
        })
        r.add(.POST, "/v1/rooms/{roomId}/queue/poll", signed { req, c, writer in
            api.command(writer) { QueuePollRequest(key: nil).command(c, roomId: R.room(req)) }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/queue", signed { req, c, writer in
            api.command(writer) { .queueDrop(app: c.app, roomId: R.room(req), .server) }
        })

        // Messages (NIM-8).
        r.add(.POST, "/v1/rooms/{roomId}/messages", signed { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in
                try decodeBody(SendMessageRequest.self, from: req.body).command(c, roomId: R.room(req))
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/messages", signed { req, c, writer in
            api.query(writer) { () throws(ChatError) in try HistoryRequest(query: R.query(req)).query(c, roomId: R.room(req)) }
        })
    }

    // MARK: Handlers with more to do

    private func issueToken(_ req: Request, _ app: String, _ writer: ResponseWriter) {
        do throws(ChatError) {
            let b = try decodeBody(TokenRequest.self, from: req.body)
            let user = Self.param(req, "userId")
            guard !user.isEmpty, user.utf8.count <= 64 else { throw ChatError(.invalidParameter, "userId is 1 to 64 bytes", field: "userId") }
            let ttl = b.ttlSeconds ?? context.defaultTokenTTLSeconds
            guard ttl >= 1 && ttl <= Limits.maxTokenTTLSeconds else {
                throw ChatError(.invalidParameter, "ttlSeconds must be between 1 and \(Limits.maxTokenTTLSeconds)", field: "ttlSeconds")
            }
            guard let secret = context.apps.secret(app) else { throw ChatError(.unknownApp, "unknown app", field: "appKey") }
            let now = context.clock() / 1000
            let claims = TokenClaims(sub: user, app: app, exp: now + ttl, iat: now, name: b.nickname, avatar: b.avatar, device: b.device,
                                     observer: b.observer ?? false)
            let token = ClientToken.mint(claims, secret: secret)
            writer.send(.json(.created, JSONWriter.object { w in
                w.field("token", token)
                w.field("userId", user)
                w.field("expiresAt", claims.exp * 1000)
            }))
        } catch {
            writer.send(Self.error(error))
        }
    }

    /// NIM-3 address lookup: the WebSocket URLs that serve the room.
    private func address(_ req: Request, _ app: String, _ writer: ResponseWriter) {
        let roomId = Self.room(req)
        let clientType = req.query("clientType") ?? "web"
        guard ["web", "other", "weblink", "commonlink"].contains(clientType) else {
            writer.send(Self.error(ChatError(.invalidParameter, "clientType must be web or other", field: "clientType")))
            return
        }
        if let user = req.query("userId"), user.isEmpty || user.utf8.count > 64 {
            writer.send(Self.error(ChatError(.invalidParameter, "userId is 1 to 64 bytes", field: "userId")))
            return
        }
        let urls = context.publicURLs.value
        engine.query(.room(app: app, roomId: roomId)) { result in
            switch result {
            case .failure(let e): writer.send(Self.error(e))
            case .success:
                writer.send(.json(.ok, JSONWriter.object { w in
                    w.field("roomId", roomId)
                    w.field("addresses", urls)
                }))
            }
        }
    }

    private func settings(_ app: String, _ writer: ResponseWriter) {
        engine.query(.appSettings(app: app)) { result in writer.send(Self.respond(result)) }
    }

    /// One command the engine applies: concurrent changes of different fields all stay, and the
    /// Origin allowlist is durable in the same batch as the rest.
    private func updateSettings(_ req: Request, _ app: String, _ writer: ResponseWriter) {
        let apps = context.apps
        do throws(ChatError) {
            let patch = try decodeBody(SettingsPatchRequest.self, from: req.body).patch()
            if let url = patch.beforeSend?.url, !url.isEmpty {
                // PX-4: the hook obeys the webhooks' egress policy (WH-5).
                do throws(WebhookURL.Problem) {
                    _ = try WebhookURL(url, allowPrivate: context.webhooks.operatorAllowsPrivate(app: app))
                } catch {
                    if case .privateTarget = error { throw ChatError(.permissionDenied, "beforeSend.\(error)", field: "beforeSend.url") }
                    throw ChatError(.invalidParameter, "beforeSend.\(error)", field: "beforeSend.url")
                }
            }
            engine.submit(.updateAppSettings(app: app, patch), stamp: writer.stamp, replyTo: .answer(writer, done: { result in
                if case .success(.appSettings(let s)) = result, var entry = apps.app(app) {
                    entry.allowedOrigins = s.allowedOrigins
                    entry.restCallsPerSecond = s.restCallsPerSecond
                    entry.clientMessagesPerSecond = s.clientMessagesPerSecond
                    apps.set(entry)
                }
            }) { result in Self.respond(result) })
        } catch {
            writer.send(Self.error(error))
        }
    }
}
