import Chat

/// Nexconn's v4 server API (VC-3), as its official SDK (`ncsdk`) sends it:
/// `POST` with camelCase JSON bodies, `{"code":0,"result":{…}}` on success and
/// `{"code","errorMessage"}` on failure. Open channel = RongCloud chatroom, community channel =
/// ultra group, subchannel = ultra-group channel. Field types follow the SDK's strict models
/// (`isFrozen` boolean, `isInOpenChannel` 0/1, `createdAt` milliseconds on a channel and
/// `YYYY-MM-DD HH:MM:SS` on a participant). It is RongCloud's API renamed: the calls both have
/// are `RongCloudFamily`'s under Nexconn's `spelling`; the ones written out here are Nexconn's
/// alone or read differently.
public enum NexconnV4 {
    typealias P = VendorParams
    typealias Family = RongCloudFamily

    /// Nexconn's names for what the family's calls read and write.
    static let spelling = Family.Spelling(
        room: "channelId", rooms: "channelIds", users: "participantIds", minutes: "durationMinutes", destroyMinutes: "ttlMinutes", createMuted: "shouldFreeze",
        muteAllowlist: "allowedSendersList", attributes: "metadata", attributesShape: "an object", attributesOwner: "metadataOwnerId",
        attributesOwnerRequired: true, attributeKeys: "metadataKeys", autoDelete: "shouldAutoDelete", memberListSize: "pageSize",
        memberListDefault: Limits.maxMemberListCount, mutedRoomsPageSize: "pageSize",
        roomCreatedAt: "createdAt", roomMemberCount: "participantCount", roomMuted: "isFrozen", memberList: "participants", memberId: "participantId",
        memberJoinedAt: "createdAt", userItem: "participantId", presenceList: "participants", inRoom: "isInOpenChannel",
        blocks: Family.ExpiryList(key: "bannedParticipants", until: "banExpiresAt"), mutes: Family.ExpiryList(key: "mutedParticipants", until: "muteExpiresAt"),
        mutedRooms: "channelIds", allowlist: "participantIds", attributeList: "metadata", attributeOwner: "metadataOwnerId", attributeSetTime: ("updatedAt", false),
        group: "channelId", channel: "subchannelId",
        groupUsers: { p throws(ChatError) in [try p.required("userId")] },
        privateMembers: { p throws(ChatError) in try Family.requiredList(p, "userIds") },
        channelType: { p, required throws(ChatError) in try visibility(p, required: required) },
        channelsPageSize: "pageSize", channelList: "subchannels",
        channelFields: [("subchannelId", .id), ("createdAt", .createdAt), ("channelVisibility", .type)],
        privateMemberList: "members", userChannelList: "subChannels",
        conversationType: { p throws(ChatError) in try channelType(p) },
        level: "noDisturbLevel", levelAnswer: "noDisturbLevel",
        lowPriorityTypes: "messageTypes", lowPriorityTypesAnswer: "messageTypes", protectedTypes: "messageTypes", protectedTypesAnswer: "messageTypes",
        protectedSenders: "participantIds")

    static func channel(_ p: P) throws(ChatError) -> String { try p.required(spelling.room) }

    /// MO-4: Nexconn's user-group list keys.
    static let userGroups = Family.UserGroupSpelling(base: spelling, channelUserGroups: "userGroupIds", userUserGroups: "userGroupIds",
                                                     userGroupChannels: "subchannelIds")

    // MARK: Readers of Nexconn's own

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

    /// QS-1: the send's `priority` (0 standard, 1 allowlisted, 2 high, 3 low): 1 and 2 are high, 3
    /// low, 0 or none leave the class to the app's rules.
    static func messagePriority(_ p: P) throws(ChatError) -> MessagePriority? {
        switch try p.int("priority") {
        case nil, 0?: return nil
        case 1?, 2?: return .high
        case 3?: return .low
        default: throw ChatError(.invalidParameter, "priority must be 0 (standard), 1 (allowlisted), 2 (high) or 3 (low)", field: "priority")
        }
    }

    static func conversation(_ p: P) throws(ChatError) -> ConversationKey {
        let sub = try p.string("subchannelId") ?? ""
        return ConversationKey(type: try channelType(p), targetId: try p.required("channelId"), channelId: sub)
    }

    // MARK: Endpoints

    public static let endpoints: [VendorEndpoint] = openChannel + community + channels + messages + CommunityVendor.nexconn + channelsUnsupported

