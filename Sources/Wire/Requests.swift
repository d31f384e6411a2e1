import Chat

// Request DTOs: one per command, shared by the REST API and the WebSocket protocol (and the vendor
// surfaces). Each decodes from JSON (a REST body, or a WebSocket op's `args`) and, where REST takes
// it from the query string, from query parameters; each builds its domain command or query.
// Decoding failures name the field; range checks happen in the domain, which names the field too.
// What REST takes from the path (room id, user id, queue key, …) is the request's address: the
// WebSocket protocol carries it in `args` next to the body (see `OpTable`).

/// Who a request comes from: the app server (REST, vendor surfaces) or a connected session.
public struct Caller: Sendable, Equatable {
    public var app: String
    public var actor: Actor
    /// The session's user ("" for the app server).
    public var userId: String

    public init(app: String, actor: Actor, userId: String = "") {
        self.app = app
        self.actor = actor
        self.userId = userId
    }

    public static func server(_ app: String) -> Caller { Caller(app: app, actor: .server) }

    var isServer: Bool { actor == .server }
}

/// Query parameters of a REST call, read as the DTOs need them.
public struct QueryParameters {
    let lookup: (String) -> String?

    public init(_ lookup: @escaping (String) -> String?) {
        self.lookup = lookup
    }

    public func string(_ name: String) -> String? { lookup(name) }

    /// A comma-separated list (empty items dropped).
    public func list(_ name: String) -> [String] {
        (lookup(name) ?? "").split(separator: ",").map(String.init).filter { !$0.isEmpty }
    }

    public func bool(_ name: String) throws(ChatError) -> Bool? {
        guard let v = lookup(name) else { return nil }
        switch v {
        case "true", "1": return true
        case "false", "0": return false
        default: throw ChatError(.invalidParameter, "\(name) must be true or false", field: name)
        }
    }

    /// `needNotify`, `extra` and `notifyExt` of a moderation call's query string.
    func notify() throws(ChatError) -> (needNotify: Bool?, extra: String?, notifyExt: String?) {
        (try bool("needNotify"), string("extra"), string("notifyExt"))
    }

    public func int(_ name: String) throws(ChatError) -> Int? {
        guard let v = lookup(name) else { return nil }
        guard let i = Int(v) else { throw ChatError(.invalidParameter, "\(name) must be an integer", field: name) }
        return i
    }
}

/// `POST /v1/users/presence/query` (PX-3).
public struct PresenceQueryRequest: Decodable, Sendable {
    public var userIds: [String]
}

// MARK: Room directory (PX-5)

/// `GET /v1/directory/rooms`: the search from the query string, and the opaque cursor (the last
/// room id of a page, so a page boundary does not move when rooms are created or destroyed).
/// MO-8: `GET /v1/audit`'s query string; a bad parameter is refused naming it.
public enum AuditRequest {
    public static func query(_ caller: Caller, _ q: QueryParameters) throws(ChatError) -> Query {
        let limit = try q.int("limit") ?? Limits.defaultAuditPage
        guard (1...Limits.maxAuditPage).contains(limit) else {
            throw ChatError(.invalidParameter, "limit must be 1 to \(Limits.maxAuditPage)", field: "limit")
        }
        var before: Int64?
        if let b = q.string("before") {
            guard let v = Int64(b), v >= 1 else { throw ChatError(.invalidParameter, "before must be an entry id (1 or more)", field: "before") }
            before = v
        }
        var roomId: String?
        if let r = q.string("roomId") {
            guard !r.isEmpty, r.utf8.count <= Limits.maxRoomIdBytes else {
                throw ChatError(.invalidParameter, "roomId is 1 to \(Limits.maxRoomIdBytes) bytes", field: "roomId")
            }
            roomId = r
        }
        return .audit(app: caller.app, roomId: roomId, before: before, limit: limit)
    }
}

public enum RoomDirectory {
    static let cursorPrefix = "rc1:"

    public static func cursor(after roomId: String) -> String { base64URL(Array((cursorPrefix + roomId).utf8)) }

    public static func search(_ q: QueryParameters) throws(ChatError) -> RoomSearch {
        var s = RoomSearch(limit: try q.int("limit") ?? Limits.defaultDirectoryPage)
        guard (1...Limits.maxDirectoryPage).contains(s.limit) else {
            throw ChatError(.invalidParameter, "limit must be 1 to \(Limits.maxDirectoryPage)", field: "limit")
        }
        if let prefix = q.string("prefix"), !prefix.isEmpty {
            guard prefix.utf8.count <= Limits.maxRoomIdBytes else {
                throw ChatError(.invalidParameter, "prefix is at most \(Limits.maxRoomIdBytes) bytes", field: "prefix")
            }
            s.idPrefix = prefix
        }
        if let name = q.string("name"), !name.isEmpty {
            guard name.utf8.count <= Limits.maxNameBytes else {
                throw ChatError(.invalidParameter, "name is at most \(Limits.maxNameBytes) bytes", field: "name")
            }
            s.nameContains = name
        }
        s.minOnline = try q.int("minOnline")
        s.maxOnline = try q.int("maxOnline")
        if let v = s.minOnline, v < 0 { throw ChatError(.invalidParameter, "minOnline must not be negative", field: "minOnline") }
        if let v = s.maxOnline, v < 0 { throw ChatError(.invalidParameter, "maxOnline must not be negative", field: "maxOnline") }
        if let lo = s.minOnline, let hi = s.maxOnline, lo > hi {
            throw ChatError(.invalidParameter, "minOnline must not be above maxOnline", field: "minOnline")
        }
        if let c = q.string("cursor"), !c.isEmpty {
            guard c.utf8.count <= 200, let bytes = base64URLDecode(c), let text = String(validating: bytes, as: UTF8.self),
                  text.hasPrefix(cursorPrefix) else {
                throw ChatError(.invalidParameter, "cursor is not one this server gave", field: "cursor")
            }
            s.after = String(text.dropFirst(cursorPrefix.count))
        }
        return s
    }
}

