import Chat
import Foundation

/// The WebSocket protocol, described once here and published two ways: a JSON Schema (2020-12)
/// document served at `/websocket.json` and kept as `openapi/roomcast.websocket.json`, and the
/// Markdown reference `openapi/websocket.md`. Tests keep both files identical to this, and
/// `scripts/websocket-schema.sh` checks every frame the end-to-end tests exchange against it.
public enum WebSocketDocument {
    /// One client operation: `{"id", "op", "args"}` answered by `{"id", "ok": <reply>}` or
    /// `{"id", "error"}`.
    struct Operation {
        let op: String
        let summary: String
        let spec: [String]
        /// Schema of `args`; nil when the op takes none.
        let args: [String: Any]?
        /// Name of the `ok` schema in `$defs`.
        let reply: String
        /// Only members of the room may use it (otherwise 23406).
        var memberOnly = false
    }

    /// One pushed event: `{"ev", "roomId", "epoch", "offset", "data"}`.
    struct Event {
        let ev: String
        let summary: String
        let spec: [String]
        /// Who receives it, and who does not.
        let audience: String
        /// Whether it is part of the room's ordered stream, carrying `epoch` and `offset` and
        /// replayable (BX-1).
        let stream: Stream
        let data: [String: Any]
    }

    enum Stream {
        case always
        case never
        /// When sent to the whole room; not when sent to chosen users.
        case whenRoomWide

        var text: String {
            switch self {
            case .always: return "yes"
            case .never: return "no"
            case .whenRoomWide: return "when sent to the room"
            }
        }
    }

    struct CloseCode {
        let code: UInt16
        let meaning: String
    }

    public static let json: String = {
        let data = try! JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }()

    // MARK: Schema helpers (shared with the OpenAPI document)

    private typealias S = OpenAPIDocument
    private static func ref(_ name: String) -> [String: Any] { ["$ref": "#/$defs/\(name)"] }
    private static var id: [String: Any] { S.id }
    private static var text: [String: Any] { S.str() }
    private static func const(_ v: String) -> [String: Any] { ["const": v] }
    private static func nullable(_ type: String) -> [String: Any] { ["type": [type, "null"]] }
    private static func enumeration(_ values: [String]) -> [String: Any] { ["type": "string", "enum": values] }

    // MARK: Operations

