/// A room's durable settings (one row of the store's `rooms` table).
public struct RoomRecord: Equatable, Sendable {
    public var key: RoomKey
    public var name: String
    public var announcement: String
    public var ext: String
    public var broadcastUrl: String
    public var creator: String
    public var queueModificationLevel: QueueModificationLevel
    public var destroyPolicy: DestroyPolicy
    public var keepAlive: Bool
    public var multiDevice: MultiDevicePolicy
    public var muted: Bool
    public var open: Bool
    public var enterExitNotifications: Bool
    public var queueLimit: Int
    public var createdAt: Int64
    public var epoch: String
    public var lastActivity: Int64
    /// QS-4, QS-6.
    public var protectedSenders: [String]
    public var distributionStopped: Bool
    /// AU-1: muted tags and until when.
    public var tagMutes: [String: Int64]

    public init(key: RoomKey, name: String, announcement: String, ext: String, broadcastUrl: String, creator: String, queueModificationLevel: QueueModificationLevel, destroyPolicy: DestroyPolicy, keepAlive: Bool, multiDevice: MultiDevicePolicy, muted: Bool, open: Bool, enterExitNotifications: Bool, queueLimit: Int, createdAt: Int64, epoch: String, lastActivity: Int64,
                protectedSenders: [String] = [], distributionStopped: Bool = false, tagMutes: [String: Int64] = [:]) {
        self.tagMutes = tagMutes
        self.protectedSenders = protectedSenders
        self.distributionStopped = distributionStopped
        self.key = key
        self.name = name
        self.announcement = announcement
        self.ext = ext
        self.broadcastUrl = broadcastUrl
        self.creator = creator
        self.queueModificationLevel = queueModificationLevel
        self.destroyPolicy = destroyPolicy
        self.keepAlive = keepAlive
        self.multiDevice = multiDevice
        self.muted = muted
        self.open = open
        self.enterExitNotifications = enterExitNotifications
        self.queueLimit = queueLimit
        self.createdAt = createdAt
        self.epoch = epoch
        self.lastActivity = lastActivity
    }
}

/// A fixed member's durable role and profile.
public struct MemberRecord: Equatable, Sendable {
    public var userId: String
    public var role: GrantedRole
    public var nickname: String
    public var avatar: String
    public var ext: String

    public init(userId: String, role: GrantedRole, nickname: String, avatar: String, ext: String) {
        self.userId = userId
        self.role = role
        self.nickname = nickname
        self.avatar = avatar
        self.ext = ext
    }
}

