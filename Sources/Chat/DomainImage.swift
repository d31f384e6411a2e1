/// The whole state of a domain as a value (CLUSTER.md, snapshots): a cluster node that starts from
/// the image of position P and applies the log after P is in the same state, and gives the same
/// answers and events, as one that applied the log from its start. So the image holds everything,
/// exactly: who is connected and where (unlike the store's rows, which a restart reloads without
/// presence), the deadlines in their heap's order (equal deadlines come due in that order), rate
/// buckets, the recent history windows with their capacities.
///
/// Collections are listed in a fixed order (keys sorted; ordered indexes in their order), so two
/// domains in the same state give equal images: tests compare states by comparing images.
public struct DomainImage: Codable, Equatable, Sendable {
    /// Bumped when the image's layout changes; a node refuses an image of another version.
    public static let version = 1

    public var version = DomainImage.version
    var apps: [AppImage] = []
    var sessions: [SessionImage] = []
    var deadlines: [DeadlineImage] = []
    var queueSequence: Int64 = 0
    var groupSequence: Int64 = 0
    var lastPrune: [KeyedValue<Int64>] = []
    var presenceGraceMilliseconds: Int64 = 0
}

struct KeyedValue<Value: Codable & Equatable & Sendable>: Codable, Equatable, Sendable {
    var key: String
    var value: Value
}

struct AppImage: Codable, Equatable, Sendable {
    var key: String
    var settings: AppSettings
    var rooms: [RoomImage]
    var globalMutes: [KeyedValue<Int64>]
    var userSessions: [KeyedValue<[UInt64]>]
    var sendBuckets: [KeyedValue<BucketImage>]
    var goingOffline: [GoingOfflineImage]
    var groups: [GroupImage]
    var conversations: [ConversationsImage]
    var recentCreates: [KeyedValue<[Int64]>]
    /// AU-3: the app's broadcast bucket (absent: full).
    var broadcastBucket: BucketImage?
    /// MO-8: the app's audit trail, oldest first (absent: empty, and in images made before it).
    var audit: [AuditEntry]?
}

struct GoingOfflineImage: Codable, Equatable, Sendable {
    var user: String
    var at: Int64
    var device: String
}

struct BucketImage: Codable, Equatable, Sendable {
    var rate: Double
    var burst: Double
    var tokens: Double
    var last: Int64
}

struct MemberImage: Codable, Equatable, Sendable {
    var userId: String
    var nickname: String
    var avatar: String
    var ext: String
    var role: GrantedRole
    var anonymous: Bool
    var sessions: [UInt64]
    var enterTime: Int64
    /// AU-1 (absent in images made before it).
    var tags: [String]?
    var notifyTargetTags: TagExpression?
}

struct RoomImage: Codable, Equatable, Sendable {
    var roomId: String
    var name: String
    var announcement: String
    var ext: String
    var broadcastUrl: String
    var creator: String
    var queueModificationLevel: QueueModificationLevel
    var destroyPolicy: DestroyPolicy
    var keepAlive: Bool
    var multiDevice: MultiDevicePolicy
    var muted: Bool
    var open: Bool
    var enterExitNotifications: Bool
    var queueLimit: Int
    var createdAt: Int64
    var epoch: String
    var lastActivity: Int64
    var emptySince: Int64?
    var members: [MemberImage]
    var present: [String]
    var fixed: [String]
    var blocks: [KeyedValue<Int64>]
    var permanentMutes: [String]
    var tempMutes: [KeyedValue<Int64>]
    var muteAllowlist: [String]
    var attributes: [KeyedValue<Attribute>]
    var queueOrder: [String]
    var queue: [KeyedValue<QueueElement>]
    var historyCapacity: Int
    var history: [ChatMessage]
    var historyBytes: Int
    var historyTruncated: Bool
    /// QS-2, QS-4, QS-6 (absent in images made before them).
    var protectedSenders: [String]?
    var distributionStopped: Bool?
    var budget: BucketImage?
    /// QS-2's shared budget (absent in images made before it).
    var sharedBudget: BucketImage?
    var tagMutes: [KeyedValue<Int64>]?
    /// AU-4 (absent in images made before it).
    var countsOnly: [UInt64]?
    var memberSummary: PendingMemberSummary?
}