    static var operations: [Operation] {
        let roomOnly = S.obj(["roomId": id], required: ["roomId"])
        let profile: [String: [String: Any]] = [
            "nickname": S.str(maxLength: 128), "avatar": S.str(maxLength: 1024),
            "ext": S.str("Member ext shown to others (NIM-11)", maxLength: 4096),
            "notifyExt": S.str("notifyExt of the 301 enter notification", maxLength: 2048),
        ]
        var roomSpec = openAPISchemas["CreateRoom"] as? [String: Any] ?? [:]
        roomSpec["required"] = nil
        roomSpec["description"] = "Room configuration for mode enter/create; roomId defaults to the op's roomId"
        let resume = S.obj(["epoch": text, "stream": text, "offset": S.int(minimum: 0)], required: ["epoch", "stream", "offset"],
                           description: "Replay what this client missed: the room epoch, connect's stream and the last offset seen (BX-1)")
        let notifyExt: [String: [String: Any]] = ["notifyExt": S.str("Sends the NIM notification with this notifyExt", maxLength: 2048)]
        let userIds = S.userIds
        return [
            Operation(op: "connect",
                      summary: "Authenticate; must be the first message (within the connect timeout). A user then receives the conversation statuses changed after conversationCursor and conversation.statusSynced",
                      spec: ["§2", "NIM-3", "BX-1", "CS-3"],
                      args: ["oneOf": [
                          S.obj(["token": S.str("Client JWT (HS256)"), "device": S.str("Device id; the token's device claim wins"),
                                 "conversationCursor": S.int("The cursor of this device's last conversation.statusSynced; absent: never synced",
                                                             minimum: 0)],
                                required: ["token"]),
                          S.obj(["appKey": text, "anonymous": S.obj(["nickname": text, "avatar": text]), "device": text],
                                required: ["appKey", "anonymous"], description: "Anonymous independent-mode client (NIM-3)"),
                      ]], reply: "Connected"),
            Operation(op: "token.refresh", summary: "Replace the token before it expires (same user and app)", spec: ["§2"],
                      args: S.obj(["token": text], required: ["token"]), reply: "Empty"),
            Operation(op: "room.join", summary: "Join (room must exist), enter (create if missing) or create (must not exist) a room",
                      spec: ["RC-1", "RC-2", "RC-3", "RC-4", "NIM-4", "NIM-5", "ZIM-1", "ZIM-2", "ZIM-3", "BX-1"],
                      args: S.obj(["roomId": id, "mode": enumeration(["join", "enter", "create"]), "room": roomSpec, "resume": resume]
                          .merging(profile) { a, _ in a }, required: ["roomId"]), reply: "JoinReply"),
            Operation(op: "room.leave", summary: "Leave a room", spec: ["RC-1", "RC-2", "RC-3", "ZIM-4"], args: roomOnly, reply: "Empty"),
            Operation(op: "room.leaveAll", summary: "Leave every room this connection is in", spec: ["RC-1", "ZIM-4"], args: nil, reply: "RoomIds"),
            Operation(op: "room.switch", summary: "Leave one room and enter another in one step", spec: ["ZIM-6"],
                      args: S.obj(["from": id, "to": S.ref("CreateRoom"), "createIfMissing": S.bool()].merging(profile) { a, _ in a },
                                  required: ["from", "to"]), reply: "JoinReply"),
            Operation(op: "room.send", summary: "Send a message to the room (everyone else receives it)", spec: ["NIM-8", "RC-7", "NIM-3"],
                      args: S.obj(["roomId": id, "type": enumeration(["text", "custom"]),
                                   "content": ["type": "string", "minLength": 1, "maxLength": 16384]], required: ["roomId", "content"]),
                      reply: "MessageResponse"),
            Operation(op: "room.history", summary: "Message history", spec: ["NIM-8"],
                      args: S.obj(["roomId": id, "start": S.int("ms; 0: from the newest/oldest", minimum: 0),
                                   "limit": S.int(minimum: 1, maximum: 200), "order": enumeration(["asc", "desc"]),
                                   "types": S.arr(enumeration(["text", "custom", "notification"]))], required: ["roomId"]),
                      reply: "Messages", memberOnly: true),
            Operation(op: "room.members", summary: "Members, paged", spec: ["RC-9", "NIM-13"],
                      args: S.obj(["roomId": id,
                                   "type": enumeration(["present", "regular", "temporary", "regularOnline", "temporaryNewestFirst"]),
                                   "order": enumeration(["asc", "desc"]), "limit": S.int(minimum: 1, maximum: 500),
                                   "after": S.str("The last userId of the previous page")], required: ["roomId"]),
                      reply: "Members", memberOnly: true),
            Operation(op: "room.membersByIds", summary: "Members by id", spec: ["NIM-13"],
                      args: S.obj(["roomId": id, "userIds": S.arr(id, maxItems: 200)], required: ["roomId", "userIds"]),
                      reply: "Members", memberOnly: true),
            Operation(op: "room.info", summary: "The room's information", spec: ["NIM-1", "ZIM-2"], args: roomOnly, reply: "RoomResponse",
                      memberOnly: true),
            Operation(op: "room.update", summary: "Update the room (managers and creator)", spec: ["NIM-10"],
                      args: S.obj(["roomId": id].merging((openAPISchemas["UpdateRoom"] as? [String: Any])?["properties"] as? [String: [String: Any]] ?? [:]) { a, _ in a },
                                  required: ["roomId"]), reply: "RoomResponse"),
            Operation(op: "member.update", summary: "Update my own member info (316)", spec: ["NIM-11"],
                      args: S.obj(["roomId": id, "nickname": S.str(maxLength: 128), "avatar": S.str(maxLength: 1024),
                                   "ext": S.str(maxLength: 4096)].merging(notifyExt) { a, _ in a }, required: ["roomId"]), reply: "Empty"),
            Operation(op: "queue.list", summary: "The queue", spec: ["NIM-16"], args: roomOnly, reply: "Queue", memberOnly: true),
            Operation(op: "queue.offer", summary: "Offer or update an element (317)", spec: ["NIM-16"],
                      args: S.obj(["roomId": id, "key": ["type": "string", "minLength": 1, "maxLength": 128], "value": S.str(maxLength: 4096),
                                   "transient": S.bool("Removed when its owner leaves")], required: ["roomId", "key", "value"]),
                      reply: "Empty"),
            Operation(op: "queue.batchUpdate", summary: "Update existing elements (320)", spec: ["NIM-16"],
                      args: S.obj(["roomId": id, "elements": S.stringMap, "needNotify": S.bool()].merging(notifyExt) { a, _ in a },
                                  required: ["roomId", "elements"]), reply: "MissingKeys"),
            Operation(op: "queue.poll", summary: "Take an element (the head, or by key) (317 poll)", spec: ["NIM-16"],
                      args: S.obj(["roomId": id, "key": text], required: ["roomId"]), reply: "QueueElement"),
            Operation(op: "queue.drop", summary: "Empty the queue (317 drop)", spec: ["NIM-16"], args: roomOnly, reply: "Empty"),
            Operation(op: "attributes.set", summary: "Set room attributes", spec: ["RC-10", "ZIM-8"],
                      args: S.obj(["roomId": id, "entries": S.stringMap, "autoDelete": S.bool("Removed when I leave")],
                                  required: ["roomId", "entries"]), reply: "Attributes"),
            Operation(op: "attributes.remove", summary: "Remove room attributes", spec: ["RC-10", "ZIM-8"],
                      args: S.obj(["roomId": id, "keys": S.arr(text)], required: ["roomId", "keys"]), reply: "Keys"),
            Operation(op: "attributes.get", summary: "Room attributes (all, or the keys given)", spec: ["RC-10", "ZIM-8"],
                      args: S.obj(["roomId": id, "keys": S.arr(text)], required: ["roomId"]), reply: "Attributes", memberOnly: true),
            Operation(op: "manage.setRole", summary: "Set a member's role (creator: managers; managers: common/guest)", spec: ["NIM-12"],
                      args: S.obj(["roomId": id, "userId": id, "role": enumeration(RoleTarget.allCases.map(\.rawValue))]
                          .merging(notifyExt) { a, _ in a }, required: ["roomId", "userId", "role"]), reply: "Members"),
            Operation(op: "manage.kick", summary: "Kick a member (313)", spec: ["NIM-6", "NIM-15"],
                      args: S.obj(["roomId": id, "userId": id].merging(notifyExt) { a, _ in a }, required: ["roomId", "userId"]),
                      reply: "Empty"),
            Operation(op: "manage.block", summary: "Block members (303)", spec: ["NIM-12", "RC-5"],
                      args: S.obj(["roomId": id, "userIds": userIds, "minutes": S.int(minimum: 1, maximum: 43200)]
                          .merging(notifyExt) { a, _ in a }, required: ["roomId", "userIds"]), reply: "Empty"),
            Operation(op: "manage.unblock", summary: "Unblock users (304)", spec: ["NIM-12", "RC-5"],
                      args: S.obj(["roomId": id, "userIds": userIds].merging(notifyExt) { a, _ in a }, required: ["roomId", "userIds"]),
                      reply: "Empty"),
            Operation(op: "manage.mute", summary: "Mute members: temporary with seconds (314), else permanent (305)", spec: ["NIM-12", "NIM-15", "RC-6"],
                      args: S.obj(["roomId": id, "userIds": userIds, "seconds": S.int(minimum: 1, maximum: 2_592_000)]
                          .merging(notifyExt) { a, _ in a }, required: ["roomId", "userIds"]), reply: "Empty"),
            Operation(op: "manage.unmute", summary: "Unmute members (306/315)", spec: ["NIM-12", "NIM-15", "RC-6"],
                      args: S.obj(["roomId": id, "userIds": userIds, "kind": enumeration(["all", "permanent", "temporary"])]
                          .merging(notifyExt) { a, _ in a }, required: ["roomId", "userIds"]), reply: "Empty"),
            Operation(op: "manage.roomMute", summary: "Mute or unmute the whole room (318/319)", spec: ["NIM-17", "RC-6"],
                      args: S.obj(["roomId": id, "muted": S.bool()].merging(notifyExt) { a, _ in a }, required: ["roomId", "muted"]),
                      reply: "Empty"),
            Operation(op: "conversation.set", summary: "Set my pinned and/or Do-Not-Disturb level for a conversation; my other devices are told",
                      spec: ["CS-1", "CS-2"], args: conversationArgs(withValues: true), reply: "ConversationStatusResponse"),
            Operation(op: "conversation.get", summary: "My status of a conversation with its effective level", spec: ["CS-1", "CS-4"],
                      args: conversationArgs(withValues: false), reply: "ConversationStatusResponse"),
            Operation(op: "group.channels", summary: "The channels of an ultra group I can see (public, and private ones listing me)",
                      spec: ["UG-6"], args: S.obj(["groupId": id, "page": S.int(minimum: 1), "pageSize": S.int(minimum: 1, maximum: 100)],
                                                 required: ["groupId"]), reply: "Channels"),
        ]
    }