// MARK: Notifications

/// The notification fields of moderation requests. RongCloud notifications (`needNotify` with
/// `extra`) are the app server's choice; a NIM notification goes out when the app server gives
/// `notifyExt`, and always when a member moderates from a client (NIM-15).
protocol ModerationNotify {
    var needNotify: Bool? { get }
    var extra: String? { get }
    var notifyExt: String? { get }
}

extension ModerationNotify {
    func rc(_ caller: Caller) -> RCNotify? {
        // Given fields are checked even when nothing is sent (needNotify false).
        caller.isServer ? RCNotify.given(needNotify: needNotify, extra: extra) : nil
    }

    func nim(_ caller: Caller) -> NIMNotify? {
        caller.isServer ? notifyExt.map { NIMNotify(notifyExt: $0) } : NIMNotify(notifyExt: notifyExt ?? "")
    }
}

// MARK: Rooms

public struct RoomSpec: Decodable, Sendable {
    public var roomId: String?
    public var name: String?
    public var announcement: String?
    public var ext: String?
    public var broadcastUrl: String?
    public var creator: String?
    public var queueModificationLevel: Int?
    public var destroy: DestroySpec?
    public var keepAlive: Bool?
    public var multiDevice: String?
    public var muted: Bool?
    public var muteAllowlist: [String]?
    public var attributes: [String: String]?
    public var attributesOwner: String?
    public var enterExitNotifications: Bool?
    public var queueLimit: Int?

    public init() {}

    /// The domain configuration, or a refusal naming the field.
    public func config(roomId fallback: String? = nil) throws(ChatError) -> RoomConfig {
        guard let id = roomId ?? fallback else { throw ChatError(.invalidParameter, "roomId is required", field: "roomId") }
        var c = RoomConfig(roomId: id)
        if let v = name { c.name = v }
        if let v = announcement { c.announcement = v }
        if let v = ext { c.ext = v }
        if let v = broadcastUrl { c.broadcastUrl = v }
        c.creator = creator
        if let v = queueModificationLevel { c.queueModificationLevel = try parseQueueLevel(v) }
        if let d = destroy { c.destroyPolicy = try d.destroyPolicy() }
        if let v = keepAlive { c.keepAlive = v }
        if let v = multiDevice { c.multiDevice = try parseMultiDevice(v) }
        if let v = muted { c.muted = v }
        if let v = muteAllowlist { c.muteAllowlist = v }
        if let v = attributes { c.attributes = v }
        c.attributesOwner = attributesOwner
        if let v = enterExitNotifications { c.enterExitNotifications = v }
        c.queueLimit = queueLimit
        return c
    }

    public func command(_ caller: Caller) throws(ChatError) -> Command { .createRoom(app: caller.app, try config()) }
}

func parseQueueLevel(_ v: Int) throws(ChatError) -> QueueModificationLevel {
    guard let level = QueueModificationLevel(rawValue: v) else {
        throw ChatError(.invalidParameter, "queueModificationLevel must be 0 (anyone) or 1 (managers)", field: "queueModificationLevel")
    }
    return level
}

func parseMultiDevice(_ v: String) throws(ChatError) -> MultiDevicePolicy {
    guard let p = MultiDevicePolicy(rawValue: v) else {
        throw ChatError(.invalidParameter, "multiDevice must be single or multiple", field: "multiDevice")
    }
    return p
}

public struct DestroySpec: Decodable, Sendable {
    public var policy: String
    public var minutes: Int?
    public var seconds: Int?

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

/// NIM-10 room update (REST `PATCH /v1/rooms/{roomId}`, WebSocket `room.update`).
public struct RoomUpdateSpec: Decodable, Sendable {
    public var name: String?
    public var announcement: String?
    public var ext: String?
    public var broadcastUrl: String?
    public var queueModificationLevel: Int?
    public var destroy: DestroySpec?
    public var keepAlive: Bool?
    public var multiDevice: String?
    public var enterExitNotifications: Bool?
    public var queueLimit: Int?
    public var needNotify: Bool?
    public var notifyExt: String?

