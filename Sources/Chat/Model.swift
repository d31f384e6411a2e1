/// A connection of one user on one device, as the gateway registers it. The domain tracks
/// sessions because several rules depend on who is online where (RC-3, RC-4, NIM-4, NIM-16).
public struct SessionID: Hashable, Sendable, Comparable, CustomStringConvertible, Codable {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (a: SessionID, b: SessionID) -> Bool { a.raw < b.raw }
    public var description: String { "s\(raw)" }
}

/// A room's identity across apps.
public struct RoomKey: Hashable, Sendable, CustomStringConvertible, Codable {
    public let app: String
    public let roomId: String
    public init(app: String, roomId: String) {
        self.app = app
        self.roomId = roomId
    }
    public var description: String { "\(app)/\(roomId)" }
}

/// NIM-11 member types.
public enum MemberType: String, Sendable, Equatable, Codable, CaseIterable {
    case creator
    case manager
    case common
    /// Fixed because blocklisted or permanently muted.
    case limited
    /// A visitor: a member only while online.
    case guest
    case anonymous

    public var isFixed: Bool {
        switch self {
        case .creator, .manager, .common, .limited: return true
        case .guest, .anonymous: return false
        }
    }

    /// Rank for "who may act on whom" (NIM-12): creator > manager > everyone else.
    var rank: Int {
        switch self {
        case .creator: return 2
        case .manager: return 1
        default: return 0
        }
    }
}

/// The role granted explicitly; `limited`, `guest` and `anonymous` are derived from state.
public enum GrantedRole: String, Sendable, Equatable, Codable {
    case none
    case creator
    case manager
    case common
}

/// A user's presence and profile in a room (NIM-11).
///
/// Every member of every room is one of these, inline in its room's dictionary; the profile and
/// the tags, which most members never set, are kept apart in one immutable box (nil while all are
/// empty), so a member costs 48 bytes there rather than 112.
public struct Member: Equatable, Sendable {
    public var userId: String
    /// Sessions of this user in the room (usually one; several with multi-device rooms).
    public var sessions = SessionList()
    // After `sessions` (9 bytes: one inline), in the padding it leaves (48 bytes a member, not 56).
    public var role: GrantedRole = .none
    public var anonymous = false
    /// Its slot in the room's join order of present users (`Room.presentOrder`), -1 while not
    /// present: kept here so the order needs no dictionary of its own. Not part of equality (a
    /// slot depends on the order's history, not on the member).
    var presentSlot: Int32 = -1
    /// When the user last entered (ms).
    public var enterTime: Int64 = 0
    private var details: DetailsBox?

    /// What a member has besides its presence: its profile in the room and its tags.
    public struct Details: Equatable, Sendable {
        public var nickname = ""
        public var avatar = ""
        /// NIM-2 roomExt: attached to every message and notification this member causes.
        public var ext = ""
        /// AU-1: the member's tags in the room, and the tags its enter and exit notifications go to.
        public var tags: [String] = []
        public var notifyTargetTags: TagExpression?

        var isEmpty: Bool { nickname.isEmpty && avatar.isEmpty && ext.isEmpty && tags.isEmpty && notifyTargetTags == nil }
    }

    private final class DetailsBox: Equatable, Sendable {
        let value: Details
        init(_ value: Details) { self.value = value }
        static func == (a: DetailsBox, b: DetailsBox) -> Bool { a === b || a.value == b.value }
    }

    public init(userId: String, nickname: String = "", avatar: String = "", ext: String = "", role: GrantedRole = .none,
                anonymous: Bool = false, sessions: SessionList = [], enterTime: Int64 = 0) {
        self.userId = userId
        self.role = role
        self.anonymous = anonymous
        self.sessions = sessions
        self.enterTime = enterTime
        update { $0.nickname = nickname; $0.avatar = avatar; $0.ext = ext }
    }

    /// Changes the profile and tags at once (one new box at most).
    public mutating func update(_ body: (inout Details) -> Void) {
        var d = details?.value ?? Details()
        let before = d
        body(&d)
        if d == before { return }
        details = d.isEmpty ? nil : DetailsBox(d)
    }

