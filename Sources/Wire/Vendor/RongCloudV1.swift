import Chat

/// RongCloud's v1 server API (VC-1): `POST` form bodies with
/// repeated keys for arrays (comma-joined `userIds` on ultra-group calls), `{"code":200,…}` answers.
/// The calls Nexconn v4 has too are `RongCloudFamily`'s, under RongCloud's `spelling`; the ones
/// written out here are RongCloud's alone or read differently.
public enum RongCloudV1 {
    typealias P = VendorParams
    typealias Family = RongCloudFamily

    /// RongCloud's names for what the family's calls read and write.
    static let spelling = Family.Spelling(
        room: "chatroomId", rooms: "chatroomId", users: "userId", minutes: "minute", destroyMinutes: "destroyTime", createMuted: "isBan",
        muteAllowlist: "whiteUserIds", attributes: "entryInfo", attributesShape: "a JSON object", attributesOwner: "entryOwnerId",
        attributesOwnerRequired: false, attributeKeys: "keys", autoDelete: "autoDelete", memberListSize: "count", memberListDefault: nil,
        mutedRoomsPageSize: "size",
        roomCreatedAt: "createTime", roomMemberCount: "memberCount", roomMuted: "ban", memberList: "users", memberId: "id", memberJoinedAt: "time",
        userItem: "userId", presenceList: "result", inRoom: "isInChrm", blocks: Family.ExpiryList(key: "users", until: "time"),
        mutes: Family.ExpiryList(key: "users", until: "time"), mutedRooms: "chatroomids", allowlist: "userIds", attributeList: "keys", attributeOwner: "userID", attributeSetTime: ("lastSetTime", true),
        group: "groupId", channel: "busChannel",
        groupUsers: { p throws(ChatError) in try Family.requiredList(p, "userId") },
        privateMembers: { p throws(ChatError) in try commaJoinedUsers(p) },
        channelType: { p, required throws(ChatError) in try channelType(p, default: required ? nil : .public) },
        channelsPageSize: "limit", channelList: "channelList", channelFields: [("channelId", .id), ("type", .type), ("createTime", .createdAt)],
        privateMemberList: "users", userChannelList: "data",
        conversationType: { p throws(ChatError) in try ConversationType.parse(try p.requiredInt("conversationType")) },
        level: "unpushLevel", levelAnswer: "isMuted",
        lowPriorityTypes: "objectName", lowPriorityTypesAnswer: "objectNames", protectedTypes: "objectnames", protectedTypesAnswer: "whitlistMsgType",
        protectedSenders: "users")

    static func room(_ p: P) throws(ChatError) -> String { try p.required(spelling.room) }

    // MARK: Endpoints

    public static let endpoints: [VendorEndpoint] = chatroom + ultraGroup + conversation + message + sensitiveWords + CommunityVendor.rongCloud

    /// MO-2: RongCloud's sensitive words: `word` (1–32 characters) with `replaceWord` is replaced in
    /// text messages, without it blocks them (21501); `list.json` answers `words` of
    /// `{type: "0" replace | "1" block, word, replaceWord}` for `type` 0, 1 (the default) or 2 (all).
    static let sensitiveWords: [VendorEndpoint] = [
        VendorEndpoint("/sensitiveword/add.json") { i throws(ChatError) in
            let p = i.params
            let word = try p.required("word")
            var replacement = try p.string("replaceWord")
            if replacement?.isEmpty == true { replacement = nil }
            return VendorCall.command(.editSensitiveWords(app: i.app, add: [SensitiveWord(word: word, replacement: replacement)], remove: []))
        },
        VendorEndpoint("/sensitiveword/delete.json") { i throws(ChatError) in
            VendorCall.command(.editSensitiveWords(app: i.app, add: [], remove: [try i.params.required("word")]))
        },
        VendorEndpoint("/sensitiveword/batch/delete.json") { i throws(ChatError) in
            let words = try Family.requiredList(i.params, "words")
            guard words.count <= Limits.maxSensitiveWordsPerRongCloudBatch else {
                throw ChatError(.invalidParameter, "at most \(Limits.maxSensitiveWordsPerRongCloudBatch) words per call", field: "words")
            }
            return VendorCall.command(.editSensitiveWords(app: i.app, add: [], remove: words))
        },
        VendorEndpoint("/sensitiveword/list.json") { i throws(ChatError) in
            let type = try i.params.int("type") ?? 1
            guard (0...2).contains(type) else { throw ChatError(.invalidParameter, "type must be 0 (replaced), 1 (blocking) or 2 (all)", field: "type") }
            return VendorCall.query(.sensitiveWords(app: i.app)) { reply, w in
                guard case .sensitiveWords(let words) = reply else { return }
                w.key("words")
                w.beginArray()
                for word in words where type == 2 || (type == 1) == word.blocks {
                    w.beginObject()
                    w.field("type", word.blocks ? "1" : "0")
                    w.field("word", word.word)
                    w.field("replaceWord", word.replacement ?? "")
                    w.endObject()
                }
                w.endArray()
            }
        },
    ]

