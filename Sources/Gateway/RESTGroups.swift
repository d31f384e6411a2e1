import Chat
import HTTP1
import Server
import Wire

/// REST for ultra groups (SPEC §4) and conversation status (SPEC §5), shaped as API.md proposes.
extension RESTAPI {
    static func conversation(_ req: Request, channelId: String?) throws(ChatError) -> ConversationKey {
        try ConversationAddress(path: param(req, "conversationType"), targetId: param(req, "targetId"), channelId: channelId).key()
    }

    static func conversationType(_ req: Request) throws(ChatError) -> ConversationType {
        guard let raw = Int(param(req, "conversationType")) else {
            throw ChatError(.invalidParameter, "conversationType must be 1, 3, 6 or 10", field: "conversationType")
        }
        return try ConversationType.parse(raw)
    }

    func registerGroups(_ routes: inout SignedRoutes<NativeRoute>) {
        let api = self
        typealias R = RESTAPI
        @Sendable func group(_ req: Request) -> String { R.param(req, "groupId") }
        @Sendable func channel(_ req: Request) -> String { R.param(req, "channelId") }
        @Sendable func page(_ req: Request) throws(ChatError) -> (page: Int, pageSize: Int) {
            let request = try PageRequest(query: R.query(req))
            return request.values
        }

        // Ultra groups (UG-1).
        routes.signed(.createGroup) { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in try decodeBody(CreateGroupRequest.self, from: req.body).command(c) }
        }
        routes.signed(.getGroup) { req, c, writer in api.query(writer) { .group(app: c.app, groupId: group(req)) } }
        routes.signed(.dismissGroup) { req, c, writer in api.command(writer) { .dismissGroup(app: c.app, groupId: group(req)) } }
        routes.signed(.renameGroup) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(RenameGroupRequest.self, from: req.body).command(c, groupId: group(req)) }
        }
        routes.signed(.joinGroup) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .joinGroup(app: c.app, groupId: group(req), try decodeBody(UserIdsRequest.self, from: req.body).userIds)
            }
        }
        routes.signed(.quitGroup) { req, c, writer in
            api.command(writer) { .quitGroup(app: c.app, groupId: group(req), R.query(req).list("userIds")) }
        }
        routes.signed(.listGroupMembers) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                let p = try page(req)
                return .groupMembers(app: c.app, groupId: group(req), page: p.page, pageSize: p.pageSize)
            }
        }

        // Channels (UG-1..UG-3, UG-6).
        routes.signed(.createChannel) { req, c, writer in
            api.command(writer, status: .created) { () throws(ChatError) in
                try decodeBody(CreateChannelRequest.self, from: req.body).command(c, groupId: group(req))
            }
        }
        routes.signed(.listChannels) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                let p = try page(req)
                return .channels(app: c.app, groupId: group(req), page: p.page, pageSize: p.pageSize)
            }
        }
        routes.signed(.changeChannelType) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .changeChannelType(app: c.app, groupId: group(req), channelId: channel(req),
                                   try decodeBody(ChannelTypeRequest.self, from: req.body).type.type)
            }
        }
        routes.signed(.deleteChannel) { req, c, writer in
            api.command(writer) { .deleteChannel(app: c.app, groupId: group(req), channelId: channel(req)) }
        }

        // Private lists (UG-1, UG-4, UG-6).
        routes.signed(.addPrivateMembers) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .addPrivateMembers(app: c.app, groupId: group(req), channelId: channel(req), try decodeBody(UserIdsRequest.self, from: req.body).userIds)
            }
        }
        routes.signed(.removePrivateMembers) { req, c, writer in
            api.command(writer) { .removePrivateMembers(app: c.app, groupId: group(req), channelId: channel(req), R.query(req).list("userIds")) }
        }
        routes.signed(.listPrivateMembers) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                let p = try page(req)
                return .privateMembers(app: c.app, groupId: group(req), channelId: channel(req), page: p.page, pageSize: p.pageSize)
            }
        }
        routes.signed(.userChannels) { req, c, writer in
            api.query(writer) { () throws(ChatError) in try PageRequest(query: R.query(req)).userChannels(c, groupId: group(req), userId: R.param(req, "userId")) }
        }

        // User groups bound to channels (MO-4).
        @Sendable func userGroup(_ req: Request) -> String { R.param(req, "userGroupId") }
        routes.signed(.createUserGroups) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .createUserGroups(app: c.app, groupId: group(req), try decodeBody(UserGroupIdsRequest.self, from: req.body).userGroupIds)
            }
        }
        routes.signed(.listUserGroups) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                let p = try page(req)
                return .userGroups(app: c.app, groupId: group(req), page: p.page, pageSize: p.pageSize)
            }
        }
        routes.signed(.deleteUserGroups) { req, c, writer in
            api.command(writer) { .deleteUserGroups(app: c.app, groupId: group(req), R.query(req).list("userGroupIds")) }
        }
        routes.signed(.addUserGroupMembers) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .addUserGroupMembers(app: c.app, groupId: group(req), userGroupId: userGroup(req),
                                     try decodeBody(UserIdsRequest.self, from: req.body).userIds)
            }
        }
        routes.signed(.removeUserGroupMembers) { req, c, writer in
            api.command(writer) { .removeUserGroupMembers(app: c.app, groupId: group(req), userGroupId: userGroup(req), R.query(req).list("userIds")) }
        }
        routes.signed(.bindUserGroups) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .bindUserGroups(app: c.app, groupId: group(req), channelId: channel(req),
                                try decodeBody(UserGroupIdsRequest.self, from: req.body).userGroupIds)
            }
        }
        routes.signed(.unbindUserGroups) { req, c, writer in
            api.command(writer) { .unbindUserGroups(app: c.app, groupId: group(req), channelId: channel(req), R.query(req).list("userGroupIds")) }
        }
        routes.signed(.listChannelUserGroups) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                let p = try page(req)
                return .channelUserGroups(app: c.app, groupId: group(req), channelId: channel(req), page: p.page, pageSize: p.pageSize)
            }
        }

        // Group and channel default levels (CS-4).
        routes.signed(.setGroupLevel) { req, c, writer in
            api.command(writer) { () throws(ChatError) in try decodeBody(GroupLevelRequest.self, from: req.body).command(c, groupId: group(req)) }
        }
        routes.signed(.getGroupLevel) { req, c, writer in
            api.query(writer) { .groupNotificationLevel(app: c.app, groupId: group(req), channelId: req.query("channelId")) }
        }

        // Conversation status (CS-1..CS-4).
        routes.signed(.setConversationStatus) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                let b = try decodeBody(ConversationStatusRequest.self, from: req.body)
                return try b.command(c, userId: R.param(req, "userId"), try R.conversation(req, channelId: b.channelId))
            }
        }
        routes.signed(.getConversationStatus) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                .conversationStatus(app: c.app, userId: R.param(req, "userId"), try R.conversation(req, channelId: req.query("channelId")))
            }
        }
        routes.signed(.conversationStatuses) { req, c, writer in
            api.query(writer) { () throws(ChatError) in
                .conversationStatuses(app: c.app, userId: R.param(req, "userId"), since: Int64(try R.query(req).int("cursor") ?? 0),
                                      limit: try R.query(req).int("limit") ?? 100)
            }
        }
        routes.signed(.setConversationTypeLevel) { req, c, writer in
            api.command(writer) { () throws(ChatError) in
                .setConversationTypeLevel(app: c.app, userId: R.param(req, "userId"), try R.conversationType(req),
                                          try NotificationLevel.parse(try decodeBody(TypeLevelRequest.self, from: req.body).notificationLevel))
            }
        }
        routes.signed(.getConversationTypeLevel) { req, c, writer in
            api.query(writer) { () throws(ChatError) in .conversationTypeLevel(app: c.app, userId: R.param(req, "userId"), try R.conversationType(req)) }
        }
    }
}
