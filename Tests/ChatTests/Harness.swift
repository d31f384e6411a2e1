import Testing
@testable import Chat

/// Drives the domain like the gateway does: applies commands, keeps room indexes from the
/// `joined`/`left` effects only, and resolves every delivery's audience to the sessions that
/// would receive it. Tests then assert on each session's inbox — including who got nothing.
final class Harness {
    final class Counter {
        var n = 0
    }
    let ids = Counter()
    let domain: ChatDomain
    let app = "app"
    var now: Int64 = 1_800_000_000_000
    private var nextSession: UInt64 = 1
    private(set) var roomIndex: [RoomKey: [SessionID]] = [:]
    private(set) var connected: [SessionID: String] = [:]
    private(set) var inbox: [SessionID: [ChatEvent]] = [:]
    private(set) var lastOutcome = Outcome()

    init(_ configure: (inout AppSettings) -> Void = { _ in }) {
        let counter = ids
        domain = ChatDomain(makeID: {
            counter.n += 1
            return "id\(counter.n)"
        })
        var settings = AppSettings()
        configure(&settings)
        _ = domain.apply(.configureApp(app: app, settings), now: now)
    }

    func key(_ room: String) -> RoomKey { RoomKey(app: app, roomId: room) }

    /// AU-4: sessions that joined a room for member counts only, as the hubs keep them.
    var countsOnly: Set<TagKey> = []

    @discardableResult
    func run(_ command: Command) -> Outcome {
        if case .join(let s, let roomId, let profile, _) = command {
            let k = TagKey(session: s, room: key(roomId))
            if profile.memberCountsOnly == true { countsOnly.insert(k) } else { countsOnly.remove(k) }
        }
        let out = domain.apply(command, now: now)
        process(out)
        return out
    }

    /// AU-1: each session's member tags per room, as the hubs keep them.
    struct TagKey: Hashable {
        let session: SessionID
        let room: RoomKey
    }
    var tagIndex: [TagKey: [String]] = [:]

    func process(_ out: Outcome) {
        lastOutcome = out
        for effect in out.effects {
            switch effect {
            case .joined(let s, let k): roomIndex[k, default: []].append(s)
            case .left(let s, let k):
                roomIndex[k]?.removeAll { $0 == s }
                tagIndex[TagKey(session: s, room: k)] = nil
            case .tagged(let list, let k, let tags):
                for s in list { tagIndex[TagKey(session: s, room: k)] = tags }
            case .deliver(let event, let audience):
                for s in recipients(audience) { inbox[s, default: []].append(event) }
            }
        }
    }

    func recipients(_ audience: Audience) -> [SessionID] {
        switch audience {
        case .room(let k): return roomIndex[k] ?? []
        case .roomExceptUsers(let k, let users): return (roomIndex[k] ?? []).filter { !users.contains(connected[$0] ?? "") }
        case .roomExceptSession(let k, let s): return (roomIndex[k] ?? []).filter { $0 != s }
        case .users(_, let users): return connected.filter { users.contains($0.value) }.map(\.key).sorted()
        case .sessions(let list): return list.filter { connected[$0] != nil }
        case .roomUsers(let k, let users, let except):
            return (roomIndex[k] ?? []).filter { users.contains(connected[$0] ?? "") && !except.excludes($0, user: connected[$0] ?? "") }
        case .roomTagged(let k, let tags, let except):
            return (roomIndex[k] ?? []).filter {
                tags.matches(tagIndex[TagKey(session: $0, room: k)] ?? []) && !except.excludes($0, user: connected[$0] ?? "")
            }
        case .roomMemberDetail(let k, let except, let tags):
            return (roomIndex[k] ?? []).filter {
                !except.excludes($0, user: connected[$0] ?? "") && !countsOnly.contains(TagKey(session: $0, room: k))
                    && (tags?.matches(tagIndex[TagKey(session: $0, room: k)] ?? []) ?? true)
            }
        case .roomCountsOnly(let k):
            return (roomIndex[k] ?? []).filter { countsOnly.contains(TagKey(session: $0, room: k)) }
        }
    }

    /// Connects a user's device; returns its session.
    @discardableResult
    func connect(_ user: String, device: String = "phone") -> SessionID {
        let s = SessionID(nextSession)
        nextSession += 1
        let out = run(.connect(s, app: app, userId: user, deviceId: device, anonymous: nil))
        guard case .success = out.reply else { fatalError("connect failed: \(out.reply)") }
        connected[s] = user
        return s
    }

    @discardableResult
    func connectAnonymous(nickname: String = "Anon", avatar: String = "a.png") -> (SessionID, Outcome) {
        let s = SessionID(nextSession)
        nextSession += 1
        let out = run(.connect(s, app: app, userId: nil, deviceId: "web", anonymous: AnonymousProfile(nickname: nickname, avatar: avatar)))
        if case .success(.session(let user)) = out.reply { connected[s] = user }
        return (s, out)
    }