    static let message: [VendorEndpoint] = [
        // MO-1: RongCloud's message recall. Chatroom messages (conversationType 4) are Roomcast's
        // room messages: `messageUID` is the message's id and `sentTime` its time, and both with
        // `fromUserId` must describe it. The app server recalls at any time; `isAdmin`,
        // `isDelete` and `disablePush` only change how RongCloud's own clients show it.
        VendorEndpoint("/message/recall.json") { i throws(ChatError) in
            let p = i.params
            let type = try p.requiredInt("conversationType")
            let from = try p.required("fromUserId")
            let target = try p.required("targetId")
            let id = try p.required("messageUID")
            let sent = try p.requiredInt("sentTime")
            switch type {
            case 4:
                let extra = try p.string("extra") ?? ""
                return VendorCall.command(.recallMessage(app: i.app, roomId: target, messageId: id,
                                                         RecallOptions(sender: from, sentTime: Int64(sent), notifyExt: extra), .server))
            case 10:
                // MO-1 for ultra-group messages (MO-3): `targetId` is the group, `busChannel` the channel.
                var call = VendorCall(.command(.community(app: i.app, groupId: target,
                                                          .recall(channelId: try CommunityVendor.busChannel(p), messageId: id, fromUserId: from,
                                                                  sentAt: Int64(sent)), .server)))
                call.fields = ["groupId": "targetId", "messageId": "messageUID"]
                return .call(call)
            case 1, 3, 6:
                return .unsupported("/message/recall.json: private, group and system conversations are not carried by Roomcast — not supported by Roomcast")
            default:
                throw ChatError(.invalidParameter, "conversationType must be 1, 3, 4, 6 or 10", field: "conversationType")
            }
        },
    ]

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
        Family.createRoom("/chatroom/create_new.json", spelling),
        Family.setDestroyPolicy("/chatroom/destroy/set.json", spelling),
        Family.destroyRooms("/chatroom/destroy.json", spelling),
        Family.getRoom("/chatroom/get.json", spelling),
        VendorEndpoint("/chatroom/query.json") { i throws(ChatError) in
            VendorCall.query(.rooms(app: i.app, try Family.requiredList(i.params, "chatroomId"))) { reply, w in
                guard case .rooms(let rooms) = reply else { return }
                Family.writeObjects(&w, "chatRooms", rooms) { r, w in
                    // `chrmId` is what the REST docs and the Go SDK read; the Python SDK's docs say `chatroomId`.
                    w.field("chrmId", r.roomId)
                    w.field("chatroomId", r.roomId)
                    w.field("name", r.name)
                    w.field("time", VendorTime.dateTime(milliseconds: r.createdAt))
                }
            }
        },

        // Members (RC-9).
        Family.listMembers("/chatroom/user/query.json", spelling),
        VendorEndpoint("/chatroom/user/exist.json") { i throws(ChatError) in
            let user = try i.params.required("userId")
            return VendorCall.query(.isInRoom(app: i.app, roomId: try room(i.params), [user])) { reply, w in
                guard case .presence(let p) = reply else { return }
                w.field("isInChrm", p.first?.inRoom ?? false)
            }
        },
        Family.checkMembers("/chatroom/users/exist.json", spelling),