    func update() throws(ChatError) -> RoomUpdate {
        var u = RoomUpdate()
        u.name = name
        u.announcement = announcement
        u.ext = ext
        u.broadcastUrl = broadcastUrl
        if let v = queueModificationLevel { u.queueModificationLevel = try parseQueueLevel(v) }
        if let d = destroy { u.destroyPolicy = try d.destroyPolicy() }
        u.keepAlive = keepAlive
        if let v = multiDevice { u.multiDevice = try parseMultiDevice(v) }
        u.enterExitNotifications = enterExitNotifications
        u.queueLimit = queueLimit
        return u
    }

    public func command(_ caller: Caller, roomId: String) throws(ChatError) -> Command {
        // NIM-10: a 312 notification when `needNotify` is true (with `notifyExt`).
        .updateRoom(app: caller.app, roomId: roomId, try update(), caller.actor, nim: NIMNotify.given(needNotify: needNotify, notifyExt: notifyExt))
    }
}

/// NIM-1: open or close a room.
public struct OpenRoomRequest: Decodable, Sendable {
    public var open: Bool
    public var notifyExt: String?

    public func command(_ caller: Caller, roomId: String) -> Command {
        .setRoomOpen(app: caller.app, roomId: roomId, open, caller.actor, nim: NIMNotify(notifyExt: notifyExt ?? ""))
    }
}

/// A list of user ids (`{"userIds": [...]}`).
public struct UserIdsRequest: Decodable, Sendable {
    public var userIds: [String]
}

/// MO-4: user group ids (create, bind).
public struct UserGroupIdsRequest: Decodable, Sendable {
    public var userGroupIds: [String]
}

// MARK: Members

/// RC-9, NIM-13 member lists.
public struct MembersRequest: Decodable, Sendable {
    public var type: String?
    public var order: String?
    public var limit: Int?
    /// The last user id of the previous page (`cursor` in the REST query).
    public var after: String?

    public init(query q: QueryParameters) throws(ChatError) {
        type = q.string("type")
        order = q.string("order")
        limit = try q.int("limit")
        after = q.string("cursor")
    }

    public func query(_ caller: Caller, roomId: String) throws(ChatError) -> Query {
        .members(app: caller.app, roomId: roomId, try parseMemberFilter(type), try parseOrder(order, default: .ascending),
                 limit: limit ?? 100, after: after)
    }
}

/// NIM-12: make a member a manager, a common member or a guest.
public struct RoleRequest: Decodable, Sendable {
    public var role: String
    public var notifyExt: String?

    public func command(_ caller: Caller, roomId: String, userId: String) throws(ChatError) -> Command {
        .setRole(app: caller.app, roomId: roomId, target: userId, .assign(try RoleTarget.parse(role)), caller.actor, notifyExt: notifyExt ?? "")
    }
}

/// NIM-6: remove a member from the room.
public struct KickRequest: Decodable, Sendable {
    public var notifyExt: String?

    public init(query q: QueryParameters) {
        notifyExt = q.string("notifyExt")
    }

    public func command(_ caller: Caller, roomId: String, userId: String) -> Command {
        .kick(app: caller.app, roomId: roomId, target: userId, caller.actor, notifyExt: notifyExt ?? "")
    }
}

// MARK: Moderation

/// RC-5, NIM-12: block users (for `minutes`, or until unblocked).
public struct BlockRequest: Decodable, Sendable, ModerationNotify {
    public var userIds: [String]
    public var minutes: Int?
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String?

    public func command(_ caller: Caller, roomId: String) -> Command {
        .block(app: caller.app, roomId: roomId, userIds, minutes: minutes, caller.actor, rc: rc(caller), nim: nim(caller))
    }
}

/// RC-5, NIM-12: unblock users.
public struct UnblockRequest: Decodable, Sendable, ModerationNotify {
    public var userIds: [String]
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String?

    public init(query q: QueryParameters) throws(ChatError) {
        userIds = q.list("userIds")
        (needNotify, extra, notifyExt) = try q.notify()
    }

    public func command(_ caller: Caller, roomId: String) -> Command {
        .unblock(app: caller.app, roomId: roomId, userIds, caller.actor, rc: rc(caller), nim: nim(caller))
    }
}

/// RC-6 (minutes), NIM-12/15 (seconds; neither: permanent): mute users in a room.
public struct MuteRequest: Decodable, Sendable, ModerationNotify {
    public var userIds: [String]
    public var minutes: Int?
    public var seconds: Int64?
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String?

    public func command(_ caller: Caller, roomId: String) throws(ChatError) -> Command {
        if minutes != nil && seconds != nil {
            throw ChatError(.invalidParameter, "give minutes or seconds, not both", field: "seconds")
        }
        let duration: MuteDuration = minutes.map { .minutes($0) } ?? seconds.map { .seconds($0) } ?? .permanent
        return .mute(app: caller.app, roomId: roomId, userIds, duration, caller.actor, rc: rc(caller), nim: nim(caller))
    }
}

/// RC-6, NIM-12/15: unmute users (all mutes, or only the permanent or temporary ones).
public struct UnmuteRequest: Decodable, Sendable, ModerationNotify {
    public var userIds: [String]
    public var kind: String?
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String?

    public init(query q: QueryParameters) throws(ChatError) {
        userIds = q.list("userIds")
        kind = q.string("kind")
        (needNotify, extra, notifyExt) = try q.notify()
    }

