import Chat
import Foundation
import Logging
import Reactor
import Server
import WebSocket

/// One client WebSocket connection speaking the Roomcast protocol (openapi/websocket.md):
/// `{"id", "op", "args"}` commands answered with `{"id", "ok"}` or `{"id", "error"}`, and pushed
/// events `{"ev", "roomId", "epoch", "offset", "data"}`. Confined to its loop.
final class ClientSession: WebSocketHandler {
    let context: GatewayContext
    let hub: Hub
    let origin: String?
    weak var connection: Connection?
    private(set) var id = SessionID(0)
    private(set) var app = ""
    private(set) var userId = ""
    private(set) var authenticated = false
    private var connecting = false
    let openedAt: Int64
    /// Token expiry (ms); nil for anonymous sessions.
    private var tokenExpiry: Int64?
    private var expiryNoticeSent = false
    /// Position in each room's member list on this loop (kept by the hub).
    var roomSlots: [RoomKey: Int] = [:]
    /// Resume positions to honour when the session's join takes effect.
    var pendingResume: [String: ResumeRequest] = [:]

    init(context: GatewayContext, hub: Hub, origin: String?, now: Int64) {
        self.context = context
        self.hub = hub
        self.origin = origin
        self.openedAt = now
    }

    // MARK: WebSocketHandler