    public var nickname: String {
        get { details?.value.nickname ?? "" }
        set { update { $0.nickname = newValue } }
    }
    public var avatar: String {
        get { details?.value.avatar ?? "" }
        set { update { $0.avatar = newValue } }
    }
    /// NIM-2 roomExt: attached to every message and notification this member causes.
    public var ext: String {
        get { details?.value.ext ?? "" }
        set { update { $0.ext = newValue } }
    }
    /// AU-1: the member's tags in the room, and the tags its enter and exit notifications go to.
    public var tags: [String] {
        get { details?.value.tags ?? [] }
        set { update { $0.tags = newValue } }
    }
    public var notifyTargetTags: TagExpression? {
        get { details?.value.notifyTargetTags }
        set { update { $0.notifyTargetTags = newValue } }
    }

    public var isOnline: Bool { !sessions.isEmpty }

    public static func == (a: Member, b: Member) -> Bool {
        a.userId == b.userId && a.sessions == b.sessions && a.role == b.role && a.anonymous == b.anonymous
            && a.enterTime == b.enterTime && a.details == b.details
    }

    /// Removes a session; returns the updated member, or nil if the session was not there.
    mutating func removeSession(_ sid: SessionID) -> Member? {
        guard let i = sessions.firstIndex(of: sid) else { return nil }
        sessions.remove(at: i)
        return self
    }
}

/// A room attribute (RC-10 entry, ZIM-8 room attribute).
public struct Attribute: Equatable, Sendable, Codable {
    public var value: String
    public var owner: String
    public var autoDelete: Bool
    public var updatedAt: Int64

    public init(value: String, owner: String, autoDelete: Bool, updatedAt: Int64) {
        self.value = value
        self.owner = owner
        self.autoDelete = autoDelete
        self.updatedAt = updatedAt
    }
}

/// A NIM-16 queue element.
public struct QueueElement: Equatable, Sendable, Codable {
    public var value: String
    /// The last writer.
    public var owner: String
    /// Removed when its owner leaves or drops.
    public var transient: Bool

    public init(value: String, owner: String, transient: Bool) {
        self.value = value
        self.owner = owner
        self.transient = transient
    }
}

/// QS-1: a message's priority class. Under overload, low messages are refused or dropped first,
/// then normal ones; high messages (and every event that is not a message: moderation, room status,
/// kicks, membership) are never dropped.
public enum MessagePriority: String, Equatable, Hashable, Sendable, Codable, CaseIterable, Comparable {
    case low
    case normal
    case high

    public static func < (a: MessagePriority, b: MessagePriority) -> Bool { a.rank < b.rank }
    var rank: Int {
        switch self {
        case .low: return 0
        case .normal: return 1
        case .high: return 2
        }
    }
}

/// What a sender asks of a message besides its content (QS-1, QS-5).
public struct MessageOptions: Equatable, Sendable, Codable {
    /// The class the sender asks for (native `priority`, ZIM's levels, NIM's `highPriority`);
    /// nil: the app's rules decide (protected senders and types, low-priority types), else normal.
    public var priority: MessagePriority?
    /// The message's type name (a vendor's message type such as RongCloud's `RC:TxtMsg`, or the
    /// app's own): the app's type lists decide its class by it. Empty: none.
    public var type: String
    /// QS-5 (ZIM barrage): not stored, not in the room's stream (no offset, no resume), sent to
    /// webhooks only if the app asks, and dropped first under backpressure.
    public var transient: Bool
    /// AU-2: only these members receive it (stored and resumed only for them); empty: everyone.
    public var targets: [String]
    /// AU-1: only the members whose tags match receive it (NIM's `notifyTargetTags`).
    public var targetTags: TagExpression?

    public init(priority: MessagePriority? = nil, type: String = "", transient: Bool = false, targets: [String] = [], targetTags: TagExpression? = nil) {
        self.priority = priority
        self.type = type
        self.transient = transient
        self.targets = targets
        self.targetTags = targetTags
    }

    /// The options of a message that asks for nothing (sent as before QS-1).
    public var isDefault: Bool { priority == nil && type.isEmpty && !transient && targets.isEmpty && targetTags == nil }
}