    public func command(_ caller: Caller, roomId: String) throws(ChatError) -> Command {
        .unmute(app: caller.app, roomId: roomId, userIds, try parseUnmuteKind(kind), caller.actor, rc: rc(caller), nim: nim(caller))
    }
}

/// RC-6 2/3, NIM-17: mute or unmute the whole room.
public struct RoomMuteRequest: Decodable, Sendable, ModerationNotify {
    public var muted: Bool
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String?

    public func command(_ caller: Caller, roomId: String) -> Command {
        .setRoomMuted(app: caller.app, roomId: roomId, muted, caller.actor, rc: rc(caller), nim: nim(caller))
    }
}

/// RC-6 4/5: the room-mute allowlist.
public struct AllowlistRequest: Decodable, Sendable, ModerationNotify {
    public var userIds: [String]
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String? { nil }

    public init(query q: QueryParameters) throws(ChatError) {
        userIds = q.list("userIds")
        (needNotify, extra, _) = try q.notify()
    }

    public func add(_ caller: Caller, roomId: String) -> Command {
        .addToAllowlist(app: caller.app, roomId: roomId, userIds, rc: rc(caller))
    }

    public func remove(_ caller: Caller, roomId: String) -> Command {
        .removeFromAllowlist(app: caller.app, roomId: roomId, userIds, rc: rc(caller))
    }
}

/// QS-4: a room's protected senders (RongCloud's chatroom user allowlist, Nexconn's priority
/// senders): added from a body, removed by a query's comma-separated `userIds`.
public struct ProtectedSendersRequest: Decodable, Sendable {
    public var userIds: [String]

    public init(query q: QueryParameters) {
        userIds = q.list("userIds")
    }

    public func command(_ caller: Caller, roomId: String, add: Bool) -> Command {
        .setProtectedSenders(app: caller.app, roomId: roomId, add: add, userIds)
    }
}

/// QS-6: stop (`true`) or resume (`false`) the fan-out of a room's messages.
public struct DistributionRequest: Decodable, Sendable {
    public var stopped: Bool

    public func command(_ caller: Caller, roomId: String) -> Command {
        .setDistribution(app: caller.app, roomId: roomId, stopped: stopped)
    }
}

/// RC-6 6/7, RC-7: mute users in every room of the app.
public struct GlobalMuteRequest: Decodable, Sendable, ModerationNotify {
    public var userIds: [String]
    public var minutes: Int
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String? { nil }

    public func command(_ caller: Caller) -> Command {
        .globalMute(app: caller.app, userIds, minutes: minutes, rc: rc(caller))
    }
}

public struct GlobalUnmuteRequest: Sendable, ModerationNotify {
    public var userIds: [String]
    public var needNotify: Bool?
    public var extra: String?
    public var notifyExt: String? { nil }

    public init(query q: QueryParameters) throws(ChatError) {
        userIds = q.list("userIds")
        (needNotify, extra, _) = try q.notify()
    }

    public func command(_ caller: Caller) -> Command { .globalUnmute(app: caller.app, userIds, rc: rc(caller)) }
}

// MARK: Attributes (RC-10, ZIM-8)

public struct SetAttributesRequest: Decodable, Sendable {
    public var entries: [String: String]
    /// The owner of the entries; only the app server may name one (a member owns what it sets).
    public var ownerId: String?
    public var autoDelete: Bool?

    public func command(_ caller: Caller, roomId: String) -> Command {
        .setAttributes(app: caller.app, roomId: roomId, entries.sorted { $0.key < $1.key }.map { KeyValue(key: $0.key, value: $0.value) },
                       owner: caller.isServer ? ownerId : nil, autoDelete: autoDelete ?? false, caller.actor)
    }
}

public struct AttributeKeysRequest: Decodable, Sendable {
    public var keys: [String]?

    public init(query q: QueryParameters) {
        keys = q.list("keys")
    }

    public func remove(_ caller: Caller, roomId: String) -> Command {
        .removeAttributes(app: caller.app, roomId: roomId, keys ?? [], caller.actor)
    }

    public func query(_ caller: Caller, roomId: String) -> Query {
        .attributes(app: caller.app, roomId: roomId, keys: keys ?? [])
    }
}

// MARK: Queue (NIM-16)

public struct QueueOfferRequest: Decodable, Sendable {
    public var value: String
    /// Removed when its owner leaves (members only).
    public var transient: Bool?

    public func command(_ caller: Caller, roomId: String, key: String) -> Command {
        .queueOffer(app: caller.app, roomId: roomId, key: key, value: value, transient: transient ?? false, caller.actor)
    }
}

public struct QueueBatchRequest: Decodable, Sendable {
    public var elements: [String: String]
    public var needNotify: Bool?
    public var notifyExt: String?

    public func command(_ caller: Caller, roomId: String) -> Command {
        let notify = NIMNotify.given(needNotify: needNotify, notifyExt: notifyExt)
        return .queueBatchUpdate(app: caller.app, roomId: roomId, elements.sorted { $0.key < $1.key }.map { KeyValue(key: $0.key, value: $0.value) },
                                 caller.actor, notify: notify)
    }
}

public struct QueuePollRequest: Decodable, Sendable {
    /// The element to take; nil takes the head.
    public var key: String?