/// A durable change for the store, produced with the outcome of the command that caused it.
/// Applying these in order to an empty store reproduces the domain's durable state.
public enum Mutation: Equatable, Sendable {
    case putApp(String, AppSettings)
    case putRoom(RoomRecord)
    /// Removes the room and everything in it (members, moderation, attributes, queue, messages).
    case deleteRoom(RoomKey)
    case putMember(RoomKey, MemberRecord)
    case deleteMember(RoomKey, String)
    /// Until when (ms); Int64.max for no expiry.
    case putBlock(RoomKey, String, until: Int64)
    case deleteBlock(RoomKey, String)
    case putPermanentMute(RoomKey, String)
    case deletePermanentMute(RoomKey, String)
    case putTempMute(RoomKey, String, until: Int64)
    case deleteTempMute(RoomKey, String)
    case putAllowlist(RoomKey, String)
    case deleteAllowlist(RoomKey, String)
    case putGlobalMute(app: String, String, until: Int64)
    case deleteGlobalMute(app: String, String)
    /// PX-3: the users who are online, so that a restart can tell the app who went offline.
    case putOnlineUser(app: String, String, device: String)
    case deleteOnlineUser(app: String, String)
    case putAttribute(RoomKey, String, Attribute)
    case deleteAttribute(RoomKey, String)
    /// `sequence` orders elements (insertion order survives restarts).
    case putQueueElement(RoomKey, String, QueueElement, sequence: Int64)
    case deleteQueueElement(RoomKey, String)
    case clearQueue(RoomKey)
    case appendMessage(RoomKey, ChatMessage)
    /// MO-1: the stored message loses its content and is marked recalled (its tombstone).
    case recallMessage(RoomKey, messageId: String)
    /// Messages older than this (ms) may be deleted.
    case pruneMessages(app: String, before: Int64)
    case putGroup(GroupRecord)
    /// Removes the group with its members, channels, private lists and user groups (MO-4).
    case deleteGroup(app: String, groupId: String)
    case putGroupMember(app: String, groupId: String, String, sequence: Int64)
    case deleteGroupMember(app: String, groupId: String, String)
    /// `sequence` orders new channels; nil updates a channel in place.
    case putChannel(ChannelRecord, sequence: Int64?)
    case deleteChannel(app: String, groupId: String, channelId: String)
    case putPrivateMember(app: String, groupId: String, channelId: String, String, sequence: Int64)
    case deletePrivateMember(app: String, groupId: String, channelId: String, String)
    /// MO-4: user groups (`sequence` orders them, their members and bindings, as above);
    /// deleting one also removes its members and bindings.
    case putUserGroup(app: String, groupId: String, userGroupId: String, sequence: Int64)
    case deleteUserGroup(app: String, groupId: String, userGroupId: String)
    case putUserGroupMember(app: String, groupId: String, userGroupId: String, String, sequence: Int64)
    case deleteUserGroupMember(app: String, groupId: String, userGroupId: String, String)
    case putChannelUserGroup(app: String, groupId: String, channelId: String, userGroupId: String, sequence: Int64)
    case deleteChannelUserGroup(app: String, groupId: String, channelId: String, userGroupId: String)
    case putConversationStatus(app: String, userId: String, ConversationStatus)
    /// `.default` removes the user's type default.
    case putConversationTypeLevel(app: String, userId: String, ConversationType, NotificationLevel)
    /// MO-8: an entry of the app's audit trail; the store keeps the newest
    /// `Limits.auditEntriesPerApp` of each app.
    case appendAudit(app: String, AuditEntry)
    /// MO-3: a stored community message, new or changed (keyed by group, channel and id).
    case putCommunityMessage(app: String, CommunityMessage)
    case deleteCommunityMessage(app: String, groupId: String, channelId: String, messageId: String)
    /// MO-5: a channel's (channel "": the group's) controls; empty ones are deleted.
    case putCommunityRules(app: String, groupId: String, channelId: String, CommunityRules)
    /// A channel's messages and controls, gone with it.
    case deleteCommunityChannel(app: String, groupId: String, channelId: String)
}

/// Webhook event types (WH-2).
public enum WebhookEventType: String, Equatable, Sendable, CaseIterable {
    case roomCreated = "room.created"
    case roomDestroyed = "room.destroyed"
    case memberJoined = "member.joined"
    case memberLeft = "member.left"
    case memberKicked = "member.kicked"
    case memberBlocked = "member.blocked"
    case moderationChanged = "moderation.changed"
    case messageSent = "message.sent"
    /// MO-1: a message was recalled (`details`: messageId, operator, sentTime).
    case messageRecalled = "message.recalled"
    case queueChanged = "queue.changed"
    case channelChanged = "channel.changed"
    /// MO-3: a message to an ultra group's channel (`roomId` ""; `details`: groupId, channelId,
    /// messageId, type, content, fromServer, and targets when it was for some members). A message
    /// sent not to be stored is told only with the app's `transientWebhooks`, as in rooms.
    case groupMessageSent = "group.message.sent"
    /// MO-1, MO-3: a stored community message was edited, its metadata changed, or it was recalled
    /// (`details`: groupId, channelId, messageId, change content | metadata | recalled, operator,
    /// version, and the new content after an edit).
    case groupMessageUpdated = "group.message.updated"
    case conversationStatusChanged = "conversation.status.changed"
    /// PX-3: a user's first connection came (online) or its last one went and stayed away for
    /// the grace (offline); `details.device` names the device.
    case userOnline = "user.online"
    case userOffline = "user.offline"
}

/// Ordered string pairs, written as a dictionary literal; cheaper than a Dictionary (no hashing)
/// and keeps a stable order for signed payloads.
public struct KeyValueList: Equatable, Sendable, ExpressibleByDictionaryLiteral, Sequence {
    public struct Pair: Equatable, Sendable {
        public var key: String
        public var value: String
    }
    public var pairs: [Pair]
    public init() { pairs = [] }
    public init(dictionaryLiteral elements: (String, String)...) {
        pairs = elements.map { Pair(key: $0.0, value: $0.1) }
    }
    public subscript(_ key: String) -> String? { pairs.first { $0.key == key }?.value }
    public func makeIterator() -> IndexingIterator<[Pair]> { pairs.makeIterator() }
}

