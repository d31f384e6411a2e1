/// Conversation pin and Do-Not-Disturb status per user (RongCloud; SPEC §5).

/// RongCloud conversation types the status applies to.
public enum ConversationType: Int, Equatable, Sendable, Codable, CaseIterable, Comparable {
    case `private` = 1
    case group = 3
    case system = 6
    case ultraGroup = 10

    public static func < (a: ConversationType, b: ConversationType) -> Bool { a.rawValue < b.rawValue }

    public static func parse(_ value: Int, field: String = "conversationType") throws(ChatError) -> ConversationType {
        guard let t = ConversationType(rawValue: value) else {
            throw .invalid(field, "\(field) must be 1 (private), 3 (group), 6 (system) or 10 (ultra group)")
        }
        return t
    }
}

/// CS-1 `notificationLevel` (RCPushNotificationLevel / `unpushLevel`).
public enum NotificationLevel: Int, Equatable, Sendable, CaseIterable, Codable {
    /// Every message notifies (Do-Not-Disturb explicitly off).
    case allMessages = -1
    /// Not set: inherit (type, channel, group, app defaults).
    case `default` = 0
    /// @mentions, @all included.
    case mention = 1
    /// Only @mentions of me.
    case mentionUsers = 2
    /// Only @all.
    case mentionAll = 4
    /// Nothing notifies.
    case blocked = 5

    public static func parse(_ value: Int, field: String = "notificationLevel") throws(ChatError) -> NotificationLevel {
        guard let l = NotificationLevel(rawValue: value) else { throw .invalid(field, "\(field) must be -1, 0, 1, 2, 4 or 5") }
        return l
    }
}

/// Which conversation a status is about. `channelId` is used by ultra groups only ("" for the
/// whole group).
public struct ConversationKey: Hashable, Sendable, Codable, Comparable {
    public var type: ConversationType
    public var targetId: String
    public var channelId: String

    public init(type: ConversationType, targetId: String, channelId: String = "") {
        self.type = type
        self.targetId = targetId
        self.channelId = channelId
    }

    public static func < (a: ConversationKey, b: ConversationKey) -> Bool {
        (a.type.rawValue, a.targetId, a.channelId) < (b.type.rawValue, b.targetId, b.channelId)
    }
}

/// One user's status of one conversation. `version` orders every change of the user's statuses,
/// so a device can ask for what changed after the last version it saw (CS-3).
public struct ConversationStatus: Equatable, Sendable {
    public var key: ConversationKey
    public var pinned: Bool
    public var level: NotificationLevel
    public var version: Int64
    public var updatedAt: Int64

    public init(key: ConversationKey, pinned: Bool, level: NotificationLevel, version: Int64, updatedAt: Int64) {
        self.key = key
        self.pinned = pinned
        self.level = level
        self.version = version
        self.updatedAt = updatedAt
    }
}

/// CS-2 status info as the client SDK receives it (RCConversationStatusInfo): one per changed
/// aspect. `statusType` 1 is Do-Not-Disturb (value 1 notifications on, 0 DND, with the level);
/// 2 is pinned (value 1 pinned, 0 not).
public struct ConversationStatusInfo: Equatable, Sendable {
    public enum StatusType: Int, Equatable, Sendable {
        case mute = 1
        case top = 2
    }
    public var key: ConversationKey
    public var statusType: StatusType
    public var value: Int
    public var level: NotificationLevel
    public var version: Int64
    public var time: Int64

    public init(key: ConversationKey, statusType: StatusType, value: Int, level: NotificationLevel, version: Int64, time: Int64) {
        self.key = key
        self.statusType = statusType
        self.value = value
        self.level = level
        self.version = version
        self.time = time
    }

    public static func mute(_ s: ConversationStatus) -> ConversationStatusInfo {
        let on = s.level == .allMessages || s.level == .default
        return ConversationStatusInfo(key: s.key, statusType: .mute, value: on ? 1 : 0, level: s.level, version: s.version, time: s.updatedAt)
    }

    public static func top(_ s: ConversationStatus) -> ConversationStatusInfo {
        ConversationStatusInfo(key: s.key, statusType: .top, value: s.pinned ? 1 : 0, level: s.level, version: s.version, time: s.updatedAt)
    }
}

/// Where an effective level came from (CS-4 priority, highest first).
public enum LevelSource: String, Equatable, Sendable {
    /// The user's setting for this channel of an ultra group.
    case channel
    /// The user's setting for this conversation (for an ultra group: the whole group).
    case conversation
    /// The user's default for the conversation type.
    case conversationType
    /// The ultra group channel's default.
    case channelDefault
    /// The ultra group's default.
    case groupDefault
    /// The app's default.
    case app
    /// Nothing is set anywhere: every message notifies.
    case none
}

/// A status with its effective level (queries, CS-4).
public struct ConversationStatusView: Equatable, Sendable {
    public var status: ConversationStatus
    public var effectiveLevel: NotificationLevel
    public var source: LevelSource
}

/// The user's statuses and type defaults (the domain's per-user state).
struct UserConversations {
    var statuses: [ConversationKey: ConversationStatus] = [:]
    var typeLevels: [ConversationType: NotificationLevel] = [:]
    /// The newest version handed out.
    var version: Int64 = 0
}
