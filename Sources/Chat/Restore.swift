/// Rebuilding the domain from the store at start-up. Each call loads one durable row; the
/// rows of a room come after the room. Who is online is not durable, so nobody is present.
extension ChatDomain {
    public func restoreApp(_ key: String, _ settings: AppSettings) {
        if let existing = apps[key] { existing.settings = settings } else { apps[key] = AppState(key: key, settings: settings) }
    }

    public func restoreRoom(_ r: RoomRecord) {
        guard let app = apps[r.key.app] else { return }
        var config = RoomConfig(roomId: r.key.roomId)
        config.name = r.name
        config.announcement = r.announcement
        config.ext = r.ext
        config.broadcastUrl = r.broadcastUrl
        config.creator = r.creator.isEmpty ? nil : r.creator
        config.queueModificationLevel = r.queueModificationLevel
        config.destroyPolicy = r.destroyPolicy
        config.keepAlive = r.keepAlive
        config.multiDevice = r.multiDevice
        config.muted = r.muted
        config.enterExitNotifications = r.enterExitNotifications
        config.queueLimit = r.queueLimit
        let room = Room(key: r.key, config: config, now: r.createdAt, epoch: r.epoch, historyLimit: app.settings.historyLimitPerRoom,
                        defaultQueueLimit: app.settings.defaultQueueLimit)
        room.open = r.open
        room.lastActivity = r.lastActivity
        room.protectedSenders = r.protectedSenders
        room.distributionStopped = r.distributionStopped
        room.tagMutes = r.tagMutes
        for (tag, until) in r.tagMutes { deadlines.push(until, .tagMute(r.key, tag)) }
        // Nobody is present after a restart: an empty-room delay counts from the restart.
        room.emptySince = r.lastActivity
        app.rooms[r.key.roomId] = room
        scheduleRoomDeadline(room, now: r.lastActivity)
    }

    private func restoredRoom(_ key: RoomKey) -> Room? { apps[key.app]?.rooms[key.roomId] }

    public func restoreMember(_ key: RoomKey, _ m: MemberRecord) {
        guard let room = restoredRoom(key) else { return }
        var member = room.members[m.userId] ?? Member(userId: m.userId)
        member.role = m.role
        member.nickname = m.nickname
        member.avatar = m.avatar
        member.ext = m.ext
        room.members[m.userId] = member
        room.fixed.append(m.userId)
    }

    public func restoreBlock(_ key: RoomKey, _ user: String, until: Int64) {
        guard let room = restoredRoom(key) else { return }
        room.blocks[user] = until
        if until != Int64.max { deadlines.push(until, .block(key, user)) }
        ensureFixed(room, user)
    }

    public func restorePermanentMute(_ key: RoomKey, _ user: String) {
        guard let room = restoredRoom(key) else { return }
        room.permanentMutes.insert(user)
        ensureFixed(room, user)
    }

    public func restoreTempMute(_ key: RoomKey, _ user: String, until: Int64) {
        guard let room = restoredRoom(key) else { return }
        room.tempMutes[user] = until
        deadlines.push(until, .tempMute(key, user))
    }

    public func restoreAllowlist(_ key: RoomKey, _ user: String) {
        restoredRoom(key)?.muteAllowlist.append(user)
    }

    public func restoreGlobalMute(app: String, _ user: String, until: Int64) {
        guard let a = apps[app] else { return }
        a.globalMutes[user] = until
        deadlines.push(until, .globalMute(app, user))
    }

    /// PX-3: a user who was online when the server stopped has no connection now: it goes
    /// offline after the grace unless it connects again (then nothing is sent, as for any
    /// reconnect within the grace).
    public func restoreOnlineUser(app: String, _ user: String, device: String, now: Int64) {
        guard let a = apps[app] else { return }
        a.goingOffline[user] = (now, device)
        deadlines.push(now + max(0, presenceGraceMilliseconds), .offline(app: app, user: user))
    }

