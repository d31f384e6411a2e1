/// Ultra groups and their channels (SPEC §4, UG-1..UG-6). Only the app server changes them; the
/// client SDK only hears about it, each recipient through one array event per call (UG-5).
extension ChatDomain {
    // MARK: Look-ups

    func group(_ app: AppState, _ groupId: String) throws(ChatError) -> UltraGroup {
        guard let g = app.groups[groupId] else {
            try Validate.identifier(groupId, field: "groupId", maxBytes: Limits.maxRoomIdBytes)
            throw ChatError(.notFound, "ultra group \(groupId) does not exist", field: "groupId")
        }
        return g
    }

    func channel(_ group: UltraGroup, _ channelId: String) throws(ChatError) -> UltraChannel {
        guard let c = group.channels[channelId] else {
            // An id no channel can have is bad input, not a missing channel.
            try Validate.identifier(channelId, field: "channelId", maxBytes: Limits.maxChannelIdBytes)
            throw ChatError(.notFound, "channel \(channelId) does not exist in ultra group \(group.id)", field: "channelId")
        }
        return c
    }

    func groupRecord(_ app: String, _ g: UltraGroup) -> GroupRecord {
        GroupRecord(app: app, groupId: g.id, name: g.name, creator: g.creator, createdAt: g.createdAt, notificationLevel: g.defaultLevel)
    }

    func channelRecord(_ app: String, _ g: UltraGroup, _ c: UltraChannel) -> ChannelRecord {
        ChannelRecord(app: app, groupId: g.id, channelId: c.id, type: c.type, createdAt: c.createdAt, notificationLevel: c.defaultLevel)
    }

    func groupInfo(_ g: UltraGroup) -> GroupInfo {
        GroupInfo(groupId: g.id, name: g.name, creator: g.creator, memberCount: g.members.count, channelCount: g.channels.count,
                  createdAt: g.createdAt, notificationLevel: g.defaultLevel)
    }

    func channelInfo(_ g: UltraGroup, _ c: UltraChannel) -> ChannelInfo {
        ChannelInfo(groupId: g.id, channelId: c.id, type: c.type, isDefault: c.id == UltraGroup.defaultChannelId,
                    privateMemberCount: c.privateMembers.count, createdAt: c.createdAt, notificationLevel: c.defaultLevel)
    }

    private func nextGroupSequence() -> Int64 {
        groupSequence += 1
        return groupSequence
    }

    private func channelWebhook(_ app: String, _ g: UltraGroup, _ c: String, _ change: String, users: [String] = [], now: Int64,
                                _ out: inout Outcome) {
        out.webhooks.append(WebhookRecord(app: app, type: .channelChanged, roomId: "", userIds: users, time: now,
                                          details: ["groupId": g.id, "channelId": c, "change": change]))
    }

    // MARK: Groups (UG-1)

    func createGroup(_ appKey: String, _ groupId: String, name: String, creator: String?, _ now: Int64,
                     _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        try Validate.identifier(groupId, field: "groupId", maxBytes: Limits.maxRoomIdBytes)
        try Validate.maxBytes(name, Limits.maxNameBytes, field: "name")
        if let creator { try Validate.userId(creator, field: "creator") }
        guard app.groups[groupId] == nil else { throw ChatError(.alreadyExists, "ultra group \(groupId) already exists", field: "groupId") }
        let g = UltraGroup(id: groupId, name: name, creator: creator ?? "", createdAt: now)
        let c = UltraChannel(id: UltraGroup.defaultChannelId, type: .public, createdAt: now)
        g.channels[c.id] = c
        g.channelOrder.append(c.id)
        app.groups[groupId] = g
        out.mutations.append(.putGroup(groupRecord(appKey, g)))
        out.mutations.append(.putChannel(channelRecord(appKey, g, c), sequence: nextGroupSequence()))
        if let creator {
            g.members.append(creator)
            out.mutations.append(.putGroupMember(app: appKey, groupId: groupId, creator, sequence: nextGroupSequence()))
        }
        return .group(groupInfo(g))
    }

    /// MO-4: a new name (1 to `Limits.maxNameBytes` bytes); webhooks are told (`channel.changed`,
    /// change `groupRenamed`).
    func renameGroup(_ appKey: String, _ groupId: String, name: String, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard !name.isEmpty else { throw .invalid("name", "name is required") }
        try Validate.maxBytes(name, Limits.maxNameBytes, field: "name")
        let g = try group(app, groupId)
        guard g.name != name else { return .group(groupInfo(g)) }
        g.name = name
        out.mutations.append(.putGroup(groupRecord(appKey, g)))
        out.webhooks.append(WebhookRecord(app: appKey, type: .channelChanged, roomId: "", time: now,
                                          details: ["groupId": g.id, "change": "groupRenamed", "name": name]))
        return .group(groupInfo(g))
    }

