import Chat
import Engine
import HTTP1
import Server
import Webhooks
import Wire

/// The native REST API (`/v1`, API.md): JSON in and out, every call signed (SPEC §2). Each route
/// decodes the request's DTO (Wire), builds its domain command or query, and answers once it is
/// durable.
struct RESTAPI: Sendable {
    let context: GatewayContext

    private var engine: Engine { context.engine }

    // MARK: Plumbing

    /// The signed-request pipeline every route of every surface runs behind.
    var pipeline: SignedPipeline { SignedPipeline(context: context) }

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

    /// Binds a handler to every entry of the native route table (Wire's `NativeRoute`) and to
    /// every vendor endpoint, each through the signed-request pipeline of its surface.
    func register(_ r: inout Router.Builder) {
        let api = self
        typealias R = RESTAPI
        var routes = SignedRoutes<NativeRoute>(.native, pipeline: pipeline)

        // Tokens (SPEC §2).
        routes.signed(.issueToken) { req, c, writer in api.issueToken(req, c.app, writer) }

        // App settings.
        routes.signed(.getSettings) { _, c, writer in api.settings(c.app, writer) }
        routes.signed(.updateSettings) { req, c, writer in api.updateSettings(req, c.app, writer) }

        // Ultra groups and conversation status (SPEC §4, §5).
        registerGroups(&routes)
        // Webhooks (SPEC §9).
        registerWebhooks(&routes)
        // A user's connections and rooms (PX-5).
        registerUsers(&routes)

        // Rooms (RC-9, NIM-1, NIM-10, ZIM-1/7/8).
        routes.signed(.createRoom) { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in try decodeBody(RoomSpec.self, from: req.body).command(c) }
        }
        routes.signed(.listRooms) { req, c, writer in
            let ids = R.query(req).list("ids")
            api.query(writer) { ids.isEmpty ? .roomIds(app: c.app) : .rooms(app: c.app, ids) }
        }
        // PX-5 / BX-3: the room directory, searched and paged with a cursor.
        routes.signed(.roomDirectory) { req, c, writer in
            api.query(writer) { () throws(ChatError) in .roomDirectory(app: c.app, try RoomDirectory.search(R.query(req))) }
        }
        routes.signed(.destroyRooms) { req, c, writer in
            api.command(writer) { .destroyRooms(app: c.app, R.query(req).list("ids")) }
        }
        routes.signed(.getRoom) { req, c, writer in api.query(writer) { .room(app: c.app, roomId: R.room(req)) } }
        routes.signed(.updateRoom) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(RoomUpdateSpec.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.destroyRoom) { req, c, writer in api.command(writer) { .destroyRooms(app: c.app, [R.room(req)]) } }
        routes.signed(.openRoom) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(OpenRoomRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.roomAddress) { req, c, writer in api.address(req, c.app, writer) }

