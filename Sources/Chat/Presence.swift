/// Why a session leaves a room; decides the events the departure causes.
enum LeaveCause: Equatable {
    /// The client left (RC-1 quit, NIM-7 exit, ZIM-6 leave).
    case voluntary
    /// The connection dropped.
    case disconnected
    /// Moved to another room (ZIM-5): like a voluntary leave.
    case switched
    /// Kicked (NIM-6); the kick notification is sent by the caller.
    case kicked(KickReason, ext: String)
    /// RC-4: the user joined another room and may only be in one.
    case oneRoomRule
    /// The room closed or was destroyed: everyone leaves, no per-user events.
    case roomGone
}

extension ChatDomain {
    // MARK: Sessions

    func connect(_ id: SessionID, _ appKey: String, _ userId: String?, _ deviceId: String, _ anonymous: AnonymousProfile?,
                 _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard sessions[id] == nil else { throw .invalid("session", "session \(id) is already connected") }
        try Validate.maxBytes(deviceId, 64, field: "deviceId")
        let user: String
        var nickname = "", avatar = ""
        if let userId {
            try Validate.userId(userId)
        }
        if let anonymous {
            // NIM-3: anonymous members must bring a nickname and an avatar.
            guard !anonymous.nickname.isEmpty else { throw .invalid("anonymous.nickname", "anonymous members need a nickname") }
            guard !anonymous.avatar.isEmpty else { throw .invalid("anonymous.avatar", "anonymous members need an avatar") }
            try Validate.maxBytes(anonymous.nickname, Limits.maxNicknameBytes, field: "anonymous.nickname")
            try Validate.maxBytes(anonymous.avatar, Limits.maxAvatarBytes, field: "anonymous.avatar")
            nickname = anonymous.nickname
            avatar = anonymous.avatar
        }
        if let userId {
            user = userId
        } else {
            guard anonymous != nil else { throw .invalid("userId", "a userId or an anonymous profile is required") }
            user = "anon-" + makeID()
        }
        sessions[id] = Session(app: app, userId: user, deviceId: deviceId, anonymous: userId == nil,
                               nickname: nickname, avatar: avatar, connectedAt: now)
        // PX-3: the user's first connection makes it online, unless it comes back within the grace.
        if userId != nil && app.userSessions[user] == nil && app.goingOffline.removeValue(forKey: user) == nil {
            out.webhooks.append(WebhookRecord(app: appKey, type: .userOnline, roomId: "", userIds: [user], time: now,
                                              details: ["device": deviceId]))
            out.mutations.append(.putOnlineUser(app: appKey, user, device: deviceId))
        }
        app.userSessions[user, default: []].append(id)
        return .session(userId: user)
    }

    func disconnect(_ id: SessionID, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let s = try session(id)
        let app = try app(s.app)
        for roomId in s.rooms {
            if let room = app.rooms[roomId] { removeSession(room, app, id, cause: .disconnected, now: now, &out) }
        }
        sessions[id] = nil
        app.userSessions[s.userId]?.removeAll { $0 == id }
        if app.userSessions[s.userId]?.isEmpty == true {
            app.userSessions[s.userId] = nil
            // PX-3: the last connection went: offline once the grace has passed without a new one.
            if !s.anonymous {
                if presenceGraceMilliseconds <= 0 {
                    out.webhooks.append(WebhookRecord(app: s.app, type: .userOffline, roomId: "", userIds: [s.userId], time: now,
                                                      details: ["device": s.deviceId]))
                    out.mutations.append(.deleteOnlineUser(app: s.app, s.userId))
                } else {
                    app.goingOffline[s.userId] = (now, s.deviceId)
                    deadlines.push(now + presenceGraceMilliseconds, .offline(app: s.app, user: s.userId))
                }
            }
        }
        return .done
    }

    /// The user's sessions other than `except`.
    func otherSessions(_ app: AppState, _ user: String, except: SessionID) -> [SessionID] {
        (app.userSessions[user] ?? []).filter { $0 != except }
    }

    // MARK: Join

