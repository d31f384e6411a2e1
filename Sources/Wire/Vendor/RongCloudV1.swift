import Chat

/// RongCloud's v1 server API (VC-1; `vendor-apis.md` §1.3, §1.5, §1.6): `POST` form bodies with
/// repeated keys for arrays (comma-joined `userIds` on ultra-group calls), `{"code":200,…}` answers.
public enum RongCloudV1 {
    typealias P = VendorParams

    // MARK: Parameters as RongCloud names them

    static func room(_ p: P) throws(ChatError) -> String { try p.required("chatroomId") }

    /// `userId`, repeated (1…20 on moderation calls: the domain checks the bound).
    static func users(_ p: P, _ name: String = "userId") throws(ChatError) -> [String] {
        let ids = try p.list(name)
        guard !ids.isEmpty else { throw ChatError(.invalidParameter, "\(name) is required", field: name) }
        return ids
    }

    static func notify(_ p: P) throws(ChatError) -> RCNotify? { try RongCloudFamily.notify(p) }

    static func minutes(_ p: P) throws(ChatError) -> Int { try p.requiredInt("minute") }

    static func userPairs(_ w: inout JSONWriter, _ items: [(userId: String, until: Int64?)]) {
        RongCloudFamily.writeExpiries(&w, "users", idKey: "userId", timeKey: "time", items)
    }

    // MARK: Endpoints

    public static let endpoints: [VendorEndpoint] = chatroom + ultraGroup + conversation

