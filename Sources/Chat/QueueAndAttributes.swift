extension ChatDomain {
    // MARK: Queue (NIM-16)

    /// queueModificationLevel 1: only the creator and managers (and the app server) change the queue.
    func checkQueuePermission(_ room: Room, _ user: String?, now: Int64) throws(ChatError) {
        guard let user, room.queueModificationLevel == .managers else { return }
        guard room.type(of: user, now: now).rank >= 1 else {
            throw ChatError(.permissionDenied, "only the creator and managers may change this room's queue", field: "operator")
        }
    }

    func queueNotice(_ room: Room, _ change: QueueChangeType, key: String, value: String, user: String?, now: Int64, _ out: inout Outcome) {
        out.deliver(.notification(NotificationEvent(roomId: room.key.roomId, type: .queueChange, source: user.map { memberInfo(room, $0, now: now) },
                                                    targets: [], notifyExt: "", ext: .queue(change, key: key, value: value), time: now)),
                    to: .room(room.key))
        out.webhooks.append(WebhookRecord(app: room.key.app, type: .queueChanged, roomId: room.key.roomId, userIds: user.map { [$0] } ?? [],
                                          time: now, details: ["changeType": change.rawValue, "key": key]))
    }

    func queueOffer(_ appKey: String, _ roomId: String, _ key: String, _ value: String, _ transient: Bool, _ actor: Actor, _ now: Int64,
                    _ out: inout Outcome) throws(ChatError) -> Reply {
        let (_, room, user) = try resolve(appKey, roomId, actor)
        try Validate.queueKey(key, max: Limits.maxQueueKeyBytes)
        try Validate.maxBytes(value, Limits.maxQueueValueBytes, field: "value")
        try checkQueuePermission(room, user, now: now)
        // A transient element vanishes with its owner, so it needs an owner in the room.
        if transient && user == nil { throw .invalid("transient", "transient elements are offered by a member from a client") }
        // MO-7: an account's transient element vanishes when it leaves, so it must be in the room.
        if transient, case .account(let op) = actor, room.members[op]?.isOnline != true {
            throw ChatError(.notInRoom, "\(op) is not in room \(roomId): a transient element needs its operator present", field: "operator")
        }
        let existing = room.queue[key]
        if existing == nil && room.queue.count >= room.queueLimit {
            throw ChatError(.limitExceeded, "the queue holds at most \(room.queueLimit) elements", field: "key")
        }
        let element = QueueElement(value: value, owner: user ?? "", transient: transient)
        room.queue[key] = element
        if existing == nil { room.queueOrder.append(key) }
        queueSequence += 1
        if transient {
            if existing?.transient == false { out.mutations.append(.deleteQueueElement(room.key, key)) }
        } else {
            out.mutations.append(.putQueueElement(room.key, key, element, sequence: queueSequence))
        }
        queueNotice(room, existing == nil ? .offer : .update, key: key, value: value, user: user, now: now, &out)
        return .done
    }

    func queueBatchUpdate(_ appKey: String, _ roomId: String, _ elements: [(key: String, value: String)], _ actor: Actor,
                          _ notify: NIMNotify?, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (_, room, user) = try resolve(appKey, roomId, actor)
        guard !elements.isEmpty else { throw .invalid("elements", "elements must not be empty") }
        guard elements.count <= Limits.maxQueueBatch else {
            throw .invalid("elements", "at most \(Limits.maxQueueBatch) elements per batch")
        }
        for e in elements {
            try Validate.queueKey(e.key, max: Limits.maxQueueBatchKeyBytes, field: "elements")
            try Validate.maxBytes(e.value, Limits.maxQueueValueBytes, field: "elements.\(e.key)")
        }
        guard Set(elements.map(\.key)).count == elements.count else { throw .invalid("elements", "duplicate keys") }
        let notify = try validateNotify(nil, notify).nim
        try checkQueuePermission(room, user, now: now)
        var missing: [String] = []
        var updated: [(key: String, value: String)] = []
        for e in elements {
            guard var element = room.queue[e.key] else {
                missing.append(e.key)
                continue
            }
            element.value = e.value
            // The last writer owns the element.
            element.owner = user ?? element.owner
            room.queue[e.key] = element
            updated.append(e)
            if !element.transient {
                queueSequence += 1
                out.mutations.append(.putQueueElement(room.key, e.key, element, sequence: queueSequence))
            }
        }
        if let notify, !updated.isEmpty {
            out.deliver(.notification(NotificationEvent(roomId: roomId, type: .queueBatchChange, source: user.map { memberInfo(room, $0, now: now) },
                                                        targets: [], notifyExt: notify.notifyExt, ext: .queueBatch(.batchUpdate, elements: updated),
                                                        time: now)), to: .room(room.key))
        }
        if !updated.isEmpty {
            out.webhooks.append(WebhookRecord(app: appKey, type: .queueChanged, roomId: roomId, userIds: user.map { [$0] } ?? [], time: now,
                                              details: ["changeType": "batchUpdate", "keys": updated.map(\.key).joined(separator: ",")]))
        }
        return .missingKeys(missing)
    }

    func queuePoll(_ appKey: String, _ roomId: String, _ key: String?, _ actor: Actor, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (_, room, user) = try resolve(appKey, roomId, actor)
        try checkQueuePermission(room, user, now: now)
        let target: String
        if let key, !key.isEmpty {
            try Validate.queueKey(key, max: Limits.maxQueueBatchKeyBytes)
            guard room.queue[key] != nil else { throw ChatError(.notFound, "no queue element \(key)", field: "key") }
            target = key
        } else {
            guard let head = room.queueOrder.first else { throw ChatError(.notFound, "the queue is empty", field: "key") }
            target = head
        }
        let element = room.queue.removeValue(forKey: target)!
        room.queueOrder.remove(target)
        if !element.transient { out.mutations.append(.deleteQueueElement(room.key, target)) }
        queueNotice(room, .poll, key: target, value: element.value, user: user, now: now, &out)
        return .queueElement(key: target, value: element.value)
    }

    func queueDrop(_ appKey: String, _ roomId: String, _ actor: Actor, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (_, room, user) = try resolve(appKey, roomId, actor)
        try checkQueuePermission(room, user, now: now)
        room.queue = [:]
        room.queueOrder = OrderedIndex()
        out.mutations.append(.clearQueue(room.key))
        queueNotice(room, .drop, key: "", value: "", user: user, now: now, &out)
        return .done
    }

    // MARK: Attributes (RC-10, ZIM-8)

    func setAttributes(_ appKey: String, _ roomId: String, _ entries: [(key: String, value: String)], _ owner: String?, _ autoDelete: Bool,
                       _ actor: Actor, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (_, room, user) = try resolve(appKey, roomId, actor)
        guard !entries.isEmpty else { throw .invalid("entries", "entries must not be empty") }
        guard entries.count <= Limits.maxAttributesPerRoom else { throw .invalid("entries", "at most \(Limits.maxAttributesPerRoom) entries") }
        for e in entries {
            try Validate.attributeKey(e.key, field: "entries")
            try Validate.maxBytes(e.value, Limits.maxAttributeValueBytes, field: "entries.\(e.key)")
        }
        guard Set(entries.map(\.key)).count == entries.count else { throw .invalid("entries", "duplicate keys") }
        if let owner { try Validate.userId(owner, field: "ownerId") }
        let newKeys = entries.filter { room.attributes[$0.key] == nil }.count
        guard room.attributes.count + newKeys <= Limits.maxAttributesPerRoom else {
            throw ChatError(.limitExceeded, "a room holds at most \(Limits.maxAttributesPerRoom) attributes", field: "entries")
        }
        let entryOwner: String
        if let user {
            // A member writes as itself and may overwrite others' keys only as creator or manager.
            entryOwner = user
            if room.type(of: user, now: now).rank == 0 {
                for e in entries {
                    if let a = room.attributes[e.key], a.owner != user, !a.owner.isEmpty {
                        throw ChatError(.permissionDenied, "attribute \(e.key) belongs to \(a.owner)", field: "entries")
                    }
                }
            }
        } else {
            entryOwner = owner ?? ""
        }
        guard !autoDelete || !entryOwner.isEmpty else {
            throw .invalid("autoDelete", "autoDelete needs an owner (ownerId) whose departure removes the entries")
        }
        var updated: [AttributesEvent.Entry] = []
        for e in entries {
            let a = Attribute(value: e.value, owner: entryOwner, autoDelete: autoDelete, updatedAt: now)
            room.attributes[e.key] = a
            out.mutations.append(.putAttribute(room.key, e.key, a))
            updated.append(AttributesEvent.Entry(key: e.key, value: e.value, owner: entryOwner, autoDelete: autoDelete, updatedAt: now))
        }
        out.deliver(.attributesChanged(AttributesEvent(roomId: roomId, updated: updated, removed: [], operatorId: user ?? "", time: now)),
                    to: .room(room.key))
        return .attributes(updated)
    }

    func removeAttributes(_ appKey: String, _ roomId: String, _ keys: [String], _ actor: Actor, _ now: Int64,
                          _ out: inout Outcome) throws(ChatError) -> Reply {
        let (_, room, user) = try resolve(appKey, roomId, actor)
        guard !keys.isEmpty, keys.count <= Limits.maxAttributesPerRoom else { throw .invalid("keys", "give 1 to \(Limits.maxAttributesPerRoom) keys") }
        for k in keys { try Validate.attributeKey(k, field: "keys") }
        if let user, room.type(of: user, now: now).rank == 0 {
            for k in keys {
                if let a = room.attributes[k], a.owner != user, !a.owner.isEmpty {
                    throw ChatError(.permissionDenied, "attribute \(k) belongs to \(a.owner)", field: "keys")
                }
            }
        }
        let removed = keys.filter { room.attributes[$0] != nil }
        for k in removed {
            room.attributes[k] = nil
            out.mutations.append(.deleteAttribute(room.key, k))
        }
        if !removed.isEmpty {
            out.deliver(.attributesChanged(AttributesEvent(roomId: roomId, updated: [], removed: removed, operatorId: user ?? "", time: now)),
                        to: .room(room.key))
        }
        return .keys(removed)
    }

    // MARK: Messages (NIM-8, RC-7)

    /// RC-7: may this user send in this room now? (Anonymous sessions never get here: NIM-3 is
    /// refused for every change in `perform`.)
    func checkSendPermission(_ app: AppState, _ room: Room, _ user: String, member: Member, now: Int64) throws(ChatError) {
        if room.isPermanentlyMuted(user) || room.isTempMuted(user, now: now) {
            throw ChatError(.muted, "you are muted in room \(room.key.roomId)", field: "roomId")
        }
        // AU-1: a muted tag of the member's.
        if room.isTagMuted(member.tags, now: now) { throw ChatError(.muted, "members with your tags are muted in room \(room.key.roomId)", field: "roomId") }
        // A global mute holds in every room and is not lifted by the room's allowlist.
        if app.isGloballyMuted(user, now: now) { throw ChatError(.muted, "you are muted in every room", field: "roomId") }
        if room.muted && !room.muteAllowlist.contains(user) && room.type(of: user, member: member, now: now).rank < 1 {
            throw ChatError(.muted, "room \(room.key.roomId) is muted", field: "roomId")
        }
    }
}

/// A room message as its sender would send it (PX-4: what the before-send hook judges).
public struct SendSubject: Equatable, Sendable {
    public var app: String
    public var roomId: String
    /// Empty for a server message without a user.
    public var userId: String
    public var nickname: String
    public var avatar: String
    public var ext: String
    /// The sending connection's device ("" for the app server).
    public var deviceId: String
    public var kind: ChatMessage.Kind
    public var content: String
    public var fromServer: Bool

    public init(app: String, roomId: String, userId: String, nickname: String, avatar: String, ext: String, deviceId: String,
                kind: ChatMessage.Kind, content: String, fromServer: Bool) {
        self.app = app
        self.roomId = roomId
        self.userId = userId
        self.nickname = nickname
        self.avatar = avatar
        self.ext = ext
        self.deviceId = deviceId
        self.kind = kind
        self.content = content
        self.fromServer = fromServer
    }
}