        // Members (RC-9, NIM-12, NIM-13, NIM-6).
        routes.signed(.listMembers) { req, c, writer in
            api.query(writer) { () throws(ChatError) in try MembersRequest(query: R.query(req)).query(c, roomId: R.room(req)) }
        }
        routes.signed(.queryMembers) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                .isInRoom(app: c.app, roomId: R.room(req), try decodeBody(UserIdsRequest.self, from: req.body).userIds)
            }
        }
        routes.signed(.getMember) { req, c, writer in
            api.query(writer) { .membersByIds(app: c.app, roomId: R.room(req), [R.param(req, "userId")]) }
        }
        routes.signed(.setRole) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(RoleRequest.self, from: req.body).command(c, roomId: R.room(req), userId: R.param(req, "userId"))
            }
        }
        routes.signed(.kickMember) { req, c, writer in
            api.command(writer) { KickRequest(query: R.query(req)).command(c, roomId: R.room(req), userId: R.param(req, "userId")) }
        }

        // Blocks (RC-5, NIM-12).
        routes.signed(.blockUsers) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(BlockRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.unblockUsers) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try UnblockRequest(query: R.query(req)).command(c, roomId: R.room(req)) }
        }
        routes.signed(.listBlocks) { req, c, writer in api.query(writer) { .blocks(app: c.app, roomId: R.room(req)) } }

        // Mutes (RC-6 0/1, NIM-12, NIM-15).
        routes.signed(.muteUsers) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(MuteRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.unmuteUsers) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try UnmuteRequest(query: R.query(req)).command(c, roomId: R.room(req)) }
        }
        routes.signed(.listMutes) { req, c, writer in api.query(writer) { .mutes(app: c.app, roomId: R.room(req)) } }

        // Room-wide mute and its allowlist (RC-6 2–5, NIM-17).
        routes.signed(.muteRoom) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(RoomMuteRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.allowSenders) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(AllowlistRequest.self, from: req.body).add(c, roomId: R.room(req)) }
        }
        routes.signed(.disallowSenders) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try AllowlistRequest(query: R.query(req)).remove(c, roomId: R.room(req)) }
        }
        routes.signed(.listAllowedSenders) { req, c, writer in
            api.query(writer) { .allowlist(app: c.app, roomId: R.room(req)) }
        }

        // Global mutes (RC-6 6/7, RC-7).
        routes.signed(.globalMute) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(GlobalMuteRequest.self, from: req.body).command(c) }
        }
        routes.signed(.globalUnmute) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try GlobalUnmuteRequest(query: R.query(req)).command(c) }
        }
        routes.signed(.listGlobalMutes) { _, c, writer in api.query(writer) { .globalMutes(app: c.app) } }
        // The audit trail (MO-8).
        routes.signed(.getAudit) { req, c, writer in api.query(writer) { () throws(ChatError) in try AuditRequest.query(c, R.query(req)) } }

        // Attributes (RC-10, ZIM-8).
        routes.signed(.setAttributes) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(SetAttributesRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.removeAttributes) { req, c, writer in
            api.command(writer) { AttributeKeysRequest(query: R.query(req)).remove(c, roomId: R.room(req)) }
        }
        routes.signed(.getAttributes) { req, c, writer in
            api.query(writer) { AttributeKeysRequest(query: R.query(req)).query(c, roomId: R.room(req)) }
        }

        // Queue (NIM-16).
        routes.signed(.getQueue) { req, c, writer in api.query(writer) { .queue(app: c.app, roomId: R.room(req)) } }
        routes.signed(.offerQueueElement) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(QueueOfferRequest.self, from: req.body).command(c, roomId: R.room(req), key: R.param(req, "key"))
            }
        }
        routes.signed(.updateQueueElements) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(QueueBatchRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }
        routes.signed(.pollQueueElement) { req, c, writer in
            api.command(writer) { QueuePollRequest(key: R.param(req, "key")).command(c, roomId: R.room(req)) }
        }
        routes.signed(.pollQueueHead) { req, c, writer in
            api.command(writer) { QueuePollRequest(key: nil).command(c, roomId: R.room(req)) }
        }
        routes.signed(.dropQueue) { req, c, writer in
            api.command(writer) { .queueDrop(app: c.app, roomId: R.room(req), .server) }
        }

        // Messages (NIM-8).
        routes.signed(.sendMessage) { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in
                try decodeBody(SendMessageRequest.self, from: req.body).command(c, roomId: R.room(req))
            }
        }
        // Many rooms at once (AU-3).
        routes.signed(.sendToRooms) { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in try decodeBody(SendToRoomsRequest.self, from: req.body).command(c) }
        }
        routes.signed(.broadcast) { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in try decodeBody(BroadcastRequest.self, from: req.body).command(c) }
        }
        routes.signed(.getHistory) { req, c, writer in
            api.query(writer) { () throws(ChatError) in try HistoryRequest(query: R.query(req)).query(c, roomId: R.room(req)) }
        }
        // MO-2.
        routes.signed(.listSensitiveWords) { _, c, writer in api.query(writer) { .sensitiveWords(app: c.app) } }
        routes.signed(.addSensitiveWords) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(SensitiveWordsRequest.self, from: req.body).command(c) }
        }
        routes.signed(.removeSensitiveWords) { req, c, writer in
            api.command(writer) { RemoveSensitiveWordsRequest(query: R.query(req)).command(c) }
        }
        // MO-1.
        routes.signed(.recallMessage) { req, c, writer in
            api.command(writer) { RecallRequest(query: R.query(req), messageId: R.param(req, "messageId")).command(c, roomId: R.room(req)) }
        }

        // Member tags (AU-1).
        routes.signed(.setMemberTags) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(SetMemberTagsRequest.self, from: req.body).command(c, roomId: R.room(req), userId: R.param(req, "userId"))
            }
        }
        routes.signed(.tagMembers) { req, c, writer in
            api.query(writer) { () throws(ChatError) in try TagMembersRequest(query: R.query(req)).query(c, roomId: R.room(req), tag: R.param(req, "tag")) }
        }
        routes.signed(.roomTags) { req, c, writer in
            api.query(writer) { .roomTags(app: c.app, roomId: R.room(req)) }
        }
        routes.signed(.tagMembersCount) { req, c, writer in
            api.query(writer) { .tagMembersCount(app: c.app, roomId: R.room(req), tag: R.param(req, "tag")) }
        }
        routes.signed(.tagMute) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(TagMuteRequest.self, from: req.body).command(c, roomId: R.room(req), tag: R.param(req, "tag"))
            }
        }
        // Room QoS (QS-4, QS-6): a room's protected senders and its distribution.
        routes.signed(.listProtectedSenders) { req, c, writer in api.query(writer) { .protectedSenders(app: c.app, roomId: R.room(req)) } }
        routes.signed(.addProtectedSenders) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                try decodeBody(ProtectedSendersRequest.self, from: req.body).command(c, roomId: R.room(req), add: true)
            }
        }
        routes.signed(.removeProtectedSenders) { req, c, writer in
            api.command(writer) { ProtectedSendersRequest(query: R.query(req)).command(c, roomId: R.room(req), add: false) }
        }
        routes.signed(.setDistribution) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(DistributionRequest.self, from: req.body).command(c, roomId: R.room(req)) }
        }

        r.add(routes)
        // The vendors' own server APIs (SPEC §8).
        registerVendors(&r)
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
                                     observer: b.observer ?? false, tags: try b.checkedTags())
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