    func dismissGroup(_ appKey: String, _ groupId: String, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        app.groups[groupId] = nil
        out.mutations.append(.deleteGroup(app: appKey, groupId: groupId))
        channelWebhook(appKey, g, "", "groupDismissed", now: now, &out)
        return .done
    }

    func joinGroup(_ appKey: String, _ groupId: String, _ users: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        try Validate.userIds(users, max: Limits.maxGroupUsersPerCall)
        for u in users where g.members.append(u) {
            out.mutations.append(.putGroupMember(app: appKey, groupId: groupId, u, sequence: nextGroupSequence()))
        }
        return .group(groupInfo(g))
    }

    /// Quitting also takes the users off every private list (those hold group members only).
    func quitGroup(_ appKey: String, _ groupId: String, _ users: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        try Validate.userIds(users, max: Limits.maxGroupUsersPerCall)
        dropCommunityUsers(appKey, g, users, &out)
        for u in users where g.members.remove(u) {
            out.mutations.append(.deleteGroupMember(app: appKey, groupId: groupId, u))
            for id in g.channelOrder.all {
                if let c = g.channels[id], c.privateMembers.remove(u) {
                    out.mutations.append(.deletePrivateMember(app: appKey, groupId: groupId, channelId: id, u))
                }
            }
        }
        return .group(groupInfo(g))
    }

    // MARK: Channels (UG-1..UG-3)

    func createChannel(_ appKey: String, _ groupId: String, _ channelId: String, _ type: ChannelType, _ now: Int64,
                       _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        try Validate.identifier(channelId, field: "channelId", maxBytes: Limits.maxChannelIdBytes)
        guard g.channels[channelId] == nil else { throw ChatError(.alreadyExists, "channel \(channelId) already exists", field: "channelId") }
        guard g.channels.count < Limits.maxChannelsPerGroup else {
            throw ChatError(.limitExceeded, "an ultra group has at most \(Limits.maxChannelsPerGroup) channels", field: "channelId")
        }
        let c = UltraChannel(id: channelId, type: type, createdAt: now)
        g.channels[channelId] = c
        g.channelOrder.append(channelId)
        out.mutations.append(.putChannel(channelRecord(appKey, g, c), sequence: nextGroupSequence()))
        channelWebhook(appKey, g, channelId, "created", now: now, &out)
        return .channel(channelInfo(g, c))
    }

    /// UG-2: public→private tells every group member (2 on the private list, 6 otherwise);
    /// private→public tells only the private list (3). The default channel stays public.
    func changeChannelType(_ appKey: String, _ groupId: String, _ channelId: String, _ type: ChannelType, _ now: Int64,
                           _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        let c = try channel(g, channelId)
        if type == .private && channelId == UltraGroup.defaultChannelId {
            throw .invalid("type", "the default channel \(UltraGroup.defaultChannelId) cannot become private")
        }
        guard c.type != type else { return .channel(channelInfo(g, c)) }
        c.type = type
        out.mutations.append(.putChannel(channelRecord(appKey, g, c), sequence: nil))
        if type == .private {
            let onList = g.members.all.filter { c.privateMembers.contains($0) }
            let others = g.members.all.filter { !c.privateMembers.contains($0) }
            if !onList.isEmpty {
                out.deliver(.channelTypeChanged([ChannelTypeChange(groupId: groupId, channelId: channelId, changeType: .publicToPrivate, time: now)]),
                            to: .users(app: appKey, onList))
            }
            if !others.isEmpty {
                out.deliver(.channelTypeChanged([ChannelTypeChange(groupId: groupId, channelId: channelId, changeType: .publicToPrivateUserNotIn,
                                                                   time: now)]), to: .users(app: appKey, others))
            }
        } else if !c.privateMembers.isEmpty {
            out.deliver(.channelTypeChanged([ChannelTypeChange(groupId: groupId, channelId: channelId, changeType: .privateToPublic, time: now)]),
                        to: .users(app: appKey, c.privateMembers.all))
        }
        channelWebhook(appKey, g, channelId, type == .private ? "publicToPrivate" : "privateToPublic", now: now, &out)
        return .channel(channelInfo(g, c))
    }

    /// UG-3: deleting a public channel tells every group member; a private one only its list.
    func deleteChannel(_ appKey: String, _ groupId: String, _ channelId: String, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        let c = try channel(g, channelId)
        if channelId == UltraGroup.defaultChannelId {
            throw .invalid("channelId", "the default channel \(UltraGroup.defaultChannelId) cannot be deleted")
        }
        let audience = c.type == .public ? g.members.all : c.privateMembers.all
        g.channels[channelId] = nil
        g.channelOrder.remove(channelId)
        out.mutations.append(.deleteChannel(app: appKey, groupId: groupId, channelId: channelId))
        dropCommunityChannel(appKey, g, channelId, &out)
        if !audience.isEmpty {
            out.deliver(.channelDisbanded([ChannelDisbanded(groupId: groupId, channelId: channelId, time: now)]), to: .users(app: appKey, audience))
        }
        channelWebhook(appKey, g, channelId, "deleted", now: now, &out)
        return .done
    }