        // Blocks (RC-5): kick and keep out for `minute` minutes.
        Family.block("/chatroom/user/block/add.json", spelling),
        Family.unblock("/chatroom/user/block/rollback.json", spelling),
        Family.listBlocks("/chatroom/user/block/list.json", spelling),

        // Global mutes (RC-6 6/7, RC-7).
        Family.globalMute("/chatroom/user/ban/add.json", spelling),
        Family.globalUnmute("/chatroom/user/ban/remove.json", spelling),
        Family.listGlobalMutes("/chatroom/user/ban/query.json", spelling),

        // Mutes in one room (RC-6 0/1).
        Family.mute("/chatroom/user/gag/add.json", spelling),
        Family.unmute("/chatroom/user/gag/rollback.json", spelling),
        Family.listMutes("/chatroom/user/gag/list.json", spelling),

        // Room-wide mute and its allowlist (RC-6 2–5).
        Family.muteRoom("/chatroom/ban/add.json", spelling, true),
        Family.muteRoom("/chatroom/ban/rollback.json", spelling, false),
        Family.listMutedRooms("/chatroom/ban/query.json", spelling),
        Family.checkRoomMuted("/chatroom/ban/check.json", spelling),
        Family.allow("/chatroom/user/ban/whitelist/add.json", spelling),
        Family.disallow("/chatroom/user/ban/whitelist/rollback.json", spelling),
        Family.listAllowed("/chatroom/user/ban/whitelist/query.json", spelling),

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
        Family.setAttributes("/chatroom/entry/batch/set.json", spelling),
        VendorEndpoint("/chatroom/entry/remove.json") { i throws(ChatError) in
            VendorCall.command(.removeAttributes(app: i.app, roomId: try room(i.params), [try i.params.required("key")], .server))
        },
        Family.listAttributes("/chatroom/entry/query.json", spelling),

        // Room QoS (QS-1, QS-4, QS-6): the app's low-priority types and message-type allowlist
        // (protected types), a room's protected users (at most 5), stopping a room's distribution.
        Family.editTypes("/chatroom/message/priority/add.json", .low(spelling), add: true),
        Family.editTypes("/chatroom/message/priority/remove.json", .low(spelling), add: false),
        Family.listTypes("/chatroom/message/priority/query.json", .low(spelling)),
        Family.editTypes("/chatroom/whitelist/add.json", .protected(spelling), add: true),
        Family.editTypes("/chatroom/whitelist/delete.json", .protected(spelling), add: false),
        Family.listTypes("/chatroom/whitelist/query.json", .protected(spelling)),
        Family.protectSenders("/chatroom/user/whitelist/add.json", spelling, add: true),
        Family.protectSenders("/chatroom/user/whitelist/remove.json", spelling, add: false),
        Family.listProtectedSenders("/chatroom/user/whitelist/query.json", spelling),
        VendorEndpoint("/chatroom/message/stopDistribution.json") { i throws(ChatError) in
            VendorCall.command(.setDistribution(app: i.app, roomId: try room(i.params), stopped: true))
        },
        VendorEndpoint("/chatroom/message/resumeDistribution.json") { i throws(ChatError) in
            VendorCall.command(.setDistribution(app: i.app, roomId: try room(i.params), stopped: false))
        },

