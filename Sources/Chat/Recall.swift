/// MO-1: recalling a room message (RongCloud's message recall for chatrooms, NIM's chatroom
/// recall, ZIM's revoke, the native REST call and the client op).
///
/// Who may recall, as the vendors document it:
/// - the app server, any message at any time (RongCloud's and NIM's server calls have no window);
///   with NIM's `operator` it acts for that user, who must be the sender, the room's creator or
///   one of its managers;
/// - a member from its client: its own messages within the app's `recallWindowSeconds` (two
///   minutes by default, as RongCloud's, NIM's and ZIM's clients); the room's creator and its
///   managers any message, at any time.
///
/// A recall reaches whoever the message reached (the room, or only its addressees, AU-1/AU-2),
/// replaces the message in history with its tombstone (same id, sender and time, no content), and
/// is told to webhooks. Only a room's recent messages held in memory can be recalled (at most
/// `Limits.historyMemoryMessagesPerRoom` and `Limits.historyMemoryBytesPerRoom`): the domain
/// decides from its own state, so every node of a cluster decides alike.
extension ChatDomain {
    func recallMessage(_ appKey: String, _ roomId: String, _ messageId: String, _ options: RecallOptions, _ actor: Actor, _ now: Int64,
                       _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard !messageId.isEmpty, messageId.utf8.count <= Limits.maxMessageIdBytes else {
            throw .invalid("messageId", "messageId is 1 to \(Limits.maxMessageIdBytes) bytes")
        }
        try Validate.maxBytes(options.notifyExt, Limits.maxRecallExtBytes, field: "notifyExt")
        if let sender = options.sender { try Validate.userId(sender, field: "sender") }
        if let op = options.operatorId { try Validate.userId(op, field: "operator") }
        if let t = options.sentTime, t < 0 { throw .invalid("sentTime", "sentTime is a time in milliseconds") }
        let room = try self.room(app, roomId)
        guard let index = room.history.index(of: messageId) else {
            throw ChatError(.notFound, "message \(messageId) is not among room \(roomId)'s recent messages (the last \(Limits.historyMemoryMessagesPerRoom) can be recalled)",
                            field: "messageId")
        }
        let message = room.history[index]
        guard !message.recalled else { throw ChatError(.notFound, "message \(messageId) was already recalled", field: "messageId") }
        if let sender = options.sender, sender != message.sender {
            throw ChatError(.notFound, "message \(messageId) was not sent by \(sender)", field: "sender")
        }
        if let t = options.sentTime, t != message.time {
            throw ChatError(.notFound, "message \(messageId) was not sent at \(t)", field: "sentTime")
        }
        var operatorId = ""
        switch actor {
        case .server:
            if let op = options.operatorId {
                // NIM: the operator is the sender, or the room's creator or a manager.
                guard op == message.sender || Self.mayRecallOthers(room, op) else {
                    throw ChatError(.permissionDenied, "\(op) may not recall \(message.sender)'s message: only the sender, the room's creator and its managers may",
                                    field: "operator")
                }
                operatorId = op
            }
        case .account(let op):
            try Validate.userId(op, field: "operator")
            guard op == message.sender || Self.mayRecallOthers(room, op) else {
                throw ChatError(.permissionDenied, "\(op) may not recall \(message.sender)'s message: only the sender, the room's creator and its managers may",
                                field: "operator")
            }
            operatorId = op
        case .session(let sid):
            let s = try session(sid)
            if s.anonymous { throw ChatError.anonymousReadOnly() }
            guard s.app == appKey else { throw ChatError(.unknownSession, "session belongs to another app", field: "session") }
            guard let m = room.members[s.userId], m.sessions.contains(sid) else {
                throw ChatError(.notInRoom, "you are not in room \(roomId)", field: "roomId")
            }
            if Self.mayRecallOthers(room, s.userId) {
                // The room's creator and managers recall any message, at any time.
            } else if s.userId == message.sender {
                let window = Int64(app.settings.recallWindowSeconds) * 1000
                guard now - message.time <= window else {
                    throw ChatError(.permissionDenied,
                                    "your messages can be recalled within \(app.settings.recallWindowSeconds) seconds of sending (recallWindowSeconds); this one is older",
                                    field: "messageId")
                }
            } else {
                throw ChatError(.permissionDenied, "only the sender, the room's creator and its managers may recall a message", field: "messageId")
            }
            operatorId = s.userId
        }
        let tombstone = message.tombstone
        room.history.replace(at: index, with: tombstone)
        out.mutations.append(.recallMessage(room.key, messageId: messageId))
        let event = RecallEvent(roomId: roomId, messageId: messageId, sender: message.sender, operatorId: operatorId, notifyExt: options.notifyExt,
                                time: now, tombstone: tombstone)
        out.deliver(.messageRecalled(event), to: Self.recallAudience(room.key, message))
        out.webhooks.append(WebhookRecord(app: appKey, type: .messageRecalled, roomId: roomId, userIds: message.sender.isEmpty ? [] : [message.sender], time: now,
                                          details: ["messageId": messageId, "operator": operatorId, "sentTime": String(message.time)]))
        // MO-8: NIM's operator through the app server is recorded as the operator it names.
        let by: Actor = if case .server = actor, !operatorId.isEmpty { .account(operatorId) } else { actor }
        audit(app, .recall, by: by, roomId: roomId, targets: message.sender.isEmpty ? [] : [message.sender], messageId: messageId, now: now, &out)
        return .done
    }

    /// The room's creator and managers may recall anyone's message.
    static func mayRecallOthers(_ room: Room, _ user: String) -> Bool {
        switch room.members[user]?.role ?? .none {
        case .creator, .manager: return true
        case .common, .none: return user == room.creator && !user.isEmpty
        }
    }

    /// A recall reaches whoever the message reached: its addressees (and its sender) when it was
    /// addressed to some members, the room otherwise.
    static func recallAudience(_ room: RoomKey, _ m: ChatMessage) -> Audience {
        if !m.targets.isEmpty {
            var users = m.targets
            if !m.sender.isEmpty && !users.contains(m.sender) { users.append(m.sender) }
            return .roomUsers(room, users, except: .none)
        }
        if let tags = m.targetTags { return .roomTagged(room, tags, except: .none) }
        return .room(room)
    }
}