    public func restoreAttribute(_ key: RoomKey, _ name: String, _ a: Attribute) {
        restoredRoom(key)?.attributes[name] = a
    }

    /// Elements must be restored in `sequence` order.
    public func restoreQueueElement(_ key: RoomKey, _ name: String, _ e: QueueElement, sequence: Int64) {
        guard let room = restoredRoom(key) else { return }
        room.queue[name] = e
        room.queueOrder.append(name)
        queueSequence = max(queueSequence, sequence)
    }

    /// Messages must be restored oldest first.
    public func restoreMessage(_ key: RoomKey, _ m: ChatMessage) {
        restoredRoom(key)?.history.append(m)
    }

    private func ensureFixed(_ room: Room, _ user: String) {
        if room.members[user] == nil { room.members[user] = Member(userId: user) }
        room.fixed.append(user)
    }

    // MARK: Ultra groups and conversation statuses

    public func restoreGroup(_ r: GroupRecord) {
        guard let app = apps[r.app] else { return }
        let g = UltraGroup(id: r.groupId, name: r.name, creator: r.creator, createdAt: r.createdAt)
        g.defaultLevel = r.notificationLevel
        app.groups[r.groupId] = g
    }

    /// Members, channels and private members must be restored in `sequence` order.
    public func restoreGroupMember(app: String, groupId: String, _ user: String, sequence: Int64) {
        guard let g = apps[app]?.groups[groupId] else { return }
        g.members.append(user)
        groupSequence = max(groupSequence, sequence)
    }

    public func restoreChannel(_ r: ChannelRecord, sequence: Int64) {
        guard let g = apps[r.app]?.groups[r.groupId] else { return }
        let c = UltraChannel(id: r.channelId, type: r.type, createdAt: r.createdAt)
        c.defaultLevel = r.notificationLevel
        g.channels[r.channelId] = c
        g.channelOrder.append(r.channelId)
        groupSequence = max(groupSequence, sequence)
    }

    public func restorePrivateMember(app: String, groupId: String, channelId: String, _ user: String, sequence: Int64) {
        guard let c = apps[app]?.groups[groupId]?.channels[channelId] else { return }
        c.privateMembers.append(user)
        groupSequence = max(groupSequence, sequence)
    }

    /// MO-4: user groups, their members and their bindings, each in `sequence` order.
    public func restoreUserGroup(app: String, groupId: String, userGroupId: String, sequence: Int64) {
        guard let g = apps[app]?.groups[groupId], g.userGroups[userGroupId] == nil else { return }
        g.userGroups[userGroupId] = UserGroup(id: userGroupId)
        g.userGroupOrder.append(userGroupId)
        groupSequence = max(groupSequence, sequence)
    }

    public func restoreUserGroupMember(app: String, groupId: String, userGroupId: String, _ user: String, sequence: Int64) {
        guard let ug = apps[app]?.groups[groupId]?.userGroups[userGroupId] else { return }
        ug.members.append(user)
        groupSequence = max(groupSequence, sequence)
    }

    public func restoreChannelUserGroup(app: String, groupId: String, channelId: String, userGroupId: String, sequence: Int64) {
        guard let g = apps[app]?.groups[groupId], let c = g.channels[channelId], g.userGroups[userGroupId] != nil else { return }
        c.userGroups.append(userGroupId)
        groupSequence = max(groupSequence, sequence)
    }

    public func restoreConversationStatus(app: String, userId: String, _ s: ConversationStatus) {
        guard let a = apps[app] else { return }
        var state = a.conversations[userId] ?? UserConversations()
        state.statuses[s.key] = s
        state.version = max(state.version, s.version)
        a.conversations[userId] = state
    }

    public func restoreConversationTypeLevel(app: String, userId: String, _ type: ConversationType, _ level: NotificationLevel) {
        guard let a = apps[app] else { return }
        var state = a.conversations[userId] ?? UserConversations()
        state.typeLevels[type] = level
        a.conversations[userId] = state
    }
}