    public init(key: String?) {
        self.key = key
    }

    public func command(_ caller: Caller, roomId: String) -> Command {
        .queuePoll(app: caller.app, roomId: roomId, key: key, caller.actor)
    }
}

// MARK: Messages (NIM-8)

/// MO-2: `POST /v1/sensitive-words`: words to add, each with a replacement or blocking.
public struct SensitiveWordsRequest: Decodable, Sendable {
    public struct Item: Decodable, Sendable {
        public var word: String
        public var replacement: String?
    }
    public var words: [Item]

    public func command(_ caller: Caller) -> Command {
        .editSensitiveWords(app: caller.app, add: words.map { SensitiveWord(word: $0.word, replacement: $0.replacement) }, remove: [])
    }
}

/// MO-2: `DELETE /v1/sensitive-words?words=a,b`.
public struct RemoveSensitiveWordsRequest: Sendable {
    public var words: [String]

    public init(query q: QueryParameters) {
        words = (q.string("words") ?? "").split(separator: ",", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
    }

    public func command(_ caller: Caller) -> Command {
        .editSensitiveWords(app: caller.app, add: [], remove: words)
    }
}

/// MO-1: recall a message. REST: `DELETE /v1/rooms/{roomId}/messages/{messageId}` (the app
/// server; `sender` and `notifyExt` in the query); WebSocket: `room.recall` (a member).
public struct RecallRequest: Decodable, Sendable {
    public var messageId: String
    /// The app server's check of whose message it is (refused with 40401 when it is not theirs).
    public var sender: String?
    public var notifyExt: String?

    public init(messageId: String, sender: String? = nil, notifyExt: String? = nil) {
        self.messageId = messageId
        self.sender = sender
        self.notifyExt = notifyExt
    }

    public init(query q: QueryParameters, messageId: String) {
        self.init(messageId: messageId, sender: q.string("sender"), notifyExt: q.string("notifyExt"))
    }

    public func command(_ caller: Caller, roomId: String) -> Command {
        .recallMessage(app: caller.app, roomId: roomId, messageId: messageId, RecallOptions(sender: sender, notifyExt: notifyExt ?? ""), caller.actor)
    }
}

public struct SendMessageRequest: Decodable, Sendable {
    public var type: String?
    public var content: String
    /// The app server may send in the name of a user (REST only).
    public var fromUserId: String?
    public var nickname: String?
    public var avatar: String?
    /// QS-1: high, normal or low (the app's protected senders and types make a message high).
    public var priority: String?
    /// QS-1: the message's type name, for the app's type lists (e.g. RongCloud's `RC:TxtMsg`).
    public var messageType: String?
    /// QS-5: not stored, not in the room's stream, dropped first.
    public var transient: Bool?
    /// AU-2: only these members receive it (and read it in history); at most `Limits.maxMessageTargets`.
    public var targets: [String]?
    /// AU-1: only the members whose tags match receive it (NIM's `notifyTargetTags`).
    public var targetTags: TagExpressionJSON?

    public func command(_ caller: Caller, roomId: String) throws(ChatError) -> Command {
        let sender: MessageSender
        switch caller.actor {
        case .server: sender = serverSender
        case .account(let user): sender = .server(userId: user, nickname: nickname ?? "", avatar: avatar ?? "")
        case .session(let id): sender = .session(id)
        }
        return .sendMessage(app: caller.app, roomId: roomId, sender, try parseKind(type), content: content, options: try options())
    }

    var serverSender: MessageSender { .server(userId: fromUserId ?? "", nickname: nickname ?? "", avatar: avatar ?? "") }

    /// nil when the message asks for nothing beyond a plain one.
    func options() throws(ChatError) -> MessageOptions? {
        guard priority != nil || messageType != nil || transient != nil || targets != nil || targetTags != nil else { return nil }
        // Named as the caller sent it (the domain calls the type name `type`, which is the
        // message kind's field on this wire).
        if let t = messageType, t.utf8.count > SettingsLimits.maxMessageTypeBytes {
            throw ChatError(.invalidParameter, "messageType is at most \(SettingsLimits.maxMessageTypeBytes) bytes", field: "messageType")
        }
        var o = MessageOptions(type: messageType ?? "", transient: transient ?? false, targets: targets ?? [],
                               targetTags: try targetTags.map { e throws(ChatError) in try TagExpression.from(e, field: "targetTags") })
        if let p = priority {
            guard let parsed = MessagePriority(rawValue: p) else { throw ChatError(.invalidParameter, "priority must be high, normal or low", field: "priority") }
            o.priority = parsed
        }
        return o
    }
}

public struct HistoryRequest: Decodable, Sendable {
    public var start: Int64?
    public var limit: Int?
    public var order: String?
    public var types: [String]?
    /// AU-1: only messages sent to any of these tags.
    public var tags: [String]?

    public init(query q: QueryParameters) throws(ChatError) {
        start = try q.int("start").map(Int64.init)
        limit = try q.int("limit")
        order = q.string("order")
        types = q.list("types")
        tags = q.list("tags")
    }

