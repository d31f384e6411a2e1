import Chat
import HTTP1

/// One operation of the native REST API (`/v1`, every one signed): its method, its path and what
/// the OpenAPI document says of it. The table is the one list of native routes: the gateway binds
/// one handler to each entry through its signed route group (never spelling the path again), and
/// `OpenAPIDocument` builds the native paths from the same entries, so the API served and the API
/// described cannot drift apart. A test checks that every entry has exactly one handler and that
/// no `/v1` route is registered outside the table.
public struct NativeRoute: Sendable {
    public let method: HTTPMethod
    public let path: String
    public let doc: OperationDoc

    /// Internal to Wire: outside it only the table's entries exist, so the gateway cannot bind a
    /// native route the table does not list.
    init(_ method: HTTPMethod, _ path: String, doc: OperationDoc) {
        self.method = method
        self.path = path
        self.doc = doc
    }

    /// PX-2: the header a native call carries its idempotency key in.
    public static let idempotencyKeyHeaders: [IdempotencyKeyHeader] = [.idempotencyKey]

    /// Every entry, in the order the document's sections list them.
    public static let all: [NativeRoute] = users + [issueToken, getSettings, updateSettings] + rooms + members + moderation + attributes + queue
        + messages + qos + audiences + ultraGroups + conversations + webhooks
}

/// PX-2: the request headers that carry an idempotency key. Each surface reads its own list, the
/// first header present winning; the OpenAPI document lists the same headers per operation.
public enum IdempotencyKeyHeader: String, Sendable {
    case idempotencyKey = "Idempotency-Key"
    /// What Nexconn's SDK sends.
    case requestID = "X-Request-ID"
}

private typealias P = OperationDoc.Parameter

// MARK: A user's connections and presence (PX-3, PX-5)

extension NativeRoute {
    static let users = [listConnections, disconnectUser, userPresence, queryPresence, userRooms]

    public static let listConnections = NativeRoute(.GET, "/v1/users/{userId}/connections", doc: .init(
        "A user's connections (on a cluster, on every node): device, node, since when, rooms", tag: .rooms, spec: ["PX-5", "CL-2"],
        params: [.userId], ok: (200, "UserConnections")))
    public static let disconnectUser = NativeRoute(.DELETE, "/v1/users/{userId}/connections", doc: .init(
        "Disconnect a user's connections (all, or one device): they are closed with 4010 (do not reconnect) or 4011 (reconnect=true) and the reason; on a cluster every node closes its own, and disconnected counts them cluster-wide",
        tag: .rooms, spec: ["PX-5", "CL-2"],
        params: [.userId, .query("device", .string("Only this device's connections", maxLength: Limits.maxUserIdBytes)),
                 .query("reason", .string("The close reason the client receives", maxLength: Limits.maxDisconnectReasonBytes)),
                 .query("reconnect", .boolean("Let the client connect again (close code 4011 instead of 4010)"))],
        ok: (200, "Disconnected")))
    public static let userPresence = NativeRoute(.GET, "/v1/users/{userId}/presence", doc: .init(
        "Whether a user is online (with how many connections); user.online / user.offline webhooks tell changes", tag: .rooms,
        spec: ["PX-3"], params: [.userId], ok: (200, "UserPresence")))
    public static let queryPresence = NativeRoute(.POST, "/v1/users/presence/query", doc: .init(
        "Whether each of up to \(Limits.maxPresenceQueryUsers) users is online", tag: .rooms, spec: ["PX-3"], body: "PresenceQuery",
        ok: (200, "PresenceList")))
    public static let userRooms = NativeRoute(.GET, "/v1/users/{userId}/rooms", doc: .init(
        "The rooms a user's connections are in (on a cluster, on every node)", tag: .rooms, spec: ["PX-5"], params: [.userId],
        ok: (200, "RoomIdList")))
}

// MARK: Tokens (SPEC §2) and app settings

extension NativeRoute {
    public static let issueToken = NativeRoute(.POST, "/v1/users/{userId}/tokens", doc: .init(
        "Issue a client token (JWT HS256)", tag: .tokens, spec: ["§2"], params: [.userId], body: "TokenRequest", ok: (201, "Token")))
    public static let getSettings = NativeRoute(.GET, "/v1/settings", doc: .init(
        "App settings", tag: .settings, spec: ["RC-2", "RC-4", "NIM-2", "NIM-8", "NIM-9"], ok: (200, "Settings")))
    public static let updateSettings = NativeRoute(.PATCH, "/v1/settings", doc: .init(
        "Change app settings", tag: .settings, spec: ["RC-2", "RC-4", "NIM-2", "NIM-8", "NIM-9", "§2"], body: "SettingsUpdate",
        ok: (200, "Settings")))
}

// MARK: Rooms (RC-9, NIM-1, NIM-10, ZIM-1/7/8)

extension NativeRoute {
    static let rooms = [createRoom, listRooms, destroyRooms, roomDirectory, getRoom, updateRoom, destroyRoom, openRoom, roomAddress]

