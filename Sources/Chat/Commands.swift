/// Who performs an operation: the app server (REST, never restricted by roles) or a connected
/// client's session (NIM-15 manager operations, queue and attribute changes, messages).
public enum Actor: Equatable, Sendable, Codable {
    case server
    case session(SessionID)
    /// MO-7: the app server in the name of an account (NIM's `operator`): that user's role in the
    /// room decides what it may do, as for its client, whether or not it is connected.
    case account(String)

    /// The client's session, nil for the app server.
    var session: SessionID? {
        if case .session(let s) = self { return s }
        return nil
    }
}

/// RongCloud-style notification fields (RC-5, RC-6, RC-8): `extra`, sent when `needNotify` is true.
/// `extra` is checked whenever it is given (SPEC §13), so a request that gives it without
/// `needNotify` still carries it here, with `needNotify` false; nil means neither was given.
public struct RCNotify: Equatable, Sendable, Codable {
    public var extra: String
    public var needNotify: Bool
    public init(extra: String = "", needNotify: Bool = true) {
        self.extra = extra
        self.needNotify = needNotify
    }

    /// The fields as a request gives them: nil when it gives neither `needNotify=true` nor `extra`.
    public static func given(needNotify: Bool?, extra: String?) -> RCNotify? {
        guard needNotify == true || extra != nil else { return nil }
        return RCNotify(extra: extra ?? "", needNotify: needNotify == true)
    }
}

/// NIM-style notification message (NIM-9) with the caller's `notifyExt`, sent when `needNotify`
/// is true. Like `extra`, `notifyExt` is checked whenever it is given (SPEC §13).
public struct NIMNotify: Equatable, Sendable, Codable {
    public var notifyExt: String
    public var needNotify: Bool
    public init(notifyExt: String = "", needNotify: Bool = true) {
        self.notifyExt = notifyExt
        self.needNotify = needNotify
    }

    /// The fields as a request gives them: nil when it gives neither `needNotify=true` nor `notifyExt`.
    public static func given(needNotify: Bool?, notifyExt: String?) -> NIMNotify? {
        guard needNotify == true || notifyExt != nil else { return nil }
        return NIMNotify(notifyExt: notifyExt ?? "", needNotify: needNotify == true)
    }
}

public enum MuteDuration: Equatable, Sendable, Codable {
    /// RongCloud gag: 1…43200 minutes; a temporary mute.
    case minutes(Int)
    /// NIM temporary mute: 1…2592000 seconds.
    case seconds(Int64)
    /// NIM permanent mute: makes the user a fixed (limited) member.
    case permanent
}

public enum UnmuteKind: String, Equatable, Sendable, Codable {
    case all
    case permanent
    case temporary
}

/// NIM-2 enter request fields.
public struct EnterProfile: Equatable, Sendable, Codable {
    public var nickname: String
    public var avatar: String
    /// roomExt: attached to every message and notification this member causes.
    public var ext: String
    /// roomNotifyExt: attached to the enter notification.
    public var notifyExt: String
    /// AU-1: the member's tags in the room (nil: none).
    public var tags: [String]?
    /// AU-1: the enter and exit notifications go only to members whose tags match.
    public var notifyTargetTags: TagExpression?
    /// AU-4: this connection wants only the room's member counts (`room.members` without ids),
    /// never one event per member who joins or leaves. nil: every member event.
    public var memberCountsOnly: Bool?
    public init(nickname: String = "", avatar: String = "", ext: String = "", notifyExt: String = "", tags: [String]? = nil,
                notifyTargetTags: TagExpression? = nil, memberCountsOnly: Bool? = nil) {
        self.memberCountsOnly = memberCountsOnly
        self.nickname = nickname
        self.avatar = avatar
        self.ext = ext
        self.notifyExt = notifyExt
        self.tags = tags
        self.notifyTargetTags = notifyTargetTags
    }
}

