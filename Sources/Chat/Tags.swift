/// AU-1: member tags (NIM's chat room tags). A member carries up to `Limits.maxTagsPerMember` tags
/// in a room, given when it enters (its token's or its join's) or set by the app server; a
/// message or a notification may go only to the members whose tags match an expression.
///
/// The expression is NIM's: a tag `{"tag":"vip"}`, or an operation over expressions
/// `{"op":"and"|"or","tags":[...]}` and `{"op":"not","tags":[one]}`. Its size is bounded
/// (`Limits.maxTagExpressionTerms` tags, `Limits.maxTagExpressionDepth` levels), so matching it
/// costs a bounded number of set look-ups per member.
public indirect enum TagExpression: Equatable, Hashable, Sendable, Codable {
    case tag(String)
    case and([TagExpression])
    case or([TagExpression])
    case not(TagExpression)

    /// Whether a member with `tags` matches.
    public func matches(_ tags: [String]) -> Bool {
        switch self {
        case .tag(let t): return tags.contains(t)
        case .and(let list): return list.allSatisfy { $0.matches(tags) }
        case .or(let list): return list.contains { $0.matches(tags) }
        case .not(let e): return !e.matches(tags)
        }
    }

    /// The tags it names (AU-1's history by tag looks for them).
    public var names: Set<String> {
        switch self {
        case .tag(let t): return [t]
        case .and(let list), .or(let list): return list.reduce(into: Set<String>()) { $0.formUnion($1.names) }
        case .not(let e): return e.names
        }
    }

    var terms: Int {
        switch self {
        case .tag: return 1
        case .and(let list), .or(let list): return list.reduce(0) { $0 + $1.terms }
        case .not(let e): return e.terms
        }
    }

    var depth: Int {
        switch self {
        case .tag: return 1
        case .and(let list), .or(let list): return 1 + (list.map(\.depth).max() ?? 0)
        case .not(let e): return 1 + e.depth
        }
    }

    /// Checks an expression made elsewhere (a command from the log, another surface): its tags and
    /// its size, as `from` does.
    public func validate(field: String) throws(ChatError) {
        guard terms <= Limits.maxTagExpressionTerms, depth <= Limits.maxTagExpressionDepth else {
            throw .invalid(field, "\(field) names at most \(Limits.maxTagExpressionTerms) tags in at most \(Limits.maxTagExpressionDepth) levels")
        }
        for t in names { try Validate.tag(t, field: field) }
        if case .not(let inner) = self { try inner.validate(field: field) }
    }

    /// NIM's JSON form, as a value the JSON decoder gave (`[String: Any]`-free: the wire layer
    /// hands a parsed `TagExpressionJSON`).
    public static func from(_ json: TagExpressionJSON, field: String) throws(ChatError) -> TagExpression {
        let e = try parse(json, field: field, depth: 1)
        guard e.terms <= Limits.maxTagExpressionTerms, e.depth <= Limits.maxTagExpressionDepth else {
            throw .invalid(field, "\(field) names at most \(Limits.maxTagExpressionTerms) tags in at most \(Limits.maxTagExpressionDepth) levels")
        }
        return e
    }

    private static func parse(_ json: TagExpressionJSON, field: String, depth: Int) throws(ChatError) -> TagExpression {
        // Checked while reading, so a deep expression costs no more than a legal one.
        guard depth <= Limits.maxTagExpressionDepth else {
            throw .invalid(field, "\(field) names at most \(Limits.maxTagExpressionTerms) tags in at most \(Limits.maxTagExpressionDepth) levels")
        }
        if let tag = json.tag {
            guard json.op == nil, json.tags == nil else { throw .invalid(field, "\(field): an expression is a tag or an operation, not both") }
            try Validate.tag(tag, field: field)
            return .tag(tag)
        }
        guard let op = json.op, let parts = json.tags, !parts.isEmpty else {
            throw .invalid(field, "\(field): an expression is {\"tag\": …} or {\"op\": \"and\"|\"or\"|\"not\", \"tags\": [ … ]}")
        }
        var list: [TagExpression] = []
        guard parts.count <= Limits.maxTagExpressionTerms else {
            throw .invalid(field, "\(field) names at most \(Limits.maxTagExpressionTerms) tags in at most \(Limits.maxTagExpressionDepth) levels")
        }
        for p in parts { list.append(try parse(p, field: field, depth: depth + 1)) }
        switch op {
        case "and": return .and(list)
        case "or": return .or(list)
        case "not":
            guard list.count == 1 else { throw .invalid(field, "\(field): not takes one expression") }
            return .not(list[0])
        default: throw .invalid(field, "\(field): op must be and, or or not")
        }
    }

    /// A compact text form (webhook details): `vip`, `and(a,or(b,c))`, `not(x)`.
    public var compact: String {
        switch self {
        case .tag(let t): return t
        case .and(let list): return "and(" + list.map(\.compact).joined(separator: ",") + ")"
        case .or(let list): return "or(" + list.map(\.compact).joined(separator: ",") + ")"
        case .not(let e): return "not(" + e.compact + ")"
        }
    }

    /// The JSON form (for webhooks, history and the published documents).
    public var json: TagExpressionJSON {
        switch self {
        case .tag(let t): return TagExpressionJSON(tag: t)
        case .and(let list): return TagExpressionJSON(op: "and", tags: list.map(\.json))
        case .or(let list): return TagExpressionJSON(op: "or", tags: list.map(\.json))
        case .not(let e): return TagExpressionJSON(op: "not", tags: [e.json])
        }
    }
}