    public static let createRoom = NativeRoute(.POST, "/v1/rooms", doc: .init(
        "Create a room", tag: .rooms, spec: ["RC-9", "NIM-1", "ZIM-1", "ZIM-7", "ZIM-8"], body: "CreateRoom", ok: (201, "RoomResponse"),
        id: "createRoom",
        links: .init(parameter: "roomId", value: "$response.body#/room/roomId",
                     targets: [getRoom, updateRoom, listMembers, blockUsers, muteUsers, setAttributes, sendMessage, getHistory])))
    public static let listRooms = NativeRoute(.GET, "/v1/rooms", doc: .init(
        "List room ids, or rooms by id", tag: .rooms, spec: ["RC-9", "NIM-1"],
        params: [.query("ids", .idList, description: "Comma-separated room ids; omitted: every room id")], ok: (200, "RoomsOrIds")))
    public static let destroyRooms = NativeRoute(.DELETE, "/v1/rooms", doc: .init(
        "Destroy rooms", tag: .rooms, spec: ["RC-1", "RC-9"],
        params: [.query("ids", .idList, required: true, description: "Comma-separated room ids (1–100)")], ok: (200, "Empty")))
    /// PX-5 / BX-3: the room directory, searched and paged with a cursor.
    public static let roomDirectory = NativeRoute(.GET, "/v1/directory/rooms", doc: .init(
        "Search the app's rooms, in room id order, a page at a time (the cursor is stable while rooms are created)", tag: .rooms,
        spec: ["PX-5", "BX-3"],
        params: [.query("prefix", .string("Room id prefix", maxLength: Limits.maxRoomIdBytes)),
                 .query("name", .string("Case-insensitive substring of the room name", maxLength: Limits.maxNameBytes)),
                 .query("minOnline", .integer("At least this many users online", minimum: 0)),
                 .query("maxOnline", .integer("At most this many users online", minimum: 0)),
                 .query("limit", .integer("Rooms per page (default \(Limits.defaultDirectoryPage))", minimum: 1, maximum: Limits.maxDirectoryPage)),
                 .query("cursor", .string("nextCursor of the previous page", maxLength: 200))],
        ok: (200, "RoomDirectoryPage")))
    public static let getRoom = NativeRoute(.GET, "/v1/rooms/{roomId}", doc: .init(
        "Room info", tag: .rooms, spec: ["RC-9", "NIM-1"], params: [.roomId], ok: (200, "RoomResponse"), id: "getRoom"))
    public static let updateRoom = NativeRoute(.PATCH, "/v1/rooms/{roomId}", doc: .init(
        "Update room info (needNotify → notification 312)", tag: .rooms, spec: ["NIM-10", "RC-9"], params: [.roomId], body: "UpdateRoom",
        ok: (200, "RoomResponse"), id: "updateRoom"))
    public static let destroyRoom = NativeRoute(.DELETE, "/v1/rooms/{roomId}", doc: .init(
        "Destroy a room (everyone online is told and removed)", tag: .rooms, spec: ["RC-1", "RC-9", "NIM-6"], params: [.roomId],
        ok: (200, "Empty")))
    public static let openRoom = NativeRoute(.PUT, "/v1/rooms/{roomId}/open", doc: .init(
        "Open or close a room (close kicks with reason 1, notification 311)", tag: .rooms, spec: ["NIM-1", "NIM-6"], params: [.roomId],
        body: "OpenRoom", ok: (200, "RoomResponse")))
    /// NIM-3: the WebSocket URLs that serve the room.
    public static let roomAddress = NativeRoute(.GET, "/v1/rooms/{roomId}/address", doc: .init(
        "WebSocket addresses for independent mode", tag: .rooms, spec: ["NIM-3"],
        params: [.roomId, .query("userId"), .query("clientType", .oneOf(["web", "other"])), .query("clientIp")], ok: (200, "Addresses")))
}

// MARK: Members (RC-9, NIM-6, NIM-11..NIM-13, NIM-15)

extension NativeRoute {
    static let members = [listMembers, queryMembers, getMember, kickMember, setRole]

    public static let listMembers = NativeRoute(.GET, "/v1/rooms/{roomId}/members", doc: .init(
        "Members, paged", tag: .members, spec: ["RC-9", "NIM-13"],
        params: [.roomId, .query("type", .oneOf(["present", "regular", "temporary", "regularOnline", "temporaryNewestFirst"])),
                 .query("order", .oneOf(["asc", "desc"])), .query("limit", .integer(minimum: 1, maximum: Limits.maxMemberListCount)),
                 .query("cursor", description: "The last user id of the previous page")],
        ok: (200, "Members"), id: "listMembers"))
    public static let queryMembers = NativeRoute(.POST, "/v1/rooms/{roomId}/members/query", doc: .init(
        "Is each user in the room?", tag: .members, spec: ["RC-9"], params: [.roomId], body: "UserIdList", ok: (200, "Presence")))
    public static let getMember = NativeRoute(.GET, "/v1/rooms/{roomId}/members/{userId}", doc: .init(
        "One member", tag: .members, spec: ["NIM-11", "NIM-13"], params: [.roomId, .userId], ok: (200, "Members")))
    public static let kickMember = NativeRoute(.DELETE, "/v1/rooms/{roomId}/members/{userId}", doc: .init(
        "Kick a member (reason 2, notification 313)", tag: .members, spec: ["NIM-6", "NIM-15"],
        params: [.roomId, .userId, .query("notifyExt")], ok: (200, "Empty")))
    public static let setRole = NativeRoute(.PUT, "/v1/rooms/{roomId}/members/{userId}/role", doc: .init(
        "Set a member's role (notifications 307–310)", tag: .members, spec: ["NIM-12"], params: [.roomId, .userId], body: "SetRole",
        ok: (200, "Members")))
}

// MARK: Blocks (RC-5), mutes (RC-6, RC-7), room-wide mute and its allowlist (NIM-17), global mutes

