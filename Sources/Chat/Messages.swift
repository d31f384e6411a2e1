/// Room messages (NIM-8) and what decides how they travel under overload (SPEC §14): the class
/// a message is sent with (QS-1, QS-4), the room's message budget (QS-2), transient messages
/// (QS-5) and stopped distribution (QS-6). All of it is decided from the domain's state and the
/// command's time, so every node of a cluster decides alike.
extension ChatDomain {
    /// Everything `sendMessage` checks but the rate limits, changing nothing: the room, and the
    /// message as the sender would send it (PX-4 shows it to the before-send hook).
    func checkSend(_ appKey: String, _ roomId: String, _ sender: MessageSender, _ kind: ChatMessage.Kind, _ content: String,
                           _ options: MessageOptions, _ now: Int64) throws(ChatError) -> (app: AppState, room: Room, message: SendSubject, audience: Audience) {
        let app = try app(appKey)
        guard kind != .notification else { throw .invalid("type", "type must be text or custom") }
        try Validate.maxBytes(content, app.settings.maxMessageBytes, field: "content")
        guard !content.isEmpty else { throw .invalid("content", "content must not be empty") }
        try Self.validate(options)
        switch sender {
        case .session(let sid):
            let s = try session(sid)
            if s.anonymous { throw ChatError.anonymousReadOnly() }
            guard s.app == appKey else { throw ChatError(.unknownSession, "session belongs to another app", field: "session") }
            let r = try self.room(app, roomId)
            guard let m = r.members[s.userId], m.sessions.contains(sid) else {
                throw ChatError(.notInRoom, "you are not in room \(roomId)", field: "roomId")
            }
            try checkSendPermission(app, r, s.userId, member: m, now: now)
            // MO-2: a client's text is screened for the app's sensitive words.
            let text = kind == .text ? try screen(app, content) : content
            let subject = SendSubject(app: appKey, roomId: roomId, userId: s.userId, nickname: m.nickname, avatar: m.avatar, ext: m.ext,
                                      deviceId: s.deviceId, kind: kind, content: text, fromServer: false)
            return (app, r, subject, .roomExceptSession(r.key, sid))
        case .server(let userId, let nickname, let avatar):
            // RC-7: sends from the app server are never blocked by mutes.
            if !userId.isEmpty { try Validate.userId(userId, field: "fromUserId") }
            try Validate.maxBytes(nickname, Limits.maxNicknameBytes, field: "nickname")
            try Validate.maxBytes(avatar, Limits.maxAvatarBytes, field: "avatar")
            let r = try self.room(app, roomId)
            let m = r.members[userId]
            // MO-2: the app server's text too, when the app asks.
            let text = kind == .text && app.settings.sensitiveWordsOnServerSends ? try screen(app, content) : content
            let subject = SendSubject(app: appKey, roomId: roomId, userId: userId, nickname: nickname.isEmpty ? (m?.nickname ?? "") : nickname,
                                      avatar: avatar.isEmpty ? (m?.avatar ?? "") : avatar, ext: m?.ext ?? "", deviceId: "", kind: kind,
                                      content: text, fromServer: true)
            return (app, r, subject, .room(r.key))
        }
    }

    /// A message type is 1 to `SettingsLimits.maxMessageTypeBytes` bytes (or none); a message is
    /// addressed to at most `Limits.maxMessageTargets` users, or to a tag expression, not both.
    static func validate(_ options: MessageOptions) throws(ChatError) {
        guard options.type.utf8.count <= SettingsLimits.maxMessageTypeBytes else {
            throw .invalid("type", "a message type is at most \(SettingsLimits.maxMessageTypeBytes) bytes")
        }
        guard options.targets.count <= Limits.maxMessageTargets else {
            throw .invalid("targets", "a message is addressed to at most \(Limits.maxMessageTargets) users")
        }
        for u in options.targets { try Validate.userId(u, field: "targets") }
        if let e = options.targetTags {
            guard options.targets.isEmpty else { throw .invalid("targetTags", "address a message to users or to tags, not both") }
            try e.validate(field: "targetTags")
        }
    }

    /// AU-1, AU-2: who of the room a message goes to: its addressees, but the sending connection.
    static func audience(_ room: RoomKey, _ options: MessageOptions, plain: Audience, sender: MessageSender) -> Audience {
        var except = Exclusion.none
        if case .session(let sid) = sender { except = .session(sid) }
        if !options.targets.isEmpty { return .roomUsers(room, options.targets, except: except) }
        if let tags = options.targetTags { return .roomTagged(room, tags, except: except) }
        return plain
    }

