import Chat
import Foundation

/// What a WebSocket op asks the session to do.
public enum OpAction: Sendable {
    /// Apply a command; its answer comes back in order with the events it caused.
    case command(Command)
    /// Answer a query.
    case query(Query)
    /// Answer a query about a room the session must be in (23406 otherwise).
    case memberQuery(roomId: String, Query)
    /// Authenticate (first message).
    case connect(ConnectRequest)
    case refreshToken(String)
    /// Join a room (the session adds its token profile and remembers the resume position).
    case join(roomId: String, JoinRequest)
    /// BX-3: watch a room's stream without joining it (observer tokens only), or stop.
    case observe(roomId: String)
    case unobserve(roomId: String)
}

/// One WebSocket operation: its name, what it does, its `args` schema and its answer, and how
/// its `args` become an action. The table below drives the session's dispatch, the Markdown
/// reference and the JSON Schema of the protocol (as Redis drives both from `commands.def`).
public struct Op: Sendable {
    public let name: String
    public let summary: String
    public let spec: [String]
    /// Name of the `ok` schema in the protocol document's `$defs`.
    public let reply: String
    /// Only members of the room may use it (otherwise 23406).
    public let memberOnly: Bool
    /// Schema of `args`; nil when the op takes none.
    let argsSchema: @Sendable () -> [String: Any]?
    let build: @Sendable (_ message: Data, _ caller: Caller) throws(ChatError) -> OpAction

    public var args: [String: Any]? { argsSchema() }

    /// Decodes `args` of `message` and builds the action. Decoding failures name the field as
    /// `args.<field>`.
    public func action(_ message: [UInt8], _ caller: Caller) throws(ChatError) -> OpAction {
        try build(Data(message), caller)
    }
}

/// `{"args": ...}` of a message.
private struct ArgsOf<T: Decodable>: Decodable {
    var args: T?
}

/// The fields of `args` that REST takes from the path, next to the request body.
struct Addressed<Address: Decodable, Body: Decodable>: Decodable {
    let address: Address
    let body: Body
    init(from decoder: Decoder) throws {
        address = try Address(from: decoder)
        body = try Body(from: decoder)
    }
}

struct RoomAddress: Decodable { var roomId: String }
struct RoomUserAddress: Decodable {
    var roomId: String
    var userId: String
}
struct RoomKeyAddress: Decodable {
    var roomId: String
    var key: String
}
struct GroupAddress: Decodable { var groupId: String }
struct Nothing: Decodable {}

/// The message envelope `{"id", "op"}`.
public struct Envelope: Decodable, Sendable {
    public var id: Int?
    public var op: String
}

extension Op {
    /// An op whose `args` decode as `T`.
    static func with<T: Decodable & SendableMetatype>(_ name: String, _ summary: String, spec: [String], args: T.Type, schema: @escaping @Sendable () -> [String: Any],
                                   reply: String, memberOnly: Bool = false,
                                   _ make: @escaping @Sendable (T, Caller) throws(ChatError) -> OpAction) -> Op {
        Op(name: name, summary: summary, spec: spec, reply: reply, memberOnly: memberOnly, argsSchema: schema) { data, caller throws(ChatError) in
            let decoded: T?
            do {
                decoded = try JSONDecoder().decode(ArgsOf<T>.self, from: data).args
            } catch let e as DecodingError {
                let err = describe(e, in: data)
                // The decoder's path starts at the message (`args.limit`); a failure of `args` as a whole is `args`.
                let field = err.field.map { $0 == "body" || $0 == "args" ? "args" : "args." + $0.replacingOccurrences(of: "args.", with: "") }
                throw ChatError(err.code, err.message, field: field)
            } catch {
                throw ChatError(.invalidParameter, "args could not be read", field: "args")
            }
            guard let decoded else { throw ChatError(.invalidParameter, "args is required", field: "args") }
            return try make(decoded, caller)
        }
    }

    /// An op that takes no `args`.
    static func without(_ name: String, _ summary: String, spec: [String], reply: String,
                        _ make: @escaping @Sendable (Caller) -> OpAction) -> Op {
        Op(name: name, summary: summary, spec: spec, reply: reply, memberOnly: false, argsSchema: { nil }) { _, caller in make(caller) }
    }
}

extension Caller {
    /// The session a WebSocket op comes from.
    var session: SessionID {
        if case .session(let id) = actor { return id }
        preconditionFailure("WebSocket ops come from sessions")
    }
}