    func webSocketDidOpen(_ connection: Connection) {
        self.connection = connection
        hub.pendingSessions[ObjectIdentifier(self)] = self
    }

    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {
        guard case .text(let bytes) = message else {
            close(WebSocketCloseCode.unsupportedData.rawValue, "binary messages are not part of the protocol")
            return
        }
        handle(bytes)
    }

    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) {
        hub.pendingSessions[ObjectIdentifier(self)] = nil
        if authenticated || connecting {
            hub.unregister(self)
            context.engine.submit(.disconnect(id), replyTo: .none)
        }
        authenticated = false
        connecting = false
        self.connection = nil
    }

    // MARK: Sending

    func send(_ frame: ByteBlock) { connection?.sendFrame(frame) }

    func sendJSON(_ bytes: [UInt8]) { send(Frames.text(bytes)) }

    func sendEvent(_ event: ChatEvent) {
        sendJSON(Encode.event(event, roomId: nil, epoch: nil, offset: nil))
    }

    func sendResumeResult(roomId: String, resumed: Bool, replayed: Int, reason: String?) {
        sendJSON(JSONWriter.object { w in
            w.field("ev", "room.resume")
            w.field("roomId", roomId)
            w.key("data")
            w.beginObject()
            w.field("resumed", resumed)
            w.field("replayed", replayed)
            w.fieldIfPresent("reason", reason)
            w.endObject()
        })
    }

    func close(_ code: UInt16, _ reason: String) {
        connection?.close(code: WebSocketCloseCode(code), reason: reason)
    }

    static func replyFrame(id: Int?, _ result: Result<Reply, ChatError>) -> [UInt8] {
        JSONWriter.object { w in
            if let id { w.field("id", id) } else { w.key("id"); w.null() }
            switch result {
            case .success(let reply):
                w.key("ok")
                Encode.reply(reply, &w)
            case .failure(let e):
                w.key("error")
                w.raw(ErrorTable.body(e))
            }
        }
    }

    private func reply(_ id: Int?, error: GatewayError) {
        sendJSON(JSONWriter.object { w in
            if let id { w.field("id", id) } else { w.key("id"); w.null() }
            w.key("error")
            w.raw(ErrorTable.body(error))
        })
    }

    private func reply(_ id: Int?, _ result: Result<Reply, ChatError>) {
        sendJSON(Self.replyFrame(id: id, result))
    }

    // MARK: Commands

    private struct Envelope: Decodable {
        var id: Int?
        var op: String
    }

    private struct Args<T: Decodable>: Decodable {
        var args: T?
    }

    private struct Empty: Decodable {}

    private func handle(_ bytes: [UInt8]) {
        let data = Data(bytes)
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: data) else {
            reply(nil, error: GatewayError(.badRequest, "a message is {\"id\": number, \"op\": string, \"args\": object}", field: "op"))
            return
        }
        let rid = envelope.id
        func args<T: Decodable>(_ type: T.Type) -> T? {
            do {
                guard let a = try JSONDecoder().decode(Args<T>.self, from: data).args else {
                    reply(rid, .failure(ChatError(.invalidParameter, "args is required", field: "args")))
                    return nil
                }
                return a
            } catch let e as DecodingError {
                let err = describe(e)
                let field = err.field.map { $0 == "body" ? "args" : "args." + $0.replacingOccurrences(of: "args.", with: "") }
                reply(rid, .failure(ChatError(err.code, err.message, field: field)))
                return nil
            } catch {
                reply(rid, .failure(ChatError(.invalidParameter, "args could not be read", field: "args")))
                return nil
            }
        }

        if !authenticated {
            guard envelope.op == "connect" else {
                if connecting {
                    reply(rid, error: GatewayError(.badRequest, "wait for the connect answer", field: "op"))
                    return
                }
                close(CloseCodes.notAuthenticated, "the first message must be connect")
                return
            }
            guard let a = args(ConnectArgs.self) else { return }
            if let c = a.conversationCursor, c < 0 {
                reply(rid, .failure(ChatError(.invalidParameter, "conversationCursor must not be negative", field: "args.conversationCursor")))
                return
            }
            syncCursor = a.conversationCursor ?? 0
            connect(rid, a)
            return
        }

        switch envelope.op {
        case "connect":
            reply(rid, error: GatewayError(.badRequest, "already connected", field: "op"))
        case "token.refresh":
            guard let a = args(TokenArgs.self) else { return }
            refresh(rid, a.token)
        case "room.join":
            guard let a = args(JoinArgs.self) else { return }
            join(rid, a)
        case "room.leave":
            guard let a = args(RoomArgs.self) else { return }
            command(rid, .leave(id, roomId: a.roomId))
        case "room.leaveAll":
            command(rid, .leaveAll(id))
        case "room.switch":
            guard let a = args(SwitchArgs.self) else { return }
            do throws(ChatError) {
                let target = try a.to.config()
                command(rid, .switchRoom(id, from: a.from, to: target, createIfMissing: a.createIfMissing ?? false, a.profile))
            } catch { reply(rid, .failure(error)) }
        case "room.send":
            guard let a = args(SendArgs.self) else { return }
            do throws(ChatError) {
                command(rid, .sendMessage(app: app, roomId: a.roomId, .session(id), try parseKind(a.type), content: a.content))
            } catch { reply(rid, .failure(error)) }
        case "room.history":
            guard let a = args(HistoryArgs.self) else { return }
            do throws(ChatError) {
                let q = Query.history(app: app, roomId: a.roomId, start: a.start ?? 0, limit: a.limit ?? 20,
                                      try parseOrder(a.order, default: .descending), kinds: try parseKinds(a.types))
                memberQuery(rid, roomId: a.roomId, q)
            } catch { reply(rid, .failure(error)) }
        case "room.members":
            guard let a = args(MembersArgs.self) else { return }
            do throws(ChatError) {
                let q = Query.members(app: app, roomId: a.roomId, try parseMemberFilter(a.type), try parseOrder(a.order, default: .ascending),
                                      limit: a.limit ?? 100, after: a.after)
                memberQuery(rid, roomId: a.roomId, q)
            } catch { reply(rid, .failure(error)) }
        case "room.membersByIds":
            guard let a = args(MembersByIdsArgs.self) else { return }
            memberQuery(rid, roomId: a.roomId, .membersByIds(app: app, roomId: a.roomId, a.userIds))
        case "room.info":
            guard let a = args(RoomArgs.self) else { return }
            query(rid, .roomAsMember(id, roomId: a.roomId))
        case "room.update":
            guard let a = args(RoomUpdateArgs.self) else { return }
            do throws(ChatError) {
                command(rid, .updateRoom(app: app, roomId: a.roomId, try a.update.update(), .session(id), nim: a.update.nim))
            } catch { reply(rid, .failure(error)) }
        case "member.update":
            guard let a = args(MemberUpdateArgs.self) else { return }
            command(rid, .updateMyInfo(id, roomId: a.roomId, nickname: a.nickname, avatar: a.avatar, ext: a.ext, notifyExt: a.notifyExt ?? ""))
        case "queue.list":
            guard let a = args(RoomArgs.self) else { return }
            memberQuery(rid, roomId: a.roomId, .queue(app: app, roomId: a.roomId))
        case "queue.offer":
            guard let a = args(QueueOfferArgs.self) else { return }
            command(rid, .queueOffer(app: app, roomId: a.roomId, key: a.key, value: a.value, transient: a.transient ?? false, .session(id)))
        case "queue.batchUpdate":
            guard let a = args(QueueBatchArgs.self) else { return }
            let notify = a.needNotify == true ? NIMNotify(notifyExt: a.notifyExt ?? "") : nil
            command(rid, .queueBatchUpdate(app: app, roomId: a.roomId, a.elements.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) },
                                           .session(id), notify: notify))
        case "queue.poll":
            guard let a = args(QueuePollArgs.self) else { return }
            command(rid, .queuePoll(app: app, roomId: a.roomId, key: a.key, .session(id)))
        case "queue.drop":
            guard let a = args(RoomArgs.self) else { return }
            command(rid, .queueDrop(app: app, roomId: a.roomId, .session(id)))
        case "attributes.set":
            guard let a = args(AttributesSetArgs.self) else { return }
            command(rid, .setAttributes(app: app, roomId: a.roomId, a.entries.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) },
                                        owner: nil, autoDelete: a.autoDelete ?? false, .session(id)))
        case "attributes.remove":
            guard let a = args(AttributesKeysArgs.self) else { return }
            command(rid, .removeAttributes(app: app, roomId: a.roomId, a.keys ?? [], .session(id)))
        case "attributes.get":
            guard let a = args(AttributesKeysArgs.self) else { return }
            memberQuery(rid, roomId: a.roomId, .attributes(app: app, roomId: a.roomId, keys: a.keys ?? []))
        case "manage.setRole":
            guard let a = args(RoleArgs.self) else { return }
            do throws(ChatError) {
                command(rid, .setRole(app: app, roomId: a.roomId, target: a.userId, .assign(try RoleTarget.parse(a.role)), .session(id),
                                      notifyExt: a.notifyExt ?? ""))
            } catch { reply(rid, .failure(error)) }
        case "manage.kick":
            guard let a = args(KickArgs.self) else { return }
            command(rid, .kick(app: app, roomId: a.roomId, target: a.userId, .session(id), notifyExt: a.notifyExt ?? ""))
        case "manage.block":
            guard let a = args(BlockArgs.self) else { return }
            command(rid, .block(app: app, roomId: a.roomId, a.userIds, minutes: a.minutes, .session(id), rc: nil,
                                nim: NIMNotify(notifyExt: a.notifyExt ?? "")))
        case "manage.unblock":
            guard let a = args(BlockArgs.self) else { return }
            command(rid, .unblock(app: app, roomId: a.roomId, a.userIds, .session(id), rc: nil, nim: NIMNotify(notifyExt: a.notifyExt ?? "")))
        case "manage.mute":
            guard let a = args(MuteArgs.self) else { return }
            let duration: MuteDuration = a.seconds.map { .seconds($0) } ?? .permanent
            command(rid, .mute(app: app, roomId: a.roomId, a.userIds, duration, .session(id), rc: nil, nim: NIMNotify(notifyExt: a.notifyExt ?? "")))
        case "manage.unmute":
            guard let a = args(MuteArgs.self) else { return }
            do throws(ChatError) {
                command(rid, .unmute(app: app, roomId: a.roomId, a.userIds, try parseUnmuteKind(a.kind), .session(id), rc: nil,
                                     nim: NIMNotify(notifyExt: a.notifyExt ?? "")))
            } catch { reply(rid, .failure(error)) }
        case "manage.roomMute":
            guard let a = args(RoomMuteArgs.self) else { return }
            command(rid, .setRoomMuted(app: app, roomId: a.roomId, a.muted, .session(id), rc: nil, nim: NIMNotify(notifyExt: a.notifyExt ?? "")))
        case "conversation.set":
            guard let a = args(ConversationArgs.self) else { return }
            do throws(ChatError) {
                let level = try a.notificationLevel.map { v throws(ChatError) in try NotificationLevel.parse(v, field: "args.notificationLevel") }
                command(rid, .setConversationStatus(app: app, userId: userId, try a.key(), pinned: a.pinned, level: level, .session(id)))
            } catch { reply(rid, .failure(error)) }
        case "conversation.get":
            guard let a = args(ConversationArgs.self) else { return }
            do throws(ChatError) {
                query(rid, .conversationStatus(app: app, userId: userId, try a.key()))
            } catch { reply(rid, .failure(error)) }
        case "group.channels":
            guard let a = args(GroupChannelsArgs.self) else { return }
            query(rid, .userChannels(app: app, groupId: a.groupId, userId: userId, page: a.page ?? 1, pageSize: a.pageSize ?? 20))
        default:
            reply(rid, error: GatewayError(.badRequest, "unknown op \(envelope.op)", field: "op"))
        }
    }

    private func command(_ rid: Int?, _ command: Command) {
        context.engine.submit(command, replyTo: .session(id, encode: { result in ClientSession.replyFrame(id: rid, result) }))
    }

    private func query(_ rid: Int?, _ q: Query) {
        let me = LoopBound(self, loop: hub.loop)
        context.engine.query(q) { result in
            let frame = ClientSession.replyFrame(id: rid, result)
            me.loop.execute { me.value.sendJSON(frame) }
        }
    }

    /// Queries a member may ask about a room it is in.
    private func memberQuery(_ rid: Int?, roomId: String, _ q: Query) {
        guard roomSlots[RoomKey(app: app, roomId: roomId)] != nil else {
            reply(rid, .failure(ChatError(.notInRoom, "you are not in room \(roomId)", field: "roomId")))
            return
        }
        query(rid, q)
    }

    // MARK: Connect, tokens, join

    private func connect(_ rid: Int?, _ a: ConnectArgs) {
        let now = context.clock()
        let appKey: String
        let user: String?
        var anonymous: AnonymousProfile?
        var device = a.device ?? "default"
        if let token = a.token {
            switch ClientToken.verify(token, apps: context.apps) {
            case .failure(let e):
                reply(rid, error: e)
                close(CloseCodes.badToken, e.message)
                return
            case .success(let claims):
                if claims.exp * 1000 <= now {
                    reply(rid, error: GatewayError(.tokenExpired, "the token has expired", field: "token"))
                    close(CloseCodes.tokenExpired, "token expired")
                    return
                }
                appKey = claims.app
                user = claims.sub
                tokenExpiry = claims.exp * 1000
                device = claims.device ?? device
                if claims.name != nil || claims.avatar != nil {
                    profile = EnterProfile(nickname: claims.name ?? "", avatar: claims.avatar ?? "")
                }
            }
        } else if let key = a.appKey, let anon = a.anonymous {
            guard context.apps.app(key) != nil else {
                reply(rid, error: GatewayError(.unknownAppKey, "unknown app key", field: "appKey"))
                close(CloseCodes.badToken, "unknown app")
                return
            }
            appKey = key
            user = nil
            anonymous = AnonymousProfile(nickname: anon.nickname ?? "", avatar: anon.avatar ?? "")
        } else {
            reply(rid, error: GatewayError(.badToken, "connect needs a token, or an appKey with an anonymous profile", field: "token"))
            close(CloseCodes.notAuthenticated, "no credentials")
            return
        }
        // Per-app Origin allowlist (browsers send Origin; other clients need not).
        if let allowed = context.apps.app(appKey)?.allowedOrigins, let origin, !WebSocketHandshake.originAllowed(origin, allowed) {
            close(CloseCodes.originNotAllowed, "origin not allowed")
            return
        }
        connecting = true
        id = hub.makeSessionID()
        app = appKey
        let stream = hub.resumeWindow.stream
        let me = LoopBound(self, loop: hub.loop)
        let sid = id
        let expiresAt = tokenExpiry
        context.engine.submit(.connect(sid, app: appKey, userId: user, deviceId: device, anonymous: anonymous), replyTo: .callback({ result in
            me.loop.execute { me.value.connected(rid, result, stream: stream, expiresAt: expiresAt, anonymous: user == nil) }
        }))
    }

    /// The enter profile from the token, used when a join does not name one.
    private var profile = EnterProfile()
    /// CS-3: where the conversation-status sync on connect starts.
    private var syncCursor: Int64 = 0

    private func connected(_ rid: Int?, _ result: Result<Reply, ChatError>, stream: String, expiresAt: Int64?, anonymous: Bool) {
        connecting = false
        guard connection != nil else {
            // Closed meanwhile: the engine still has the session; tell it.
            if case .success = result { context.engine.submit(.disconnect(id), replyTo: .none) }
            return
        }
        switch result {
        case .failure(let e):
            reply(rid, .failure(e))
        case .success(let r):
            if case .session(let u) = r { userId = u }
            authenticated = true
            hub.pendingSessions[ObjectIdentifier(self)] = nil
            hub.register(self)
            sendJSON(JSONWriter.object { w in
                if let rid { w.field("id", rid) } else { w.key("id"); w.null() }
                w.key("ok")
                w.beginObject()
                w.field("sessionId", String(id.raw))
                w.field("userId", userId)
                w.field("anonymous", anonymous)
                w.field("stream", stream)
                w.key("expiresAt")
                if let expiresAt { w.int(expiresAt) } else { w.null() }
                w.endObject()
            })
            if !anonymous { syncConversations(after: syncCursor) }
        }
    }

    /// CS-3: every status changed after `cursor`, as `conversation.statusChanged` batches, then
    /// `conversation.statusSynced` with the code and the cursor to keep.
    private func syncConversations(after cursor: Int64) {
        let me = LoopBound(self, loop: hub.loop)
        context.engine.query(.conversationStatuses(app: app, userId: userId, since: cursor, limit: Limits.maxStatusSyncPage)) { result in
            var frames: [[UInt8]] = []
            var next: Int64?
            var end = cursor
            var code = 0
            switch result {
            case .success(.conversationStatuses(let statuses, let c, let more)):
                var i = 0
                while i < statuses.count {
                    let chunk = statuses[i..<min(statuses.count, i + 100)]
                    let infos = chunk.flatMap { [ConversationStatusInfo.mute($0), ConversationStatusInfo.top($0)] }
                    frames.append(Encode.event(.conversationStatusChanged(infos), roomId: nil, epoch: nil, offset: nil))
                    i += 100
                }
                end = c
                if more { next = c }
            case .failure(let e):
                code = e.code.rawValue
            default:
                code = ChatErrorCode.invalidParameter.rawValue
            }
            let done: [UInt8]? = next == nil ? JSONWriter.object { w in
                w.field("ev", "conversation.statusSynced")
                w.key("data")
                w.beginObject()
                w.field("code", code)
                w.field("cursor", end)
                w.endObject()
            } : nil
            let more = next
            let batches = frames
            me.loop.execute {
                let s = me.value
                for f in batches { s.sendJSON(f) }
                if let more { s.syncConversations(after: more) } else if let done { s.sendJSON(done) }
            }
        }
    }

    private func refresh(_ rid: Int?, _ token: String) {
        switch ClientToken.verify(token, apps: context.apps) {
        case .failure(let e):
            reply(rid, error: e)
        case .success(let claims):
            guard claims.app == app, claims.sub == userId else {
                reply(rid, error: GatewayError(.badToken, "the new token is for another user or app", field: "token"))
                return
            }
            guard claims.exp * 1000 > context.clock() else {
                reply(rid, error: GatewayError(.tokenExpired, "the new token has expired", field: "token"))
                return
            }
            tokenExpiry = claims.exp * 1000
            expiryNoticeSent = false
            reply(rid, .success(.done))
        }
    }

    private func join(_ rid: Int?, _ a: JoinArgs) {
        let mode: JoinMode
        do throws(ChatError) {
            switch a.mode ?? "join" {
            case "join": mode = .join
            case "enter": mode = .enter(try (a.room ?? RoomSpec()).config(roomId: a.roomId))
            case "create": mode = .create(try (a.room ?? RoomSpec()).config(roomId: a.roomId))
            default: throw ChatError(.invalidParameter, "mode must be join, enter or create", field: "mode")
            }
        } catch {
            reply(rid, .failure(error))
            return
        }
        if let r = a.resume { pendingResume[a.roomId] = ResumeRequest(epoch: r.epoch, stream: r.stream, offset: r.offset) }
        var p = a.profile
        if p.nickname.isEmpty { p.nickname = profile.nickname }
        if p.avatar.isEmpty { p.avatar = profile.avatar }
        command(rid, .join(id, roomId: a.roomId, p, mode))
    }

    // MARK: Timers

    /// Called once a second by the hub: connect timeout and token expiry with its grace.
    func tick(now: Int64) {
        if !authenticated {
            if !connecting && now - openedAt > context.connectTimeoutMilliseconds {
                close(CloseCodes.notAuthenticated, "connect timeout")
            }
            return
        }
        guard let expiry = tokenExpiry, now >= expiry else { return }
        if now >= expiry + context.tokenGraceMilliseconds {
            close(CloseCodes.tokenExpired, "token expired")
        } else if !expiryNoticeSent {
            expiryNoticeSent = true
            sendJSON(JSONWriter.object { w in
                w.field("ev", "token.expired")
                w.key("data")
                w.beginObject()
                w.field("graceSeconds", context.tokenGraceMilliseconds / 1000)
                w.endObject()
            })
        }
    }
}