/// A room message (NIM-8).
public struct ChatMessage: Equatable, Sendable, Codable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case text
        case custom
        case notification
    }
    public var id: String
    public var roomId: String
    /// The sender's user id; empty for a server message without one.
    public var sender: String
    public var senderNickname: String
    public var senderAvatar: String
    /// The sender's roomExt (NIM-2).
    public var senderExt: String
    public var kind: Kind
    public var content: String
    public var time: Int64
    public var fromServer: Bool
    /// QS-1: the class it was sent with.
    public var priority: MessagePriority
    /// Its type name (`MessageOptions.type`); empty: none.
    public var type: String
    /// QS-5: sent outside the room's stream, never stored.
    public var transient: Bool
    /// AU-2, AU-1: whom it was addressed to (empty and nil: the room).
    public var targets: [String]
    public var targetTags: TagExpression?
    /// MO-1: the message was recalled: it keeps its place (id, sender, time, offset) with no content.
    public var recalled: Bool

    public init(id: String, roomId: String, sender: String, senderNickname: String, senderAvatar: String, senderExt: String, kind: Kind, content: String,
                time: Int64, fromServer: Bool, priority: MessagePriority = .normal, type: String = "", transient: Bool = false,
                targets: [String] = [], targetTags: TagExpression? = nil, recalled: Bool = false) {
        self.recalled = recalled
        self.targets = targets
        self.targetTags = targetTags
        self.id = id
        self.roomId = roomId
        self.sender = sender
        self.senderNickname = senderNickname
        self.senderAvatar = senderAvatar
        self.senderExt = senderExt
        self.kind = kind
        self.content = content
        self.time = time
        self.fromServer = fromServer
        self.priority = priority
        self.type = type
        self.transient = transient
    }

    enum CodingKeys: String, CodingKey {
        case id, roomId, sender, senderNickname, senderAvatar, senderExt, kind, content, time, fromServer, priority, type, transient, targets, targetTags, recalled
    }

    /// MO-1: what history and resume show of it once recalled: its place, not its content.
    public var tombstone: ChatMessage {
        var m = self
        m.content = ""
        m.senderExt = ""
        m.recalled = true
        return m
    }

    /// Written without `recalled` unless it was (images before MO-1 read back the same).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(roomId, forKey: .roomId)
        try c.encode(sender, forKey: .sender)
        try c.encode(senderNickname, forKey: .senderNickname)
        try c.encode(senderAvatar, forKey: .senderAvatar)
        try c.encode(senderExt, forKey: .senderExt)
        try c.encode(kind, forKey: .kind)
        try c.encode(content, forKey: .content)
        try c.encode(time, forKey: .time)
        try c.encode(fromServer, forKey: .fromServer)
        try c.encode(priority, forKey: .priority)
        try c.encode(type, forKey: .type)
        try c.encode(transient, forKey: .transient)
        try c.encode(targets, forKey: .targets)
        try c.encodeIfPresent(targetTags, forKey: .targetTags)
        if recalled { try c.encode(recalled, forKey: .recalled) }
    }

    /// Images written before QS-1 have no priority, type or transient flag.
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        self.init(id: try c.decode(String.self, forKey: .id), roomId: try c.decode(String.self, forKey: .roomId),
                  sender: try c.decode(String.self, forKey: .sender), senderNickname: try c.decode(String.self, forKey: .senderNickname),
                  senderAvatar: try c.decode(String.self, forKey: .senderAvatar), senderExt: try c.decode(String.self, forKey: .senderExt),
                  kind: try c.decode(Kind.self, forKey: .kind), content: try c.decode(String.self, forKey: .content),
                  time: try c.decode(Int64.self, forKey: .time), fromServer: try c.decode(Bool.self, forKey: .fromServer),
                  priority: try c.decodeIfPresent(MessagePriority.self, forKey: .priority) ?? .normal,
                  type: try c.decodeIfPresent(String.self, forKey: .type) ?? "",
                  transient: try c.decodeIfPresent(Bool.self, forKey: .transient) ?? false,
                  targets: try c.decodeIfPresent([String].self, forKey: .targets) ?? [],
                  targetTags: try c.decodeIfPresent(TagExpression.self, forKey: .targetTags),
                  recalled: try c.decodeIfPresent(Bool.self, forKey: .recalled) ?? false)
    }

    /// AU-1, AU-2: whether a member with these tags is among its addressees.
    public func isAddressed(to user: String, tags: [String]) -> Bool {
        if !targets.isEmpty && !targets.contains(user) { return false }
        if let targetTags, !targetTags.matches(tags) { return false }
        return true
    }
}

