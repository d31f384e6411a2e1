import Chat

/// Wire JSON for domain values. Field names follow the seeds (camelCase).
public enum Encode {
    static func roomInfo(_ r: RoomInfo, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("roomId", r.roomId)
        w.field("name", r.name)
        w.field("announcement", r.announcement)
        w.field("creator", r.creator)
        w.field("ext", r.ext)
        w.field("broadcastUrl", r.broadcastUrl)
        w.field("onlineUserCount", r.onlineUserCount)
        w.field("queueModificationLevel", r.queueModificationLevel.rawValue)
        w.field("muted", r.muted)
        w.field("open", r.open)
        w.field("createdAt", r.createdAt)
        w.key("destroy")
        destroyPolicy(r.destroyPolicy, &w)
        w.field("keepAlive", r.keepAlive)
        w.field("multiDevice", r.multiDevice.rawValue)
        w.field("enterExitNotifications", r.enterExitNotifications)
        w.field("epoch", r.epoch)
        // QS-6: only when it is stopped.
        if r.distributionStopped { w.field("distributionStopped", true) }
        w.endObject()
    }

    static func destroyPolicy(_ p: DestroyPolicy, _ w: inout JSONWriter) {
        w.beginObject()
        switch p {
        case .inactive(let m):
            w.field("policy", "inactive")
            w.field("minutes", m)
        case .fixed(let m):
            w.field("policy", "fixed")
            w.field("minutes", m)
        case .whenEmpty(let s):
            w.field("policy", "whenEmpty")
            w.field("seconds", s)
        }
        w.endObject()
    }

    static func member(_ m: MemberInfo, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("userId", m.userId)
        w.field("nickname", m.nickname)
        w.field("avatar", m.avatar)
        w.field("ext", m.ext)
        w.field("type", m.type.rawValue)
        w.field("isMuted", m.isMuted)
        w.field("isTempMuted", m.isTempMuted)
        w.field("tempMuteRemainingSeconds", m.tempMuteRemainingSeconds)
        w.field("isBlocklisted", m.isBlocklisted)
        w.field("isOnline", m.isOnline)
        w.field("enterTime", m.enterTime)
        if !m.tags.isEmpty { w.field("tags", m.tags) }
        w.endObject()
    }

    /// AU-1: a tag expression in NIM's JSON form.
    static func tagExpression(_ e: TagExpression, _ w: inout JSONWriter) {
        w.beginObject()
        switch e {
        case .tag(let t):
            w.field("tag", t)
        case .and(let list), .or(let list):
            w.field("op", { if case .and = e { return "and" } else { return "or" } }())
            w.key("tags")
            w.beginArray()
            for x in list { tagExpression(x, &w) }
            w.endArray()
        case .not(let x):
            w.field("op", "not")
            w.key("tags")
            w.beginArray()
            tagExpression(x, &w)
            w.endArray()
        }
        w.endObject()
    }

    static func message(_ m: ChatMessage, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("messageId", m.id)
        w.field("roomId", m.roomId)
        w.field("sender", m.sender)
        w.field("senderNickname", m.senderNickname)
        w.field("senderAvatar", m.senderAvatar)
        w.field("roomExt", m.senderExt)
        w.field("type", m.kind.rawValue)
        w.field("content", m.content)
        w.field("time", m.time)
        w.field("fromServer", m.fromServer)
        // QS-1, QS-5: only what differs from a plain message.
        if m.priority != .normal { w.field("priority", m.priority.rawValue) }
        if !m.type.isEmpty { w.field("messageType", m.type) }
        if m.transient { w.field("transient", true) }
        // MO-1: a recalled message's tombstone (no content).
        if m.recalled { w.field("recalled", true) }
        // AU-2, AU-1: whom it was sent to, when not the whole room.
        if !m.targets.isEmpty { w.field("targets", m.targets) }
        if let e = m.targetTags {
            w.key("targetTags")
            tagExpression(e, &w)
        }
        w.endObject()
    }

    /// MO-2: `{"word", "type": "replace"|"block", "replacement"}`.
    static func sensitiveWord(_ word: SensitiveWord, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("word", word.word)
        w.field("type", word.blocks ? "block" : "replace")
        if let r = word.replacement { w.field("replacement", r) }
        w.endObject()
    }