    static func conversationArgs(withValues: Bool) -> [String: Any] {
        var props: [String: [String: Any]] = [
            "conversationType": ["type": "integer", "enum": ConversationType.allCases.map(\.rawValue)], "targetId": id,
            "channelId": S.str("Ultra groups (type 10) only", maxLength: 64),
        ]
        if withValues {
            props["pinned"] = S.bool()
            props["notificationLevel"] = ["type": "integer", "enum": NotificationLevel.allCases.map(\.rawValue)]
        }
        return S.obj(props, required: ["conversationType", "targetId"])
    }

    // MARK: Events

    static var events: [Event] {
        let member = S.ref("Member")
        let users = S.arr(text)
        return [
            Event(ev: "room.status", summary: "The joining connection's room status: joining, joined (join info), joinFailed (code; autoRejoin false for blocked/room missing), reset (recreated while away, then joined), quit, destroyed (destroyType)",
                  spec: ["RC-1", "NIM-5", "ZIM-5", "ZIM-6"],
                  audience: "Only the connection concerned; `destroyed` goes to every online member; no one else.", stream: .never,
                  data: S.obj(["status": enumeration(["joining", "joined", "joinFailed", "reset", "quit", "destroyed"]),
                               "joinInfo": ref("JoinInfo"), "code": S.int(), "autoRejoin": S.bool(),
                               "destroyType": enumeration(["manual", "auto"]), "nimState": S.int("NIM-5: 0 entering, 1 entered, 2 failed"),
                               "zimState": enumeration(["connecting", "connected", "disconnected"]),
                               "zimEvent": enumeration(["success", "activeSwitch", "switchFailed", "kickedOut", "roomNotExist", "enterFailed"]),
                               "time": S.int()], required: ["status", "zimState", "zimEvent", "time"])),
            Event(ev: "room.kicked", summary: "This connection was removed: 1 room closed, 2 by a manager, 3 conflicting login, 5 blocked",
                  spec: ["NIM-6", "RC-4", "RC-5"], audience: "Only the removed connection(s).", stream: .never,
                  data: S.obj(["reason": ["type": "integer", "enum": [1, 2, 3, 5]], "ext": text, "time": S.int()], required: ["reason", "time"])),
            Event(ev: "room.memberChanged", summary: "Members joined or quit, with the member count (when the app's memberChangeEvents is on)",
                  spec: ["RC-2", "ZIM-4"], audience: "Every other member of the room; never the member who joined or quit.", stream: .always,
                  data: S.obj(["members": S.arr(S.obj(["userId": text, "action": enumeration(["join", "quit"]), "nickname": text, "avatar": text],
                                                      required: ["userId", "action"])),
                               "memberCount": S.int()], required: ["members", "memberCount"])),
            Event(ev: "room.multiLoginSync", summary: "The same user joined (status 1) or left (status 0; reason 1 voluntary, 2 kicked by joining another room) on another device",
                  spec: ["RC-3", "RC-4"],
                  audience: "The user's other online devices only (RC-4 kicks also go to the members of the room left).", stream: .never,
                  data: S.obj(["roomId": text, "status": ["type": "integer", "enum": [0, 1]], "reason": ["type": "integer", "enum": [0, 1, 2]],
                               "time": S.int(), "extra": text], required: ["roomId", "status", "reason", "time"])),
            Event(ev: "room.block", summary: "Users were blocked (operateType 1) or unblocked (0), when needNotify",
                  spec: ["RC-5"],
                  audience: "Block: every member, including the blocked users (sent before they are removed). Unblock: only the unblocked users.",
                  stream: .whenRoomWide,
                  data: S.obj(["roomId": text, "operateType": ["type": "integer", "enum": [0, 1]], "durationTime": S.int("ms"),
                               "operateTime": S.int(), "userIdList": users, "extra": text],
                              required: ["roomId", "operateType", "durationTime", "operateTime", "userIdList"])),
            Event(ev: "room.ban", summary: "Mute changes, when needNotify: banType 0/1 unmute/mute users, 2/3 room mute off/on, 4/5 allowlist remove/add, 6/7 global unmute/mute",
                  spec: ["RC-6"],
                  audience: "banType 0–5: every member of the room. 6/7: only the globally (un)muted users, wherever they are.",
                  stream: .whenRoomWide,
                  data: S.obj(["roomId": S.str("Empty for global mutes"), "banType": ["type": "integer", "minimum": 0, "maximum": 7],
                               "durationTime": S.int("ms"), "operateTime": S.int(), "userIdList": users, "extra": text],
                              required: ["roomId", "banType", "durationTime", "operateTime", "userIdList"])),
            Event(ev: "room.notification", summary: "NIM chat-room notification (eventType 301–320) with the operator (source), the members affected (targets), notifyExt and a type-specific ext",
                  spec: ["NIM-9", "NIM-12", "NIM-15", "NIM-16", "NIM-17"],
                  audience: "Every member of the room (301/302: not the member entering or leaving). A member's manage.* always notifies; REST moderation notifies when notifyExt is given; role changes, kicks, 311, 316 and 317 always.",
                  stream: .always,
                  data: S.obj(["eventType": ["type": "integer", "enum": NotificationType.allCases.map(\.rawValue)],
                               "source": ["oneOf": [member, ["type": "null"]]], "targets": S.arr(member), "notifyExt": text,
                               "ext": ["oneOf": [["type": "null"],
                                                 S.obj(["duration": S.int("seconds (314)")], required: ["duration"]),
                                                 S.obj(["changeType": text, "key": text, "value": text], required: ["changeType", "key", "value"]),
                                                 S.obj(["changeType": text, "elements": S.stringMap], required: ["changeType", "elements"])]],
                               "time": S.int()], required: ["eventType", "source", "targets", "notifyExt", "ext", "time"])),
            Event(ev: "room.message", summary: "A message sent to the room", spec: ["NIM-8"],
                  audience: "Every member of the room except the sending connection (the sender gets it as its reply); server sends reach everyone.",
                  stream: .always, data: S.obj(["message": S.ref("Message")], required: ["message"])),
            Event(ev: "room.attributes", summary: "Room attributes were set or removed (also when an owner's autoDelete attributes go with them)",
                  spec: ["RC-10", "ZIM-8"], audience: "Every member of the room.", stream: .always,
                  data: S.obj(["updated": S.arr(S.ref("Attribute")), "removed": users, "operator": text, "time": S.int()],
                              required: ["updated", "removed", "operator", "time"])),
            Event(ev: "room.resume", summary: "Answer to a join's resume: resumed with the missed events replayed before it, or not (reason epochChanged, serverRestarted, outOfWindow)",
                  spec: ["BX-1"], audience: "Only the resuming connection.", stream: .never,
                  data: S.obj(["resumed": S.bool(), "replayed": S.int(minimum: 0),
                               "reason": enumeration(["epochChanged", "serverRestarted", "outOfWindow"])], required: ["resumed", "replayed"])),
            Event(ev: "group.channelTypeChanged",
                  summary: "A channel changed type: changeType 2 public→private (on the private list), 6 public→private (not on it), 3 private→public",
                  spec: ["UG-2", "UG-5"],
                  audience: "Public→private: every member of the ultra group (2 or 6). Private→public: only the private list (3). Nobody outside the group.",
                  stream: .never,
                  data: S.obj(["infoList": S.arr(S.obj(["groupId": text, "channelId": text, "changeType": ["type": "integer", "enum": [2, 3, 6]],
                                                        "time": S.int()], required: ["groupId", "channelId", "changeType", "time"]))],
                              required: ["infoList"])),
            Event(ev: "group.channelDisbanded", summary: "A channel was deleted", spec: ["UG-3", "UG-5"],
                  audience: "A public channel: every member of the ultra group. A private one: only its private list.", stream: .never,
                  data: S.obj(["infoList": S.arr(S.obj(["groupId": text, "channelId": text, "time": S.int()],
                                                       required: ["groupId", "channelId", "time"]))], required: ["infoList"])),
            Event(ev: "group.channelUserKicked", summary: "You were taken off a private channel's list", spec: ["UG-4", "UG-5"],
                  audience: "Only each removed user, about themselves; nobody when the channel is public.", stream: .never,
                  data: S.obj(["infoList": S.arr(S.obj(["groupId": text, "channelId": text, "userId": text, "time": S.int()],
                                                       required: ["groupId", "channelId", "userId", "time"]))], required: ["infoList"])),
            Event(ev: "conversation.statusChanged",
                  summary: "Conversation statuses changed (or, after connect, the sync): conversationStatusType 1 Do-Not-Disturb (value 1 on, 0 DND, with notificationLevel), 2 pinned (value 1/0)",
                  spec: ["CS-2", "CS-3"],
                  audience: "Every online device of the user (a change made from a device: the user's other devices); nobody else.",
                  stream: .never,
                  data: S.obj(["infoList": S.arr(S.obj(["conversationType": S.int(), "targetId": text, "channelId": text,
                                                        "conversationStatusType": ["type": "integer", "enum": [1, 2]],
                                                        "conversationStatusValue": ["type": "integer", "enum": [0, 1]],
                                                        "notificationLevel": ["type": "integer", "enum": NotificationLevel.allCases.map(\.rawValue)],
                                                        "version": S.int(), "time": S.int()],
                                                       required: ["conversationType", "targetId", "channelId", "conversationStatusType",
                                                                  "conversationStatusValue", "notificationLevel", "version"]))],
                              required: ["infoList"])),
            Event(ev: "conversation.statusSynced", summary: "The connect-time sync is complete: code 0 on success; keep cursor for the next connect",
                  spec: ["CS-3"], audience: "Only the connecting device (users, not anonymous clients).", stream: .never,
                  data: S.obj(["code": S.int(), "cursor": S.int(minimum: 0)], required: ["code", "cursor"])),
            Event(ev: "token.expired", summary: "The token expired; refresh it within graceSeconds or the connection closes with 4002",
                  spec: ["§2"], audience: "Only the connection whose token expired.", stream: .never,
                  data: S.obj(["graceSeconds": S.int(minimum: 0)], required: ["graceSeconds"])),
        ]
    }

