/// The chat domain: apps, rooms, members, roles, moderation, queues and messages, as one
/// deterministic state machine. It performs no I/O and never reads a clock or a random source:
/// time arrives with every command, and ids come from the injected generator.
///
/// Every command is validated completely before anything changes, so a refused command leaves
/// the state untouched (the one exception: a refused join still tells its connection, RC-1).
public final class ChatDomain {
    public typealias IDGenerator = () -> String

    // Single-threaded: these skip dynamic exclusivity checks (see `Room`).
    @exclusivity(unchecked) var apps: [String: AppState] = [:]
    @exclusivity(unchecked) var sessions: [SessionID: Session] = [:]
    let makeID: IDGenerator
    @exclusivity(unchecked) var deadlines = DeadlineQueue<Deadline>()
    var queueSequence: Int64 = 0
    /// Orders ultra-group members, channels and private lists in the store.
    var groupSequence: Int64 = 0
    var lastPrune: [String: Int64] = [:]
    /// MO-8: the surface of the vendor command being applied (`Command.via`), nil otherwise.
    var auditSurface: AuditSurface?

    /// Codable: snapshots hold the deadline queue (`DomainImage`).
    enum Deadline: Hashable, Codable {
        case block(RoomKey, String)
        case tempMute(RoomKey, String)
        case globalMute(String, String)
        case room(RoomKey)
        /// PX-3: a user's last connection went away; offline unless one comes back in time.
        case offline(app: String, user: String)
        /// AU-1: a tag's temporary mute ends.
        case tagMute(RoomKey, String)
        /// AU-4: a room's `room.members` summary is due.
        case memberSummary(RoomKey)
    }

    /// PX-3: how long after a user's last connection closes `user.offline` is sent; a connection
    /// within it sends nothing (neither offline nor online).
    public var presenceGraceMilliseconds: Int64 = 5_000
    /// MO-3: `Limits.maxCommunityHistoryBytesPerApp`; smaller only in tests (the bound's eviction
    /// is tested without filling 256 MiB).
    var communityBytesPerApp = Limits.maxCommunityHistoryBytesPerApp

    public init(makeID: @escaping IDGenerator) {
        self.makeID = makeID
    }

    // MARK: Entry points

    public func apply(_ command: Command, now: Int64) -> Outcome {
        var out = Outcome()
        out.effects.reserveCapacity(8)
        do {
            out.reply = .success(try perform(command, now: now, &out))
        } catch {
            // A refused command changes nothing (handlers validate before they mutate); only a
            // refused join still tells its connection.
            var refused = Outcome(reply: .failure(error))
            refused.effects = failureNotices(command, error, now)
            return refused
        }
        return out
    }

    /// RC-1: a failed join reports `joining` then `joinFailed` to its connection; ZIM-5: a failed
    /// switch reports Connecting/ActiveSwitch then Disconnected/SwitchFailed for the target room.
    private func failureNotices(_ command: Command, _ error: ChatError, _ now: Int64) -> [Effect] {
        switch command {
        case .join(let s, let roomId, _, _):
            guard sessions[s] != nil else { return [] }
            return [
                .deliver(.roomStatus(RoomStatusEvent(roomId: roomId, status: .joining, zimState: .connecting, zimEvent: .success, time: now)), .sessions([s])),
                .deliver(.roomStatus(RoomStatusEvent(roomId: roomId, status: .joinFailed(error.code), zimState: .disconnected,
                                                     zimEvent: error.code == .roomNotFound ? .roomNotExist : .enterFailed, time: now)), .sessions([s])),
            ]
        case .switchRoom(let s, _, let to, _, _):
            guard sessions[s] != nil else { return [] }
            return [
                .deliver(.roomStatus(RoomStatusEvent(roomId: to.roomId, status: .joining, zimState: .connecting, zimEvent: .activeSwitch, time: now)), .sessions([s])),
                .deliver(.roomStatus(RoomStatusEvent(roomId: to.roomId, status: .joinFailed(error.code), zimState: .disconnected, zimEvent: .switchFailed, time: now)), .sessions([s])),
            ]
        default:
            return []
        }
    }