        // Messages from the app server to up to 10 chatrooms, and to every chatroom (AU-3). The
        // class follows the app's type lists (`objectName`); `isPersisted` and `isIncludeSender`
        // are checked (0 or 1): a publish is kept in each room's history whatever isPersisted
        // says (it speaks of the clients' local storage), and the sender's own connections in a
        // room receive what the app server sends in its name, as every server send does here.
        Family.sendToRooms("/message/chatroom/publish.json", roomsKey: "toChatroomId", typeKey: "objectName", priority: { _ in nil },
                           flags: ["isPersisted", "isIncludeSender"]),
        Family.broadcast("/message/chatroom/broadcast.json", typeKey: "objectName", priority: { _ in nil }, flags: ["isIncludeSender"]),
    ]

    static let ultraGroup: [VendorEndpoint] = [
        // Ultra groups (UG-1).
        VendorEndpoint("/ultragroup/create.json") { i throws(ChatError) in
            let p = i.params
            let user = try p.required("userId")
            return VendorCall.command(.createGroup(app: i.app, groupId: try p.required("groupId"), name: try p.string("groupName") ?? "", creator: user))
        },
        Family.dismissGroup("/ultragroup/dis.json", spelling),
        Family.joinGroup("/ultragroup/join.json", spelling),
        Family.quitGroup("/ultragroup/quit.json", spelling),

        // Channels (UG-1..UG-3, UG-6).
        Family.createChannel("/ultragroup/channel/create.json", spelling),
        Family.changeChannelType("/ultragroup/channel/type/change.json", spelling),
        Family.deleteChannel("/ultragroup/channel/del.json", spelling),
        Family.listChannels("/ultragroup/channel/get.json", spelling),

        // Private channel members (UG-1, UG-4): `userIds` comma-joined.
        Family.addPrivateMembers("/ultragroup/channel/private/users/add.json", spelling),
        Family.removePrivateMembers("/ultragroup/channel/private/users/del.json", spelling),
        Family.listPrivateMembers("/ultragroup/channel/private/users/get.json", spelling),
        Family.listUserChannels("/ultragroup/user/channel/query.json", spelling),

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
        // MO-4: rename.
        VendorEndpoint("/ultragroup/refresh.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.renameGroup(app: i.app, groupId: try p.required("groupId"), name: try p.required("groupName")))
        },

        // MO-4: user groups (at most 50 per ultra group, 100 members each, 10 per channel):
        // `add.json` takes `userGroups` as JSON (the server SDKs' JSON body, or a form value),
        // the others comma-joined `userGroupIds` and `userIds`.
        Family.createUserGroups("/ultragroup/usergroup/add.json", userGroups),
        Family.deleteUserGroups("/ultragroup/usergroup/del.json", userGroups),
        Family.listUserGroups("/ultragroup/usergroup/query.json", userGroups),
        Family.addUserGroupMembers("/ultragroup/usergroup/user/add.json", userGroups),
        Family.removeUserGroupMembers("/ultragroup/usergroup/user/del.json", userGroups),
        Family.bindUserGroups("/ultragroup/channel/usergroup/bind.json", userGroups, bind: true),
        Family.bindUserGroups("/ultragroup/channel/usergroup/unbind.json", userGroups, bind: false),
        Family.listChannelUserGroups("/ultragroup/channel/usergroup/query.json", userGroups),
        Family.listUserUserGroups("/ultragroup/user/usergroup/query.json", userGroups),
        Family.listUserGroupChannels("/ultragroup/usergroup/channel/query.json", userGroups),
    ]

    /// MO-4: RongCloud answers each user-group list as `data`.
    static let userGroups = Family.UserGroupSpelling(base: spelling, channelUserGroups: "data", userUserGroups: "data", userGroupChannels: "data")

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
        Family.setTypeLevel("/conversation/type/notification/set.json", spelling),
        Family.getTypeLevel("/conversation/type/notification/get.json", spelling),
    ]

    // MARK: Readers of RongCloud's own

    static func channelType(_ p: P, default d: ChannelType?) throws(ChatError) -> ChannelType {
        guard let t = try p.string("type"), !t.isEmpty else {
            guard let d else { throw ChatError(.invalidParameter, "type is required (0 public, 1 private)", field: "type") }
            return d
        }
        guard t == "0" || t == "1" else { throw ChatError(.invalidParameter, "type must be 0 (public) or 1 (private)", field: "type") }
        return try ChannelType.parse(t)
    }

    static func commaJoinedUsers(_ p: P) throws(ChatError) -> [String] {
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

    static func unsupported(_ list: [(String, String)]) -> [VendorEndpoint] {
        list.map { path, what in VendorEndpoint.unsupported(path, what) }
    }
}
