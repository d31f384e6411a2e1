import Chat

/// RongCloud v1 and Nexconn v4 (its 2026 rebrand) are one API spelled two ways: the same calls on
/// the same rooms, users, groups and conversations, under other paths, parameter names and answer
/// keys (a form body against camelCase JSON). Every call both surfaces have is described once
/// here, as a function of the surface's `Spelling`; `RongCloudV1` and `NexconnV4` list their paths
/// against these descriptions and keep apart only the calls one of them has or reads differently.
enum RongCloudFamily {
    typealias P = VendorParams

    /// How one surface names what the shared calls read and write. Where the two read a value in
    /// different ways (a list repeated or comma-joined, a type as text or as a number), the
    /// spelling holds the surface's reader.
    struct Spelling: Sendable {
        // Rooms (RongCloud chatroom, Nexconn open channel): parameters.
        /// The room of a call (`chatroomId`, `channelId`).
        let room: String
        /// The rooms of a destroy (`chatroomId` repeated, `channelIds`).
        let rooms: String
        /// The users a moderation call acts on (`userId` repeated, `participantIds`; 1…20, a bound
        /// the domain checks).
        let users: String
        /// The length of a block or mute (`minute`, `durationMinutes`).
        let minutes: String
        /// The minutes of a destroy policy (`destroyTime`, `ttlMinutes`).
        let destroyMinutes: String
        /// Whether a new room starts muted (`isBan`, `shouldFreeze`).
        let createMuted: String
        /// Who may still send in a muted room (`whiteUserIds`, `allowedSendersList`).
        let muteAllowlist: String
        /// Room attributes as an object of strings (`entryInfo`, `metadata`).
        let attributes: String
        /// How the refusal of a missing `attributes` describes the value ("a JSON object" in a
        /// form, "an object" in a JSON body).
        let attributesShape: String
        /// The owner of the attributes set (`entryOwnerId`, `metadataOwnerId`); Nexconn requires it.
        let attributesOwner: String
        let attributesOwnerRequired: Bool
        /// The attribute keys asked for (`keys`, `metadataKeys`).
        let attributeKeys: String
        /// Whether attributes go when their owner leaves (`autoDelete`, `shouldAutoDelete`; also
        /// the answer's key).
        let autoDelete: String
        /// The size of a member list, and its default when the surface has one (RongCloud's
        /// `count` is required; Nexconn's `pageSize` defaults to the most).
        let memberListSize: String
        let memberListDefault: Int?
        /// The page size of the muted-room list (`size`, `pageSize`).
        let mutedRoomsPageSize: String

        // Rooms: answers.
        /// A room's creation time in milliseconds (`createTime`, `createdAt`).
        let roomCreatedAt: String
        /// A room's online count (`memberCount`, `participantCount`).
        let roomMemberCount: String
        /// Whether a room is muted (`ban`, `isFrozen`).
        let roomMuted: String
        /// A member list and its items' keys (`users` of `id`/`time`, `participants` of
        /// `participantId`/`createdAt`).
        let memberList: String
        let memberId: String
        let memberJoinedAt: String
        /// A user in a presence or expiry item (`userId`, `participantId`).
        let userItem: String
        /// A presence list and whether each user is in the room (`result` of `isInChrm`,
        /// `participants` of `isInOpenChannel`).
        let presenceList: String
        let inRoom: String
        /// Blocked and muted users with the end of each (`users` with `time`, Nexconn's
        /// `bannedParticipants` with `banExpiresAt` and `mutedParticipants` with `muteExpiresAt`).
        let blocks: ExpiryList
        let mutes: ExpiryList
        /// The muted rooms (`chatroomids`, `channelIds`) and a room's allowlist (`userIds`,
        /// `participantIds`).
        let mutedRooms: String
        let allowlist: String
        /// Attributes and their owner in an answer (`keys` of `userID`, `metadata` of
        /// `metadataOwnerId`).
        let attributeList: String
        let attributeOwner: String
        /// MO-6: when each attribute was last set (RongCloud `lastSetTime` as date and time,
        /// Nexconn `updatedAt` in milliseconds).
        let attributeSetTime: (key: String, asDateTime: Bool)