    private func perform(_ command: Command, now: Int64, _ out: inout Outcome) throws(ChatError) -> Reply {
        // NIM-3: an anonymous member receives but changes nothing; refused before any look-up.
        if let sid = Self.writingSession(command), sessions[sid]?.anonymous == true {
            throw ChatError.anonymousReadOnly()
        }
        switch command {
        case .configureApp(let app, let settings): return try configureApp(app, settings, &out)
        case .updateAppSettings(let app, let patch): return try updateAppSettings(app, patch, &out)
        case .connect(let s, let app, let user, let device, let anon): return try connect(s, app, user, device, anon, now, &out)
        case .disconnect(let s): return try disconnect(s, now, &out)
        case .join(let s, let roomId, let profile, let mode): return try join(s, roomId, profile, mode, now, &out)
        case .leave(let s, let roomId): return try leave(s, roomId, now, &out)
        case .leaveAll(let s): return try leaveAll(s, now, &out)
        case .switchRoom(let s, let from, let to, let create, let profile): return try switchRoom(s, from, to, create, profile, now, &out)
        case .updateMyInfo(let s, let roomId, let nick, let avatar, let ext, let notifyExt):
            return try updateMyInfo(s, roomId, nick, avatar, ext, notifyExt, now, &out)
        case .createRoom(let app, let config): return try createRoomCommand(app, config, now, &out)
        case .destroyRooms(let app, let ids): return try destroyRooms(app, ids, now, &out)
        case .updateRoom(let app, let roomId, let update, let actor, let nim): return try updateRoom(app, roomId, update, actor, nim, now, &out)
        case .setRoomOpen(let app, let roomId, let open, let actor, let nim): return try setRoomOpen(app, roomId, open, actor, nim, now, &out)
        case .block(let app, let roomId, let users, let minutes, let actor, let rc, let nim):
            return try block(app, roomId, users, minutes, actor, rc, nim, now, &out)
        case .unblock(let app, let roomId, let users, let actor, let rc, let nim): return try unblock(app, roomId, users, actor, rc, nim, now, &out)
        case .mute(let app, let roomId, let users, let duration, let actor, let rc, let nim):
            return try mute(app, roomId, users, duration, actor, rc, nim, now, &out)
        case .unmute(let app, let roomId, let users, let kind, let actor, let rc, let nim):
            return try unmute(app, roomId, users, kind, actor, rc, nim, now, &out)
        case .setRoomMuted(let app, let roomId, let muted, let actor, let rc, let nim): return try setRoomMuted(app, roomId, muted, actor, rc, nim, now, &out)
        case .addToAllowlist(let app, let roomId, let users, let rc): return try changeAllowlist(app, roomId, users, add: true, rc, now, &out)
        case .removeFromAllowlist(let app, let roomId, let users, let rc): return try changeAllowlist(app, roomId, users, add: false, rc, now, &out)
        case .globalMute(let app, let users, let minutes, let rc): return try globalMute(app, users, minutes, rc, now, &out)
        case .globalUnmute(let app, let users, let rc): return try globalUnmute(app, users, rc, now, &out)
        case .setRole(let app, let roomId, let target, let change, let actor, let notifyExt):
            return try setRole(app, roomId, target, change, actor, notifyExt, now, &out)
        case .kick(let app, let roomId, let target, let actor, let notifyExt): return try kick(app, roomId, target, actor, notifyExt, now, &out)
        case .setAttributes(let app, let roomId, let entries, let owner, let autoDelete, let actor):
            return try setAttributes(app, roomId, entries.map { (key: $0.key, value: $0.value) }, owner, autoDelete, actor, now, &out)
        case .removeAttributes(let app, let roomId, let keys, let actor): return try removeAttributes(app, roomId, keys, actor, now, &out)
        case .queueOffer(let app, let roomId, let key, let value, let transient, let actor):
            return try queueOffer(app, roomId, key, value, transient, actor, now, &out)
        case .queueBatchUpdate(let app, let roomId, let elements, let actor, let notify):
            return try queueBatchUpdate(app, roomId, elements.map { (key: $0.key, value: $0.value) }, actor, notify, now, &out)
        case .queuePoll(let app, let roomId, let key, let actor): return try queuePoll(app, roomId, key, actor, now, &out)
        case .queueDrop(let app, let roomId, let actor): return try queueDrop(app, roomId, actor, now, &out)
        case .sendMessage(let app, let roomId, let sender, let kind, let content, let options):
            return try sendMessage(app, roomId, sender, kind, content, options ?? MessageOptions(), now, &out)
        case .editMessageList(let app, let list, let add, let entries): return try editMessageList(app, list, add: add, entries, now, &out)
        case .setProtectedSenders(let app, let roomId, let add, let users): return try setProtectedSenders(app, roomId, add: add, users, now, &out)
        case .setDistribution(let app, let roomId, let stopped): return try setDistribution(app, roomId, stopped: stopped, now, &out)
        case .recallMessage(let app, let roomId, let messageId, let options, let actor):
            return try recallMessage(app, roomId, messageId, options, actor, now, &out)
        case .editSensitiveWords(let app, let add, let remove): return try editSensitiveWords(app, add: add, remove: remove, now, &out)
        case .setMemberTags(let app, let roomId, let userId, let tags, let notifyTargetTags):
            return try setMemberTags(app, roomId, userId, tags, notifyTargetTags: notifyTargetTags, now, &out)
        case .sendToRooms(let app, let roomIds, let sender, let kind, let content, let options):
            return try sendToRooms(app, roomIds, sender, kind, content, options ?? MessageOptions(), now, &out)
        case .broadcast(let app, let sender, let kind, let content, let options):
            return try broadcast(app, sender, kind, content, options ?? MessageOptions(), now, &out)
        case .queueBatchOffer(let app, let roomId, let items): return try queueBatchOffer(app, roomId, items, now, &out)
        case .updateMemberInfo(let app, let roomId, let userId, let nickname, let avatar, let ext, let save, let notify):
            return try updateMemberInfo(app, roomId, userId, nickname: nickname, avatar: avatar, ext: ext, save: save, notify: notify, now, &out)
        case .tagMute(let app, let roomId, let tag, let seconds, let notify, let targets, let actor):
            return try tagMute(app, roomId, tag, seconds: seconds, notify: notify, notifyTargetTags: targets, actor, now, &out)
        case .createGroup(let app, let groupId, let name, let creator): return try createGroup(app, groupId, name: name, creator: creator, now, &out)
        case .dismissGroup(let app, let groupId): return try dismissGroup(app, groupId, now, &out)
        case .renameGroup(let app, let groupId, let name): return try renameGroup(app, groupId, name: name, now, &out)
        case .joinGroup(let app, let groupId, let users): return try joinGroup(app, groupId, users, now, &out)
        case .quitGroup(let app, let groupId, let users): return try quitGroup(app, groupId, users, now, &out)
        case .createChannel(let app, let groupId, let channelId, let type): return try createChannel(app, groupId, channelId, type, now, &out)
        case .changeChannelType(let app, let groupId, let channelId, let type): return try changeChannelType(app, groupId, channelId, type, now, &out)
        case .deleteChannel(let app, let groupId, let channelId): return try deleteChannel(app, groupId, channelId, now, &out)
        case .addPrivateMembers(let app, let groupId, let channelId, let users): return try addPrivateMembers(app, groupId, channelId, users, now, &out)
        case .removePrivateMembers(let app, let groupId, let channelId, let users):
            return try removePrivateMembers(app, groupId, channelId, users, now, &out)
        case .sendCommunityMessage(let app, let groupIds, let channelId, let draft, let actor):
            return try sendCommunityMessage(app, groupIds, channelId, draft, actor, now, &out)
        case .community(let app, let groupId, let change, let actor): return try changeCommunity(app, groupId, change, actor, now, &out)
        case .createUserGroups(let app, let groupId, let ids): return try createUserGroups(app, groupId, ids, now, &out)
        case .deleteUserGroups(let app, let groupId, let ids): return try deleteUserGroups(app, groupId, ids, now, &out)
        case .addUserGroupMembers(let app, let groupId, let userGroupId, let users):
            return try addUserGroupMembers(app, groupId, userGroupId, users, now, &out)
        case .removeUserGroupMembers(let app, let groupId, let userGroupId, let users):
            return try removeUserGroupMembers(app, groupId, userGroupId, users, now, &out)
        case .bindUserGroups(let app, let groupId, let channelId, let ids): return try bindUserGroups(app, groupId, channelId, ids, now, &out)
        case .unbindUserGroups(let app, let groupId, let channelId, let ids): return try unbindUserGroups(app, groupId, channelId, ids, now, &out)
        case .setConversationStatus(let app, let user, let key, let pinned, let level, let actor):
            return try setConversationStatus(app, user, key, pinned: pinned, level: level, actor, now, &out)
        case .setConversationTypeLevel(let app, let user, let type, let level): return try setConversationTypeLevel(app, user, type, level, &out)
        case .setGroupNotificationLevel(let app, let groupId, let channelId, let level):
            return try setGroupLevel(app, groupId, channelId: channelId, level, &out)
        case .via(let surface, let inner):
            // MO-8: the audit entry the inner command records names the surface.
            let outer = auditSurface
            auditSurface = surface
            defer { auditSurface = outer }
            return try perform(inner, now: now, &out)
        }
    }