/// A tag expression as JSON carries it (NIM's `notifyTargetTags`, the native `targetTags`).
public struct TagExpressionJSON: Equatable, Sendable, Codable {
    public var tag: String?
    public var op: String?
    public var tags: [TagExpressionJSON]?

    public init(tag: String? = nil, op: String? = nil, tags: [TagExpressionJSON]? = nil) {
        self.tag = tag
        self.op = op
        self.tags = tags
    }
}

extension Validate {
    /// A tag: 1 to `Limits.maxTagBytes` bytes.
    static func tag(_ t: String, field: String) throws(ChatError) {
        guard !t.isEmpty, t.utf8.count <= Limits.maxTagBytes else { throw .invalid(field, "\(field): a tag is 1 to \(Limits.maxTagBytes) bytes") }
    }

    /// A member's tags: at most `Limits.maxTagsPerMember`, each a valid tag, without repeats.
    public static func tags(_ list: [String], field: String) throws(ChatError) -> [String] {
        var seen = Set<String>(), out: [String] = []
        for t in list where seen.insert(t).inserted {
            try tag(t, field: field)
            out.append(t)
        }
        guard out.count <= Limits.maxTagsPerMember else { throw .invalid(field, "\(field): a member has at most \(Limits.maxTagsPerMember) tags") }
        return out
    }
}

extension ChatDomain {
    /// AU-1: refuses tags that would give the room more than `Limits.maxTagsPerRoom` distinct
    /// tags (the index a tag's count and list read).
    func checkTagIndex(_ room: Room, adding new: [String], removing old: [String]) throws(ChatError) {
        let added = new.filter { (room.tagCounts[$0] ?? 0) == 0 && !old.contains($0) }
        guard room.tagCounts.count + added.count <= Limits.maxTagsPerRoom else {
            throw ChatError(.limitExceeded, "room \(room.key.roomId) has members with \(room.tagCounts.count) tags; at most \(Limits.maxTagsPerRoom)",
                            field: "tags")
        }
    }

    /// AU-1: a present member's tags change from `old` to `new` in the room's index.
    func reindexTags(_ room: Room, from old: [String], to new: [String]) {
        for t in old where !new.contains(t) {
            let n = (room.tagCounts[t] ?? 1) - 1
            room.tagCounts[t] = n > 0 ? n : nil
        }
        for t in new where !old.contains(t) { room.tagCounts[t, default: 0] += 1 }
    }

