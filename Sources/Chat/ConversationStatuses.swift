/// Conversation pin and Do-Not-Disturb per user (SPEC §5, CS-1..CS-4).
extension ChatDomain {
    // MARK: Validation

    static func validate(_ key: ConversationKey) throws(ChatError) {
        try Validate.identifier(key.targetId, field: "targetId", maxBytes: Limits.maxRoomIdBytes)
        if key.type == .ultraGroup {
            if !key.channelId.isEmpty { try Validate.identifier(key.channelId, field: "channelId", maxBytes: Limits.maxChannelIdBytes) }
        } else if !key.channelId.isEmpty {
            throw .invalid("channelId", "channelId applies to ultra groups (conversationType 10) only")
        }
    }

    // MARK: Commands

    /// CS-1/CS-2: sets pinned and/or the level; every online device of the user gets the change
    /// as one array event (a change made from a device goes to the user's other devices).
    func setConversationStatus(_ appKey: String, _ user: String, _ key: ConversationKey, pinned: Bool?, level: NotificationLevel?,
                               _ actor: Actor, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        var origin: SessionID?
        if case .session(let sid) = actor {
            let s = try session(sid)
            guard s.app == appKey, s.userId == user, !s.anonymous else {
                throw ChatError(.permissionDenied, "a device sets its own user's conversation status", field: "userId")
            }
            origin = sid
        }
        try Validate.userId(user)
        try Self.validate(key)
        guard pinned != nil || level != nil else { throw .invalid("pinned", "give pinned, notificationLevel or both") }

        var state = app.conversations[user] ?? UserConversations()
        var status = state.statuses[key] ?? ConversationStatus(key: key, pinned: false, level: .default, version: 0, updatedAt: 0)
        let pinChanged = pinned.map { $0 != status.pinned } ?? false
        let levelChanged = level.map { $0 != status.level } ?? false
        guard pinChanged || levelChanged else { return .conversationStatus(statusView(app, user, status)) }
        if let pinned { status.pinned = pinned }
        if let level { status.level = level }
        state.version += 1
        status.version = state.version
        status.updatedAt = now
        state.statuses[key] = status
        app.conversations[user] = state
        out.mutations.append(.putConversationStatus(app: appKey, userId: user, status))

        var infos: [ConversationStatusInfo] = []
        if levelChanged { infos.append(.mute(status)) }
        if pinChanged { infos.append(.top(status)) }
        if let origin {
            let others = otherSessions(app, user, except: origin)
            if !others.isEmpty { out.deliver(.conversationStatusChanged(infos), to: .sessions(others)) }
        } else {
            out.deliver(.conversationStatusChanged(infos), to: .users(app: appKey, [user]))
        }
        var details: KeyValueList = ["conversationType": String(key.type.rawValue), "targetId": key.targetId, "channelId": key.channelId,
                                     "pinned": status.pinned ? "1" : "0", "notificationLevel": String(status.level.rawValue)]
        details.pairs.append(.init(key: "version", value: String(status.version)))
        out.webhooks.append(WebhookRecord(app: appKey, type: .conversationStatusChanged, roomId: "", userIds: [user], time: now, details: details))
        return .conversationStatus(statusView(app, user, status))
    }

    /// CS-4: the user's default for a conversation type (below per-conversation settings).
    func setConversationTypeLevel(_ appKey: String, _ user: String, _ type: ConversationType, _ level: NotificationLevel,
                                  _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        try Validate.userId(user)
        var state = app.conversations[user] ?? UserConversations()
        state.typeLevels[type] = level == .default ? nil : level
        app.conversations[user] = state
        out.mutations.append(.putConversationTypeLevel(app: appKey, userId: user, type, level))
        return .notificationLevel(level)
    }

    /// CS-4: an ultra group's default, or one of its channels' defaults.
    func setGroupLevel(_ appKey: String, _ groupId: String, channelId: String?, _ level: NotificationLevel,
                       _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        if let channelId, !channelId.isEmpty {
            let c = try channel(g, channelId)
            c.defaultLevel = level
            out.mutations.append(.putChannel(channelRecord(appKey, g, c), sequence: nil))
        } else {
            g.defaultLevel = level
            out.mutations.append(.putGroup(groupRecord(appKey, g)))
        }
        return .notificationLevel(level)
    }

    // MARK: Effective level (CS-4)

    /// user channel > user conversation > user type default > channel default > group default
    /// > app default; with nothing set, every message notifies.
    func effectiveLevel(_ app: AppState, _ user: String, _ key: ConversationKey) -> (NotificationLevel, LevelSource) {
        let state = app.conversations[user]
        if key.type == .ultraGroup && !key.channelId.isEmpty, let s = state?.statuses[key], s.level != .default {
            return (s.level, .channel)
        }
        let whole = ConversationKey(type: key.type, targetId: key.targetId)
        if let s = state?.statuses[whole], s.level != .default { return (s.level, .conversation) }
        if let t = state?.typeLevels[key.type], t != .default { return (t, .conversationType) }
        if key.type == .ultraGroup, let g = app.groups[key.targetId] {
            if !key.channelId.isEmpty, let c = g.channels[key.channelId], c.defaultLevel != .default { return (c.defaultLevel, .channelDefault) }
            if g.defaultLevel != .default { return (g.defaultLevel, .groupDefault) }
        }
        if app.settings.notificationLevel != .default { return (app.settings.notificationLevel, .app) }
        return (.allMessages, .none)
    }

    func statusView(_ app: AppState, _ user: String, _ status: ConversationStatus) -> ConversationStatusView {
        let (level, source) = effectiveLevel(app, user, status.key)
        return ConversationStatusView(status: status, effectiveLevel: level, source: source)
    }

    // MARK: Queries

    func answerConversationQuery(_ q: Query) throws(ChatError) -> Reply? {
        switch q {
        case .conversationStatus(let appKey, let user, let key):
            let app = try app(appKey)
            try Validate.userId(user)
            try Self.validate(key)
            let status = app.conversations[user]?.statuses[key] ?? ConversationStatus(key: key, pinned: false, level: .default, version: 0, updatedAt: 0)
            return .conversationStatus(statusView(app, user, status))
        case .conversationStatuses(let appKey, let user, let since, let limit):
            let app = try app(appKey)
            try Validate.userId(user)
            guard since >= 0 else { throw .invalid("cursor", "cursor must not be negative") }
            guard limit >= 1 && limit <= Limits.maxStatusSyncPage else {
                throw .invalid("limit", "limit must be between 1 and \(Limits.maxStatusSyncPage)")
            }
            let changed = (app.conversations[user]?.statuses.values.filter { $0.version > since } ?? []).sorted { $0.version < $1.version }
            let page = Array(changed.prefix(limit))
            return .conversationStatuses(page, cursor: page.last?.version ?? max(since, 0), more: changed.count > limit)
        case .conversationTypeLevel(let appKey, let user, let type):
            let app = try app(appKey)
            try Validate.userId(user)
            return .notificationLevel(app.conversations[user]?.typeLevels[type] ?? .default)
        case .groupNotificationLevel(let appKey, let groupId, let channelId):
            let g = try group(try app(appKey), groupId)
            if let channelId, !channelId.isEmpty { return .notificationLevel(try channel(g, channelId).defaultLevel) }
            return .notificationLevel(g.defaultLevel)
        default:
            return nil
        }
    }
}