        // Groups (RongCloud ultra group, Nexconn community channel) and their channels.
        /// The group (`groupId`, `channelId`) and the channel in it (`busChannel`, `subchannelId`).
        let group: String
        let channel: String
        /// Who joins or quits a group (RongCloud repeats `userId`, Nexconn sends one `userId`).
        let groupUsers: @Sendable (P) throws(ChatError) -> [String]
        /// Who is added to or removed from a private channel (RongCloud comma-joins `userIds`,
        /// Nexconn sends an array).
        let privateMembers: @Sendable (P) throws(ChatError) -> [String]
        /// A channel's type (RongCloud `type` as text, Nexconn `channelVisibility` as a number);
        /// public when not required and not given.
        let channelType: @Sendable (P, _ required: Bool) throws(ChatError) -> ChannelType
        /// The page size of the channel list (`limit`, `pageSize`).
        let channelsPageSize: String
        /// The channel list and its items' fields in the surface's order.
        let channelList: String
        let channelFields: [(key: String, ChannelField)]
        /// A private channel's members (`users`, `members`) and a user's channels (`data`,
        /// `subChannels`).
        let privateMemberList: String
        let userChannelList: String

        // Conversations (RongCloud conversation, Nexconn channel).
        /// A conversation type (RongCloud `conversationType`, Nexconn `channelType` as text or number).
        let conversationType: @Sendable (P) throws(ChatError) -> ConversationType
        /// A Do-Not-Disturb level sent (`unpushLevel`, `noDisturbLevel`) and answered (`isMuted`,
        /// `noDisturbLevel`).
        let level: String
        let levelAnswer: String

        // Room QoS (QS-1, QS-4, QS-6).
        /// The message types given to the app's low-priority list (`objectName` repeated,
        /// `messageTypes`) and its answer key (`objectNames`, `messageTypes`).
        let lowPriorityTypes: String
        let lowPriorityTypesAnswer: String
        /// The message types given to the app's protected list (RongCloud's message-type
        /// allowlist, `objectnames` repeated; Nexconn's priority message types, `messageTypes`) and
        /// its answer key (`whitlistMsgType`, the vendor's spelling; `messageTypes`).
        let protectedTypes: String
        let protectedTypesAnswer: String
        /// A room's protected senders in an answer (`users`, `participantIds`); they are given as
        /// `users` (`userId` repeated, `participantIds`).
        let protectedSenders: String
    }

    struct ExpiryList: Sendable {
        let key: String
        let until: String
    }

    enum ChannelField: Sendable {
        case id, type, createdAt
    }

    // MARK: Shared readers

    /// `needNotify` with `extra` (RC-5, RC-6, RC-8).
    static func notify(_ p: P) throws(ChatError) -> RCNotify? {
        RCNotify.given(needNotify: try p.bool("needNotify"), extra: try p.string("extra"))
    }

    /// A list that must not be empty.
    static func requiredList(_ p: P, _ name: String) throws(ChatError) -> [String] {
        let ids = try p.list(name)
        guard !ids.isEmpty else { throw ChatError(.invalidParameter, "\(name) is required", field: name) }
        return ids
    }

    /// `destroyType` 0 (when inactive) / 1 (at a fixed time) with its minutes (default 60).
    static func destroyPolicy(_ p: P, minutesKey: String) throws(ChatError) -> DestroyPolicy {
        let minutes = try p.int(minutesKey) ?? Limits.minDestroyMinutes
        switch try p.int("destroyType") ?? 0 {
        case 0: return .inactive(minutes: minutes)
        case 1: return .fixed(minutes: minutes)
        default: throw ChatError(.invalidParameter, "destroyType must be 0 (when inactive) or 1 (at a fixed time)", field: "destroyType")
        }
    }