    static func joinInfo(_ j: JoinInfo, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("memberCount", j.memberCount)
        w.field("joinTime", j.joinTime)
        if let offset = j.offset { w.field("offset", offset) }
        w.key("room")
        roomInfo(j.room, &w)
        w.endObject()
    }

    static func attributeEntry(_ e: AttributesEvent.Entry, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("key", e.key)
        w.field("value", e.value)
        w.field("owner", e.owner)
        w.field("autoDelete", e.autoDelete)
        w.endObject()
    }

    /// The `data` object of an event.
    static func eventData(_ event: ChatEvent, _ w: inout JSONWriter) {
        w.beginObject()
        switch event {
        case .roomStatus(let e):
            let status: String
            switch e.status {
            case .joining: status = "joining"
            case .joined(let info):
                status = "joined"
                w.key("joinInfo")
                joinInfo(info, &w)
            case .joinFailed(let code):
                status = "joinFailed"
                w.field("code", code.rawValue)
                // RC-1, NIM-5: false after a block, a missing or a closed room (autoLoginFailed).
                w.field("autoRejoin", code.allowsAutoRejoin)
            case .reset: status = "reset"
            case .quit: status = "quit"
            case .destroyed(let type):
                status = "destroyed"
                w.field("destroyType", type.rawValue)
            }
            w.field("status", status)
            if let nim = e.status.nimState { w.field("nimState", nim) }
            w.field("zimState", e.zimState.rawValue)
            w.field("zimEvent", e.zimEvent.rawValue)
            w.field("time", e.time)
        case .kicked(let e):
            w.field("reason", e.reason.rawValue)
            w.field("ext", e.ext)
            w.field("time", e.time)
        case .memberChanged(let e):
            w.key("members")
            w.beginArray()
            for c in e.changes {
                w.beginObject()
                w.field("userId", c.userId)
                w.field("action", c.action.rawValue)
                w.field("nickname", c.nickname)
                w.field("avatar", c.avatar)
                w.endObject()
            }
            w.endArray()
            w.field("memberCount", e.memberCount)
        case .membersSummary(let e):
            w.field("memberCount", e.memberCount)
            w.field("joined", e.joined)
            w.field("left", e.left)
            if !e.joinedIds.isEmpty { w.key("joinedIds"); w.stringArray(e.joinedIds) }
            if !e.leftIds.isEmpty { w.key("leftIds"); w.stringArray(e.leftIds) }
            w.field("time", e.time)
        case .multiLoginSync(let e):
            w.field("roomId", e.roomId)
            w.field("status", e.status)
            w.field("reason", e.reason)
            w.field("time", e.time)
            w.field("extra", e.extra)
        case .block(let e):
            w.field("roomId", e.roomId)
            w.field("operateType", e.operateType)
            w.field("durationTime", e.durationTime)
            w.field("operateTime", e.operateTime)
            w.field("userIdList", e.userIdList)
            w.field("extra", e.extra)
        case .ban(let e):
            w.field("roomId", e.roomId)
            w.field("banType", e.banType.rawValue)
            w.field("durationTime", e.durationTime)
            w.field("operateTime", e.operateTime)
            w.field("userIdList", e.userIdList)
            w.field("extra", e.extra)
        case .notification(let e):
            w.field("eventType", e.type.rawValue)
            w.key("source")
            if let s = e.source { member(s, &w) } else { w.null() }
            w.key("targets")
            w.beginArray()
            for t in e.targets { member(t, &w) }
            w.endArray()
            w.field("notifyExt", e.notifyExt)
            w.key("ext")
            notificationExt(e.ext, &w)
            w.field("time", e.time)
        case .message(let m):
            w.key("message")
            message(m, &w)
        case .messageRecalled(let e):
            w.field("roomId", e.roomId)
            w.field("messageId", e.messageId)
            w.field("sender", e.sender)
            w.field("operator", e.operatorId)
            w.field("notifyExt", e.notifyExt)
            w.field("time", e.time)
            w.key("message")
            message(e.tombstone, &w)
        case .tagsUpdated(let e):
            w.field("roomId", e.roomId)
            w.key("tags")
            w.stringArray(e.tags)
            w.field("time", e.time)
        case .attributesChanged(let e):
            w.key("updated")
            w.beginArray()
            for u in e.updated { attributeEntry(u, &w) }
            w.endArray()
            w.field("removed", e.removed)
            w.field("operator", e.operatorId)
            w.field("time", e.time)
        case .channelTypeChanged(let list):
            infoList(list, &w) { i, w in
                w.field("groupId", i.groupId)
                w.field("channelId", i.channelId)
                w.field("changeType", i.changeType.rawValue)
                w.field("time", i.time)
            }
        case .channelDisbanded(let list):
            infoList(list, &w) { i, w in
                w.field("groupId", i.groupId)
                w.field("channelId", i.channelId)
                w.field("time", i.time)
            }
        case .channelUsersKicked(let list):
            infoList(list, &w) { i, w in
                w.field("groupId", i.groupId)
                w.field("channelId", i.channelId)
                w.field("userId", i.userId)
                w.field("time", i.time)
            }
        case .conversationStatusChanged(let list):
            infoList(list, &w, statusFields)
        case .communityMessage(let m):
            communityMessageFields(m, &w)
        case .communityMessageUpdated(let e):
            w.field("change", e.change)
            w.field("operator", e.operatorId)
            w.field("time", e.time)
            w.key("message")
            communityMessage(e.message, &w)
        case .communityRulesChanged(let e):
            w.field("groupId", e.groupId)
            w.field("channelId", e.channelId)
            w.field("action", e.action)
            w.field("userIds", e.userIds)
            w.field("time", e.time)
        }
        w.endObject()
    }

