import Chat

/// NetEase NIM's v1 chat-room server API (VC-2): `POST
/// /nimserver/chatroom/<name>.action`, form bodies with JSON-array strings for lists, answers
/// `{"code":200, <key>: …}` with the endpoint's own key, refusals as HTTP 200 with a NIM code and
/// a string `desc` (NIM's SDKs treat any other HTTP status as a transport failure).
///
/// **Room ids.** NIM's SDKs read `roomid` as a 64-bit number, so this surface reaches the rooms
/// whose Roomcast id is the canonical decimal form of a positive number (`"1234"`, not `"01234"`
/// or `"abc"`). `create` makes such a room with a fresh random number below 2^53 (so JavaScript
/// clients read it exactly) and answers it as a JSON number; rooms created natively with a numeric
/// id are reachable too. Any other `roomid` is refused with 414.
///
/// **requestAddr.** Answers `addr` with bare `host:port` items (what NIM's SDKs expect) and
/// `urls` with the full WebSocket URLs a Roomcast client connects to, both from `--public-url`.
public enum NIMV1 {
    typealias P = VendorParams

    static let prefix = "/nimserver/chatroom/"

    /// Largest room number `create` hands out: 2^53 - 1, exact in every JSON reader.
    public static let maxRoomNumber: Int64 = 9_007_199_254_740_991

    // MARK: Parameters

    static func roomId(_ p: P, _ name: String = "roomid") throws(ChatError) -> String {
        let text = try p.required(name)
        guard let n = Int64(text), n > 0, String(n) == text else {
            throw ChatError(.invalidParameter, "\(name) must be a positive 64-bit number", field: name)
        }
        return text
    }

    static func notify(_ p: P, defaultOn: Bool) throws(ChatError) -> NIMNotify? {
        let need = try p.bool("needNotify") ?? defaultOn
        let ext = try p.string("notifyExt")
        if !need && ext == nil { return nil }
        return NIMNotify(notifyExt: ext ?? "", needNotify: need)
    }

    static func jsonList(_ p: P, _ name: String) throws(ChatError) -> [String] {
        guard let list = try p.jsonArrayString(name), !list.isEmpty else {
            throw ChatError(.invalidParameter, "\(name) is required (a JSON array of strings)", field: name)
        }
        return list
    }

    /// `delayClosePolicy` 0 (never), 1 (close `delaySeconds` after creation, whole minutes) or
    /// 2 (close `delaySeconds` after the last member left).
    static func closePolicy(_ p: P) throws(ChatError) -> DestroyPolicy? {
        guard let policy = try p.int("delayClosePolicy") else { return nil }
        let seconds = try p.int("delaySeconds") ?? 0
        switch policy {
        case 0: return .default
        case 1:
            guard seconds % 60 == 0 else { throw ChatError(.invalidParameter, "delaySeconds must be whole minutes with delayClosePolicy 1", field: "delaySeconds") }
            return .fixed(minutes: seconds / 60)
        case 2: return .whenEmpty(seconds: seconds)
        default: throw ChatError(.invalidParameter, "delayClosePolicy must be 0, 1 or 2", field: "delayClosePolicy")
        }
    }

    /// The room as NIM answers it (`chatroom`, or `desc` for `toggleCloseStat`).
    static func writeRoom(_ w: inout JSONWriter, _ key: String?, _ r: RoomInfo, online: Bool) {
        if let key { w.key(key) }
        w.beginObject()
        w.key("roomid")
        if let n = Int64(r.roomId) { w.int(n) } else { w.string(r.roomId) }
        w.field("valid", r.open)
        w.field("muted", r.muted)
        w.field("announcement", r.announcement)
        w.field("name", r.name)
        w.field("broadcasturl", r.broadcastUrl)
        if online { w.field("onlineusercount", r.onlineUserCount) }
        w.field("ext", r.ext)
        w.field("creator", r.creator)
        w.field("queuelevel", r.queueModificationLevel.rawValue)
        w.field("ionotify", r.enterExitNotifications)
        w.key("delayInfo")
        w.beginObject()
        switch r.destroyPolicy {
        case .inactive: w.field("delayCloseEnable", false); w.field("delayClosePolicy", 0); w.field("delaySeconds", 0)
        case .fixed(let m): w.field("delayCloseEnable", true); w.field("delayClosePolicy", 1); w.field("delaySeconds", m * 60)
        case .whenEmpty(let s): w.field("delayCloseEnable", true); w.field("delayClosePolicy", 2); w.field("delaySeconds", s)
        }
        w.endObject()
        w.endObject()
    }

