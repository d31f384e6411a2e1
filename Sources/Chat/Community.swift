/// Messages in an ultra group's channels (Nexconn's community channels; SPEC MO-3, MO-5, MO-6):
/// the app server sends them (to up to `Limits.maxCommunitySendGroups` groups at once) and
/// members send them from their clients (`group.send`); they reach the online members who can
/// see the channel (public: every member; private: its list), or only the addressed ones. A
/// channel keeps its newest stored messages (`Limits.maxCommunityHistoryPerChannel`, at most
/// `Limits.maxCommunityHistoryBytesPerChannel` bytes of content), each with its latest edit and
/// its metadata (RongCloud's message expansion: key/value entries with the time each was set).
///
/// Moderation (MO-5): per channel, or for the whole group (channel ""), a mute list, a list of
/// allowed senders and a freeze. A member's client send is refused (23408) when the member is
/// muted in the group or the channel, or when either is frozen and the member is on neither
/// allowed list. The app server's sends are not checked: as on the vendors' server APIs, the app
/// server speaks for anyone. Muted and allowed users are told (`group.moderationChanged`), a
/// freeze tells everyone who can see the channel.

/// One metadata entry of a message (Nexconn `metadata`, RongCloud `extraContent`).
public struct CommunityMetadataEntry: Codable, Equatable, Sendable {
    public var key: String
    public var value: String
    /// When it was last set (ms).
    public var updatedAt: Int64

    public init(key: String, value: String, updatedAt: Int64) {
        self.key = key
        self.value = value
        self.updatedAt = updatedAt
    }
}

/// A message of an ultra group's channel.
public struct CommunityMessage: Codable, Equatable, Sendable {
    public var messageId: String
    public var groupId: String
    public var channelId: String
    public var fromUserId: String
    public var type: String
    public var content: String
    public var sentAt: Int64
    /// Edits so far (0: as sent) and when the last one was made.
    public var version: Int = 0
    public var editedAt: Int64?
    /// nil: the message was sent without metadata (`hasMetadata` false) and takes none;
    /// otherwise its entries, sorted by key.
    public var metadata: [CommunityMetadataEntry]?
    /// Only these members receive it (and see it in history); empty: everyone who sees the channel.
    public var targets: [String] = []
    public var fromServer: Bool
    /// Kept in the channel's history (`shouldPersist`, `isPersisted`).
    public var stored: Bool
    /// MO-1: recalled; its tombstone keeps its place (no content, no metadata).
    public var recalled: Bool?

    public init(messageId: String, groupId: String, channelId: String, fromUserId: String, type: String, content: String, sentAt: Int64,
                metadata: [CommunityMetadataEntry]?, targets: [String], fromServer: Bool, stored: Bool) {
        self.messageId = messageId
        self.groupId = groupId
        self.channelId = channelId
        self.fromUserId = fromUserId
        self.type = type
        self.content = content
        self.sentAt = sentAt
        self.metadata = metadata
        self.targets = targets
        self.fromServer = fromServer
        self.stored = stored
    }

    /// Whether `user` may see it (given that the user sees its channel).
    public func isVisible(to user: String) -> Bool { targets.isEmpty || user == fromUserId || targets.contains(user) }

    var bytes: Int { content.utf8.count + (metadata ?? []).reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } }
}

/// What a send gives (the id and time come from the domain).
public struct CommunityDraft: Codable, Equatable, Sendable {
    public var fromUserId: String
    public var type: String
    public var content: String
    public var stored: Bool
    public var targets: [String]
    /// nil: no metadata (and none can be set later); otherwise the initial entries.
    public var metadata: [String: String]?

    public init(fromUserId: String, type: String, content: String, stored: Bool = true, targets: [String] = [], metadata: [String: String]? = nil) {
        self.fromUserId = fromUserId
        self.type = type
        self.content = content
        self.stored = stored
        self.targets = targets
        self.metadata = metadata
    }
}

/// MO-5 lists.
public enum CommunityList: String, Codable, Equatable, Sendable, CaseIterable {
    /// May not send.
    case muted
    /// May send while the channel (or group) is frozen.
    case allowedSenders
}