    func disconnect(_ s: SessionID) {
        run(.disconnect(s))
        connected[s] = nil
    }

    @discardableResult
    func createRoom(_ id: String, _ configure: (inout RoomConfig) -> Void = { _ in }) -> Outcome {
        var c = RoomConfig(roomId: id)
        configure(&c)
        return run(.createRoom(app: app, c))
    }

    @discardableResult
    func join(_ s: SessionID, _ room: String, _ profile: EnterProfile = EnterProfile(), mode: JoinMode = .join) -> Outcome {
        run(.join(s, roomId: room, profile, mode))
    }

    @discardableResult
    func leave(_ s: SessionID, _ room: String) -> Outcome {
        run(.leave(s, roomId: room))
    }

    func advance(seconds: Int64) { now += seconds * 1000 }

    @discardableResult
    func tick() -> Outcome {
        let out = domain.tick(now: now)
        process(out)
        return out
    }

    func received(_ s: SessionID) -> [ChatEvent] { inbox[s] ?? [] }

    func clearInboxes() { inbox = [:] }

    func query(_ q: Query) -> Reply? {
        if case .success(let r) = domain.query(q, now: now) { return r }
        return nil
    }

    /// Members present in a room, from the domain.
    func present(_ room: String) -> [String] {
        guard case .members(let list, _)? = query(.members(app: app, roomId: room, .present, .ascending, limit: 500, after: nil)) else { return [] }
        return list.map(\.userId)
    }

    func memberType(_ room: String, _ user: String) -> MemberType? {
        guard case .members(let list, _)? = query(.membersByIds(app: app, roomId: room, [user])) else { return nil }
        return list.first?.type
    }

    func info(_ room: String, _ user: String) -> MemberInfo? {
        guard case .members(let list, _)? = query(.membersByIds(app: app, roomId: room, [user])) else { return nil }
        return list.first
    }

    /// Everything observable about a room, to prove a refused command changed nothing.
    func fingerprint(_ room: String) -> String {
        var parts: [String] = []
        for q: Query in [.room(app: app, roomId: room),
                         .members(app: app, roomId: room, .present, .ascending, limit: 500, after: nil),
                         .members(app: app, roomId: room, .regular, .ascending, limit: 500, after: nil),
                         .blocks(app: app, roomId: room), .mutes(app: app, roomId: room), .allowlist(app: app, roomId: room),
                         .globalMutes(app: app), .attributes(app: app, roomId: room, keys: []), .queue(app: app, roomId: room)] {
            parts.append(String(describing: domain.query(q, now: now)))
        }
        return parts.joined(separator: "|")
    }
}

extension ChatEvent {
    var roomStatus: RoomStatusEvent? { if case .roomStatus(let e) = self { return e } else { return nil } }
    var memberChanged: MemberChangedEvent? { if case .memberChanged(let e) = self { return e } else { return nil } }
    var multiLoginSync: MultiLoginSyncEvent? { if case .multiLoginSync(let e) = self { return e } else { return nil } }
    var block: BlockEvent? { if case .block(let e) = self { return e } else { return nil } }
    var ban: BanEvent? { if case .ban(let e) = self { return e } else { return nil } }
    var notification: NotificationEvent? { if case .notification(let e) = self { return e } else { return nil } }
    var kicked: KickedEvent? { if case .kicked(let e) = self { return e } else { return nil } }
    var message: ChatMessage? { if case .message(let e) = self { return e } else { return nil } }
    var attributes: AttributesEvent? { if case .attributesChanged(let e) = self { return e } else { return nil } }
    var membersSummary: MembersSummaryEvent? { if case .membersSummary(let e) = self { return e } else { return nil } }
}

extension Array where Element == ChatEvent {
    var statuses: [RoomStatusEvent] { compactMap(\.roomStatus) }
    var memberChanges: [MemberChangedEvent] { compactMap(\.memberChanged) }
    var syncs: [MultiLoginSyncEvent] { compactMap(\.multiLoginSync) }
    var blocks: [BlockEvent] { compactMap(\.block) }
    var bans: [BanEvent] { compactMap(\.ban) }
    var notifications: [NotificationEvent] { compactMap(\.notification) }
    var kicks: [KickedEvent] { compactMap(\.kicked) }
    var messages: [ChatMessage] { compactMap(\.message) }
    var attributeChanges: [AttributesEvent] { compactMap(\.attributes) }
    var summaries: [MembersSummaryEvent] { compactMap(\.membersSummary) }
}

extension Outcome {
    var error: ChatError? { if case .failure(let e) = reply { return e } else { return nil } }
    var succeeded: Bool { if case .success = reply { return true } else { return false } }
}

extension Result where Failure == ChatError {
    var error: ChatError? { if case .failure(let e) = self { return e } else { return nil } }
}
