import Chat
import HTTP1
import Server

/// REST for ultra groups (SPEC §4) and conversation status (SPEC §5), shaped as API.md proposes.
extension RESTAPI {
    /// `type` as "public"/"private" or the vendor's 0/1.
    struct ChannelTypeValue: Decodable {
        let type: ChannelType
        init(from decoder: Decoder) throws {
            let c = try decoder.singleValueContainer()
            let text: String
            if let n = try? c.decode(Int.self) { text = String(n) } else { text = try c.decode(String.self) }
            do {
                type = try ChannelType.parse(text)
            } catch {
                throw DecodingError.dataCorruptedError(in: c, debugDescription: "must be public (0) or private (1)")
            }
        }
    }

    static func page(_ req: Request) throws(ChatError) -> (Int, Int) {
        (try int(req, "page") ?? 1, try int(req, "pageSize") ?? 20)
    }

    static func conversationKey(_ req: Request, channelId: String?) throws(ChatError) -> ConversationKey {
        guard let raw = Int(param(req, "conversationType")) else {
            throw ChatError(.invalidParameter, "conversationType must be 1, 3, 6 or 10", field: "conversationType")
        }
        return ConversationKey(type: try ConversationType.parse(raw), targetId: param(req, "targetId"), channelId: channelId ?? "")
    }