    /// A member reads only what was sent to it (AU-1, AU-2); the app server reads everything.
    public func query(_ caller: Caller, roomId: String) throws(ChatError) -> Query {
        var viewer: SessionID?
        if case .session(let sid) = caller.actor { viewer = sid }
        return .history(app: caller.app, roomId: roomId, start: start ?? 0, limit: limit ?? 20, try parseOrder(order, default: .descending),
                        kinds: try parseKinds(types), filter: HistoryFilter(viewer: viewer, tags: tags ?? []))
    }
}

// MARK: Sessions (WebSocket only)

public struct ConnectRequest: Decodable, Sendable {
    public struct Anonymous: Decodable, Sendable {
        public var nickname: String?
        public var avatar: String?
    }
    public var token: String?
    public var appKey: String?
    public var anonymous: Anonymous?
    public var device: String?
    /// CS-3: the last conversation-status version this device synced (absent: never).
    public var conversationCursor: Int64?
}

public struct TokenRefreshRequest: Decodable, Sendable { public var token: String }

/// BX-1: where a reconnecting client left a room's stream.
public struct ResumeSpec: Decodable, Sendable {
    public var epoch: String
    public var stream: String
    public var offset: Int64
}

/// NIM-2 enter profile fields of a join or switch.
public struct ProfileFields: Decodable, Sendable {
    public var nickname: String?
    public var avatar: String?
    public var ext: String?
    public var notifyExt: String?
    /// AU-1: the member's tags in the room (absent: its token's).
    public var tags: [String]?
    /// AU-1: its enter and exit notifications go only to the members whose tags match.
    public var notifyTargetTags: TagExpressionJSON?

    public func profile() throws(ChatError) -> EnterProfile {
        EnterProfile(nickname: nickname ?? "", avatar: avatar ?? "", ext: ext ?? "", notifyExt: notifyExt ?? "", tags: tags,
                     notifyTargetTags: try notifyTargetTags.map { e throws(ChatError) in try TagExpression.from(e, field: "notifyTargetTags") })
    }
}

public struct JoinRequest: Decodable, Sendable {
    public var mode: String?
    public var room: RoomSpec?
    public var resume: ResumeSpec?
    /// TR-4: the room's last messages (at most `Limits.maxRewindMessages`) first.
    public var rewind: Int?
    /// AU-4: `counts` for the room's member counts only (`room.members` without ids, never one
    /// event per member); `all` (the default) for every member event.
    public var memberEvents: String?
    public var fields: ProfileFields

    enum CodingKeys: String, CodingKey { case mode, room, resume, rewind, memberEvents }

    /// AU-4: the values `memberEvents` takes.
    public static let memberEventsModes = ["all", "counts"]

    /// AU-4: whether the join asks for member counts only.
    public func memberCountsOnly() throws(ChatError) -> Bool {
        switch memberEvents ?? "all" {
        case "all": return false
        case "counts": return true
        default: throw ChatError(.invalidParameter, "memberEvents must be all or counts", field: "memberEvents")
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        mode = try c.decodeIfPresent(String.self, forKey: .mode)
        room = try c.decodeIfPresent(RoomSpec.self, forKey: .room)
        resume = try c.decodeIfPresent(ResumeSpec.self, forKey: .resume)
        rewind = try c.decodeIfPresent(Int.self, forKey: .rewind)
        memberEvents = try c.decodeIfPresent(String.self, forKey: .memberEvents)
        fields = try ProfileFields(from: decoder)
    }

    /// TR-4: how many of the room's last messages to give first (nil: none). A join that resumes
    /// gets what it missed instead: the messages before its position it already had.
    public func rewindCount() throws(ChatError) -> Int? {
        guard let n = rewind else { return nil }
        guard (1...Limits.maxRewindMessages).contains(n) else {
            throw ChatError(.invalidParameter, "rewind is 1 to \(Limits.maxRewindMessages) messages", field: "rewind")
        }
        return resume == nil ? n : nil
    }

    /// The join mode; enter and create carry the room's configuration (its id defaults to `roomId`).
    public func joinMode(roomId: String) throws(ChatError) -> JoinMode {
        switch mode ?? "join" {
        case "join": return .join
        case "enter": return .enter(try (room ?? RoomSpec()).config(roomId: roomId))
        case "create": return .create(try (room ?? RoomSpec()).config(roomId: roomId))
        default: throw ChatError(.invalidParameter, "mode must be join, enter or create", field: "mode")
        }
    }
}

public struct SwitchRequest: Decodable, Sendable {
    public var from: String
    public var to: RoomSpec
    public var createIfMissing: Bool?
    public var fields: ProfileFields

    enum CodingKeys: String, CodingKey { case from, to, createIfMissing }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        from = try c.decode(String.self, forKey: .from)
        to = try c.decode(RoomSpec.self, forKey: .to)
        createIfMissing = try c.decodeIfPresent(Bool.self, forKey: .createIfMissing)
        fields = try ProfileFields(from: decoder)
    }