extension NativeRoute {
    static let moderation = [blockUsers, unblockUsers, listBlocks, muteUsers, unmuteUsers, listMutes, muteRoom, allowSenders, disallowSenders,
                             listAllowedSenders, globalMute, globalUnmute, listGlobalMutes, getAudit]

    public static let getAudit = NativeRoute(.GET, "/v1/audit", doc: .init(
        "The app's audit trail of moderation actions, newest first: who (the app server, a NIM operator, or a member from its client), through which surface (native, rongCloud, nexconn, nim, client), what (recall, block, mute, roomMute, allowlist, globalMute, tagMute, role, kick, sensitive words, roomClose/roomOpen, distributionStop/Resume, roomDestroy, messageListAdd/Remove, protectedSenderAdd/Remove; on ultra groups: mute, allowlist, roomMute for a freeze, recall), on what and when. Only accepted actions are recorded; the app keeps its newest \(Limits.auditEntriesPerApp) entries (the oldest are dropped first), each string cut to \(Limits.auditMaxStringBytes) bytes and at most \(Limits.auditMaxTargets) targets an entry (targetCount tells how many there were). Another app's entries are never shown",
        tag: .moderation, spec: ["MO-8"],
        params: [.query("roomId", .string("Only this room's entries", maxLength: Limits.maxRoomIdBytes)),
                 .query("limit", .integer("Entries per page (default \(Limits.defaultAuditPage))", minimum: 1, maximum: Limits.maxAuditPage)),
                 .query("before", .integer("Only entries older than this id: next of the previous page", minimum: 1))],
        ok: (200, "AuditPage")))

    public static let blockUsers = NativeRoute(.POST, "/v1/rooms/{roomId}/blocks", doc: .init(
        "Block users (removed at once, barred until expiry)", tag: .moderation, spec: ["RC-5", "RC-8", "NIM-12"], params: [.roomId],
        body: "Block", ok: (200, "Empty"), id: "blockUsers"))
    public static let unblockUsers = NativeRoute(.DELETE, "/v1/rooms/{roomId}/blocks", doc: .init(
        "Unblock users (needNotify tells only them)", tag: .moderation, spec: ["RC-5", "NIM-12"],
        params: [.roomId, .query("userIds", .idList, required: true), .query("needNotify", .boolean()), .query("extra"), .query("notifyExt")],
        ok: (200, "Empty")))
    public static let listBlocks = NativeRoute(.GET, "/v1/rooms/{roomId}/blocks", doc: .init(
        "Blocked users", tag: .moderation, spec: ["RC-5"], params: [.roomId], ok: (200, "UserExpiries")))

    public static let muteUsers = NativeRoute(.POST, "/v1/rooms/{roomId}/mutes", doc: .init(
        "Mute users (minutes or seconds: temporary; neither: permanent)", tag: .moderation, spec: ["RC-6", "RC-7", "RC-8", "NIM-12", "NIM-15"],
        params: [.roomId], body: "Mute", ok: (200, "Empty"), id: "muteUsers"))
    public static let unmuteUsers = NativeRoute(.DELETE, "/v1/rooms/{roomId}/mutes", doc: .init(
        "Unmute users", tag: .moderation, spec: ["RC-6", "NIM-12"],
        params: [.roomId, .query("userIds", .idList, required: true), .query("kind", .oneOf(["all", "permanent", "temporary"])),
                 .query("needNotify", .boolean()), .query("extra"), .query("notifyExt")],
        ok: (200, "Empty")))
    public static let listMutes = NativeRoute(.GET, "/v1/rooms/{roomId}/mutes", doc: .init(
        "Muted users", tag: .moderation, spec: ["RC-6"], params: [.roomId], ok: (200, "UserExpiries")))

    public static let muteRoom = NativeRoute(.PUT, "/v1/rooms/{roomId}/mute", doc: .init(
        "Room-wide mute on or off", tag: .moderation, spec: ["RC-6", "RC-7", "NIM-17"], params: [.roomId], body: "RoomMute", ok: (200, "Empty")))
    public static let allowSenders = NativeRoute(.POST, "/v1/rooms/{roomId}/mute-allowlist", doc: .init(
        "Allow users to speak during a room-wide mute", tag: .moderation, spec: ["RC-6", "RC-7"], params: [.roomId], body: "Allowlist",
        ok: (200, "Empty")))
    public static let disallowSenders = NativeRoute(.DELETE, "/v1/rooms/{roomId}/mute-allowlist", doc: .init(
        "Remove users from the allowlist", tag: .moderation, spec: ["RC-6"],
        params: [.roomId, .query("userIds", .idList, required: true), .query("needNotify", .boolean()), .query("extra")], ok: (200, "Empty")))
    public static let listAllowedSenders = NativeRoute(.GET, "/v1/rooms/{roomId}/mute-allowlist", doc: .init(
        "The allowlist", tag: .moderation, spec: ["RC-6"], params: [.roomId], ok: (200, "UserIds")))