    static let chatroom: [VendorEndpoint] = [
        // Rooms (RC-9).
        VendorEndpoint("/chatroom/create.json") { i throws(ChatError) in
            // `chatroom[<id>]=<name>`, repeated; a room that exists already is kept (the old API's
            // behaviour), every id is checked before any room is made.
            var configs: [Command] = []
            for item in i.params.bracketed("chatroom") {
                let id = item.key
                // Checked here, before the first room is made, so a bad one changes nothing.
                guard !id.isEmpty && id.utf8.count <= Limits.maxRoomIdBytes else {
                    throw ChatError(.invalidParameter, "chatroom ids are 1 to \(Limits.maxRoomIdBytes) bytes", field: "chatroom")
                }
                guard item.value.utf8.count <= Limits.maxNameBytes else {
                    throw ChatError(.invalidParameter, "chatroom names are at most \(Limits.maxNameBytes) bytes", field: "chatroom")
                }
                var c = RoomConfig(roomId: id)
                c.name = item.value
                configs.append(.createRoom(app: i.app, c))
            }
            guard !configs.isEmpty else { throw ChatError(.invalidParameter, "chatroom[<id>]=<name> is required", field: "chatroom") }
            guard configs.count <= 100 else { throw ChatError(.invalidParameter, "at most 100 chatrooms per call", field: "chatroom") }
            return .call(VendorCall(.commands(configs, tolerating: [.roomExists])))
        },
        VendorEndpoint("/chatroom/create_new.json") { i throws(ChatError) in
            let p = i.params
            var c = RoomConfig(roomId: try room(p))
            c.destroyPolicy = try RongCloudFamily.destroyPolicy(p, minutesKey: "destroyTime")
            c.muted = try p.bool("isBan") ?? false
            c.muteAllowlist = try p.list("whiteUserIds")
            if let attributes = try p.stringMap("entryInfo") {
                c.attributes = Dictionary(attributes.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
                c.attributesOwner = try p.string("entryOwnerId")
            }
            return VendorCall.command(.createRoom(app: i.app, c))
        },
        VendorEndpoint("/chatroom/destroy/set.json") { i throws(ChatError) in
            var u = RoomUpdate()
            u.destroyPolicy = try RongCloudFamily.destroyPolicy(i.params, minutesKey: "destroyTime")
            return VendorCall.command(.updateRoom(app: i.app, roomId: try room(i.params), u, .server, nim: nil))
        },
        VendorEndpoint("/chatroom/destroy.json") { i throws(ChatError) in
            VendorCall.command(.destroyRooms(app: i.app, try users(i.params, "chatroomId")))
        },
        VendorEndpoint("/chatroom/get.json") { i throws(ChatError) in
            VendorCall.query(.room(app: i.app, roomId: try room(i.params))) { reply, w in
                guard case .room(let r) = reply else { return }
                w.field("chatroomId", r.roomId)
                w.field("createTime", r.createdAt)
                w.field("memberCount", r.onlineUserCount)
                RongCloudFamily.writeDestroy(&w, r.destroyPolicy, minutesKey: "destroyTime")
                w.field("ban", r.muted)
            }
        },
        VendorEndpoint("/chatroom/query.json") { i throws(ChatError) in
            VendorCall.query(.rooms(app: i.app, try users(i.params, "chatroomId"))) { reply, w in
                guard case .rooms(let rooms) = reply else { return }
                w.key("chatRooms")
                w.beginArray()
                for r in rooms {
                    w.beginObject()
                    // `chrmId` is what the REST docs and the Go SDK read; the Python SDK's docs say `chatroomId`.
                    w.field("chrmId", r.roomId)
                    w.field("chatroomId", r.roomId)
                    w.field("name", r.name)
                    w.field("time", VendorTime.dateTime(milliseconds: r.createdAt))
                    w.endObject()
                }
                w.endArray()
            }
        },

        // Members (RC-9).
        VendorEndpoint("/chatroom/user/query.json") { i throws(ChatError) in
            let p = i.params
            let order = try RongCloudFamily.joinOrder(p)
            let count = try p.requiredInt("count")
            guard count >= 1 && count <= Limits.maxMemberListCount else {
                throw ChatError(.invalidParameter, "count must be between 1 and \(Limits.maxMemberListCount)", field: "count")
            }
            return VendorCall.query(.members(app: i.app, roomId: try room(p), .present, order, limit: count, after: nil)) { reply, w in
                guard case .members(let members, let total) = reply else { return }
                w.field("total", total)
                w.key("users")
                w.beginArray()
                for m in members {
                    w.beginObject()
                    w.field("id", m.userId)
                    w.field("time", VendorTime.dateTime(milliseconds: m.enterTime))
                    w.endObject()
                }
                w.endArray()
            }
        },
        VendorEndpoint("/chatroom/user/exist.json") { i throws(ChatError) in
            let user = try i.params.required("userId")
            return VendorCall.query(.isInRoom(app: i.app, roomId: try room(i.params), [user])) { reply, w in
                guard case .presence(let p) = reply else { return }
                w.field("isInChrm", p.first?.inRoom ?? false)
            }
        },
        VendorEndpoint("/chatroom/users/exist.json") { i throws(ChatError) in
            VendorCall.query(.isInRoom(app: i.app, roomId: try room(i.params), try users(i.params))) { reply, w in
                guard case .presence(let p) = reply else { return }
                w.key("result")
                w.beginArray()
                for u in p {
                    w.beginObject()
                    w.field("userId", u.userId)
                    w.field("isInChrm", u.inRoom ? 1 : 0)
                    w.endObject()
                }
                w.endArray()
            }
        },

        // Blocks (RC-5): kick and keep out for `minute` minutes.
        VendorEndpoint("/chatroom/user/block/add.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.block(app: i.app, roomId: try room(p), try users(p), minutes: try minutes(p), .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/chatroom/user/block/rollback.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.unblock(app: i.app, roomId: try room(p), try users(p), .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/chatroom/user/block/list.json") { i throws(ChatError) in
            VendorCall.query(.blocks(app: i.app, roomId: try room(i.params))) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                userPairs(&w, u)
            }
        },

        // Global mutes (RC-6 6/7, RC-7).
        VendorEndpoint("/chatroom/user/ban/add.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.globalMute(app: i.app, try users(p), minutes: try minutes(p), rc: try notify(p)))
        },
        VendorEndpoint("/chatroom/user/ban/remove.json") { i throws(ChatError) in
            VendorCall.command(.globalUnmute(app: i.app, try users(i.params), rc: try notify(i.params)))
        },
        VendorEndpoint("/chatroom/user/ban/query.json") { i throws(ChatError) in
            VendorCall.query(.globalMutes(app: i.app)) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                userPairs(&w, u)
            }
        },

