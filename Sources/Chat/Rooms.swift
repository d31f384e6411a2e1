extension ChatDomain {
    /// Checks a room can be created: valid config, id free, and the app's room limit (ZIM-5).
    func validateCreation(_ app: AppState, _ config: RoomConfig) throws(ChatError) {
        try Validate.roomConfig(config)
        guard app.rooms[config.roomId] == nil else {
            throw ChatError(.roomExists, "room \(config.roomId) already exists", field: "roomId")
        }
        if app.settings.maxRooms > 0 && app.rooms.count >= app.settings.maxRooms {
            throw ChatError(.roomLimitReached, "the server holds its limit of \(app.settings.maxRooms) rooms", field: "roomId")
        }
    }

    /// The app's quota of rooms one user's clients may create per minute (the app server's own
    /// creations do not count); `record` counts a creation that is going ahead.
    func checkCreateQuota(_ app: AppState, user: String, now: Int64, record: Bool) throws(ChatError) {
        let limit = app.settings.roomCreatesPerUserPerMinute
        guard limit > 0 else { return }
        var times = (app.recentCreates[user] ?? []).filter { now - $0 < 60_000 }
        guard times.count < limit else {
            app.recentCreates[user] = times
            throw ChatError(.limitExceeded, "a user's clients may create at most \(limit) rooms a minute", field: "roomId")
        }
        if record { times.append(now) }
        app.recentCreates[user] = times.isEmpty ? nil : times
    }

    func createRoomCommand(_ appKey: String, _ config: RoomConfig, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        try validateCreation(app, config)
        let room = createRoom(app, config, now: now, &out)
        return .room(roomInfo(room))
    }

    /// Creates a validated room (RC-9, NIM-1, ZIM-1/3/7/8).
    @discardableResult
    func createRoom(_ app: AppState, _ config: RoomConfig, now: Int64, _ out: inout Outcome) -> Room {
        let key = RoomKey(app: app.key, roomId: config.roomId)
        let room = Room(key: key, config: config, now: now, epoch: makeID(), historyLimit: app.settings.historyLimitPerRoom,
                        defaultQueueLimit: app.settings.defaultQueueLimit)
        app.rooms[config.roomId] = room
        out.mutations.append(.putRoom(record(room)))
        if let creator = config.creator {
            var m = Member(userId: creator)
            m.role = .creator
            room.members[creator] = m
            refresh(room, creator, now: now, &out)
        }
        for user in config.muteAllowlist {
            room.muteAllowlist.append(user)
            out.mutations.append(.putAllowlist(key, user))
        }
        for (k, v) in config.attributes.sorted(by: { $0.key < $1.key }) {
            let a = Attribute(value: v, owner: config.attributesOwner ?? config.creator ?? "", autoDelete: false, updatedAt: now)
            room.attributes[k] = a
            out.mutations.append(.putAttribute(key, k, a))
        }
        scheduleRoomDeadline(room, now: now)
        out.webhooks.append(WebhookRecord(app: app.key, type: .roomCreated, roomId: config.roomId,
                                          userIds: config.creator.map { [$0] } ?? [], time: now))
        return room
    }

    /// Pushes the next moment the destroy policy should be looked at.
    func scheduleRoomDeadline(_ room: Room, now: Int64) {
        guard !room.keepAlive else { return }
        switch room.destroyPolicy {
        case .inactive(let m): deadlines.push(room.lastActivity + Int64(m) * 60_000, .room(room.key))
        case .fixed(let m): deadlines.push(room.createdAt + Int64(m) * 60_000, .room(room.key))
        case .whenEmpty(let s):
            if let since = room.emptySince { deadlines.push(since + Int64(s) * 1000, .room(room.key)) }
        }
    }

    /// ZIM-7: the last member left.
    func roomBecameEmpty(_ room: Room, _ app: AppState, now: Int64, _ out: inout Outcome) {
        room.emptySince = now
        guard !room.keepAlive, case .whenEmpty(let delay) = room.destroyPolicy else { return }
        if delay == 0 {
            destroyRoom(room, app, type: .auto, now: now, &out)
        } else {
            scheduleRoomDeadline(room, now: now)
        }
    }

    func destroyRooms(_ appKey: String, _ ids: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard !ids.isEmpty, ids.count <= 100 else { throw .invalid("roomIds", "give 1 to 100 room ids") }
        for id in ids {
            try Validate.roomId(id, field: "roomIds")
            _ = try room(app, id)
        }
        for id in Array(Set(ids)).sorted() {
            guard let room = app.rooms[id] else { continue }
            let members = room.members.keys.sorted()
            destroyRoom(room, app, type: .manual, now: now, &out)
            audit(app, .roomDestroy, by: .server, roomId: id, targets: members, now: now, &out)
        }
        return .done
    }

    /// RC-1/RC-9: everyone online is told and removed; the room and its data go.
    func destroyRoom(_ room: Room, _ app: AppState, type: DestroyType, now: Int64, _ out: inout Outcome) {
        out.deliver(.roomStatus(RoomStatusEvent(roomId: room.key.roomId, status: .destroyed(type), zimState: .disconnected,
                                                zimEvent: .roomNotExist, time: now)), to: .room(room.key))
        let present = room.presentOrder.all
        for user in present {
            for sid in room.members[user]?.sessions ?? [] {
                removeSession(room, app, sid, cause: .roomGone, now: now, &out)
            }
        }
        app.rooms[room.key.roomId] = nil
        out.mutations.append(.deleteRoom(room.key))
        out.webhooks.append(WebhookRecord(app: app.key, type: .roomDestroyed, roomId: room.key.roomId, userIds: present, time: now,
                                          cause: type == .auto ? 3 : 0, details: ["destroyType": type.rawValue]))
    }

    func updateRoom(_ appKey: String, _ roomId: String, _ update: RoomUpdate, _ actor: Actor, _ nim: NIMNotify?, _ now: Int64,
                    _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, user) = try resolve(appKey, roomId, actor)
        if let user { try requireManager(room, user, now: now) }
        if let v = update.name { try Validate.maxBytes(v, Limits.maxNameBytes, field: "name") }
        if let v = update.announcement { try Validate.maxBytes(v, Limits.maxAnnouncementBytes, field: "announcement") }
        if let v = update.ext { try Validate.maxBytes(v, Limits.maxExtBytes, field: "ext") }
        if let v = update.broadcastUrl { try Validate.maxBytes(v, Limits.maxBroadcastUrlBytes, field: "broadcastUrl") }
        if let p = update.destroyPolicy { try Validate.destroyPolicy(p) }
        if let q = update.queueLimit, q < 1 || q > Limits.maxQueueLimit { throw .invalid("queueLimit", "queueLimit must be between 1 and \(Limits.maxQueueLimit)") }
        let nim = try validateNotify(nil, nim).nim
        if let v = update.name { room.name = v }
        if let v = update.announcement { room.announcement = v }
        if let v = update.ext { room.ext = v }
        if let v = update.broadcastUrl { room.broadcastUrl = v }
        if let v = update.queueModificationLevel { room.queueModificationLevel = v }
        if let v = update.multiDevice { room.multiDevice = v }
        if let v = update.enterExitNotifications { room.enterExitNotifications = v }
        if let v = update.queueLimit { room.queueLimit = v }
        var reschedule = false
        if let v = update.destroyPolicy {
            room.destroyPolicy = v
            reschedule = true
        }
        if let v = update.keepAlive, v != room.keepAlive {
            room.keepAlive = v
            reschedule = true
        }
        if reschedule {
            if room.presentOrder.isEmpty && room.emptySince == nil { room.emptySince = now }
            scheduleRoomDeadline(room, now: now)
        }
        out.mutations.append(.putRoom(record(room)))
        if let nim {
            out.deliver(.notification(NotificationEvent(roomId: roomId, type: .infoUpdated, source: user.map { memberInfo(room, $0, now: now) },
                                                        targets: [], notifyExt: nim.notifyExt, ext: .none, time: now)), to: .room(room.key))
        }
        _ = app
        return .room(roomInfo(room))
    }

    /// NIM-1 open/close. Closing tells the room (311), kicks everyone with reason 1, and refuses
    /// entry until reopened.
    func setRoomOpen(_ appKey: String, _ roomId: String, _ open: Bool, _ actor: Actor, _ nim: NIMNotify?, _ now: Int64,
                     _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, user) = try resolve(appKey, roomId, actor)
        if let user {
            guard room.type(of: user, now: now) == .creator else {
                throw ChatError(.permissionDenied, "only the creator may open or close the room", field: "operator")
            }
        }
        // Closing always tells the room and kicks everyone (with notifyExt when given).
        if let nim { try Validate.notifyExt(nim.notifyExt) }
        // MO-8: an accepted call is recorded, whether or not the room was already so.
        audit(app, open ? .roomOpen : .roomClose, by: actor, roomId: roomId, now: now, &out)
        guard room.open != open else { return .room(roomInfo(room)) }
        if !open {
            out.deliver(.notification(NotificationEvent(roomId: roomId, type: .closed, source: user.map { memberInfo(room, $0, now: now) },
                                                        targets: [], notifyExt: nim?.notifyExt ?? "", ext: .none, time: now)), to: .room(room.key))
            out.deliver(.kicked(KickedEvent(roomId: roomId, reason: .roomClosed, ext: nim?.notifyExt ?? "", time: now)), to: .room(room.key))
            let present = room.presentOrder.all
            for u in present {
                for sid in room.members[u]?.sessions ?? [] { removeSession(room, app, sid, cause: .roomGone, now: now, &out) }
            }
            if !present.isEmpty {
                out.webhooks.append(WebhookRecord(app: app.key, type: .memberKicked, roomId: roomId, userIds: present, time: now,
                                                  details: ["reason": "roomClosed"]))
            }
            room.emptySince = now
        }
        room.open = open
        out.mutations.append(.putRoom(record(room)))
        return .room(roomInfo(room))
    }
}