public enum JoinMode: Equatable, Sendable, Codable {
    /// RC join, NIM enter, ZIM joinRoom: the room must exist (ZIM-2).
    case join
    /// ZIM enterRoom: created with this configuration if missing (ZIM-3).
    case enter(RoomConfig)
    /// ZIM createRoom: fails if the room exists (ZIM-1).
    case create(RoomConfig)
}

/// NIM-10 room update; nil fields are left alone.
public struct RoomUpdate: Equatable, Sendable, Codable {
    public var name: String?
    public var announcement: String?
    public var ext: String?
    public var broadcastUrl: String?
    public var queueModificationLevel: QueueModificationLevel?
    public var destroyPolicy: DestroyPolicy?
    public var keepAlive: Bool?
    public var multiDevice: MultiDevicePolicy?
    public var enterExitNotifications: Bool?
    public var queueLimit: Int?
    public init() {}
}

/// NIM-12 role grants.
public enum RoleChange: Equatable, Sendable, Codable {
    case setManager(Bool)
    case setCommon(Bool)
    /// The REST form: make the member a manager, a common member or a guest; resolved to the
    /// grant above from the member's current role.
    case assign(RoleTarget)
}

/// Role names accepted by the REST API.
public enum RoleTarget: String, Equatable, Sendable, Codable, CaseIterable {
    case manager
    case common
    case guest

    /// Refuses unknown names with a clear error naming the field.
    public static func parse(_ name: String, field: String = "role") throws(ChatError) -> RoleTarget {
        guard let r = RoleTarget(rawValue: name) else {
            throw ChatError(.invalidParameter, "unknown role '\(name)'; use manager, common or guest", field: field)
        }
        return r
    }
}

/// Who sends a room message.
public enum MessageSender: Equatable, Sendable, Codable {
    case session(SessionID)
    /// The app server, optionally in the name of a user.
    case server(userId: String, nickname: String, avatar: String)
}

/// MO-1: what a recall names besides the message, as the vendors' calls give it. Every present
/// field must match the message (RongCloud's `fromUserId` and `sentTime`, NIM's `fromAcc` and
/// `msgTimetag`), so a caller cannot recall another message than the one it describes.
public struct RecallOptions: Equatable, Sendable, Codable {
    /// The message's sender, as the caller believes it.
    public var sender: String?
    /// When the message was sent (ms), as the caller believes it.
    public var sentTime: Int64?
    /// NIM's `operator`: the user the app server recalls in the name of; it must be the sender,
    /// the room's creator or one of its managers.
    public var operatorId: String?
    /// Told to the room with the recall (RongCloud `extra`, NIM `notifyExt`); at most
    /// `Limits.maxRecallExtBytes` bytes.
    public var notifyExt: String

    public init(sender: String? = nil, sentTime: Int64? = nil, operatorId: String? = nil, notifyExt: String = "") {
        self.sender = sender
        self.sentTime = sentTime
        self.operatorId = operatorId
        self.notifyExt = notifyExt
    }
}

/// Anonymous independent-mode profile (NIM-3): nickname and avatar are required.
public struct AnonymousProfile: Equatable, Sendable, Codable {
    public var nickname: String
    public var avatar: String
    public init(nickname: String, avatar: String) {
        self.nickname = nickname
        self.avatar = avatar
    }
}

/// A key and its value (room attributes, queue elements) in a command.
public struct KeyValue: Equatable, Sendable, Codable {
    public var key: String
    public var value: String
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
    public init(_ key: String, _ value: String) { self.init(key: key, value: value) }
}

/// AU-1, AU-2: which of a room's messages a history read returns.
public struct HistoryFilter: Equatable, Sendable {
    /// A member's connection reads: only what was addressed to that member (by name or by its
    /// tags). nil: the app server reads everything.
    public var viewer: SessionID?
    /// Only messages addressed to any of these tags (NIM's history by tag); empty: any.
    public var tags: [String]
    public init(viewer: SessionID? = nil, tags: [String] = []) {
        self.viewer = viewer
        self.tags = tags
    }
}