    func join(_ sid: SessionID, _ roomId: String, _ profile: EnterProfile, _ mode: JoinMode, _ now: Int64,
              _ out: inout Outcome) throws(ChatError) -> Reply {
        let s = try session(sid)
        let app = try app(s.app)
        try Validate.roomId(roomId)
        try Validate.profile(profile)
        var created: RoomConfig?
        let existing = app.rooms[roomId]
        switch mode {
        case .join:
            guard existing != nil else { throw ChatError(.roomNotFound, "room \(roomId) does not exist", field: "roomId") }
        case .enter(let config):
            if existing == nil { created = config }
        case .create(let config):
            guard existing == nil else { throw ChatError(.roomExists, "room \(roomId) already exists", field: "roomId") }
            created = config
        }
        if var config = created {
            // NIM-3: an anonymous member joins rooms but does not create them (nor their attributes).
            if s.anonymous { throw ChatError.anonymousReadOnly() }
            config.roomId = roomId
            if config.creator == nil { config.creator = s.userId }
            try validateCreation(app, config)
            try checkCreateQuota(app, user: s.userId, now: now, record: false)
        }
        // AU-1: the member's tags (checked before anything changes).
        let tags = try profile.tags.map { t throws(ChatError) in try Validate.tags(t, field: "tags") }
        if let tags, let existing {
            try checkTagIndex(existing, adding: tags, removing: existing.members[s.userId]?.isOnline == true ? existing.members[s.userId]!.tags : [])
        }
        var profile = profile
        profile.tags = tags
        if let existing {
            if existing.members[s.userId]?.sessions.contains(sid) == true {
                // Already in: answer again without telling anyone.
                let info = JoinInfo(memberCount: existing.memberCount, joinTime: existing.members[s.userId]!.enterTime, room: roomInfo(existing))
                out.deliver(.roomStatus(RoomStatusEvent(roomId: roomId, status: .joining, zimState: .connecting, zimEvent: .success, time: now)),
                            to: .sessions([sid]))
                out.deliver(.roomStatus(RoomStatusEvent(roomId: roomId, status: .joined(info), zimState: .connected, zimEvent: .success, time: now)),
                            to: .sessions([sid]))
                return .joined(info)
            }
            try checkEntry(existing, app, s, now: now, joining: true)
        } else {
            try checkRoomCount(app, s, now: now)
        }
        out.deliver(.roomStatus(RoomStatusEvent(roomId: roomId, status: .joining, zimState: .connecting, zimEvent: .success, time: now)),
                    to: .sessions([sid]))
        let room: Room
        if let config = created {
            var c = config
            c.roomId = roomId
            if c.creator == nil { c.creator = s.userId }
            try checkCreateQuota(app, user: s.userId, now: now, record: true)
            room = createRoom(app, c, now: now, &out)
        } else {
            room = existing!
        }
        let info = addSession(room, app, sid, profile, now: now, oneRoomRule: true, &out)
        out.deliver(.roomStatus(RoomStatusEvent(roomId: roomId, status: .joined(info), zimState: .connected, zimEvent: .success, time: now)),
                    to: .sessions([sid]))
        return .joined(info)
    }

    /// Refusals of an entry, checked before anything changes.
    func checkEntry(_ room: Room, _ app: AppState, _ s: Session, now: Int64, joining: Bool) throws(ChatError) {
        guard room.open else { throw ChatError(.roomClosed, "room \(room.key.roomId) is closed", field: "roomId") }
        if room.isBlocked(s.userId, now: now) {
            throw ChatError(.blocked, "you are blocked from room \(room.key.roomId)", field: "roomId")
        }
        try checkRoomCount(app, s, now: now, joining: room.key.roomId)
    }

    /// NIM-2: at most `maxRoomsPerUser` rooms at once (RC-4 instead moves the user when only one
    /// room is allowed).
    func checkRoomCount(_ app: AppState, _ s: Session, now: Int64, joining roomId: String? = nil) throws(ChatError) {
        guard app.settings.multipleRoomsPerUser else { return }
        let userSessions = app.userSessions[s.userId] ?? []
        let count: Int
        if userSessions.count <= 1 {
            count = s.rooms.count - (roomId.map { s.rooms.contains($0) ? 1 : 0 } ?? 0)
        } else {
            var rooms = Set<String>()
            for other in userSessions { rooms.formUnion(sessions[other]?.rooms ?? []) }
            if let roomId { rooms.remove(roomId) }
            count = rooms.count
        }
        if count >= app.settings.maxRoomsPerUser {
            throw ChatError(.limitExceeded, "a user may be in at most \(app.settings.maxRoomsPerUser) rooms at once", field: "roomId")
        }
    }