    public static let globalMute = NativeRoute(.POST, "/v1/global-mutes", doc: .init(
        "Mute users in every room of the app (needNotify tells only them)", tag: .moderation, spec: ["RC-6", "RC-7", "RC-8"], body: "GlobalMute",
        ok: (200, "Empty")))
    public static let globalUnmute = NativeRoute(.DELETE, "/v1/global-mutes", doc: .init(
        "Lift app-wide mutes", tag: .moderation, spec: ["RC-6"],
        params: [.query("userIds", .idList, required: true), .query("needNotify", .boolean()), .query("extra")], ok: (200, "Empty")))
    public static let listGlobalMutes = NativeRoute(.GET, "/v1/global-mutes", doc: .init(
        "Users muted app-wide", tag: .moderation, spec: ["RC-6"], ok: (200, "UserExpiries")))
}

// MARK: Attributes (RC-10, ZIM-8)

extension NativeRoute {
    static let attributes = [setAttributes, removeAttributes, getAttributes]

    public static let setAttributes = NativeRoute(.PUT, "/v1/rooms/{roomId}/attributes", doc: .init(
        "Set attributes (broadcast to the room)", tag: .attributes, spec: ["RC-10", "ZIM-8"], params: [.roomId], body: "SetAttributes",
        ok: (200, "Attributes"), id: "setAttributes"))
    public static let removeAttributes = NativeRoute(.DELETE, "/v1/rooms/{roomId}/attributes", doc: .init(
        "Remove attributes", tag: .attributes, spec: ["RC-10"], params: [.roomId, .query("keys", .attributeKeyList, required: true)],
        ok: (200, "Keys")))
    public static let getAttributes = NativeRoute(.GET, "/v1/rooms/{roomId}/attributes", doc: .init(
        "Attributes (all, or the keys given)", tag: .attributes, spec: ["RC-10", "ZIM-8"], params: [.roomId, .query("keys", .attributeKeyList)],
        ok: (200, "Attributes")))
}

// MARK: Queue (NIM-16)

extension NativeRoute {
    static let queue = [getQueue, offerQueueElement, updateQueueElements, pollQueueElement, pollQueueHead, dropQueue]

    public static let getQueue = NativeRoute(.GET, "/v1/rooms/{roomId}/queue", doc: .init(
        "The queue, in order", tag: .queue, spec: ["NIM-16"], params: [.roomId], ok: (200, "Queue")))
    public static let offerQueueElement = NativeRoute(.PUT, "/v1/rooms/{roomId}/queue/{key}", doc: .init(
        "Offer or update an element (317)", tag: .queue, spec: ["NIM-16"], params: [.roomId, .path("key")], body: "QueueValue", ok: (200, "Empty")))
    public static let updateQueueElements = NativeRoute(.POST, "/v1/rooms/{roomId}/queue/batch", doc: .init(
        "Update existing elements; answers the keys that did not exist (320)", tag: .queue, spec: ["NIM-16"], params: [.roomId],
        body: "QueueBatch", ok: (200, "MissingKeys")))
    public static let pollQueueElement = NativeRoute(.DELETE, "/v1/rooms/{roomId}/queue/{key}", doc: .init(
        "Poll an element by key (317 poll)", tag: .queue, spec: ["NIM-16"], params: [.roomId, .path("key")], ok: (200, "QueueElement")))
    public static let pollQueueHead = NativeRoute(.POST, "/v1/rooms/{roomId}/queue/poll", doc: .init(
        "Poll the head of the queue", tag: .queue, spec: ["NIM-16"], params: [.roomId], ok: (200, "QueueElement")))
    public static let dropQueue = NativeRoute(.DELETE, "/v1/rooms/{roomId}/queue", doc: .init(
        "Drop the whole queue (317 drop)", tag: .queue, spec: ["NIM-16"], params: [.roomId], ok: (200, "Empty")))
}

// MARK: Messages (NIM-8)

extension NativeRoute {
    static let messages = [sendMessage, getHistory, sendToRooms, broadcast, recallMessage, listSensitiveWords, addSensitiveWords, removeSensitiveWords]

    public static let listSensitiveWords = NativeRoute(.GET, "/v1/sensitive-words", doc: .init(
        "The app's sensitive words, in the order they were added: each blocks the text messages it appears in (21501, nobody receives them) or is replaced in them (RongCloud's sensitive words)",
        tag: .moderation, spec: ["MO-2"], ok: (200, "SensitiveWordList")))
    public static let addSensitiveWords = NativeRoute(.POST, "/v1/sensitive-words", doc: .init(
        "Add sensitive words (1 to \(Limits.maxSensitiveWordsPerCall) per call, each 1–\(Limits.maxSensitiveWordChars) characters without whitespace or commas; at most \(Limits.maxSensitiveWordsPerApp) per app): with a replacement (1–\(Limits.maxSensitiveWordChars) characters) a word is replaced in clients' text messages, without one it blocks them; ASCII letters match either case; a word listed again takes its new replacement. The app server's messages are screened only when sensitiveWordsOnServerSends is on",
        tag: .moderation, spec: ["MO-2"], body: "SensitiveWords", ok: (200, "Empty")))
    public static let removeSensitiveWords = NativeRoute(.DELETE, "/v1/sensitive-words", doc: .init(
        "Remove sensitive words (unknown ones are ignored)", tag: .moderation, spec: ["MO-2"],
        params: [.query("words", .string("Comma-separated, 1 to \(Limits.maxSensitiveWordsPerCall) words"), required: true)], ok: (200, "Empty")))

