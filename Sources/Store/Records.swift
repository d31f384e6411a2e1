import Chat
import Foundation
import GRDB

// One record type per table. Column names are the property names.

public struct AppRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "app"
    public var key: String
    public var secret: String
    /// AppSettings as JSON.
    public var settings: String
    public var createdAt: Int64
    /// Where the app came from: `config` (--app), `dev` (created on first start), `api`.
    public var origin: String
    /// WebSocket Origin allowlist, one per line; empty for any origin.
    public var allowedOrigins: String

    public init(key: String, secret: String, settings: String, createdAt: Int64, origin: String, allowedOrigins: String = "") {
        self.key = key
        self.secret = secret
        self.settings = settings
        self.createdAt = createdAt
        self.origin = origin
        self.allowedOrigins = allowedOrigins
    }

    /// `allowedOrigins` as a list; nil (any origin) when the column is empty.
    public var allowedOriginList: [String]? {
        allowedOrigins.isEmpty ? nil : allowedOrigins.split(separator: "\n").map(String.init)
    }

    /// The column's form of an allowlist: one origin per line, empty for nil (any origin).
    static func originsColumn(_ origins: [String]?) -> String {
        (origins ?? []).joined(separator: "\n")
    }
}

struct RoomRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "room"
    var app: String
    var roomId: String
    var name: String
    var announcement: String
    var ext: String
    var broadcastUrl: String
    var creator: String
    var queueLevel: Int
    var destroyPolicy: String
    var destroyValue: Int
    var keepAlive: Bool
    var multiDevice: String
    var muted: Bool
    var open: Bool
    var enterExitNotifications: Bool
    var queueLimit: Int
    var createdAt: Int64
    var epoch: String
    var lastActivity: Int64
    /// QS-4: newline-joined user ids; QS-6.
    var protectedSenders: String
    var distributionStopped: Bool
    /// AU-1: muted tags and until when (JSON).
    var tagMutes: String

    init(_ r: RoomRecord) {
        app = r.key.app
        roomId = r.key.roomId
        name = r.name
        announcement = r.announcement
        ext = r.ext
        broadcastUrl = r.broadcastUrl
        creator = r.creator
        queueLevel = r.queueModificationLevel.rawValue
        switch r.destroyPolicy {
        case .inactive(let m): (destroyPolicy, destroyValue) = ("inactive", m)
        case .fixed(let m): (destroyPolicy, destroyValue) = ("fixed", m)
        case .whenEmpty(let s): (destroyPolicy, destroyValue) = ("whenEmpty", s)
        }
        keepAlive = r.keepAlive
        multiDevice = r.multiDevice.rawValue
        muted = r.muted
        open = r.open
        enterExitNotifications = r.enterExitNotifications
        queueLimit = r.queueLimit
        createdAt = r.createdAt
        epoch = r.epoch
        lastActivity = r.lastActivity
        protectedSenders = r.protectedSenders.joined(separator: "\n")
        distributionStopped = r.distributionStopped
        tagMutes = r.tagMutes.isEmpty ? "" : (try? JSONEncoder().encode(r.tagMutes)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    var record: RoomRecord {
        let policy: DestroyPolicy
        switch destroyPolicy {
        case "fixed": policy = .fixed(minutes: destroyValue)
        case "whenEmpty": policy = .whenEmpty(seconds: destroyValue)
        default: policy = .inactive(minutes: destroyValue)
        }
        return RoomRecord(key: RoomKey(app: app, roomId: roomId), name: name, announcement: announcement, ext: ext,
                          broadcastUrl: broadcastUrl, creator: creator,
                          queueModificationLevel: QueueModificationLevel(rawValue: queueLevel) ?? .anyone, destroyPolicy: policy,
                          keepAlive: keepAlive, multiDevice: MultiDevicePolicy(rawValue: multiDevice) ?? .multiple, muted: muted,
                          open: open, enterExitNotifications: enterExitNotifications, queueLimit: queueLimit, createdAt: createdAt,
                          epoch: epoch, lastActivity: lastActivity,
                          protectedSenders: protectedSenders.isEmpty ? [] : protectedSenders.split(separator: "\n").map(String.init),
                          distributionStopped: distributionStopped,
                          tagMutes: tagMutes.isEmpty ? [:] : (try? JSONDecoder().decode([String: Int64].self, from: Data(tagMutes.utf8))) ?? [:])
    }
}

struct MemberRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "member"
    var app: String
    var roomId: String
    var userId: String
    var role: String
    var nickname: String
    var avatar: String
    var ext: String
}

struct BlockRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "block"
    var app: String
    var roomId: String
    var userId: String
    var until: Int64
}

struct PermanentMuteRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "permanentMute"
    var app: String
    var roomId: String
    var userId: String
}

struct TempMuteRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "tempMute"
    var app: String
    var roomId: String
    var userId: String
    var until: Int64
}

struct AllowlistRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "allowlist"
    var app: String
    var roomId: String
    var userId: String
}

struct GlobalMuteRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "globalMute"
    var app: String
    var userId: String
    var until: Int64
}

struct AttributeRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "attribute"
    var app: String
    var roomId: String
    var key: String
    var value: String
    var owner: String
    var autoDelete: Bool
    var updatedAt: Int64
}

struct QueueRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "queueElement"
    var app: String
    var roomId: String
    var key: String
    var value: String
    var owner: String
    var sequence: Int64
}