struct ChannelImage: Codable, Equatable, Sendable {
    var id: String
    var type: ChannelType
    var createdAt: Int64
    var privateMembers: [String]
    var defaultLevel: NotificationLevel
    /// MO-4: the user groups bound to the channel (absent in images made before them, or none).
    var userGroups: [String]?
}

/// MO-4: a user group and its members, in order.
struct UserGroupImage: Codable, Equatable, Sendable {
    var id: String
    var members: [String]
}

struct GroupImage: Codable, Equatable, Sendable {
    var id: String
    var name: String
    var creator: String
    var createdAt: Int64
    var members: [String]
    var channels: [ChannelImage]
    var channelOrder: [String]
    var defaultLevel: NotificationLevel
    /// MO-3, MO-5 (absent: none).
    var community: CommunityImage?
    /// MO-4: user groups in creation order (absent in images made before them, or none).
    var userGroups: [UserGroupImage]?
}

struct StatusImage: Codable, Equatable, Sendable {
    var key: ConversationKey
    var pinned: Bool
    var level: NotificationLevel
    var version: Int64
    var updatedAt: Int64
}

struct ConversationsImage: Codable, Equatable, Sendable {
    var user: String
    var statuses: [StatusImage]
    var typeLevels: [TypeLevelImage]
    var version: Int64
}

struct TypeLevelImage: Codable, Equatable, Sendable {
    var type: ConversationType
    var level: NotificationLevel
}

struct SessionImage: Codable, Equatable, Sendable {
    var id: UInt64
    var app: String
    var userId: String
    var deviceId: String
    var anonymous: Bool
    var nickname: String
    var avatar: String
    var connectedAt: Int64
    var rooms: [String]
}

struct DeadlineImage: Codable, Equatable, Sendable {
    var at: Int64
    var deadline: ChatDomain.Deadline
}

public enum DomainImageError: Error, Equatable, CustomStringConvertible {
    case version(Int)
    case inconsistent(String)

    public var description: String {
        switch self {
        case .version(let v): "the snapshot's domain image is version \(v); this roomcast reads version \(DomainImage.version)"
        case .inconsistent(let what): "the snapshot's domain image is inconsistent: \(what)"
        }
    }
}

private func sortedPairs<V>(_ d: [String: V]) -> [(String, V)] { d.sorted { $0.key < $1.key } }

extension ChatDomain {
    /// The domain's state now, as a value.
    public func image() -> DomainImage {
        var image = DomainImage()
        image.queueSequence = queueSequence
        image.groupSequence = groupSequence
        image.presenceGraceMilliseconds = presenceGraceMilliseconds
        image.lastPrune = sortedPairs(lastPrune).map { KeyedValue(key: $0.0, value: $0.1) }
        image.deadlines = deadlines.entries.map { DeadlineImage(at: $0.deadline, deadline: $0.key) }
        image.sessions = sessions.sorted { $0.key < $1.key }.map { id, s in
            SessionImage(id: id.raw, app: s.app, userId: s.userId, deviceId: s.deviceId, anonymous: s.anonymous, nickname: s.nickname,
                         avatar: s.avatar, connectedAt: s.connectedAt, rooms: Array(s.rooms))
        }
        image.apps = sortedPairs(apps).map { Self.image(of: $0.1) }
        return image
    }