/// A history filter with its viewer looked up in the domain: the member and its tags.
public struct ResolvedHistoryFilter: Equatable, Sendable {
    public var viewerUser: String?
    public var viewerTags: [String]
    public var tags: [String]

    public init(viewerUser: String? = nil, viewerTags: [String] = [], tags: [String] = []) {
        self.viewerUser = viewerUser
        self.viewerTags = viewerTags
        self.tags = tags
    }

    public var isEmpty: Bool { viewerUser == nil && tags.isEmpty }

    public func admits(_ m: ChatMessage) -> Bool {
        // A member reads what was addressed to it, and what it sent.
        if let user = viewerUser, m.sender != user, !m.isAddressed(to: user, tags: viewerTags) { return false }
        if !tags.isEmpty { return m.targetTags.map { !$0.names.isDisjoint(with: tags) } ?? false }
        return true
    }
}

/// Every state-changing operation of SPEC §3, §6 and §7. Codable and Equatable: the cluster's
/// shared log carries commands (CLUSTER.md).
public enum Command: Sendable, Equatable, Codable {
    /// Replaces an app's settings whole (start-up, tools); creates the app if it is new.
    case configureApp(app: String, AppSettings)
    /// Changes the present fields of an existing app's settings (→ `Reply.appSettings`).
    case updateAppSettings(app: String, AppSettingsPatch)

    // Sessions.
    /// A client connected; `userId` nil means anonymous (NIM-3), with `anonymous` required.
    case connect(SessionID, app: String, userId: String?, deviceId: String, anonymous: AnonymousProfile?)
    case disconnect(SessionID)

    // Presence (clients).
    case join(SessionID, roomId: String, EnterProfile, JoinMode)
    case leave(SessionID, roomId: String)
    case leaveAll(SessionID)
    case switchRoom(SessionID, from: String, to: RoomConfig, createIfMissing: Bool, EnterProfile)
    /// NIM-14: a member updates its own room profile (→ 316).
    case updateMyInfo(SessionID, roomId: String, nickname: String?, avatar: String?, ext: String?, notifyExt: String)

    // Rooms (app server; NIM-1 close also by operator).
    case createRoom(app: String, RoomConfig)
    case destroyRooms(app: String, [String])
    case updateRoom(app: String, roomId: String, RoomUpdate, Actor, nim: NIMNotify?)
    case setRoomOpen(app: String, roomId: String, Bool, Actor, nim: NIMNotify?)

    // Moderation (app server, or managers from a client).
    case block(app: String, roomId: String, [String], minutes: Int?, Actor, rc: RCNotify?, nim: NIMNotify?)
    case unblock(app: String, roomId: String, [String], Actor, rc: RCNotify?, nim: NIMNotify?)
    case mute(app: String, roomId: String, [String], MuteDuration, Actor, rc: RCNotify?, nim: NIMNotify?)
    case unmute(app: String, roomId: String, [String], UnmuteKind, Actor, rc: RCNotify?, nim: NIMNotify?)
    case setRoomMuted(app: String, roomId: String, Bool, Actor, rc: RCNotify?, nim: NIMNotify?)
    case addToAllowlist(app: String, roomId: String, [String], rc: RCNotify?)
    case removeFromAllowlist(app: String, roomId: String, [String], rc: RCNotify?)
    case globalMute(app: String, [String], minutes: Int, rc: RCNotify?)
    case globalUnmute(app: String, [String], rc: RCNotify?)
    case setRole(app: String, roomId: String, target: String, RoleChange, Actor, notifyExt: String)
    case kick(app: String, roomId: String, target: String, Actor, notifyExt: String)

    // Attributes (RC-10, ZIM-8).
    case setAttributes(app: String, roomId: String, [KeyValue], owner: String?, autoDelete: Bool, Actor)
    case removeAttributes(app: String, roomId: String, [String], Actor)

