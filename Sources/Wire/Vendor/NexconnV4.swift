import Chat

/// Nexconn's v4 server API (VC-3; `vendor-apis.md` §1.7), as its official SDK (`ncsdk`) sends it:
/// `POST` with camelCase JSON bodies, `{"code":0,"result":{…}}` on success and
/// `{"code","errorMessage"}` on failure. Open channel = RongCloud chatroom, community channel =
/// ultra group, subchannel = ultra-group channel. Field types follow the SDK's strict models
/// (`isFrozen` boolean, `isInOpenChannel` 0/1, `createdAt` milliseconds on a channel and
/// `YYYY-MM-DD HH:MM:SS` on a participant).
public enum NexconnV4 {
    typealias P = VendorParams

    static func channel(_ p: P) throws(ChatError) -> String { try p.required("channelId") }

    static func participants(_ p: P) throws(ChatError) -> [String] {
        let ids = try p.list("participantIds")
        guard !ids.isEmpty else { throw ChatError(.invalidParameter, "participantIds is required", field: "participantIds") }
        return ids
    }

    static func notify(_ p: P) throws(ChatError) -> RCNotify? { try RongCloudFamily.notify(p) }

    static func duration(_ p: P) throws(ChatError) -> Int { try p.requiredInt("durationMinutes") }

    static func expiries(_ w: inout JSONWriter, _ key: String, expiresKey: String, _ items: [(userId: String, until: Int64?)]) {
        RongCloudFamily.writeExpiries(&w, key, idKey: "participantId", timeKey: expiresKey, items)
    }

    static func visibility(_ p: P, required: Bool) throws(ChatError) -> ChannelType {
        guard let v = try p.int("channelVisibility") else {
            if required { throw ChatError(.invalidParameter, "channelVisibility is required (0 public, 1 private)", field: "channelVisibility") }
            return .public
        }
        switch v {
        case 0: return .public
        case 1: return .private
        default: throw ChatError(.invalidParameter, "channelVisibility must be 0 (public) or 1 (private)", field: "channelVisibility")
        }
    }

    static func userIds(_ p: P) throws(ChatError) -> [String] {
        let ids = try p.list("userIds")
        guard !ids.isEmpty else { throw ChatError(.invalidParameter, "userIds is required", field: "userIds") }
        return ids
    }

    /// `channelType` is a string in the push models and a number in the pin model; both are taken.
    static func channelType(_ p: P) throws(ChatError) -> ConversationType {
        let raw: Int
        if case .string(let s)? = p.value("channelType") {
            guard let i = Int(s) else { throw ChatError(.invalidParameter, "channelType must be 1, 3, 6 or 10", field: "channelType") }
            raw = i
        } else if let i = try p.int("channelType") {
            raw = i
        } else {
            throw ChatError(.invalidParameter, "channelType is required (1, 3, 6 or 10)", field: "channelType")
        }
        return try ConversationType.parse(raw, field: "channelType")
    }

    static func conversation(_ p: P) throws(ChatError) -> ConversationKey {
        let sub = try p.string("subchannelId") ?? ""
        return ConversationKey(type: try channelType(p), targetId: try p.required("channelId"), channelId: sub)
    }

    public static let endpoints: [VendorEndpoint] = openChannel + community + channels + channelsUnsupported