// MARK: Op arguments

struct ConnectArgs: Decodable {
    struct Anonymous: Decodable {
        var nickname: String?
        var avatar: String?
    }
    var token: String?
    var appKey: String?
    var anonymous: Anonymous?
    var device: String?
    /// CS-3: the last conversation-status version this device synced (absent: never).
    var conversationCursor: Int64?
}

struct TokenArgs: Decodable { var token: String }
struct RoomArgs: Decodable { var roomId: String }

struct ResumeSpec: Decodable {
    var epoch: String
    var stream: String
    var offset: Int64
}

struct JoinArgs: Decodable {
    var roomId: String
    var nickname: String?
    var avatar: String?
    var ext: String?
    var notifyExt: String?
    var mode: String?
    var room: RoomSpec?
    var resume: ResumeSpec?
    var profile: EnterProfile { EnterProfile(nickname: nickname ?? "", avatar: avatar ?? "", ext: ext ?? "", notifyExt: notifyExt ?? "") }
}

struct SwitchArgs: Decodable {
    var from: String
    var to: RoomSpec
    var createIfMissing: Bool?
    var nickname: String?
    var avatar: String?
    var ext: String?
    var notifyExt: String?
    var profile: EnterProfile { EnterProfile(nickname: nickname ?? "", avatar: avatar ?? "", ext: ext ?? "", notifyExt: notifyExt ?? "") }
}

