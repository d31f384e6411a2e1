extension ChatDomain {
    /// Answers a read-only question. Nothing changes.
    public func query(_ q: Query, now: Int64) -> Result<Reply, ChatError> {
        do {
            return .success(try answer(q, now: now))
        } catch {
            return .failure(error)
        }
    }

    private func answer(_ q: Query, now: Int64) throws(ChatError) -> Reply {
        if let r = try answerGroupQuery(q) { return r }
        if let r = try answerCommunityQuery(q) { return r }
        if let r = try answerConversationQuery(q) { return r }
        switch q {
        case .room(let appKey, let roomId):
            return .room(roomInfo(try room(try app(appKey), roomId)))

        case .openRoom(let appKey, let roomId):
            let room = try room(try app(appKey), roomId)
            guard room.open else { throw ChatError(.roomClosed, "room \(roomId) is closed", field: "roomId") }
            return .room(roomInfo(room))

        case .rooms(let appKey, let ids):
            let app = try app(appKey)
            guard ids.count <= 100 else { throw .invalid("ids", "at most 100 room ids") }
            return .rooms(ids.compactMap { app.rooms[$0].map(roomInfo) })

        case .roomAsMember(let sid, let roomId):
            let s = try session(sid)
            let (_, room, _) = try resolve(s.app, roomId, .session(sid))
            return .room(roomInfo(room))

        case .members(let appKey, let roomId, let filter, let order, let limit, let after):
            let room = try room(try app(appKey), roomId)
            guard limit >= 1 && limit <= Limits.maxMemberListCount else {
                throw .invalid("limit", "limit must be between 1 and \(Limits.maxMemberListCount)")
            }
            let fixed: (String) -> Bool = { room.isFixed($0, now: now) }
            let online: (String) -> Bool = { room.members[$0]?.isOnline == true }
            let ids: [String]
            let total: Int
            switch filter {
            case .present:
                ids = order == .ascending ? room.present.forward(after: after, limit: limit) : room.present.backward(before: after, limit: limit)
                total = room.presentOrder.count
            case .regular:
                ids = order == .ascending ? room.fixed.forward(after: after, limit: limit) : room.fixed.backward(before: after, limit: limit)
                total = room.fixed.count
            case .regularOnline:
                ids = order == .ascending ? room.fixed.forward(after: after, limit: limit, where: online)
                    : room.fixed.backward(before: after, limit: limit, where: online)
                total = ids.count
            case .temporary:
                ids = order == .ascending ? room.present.forward(after: after, limit: limit, where: { !fixed($0) })
                    : room.present.backward(before: after, limit: limit, where: { !fixed($0) })
                total = ids.count
            case .temporaryNewestFirst:
                ids = room.present.backward(before: after, limit: limit, where: { !fixed($0) })
                total = ids.count
            }
            return .members(ids.map { memberInfo(room, $0, now: now) }, total: total)

        case .temporaryMembersEnteredBefore(let appKey, let roomId, let before, let limit):
            let room = try room(try app(appKey), roomId)
            guard limit >= 1 && limit <= Limits.maxMemberListCount else {
                throw .invalid("limit", "limit must be between 1 and \(Limits.maxMemberListCount)")
            }
            // Present members are in the order they entered: from the newest, those before the anchor.
            let ids = room.present.backward(before: nil, limit: limit, where: {
                !room.isFixed($0, now: now) && (room.members[$0]?.enterTime ?? .max) < before
            })
            return .members(ids.map { memberInfo(room, $0, now: now) }, total: ids.count)

        case .membersByIds(let appKey, let roomId, let ids):
            let room = try room(try app(appKey), roomId)
            try Validate.userIds(ids, max: Limits.maxMemberQueryIds)
            let found = ids.filter { room.members[$0] != nil }
            return .members(found.map { memberInfo(room, $0, now: now) }, total: found.count)

        case .isInRoom(let appKey, let roomId, let ids):
            let room = try room(try app(appKey), roomId)
            try Validate.userIds(ids, max: Limits.maxIsInRoomIds)
            return .presence(ids.map { (userId: $0, inRoom: room.isPresent($0)) })

        case .blocks(let appKey, let roomId):
            let room = try room(try app(appKey), roomId)
            return .userExpiries(room.blocks.filter { $0.value > now }.sorted { $0.key < $1.key }
                .map { (userId: $0.key, until: $0.value == Int64.max ? nil : $0.value) })

        case .mutes(let appKey, let roomId):
            let room = try room(try app(appKey), roomId)
            var out: [(userId: String, until: Int64?)] = room.permanentMutes.sorted().map { (userId: $0, until: nil) }
            for (u, until) in room.tempMutes.sorted(by: { $0.key < $1.key }) where until > now && !room.permanentMutes.contains(u) {
                out.append((userId: u, until: until))
            }
            return .userExpiries(out)

        case .allowlist(let appKey, let roomId):
            return .userIds(try room(try app(appKey), roomId).muteAllowlist.all)

        case .sensitiveWords(let appKey):
            return .sensitiveWords(try app(appKey).settings.sensitiveWords)
        case .audit(let appKey, let roomId, let before, let limit):
            return try auditPage(appKey, roomId: roomId, before: before, limit: limit)

        case .protectedSenders(let appKey, let roomId):
            return .userIds(try room(try app(appKey), roomId).protectedSenders)

        case .globalMutes(let appKey):
            let app = try app(appKey)
            return .userExpiries(app.globalMutes.filter { $0.value > now }.sorted { $0.key < $1.key }.map { (userId: $0.key, until: $0.value) })

        case .attributes(let appKey, let roomId, let keys):
            let room = try room(try app(appKey), roomId)
            guard keys.count <= Limits.maxAttributesPerRoom else { throw .invalid("keys", "at most \(Limits.maxAttributesPerRoom) keys") }
            let wanted = keys.isEmpty ? room.attributes.keys.sorted() : keys.filter { room.attributes[$0] != nil }
            return .attributes(wanted.map {
                let a = room.attributes[$0]!
                return AttributesEvent.Entry(key: $0, value: a.value, owner: a.owner, autoDelete: a.autoDelete, updatedAt: a.updatedAt)
            })

        case .queue(let appKey, let roomId):
            let room = try room(try app(appKey), roomId)
            return .queue(room.queueOrder.all.map { (key: $0, value: room.queue[$0]!.value) })

        case .history(let appKey, let roomId, let start, let limit, let order, let kinds, let filter):
            let resolved = try resolve(filter, app: appKey, roomId: roomId)
            return .messages(try historyInMemory(app: appKey, roomId: roomId, start: start, limit: limit, order, kinds: kinds, filter: resolved,
                                                 now: now).messages)

        case .tagMembersCount(let appKey, let roomId, let tag):
            let room = try room(try app(appKey), roomId)
            try Validate.tag(tag, field: "tag")
            return .count(room.tagCounts[tag] ?? 0)

        case .roomTags(let appKey, let roomId):
            let room = try room(try app(appKey), roomId)
            return .tagCounts(room.tagCounts.sorted { $0.key < $1.key }.map { TagCount(tag: $0.key, count: $0.value) })

        case .membersByRoles(let appKey, let roomId, let roles):
            return try membersByRoles(appKey, roomId, roles, now: now)

        case .tagMembers(let appKey, let roomId, let tag, let limit, let after):
            let room = try room(try app(appKey), roomId)
            try Validate.tag(tag, field: "tag")
            guard (1...Limits.maxMemberListCount).contains(limit) else { throw .invalid("limit", "limit must be 1 to \(Limits.maxMemberListCount)") }
            let tagged = room.presentOrder.all.filter { room.members[$0]?.tags.contains(tag) == true }
            let start = after.flatMap { a in tagged.firstIndex(of: a).map { $0 + 1 } } ?? 0
            let page = Array(tagged.dropFirst(start).prefix(limit))
            return .members(infos(room, page, now: now), total: tagged.count)

        case .roomsOfSession(let sid):
            return .roomIds(Array(try session(sid).rooms))

        case .roomIds(let appKey):
            return .roomIds(try app(appKey).rooms.keys.sorted())

        case .roomIdsWhere(let appKey, let filter):
            let rooms = try app(appKey).rooms
            return .roomIds(rooms.filter { _, room in
                switch filter {
                case .muted: return room.muted
                case .keepAlive: return room.keepAlive
                case .openCreatedBy(let user): return room.open && room.creator == user
                }
            }.keys.sorted())

        case .online(let appKey, let users):
            guard !users.isEmpty, users.count <= Limits.maxPresenceQueryUsers else {
                throw .invalid("userIds", "name 1 to \(Limits.maxPresenceQueryUsers) users")
            }
            for u in users { try Validate.userId(u) }
            let app = try app(appKey)
            return .online(users.map { (userId: $0, connections: app.userSessions[$0]?.count ?? 0) })

        case .connections(let appKey, let user):
            try Validate.userId(user)
            let app = try app(appKey)
            return .connections((app.userSessions[user] ?? []).compactMap { sid in
                sessions[sid].map { UserConnection(session: sid, device: $0.deviceId, since: $0.connectedAt, rooms: $0.rooms.sorted()) }
            })

        case .roomDirectory(let appKey, let search):
            // One pass over the app's rooms (bounded by its room limit), then the page in id order.
            var found: [(id: String, room: Room)] = []
            for (id, room) in try app(appKey).rooms where search.matches(id, room) { found.append((id, room)) }
            found.sort { $0.id < $1.id }
            let page = found.prefix(max(0, search.limit))
            return .roomPage(page.map { roomInfo($0.room) }, next: found.count > page.count ? page.last?.id : nil)

        case .appSettings(let appKey):
            return .appSettings(try app(appKey).settings)

        case .group, .groupMembers, .isGroupMember, .channels, .privateMembers, .userChannels, .groupNotificationLevel, .communityHistory, .communityMessage, .communityRules,
             .userGroups, .channelUserGroups, .userUserGroups, .userGroupChannels,
             .conversationStatus, .conversationStatuses, .conversationTypeLevel:
            // Answered above.
            throw .invalid("query", "unanswered query")
        }
    }

    /// The user id of a connected session.
    public func userId(of session: SessionID) -> String? { sessions[session]?.userId }

    /// The app of a connected session.
    public func app(of session: SessionID) -> String? { sessions[session]?.app }

    /// The room's current epoch (BX-1), if it exists.
    public func epoch(app: String, roomId: String) -> String? { apps[app]?.rooms[roomId]?.epoch }

    /// NIM-8 history from the newest messages kept in memory. `complete` is false when memory may
    /// lack some of the answer (the room held more than the in-memory window): then the store
    /// answers, from `oldest` (the retention's start) on. Refuses bad parameters and missing rooms.
    /// AU-1, AU-2: a history filter's viewer looked up (a member reads what was addressed to it).
    public func resolve(_ filter: HistoryFilter, app appKey: String, roomId: String) throws(ChatError) -> ResolvedHistoryFilter {
        for t in filter.tags { try Validate.tag(t, field: "tags") }
        guard let sid = filter.viewer else { return ResolvedHistoryFilter(viewerUser: nil, viewerTags: [], tags: filter.tags) }
        let s = try session(sid)
        let tags = apps[appKey]?.rooms[roomId]?.members[s.userId]?.tags ?? []
        return ResolvedHistoryFilter(viewerUser: s.userId, viewerTags: tags, tags: filter.tags)
    }

    public func historyInMemory(app appKey: String, roomId: String, start: Int64, limit: Int, _ order: SortOrder, kinds: [ChatMessage.Kind],
                                filter: ResolvedHistoryFilter = ResolvedHistoryFilter(),
                                now: Int64) throws(ChatError) -> (messages: [ChatMessage], complete: Bool, oldest: Int64) {
        let app = try app(appKey)
        let room = try room(app, roomId)
        guard limit >= 1 && limit <= Limits.maxHistoryLimit else {
            throw .invalid("limit", "limit must be between 1 and \(Limits.maxHistoryLimit)")
        }
        guard start >= 0 else { throw .invalid("start", "start must not be negative") }
        let oldest = now - app.settings.historyRetentionMilliseconds
        let wanted: (ChatMessage) -> Bool = { m in m.time >= oldest && (kinds.isEmpty || kinds.contains(m.kind)) && filter.admits(m) }
        var out: [ChatMessage] = []
        let h = room.history
        if order == .descending {
            // Newest first, strictly before `start` (0: from now).
            var i = h.count - 1
            while i >= 0 && out.count < limit {
                let m = h[i]
                if (start == 0 || m.time < start) && wanted(m) { out.append(m) }
                i -= 1
            }
            return (out, out.count == limit || !h.truncated, oldest)
        }
        // Oldest first, strictly after `start`: complete only if nothing was dropped before them.
        var i = 0
        while i < h.count && out.count < limit {
            let m = h[i]
            if m.time > start && wanted(m) { out.append(m) }
            i += 1
        }
        // (Dropped messages are older than the oldest kept one, so a start after it is covered.)
        return (out, !h.truncated || (h.count > 0 && h[0].time < start), oldest)
    }

    public var sessionCount: Int { sessions.count }
    public func roomCount(app: String) -> Int { apps[app]?.rooms.count ?? 0 }
}