    static let openChannel: [VendorEndpoint] = [
        VendorEndpoint("/v4/open-channel/create") { i throws(ChatError) in
            let p = i.params
            var c = RoomConfig(roomId: try channel(p))
            c.destroyPolicy = try RongCloudFamily.destroyPolicy(p, minutesKey: "ttlMinutes")
            c.muted = try p.bool("shouldFreeze") ?? false
            c.muteAllowlist = try p.list("allowedSendersList")
            if let metadata = try p.stringMap("metadata") {
                c.attributes = Dictionary(metadata.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
                c.attributesOwner = try p.string("metadataOwnerId")
            }
            return VendorCall.command(.createRoom(app: i.app, c))
        },
        VendorEndpoint("/v4/open-channel/destroy") { i throws(ChatError) in
            let ids = try i.params.list("channelIds")
            guard !ids.isEmpty else { throw ChatError(.invalidParameter, "channelIds is required", field: "channelIds") }
            return VendorCall.command(.destroyRooms(app: i.app, ids))
        },
        VendorEndpoint("/v4/open-channel/get") { i throws(ChatError) in
            VendorCall.query(.room(app: i.app, roomId: try channel(i.params))) { reply, w in
                guard case .room(let r) = reply else { return }
                w.field("channelId", r.roomId)
                w.field("createdAt", r.createdAt)
                w.field("participantCount", r.onlineUserCount)
                RongCloudFamily.writeDestroy(&w, r.destroyPolicy, minutesKey: "ttlMinutes")
                w.field("isFrozen", r.muted)
            }
        },
        VendorEndpoint("/v4/open-channel/destroy-type/set") { i throws(ChatError) in
            var u = RoomUpdate()
            u.destroyPolicy = try RongCloudFamily.destroyPolicy(i.params, minutesKey: "ttlMinutes")
            return VendorCall.command(.updateRoom(app: i.app, roomId: try channel(i.params), u, .server, nim: nil))
        },
        VendorEndpoint("/v4/open-channel/participant/list") { i throws(ChatError) in
            let p = i.params
            let order = try RongCloudFamily.joinOrder(p)
            let size = try p.int("pageSize") ?? Limits.maxMemberListCount
            guard size >= 1 && size <= Limits.maxMemberListCount else {
                throw ChatError(.invalidParameter, "pageSize must be between 1 and \(Limits.maxMemberListCount)", field: "pageSize")
            }
            return VendorCall.query(.members(app: i.app, roomId: try channel(p), .present, order, limit: size, after: nil)) { reply, w in
                guard case .members(let members, let total) = reply else { return }
                w.field("total", total)
                w.key("participants")
                w.beginArray()
                for m in members {
                    w.beginObject()
                    w.field("participantId", m.userId)
                    w.field("createdAt", VendorTime.dateTime(milliseconds: m.enterTime))
                    w.endObject()
                }
                w.endArray()
            }
        },
        VendorEndpoint("/v4/open-channel/participant/exist") { i throws(ChatError) in
            VendorCall.query(.isInRoom(app: i.app, roomId: try channel(i.params), try participants(i.params))) { reply, w in
                guard case .presence(let list) = reply else { return }
                w.key("participants")
                w.beginArray()
                for u in list {
                    w.beginObject()
                    w.field("participantId", u.userId)
                    w.field("isInOpenChannel", u.inRoom ? 1 : 0)
                    w.endObject()
                }
                w.endArray()
            }
        },

        // Messages from the app server (NIM-8), to each channel in order. Every channel is checked
        // to exist first, so a missing one sends nothing (server sends are not held back by
        // mutes, and the same content passes or fails the same checks everywhere).
        VendorEndpoint("/v4/open-channel/message/send") { i throws(ChatError) in
            let p = i.params
            let from = try p.required("fromUserId")
            let ids = try p.list("toChannelIds")
            guard !ids.isEmpty && ids.count <= 10 else { throw ChatError(.invalidParameter, "toChannelIds holds 1 to 10 channel ids", field: "toChannelIds") }
            let type = try p.required("messageType")
            let kind: ChatMessage.Kind = type == "RC:TxtMsg" ? .text : .custom
            guard let content = try p.string("content") else { throw ChatError(.invalidParameter, "content is required", field: "content") }
            let sends = ids.map { Command.sendMessage(app: i.app, roomId: $0, .server(userId: from, nickname: "", avatar: ""), kind, content: content) }
            let check: @Sendable (Reply) -> ChatError? = { reply in
                guard case .rooms(let found) = reply else { return nil }
                let have = Set(found.map(\.roomId))
                guard let missing = ids.first(where: { !have.contains($0) }) else { return nil }
                return ChatError(.roomNotFound, "open channel \(missing) does not exist", field: "toChannelIds")
            }
            return .call(VendorCall(.checked(.rooms(app: i.app, ids), check: check, then: .commands(sends, tolerating: []))))
        },

        // Bans (RC-5).
        VendorEndpoint("/v4/open-channel/participant/ban-list/add") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.block(app: i.app, roomId: try channel(p), try participants(p), minutes: try duration(p), .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/v4/open-channel/participant/ban-list/remove") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.unblock(app: i.app, roomId: try channel(p), try participants(p), .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/v4/open-channel/participant/ban-list/get") { i throws(ChatError) in
            VendorCall.query(.blocks(app: i.app, roomId: try channel(i.params))) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                expiries(&w, "bannedParticipants", expiresKey: "banExpiresAt", u)
            }
        },

        // Mutes (RC-6 0/1).
        VendorEndpoint("/v4/open-channel/participant/mute-list/add") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.mute(app: i.app, roomId: try channel(p), try participants(p), .minutes(try duration(p)), .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/v4/open-channel/participant/mute-list/remove") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.unmute(app: i.app, roomId: try channel(p), try participants(p), .all, .server, rc: try notify(p), nim: nil))
        },
        VendorEndpoint("/v4/open-channel/participant/mute-list/get") { i throws(ChatError) in
            VendorCall.query(.mutes(app: i.app, roomId: try channel(i.params))) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                expiries(&w, "mutedParticipants", expiresKey: "muteExpiresAt", u)
            }
        },
    ] + globalMutes("/v4/open-channel/global-mute-list") + globalMutes("/v4/open-channel/participant/global-mute-list") + [
        // Freeze = room-wide mute (RC-6 2/3).
        VendorEndpoint("/v4/open-channel/freeze-list/add") { i throws(ChatError) in
            VendorCall.command(.setRoomMuted(app: i.app, roomId: try channel(i.params), true, .server, rc: try notify(i.params), nim: nil))
        },
        VendorEndpoint("/v4/open-channel/freeze-list/remove") { i throws(ChatError) in
            VendorCall.command(.setRoomMuted(app: i.app, roomId: try channel(i.params), false, .server, rc: try notify(i.params), nim: nil))
        },
        VendorEndpoint("/v4/open-channel/freeze-list/get") { i throws(ChatError) in
            let (page, size) = try RongCloudV1.pageAndSize(i.params, pageKey: "page", sizeKey: "pageSize", defaultSize: 50)
            return VendorCall.query(.roomIdsWhere(app: i.app, .muted)) { reply, w in
                guard case .roomIds(let ids) = reply else { return }
                w.field("channelIds", RongCloudV1.slice(ids, page: page, size: size))
            }
        },
        VendorEndpoint("/v4/open-channel/freeze/check") { i throws(ChatError) in
            VendorCall.query(.room(app: i.app, roomId: try channel(i.params))) { reply, w in
                guard case .room(let r) = reply else { return }
                w.field("status", r.muted ? 1 : 0)
            }
        },

        // Allowed senders while frozen (RC-6 4/5).
        VendorEndpoint("/v4/open-channel/participant/allowed-sender-list/add") { i throws(ChatError) in
            VendorCall.command(.addToAllowlist(app: i.app, roomId: try channel(i.params), try participants(i.params), rc: try notify(i.params)))
        },
        VendorEndpoint("/v4/open-channel/participant/allowed-sender-list/remove") { i throws(ChatError) in
            VendorCall.command(.removeFromAllowlist(app: i.app, roomId: try channel(i.params), try participants(i.params), rc: try notify(i.params)))
        },
        VendorEndpoint("/v4/open-channel/participant/allowed-sender-list/get") { i throws(ChatError) in
            VendorCall.query(.allowlist(app: i.app, roomId: try channel(i.params))) { reply, w in
                guard case .userIds(let ids) = reply else { return }
                w.field("participantIds", ids)
            }
        },

        // Metadata = room attributes (RC-10).
        VendorEndpoint("/v4/open-channel/metadata/batch/set") { i throws(ChatError) in
            let p = i.params
            guard let entries = try p.stringMap("metadata"), !entries.isEmpty else {
                throw ChatError(.invalidParameter, "metadata is required (an object of keys and values)", field: "metadata")
            }
            return VendorCall.command(.setAttributes(app: i.app, roomId: try channel(p), entries.map { KeyValue(key: $0.key, value: $0.value) }, owner: try p.required("metadataOwnerId"),
                                                     autoDelete: try p.bool("shouldAutoDelete") ?? false, .server))
        },
        VendorEndpoint("/v4/open-channel/metadata/batch/remove") { i throws(ChatError) in
            let p = i.params
            _ = try p.required("metadataOwnerId")
            let keys = try p.list("metadataKeys")
            guard !keys.isEmpty else { throw ChatError(.invalidParameter, "metadataKeys is required", field: "metadataKeys") }
            return VendorCall.command(.removeAttributes(app: i.app, roomId: try channel(p), keys, .server))
        },
        VendorEndpoint("/v4/open-channel/metadata/batch/get") { i throws(ChatError) in
            VendorCall.query(.attributes(app: i.app, roomId: try channel(i.params), keys: try i.params.list("metadataKeys"))) { reply, w in
                guard case .attributes(let entries) = reply else { return }
                w.key("metadata")
                w.beginArray()
                for e in entries {
                    w.beginObject()
                    w.field("key", e.key)
                    w.field("value", e.value)
                    w.field("metadataOwnerId", e.owner)
                    w.field("shouldAutoDelete", e.autoDelete ? 1 : 0)
                    w.endObject()
                }
                w.endArray()
            }
        },
    ] + unsupported([
        ("/v4/open-channel/low-priority-message-type-list", ["add", "get", "remove"], "low-priority message types"),
        ("/v4/open-channel/priority-message-type-list", ["add", "get", "remove"], "priority message types"),
        ("/v4/open-channel/priority-sender-list", ["add", "get", "remove"], "priority senders"),
        ("/v4/open-channel/participant/priority-sender-list", ["add", "get", "remove"], "priority senders"),
        ("/v4/open-channel/message", ["broadcast"], "broadcasts to every open channel"),
        ("/v4/open-channel/history-message", ["list"], "open-channel cloud history in Nexconn's shape (use GET /v1/rooms/{roomId}/messages)"),
    ])

    static func globalMutes(_ base: String) -> [VendorEndpoint] {
        [
            VendorEndpoint(base + "/add") { i throws(ChatError) in
                let p = i.params
                return VendorCall.command(.globalMute(app: i.app, try participants(p), minutes: try duration(p), rc: try notify(p)))
            },
            VendorEndpoint(base + "/remove") { i throws(ChatError) in
                VendorCall.command(.globalUnmute(app: i.app, try participants(i.params), rc: try notify(i.params)))
            },
            VendorEndpoint(base + "/get") { i throws(ChatError) in
                VendorCall.query(.globalMutes(app: i.app)) { reply, w in
                    guard case .userExpiries(let u) = reply else { return }
                    expiries(&w, "mutedParticipants", expiresKey: "muteExpiresAt", u)
                }
            },
        ]
    }

    static let community: [VendorEndpoint] = [
        VendorEndpoint("/v4/community-channel/create") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.createGroup(app: i.app, groupId: try channel(p), name: try p.required("name"), creator: try p.required("userId")))
        },
        VendorEndpoint("/v4/community-channel/dismiss") { i throws(ChatError) in
            VendorCall.command(.dismissGroup(app: i.app, groupId: try channel(i.params)))
        },
        VendorEndpoint("/v4/community-channel/join") { i throws(ChatError) in
            VendorCall.command(.joinGroup(app: i.app, groupId: try channel(i.params), [try i.params.required("userId")]))
        },
        VendorEndpoint("/v4/community-channel/leave") { i throws(ChatError) in
            VendorCall.command(.quitGroup(app: i.app, groupId: try channel(i.params), [try i.params.required("userId")]))
        },
        VendorEndpoint("/v4/community-channel/member/exist") { i throws(ChatError) in
            let user = try i.params.required("userId")
            return VendorCall.query(.isGroupMember(app: i.app, groupId: try channel(i.params), [user])) { reply, w in
                guard case .presence(let list) = reply else { return }
                w.field("isMember", list.first?.inRoom ?? false)
            }
        },
        VendorEndpoint("/v4/community-channel/subchannel/create") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.createChannel(app: i.app, groupId: try channel(p), channelId: try p.required("subchannelId"), try visibility(p, required: false)))
        },
        VendorEndpoint("/v4/community-channel/subchannel/delete") { i throws(ChatError) in
            VendorCall.command(.deleteChannel(app: i.app, groupId: try channel(i.params), channelId: try i.params.required("subchannelId")))
        },
        VendorEndpoint("/v4/community-channel/subchannel-type/update") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.changeChannelType(app: i.app, groupId: try channel(p), channelId: try p.required("subchannelId"), try visibility(p, required: true)))
        },
        VendorEndpoint("/v4/community-channel/subchannel/list") { i throws(ChatError) in
            let p = i.params
            let (page, size) = try RongCloudV1.pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 20)
            return VendorCall.query(.channels(app: i.app, groupId: try channel(p), page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                w.key("subchannels")
                w.beginArray()
                for c in channels {
                    w.beginObject()
                    w.field("subchannelId", c.channelId)
                    w.field("createdAt", VendorTime.dateTime(milliseconds: c.createdAt))
                    w.field("channelVisibility", c.type.code)
                    w.endObject()
                }
                w.endArray()
            }
        },
        VendorEndpoint("/v4/community-channel/private-subchannel/member/add") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.addPrivateMembers(app: i.app, groupId: try channel(p), channelId: try p.required("subchannelId"), try userIds(p)))
        },
        VendorEndpoint("/v4/community-channel/private-subchannel/member/remove") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.removePrivateMembers(app: i.app, groupId: try channel(p), channelId: try p.required("subchannelId"), try userIds(p)))
        },
        VendorEndpoint("/v4/community-channel/private-subchannel/member/list") { i throws(ChatError) in
            let p = i.params
            let (page, size) = try RongCloudV1.pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 50)
            return VendorCall.query(.privateMembers(app: i.app, groupId: try channel(p), channelId: try p.required("subchannelId"), page: page, pageSize: size)) { reply, w in
                guard case .userIdsPage(let ids, _) = reply else { return }
                w.field("members", ids)
            }
        },
        VendorEndpoint("/v4/community-channel/user/subchannel/list") { i throws(ChatError) in
            let p = i.params
            let (page, size) = try RongCloudV1.pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 10, maxSize: 50)
            return VendorCall.query(.userChannels(app: i.app, groupId: try channel(p), userId: try p.required("userId"), page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                w.field("subChannels", channels.map(\.channelId))
            }
        },
    ] + unsupported([
        ("/v4/community-channel", ["update"], "renaming a community channel"),
        ("/v4/community-channel/mute-list", ["add", "get", "remove"], "community-channel mutes"),
        ("/v4/community-channel/allowed-sender-list", ["add", "get", "remove"], "community-channel allowed senders"),
        ("/v4/community-channel/freeze-list", ["get", "set"], "community-channel freezes"),
        ("/v4/community-channel/user-group", ["add", "list", "remove"], "community-channel user groups"),
        ("/v4/community-channel/user-group/user", ["add", "remove"], "community-channel user groups"),
        ("/v4/community-channel/user-group/subchannel", ["list"], "community-channel user groups"),
        ("/v4/community-channel/channel/user-group", ["bind", "list", "unbind"], "community-channel user groups"),
        ("/v4/community-channel/user/user-group", ["list"], "community-channel user groups"),
        ("/v4/community-channel/message", ["send", "update"], "community-channel messages"),
        ("/v4/community-channel/history-message", ["list"], "community-channel messages"),
        ("/v4/community-channel/message/metadata", ["set", "list", "delete"], "message metadata"),
    ])

    static let channels: [VendorEndpoint] = [
        // CS-1 pin.
        VendorEndpoint("/v4/channel/pin/set") { i throws(ChatError) in
            let p = i.params
            guard let pin = try p.bool("isPin") else { throw ChatError(.invalidParameter, "isPin is required (true or false)", field: "isPin") }
            return VendorCall.command(.setConversationStatus(app: i.app, userId: try p.required("userId"), try conversation(p), pinned: pin, level: nil, .server))
        },
        // CS-1/CS-2 read back: pin and level of one conversation.
        VendorEndpoint("/v4/channel/attribute/get") { i throws(ChatError) in
            let p = i.params
            let key = try conversation(p)
            return VendorCall.query(.conversationStatus(app: i.app, userId: try p.required("userId"), key)) { reply, w in
                guard case .conversationStatus(let v) = reply else { return }
                w.field("channelId", key.targetId)
                w.field("channelType", key.type.rawValue)
                w.key("pin")
                w.beginObject()
                w.field("isPinned", v.status.pinned)
                w.endObject()
                w.key("notification")
                w.beginObject()
                w.field("level", v.status.level.rawValue)
                w.endObject()
            }
        },
        // CS-2 Do-Not-Disturb per conversation.
        VendorEndpoint("/v4/channel/push/set") { i throws(ChatError) in
            let p = i.params
            let level = try NotificationLevel.parse(try p.requiredInt("noDisturbLevel"), field: "noDisturbLevel")
            return VendorCall.command(.setConversationStatus(app: i.app, userId: try p.required("requestId"), try conversation(p), pinned: nil, level: level, .server))
        },
        pushGet("/v4/channel/push/get"),
        // The SDK's docstring names this path for the same call.
        pushGet("/v4/channel/notification/get"),
        // CS-4 per-type defaults.
        VendorEndpoint("/v4/channel-type/push/set") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.setConversationTypeLevel(app: i.app, userId: try p.required("requestId"), try channelType(p),
                                                                try NotificationLevel.parse(try p.requiredInt("noDisturbLevel"), field: "noDisturbLevel")))
        },
        VendorEndpoint("/v4/channel-type/push/get") { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.conversationTypeLevel(app: i.app, userId: try p.required("requestId"), try channelType(p))) { reply, w in
                guard case .notificationLevel(let level) = reply else { return }
                w.field("noDisturbLevel", level.rawValue)
            }
        },
    ]

    static let channelsUnsupported: [VendorEndpoint] = unsupported([
        ("/v4/channel/tag", ["add", "delete", "list"], "conversation tags"),
        ("/v4/channel-type/mute", ["list", "set"], "per-type mutes"),
        ("/v4/channel-type/message/metadata", ["set", "list", "delete"], "message metadata"),
        ("/v4/channel/message/history", ["delete"], "deleting conversation history"),
    ])

    static func pushGet(_ path: String) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.conversationStatus(app: i.app, userId: try p.required("requestId"), try conversation(p))) { reply, w in
                guard case .conversationStatus(let v) = reply else { return }
                w.field("noDisturbLevel", v.effectiveLevel.rawValue)
            }
        }
    }

    static func unsupported(_ groups: [(String, [String], String)]) -> [VendorEndpoint] {
        groups.flatMap { base, verbs, what in
            verbs.map { verb in
                VendorEndpoint.unsupported(base + "/" + verb, what)
            }
        }
    }
}
