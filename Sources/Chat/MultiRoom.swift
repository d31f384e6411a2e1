/// AU-3: one message to several rooms, or to every room of an app, as one command with one answer.
///
/// A list send (RongCloud's `/message/chatroom/publish.json` with several `toChatroomId`,
/// Nexconn's `toChannelIds`, native `POST /v1/messages`) checks every room first, the rooms'
/// message budgets included, and then sends to all of them or to none: a missing room, a room
/// over its budget or bad content refuses the whole call. Each room gets its own message (its own
/// id and offset), kept in its history as a single send would be.
///
/// A broadcast (RongCloud's `/message/chatroom/broadcast.json`, Nexconn's
/// `/v4/open-channel/message/broadcast`, native `POST /v1/messages/broadcast`) reaches the members
/// present in every room of the app at that moment, as RongCloud documents it: it is not kept in
/// any room's history, so it travels as a transient message (no offset, never replayed, told to
/// webhooks only with `transientWebhooks`), with one id in every room, high priority unless asked
/// otherwise, outside the rooms' budgets, without keeping a room alive, and at most
/// `Limits.broadcastsPerSecond` per app.
extension ChatDomain {
    /// The rooms a list send names: 1 to `Limits.maxRoomsPerSend`, each a valid room id, repeats
    /// sent once.
    static func validatedRoomIds(_ roomIds: [String]) throws(ChatError) -> [String] {
        guard !roomIds.isEmpty else { throw .invalid("roomIds", "name at least one room") }
        var seen = Set<String>()
        var ids: [String] = []
        for id in roomIds where seen.insert(id).inserted {
            try Validate.roomId(id, field: "roomIds")
            ids.append(id)
        }
        guard ids.count <= Limits.maxRoomsPerSend else {
            throw .invalid("roomIds", "one call sends to at most \(Limits.maxRoomsPerSend) rooms")
        }
        return ids
    }

    /// What `checkSend` checks, for every room a list send names (from the app server only); a
    /// missing room is named as one of `roomIds`. Nothing changes.
    func checkEachRoom(_ appKey: String, _ roomIds: [String], _ sender: MessageSender, _ kind: ChatMessage.Kind, _ content: String,
                       _ options: MessageOptions, _ now: Int64) throws(ChatError) -> [(room: Room, subject: SendSubject, audience: Audience)] {
        guard case .server = sender else { throw .invalid("sender", "only the app server sends to several rooms") }
        var checked: [(room: Room, subject: SendSubject, audience: Audience)] = []
        for roomId in try Self.validatedRoomIds(roomIds) {
            do {
                let c = try checkSend(appKey, roomId, sender, kind, content, options, now)
                checked.append((c.room, c.message, c.audience))
            } catch {
                throw error.code == .roomNotFound ? ChatError(.roomNotFound, "room \(roomId) does not exist; nothing was sent", field: "roomIds") : error
            }
        }
        return checked
    }

    func sendToRooms(_ appKey: String, _ roomIds: [String], _ sender: MessageSender, _ kind: ChatMessage.Kind, _ content: String,
                     _ options: MessageOptions, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        // Everything is checked before anything changes: every room exists and takes the message,
        // and every room's budget has room for it (taken on copies, kept only if all do).
        let app = try app(appKey)
        var checked: [(room: Room, subject: SendSubject, audience: Audience, priority: MessagePriority, budget: TokenBucket,
                       shared: TokenBucket?)] = []
        for (room, subject, audience) in try checkEachRoom(appKey, roomIds, sender, kind, content, options, now) {
            let priority = Self.priority(of: subject.userId, options, app: app.settings, room: room)
            let (budget, shared, taken) = Self.takeBudget(room, priority, transient: options.transient, app.settings, now: now)
            guard taken else { throw Self.roomBusy(room.key.roomId, priority, transient: options.transient, app.settings, field: "roomIds") }
            checked.append((room, subject, audience, priority, budget, shared))
        }
        var messages: [ChatMessage] = []
        messages.reserveCapacity(checked.count)
        for c in checked {
            c.room.budget = c.budget
            if let shared = c.shared { c.room.sharedBudget = shared }
            messages.append(emit(app, c.room, c.subject, kind, options, priority: c.priority, audience: c.audience, sender: sender, now, &out))
        }
        return .messages(messages)
    }