/// A fact for the app server, written to the outbox with the mutation that caused it.
public struct WebhookRecord: Equatable, Sendable {
    public var app: String
    public var type: WebhookEventType
    public var roomId: String
    public var userIds: [String]
    public var time: Int64
    /// RongCloud status-sync `status`: 0 by an API call, 1 auto-exit, 2 blocked, 3 auto-destroy.
    public var cause: Int
    /// Type-specific details (ban type, message content, queue change ...), as ordered pairs.
    public var details: KeyValueList

    public init(app: String, type: WebhookEventType, roomId: String, userIds: [String] = [], time: Int64, cause: Int = 0,
                details: KeyValueList = KeyValueList()) {
        self.app = app
        self.type = type
        self.roomId = roomId
        self.userIds = userIds
        self.time = time
        self.cause = cause
        self.details = details
    }
}

/// A successful command's answer.
public enum Reply: Equatable, Sendable {
    case done
    case session(userId: String)
    case joined(JoinInfo)
    case room(RoomInfo)
    case rooms([RoomInfo])
    case members([MemberInfo], total: Int)
    case presence([(userId: String, inRoom: Bool)])
    /// PX-3: whether each user is online, and with how many connections.
    case online([(userId: String, connections: Int)])
    case userIds([String])
    case userExpiries([(userId: String, until: Int64?)])
    case roomIds([String])
    /// PX-5: a page of rooms and the last id on it when more follow.
    case roomPage([RoomInfo], next: String?)
    /// Attribute keys that were removed (RC-10).
    case keys([String])
    case attributes([AttributesEvent.Entry])
    case queue([(key: String, value: String)])
    case queueElement(key: String, value: String)
    /// Keys of a batch update that did not exist (NIM-16).
    case missingKeys([String])
    case message(ChatMessage)
    case messages([ChatMessage])
    case group(GroupInfo)
    case channel(ChannelInfo)
    case channels([ChannelInfo], total: Int)
    /// A page of user ids and how many there are in all.
    case userIdsPage([String], total: Int)
    /// MO-4: a page of user groups and how many there are in all.
    case userGroups([UserGroupInfo], total: Int)
    case notificationLevel(NotificationLevel)
    case conversationStatus(ConversationStatusView)
    /// CS-3: statuses in change order, the version to continue after, and whether more follow.
    case conversationStatuses([ConversationStatus], cursor: Int64, more: Bool)
    /// An app's settings (after `updateAppSettings`, or asked by `Query.appSettings`).
    case appSettings(AppSettings)
    /// PX-5: a user's connections on every node (`Query.connections`).
    case connections([UserConnection])
    /// PX-5: how many sessions a cluster-wide disconnect matched (`LogRecord.disconnectUser`).
    case disconnected(Int)
    /// A count (AU-1: members carrying a tag).
    case count(Int)
    /// AU-1: a room's tags and how many present members carry each, by tag.
    case tagCounts([TagCount])
    /// AU-3: a broadcast's message id (the same in every room) and the rooms it reached.
    case broadcast(messageId: String, rooms: Int)
    /// AU-5: the elements of a batch offer that were not put (a full queue, an absent owner).
    case failedKeys([String])
    /// MO-2: the app's sensitive words.
    case sensitiveWords([SensitiveWord])
    /// MO-8: a page of the audit trail, newest first, and the cursor of the next (older) page.
    case audit([AuditEntry], next: Int64?)
    /// MO-3, MO-6: community messages (sent, or a history page).
    case communityMessages([CommunityMessage])
    case communityMessage(CommunityMessage)
    /// MO-5.
    case communityRules(CommunityRules)
    case flag(Bool)

