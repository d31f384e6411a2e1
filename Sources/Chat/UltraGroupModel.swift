/// Ultra groups (RongCloud; SPEC §4): members, channels (`busChannel`) that are public or
/// private, each channel's private member list, and user groups bound to channels (MO-4).

/// UG-1 channel types (RongCloud `type`: 0 public, 1 private).
public enum ChannelType: String, Equatable, Sendable, Codable, CaseIterable {
    case `public`
    case `private`

    public var code: Int { self == .public ? 0 : 1 }

    /// Accepts the names and the vendor's numbers.
    public static func parse(_ s: String, field: String = "type") throws(ChatError) -> ChannelType {
        switch s {
        case "public", "0": return .public
        case "private", "1": return .private
        default: throw .invalid(field, "\(field) must be public (0) or private (1)")
        }
    }
}

/// UG-2 change types, as the client SDK names them (RCUltraGroupChannelChangeType).
public enum ChannelChangeType: Int, Equatable, Sendable {
    case publicToPrivate = 2
    case privateToPublic = 3
    /// Public to private, and the recipient is not on the private list.
    case publicToPrivateUserNotIn = 6
}

/// One channel of an ultra group.
final class UltraChannel {
    let id: String
    var type: ChannelType
    let createdAt: Int64
    /// Who may see the channel once it is private (any channel may hold the list; UG-1).
    @exclusivity(unchecked) var privateMembers = OrderedIndex<String>()
    /// MO-4: user groups bound to the channel (at most `Limits.maxUserGroupsPerChannel`); their
    /// members see it once it is private, as if on its private list.
    @exclusivity(unchecked) var userGroups = OrderedIndex<String>()
    /// CS-4 channel default Do-Not-Disturb level.
    var defaultLevel = NotificationLevel.default

    init(id: String, type: ChannelType, createdAt: Int64) {
        self.id = id
        self.type = type
        self.createdAt = createdAt
    }
}

/// MO-4: a user group of an ultra group: group members (at most `Limits.maxUsersPerUserGroup`),
/// in the order they were added.
final class UserGroup {
    let id: String
    @exclusivity(unchecked) var members = OrderedIndex<String>()

    init(id: String) {
        self.id = id
    }
}

/// One ultra group of one app.
final class UltraGroup {
    /// Created with every group; it can never become private nor be deleted (UG-1).
    static let defaultChannelId = "RCDefault"

    let id: String
    var name: String
    let creator: String
    let createdAt: Int64
    /// Members in join order (paged queries, UG-6).
    @exclusivity(unchecked) var members = OrderedIndex<String>()
    @exclusivity(unchecked) var channels: [String: UltraChannel] = [:]
    /// Channels in creation order (paged queries, UG-6).
    @exclusivity(unchecked) var channelOrder = OrderedIndex<String>()
    /// MO-4: user groups (at most `Limits.maxUserGroupsPerGroup`), and their creation order.
    @exclusivity(unchecked) var userGroups: [String: UserGroup] = [:]
    @exclusivity(unchecked) var userGroupOrder = OrderedIndex<String>()
    /// CS-4 group default Do-Not-Disturb level.
    var defaultLevel = NotificationLevel.default
    /// MO-3, MO-5: its channels' messages and controls.
    let community = CommunityState()

    init(id: String, name: String, creator: String, createdAt: Int64) {
        self.id = id
        self.name = name
        self.creator = creator
        self.createdAt = createdAt
    }

    /// Can `user` see `channel`? Public channels: every member; private: its list (UG-6) and
    /// the members of the user groups bound to it (MO-4).
    func canSee(_ user: String, _ channel: UltraChannel) -> Bool {
        guard members.contains(user) else { return false }
        return channel.type == .public || isListed(user, channel)
    }

    /// Is `user` on the channel's private list or in a user group bound to it (whatever its type)?
    func isListed(_ user: String, _ channel: UltraChannel) -> Bool {
        if channel.privateMembers.contains(user) { return true }
        for id in channel.userGroups.all where userGroups[id]?.members.contains(user) == true { return true }
        return false
    }