    func broadcast(_ appKey: String, _ sender: MessageSender, _ kind: ChatMessage.Kind, _ content: String, _ asked: MessageOptions,
                   _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        guard case .server(let userId, let nickname, let avatar) = sender else { throw .invalid("sender", "only the app server broadcasts") }
        let app = try app(appKey)
        guard kind != .notification else { throw .invalid("type", "type must be text or custom") }
        try Validate.maxBytes(content, app.settings.maxMessageBytes, field: "content")
        guard !content.isEmpty else { throw .invalid("content", "content must not be empty") }
        guard asked.targets.isEmpty && asked.targetTags == nil else {
            throw .invalid(asked.targets.isEmpty ? "targetTags" : "targets", "a broadcast goes to every member present; address members with a room send")
        }
        try Self.validate(asked)
        if !userId.isEmpty { try Validate.userId(userId, field: "fromUserId") }
        try Validate.maxBytes(nickname, Limits.maxNicknameBytes, field: "nickname")
        try Validate.maxBytes(avatar, Limits.maxAvatarBytes, field: "avatar")
        // MO-2: screened as the app server's room sends are (blocked: nothing is sent anywhere).
        let text = kind == .text && app.settings.sensitiveWordsOnServerSends ? try screen(app, content) : content
        var bucket = app.broadcastBucket ?? TokenBucket(rate: Limits.broadcastsPerSecond, now: now)
        guard bucket.take(now: now) else {
            app.broadcastBucket = bucket
            throw ChatError(.rateLimited, "an app broadcasts at most \(Limits.broadcastsPerSecond) message a second", field: "appKey")
        }
        app.broadcastBucket = bucket
        var options = asked
        options.transient = true
        options.priority = asked.priority ?? .high
        let id = makeID()
        var rooms = 0
        for roomId in app.rooms.keys.sorted() {
            guard let room = app.rooms[roomId], !room.presentOrder.isEmpty else { continue }
            let m = room.members[userId]
            let subject = SendSubject(app: appKey, roomId: roomId, userId: userId, nickname: nickname.isEmpty ? (m?.nickname ?? "") : nickname,
                                      avatar: avatar.isEmpty ? (m?.avatar ?? "") : avatar, ext: m?.ext ?? "", deviceId: "", kind: kind,
                                      content: text, fromServer: true)
            // QS-4 still applies: a protected sender or type keeps its class.
            let priority = Self.priority(of: userId, options, app: app.settings, room: room)
            _ = emit(app, room, subject, kind, options, priority: priority, audience: .room(room.key), sender: sender, id: id,
                     keepsRoomAlive: false, now, &out)
            rooms += 1
        }
        return .broadcast(messageId: id, rooms: rooms)
    }
}

extension Command {
    /// The app and sender of a message command (a room send, a list send, a broadcast): what the
    /// before-send hook judges (PX-4), once for a whole list send or broadcast.
    public var messageSender: (app: String, sender: MessageSender)? {
        switch self {
        case .sendMessage(let app, _, let sender, _, _, _), .sendToRooms(let app, _, let sender, _, _, _), .broadcast(let app, let sender, _, _, _):
            return (app, sender)
        default:
            return nil
        }
    }

    /// The same message command with other content (a before-send hook's replacement).
    public func replacingContent(_ content: String) -> Command {
        switch self {
        case .sendMessage(let app, let roomId, let sender, let kind, _, let options):
            return .sendMessage(app: app, roomId: roomId, sender, kind, content: content, options: options)
        case .sendToRooms(let app, let roomIds, let sender, let kind, _, let options):
            return .sendToRooms(app: app, roomIds: roomIds, sender, kind, content: content, options: options)
        case .broadcast(let app, let sender, let kind, _, let options):
            return .broadcast(app: app, sender, kind, content: content, options: options)
        default:
            return self
        }
    }
}
