extension ChatDomain {
    // MARK: Permission (NIM-12, NIM-15)

    /// The operator must be the creator or a manager.
    func requireManager(_ room: Room, _ user: String, now: Int64) throws(ChatError) {
        guard room.type(of: user, now: now).rank >= 1 else {
            throw ChatError(.permissionDenied, "only the creator and managers may do this", field: "operator")
        }
    }

    /// A client operator may act only on members of a lower role: managers on common members and
    /// below, the creator on everyone but itself. The app server may act on anyone.
    func authorize(_ room: Room, operator user: String?, on targets: [String], now: Int64) throws(ChatError) {
        guard let user else { return }
        let rank = room.type(of: user, now: now).rank
        guard rank >= 1 else { throw ChatError(.permissionDenied, "only the creator and managers may do this", field: "operator") }
        for t in targets {
            guard t != user else { throw ChatError(.permissionDenied, "you cannot act on yourself", field: "userIds") }
            guard room.type(of: t, now: now).rank < rank else {
                throw ChatError(.permissionDenied, "\(t) has a role at least as high as yours", field: "userIds")
            }
        }
    }

    func infos(_ room: Room, _ users: [String], now: Int64) -> [MemberInfo] {
        users.map { memberInfo(room, $0, now: now) }
    }

    func notify(_ room: Room, _ type: NotificationType, source: String?, targets: [String], _ nim: NIMNotify?, ext: NotificationExt = .none,
                now: Int64, _ out: inout Outcome) {
        guard let nim else { return }
        out.deliver(.notification(NotificationEvent(roomId: room.key.roomId, type: type, source: source.map { memberInfo(room, $0, now: now) },
                                                    targets: infos(room, targets, now: now), notifyExt: nim.notifyExt, ext: ext, time: now)),
                    to: .room(room.key))
    }

    /// RC-8, NIM-9, SPEC §13: `extra` and `notifyExt` are checked whenever they are given, whether
    /// or not a notification goes out. Returns the notifications to send (`needNotify`).
    func validateNotify(_ rc: RCNotify?, _ nim: NIMNotify?) throws(ChatError) -> (rc: RCNotify?, nim: NIMNotify?) {
        if let rc { try Validate.extra(rc.extra) }
        if let nim { try Validate.notifyExt(nim.notifyExt) }
        return (rc?.needNotify == true ? rc : nil, nim?.needNotify == true ? nim : nil)
    }

    // MARK: Blocks (RC-5, NIM-12 blocklist)

