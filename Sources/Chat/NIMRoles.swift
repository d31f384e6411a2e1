/// AU-5: NIM's `queryMembersByRole`, `queueBatchOffer` and `updateMyRoomRole`, as its server API
/// has them.
///
/// - Members by role: the room's fixed members (creator, managers, common members, and those kept
///   because they are blocklisted or permanently muted) that hold any of the roles asked for, in
///   the order they became fixed, at most `Limits.maxMemberListCount`. NIM's `roles` object names
///   `creator`, `manager`, `common`, `blacklist` and `mute`; Roomcast reads exactly those keys.
/// - A batch offer: up to `Limits.maxQueueBatch` elements, each with an owner (`accid`) and
///   whether it leaves with its owner (`transient`). The whole batch is checked first (keys,
///   values, owners, repeats); then each element is put, or listed in `failedKeys` when the queue
///   is full or a transient element's owner is not in the room. Each change reaches the room as
///   the queue's usual 317 notification.
/// - A member's room profile set by the app server: nickname, avatar and ext of a member in the
///   room, kept for a fixed member when `save` asks, and told to the room (316) unless
///   `needNotify` is false.
public struct MemberRoles: Equatable, Sendable, Codable {
    public var creator = false
    public var manager = false
    public var common = false
    public var blocklisted = false
    public var muted = false

    public init(creator: Bool = false, manager: Bool = false, common: Bool = false, blocklisted: Bool = false, muted: Bool = false) {
        self.creator = creator
        self.manager = manager
        self.common = common
        self.blocklisted = blocklisted
        self.muted = muted
    }

    public var isEmpty: Bool { !(creator || manager || common || blocklisted || muted) }

    func matches(_ m: MemberInfo) -> Bool {
        (creator && m.type == .creator) || (manager && m.type == .manager) || (common && m.type == .common)
            || (blocklisted && m.isBlocklisted) || (muted && m.isMuted)
    }
}

/// One element of a batch offer (AU-5).
public struct QueueOfferItem: Equatable, Sendable, Codable {
    public var key: String
    public var value: String
    /// The account the element belongs to ("" for none).
    public var owner: String
    /// The element leaves the queue when its owner leaves the room.
    public var transient: Bool

    public init(key: String, value: String, owner: String = "", transient: Bool = false) {
        self.key = key
        self.value = value
        self.owner = owner
        self.transient = transient
    }
}

extension ChatDomain {
    func membersByRoles(_ appKey: String, _ roomId: String, _ roles: MemberRoles, now: Int64) throws(ChatError) -> Reply {
        let room = try room(try app(appKey), roomId)
        guard !roles.isEmpty else { throw .invalid("roles", "ask for at least one of creator, manager, common, blacklist and mute") }
        let ids = room.fixed.forward(after: nil, limit: Limits.maxMemberListCount, where: { roles.matches(self.memberInfo(room, $0, now: now)) })
        return .members(ids.map { memberInfo(room, $0, now: now) }, total: ids.count)
    }

    func queueBatchOffer(_ appKey: String, _ roomId: String, _ items: [QueueOfferItem], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let room = try room(try app(appKey), roomId)
        guard !items.isEmpty else { throw .invalid("elements", "elements must not be empty") }
        guard items.count <= Limits.maxQueueBatch else { throw .invalid("elements", "at most \(Limits.maxQueueBatch) elements per batch") }
        for e in items {
            try Validate.queueKey(e.key, max: Limits.maxQueueKeyBytes, field: "elements")
            try Validate.maxBytes(e.value, Limits.maxQueueValueBytes, field: "elements.\(e.key)")
            if !e.owner.isEmpty { try Validate.userId(e.owner, field: "elements.\(e.key)") }
            if e.transient && e.owner.isEmpty { throw .invalid("elements.\(e.key)", "a transient element needs its owner (accid)") }
        }
        guard Set(items.map(\.key)).count == items.count else { throw .invalid("elements", "duplicate keys") }
        var failed: [String] = []
        for e in items {
            let existing = room.queue[e.key]
            if (existing == nil && room.queue.count >= room.queueLimit) || (e.transient && !room.isPresent(e.owner)) {
                failed.append(e.key)
                continue
            }
            let element = QueueElement(value: e.value, owner: e.owner, transient: e.transient)
            room.queue[e.key] = element
            if existing == nil { room.queueOrder.append(e.key) }
            queueSequence += 1
            if e.transient {
                if existing?.transient == false { out.mutations.append(.deleteQueueElement(room.key, e.key)) }
            } else {
                out.mutations.append(.putQueueElement(room.key, e.key, element, sequence: queueSequence))
            }
            queueNotice(room, existing == nil ? .offer : .update, key: e.key, value: e.value, user: nil, now: now, &out)
        }
        return .failedKeys(failed)
    }

    func updateMemberInfo(_ appKey: String, _ roomId: String, _ userId: String, nickname: String?, avatar: String?, ext: String?, save: Bool,
                          notify: NIMNotify?, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let room = try room(try app(appKey), roomId)
        try Validate.userId(userId, field: "userId")
        if let nickname { try Validate.maxBytes(nickname, Limits.maxNicknameBytes, field: "nickname") }
        if let avatar { try Validate.maxBytes(avatar, Limits.maxAvatarBytes, field: "avatar") }
        if let ext { try Validate.maxBytes(ext, Limits.maxExtBytes, field: "ext") }
        let notify = try validateNotify(nil, notify).nim
        guard nickname != nil || avatar != nil || ext != nil else { throw .invalid("nickname", "nothing to update") }
        guard room.isPresent(userId) else {
            throw ChatError(.notInRoom, "\(userId) is not in room \(roomId)", field: "userId")
        }
        if let nickname { room.members[userId]!.nickname = nickname }
        if let avatar { room.members[userId]!.avatar = avatar }
        if let ext { room.members[userId]!.ext = ext }
        if save && room.fixed.contains(userId) {
            let m = room.members[userId]!
            out.mutations.append(.putMember(room.key, MemberRecord(userId: userId, role: m.role, nickname: m.nickname, avatar: m.avatar, ext: m.ext)))
        }
        if let notify {
            let info = memberInfo(room, userId, now: now)
            out.deliver(.notification(NotificationEvent(roomId: roomId, type: .memberInfoUpdated, source: info, targets: [info],
                                                        notifyExt: notify.notifyExt, ext: .none, time: now)), to: .room(room.key))
        }
        return .done
    }
}