    /// MO-3: a community message as the native API and events give it.
    public static func communityMessage(_ m: CommunityMessage, _ w: inout JSONWriter) {
        w.beginObject()
        communityMessageFields(m, &w)
        w.endObject()
    }

    static func communityMessageFields(_ m: CommunityMessage, _ w: inout JSONWriter) {
        w.field("messageId", m.messageId)
        w.field("groupId", m.groupId)
        w.field("channelId", m.channelId)
        w.field("fromUserId", m.fromUserId)
        w.field("type", m.type)
        w.field("content", m.content)
        w.field("sentAt", m.sentAt)
        w.field("fromServer", m.fromServer)
        if !m.stored { w.field("stored", false) }
        if m.recalled == true { w.field("recalled", true) }
        if m.version > 0 {
            w.field("version", m.version)
            if let t = m.editedAt { w.field("editedAt", t) }
        }
        if !m.targets.isEmpty { w.field("targets", m.targets) }
        if let entries = m.metadata {
            w.key("metadata")
            metadataEntries(entries, &w)
        }
    }

    /// `[{"key", "value", "updatedAt"}]`.
    public static func metadataEntries(_ entries: [CommunityMetadataEntry], _ w: inout JSONWriter) {
        w.beginArray()
        for e in entries {
            w.beginObject()
            w.field("key", e.key)
            w.field("value", e.value)
            w.field("updatedAt", e.updatedAt)
            w.endObject()
        }
        w.endArray()
    }

    /// `"infoList": [{...}, ...]`: the array shape of the ultra-group and status events (UG-5, CS-2).
    static func infoList<T>(_ items: [T], _ w: inout JSONWriter, _ fields: (T, inout JSONWriter) -> Void) {
        w.key("infoList")
        w.beginArray()
        for i in items {
            w.beginObject()
            fields(i, &w)
            w.endObject()
        }
        w.endArray()
    }

    /// CS-2 RCConversationStatusInfo fields.
    static func statusFields(_ i: ConversationStatusInfo, _ w: inout JSONWriter) {
        w.field("conversationType", i.key.type.rawValue)
        w.field("targetId", i.key.targetId)
        w.field("channelId", i.key.channelId)
        w.field("conversationStatusType", i.statusType.rawValue)
        w.field("conversationStatusValue", i.value)
        w.field("notificationLevel", i.level.rawValue)
        w.field("version", i.version)
        w.field("time", i.time)
    }

    static func groupInfo(_ g: GroupInfo, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("groupId", g.groupId)
        w.field("name", g.name)
        w.field("creator", g.creator)
        w.field("memberCount", g.memberCount)
        w.field("channelCount", g.channelCount)
        w.field("createdAt", g.createdAt)
        w.field("notificationLevel", g.notificationLevel.rawValue)
        w.endObject()
    }

    static func channelInfo(_ c: ChannelInfo, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("groupId", c.groupId)
        w.field("channelId", c.channelId)
        w.field("type", c.type.rawValue)
        w.field("isDefault", c.isDefault)
        w.field("privateMemberCount", c.privateMemberCount)
        w.field("createdAt", c.createdAt)
        w.field("notificationLevel", c.notificationLevel.rawValue)
        w.endObject()
    }