    /// Adds a session to a room and emits what the entry causes. Preconditions were checked.
    @discardableResult
    func addSession(_ room: Room, _ app: AppState, _ sid: SessionID, _ profile: EnterProfile, now: Int64, oneRoomRule: Bool,
                    _ out: inout Outcome) -> JoinInfo {
        let s = sessions[sid]!
        let user = s.userId

        // RC-4: only one room per user; the user leaves every other room (all devices).
        if oneRoomRule && !app.settings.multipleRoomsPerUser {
            var others: [String] = []
            for other in app.userSessions[user] ?? [] {
                for r in sessions[other]?.rooms ?? [] where r != room.key.roomId && !others.contains(r) { others.append(r) }
            }
            for r in others {
                guard let previous = app.rooms[r] else { continue }
                let sync = MultiLoginSyncEvent(roomId: r, status: 0, reason: 2, time: now, extra: "")
                // The user and every member of the room left behind are told.
                out.deliver(.multiLoginSync(sync), to: .room(previous.key))
                let elsewhere = (app.userSessions[user] ?? []).filter { !(sessions[$0]?.rooms.contains(r) ?? false) }
                if !elsewhere.isEmpty { out.deliver(.multiLoginSync(sync), to: .sessions(elsewhere)) }
                for other in previous.members[user]?.sessions ?? [] {
                    removeSession(previous, app, other, cause: .oneRoomRule, now: now, &out)
                }
            }
        }

        // One look-up: update the member record in place and keep a copy for the events.
        let (newlyPresent, oldTags, member) = room.members.modify(user, default: Member(userId: user)) { m -> (Bool, [String], Member) in
            let newly = !m.isOnline
            let old = newly ? [] : m.tags
            m.anonymous = s.anonymous
            m.update { d in
                d.nickname = profile.nickname.isEmpty ? (d.nickname.isEmpty ? s.nickname : d.nickname) : profile.nickname
                d.avatar = profile.avatar.isEmpty ? (d.avatar.isEmpty ? s.avatar : d.avatar) : profile.avatar
                if !profile.ext.isEmpty || newly { d.ext = profile.ext }
                // AU-1: a join that gives tags sets them; a member's first entry without starts with none.
                if let tags = profile.tags { d.tags = tags } else if newly { d.tags = [] }
                if profile.notifyTargetTags != nil || newly { d.notifyTargetTags = profile.notifyTargetTags }
            }
            m.sessions.append(sid)
            if newly {
                m.enterTime = now
                // Its place in the join order (no second look-up).
                if m.presentSlot < 0 { m.presentSlot = room.presentOrder.append(user) }
            }
            return (newly, old, m)
        }
        // AU-1: the room's tag index, and the hubs: this session matches by the member's tags, and
        // its other sessions by the new ones if they changed.
        if oldTags != member.tags { reindexTags(room, from: oldTags, to: member.tags) }
        if !member.tags.isEmpty || oldTags != member.tags {
            out.effects.append(.tagged(oldTags != member.tags ? Array(member.sessions) : [sid], room.key, member.tags))
        }
        sessions[sid]!.rooms.append(room.key.roomId)
        room.lastActivity = now
        room.emptySince = nil
        out.effects.append(.joined(sid, room.key))
        // NIM-4: single-device rooms keep only the newest device (after the new one is in, so the
        // user never counts as having left).
        if room.multiDevice == .single {
            for old in member.sessions where old != sid {
                removeSession(room, app, old, cause: .kicked(.conflictingLogin, ext: ""), now: now, &out)
            }
        }
        if member.role != .none || (!room.fixed.isEmpty && room.fixed.contains(user)) {
            // Profile changes of fixed members are durable.
            let m = member
            out.mutations.append(.putMember(room.key, MemberRecord(userId: user, role: m.role, nickname: m.nickname, avatar: m.avatar, ext: m.ext)))
        }

        // AU-4: the connection's choice of member events.
        if profile.memberCountsOnly == true { room.countsOnly.insert(sid) }
        if newlyPresent {
            let batched = summarizesMembers(room, app, count: room.memberCount)
            noteMemberChange(room, app, user, joined: true, batched: batched, now: now)
            if app.settings.memberChangeEvents && !batched {
                let change = MemberChange(userId: user, action: .join, nickname: member.nickname, avatar: member.avatar)
                out.deliver(.memberChanged(MemberChangedEvent(roomId: room.key.roomId, changes: [change], memberCount: room.memberCount)),
                            to: .roomMemberDetail(room.key, except: .user(user), tags: nil))
            }
            if app.settings.enterExitNotifications && room.enterExitNotifications && !batched {
                let info = memberInfo(room, user, member: member, now: now)
                out.deliver(.notification(NotificationEvent(roomId: room.key.roomId, type: .enter, source: info, targets: [info],
                                                            notifyExt: profile.notifyExt, ext: .none, time: now)),
                            to: Self.notifyAudience(room.key, member))
            }
            out.webhooks.append(WebhookRecord(app: app.key, type: .memberJoined, roomId: room.key.roomId, userIds: [user], time: now))
        }
        // RC-3: the user's other online devices learn about the join.
        let others = otherSessions(app, user, except: sid)
        if !others.isEmpty {
            out.deliver(.multiLoginSync(MultiLoginSyncEvent(roomId: room.key.roomId, status: 1, reason: 0, time: now, extra: "")),
                        to: .sessions(others))
        }
        return JoinInfo(memberCount: room.memberCount, joinTime: now, room: roomInfo(room))
    }