    /// AU-1: the app server sets a present member's tags; its sessions are told
    /// (`room.tagsUpdated`), and what is addressed by tag reaches it by the new ones from now on.
    /// With `notifyTargetTags` (NIM's `updateChatRoomRoleTag`), the members it matches are also
    /// told with a member-info-updated notification (316).
    func setMemberTags(_ appKey: String, _ roomId: String, _ userId: String, _ tags: [String], notifyTargetTags: TagExpression?,
                       _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let room = try room(app, roomId)
        let tags = try Validate.tags(tags, field: "tags")
        try notifyTargetTags?.validate(field: "notifyTargetTags")
        guard let member = room.members[userId], member.isOnline else {
            throw ChatError(.notInRoom, "\(userId) is not in room \(roomId)", field: "userId")
        }
        guard member.tags != tags else { return .done }
        try checkTagIndex(room, adding: tags, removing: member.tags)
        reindexTags(room, from: member.tags, to: tags)
        room.members[userId]!.tags = tags
        out.effects.append(.tagged(Array(member.sessions), room.key, tags))
        out.deliver(.tagsUpdated(TagsUpdatedEvent(roomId: roomId, tags: tags, time: now)), to: .sessions(Array(member.sessions)))
        if let notifyTargetTags {
            let info = memberInfo(room, userId, now: now)
            out.deliver(.notification(NotificationEvent(roomId: roomId, type: .memberInfoUpdated, source: nil, targets: [info], notifyExt: "",
                                                        ext: .none, time: now)), to: .roomTagged(room.key, notifyTargetTags, except: .none))
        }
        return .done
    }

    /// AU-1: members carrying `tag` may not send for `seconds` (0 lifts it), including members
    /// who get the tag or enter with it meanwhile (NIM's `tagTemporaryMute`); the notification
    /// (NIM 314/315) goes to the members `notifyTargetTags` matches (default: those with the tag).
    func tagMute(_ appKey: String, _ roomId: String, _ tag: String, seconds: Int, notify: NIMNotify?, notifyTargetTags: TagExpression?,
                 _ actor: Actor, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, op) = try resolve(appKey, roomId, actor)
        if let op { try requireManager(room, op, now: now) }
        try Validate.tag(tag, field: "targetTag")
        let (_, nim) = try validateNotify(nil, notify)
        guard (0...Limits.maxTagMuteSeconds).contains(seconds) else {
            throw .invalid("muteDuration", "muteDuration is 0 to \(Limits.maxTagMuteSeconds) seconds")
        }
        // MO-8: an accepted call is recorded, whether or not the tag was muted.
        audit(app, seconds == 0 ? .tagUnmute : .tagMute, by: actor, roomId: roomId, targets: [tag],
              durationMs: seconds == 0 ? nil : Int64(seconds) * 1000, now: now, &out)
        if seconds == 0 {
            guard room.tagMutes.removeValue(forKey: tag) != nil else { return .done }
        } else {
            let until = now + Int64(seconds) * 1000
            room.tagMutes[tag] = until
            deadlines.push(until, .tagMute(room.key, tag))
        }
        out.mutations.append(.putRoom(record(room)))
        if let nim {
            out.deliver(.notification(NotificationEvent(roomId: roomId, type: seconds == 0 ? .tempMuteRemove : .tempMuteAdd,
                                                        source: op.map { memberInfo(room, $0, now: now) }, targets: [], notifyExt: nim.notifyExt,
                                                        ext: seconds == 0 ? .none : .tempMute(durationSeconds: Int64(seconds)), time: now)),
                        to: .roomTagged(room.key, notifyTargetTags ?? .tag(tag), except: .none))
        }
        out.webhooks.append(WebhookRecord(app: appKey, type: .moderationChanged, roomId: roomId, time: now,
                                          details: ["action": seconds == 0 ? "tagUnmute" : "tagMute", "tag": tag, "seconds": String(seconds)]))
        return .done
    }
}

/// AU-1: a member's tags changed (to its own sessions; NIM's `chatroomTagsUpdated`).
public struct TagsUpdatedEvent: Equatable, Sendable {
    public var roomId: String
    public var tags: [String]
    public var time: Int64
    public init(roomId: String, tags: [String], time: Int64) {
        self.roomId = roomId
        self.tags = tags
        self.time = time
    }
}