/// MO-5: one channel's (or the whole group's) controls.
public struct CommunityRules: Codable, Equatable, Sendable {
    public var muted: [String] = []
    public var allowedSenders: [String] = []
    public var frozen = false

    public init(muted: [String] = [], allowedSenders: [String] = [], frozen: Bool = false) {
        self.muted = muted
        self.allowedSenders = allowedSenders
        self.frozen = frozen
    }

    public var isEmpty: Bool { muted.isEmpty && allowedSenders.isEmpty && !frozen }

    public func list(_ l: CommunityList) -> [String] { l == .muted ? muted : allowedSenders }
    mutating func setList(_ l: CommunityList, _ users: [String]) {
        if l == .muted { muted = users } else { allowedSenders = users }
    }
}

/// A change to an ultra group's messages or controls (one command: `Command.community`).
public enum CommunityChange: Codable, Equatable, Sendable {
    /// MO-3: new content for a stored message; only its sender (`fromUserId`) may edit it.
    case edit(channelId: String, messageId: String, fromUserId: String, content: String)
    /// MO-3: set metadata entries (a message sent with metadata only).
    case setMetadata(channelId: String, messageId: String, userId: String, [String: String])
    case removeMetadata(channelId: String, messageId: String, userId: String, keys: [String])
    /// MO-5: channel "" is the whole group.
    case editList(CommunityList, channelId: String, add: Bool, users: [String])
    case setFrozen(channelId: String, Bool)
    /// MO-1: the app server recalls a stored message; `fromUserId` (and `sentAt` when given) must
    /// describe it. Its members are told (`message.updated`, change `recalled`) and history keeps
    /// its tombstone.
    case recall(channelId: String, messageId: String, fromUserId: String, sentAt: Int64?)
}

/// Which messages a history query returns (MO-6): those of one channel (or every channel) the
/// viewer may see, with `sentAt` between `oldest` and `newest`, up to `limit`.
public struct CommunityHistoryQuery: Equatable, Sendable {
    public var channelId: String?
    /// Only what this member may see (nil: the app server sees everything).
    public var viewer: String?
    public var fromUserId: String?
    public var oldest: Int64
    public var newest: Int64
    public var includeOldest: Bool
    public var includeNewest: Bool
    public var limit: Int
    public var newestFirst: Bool

    public init(channelId: String?, viewer: String?, fromUserId: String? = nil, oldest: Int64, newest: Int64, includeOldest: Bool = true,
                includeNewest: Bool = true, limit: Int, newestFirst: Bool) {
        self.channelId = channelId
        self.viewer = viewer
        self.fromUserId = fromUserId
        self.oldest = oldest
        self.newest = newest
        self.includeOldest = includeOldest
        self.includeNewest = includeNewest
        self.limit = limit
        self.newestFirst = newestFirst
    }
}

/// MO-3 event: a message's content or metadata changed.
public struct CommunityUpdateEvent: Equatable, Sendable {
    public var message: CommunityMessage
    /// "content" (an edit), "metadata" or "recalled".
    public var change: String
    public var operatorId: String
    public var time: Int64
}

/// MO-5 event: a list or a freeze changed.
public struct CommunityRulesEvent: Equatable, Sendable {
    public var groupId: String
    /// "" for the whole group.
    public var channelId: String
    /// muteAdd, muteRemove, allowedSenderAdd, allowedSenderRemove, freeze, unfreeze.
    public var action: String
    public var userIds: [String]
    public var time: Int64
}

/// An ultra group's messages and controls.
final class CommunityState {
    /// Each channel's stored messages, oldest first.
    @exclusivity(unchecked) var history: [String: [CommunityMessage]] = [:]
    @exclusivity(unchecked) var historyBytes: [String: Int] = [:]
    /// Controls by channel ("" for the whole group).
    @exclusivity(unchecked) var rules: [String: CommunityRules] = [:]

    var isEmpty: Bool { history.isEmpty && rules.isEmpty }
}

extension ChatDomain {
    // MARK: Sending

    /// Who sees `channel` of `g`: every member when public, its list when private.
    func communityAudience(_ g: UltraGroup, _ channel: UltraChannel) -> [String] {
        g.members.all.filter { g.canSee($0, channel) }
    }