    /// AU-1: a member's enter and exit notifications go to the members its `notifyTargetTags`
    /// match, or to everyone else in the room (AU-4: not to counts-only connections).
    static func notifyAudience(_ room: RoomKey, _ member: Member) -> Audience {
        .roomMemberDetail(room, except: .user(member.userId), tags: member.notifyTargetTags)
    }

    // MARK: Leave

    func leave(_ sid: SessionID, _ roomId: String, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let s = try session(sid)
        let app = try app(s.app)
        let room = try room(app, roomId)
        guard s.rooms.contains(roomId) else { throw ChatError(.notInRoom, "not in room \(roomId)", field: "roomId") }
        removeSession(room, app, sid, cause: .voluntary, now: now, &out)
        return .done
    }

    /// ZIM-6: leaves every room of this device only; returns the ids left.
    func leaveAll(_ sid: SessionID, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let s = try session(sid)
        let app = try app(s.app)
        let left = s.rooms
        for roomId in left {
            if let room = app.rooms[roomId] { removeSession(room, app, sid, cause: .voluntary, now: now, &out) }
        }
        return .roomIds(Array(left))
    }

    /// ZIM-5 switchRoom, with the seed's event sequence.
    func switchRoom(_ sid: SessionID, _ from: String, _ to: RoomConfig, _ createIfMissing: Bool, _ profile: EnterProfile,
                    _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let s = try session(sid)
        let app = try app(s.app)
        try Validate.roomId(from, field: "fromRoomId")
        try Validate.roomId(to.roomId, field: "toRoomId")
        try Validate.profile(profile)
        let source = try room(app, from)
        guard s.rooms.contains(from) else { throw ChatError(.notInRoom, "not in room \(from)", field: "fromRoomId") }
        guard to.roomId != from else { throw .invalid("toRoomId", "cannot switch to the same room") }
        var toCreate: RoomConfig?
        if let target = app.rooms[to.roomId] {
            try checkEntry(target, app, s, now: now, joining: true)
        } else {
            guard createIfMissing else { throw ChatError(.roomNotFound, "room \(to.roomId) does not exist", field: "toRoomId") }
            if s.anonymous { throw ChatError.anonymousReadOnly() }
            var c = to
            if c.creator == nil { c.creator = s.userId }
            try validateCreation(app, c)
            try checkCreateQuota(app, user: s.userId, now: now, record: false)
            toCreate = c
        }
        out.deliver(.roomStatus(RoomStatusEvent(roomId: to.roomId, status: .joining, zimState: .connecting, zimEvent: .activeSwitch, time: now)),
                    to: .sessions([sid]))
        if toCreate != nil { try checkCreateQuota(app, user: s.userId, now: now, record: true) }
        let target = toCreate.map { createRoom(app, $0, now: now, &out) } ?? app.rooms[to.roomId]!
        let info: JoinInfo
        if target.members[s.userId]?.sessions.contains(sid) == true {
            info = JoinInfo(memberCount: target.memberCount, joinTime: now, room: roomInfo(target))
        } else {
            info = addSession(target, app, sid, profile, now: now, oneRoomRule: false, &out)
        }
        out.deliver(.roomStatus(RoomStatusEvent(roomId: to.roomId, status: .joined(info), zimState: .connected, zimEvent: .success, time: now)),
                    to: .sessions([sid]))
        removeSession(source, app, sid, cause: .switched, now: now, &out)
        return .joined(info)
    }

