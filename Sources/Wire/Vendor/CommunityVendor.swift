import Chat

/// Community-channel (ultra-group) messages and controls on the vendors' surfaces (MO-3, MO-5,
/// MO-6): Nexconn's `/v4/community-channel/message/*`, `metadata`, `history-message`,
/// `mute-list`, `allowed-sender-list` and `freeze-list`, its open-channel history, and
/// RongCloud's `/message/ultragroup/publish.json`, `/ultragroup/msg/*`, `hismsg`,
/// `message/expansion/*`, `userbanned`, `globalbanned` and `banned/whitelist`. All of them are
/// the domain's `sendCommunityMessage` and `community` commands and its community queries.
enum CommunityVendor {
    typealias P = VendorParams

    // MARK: Nexconn

    static let nexconn: [VendorEndpoint] = [
        // MO-3: `toChannelIds` (1…3 community channels), `subchannelId` (default RCDefault),
        // `toUserIds` (one channel only), `shouldPersist` (1 default), `hasMetadata` + `metadata`.
        VendorEndpoint("/v4/community-channel/message/send") { i throws(ChatError) in
            let p = i.params
            let groups = try p.list("toChannelIds")
            var draft = CommunityDraft(fromUserId: try p.required("fromUserId"), type: try p.required("messageType"), content: try p.required("content"))
            draft.stored = try persist(p, "shouldPersist")
            draft.targets = try p.list("toUserIds")
            if try p.bool("hasMetadata") == true { draft.metadata = try metadataValues(p, "metadata") ?? [:] }
            var call = VendorCall(.command(.sendCommunityMessage(app: i.app, groupIds: groups, channelId: try subchannel(p), draft, .server))) { reply, w in
                guard case .communityMessages(let list) = reply else { return }
                w.key("messageIds")
                w.beginArray()
                for m in list {
                    w.beginObject()
                    w.field("channelId", m.groupId)
                    w.field("messageId", m.messageId)
                    w.endObject()
                }
                w.endArray()
            }
            call.fields = ["groupIds": "toChannelIds", "groupId": "toChannelIds", "targets": "toUserIds", "type": "messageType"]
            return .call(call)
        },
        VendorEndpoint("/v4/community-channel/message/update") { i throws(ChatError) in
            let p = i.params
            return .call(VendorCall(.command(.community(app: i.app, groupId: try p.required("channelId"),
                                                        .edit(channelId: try subchannel(p), messageId: try p.required("messageId"),
                                                              fromUserId: try p.required("fromUserId"), content: try p.required("content")), .server))))
        },
        VendorEndpoint("/v4/community-channel/message/metadata/set") { i throws(ChatError) in
            let p = i.params
            guard let entries = try metadataValues(p, "metadata"), !entries.isEmpty else {
                throw ChatError(.invalidParameter, "metadata is required (an object of strings)", field: "metadata")
            }
            var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("channelId"),
                                                      .setMetadata(channelId: try subchannel(p), messageId: try p.required("messageId"),
                                                                   userId: try p.required("userId"), entries), .server)))
            call.fields = ["metadata": "metadata"]
            return .call(call)
        },
        VendorEndpoint("/v4/community-channel/message/metadata/delete") { i throws(ChatError) in
            let p = i.params
            var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("channelId"),
                                                      .removeMetadata(channelId: try subchannel(p), messageId: try p.required("messageId"),
                                                                      userId: try p.required("userId"), keys: try p.list("keys")), .server)))
            call.fields = ["keys": "keys"]
            return .call(call)
        },
        VendorEndpoint("/v4/community-channel/message/metadata/list") { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.communityMessage(app: i.app, groupId: try p.required("channelId"), channelId: try subchannel(p),
                                                      messageId: try p.required("messageId"))) { reply, w in
                guard case .communityMessage(let m) = reply else { return }
                w.key("metadata")
                Encode.metadataEntries(m.metadata ?? [], &w)
            }
        },
        // MO-6: newest first from `startAt` (included when `includeStart`) back to `endAt`, what
        // `userId` may see, at most 14 days, `pageSize` 1…100 (10).
        VendorEndpoint("/v4/community-channel/history-message/list") { i throws(ChatError) in
            let p = i.params
            let range = try nexconnRange(p)
            let sub = try p.string("subchannelId").flatMap { $0.isEmpty ? nil : $0 }
            let q = CommunityHistoryQuery(channelId: sub, viewer: try p.required("userId"), oldest: range.endAt, newest: range.startAt,
                                          includeNewest: range.includeStart, limit: range.pageSize, newestFirst: true)
            var call = VendorCall(.query(.communityHistory(app: i.app, groupId: try p.required("channelId"), q))) { reply, w in
                guard case .communityMessages(let list) = reply else { return }
                w.key("messages")
                w.beginArray()
                for m in list {
                    w.beginObject()
                    w.field("channelId", m.groupId)
                    w.field("subchannelId", m.channelId)
                    w.field("fromUserId", m.fromUserId)
                    w.field("messageId", m.messageId)
                    w.field("sentAt", m.sentAt)
                    w.field("messageType", m.type)
                    w.field("content", m.content)
                    w.field("hasMetadata", m.metadata != nil)
                    if let entries = m.metadata, !entries.isEmpty {
                        w.key("metadata")
                        Encode.metadataEntries(entries, &w)
                    }
                    w.endObject()
                }
                w.endArray()
            }
            call.fields = ["channelId": "subchannelId", "groupId": "channelId"]
            return .call(call)
        },
        // MO-6: an open channel's history (Roomcast's room history window) in Nexconn's shape.
        VendorEndpoint("/v4/open-channel/history-message/list") { i throws(ChatError) in
            let p = i.params
            let user = try p.required("userId")
            let range = try nexconnRange(p)
            guard range.startAt - range.endAt <= Limits.maxCommunityHistorySpanMilliseconds else {
                throw ChatError(.invalidParameter, "the range spans at most 14 days", field: "startAt")
            }
            let start = range.includeStart ? range.startAt + 1 : range.startAt
            let endAt = range.endAt
            var call = VendorCall(.query(.history(app: i.app, roomId: try p.required("channelId"), start: start, limit: range.pageSize, .descending,
                                                  kinds: []))) { reply, w in
                guard case .messages(let list) = reply else { return }
                w.key("messages")
                w.beginArray()
                // What this participant may see: messages for everyone, for it, or its own.
                for m in list where m.time >= endAt && m.targetTags == nil && (m.targets.isEmpty || m.targets.contains(user) || m.sender == user) {
                    w.beginObject()
                    w.field("channelId", m.roomId)
                    w.field("fromUserId", m.sender)
                    w.field("messageId", m.id)
                    w.field("sentAt", m.time)
                    w.field("messageType", m.type.isEmpty ? m.kind.rawValue : m.type)
                    w.field("content", m.content)
                    w.endObject()
                }
                w.endArray()
            }
            call.fields = ["limit": "pageSize", "start": "startAt"]
            return .call(call)
        },
        // MO-5: the freeze (and below, the lists) of a subchannel or (no `subchannelId`) the whole channel.
        VendorEndpoint("/v4/community-channel/freeze-list/set") { i throws(ChatError) in
            let p = i.params
            guard let status = try p.bool("status") else { throw ChatError(.invalidParameter, "status is required (true or false)", field: "status") }
            return .call(VendorCall(.command(.community(app: i.app, groupId: try p.required("channelId"),
                                                        .setFrozen(channelId: try p.string("subchannelId") ?? "", status), .server))))
        },
        VendorEndpoint("/v4/community-channel/freeze-list/get") { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.communityRules(app: i.app, groupId: try p.required("channelId"), channelId: try p.string("subchannelId") ?? "")) { reply, w in
                guard case .communityRules(let r) = reply else { return }
                w.field("status", r.frozen)
            }
        },
    ] + list("/v4/community-channel/mute-list", .muted, answer: "mutedMembers")
      + list("/v4/community-channel/allowed-sender-list", .allowedSenders, answer: "members")

    static func list(_ base: String, _ list: CommunityList, answer: String) -> [VendorEndpoint] {
        func edit(_ verb: String, add: Bool) -> VendorEndpoint {
            VendorEndpoint(base + "/" + verb) { i throws(ChatError) in
                let p = i.params
                var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("channelId"),
                                                          .editList(list, channelId: try p.string("subchannelId") ?? "", add: add, users: try p.list("userIds")),
                                                          .server)))
                call.fields = ["userIds": "userIds"]
                return .call(call)
            }
        }
        return [
            edit("add", add: true), edit("remove", add: false),
            VendorEndpoint(base + "/get") { i throws(ChatError) in
                let p = i.params
                // The SDK pages with `page` (1-based) and `pageSize` (50).
                let page = try p.int("page") ?? 1, size = try p.int("pageSize") ?? 50
                guard page >= 1 else { throw ChatError(.invalidParameter, "page starts at 1", field: "page") }
                guard size >= 1 && size <= Limits.maxCommunityListUsers else {
                    throw ChatError(.invalidParameter, "pageSize must be between 1 and \(Limits.maxCommunityListUsers)", field: "pageSize")
                }
                return VendorCall.query(.communityRules(app: i.app, groupId: try p.required("channelId"), channelId: try p.string("subchannelId") ?? "")) { reply, w in
                    guard case .communityRules(let r) = reply else { return }
                    let all = r.list(list)
                    let (start, overflow) = (page - 1).multipliedReportingOverflow(by: size)
                    w.key(answer)
                    w.beginArray()
                    if !overflow && start < all.count {
                        for u in all[start..<min(all.count, start + size)] {
                            w.beginObject()
                            w.field("userId", u)
                            w.endObject()
                        }
                    }
                    w.endArray()
                }
            },
        ]
    }

    /// The subchannel a message call names: `subchannelId`, RCDefault when absent.
    static func subchannel(_ p: P) throws(ChatError) -> String {
        guard let s = try p.string("subchannelId"), !s.isEmpty else { return ChannelInfo.defaultChannelId }
        return s
    }

    /// 0 or 1 (absent: 1), as a number, a string or a boolean (RongCloud's SDK sends strings in
    /// its JSON bodies).
    static func persist(_ p: P, _ name: String) throws(ChatError) -> Bool {
        let text: String?
        switch p.value(name) {
        case .int(let i)?: text = String(i)
        case .bool(let b)?: text = b ? "1" : "0"
        case .null?: text = nil
        case nil, .string?: text = try p.string(name)
        default: text = "?"
        }
        switch text {
        case nil, "", "1"?, "true"?: return true
        case "0"?, "false"?: return false
        default: throw ChatError(.invalidParameter, "\(name) must be 0 or 1", field: name)
        }
    }

    // MARK: RongCloud

    static let rongCloud: [VendorEndpoint] = [
        // MO-3: JSON body (as the SDK sends it): `fromUserId`, `toGroupIds` (1…3), `objectName`,
        // `content`, `busChannel`, `isPersisted` ("1" default), `expansion` + `extraContent`.
        VendorEndpoint("/message/ultragroup/publish.json") { i throws(ChatError) in
            let p = i.params
            var draft = CommunityDraft(fromUserId: try p.required("fromUserId"), type: try p.required("objectName"), content: try p.required("content"))
            draft.stored = try persist(p, "isPersisted")
            if try p.bool("expansion") == true { draft.metadata = try metadataValues(p, "extraContent") ?? [:] }
            let groups = try p.commaList("toGroupIds")
            var call = VendorCall(.command(.sendCommunityMessage(app: i.app, groupIds: groups, channelId: try busChannel(p), draft, .server))) { reply, w in
                guard case .communityMessages(let list) = reply else { return }
                if list.count == 1 { w.field("messageUID", list[0].messageId) }
                w.key("messageUIDs")
                w.beginArray()
                for m in list {
                    w.beginObject()
                    w.field("groupId", m.groupId)
                    w.field("messageUID", m.messageId)
                    w.endObject()
                }
                w.endArray()
            }
            call.fields = ["groupIds": "toGroupIds", "groupId": "toGroupIds", "type": "objectName", "metadata": "extraContent"]
            return .call(call)
        },
        VendorEndpoint("/ultragroup/msg/modify.json") { i throws(ChatError) in
            let p = i.params
            var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("groupId"),
                                                      .edit(channelId: try busChannel(p), messageId: try p.required("msgUID"),
                                                            fromUserId: try p.required("fromUserId"), content: try p.required("content")), .server)))
            call.fields = ["messageId": "msgUID"]
            return .call(call)
        },
        // MO-6: oldest first, `startTime` < msgTime ≤ `endTime`, at most 14 days, `pageSize` 1…100 (20).
        VendorEndpoint("/ultragroup/hismsg/query.json") { i throws(ChatError) in
            let p = i.params
            let start = Int64(try p.requiredInt("startTime")), end = Int64(try p.requiredInt("endTime"))
            guard start >= 0, start <= end else { throw ChatError(.invalidParameter, "startTime must not be after endTime", field: "startTime") }
            let size = try p.int("pageSize") ?? 20
            guard size >= 1 && size <= 100 else { throw ChatError(.invalidParameter, "pageSize must be between 1 and 100", field: "pageSize") }
            let from = try p.string("fromUserId").flatMap { $0.isEmpty ? nil : $0 }
            let q = CommunityHistoryQuery(channelId: try busChannel(p), viewer: nil, fromUserId: from, oldest: start, newest: end, includeOldest: false,
                                          limit: size, newestFirst: false)
            var call = VendorCall(.query(.communityHistory(app: i.app, groupId: try p.required("groupId"), q))) { reply, w in
                guard case .communityMessages(let list) = reply else { return }
                w.key("data")
                w.beginArray()
                for m in list {
                    w.beginObject()
                    w.field("groupId", m.groupId)
                    w.field("busChannel", m.channelId)
                    w.field("fromUserId", m.fromUserId)
                    w.field("msgUID", m.messageId)
                    w.field("msgTime", m.sentAt)
                    w.field("objectName", m.type)
                    w.field("conversionType", 10)
                    w.field("content", m.content)
                    w.field("expansion", m.metadata != nil)
                    w.field("extraContent", extraContentText(m.metadata ?? []))
                    w.endObject()
                }
                w.endArray()
            }
            call.fields = ["startAt": "startTime", "endAt": "endTime", "channelId": "busChannel"]
            return .call(call)
        },
        // MO-3: message expansion (metadata): `extraKeyVal` a JSON object, `extraKey` a JSON array.
        VendorEndpoint("/ultragroup/message/expansion/set.json") { i throws(ChatError) in
            let p = i.params
            guard let entries = try metadataValues(p, "extraKeyVal"), !entries.isEmpty else {
                throw ChatError(.invalidParameter, "extraKeyVal is required (a JSON object of strings)", field: "extraKeyVal")
            }
            var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("groupId"),
                                                      .setMetadata(channelId: try busChannel(p), messageId: try p.required("msgUID"),
                                                                   userId: try p.required("userId"), entries), .server)))
            call.fields = ["metadata": "extraKeyVal", "messageId": "msgUID"]
            return .call(call)
        },
        VendorEndpoint("/ultragroup/message/expansion/delete.json") { i throws(ChatError) in
            let p = i.params
            guard let keys = try p.jsonArrayString("extraKey") else {
                throw ChatError(.invalidParameter, "extraKey is required (a JSON array of keys)", field: "extraKey")
            }
            var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("groupId"),
                                                      .removeMetadata(channelId: try busChannel(p), messageId: try p.required("msgUID"),
                                                                      userId: try p.required("userId"), keys: keys), .server)))
            call.fields = ["keys": "extraKey", "messageId": "msgUID"]
            return .call(call)
        },
        VendorEndpoint("/ultragroup/message/expansion/query.json") { i throws(ChatError) in
            let p = i.params
            var call = VendorCall(.query(.communityMessage(app: i.app, groupId: try p.required("groupId"), channelId: try busChannel(p),
                                                           messageId: try p.required("msgUID")))) { reply, w in
                guard case .communityMessage(let m) = reply else { return }
                w.key("extraContent")
                w.beginObject()
                for e in m.metadata ?? [] {
                    w.key(e.key)
                    w.beginObject()
                    w.field("v", e.value)
                    w.field("ts", e.updatedAt)
                    w.endObject()
                }
                w.endObject()
            }
            call.fields = ["messageId": "msgUID"]
            return .call(call)
        },
        // MO-5: `userbanned` is the mute list, `globalbanned` the freeze, `banned/whitelist` the
        // allowed senders; `busChannel` absent: the whole group.
        VendorEndpoint("/ultragroup/globalbanned/set.json") { i throws(ChatError) in
            let p = i.params
            guard let status = try p.bool("status") else { throw ChatError(.invalidParameter, "status is required (true or false)", field: "status") }
            return .call(VendorCall(.command(.community(app: i.app, groupId: try p.required("groupId"),
                                                        .setFrozen(channelId: try p.string("busChannel") ?? "", status), .server))))
        },
        VendorEndpoint("/ultragroup/globalbanned/get.json") { i throws(ChatError) in
            let p = i.params
            return VendorCall.query(.communityRules(app: i.app, groupId: try p.required("groupId"), channelId: try p.string("busChannel") ?? "")) { reply, w in
                guard case .communityRules(let r) = reply else { return }
                w.field("status", r.frozen)
            }
        },
    ] + rongCloudList("/ultragroup/userbanned", .muted) + rongCloudList("/ultragroup/banned/whitelist", .allowedSenders)

    static func rongCloudList(_ base: String, _ list: CommunityList) -> [VendorEndpoint] {
        func edit(_ verb: String, add: Bool) -> VendorEndpoint {
            VendorEndpoint(base + "/" + verb + ".json") { i throws(ChatError) in
                let p = i.params
                let users = try p.commaList("userIds")
                var call = VendorCall(.command(.community(app: i.app, groupId: try p.required("groupId"),
                                                          .editList(list, channelId: try p.string("busChannel") ?? "", add: add, users: users), .server)))
                call.fields = ["userIds": "userIds"]
                return .call(call)
            }
        }
        return [
            edit("add", add: true), edit("del", add: false),
            VendorEndpoint(base + "/get.json") { i throws(ChatError) in
                let p = i.params
                let page = try p.int("page") ?? 1, size = try p.int("pageSize") ?? 50
                guard page >= 1 else { throw ChatError(.invalidParameter, "page starts at 1", field: "page") }
                guard size >= 1 && size <= 200 else { throw ChatError(.invalidParameter, "pageSize must be between 1 and 200", field: "pageSize") }
                return VendorCall.query(.communityRules(app: i.app, groupId: try p.required("groupId"), channelId: try p.string("busChannel") ?? "")) { reply, w in
                    guard case .communityRules(let r) = reply else { return }
                    let all = r.list(list)
                    let (start, overflow) = (page - 1).multipliedReportingOverflow(by: size)
                    w.key("users")
                    w.beginArray()
                    if !overflow && start < all.count {
                        for u in all[start..<min(all.count, start + size)] {
                            w.beginObject()
                            w.field("id", u)
                            w.endObject()
                        }
                    }
                    w.endArray()
                }
            },
        ]
    }

    /// `busChannel`, RCDefault when absent.
    static func busChannel(_ p: P) throws(ChatError) -> String {
        guard let s = try p.string("busChannel"), !s.isEmpty else { return ChannelInfo.defaultChannelId }
        return s
    }

    /// RongCloud's `extraContent` text: `{"key":{"v":"value","ts":ms}}`.
    static func extraContentText(_ entries: [CommunityMetadataEntry]) -> String {
        var w = JSONWriter()
        w.beginObject()
        for e in entries {
            w.key(e.key)
            w.beginObject()
            w.field("v", e.value)
            w.field("ts", e.updatedAt)
            w.endObject()
        }
        w.endObject()
        return String(decoding: w.bytes, as: UTF8.self)
    }

    /// An object of string values (or, from a form, its JSON text).
    static func metadataValues(_ p: P, _ name: String) throws(ChatError) -> [String: String]? {
        guard let pairs = try p.stringMap(name) else { return nil }
        var out: [String: String] = [:]
        for (k, v) in pairs { out[k] = v }
        return out
    }

    struct NexconnRange {
        var startAt: Int64
        var endAt: Int64
        var pageSize: Int
        var includeStart: Bool
    }

    /// `startAt` ≥ `endAt` (ms), `pageSize` 1…100 (10), `includeStart` (false when absent).
    static func nexconnRange(_ p: P) throws(ChatError) -> NexconnRange {
        let start = Int64(try p.requiredInt("startAt")), end = Int64(try p.requiredInt("endAt"))
        guard start >= 0 else { throw ChatError(.invalidParameter, "startAt must not be negative", field: "startAt") }
        guard end >= 0, end <= start else { throw ChatError(.invalidParameter, "endAt must not be after startAt", field: "endAt") }
        let size = try p.int("pageSize") ?? 10
        guard size >= 1 && size <= 100 else { throw ChatError(.invalidParameter, "pageSize must be between 1 and 100", field: "pageSize") }
        return NexconnRange(startAt: start, endAt: end, pageSize: size, includeStart: try p.bool("includeStart") ?? false)
    }
}