/// One room of one app: settings, members, moderation, attributes, queue and recent history.
/// A class so the engine mutates it in place.
///
/// The engine is single-threaded and never holds overlapping accesses to these properties, so
/// the hot ones opt out of dynamic exclusivity checks (`@exclusivity(unchecked)`), which cost
/// about 8% of every command.
final class Room {
    let key: RoomKey
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
    var open = true
    var enterExitNotifications: Bool
    var queueLimit: Int
    let createdAt: Int64
    /// Identifies this incarnation of the room: a room destroyed and created again gets a new
    /// epoch, so a resuming client learns it must reset (RC-1, BX-1).
    let epoch: String
    @exclusivity(unchecked) var lastActivity: Int64
    /// ZIM-7: when the room became empty (destroy delay counts from here).
    @exclusivity(unchecked) var emptySince: Int64?

    @exclusivity(unchecked) var members: [String: Member] = [:]
    /// Users present (with at least one session), in join order; each one's slot is in its member
    /// record (`Member.presentSlot`). Changed by `addPresent` and `removePresent` only.
    @exclusivity(unchecked) var presentOrder = SlotList<String>()
    /// Fixed members (creator, managers, common, limited), in the order they became fixed.
    @exclusivity(unchecked) var fixed = OrderedIndex<String>()
    /// Blocked users and until when (ms; Int64.max = no expiry).
    @exclusivity(unchecked) var blocks: [String: Int64] = [:]
    @exclusivity(unchecked) var permanentMutes: Set<String> = []
    /// Temporarily muted users and until when (ms).
    @exclusivity(unchecked) var tempMutes: [String: Int64] = [:]
    @exclusivity(unchecked) var muteAllowlist = OrderedIndex<String>()
    @exclusivity(unchecked) var attributes: [String: Attribute] = [:]
    @exclusivity(unchecked) var queueOrder = OrderedIndex<String>()
    @exclusivity(unchecked) var queue: [String: QueueElement] = [:]
    @exclusivity(unchecked) var history: RecentHistory
    /// QS-4: users whose messages are never dropped (RongCloud's chatroom user whitelist, at most
    /// `Limits.maxProtectedSendersPerRoom`).
    var protectedSenders: [String] = []
    /// QS-6: messages are accepted, stored and sent to webhooks, but not fanned out.
    var distributionStopped = false
    /// QS-2: the room's message budget (nil until its first message), and the share of it every
    /// class but high takes from too (`ChatDomain.takeBudget`; nil until its first such message).
    @exclusivity(unchecked) var budget: TokenBucket?
    @exclusivity(unchecked) var sharedBudget: TokenBucket?
    /// AU-1: how many present members carry each tag (at most `Limits.maxTagsPerRoom` tags).
    @exclusivity(unchecked) var tagCounts: [String: Int] = [:]
    /// AU-1: tags whose members may not send, and until when (ms).
    var tagMutes: [String: Int64] = [:]
    /// AU-4: the sessions in the room that asked for member counts only, and the changes the next
    /// `room.members` summary tells (nil: none since the last).
    var countsOnly: Set<SessionID> = []
    var memberSummary: PendingMemberSummary?

    /// AU-1: whether a member's tags are muted at `now`.
    func isTagMuted(_ tags: [String], now: Int64) -> Bool {
        guard !tagMutes.isEmpty else { return false }
        return tags.contains { (tagMutes[$0] ?? 0) > now }
    }

