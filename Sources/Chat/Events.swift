/// Who must receive an event. Resolved by the gateway's I/O loops against their local indexes,
/// so the engine never builds per-connection lists for a room.
public enum Audience: Equatable, Sendable {
    /// Every session in the room.
    case room(RoomKey)
    /// Every session in the room except those of these users.
    case roomExceptUsers(RoomKey, [String])
    /// Every session in the room except one (the sender of a message).
    case roomExceptSession(RoomKey, SessionID)
    /// AU-2: the sessions in the room of these users, but `except`.
    case roomUsers(RoomKey, [String], except: Exclusion)
    /// AU-1: the sessions in the room whose member's tags match, but `except`.
    case roomTagged(RoomKey, TagExpression, except: Exclusion)
    /// AU-4: one member's own join or departure (`room.memberChanged`, NIM's 301/302): the
    /// sessions in the room, but `except`, whose member's tags match `tags` (when given), and not
    /// those that asked for member counts only.
    case roomMemberDetail(RoomKey, except: Exclusion, tags: TagExpression?)
    /// AU-4: the sessions in the room that asked for member counts only.
    case roomCountsOnly(RoomKey)
    /// Every online session of these users, wherever they are.
    case users(app: String, [String])
    /// Exactly these sessions (one connection; one user's other devices).
    case sessions([SessionID])

    /// The room whose ordered stream this event belongs to (BX-1), if any.
    public var room: RoomKey? {
        switch self {
        case .room(let r), .roomExceptUsers(let r, _), .roomExceptSession(let r, _), .roomUsers(let r, _, _), .roomTagged(let r, _, _),
             .roomMemberDetail(let r, _, _), .roomCountsOnly(let r): return r
        case .users, .sessions: return nil
        }
    }
}

/// Who an addressed audience leaves out: the sender's connection (a message), or a user (its own
/// enter and exit notifications).
public enum Exclusion: Equatable, Hashable, Sendable {
    case none
    case session(SessionID)
    case user(String)

    public func excludes(_ sid: SessionID, user: String) -> Bool {
        switch self {
        case .none: return false
        case .session(let s): return s == sid
        case .user(let u): return u == user
        }
    }
}

/// A member as events and replies describe it (NIM-11).
public struct MemberInfo: Equatable, Sendable {
    public var userId: String
    public var nickname: String
    public var avatar: String
    public var ext: String
    public var type: MemberType
    public var isMuted: Bool
    public var isTempMuted: Bool
    /// Remaining seconds of a temporary mute.
    public var tempMuteRemainingSeconds: Int64
    public var isBlocklisted: Bool
    public var isOnline: Bool
    public var enterTime: Int64
    /// AU-1: its tags in the room (while present).
    public var tags: [String]

    public init(userId: String, nickname: String, avatar: String, ext: String, type: MemberType, isMuted: Bool, isTempMuted: Bool, tempMuteRemainingSeconds: Int64, isBlocklisted: Bool, isOnline: Bool, enterTime: Int64, tags: [String] = []) {
        self.tags = tags
        self.userId = userId
        self.nickname = nickname
        self.avatar = avatar
        self.ext = ext
        self.type = type
        self.isMuted = isMuted
        self.isTempMuted = isTempMuted
        self.tempMuteRemainingSeconds = tempMuteRemainingSeconds
        self.isBlocklisted = isBlocklisted
        self.isOnline = isOnline
        self.enterTime = enterTime
    }
}

/// Room information (NIM-1, RC-9), as replies and the `joined` status carry it.
public struct RoomInfo: Equatable, Sendable {
    public var roomId: String
    public var name: String
    public var announcement: String
    public var creator: String
    public var ext: String
    public var broadcastUrl: String
    public var onlineUserCount: Int
    public var queueModificationLevel: QueueModificationLevel
    public var muted: Bool
    public var open: Bool
    public var createdAt: Int64
    public var destroyPolicy: DestroyPolicy
    public var keepAlive: Bool
    public var multiDevice: MultiDevicePolicy
    public var enterExitNotifications: Bool
    public var epoch: String
    /// QS-6: the room's messages are not fanned out.
    public var distributionStopped: Bool

    public init(roomId: String, name: String, announcement: String, creator: String, ext: String, broadcastUrl: String, onlineUserCount: Int, queueModificationLevel: QueueModificationLevel, muted: Bool, open: Bool, createdAt: Int64, destroyPolicy: DestroyPolicy, keepAlive: Bool, multiDevice: MultiDevicePolicy, enterExitNotifications: Bool, epoch: String,
                distributionStopped: Bool = false) {
        self.distributionStopped = distributionStopped
        self.roomId = roomId
        self.name = name
        self.announcement = announcement
        self.creator = creator
        self.ext = ext
        self.broadcastUrl = broadcastUrl
        self.onlineUserCount = onlineUserCount
        self.queueModificationLevel = queueModificationLevel
        self.muted = muted
        self.open = open
        self.createdAt = createdAt
        self.destroyPolicy = destroyPolicy
        self.keepAlive = keepAlive
        self.multiDevice = multiDevice
        self.enterExitNotifications = enterExitNotifications
        self.epoch = epoch
    }
}