    private static func image(of a: AppState) -> AppImage {
        AppImage(
            key: a.key, settings: a.settings,
            rooms: sortedPairs(a.rooms).map { image(of: $0.1) },
            globalMutes: sortedPairs(a.globalMutes).map { KeyedValue(key: $0.0, value: $0.1) },
            userSessions: sortedPairs(a.userSessions).map { KeyedValue(key: $0.0, value: $0.1.map(\.raw)) },
            sendBuckets: sortedPairs(a.sendBuckets).map { KeyedValue(key: $0.0, value: $0.1.image) },
            goingOffline: sortedPairs(a.goingOffline).map { GoingOfflineImage(user: $0.0, at: $0.1.at, device: $0.1.device) },
            groups: sortedPairs(a.groups).map { image(of: $0.1) },
            conversations: sortedPairs(a.conversations).map { user, c in
                ConversationsImage(user: user,
                                   statuses: c.statuses.values.sorted { $0.key < $1.key }.map {
                                       StatusImage(key: $0.key, pinned: $0.pinned, level: $0.level, version: $0.version, updatedAt: $0.updatedAt)
                                   },
                                   typeLevels: c.typeLevels.sorted { $0.key < $1.key }.map { TypeLevelImage(type: $0.key, level: $0.value) },
                                   version: c.version)
            },
            recentCreates: sortedPairs(a.recentCreates).map { KeyedValue(key: $0.0, value: $0.1) },
            broadcastBucket: a.broadcastBucket?.image,
            audit: a.audit.entries.isEmpty ? nil : a.audit.entries)
    }

    private static func image(of r: Room) -> RoomImage {
        RoomImage(
            roomId: r.key.roomId, name: r.name, announcement: r.announcement, ext: r.ext, broadcastUrl: r.broadcastUrl, creator: r.creator,
            queueModificationLevel: r.queueModificationLevel, destroyPolicy: r.destroyPolicy, keepAlive: r.keepAlive, multiDevice: r.multiDevice,
            muted: r.muted, open: r.open, enterExitNotifications: r.enterExitNotifications, queueLimit: r.queueLimit, createdAt: r.createdAt,
            epoch: r.epoch, lastActivity: r.lastActivity, emptySince: r.emptySince,
            members: sortedPairs(r.members).map {
                let m = $0.1
                return MemberImage(userId: m.userId, nickname: m.nickname, avatar: m.avatar, ext: m.ext, role: m.role, anonymous: m.anonymous,
                                   sessions: m.sessions.map(\.raw), enterTime: m.enterTime, tags: m.tags.isEmpty ? nil : m.tags,
                                   notifyTargetTags: m.notifyTargetTags)
            },
            present: r.presentOrder.all, fixed: r.fixed.all,
            blocks: sortedPairs(r.blocks).map { KeyedValue(key: $0.0, value: $0.1) },
            permanentMutes: r.permanentMutes.sorted(),
            tempMutes: sortedPairs(r.tempMutes).map { KeyedValue(key: $0.0, value: $0.1) },
            muteAllowlist: r.muteAllowlist.all,
            attributes: sortedPairs(r.attributes).map { KeyedValue(key: $0.0, value: $0.1) },
            queueOrder: r.queueOrder.all,
            queue: sortedPairs(r.queue).map { KeyedValue(key: $0.0, value: $0.1) },
            historyCapacity: r.history.capacity, history: r.history.messages, historyBytes: r.history.bytes,
            historyTruncated: r.history.truncated, protectedSenders: r.protectedSenders.isEmpty ? nil : r.protectedSenders,
            distributionStopped: r.distributionStopped ? true : nil, budget: r.budget?.image, sharedBudget: r.sharedBudget?.image,
            tagMutes: r.tagMutes.isEmpty ? nil : sortedPairs(r.tagMutes).map { KeyedValue(key: $0.0, value: $0.1) },
            countsOnly: r.countsOnly.isEmpty ? nil : r.countsOnly.map(\.raw).sorted(), memberSummary: r.memberSummary)
    }