    public func command(_ session: SessionID) throws(ChatError) -> Command {
        .switchRoom(session, from: from, to: try to.config(), createIfMissing: createIfMissing ?? false, try fields.profile())
    }
}

/// NIM-11: a member updates its own room profile (316).
public struct MemberUpdateRequest: Decodable, Sendable {
    public var nickname: String?
    public var avatar: String?
    public var ext: String?
    public var notifyExt: String?

    public func command(_ session: SessionID, roomId: String) -> Command {
        .updateMyInfo(session, roomId: roomId, nickname: nickname, avatar: avatar, ext: ext, notifyExt: notifyExt ?? "")
    }
}

// MARK: Ultra groups and conversation status (SPEC §4, §5)

/// `type` as "public"/"private" or the vendor's 0/1.
public struct ChannelTypeValue: Decodable, Sendable {
    public let type: ChannelType
    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        let text: String
        if let n = try? c.decode(Int.self) { text = String(n) } else { text = try c.decode(String.self) }
        do {
            type = try ChannelType.parse(text)
        } catch {
            throw DecodingError.dataCorruptedError(in: c, debugDescription: "must be public (0) or private (1)")
        }
    }
}

public struct CreateGroupRequest: Decodable, Sendable {
    public var groupId: String
    public var name: String?
    public var creator: String?

    public func command(_ caller: Caller) -> Command {
        .createGroup(app: caller.app, groupId: groupId, name: name ?? "", creator: creator)
    }
}

/// MO-4: `PATCH /v1/groups/{groupId}`.
public struct RenameGroupRequest: Decodable, Sendable {
    public var name: String

    public func command(_ caller: Caller, groupId: String) -> Command {
        .renameGroup(app: caller.app, groupId: groupId, name: name)
    }
}

public struct CreateChannelRequest: Decodable, Sendable {
    public var channelId: String
    public var type: ChannelTypeValue?

    public func command(_ caller: Caller, groupId: String) -> Command {
        .createChannel(app: caller.app, groupId: groupId, channelId: channelId, type?.type ?? .public)
    }
}

public struct ChannelTypeRequest: Decodable, Sendable {
    public var type: ChannelTypeValue
}

/// A 1-based page of an ultra group's lists (UG-6).
public struct PageRequest: Decodable, Sendable {
    public var page: Int?
    public var pageSize: Int?

    public init(query q: QueryParameters) throws(ChatError) {
        page = try q.int("page")
        pageSize = try q.int("pageSize")
    }

    public var values: (page: Int, pageSize: Int) { (page ?? 1, pageSize ?? 20) }

    public func userChannels(_ caller: Caller, groupId: String, userId: String) -> Query {
        .userChannels(app: caller.app, groupId: groupId, userId: userId, page: values.page, pageSize: values.pageSize)
    }
}

public struct GroupLevelRequest: Decodable, Sendable {
    public var notificationLevel: Int
    public var channelId: String?

    public func command(_ caller: Caller, groupId: String) throws(ChatError) -> Command {
        .setGroupNotificationLevel(app: caller.app, groupId: groupId, channelId: channelId, try NotificationLevel.parse(notificationLevel))
    }
}

public struct TypeLevelRequest: Decodable, Sendable {
    public var notificationLevel: Int
}

/// A conversation, as the REST path names it or as WebSocket `args` carry it.
public struct ConversationAddress: Decodable, Sendable {
    public var conversationType: Int
    public var targetId: String
    public var channelId: String?

    public init(conversationType: Int, targetId: String, channelId: String?) {
        self.conversationType = conversationType
        self.targetId = targetId
        self.channelId = channelId
    }

    /// `conversationType` from a REST path segment.
    public init(path type: String, targetId: String, channelId: String?) throws(ChatError) {
        guard let raw = Int(type) else {
            throw ChatError(.invalidParameter, "conversationType must be 1, 3, 6 or 10", field: "conversationType")
        }
        self.init(conversationType: raw, targetId: targetId, channelId: channelId)
    }

    public func key(field: String = "conversationType") throws(ChatError) -> ConversationKey {
        ConversationKey(type: try ConversationType.parse(conversationType, field: field), targetId: targetId, channelId: channelId ?? "")
    }
}

/// CS-1, CS-2: pin and Do-Not-Disturb level of one conversation.
public struct ConversationStatusRequest: Decodable, Sendable {
    public var channelId: String?
    public var pinned: Bool?
    public var notificationLevel: Int?