    /// Everyone `isListed` for the channel: its private list, then the members of its bound user
    /// groups, each once, in that order.
    func listed(_ channel: UltraChannel) -> [String] {
        if channel.userGroups.isEmpty { return channel.privateMembers.all }
        var seen = Set(channel.privateMembers.all)
        var all = channel.privateMembers.all
        for id in channel.userGroups.all {
            for u in userGroups[id]?.members.all ?? [] where seen.insert(u).inserted { all.append(u) }
        }
        return all
    }
}

/// A group as queries and replies describe it.
public struct GroupInfo: Equatable, Sendable {
    public var groupId: String
    public var name: String
    public var creator: String
    public var memberCount: Int
    public var channelCount: Int
    public var createdAt: Int64
    public var notificationLevel: NotificationLevel
}

/// A channel as queries and replies describe it.
public struct ChannelInfo: Equatable, Sendable {
    /// Every group's default channel (UG-1).
    public static let defaultChannelId = UltraGroup.defaultChannelId
    public var groupId: String
    public var channelId: String
    public var type: ChannelType
    public var isDefault: Bool
    public var privateMemberCount: Int
    public var createdAt: Int64
    public var notificationLevel: NotificationLevel
}

/// MO-4: a user group as queries describe it: its members and the channels bound to it.
public struct UserGroupInfo: Equatable, Sendable {
    public var userGroupId: String
    public var userIds: [String]
    public var channelIds: [String]
    public init(userGroupId: String, userIds: [String], channelIds: [String]) {
        self.userGroupId = userGroupId
        self.userIds = userIds
        self.channelIds = channelIds
    }
}

/// Durable rows of ultra groups (the store's view).
public struct GroupRecord: Equatable, Sendable {
    public var app: String
    public var groupId: String
    public var name: String
    public var creator: String
    public var createdAt: Int64
    public var notificationLevel: NotificationLevel
    public init(app: String, groupId: String, name: String, creator: String, createdAt: Int64, notificationLevel: NotificationLevel) {
        self.app = app
        self.groupId = groupId
        self.name = name
        self.creator = creator
        self.createdAt = createdAt
        self.notificationLevel = notificationLevel
    }
}

public struct ChannelRecord: Equatable, Sendable {
    public var app: String
    public var groupId: String
    public var channelId: String
    public var type: ChannelType
    public var createdAt: Int64
    public var notificationLevel: NotificationLevel
    public init(app: String, groupId: String, channelId: String, type: ChannelType, createdAt: Int64, notificationLevel: NotificationLevel) {
        self.app = app
        self.groupId = groupId
        self.channelId = channelId
        self.type = type
        self.createdAt = createdAt
        self.notificationLevel = notificationLevel
    }
}

// MARK: Events (UG-2..UG-5: arrays, one event per recipient)

public struct ChannelTypeChange: Equatable, Sendable {
    public var groupId: String
    public var channelId: String
    public var changeType: ChannelChangeType
    public var time: Int64
    public init(groupId: String, channelId: String, changeType: ChannelChangeType, time: Int64) {
        self.groupId = groupId
        self.channelId = channelId
        self.changeType = changeType
        self.time = time
    }
}

public struct ChannelDisbanded: Equatable, Sendable {
    public var groupId: String
    public var channelId: String
    public var time: Int64
    public init(groupId: String, channelId: String, time: Int64) {
        self.groupId = groupId
        self.channelId = channelId
        self.time = time
    }
}

public struct ChannelUserKicked: Equatable, Sendable {
    public var groupId: String
    public var channelId: String
    public var userId: String
    public var time: Int64
    public init(groupId: String, channelId: String, userId: String, time: Int64) {
        self.groupId = groupId
        self.channelId = channelId
        self.userId = userId
        self.time = time
    }
}