struct SendArgs: Decodable {
    var roomId: String
    var type: String?
    var content: String
}

struct HistoryArgs: Decodable {
    var roomId: String
    var start: Int64?
    var limit: Int?
    var order: String?
    var types: [String]?
}

struct MembersArgs: Decodable {
    var roomId: String
    var type: String?
    var order: String?
    var limit: Int?
    var after: String?
}

struct MembersByIdsArgs: Decodable {
    var roomId: String
    var userIds: [String]
}

struct RoomUpdateArgs: Decodable {
    var roomId: String
    var update: RoomUpdateSpec
    init(from decoder: Decoder) throws {
        roomId = try RoomArgs(from: decoder).roomId
        update = try RoomUpdateSpec(from: decoder)
    }
}

struct MemberUpdateArgs: Decodable {
    var roomId: String
    var nickname: String?
    var avatar: String?
    var ext: String?
    var notifyExt: String?
}

struct QueueOfferArgs: Decodable {
    var roomId: String
    var key: String
    var value: String
    var transient: Bool?
}

struct QueueBatchArgs: Decodable {
    var roomId: String
    var elements: [String: String]
    var needNotify: Bool?
    var notifyExt: String?
}

struct QueuePollArgs: Decodable {
    var roomId: String
    var key: String?
}