    static var closeCodes: [CloseCode] {
        [
            CloseCode(code: 1001, meaning: "The server is shutting down"),
            CloseCode(code: 1003, meaning: "A binary message (the protocol is JSON text)"),
            CloseCode(code: CloseCodes.badRequest, meaning: "The message was not a protocol message"),
            CloseCode(code: CloseCodes.notAuthenticated, meaning: "The first message was not connect, it had no credentials, or it did not come within the connect timeout"),
            CloseCode(code: CloseCodes.tokenExpired, meaning: "The token expired and was not refreshed within the grace period"),
            CloseCode(code: CloseCodes.originNotAllowed, meaning: "The Origin is not on the app's allowlist"),
            CloseCode(code: CloseCodes.badToken, meaning: "The token (or app key) is invalid"),
            CloseCode(code: CloseCodes.slowConsumer, meaning: "The client did not read its events fast enough; other clients are unaffected"),
        ]
    }

    // MARK: The JSON Schema document

    /// The OpenAPI component schemas, with their references pointed at `$defs`.
    static var openAPISchemas: [String: Any] {
        rewriteRefs(OpenAPIDocument.allSchemas) as? [String: Any] ?? [:]
    }

    private static func rewriteRefs(_ value: Any) -> Any {
        if let d = value as? [String: Any] {
            var out: [String: Any] = [:]
            for (k, v) in d {
                if k == "$ref", let s = v as? String {
                    out[k] = s.replacingOccurrences(of: "#/components/schemas/", with: "#/$defs/")
                } else {
                    out[k] = rewriteRefs(v)
                }
            }
            return out
        }
        if let a = value as? [Any] { return a.map(rewriteRefs) }
        return value
    }