/// RC-1 join response.
public struct JoinInfo: Equatable, Sendable {
    public var memberCount: Int
    public var joinTime: Int64
    public var room: RoomInfo
    /// BX-1: the room stream's offset once the join took effect (the joiner's starting position
    /// for a later resume). Set by the engine, which numbers the stream; nil inside the domain.
    public var offset: Int64?

    public init(memberCount: Int, joinTime: Int64, room: RoomInfo) {
        self.memberCount = memberCount
        self.joinTime = joinTime
        self.room = room
    }
}

/// RC-1 statuses (NIM-5 states and ZIM-5 states are derived or given alongside).
public enum RoomStatus: Equatable, Sendable {
    case joining
    case joined(JoinInfo)
    case joinFailed(ErrorCode)
    /// The room was destroyed and created again while the client was away (sent before `joined`).
    case reset
    case quit
    case destroyed(DestroyType)
}

extension RoomStatus {
    /// NIM-5 connection state: entering 0, entered 1, enterFailed 2. (3, connectionLost, is known
    /// only to the client; it is not sent.)
    public var nimState: Int? {
        switch self {
        case .joining: return 0
        case .joined: return 1
        case .joinFailed: return 2
        default: return nil
        }
    }
}

/// RC-1 destroy types.
public enum DestroyType: String, Equatable, Sendable {
    case manual
    case auto
}

/// ZIM room states and events (ZIM-5 table).
public enum ZIMRoomState: String, Equatable, Sendable {
    case connecting
    case connected
    case disconnected
}

public enum ZIMRoomEvent: String, Equatable, Sendable {
    case success
    case activeSwitch
    case switchFailed
    case kickedOut
    case roomNotExist
    case enterFailed
}

/// A room status change for one connection (RC-1, NIM-5, ZIM-5/6).
public struct RoomStatusEvent: Equatable, Sendable {
    public var roomId: String
    public var status: RoomStatus
    public var zimState: ZIMRoomState
    public var zimEvent: ZIMRoomEvent
    public var time: Int64

    public init(roomId: String, status: RoomStatus, zimState: ZIMRoomState, zimEvent: ZIMRoomEvent, time: Int64) {
        self.roomId = roomId
        self.status = status
        self.zimState = zimState
        self.zimEvent = zimEvent
        self.time = time
    }
}

/// NIM-6 kick reasons.
public enum KickReason: Int, Equatable, Sendable {
    case roomClosed = 1
    case byManager = 2
    case conflictingLogin = 3
    case blocklisted = 5
}

public struct KickedEvent: Equatable, Sendable {
    public var roomId: String
    public var reason: KickReason
    public var ext: String
    public var time: Int64

    public init(roomId: String, reason: KickReason, ext: String, time: Int64) {
        self.roomId = roomId
        self.reason = reason
        self.ext = ext
        self.time = time
    }
}

public enum MemberAction: String, Equatable, Sendable {
    case join
    case quit
}

public struct MemberChange: Equatable, Sendable {
    public var userId: String
    public var action: MemberAction
    public var nickname: String
    public var avatar: String

    public init(userId: String, action: MemberAction, nickname: String, avatar: String) {
        self.userId = userId
        self.action = action
        self.nickname = nickname
        self.avatar = avatar
    }
}

/// RC-2 `memberChanged` / ZIM-4 `roomMemberJoined`/`roomMemberLeft`.
public struct MemberChangedEvent: Equatable, Sendable {
    public var roomId: String
    public var changes: [MemberChange]
    public var memberCount: Int

    public init(roomId: String, changes: [MemberChange], memberCount: Int) {
        self.roomId = roomId
        self.changes = changes
        self.memberCount = memberCount
    }
}

/// AU-4: who joined and left a big room since its last summary (instead of one event each),
/// and how many members it has now. A counts-only connection's copy names nobody.
public struct MembersSummaryEvent: Equatable, Sendable {
    public var roomId: String
    /// Members present now.
    public var memberCount: Int
    /// How many members joined and how many left since the previous summary (exact).
    public var joined: Int
    public var left: Int
    /// The first of them, at most `Limits.maxMemberSummaryIds` each (empty in a counts-only copy).
    public var joinedIds: [String]
    public var leftIds: [String]
    public var time: Int64