    /// PX-4: the message a `sendMessage` command would send now, or the error it would get
    /// (a user whose send bucket is empty gets 42901; the send itself takes the token). Nothing
    /// changes.
    public func precheckSend(_ command: Command, now: Int64) throws(ChatError) -> SendSubject? {
        if case .sendToRooms(let app, let roomIds, let sender, let kind, let content, let options) = command {
            // AU-3: judged once, as sent to its first room, once every room would take it.
            return try checkEachRoom(app, roomIds, sender, kind, content, options ?? MessageOptions(), now).first?.subject
        }
        if case .broadcast(let app, .server(let userId, let nickname, let avatar), let kind, let content, _) = command {
            // AU-3: a broadcast is judged once, with no room (an empty roomId).
            let settings = try self.app(app).settings
            try Validate.maxBytes(content, settings.maxMessageBytes, field: "content")
            return SendSubject(app: app, roomId: "", userId: userId, nickname: nickname, avatar: avatar, ext: "", deviceId: "", kind: kind,
                               content: content, fromServer: true)
        }
        guard case .sendMessage(let app, let roomId, let sender, let kind, let content, let options) = command else { return nil }
        let checked = try checkSend(app, roomId, sender, kind, content, options ?? MessageOptions(), now)
        // A user already at the send limit is refused now rather than after the hook (the token
        // itself is taken when the message is sent).
        if case .session = sender, var bucket = checked.app.sendBuckets[checked.message.userId], !bucket.hasToken(now: now) {
            throw ChatError(.rateLimited, "at most \(checked.app.settings.sendsPerUserPerSecond) messages a second per user", field: "roomId")
        }
        return checked.message
    }

    /// QS-1, QS-4: the class a message travels with. A protected sender (the room's, or the app's
    /// priority senders) or a protected type makes it high whatever was asked; otherwise the class
    /// asked for; otherwise low for the app's low-priority types; otherwise normal.
    static func priority(of sender: String, _ options: MessageOptions, app: AppSettings, room: Room) -> MessagePriority {
        if !sender.isEmpty && (room.protectedSenders.contains(sender) || app.prioritySenders.contains(sender)) { return .high }
        if !options.type.isEmpty && app.protectedMessageTypes.contains(options.type) { return .high }
        if let asked = options.priority { return asked }
        if !options.type.isEmpty && app.lowPriorityMessageTypes.contains(options.type) { return .low }
        return .normal
    }

    /// QS-2: what a `sendMessage` would send with (its class, whether it is transient) and to how
    /// many members of the room at most; nil for another command or a message that would be
    /// refused anyway. Nothing changes (the engine's latency budget reads it before the log).
    public func overloadProfile(_ command: Command) -> (priority: MessagePriority, transient: Bool, audience: Int)? {
        guard case .sendMessage(let appKey, let roomId, let sender, _, _, let asked) = command,
              let app = apps[appKey], let room = app.rooms[roomId] else { return nil }
        let options = asked ?? MessageOptions()
        var userId = ""
        switch sender {
        case .session(let sid): userId = sessions[sid]?.userId ?? ""
        case .server(let u, _, _): userId = u
        }
        return (Self.priority(of: userId, options, app: app.settings, room: room), options.transient, room.presentOrder.count)
    }

    /// QS-2: what of a room's budget a class may not use. The budget holds a fifth of a second's
    /// worth of messages (RongCloud counts 40 per 200 ms); the reserved share is for high priority
    /// only, and low (and transient) messages may use only the upper half of the rest, so past the
    /// budget low messages are refused first, then normal ones, and high ones last.
    static func budgetFloor(_ priority: MessagePriority, transient: Bool, burst: Double, reservePercent: Int) -> Double {
        // Whole tokens: a small budget (a bucket of a few messages) keeps every class usable.
        let reserve = (burst * Double(reservePercent) / 100).rounded(.down)
        if transient || priority == .low { return reserve + ((burst - reserve) / 2).rounded(.down) }
        return priority == .normal ? reserve : 0
    }

    /// QS-2: the rate of the budget every class but high shares: the room's rate less the reserve.
    static func sharedRate(_ settings: AppSettings) -> Int {
        max(1, settings.roomMessagesPerSecond * (100 - settings.highPriorityReservePercent) / 100)
    }