    public func command(_ caller: Caller, userId: String, _ key: ConversationKey, levelField: String = "notificationLevel") throws(ChatError) -> Command {
        let level = try notificationLevel.map { v throws(ChatError) in try NotificationLevel.parse(v, field: levelField) }
        return .setConversationStatus(app: caller.app, userId: userId, key, pinned: pinned, level: level, caller.actor)
    }
}

// MARK: App settings

/// `PATCH /v1/settings`: the fields to change; the domain validates and merges them in one
/// command, so concurrent changes of different fields all stay.
public struct SettingsPatchRequest: Decodable, Sendable {
    public var memberChangeEvents: Bool?
    public var multipleRoomsPerUser: Bool?
    public var enterExitNotifications: Bool?
    public var maxRoomsPerUser: Int?
    public var maxRooms: Int?
    public var historyRetentionSeconds: Int64?
    public var historyLimitPerRoom: Int?
    public var maxMessageBytes: Int?
    public var defaultQueueLimit: Int?
    public var notificationLevel: Int?
    /// The WebSocket Origin allowlist; empty: any origin.
    public var allowedOrigins: [String]?
    public var roomCreatesPerUserPerMinute: Int?
    public var historyLimitPerApp: Int?
    public var restCallsPerSecond: Int?
    public var clientMessagesPerSecond: Int?
    public var sendsPerUserPerSecond: Int?
    /// PX-4: the before-send hook; `{"url": ""}` removes it.
    public var beforeSend: BeforeSendRequest?
    /// QS-2: a room's message budget per second, and the share only high priority may use.
    public var roomMessagesPerSecond: Int?
    public var highPriorityReservePercent: Int?
    /// QS-1, QS-4: the app's message lists, each replaced whole.
    public var lowPriorityMessageTypes: [String]?
    public var protectedMessageTypes: [String]?
    public var prioritySenders: [String]?
    /// QS-5: transient messages reach webhooks too.
    public var transientWebhooks: Bool?
    /// MO-1: how long members may recall their own messages.
    public var recallWindowSeconds: Int?
    /// MO-2: the app server's text messages are screened too.
    public var sensitiveWordsOnServerSends: Bool?
    /// AU-4: members present past which member events are summarized (0: never), and how often.
    public var memberEventsThreshold: Int?
    public var memberSummaryIntervalMs: Int?

    public struct BeforeSendRequest: Decodable, Sendable {
        public var url: String?
        public var timeoutMs: Int?
        public var failOpen: Bool?
        public var bypassServerMessages: Bool?
        public var signing: String?
    }

    public func patch() throws(ChatError) -> AppSettingsPatch {
        var p = AppSettingsPatch(memberChangeEvents: memberChangeEvents, multipleRoomsPerUser: multipleRoomsPerUser,
                         enterExitNotifications: enterExitNotifications, maxRoomsPerUser: maxRoomsPerUser, maxRooms: maxRooms,
                         historyRetentionSeconds: historyRetentionSeconds, historyLimitPerRoom: historyLimitPerRoom,
                         maxMessageBytes: maxMessageBytes, defaultQueueLimit: defaultQueueLimit,
                         notificationLevel: try notificationLevel.map { v throws(ChatError) in try NotificationLevel.parse(v) },
                         allowedOrigins: allowedOrigins, roomCreatesPerUserPerMinute: roomCreatesPerUserPerMinute,
                         historyLimitPerApp: historyLimitPerApp)
        p.restCallsPerSecond = restCallsPerSecond
        p.clientMessagesPerSecond = clientMessagesPerSecond
        p.sendsPerUserPerSecond = sendsPerUserPerSecond
        p.roomMessagesPerSecond = roomMessagesPerSecond
        p.highPriorityReservePercent = highPriorityReservePercent
        p.lowPriorityMessageTypes = lowPriorityMessageTypes
        p.protectedMessageTypes = protectedMessageTypes
        p.prioritySenders = prioritySenders
        p.transientWebhooks = transientWebhooks
        p.recallWindowSeconds = recallWindowSeconds
        p.sensitiveWordsOnServerSends = sensitiveWordsOnServerSends
        p.memberEventsThreshold = memberEventsThreshold
        p.memberSummaryIntervalMilliseconds = memberSummaryIntervalMs
        p.beforeSend = beforeSend.map {
            BeforeSendPatch(url: $0.url, timeoutMilliseconds: $0.timeoutMs, failOpen: $0.failOpen, bypassServerMessages: $0.bypassServerMessages,
                            signing: $0.signing)
        }
        return p
    }
}

// MARK: Tokens, webhooks

public struct TokenRequest: Decodable, Sendable {
    public var ttlSeconds: Int64?
    public var nickname: String?
    public var avatar: String?
    public var device: String?
    /// BX-3: a token that may also watch any of the app's rooms (`room.observe`).
    public var observer: Bool?
    /// AU-1: the tags the user enters its rooms with, unless a join gives its own.
    public var tags: [String]?

    /// The tags, checked (each 1 to `Limits.maxTagBytes` bytes, at most `Limits.maxTagsPerMember`).
    public func checkedTags() throws(ChatError) -> [String]? {
        try tags.map { t throws(ChatError) in try Validate.tags(t, field: "tags") }
    }
}

public struct WebhookReplayRequest: Decodable, Sendable {
    public var messageIds: [String]?
    public var since: Int64?
}

// MARK: Value parsers

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

/// MO-3: a member's `group.send` (the sender is the connection's user).
public struct CommunitySendRequest: Decodable, Sendable {
    public var channelId: String?
    public var type: String
    public var content: String
    public var stored: Bool?
    public var targets: [String]?
    public var metadata: [String: String]?

    public func command(_ caller: Caller, groupId: String) -> Command {
        .sendCommunityMessage(app: caller.app, groupIds: [groupId], channelId: channelId ?? ChannelInfo.defaultChannelId,
                              CommunityDraft(fromUserId: caller.userId, type: type, content: content, stored: stored ?? true, targets: targets ?? [],
                                             metadata: metadata), caller.actor)
    }
}