    // Queue (NIM-16).
    case queueOffer(app: String, roomId: String, key: String, value: String, transient: Bool, Actor)
    case queueBatchUpdate(app: String, roomId: String, [KeyValue], Actor, notify: NIMNotify?)
    case queuePoll(app: String, roomId: String, key: String?, Actor)
    case queueDrop(app: String, roomId: String, Actor)

    // Messages (NIM-8; QS-1, QS-5: `options`, nil for none).
    case sendMessage(app: String, roomId: String, MessageSender, ChatMessage.Kind, content: String, options: MessageOptions? = nil)

    // Room QoS (QS-1, QS-4, QS-6; app server only).
    /// Adds entries to, or removes them from, one of the app's message lists.
    case editMessageList(app: String, AppSettings.MessageList, add: Bool, [String])
    /// Adds users to, or removes them from, a room's protected senders (at most five).
    case setProtectedSenders(app: String, roomId: String, add: Bool, [String])
    /// Stops or resumes the fan-out of a room's messages.
    case setDistribution(app: String, roomId: String, stopped: Bool)

    // Moderation of messages (MO-1).
    /// Recalls one of a room's recent messages: the room is told (`message.recalled`), history and
    /// resume keep a tombstone at its place. The app server may recall any message; a client its
    /// own within the app's recall window, or any as the room's creator or a manager.
    case recallMessage(app: String, roomId: String, messageId: String, RecallOptions, Actor)
    /// MO-2: adds words to the app's sensitive words (with a replacement, or blocking) and removes
    /// others, in one step (app server only).
    case editSensitiveWords(app: String, add: [SensitiveWord], remove: [String])

    // Member tags (AU-1).
    /// The app server sets a present member's tags.
    case setMemberTags(app: String, roomId: String, userId: String, [String], notifyTargetTags: TagExpression? = nil)
    /// AU-3: one message to each of up to `Limits.maxRoomsPerSend` rooms (all or none), and one
    /// to the members present in every room of the app (not stored). From the app server.
    case sendToRooms(app: String, roomIds: [String], MessageSender, ChatMessage.Kind, content: String, options: MessageOptions? = nil)
    case broadcast(app: String, MessageSender, ChatMessage.Kind, content: String, options: MessageOptions? = nil)
    /// AU-5: NIM's batch offer from the app server, and a member's room profile set by it.
    case queueBatchOffer(app: String, roomId: String, [QueueOfferItem])
    case updateMemberInfo(app: String, roomId: String, userId: String, nickname: String?, avatar: String?, ext: String?, save: Bool, notify: NIMNotify?)
    /// Members with a tag may not send for `seconds` (0 lifts it); NIM's `tagTemporaryMute`.
    case tagMute(app: String, roomId: String, tag: String, seconds: Int, notify: NIMNotify?, notifyTargetTags: TagExpression?, Actor)