    func block(_ appKey: String, _ roomId: String, _ users: [String], _ minutes: Int?, _ actor: Actor, _ rc: RCNotify?, _ nim: NIMNotify?,
               _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        try Validate.userIds(users)
        if let minutes { try Validate.minutes(minutes) }
        let (rc, nim) = try validateNotify(rc, nim)
        try authorize(room, operator: op, on: users, now: now)
        if users.contains(room.creator) && op != nil { throw ChatError(.permissionDenied, "the creator cannot be blocked", field: "userIds") }
        try checkFixedCapacity(room, adding: users, now: now)

        let until = minutes.map { now + Int64($0) * 60_000 } ?? Int64.max
        // Told first, so the blocked users still in the room receive it (RC-5: all members,
        // including the blocked ones).
        if let rc {
            out.deliver(.block(BlockEvent(roomId: roomId, operateType: 1, durationTime: minutes.map { Int64($0) * 60_000 } ?? 0,
                                          operateTime: now, userIdList: users, extra: rc.extra)), to: .room(room.key))
        }
        for u in users {
            room.blocks[u] = until
            // Blocklisting makes a fixed (limited) member and ends a granted role (NIM-12).
            if room.members[u]?.role == .manager || room.members[u]?.role == .common { room.members[u]!.role = .none }
            refresh(room, u, now: now, &out)
            out.mutations.append(.putBlock(room.key, u, until: until))
            if until != Int64.max { deadlines.push(until, .block(room.key, u)) }
        }
        notify(room, .blocklistAdd, source: op, targets: users, nim, now: now, &out)
        for u in users {
            for sid in room.members[u]?.sessions ?? [] {
                removeSession(room, app, sid, cause: .kicked(.blocklisted, ext: nim?.notifyExt ?? ""), now: now, &out)
            }
        }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, userIds: users, time: now,
                                          details: ["action": "block", "minutes": minutes.map(String.init) ?? "permanent"]))
        audit(app, .block, by: actor, roomId: roomId, targets: users, durationMs: minutes.map { Int64($0) * 60_000 }, now: now, &out)
        return .done
    }

    func unblock(_ appKey: String, _ roomId: String, _ users: [String], _ actor: Actor, _ rc: RCNotify?, _ nim: NIMNotify?,
                 _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        try Validate.userIds(users)
        let (rc, nim) = try validateNotify(rc, nim)
        try authorize(room, operator: op, on: users, now: now)
        for u in users where room.blocks[u] != nil {
            room.blocks[u] = nil
            out.mutations.append(.deleteBlock(room.key, u))
            refresh(room, u, now: now, &out)
        }
        // RC-5: only the unblocked users are told.
        if let rc {
            out.deliver(.block(BlockEvent(roomId: roomId, operateType: 0, durationTime: 0, operateTime: now, userIdList: users, extra: rc.extra)),
                        to: .users(app: appKey, users))
        }
        notify(room, .blocklistRemove, source: op, targets: users, nim, now: now, &out)
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, userIds: users, time: now, details: ["action": "unblock"]))
        audit(app, .unblock, by: actor, roomId: roomId, targets: users, now: now, &out)
        return .done
    }

    // MARK: Mutes (RC-6 0/1, NIM-12 mute and temp mute)

    func mute(_ appKey: String, _ roomId: String, _ users: [String], _ duration: MuteDuration, _ actor: Actor, _ rc: RCNotify?,
              _ nim: NIMNotify?, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        try Validate.userIds(users)
        let durationMs: Int64
        switch duration {
        case .minutes(let m):
            try Validate.minutes(m)
            durationMs = Int64(m) * 60_000
        case .seconds(let s):
            guard s >= 1 && s <= Int64(Limits.maxTempMuteSeconds) else {
                throw .invalid("seconds", "seconds must be between 1 and \(Limits.maxTempMuteSeconds)")
            }
            durationMs = s * 1000
        case .permanent:
            durationMs = 0
            try checkFixedCapacity(room, adding: users, now: now)
        }
        let (rc, nim) = try validateNotify(rc, nim)
        try authorize(room, operator: op, on: users, now: now)
        for u in users {
            if duration == .permanent {
                // A permanent mute makes a fixed member and leaves any temporary mute alone.
                room.permanentMutes.insert(u)
                out.mutations.append(.putPermanentMute(room.key, u))
                refresh(room, u, now: now, &out)
            } else {
                // A new temporary mute replaces the old one (no accumulation) and never changes identity.
                let until = now + durationMs
                room.tempMutes[u] = until
                out.mutations.append(.putTempMute(room.key, u, until: until))
                deadlines.push(until, .tempMute(room.key, u))
            }
        }
        if let rc {
            out.deliver(.ban(BanEvent(roomId: roomId, banType: .muteUsers, durationTime: durationMs, operateTime: now, userIdList: users,
                                      extra: rc.extra)), to: .room(room.key))
        }
        if duration == .permanent {
            notify(room, .muteAdd, source: op, targets: users, nim, now: now, &out)
        } else {
            notify(room, .tempMuteAdd, source: op, targets: users, nim, ext: .tempMute(durationSeconds: durationMs / 1000), now: now, &out)
        }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, userIds: users, time: now,
                                          details: ["action": "mute", "durationMs": String(durationMs)]))
        audit(app, .mute, by: actor, roomId: roomId, targets: users, durationMs: duration == .permanent ? nil : durationMs,
              detail: duration == .permanent ? "permanent" : "temporary", now: now, &out)
        return .done
    }

    func unmute(_ appKey: String, _ roomId: String, _ users: [String], _ kind: UnmuteKind, _ actor: Actor, _ rc: RCNotify?,
                _ nim: NIMNotify?, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        try Validate.userIds(users)
        let (rc, nim) = try validateNotify(rc, nim)
        try authorize(room, operator: op, on: users, now: now)
        var removedPermanent: [String] = [], removedTemporary: [String] = []
        for u in users {
            if kind != .temporary, room.permanentMutes.remove(u) != nil {
                removedPermanent.append(u)
                out.mutations.append(.deletePermanentMute(room.key, u))
                refresh(room, u, now: now, &out)
            }
            if kind != .permanent, room.tempMutes.removeValue(forKey: u) != nil {
                removedTemporary.append(u)
                out.mutations.append(.deleteTempMute(room.key, u))
            }
        }
        if let rc {
            out.deliver(.ban(BanEvent(roomId: roomId, banType: .unmuteUsers, durationTime: 0, operateTime: now, userIdList: users, extra: rc.extra)),
                        to: .room(room.key))
        }
        if kind != .temporary { notify(room, .muteRemove, source: op, targets: users, nim, now: now, &out) }
        if kind != .permanent { notify(room, .tempMuteRemove, source: op, targets: users, nim, ext: .tempMute(durationSeconds: 0), now: now, &out) }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, userIds: users, time: now,
                                          details: ["action": "unmute", "kind": kind.rawValue]))
        audit(app, .unmute, by: actor, roomId: roomId, targets: users, detail: kind.rawValue, now: now, &out)
        return .done
    }

    // MARK: Room-wide mute and allowlist (RC-6 2–5, NIM-17)

    func setRoomMuted(_ appKey: String, _ roomId: String, _ muted: Bool, _ actor: Actor, _ rc: RCNotify?, _ nim: NIMNotify?,
                      _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        if let op { try requireManager(room, op, now: now) }
        let (rc, nim) = try validateNotify(rc, nim)
        room.muted = muted
        out.mutations.append(.putRoom(record(room)))
        if let rc {
            out.deliver(.ban(BanEvent(roomId: roomId, banType: muted ? .roomMuteOn : .roomMuteOff, durationTime: 0, operateTime: now,
                                      userIdList: [], extra: rc.extra)), to: .room(room.key))
        }
        notify(room, muted ? .roomMuted : .roomUnmuted, source: op, targets: [], nim, now: now, &out)
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, time: now,
                                          details: ["action": muted ? "roomMute" : "roomUnmute"]))
        audit(app, muted ? .roomMute : .roomUnmute, by: actor, roomId: roomId, now: now, &out)
        return .done
    }

    func changeAllowlist(_ appKey: String, _ roomId: String, _ users: [String], add: Bool, _ rc: RCNotify?, _ now: Int64,
                         _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, _) = try resolve(appKey, roomId, .server)
        try Validate.userIds(users)
        let rc = try validateNotify(rc, nil).rc
        if add {
            let newcomers = users.filter { !room.muteAllowlist.contains($0) }.count
            guard room.muteAllowlist.count + newcomers <= Limits.maxAllowlist else {
                throw ChatError(.limitExceeded, "the mute allowlist holds at most \(Limits.maxAllowlist) users", field: "userIds")
            }
        }
        for u in users {
            if add {
                if room.muteAllowlist.append(u) { out.mutations.append(.putAllowlist(room.key, u)) }
            } else if room.muteAllowlist.remove(u) {
                out.mutations.append(.deleteAllowlist(room.key, u))
            }
        }
        if let rc {
            out.deliver(.ban(BanEvent(roomId: roomId, banType: add ? .allowlistAdd : .allowlistRemove, durationTime: 0, operateTime: now,
                                      userIdList: users, extra: rc.extra)), to: .room(room.key))
        }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, userIds: users, time: now,
                                          details: ["action": add ? "allowlistAdd" : "allowlistRemove"]))
        audit(app, add ? .allowlistAdd : .allowlistRemove, by: .server, roomId: roomId, targets: users, now: now, &out)
        return .done
    }

    // MARK: Global mutes (RC-6 6/7, RC-7)

    func globalMute(_ appKey: String, _ users: [String], _ minutes: Int, _ rc: RCNotify?, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        try Validate.userIds(users)
        try Validate.minutes(minutes)
        let rc = try validateNotify(rc, nil).rc
        let until = now + Int64(minutes) * 60_000
        for u in users {
            app.globalMutes[u] = until
            out.mutations.append(.putGlobalMute(app: appKey, u, until: until))
            deadlines.push(until, .globalMute(appKey, u))
        }
        if let rc {
            globalBanEvents(app, users, .globalMute, durationTime: Int64(minutes) * 60_000, extra: rc.extra, now: now, &out)
        }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: "", userIds: users, time: now,
                                          details: ["action": "globalMute", "minutes": String(minutes)]))
        audit(app, .globalMute, by: .server, roomId: "", targets: users, durationMs: Int64(minutes) * 60_000, now: now, &out)
        return .done
    }

    func globalUnmute(_ appKey: String, _ users: [String], _ rc: RCNotify?, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        try Validate.userIds(users)
        let rc = try validateNotify(rc, nil).rc
        for u in users where app.globalMutes.removeValue(forKey: u) != nil {
            out.mutations.append(.deleteGlobalMute(app: appKey, u))
        }
        if let rc {
            globalBanEvents(app, users, .globalUnmute, durationTime: 0, extra: rc.extra, now: now, &out)
        }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: "", userIds: users, time: now,
                                          details: ["action": "globalUnmute"]))
        audit(app, .globalUnmute, by: .server, roomId: "", targets: users, now: now, &out)
        return .done
    }

    /// RC-6 6/7: only the users of the call are told, once for each chatroom they are in, with that
    /// chatroom's id (the seed's event "returns data including: chatroom ID"). One event per room
    /// (rooms in id order) lists the users of the call who are in that room and goes to those users
    /// (all their online devices); a user in no room is told nothing.
    func globalBanEvents(_ app: AppState, _ users: [String], _ type: BanType, durationTime: Int64, extra: String, now: Int64,
                         _ out: inout Outcome) {
        var usersByRoom: [String: [String]] = [:]
        for u in users {
            var rooms = Set<String>()
            for sid in app.userSessions[u] ?? [] { rooms.formUnion(sessions[sid]?.rooms ?? []) }
            for r in rooms { usersByRoom[r, default: []].append(u) }
        }
        for roomId in usersByRoom.keys.sorted() {
            let inRoom = usersByRoom[roomId]!
            out.deliver(.ban(BanEvent(roomId: roomId, banType: type, durationTime: durationTime, operateTime: now, userIdList: inRoom, extra: extra)),
                        to: .users(app: app.key, inRoom))
        }
    }

    // MARK: Roles (NIM-12, NIM-15)

    func setRole(_ appKey: String, _ roomId: String, _ target: String, _ change: RoleChange, _ actor: Actor, _ notifyExt: String,
                 _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        try Validate.userId(target, field: "userId")
        try Validate.notifyExt(notifyExt)
        let current = room.type(of: target, now: now)
        guard current != .creator else { throw ChatError(.permissionDenied, "the creator's role cannot change", field: "userId") }
        var change = change
        if case .assign(let wanted) = change {
            switch (wanted, current) {
            case (.manager, .manager), (.common, .common), (.guest, .guest), (.guest, .limited), (.guest, .anonymous):
                // Already so: nothing changes, no rights are checked, and nothing is audited (MO-8).
                return .members([memberInfo(room, target, now: now)], total: 1)
            case (.manager, _): change = .setManager(true)
            case (.common, .manager): change = .setManager(false)
            case (.common, _): change = .setCommon(true)
            case (.guest, .common): change = .setCommon(false)
            case (.guest, _):
                throw ChatError(.permissionDenied, "a manager is demoted to common first", field: "role")
            }
        }
        if let op {
            switch change {
            case .setManager:
                // Only the creator sets or removes managers.
                guard room.type(of: op, now: now) == .creator else {
                    throw ChatError(.permissionDenied, "only the creator may set or remove managers", field: "operator")
                }
            case .setCommon, .assign:
                try authorize(room, operator: op, on: [target], now: now)
            }
        }
        if room.members[target]?.anonymous == true {
            throw ChatError(.permissionDenied, "anonymous members cannot hold a role", field: "userId")
        }
        let type: NotificationType
        let newRole: GrantedRole
        switch change {
        case .setManager(true):
            newRole = .manager
            type = .managerAdd
        case .setManager(false):
            guard current == .manager else { throw ChatError(.permissionDenied, "\(target) is not a manager", field: "userId") }
            // A removed manager becomes a common member.
            newRole = .common
            type = .managerRemove
        case .setCommon(true):
            guard current != .manager else { throw ChatError(.permissionDenied, "a manager cannot be made a common member", field: "userId") }
            newRole = .common
            type = .commonAdd
        case .setCommon(false):
            guard current == .common else { throw ChatError(.permissionDenied, "\(target) is not a common member", field: "userId") }
            // A removed common member becomes a guest (a member only while online).
            newRole = .none
            type = .commonRemove
        case .assign:
            preconditionFailure("resolved above")
        }
        if newRole != .none { try checkFixedCapacity(room, adding: [target], now: now) }
        if room.members[target] == nil { room.members[target] = Member(userId: target) }
        room.members[target]!.role = newRole
        refresh(room, target, now: now, &out)
        notify(room, type, source: op, targets: [target], NIMNotify(notifyExt: notifyExt), now: now, &out)
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, userIds: [target], time: now,
                                          details: ["action": "role", "role": room.type(of: target, now: now).rawValue]))
        audit(app, .role, by: actor, roomId: roomId, targets: [target], detail: room.type(of: target, now: now).rawValue, now: now, &out)
        return .members([memberInfo(room, target, now: now)], total: 1)
    }

    /// NIM-6/NIM-15: kick with reason 2; only lower roles.
    func kick(_ appKey: String, _ roomId: String, _ target: String, _ actor: Actor, _ notifyExt: String, _ now: Int64,
              _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        try Validate.userId(target, field: "userId")
        try Validate.notifyExt(notifyExt)
        guard let sessions = room.members[target]?.sessions, !sessions.isEmpty else {
            throw ChatError(.notInRoom, "\(target) is not in room \(roomId)", field: "userId")
        }
        try authorize(room, operator: op, on: [target], now: now)
        out.deliver(.notification(NotificationEvent(roomId: roomId, type: .kicked, source: op.map { memberInfo(room, $0, now: now) },
                                                    targets: [memberInfo(room, target, now: now)], notifyExt: notifyExt, ext: .none, time: now)),
                    to: .roomExceptUsers(room.key, [target]))
        for sid in sessions {
            removeSession(room, app, sid, cause: .kicked(.byManager, ext: notifyExt), now: now, &out)
        }
        audit(app, .kick, by: actor, roomId: roomId, targets: [target], now: now, &out)
        return .done
    }
}