    /// Sends one message to `channelId` of each group (1…`Limits.maxCommunitySendGroups`), all or
    /// none. → `Reply.communityMessages` (one per group, in the order given).
    func sendCommunityMessage(_ appKey: String, _ groupIds: [String], _ channelId: String, _ draft: CommunityDraft, _ actor: Actor,
                              _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        var draft = draft
        if let sid = actor.session {
            let s = try session(sid)
            draft.fromUserId = s.userId
        }
        guard !groupIds.isEmpty else { throw .invalid("groupIds", "at least one ultra group is required") }
        guard groupIds.count <= Limits.maxCommunitySendGroups else {
            throw .invalid("groupIds", "at most \(Limits.maxCommunitySendGroups) ultra groups per send")
        }
        guard Set(groupIds).count == groupIds.count else { throw .invalid("groupIds", "groupIds has duplicates") }
        try Validate.userId(draft.fromUserId, field: "fromUserId")
        guard !draft.type.isEmpty else { throw .invalid("type", "the message type is required") }
        try Validate.maxBytes(draft.type, SettingsLimits.maxMessageTypeBytes, field: "type")
        guard !draft.content.isEmpty else { throw .invalid("content", "content is required") }
        try Validate.maxBytes(draft.content, app.settings.maxMessageBytes, field: "content")
        if !draft.targets.isEmpty {
            try Validate.userIds(draft.targets, field: "targets", max: Limits.maxMessageTargets)
            guard groupIds.count == 1 else { throw .invalid("targets", "a message for some members goes to one ultra group") }
        }
        // MO-2: a member's text is screened for the app's sensitive words, and the app server's
        // when the app asks (as in rooms).
        if Self.isText(draft.type) && (actor.session != nil || app.settings.sensitiveWordsOnServerSends) {
            draft.content = try screen(app, draft.content)
        }
        var entries: [CommunityMetadataEntry]?
        if let m = draft.metadata { entries = try metadataEntries(m, existing: [], now: now) }
        var targets: [(UltraGroup, UltraChannel)] = []
        for id in groupIds {
            let g = try group(app, id)
            let c = try channel(g, channelId)
            if let sid = actor.session { try checkClientSend(g, c, user: draft.fromUserId, session: sid, now: now) }
            targets.append((g, c))
        }
        var sent: [CommunityMessage] = []
        for (g, c) in targets {
            let message = CommunityMessage(messageId: makeID(), groupId: g.id, channelId: c.id, fromUserId: draft.fromUserId, type: draft.type,
                                           content: draft.content, sentAt: now, metadata: entries, targets: draft.targets,
                                           fromServer: actor.session == nil, stored: draft.stored)
            if draft.stored { store(message, in: g, app, &out) }
            var audience = communityAudience(g, c).filter { message.isVisible(to: $0) }
            // A client's own send is its answer, not an event (as in rooms).
            if actor.session != nil { audience.removeAll { $0 == message.fromUserId } }
            if !audience.isEmpty { out.deliver(.communityMessage(message), to: .users(app: appKey, audience)) }
            if draft.stored || app.settings.transientWebhooks {
                var details: KeyValueList = ["groupId": g.id, "channelId": c.id, "messageId": message.messageId, "type": message.type,
                                             "content": message.content, "fromServer": message.fromServer ? "true" : "false"]
                if !message.targets.isEmpty { details.pairs.append(.init(key: "targets", value: message.targets.joined(separator: ","))) }
                if !draft.stored { details.pairs.append(.init(key: "stored", value: "false")) }
                out.webhooks.append(WebhookRecord(app: appKey, type: .groupMessageSent, roomId: "", userIds: [message.fromUserId], time: now,
                                                  details: details))
            }
            sent.append(message)
        }
        return .communityMessages(sent)
    }

    /// Text messages (native `text`, the vendors' `RC:TxtMsg`) are the ones screened.
    static func isText(_ type: String) -> Bool { type == "text" || type == "RC:TxtMsg" }