    static func conversationStatus(_ s: ConversationStatus, _ w: inout JSONWriter, view: ConversationStatusView? = nil) {
        w.beginObject()
        w.field("conversationType", s.key.type.rawValue)
        w.field("targetId", s.key.targetId)
        w.field("channelId", s.key.channelId)
        w.field("pinned", s.pinned)
        w.field("notificationLevel", s.level.rawValue)
        w.field("version", s.version)
        w.field("updatedAt", s.updatedAt)
        if let view {
            w.field("effectiveLevel", view.effectiveLevel.rawValue)
            w.field("levelSource", view.source.rawValue)
        }
        w.endObject()
    }

    static func notificationExt(_ ext: NotificationExt, _ w: inout JSONWriter) {
        switch ext {
        case .none:
            w.null()
        case .tempMute(let seconds):
            w.beginObject()
            w.field("duration", seconds)
            w.endObject()
        case .queue(let type, let key, let value):
            w.beginObject()
            w.field("changeType", type.rawValue)
            w.field("key", key)
            w.field("value", value)
            w.endObject()
        case .queueBatch(let type, let elements):
            w.beginObject()
            w.field("changeType", type.rawValue)
            w.key("elements")
            w.beginObject()
            for e in elements { w.field(e.key, e.value) }
            w.endObject()
            w.endObject()
        }
    }

    /// A whole event frame payload: `{"ev", "roomId", "epoch", "offset", "data"}`.
    public static func event(_ event: ChatEvent, roomId: String?, epoch: String?, offset: Int64?) -> [UInt8] {
        var w = JSONWriter(capacity: 384)
        w.beginObject()
        w.field("ev", event.name)
        if let roomId { w.field("roomId", roomId) } else if let r = event.roomIdForWire { w.field("roomId", r) }
        if let epoch { w.field("epoch", epoch) }
        if let offset { w.field("offset", offset) }
        w.key("data")
        eventData(event, &w)
        w.endObject()
        return w.bytes
    }
}

extension ChatEvent {
    /// The room an event is about, for events outside a room stream.
    var roomIdForWire: String? {
        switch self {
        case .roomStatus(let e): return e.roomId
        case .kicked(let e): return e.roomId
        case .memberChanged(let e): return e.roomId
        case .membersSummary(let e): return e.roomId
        case .multiLoginSync(let e): return e.roomId
        case .block(let e): return e.roomId
        case .ban(let e): return e.roomId
        case .notification(let e): return e.roomId
        case .message(let m): return m.roomId
        case .messageRecalled(let e): return e.roomId
        case .tagsUpdated(let e): return e.roomId
        case .attributesChanged(let e): return e.roomId
        case .channelTypeChanged, .channelDisbanded, .channelUsersKicked, .conversationStatusChanged, .communityMessage, .communityMessageUpdated,
             .communityRulesChanged: return nil
        }
    }
}

