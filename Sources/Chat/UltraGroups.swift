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
        guard app.groups.count < Limits.maxUltraGroupsPerApp else {
            throw ChatError(.limitExceeded, "an app holds at most \(Limits.maxUltraGroupsPerApp) ultra groups", field: "groupId")
        }
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
        app.communityBytes -= g.community.historyBytes.values.reduce(0, +)
        out.mutations.append(.deleteGroup(app: appKey, groupId: groupId))
        channelWebhook(appKey, g, "", "groupDismissed", now: now, &out)
        return .done
    }

    func joinGroup(_ appKey: String, _ groupId: String, _ users: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        try Validate.userIds(users, max: Limits.maxGroupUsersPerCall)
        let added = Set(users.filter { !g.members.contains($0) }).count
        guard g.members.count + added <= Limits.maxUltraGroupMembers else {
            throw ChatError(.limitExceeded, "an ultra group has at most \(Limits.maxUltraGroupMembers) members; \(g.members.count) are in it", field: "userIds")
        }
        for u in users where g.members.append(u) {
            out.mutations.append(.putGroupMember(app: appKey, groupId: groupId, u, sequence: nextGroupSequence()))
        }
        return .group(groupInfo(g))
    }

    /// Quitting also takes the users off every private list and out of every user group (those
    /// hold group members only).
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
            // MO-4: and its user groups (they too hold group members only).
            for id in g.userGroupOrder.all {
                if let ug = g.userGroups[id], ug.members.remove(u) {
                    out.mutations.append(.deleteUserGroupMember(app: appKey, groupId: groupId, userGroupId: id, u))
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

    /// UG-2: public→private tells every group member (2 to those on the private list or in a user
    /// group bound to the channel, MO-4; 6 otherwise); private→public tells only those (3). The
    /// default channel stays public.
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
            let onList = g.members.all.filter { g.isListed($0, c) }
            let others = g.members.all.filter { !g.isListed($0, c) }
            if !onList.isEmpty {
                out.deliver(.channelTypeChanged([ChannelTypeChange(groupId: groupId, channelId: channelId, changeType: .publicToPrivate, time: now)]),
                            to: .users(app: appKey, onList))
            }
            if !others.isEmpty {
                out.deliver(.channelTypeChanged([ChannelTypeChange(groupId: groupId, channelId: channelId, changeType: .publicToPrivateUserNotIn,
                                                                   time: now)]), to: .users(app: appKey, others))
            }
        } else {
            let listed = g.listed(c)
            if !listed.isEmpty {
                out.deliver(.channelTypeChanged([ChannelTypeChange(groupId: groupId, channelId: channelId, changeType: .privateToPublic, time: now)]),
                            to: .users(app: appKey, listed))
            }
        }
        channelWebhook(appKey, g, channelId, type == .private ? "publicToPrivate" : "privateToPublic", now: now, &out)
        return .channel(channelInfo(g, c))
    }

    /// UG-3: deleting a public channel tells every group member; a private one only those who see
    /// it (its list and its bound user groups' members, MO-4). Its bindings go with it.
    func deleteChannel(_ appKey: String, _ groupId: String, _ channelId: String, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        let c = try channel(g, channelId)
        if channelId == UltraGroup.defaultChannelId {
            throw .invalid("channelId", "the default channel \(UltraGroup.defaultChannelId) cannot be deleted")
        }
        let audience = c.type == .public ? g.members.all : g.listed(c)
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

    /// UG-4: removed users of a private channel who no longer see it (MO-4: not in a user group
    /// bound to it either) each get one event about themselves; a public channel's list changes
    /// silently.
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
        if c.type == .private { tellLost(appKey, g, c, removed, now, &out) }
        if !removed.isEmpty { channelWebhook(appKey, g, channelId, "privateMembersRemoved", users: removed, now: now, &out) }
        return .channel(channelInfo(g, c))
    }

    // MARK: User groups (MO-4)

    /// A user group's id: an identifier of at most `Limits.maxUserGroupIdBytes` bytes.
    static func validateUserGroupId(_ id: String, field: String = "userGroupId") throws(ChatError) {
        try Validate.identifier(id, field: field, maxBytes: Limits.maxUserGroupIdBytes)
    }

    /// One call's user group ids: 1 to `Limits.maxUserGroupsPerCall`, no duplicates.
    static func validateUserGroupIds(_ ids: [String], field: String = "userGroupIds") throws(ChatError) {
        guard !ids.isEmpty else { throw .invalid(field, "\(field) must not be empty") }
        guard ids.count <= Limits.maxUserGroupsPerCall else {
            throw .invalid(field, "\(field) has \(ids.count) ids; at most \(Limits.maxUserGroupsPerCall) are allowed")
        }
        for id in ids { try validateUserGroupId(id, field: field) }
        for i in ids.indices.dropFirst() where ids[..<i].contains(ids[i]) { throw .invalid(field, "\(field) has duplicates") }
    }

    func userGroup(_ g: UltraGroup, _ id: String) throws(ChatError) -> UserGroup {
        guard let ug = g.userGroups[id] else {
            try Self.validateUserGroupId(id)
            throw ChatError(.notFound, "user group \(id) does not exist in ultra group \(g.id)", field: "userGroupId")
        }
        return ug
    }

    func userGroupInfo(_ g: UltraGroup, _ id: String) -> UserGroupInfo {
        UserGroupInfo(userGroupId: id, userIds: g.userGroups[id]?.members.all ?? [],
                      channelIds: g.channelOrder.all.filter { g.channels[$0]?.userGroups.contains(id) == true })
    }

    /// Of `users`, those who see `c` while it is private (taken before a change that may hide it).
    private func privateViewers(_ g: UltraGroup, _ c: UltraChannel, _ users: [String]) -> [String] {
        c.type == .private ? users.filter { g.canSee($0, c) } : []
    }

    /// UG-4: each of `viewers` who no longer sees private `c` gets one event about themselves.
    private func tellLost(_ appKey: String, _ g: UltraGroup, _ c: UltraChannel, _ viewers: [String], _ now: Int64, _ out: inout Outcome) {
        for u in viewers where !g.canSee(u, c) {
            out.deliver(.channelUsersKicked([ChannelUserKicked(groupId: g.id, channelId: c.id, userId: u, time: now)]), to: .users(app: appKey, [u]))
        }
    }

    /// The members of these user groups, each once.
    private func membersOf(_ g: UltraGroup, _ ids: [String]) -> [String] {
        var seen = Set<String>()
        var all: [String] = []
        for id in ids { for u in g.userGroups[id]?.members.all ?? [] where seen.insert(u).inserted { all.append(u) } }
        return all
    }

    private func userGroupWebhook(_ app: String, _ g: UltraGroup, channel: String, _ change: String, _ ids: [String], users: [String] = [],
                                  now: Int64, _ out: inout Outcome) {
        out.webhooks.append(WebhookRecord(app: app, type: .channelChanged, roomId: "", userIds: users, time: now,
                                          details: ["groupId": g.id, "channelId": channel, "change": change,
                                                    "userGroupIds": ids.joined(separator: ",")]))
    }

    /// Creates user groups (ids that exist are left as they are); past
    /// `Limits.maxUserGroupsPerGroup` none is created.
    func createUserGroups(_ appKey: String, _ groupId: String, _ ids: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let g = try group(try app(appKey), groupId)
        try Self.validateUserGroupIds(ids)
        let new = ids.filter { g.userGroups[$0] == nil }
        guard g.userGroups.count + new.count <= Limits.maxUserGroupsPerGroup else {
            throw ChatError(.limitExceeded, "an ultra group has at most \(Limits.maxUserGroupsPerGroup) user groups (\(g.userGroups.count) now)",
                            field: "userGroupIds")
        }
        for id in new {
            g.userGroups[id] = UserGroup(id: id)
            g.userGroupOrder.append(id)
            out.mutations.append(.putUserGroup(app: appKey, groupId: groupId, userGroupId: id, sequence: nextGroupSequence()))
        }
        if !new.isEmpty { userGroupWebhook(appKey, g, channel: "", "userGroupsCreated", new, now: now, &out) }
        return .done
    }

    /// Deletes user groups (unknown ids are ignored) with their members and bindings; members
    /// who no longer see a private channel they saw through one are told (UG-4).
    func deleteUserGroups(_ appKey: String, _ groupId: String, _ ids: [String], _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let g = try group(try app(appKey), groupId)
        try Self.validateUserGroupIds(ids)
        let gone = ids.filter { g.userGroups[$0] != nil }
        guard !gone.isEmpty else { return .done }
        let bound = g.channelOrder.all.compactMap { g.channels[$0] }.filter { c in gone.contains { c.userGroups.contains($0) } }
        let before = bound.map { c in (c, privateViewers(g, c, membersOf(g, gone.filter { c.userGroups.contains($0) }))) }
        for id in gone {
            g.userGroups[id] = nil
            g.userGroupOrder.remove(id)
            for c in bound { c.userGroups.remove(id) }
            out.mutations.append(.deleteUserGroup(app: appKey, groupId: groupId, userGroupId: id))
        }
        for (c, viewers) in before { tellLost(appKey, g, c, viewers, now, &out) }
        userGroupWebhook(appKey, g, channel: "", "userGroupsDeleted", gone, now: now, &out)
        return .done
    }

    /// At most `Limits.maxUsersPerCall` users, every one a group member (24406), and the user
    /// group at most `Limits.maxUsersPerUserGroup` after it; or nothing changes.
    func addUserGroupMembers(_ appKey: String, _ groupId: String, _ userGroupId: String, _ users: [String], _ now: Int64,
                             _ out: inout Outcome) throws(ChatError) -> Reply {
        let g = try group(try app(appKey), groupId)
        let ug = try userGroup(g, userGroupId)
        try Validate.userIds(users)
        if let stranger = users.first(where: { !g.members.contains($0) }) {
            throw ChatError(.notGroupMember, "\(stranger) is not a member of ultra group \(groupId)", field: "userIds")
        }
        let new = users.filter { !ug.members.contains($0) }
        guard ug.members.count + new.count <= Limits.maxUsersPerUserGroup else {
            throw ChatError(.limitExceeded, "a user group has at most \(Limits.maxUsersPerUserGroup) users (\(ug.members.count) now)", field: "userIds")
        }
        for u in new {
            ug.members.append(u)
            out.mutations.append(.putUserGroupMember(app: appKey, groupId: groupId, userGroupId: userGroupId, u, sequence: nextGroupSequence()))
        }
        if !new.isEmpty { userGroupWebhook(appKey, g, channel: "", "userGroupMembersAdded", [userGroupId], users: new, now: now, &out) }
        return .done
    }

    /// Users who no longer see a private channel bound to the user group are told (UG-4).
    func removeUserGroupMembers(_ appKey: String, _ groupId: String, _ userGroupId: String, _ users: [String], _ now: Int64,
                                _ out: inout Outcome) throws(ChatError) -> Reply {
        let g = try group(try app(appKey), groupId)
        let ug = try userGroup(g, userGroupId)
        try Validate.userIds(users)
        let removed = users.filter { ug.members.contains($0) }
        guard !removed.isEmpty else { return .done }
        let bound = g.channelOrder.all.compactMap { g.channels[$0] }.filter { $0.userGroups.contains(userGroupId) }
        let before = bound.map { ($0, privateViewers(g, $0, removed)) }
        for u in removed {
            ug.members.remove(u)
            out.mutations.append(.deleteUserGroupMember(app: appKey, groupId: groupId, userGroupId: userGroupId, u))
        }
        for (c, viewers) in before { tellLost(appKey, g, c, viewers, now, &out) }
        userGroupWebhook(appKey, g, channel: "", "userGroupMembersRemoved", [userGroupId], users: removed, now: now, &out)
        return .done
    }

    /// Every id must name a user group of the group, and the channel holds at most
    /// `Limits.maxUserGroupsPerChannel` after it; or nothing changes. Any channel may hold
    /// bindings: they count once it is private.
    func bindUserGroups(_ appKey: String, _ groupId: String, _ channelId: String, _ ids: [String], _ now: Int64,
                        _ out: inout Outcome) throws(ChatError) -> Reply {
        let g = try group(try app(appKey), groupId)
        let c = try channel(g, channelId)
        try Self.validateUserGroupIds(ids)
        if let missing = ids.first(where: { g.userGroups[$0] == nil }) {
            throw ChatError(.notFound, "user group \(missing) does not exist in ultra group \(groupId)", field: "userGroupIds")
        }
        let new = ids.filter { !c.userGroups.contains($0) }
        guard c.userGroups.count + new.count <= Limits.maxUserGroupsPerChannel else {
            throw ChatError(.limitExceeded, "a channel is bound to at most \(Limits.maxUserGroupsPerChannel) user groups (\(c.userGroups.count) now)",
                            field: "userGroupIds")
        }
        for id in new {
            c.userGroups.append(id)
            out.mutations.append(.putChannelUserGroup(app: appKey, groupId: groupId, channelId: channelId, userGroupId: id, sequence: nextGroupSequence()))
        }
        if !new.isEmpty { userGroupWebhook(appKey, g, channel: channelId, "userGroupsBound", new, now: now, &out) }
        return .channel(channelInfo(g, c))
    }

    /// Unknown or unbound ids are ignored; members who no longer see the private channel are
    /// told (UG-4).
    func unbindUserGroups(_ appKey: String, _ groupId: String, _ channelId: String, _ ids: [String], _ now: Int64,
                          _ out: inout Outcome) throws(ChatError) -> Reply {
        let g = try group(try app(appKey), groupId)
        let c = try channel(g, channelId)
        try Self.validateUserGroupIds(ids)
        let removed = ids.filter { c.userGroups.contains($0) }
        guard !removed.isEmpty else { return .channel(channelInfo(g, c)) }
        let viewers = privateViewers(g, c, membersOf(g, removed))
        for id in removed {
            c.userGroups.remove(id)
            out.mutations.append(.deleteChannelUserGroup(app: appKey, groupId: groupId, channelId: channelId, userGroupId: id))
        }
        tellLost(appKey, g, c, viewers, now, &out)
        userGroupWebhook(appKey, g, channel: channelId, "userGroupsUnbound", removed, now: now, &out)
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
        case .userGroups(let appKey, let groupId, let p, let size):
            let g = try group(try app(appKey), groupId)
            let all = g.userGroupOrder.all
            return .userGroups(try page(all, p, size).map { userGroupInfo(g, $0) }, total: all.count)
        case .channelUserGroups(let appKey, let groupId, let channelId, let p, let size):
            let g = try group(try app(appKey), groupId)
            let c = try channel(g, channelId)
            return .userGroups(try page(c.userGroups.all, p, size).map { userGroupInfo(g, $0) }, total: c.userGroups.count)
        case .userUserGroups(let appKey, let groupId, let user, let p, let size):
            let g = try group(try app(appKey), groupId)
            try Validate.userId(user)
            let all = g.userGroupOrder.all.filter { g.userGroups[$0]?.members.contains(user) == true }
            return .userGroups(try page(all, p, size).map { userGroupInfo(g, $0) }, total: all.count)
        case .userGroupChannels(let appKey, let groupId, let userGroupId, let p, let size):
            let g = try group(try app(appKey), groupId)
            _ = try userGroup(g, userGroupId)
            let all = g.channelOrder.all.compactMap { g.channels[$0] }.filter { $0.userGroups.contains(userGroupId) }
            return .channels(try page(all, p, size).map { channelInfo(g, $0) }, total: all.count)
        default:
            return nil
        }
    }
}