    /// MO-5: a member's client send: a member who sees the channel, not muted, not held by a freeze.
    private func checkClientSend(_ g: UltraGroup, _ c: UltraChannel, user: String, session: SessionID, now: Int64) throws(ChatError) {
        guard g.canSee(user, c) else {
            throw ChatError(.notGroupMember, "\(user) is not a member of ultra group \(g.id) who sees channel \(c.id)", field: "channelId")
        }
        let state = g.community
        let group = state.rules[""] ?? CommunityRules()
        let channel = state.rules[c.id] ?? CommunityRules()
        if group.muted.contains(user) || channel.muted.contains(user) {
            throw ChatError(.muted, "\(user) is muted in ultra group \(g.id)\(channel.muted.contains(user) ? " channel \(c.id)" : "")", field: "channelId")
        }
        if (group.frozen || channel.frozen) && !group.allowedSenders.contains(user) && !channel.allowedSenders.contains(user) {
            throw ChatError(.muted, "ultra group \(g.id)\(channel.frozen ? " channel \(c.id)" : "") is frozen", field: "channelId")
        }
    }

    private func store(_ message: CommunityMessage, in g: UltraGroup, _ app: AppState, _ out: inout Outcome) {
        let appKey = app.key
        let state = g.community
        var list = state.history[message.channelId] ?? []
        let before = state.historyBytes[message.channelId] ?? 0
        var bytes = before + message.bytes
        list.append(message)
        var evicted = 0
        while list.count - evicted > Limits.maxCommunityHistoryPerChannel
            || (bytes > Limits.maxCommunityHistoryBytesPerChannel && list.count - evicted > 1) {
            bytes -= list[evicted].bytes
            out.mutations.append(.deleteCommunityMessage(app: appKey, groupId: g.id, channelId: message.channelId, messageId: list[evicted].messageId))
            evicted += 1
        }
        if evicted > 0 { list.removeFirst(evicted) }
        state.history[message.channelId] = list
        state.historyBytes[message.channelId] = bytes
        app.communityBytes += bytes - before
        out.mutations.append(.putCommunityMessage(app: appKey, message))
        keepAppBound(app, sparing: message.messageId, &out)
    }

    /// Past `Limits.maxCommunityHistoryBytesPerApp`, the app's oldest stored community messages go
    /// (the oldest `sentAt`; ties by group, then channel), never `sparing`.
    func keepAppBound(_ app: AppState, sparing: String, _ out: inout Outcome) {
        while app.communityBytes > communityBytesPerApp {
            // The minimum by (sentAt, group, channel) is the same whatever order the dictionaries
            // are walked in, so every node evicts alike.
            var oldest: (g: UltraGroup, channel: String, at: Int, sentAt: Int64)?
            for g in app.groups.values {
                for (channel, list) in g.community.history {
                    guard let i = list.firstIndex(where: { $0.messageId != sparing }) else { continue }
                    if let o = oldest, (o.sentAt, o.g.id, o.channel) <= (list[i].sentAt, g.id, channel) { continue }
                    oldest = (g, channel, i, list[i].sentAt)
                }
            }
            guard let o = oldest else { return }
            let state = o.g.community
            let m = state.history[o.channel]!.remove(at: o.at)
            state.historyBytes[o.channel, default: 0] -= m.bytes
            app.communityBytes -= m.bytes
            out.mutations.append(.deleteCommunityMessage(app: app.key, groupId: o.g.id, channelId: o.channel, messageId: m.messageId))
        }
    }

    /// Entries of `changes` merged into `existing` (sorted by key), all checked first.
    private func metadataEntries(_ changes: [String: String], existing: [CommunityMetadataEntry], now: Int64,
                                 field: String = "metadata") throws(ChatError) -> [CommunityMetadataEntry] {
        guard changes.count <= Limits.maxMetadataEntriesPerCall else {
            throw .invalid(field, "at most \(Limits.maxMetadataEntriesPerCall) metadata entries per call")
        }
        var byKey: [String: CommunityMetadataEntry] = [:]
        for e in existing { byKey[e.key] = e }
        for k in changes.keys.sorted() {
            let v = changes[k]!
            try Self.metadataKey(k, field: field)
            try Validate.maxBytes(v, Limits.maxMetadataValueBytes, field: field)
            byKey[k] = CommunityMetadataEntry(key: k, value: v, updatedAt: now)
        }
        guard byKey.count <= Limits.maxMetadataEntriesPerMessage else {
            throw ChatError(.limitExceeded, "a message holds at most \(Limits.maxMetadataEntriesPerMessage) metadata entries", field: field)
        }
        return byKey.values.sorted { $0.key < $1.key }
    }