    func registerGroups(_ r: inout Router.Builder) {
        let api = self

        // Ultra groups (UG-1).
        r.add(.POST, "/v1/groups", signed { req, app, writer in
            struct Body: Decodable {
                var groupId: String
                var name: String?
                var creator: String?
            }
            api.attempt(writer, status: .created) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .createGroup(app: app, groupId: b.groupId, name: b.name ?? "", creator: b.creator)
            }
        })
        r.add(.GET, "/v1/groups/{groupId}", signed { req, app, writer in api.ask(.group(app: app, groupId: Self.param(req, "groupId")), writer) })
        r.add(.DELETE, "/v1/groups/{groupId}", signed { req, app, writer in
            api.run(.dismissGroup(app: app, groupId: Self.param(req, "groupId")), writer)
        })
        r.add(.POST, "/v1/groups/{groupId}/members", signed { req, app, writer in
            struct Body: Decodable { var userIds: [String] }
            api.attempt(writer) { () throws(ChatError) in
                .joinGroup(app: app, groupId: Self.param(req, "groupId"), try decodeBody(Body.self, from: req.body).userIds)
            }
        })
        r.add(.DELETE, "/v1/groups/{groupId}/members", signed { req, app, writer in
            api.run(.quitGroup(app: app, groupId: Self.param(req, "groupId"), Self.list(req, "userIds")), writer)
        })
        r.add(.GET, "/v1/groups/{groupId}/members", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                let (p, size) = try Self.page(req)
                return .groupMembers(app: app, groupId: Self.param(req, "groupId"), page: p, pageSize: size)
            }
        })

        // Channels (UG-1..UG-3, UG-6).
        r.add(.POST, "/v1/groups/{groupId}/channels", signed { req, app, writer in
            struct Body: Decodable {
                var channelId: String
                var type: ChannelTypeValue?
            }
            api.attempt(writer, status: .created) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .createChannel(app: app, groupId: Self.param(req, "groupId"), channelId: b.channelId, b.type?.type ?? .public)
            }
        })
        r.add(.GET, "/v1/groups/{groupId}/channels", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                let (p, size) = try Self.page(req)
                return .channels(app: app, groupId: Self.param(req, "groupId"), page: p, pageSize: size)
            }
        })
        r.add(.PATCH, "/v1/groups/{groupId}/channels/{channelId}", signed { req, app, writer in
            struct Body: Decodable { var type: ChannelTypeValue }
            api.attempt(writer) { () throws(ChatError) in
                .changeChannelType(app: app, groupId: Self.param(req, "groupId"), channelId: Self.param(req, "channelId"),
                                   try decodeBody(Body.self, from: req.body).type.type)
            }
        })
        r.add(.DELETE, "/v1/groups/{groupId}/channels/{channelId}", signed { req, app, writer in
            api.run(.deleteChannel(app: app, groupId: Self.param(req, "groupId"), channelId: Self.param(req, "channelId")), writer)
        })

        // Private lists (UG-1, UG-4, UG-6).
        r.add(.POST, "/v1/groups/{groupId}/channels/{channelId}/private-members", signed { req, app, writer in
            struct Body: Decodable { var userIds: [String] }
            api.attempt(writer) { () throws(ChatError) in
                .addPrivateMembers(app: app, groupId: Self.param(req, "groupId"), channelId: Self.param(req, "channelId"),
                                   try decodeBody(Body.self, from: req.body).userIds)
            }
        })
        r.add(.DELETE, "/v1/groups/{groupId}/channels/{channelId}/private-members", signed { req, app, writer in
            api.run(.removePrivateMembers(app: app, groupId: Self.param(req, "groupId"), channelId: Self.param(req, "channelId"),
                                          Self.list(req, "userIds")), writer)
        })
        r.add(.GET, "/v1/groups/{groupId}/channels/{channelId}/private-members", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                let (p, size) = try Self.page(req)
                return .privateMembers(app: app, groupId: Self.param(req, "groupId"), channelId: Self.param(req, "channelId"), page: p, pageSize: size)
            }
        })
        r.add(.GET, "/v1/groups/{groupId}/users/{userId}/channels", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                let (p, size) = try Self.page(req)
                return .userChannels(app: app, groupId: Self.param(req, "groupId"), userId: Self.param(req, "userId"), page: p, pageSize: size)
            }
        })

        // Group and channel default levels (CS-4).
        r.add(.PUT, "/v1/groups/{groupId}/notification-level", signed { req, app, writer in
            struct Body: Decodable {
                var notificationLevel: Int
                var channelId: String?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .setGroupNotificationLevel(app: app, groupId: Self.param(req, "groupId"), channelId: b.channelId,
                                                  try NotificationLevel.parse(b.notificationLevel))
            }
        })
        r.add(.GET, "/v1/groups/{groupId}/notification-level", signed { req, app, writer in
            api.ask(.groupNotificationLevel(app: app, groupId: Self.param(req, "groupId"), channelId: req.query("channelId")), writer)
        })

        // Conversation status (CS-1..CS-4).
        r.add(.PUT, "/v1/users/{userId}/conversations/{conversationType}/{targetId}", signed { req, app, writer in
            struct Body: Decodable {
                var channelId: String?
                var pinned: Bool?
                var notificationLevel: Int?
            }
            api.attempt(writer) { () throws(ChatError) in
                let b = try decodeBody(Body.self, from: req.body)
                return .setConversationStatus(app: app, userId: Self.param(req, "userId"), try Self.conversationKey(req, channelId: b.channelId),
                                              pinned: b.pinned, level: try b.notificationLevel.map { v throws(ChatError) in try NotificationLevel.parse(v) },
                                              .server)
            }
        })
        r.add(.GET, "/v1/users/{userId}/conversations/{conversationType}/{targetId}", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                .conversationStatus(app: app, userId: Self.param(req, "userId"), try Self.conversationKey(req, channelId: req.query("channelId")))
            }
        })
        r.add(.GET, "/v1/users/{userId}/conversations", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                .conversationStatuses(app: app, userId: Self.param(req, "userId"), since: Int64(try Self.int(req, "cursor") ?? 0),
                                      limit: try Self.int(req, "limit") ?? 100)
            }
        })
        r.add(.PUT, "/v1/users/{userId}/conversation-types/{conversationType}", signed { req, app, writer in
            struct Body: Decodable { var notificationLevel: Int }
            api.attempt(writer) { () throws(ChatError) in
                guard let raw = Int(Self.param(req, "conversationType")) else {
                    throw ChatError(.invalidParameter, "conversationType must be 1, 3, 6 or 10", field: "conversationType")
                }
                return .setConversationTypeLevel(app: app, userId: Self.param(req, "userId"), try ConversationType.parse(raw),
                                                 try NotificationLevel.parse(try decodeBody(Body.self, from: req.body).notificationLevel))
            }
        })
        r.add(.GET, "/v1/users/{userId}/conversation-types/{conversationType}", signed { req, app, writer in
            api.attemptQuery(writer) { () throws(ChatError) in
                guard let raw = Int(Self.param(req, "conversationType")) else {
                    throw ChatError(.invalidParameter, "conversationType must be 1, 3, 6 or 10", field: "conversationType")
                }
                return .conversationTypeLevel(app: app, userId: Self.param(req, "userId"), try ConversationType.parse(raw))
            }
        })
    }
}