    // Ultra groups (UG-1..UG-4; app server only).
    case createGroup(app: String, groupId: String, name: String, creator: String?)
    case dismissGroup(app: String, groupId: String)
    /// MO-4: renames an ultra group (RongCloud `refresh`, Nexconn `community-channel/update`).
    case renameGroup(app: String, groupId: String, name: String)
    case joinGroup(app: String, groupId: String, [String])
    case quitGroup(app: String, groupId: String, [String])
    case createChannel(app: String, groupId: String, channelId: String, ChannelType)
    case changeChannelType(app: String, groupId: String, channelId: String, ChannelType)
    case deleteChannel(app: String, groupId: String, channelId: String)
    case addPrivateMembers(app: String, groupId: String, channelId: String, [String])
    case removePrivateMembers(app: String, groupId: String, channelId: String, [String])
    /// MO-3: a message to `channelId` of each group (from the app server, or a member's client).
    case sendCommunityMessage(app: String, groupIds: [String], channelId: String, CommunityDraft, Actor)
    /// MO-3, MO-5: an edit, metadata, or a control of an ultra group's channel.
    case community(app: String, groupId: String, CommunityChange, Actor)
    /// MO-4: user groups of an ultra group (RongCloud `usergroup/*`, Nexconn `user-group/*`).
    /// Each call is all or nothing: one bad id, an unknown user group, a user who is not a group
    /// member or a bound past its limit refuses the whole call.
    case createUserGroups(app: String, groupId: String, [String])
    case deleteUserGroups(app: String, groupId: String, [String])
    case addUserGroupMembers(app: String, groupId: String, userGroupId: String, [String])
    case removeUserGroupMembers(app: String, groupId: String, userGroupId: String, [String])
    /// MO-4: binds user groups to a channel (their members see it once it is private), or unbinds them.
    case bindUserGroups(app: String, groupId: String, channelId: String, [String])
    case unbindUserGroups(app: String, groupId: String, channelId: String, [String])

    // Conversation status (CS-1, CS-2, CS-4).
    case setConversationStatus(app: String, userId: String, ConversationKey, pinned: Bool?, level: NotificationLevel?, Actor)
    case setConversationTypeLevel(app: String, userId: String, ConversationType, NotificationLevel)
    case setGroupNotificationLevel(app: String, groupId: String, channelId: String?, NotificationLevel)

    // Audit trail (MO-8).
    /// A moderation command as a vendor surface (RongCloud, Nexconn, NIM) gave it: the entry it
    /// records in the audit trail names that surface. The native API's commands and clients' ops
    /// go unwrapped (their surface follows from the actor); see `Command.via(_:)`.
    indirect case via(AuditSurface, Command)
}

extension Command {
    /// The actor a command names, if it names one (the log's format depends on it: MO-7).
    public var actor: Actor? {
        switch self {
        case .updateRoom(_, _, _, let a, _), .setRoomOpen(_, _, _, let a, _), .block(_, _, _, _, let a, _, _), .unblock(_, _, _, let a, _, _),
             .mute(_, _, _, _, let a, _, _), .unmute(_, _, _, _, let a, _, _), .setRoomMuted(_, _, _, let a, _, _), .setRole(_, _, _, _, let a, _),
             .kick(_, _, _, let a, _), .setAttributes(_, _, _, _, _, let a), .removeAttributes(_, _, _, let a), .queueOffer(_, _, _, _, _, let a),
             .queueBatchUpdate(_, _, _, let a, _), .queuePoll(_, _, _, let a), .queueDrop(_, _, let a), .tagMute(_, _, _, _, _, _, let a),
             .recallMessage(_, _, _, _, let a), .setConversationStatus(_, _, _, _, _, let a), .sendCommunityMessage(_, _, _, _, let a),
             .community(_, _, _, let a):
            return a
        case .via(_, let c):
            return c.actor
        default:
            return nil
        }
    }

    /// MO-8: applying this command (when accepted) records an entry in its app's audit trail.
    public var isModeration: Bool {
        switch self {
        case .recallMessage, .block, .unblock, .mute, .unmute, .setRoomMuted, .addToAllowlist, .removeFromAllowlist, .globalMute, .globalUnmute,
             .tagMute, .setRole, .kick, .editSensitiveWords, .setRoomOpen, .setDistribution, .destroyRooms, .editMessageList, .setProtectedSenders:
            return true
        case .community(_, _, let change, _):
            switch change {
            case .editList, .setFrozen, .recall: return true
            case .edit, .setMetadata, .removeMetadata: return false
            }
        case .via(_, let c):
            return c.isModeration
        default:
            return false
        }
    }

    /// MO-8: the command as `surface` gives it: a moderation command of a vendor surface is wrapped
    /// so that its audit entry names the surface; any other command is returned as it is.
    public func via(_ surface: AuditSurface) -> Command {
        guard isModeration, surface != .native, surface != .client else { return self }
        if case .via(_, let inner) = self { return .via(surface, inner) }
        return .via(surface, self)
    }
}