    /// A room's destroy policy; a ZIM-style one (destroyed once empty) has no RongCloud spelling,
    /// so neither field is written for it rather than an invented value.
    static func writeDestroy(_ w: inout JSONWriter, _ policy: DestroyPolicy, minutesKey: String) {
        switch policy {
        case .inactive(let m): w.field("destroyType", 0); w.field(minutesKey, m)
        case .fixed(let m): w.field("destroyType", 1); w.field(minutesKey, m)
        case .whenEmpty: break
        }
    }

    /// `order` 1 (join time ascending, the default) or 2 (descending).
    static func joinOrder(_ p: P) throws(ChatError) -> SortOrder {
        switch try p.int("order") ?? 1 {
        case 1: return .ascending
        case 2: return .descending
        default: throw ChatError(.invalidParameter, "order must be 1 (join time ascending) or 2 (descending)", field: "order")
        }
    }

    /// `key: [{…}, …]`, one object per item, its fields written by `fields`.
    static func writeObjects<Item>(_ w: inout JSONWriter, _ key: String, _ items: [Item], _ fields: (Item, inout JSONWriter) -> Void) {
        w.key(key)
        w.beginArray()
        for item in items {
            w.beginObject()
            fields(item, &w)
            w.endObject()
        }
        w.endArray()
    }

    /// Users with the end of their block or mute as `yyyy-MM-dd HH:mm:ss` (UTC). Permanent entries
    /// have no end; the vendor lists only timed ones, so none is invented.
    static func writeExpiries(_ w: inout JSONWriter, _ list: ExpiryList, idKey: String, _ items: [(userId: String, until: Int64?)]) {
        writeObjects(&w, list.key, items) { item, w in
            w.field(idKey, item.userId)
            if let until = item.until { w.field(list.until, VendorTime.dateTime(milliseconds: until)) }
        }
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

    // MARK: Rooms (RC-9)

    static func createRoom(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            var c = RoomConfig(roomId: try p.required(s.room))
            c.destroyPolicy = try destroyPolicy(p, minutesKey: s.destroyMinutes)
            c.muted = try p.bool(s.createMuted) ?? false
            c.muteAllowlist = try p.list(s.muteAllowlist)
            if let attributes = try p.stringMap(s.attributes) {
                c.attributes = Dictionary(attributes.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
                c.attributesOwner = try p.string(s.attributesOwner)
            }
            return VendorCall.command(.createRoom(app: i.app, c))
        }
    }

    static func setDestroyPolicy(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            var u = RoomUpdate()
            u.destroyPolicy = try destroyPolicy(i.params, minutesKey: s.destroyMinutes)
            return VendorCall.command(.updateRoom(app: i.app, roomId: try i.params.required(s.room), u, .server, nim: nil))
        }
    }