    public static let sendMessage = NativeRoute(.POST, "/v1/rooms/{roomId}/messages", doc: .init(
        "Send a message as the app server (never blocked by mutes; judged by the app's before-send hook unless beforeSend.bypassServerMessages: 403 40303 when it drops the message, 503 50302 when it gives no verdict and the app fails closed)",
        tag: .messages, spec: ["NIM-8", "RC-7", "PX-4"], params: [.roomId], body: "SendMessage", ok: (201, "MessageResponse"), id: "sendMessage"))
    public static let getHistory = NativeRoute(.GET, "/v1/rooms/{roomId}/messages", doc: .init(
        "History (kept 10 days by default)", tag: .messages, spec: ["NIM-8"],
        params: [.roomId, .query("start", .integer(minimum: 0)), .query("limit", .integer(minimum: 1, maximum: Limits.maxHistoryLimit)),
                 .query("order", .oneOf(["asc", "desc"])), .query("types"),
                 .query("tags", .string("Comma-separated: only messages sent to an expression naming any of these tags (AU-1)"))],
        ok: (200, "Messages"), id: "getHistory"))
    public static let sendToRooms = NativeRoute(.POST, "/v1/messages", doc: .init(
        "Send one message to each of up to \(Limits.maxRoomsPerSend) rooms as the app server (RongCloud's chatroom publish to several rooms): every room is checked first, its message budget included, and a missing room (404 40401 naming roomIds) or a full one (429 42902) refuses the whole call; each room gets its own message, kept in its history",
        tag: .messages, spec: ["AU-3", "NIM-8"], body: "SendToRooms", ok: (201, "Messages"), id: "sendToRooms"))
    public static let broadcast = NativeRoute(.POST, "/v1/messages/broadcast", doc: .init(
        "Broadcast one message to the members present in every room of the app (RongCloud's chatroom broadcast, Nexconn's open-channel broadcast): not kept in history, no offset, never replayed (as a transient message), high priority unless asked, one id in every room, at most \(Limits.broadcastsPerSecond) a second per app (429 42901)",
        tag: .messages, spec: ["AU-3"], body: "Broadcast", ok: (201, "BroadcastResult"), id: "broadcast"))
    public static let recallMessage = NativeRoute(.DELETE, "/v1/rooms/{roomId}/messages/{messageId}", doc: .init(
        "Recall one of the room's recent messages (the last \(Limits.historyMemoryMessagesPerRoom) it holds), at any time: whoever the message reached gets message.recalled, history and resume keep its tombstone (same id, sender, time and offset, no content, recalled: true), webhooks get message.recalled; 404 40401 when it is not among them, already recalled, or not sent by sender",
        tag: .messages, spec: ["MO-1"],
        params: [.roomId, .path("messageId", .string("A message id (messageId of room.message, the send's answer or history)", maxLength: Limits.maxMessageIdBytes)),
                 .query("sender", .string("Refuse unless this user sent it", maxLength: Limits.maxUserIdBytes)),
                 .query("notifyExt", .string("Told to the room with the recall", maxLength: Limits.maxRecallExtBytes))],
        ok: (200, "Empty")))
}

// MARK: Member tags (AU-1)

extension NativeRoute {
    static let audiences = [setMemberTags, roomTags, tagMembers, tagMembersCount, tagMute]

    public static let setMemberTags = NativeRoute(.PUT, "/v1/rooms/{roomId}/members/{userId}/tags", doc: .init(
        "Replace a present member's tags (at most \(Limits.maxTagsPerMember), each 1–\(Limits.maxTagBytes) bytes; a room's members carry at most \(Limits.maxTagsPerRoom) distinct tags): its connections get room.tagsUpdated, and messages to tags reach it by the new ones; with notifyTargetTags the matching members get notification 316",
        tag: .members, spec: ["AU-1"], params: [.roomId, .userId], body: "SetMemberTags", ok: (200, "Empty")))
    public static let tagMembers = NativeRoute(.GET, "/v1/rooms/{roomId}/tags/{tag}/members", doc: .init(
        "The present members carrying a tag, paged", tag: .members, spec: ["AU-1"],
        params: [.roomId, .tag, .query("limit", .integer(minimum: 1, maximum: Limits.maxMemberListCount)),
                 .query("cursor", description: "The last user id of the previous page")],
        ok: (200, "Members")))
    public static let roomTags = NativeRoute(.GET, "/v1/rooms/{roomId}/tags", doc: .init(
        "Every tag the room's present members carry (at most \(Limits.maxTagsPerRoom)), with how many carry it, by tag", tag: .members,
        spec: ["AU-1"], params: [.roomId], ok: (200, "TagCounts")))
    public static let tagMembersCount = NativeRoute(.GET, "/v1/rooms/{roomId}/tags/{tag}/count", doc: .init(
        "How many present members carry a tag", tag: .members, spec: ["AU-1"], params: [.roomId, .tag], ok: (200, "Count")))
    public static let tagMute = NativeRoute(.PUT, "/v1/rooms/{roomId}/tags/{tag}/mute", doc: .init(
        "Mute every member carrying a tag for some seconds (0 lifts it), members who get the tag meanwhile included; notification 314/315 to the tag's members (or notifyTargetTags) unless needNotify is false",
        tag: .moderation, spec: ["AU-1"], params: [.roomId, .tag], body: "TagMute", ok: (200, "Empty")))
}

// MARK: Room QoS under overload (QS-4, QS-6): what the settings PATCH does not cover

extension NativeRoute {
    static let qos = [listProtectedSenders, addProtectedSenders, removeProtectedSenders, setDistribution]