    /// The client session that issues a command, if one does (presence commands included): the
    /// engine keeps a session's commands in order around the before-send hook (PX-4).
    public static func issuingSession(_ command: Command) -> SessionID? {
        switch command {
        case .connect(let s, _, _, _, _), .disconnect(let s), .join(let s, _, _, _), .leave(let s, _), .leaveAll(let s),
             .switchRoom(let s, _, _, _, _):
            return s
        default:
            return writingSession(command)
        }
    }

    /// The session a command changes state for, if a client's session issues it: every command but
    /// the presence ones (connect, join, leave, switch: joining, leaving and reading stay open to
    /// anonymous members, NIM-3) and the app server's. The switch has no default, so a new command
    /// must be classified here.
    static func writingSession(_ command: Command) -> SessionID? {
        switch command {
        case .updateMyInfo(let s, _, _, _, _, _):
            return s
        case .sendMessage(_, _, let sender, _, _, _):
            if case .session(let s) = sender { return s }
            return nil
        case .updateRoom(_, _, _, let actor, _), .setRoomOpen(_, _, _, let actor, _),
             .block(_, _, _, _, let actor, _, _), .unblock(_, _, _, let actor, _, _),
             .mute(_, _, _, _, let actor, _, _), .unmute(_, _, _, _, let actor, _, _),
             .setRoomMuted(_, _, _, let actor, _, _), .setRole(_, _, _, _, let actor, _), .kick(_, _, _, let actor, _),
             .setAttributes(_, _, _, _, _, let actor), .removeAttributes(_, _, _, let actor),
             .queueOffer(_, _, _, _, _, let actor), .queueBatchUpdate(_, _, _, let actor, _),
             .queuePoll(_, _, _, let actor), .queueDrop(_, _, let actor),
             .setConversationStatus(_, _, _, _, _, let actor), .recallMessage(_, _, _, _, let actor),
             .sendCommunityMessage(_, _, _, _, let actor), .community(_, _, _, let actor):
            return actor.session
        case .configureApp, .updateAppSettings, .connect, .disconnect, .join, .leave, .leaveAll, .switchRoom,
             .createRoom, .destroyRooms, .addToAllowlist, .removeFromAllowlist, .globalMute, .globalUnmute,
             .createGroup, .dismissGroup, .joinGroup, .quitGroup, .createChannel, .changeChannelType, .deleteChannel,
             .addPrivateMembers, .removePrivateMembers, .setConversationTypeLevel, .setGroupNotificationLevel,
             .editMessageList, .setProtectedSenders, .setDistribution, .setMemberTags, .sendToRooms, .broadcast,
             .queueBatchOffer, .updateMemberInfo, .editSensitiveWords, .renameGroup, .createUserGroups, .deleteUserGroups,
             .addUserGroupMembers, .removeUserGroupMembers, .bindUserGroups, .unbindUserGroups:
            return nil
        case .tagMute(_, _, _, _, _, _, let actor):
            return actor.session
        case .via(_, let inner):
            return writingSession(inner)
        }
    }