extension Encode {
    /// The fields of a successful answer (REST body; WebSocket `ok` object).
    public static func reply(_ reply: Reply, _ w: inout JSONWriter, alias: Int32? = nil) {
        w.beginObject()
        switch reply {
        case .done:
            break
        case .session(let userId):
            w.field("userId", userId)
        case .joined(let info):
            w.key("joinInfo")
            joinInfo(info, &w)
        case .room(let info):
            w.key("room")
            roomInfo(info, &w)
        case .rooms(let list):
            w.key("rooms")
            w.beginArray()
            for r in list { roomInfo(r, &w) }
            w.endArray()
        case .roomPage(let list, let next):
            w.key("rooms")
            w.beginArray()
            for r in list {
                w.beginObject()
                w.field("roomId", r.roomId)
                w.field("name", r.name)
                w.field("onlineCount", r.onlineUserCount)
                w.field("creator", r.creator)
                w.field("createdAt", r.createdAt)
                w.field("muted", r.muted)
                w.field("open", r.open)
                w.field("epoch", r.epoch)
                w.endObject()
            }
            w.endArray()
            w.key("nextCursor")
            if let next { w.string(RoomDirectory.cursor(after: next)) } else { w.null() }
        case .members(let list, let total):
            w.key("members")
            w.beginArray()
            for m in list { member(m, &w) }
            w.endArray()
            w.field("total", total)
        case .online(let list):
            w.key("users")
            w.beginArray()
            for p in list {
                w.beginObject()
                w.field("userId", p.userId)
                w.field("online", p.connections > 0)
                w.field("connections", p.connections)
                w.endObject()
            }
            w.endArray()
        case .presence(let list):
            w.key("users")
            w.beginArray()
            for p in list {
                w.beginObject()
                w.field("userId", p.userId)
                w.field("inRoom", p.inRoom)
                w.endObject()
            }
            w.endArray()
        case .userIds(let ids):
            w.field("userIds", ids)
        case .userExpiries(let list):
            w.key("users")
            w.beginArray()
            for u in list {
                w.beginObject()
                w.field("userId", u.userId)
                w.key("until")
                if let until = u.until { w.int(until) } else { w.null() }
                w.endObject()
            }
            w.endArray()
        case .roomIds(let ids):
            w.field("roomIds", ids)
        case .keys(let keys):
            w.field("keys", keys)
        case .attributes(let entries):
            w.key("entries")
            w.beginArray()
            for e in entries { attributeEntry(e, &w) }
            w.endArray()
        case .queue(let list):
            w.key("elements")
            w.beginArray()
            for e in list {
                w.beginObject()
                w.field("key", e.key)
                w.field("value", e.value)
                w.endObject()
            }
            w.endArray()
        case .queueElement(let key, let value):
            w.field("key", key)
            w.field("value", value)
        case .missingKeys(let keys):
            w.field("missingKeys", keys)
        case .message(let m):
            w.key("message")
            message(m, &w)
        case .messages(let list):
            w.key("messages")
            w.beginArray()
            for m in list { message(m, &w) }
            w.endArray()
        case .group(let g):
            w.key("group")
            groupInfo(g, &w)
        case .channel(let c):
            w.key("channel")
            channelInfo(c, &w)
        case .channels(let list, let total):
            w.key("channels")
            w.beginArray()
            for c in list { channelInfo(c, &w) }
            w.endArray()
            w.field("total", total)
        case .userIdsPage(let ids, let total):
            w.field("userIds", ids)
            w.field("total", total)
        case .userGroups(let groups, let total):
            w.key("userGroups")
            w.beginArray()
            for g in groups {
                w.beginObject()
                w.field("userGroupId", g.userGroupId)
                w.field("userIds", g.userIds)
                w.field("channelIds", g.channelIds)
                w.endObject()
            }
            w.endArray()
            w.field("total", total)
        case .notificationLevel(let level):
            w.field("notificationLevel", level.rawValue)
        case .conversationStatus(let view):
            w.key("status")
            conversationStatus(view.status, &w, view: view)
        case .appSettings(let settings):
            settingsFields(settings, &w)
        case .conversationStatuses(let list, let cursor, let more):
            w.key("statuses")
            w.beginArray()
            for s in list { conversationStatus(s, &w) }
            w.endArray()
            w.field("cursor", cursor)
            w.field("more", more)
        case .connections(let list):
            w.key("connections")
            w.beginArray()
            for c in list {
                w.beginObject()
                w.field("sessionId", String(c.session.raw))
                w.field("device", c.device)
                w.field("since", c.since)
                w.field("rooms", c.rooms)
                w.endObject()
            }
            w.endArray()
        case .disconnected(let count):
            w.field("disconnected", count)
        case .count(let n):
            w.field("count", n)
        case .tagCounts(let list):
            w.key("tags")
            w.beginArray()
            for t in list {
                w.beginObject()
                w.field("tag", t.tag)
                w.field("count", t.count)
                w.endObject()
            }
            w.endArray()
        case .broadcast(let id, let rooms):
            w.field("messageId", id)
            w.field("rooms", rooms)
        case .failedKeys(let keys):
            w.field("failedKeys", keys)
        case .sensitiveWords(let words):
            w.key("words")
            w.beginArray()
            for word in words { sensitiveWord(word, &w) }
            w.endArray()
        case .audit(let entries, let next):
            w.key("entries")
            w.beginArray()
            for e in entries { auditEntry(e, &w) }
            w.endArray()
            w.key("next")
            if let next { w.int(next) } else { w.null() }
        case .communityMessages(let list):
            w.key("messages")
            w.beginArray()
            for m in list { communityMessage(m, &w) }
            w.endArray()
        case .communityMessage(let m):
            w.key("message")
            communityMessage(m, &w)
        case .communityRules(let r):
            w.field("muted", r.muted)
            w.field("allowedSenders", r.allowedSenders)
            w.field("frozen", r.frozen)
        case .flag(let f):
            w.field("value", f)
        }
        // TR-5: the room's alias, in a compact WebSocket connection's join or switch answer.
        if let alias { w.field("alias", Int(alias)) }
        w.endObject()
    }