    init(key: RoomKey, config: RoomConfig, now: Int64, epoch: String, historyLimit: Int, defaultQueueLimit: Int) {
        self.key = key
        name = config.name
        announcement = config.announcement
        ext = config.ext
        broadcastUrl = config.broadcastUrl
        creator = config.creator ?? ""
        queueModificationLevel = config.queueModificationLevel
        destroyPolicy = config.destroyPolicy
        keepAlive = config.keepAlive
        multiDevice = config.multiDevice
        muted = config.muted
        enterExitNotifications = config.enterExitNotifications
        queueLimit = config.queueLimit ?? defaultQueueLimit
        createdAt = now
        lastActivity = now
        self.epoch = epoch
        history = RecentHistory(historyLimit: historyLimit)
    }

    func isBlocked(_ user: String, now: Int64) -> Bool {
        guard !blocks.isEmpty, let until = blocks[user] else { return false }
        return until > now
    }

    func isTempMuted(_ user: String, now: Int64) -> Bool {
        guard !tempMutes.isEmpty, let until = tempMutes[user] else { return false }
        return until > now
    }

    func isPermanentlyMuted(_ user: String) -> Bool {
        !permanentMutes.isEmpty && permanentMutes.contains(user)
    }

    /// NIM-11 type of a user in this room.
    func type(of user: String, now: Int64) -> MemberType {
        type(of: user, member: members[user], now: now)
    }

    /// The same, when the caller already holds the member record.
    func type(of user: String, member m: Member?, now: Int64) -> MemberType {
        switch m?.role ?? .none {
        case .creator: return .creator
        case .manager: return .manager
        case .common: return .common
        case .none:
            if isBlocked(user, now: now) || isPermanentlyMuted(user) { return .limited }
            return m?.anonymous == true ? .anonymous : .guest
        }
    }

    func isFixed(_ user: String, now: Int64) -> Bool { type(of: user, now: now).isFixed }

    var memberCount: Int { presentOrder.count }

    /// The users present, in join order (a view: read it, change it with `addPresent` and
    /// `removePresent`).
    var present: PresentUsers { PresentUsers(order: presentOrder, members: members) }

    /// Whether `user` is present (has a session in the room).
    func isPresent(_ user: String) -> Bool { (members[user]?.presentSlot ?? -1) >= 0 }

    /// Puts a member at the end of the join order (nothing if it has no record or is there).
    func addPresent(_ user: String) {
        guard let slot = members[user]?.presentSlot, slot < 0 else { return }
        members[user]!.presentSlot = presentOrder.append(user)
    }

    /// Takes a user out of the join order (before its member record goes).
    func removePresent(_ user: String) {
        guard let slot = members[user]?.presentSlot, slot >= 0 else { return }
        presentOrder.remove(slot: slot)
        members[user]!.presentSlot = -1
    }
}

/// A room's present users in join order: the order's slots, found through the member records.
struct PresentUsers {
    let order: SlotList<String>
    let members: [String: Member]

    var count: Int { order.count }
    var isEmpty: Bool { order.isEmpty }
    var all: [String] { order.all }

    func contains(_ user: String) -> Bool { (members[user]?.presentSlot ?? -1) >= 0 }

    /// Up to `limit` users after `anchor` (exclusive; from the start when nil; none when `anchor`
    /// is not present), oldest first, that pass `filter`.
    func forward(after anchor: String? = nil, limit: Int, where filter: (String) -> Bool = { _ in true }) -> [String] {
        guard let anchor else { return order.forward(afterSlot: nil, limit: limit, where: filter) }
        guard let s = members[anchor]?.presentSlot, s >= 0 else { return [] }
        return order.forward(afterSlot: s, limit: limit, where: filter)
    }

    /// Up to `limit` users before `anchor` (exclusive; from the end when nil), newest first.
    func backward(before anchor: String? = nil, limit: Int, where filter: (String) -> Bool = { _ in true }) -> [String] {
        guard let anchor else { return order.backward(beforeSlot: nil, limit: limit, where: filter) }
        guard let s = members[anchor]?.presentSlot, s >= 0 else { return [] }
        return order.backward(beforeSlot: s, limit: limit, where: filter)
    }
}