    public static let listProtectedSenders = NativeRoute(.GET, "/v1/rooms/{roomId}/protected-senders", doc: .init(
        "A room's protected senders (RongCloud's chatroom user allowlist, Nexconn's priority senders): their messages are high priority and never dropped",
        tag: .qos, spec: ["QS-4"], params: [.roomId], ok: (200, "UserIds")))
    public static let addProtectedSenders = NativeRoute(.POST, "/v1/rooms/{roomId}/protected-senders", doc: .init(
        "Protect senders in a room (at most \(Limits.maxProtectedSendersPerRoom); a call that would pass it is refused with 1002 naming userIds and changes nothing)",
        tag: .qos, spec: ["QS-4"], params: [.roomId], body: "ProtectedSenders", ok: (200, "Empty")))
    public static let removeProtectedSenders = NativeRoute(.DELETE, "/v1/rooms/{roomId}/protected-senders", doc: .init(
        "Stop protecting senders in a room", tag: .qos, spec: ["QS-4"],
        params: [.roomId, .query("userIds", .idList, required: true)], ok: (200, "Empty")))
    public static let setDistribution = NativeRoute(.PUT, "/v1/rooms/{roomId}/distribution", doc: .init(
        "Stop or resume the fan-out of a room's messages (RongCloud's stop/resumeDistribution): while stopped, messages are accepted, stored and sent to webhooks and no member receives them; resumed, the next message is fanned out (the room shows distributionStopped)",
        tag: .qos, spec: ["QS-6"], params: [.roomId], body: "Distribution", ok: (200, "Empty")))
}

// MARK: Ultra groups and channels (UG-1..UG-6), their default levels (CS-4)

extension NativeRoute {
    static let ultraGroups = [createGroup, getGroup, renameGroup, dismissGroup, joinGroup, quitGroup, listGroupMembers, createChannel, listChannels,
                              changeChannelType, deleteChannel, addPrivateMembers, removePrivateMembers, listPrivateMembers, userChannels,
                              createUserGroups, listUserGroups, deleteUserGroups, addUserGroupMembers, removeUserGroupMembers,
                              bindUserGroups, unbindUserGroups, listChannelUserGroups, setGroupLevel, getGroupLevel]

    public static let createGroup = NativeRoute(.POST, "/v1/groups", doc: .init(
        "Create an ultra group (with its public default channel RCDefault); an app holds at most \(Limits.maxUltraGroupsPerApp), past it 41901", tag: .ultraGroups, spec: ["UG-1"], body: "CreateGroup",
        ok: (201, "GroupResponse"), id: "createGroup",
        links: .init(parameter: "groupId", value: "$response.body#/group/groupId", targets: [getGroup, createChannel, listChannels, joinGroup])))
    public static let getGroup = NativeRoute(.GET, "/v1/groups/{groupId}", doc: .init(
        "An ultra group", tag: .ultraGroups, spec: ["UG-1"], params: [.groupId], ok: (200, "GroupResponse"), id: "getGroup"))
    public static let renameGroup = NativeRoute(.PATCH, "/v1/groups/{groupId}", doc: .init(
        "Rename an ultra group (RongCloud's refresh, Nexconn's community-channel update): name is 1–\(Limits.maxNameBytes) bytes; webhooks get channel.changed with change groupRenamed",
        tag: .ultraGroups, spec: ["MO-4"], params: [.groupId], body: "RenameGroup", ok: (200, "GroupResponse")))
    public static let dismissGroup = NativeRoute(.DELETE, "/v1/groups/{groupId}", doc: .init(
        "Dismiss an ultra group", tag: .ultraGroups, spec: ["UG-1"], params: [.groupId], ok: (200, "Empty")))
    public static let joinGroup = NativeRoute(.POST, "/v1/groups/{groupId}/members", doc: .init(
        "Add members (up to \(Limits.maxGroupUsersPerCall) per call); an ultra group holds at most \(Limits.maxUltraGroupMembers), past it none is added: 41901", tag: .ultraGroups, spec: ["UG-1"], params: [.groupId], body: "GroupUsers", ok: (200, "GroupResponse"),
        id: "joinGroup"))
    public static let quitGroup = NativeRoute(.DELETE, "/v1/groups/{groupId}/members", doc: .init(
        "Remove members (also from every private list)", tag: .ultraGroups, spec: ["UG-1"],
        params: [.groupId, .query("userIds", .idList, required: true)], ok: (200, "GroupResponse")))
    public static let listGroupMembers = NativeRoute(.GET, "/v1/groups/{groupId}/members", doc: .init(
        "Members, paged", tag: .ultraGroups, spec: ["UG-6"], params: [P.groupId] + P.page, ok: (200, "UserIdsPage")))

    public static let createChannel = NativeRoute(.POST, "/v1/groups/{groupId}/channels", doc: .init(
        "Create a channel", tag: .ultraGroups, spec: ["UG-1"], params: [.groupId], body: "CreateChannel", ok: (201, "ChannelResponse"),
        id: "createChannel"))
    public static let listChannels = NativeRoute(.GET, "/v1/groups/{groupId}/channels", doc: .init(
        "Channels, paged", tag: .ultraGroups, spec: ["UG-6"], params: [P.groupId] + P.page, ok: (200, "Channels"), id: "listChannels"))
    public static let changeChannelType = NativeRoute(.PATCH, "/v1/groups/{groupId}/channels/{channelId}", doc: .init(
        "Change a channel's type: public→private tells every member (2 on the list, 6 not); private→public tells the list (3)",
        tag: .ultraGroups, spec: ["UG-2", "UG-5"], params: [.groupId, .channelId], body: "ChangeChannelType", ok: (200, "ChannelResponse")))
    public static let deleteChannel = NativeRoute(.DELETE, "/v1/groups/{groupId}/channels/{channelId}", doc: .init(
        "Delete a channel: public tells every member, private only its list", tag: .ultraGroups, spec: ["UG-3", "UG-5"],
        params: [.groupId, .channelId], ok: (200, "Empty")))