    /// MO-8: one entry of the audit trail (`GET /v1/audit`).
    public static func auditEntry(_ e: AuditEntry, _ w: inout JSONWriter) {
        w.beginObject()
        w.field("id", e.id)
        w.field("time", e.time)
        w.key("actor")
        w.beginObject()
        w.field("type", e.actor.kind.rawValue)
        w.field("userId", e.actor.userId)
        w.endObject()
        w.field("surface", e.surface.rawValue)
        w.field("action", e.action.rawValue)
        w.field("roomId", e.roomId)
        w.field("targets", e.targets)
        w.field("targetCount", e.targetCount)
        w.fieldIfPresent("messageId", e.messageId)
        if let d = e.durationMs { w.field("durationMs", d) }
        w.field("detail", e.detail)
        w.endObject()
    }

    public static func replyBytes(_ reply: Reply) -> [UInt8] {
        var w = JSONWriter()
        Encode.reply(reply, &w)
        return w.bytes
    }
}

// MARK: WebSocket frames other than events

extension Encode {
    /// `{"id", "ok"}` or `{"id", "error"}`: the answer to a command.
    /// `alias` (TR-5): the alias of the room a successful join or switch answer is about, for a
    /// compact WebSocket connection (the last member of `ok`).
    public static func replyFrame(id: Int?, _ result: Result<Reply, ChatError>, alias: Int32? = nil) -> [UInt8] {
        JSONWriter.object { w in
            if let id { w.field("id", id) } else { w.key("id"); w.null() }
            switch result {
            case .success(let reply):
                w.key("ok")
                Encode.reply(reply, &w, alias: alias)
            case .failure(let e):
                w.key("error")
                w.raw(ErrorTable.body(e))
            }
        }
    }

    /// `{"id", "error"}` for a gateway-level refusal.
    public static func errorFrame(id: Int?, _ error: GatewayError) -> [UInt8] {
        JSONWriter.object { w in
            if let id { w.field("id", id) } else { w.key("id"); w.null() }
            w.key("error")
            w.raw(ErrorTable.body(error))
        }
    }

    /// The answer to `connect`.
    /// BX-3: the answer to `room.observe`.
    /// TR-5: `alias` for a compact WebSocket connection.
    public static func observed(id: Int?, roomId: String, epoch: String, alias: Int32? = nil) -> [UInt8] {
        JSONWriter.object { w in
            if let id { w.field("id", id) } else { w.key("id"); w.null() }
            w.key("ok")
            w.beginObject()
            w.field("roomId", roomId)
            w.field("epoch", epoch)
            if let alias { w.field("alias", Int(alias)) }
            w.endObject()
        }
    }

    public static func connected(id: Int?, sessionId: String, userId: String, anonymous: Bool, stream: String, expiresAt: Int64?) -> [UInt8] {
        JSONWriter.object { w in
            if let id { w.field("id", id) } else { w.key("id"); w.null() }
            w.key("ok")
            w.beginObject()
            w.field("sessionId", sessionId)
            w.field("userId", userId)
            w.field("anonymous", anonymous)
            w.field("stream", stream)
            w.key("expiresAt")
            if let expiresAt { w.int(expiresAt) } else { w.null() }
            w.endObject()
        }
    }

    /// `room.resume` (BX-1): whether the missed events were replayed.
    /// QS-3: `room.gap`, in stream order: what of the room this connection did not get because it
    /// read slower than the room. `fromOffset`/`toOffset`: the stream offsets the lost events
    /// span (absent when only transient messages, which have none, were lost); `dropped`: how
    /// many of each class.
    public static func gap(roomId: String, epoch: String, first: Int64, last: Int64, normal: Int, low: Int, transient: Int) -> [UInt8] {
        JSONWriter.object { w in
            w.field("ev", "room.gap")
            w.field("roomId", roomId)
            w.field("epoch", epoch)
            w.key("data")
            w.beginObject()
            if first > 0 {
                w.field("fromOffset", first)
                w.field("toOffset", last)
            }
            w.key("dropped")
            w.beginObject()
            w.field("normal", normal)
            w.field("low", low)
            w.field("transient", transient)
            w.endObject()
            w.endObject()
        }
    }