    public init(roomId: String, memberCount: Int, joined: Int, left: Int, joinedIds: [String], leftIds: [String], time: Int64) {
        self.roomId = roomId
        self.memberCount = memberCount
        self.joined = joined
        self.left = left
        self.joinedIds = joinedIds
        self.leftIds = leftIds
        self.time = time
    }
}

/// RC-3 multi-device sync.
public struct MultiLoginSyncEvent: Equatable, Sendable {
    public var roomId: String
    /// 1 joined, 0 left.
    public var status: Int
    /// For status 0: 1 voluntary, 2 kicked because the user joined another room (RC-4).
    public var reason: Int
    public var time: Int64
    public var extra: String

    public init(roomId: String, status: Int, reason: Int, time: Int64, extra: String) {
        self.roomId = roomId
        self.status = status
        self.reason = reason
        self.time = time
        self.extra = extra
    }
}

/// RC-5 block event.
public struct BlockEvent: Equatable, Sendable {
    public var roomId: String
    /// 1 block, 0 unblock.
    public var operateType: Int
    /// Milliseconds (0 when unblocking).
    public var durationTime: Int64
    public var operateTime: Int64
    public var userIdList: [String]
    public var extra: String

    public init(roomId: String, operateType: Int, durationTime: Int64, operateTime: Int64, userIdList: [String], extra: String) {
        self.roomId = roomId
        self.operateType = operateType
        self.durationTime = durationTime
        self.operateTime = operateTime
        self.userIdList = userIdList
        self.extra = extra
    }
}

/// RC-6 ban types.
public enum BanType: Int, Equatable, Sendable {
    case unmuteUsers = 0
    case muteUsers = 1
    case roomMuteOff = 2
    case roomMuteOn = 3
    case allowlistRemove = 4
    case allowlistAdd = 5
    case globalUnmute = 6
    case globalMute = 7
}

/// RC-6 mute event.
public struct BanEvent: Equatable, Sendable {
    /// Always a room: a global mute (6/7) is told once per room the user is in, with its id.
    public var roomId: String
    public var banType: BanType
    public var durationTime: Int64
    public var operateTime: Int64
    public var userIdList: [String]
    public var extra: String

    public init(roomId: String, banType: BanType, durationTime: Int64, operateTime: Int64, userIdList: [String], extra: String) {
        self.roomId = roomId
        self.banType = banType
        self.durationTime = durationTime
        self.operateTime = operateTime
        self.userIdList = userIdList
        self.extra = extra
    }
}

/// NIM-9 notification types.
public enum NotificationType: Int, Equatable, Sendable, CaseIterable {
    case enter = 301
    case exit = 302
    case blocklistAdd = 303
    case blocklistRemove = 304
    case muteAdd = 305
    case muteRemove = 306
    case managerAdd = 307
    case managerRemove = 308
    case commonAdd = 309
    case commonRemove = 310
    case closed = 311
    case infoUpdated = 312
    case kicked = 313
    case tempMuteAdd = 314
    case tempMuteRemove = 315
    case memberInfoUpdated = 316
    case queueChange = 317
    case roomMuted = 318
    case roomUnmuted = 319
    case queueBatchChange = 320
}

/// NIM-16 queue change types (317) and batch change types (320).
public enum QueueChangeType: String, Equatable, Sendable {
    case offer
    case poll
    case drop
    case update
    case partialClear
    case batchUpdate
}

/// The `ext` of a notification: what NIM carries besides source and targets.
public enum NotificationExt: Equatable, Sendable {
    case none
    case tempMute(durationSeconds: Int64)
    case queue(QueueChangeType, key: String, value: String)
    case queueBatch(QueueChangeType, elements: [(key: String, value: String)])

    public static func == (a: NotificationExt, b: NotificationExt) -> Bool {
        switch (a, b) {
        case (.none, .none): return true
        case let (.tempMute(x), .tempMute(y)): return x == y
        case let (.queue(t1, k1, v1), .queue(t2, k2, v2)): return t1 == t2 && k1 == k2 && v1 == v2
        case let (.queueBatch(t1, e1), .queueBatch(t2, e2)):
            return t1 == t2 && e1.count == e2.count && zip(e1, e2).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }
}

/// NIM-9 notification: operator (`source`), affected members (`targets`), the caller's
/// `notifyExt`, and the type-specific `ext`.
public struct NotificationEvent: Equatable, Sendable {
    public var roomId: String
    public var type: NotificationType
    /// The operator; nil when the app server acted.
    public var source: MemberInfo?
    public var targets: [MemberInfo]
    public var notifyExt: String
    public var ext: NotificationExt
    public var time: Int64