    private static func image(of g: UltraGroup) -> GroupImage {
        GroupImage(id: g.id, name: g.name, creator: g.creator, createdAt: g.createdAt, members: g.members.all,
                   channels: sortedPairs(g.channels).map {
                       let c = $0.1
                       return ChannelImage(id: c.id, type: c.type, createdAt: c.createdAt, privateMembers: c.privateMembers.all, defaultLevel: c.defaultLevel,
                                           userGroups: c.userGroups.isEmpty ? nil : c.userGroups.all)
                   },
                   channelOrder: g.channelOrder.all, defaultLevel: g.defaultLevel, community: CommunityImage(g.community),
                   userGroups: g.userGroupOrder.isEmpty ? nil : g.userGroupOrder.all.map { UserGroupImage(id: $0, members: g.userGroups[$0]?.members.all ?? []) })
    }

    /// A domain in the state `image` describes, making ids with `makeID` from here on. Refuses an
    /// image of another version, or one whose parts contradict each other.
    public convenience init(image: DomainImage, makeID: @escaping IDGenerator) throws(DomainImageError) {
        guard image.version == DomainImage.version else { throw .version(image.version) }
        self.init(makeID: makeID)
        queueSequence = image.queueSequence
        groupSequence = image.groupSequence
        presenceGraceMilliseconds = image.presenceGraceMilliseconds
        for p in image.lastPrune { lastPrune[p.key] = p.value }
        deadlines = DeadlineQueue(entries: image.deadlines.map { ($0.at, $0.deadline) })
        for a in image.apps {
            guard apps[a.key] == nil else { throw .inconsistent("app \(a.key) twice") }
            apps[a.key] = try Self.app(a)
        }
        // After the apps: a session refers to its app's state (the domain never removes an app).
        for s in image.sessions {
            let id = SessionID(s.id)
            guard sessions[id] == nil else { throw .inconsistent("session \(id) twice") }
            guard let app = apps[s.app] else { throw .inconsistent("session \(id) of unknown app \(s.app)") }
            var session = Session(app: app, userId: s.userId, deviceId: s.deviceId, anonymous: s.anonymous, nickname: s.nickname,
                                  avatar: s.avatar, connectedAt: s.connectedAt)
            session.rooms = SmallList(s.rooms)
            sessions[id] = session
        }
    }