    public static func resumeResult(roomId: String, resumed: Bool, replayed: Int, reason: String?) -> [UInt8] {
        JSONWriter.object { w in
            w.field("ev", "room.resume")
            w.field("roomId", roomId)
            w.key("data")
            w.beginObject()
            w.field("resumed", resumed)
            w.field("replayed", replayed)
            w.fieldIfPresent("reason", reason)
            w.endObject()
        }
    }

    /// `token.expired`: refresh within the grace or be closed with 4002.
    public static func tokenExpired(graceSeconds: Int64) -> [UInt8] {
        JSONWriter.object { w in
            w.field("ev", "token.expired")
            w.key("data")
            w.beginObject()
            w.field("graceSeconds", graceSeconds)
            w.endObject()
        }
    }

    /// `conversation.statusSynced` (CS-3): the connect-time sync is complete.
    public static func statusSynced(code: Int, cursor: Int64) -> [UInt8] {
        JSONWriter.object { w in
            w.field("ev", "conversation.statusSynced")
            w.key("data")
            w.beginObject()
            w.field("code", code)
            w.field("cursor", cursor)
            w.endObject()
        }
    }

    /// App settings (`GET` and `PATCH /v1/settings`), as fields of the open object.
    static func settingsFields(_ s: AppSettings, _ w: inout JSONWriter) {
            w.field("memberChangeEvents", s.memberChangeEvents)
            w.field("multipleRoomsPerUser", s.multipleRoomsPerUser)
            w.field("enterExitNotifications", s.enterExitNotifications)
            w.field("maxRoomsPerUser", s.maxRoomsPerUser)
            w.field("maxRooms", s.maxRooms)
            w.field("historyRetentionSeconds", s.historyRetentionMilliseconds / 1000)
            w.field("historyLimitPerRoom", s.historyLimitPerRoom)
            w.field("maxMessageBytes", s.maxMessageBytes)
            w.field("defaultQueueLimit", s.defaultQueueLimit)
            w.field("notificationLevel", s.notificationLevel.rawValue)
            w.key("allowedOrigins")
            if let origins = s.allowedOrigins { w.stringArray(origins) } else { w.null() }
            w.field("roomCreatesPerUserPerMinute", s.roomCreatesPerUserPerMinute)
            w.field("historyLimitPerApp", s.historyLimitPerApp)
            w.field("restCallsPerSecond", s.restCallsPerSecond)
            w.field("clientMessagesPerSecond", s.clientMessagesPerSecond)
            w.field("sendsPerUserPerSecond", s.sendsPerUserPerSecond)
            w.field("roomMessagesPerSecond", s.roomMessagesPerSecond)
            w.field("highPriorityReservePercent", s.highPriorityReservePercent)
            w.key("lowPriorityMessageTypes")
            w.stringArray(s.lowPriorityMessageTypes)
            w.key("protectedMessageTypes")
            w.stringArray(s.protectedMessageTypes)
            w.key("prioritySenders")
            w.stringArray(s.prioritySenders)
            w.field("transientWebhooks", s.transientWebhooks)
            w.field("recallWindowSeconds", s.recallWindowSeconds)
            w.field("sensitiveWordsOnServerSends", s.sensitiveWordsOnServerSends)
            w.field("sensitiveWordCount", s.sensitiveWords.count)
            w.field("memberEventsThreshold", s.memberEventsThreshold)
            w.field("memberSummaryIntervalMs", s.memberSummaryIntervalMilliseconds)
            w.key("beforeSend")
            if let b = s.beforeSend {
                w.beginObject()
                w.field("url", b.url)
                w.field("timeoutMs", b.timeoutMilliseconds)
                w.field("failOpen", b.failOpen)
                w.field("bypassServerMessages", b.bypassServerMessages)
                w.field("signing", b.signing)
                w.endObject()
            } else {
                w.null()
            }
    }
}

extension JSONWriter {
    public mutating func stringArray(_ v: [String]) {
        beginArray()
        for s in v { string(s) }
        endArray()
    }
}