    /// QS-2: the room's budgets after taking one message of this class, and whether it could;
    /// nothing is stored. Every class takes from the room's budget down to its floor
    /// (`budgetFloor`): at any instant the reserve is left to high priority. Normal, low and
    /// transient messages also take from the shared budget, which refills at the room's rate less
    /// the reserve (`sharedRate`; low and transient down to half of it): over time they get at
    /// most that share of the rate, whatever high priority leaves unused. `shared` is nil for a
    /// high-priority message (it does not touch the shared budget).
    static func takeBudget(_ room: Room, _ priority: MessagePriority, transient: Bool, _ settings: AppSettings,
                           now: Int64) -> (budget: TokenBucket, shared: TokenBucket?, taken: Bool) {
        let rate = settings.roomMessagesPerSecond
        var budget = room.budget.flatMap { $0.rate == Double(rate) ? $0 : nil } ?? TokenBucket(rate: rate, burst: max(1, rate / 5), now: now)
        let floor = budgetFloor(priority, transient: transient, burst: budget.burst, reservePercent: settings.highPriorityReservePercent)
        guard transient || priority != .high else {
            let taken = budget.take(now: now, keeping: floor)
            return (budget, nil, taken)
        }
        let sharedRate = sharedRate(settings)
        let shared = room.sharedBudget.flatMap { $0.rate == Double(sharedRate) ? $0 : nil }
            ?? TokenBucket(rate: sharedRate, burst: max(1, sharedRate / 5), now: now)
        // Taken from both or from neither (a bucket refills from its own clock: one left as it
        // was is as good as one refilled now).
        var afterTake = shared
        guard afterTake.take(now: now, keeping: transient || priority == .low ? (shared.burst / 2).rounded(.down) : 0),
              budget.take(now: now, keeping: floor) else { return (budget, shared, false) }
        return (budget, afterTake, true)
    }

    /// QS-2: the refusal of a message its room's budget did not take.
    static func roomBusy(_ roomId: String, _ priority: MessagePriority, transient: Bool, _ settings: AppSettings, field: String) -> ChatError {
        ChatError(.roomBusy, "room \(roomId) is over its message budget (\(settings.roomMessagesPerSecond) a second, \(settings.highPriorityReservePercent)% kept "
                  + "for high priority): \(transient ? "transient" : priority.rawValue) messages are refused now; nothing was sent; try again", field: field)
    }

    func sendMessage(_ appKey: String, _ roomId: String, _ sender: MessageSender, _ kind: ChatMessage.Kind, _ content: String,
                     _ options: MessageOptions, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let (app, room, subject, audience) = try checkSend(appKey, roomId, sender, kind, content, options, now)
        let settings = app.settings
        let priority = Self.priority(of: subject.userId, options, app: settings, room: room)
        // PX-1: a user's sends per second, all its devices together. Checked after everything
        // else, and its token taken only once the room's budget took the message.
        var userBucket: TokenBucket?
        if case .session = sender {
            var bucket = app.sendBuckets[subject.userId] ?? TokenBucket(rate: settings.sendsPerUserPerSecond, now: now)
            guard bucket.hasToken(now: now) else {
                app.sendBuckets[subject.userId] = bucket
                throw ChatError(.rateLimited, "at most \(settings.sendsPerUserPerSecond) messages a second per user", field: "roomId")
            }
            userBucket = bucket
        }
        let (budget, shared, taken) = Self.takeBudget(room, priority, transient: options.transient, settings, now: now)
        room.budget = budget
        if let shared { room.sharedBudget = shared }
        guard taken else { throw Self.roomBusy(roomId, priority, transient: options.transient, settings, field: "roomId") }
        if var bucket = userBucket {
            _ = bucket.take(now: now)
            app.sendBuckets[subject.userId] = bucket
        }
        return .message(emit(app, room, subject, kind, options, priority: priority, audience: audience, sender: sender, now, &out))
    }

    /// A message checked and admitted: sent to its audience, kept in the room's history (unless
    /// transient) and told to webhooks. `id`: one id for every room of a broadcast (AU-3).
    func emit(_ app: AppState, _ room: Room, _ subject: SendSubject, _ kind: ChatMessage.Kind, _ options: MessageOptions,
              priority: MessagePriority, audience: Audience, sender: MessageSender, id: String? = nil, keepsRoomAlive: Bool = true,
              _ now: Int64, _ out: inout Outcome) -> ChatMessage {
        let settings = app.settings
        let appKey = app.key
        let roomId = room.key.roomId
        let message = ChatMessage(id: id ?? makeID(), roomId: roomId, sender: subject.userId, senderNickname: subject.nickname,
                                  senderAvatar: subject.avatar, senderExt: subject.ext, kind: kind, content: subject.content, time: now,
                                  fromServer: subject.fromServer, priority: priority, type: options.type, transient: options.transient,
                                  targets: options.targets, targetTags: options.targetTags)
        if keepsRoomAlive { room.lastActivity = now }
        // QS-6: a room whose distribution is stopped keeps and reports its messages, and sends
        // them to nobody.
        if !room.distributionStopped { out.deliver(.message(message), to: Self.audience(room.key, options, plain: audience, sender: sender)) }
        // QS-5: a transient message is not stored, and reaches webhooks only if the app asks.
        if !options.transient {
            let oldest = now - settings.historyRetentionMilliseconds
            room.history.dropOlder(than: oldest)
            room.history.append(message)
            out.mutations.append(.appendMessage(room.key, message))
        }
        if !options.transient || settings.transientWebhooks {
            var details: KeyValueList = ["messageId": message.id, "type": kind.rawValue, "content": message.content, "fromServer": message.fromServer ? "true" : "false"]
            if priority != .normal { details.pairs.append(.init(key: "priority", value: priority.rawValue)) }
            if !options.type.isEmpty { details.pairs.append(.init(key: "messageType", value: options.type)) }
            if options.transient { details.pairs.append(.init(key: "transient", value: "true")) }
            if !options.targets.isEmpty { details.pairs.append(.init(key: "targets", value: options.targets.joined(separator: ","))) }
            if let tags = options.targetTags { details.pairs.append(.init(key: "targetTags", value: tags.compact)) }
            out.webhooks.append(WebhookRecord(app: appKey, type: .messageSent, roomId: roomId, userIds: message.sender.isEmpty ? [] : [message.sender],
                                              time: now, details: details))
        }
        return message
    }