    static func nimType(_ t: MemberType) -> String {
        switch t {
        case .creator: return "CREATOR"
        case .manager: return "MANAGER"
        case .common: return "COMMON"
        case .limited: return "LIMITED"
        case .guest: return "GUEST"
        case .anonymous: return "ANONYMOUS"
        }
    }

    static func nimLevel(_ t: MemberType) -> Int {
        switch t {
        case .creator: return 0
        case .manager: return 1
        case .common: return 2
        case .limited: return -1
        case .guest, .anonymous: return -2
        }
    }

    static func writeMembers(_ w: inout JSONWriter, roomId: String, _ members: [MemberInfo]) {
        w.key("desc")
        w.beginObject()
        w.key("data")
        w.beginArray()
        for m in members {
            w.beginObject()
            if let n = Int64(roomId) { w.field("roomid", n) }
            w.field("accid", m.userId)
            w.field("nick", m.nickname)
            w.field("avator", m.avatar)
            w.field("ext", m.ext)
            w.field("type", nimType(m.type))
            w.field("level", nimLevel(m.type))
            w.field("onlineStat", m.isOnline)
            w.field("enterTime", m.enterTime)
            w.field("blacklisted", m.isBlocklisted)
            w.field("muted", m.isMuted)
            w.field("tempMuted", m.isTempMuted)
            w.field("tempMuteTtl", m.tempMuteRemainingSeconds)
            // AU-1: NIM carries a member's tags as a JSON array in a string.
            if !m.tags.isEmpty {
                var list = JSONWriter()
                list.stringArray(m.tags)
                w.field("tags", String(decoding: list.bytes, as: UTF8.self))
            }
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    /// `host:port` of a WebSocket URL (`ws://h:p/ws` → `h:p`; the scheme's port when none is given).
    public static func hostPort(_ url: String) -> String {
        var rest = Substring(url)
        var defaultPort = "80"
        if rest.hasPrefix("wss://") { rest = rest.dropFirst(6); defaultPort = "443" } else if rest.hasPrefix("ws://") { rest = rest.dropFirst(5) }
        let authority = rest.prefix { $0 != "/" }
        if authority.hasPrefix("[") { return authority.contains("]:") ? String(authority) : "\(authority):\(defaultPort)" }
        return authority.contains(":") ? String(authority) : "\(authority):\(defaultPort)"
    }

    // MARK: Endpoints

    static func e(_ name: String, _ resolve: @escaping @Sendable (VendorInput) throws(ChatError) -> VendorResolution) -> VendorEndpoint {
        VendorEndpoint(prefix + name + ".action", resolve)
    }

    public static let endpoints: [VendorEndpoint] = rooms + members + queue + tags + roles + messages + unsupported

    static let messages: [VendorEndpoint] = [
        // MO-1: NIM's chatroom recall. `msgId` is the message's id, `msgTimetag` its time and
        // `fromAcc` its sender; the operator (`operator`, or `operatorAcc` as NIM's Java SDK sends
        // it) must be the sender, the room's creator or one of its managers (403 otherwise).
        e("recall") { i throws(ChatError) in
            let p = i.params
            var op = try p.string("operator")
            if op == nil { op = try p.string("operatorAcc") }
            guard let op, !op.isEmpty else { throw ChatError(.invalidParameter, "operator is required", field: "operator") }
            let options = RecallOptions(sender: try p.required("fromAcc"), sentTime: Int64(try p.requiredInt("msgTimetag")), operatorId: op,
                                        notifyExt: try p.string("notifyExt") ?? "")
            return VendorCall.command(.recallMessage(app: i.app, roomId: try roomId(p), messageId: try p.required("msgId"), options, .server))
        },
    ]

    static let rooms: [VendorEndpoint] = [
        // NIM-1 create: a fresh room number.
        e("create") { i throws(ChatError) in
            let p = i.params
            var c = RoomConfig(roomId: String(i.newRoomNumber()))
            c.creator = try p.required("creator")
            c.name = try p.required("name")
            c.announcement = try p.string("announcement") ?? ""
            c.broadcastUrl = try p.string("broadcasturl") ?? ""
            c.ext = try p.string("ext") ?? ""
            if let level = try p.int("queuelevel") { c.queueModificationLevel = try parseQueueLevel(level) }
            if let policy = try closePolicy(p) { c.destroyPolicy = policy }
            if let io = try p.bool("inOutNotification") { c.enterExitNotifications = io }
            return VendorCall.command(.createRoom(app: i.app, c)) { reply, w in
                if case .room(let r) = reply { writeRoom(&w, "chatroom", r, online: false) }
            }
        },
        e("get") { i throws(ChatError) in
            let online = try i.params.bool("needOnlineUserCount") ?? false
            return VendorCall.query(.room(app: i.app, roomId: try roomId(i.params))) { reply, w in
                if case .room(let r) = reply { writeRoom(&w, "chatroom", r, online: online) }
            }
        },
        e("getBatch") { i throws(ChatError) in
            // The official SDKs send the ids as numbers, others as strings: both are taken.
            guard let ids = try i.params.jsonIdArray("roomids"), !ids.isEmpty else {
                throw ChatError(.invalidParameter, "roomids is required (a JSON array of room ids)", field: "roomids")
            }
            for id in ids {
                guard let n = Int64(id), n > 0, String(n) == id else { throw ChatError(.invalidParameter, "roomids must hold positive numbers", field: "roomids") }
            }
            let online = try i.params.bool("needOnlineUserCount") ?? false
            return VendorCall.query(.rooms(app: i.app, ids)) { reply, w in
                guard case .rooms(let rooms) = reply else { return }
                w.key("succRooms")
                w.beginArray()
                for r in rooms { writeRoom(&w, nil, r, online: online) }
                w.endArray()
                let found = Set(rooms.map(\.roomId))
                w.key("noExistRooms")
                w.beginArray()
                for id in ids where !found.contains(id) { w.int(Int64(id)!) }
                w.endArray()
                w.key("failRooms")
                w.beginArray()
                w.endArray()
            }
        },
        e("update") { i throws(ChatError) in
            let p = i.params
            var u = RoomUpdate()
            u.name = try p.string("name")
            u.announcement = try p.string("announcement")
            u.broadcastUrl = try p.string("broadcasturl")
            u.ext = try p.string("ext")
            if let level = try p.int("queuelevel") { u.queueModificationLevel = try parseQueueLevel(level) }
            return VendorCall.command(.updateRoom(app: i.app, roomId: try roomId(p), u, .server, nim: try notify(p, defaultOn: false))) { reply, w in
                if case .room(let r) = reply { writeRoom(&w, "chatroom", r, online: false) }
            }
        },
        // MO-7: only the room's creator may open or close it (403 otherwise).
        e("toggleCloseStat") { i throws(ChatError) in
            let p = i.params
            let op = Actor.account(try p.required("operator"))
            guard let valid = try p.bool("valid") else { throw ChatError(.invalidParameter, "valid is required (true opens, false closes)", field: "valid") }
            return VendorCall.command(.setRoomOpen(app: i.app, roomId: try roomId(p), valid, op, nim: nil)) { reply, w in
                if case .room(let r) = reply { writeRoom(&w, "desc", r, online: false) }
            }
        },
        e("updateDelayClosePolicy") { i throws(ChatError) in
            let p = i.params
            guard let policy = try closePolicy(p) else { throw ChatError(.invalidParameter, "delayClosePolicy is required", field: "delayClosePolicy") }
            var u = RoomUpdate()
            u.destroyPolicy = policy
            return VendorCall.command(.updateRoom(app: i.app, roomId: try roomId(p), u, .server, nim: nil)) { reply, w in
                if case .room(let r) = reply { writeRoom(&w, "chatroom", r, online: false) }
            }
        },
        e("updateInOutNotification") { i throws(ChatError) in
            let p = i.params
            guard let close = try p.bool("close") else { throw ChatError(.invalidParameter, "close is required (true or false)", field: "close") }
            var u = RoomUpdate()
            u.enterExitNotifications = !close
            return VendorCall.command(.updateRoom(app: i.app, roomId: try roomId(p), u, .server, nim: nil))
        },
        // NIM-3 address lookup.
        e("requestAddr") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            let user = try p.required("accid")
            guard user.utf8.count <= Limits.maxUserIdBytes else {
                throw ChatError(.invalidParameter, "accid is 1 to \(Limits.maxUserIdBytes) bytes", field: "accid")
            }
            if let t = try p.int("clienttype"), !(1...3).contains(t) {
                throw ChatError(.invalidParameter, "clienttype must be 1 (web), 2 (other) or 3 (mini program)", field: "clienttype")
            }
            let urls = i.publicURLs
            // MO-7: a closed room has no address to enter by (NIM 13002).
            return VendorCall.query(.openRoom(app: i.app, roomId: room)) { _, w in
                w.field("addr", urls.map(hostPort))
                w.field("urls", urls)
            }
        },
        e("queryUserRoomIds") { i throws(ChatError) in
            VendorCall.query(.roomIdsWhere(app: i.app, .openCreatedBy(try i.params.required("creator")))) { reply, w in
                guard case .roomIds(let ids) = reply else { return }
                var list = JSONWriter()
                list.beginArray()
                for id in ids { if let n = Int64(id), String(n) == id { list.int(n) } }
                list.endArray()
                w.key("desc")
                w.beginObject()
                w.field("roomids", String(decoding: list.bytes, as: UTF8.self))
                w.endObject()
            }
        },
    ]

    static let members: [VendorEndpoint] = [
        // NIM-12 roles: opt 1 manager, 2 common, -1 blocklist, -2 permanent mute.
        e("setMemberRole") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            // MO-7, as NIM documents it: managers are set by the creator only; common members, the
            // blocklist and mutes by the creator or a manager, on members below them (403 otherwise).
            let op = Actor.account(try p.required("operator"))
            let target = try p.required("target")
            guard let value = try p.bool("optvalue") else { throw ChatError(.invalidParameter, "optvalue is required (true or false)", field: "optvalue") }
            let ext = try p.string("notifyExt") ?? ""
            let note = NIMNotify(notifyExt: ext)
            let command: Command
            switch try p.requiredInt("opt") {
            case 1: command = .setRole(app: i.app, roomId: room, target: target, .setManager(value), op, notifyExt: ext)
            case 2: command = .setRole(app: i.app, roomId: room, target: target, .setCommon(value), op, notifyExt: ext)
            case -1: command = value ? .block(app: i.app, roomId: room, [target], minutes: nil, op, rc: nil, nim: note)
                : .unblock(app: i.app, roomId: room, [target], op, rc: nil, nim: note)
            case -2: command = value ? .mute(app: i.app, roomId: room, [target], .permanent, op, rc: nil, nim: note)
                : .unmute(app: i.app, roomId: room, [target], .permanent, op, rc: nil, nim: note)
            default: throw ChatError(.invalidParameter, "opt must be 1 (manager), 2 (common), -1 (blocklist) or -2 (mute)", field: "opt")
            }
            return .call(VendorCall(.commandThenQuery(command, .membersByIds(app: i.app, roomId: room, [target]))) { reply, w in
                guard case .members(let list, _) = reply, let m = list.first else { return }
                w.key("desc")
                w.beginObject()
                if let n = Int64(room) { w.field("roomid", n) }
                w.field("level", nimLevel(m.type))
                w.field("accid", m.userId)
                w.field("type", nimType(m.type))
                w.endObject()
            })
        },
        e("kickMember") { i throws(ChatError) in
            let p = i.params
            return VendorCall.command(.kick(app: i.app, roomId: try roomId(p), target: try p.required("targetAccid"), .server,
                                            notifyExt: try p.string("notifyExt") ?? ""))
        },
        // NIM-12/15 temporary mute in seconds; 0 lifts it. MO-7: the operator must be the room's
        // creator or a manager, acting on a member below it (NIM's 403 otherwise).
        e("temporaryMute") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            let op = Actor.account(try p.required("operator"))
            let target = try p.required("target")
            let seconds = try p.requiredInt("muteDuration")
            let note = try notify(p, defaultOn: true)
            let command: Command = seconds == 0
                ? .unmute(app: i.app, roomId: room, [target], .temporary, op, rc: nil, nim: note)
                : .mute(app: i.app, roomId: room, [target], .seconds(Int64(seconds)), op, rc: nil, nim: note)
            return VendorCall.command(command) { _, w in
                w.key("desc")
                w.beginObject()
                w.field("muteDuration", seconds)
                w.endObject()
            }
        },
        // NIM-17 whole-room mute. MO-7: the operator must be the room's creator or a manager.
        e("muteRoom") { i throws(ChatError) in
            let p = i.params
            let op = Actor.account(try p.required("operator"))
            guard let mute = try p.bool("mute") else { throw ChatError(.invalidParameter, "mute is required (true or false)", field: "mute") }
            return VendorCall.command(.setRoomMuted(app: i.app, roomId: try roomId(p), mute, op, rc: nil, nim: try notify(p, defaultOn: true))) { _, w in
                w.key("desc")
                w.beginObject()
                w.field("success", true)
                w.endObject()
            }
        },
        // NIM-13 member lists: type 0 fixed members, 1 online non-fixed (newest first), 2 online fixed.
        e("membersByPage") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            let filter: MemberFilter
            let type = try p.requiredInt("type")
            switch type {
            case 0: filter = .regular
            case 1: filter = .temporaryNewestFirst
            case 2: filter = .regularOnline
            default: throw ChatError(.invalidParameter, "type must be 0 (fixed), 1 (online non-fixed) or 2 (online fixed)", field: "type")
            }
            let limit = try p.requiredInt("limit")
            // MO-7: NIM pages online non-fixed members back in time by their enter time (`endtime`,
            // ms; 0: now). Fixed members carry no time here to page by.
            let end = try p.int("endtime") ?? 0
            guard end >= 0 else { throw ChatError(.invalidParameter, "endtime is a time in milliseconds, or 0 for now", field: "endtime") }
            let query: Query
            if end != 0 {
                guard type == 1 else {
                    throw ChatError(.invalidParameter, "endtime paging is for type 1 (online non-fixed members); give 0 for types 0 and 2", field: "endtime")
                }
                query = .temporaryMembersEnteredBefore(app: i.app, roomId: room, enteredBefore: Int64(end), limit: limit)
            } else {
                query = .members(app: i.app, roomId: room, filter, .ascending, limit: limit, after: nil)
            }
            return VendorCall.query(query) { reply, w in
                if case .members(let list, _) = reply { writeMembers(&w, roomId: room, list) }
            }
        },
        e("queryMembers") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            return VendorCall.query(.membersByIds(app: i.app, roomId: room, try jsonList(p, "accids"))) { reply, w in
                if case .members(let list, _) = reply { writeMembers(&w, roomId: room, list) }
            }
        },
    ]

    static let queue: [VendorEndpoint] = [
        // NIM-16.
        e("queueInit") { i throws(ChatError) in
            var u = RoomUpdate()
            u.queueLimit = try i.params.requiredInt("sizeLimit")
            return VendorCall.command(.updateRoom(app: i.app, roomId: try roomId(i.params), u, .server, nim: nil))
        },
        // MO-7: `operator` offers with its role in the room (a room whose queuelevel is 1 takes
        // only its creator's and managers'); a transient element needs its operator in the room.
        e("queueOffer") { i throws(ChatError) in
            let p = i.params
            let op = try p.string("operator").flatMap { $0.isEmpty ? nil : $0 }
            return VendorCall.command(.queueOffer(app: i.app, roomId: try roomId(p), key: try p.required("key"), value: try p.string("value") ?? "",
                                                  transient: try p.bool("transient") ?? false, op.map { .account($0) } ?? .server))
        },
        e("queuePoll") { i throws(ChatError) in
            let p = i.params
            let key = try p.string("key")
            return VendorCall.command(.queuePoll(app: i.app, roomId: try roomId(p), key: key?.isEmpty == false ? key : nil, .server)) { reply, w in
                guard case .queueElement(let k, let v) = reply else { return }
                w.key("desc")
                w.beginObject()
                w.field("key", k)
                w.field("value", v)
                w.endObject()
            }
        },
        e("queueList") { i throws(ChatError) in
            VendorCall.query(.queue(app: i.app, roomId: try roomId(i.params))) { reply, w in
                guard case .queue(let items) = reply else { return }
                writeQueue(&w, items)
            }
        },
        e("queueMultiGet") { i throws(ChatError) in
            let keys = try jsonList(i.params, "keys")
            return VendorCall.query(.queue(app: i.app, roomId: try roomId(i.params))) { reply, w in
                guard case .queue(let items) = reply else { return }
                let wanted = Set(keys)
                writeQueue(&w, items.filter { wanted.contains($0.key) })
            }
        },
        e("queueDrop") { i throws(ChatError) in
            VendorCall.command(.queueDrop(app: i.app, roomId: try roomId(i.params), .server)) { _, w in
                w.key("desc")
                w.beginObject()
                w.field("success", true)
                w.endObject()
            }
        },
        e("queueBatchUpdateElements") { i throws(ChatError) in
            let p = i.params
            // MO-7: the operator updates with its role in the room.
            let op = try p.required("operator")
            guard let elements = try p.stringMap("elements"), !elements.isEmpty else {
                throw ChatError(.invalidParameter, "elements is required (a JSON object of keys and values)", field: "elements")
            }
            return VendorCall.command(.queueBatchUpdate(app: i.app, roomId: try roomId(p), elements.map { KeyValue(key: $0.key, value: $0.value) }, .account(op), notify: try notify(p, defaultOn: false))) { reply, w in
                w.key("desc")
                w.beginObject()
                if case .missingKeys(let keys) = reply { w.field("noExistElementKey", keys) } else { w.field("noExistElementKey", [String]()) }
                w.endObject()
            }
        },
    ]

    static func writeQueue(_ w: inout JSONWriter, _ items: [(key: String, value: String)]) {
        w.key("desc")
        w.beginObject()
        w.key("list")
        w.beginArray()
        for item in items {
            w.beginObject()
            w.field(item.key, item.value)
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    static let unsupported: [VendorEndpoint] = [
        ("addRobot", "chat-room robots are accounts driven by NIM's own AI service, outside a chat gateway"),
        ("removeRobot", "chat-room robots are accounts driven by NIM's own AI service, outside a chat gateway"),
        ("cleanRobot", "chat-room robots are accounts driven by NIM's own AI service, outside a chat gateway"),
    ].map { name, what in VendorEndpoint.unsupported(prefix + name + ".action", what) }
}

// MARK: AU-5: members by role, a batch offer, a member's profile set by the app server

extension NIMV1 {
    static let roles: [VendorEndpoint] = [
        // `roles`: a JSON object of NIM's role keys to true or false.
        e("queryMembersByRole") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            guard let given = try p.object("roles") else { throw ChatError(.invalidParameter, "roles is required (a JSON object)", field: "roles") }
            var roles = MemberRoles()
            for (key, value) in given {
                guard case .bool(let on) = value else { throw ChatError(.invalidParameter, "roles.\(key) must be true or false", field: "roles") }
                switch key {
                case "creator": roles.creator = on
                case "manager": roles.manager = on
                case "common": roles.common = on
                case "blacklist": roles.blocklisted = on
                case "mute": roles.muted = on
                default: throw ChatError(.invalidParameter, "roles has creator, manager, common, blacklist and mute, not \(key)", field: "roles")
                }
            }
            return VendorCall.query(.membersByRoles(app: i.app, roomId: room, roles)) { reply, w in
                if case .members(let list, _) = reply { writeMembers(&w, roomId: room, list) }
            }
        },
        // `elements`: a JSON array of {key, value, accid, transient}; `transient` is the default
        // for elements that do not say.
        e("queueBatchOffer") { i throws(ChatError) in
            let p = i.params
            _ = try p.required("operator")
            let room = try roomId(p)
            let transient = try p.bool("transient") ?? false
            if let high = try p.int("highPriority"), high != 0 {
                throw ChatError(.invalidParameter, "highPriority offers (past the queue's size) are not supported; give 0", field: "highPriority")
            }
            if let policy = try p.int("highPriorityPolicy"), policy != 0 && policy != 1 {
                throw ChatError(.invalidParameter, "highPriorityPolicy must be 0 or 1", field: "highPriorityPolicy")
            }
            _ = try notify(p, defaultOn: false)
            guard let text = try p.string("elements"), case .array(let list)? = JSONValue.parse(Array(text.utf8)) else {
                throw ChatError(.invalidParameter, "elements is required (a JSON array of {key, value, accid, transient})", field: "elements")
            }
            let items = try list.map { (v: JSONValue) throws(ChatError) -> QueueOfferItem in
                guard case .object(let o) = v, case .string(let key)? = o["key"] else {
                    throw ChatError(.invalidParameter, "each element is an object with a key", field: "elements")
                }
                var item = QueueOfferItem(key: key, value: "", transient: transient)
                switch o["value"] {
                case .string(let s)?: item.value = s
                case nil, .null?: break
                default: throw ChatError(.invalidParameter, "elements' values are strings", field: "elements")
                }
                switch o["accid"] {
                case .string(let s)?: item.owner = s
                case nil, .null?: break
                default: throw ChatError(.invalidParameter, "elements' accids are strings", field: "elements")
                }
                switch o["transient"] {
                case .bool(let b)?: item.transient = b
                case nil, .null?: break
                default: throw ChatError(.invalidParameter, "elements' transient is true or false", field: "elements")
                }
                return item
            }
            return VendorCall.command(.queueBatchOffer(app: i.app, roomId: room, items)) { reply, w in
                w.key("desc")
                w.beginObject()
                if case .failedKeys(let keys) = reply { w.field("failedKeys", keys) } else { w.field("failedKeys", [String]()) }
                w.field("highPriority", false)
                w.endObject()
            }
        },
        e("updateMyRoomRole") { i throws(ChatError) in
            let p = i.params
            let notice = try notify(p, defaultOn: true)
            var call = VendorCall(.command(.updateMemberInfo(app: i.app, roomId: try roomId(p), userId: try p.required("accid"), nickname: try p.string("nick"),
                                                             avatar: try p.string("avator"), ext: try p.string("ext"), save: try p.bool("save") ?? false,
                                                             notify: notice)))
            call.fields = ["userId": "accid", "nickname": "nick", "avatar": "avator"]
            return .call(call)
        },
    ]
}