    // MARK: Look-ups

    func app(_ key: String) throws(ChatError) -> AppState {
        guard let a = apps[key] else { throw ChatError(.unknownApp, "unknown app", field: "appKey") }
        return a
    }

    func room(_ app: AppState, _ roomId: String) throws(ChatError) -> Room {
        guard let r = app.rooms[roomId] else {
            // An id no room can have is bad input, not a missing room.
            try Validate.identifier(roomId, field: "roomId", maxBytes: Limits.maxRoomIdBytes)
            throw ChatError(.roomNotFound, "room \(roomId) does not exist", field: "roomId")
        }
        return r
    }

    func session(_ id: SessionID) throws(ChatError) -> Session {
        guard let s = sessions[id] else { throw ChatError(.unknownSession, "unknown session", field: "session") }
        return s
    }

    /// The room and the acting user for an operation by `actor` ("" for the app server).
    /// A client actor must be in the room.
    func resolve(_ appKey: String, _ roomId: String, _ actor: Actor) throws(ChatError) -> (AppState, Room, String?) {
        if case .session(let sid) = actor {
            let s = try session(sid)
            guard s.app == appKey else { throw ChatError(.unknownSession, "session belongs to another app", field: "session") }
            let a = try app(appKey)
            let r = try room(a, roomId)
            guard r.members[s.userId]?.sessions.contains(sid) == true else {
                throw ChatError(.notInRoom, "you are not in room \(roomId)", field: "roomId")
            }
            return (a, r, s.userId)
        }
        if case .account(let user) = actor {
            // MO-7: the account's role in the room decides, as for its client.
            try Validate.userId(user, field: "operator")
            let a = try app(appKey)
            return (a, try room(a, roomId), user)
        }
        let a = try app(appKey)
        return (a, try room(a, roomId), nil)
    }