    static let messages: [VendorEndpoint] = [
        // MO-1: Nexconn's message delete (recall). Open-channel messages (`channelType` 4) are
        // Roomcast's room messages: `messageId` is the message's id, and `fromUserId` (and
        // `sentAt` when given) must describe it. `isAdmin`, `disablePush` and
        // `disableUpdateLastMsg` only change how Nexconn's own clients show it.
        VendorEndpoint("/v4/message/delete") { i throws(ChatError) in
            let p = i.params
            let type = try p.requiredInt("channelType")
            let from = try p.required("fromUserId")
            let target = try p.required("channelId")
            let id = try p.required("messageId")
            let sent = try p.int("sentAt")
            switch type {
            case 4:
                return VendorCall.command(.recallMessage(app: i.app, roomId: target, messageId: id,
                                                         RecallOptions(sender: from, sentTime: sent.map(Int64.init), notifyExt: try p.string("extra") ?? ""), .server))
            case 10:
                // MO-1 for community-channel messages (MO-3): `channelId` is the community channel.
                var call = VendorCall(.command(.community(app: i.app, groupId: target,
                                                          .recall(channelId: try CommunityVendor.subchannel(p), messageId: id, fromUserId: from,
                                                                  sentAt: sent.map(Int64.init)), .server)))
                call.fields = ["groupId": "channelId", "channelId": "subchannelId", "sentTime": "sentAt"]
                return .call(call)
            case 1, 3, 6:
                return .unsupported("/v4/message/delete: direct, group and system channels are not carried by Roomcast — not supported by Roomcast")
            default:
                throw ChatError(.invalidParameter, "channelType must be 1, 3, 4, 6 or 10", field: "channelType")
            }
        },
    ]

    static let openChannel: [VendorEndpoint] = [
        Family.createRoom("/v4/open-channel/create", spelling),
        Family.destroyRooms("/v4/open-channel/destroy", spelling),
        Family.getRoom("/v4/open-channel/get", spelling),
        Family.setDestroyPolicy("/v4/open-channel/destroy-type/set", spelling),
        Family.listMembers("/v4/open-channel/participant/list", spelling),
        Family.checkMembers("/v4/open-channel/participant/exist", spelling),

        // Messages from the app server (NIM-8) to up to 10 channels, and to every channel (AU-3):
        // one command each, so a missing channel or a full one sends nothing anywhere.
        Family.sendToRooms("/v4/open-channel/message/send", roomsKey: "toChannelIds", typeKey: "messageType", priority: messagePriority),
        Family.broadcast("/v4/open-channel/message/broadcast", typeKey: "messageType", priority: messagePriority),

        // Bans (RC-5).
        Family.block("/v4/open-channel/participant/ban-list/add", spelling),
        Family.unblock("/v4/open-channel/participant/ban-list/remove", spelling),
        Family.listBlocks("/v4/open-channel/participant/ban-list/get", spelling),

        // Mutes (RC-6 0/1).
        Family.mute("/v4/open-channel/participant/mute-list/add", spelling),
        Family.unmute("/v4/open-channel/participant/mute-list/remove", spelling),
        Family.listMutes("/v4/open-channel/participant/mute-list/get", spelling),
    ] + globalMutes("/v4/open-channel/global-mute-list") + globalMutes("/v4/open-channel/participant/global-mute-list") + [
        // Freeze = room-wide mute (RC-6 2/3).
        Family.muteRoom("/v4/open-channel/freeze-list/add", spelling, true),
        Family.muteRoom("/v4/open-channel/freeze-list/remove", spelling, false),
        Family.listMutedRooms("/v4/open-channel/freeze-list/get", spelling),
        Family.checkRoomMuted("/v4/open-channel/freeze/check", spelling),

        // Allowed senders while frozen (RC-6 4/5).
        Family.allow("/v4/open-channel/participant/allowed-sender-list/add", spelling),
        Family.disallow("/v4/open-channel/participant/allowed-sender-list/remove", spelling),
        Family.listAllowed("/v4/open-channel/participant/allowed-sender-list/get", spelling),

        // Metadata = room attributes (RC-10).
        Family.setAttributes("/v4/open-channel/metadata/batch/set", spelling),
        VendorEndpoint("/v4/open-channel/metadata/batch/remove") { i throws(ChatError) in
            let p = i.params
            _ = try p.required("metadataOwnerId")
            let keys = try p.list("metadataKeys")
            guard !keys.isEmpty else { throw ChatError(.invalidParameter, "metadataKeys is required", field: "metadataKeys") }
            return VendorCall.command(.removeAttributes(app: i.app, roomId: try channel(p), keys, .server))
        },
        Family.listAttributes("/v4/open-channel/metadata/batch/get", spelling),

        // Room QoS (QS-1, QS-4): the app's low-priority and priority message types (RongCloud's
        // low-priority types and message-type allowlist), and a channel's priority senders
        // (RongCloud's chatroom user allowlist: channelId + participantIds, at most 5). The SDKs
        // call the senders' list at /priority-sender-list and say the public endpoint list
        // publishes it as /participant/priority-sender-list: both paths are served.
        Family.editTypes("/v4/open-channel/low-priority-message-type-list/add", .low(spelling), add: true),
        Family.editTypes("/v4/open-channel/low-priority-message-type-list/remove", .low(spelling), add: false),
        Family.listTypes("/v4/open-channel/low-priority-message-type-list/get", .low(spelling)),
        Family.editTypes("/v4/open-channel/priority-message-type-list/add", .protected(spelling), add: true),
        Family.editTypes("/v4/open-channel/priority-message-type-list/remove", .protected(spelling), add: false),
        Family.listTypes("/v4/open-channel/priority-message-type-list/get", .protected(spelling)),
    ] + prioritySenders("/v4/open-channel/priority-sender-list") + prioritySenders("/v4/open-channel/participant/priority-sender-list")