/// Per-session state kept by the domain (one per connection, inline in the sessions dictionary,
/// whose key is its id: 88 bytes). The profile and the anonymous flag, which most connections do
/// not have, are a reference, nil when the profile is empty and the session is not anonymous.
struct Session {
    /// The session's app: a reference, not a copy of its key (8 bytes, not 16; a record is 80 bytes,
    /// not 88). An app deleted while sessions of it remain stays alive with them, key and all.
    let appState: AppState
    var app: String { appState.key }
    let userId: String
    let deviceId: String
    /// When the connect was applied (PX-5 connection listings in a cluster: the entry's time).
    let connectedAt: Int64
    private let profile: Profile?
    /// Rooms this session is in, in join order (nearly always one: inline, no array). Last: its 17
    /// bytes end the record, with no padding after them.
    var rooms = SmallList<String>()

    private final class Profile {
        let nickname: String
        let avatar: String
        let anonymous: Bool
        init(nickname: String, avatar: String, anonymous: Bool) {
            self.nickname = nickname
            self.avatar = avatar
            self.anonymous = anonymous
        }
    }

    init(app: AppState, userId: String, deviceId: String, anonymous: Bool, nickname: String, avatar: String, connectedAt: Int64) {
        appState = app
        self.userId = userId
        self.deviceId = deviceId
        self.connectedAt = connectedAt
        profile = nickname.isEmpty && avatar.isEmpty && !anonymous ? nil : Profile(nickname: nickname, avatar: avatar, anonymous: anonymous)
    }

    var nickname: String { profile?.nickname ?? "" }
    var avatar: String { profile?.avatar ?? "" }
    var anonymous: Bool { profile?.anonymous ?? false }
}

/// One app's state.
/// (Single-threaded, like `Room`: hot properties skip dynamic exclusivity checks.)
final class AppState {
    let key: String
    var settings: AppSettings {
        didSet {
            // MO-2: the matcher follows the word list (changed by admin calls only).
            if settings.sensitiveWords != oldValue.sensitiveWords { wordMatcher = SensitiveWordMatcher(settings.sensitiveWords) }
        }
    }
    /// MO-2: the app's sensitive words, compiled.
    private(set) var wordMatcher: SensitiveWordMatcher
    @exclusivity(unchecked) var rooms: [String: Room] = [:]
    /// App-wide mutes (RC-6 6/7) and until when (ms).
    @exclusivity(unchecked) var globalMutes: [String: Int64] = [:]
    /// Online sessions of each user.
    @exclusivity(unchecked) var userSessions: [String: SessionList] = [:]
    /// PX-1: each user's room-send bucket (dropped in `tick` once full again).
    @exclusivity(unchecked) var sendBuckets: [String: TokenBucket] = [:]
    /// PX-3: users whose last connection closed, when, and on which device, until the grace ends.
    @exclusivity(unchecked) var goingOffline: [String: (at: Int64, device: String)] = [:]
    /// Ultra groups (SPEC §4).
    @exclusivity(unchecked) var groups: [String: UltraGroup] = [:]
    /// Conversation statuses and type defaults of each user (SPEC §5).
    @exclusivity(unchecked) var conversations: [String: UserConversations] = [:]
    /// When each user's clients created rooms in the last minute (the create quota).
    @exclusivity(unchecked) var recentCreates: [String: [Int64]] = [:]
    /// AU-3: the app's broadcasts (at most `Limits.broadcastsPerSecond`).
    var broadcastBucket: TokenBucket?
    /// MO-8: the app's newest moderation actions.
    var audit = AuditTrail()
    /// MO-3: the bytes of all its channels' stored community messages (derived: the sum of every
    /// channel's `historyBytes`, kept up to date as they change).
    var communityBytes = 0

    init(key: String, settings: AppSettings) {
        self.key = key
        self.settings = settings
        wordMatcher = SensitiveWordMatcher(settings.sensitiveWords)
    }

    func isGloballyMuted(_ user: String, now: Int64) -> Bool {
        guard !globalMutes.isEmpty, let until = globalMutes[user] else { return false }
        return until > now
    }
}
