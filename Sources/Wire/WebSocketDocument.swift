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
        /// In the room's stream order, with the room's `epoch`, but with no offset of its own and
        /// not replayed: it tells which offsets this connection did not get (QS-3).
        case marker
        /// In the stream, except transient messages (QS-5), which carry neither epoch nor offset.
        case unlessTransient

        var text: String {
            switch self {
            case .always: return "yes"
            case .never: return "no"
            case .whenRoomWide: return "when sent to the room"
            case .marker: return "in stream order, epoch but no offset"
            case .unlessTransient: return "yes, except transient messages (no epoch, no offset)"
            }
        }
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

    /// The operations, from the op table that also drives the sessions' dispatch.
    static var operations: [Operation] {
        OpTable.all.map { Operation(op: $0.name, summary: $0.summary, spec: $0.spec, args: $0.args, reply: $0.reply, memberOnly: $0.memberOnly) }
    }

    // MARK: Events

    static var events: [Event] {
        let member = S.ref("Member")
        let users = S.arr(text)
        return [
            Event(ev: "room.status", summary: "The joining connection's room status: joining, joined (join info), joinFailed (code; autoRejoin false for blocked, closed or missing rooms), reset (recreated while away, then joined), quit, destroyed (destroyType)",
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
            Event(ev: "room.memberChanged", summary: "Members joined or quit, with the member count (when the app's memberChangeEvents is on; past the app's memberEventsThreshold, room.members summaries instead)",
                  spec: ["RC-2", "ZIM-4", "AU-4"], audience: "Every other member of the room; never the member who joined or quit, nor a connection that joined with memberEvents counts.", stream: .always,
                  data: S.obj(["members": S.arr(S.obj(["userId": text, "action": enumeration(["join", "quit"]), "nickname": text, "avatar": text],
                                                      required: ["userId", "action"])),
                               "memberCount": S.int()], required: ["members", "memberCount"])),
            Event(ev: "room.members", summary: "AU-4: who joined and left since the room's previous summary, at most once per the app's memberSummaryIntervalMs: in a room with more members present than the app's memberEventsThreshold (instead of room.memberChanged and the 301/302 notifications of each member), and to a connection that joined with memberEvents counts (at any size, without ids). joined and left count every join and departure exactly; joinedIds and leftIds name the first \(Limits.maxMemberSummaryIds) of each",
                  spec: ["AU-4"],
                  audience: "Past the threshold: every member of the room except counts-only connections, with ids. Counts-only connections: their own copy, without ids. Nobody else; nothing below the threshold unless a counts-only connection is in the room.",
                  stream: .always,
                  data: S.obj(["memberCount": S.int(), "joined": S.int(), "left": S.int(),
                               "joinedIds": S.arr(text), "leftIds": S.arr(text), "time": S.int()],
                              required: ["memberCount", "joined", "left", "time"])),
            Event(ev: "room.multiLoginSync", summary: "The same user joined (status 1) or left (status 0; reason 1 voluntary, 2 kicked by joining another room) on another device",
                  spec: ["RC-3", "RC-4"],
                  audience: "The user's other online devices only (RC-4 kicks also go to the members of the room left).", stream: .whenRoomWide,
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
                  audience: "banType 0–5: every member of the room. 6/7: the globally (un)muted users only, once per room they are in, with that roomId.",
                  stream: .whenRoomWide,
                  data: S.obj(["roomId": S.str("The room (for global mutes 6/7: each room the user is in)"), "banType": ["type": "integer", "minimum": 0, "maximum": 7],
                               "durationTime": S.int("ms"), "operateTime": S.int(), "userIdList": users, "extra": text],
                              required: ["roomId", "banType", "durationTime", "operateTime", "userIdList"])),
            Event(ev: "room.notification", summary: "NIM chat-room notification (eventType 301–320) with the operator (source), the members affected (targets), notifyExt and a type-specific ext",
                  spec: ["NIM-9", "NIM-12", "NIM-15", "NIM-16", "NIM-17"],
                  audience: "Every member of the room (301/302: not the member entering or leaving; with the member's notifyTargetTags, only the members they match). A member's manage.* always notifies; REST moderation notifies when notifyExt is given; role changes, kicks, 311, 316 and 317 always. A tag mute's 314/315 reach the tag's members (or its notifyTargetTags); a tag change's 316 only its notifyTargetTags.",
                  stream: .always,
                  data: S.obj(["eventType": ["type": "integer", "enum": NotificationType.allCases.map(\.rawValue)],
                               "source": ["oneOf": [member, ["type": "null"]]], "targets": S.arr(member), "notifyExt": text,
                               "ext": ["oneOf": [["type": "null"],
                                                 S.obj(["duration": S.int("seconds (314)")], required: ["duration"]),
                                                 S.obj(["changeType": text, "key": text, "value": text], required: ["changeType", "key", "value"]),
                                                 S.obj(["changeType": text, "elements": S.stringMap], required: ["changeType", "elements"])]],
                               "time": S.int()], required: ["eventType", "source", "targets", "notifyExt", "ext", "time"])),
            Event(ev: "room.message", summary: "A message sent to the room, with its class (priority) and type name (messageType) when they differ from a plain message's",
                  spec: ["NIM-8", "QS-1", "QS-3", "QS-5", "QS-6", "AU-1", "AU-2"],
                  audience: "Every member of the room except the sending connection (the sender gets it as its reply); server sends reach everyone. A message with targets reaches only those members (and only they read it in history or resume it); one with targetTags only the members whose tags match (AU-1, AU-2). Nobody while the room's distribution is stopped (QS-6). A connection reading slower than the room may lose normal, low and transient ones (never high), each loss counted in its next room.gap (QS-3).",
                  stream: .unlessTransient, data: S.obj(["message": S.ref("Message")], required: ["message"])),
            Event(ev: "room.gap",
                  summary: "Events of the room this connection did not get because it read slower than the room (what its socket did not take of its queue past --outbound-soft-bytes, or its whole queue past twice that: low and transient messages first, past a quarter of it, then normal ones; high-priority messages and every other event are never dropped): fromOffset–toOffset are the stream offsets the lost events span (absent when only transient messages, which have none, were lost), dropped counts them per class. It comes just before the room's next event the connection gets once it has caught up (that part at or below a quarter of --outbound-soft-bytes) or once the gap has waited the server's one-second tick, or at that tick when the room is quiet, or at once when the room's stream begins again (a new epoch: the next gap counts the new one's losses). Until it goes, the room's losses are counted into that one gap, so a connection that stays behind gets about one gap a second per room, and events it still got (high-priority messages, room events) may come before it and lie between fromOffset and toOffset. Delivered messages plus the counts of every gap are what the room sent",
                  spec: ["QS-3", "QS-7"],
                  audience: "Only the connection that lost the events; never the room's other members (a connection that keeps up gets one only when the server, fallen behind, hands it more than the soft mark at once, and a low message past a quarter of it: it sheds such a burst rather than hold it).",
                  stream: .marker,
                  data: S.obj(["fromOffset": S.int("First stream offset the lost events span", minimum: 1),
                               "toOffset": S.int("Last stream offset the lost events span; the connection got no event of the room between fromOffset and toOffset", minimum: 1),
                               "dropped": S.obj(["normal": S.int(minimum: 0), "low": S.int(minimum: 0), "transient": S.int(minimum: 0)],
                                                required: ["normal", "low", "transient"])],
                              required: ["dropped"])),
            Event(ev: "message.recalled", summary: "A message of the room was recalled (by the app server, its sender within the app's recallWindowSeconds, or the room's creator or a manager): drop its content; history and resume now hold its tombstone at its offset (room.message with recalled: true and no content)",
                  spec: ["MO-1"], audience: "Whoever the message reached: every member of the room, or only its addressees (targets, targetTags) and its sender.", stream: .always,
                  data: S.obj(["roomId": text, "messageId": text, "sender": text, "operator": S.str("Who recalled it; empty for the app server"),
                               "notifyExt": S.str(maxLength: Limits.maxRecallExtBytes), "time": S.int(), "message": S.ref("Message")],
                              required: ["roomId", "messageId", "sender", "operator", "time", "message"])),
            Event(ev: "room.tagsUpdated", summary: "The app server changed this member's tags in the room", spec: ["AU-1"],
                  audience: "Only the member's own connections in the room.", stream: .never,
                  data: S.obj(["roomId": text, "tags": S.arr(text), "time": S.int()], required: ["roomId", "tags", "time"])),
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
            Event(ev: "group.message", summary: "A message in an ultra group's channel (a community channel), from the app server or a member's client (group.send); the data is the message",
                  spec: ["MO-3"],
                  audience: "Every member who sees the channel (public: the group's members; private: its list and the members of the user groups bound to it, MO-4), or only the addressed members and the sender when targets are given; never the sending connection's user for a client send (the send's answer is its copy). Nobody outside the group.",
                  stream: .never, data: S.ref("CommunityMessage")),
            Event(ev: "message.updated", summary: "A community message was edited by its sender (change content; version counts the edits), its metadata changed (change metadata), or the app server recalled it (change recalled: message is its tombstone, recalled true and no content): replace your copy with message",
                  spec: ["MO-3"],
                  audience: "Whoever sees the message: the members who see its channel, or its addressees and sender. Nobody else.", stream: .never,
                  data: S.obj(["change": enumeration(["content", "metadata", "recalled"]), "operator": text, "time": S.int(), "message": S.ref("CommunityMessage")],
                              required: ["change", "operator", "time", "message"])),
            Event(ev: "group.moderationChanged", summary: "A mute list, an allowed-sender list or a freeze of an ultra group's channel (channelId \"\": the whole group) changed: muted users may not send there; while frozen only allowed senders may",
                  spec: ["MO-5"],
                  audience: "muteAdd, muteRemove, allowedSenderAdd, allowedSenderRemove: only the users named (those who see the channel). freeze, unfreeze: everyone who sees the channel (the whole group for channelId \"\").",
                  stream: .never,
                  data: S.obj(["groupId": text, "channelId": text,
                               "action": enumeration(["muteAdd", "muteRemove", "allowedSenderAdd", "allowedSenderRemove", "freeze", "unfreeze"]),
                               "userIds": users, "time": S.int()], required: ["groupId", "channelId", "action", "userIds", "time"])),
            Event(ev: "conversation.statusSynced", summary: "The connect-time sync is complete: code 0 on success; keep cursor for the next connect",
                  spec: ["CS-3"], audience: "Only the connecting device (users, not anonymous clients).", stream: .never,
                  data: S.obj(["code": S.int(), "cursor": S.int(minimum: 0)], required: ["code", "cursor"])),
            Event(ev: "token.expired", summary: "The token expired; refresh it within graceSeconds or the connection closes with 4002",
                  spec: ["§2"], audience: "Only the connection whose token expired.", stream: .never,
                  data: S.obj(["graceSeconds": S.int(minimum: 0)], required: ["graceSeconds"])),
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
                                   "stream": S.str("This deployment's stream id, kept with its data: resume positions stay valid across restarts; a different one (serverRestarted) means the data was reset (BX-1)"),
                                   "expiresAt": ["type": ["integer", "null"], "description": "Token expiry (ms); null for anonymous"]],
                                  required: ["sessionId", "userId", "anonymous", "stream", "expiresAt"])
        defs["JoinInfo"] = S.obj(["memberCount": S.int(), "joinTime": S.int(), "room": S.ref("Room"),
                                  "offset": S.int("In a join's answer: the room stream's offset once the join took effect, the position to resume from (BX-1)", minimum: 0)],
                                 required: ["memberCount", "joinTime", "room"])
        let alias = S.int("TR-5: on a compact WebSocket connection only, the room's alias on this node: the room's compact events carry it instead of the room id from this answer on (openapi/websocket.md, Encodings)", minimum: 1, maximum: Limits.maxRoomAliases)
        defs["Observed"] = S.obj(["roomId": S.str(), "epoch": S.str("The room's current epoch"), "alias": alias], required: ["roomId", "epoch"])
        defs["JoinReply"] = S.obj(["joinInfo": ref("JoinInfo"), "alias": alias], required: ["joinInfo"])
        defs["RoomIds"] = S.obj(["roomIds": S.arr(text)], required: ["roomIds"])
        defs["Attribute"] = S.obj(["key": text, "value": text, "owner": text, "autoDelete": S.bool()], required: ["key", "value"])

        var clientMessages: [[String: Any]] = []
        for o in operations {
            var props: [String: Any] = ["id": S.int("A number the client chooses (not a string), echoed in the answer"), "op": const(o.op)]
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
            }
            if e.stream != .never && e.stream != .marker {
                props["offset"] = S.int("Position in the room's stream, from 1 per epoch; it continues across restarts, so a position names one event", minimum: 1)
            }
            if e.stream == .always { required += ["roomId", "epoch", "offset"] }
            if e.stream == .unlessTransient { required += ["roomId"] }
            if e.stream == .marker { required += ["roomId", "epoch"] }
            defs[name] = ["type": "object", "title": e.ev, "description": e.summary + ". SPEC: " + e.spec.joined(separator: ", "),
                          "x-audience": e.audience, "x-stream": e.stream.text, "properties": props, "required": required]
            serverMessages.append(ref(name))
        }
        defs["ServerMessage"] = ["oneOf": serverMessages, "description": "What the server sends: answers and events"]
        // TR-5: the compact encoding's frames.
        defs.merge(compactDefs(events: events)) { a, _ in a }
        let doc: [String: Any] = [
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "https://roomcast.dev/schemas/websocket.json",
            "title": "Roomcast WebSocket protocol",
            "description": "GET /ws upgrades (permessage-deflate offered). Text frames of JSON. The first message is connect. "
                + "Commands are ClientMessage and are answered in order with Reply (the op's x-reply) or ErrorReply; events are "
                + "ServerMessage too; a connection that chose the subprotocol roomcast.compact.v1 gets CompactServerMessage instead. "
                + "See openapi/websocket.md.",
            "x-subprotocols": WireEncoding.names,
            "x-endpoint": "GET /ws",
            "x-close-codes": Dictionary(uniqueKeysWithValues: CloseCode.allCases.map {
                (String($0.rawValue), ["meaning": $0.meaning, "reconnect": $0.reconnect.rawValue])
            }),
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
              Browsers' `Origin` must be on the app's allowlist (`PATCH /v1/settings`, `allowedOrigins`).
            - Every message is a JSON text frame. The first must be `connect`, sent within the connect
              timeout (`--connect-timeout`, default 10 s). Commands may follow it at once, even in the
              same TCP write: up to 64 KiB of them are held and processed in order after the connect
              answer. A message that is not JSON or not `{"id", "op", "args"}` is answered with an error
              whose `id` is null, and the connection is closed with 4000; an unknown op is only answered
              with an error (code 40000).
            - A command is `{"id": 7, "op": "room.join", "args": {...}}`: `id` is a number (an integer the
              client chooses, echoed in the answer; a string `id` is not a protocol message, so it closes the
              connection with 4000). Its answer is
              `{"id": 7, "ok": {...}}` or `{"id": 7, "error": {"code": 23406, "message": "...", "field": "roomId"}}`
              with the codes of [errors.md](errors.md). Match answers to commands by `id`: commands that
              change state (sends, joins, leaves, moderation) take effect, and are answered, in the order
              they were sent, but an answer the gateway gives at once (an unknown op, an argument it
              cannot read, a refused token refresh, a rate limit, a full before-send queue) and a query's
              answer (`room.info`, `room.history`, ...) may come before the answers of commands sent
              earlier.
              An error's `field` is `args.<name>` when `args` could not be read as the op's arguments (one
              missing, or of the wrong type: `args.roomId`), `args` when `args` is not an object, and the
              argument's own name, as REST names it, when its value is refused (`roomId`, `priority`); a
              message that is not a protocol message names `id` (not an integer) or `op`.
            - An event is `{"ev": "room.message", "roomId": "r1", "epoch": "...", "offset": 42, "data": {...}}`.
              Events of a room's stream carry `epoch` and `offset`: offsets rise by one per event of that
              room, so a gap shows a missed event. To resume after a reconnect, join with
              `"resume": {"epoch", "stream", "offset"}` (the `stream` from `connect`, the last offset seen):
              the missed events are replayed, then `room.resume` tells whether the replay was complete.
              The events of the resume window are stored with the change that caused them, so this works
              across a restart or crash of the server too (offsets continue; the stream id is kept).
            - The server pings idle connections; clients answer pings (every WebSocket library does).
            - A client that cannot hold a WebSocket gets the same session, commands and events over plain
              HTTP: Server-Sent Events (`GET /sse`) or long-polling (`GET /poll`), with its commands on
              `POST /client/ops`; see [sse.md](sse.md).

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
        md += compactMarkdown
        md += "\n## Close codes\n\nEvery close code the server sends, and whether the client should connect again "
            + "(`yes, with backoff`: exponential backoff with jitter, then join with `resume`; `yes, with a new token`: ask the app "
            + "server for a fresh token first; `no`: the same attempt would fail again).\n\n" + ErrorTable.closeCodeMarkdown
        md += """

            ## Answer shapes

            The `ok` objects share the REST schemas (`roomcast.openapi.json`): `Empty` is `{}`,
            `JoinReply` is `{"joinInfo": {"memberCount", "joinTime", "offset", "room"}}` (`offset`: the room
            stream's offset once the join took effect, with `room.epoch` the position a later `resume`
            starts from), `Connected` is `{"sessionId", "userId", "anonymous", "stream", "expiresAt"}`,
            `Observed` is `{"roomId", "epoch"}` (on a compact WebSocket connection both also carry `alias`, see
            Encodings), `RoomIds` is `{"roomIds": [...]}`, `Keys` is
            `{"keys": [...]}`; the rest are named as in the REST document.

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