/// NIM-13 member query types (RC-9 lists everyone present).
public enum MemberFilter: String, Equatable, Sendable {
    /// Everyone present, in join order (RC-9).
    case present
    /// Fixed members, online or not.
    case regular
    /// Guests and anonymous members online.
    case temporary
    /// Fixed members who are online.
    case regularOnline
    /// Non-fixed members, newest first.
    case temporaryNewestFirst
}

public enum SortOrder: String, Equatable, Sendable {
    case ascending
    case descending
}

/// Room properties the vendors list rooms by.
/// PX-5: a search of an app's rooms, in room id order, one page after `after` (the last id of
/// the previous page), so pages stay stable while rooms are created.
public struct RoomSearch: Equatable, Sendable {
    public var idPrefix: String?
    /// Case-insensitive substring of the room's name (kept lowercased).
    public var nameContains: String? {
        didSet { nameContains = nameContains?.lowercased() }
    }
    public var minOnline: Int?
    public var maxOnline: Int?
    public var after: String?
    public var limit: Int

    public init(idPrefix: String? = nil, nameContains: String? = nil, minOnline: Int? = nil, maxOnline: Int? = nil, after: String? = nil,
                limit: Int = 20) {
        self.idPrefix = idPrefix
        self.nameContains = nameContains?.lowercased()
        self.minOnline = minOnline
        self.maxOnline = maxOnline
        self.after = after
        self.limit = limit
    }

    func matches(_ id: String, _ room: Room) -> Bool {
        if let after, id <= after { return false }
        if let idPrefix, !id.hasPrefix(idPrefix) { return false }
        if let minOnline, room.memberCount < minOnline { return false }
        if let maxOnline, room.memberCount > maxOnline { return false }
        if let nameContains, !nameContains.isEmpty, !room.name.lowercased().contains(nameContains) { return false }
        return true
    }
}

public enum RoomFilter: Equatable, Sendable {
    /// Rooms muted as a whole (RC-6 `ban/query`).
    case muted
    /// Rooms that are never destroyed automatically (RongCloud keep-alive).
    case keepAlive
    /// Rooms created by a user that are open (NIM `queryUserRoomIds`).
    case openCreatedBy(String)
}