    /// Removes a session from a room and emits what the departure causes.
    func removeSession(_ room: Room, _ app: AppState, _ sid: SessionID, cause: LeaveCause, now: Int64, _ out: inout Outcome) {
        guard let user = sessions[sid]?.userId else { return }
        // One look-up: take the session out of the member record in place.
        guard let member = room.members[user]?.removeSession(sid) else { return }
        sessions[sid]?.rooms.removeAll { $0 == room.key.roomId }
        if !room.countsOnly.isEmpty { room.countsOnly.remove(sid) }

        // What the departing connection is told.
        switch cause {
        case .voluntary, .switched, .oneRoomRule:
            // RC-4: a connection moved out by the one-room rule is told it quit that room too
            // (a client library then knows not to re-join it after a reconnect).
            out.deliver(.roomStatus(RoomStatusEvent(roomId: room.key.roomId, status: .quit, zimState: .disconnected, zimEvent: .success, time: now)),
                        to: .sessions([sid]))
        case .kicked(let reason, let ext):
            out.deliver(.kicked(KickedEvent(roomId: room.key.roomId, reason: reason, ext: ext, time: now)), to: .sessions([sid]))
        case .disconnected, .roomGone:
            break
        }
        out.effects.append(.left(sid, room.key))

        let fullyLeft = !member.isOnline
        // AU-1: a member that left carries no tags in the room's index.
        if fullyLeft { reindexTags(room, from: member.tags, to: []) }
        if fullyLeft && cause != .roomGone {
            let batched = summarizesMembers(room, app, count: room.memberCount)
            room.removePresent(user)
            noteMemberChange(room, app, user, joined: false, batched: batched, now: now)
            if app.settings.memberChangeEvents && !batched {
                let change = MemberChange(userId: user, action: .quit, nickname: member.nickname, avatar: member.avatar)
                out.deliver(.memberChanged(MemberChangedEvent(roomId: room.key.roomId, changes: [change], memberCount: room.memberCount)),
                            to: .roomMemberDetail(room.key, except: .user(user), tags: nil))
            }
            let exitNotice = cause == .voluntary || cause == .disconnected || cause == .switched
            if exitNotice && app.settings.enterExitNotifications && room.enterExitNotifications && !batched {
                let info = memberInfo(room, user, member: member, now: now)
                out.deliver(.notification(NotificationEvent(roomId: room.key.roomId, type: .exit, source: info, targets: [info],
                                                            notifyExt: "", ext: .none, time: now)),
                            to: Self.notifyAudience(room.key, member))
            }
            ownerLeft(room, app, user, now: now, &out)
            let (type, status): (WebhookEventType, Int)
            switch cause {
            case .kicked(.blocklisted, _): (type, status) = (.memberBlocked, 2)
            case .kicked: (type, status) = (.memberKicked, 0)
            case .disconnected: (type, status) = (.memberLeft, 1)
            default: (type, status) = (.memberLeft, 0)
            }
            out.webhooks.append(WebhookRecord(app: app.key, type: type, roomId: room.key.roomId, userIds: [user], time: now, cause: status))
            refresh(room, user, now: now, &out)
            if room.presentOrder.isEmpty { roomBecameEmpty(room, app, now: now, &out) }
        } else if fullyLeft {
            // The room itself is going: no per-user changes are recorded.
            room.removePresent(user)
            if !room.fixed.contains(user) { room.members[user] = nil }
        }
        // RC-3: the user's other devices learn about a departure on this one.
        if cause == .voluntary || cause == .disconnected || cause == .switched {
            let others = otherSessions(app, user, except: sid)
            if !others.isEmpty {
                out.deliver(.multiLoginSync(MultiLoginSyncEvent(roomId: room.key.roomId, status: 0, reason: 1, time: now, extra: "")),
                            to: .sessions(others))
            }
        }
    }