    public init(roomId: String, type: NotificationType, source: MemberInfo?, targets: [MemberInfo], notifyExt: String, ext: NotificationExt, time: Int64) {
        self.roomId = roomId
        self.type = type
        self.source = source
        self.targets = targets
        self.notifyExt = notifyExt
        self.ext = ext
        self.time = time
    }
}

/// RC-10 / ZIM-8 attribute changes.
public struct AttributesEvent: Equatable, Sendable {
    public struct Entry: Equatable, Sendable {
        public var key: String
        public var value: String
        public var owner: String
        public var autoDelete: Bool
        /// MO-6: when it was last set (ms).
        public var updatedAt: Int64 = 0
    }
    public var roomId: String
    public var updated: [Entry]
    public var removed: [String]
    /// Who changed them ("" for the app server, or the owner whose departure removed them).
    public var operatorId: String
    public var time: Int64

    public init(roomId: String, updated: [Entry], removed: [String], operatorId: String, time: Int64) {
        self.roomId = roomId
        self.updated = updated
        self.removed = removed
        self.operatorId = operatorId
        self.time = time
    }
}

/// MO-1: a message of the room was recalled. Its place in history and in the resume window keeps
/// `tombstone` (the message without content, `recalled: true`).
public struct RecallEvent: Equatable, Sendable {
    public var roomId: String
    public var messageId: String
    /// Who sent the message.
    public var sender: String
    /// Who recalled it: the sender, a manager or the room's creator; "" for the app server (or the
    /// user the app server named as NIM's `operator`).
    public var operatorId: String
    /// The recall's note (RongCloud `extra`, NIM `notifyExt`).
    public var notifyExt: String
    public var time: Int64
    /// The message as history and resume now show it.
    public var tombstone: ChatMessage

    public init(roomId: String, messageId: String, sender: String, operatorId: String, notifyExt: String, time: Int64, tombstone: ChatMessage) {
        self.roomId = roomId
        self.messageId = messageId
        self.sender = sender
        self.operatorId = operatorId
        self.notifyExt = notifyExt
        self.time = time
        self.tombstone = tombstone
    }
}

public enum ChatEvent: Equatable, Sendable {
    case roomStatus(RoomStatusEvent)
    case kicked(KickedEvent)
    case memberChanged(MemberChangedEvent)
    /// AU-4.
    case membersSummary(MembersSummaryEvent)
    case multiLoginSync(MultiLoginSyncEvent)
    case block(BlockEvent)
    case ban(BanEvent)
    case notification(NotificationEvent)
    case message(ChatMessage)
    /// MO-1.
    case messageRecalled(RecallEvent)
    /// AU-1: the receiving member's tags changed.
    case tagsUpdated(TagsUpdatedEvent)
    case attributesChanged(AttributesEvent)
    /// UG-2 (one array per recipient, UG-5).
    case channelTypeChanged([ChannelTypeChange])
    /// UG-3.
    case channelDisbanded([ChannelDisbanded])
    /// UG-4: users taken off a private channel's list.
    case channelUsersKicked([ChannelUserKicked])
    /// CS-2 (and CS-3 sync batches).
    case conversationStatusChanged([ConversationStatusInfo])
    /// MO-3: a message in an ultra group's channel.
    case communityMessage(CommunityMessage)
    /// MO-3: a community message was edited or its metadata changed.
    case communityMessageUpdated(CommunityUpdateEvent)
    /// MO-5: a mute or allowed-sender list, or a freeze, changed.
    case communityRulesChanged(CommunityRulesEvent)

    /// The event's wire name.
    public var name: String {
        switch self {
        case .roomStatus: return "room.status"
        case .kicked: return "room.kicked"
        case .memberChanged: return "room.memberChanged"
        case .membersSummary: return "room.members"
        case .multiLoginSync: return "room.multiLoginSync"
        case .block: return "room.block"
        case .ban: return "room.ban"
        case .notification: return "room.notification"
        case .message: return "room.message"
        case .messageRecalled: return "message.recalled"
        case .tagsUpdated: return "room.tagsUpdated"
        case .attributesChanged: return "room.attributes"
        case .channelTypeChanged: return "group.channelTypeChanged"
        case .channelDisbanded: return "group.channelDisbanded"
        case .channelUsersKicked: return "group.channelUserKicked"
        case .conversationStatusChanged: return "conversation.statusChanged"
        case .communityMessage: return "group.message"
        case .communityMessageUpdated: return "message.updated"
        case .communityRulesChanged: return "group.moderationChanged"
        }
    }
}

/// What an outcome does, in order. `joined`/`left` keep the gateway's room indexes in step with
/// deliveries (e.g. blocked users receive the block event, then leave).
public enum Effect: Equatable, Sendable {
    case deliver(ChatEvent, Audience)
    /// AU-1: these sessions' member carries these tags in the room (the hubs match audiences by them).
    case tagged([SessionID], RoomKey, [String])
    case joined(SessionID, RoomKey)
    case left(SessionID, RoomKey)
}