    public static func == (a: Reply, b: Reply) -> Bool {
        switch (a, b) {
        case (.done, .done): return true
        case let (.session(x), .session(y)): return x == y
        case let (.joined(x), .joined(y)): return x == y
        case let (.room(x), .room(y)): return x == y
        case let (.rooms(x), .rooms(y)): return x == y
        case let (.members(x, t1), .members(y, t2)): return x == y && t1 == t2
        case let (.presence(x), .presence(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.userId == $1.userId && $0.inRoom == $1.inRoom }
        case let (.online(x), .online(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.userId == $1.userId && $0.connections == $1.connections }
        case let (.userIds(x), .userIds(y)): return x == y
        case let (.userExpiries(x), .userExpiries(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.userId == $1.userId && $0.until == $1.until }
        case let (.roomIds(x), .roomIds(y)): return x == y
        case let (.roomPage(x, n1), .roomPage(y, n2)): return x == y && n1 == n2
        case let (.keys(x), .keys(y)): return x == y
        case let (.attributes(x), .attributes(y)): return x == y
        case let (.queue(x), .queue(y)): return x.count == y.count && zip(x, y).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        case let (.queueElement(k1, v1), .queueElement(k2, v2)): return k1 == k2 && v1 == v2
        case let (.missingKeys(x), .missingKeys(y)): return x == y
        case let (.message(x), .message(y)): return x == y
        case let (.messages(x), .messages(y)): return x == y
        case let (.group(x), .group(y)): return x == y
        case let (.channel(x), .channel(y)): return x == y
        case let (.channels(x, t1), .channels(y, t2)): return x == y && t1 == t2
        case let (.userIdsPage(x, t1), .userIdsPage(y, t2)): return x == y && t1 == t2
        case let (.userGroups(x, t1), .userGroups(y, t2)): return x == y && t1 == t2
        case let (.notificationLevel(x), .notificationLevel(y)): return x == y
        case let (.conversationStatus(x), .conversationStatus(y)): return x == y
        case let (.conversationStatuses(x, c1, m1), .conversationStatuses(y, c2, m2)): return x == y && c1 == c2 && m1 == m2
        case let (.appSettings(x), .appSettings(y)): return x == y
        case let (.connections(x), .connections(y)): return x == y
        case let (.disconnected(x), .disconnected(y)): return x == y
        case let (.count(x), .count(y)): return x == y
        case let (.sensitiveWords(x), .sensitiveWords(y)): return x == y
        case let (.audit(x, n1), .audit(y, n2)): return x == y && n1 == n2
        case let (.communityMessages(x), .communityMessages(y)): return x == y
        case let (.communityMessage(x), .communityMessage(y)): return x == y
        case let (.communityRules(x), .communityRules(y)): return x == y
        case let (.flag(x), .flag(y)): return x == y
        default: return false
        }
    }
}

/// PX-5: one of a user's connections, as the domain knows it (on any node of a cluster).
public struct UserConnection: Equatable, Sendable {
    public var session: SessionID
    public var device: String
    /// When its connect was applied.
    public var since: Int64
    /// The rooms it is in, sorted.
    public var rooms: [String]
    public init(session: SessionID, device: String, since: Int64, rooms: [String]) {
        self.session = session
        self.device = device
        self.since = since
        self.rooms = rooms
    }
}

/// Everything one command (or one tick) causes: the answer, the ordered effects for connections,
/// the durable mutations and the webhook records. A refused command has no effects, mutations or
/// webhooks (nothing changed).
public struct Outcome: Sendable {
    public var reply: Result<Reply, ChatError>
    public var effects: [Effect] = []
    public var mutations: [Mutation] = []
    public var webhooks: [WebhookRecord] = []

    public init(reply: Result<Reply, ChatError> = .success(.done)) {
        self.reply = reply
    }

    public static func failure(_ error: ChatError) -> Outcome { Outcome(reply: .failure(error)) }

    /// Deliveries only (tests).
    public var deliveries: [(event: ChatEvent, audience: Audience)] {
        effects.compactMap { if case .deliver(let e, let a) = $0 { return (e, a) } else { return nil } }
    }

    public var changesState: Bool { !mutations.isEmpty || !effects.isEmpty }
}

/// AU-1: a tag and how many present members of a room carry it.
public struct TagCount: Equatable, Sendable {
    public var tag: String
    public var count: Int

    public init(tag: String, count: Int) {
        self.tag = tag
        self.count = count
    }
}