    // MARK: The app's lists and a room's controls (QS-1, QS-4, QS-6)

    /// Adds entries to one of the app's message lists (at most `SettingsLimits.maxListEntries`),
    /// or removes them; nothing changes unless every entry is valid and the list fits.
    func editMessageList(_ appKey: String, _ list: AppSettings.MessageList, add: Bool, _ entries: [String], _ now: Int64,
                         _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard !entries.isEmpty else { throw .invalid(list.rawValue, "give at least one entry") }
        let given = try SettingsLimits.validatedList(entries, list)
        var settings = app.settings
        let current = settings[list: list]
        let next = add ? current + given.filter { !current.contains($0) } : current.filter { !given.contains($0) }
        guard next.count <= SettingsLimits.maxListEntries else {
            throw .invalid(list.rawValue, "\(list.rawValue) holds at most \(SettingsLimits.maxListEntries) entries (\(current.count) now)")
        }
        guard next != current else { return .done }
        settings[list: list] = next
        app.settings = settings
        out.mutations.append(.putApp(appKey, settings))
        let changed = add ? next.filter { !current.contains($0) } : current.filter { !next.contains($0) }
        audit(app, add ? .messageListAdd : .messageListRemove, by: .server, roomId: "", targets: changed, detail: list.rawValue, now: now, &out)
        return .done
    }

    /// QS-4: a room's protected senders (RongCloud's chatroom user whitelist): at most
    /// `Limits.maxProtectedSendersPerRoom`, each a user id; past the bound nothing changes.
    func setProtectedSenders(_ appKey: String, _ roomId: String, add: Bool, _ users: [String], _ now: Int64,
                             _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let room = try room(app, roomId)
        // A call names no more users than a room may protect (the schema's bound: one list).
        guard !users.isEmpty, users.count <= Limits.maxProtectedSendersPerRoom else {
            throw .invalid("userIds", "give 1 to \(Limits.maxProtectedSendersPerRoom) user ids")
        }
        for u in users { try Validate.userId(u, field: "userIds") }
        let current = room.protectedSenders
        var next = current
        if add {
            for u in users where !next.contains(u) { next.append(u) }
        } else {
            next.removeAll { users.contains($0) }
        }
        guard next.count <= Limits.maxProtectedSendersPerRoom else {
            throw .invalid("userIds", "a room has at most \(Limits.maxProtectedSendersPerRoom) protected senders (\(current.count) now)")
        }
        guard next != current else { return .done }
        room.protectedSenders = next
        out.mutations.append(.putRoom(record(room)))
        let changed = add ? next.filter { !current.contains($0) } : current.filter { !next.contains($0) }
        audit(app, add ? .protectedSenderAdd : .protectedSenderRemove, by: .server, roomId: roomId, targets: changed, now: now, &out)
        return .done
    }

    /// QS-6: stops or resumes the fan-out of a room's messages (RongCloud's stop/resume
    /// distribution). Resuming goes on with the next message; those sent while stopped stay in the
    /// history and were sent to webhooks.
    func setDistribution(_ appKey: String, _ roomId: String, stopped: Bool, _ now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(appKey)
        let room = try room(app, roomId)
        // MO-8: an accepted call is recorded, whether or not the room was already so.
        audit(app, stopped ? .distributionStop : .distributionResume, by: .server, roomId: roomId, now: now, &out)
        guard room.distributionStopped != stopped else { return .done }
        room.distributionStopped = stopped
        out.mutations.append(.putRoom(record(room)))
        return .done
    }
}
