import Chat
import Foundation
import HTTP1
import Server

/// The native REST API (`/v1`, API.md): JSON in and out, every call signed (SPEC §2).
struct RESTAPI: Sendable {
    let context: GatewayContext

    private var engine: Engine { context.engine }

    // MARK: Plumbing

    typealias Handler = @Sendable (Request, String, ResponseWriter) -> Void

    /// Verifies the signature, then runs `handler` with the app key.
    func signed(_ handler: @escaping Handler) -> @Sendable (Request, ResponseWriter) -> Void {
        let auth = context.authenticator
        return { request, writer in
            switch auth.authenticate(request.head, body: request.body) {
            case .failure(let e): writer.send(Self.error(e))
            case .success(let app): handler(request, app, writer)
            }
        }
    }

    static func error(_ e: GatewayError) -> Response {
        .json(HTTPStatus(code: e.code.httpStatus), ErrorTable.body(e))
    }

    static func error(_ e: ChatError) -> Response {
        .json(HTTPStatus(code: e.code.httpStatus), ErrorTable.body(e))
    }

    static func respond(_ result: Result<Reply, ChatError>, status: HTTPStatus = .ok) -> Response {
        switch result {
        case .success(let reply): return .json(status, Encode.replyBytes(reply))
        case .failure(let e): return error(e)
        }
    }

    /// Applies a command; answers once it is durable.
    func run(_ command: Command, _ writer: ResponseWriter, status: HTTPStatus = .ok) {
        engine.submit(command, replyTo: .callback({ result in writer.send(Self.respond(result, status: status)) }))
    }

    func ask(_ q: Query, _ writer: ResponseWriter) {
        engine.query(q) { result in writer.send(Self.respond(result)) }
    }

    /// Builds the command (refusing bad input with a field-named error) and runs it.
    func attempt(_ writer: ResponseWriter, status: HTTPStatus = .ok, _ build: () throws(ChatError) -> Command) {
        do {
            run(try build(), writer, status: status)
        } catch {
            writer.send(Self.error(error))
        }
    }

    func attemptQuery(_ writer: ResponseWriter, _ build: () throws(ChatError) -> Query) {
        do {
            ask(try build(), writer)
        } catch {
            writer.send(Self.error(error))
        }
    }

    static func list(_ request: Request, _ name: String) -> [String] {
        (request.query(name) ?? "").split(separator: ",").map(String.init).filter { !$0.isEmpty }
    }

    static func bool(_ request: Request, _ name: String) throws(ChatError) -> Bool? {
        guard let v = request.query(name) else { return nil }
        switch v {
        case "true", "1": return true
        case "false", "0": return false
        default: throw ChatError(.invalidParameter, "\(name) must be true or false", field: name)
        }
    }

    static func int(_ request: Request, _ name: String) throws(ChatError) -> Int? {
        guard let v = request.query(name) else { return nil }
        guard let i = Int(v) else { throw ChatError(.invalidParameter, "\(name) must be an integer", field: name) }
        return i
    }

    static func param(_ request: Request, _ name: String) -> String { request.pathParameters[name] ?? "" }

    static func rc(_ needNotify: Bool?, _ extra: String?) -> RCNotify? {
        needNotify == true ? RCNotify(extra: extra ?? "") : nil
    }

    static func nim(_ notifyExt: String?) -> NIMNotify? {
        notifyExt.map { NIMNotify(notifyExt: $0) }
    }

    // MARK: Routes