    func memberInfo(_ room: Room, _ user: String, now: Int64) -> MemberInfo {
        memberInfo(room, user, member: room.members[user], now: now)
    }

    /// The same, when the caller already holds the member record (saves a look-up).
    func memberInfo(_ room: Room, _ user: String, member m: Member?, now: Int64) -> MemberInfo {
        let tempUntil = room.tempMutes.isEmpty ? nil : room.tempMutes[user].flatMap { $0 > now ? $0 : nil }
        return MemberInfo(
            userId: user, nickname: m?.nickname ?? "", avatar: m?.avatar ?? "", ext: m?.ext ?? "",
            type: room.type(of: user, member: m, now: now), isMuted: room.isPermanentlyMuted(user), isTempMuted: tempUntil != nil,
            tempMuteRemainingSeconds: tempUntil.map { ($0 - now + 999) / 1000 } ?? 0,
            isBlocklisted: room.isBlocked(user, now: now), isOnline: m?.isOnline ?? false, enterTime: m?.enterTime ?? 0,
            tags: m?.tags ?? [])
    }

    func roomInfo(_ room: Room) -> RoomInfo {
        RoomInfo(roomId: room.key.roomId, name: room.name, announcement: room.announcement, creator: room.creator, ext: room.ext,
                 broadcastUrl: room.broadcastUrl, onlineUserCount: room.memberCount, queueModificationLevel: room.queueModificationLevel,
                 muted: room.muted, open: room.open, createdAt: room.createdAt, destroyPolicy: room.destroyPolicy,
                 keepAlive: room.keepAlive, multiDevice: room.multiDevice, enterExitNotifications: room.enterExitNotifications,
                 epoch: room.epoch, distributionStopped: room.distributionStopped)
    }