    private static func app(_ a: AppImage) throws(DomainImageError) -> AppState {
        let app = AppState(key: a.key, settings: a.settings)
        for r in a.rooms {
            let key = RoomKey(app: a.key, roomId: r.roomId)
            var config = RoomConfig(roomId: r.roomId)
            config.name = r.name
            config.announcement = r.announcement
            config.ext = r.ext
            config.broadcastUrl = r.broadcastUrl
            config.creator = r.creator
            config.queueModificationLevel = r.queueModificationLevel
            config.destroyPolicy = r.destroyPolicy
            config.keepAlive = r.keepAlive
            config.multiDevice = r.multiDevice
            config.muted = r.muted
            config.enterExitNotifications = r.enterExitNotifications
            config.queueLimit = r.queueLimit
            let room = Room(key: key, config: config, now: r.createdAt, epoch: r.epoch, historyLimit: r.historyCapacity,
                            defaultQueueLimit: r.queueLimit)
            room.creator = r.creator
            room.open = r.open
            room.lastActivity = r.lastActivity
            room.emptySince = r.emptySince
            for m in r.members {
                room.members[m.userId] = Member(userId: m.userId, nickname: m.nickname, avatar: m.avatar, ext: m.ext, role: m.role,
                                                anonymous: m.anonymous, sessions: SessionList(m.sessions.map(SessionID.init)), enterTime: m.enterTime)
                room.members[m.userId]!.tags = m.tags ?? []
                room.members[m.userId]!.notifyTargetTags = m.notifyTargetTags
                // AU-1: the tag index is the present members' tags.
                if !m.sessions.isEmpty { for t in m.tags ?? [] { room.tagCounts[t, default: 0] += 1 } }
            }
            for u in r.present {
                // The join order holds members with a session in the room, each once.
                guard room.members[u]?.isOnline == true, !room.isPresent(u) else {
                    throw .inconsistent("present user \(u) of room \(r.roomId) has no session there, or is listed twice")
                }
                room.addPresent(u)
            }
            for u in r.fixed { room.fixed.append(u) }
            for b in r.blocks { room.blocks[b.key] = b.value }
            room.permanentMutes = Set(r.permanentMutes)
            for t in r.tempMutes { room.tempMutes[t.key] = t.value }
            for u in r.muteAllowlist { room.muteAllowlist.append(u) }
            for at in r.attributes { room.attributes[at.key] = at.value }
            for k in r.queueOrder { room.queueOrder.append(k) }
            for q in r.queue { room.queue[q.key] = q.value }
            room.history = RecentHistory(capacity: r.historyCapacity, messages: r.history, bytes: r.historyBytes, truncated: r.historyTruncated)
            room.protectedSenders = r.protectedSenders ?? []
            room.distributionStopped = r.distributionStopped ?? false
            room.budget = r.budget.map(TokenBucket.init(image:))
            room.sharedBudget = r.sharedBudget.map(TokenBucket.init(image:))
            for t in r.tagMutes ?? [] { room.tagMutes[t.key] = t.value }
            room.countsOnly = Set((r.countsOnly ?? []).map(SessionID.init))
            room.memberSummary = r.memberSummary
            guard app.rooms[r.roomId] == nil else { throw .inconsistent("room \(r.roomId) twice") }
            app.rooms[r.roomId] = room
        }
        for m in a.globalMutes { app.globalMutes[m.key] = m.value }
        for u in a.userSessions { app.userSessions[u.key] = SessionList(u.value.map(SessionID.init)) }
        for b in a.sendBuckets { app.sendBuckets[b.key] = TokenBucket(image: b.value) }
        app.broadcastBucket = a.broadcastBucket.map(TokenBucket.init(image:))
        for g in a.goingOffline { app.goingOffline[g.user] = (g.at, g.device) }
        for g in a.groups {
            let group = UltraGroup(id: g.id, name: g.name, creator: g.creator, createdAt: g.createdAt)
            for u in g.members { group.members.append(u) }
            for c in g.channels {
                let channel = UltraChannel(id: c.id, type: c.type, createdAt: c.createdAt)
                for u in c.privateMembers { channel.privateMembers.append(u) }
                for u in c.userGroups ?? [] { channel.userGroups.append(u) }
                channel.defaultLevel = c.defaultLevel
                group.channels[c.id] = channel
            }
            for c in g.channelOrder { group.channelOrder.append(c) }
            for u in g.userGroups ?? [] {
                guard group.userGroups[u.id] == nil else { throw .inconsistent("user group \(u.id) twice in ultra group \(g.id)") }
                let userGroup = UserGroup(id: u.id)
                for m in u.members { userGroup.members.append(m) }
                group.userGroups[u.id] = userGroup
                group.userGroupOrder.append(u.id)
            }
            for c in g.channels {
                for u in c.userGroups ?? [] where group.userGroups[u] == nil {
                    throw .inconsistent("channel \(c.id) of ultra group \(g.id) is bound to a user group \(u) it does not have")
                }
            }
            group.defaultLevel = g.defaultLevel
            g.community?.restore(into: group.community)
            app.communityBytes += group.community.historyBytes.values.reduce(0, +)
            app.groups[g.id] = group
        }
        for c in a.conversations {
            var u = UserConversations()
            for s in c.statuses {
                u.statuses[s.key] = ConversationStatus(key: s.key, pinned: s.pinned, level: s.level, version: s.version, updatedAt: s.updatedAt)
            }
            for t in c.typeLevels { u.typeLevels[t.type] = t.level }
            u.version = c.version
            app.conversations[c.user] = u
        }
        for r in a.recentCreates { app.recentCreates[r.key] = r.value }
        if let audit = a.audit { app.audit = AuditTrail(entries: audit) }
        return app
    }
}