    /// The owner is gone from the room: its transient queue elements (NIM-16, one 320 partial
    /// clear) and autoDelete attributes (RC-10) go too.
    func ownerLeft(_ room: Room, _ app: AppState, _ user: String, now: Int64, _ out: inout Outcome) {
        guard !room.queue.isEmpty || !room.attributes.isEmpty else { return }
        let transient = room.queueOrder.all.filter { room.queue[$0]?.transient == true && room.queue[$0]?.owner == user }
        if !transient.isEmpty {
            var removed: [(key: String, value: String)] = []
            for key in transient {
                removed.append((key, room.queue[key]!.value))
                room.queue[key] = nil
                room.queueOrder.remove(key)
            }
            out.deliver(.notification(NotificationEvent(roomId: room.key.roomId, type: .queueBatchChange, source: nil,
                                                        targets: [memberInfo(room, user, now: now)], notifyExt: "",
                                                        ext: .queueBatch(.partialClear, elements: removed), time: now)),
                        to: .room(room.key))
            out.webhooks.append(WebhookRecord(app: app.key, type: .queueChanged, roomId: room.key.roomId, userIds: [user], time: now,
                                              details: ["changeType": "partialClear", "keys": removed.map(\.key).joined(separator: ",")]))
        }
        let owned = room.attributes.filter { $0.value.autoDelete && $0.value.owner == user }.map(\.key).sorted()
        if !owned.isEmpty {
            for k in owned {
                room.attributes[k] = nil
                out.mutations.append(.deleteAttribute(room.key, k))
            }
            out.deliver(.attributesChanged(AttributesEvent(roomId: room.key.roomId, updated: [], removed: owned, operatorId: user, time: now)),
                        to: .room(room.key))
        }
    }

    // MARK: NIM-14

    func updateMyInfo(_ sid: SessionID, _ roomId: String, _ nickname: String?, _ avatar: String?, _ ext: String?, _ notifyExt: String,
                      _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let s = try session(sid)
        let (_, room, user) = try resolve(s.app, roomId, .session(sid))
        let u = user!
        if let nickname { try Validate.maxBytes(nickname, Limits.maxNicknameBytes, field: "nickname") }
        if let avatar { try Validate.maxBytes(avatar, Limits.maxAvatarBytes, field: "avatar") }
        if let ext { try Validate.maxBytes(ext, Limits.maxExtBytes, field: "ext") }
        try Validate.notifyExt(notifyExt)
        guard nickname != nil || avatar != nil || ext != nil else { throw .invalid("nickname", "nothing to update") }
        if let nickname { room.members[u]!.nickname = nickname }
        if let avatar { room.members[u]!.avatar = avatar }
        if let ext { room.members[u]!.ext = ext }
        if room.fixed.contains(u) {
            let m = room.members[u]!
            out.mutations.append(.putMember(room.key, MemberRecord(userId: u, role: m.role, nickname: m.nickname, avatar: m.avatar, ext: m.ext)))
        }
        let info = memberInfo(room, u, now: now)
        out.deliver(.notification(NotificationEvent(roomId: roomId, type: .memberInfoUpdated, source: info, targets: [info],
                                                    notifyExt: notifyExt, ext: .none, time: now)), to: .room(room.key))
        return .done
    }
}
