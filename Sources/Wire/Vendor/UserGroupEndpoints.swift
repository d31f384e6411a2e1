import Chat

/// MO-4: an ultra group's user groups on RongCloud (`/ultragroup/usergroup/*`,
/// `/ultragroup/channel/usergroup/*`) and Nexconn (`/v4/community-channel/user-group/*`,
/// `/channel/user-group/*`). The calls are the same on both; RongCloud comma-joins `userIds` and
/// `userGroupIds` in a form body (repeated keys are taken too) and its server SDKs send `add.json`
/// as JSON (`{"groupId", "userGroups": [{"userGroupId"}]}`), which a form body may carry as the
/// text of `userGroups`; Nexconn sends JSON arrays. Pages are 1-based, 10 by default, at most 50.
extension RongCloudFamily {
    /// How a surface names the user-group calls' answers.
    struct UserGroupSpelling: Sendable {
        let base: Spelling
        /// A channel's bound user groups (`data`, `userGroupIds`), a user's (`data`,
        /// `userGroupIds`) and a user group's channels (`data`, `subchannelIds`).
        let channelUserGroups: String
        let userUserGroups: String
        let userGroupChannels: String
    }

    /// The calls name `userIds` as sent (not the surfaces' room-member names), and `add`
    /// names its `userGroups`.
    static let userGroupFields = ["userIds": "userIds"]

    static func userGroupCall(_ c: Command, fields: [String: String] = userGroupFields) -> VendorResolution {
        var call = VendorCall(.command(c))
        call.fields = fields
        return .call(call)
    }

    static func userGroupQuery(_ q: Query, _ render: @escaping @Sendable (Reply, inout JSONWriter) -> Void) -> VendorResolution {
        var call = VendorCall(.query(q), render: render)
        call.fields = userGroupFields
        return .call(call)
    }

    static func userGroupPage(_ p: P) throws(ChatError) -> (Int, Int) {
        try pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 10, maxSize: 50)
    }

    /// `userGroups`: an array of `{"userGroupId": "…"}`, in a JSON body or as the JSON text of a
    /// form value.
    static func userGroupItems(_ p: P) throws(ChatError) -> [String] {
        let shape = ChatError(.invalidParameter, "userGroups must be an array of {\"userGroupId\": \"…\"}", field: "userGroups")
        let items: [JSONValue]
        switch p.value("userGroups") {
        case .array(let a)?: items = a
        case nil, .null?:
            guard let text = try p.string("userGroups"), !text.isEmpty else {
                throw ChatError(.invalidParameter, "userGroups is required", field: "userGroups")
            }
            guard case .array(let a)? = JSONValue.parse(Array(text.utf8)) else { throw shape }
            items = a
        default: throw shape
        }
        return try items.map { (item: JSONValue) throws(ChatError) -> String in
            guard case .object(let o) = item, case .string(let id)? = o["userGroupId"] else { throw shape }
            return id
        }
    }

    static func requiredIds(_ p: P, _ name: String) throws(ChatError) -> [String] {
        let ids = try p.commaList(name)
        guard !ids.isEmpty else { throw ChatError(.invalidParameter, "\(name) is required", field: name) }
        return ids
    }

    /// The eight calls both surfaces have, and the two listings of a user's user groups and of a
    /// user group's channels.
    static func createUserGroups(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return userGroupCall(.createUserGroups(app: i.app, groupId: try p.required(s.base.group), try userGroupItems(p)),
                                 fields: ["userGroupIds": "userGroups"])
        }
    }

    static func deleteUserGroups(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return userGroupCall(.deleteUserGroups(app: i.app, groupId: try p.required(s.base.group), try requiredIds(p, "userGroupIds")))
        }
    }

    static func listUserGroups(_ path: String, _ s: UserGroupSpelling, readsOrder: Bool = false) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            // Nexconn's `order` is read (an integer) and the list stays in creation order.
            if readsOrder { _ = try p.int("order") }
            let (page, size) = try userGroupPage(p)
            return userGroupQuery(.userGroups(app: i.app, groupId: try p.required(s.base.group), page: page, pageSize: size)) { reply, w in
                guard case .userGroups(let groups, _) = reply else { return }
                writeObjects(&w, "userGroups", groups) { g, w in w.field("userGroupId", g.userGroupId) }
            }
        }
    }

    static func addUserGroupMembers(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return userGroupCall(.addUserGroupMembers(app: i.app, groupId: try p.required(s.base.group), userGroupId: try p.required("userGroupId"),
                                                      try requiredIds(p, "userIds")))
        }
    }

    static func removeUserGroupMembers(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return userGroupCall(.removeUserGroupMembers(app: i.app, groupId: try p.required(s.base.group), userGroupId: try p.required("userGroupId"),
                                                         try requiredIds(p, "userIds")))
        }
    }

    static func bindUserGroups(_ path: String, _ s: UserGroupSpelling, bind: Bool) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let group = try p.required(s.base.group), channel = try p.required(s.base.channel), ids = try requiredIds(p, "userGroupIds")
            return userGroupCall(bind ? .bindUserGroups(app: i.app, groupId: group, channelId: channel, ids)
                                      : .unbindUserGroups(app: i.app, groupId: group, channelId: channel, ids))
        }
    }

    static func listChannelUserGroups(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let (page, size) = try userGroupPage(p)
            return userGroupQuery(.channelUserGroups(app: i.app, groupId: try p.required(s.base.group), channelId: try p.required(s.base.channel),
                                                     page: page, pageSize: size)) { reply, w in
                guard case .userGroups(let groups, _) = reply else { return }
                w.field(s.channelUserGroups, groups.map(\.userGroupId))
            }
        }
    }

    static func listUserUserGroups(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let (page, size) = try userGroupPage(p)
            return userGroupQuery(.userUserGroups(app: i.app, groupId: try p.required(s.base.group), userId: try p.required("userId"),
                                                  page: page, pageSize: size)) { reply, w in
                guard case .userGroups(let groups, _) = reply else { return }
                w.field(s.userUserGroups, groups.map(\.userGroupId))
            }
        }
    }

    static func listUserGroupChannels(_ path: String, _ s: UserGroupSpelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let (page, size) = try userGroupPage(p)
            return userGroupQuery(.userGroupChannels(app: i.app, groupId: try p.required(s.base.group), userGroupId: try p.required("userGroupId"),
                                                     page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                w.field(s.userGroupChannels, channels.map(\.channelId))
            }
        }
    }
}