    static func prioritySenders(_ base: String) -> [VendorEndpoint] {
        [Family.protectSenders(base + "/add", spelling, add: true), Family.protectSenders(base + "/remove", spelling, add: false),
         Family.listProtectedSenders(base + "/get", spelling)]
    }

    static func globalMutes(_ base: String) -> [VendorEndpoint] {
        [Family.globalMute(base + "/add", spelling), Family.globalUnmute(base + "/remove", spelling), Family.listGlobalMutes(base + "/get", spelling)]
    }

    static let community: [VendorEndpoint] = [
        VendorEndpoint("/v4/community-channel/create") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.createGroup(app: i.app, groupId: try channel(p), name: try p.required("name"), creator: try p.required("userId")))
        },
        Family.dismissGroup("/v4/community-channel/dismiss", spelling),
        Family.joinGroup("/v4/community-channel/join", spelling),
        Family.quitGroup("/v4/community-channel/leave", spelling),
        VendorEndpoint("/v4/community-channel/member/exist") { i throws(ChatError) in
            let user = try i.params.required("userId")
            return VendorCall.query(.isGroupMember(app: i.app, groupId: try channel(i.params), [user])) { reply, w in
                guard case .presence(let list) = reply else { return }
                w.field("isMember", list.first?.inRoom ?? false)
            }
        },
        Family.createChannel("/v4/community-channel/subchannel/create", spelling),
        Family.deleteChannel("/v4/community-channel/subchannel/delete", spelling),
        Family.changeChannelType("/v4/community-channel/subchannel-type/update", spelling),
        Family.listChannels("/v4/community-channel/subchannel/list", spelling),
        Family.addPrivateMembers("/v4/community-channel/private-subchannel/member/add", spelling),
        Family.removePrivateMembers("/v4/community-channel/private-subchannel/member/remove", spelling),
        Family.listPrivateMembers("/v4/community-channel/private-subchannel/member/list", spelling),
        Family.listUserChannels("/v4/community-channel/user/subchannel/list", spelling),
        // MO-4: rename (`channelId`, `name`).
        VendorEndpoint("/v4/community-channel/update") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.renameGroup(app: i.app, groupId: try channel(p), name: try p.required("name")))
        },
        // MO-4: user groups (JSON arrays of `userGroupIds` and `userIds`).
        Family.createUserGroups("/v4/community-channel/user-group/add", userGroups),
        Family.deleteUserGroups("/v4/community-channel/user-group/remove", userGroups),
        Family.listUserGroups("/v4/community-channel/user-group/list", userGroups, readsOrder: true),
        Family.addUserGroupMembers("/v4/community-channel/user-group/user/add", userGroups),
        Family.removeUserGroupMembers("/v4/community-channel/user-group/user/remove", userGroups),
        Family.listUserGroupChannels("/v4/community-channel/user-group/subchannel/list", userGroups),
        Family.bindUserGroups("/v4/community-channel/channel/user-group/bind", userGroups, bind: true),
        Family.bindUserGroups("/v4/community-channel/channel/user-group/unbind", userGroups, bind: false),
        Family.listChannelUserGroups("/v4/community-channel/channel/user-group/list", userGroups),
        Family.listUserUserGroups("/v4/community-channel/user/user-group/list", userGroups),
    ]

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
        Family.setTypeLevel("/v4/channel-type/push/set", spelling),
        Family.getTypeLevel("/v4/channel-type/push/get", spelling),
    ]

    static let channelsUnsupported: [VendorEndpoint] = unsupported([
        ("/v4/channel/tag", ["add", "delete", "list"],
         "conversation tags sort a user's direct and group channels, which a chat-room gateway does not carry (Roomcast carries open channels and community channels)"),
        ("/v4/channel-type/mute", ["list", "set"], "muting a channel type's offline push notifications: Roomcast sends no mobile push"),
        ("/v4/channel-type/message/metadata", ["set", "list", "delete"],
         "metadata of direct and group channel messages, which a chat-room gateway does not carry (community-channel message metadata is served)"),
        ("/v4/channel/message/history", ["delete"], "deleting a direct or group channel's history, which a chat-room gateway does not carry"),
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