    static var document: [String: Any] {
        var defs = openAPISchemas
        defs["Connected"] = S.obj(["sessionId": text, "userId": S.str("Assigned for anonymous clients"), "anonymous": S.bool(),
                                   "stream": S.str("This server run; resume positions are valid only within it (BX-1)"),
                                   "expiresAt": ["type": ["integer", "null"], "description": "Token expiry (ms); null for anonymous"]],
                                  required: ["sessionId", "userId", "anonymous", "stream", "expiresAt"])
        defs["JoinInfo"] = S.obj(["memberCount": S.int(), "joinTime": S.int(), "room": S.ref("Room")], required: ["memberCount", "joinTime", "room"])
        defs["JoinReply"] = S.obj(["joinInfo": ref("JoinInfo")], required: ["joinInfo"])
        defs["RoomIds"] = S.obj(["roomIds": S.arr(text)], required: ["roomIds"])
        defs["Attribute"] = S.obj(["key": text, "value": text, "owner": text, "autoDelete": S.bool()], required: ["key", "value"])

        var clientMessages: [[String: Any]] = []
        for o in operations {
            var props: [String: Any] = ["id": S.int("Echoed in the answer"), "op": const(o.op)]
            var required = ["op"]
            if let a = o.args {
                let name = "Args." + o.op
                defs[name] = a
                props["args"] = ref(name)
                required.append("args")
            }
            clientMessages.append([
                "type": "object", "title": o.op, "description": o.summary + ". SPEC: " + o.spec.joined(separator: ", "),
                "properties": props, "required": required, "x-reply": "#/$defs/" + o.reply, "x-member-only": o.memberOnly,
            ])
        }
        defs["ClientMessage"] = ["oneOf": clientMessages, "description": "What a client sends: {\"id\", \"op\", \"args\"}"]
        defs["Reply"] = S.obj(["id": nullable("integer"), "ok": ["type": "object", "description": "The op's x-reply schema"]],
                              required: ["id", "ok"])
        defs["ErrorReply"] = S.obj(["id": nullable("integer"), "error": S.ref("Error")], required: ["id", "error"],
                                   description: "Codes as in openapi/errors.md; id is null when the message could not be read")
        var serverMessages: [[String: Any]] = [ref("Reply"), ref("ErrorReply")]
        for e in events {
            let name = "Event." + e.ev
            defs[name + ".data"] = e.data
            var props: [String: Any] = ["ev": const(e.ev), "roomId": text, "data": ref(name + ".data")]
            var required = ["ev", "data"]
            if e.stream != .never {
                props["epoch"] = S.str("The room's epoch; changes when it is destroyed and created again")
                props["offset"] = S.int("Position in the room's stream, from 1 per epoch and server run", minimum: 1)
            }
            if e.stream == .always { required += ["roomId", "epoch", "offset"] }
            defs[name] = ["type": "object", "title": e.ev, "description": e.summary + ". SPEC: " + e.spec.joined(separator: ", "),
                          "x-audience": e.audience, "x-stream": e.stream.text, "properties": props, "required": required]
            serverMessages.append(ref(name))
        }
        defs["ServerMessage"] = ["oneOf": serverMessages, "description": "What the server sends: answers and events"]
        let doc: [String: Any] = [
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://roomcast.dev/schemas/websocket.json",
            "title": "Roomcast WebSocket protocol",
            "description": "GET /ws upgrades (permessage-deflate offered). Text frames of JSON. The first message is connect. "
                + "Commands are ClientMessage and are answered in order with Reply (the op's x-reply) or ErrorReply; events are "
                + "ServerMessage too. See openapi/websocket.md.",
            "x-endpoint": "GET /ws",
            "x-close-codes": Dictionary(uniqueKeysWithValues: closeCodes.map { (String($0.code), $0.meaning) }),
            "oneOf": [ref("ClientMessage"), ref("ServerMessage")],
            "$defs": defs,
        ]
        return rewriteRefs(doc) as? [String: Any] ?? [:]
    }