        // Mutes in one room (RC-6 0/1).
        VendorEndpoint("/chatroom/user/gag/add.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.mute(app: i.app, roomId: try room(p), try users(p), .minutes(try minutes(p)), .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/chatroom/user/gag/rollback.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.unmute(app: i.app, roomId: try room(p), try users(p), .all, .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/chatroom/user/gag/list.json") { i throws(ChatError) in
            VendorCall.query(.mutes(app: i.app, roomId: try room(i.params))) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                userPairs(&w, u)
            }
        },

        // Room-wide mute and its allowlist (RC-6 2–5).
        VendorEndpoint("/chatroom/ban/add.json") { i throws(ChatError) in
            VendorCall.command(.setRoomMuted(app: i.app, roomId: try room(i.params), true, .server, rc: try notify(i.params), nim: nil))
        },
        VendorEndpoint("/chatroom/ban/rollback.json") { i throws(ChatError) in
            VendorCall.command(.setRoomMuted(app: i.app, roomId: try room(i.params), false, .server, rc: try notify(i.params), nim: nil))
        },
        VendorEndpoint("/chatroom/ban/query.json") { i throws(ChatError) in
            let (page, size) = try pageAndSize(i.params, pageKey: "page", sizeKey: "size", defaultSize: 50)
            return VendorCall.query(.roomIdsWhere(app: i.app, .muted)) { reply, w in
                guard case .roomIds(let ids) = reply else { return }
                w.field("chatroomids", slice(ids, page: page, size: size))
            }
        },
        VendorEndpoint("/chatroom/ban/check.json") { i throws(ChatError) in
            VendorCall.query(.room(app: i.app, roomId: try room(i.params))) { reply, w in
                guard case .room(let r) = reply else { return }
                w.field("status", r.muted ? 1 : 0)
            }
        },
        VendorEndpoint("/chatroom/user/ban/whitelist/add.json") { i throws(ChatError) in
            VendorCall.command(.addToAllowlist(app: i.app, roomId: try room(i.params), try users(i.params), rc: try notify(i.params)))
        },
        VendorEndpoint("/chatroom/user/ban/whitelist/rollback.json") { i throws(ChatError) in
            VendorCall.command(.removeFromAllowlist(app: i.app, roomId: try room(i.params), try users(i.params), rc: try notify(i.params)))
        },
        VendorEndpoint("/chatroom/user/ban/whitelist/query.json") { i throws(ChatError) in
            VendorCall.query(.allowlist(app: i.app, roomId: try room(i.params))) { reply, w in
                guard case .userIds(let ids) = reply else { return }
                w.field("userIds", ids)
            }
        },

        // Keep-alive rooms: never destroyed automatically.
        VendorEndpoint("/chatroom/keepalive/add.json") { i throws(ChatError) in
            var u = RoomUpdate()
            u.keepAlive = true
            return VendorCall.command(.updateRoom(app: i.app, roomId: try room(i.params), u, .server, nim: nil))
        },
        VendorEndpoint("/chatroom/keepalive/remove.json") { i throws(ChatError) in
            var u = RoomUpdate()
            u.keepAlive = false
            return VendorCall.command(.updateRoom(app: i.app, roomId: try room(i.params), u, .server, nim: nil))
        },
        VendorEndpoint("/chatroom/keepalive/query.json") { i throws(ChatError) in
            VendorCall.query(.roomIdsWhere(app: i.app, .keepAlive)) { reply, w in
                guard case .roomIds(let ids) = reply else { return }
                w.field("chatroomIds", ids)
            }
        },

        // Attributes (RC-10).
        VendorEndpoint("/chatroom/entry/set.json") { i throws(ChatError) in
            let p = i.params
            let value = try p.string("value") ?? ""
            return VendorCall.command(.setAttributes(app: i.app, roomId: try room(p), [KeyValue(key: try p.required("key"), value: value)],
                                                     owner: try p.string("userId"), autoDelete: try p.bool("autoDelete") ?? false, .server))
        },
        VendorEndpoint("/chatroom/entry/batch/set.json") { i throws(ChatError) in
            let p = i.params
            guard let entries = try p.stringMap("entryInfo"), !entries.isEmpty else {
                throw ChatError(.invalidParameter, "entryInfo is required (a JSON object of keys and values)", field: "entryInfo")
            }
            return VendorCall.command(.setAttributes(app: i.app, roomId: try room(p), entries.map { KeyValue(key: $0.key, value: $0.value) }, owner: try p.string("entryOwnerId"),
                                                     autoDelete: try p.bool("autoDelete") ?? false, .server))
        },
        VendorEndpoint("/chatroom/entry/remove.json") { i throws(ChatError) in
            VendorCall.command(.removeAttributes(app: i.app, roomId: try room(i.params), [try i.params.required("key")], .server))
        },
        VendorEndpoint("/chatroom/entry/query.json") { i throws(ChatError) in
            VendorCall.query(.attributes(app: i.app, roomId: try room(i.params), keys: try i.params.list("keys"))) { reply, w in
                guard case .attributes(let entries) = reply else { return }
                w.key("keys")
                w.beginArray()
                for e in entries {
                    w.beginObject()
                    w.field("key", e.key)
                    w.field("value", e.value)
                    w.field("userID", e.owner)
                    w.field("autoDelete", e.autoDelete ? 1 : 0)
                    w.endObject()
                }
                w.endArray()
            }
        },
    ] + unsupported([
        ("/chatroom/user/whitelist/add.json", "protected chatroom users"),
        ("/chatroom/user/whitelist/remove.json", "protected chatroom users"),
        ("/chatroom/user/whitelist/query.json", "protected chatroom users"),
        ("/chatroom/whitelist/add.json", "message-type allowlists"),
        ("/chatroom/whitelist/delete.json", "message-type allowlists"),
        ("/chatroom/whitelist/query.json", "message-type allowlists"),
        ("/chatroom/message/priority/add.json", "low-priority message types"),
        ("/chatroom/message/priority/remove.json", "low-priority message types"),
        ("/chatroom/message/priority/query.json", "low-priority message types"),
        ("/chatroom/message/stopDistribution.json", "stopping message distribution"),
        ("/chatroom/message/resumeDistribution.json", "stopping message distribution"),
    ])

    static let ultraGroup: [VendorEndpoint] = [
        // Ultra groups (UG-1).
        VendorEndpoint("/ultragroup/create.json") { i throws(ChatError) in
            let p = i.params
            let user = try p.required("userId")
            return VendorCall.command(.createGroup(app: i.app, groupId: try p.required("groupId"), name: try p.string("groupName") ?? "", creator: user))
        },
        VendorEndpoint("/ultragroup/dis.json") { i throws(ChatError) in
            VendorCall.command(.dismissGroup(app: i.app, groupId: try i.params.required("groupId")))
        },
        VendorEndpoint("/ultragroup/join.json") { i throws(ChatError) in
            VendorCall.command(.joinGroup(app: i.app, groupId: try i.params.required("groupId"), try users(i.params, "userId")))
        },
        VendorEndpoint("/ultragroup/quit.json") { i throws(ChatError) in
            VendorCall.command(.quitGroup(app: i.app, groupId: try i.params.required("groupId"), try users(i.params, "userId")))
        },

        // Channels (UG-1..UG-3, UG-6).
        VendorEndpoint("/ultragroup/channel/create.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.createChannel(app: i.app, groupId: try p.required("groupId"), channelId: try p.required("busChannel"),
                                                     try channelType(p, default: .public)))
        },
        VendorEndpoint("/ultragroup/channel/type/change.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.changeChannelType(app: i.app, groupId: try p.required("groupId"), channelId: try p.required("busChannel"),
                                                         try channelType(p, default: nil)))
        },
        VendorEndpoint("/ultragroup/channel/del.json") { i throws(ChatError) in
            VendorCall.command(.deleteChannel(app: i.app, groupId: try i.params.required("groupId"), channelId: try i.params.required("busChannel")))
        },
        VendorEndpoint("/ultragroup/channel/get.json") { i throws(ChatError) in
            let p = i.params
            let (page, size) = try pageAndSize(p, pageKey: "page", sizeKey: "limit", defaultSize: 20)
            return VendorCall.query(.channels(app: i.app, groupId: try p.required("groupId"), page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                w.key("channelList")
                w.beginArray()
                for c in channels {
                    w.beginObject()
                    w.field("channelId", c.channelId)
                    w.field("type", c.type.code)
                    w.field("createTime", VendorTime.dateTime(milliseconds: c.createdAt))
                    w.endObject()
                }
                w.endArray()
            }
        },

        // Private channel members (UG-1, UG-4): `userIds` comma-joined.
        VendorEndpoint("/ultragroup/channel/private/users/add.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.addPrivateMembers(app: i.app, groupId: try p.required("groupId"), channelId: try p.required("busChannel"),
                                                         try groupUsers(p)))
        },
        VendorEndpoint("/ultragroup/channel/private/users/del.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.removePrivateMembers(app: i.app, groupId: try p.required("groupId"), channelId: try p.required("busChannel"),
                                                            try groupUsers(p)))
        },
        VendorEndpoint("/ultragroup/channel/private/users/get.json") { i throws(ChatError) in
            let p = i.params
            let (page, size) = try pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 50)
            return VendorCall.query(.privateMembers(app: i.app, groupId: try p.required("groupId"), channelId: try p.required("busChannel"),
                                                    page: page, pageSize: size)) { reply, w in
                guard case .userIdsPage(let ids, _) = reply else { return }
                w.field("users", ids)
            }
        },
        VendorEndpoint("/ultragroup/user/channel/query.json") { i throws(ChatError) in
            let p = i.params
            let (page, size) = try pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 10, maxSize: 50)
            return VendorCall.query(.userChannels(app: i.app, groupId: try p.required("groupId"), userId: try p.required("userId"),
                                                  page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                w.field("data", channels.map(\.channelId))
            }
        },

        // Group and channel default Do-Not-Disturb (CS-4).
        VendorEndpoint("/ultragroup/notdisturb/set.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.setGroupNotificationLevel(app: i.app, groupId: try p.required("groupId"), channelId: try nonEmpty(p, "busChannel"),
                                                                 try NotificationLevel.parse(try p.requiredInt("unpushLevel"), field: "unpushLevel")))
        },
        VendorEndpoint("/ultragroup/notdisturb/get.json") { i throws(ChatError) in
            let p = i.params
            let group = try p.required("groupId")
            let channel = try nonEmpty(p, "busChannel")
            return VendorCall.query(.groupNotificationLevel(app: i.app, groupId: group, channelId: channel)) { reply, w in
                guard case .notificationLevel(let level) = reply else { return }
                w.field("groupId", group)
                if let channel { w.field("busChannel", channel) }
                w.field("unpushLevel", level.rawValue)
            }
        },
    ] + unsupported([
        ("/ultragroup/refresh.json", "renaming an ultra group"),
        ("/ultragroup/usergroup/add.json", "ultra-group user groups"),
        ("/ultragroup/usergroup/del.json", "ultra-group user groups"),
        ("/ultragroup/usergroup/query.json", "ultra-group user groups"),
        ("/ultragroup/usergroup/user/add.json", "ultra-group user groups"),
        ("/ultragroup/usergroup/user/del.json", "ultra-group user groups"),
        ("/ultragroup/channel/usergroup/bind.json", "ultra-group user groups"),
        ("/ultragroup/channel/usergroup/unbind.json", "ultra-group user groups"),
        ("/ultragroup/channel/usergroup/query.json", "ultra-group user groups"),
    ])

    static let conversation: [VendorEndpoint] = [
        // CS-1 pin.
        VendorEndpoint("/conversation/top/set.json") { i throws(ChatError) in
            let p = i.params
            let key = try conversationKey(p, targetKey: "targetId")
            guard let pinned = try p.bool("setTop") else { throw ChatError(.invalidParameter, "setTop is required (true or false)", field: "setTop") }
            return VendorCall.command(.setConversationStatus(app: i.app, userId: try p.required("userId"), key, pinned: pinned, level: nil, .server))
        },
        // CS-2 Do-Not-Disturb per conversation; `unpushLevel` wins over the deprecated `isMuted`.
        VendorEndpoint("/conversation/notification/set.json") { i throws(ChatError) in
            let p = i.params
            let key = try conversationKey(p, targetKey: "targetId")
            let level: NotificationLevel
            if let l = try p.int("unpushLevel") {
                level = try NotificationLevel.parse(l, field: "unpushLevel")
            } else if let muted = try p.int("isMuted") {
                guard muted == 0 || muted == 1 else { throw ChatError(.invalidParameter, "isMuted must be 0 or 1", field: "isMuted") }
                level = muted == 1 ? .blocked : .allMessages
            } else {
                throw ChatError(.invalidParameter, "unpushLevel is required", field: "unpushLevel")
            }
            return VendorCall.command(.setConversationStatus(app: i.app, userId: try p.required("requestId"), key, pinned: nil, level: level, .server))
        },
        VendorEndpoint("/conversation/notification/get.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.conversationStatus(app: i.app, userId: try p.required("requestId"), try conversationKey(p, targetKey: "targetId"))) { reply, w in
                guard case .conversationStatus(let v) = reply else { return }
                w.field("isMuted", v.status.level.rawValue)
            }
        },
        // CS-4 per-type defaults.
        VendorEndpoint("/conversation/type/notification/set.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.setConversationTypeLevel(app: i.app, userId: try p.required("requestId"),
                                                                try ConversationType.parse(try p.requiredInt("conversationType")),
                                                                try NotificationLevel.parse(try p.requiredInt("unpushLevel"), field: "unpushLevel")))
        },
        VendorEndpoint("/conversation/type/notification/get.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.conversationTypeLevel(app: i.app, userId: try p.required("requestId"),
                                                           try ConversationType.parse(try p.requiredInt("conversationType")))) { reply, w in
                guard case .notificationLevel(let level) = reply else { return }
                w.field("isMuted", level.rawValue)
            }
        },
    ]

    // MARK: Shared readers

    static func channelType(_ p: P, default d: ChannelType?) throws(ChatError) -> ChannelType {
        guard let t = try p.string("type"), !t.isEmpty else {
            guard let d else { throw ChatError(.invalidParameter, "type is required (0 public, 1 private)", field: "type") }
            return d
        }
        guard t == "0" || t == "1" else { throw ChatError(.invalidParameter, "type must be 0 (public) or 1 (private)", field: "type") }
        return try ChannelType.parse(t)
    }

    static func groupUsers(_ p: P) throws(ChatError) -> [String] {
        let ids = try p.commaList("userIds")
        guard !ids.isEmpty else { throw ChatError(.invalidParameter, "userIds is required (comma-joined)", field: "userIds") }
        return ids
    }

    static func nonEmpty(_ p: P, _ name: String) throws(ChatError) -> String? {
        guard let v = try p.string(name), !v.isEmpty else { return nil }
        return v
    }

    /// `conversationType` + target (+ `busChannel` for ultra groups).
    static func conversationKey(_ p: P, targetKey: String) throws(ChatError) -> ConversationKey {
        let type = try ConversationType.parse(try p.requiredInt("conversationType"))
        return ConversationKey(type: type, targetId: try p.required(targetKey), channelId: try nonEmpty(p, "busChannel") ?? "")
    }

    /// 1-based page and a size within 1…maxSize.
    static func pageAndSize(_ p: P, pageKey: String, sizeKey: String, defaultSize: Int, maxSize: Int = Limits.maxPageSize) throws(ChatError) -> (Int, Int) {
        let page = try p.int(pageKey) ?? 1
        guard page >= 1 else { throw ChatError(.invalidParameter, "\(pageKey) must be 1 or more", field: pageKey) }
        let size = try p.int(sizeKey) ?? defaultSize
        guard size >= 1 && size <= maxSize else { throw ChatError(.invalidParameter, "\(sizeKey) must be between 1 and \(maxSize)", field: sizeKey) }
        return (page, size)
    }

    static func slice(_ ids: [String], page: Int, size: Int) -> [String] {
        let start = (page - 1) * size
        guard start < ids.count else { return [] }
        return Array(ids[start..<min(ids.count, start + size)])
    }

    static func unsupported(_ list: [(String, String)]) -> [VendorEndpoint] {
        list.map { path, what in VendorEndpoint.unsupported(path, what) }
    }
}
