import Chat

// Request shapes shared by the WebSocket protocol and the REST API. Decoding failures name the
// field; range checks happen in the domain, which names the field too.

struct RoomSpec: Decodable {
    var roomId: String?
    var name: String?
    var announcement: String?
    var ext: String?
    var broadcastUrl: String?
    var creator: String?
    var queueModificationLevel: Int?
    var destroy: DestroySpec?
    var keepAlive: Bool?
    var multiDevice: String?
    var muted: Bool?
    var muteAllowlist: [String]?
    var attributes: [String: String]?
    var attributesOwner: String?
    var enterExitNotifications: Bool?
    var queueLimit: Int?

    /// The domain configuration, or a refusal naming the field.
    func config(roomId fallback: String? = nil) throws(ChatError) -> RoomConfig {
        guard let id = roomId ?? fallback else { throw ChatError(.invalidParameter, "roomId is required", field: "roomId") }
        var c = RoomConfig(roomId: id)
        if let v = name { c.name = v }
        if let v = announcement { c.announcement = v }
        if let v = ext { c.ext = v }
        if let v = broadcastUrl { c.broadcastUrl = v }
        c.creator = creator
        if let v = queueModificationLevel {
            guard let level = QueueModificationLevel(rawValue: v) else {
                throw ChatError(.invalidParameter, "queueModificationLevel must be 0 (anyone) or 1 (managers)", field: "queueModificationLevel")
            }
            c.queueModificationLevel = level
        }
        if let d = destroy { c.destroyPolicy = try d.destroyPolicy() }
        if let v = keepAlive { c.keepAlive = v }
        if let v = multiDevice {
            guard let p = MultiDevicePolicy(rawValue: v) else {
                throw ChatError(.invalidParameter, "multiDevice must be single or multiple", field: "multiDevice")
            }
            c.multiDevice = p
        }
        if let v = muted { c.muted = v }
        if let v = muteAllowlist { c.muteAllowlist = v }
        if let v = attributes { c.attributes = v }
        c.attributesOwner = attributesOwner
        if let v = enterExitNotifications { c.enterExitNotifications = v }
        c.queueLimit = queueLimit
        return c
    }
}

struct DestroySpec: Decodable {
    var policy: String
    var minutes: Int?
    var seconds: Int?

    func destroyPolicy() throws(ChatError) -> DestroyPolicy {
        switch policy {
        case "inactive":
            guard let m = minutes else { throw ChatError(.invalidParameter, "destroy.minutes is required", field: "destroy.minutes") }
            return .inactive(minutes: m)
        case "fixed":
            guard let m = minutes else { throw ChatError(.invalidParameter, "destroy.minutes is required", field: "destroy.minutes") }
            return .fixed(minutes: m)
        case "whenEmpty":
            return .whenEmpty(seconds: seconds ?? 0)
        default:
            throw ChatError(.invalidParameter, "destroy.policy must be inactive, fixed or whenEmpty", field: "destroy.policy")
        }
    }
}

struct RoomUpdateSpec: Decodable {
    var name: String?
    var announcement: String?
    var ext: String?
    var broadcastUrl: String?
    var queueModificationLevel: Int?
    var destroy: DestroySpec?
    var keepAlive: Bool?
    var multiDevice: String?
    var enterExitNotifications: Bool?
    var queueLimit: Int?
    var needNotify: Bool?
    var notifyExt: String?

    func update() throws(ChatError) -> RoomUpdate {
        var u = RoomUpdate()
        u.name = name
        u.announcement = announcement
        u.ext = ext
        u.broadcastUrl = broadcastUrl
        if let v = queueModificationLevel {
            guard let level = QueueModificationLevel(rawValue: v) else {
                throw ChatError(.invalidParameter, "queueModificationLevel must be 0 or 1", field: "queueModificationLevel")
            }
            u.queueModificationLevel = level
        }
        if let d = destroy { u.destroyPolicy = try d.destroyPolicy() }
        u.keepAlive = keepAlive
        if let v = multiDevice {
            guard let p = MultiDevicePolicy(rawValue: v) else {
                throw ChatError(.invalidParameter, "multiDevice must be single or multiple", field: "multiDevice")
            }
            u.multiDevice = p
        }
        u.enterExitNotifications = enterExitNotifications
        u.queueLimit = queueLimit
        return u
    }

    /// NIM-10: a 312 notification when `needNotify` is true (with `notifyExt`).
    var nim: NIMNotify? { needNotify == true ? NIMNotify(notifyExt: notifyExt ?? "") : nil }
}

func parseKind(_ s: String?, field: String = "type") throws(ChatError) -> ChatMessage.Kind {
    switch s ?? "text" {
    case "text": return .text
    case "custom": return .custom
    default: throw ChatError(.invalidParameter, "\(field) must be text or custom", field: field)
    }
}