    /// Keys of 1…`Limits.maxMetadataKeyChars` characters from `A-Z a-z 0-9 + = - _`.
    static func metadataKey(_ k: String, field: String) throws(ChatError) {
        guard !k.isEmpty, k.utf8.count <= Limits.maxMetadataKeyChars else {
            throw .invalid(field, "metadata keys are 1 to \(Limits.maxMetadataKeyChars) characters")
        }
        for b in k.utf8 {
            let ok = (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || b == 0x2B || b == 0x3D || b == 0x2D || b == 0x5F
            guard ok else { throw .invalid(field, "metadata key '\(k)' may only contain letters, digits, + = - _") }
        }
    }

    // MARK: Edits, metadata, controls

    func changeCommunity(_ appKey: String, _ groupId: String, _ change: CommunityChange, _ actor: Actor, _ now: Int64,
                         _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let g = try group(app, groupId)
        switch change {
        case .edit(let channelId, let messageId, let from, let content):
            try Validate.userId(from, field: "fromUserId")
            guard !content.isEmpty else { throw .invalid("content", "content is required") }
            try Validate.maxBytes(content, app.settings.maxMessageBytes, field: "content")
            var (c, index, message) = try storedMessage(g, channelId, messageId)
            guard message.fromUserId == from else {
                throw ChatError(.permissionDenied, "only the sender of message \(messageId) may edit it", field: "fromUserId")
            }
            guard message.recalled != true else { throw ChatError(.notFound, "message \(messageId) was recalled", field: "messageId") }
            message.content = content
            message.version += 1
            message.editedAt = now
            return replace(message, at: index, in: g, c, change: "content", operatorId: from, app, now, &out)
        case .setMetadata(let channelId, let messageId, let user, let entries):
            try Validate.userId(user)
            guard !entries.isEmpty else { throw .invalid("metadata", "at least one metadata entry is required") }
            var (c, index, message) = try storedMessage(g, channelId, messageId)
            guard message.recalled != true else { throw ChatError(.notFound, "message \(messageId) was recalled", field: "messageId") }
            guard let existing = message.metadata else {
                throw ChatError(.invalidParameter, "message \(messageId) was sent without metadata (hasMetadata)", field: "messageId")
            }
            message.metadata = try metadataEntries(entries, existing: existing, now: now)
            return replace(message, at: index, in: g, c, change: "metadata", operatorId: user, app, now, &out)
        case .removeMetadata(let channelId, let messageId, let user, let keys):
            try Validate.userId(user)
            guard !keys.isEmpty else { throw .invalid("keys", "at least one key is required") }
            guard keys.count <= Limits.maxMetadataEntriesPerCall else { throw .invalid("keys", "at most \(Limits.maxMetadataEntriesPerCall) keys per call") }
            for k in keys { try Self.metadataKey(k, field: "keys") }
            var (c, index, message) = try storedMessage(g, channelId, messageId)
            guard message.recalled != true else { throw ChatError(.notFound, "message \(messageId) was recalled", field: "messageId") }
            guard let existing = message.metadata else {
                throw ChatError(.invalidParameter, "message \(messageId) was sent without metadata (hasMetadata)", field: "messageId")
            }
            let kept = existing.filter { !keys.contains($0.key) }
            guard kept.count != existing.count else { return .communityMessage(message) }
            message.metadata = kept
            return replace(message, at: index, in: g, c, change: "metadata", operatorId: user, app, now, &out)
        case .recall(let channelId, let messageId, let from, let sentAt):
            try Validate.userId(from, field: "fromUserId")
            var (c, index, message) = try storedMessage(g, channelId, messageId)
            guard message.recalled != true else { throw ChatError(.notFound, "message \(messageId) was already recalled", field: "messageId") }
            guard message.fromUserId == from else {
                throw ChatError(.invalidParameter, "message \(messageId) was not sent by \(from)", field: "fromUserId")
            }
            if let sentAt, sentAt != message.sentAt {
                throw ChatError(.invalidParameter, "message \(messageId) was not sent at \(sentAt)", field: "sentTime")
            }
            message.content = ""
            message.metadata = message.metadata == nil ? nil : []
            message.recalled = true
            let reply = replace(message, at: index, in: g, c, change: "recalled", operatorId: "", app, now, &out)
            audit(app, .recall, by: actor, roomId: g.id, targets: [message.fromUserId], messageId: messageId, detail: "channel \(c.id)", now: now, &out)
            return reply
        case .editList(let list, let channelId, let add, let users):
            try Validate.userIds(users, max: Limits.maxUsersPerCall)
            let c = try rulesChannel(g, channelId)
            var rules = g.community.rules[channelId] ?? CommunityRules()
            var current = rules.list(list)
            let changed: [String]
            if add {
                changed = users.filter { !current.contains($0) }
                guard current.count + changed.count <= Limits.maxCommunityListUsers else {
                    throw ChatError(.limitExceeded, "a \(list.rawValue) list holds at most \(Limits.maxCommunityListUsers) users", field: "userIds")
                }
                current.append(contentsOf: changed)
            } else {
                changed = users.filter { current.contains($0) }
                current.removeAll { changed.contains($0) }
            }
            guard !changed.isEmpty else { return .userIds(current) }
            rules.setList(list, current)
            putRules(rules, g, channelId, appKey, &out)
            let action = list == .muted ? (add ? "muteAdd" : "muteRemove") : (add ? "allowedSenderAdd" : "allowedSenderRemove")
            let event = CommunityRulesEvent(groupId: g.id, channelId: channelId, action: action, userIds: changed, time: now)
            let told = changed.filter { u in c.map { g.canSee(u, $0) } ?? g.members.contains(u) }
            if !told.isEmpty { out.deliver(.communityRulesChanged(event), to: .users(app: appKey, told)) }
            out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: "", userIds: changed, time: now,
                                              details: ["action": action, "groupId": g.id, "channelId": channelId]))
            let auditAction: AuditAction = list == .muted ? (add ? .mute : .unmute) : (add ? .allowlistAdd : .allowlistRemove)
            audit(app, auditAction, by: actor, roomId: g.id, targets: changed, detail: channelId.isEmpty ? "ultra group" : "channel \(channelId)",
                  now: now, &out)
            return .userIds(current)
        case .setFrozen(let channelId, let frozen):
            let c = try rulesChannel(g, channelId)
            var rules = g.community.rules[channelId] ?? CommunityRules()
            guard rules.frozen != frozen else { return .flag(frozen) }
            rules.frozen = frozen
            putRules(rules, g, channelId, appKey, &out)
            let audience = c.map { communityAudience(g, $0) } ?? g.members.all
            if !audience.isEmpty {
                out.deliver(.communityRulesChanged(CommunityRulesEvent(groupId: g.id, channelId: channelId, action: frozen ? "freeze" : "unfreeze",
                                                                       userIds: [], time: now)), to: .users(app: appKey, audience))
            }
            out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: "", time: now,
                                              details: ["action": frozen ? "freeze" : "unfreeze", "groupId": g.id, "channelId": channelId]))
            audit(app, frozen ? .roomMute : .roomUnmute, by: actor, roomId: g.id, detail: channelId.isEmpty ? "ultra group" : "channel \(channelId)",
                  now: now, &out)
            return .flag(frozen)
        }
    }

    /// The channel a control names: nil for "" (the whole group).
    private func rulesChannel(_ g: UltraGroup, _ channelId: String) throws(ChatError) -> UltraChannel? {
        channelId.isEmpty ? nil : try channel(g, channelId)
    }

    private func putRules(_ rules: CommunityRules, _ g: UltraGroup, _ channelId: String, _ appKey: String, _ out: inout Outcome) {
        let state = g.community
        state.rules[channelId] = rules.isEmpty ? nil : rules
        out.mutations.append(.putCommunityRules(app: appKey, groupId: g.id, channelId: channelId, rules))
    }

    private func storedMessage(_ g: UltraGroup, _ channelId: String, _ messageId: String) throws(ChatError) -> (UltraChannel, Int, CommunityMessage) {
        let c = try channel(g, channelId)
        guard let list = g.community.history[c.id], let i = list.lastIndex(where: { $0.messageId == messageId }) else {
            try Validate.identifier(messageId, field: "messageId", maxBytes: Limits.maxMessageIdBytes)
            throw ChatError(.notFound, "message \(messageId) is not among the stored messages of channel \(c.id)", field: "messageId")
        }
        return (c, i, list[i])
    }

    private func replace(_ message: CommunityMessage, at index: Int, in g: UltraGroup, _ c: UltraChannel, change: String, operatorId: String,
                         _ app: AppState, _ now: Int64, _ out: inout Outcome) -> Reply {
        let appKey = app.key
        let state = g.community
        var list = state.history[c.id]!
        let before = state.historyBytes[c.id] ?? 0
        var bytes = before + message.bytes - list[index].bytes
        list[index] = message
        // A message grown by an edit or metadata keeps the channel within its bytes: the oldest
        // other messages go, as a send makes them go.
        var evicted: Set<Int> = []
        var i = 0
        while bytes > Limits.maxCommunityHistoryBytesPerChannel && i < list.count {
            if i != index {
                bytes -= list[i].bytes
                evicted.insert(i)
                out.mutations.append(.deleteCommunityMessage(app: appKey, groupId: g.id, channelId: c.id, messageId: list[i].messageId))
            }
            i += 1
        }
        if !evicted.isEmpty { list = list.enumerated().filter { !evicted.contains($0.offset) }.map(\.element) }
        state.history[c.id] = list
        state.historyBytes[c.id] = bytes
        app.communityBytes += bytes - before
        out.mutations.append(.putCommunityMessage(app: appKey, message))
        keepAppBound(app, sparing: message.messageId, &out)
        let audience = communityAudience(g, c).filter { message.isVisible(to: $0) }
        if !audience.isEmpty {
            out.deliver(.communityMessageUpdated(CommunityUpdateEvent(message: message, change: change, operatorId: operatorId, time: now)),
                        to: .users(app: appKey, audience))
        }
        var details: KeyValueList = ["groupId": g.id, "channelId": c.id, "messageId": message.messageId, "change": change, "operator": operatorId,
                                     "version": String(message.version)]
        if change == "content" { details.pairs.append(.init(key: "content", value: message.content)) }
        out.webhooks.append(WebhookRecord(app: appKey, type: .groupMessageUpdated, roomId: "", userIds: [message.fromUserId], time: now,
                                          details: details))
        return .communityMessage(message)
    }

    // MARK: The group's life

    /// A channel deleted: its messages and controls go with it.
    func dropCommunityChannel(_ appKey: String, _ g: UltraGroup, _ channelId: String, _ out: inout Outcome) {
        let state = g.community
        apps[appKey]?.communityBytes -= state.historyBytes[channelId] ?? 0
        let hadHistory = state.history.removeValue(forKey: channelId) != nil
        let hadRules = state.rules.removeValue(forKey: channelId) != nil
        state.historyBytes[channelId] = nil
        if hadHistory || hadRules { out.mutations.append(.deleteCommunityChannel(app: appKey, groupId: g.id, channelId: channelId)) }
    }

    /// Users who left the group leave its lists.
    func dropCommunityUsers(_ appKey: String, _ g: UltraGroup, _ users: [String], _ out: inout Outcome) {
        let state = g.community
        guard !state.rules.isEmpty else { return }
        for (channelId, var rules) in state.rules.sorted(by: { $0.key < $1.key }) {
            let before = rules
            rules.muted.removeAll { users.contains($0) }
            rules.allowedSenders.removeAll { users.contains($0) }
            if rules != before { putRules(rules, g, channelId, appKey, &out) }
        }
    }

    // MARK: Queries

    func answerCommunityQuery(_ q: Query) throws(ChatError) -> Reply? {
        switch q {
        case .communityHistory(let appKey, let groupId, let h):
            let g = try group(try app(appKey), groupId)
            guard h.limit >= 1 && h.limit <= Limits.maxPageSize else { throw .invalid("pageSize", "pageSize must be between 1 and \(Limits.maxPageSize)") }
            guard h.oldest <= h.newest else { throw .invalid("endAt", "the range's end must not be after its start") }
            guard h.newest - h.oldest <= Limits.maxCommunityHistorySpanMilliseconds else {
                throw .invalid("startAt", "the range spans at most \(Limits.maxCommunityHistorySpanMilliseconds / 86_400_000) days")
            }
            if let v = h.viewer {
                try Validate.userId(v)
                guard g.members.contains(v) else { throw ChatError(.notGroupMember, "\(v) is not a member of ultra group \(groupId)", field: "userId") }
            }
            var channels: [UltraChannel]
            if let id = h.channelId { channels = [try channel(g, id)] } else { channels = g.channelOrder.all.compactMap { g.channels[$0] } }
            if let v = h.viewer { channels = channels.filter { g.canSee(v, $0) } }
            let state = g.community
            var found: [CommunityMessage] = []
            for c in channels {
                for m in state.history[c.id] ?? [] {
                    guard m.sentAt > h.oldest || (h.includeOldest && m.sentAt == h.oldest) else { continue }
                    guard m.sentAt < h.newest || (h.includeNewest && m.sentAt == h.newest) else { continue }
                    if let v = h.viewer, !m.isVisible(to: v) { continue }
                    if let f = h.fromUserId, m.fromUserId != f { continue }
                    found.append(m)
                }
            }
            // Time order; equal times keep the channels' order (stable sort).
            found = found.enumerated().sorted { a, b in a.element.sentAt != b.element.sentAt ? a.element.sentAt < b.element.sentAt : a.offset < b.offset }
                .map(\.element)
            if h.newestFirst { return .communityMessages(Array(found.reversed().prefix(h.limit))) }
            return .communityMessages(Array(found.prefix(h.limit)))
        case .communityMessage(let appKey, let groupId, let channelId, let messageId):
            let g = try group(try app(appKey), groupId)
            return .communityMessage(try storedMessage(g, channelId, messageId).2)
        case .communityRules(let appKey, let groupId, let channelId):
            let g = try group(try app(appKey), groupId)
            if !channelId.isEmpty { _ = try channel(g, channelId) }
            return .communityRules(g.community.rules[channelId] ?? CommunityRules())
        default:
            return nil
        }
    }
}