    // MARK: The Markdown reference

    public static var markdown: String {
        var md = """
            # Roomcast WebSocket protocol

            Generated by `roomcast --print-websocket-doc`; the machine-readable twin is
            `roomcast.websocket.json` (JSON Schema 2020-12, also served at `GET /websocket.json`).

            ## Connection

            - `GET /ws` upgrades to a WebSocket (RFC 6455; permessage-deflate is negotiated when offered).
              Browsers' `Origin` must be on the app's allowlist (`PUT /v1/settings`, `allowedOrigins`).
            - Every message is a JSON text frame. The first must be `connect`, sent within the connect
              timeout (`--connect-timeout`, default 10 s).
            - A command is `{"id": 7, "op": "room.join", "args": {...}}`. Its answer is
              `{"id": 7, "ok": {...}}` or `{"id": 7, "error": {"code": 23406, "message": "...", "field": "roomId"}}`
              with the codes of [errors.md](errors.md). Answers come in the order commands were sent.
            - An event is `{"ev": "room.message", "roomId": "r1", "epoch": "...", "offset": 42, "data": {...}}`.
              Events of a room's stream carry `epoch` and `offset`: offsets rise by one per event of that
              room, so a gap shows a missed event. To resume after a reconnect, join with
              `"resume": {"epoch", "stream", "offset"}` (the `stream` from `connect`, the last offset seen):
              the missed events are replayed, then `room.resume` tells whether the replay was complete.
            - The server pings idle connections; clients answer pings (every WebSocket library does).

            ## Operations


            """
        md += "| op | does | args | answer `ok` | SPEC |\n|---|---|---|---|---|\n"
        for o in operations {
            let args = o.args.map { fieldList($0) } ?? "—"
            let who = o.memberOnly ? " Members of the room only." : ""
            md += "| `\(o.op)` | \(o.summary).\(who) | \(args) | \(o.reply) | \(o.spec.joined(separator: ", ")) |\n"
        }
        md += "\n## Events\n\n| ev | meaning | who receives it | stream | data | SPEC |\n|---|---|---|---|---|---|\n"
        for e in events {
            md += "| `\(e.ev)` | \(e.summary) | \(e.audience) | \(e.stream.text) | \(fieldList(e.data)) | \(e.spec.joined(separator: ", ")) |\n"
        }
        md += "\n## Close codes\n\n| code | meaning |\n|---|---|\n"
        for c in closeCodes { md += "| \(c.code) | \(c.meaning) |\n" }
        md += """

            ## Answer shapes

            The `ok` objects share the REST schemas (`roomcast.openapi.json`): `Empty` is `{}`,
            `JoinReply` is `{"joinInfo": {"memberCount", "joinTime", "room"}}`, `Connected` is
            `{"sessionId", "userId", "anonymous", "stream", "expiresAt"}`, `RoomIds` is `{"roomIds": [...]}`,
            `Keys` is `{"keys": [...]}`; the rest are named as in the REST document.

            """
        return md
    }

    /// `a`, `b?` for an object schema's properties (`?`: optional); alternatives joined by "or".
    private static func fieldList(_ schema: [String: Any]) -> String {
        if let alternatives = schema["oneOf"] as? [[String: Any]] {
            return alternatives.map(fieldList).joined(separator: " or ")
        }
        guard let props = schema["properties"] as? [String: Any] else { return "—" }
        let required = Set(schema["required"] as? [String] ?? [])
        let names = props.keys.sorted { (required.contains($0) ? 0 : 1, $0) < (required.contains($1) ? 0 : 1, $1) }
        return names.map { "`\($0)\(required.contains($0) ? "" : "?")`" }.joined(separator: " ")
    }
}