    func register(_ r: inout Router.Builder) {
        let api = self

        // Tokens (SPEC §2).
        r.add(.POST, "/v1/users/{userId}/tokens", signed { req, app, writer in api.issueToken(req, app, writer) })

        // App settings.
        r.add(.GET, "/v1/settings", signed { _, app, writer in api.settings(app, writer) })
        r.add(.PATCH, "/v1/settings", signed { req, app, writer in api.updateSettings(req, app, writer) })

        // Ultra groups and conversation status (SPEC §4, §5).
        registerGroups(&r)
        // Webhooks (SPEC §9).
        registerWebhooks(&r)

        // Rooms (RC-9, NIM-1, NIM-10, ZIM-1/7/8).
        r.add(.POST, "/v1/rooms", signed { req, app, writer in
            api.attempt(writer, status: .created) { () throws(ChatError) in
                .createRoom(app: app, try decodeBody(RoomSpec.self, from: req.body).config())
            }
        })
        r.add(.GET, "/v1/rooms", signed { req, app, writer in
            let ids = Self.list(req, "ids")
            api.attemptQuery(writer) { () throws(ChatError) in
                ids.isEmpty ? .roomIds(app: app) : .rooms(app: app, ids)
            }
        })
        r.add(.DELETE, "/v1/rooms", signed { req, app, writer in
            api.run(.destroyRooms(app: app, Self.list(req, "ids")), writer)
        })
        r.add(.GET, "/v1/rooms/{roomId}", signed { req, app, writer in api.ask(.room(app: app, roomId: Self.param(req, "roomId")), writer) })
        r.add(.PATCH, "/v1/rooms/{roomId}", signed { req, app, writer in
            api.attempt(writer) { () throws(ChatError) in
                let spec = try decodeBody(RoomUpdateSpec.self, from: req.body)
                return .updateRoom(app: app, roomId: Self.param(req, "roomId"), try spec.update(), .server, nim: spec.nim)
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}", signed { req, app, writer in
            api.run(.destroyRooms(app: app, [Self.param(req, "roomId")]), writer)
        })
        r.add(.PUT, "/v1/rooms/{roomId}/open", signed { req, app, writer in
            struct Body: Decodable {
                var open: Bool
                var notifyExt: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .setRoomOpen(app: app, roomId: Self.param(req, "roomId"), b.open, .server, nim: NIMNotify(notifyExt: b.notifyExt ?? ""))
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/address", signed { req, app, writer in api.address(req, app, writer) })

        // Members (RC-9, NIM-12, NIM-13, NIM-6).
        r.add(.GET, "/v1/rooms/{roomId}/members", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                .members(app: app, roomId: Self.param(req, "roomId"), try parseMemberFilter(req.query("type")),
                         try parseOrder(req.query("order"), default: .ascending), limit: try Self.int(req, "limit") ?? 100, after: req.query("cursor"))
            }
        })
        r.add(.POST, "/v1/rooms/{roomId}/members/query", signed { req, app, writer in
            struct Body: Decodable { var userIds: [String] }
            api.attemptQuery(writer) { () throws(ChatError) in
                .isInRoom(app: app, roomId: Self.param(req, "roomId"), try decodeBody(Body.self, from: req.body).userIds)
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/members/{userId}", signed { req, app, writer in
            api.ask(.membersByIds(app: app, roomId: Self.param(req, "roomId"), [Self.param(req, "userId")]), writer)
        })
        r.add(.PUT, "/v1/rooms/{roomId}/members/{userId}/role", signed { req, app, writer in
            struct Body: Decodable {
                var role: String
                var notifyExt: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .setRole(app: app, roomId: Self.param(req, "roomId"), target: Self.param(req, "userId"), .assign(try RoleTarget.parse(b.role)),
                                .server, notifyExt: b.notifyExt ?? "")
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/members/{userId}", signed { req, app, writer in
            api.run(.kick(app: app, roomId: Self.param(req, "roomId"), target: Self.param(req, "userId"), .server,
                          notifyExt: req.query("notifyExt") ?? ""), writer)
        })

        // Blocks (RC-5, NIM-12).
        r.add(.POST, "/v1/rooms/{roomId}/blocks", signed { req, app, writer in
            struct Body: Decodable {
                var userIds: [String]
                var minutes: Int?
                var needNotify: Bool?
                var extra: String?
                var notifyExt: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .block(app: app, roomId: Self.param(req, "roomId"), b.userIds, minutes: b.minutes, .server, rc: Self.rc(b.needNotify, b.extra),
                              nim: Self.nim(b.notifyExt))
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/blocks", signed { req, app, writer in
            api.attempt(writer) { () throws(ChatError) in
                .unblock(app: app, roomId: Self.param(req, "roomId"), Self.list(req, "userIds"), .server,
                         rc: Self.rc(try Self.bool(req, "needNotify"), req.query("extra")), nim: Self.nim(req.query("notifyExt")))
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/blocks", signed { req, app, writer in api.ask(.blocks(app: app, roomId: Self.param(req, "roomId")), writer) })

        // Mutes (RC-6 0/1, NIM-12, NIM-15).
        r.add(.POST, "/v1/rooms/{roomId}/mutes", signed { req, app, writer in
            struct Body: Decodable {
                var userIds: [String]
                var minutes: Int?
                var seconds: Int64?
                var needNotify: Bool?
                var extra: String?
                var notifyExt: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                if b.minutes != nil && b.seconds != nil {
                    throw ChatError(.invalidParameter, "give minutes or seconds, not both", field: "seconds")
                }
                let duration: MuteDuration = b.minutes.map { .minutes($0) } ?? b.seconds.map { .seconds($0) } ?? .permanent
                return .mute(app: app, roomId: Self.param(req, "roomId"), b.userIds, duration, .server, rc: Self.rc(b.needNotify, b.extra),
                             nim: Self.nim(b.notifyExt))
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/mutes", signed { req, app, writer in
            api.attempt(writer) { () throws(ChatError) in
                .unmute(app: app, roomId: Self.param(req, "roomId"), Self.list(req, "userIds"), try parseUnmuteKind(req.query("kind")), .server,
                        rc: Self.rc(try Self.bool(req, "needNotify"), req.query("extra")), nim: Self.nim(req.query("notifyExt")))
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/mutes", signed { req, app, writer in api.ask(.mutes(app: app, roomId: Self.param(req, "roomId")), writer) })

        // Room-wide mute and its allowlist (RC-6 2–5, NIM-17).
        r.add(.PUT, "/v1/rooms/{roomId}/mute", signed { req, app, writer in
            struct Body: Decodable {
                var muted: Bool
                var needNotify: Bool?
                var extra: String?
                var notifyExt: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .setRoomMuted(app: app, roomId: Self.param(req, "roomId"), b.muted, .server, rc: Self.rc(b.needNotify, b.extra),
                                     nim: Self.nim(b.notifyExt))
            }
        })
        r.add(.POST, "/v1/rooms/{roomId}/mute-allowlist", signed { req, app, writer in
            struct Body: Decodable {
                var userIds: [String]
                var needNotify: Bool?
                var extra: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .addToAllowlist(app: app, roomId: Self.param(req, "roomId"), b.userIds, rc: Self.rc(b.needNotify, b.extra))
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/mute-allowlist", signed { req, app, writer in
            api.attempt(writer) { () throws(ChatError) in
                .removeFromAllowlist(app: app, roomId: Self.param(req, "roomId"), Self.list(req, "userIds"),
                                     rc: Self.rc(try Self.bool(req, "needNotify"), req.query("extra")))
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/mute-allowlist", signed { req, app, writer in
            api.ask(.allowlist(app: app, roomId: Self.param(req, "roomId")), writer)
        })

        // Global mutes (RC-6 6/7, RC-7).
        r.add(.POST, "/v1/global-mutes", signed { req, app, writer in
            struct Body: Decodable {
                var userIds: [String]
                var minutes: Int
                var needNotify: Bool?
                var extra: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .globalMute(app: app, b.userIds, minutes: b.minutes, rc: Self.rc(b.needNotify, b.extra))
            }
        })
        r.add(.DELETE, "/v1/global-mutes", signed { req, app, writer in
            api.attempt(writer) { () throws(ChatError) in
                .globalUnmute(app: app, Self.list(req, "userIds"), rc: Self.rc(try Self.bool(req, "needNotify"), req.query("extra")))
            }
        })
        r.add(.GET, "/v1/global-mutes", signed { _, app, writer in api.ask(.globalMutes(app: app), writer) })

        // Attributes (RC-10, ZIM-8).
        r.add(.PUT, "/v1/rooms/{roomId}/attributes", signed { req, app, writer in
            struct Body: Decodable {
                var entries: [String: String]
                var ownerId: String?
                var autoDelete: Bool?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .setAttributes(app: app, roomId: Self.param(req, "roomId"), b.entries.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) },
                                      owner: b.ownerId, autoDelete: b.autoDelete ?? false, .server)
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/attributes", signed { req, app, writer in
            api.run(.removeAttributes(app: app, roomId: Self.param(req, "roomId"), Self.list(req, "keys"), .server), writer)
        })
        r.add(.GET, "/v1/rooms/{roomId}/attributes", signed { req, app, writer in
            api.ask(.attributes(app: app, roomId: Self.param(req, "roomId"), keys: Self.list(req, "keys")), writer)
        })

        // Queue (NIM-16).
        r.add(.GET, "/v1/rooms/{roomId}/queue", signed { req, app, writer in api.ask(.queue(app: app, roomId: Self.param(req, "roomId")), writer) })
        r.add(.PUT, "/v1/rooms/{roomId}/queue/{key}", signed { req, app, writer in
            struct Body: Decodable { var value: String }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .queueOffer(app: app, roomId: Self.param(req, "roomId"), key: Self.param(req, "key"), value: b.value, transient: false, .server)
            }
        })
        r.add(.POST, "/v1/rooms/{roomId}/queue/batch", signed { req, app, writer in
            struct Body: Decodable {
                var elements: [String: String]
                var needNotify: Bool?
                var notifyExt: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                let notify = b.needNotify == true ? NIMNotify(notifyExt: b.notifyExt ?? "") : nil
                return .queueBatchUpdate(app: app, roomId: Self.param(req, "roomId"), b.elements.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) },
                                         .server, notify: notify)
            }
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/queue/{key}", signed { req, app, writer in
            api.run(.queuePoll(app: app, roomId: Self.param(req, "roomId"), key: Self.param(req, "key"), .server), writer)
        })
        r.add(.POST, "/v1/rooms/{roomId}/queue/poll", signed { req, app, writer in
            api.run(.queuePoll(app: app, roomId: Self.param(req, "roomId"), key: nil, .server), writer)
        })
        r.add(.DELETE, "/v1/rooms/{roomId}/queue", signed { req, app, writer in
            api.run(.queueDrop(app: app, roomId: Self.param(req, "roomId"), .server), writer)
        })

        // Messages (NIM-8).
        r.add(.POST, "/v1/rooms/{roomId}/messages", signed { req, app, writer in
            struct Body: Decodable {
                var type: String?
                var content: String
                var fromUserId: String?
                var nickname: String?
                var avatar: String?
            }
            api.attempt(writer, status: .created) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .sendMessage(app: app, roomId: Self.param(req, "roomId"),
                                    .server(userId: b.fromUserId ?? "", nickname: b.nickname ?? "", avatar: b.avatar ?? ""),
                                    try parseKind(b.type), content: b.content)
            }
        })
        r.add(.GET, "/v1/rooms/{roomId}/messages", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                .history(app: app, roomId: Self.param(req, "roomId"), start: Int64(try Self.int(req, "start") ?? 0), limit: try Self.int(req, "limit") ?? 20,
                         try parseOrder(req.query("order"), default: .descending), kinds: try parseKinds(Self.list(req, "types")))
            }
        })
    }

    // MARK: Handlers with more to do

    private func issueToken(_ req: Request, _ app: String, _ writer: ResponseWriter) {
        struct Body: Decodable {
            var ttlSeconds: Int64?
            var nickname: String?
            var avatar: String?
            var device: String?
        }
        do throws(ChatError) {
            let b = try decodeBody(Body.self, from: req.body)
            let user = Self.param(req, "userId")
            guard !user.isEmpty, user.utf8.count <= 64 else { throw ChatError(.invalidParameter, "userId is 1 to 64 bytes", field: "userId") }
            let ttl = b.ttlSeconds ?? context.defaultTokenTTLSeconds
            guard ttl >= 1 && ttl <= 30 * 24 * 3600 else {
                throw ChatError(.invalidParameter, "ttlSeconds must be between 1 and 2592000", field: "ttlSeconds")
            }
            guard let secret = context.apps.app(app)?.secret else { throw ChatError(.unknownApp, "unknown app", field: "appKey") }
            let now = context.clock() / 1000
            let claims = TokenClaims(sub: user, app: app, exp: now + ttl, iat: now, name: b.nickname, avatar: b.avatar, device: b.device)
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
        let roomId = Self.param(req, "roomId")
        let clientType = req.query("clientType") ?? "web"
        guard ["web", "other", "weblink", "commonlink"].contains(clientType) else {
            writer.send(Self.error(ChatError(.invalidParameter, "clientType must be web or other", field: "clientType")))
            return
        }
        if let user = req.query("userId"), user.isEmpty || user.utf8.count > 64 {
            writer.send(Self.error(ChatError(.invalidParameter, "userId is 1 to 64 bytes", field: "userId")))
            return
        }
        let urls = context.publicURLs
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
        let origins = context.apps.app(app)?.allowedOrigins
        let settings = engine.withDomain { $0.appSettings(app) } ?? AppSettings()
        writer.send(.json(.ok, Self.settingsBody(settings, origins)))
    }

    static func settingsBody(_ s: AppSettings, _ origins: [String]?) -> [UInt8] {
        JSONWriter.object { w in
            w.field("memberChangeEvents", s.memberChangeEvents)
            w.field("multipleRoomsPerUser", s.multipleRoomsPerUser)
            w.field("enterExitNotifications", s.enterExitNotifications)
            w.field("maxRoomsPerUser", s.maxRoomsPerUser)
            w.field("maxRooms", s.maxRooms)
            w.field("historyRetentionSeconds", s.historyRetentionMilliseconds / 1000)
            w.field("historyLimitPerRoom", s.historyLimitPerRoom)
            w.field("maxMessageBytes", s.maxMessageBytes)
            w.field("defaultQueueLimit", s.defaultQueueLimit)
            w.field("notificationLevel", s.notificationLevel.rawValue)
            w.key("allowedOrigins")
            if let origins { w.stringArray(origins) } else { w.null() }
        }
    }

    private func updateSettings(_ req: Request, _ app: String, _ writer: ResponseWriter) {
        struct Body: Decodable {
            var memberChangeEvents: Bool?
            var multipleRoomsPerUser: Bool?
            var enterExitNotifications: Bool?
            var maxRoomsPerUser: Int?
            var maxRooms: Int?
            var historyRetentionSeconds: Int64?
            var historyLimitPerRoom: Int?
            var maxMessageBytes: Int?
            var defaultQueueLimit: Int?
            var notificationLevel: Int?
            var allowedOrigins: [String]?
        }
        do throws(ChatError) {
            let b = try decodeBody(Body.self, from: req.body)
            var s = engine.withDomain { $0.appSettings(app) } ?? AppSettings()
            if let v = b.memberChangeEvents { s.memberChangeEvents = v }
            if let v = b.multipleRoomsPerUser { s.multipleRoomsPerUser = v }
            if let v = b.enterExitNotifications { s.enterExitNotifications = v }
            if let v = b.maxRoomsPerUser {
                guard v >= 1 && v <= 1000 else { throw ChatError(.invalidParameter, "maxRoomsPerUser must be 1 to 1000", field: "maxRoomsPerUser") }
                s.maxRoomsPerUser = v
            }
            if let v = b.maxRooms {
                guard v >= 0 else { throw ChatError(.invalidParameter, "maxRooms must not be negative", field: "maxRooms") }
                s.maxRooms = v
            }
            if let v = b.historyRetentionSeconds {
                guard v >= 60 && v <= 365 * 24 * 3600 else {
                    throw ChatError(.invalidParameter, "historyRetentionSeconds must be 60 to 31536000", field: "historyRetentionSeconds")
                }
                s.historyRetentionMilliseconds = v * 1000
            }
            if let v = b.historyLimitPerRoom {
                guard v >= 1 && v <= 100_000 else { throw ChatError(.invalidParameter, "historyLimitPerRoom must be 1 to 100000", field: "historyLimitPerRoom") }
                s.historyLimitPerRoom = v
            }
            if let v = b.maxMessageBytes {
                guard v >= 1 && v <= 1 << 20 else { throw ChatError(.invalidParameter, "maxMessageBytes must be 1 to 1048576", field: "maxMessageBytes") }
                s.maxMessageBytes = v
            }
            if let v = b.defaultQueueLimit {
                guard v >= 1 && v <= 10_000 else { throw ChatError(.invalidParameter, "defaultQueueLimit must be 1 to 10000", field: "defaultQueueLimit") }
                s.defaultQueueLimit = v
            }
            if let v = b.notificationLevel { s.notificationLevel = try NotificationLevel.parse(v) }
            if let origins = b.allowedOrigins {
                guard origins.count <= 100, origins.allSatisfy({ !$0.isEmpty && $0.utf8.count <= 256 }) else {
                    throw ChatError(.invalidParameter, "allowedOrigins holds up to 100 origins", field: "allowedOrigins")
                }
            }
            let apps = context.apps
            let settings = s
            let origins = b.allowedOrigins
            let persistOrigins = context.persistOrigins
            engine.submit(.configureApp(app: app, settings), replyTo: .callback({ result in
                switch result {
                case .failure(let e): writer.send(Self.error(e))
                case .success:
                    if let origins, var entry = apps.app(app) {
                        entry.allowedOrigins = origins.isEmpty ? nil : origins
                        apps.set(entry)
                        persistOrigins(app, entry.allowedOrigins)
                    }
                    writer.send(.json(.ok, Self.settingsBody(settings, apps.app(app)?.allowedOrigins)))
                }
            }))
        } catch {
            writer.send(Self.error(error))
        }
    }
}

extension JSONWriter {
    mutating func stringArray(_ v: [String]) {
        beginArray()
        for s in v { string(s) }
        endArray()
    }
}