struct AttributesSetArgs: Decodable {
    var roomId: String
    var entries: [String: String]
    var autoDelete: Bool?
}

struct AttributesKeysArgs: Decodable {
    var roomId: String
    var keys: [String]?
}

struct RoleArgs: Decodable {
    var roomId: String
    var userId: String
    var role: String
    var notifyExt: String?
}

struct KickArgs: Decodable {
    var roomId: String
    var userId: String
    var notifyExt: String?
}

struct BlockArgs: Decodable {
    var roomId: String
    var userIds: [String]
    var minutes: Int?
    var notifyExt: String?
}

struct MuteArgs: Decodable {
    var roomId: String
    var userIds: [String]
    var seconds: Int64?
    var kind: String?
    var notifyExt: String?
}

struct ConversationArgs: Decodable {
    var conversationType: Int
    var targetId: String
    var channelId: String?
    var pinned: Bool?
    var notificationLevel: Int?

    func key() throws(ChatError) -> ConversationKey {
        ConversationKey(type: try ConversationType.parse(conversationType, field: "args.conversationType"), targetId: targetId,
                        channelId: channelId ?? "")
    }
}

struct GroupChannelsArgs: Decodable {
    var groupId: String
    var page: Int?
    var pageSize: Int?
}

struct RoomMuteArgs: Decodable {
    var roomId: String
    var muted: Bool
    var notifyExt: String?
}
