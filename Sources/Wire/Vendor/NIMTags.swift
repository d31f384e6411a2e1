import Chat

/// NIM's member tags on its v1 server API (AU-1): the tag mute, the count and list of a tag's
/// online members, a member's tags replaced, and the history of the messages sent to tags. The
/// parameters are the NIM server SDKs' (`roomid` for the member calls, `roomId` for
/// `updateChatRoomRoleTag` and the history); a tag expression (`notifyTargetTags`) is NIM's JSON
/// (`{"tag":"a"}`, `{"op":"and"|"or"|"not","tags":[…]}`) in one form value.
extension NIMV1 {
    static let tags: [VendorEndpoint] = [
        e("tagTemporaryMute") { i throws(ChatError) in
            let p = i.params
            _ = try p.required("operator")
            let tag = try p.required("targetTag")
            let seconds = try p.requiredInt("muteDuration")
            let command = Command.tagMute(app: i.app, roomId: try roomId(p), tag: tag, seconds: seconds, notify: try notify(p, defaultOn: true),
                                          notifyTargetTags: try tagExpression(p, "notifyTargetTags"), .server)
            return VendorCall.command(command) { _, w in
                w.key("desc")
                w.beginObject()
                w.field("muteDuration", seconds)
                w.endObject()
            }
        },
        e("tagMembersCount") { i throws(ChatError) in
            let tag = try i.params.required("tag")
            return VendorCall.query(.tagMembersCount(app: i.app, roomId: try roomId(i.params), tag: tag)) { reply, w in
                guard case .count(let n) = reply else { return }
                w.key("data")
                w.beginObject()
                w.field("tag", tag)
                w.field("onlineUserCount", n)
                w.endObject()
            }
        },
        e("tagMembersQuery") { i throws(ChatError) in
            let p = i.params
            let room = try roomId(p)
            if let end = try p.int("endTime"), end != 0 {
                throw ChatError(.invalidParameter, "endTime paging is not supported; give 0 and a limit up to \(Limits.maxMemberListCount)", field: "endTime")
            }
            let limit = try p.int("limit") ?? 100
            return VendorCall.query(.tagMembers(app: i.app, roomId: room, tag: try p.required("tag"), limit: limit, after: nil)) { reply, w in
                if case .members(let list, _) = reply { writeMembers(&w, roomId: room, list) }
            }
        },
        e("updateChatRoomRoleTag") { i throws(ChatError) in
            let p = i.params
            let tags = try p.jsonArrayString("tags") ?? []
            return VendorCall.command(.setMemberTags(app: i.app, roomId: try roomId(p, "roomId"), userId: try p.required("accid"), tags,
                                                     notifyTargetTags: try tagExpression(p, "notifyTargetTags")))
        },
    ] + ["/nimserver/history/queryTagHistoryMsg.action", prefix + "queryTagHistoryMsg.action"].map { path in
        VendorEndpoint(path) { i throws(ChatError) in try tagHistory(i) }
    }

    /// `queryTagHistoryMsg`: the messages sent to expressions naming any of `tags`, between
    /// `fromTime` and `toTime` (ms), `reverse` 1 oldest first or 2 newest first (the default), at
    /// most `limit` (≤ 100), of the given `types` (0 text, 100 custom).
    static func tagHistory(_ i: VendorInput) throws(ChatError) -> VendorResolution {
        let p = i.params
        let room = try roomId(p, "roomId")
        let tags = try jsonList(p, "tags")
        for t in tags { _ = try Validate.tags([t], field: "tags") }
        let from = Int64(try p.int("fromTime") ?? 0)
        let to = Int64(try p.int("toTime") ?? 0)
        guard from >= 0, to >= 0, to == 0 || to > from else {
            throw ChatError(.invalidParameter, "fromTime and toTime are times in ms with fromTime before toTime", field: "toTime")
        }
        let order: SortOrder
        switch try p.int("reverse") ?? 2 {
        case 1: order = .ascending
        case 2: order = .descending
        default: throw ChatError(.invalidParameter, "reverse must be 1 (oldest first) or 2 (newest first)", field: "reverse")
        }
        var kinds: [ChatMessage.Kind] = []
        for t in (try p.string("types") ?? "").split(separator: ",") {
            switch t.filter({ $0 != " " }) {
            case "0": kinds.append(.text)
            case "100": kinds.append(.custom)
            default: throw ChatError(.invalidParameter, "types lists 0 (text) and 100 (custom), comma-separated", field: "types")
            }
        }
        let limit = try p.int("limit") ?? 100
        let start = order == .ascending ? max(from - 1, 0) : to
        let query = Query.history(app: i.app, roomId: room, start: start, limit: limit, order, kinds: kinds, filter: HistoryFilter(tags: tags))
        return VendorCall.query(query) { reply, w in
            guard case .messages(let list) = reply else { return }
            w.key("msgs")
            w.beginArray()
            for m in list where m.time >= from && (to == 0 || m.time <= to) {
                w.beginObject()
                w.field("msgid", m.id)
                w.field("from", m.sender)
                w.field("type", m.kind == .custom ? 100 : 0)
                w.field("sendtime", m.time)
                w.field("body", m.content)
                w.field("fromclienttype", m.fromServer ? 0 : 16)
                w.endObject()
            }
            w.endArray()
        }
    }

    /// NIM's tag expression in one form value (or a JSON body's object), checked as the domain
    /// checks it; nil when absent.
    static func tagExpression(_ p: P, _ name: String) throws(ChatError) -> TagExpression? {
        guard let o = try p.object(name) else { return nil }
        return try TagExpression.from(try tagJSON(.object(o), name, depth: 1), field: name)
    }

    private static func tagJSON(_ v: JSONValue, _ name: String, depth: Int) throws(ChatError) -> TagExpressionJSON {
        guard depth <= Limits.maxTagExpressionDepth else {
            throw ChatError(.invalidParameter, "\(name) nests at most \(Limits.maxTagExpressionDepth) levels", field: name)
        }
        guard case .object(let o) = v else { throw ChatError(.invalidParameter, "\(name): an expression is a JSON object", field: name) }
        var e = TagExpressionJSON()
        for (k, value) in o {
            switch (k, value) {
            case ("tag", .string(let s)): e.tag = s
            case ("op", .string(let s)): e.op = s
            case ("tags", .array(let items)):
                var list: [TagExpressionJSON] = []
                for item in items { list.append(try tagJSON(item, name, depth: depth + 1)) }
                e.tags = list
            default: throw ChatError(.invalidParameter, "\(name): an expression has tag, or op and tags; \(k) is not one of them", field: name)
            }
        }
        return e
    }
}