func parseKinds(_ list: [String]?) throws(ChatError) -> [ChatMessage.Kind] {
    var out: [ChatMessage.Kind] = []
    for s in list ?? [] {
        guard let k = ChatMessage.Kind(rawValue: s) else {
            throw ChatError(.invalidParameter, "types may contain text, custom, notification", field: "types")
        }
        out.append(k)
    }
    return out
}

func parseOrder(_ s: String?, default d: SortOrder) throws(ChatError) -> SortOrder {
    switch s {
    case nil: return d
    case "asc", "ascending": return .ascending
    case "desc", "descending": return .descending
    default: throw ChatError(.invalidParameter, "order must be asc or desc", field: "order")
    }
}

func parseMemberFilter(_ s: String?) throws(ChatError) -> MemberFilter {
    guard let s else { return .present }
    guard let f = MemberFilter(rawValue: s) else {
        throw ChatError(.invalidParameter, "type must be present, regular, temporary, regularOnline or temporaryNewestFirst", field: "type")
    }
    return f
}

func parseUnmuteKind(_ s: String?) throws(ChatError) -> UnmuteKind {
    guard let s else { return .all }
    guard let k = UnmuteKind(rawValue: s) else { throw ChatError(.invalidParameter, "kind must be all, permanent or temporary", field: "kind") }
    return k
}

extension Encode {
    /// The fields of a successful answer (REST body; WebSocket `ok` object).
    static func reply(_ reply: Reply, _ w: inout JSONWriter) {
        w.beginObject()
        switch reply {
        case .done:
            break
        case .session(let userId):
            w.field("userId", userId)
        case .joined(let info):
            w.key("joinInfo")
            joinInfo(info, &w)
        case .room(let info):
            w.key("room")
            roomInfo(info, &w)
        case .rooms(let list):
            w.key("rooms")
            w.beginArray()
            for r in list { roomInfo(r, &w) }
            w.endArray()
        case .members(let list, let total):
            w.key("members")
            w.beginArray()
            for m in list { member(m, &w) }
            w.endArray()
            w.field("total", total)
        case .presence(let list):
            w.key("users")
            w.beginArray()
            for p in list {
                w.beginObject()
                w.field("userId", p.userId)
                w.field("inRoom", p.inRoom)
                w.endObject()
            }
            w.endArray()
        case .userIds(let ids):
            w.field("userIds", ids)
        case .userExpiries(let list):
            w.key("users")
            w.beginArray()
            for u in list {
                w.beginObject()
                w.field("userId", u.userId)
                w.key("until")
                if let until = u.until { w.int(until) } else { w.null() }
                w.endObject()
            }
            w.endArray()
        case .roomIds(let ids):
            w.field("roomIds", ids)
        case .keys(let keys):
            w.field("keys", keys)
        case .attributes(let entries):
            w.key("entries")
            w.beginArray()
            for e in entries { attributeEntry(e, &w) }
            w.endArray()
        case .queue(let list):
            w.key("elements")
            w.beginArray()
            for e in list {
                w.beginObject()
                w.field("key", e.key)
                w.field("value", e.value)
                w.endObject()
            }
            w.endArray()
        case .queueElement(let key, let value):
            w.field("key", key)
            w.field("value", value)
        case .missingKeys(let keys):
            w.field("missingKeys", keys)
        case .message(let m):
            w.key("message")
            message(m, &w)
        case .messages(let list):
            w.key("messages")
            w.beginArray()
            for m in list { message(m, &w) }
            w.endArray()
        case .group(let g):
            w.key("group")
            groupInfo(g, &w)
        case .channel(let c):
            w.key("channel")
            channelInfo(c, &w)
        case .channels(let list, let total):
            w.key("channels")
            w.beginArray()
            for c in list { channelInfo(c, &w) }
            w.endArray()
            w.field("total", total)
        case .userIdsPage(let ids, let total):
            w.field("userIds", ids)
            w.field("total", total)
        case .notificationLevel(let level):
            w.field("notificationLevel", level.rawValue)
        case .conversationStatus(let view):
            w.key("status")
            conversationStatus(view.status, &w, view: view)
        case .conversationStatuses(let list, let cursor, let more):
            w.key("statuses")
            w.beginArray()
            for s in list { conversationStatus(s, &w) }
            w.endArray()
            w.field("cursor", cursor)
            w.field("more", more)
        }
        w.endObject()
    }

    static func replyBytes(_ reply: Reply) -> [UInt8] {
        var w = JSONWriter()
        Encode.reply(reply, &w)
        return w.bytes
    }
}