    static func destroyRooms(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.destroyRooms(app: i.app, try requiredList(i.params, s.rooms)))
        }
    }

    static func getRoom(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.room(app: i.app, roomId: try i.params.required(s.room))) { reply, w in
                guard case .room(let r) = reply else { return }
                w.field(s.room, r.roomId)
                w.field(s.roomCreatedAt, r.createdAt)
                w.field(s.roomMemberCount, r.onlineUserCount)
                writeDestroy(&w, r.destroyPolicy, minutesKey: s.destroyMinutes)
                w.field(s.roomMuted, r.muted)
            }
        }
    }

    // MARK: Members (RC-9)

    static func listMembers(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let order = try joinOrder(p)
            let size: Int
            if let fallback = s.memberListDefault { size = try p.int(s.memberListSize) ?? fallback } else { size = try p.requiredInt(s.memberListSize) }
            guard size >= 1 && size <= Limits.maxMemberListCount else {
                throw ChatError(.invalidParameter, "\(s.memberListSize) must be between 1 and \(Limits.maxMemberListCount)", field: s.memberListSize)
            }
            return VendorCall.query(.members(app: i.app, roomId: try p.required(s.room), .present, order, limit: size, after: nil)) { reply, w in
                guard case .members(let members, let total) = reply else { return }
                w.field("total", total)
                writeObjects(&w, s.memberList, members) { m, w in
                    w.field(s.memberId, m.userId)
                    w.field(s.memberJoinedAt, VendorTime.dateTime(milliseconds: m.enterTime))
                }
            }
        }
    }

    /// Which of several users are in the room.
    static func checkMembers(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.isInRoom(app: i.app, roomId: try i.params.required(s.room), try requiredList(i.params, s.users))) { reply, w in
                guard case .presence(let list) = reply else { return }
                writeObjects(&w, s.presenceList, list) { u, w in
                    w.field(s.userItem, u.userId)
                    w.field(s.inRoom, u.inRoom ? 1 : 0)
                }
            }
        }
    }

    // MARK: Blocks (RC-5): kicked and kept out for the given minutes

    static func block(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.block(app: i.app, roomId: try p.required(s.room), try requiredList(p, s.users), minutes: try p.requiredInt(s.minutes), .server,
                                             rc: try notify(p), nim: nil))
        }
    }

    static func unblock(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.unblock(app: i.app, roomId: try p.required(s.room), try requiredList(p, s.users), .server, rc: try notify(p), nim: nil))
        }
    }

    static func listBlocks(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.blocks(app: i.app, roomId: try i.params.required(s.room))) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                writeExpiries(&w, s.blocks, idKey: s.userItem, u)
            }
        }
    }

    // MARK: Global mutes (RC-6 6/7, RC-7)

    static func globalMute(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.globalMute(app: i.app, try requiredList(p, s.users), minutes: try p.requiredInt(s.minutes), rc: try notify(p)))
        }
    }

    static func globalUnmute(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.globalUnmute(app: i.app, try requiredList(i.params, s.users), rc: try notify(i.params)))
        }
    }

    static func listGlobalMutes(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.globalMutes(app: i.app)) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                writeExpiries(&w, s.mutes, idKey: s.userItem, u)
            }
        }
    }

    // MARK: Mutes in one room (RC-6 0/1)

    static func mute(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.mute(app: i.app, roomId: try p.required(s.room), try requiredList(p, s.users), .minutes(try p.requiredInt(s.minutes)), .server,
                                            rc: try notify(p), nim: nil))
        }
    }

    static func unmute(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.unmute(app: i.app, roomId: try p.required(s.room), try requiredList(p, s.users), .all, .server, rc: try notify(p), nim: nil))
        }
    }

    static func listMutes(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.mutes(app: i.app, roomId: try i.params.required(s.room))) { reply, w in
                guard case .userExpiries(let u) = reply else { return }
                writeExpiries(&w, s.mutes, idKey: s.userItem, u)
            }
        }
    }

    // MARK: Room-wide mute and its allowlist (RC-6 2–5)

    static func muteRoom(_ path: String, _ s: Spelling, _ muted: Bool) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.setRoomMuted(app: i.app, roomId: try i.params.required(s.room), muted, .server, rc: try notify(i.params), nim: nil))
        }
    }

    static func listMutedRooms(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let (page, size) = try pageAndSize(i.params, pageKey: "page", sizeKey: s.mutedRoomsPageSize, defaultSize: 50)
            return VendorCall.query(.roomIdsWhere(app: i.app, .muted)) { reply, w in
                guard case .roomIds(let ids) = reply else { return }
                w.field(s.mutedRooms, slice(ids, page: page, size: size))
            }
        }
    }

    static func checkRoomMuted(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.room(app: i.app, roomId: try i.params.required(s.room))) { reply, w in
                guard case .room(let r) = reply else { return }
                w.field("status", r.muted ? 1 : 0)
            }
        }
    }

    static func allow(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.addToAllowlist(app: i.app, roomId: try i.params.required(s.room), try requiredList(i.params, s.users), rc: try notify(i.params)))
        }
    }

    static func disallow(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.removeFromAllowlist(app: i.app, roomId: try i.params.required(s.room), try requiredList(i.params, s.users), rc: try notify(i.params)))
        }
    }

    static func listAllowed(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.allowlist(app: i.app, roomId: try i.params.required(s.room))) { reply, w in
                guard case .userIds(let ids) = reply else { return }
                w.field(s.allowlist, ids)
            }
        }
    }

    // MARK: Attributes (RC-10)

    static func setAttributes(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            guard let entries = try p.stringMap(s.attributes), !entries.isEmpty else {
                throw ChatError(.invalidParameter, "\(s.attributes) is required (\(s.attributesShape) of keys and values)", field: s.attributes)
            }
            let room = try p.required(s.room)
            let owner = s.attributesOwnerRequired ? try p.required(s.attributesOwner) : try p.string(s.attributesOwner)
            return VendorCall.command(.setAttributes(app: i.app, roomId: room, entries.map { KeyValue(key: $0.key, value: $0.value) }, owner: owner,
                                                     autoDelete: try p.bool(s.autoDelete) ?? false, .server))
        }
    }

    static func listAttributes(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.attributes(app: i.app, roomId: try i.params.required(s.room), keys: try i.params.list(s.attributeKeys))) { reply, w in
                guard case .attributes(let entries) = reply else { return }
                writeObjects(&w, s.attributeList, entries) { e, w in
                    w.field("key", e.key)
                    w.field("value", e.value)
                    w.field(s.attributeOwner, e.owner)
                    w.field(s.autoDelete, e.autoDelete ? 1 : 0)
                    if s.attributeSetTime.asDateTime {
                        w.field(s.attributeSetTime.key, VendorTime.dateTime(milliseconds: e.updatedAt))
                    } else {
                        w.field(s.attributeSetTime.key, e.updatedAt)
                    }
                }
            }
        }
    }

    // MARK: Groups (UG-1)

    static func dismissGroup(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.dismissGroup(app: i.app, groupId: try i.params.required(s.group)))
        }
    }

    static func joinGroup(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.joinGroup(app: i.app, groupId: try i.params.required(s.group), try s.groupUsers(i.params)))
        }
    }

    static func quitGroup(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.quitGroup(app: i.app, groupId: try i.params.required(s.group), try s.groupUsers(i.params)))
        }
    }

    // MARK: Channels (UG-1..UG-3, UG-6)

    static func createChannel(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.createChannel(app: i.app, groupId: try p.required(s.group), channelId: try p.required(s.channel), try s.channelType(p, false)))
        }
    }

    static func changeChannelType(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.changeChannelType(app: i.app, groupId: try p.required(s.group), channelId: try p.required(s.channel), try s.channelType(p, true)))
        }
    }

    static func deleteChannel(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.command(.deleteChannel(app: i.app, groupId: try i.params.required(s.group), channelId: try i.params.required(s.channel)))
        }
    }

    static func listChannels(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let (page, size) = try pageAndSize(p, pageKey: "page", sizeKey: s.channelsPageSize, defaultSize: 20)
            return VendorCall.query(.channels(app: i.app, groupId: try p.required(s.group), page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                writeObjects(&w, s.channelList, channels) { c, w in
                    for (key, field) in s.channelFields {
                        switch field {
                        case .id: w.field(key, c.channelId)
                        case .type: w.field(key, c.type.code)
                        case .createdAt: w.field(key, VendorTime.dateTime(milliseconds: c.createdAt))
                        }
                    }
                }
            }
        }
    }

    // MARK: Private channel members (UG-1, UG-4)

    static func addPrivateMembers(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.addPrivateMembers(app: i.app, groupId: try p.required(s.group), channelId: try p.required(s.channel), try s.privateMembers(p)))
        }
    }

    static func removePrivateMembers(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.removePrivateMembers(app: i.app, groupId: try p.required(s.group), channelId: try p.required(s.channel), try s.privateMembers(p)))
        }
    }

    static func listPrivateMembers(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let (page, size) = try pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 50)
            return VendorCall.query(.privateMembers(app: i.app, groupId: try p.required(s.group), channelId: try p.required(s.channel), page: page, pageSize: size)) { reply, w in
                guard case .userIdsPage(let ids, _) = reply else { return }
                w.field(s.privateMemberList, ids)
            }
        }
    }

    /// The channels of a group a user may read.
    static func listUserChannels(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            let (page, size) = try pageAndSize(p, pageKey: "page", sizeKey: "pageSize", defaultSize: 10, maxSize: 50)
            return VendorCall.query(.userChannels(app: i.app, groupId: try p.required(s.group), userId: try p.required("userId"), page: page, pageSize: size)) { reply, w in
                guard case .channels(let channels, _) = reply else { return }
                w.field(s.userChannelList, channels.map(\.channelId))
            }
        }
    }

    // MARK: Do-Not-Disturb defaults per conversation type (CS-4)

    static func setTypeLevel(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.setConversationTypeLevel(app: i.app, userId: try p.required("requestId"), try s.conversationType(p),
                                                                try NotificationLevel.parse(try p.requiredInt(s.level), field: s.level)))
        }
    }

    static func getTypeLevel(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.conversationTypeLevel(app: i.app, userId: try p.required("requestId"), try s.conversationType(p))) { reply, w in
                guard case .notificationLevel(let level) = reply else { return }
                w.field(s.levelAnswer, level.rawValue)
            }
        }
    }

    // MARK: Room QoS: message-type lists, protected senders, distribution (QS-1, QS-4, QS-6)

    /// Types per call: RongCloud documents "up to 5 per request" for the low-priority list and up
    /// to 20 for the message-type allowlist; Nexconn renames the same calls. The lists themselves
    /// hold up to `SettingsLimits.maxListEntries` types each (the domain's bound).
    static let lowPriorityTypesPerCall = 1...5
    static let protectedTypesPerCall = 1...20

    /// The list one of the type calls edits or reads, with its parameter, answer key and bound.
    struct TypeList: Sendable {
        let list: AppSettings.MessageList
        let param: String
        let answer: String
        let perCall: ClosedRange<Int>

        static func low(_ s: Spelling) -> TypeList {
            TypeList(list: .lowPriorityMessageTypes, param: s.lowPriorityTypes, answer: s.lowPriorityTypesAnswer, perCall: lowPriorityTypesPerCall)
        }

        static func protected(_ s: Spelling) -> TypeList {
            TypeList(list: .protectedMessageTypes, param: s.protectedTypes, answer: s.protectedTypesAnswer, perCall: protectedTypesPerCall)
        }
    }

    /// Adds types to one of the app's lists, or removes them; 0 types or more than the call's
    /// bound is refused with the vendor's parameter error, naming its field, and changes nothing.
    static func editTypes(_ path: String, _ t: TypeList, add: Bool) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let types = try i.params.list(t.param)
            guard t.perCall.contains(types.count) else {
                throw ChatError(.invalidParameter, "\(t.param) takes \(t.perCall.lowerBound) to \(t.perCall.upperBound) message types per call", field: t.param)
            }
            return VendorCall.command(.editMessageList(app: i.app, t.list, add: add, types))
        }
    }

    static func listTypes(_ path: String, _ t: TypeList) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.appSettings(app: i.app)) { reply, w in
                guard case .appSettings(let settings) = reply else { return }
                w.field(t.answer, settings[list: t.list])
            }
        }
    }

    /// A room's protected senders (RongCloud's chatroom user allowlist, Nexconn's priority
    /// senders): at most `Limits.maxProtectedSendersPerRoom`; past it the call changes nothing.
    static func protectSenders(_ path: String, _ s: Spelling, add: Bool) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.setProtectedSenders(app: i.app, roomId: try p.required(s.room), add: add, try requiredList(p, s.users)))
        }
    }

    static func listProtectedSenders(_ path: String, _ s: Spelling) -> VendorEndpoint {
        VendorEndpoint(path) { i throws(ChatError) in
            VendorCall.query(.protectedSenders(app: i.app, roomId: try i.params.required(s.room))) { reply, w in
                guard case .userIds(let ids) = reply else { return }
                w.field(s.protectedSenders, ids)
            }
        }
    }
}