struct MessageRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "message"
    var app: String
    var roomId: String
    var id: String
    var sender: String
    var senderNickname: String
    var senderAvatar: String
    var senderExt: String
    var kind: String
    var content: String
    var time: Int64
    var fromServer: Bool
    /// QS-1: the class it was sent with, and its type name.
    var priority: String
    var type: String
    /// AU-2: the users it was addressed to (newline-joined); AU-1: the tag expression (JSON) and
    /// the tags it names (newline-joined, for history by tag).
    var targets: String
    var targetTags: String
    var tagNames: String
    /// MO-1: recalled (its content is gone; the row keeps its place).
    var recalled: Bool

    init(_ key: RoomKey, _ m: ChatMessage) {
        app = key.app
        roomId = key.roomId
        id = m.id
        sender = m.sender
        senderNickname = m.senderNickname
        senderAvatar = m.senderAvatar
        senderExt = m.senderExt
        kind = m.kind.rawValue
        content = m.content
        time = m.time
        fromServer = m.fromServer
        priority = m.priority.rawValue
        type = m.type
        targets = m.storedTargets
        targetTags = m.storedTargetTags
        tagNames = m.storedTagNames
        recalled = m.recalled
    }

    var message: ChatMessage {
        ChatMessage(id: id, roomId: roomId, sender: sender, senderNickname: senderNickname, senderAvatar: senderAvatar,
                    senderExt: senderExt, kind: ChatMessage.Kind(rawValue: kind) ?? .text, content: content, time: time,
                    fromServer: fromServer, priority: MessagePriority(rawValue: priority) ?? .normal, type: type,
                    targets: targets.isEmpty ? [] : targets.split(separator: "\n").map(String.init),
                    targetTags: targetTags.isEmpty ? nil : try? JSONDecoder().decode(TagExpression.self, from: Data(targetTags.utf8)),
                    recalled: recalled)
    }
}

struct UltraGroupRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraGroup"
    var app: String
    var groupId: String
    var name: String
    var creator: String
    var createdAt: Int64
    var notificationLevel: Int

    init(_ r: GroupRecord) {
        app = r.app
        groupId = r.groupId
        name = r.name
        creator = r.creator
        createdAt = r.createdAt
        notificationLevel = r.notificationLevel.rawValue
    }

    var record: GroupRecord {
        GroupRecord(app: app, groupId: groupId, name: name, creator: creator, createdAt: createdAt,
                    notificationLevel: NotificationLevel(rawValue: notificationLevel) ?? .default)
    }
}

struct UltraGroupMemberRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraGroupMember"
    var app: String
    var groupId: String
    var userId: String
    var sequence: Int64
}

struct UltraChannelRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraChannel"
    var app: String
    var groupId: String
    var channelId: String
    var type: String
    var createdAt: Int64
    var notificationLevel: Int
    var sequence: Int64

    init(_ r: ChannelRecord, sequence: Int64) {
        app = r.app
        groupId = r.groupId
        channelId = r.channelId
        type = r.type.rawValue
        createdAt = r.createdAt
        notificationLevel = r.notificationLevel.rawValue
        self.sequence = sequence
    }

    var record: ChannelRecord {
        ChannelRecord(app: app, groupId: groupId, channelId: channelId, type: ChannelType(rawValue: type) ?? .public, createdAt: createdAt,
                      notificationLevel: NotificationLevel(rawValue: notificationLevel) ?? .default)
    }
}

struct UltraPrivateMemberRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraPrivateMember"
    var app: String
    var groupId: String
    var channelId: String
    var userId: String
    var sequence: Int64
}

/// MO-4: user groups, their members, and their bindings to channels.
struct UltraUserGroupRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraUserGroup"
    var app: String
    var groupId: String
    var userGroupId: String
    var sequence: Int64
}

struct UltraUserGroupMemberRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraUserGroupMember"
    var app: String
    var groupId: String
    var userGroupId: String
    var userId: String
    var sequence: Int64
}

struct UltraChannelUserGroupRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "ultraChannelUserGroup"
    var app: String
    var groupId: String
    var channelId: String
    var userGroupId: String
    var sequence: Int64
}

struct ConversationStatusRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "conversationStatus"
    var app: String
    var userId: String
    var conversationType: Int
    var targetId: String
    var channelId: String
    var pinned: Bool
    var notificationLevel: Int
    var version: Int64
    var updatedAt: Int64

    init(app: String, userId: String, _ s: ConversationStatus) {
        self.app = app
        self.userId = userId
        conversationType = s.key.type.rawValue
        targetId = s.key.targetId
        channelId = s.key.channelId
        pinned = s.pinned
        notificationLevel = s.level.rawValue
        version = s.version
        updatedAt = s.updatedAt
    }

    var status: ConversationStatus? {
        guard let type = ConversationType(rawValue: conversationType), let level = NotificationLevel(rawValue: notificationLevel) else { return nil }
        return ConversationStatus(key: ConversationKey(type: type, targetId: targetId, channelId: channelId), pinned: pinned, level: level,
                                  version: version, updatedAt: updatedAt)
    }
}

struct ConversationTypeLevelRow: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "conversationTypeLevel"
    var app: String
    var userId: String
    var conversationType: Int
    var notificationLevel: Int
}

extension ChatMessage {
    /// AU-2, AU-1: the addressees as the message table keeps them ("" for a message to the room:
    /// the common case costs nothing).
    var storedTargets: String { targets.isEmpty ? "" : targets.joined(separator: "\n") }
    var storedTargetTags: String {
        guard let targetTags, let json = try? JSONEncoder().encode(targetTags) else { return "" }
        return String(decoding: json, as: UTF8.self)
    }
    var storedTagNames: String { targetTags.map { $0.names.sorted().joined(separator: "\n") } ?? "" }
}