/// Read-only questions; they change nothing.
public enum Query: Sendable {
    /// The app's settings (→ `Reply.appSettings`).
    case appSettings(app: String)
    case room(app: String, roomId: String)
    /// MO-7: the room, refused as NIM refuses the address lookup of a closed room (13002).
    case openRoom(app: String, roomId: String)
    case rooms(app: String, [String])
    /// NIM-10: room info as a member sees it (members only).
    case roomAsMember(SessionID, roomId: String)
    case members(app: String, roomId: String, MemberFilter, SortOrder, limit: Int, after: String?)
    case membersByIds(app: String, roomId: String, [String])
    /// MO-7 (NIM `membersByPage` type 1 with `endtime`): non-fixed members present who entered
    /// before `enteredBefore` (ms), newest first: each page's last enter time anchors the next.
    case temporaryMembersEnteredBefore(app: String, roomId: String, enteredBefore: Int64, limit: Int)
    case isInRoom(app: String, roomId: String, [String])
    case blocks(app: String, roomId: String)
    case mutes(app: String, roomId: String)
    case allowlist(app: String, roomId: String)
    /// MO-2: the app's sensitive words (→ `Reply.sensitiveWords`), in the order they were added.
    case sensitiveWords(app: String)
    /// MO-8: the app's audit trail, newest first: entries older than `before` (an entry id), of
    /// one room when `roomId` is given, at most `limit` (→ `Reply.audit`).
    case audit(app: String, roomId: String?, before: Int64?, limit: Int)
    /// QS-4: a room's protected senders (→ `Reply.userIds`).
    case protectedSenders(app: String, roomId: String)
    case globalMutes(app: String)
    case attributes(app: String, roomId: String, keys: [String])
    case queue(app: String, roomId: String)
    case history(app: String, roomId: String, start: Int64, limit: Int, SortOrder, kinds: [ChatMessage.Kind], filter: HistoryFilter = HistoryFilter())
    /// AU-1: how many present members carry a tag (→ `Reply.count`).
    case tagMembersCount(app: String, roomId: String, tag: String)
    /// AU-1: every tag the room's present members carry, with how many carry it.
    case roomTags(app: String, roomId: String)
    /// AU-1: the present members carrying a tag, in join order after `after` (→ `Reply.members`).
    case tagMembers(app: String, roomId: String, tag: String, limit: Int, after: String?)
    /// AU-5: the fixed members holding any of these roles (NIM's queryMembersByRole).
    case membersByRoles(app: String, roomId: String, MemberRoles)
    /// Rooms a session is in (ZIM).
    case roomsOfSession(SessionID)
    case roomIds(app: String)
    /// Ids of the app's rooms that match a filter, sorted (RongCloud's mute-all and keep-alive lists).
    case roomIdsWhere(app: String, RoomFilter)
    /// PX-3: whether users are online (→ `Reply.online`), at most `Limits.maxPresenceQueryUsers`.
    case online(app: String, [String])
    /// PX-5: one page of the app's room directory (→ `Reply.roomPage`).
    case roomDirectory(app: String, RoomSearch)
    /// PX-5: a user's connections (→ `Reply.connections`), in the order they connected.
    case connections(app: String, userId: String)

    // Ultra groups (UG-6): pages are 1-based.
    case group(app: String, groupId: String)
    case groupMembers(app: String, groupId: String, page: Int, pageSize: Int)
    /// Whether each user is a member of the ultra group (→ `Reply.presence`).
    case isGroupMember(app: String, groupId: String, [String])
    case channels(app: String, groupId: String, page: Int, pageSize: Int)
    case privateMembers(app: String, groupId: String, channelId: String, page: Int, pageSize: Int)
    /// Channels the user can see: public ones, and private ones whose list holds the user or
    /// that are bound to a user group holding the user (MO-4).
    case userChannels(app: String, groupId: String, userId: String, page: Int, pageSize: Int)
    /// MO-4: the group's user groups in creation order (→ `Reply.userGroups`); those bound to a
    /// channel, in binding order; those holding a user; the channels bound to a user group
    /// (→ `Reply.channels`, in channel order).
    case userGroups(app: String, groupId: String, page: Int, pageSize: Int)
    case channelUserGroups(app: String, groupId: String, channelId: String, page: Int, pageSize: Int)
    case userUserGroups(app: String, groupId: String, userId: String, page: Int, pageSize: Int)
    case userGroupChannels(app: String, groupId: String, userGroupId: String, page: Int, pageSize: Int)
    case groupNotificationLevel(app: String, groupId: String, channelId: String?)
    /// MO-6: stored community messages (→ `Reply.communityMessages`).
    case communityHistory(app: String, groupId: String, CommunityHistoryQuery)
    /// MO-3: one stored message with its metadata (→ `Reply.communityMessage`).
    case communityMessage(app: String, groupId: String, channelId: String, messageId: String)
    /// MO-5: a channel's (channel "": the group's) controls (→ `Reply.communityRules`).
    case communityRules(app: String, groupId: String, channelId: String)

    // Conversation status (CS-1, CS-3, CS-4).
    case conversationStatus(app: String, userId: String, ConversationKey)
    /// Statuses changed after version `since`, oldest change first (CS-3 sync).
    case conversationStatuses(app: String, userId: String, since: Int64, limit: Int)
    case conversationTypeLevel(app: String, userId: String, ConversationType)
}