    public static let addPrivateMembers = NativeRoute(.POST, "/v1/groups/{groupId}/channels/{channelId}/private-members", doc: .init(
        "Add to the private list (up to 20 group members, or nothing: 24406)", tag: .ultraGroups, spec: ["UG-1"],
        params: [.groupId, .channelId], body: "UserIds20", ok: (200, "ChannelResponse")))
    public static let removePrivateMembers = NativeRoute(.DELETE, "/v1/groups/{groupId}/channels/{channelId}/private-members", doc: .init(
        "Remove from the private list (a private channel tells the removed users)", tag: .ultraGroups, spec: ["UG-4", "UG-5"],
        params: [.groupId, .channelId, .query("userIds", .idList, required: true)], ok: (200, "ChannelResponse")))
    public static let listPrivateMembers = NativeRoute(.GET, "/v1/groups/{groupId}/channels/{channelId}/private-members", doc: .init(
        "The private list, paged", tag: .ultraGroups, spec: ["UG-6"], params: [P.groupId, P.channelId] + P.page, ok: (200, "UserIdsPage")))
    public static let userChannels = NativeRoute(.GET, "/v1/groups/{groupId}/users/{userId}/channels", doc: .init(
        "Channels a member can see (public, and private ones listing them or bound to a user group holding them)", tag: .ultraGroups,
        spec: ["UG-6", "MO-4"], params: [P.groupId, P.userId] + P.page, ok: (200, "Channels")))

    // MO-4: user groups, bound to channels.
    public static let createUserGroups = NativeRoute(.POST, "/v1/groups/{groupId}/user-groups", doc: .init(
        "Create user groups (up to \(Limits.maxUserGroupsPerCall) per call; an ultra group has at most \(Limits.maxUserGroupsPerGroup), past it none is created: 41901); existing ones are left as they are",
        tag: .ultraGroups, spec: ["MO-4"], params: [.groupId], body: "UserGroupIds", ok: (200, "Empty")))
    public static let listUserGroups = NativeRoute(.GET, "/v1/groups/{groupId}/user-groups", doc: .init(
        "User groups in creation order, each with its members and the channels bound to it, paged", tag: .ultraGroups, spec: ["MO-4"],
        params: [P.groupId] + P.page, ok: (200, "UserGroups")))
    public static let deleteUserGroups = NativeRoute(.DELETE, "/v1/groups/{groupId}/user-groups", doc: .init(
        "Delete user groups with their bindings (members who no longer see a private channel are told, as by a private list's removal)",
        tag: .ultraGroups, spec: ["MO-4"], params: [.groupId, .query("userGroupIds", .idList, required: true)], ok: (200, "Empty")))
    public static let addUserGroupMembers = NativeRoute(.POST, "/v1/groups/{groupId}/user-groups/{userGroupId}/members", doc: .init(
        "Add group members to a user group (up to 20 per call, every one a group member or nothing: 24406; at most \(Limits.maxUsersPerUserGroup) in a user group: 41901)",
        tag: .ultraGroups, spec: ["MO-4"], params: [.groupId, .userGroupId], body: "UserIds20", ok: (200, "Empty")))
    public static let removeUserGroupMembers = NativeRoute(.DELETE, "/v1/groups/{groupId}/user-groups/{userGroupId}/members", doc: .init(
        "Remove users from a user group (those who no longer see a private channel bound to it are told)", tag: .ultraGroups, spec: ["MO-4"],
        params: [.groupId, .userGroupId, .query("userIds", .idList, required: true)], ok: (200, "Empty")))
    public static let bindUserGroups = NativeRoute(.POST, "/v1/groups/{groupId}/channels/{channelId}/user-groups", doc: .init(
        "Bind user groups to a channel: once it is private their members see it (at most \(Limits.maxUserGroupsPerChannel) per channel: 41901; every one must exist: 40401)",
        tag: .ultraGroups, spec: ["MO-4"], params: [.groupId, .channelId], body: "UserGroupIds", ok: (200, "ChannelResponse")))
    public static let unbindUserGroups = NativeRoute(.DELETE, "/v1/groups/{groupId}/channels/{channelId}/user-groups", doc: .init(
        "Unbind user groups from a channel (members who no longer see it while private are told)", tag: .ultraGroups, spec: ["MO-4"],
        params: [.groupId, .channelId, .query("userGroupIds", .idList, required: true)], ok: (200, "ChannelResponse")))
    public static let listChannelUserGroups = NativeRoute(.GET, "/v1/groups/{groupId}/channels/{channelId}/user-groups", doc: .init(
        "The user groups bound to a channel, in binding order, paged", tag: .ultraGroups, spec: ["MO-4"],
        params: [P.groupId, P.channelId] + P.page, ok: (200, "UserGroups")))