    // MARK: Private lists (UG-1, UG-4)

    /// ≤ 20 ids; every one must be a group member, or nothing changes (24406).
    func addPrivateMembers(_ appKey: String, _ groupId: String, _ channelId: String, _ users: [String], _ now: Int64,
                           _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        let c = try channel(g, channelId)
        try Validate.userIds(users)
        if let stranger = users.first(where: { !g.members.contains($0) }) {
            throw ChatError(.notGroupMember, "\(stranger) is not a member of ultra group \(groupId)", field: "userIds")
        }
        for u in users where c.privateMembers.append(u) {
            out.mutations.append(.putPrivateMember(app: appKey, groupId: groupId, channelId: channelId, u, sequence: nextGroupSequence()))
        }
        channelWebhook(appKey, g, channelId, "privateMembersAdded", users: users, now: now, &out)
        return .channel(channelInfo(g, c))
    }

    /// UG-4: removed users of a private channel each get one event about themselves; a public
    /// channel's list changes silently.
    func removePrivateMembers(_ appKey: String, _ groupId: String, _ channelId: String, _ users: [String], _ now: Int64,
                              _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        let c = try channel(g, channelId)
        try Validate.userIds(users)
        var removed: [String] = []
        for u in users where c.privateMembers.remove(u) {
            removed.append(u)
            out.mutations.append(.deletePrivateMember(app: appKey, groupId: groupId, channelId: channelId, u))
        }
        if c.type == .private {
            for u in removed {
                out.deliver(.channelUsersKicked([ChannelUserKicked(groupId: groupId, channelId: channelId, userId: u, time: now)]),
                            to: .users(app: appKey, [u]))
            }
        }
        if !removed.isEmpty { channelWebhook(appKey, g, channelId, "privateMembersRemoved", users: removed, now: now, &out) }
        return .channel(channelInfo(g, c))
    }

    // MARK: Queries (UG-6)

    /// Page `page` (1-based) of `size` from an ordered list.
    func page<T>(_ all: [T], _ page: Int, _ size: Int) throws(ChatError) -> [T] {
        guard page >= 1 else { throw .invalid("page", "page starts at 1") }
        guard size >= 1 && size <= Limits.maxPageSize else { throw .invalid("pageSize", "pageSize must be between 1 and \(Limits.maxPageSize)") }
        // A page far beyond the end is empty (and must not overflow on the way there).
        let (start, overflow) = (page - 1).multipliedReportingOverflow(by: size)
        guard !overflow, start < all.count else { return [] }
        return Array(all[start..<min(all.count, start + size)])
    }

    func answerGroupQuery(_ q: Query) throws(ChatError) -> Reply? {
        switch q {
        case .group(let appKey, let groupId):
            return .group(groupInfo(try group(try app(appKey), groupId)))
        case .groupMembers(let appKey, let groupId, let p, let size):
            let g = try group(try app(appKey), groupId)
            return .userIdsPage(try page(g.members.all, p, size), total: g.members.count)
        case .isGroupMember(let appKey, let groupId, let users):
            let g = try group(try app(appKey), groupId)
            guard users.count <= Limits.maxGroupUsersPerCall else {
                throw .invalid("userIds", "at most \(Limits.maxGroupUsersPerCall) users per call")
            }
            for u in users { try Validate.userId(u) }
            return .presence(users.map { (userId: $0, inRoom: g.members.contains($0)) })
        case .channels(let appKey, let groupId, let p, let size):
            let g = try group(try app(appKey), groupId)
            let all = g.channelOrder.all.compactMap { g.channels[$0] }
            return .channels(try page(all, p, size).map { channelInfo(g, $0) }, total: all.count)
        case .privateMembers(let appKey, let groupId, let channelId, let p, let size):
            let g = try group(try app(appKey), groupId)
            let c = try channel(g, channelId)
            return .userIdsPage(try page(c.privateMembers.all, p, size), total: c.privateMembers.count)
        case .userChannels(let appKey, let groupId, let user, let p, let size):
            let g = try group(try app(appKey), groupId)
            try Validate.userId(user)
            guard g.members.contains(user) else { throw ChatError(.notGroupMember, "\(user) is not a member of ultra group \(groupId)", field: "userId") }
            let visible = g.channelOrder.all.compactMap { g.channels[$0] }.filter { g.canSee(user, $0) }
            return .channels(try page(visible, p, size).map { channelInfo(g, $0) }, total: visible.count)
        default:
            return nil
        }
    }
}