    func record(_ room: Room) -> RoomRecord {
        RoomRecord(key: room.key, name: room.name, announcement: room.announcement, ext: room.ext, broadcastUrl: room.broadcastUrl,
                   creator: room.creator, queueModificationLevel: room.queueModificationLevel, destroyPolicy: room.destroyPolicy,
                   keepAlive: room.keepAlive, multiDevice: room.multiDevice, muted: room.muted, open: room.open,
                   enterExitNotifications: room.enterExitNotifications, queueLimit: room.queueLimit, createdAt: room.createdAt,
                   epoch: room.epoch, lastActivity: room.lastActivity, protectedSenders: room.protectedSenders,
                   distributionStopped: room.distributionStopped, tagMutes: room.tagMutes)
    }

    // MARK: Member bookkeeping

    /// Re-derives a user's membership after any change to role, moderation or presence: keeps the
    /// fixed-member index, creates or drops the record (a guest is a member only while online),
    /// and emits the durable change.
    func refresh(_ room: Room, _ user: String, now: Int64, _ out: inout Outcome) {
        let member = room.members[user]
        let fixedNow = room.type(of: user, member: member, now: now).isFixed
        if fixedNow {
            let m = member ?? Member(userId: user)
            if member == nil { room.members[user] = m }
            room.fixed.append(user)
            out.mutations.append(.putMember(room.key, MemberRecord(userId: user, role: m.role, nickname: m.nickname, avatar: m.avatar, ext: m.ext)))
        } else {
            if !room.fixed.isEmpty && room.fixed.remove(user) {
                out.mutations.append(.deleteMember(room.key, user))
            }
            if let m = member, !m.isOnline { room.members[user] = nil }
        }
    }

    /// Would making these users fixed exceed the 1000 fixed members of NIM-12?
    func checkFixedCapacity(_ room: Room, adding users: [String], now: Int64) throws(ChatError) {
        let newcomers = Set(users).filter { !room.isFixed($0, now: now) }.count
        if room.fixed.count + newcomers > Limits.maxFixedMembers {
            throw ChatError(.limitExceeded, "a room has at most \(Limits.maxFixedMembers) fixed members", field: "userIds")
        }
    }

    // MARK: Apps

    private func configureApp(_ key: String, _ settings: AppSettings, _ out: inout Outcome) throws(ChatError) -> Reply {
        try Validate.identifier(key, field: "appKey", maxBytes: 64)
        guard settings.maxRoomsPerUser >= 1, settings.maxRooms >= 0, settings.historyLimitPerRoom >= 1,
              settings.historyRetentionMilliseconds > 0, settings.maxMessageBytes >= 1, settings.defaultQueueLimit >= 1 else {
            throw .invalid("settings", "settings must be positive")
        }
        var settings = settings
        if let origins = settings.allowedOrigins {
            try SettingsLimits.validateAllowedOrigins(origins)
            if origins.isEmpty { settings.allowedOrigins = nil }
        }
        if let existing = apps[key] {
            existing.settings = settings
        } else {
            apps[key] = AppState(key: key, settings: settings)
        }
        out.mutations.append(.putApp(key, settings))
        return .done
    }

    /// Merges a partial change into the app's settings after validating every present field; a
    /// bad field refuses the whole patch. An unchanged result writes nothing.
    private func updateAppSettings(_ key: String, _ patch: AppSettingsPatch, _ out: inout Outcome) throws(ChatError) -> Reply {
        let app = try app(key)
        let settings = try patch.applied(to: app.settings)
        if settings != app.settings {
            app.settings = settings
            out.mutations.append(.putApp(key, settings))
        }
        return .appSettings(settings)
    }

    public func appSettings(_ key: String) -> AppSettings? { apps[key]?.settings }
    public var appKeys: [String] { apps.keys.sorted() }
}

extension Outcome {
    mutating func deliver(_ event: ChatEvent, to audience: Audience) {
        effects.append(.deliver(event, audience))
    }
}