    public static let setGroupLevel = NativeRoute(.PUT, "/v1/groups/{groupId}/notification-level", doc: .init(
        "Group or channel default Do-Not-Disturb level", tag: .conversations, spec: ["CS-4"], params: [.groupId], body: "GroupNotificationLevel",
        ok: (200, "NotificationLevel")))
    public static let getGroupLevel = NativeRoute(.GET, "/v1/groups/{groupId}/notification-level", doc: .init(
        "Group or channel default level", tag: .conversations, spec: ["CS-4"], params: [.groupId, .query("channelId", .id)],
        ok: (200, "NotificationLevel")))
}

// MARK: Conversation status (CS-1..CS-4)

extension NativeRoute {
    static let conversations = [conversationStatuses, setConversationStatus, getConversationStatus, setConversationTypeLevel,
                                getConversationTypeLevel]

    public static let conversationStatuses = NativeRoute(.GET, "/v1/users/{userId}/conversations", doc: .init(
        "Statuses changed after a version cursor, in change order (what a device syncs)", tag: .conversations, spec: ["CS-3"],
        params: [.userId, .query("cursor", .integer("0: all", minimum: 0)), .query("limit", .integer(minimum: 1, maximum: Limits.maxStatusSyncPage))],
        ok: (200, "ConversationStatuses")))
    public static let setConversationStatus = NativeRoute(.PUT, "/v1/users/{userId}/conversations/{conversationType}/{targetId}", doc: .init(
        "Set pinned and/or the Do-Not-Disturb level; every online device of the user is told", tag: .conversations, spec: ["CS-1", "CS-2"],
        params: P.conversation, body: "SetConversationStatus", ok: (200, "ConversationStatusResponse")))
    public static let getConversationStatus = NativeRoute(.GET, "/v1/users/{userId}/conversations/{conversationType}/{targetId}", doc: .init(
        "A status with its effective level", tag: .conversations, spec: ["CS-1", "CS-4"], params: P.conversation + [.query("channelId", .id)],
        ok: (200, "ConversationStatusResponse")))
    public static let setConversationTypeLevel = NativeRoute(.PUT, "/v1/users/{userId}/conversation-types/{conversationType}", doc: .init(
        "The user's default level for a conversation type", tag: .conversations, spec: ["CS-4"], params: [.userId, .conversationType],
        body: "NotificationLevelBody", ok: (200, "NotificationLevel")))
    public static let getConversationTypeLevel = NativeRoute(.GET, "/v1/users/{userId}/conversation-types/{conversationType}", doc: .init(
        "The user's default level for a conversation type", tag: .conversations, spec: ["CS-4"], params: [.userId, .conversationType],
        ok: (200, "NotificationLevel")))
}

// MARK: Webhook endpoints, their deliveries and replays (WH-1..WH-5)

extension NativeRoute {
    static let webhooks = [createWebhook, listWebhooks, getWebhook, updateWebhook, deleteWebhook, rotateWebhookSecret, webhookDeliveries,
                           replayWebhook]

    public static let createWebhook = NativeRoute(.POST, "/v1/webhooks", doc: .init(
        "Add an endpoint (answers its secret once)", tag: .webhooks, spec: ["WH-1", "WH-3", "WH-5"], body: "WebhookEndpointCreate",
        ok: (201, "WebhookEndpointResponse"), id: "createWebhook"))
    public static let listWebhooks = NativeRoute(.GET, "/v1/webhooks", doc: .init(
        "The app's endpoints", tag: .webhooks, spec: ["WH-1"], ok: (200, "WebhookEndpoints")))
    public static let getWebhook = NativeRoute(.GET, "/v1/webhooks/{id}", doc: .init(
        "An endpoint", tag: .webhooks, spec: ["WH-1"], params: [.webhookId], ok: (200, "WebhookEndpointResponse")))
    public static let updateWebhook = NativeRoute(.PATCH, "/v1/webhooks/{id}", doc: .init(
        "Change an endpoint (enabled: true re-enables one a 410 disabled)", tag: .webhooks, spec: ["WH-1", "WH-4", "WH-5"], params: [.webhookId],
        body: "WebhookEndpointUpdate", ok: (200, "WebhookEndpointResponse"), id: "updateWebhook"))
    public static let deleteWebhook = NativeRoute(.DELETE, "/v1/webhooks/{id}", doc: .init(
        "Remove an endpoint with its delivery log", tag: .webhooks, spec: ["WH-1"], params: [.webhookId], ok: (200, "Empty")))
    public static let rotateWebhookSecret = NativeRoute(.POST, "/v1/webhooks/{id}/rotate-secret", doc: .init(
        "New secret; the previous one keeps signing (a second signature) for 24 hours", tag: .webhooks, spec: ["WH-3"], params: [.webhookId],
        ok: (200, "WebhookEndpointResponse")))
    public static let webhookDeliveries = NativeRoute(.GET, "/v1/webhooks/{id}/deliveries", doc: .init(
        "Deliveries, newest first, each with its attempts (status=dead: the dead-letter list)", tag: .webhooks, spec: ["WH-4"],
        params: [.webhookId, .query("status", .oneOf(OpenAPIDocument.DeliveryStatusNames.all)),
                 .query("limit", .integer(minimum: 1, maximum: 100)), .query("before", .integer("The next of the previous page"))],
        ok: (200, "WebhookDeliveries")))
    public static let replayWebhook = NativeRoute(.POST, "/v1/webhooks/{id}/replay", doc: .init(
        "Send messages again, by id or since a time (same ids)", tag: .webhooks, spec: ["WH-4"], params: [.webhookId], body: "WebhookReplay",
        ok: (200, "WebhookReplayed")))
}