/// Every WebSocket operation (openapi/websocket.md).
public enum OpTable {
    public static let all: [Op] = makeOps()
    public static let byName: [String: Op] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// The op `message` names, with its id; a refusal when it is not `{"id": number, "op": string}`.
    public static func envelope(_ message: [UInt8]) -> Envelope? {
        try? JSONDecoder().decode(Envelope.self, from: Data(message))
    }

    /// The envelope field a message that is not `{"id", "op", "args"}` got wrong: `id` when it is
    /// there and not an integer, otherwise `op`.
    public static func envelopeField(_ message: [UInt8]) -> String {
        struct IdOnly: Decodable { var id: Int? }
        let data = Data(message)
        do {
            _ = try JSONDecoder().decode(IdOnly.self, from: data)
        } catch let e as DecodingError {
            if case .typeMismatch(_, let ctx) = e, ctx.codingPath.first?.stringValue == "id" { return "id" }
            if firstNonIntegerNumber(in: data) == "id" { return "id" }
        } catch {}
        return "op"
    }

    private typealias S = OpenAPIDocument

    private static func makeOps() -> [Op] {
        @Sendable func enumeration(_ values: [String]) -> [String: Any] { ["type": "string", "enum": values] }
        @Sendable func roomOnly() -> [String: Any] { S.obj(["roomId": S.id], required: ["roomId"]) }
        @Sendable func profile() -> [String: [String: Any]] {
            ["nickname": S.str(maxLength: Limits.maxNicknameBytes), "avatar": S.str(maxLength: Limits.maxAvatarBytes),
             "ext": S.str("Member ext shown to others (NIM-11)", maxLength: Limits.maxExtBytes),
             "notifyExt": S.str("notifyExt of the 301 enter notification", maxLength: Limits.maxNotifyExtBytes),
             "tags": S.arr(S.str(maxLength: Limits.maxTagBytes), maxItems: Limits.maxTagsPerMember),
             "notifyTargetTags": S.ref("TagExpression")]
        }
        @Sendable func notifyExt() -> [String: [String: Any]] {
            ["notifyExt": S.str("Sends the NIM notification with this notifyExt", maxLength: Limits.maxNotifyExtBytes)]
        }
        @Sendable func with(_ a: [String: [String: Any]], _ b: [String: [String: Any]]) -> [String: [String: Any]] { a.merging(b) { x, _ in x } }
        return [
            .with("connect",
                  "Authenticate; must be the first message (within the connect timeout). A user then receives the conversation statuses changed after conversationCursor and conversation.statusSynced",
                  spec: ["§2", "NIM-3", "BX-1", "CS-3"], args: ConnectRequest.self, schema: {
                      ["oneOf": [
                          S.obj(["token": S.str("Client JWT (HS256)"), "device": S.str("Device id; the token's device claim wins"),
                                 "conversationCursor": S.int("The cursor of this device's last conversation.statusSynced; absent: never synced", minimum: 0)],
                                required: ["token"]),
                          S.obj(["appKey": S.str(), "anonymous": S.obj(["nickname": S.str(), "avatar": S.str()]), "device": S.str()],
                                required: ["appKey", "anonymous"], description: "Anonymous independent-mode client (NIM-3)"),
                      ]]
                  }, reply: "Connected") { a, _ in .connect(a) },
            .with("token.refresh", "Replace the token before it expires (same user and app)", spec: ["§2"], args: TokenRefreshRequest.self,
                  schema: { S.obj(["token": S.str()], required: ["token"]) }, reply: "Empty") { a, _ in .refreshToken(a.token) },
            .with("room.join", "Join (room must exist), enter (create if missing) or create (must not exist) a room",
                  spec: ["RC-1", "RC-2", "RC-3", "RC-4", "NIM-4", "NIM-5", "ZIM-1", "ZIM-2", "ZIM-3", "BX-1", "TR-4", "AU-4"],
                  args: Addressed<RoomAddress, JoinRequest>.self, schema: {
                      var roomSpec = WebSocketDocument.openAPISchemas["CreateRoom"] as? [String: Any] ?? [:]
                      roomSpec["required"] = nil
                      roomSpec["description"] = "Room configuration for mode enter/create; roomId defaults to the op's roomId"
                      let resume = S.obj(["epoch": S.str(), "stream": S.str(), "offset": S.int(minimum: 0)], required: ["epoch", "stream", "offset"],
                                         description: "Replay what this client missed: the room epoch, connect's stream and the last offset seen (BX-1)")
                      let rewind = S.int("TR-4: give this many of the room's last messages (those this member may see, that the resume window still holds) before live events, in stream order; not with resume, which replays what was missed instead",
                                         minimum: 1, maximum: Limits.maxRewindMessages)
                      var memberEvents = enumeration(JoinRequest.memberEventsModes)
                      memberEvents["description"] = "AU-4: counts: this connection gets the room's member counts only (room.members without ids, at most once per the app's memberSummaryIntervalMilliseconds), never room.memberChanged or enter/exit notifications; all (default): every member event"
                      return S.obj(with(["roomId": S.id, "mode": enumeration(["join", "enter", "create"]), "room": roomSpec, "resume": resume, "rewind": rewind,
                                         "memberEvents": memberEvents], profile()),
                                   required: ["roomId"])
                  }, reply: "JoinReply") { a, _ in .join(roomId: a.address.roomId, a.body) },
            .with("room.leave", "Leave a room", spec: ["RC-1", "RC-2", "RC-3", "ZIM-4"], args: RoomAddress.self, schema: roomOnly,
                  reply: "Empty") { a, c in .command(.leave(c.session, roomId: a.roomId)) },
            .with("room.observe", "Watch a room's stream without joining it: the room's stream events arrive as to a member, but the observer is no member and is in no member list, count or audience rule; watching ends when the room is destroyed. Needs a token issued with observer: true (an operator's, e.g. the console's); at most \(Limits.maxObservedRooms) rooms per connection",
                  spec: ["BX-3"], args: RoomAddress.self, schema: roomOnly, reply: "Observed") { a, _ in .observe(roomId: a.roomId) },
            .with("room.unobserve", "Stop watching a room", spec: ["BX-3"], args: RoomAddress.self, schema: roomOnly,
                  reply: "Empty") { a, _ in .unobserve(roomId: a.roomId) },
            .without("room.leaveAll", "Leave every room this connection is in", spec: ["RC-1", "ZIM-4"], reply: "RoomIds") { c in
                .command(.leaveAll(c.session))
            },
            .with("room.switch", "Leave one room and enter another in one step", spec: ["ZIM-6"], args: SwitchRequest.self, schema: {
                S.obj(with(["from": S.id, "to": S.ref("CreateRoom"), "createIfMissing": S.bool()], profile()), required: ["from", "to"])
            }, reply: "JoinReply") { a, c throws(ChatError) in .command(try a.command(c.session)) },
            .with("room.send", "Send a message to the room (everyone else receives it). When the app has a before-send hook (PX-4) the message is sent only after the hook's verdict, with the hook's replacement content if it gave one: 40303 when the hook drops it, 50302 when the hook gave no verdict and the app fails closed; a connection's messages keep their order. priority (high, normal or low; for ZIM's levels high, medium, low send high, normal, low) and messageType decide the message's class, transient sends it outside the stream (QS-1, QS-5); past the room's budget low, then normal messages are refused with 42902 (QS-2)", spec: ["NIM-8", "RC-7", "NIM-3", "PX-4", "QS-1", "QS-2", "QS-5"],
                  args: Addressed<RoomAddress, SendMessageRequest>.self, schema: {
                      S.obj(["roomId": S.id, "type": enumeration(["text", "custom"]), "content": ["type": "string", "minLength": 1, "maxLength": Limits.defaultMaxMessageBytes, "description": "At most the app's maxMessageBytes bytes (default \(Limits.defaultMaxMessageBytes))"]]
                                .merging(S.messageOptions) { a, _ in a },
                            required: ["roomId", "content"])
                  }, reply: "MessageResponse") { a, c throws(ChatError) in .command(try a.body.command(c, roomId: a.address.roomId)) },
            .with("room.recall", "Recall a message of the room (ZIM's revoke): your own within the app's recallWindowSeconds (two minutes by default), anyone's as the room's creator or a manager (40301 otherwise); whoever the message reached gets message.recalled, and history and resume keep its tombstone. 40401 when it is not among the room's recent messages or was already recalled",
                  spec: ["MO-1"], args: Addressed<RoomAddress, RecallRequest>.self, schema: {
                      S.obj(["roomId": S.id, "messageId": S.str("The messageId of room.message", maxLength: Limits.maxMessageIdBytes),
                             "notifyExt": S.str("Told to the room with the recall", maxLength: Limits.maxRecallExtBytes)], required: ["roomId", "messageId"])
                  }, reply: "Empty") { a, c in .command(RecallRequest(messageId: a.body.messageId, notifyExt: a.body.notifyExt).command(c, roomId: a.address.roomId)) },
            .with("room.history", "Message history", spec: ["NIM-8"], args: Addressed<RoomAddress, HistoryRequest>.self, schema: {
                S.obj(["roomId": S.id, "start": S.int("ms; 0: from the newest/oldest", minimum: 0), "limit": S.int(minimum: 1, maximum: Limits.maxHistoryLimit),
                       "order": enumeration(["asc", "desc"]), "types": S.arr(enumeration(["text", "custom", "notification"])),
                       "tags": S.arr(S.str(maxLength: Limits.maxTagBytes))], required: ["roomId"])
            }, reply: "Messages", memberOnly: true) { a, c throws(ChatError) in
                .memberQuery(roomId: a.address.roomId, try a.body.query(c, roomId: a.address.roomId))
            },
            .with("room.members", "Members, paged", spec: ["RC-9", "NIM-13"], args: Addressed<RoomAddress, MembersRequest>.self, schema: {
                S.obj(["roomId": S.id, "type": enumeration(["present", "regular", "temporary", "regularOnline", "temporaryNewestFirst"]),
                       "order": enumeration(["asc", "desc"]), "limit": S.int(minimum: 1, maximum: Limits.maxMemberListCount),
                       "after": S.str("The last userId of the previous page")], required: ["roomId"])
            }, reply: "Members", memberOnly: true) { a, c throws(ChatError) in
                .memberQuery(roomId: a.address.roomId, try a.body.query(c, roomId: a.address.roomId))
            },
            .with("room.membersByIds", "Members by id", spec: ["NIM-13"], args: Addressed<RoomAddress, UserIdsRequest>.self, schema: {
                S.obj(["roomId": S.id, "userIds": S.arr(S.id, maxItems: Limits.maxMemberQueryIds)], required: ["roomId", "userIds"])
            }, reply: "Members", memberOnly: true) { a, c in
                .memberQuery(roomId: a.address.roomId, .membersByIds(app: c.app, roomId: a.address.roomId, a.body.userIds))
            },
            .with("room.info", "The room's information", spec: ["NIM-1", "ZIM-2"], args: RoomAddress.self, schema: roomOnly,
                  reply: "RoomResponse", memberOnly: true) { a, c in .query(.roomAsMember(c.session, roomId: a.roomId)) },
            .with("room.update", "Update the room (managers and creator)", spec: ["NIM-10"], args: Addressed<RoomAddress, RoomUpdateSpec>.self, schema: {
                S.obj(with(["roomId": S.id], (WebSocketDocument.openAPISchemas["UpdateRoom"] as? [String: Any])?["properties"] as? [String: [String: Any]] ?? [:]),
                      required: ["roomId"])
            }, reply: "RoomResponse") { a, c throws(ChatError) in .command(try a.body.command(c, roomId: a.address.roomId)) },
            .with("member.update", "Update my own member info (316)", spec: ["NIM-11"], args: Addressed<RoomAddress, MemberUpdateRequest>.self, schema: {
                S.obj(with(["roomId": S.id, "nickname": S.str(maxLength: Limits.maxNicknameBytes), "avatar": S.str(maxLength: Limits.maxAvatarBytes), "ext": S.str(maxLength: Limits.maxExtBytes)],
                           notifyExt()), required: ["roomId"])
            }, reply: "Empty") { a, c in .command(a.body.command(c.session, roomId: a.address.roomId)) },
            .with("queue.list", "The queue", spec: ["NIM-16"], args: RoomAddress.self, schema: roomOnly, reply: "Queue", memberOnly: true) { a, c in
                .memberQuery(roomId: a.roomId, .queue(app: c.app, roomId: a.roomId))
            },
            .with("queue.offer", "Offer or update an element (317)", spec: ["NIM-16"], args: Addressed<RoomKeyAddress, QueueOfferRequest>.self, schema: {
                S.obj(["roomId": S.id, "key": ["type": "string", "minLength": 1, "maxLength": Limits.maxQueueKeyBytes], "value": S.str(maxLength: Limits.maxQueueValueBytes),
                       "transient": S.bool("Removed when its owner leaves")], required: ["roomId", "key", "value"])
            }, reply: "Empty") { a, c in .command(a.body.command(c, roomId: a.address.roomId, key: a.address.key)) },
            .with("queue.batchUpdate", "Update existing elements (320)", spec: ["NIM-16"], args: Addressed<RoomAddress, QueueBatchRequest>.self, schema: {
                S.obj(with(["roomId": S.id, "elements": S.stringMap, "needNotify": S.bool()], notifyExt()), required: ["roomId", "elements"])
            }, reply: "MissingKeys") { a, c in .command(a.body.command(c, roomId: a.address.roomId)) },
            .with("queue.poll", "Take an element (the head, or by key) (317 poll)", spec: ["NIM-16"], args: Addressed<RoomAddress, QueuePollRequest>.self,
                  schema: { S.obj(["roomId": S.id, "key": S.str()], required: ["roomId"]) }, reply: "QueueElement") { a, c in
                .command(a.body.command(c, roomId: a.address.roomId))
            },
            .with("queue.drop", "Empty the queue (317 drop)", spec: ["NIM-16"], args: RoomAddress.self, schema: roomOnly, reply: "Empty") { a, c in
                .command(.queueDrop(app: c.app, roomId: a.roomId, c.actor))
            },
            .with("attributes.set", "Set room attributes", spec: ["RC-10", "ZIM-8"], args: Addressed<RoomAddress, SetAttributesRequest>.self, schema: {
                S.obj(["roomId": S.id, "entries": S.stringMap, "autoDelete": S.bool("Removed when I leave")], required: ["roomId", "entries"])
            }, reply: "Attributes") { a, c in .command(a.body.command(c, roomId: a.address.roomId)) },
            .with("attributes.remove", "Remove room attributes", spec: ["RC-10", "ZIM-8"], args: Addressed<RoomAddress, AttributeKeysRequest>.self,
                  schema: { S.obj(["roomId": S.id, "keys": S.arr(S.str())], required: ["roomId", "keys"]) }, reply: "Keys") { a, c in
                .command(a.body.remove(c, roomId: a.address.roomId))
            },
            .with("attributes.get", "Room attributes (all, or the keys given)", spec: ["RC-10", "ZIM-8"],
                  args: Addressed<RoomAddress, AttributeKeysRequest>.self,
                  schema: { S.obj(["roomId": S.id, "keys": S.arr(S.str())], required: ["roomId"]) }, reply: "Attributes", memberOnly: true) { a, c in
                .memberQuery(roomId: a.address.roomId, a.body.query(c, roomId: a.address.roomId))
            },
            .with("manage.setRole", "Set a member's role (creator: managers; managers: common/guest)", spec: ["NIM-12"],
                  args: Addressed<RoomUserAddress, RoleRequest>.self, schema: {
                      S.obj(with(["roomId": S.id, "userId": S.id, "role": enumeration(RoleTarget.allCases.map(\.rawValue))], notifyExt()),
                            required: ["roomId", "userId", "role"])
                  }, reply: "Members") { a, c throws(ChatError) in
                .command(try a.body.command(c, roomId: a.address.roomId, userId: a.address.userId))
            },
            .with("manage.kick", "Kick a member (313)", spec: ["NIM-6", "NIM-15"], args: Addressed<RoomUserAddress, KickRequest>.self, schema: {
                S.obj(with(["roomId": S.id, "userId": S.id], notifyExt()), required: ["roomId", "userId"])
            }, reply: "Empty") { a, c in .command(a.body.command(c, roomId: a.address.roomId, userId: a.address.userId)) },
            .with("manage.block", "Block members (303)", spec: ["NIM-12", "RC-5"], args: Addressed<RoomAddress, BlockRequest>.self, schema: {
                S.obj(with(["roomId": S.id, "userIds": S.userIds, "minutes": S.int(minimum: Limits.minDurationMinutes, maximum: Limits.maxDurationMinutes)], notifyExt()),
                      required: ["roomId", "userIds"])
            }, reply: "Empty") { a, c in .command(a.body.command(c, roomId: a.address.roomId)) },
            .with("manage.unblock", "Unblock users (304)", spec: ["NIM-12", "RC-5"], args: Addressed<RoomAddress, UnblockRequest>.self, schema: {
                S.obj(with(["roomId": S.id, "userIds": S.userIds], notifyExt()), required: ["roomId", "userIds"])
            }, reply: "Empty") { a, c in .command(a.body.command(c, roomId: a.address.roomId)) },
            .with("manage.mute", "Mute members: temporary with seconds (314), else permanent (305)", spec: ["NIM-12", "NIM-15", "RC-6"],
                  args: Addressed<RoomAddress, MuteRequest>.self, schema: {
                      S.obj(with(["roomId": S.id, "userIds": S.userIds, "seconds": S.int(minimum: 1, maximum: Limits.maxTempMuteSeconds)], notifyExt()),
                            required: ["roomId", "userIds"])
                  }, reply: "Empty") { a, c throws(ChatError) in .command(try a.body.command(c, roomId: a.address.roomId)) },
            .with("manage.unmute", "Unmute members (306/315)", spec: ["NIM-12", "NIM-15", "RC-6"], args: Addressed<RoomAddress, UnmuteRequest>.self,
                  schema: {
                      S.obj(with(["roomId": S.id, "userIds": S.userIds, "kind": enumeration(["all", "permanent", "temporary"])], notifyExt()),
                            required: ["roomId", "userIds"])
                  }, reply: "Empty") { a, c throws(ChatError) in .command(try a.body.command(c, roomId: a.address.roomId)) },
            .with("manage.roomMute", "Mute or unmute the whole room (318/319)", spec: ["NIM-17", "RC-6"], args: Addressed<RoomAddress, RoomMuteRequest>.self,
                  schema: { S.obj(with(["roomId": S.id, "muted": S.bool()], notifyExt()), required: ["roomId", "muted"]) }, reply: "Empty") { a, c in
                .command(a.body.command(c, roomId: a.address.roomId))
            },
            .with("conversation.set", "Set my pinned and/or Do-Not-Disturb level for a conversation; my other devices are told",
                  spec: ["CS-1", "CS-2"], args: Addressed<ConversationAddress, ConversationStatusRequest>.self,
                  schema: { conversationArgs(withValues: true) }, reply: "ConversationStatusResponse") { a, c throws(ChatError) in
                .command(try a.body.command(c, userId: c.userId, try a.address.key(field: "args.conversationType"), levelField: "args.notificationLevel"))
            },
            .with("conversation.get", "My status of a conversation with its effective level", spec: ["CS-1", "CS-4"], args: ConversationAddress.self,
                  schema: { conversationArgs(withValues: false) }, reply: "ConversationStatusResponse") { a, c throws(ChatError) in
                .query(.conversationStatus(app: c.app, userId: c.userId, try a.key(field: "args.conversationType")))
            },
            .with("group.send", "Send a message to a channel of an ultra group I am a member of and can see (channelId defaults to RCDefault): its members who see the channel get group.message (targets: only those members). 23408 when I am muted in the channel or the group, or either is frozen and I am on neither allowed list; 24406 when I am not a member or cannot see the channel. a text message (type text or RC:TxtMsg) is screened for the app's sensitive words as in rooms (21501 when blocked); stored false keeps it out of history; metadata (an object of strings) lets members' metadata be set on it later",
                  spec: ["MO-3", "MO-5"], args: Addressed<GroupAddress, CommunitySendRequest>.self, schema: {
                      S.obj(["groupId": S.id, "channelId": S.id, "type": S.str("Message type", maxLength: SettingsLimits.maxMessageTypeBytes),
                             "content": S.str(), "stored": S.bool("Keep it in the channel's history (default true)"),
                             "targets": S.arr(S.id, maxItems: Limits.maxMessageTargets), "metadata": S.stringMap],
                            required: ["groupId", "type", "content"])
                  }, reply: "CommunityMessages") { a, c in .command(a.body.command(c, groupId: a.address.groupId)) },
            .with("group.channels", "The channels of an ultra group I can see (public, and private ones listing me)", spec: ["UG-6"],
                  args: Addressed<GroupAddress, PageRequest>.self, schema: {
                      S.obj(["groupId": S.id, "page": S.int(minimum: 1), "pageSize": S.int(minimum: 1, maximum: Limits.maxPageSize)], required: ["groupId"])
                  }, reply: "Channels") { a, c in .query(a.body.userChannels(c, groupId: a.address.groupId, userId: c.userId)) },
        ]
    }

    @Sendable static func conversationArgs(withValues: Bool) -> [String: Any] {
        var props: [String: [String: Any]] = [
            "conversationType": ["type": "integer", "enum": ConversationType.allCases.map(\.rawValue)], "targetId": S.id,
            "channelId": S.str("Ultra groups (type 10) only", maxLength: Limits.maxChannelIdBytes),
        ]
        if withValues {
            props["pinned"] = S.bool()
            props["notificationLevel"] = ["type": "integer", "enum": NotificationLevel.allCases.map(\.rawValue)]
        }
        return S.obj(props, required: ["conversationType", "targetId"])
    }
}