// MARK: Restoring (the store, images)

extension ChatDomain {
    /// Start-up: a stored message, in the order they were sent.
    public func restoreCommunityMessage(app: String, _ m: CommunityMessage) {
        guard let a = apps[app], let g = a.groups[m.groupId], g.channels[m.channelId] != nil else { return }
        g.community.append(m)
        a.communityBytes += m.bytes
    }

    public func restoreCommunityRules(app: String, groupId: String, channelId: String, _ rules: CommunityRules) {
        guard let g = apps[app]?.groups[groupId], !rules.isEmpty else { return }
        g.community.rules[channelId] = rules
    }
}

extension CommunityState {
    /// Appends a stored message (restoring: already within the bounds).
    func append(_ m: CommunityMessage) {
        history[m.channelId, default: []].append(m)
        historyBytes[m.channelId, default: 0] += m.bytes
    }
}

/// An ultra group's messages and controls in a `DomainImage`.
struct CommunityImage: Codable, Equatable, Sendable {
    /// Channel by channel (ids sorted), each oldest first.
    var messages: [CommunityMessage]
    var rules: [KeyedValue<CommunityRules>]

    init?(_ s: CommunityState) {
        guard !s.isEmpty else { return nil }
        messages = s.history.sorted { $0.key < $1.key }.flatMap(\.value)
        rules = s.rules.sorted { $0.key < $1.key }.map { KeyedValue(key: $0.key, value: $0.value) }
    }

    func restore(into s: CommunityState) {
        for m in messages { s.append(m) }
        for r in rules { s.rules[r.key] = r.value }
    }
}
