import Chat
import Engine
import Reactor
import Server
import Wire
import Synchronization

/// One I/O loop's view of the rooms: which of its sessions are in which room, which belong to
/// which user, and a window of each room's recent events for resuming clients (BX-1).
/// Confined to its loop. Updated only from the engine's ordered stream, so indexes and
/// deliveries never disagree.
final class Hub {
    let loopIndex: Int
    /// The node run's incarnation (0 on a single node), in every session id it makes.
    let incarnation: UInt64
    let loop: EventLoop
    /// The gateway's shared state, for this loop's sessions (each reaches it through its hub
    /// rather than keeping a reference of its own).
    let context: GatewayContext
    let resumeWindow: ResumeWindow
    /// TR-1, TR-2: this loop's HTTP event streams and long-poll sessions, by id.
    var clientStreams: [String: ClientStream] = [:]
    /// Connections that have not finished `connect` yet (for the connect timeout).
    var pendingSessions: [ObjectIdentifier: ClientSession] = [:]
    private(set) var sessions: [SessionID: ClientSession] = [:]
    private var rooms: [RoomKey: RoomMembers] = [:]
    /// Each app's users' sessions on this loop, app by app: an entry per user is its id and its
    /// sessions (32 bytes), not the (app, user) pair as well.
    private var users: [String: [String: UserSessions]] = [:]
    private var rings: [RoomKey: EventRing] = [:]
    /// BX-3: sessions watching a room's stream without being members.
    private var observers: [RoomKey: [ClientSession]] = [:]
    private var nextSession: UInt64 = 1
    let clock: @Sendable () -> Int64
    let counters: FanoutCounters
    /// TR-5: the server's write delay (`ServerConfiguration.writeDelay`): only a room that sent a
    /// droppable message within it may have its next ones held (`holdsRoomEvents`).
    var writeDelay: Duration = .zero
    /// The server's output on this loop (nil in process): what `whenWritten` waits for.
    var output: LoopOutput?

    private func userSessions(_ app: String, _ user: String) -> UserSessions? { users[app]?[user] }

    /// The sessions of one room on this loop; each session remembers its position (O(1) removal).
    final class RoomMembers {
        var list: [ClientSession] = []
        /// TR-5: when the room's last droppable event went out on this loop (`holdsRoomEvents`).
        var lastEvent: Instant?
        /// AU-1: the sessions carrying each tag, so a message to a tag visits its members only.
        var byTag: [String: [ObjectIdentifier: ClientSession]] = [:]

        func index(_ s: ClientSession, _ tags: [String]) {
            for t in tags { byTag[t, default: [:]][ObjectIdentifier(s)] = s }
        }

        func unindex(_ s: ClientSession, _ tags: [String]) {
            for t in tags {
                byTag[t]?[ObjectIdentifier(s)] = nil
                if byTag[t]?.isEmpty == true { byTag[t] = nil }
            }
        }
    }

    /// QS-3: how much a connection may hold before it loses droppable events.
    let marks: DropMarks
    /// TR-5: the node's room aliases (one table for every loop).
    let aliases: RoomAliases

    init(loopIndex: Int, incarnation: UInt64 = 0, loop: EventLoop, context: GatewayContext, resumeWindow: ResumeWindow,
         clock: @escaping @Sendable () -> Int64, counters: FanoutCounters = FanoutCounters(), marks: DropMarks = DropMarks(),
         aliases: RoomAliases = RoomAliases()) {
        self.context = context
        self.marks = marks
        self.aliases = aliases
        self.incarnation = incarnation
        self.counters = counters
        self.loopIndex = loopIndex
        self.loop = loop
        self.resumeWindow = resumeWindow
        self.clock = clock
    }

    /// A session id unique across loops and, in a cluster, across nodes and their runs: the
    /// node run's incarnation and the loop index in the top bits.
    func makeSessionID() -> SessionID {
        defer { nextSession += 1 }
        return SessionID.make(incarnation: incarnation, loop: loopIndex, counter: nextSession)
    }

    func register(_ s: ClientSession) {
        sessions[s.id] = s
        if users[s.app]?[s.userId] == nil { users[s.app, default: [:]][s.userId] = UserSessions(s) } else { users[s.app]![s.userId]!.append(s) }
    }

    /// Forgets a closed session at once (the engine's `left` effects for it come later).
    func unregister(_ s: ClientSession) {
        guard sessions.removeValue(forKey: s.id) != nil else { return }
        for room in s.joinedRooms { removeFromRoom(s, room) }
        for roomId in s.observing { unobserve(s, RoomKey(app: s.app, roomId: roomId)) }
        users[s.app]?[s.userId]?.remove(s)
        if users[s.app]?[s.userId]?.isEmpty == true {
            users[s.app]![s.userId] = nil
            if users[s.app]!.isEmpty { users[s.app] = nil }
        }
    }

    var sessionCount: Int { sessions.count }

    /// Once a second: connect timeouts and token expiry of this loop's sessions.
    func tick() {
        let now = clock()
        for s in Array(pendingSessions.values) { s.tick(now: now) }
        for s in Array(sessions.values) { s.tick(now: now) }
        if !clientStreams.isEmpty { for s in Array(clientStreams.values) { s.tick(now: now) } }
    }

    /// TR-1: at the heartbeat interval, a comment on each event stream that sent nothing since.
    func heartbeat() {
        for s in Array(clientStreams.values) { s.heartbeat() }
    }

    // MARK: Connections (PX-5)

    /// A user's connections on this loop.
    func connections(app: String, user: String) -> [ConnectionInfo] {
        (userSessions(app, user)?.all ?? []).map {
            ConnectionInfo(sessionId: String($0.id.raw), device: $0.device, since: $0.openedAt, rooms: $0.joinedRoomIds.sorted())
        }
    }

    /// Closes a user's connections on this loop (those of `device` only, when given); how many.
    func disconnect(app: String, user: String, device: String?, code: CloseCode, reason: String) -> Int {
        let matching = (userSessions(app, user)?.all ?? []).filter { device == nil || $0.device == device }
        for s in matching { s.close(code, reason) }
        return matching.count
    }

    /// TR-5: the last block transcoded for this loop's compact sessions.
    /// Confined to the loop, so the per-delivery access skips the dynamic exclusivity check.
    @exclusivity(unchecked) var compactCache = CompactFrameCache()

    // MARK: The engine's stream

    /// Runs `body` once what this loop's connections have queued so far is written (at once in
    /// process).
    func whenWritten(_ body: @escaping () -> Void) {
        if let output { output.whenWritten(body) } else { body() }
    }

    /// Hands a committed batch to this loop's sessions; returns how many deliveries it made.
    @discardableResult
    func apply(_ items: [Published]) -> Int {
        var events = 0
        var sent = 0
        defer {
            // Every hub sees every event: the first one counts them.
            if loopIndex == 0 && events > 0 { counters.events.add(events, ordering: .relaxed) }
            if sent > 0 { counters.deliveries.add(sent, ordering: .relaxed) }
        }
        var i = 0
        while i < items.count {
            let item = items[i]
            i += 1
            switch item {
            case .deliver(let frame, let audience, let offset, let epoch, let lane):
                guard let room = audience.room else {
                    // Events to users or sessions are never held: they are not a room's stream.
                    events += 1
                    sent += deliver(frame, to: audience, room: nil, alias: nil, hold: false)
                    continue
                }
                // QS-5: a transient message is outside the stream: no resume window for it.
                let inStream = lane != .transient
                if inStream { ring(room, epoch: epoch).append(offset: offset, frame: frame, audience: audience, lane: lane, at: clock(), window: resumeWindow) }
                events += 1
                // Consecutive events of one batch for the same audience and lane (a room's messages
                // committed together) go out as one block: each recipient's queue takes one
                // reference instead of one per event, and the bytes on the wire are the same.
                var run: [ByteBlock] = []
                var bytes = frame.count
                var last = offset
                while i < items.count, case .deliver(let f, let a, let o, let e, let l) = items[i], a == audience, l == lane,
                      bytes + f.count <= Self.maxMergedBytes {
                    if inStream { ring(room, epoch: e).append(offset: o, frame: f, audience: a, lane: l, at: clock(), window: resumeWindow) }
                    if run.isEmpty { run.append(frame) }
                    run.append(f)
                    bytes += f.count
                    last = o
                    events += 1
                    i += 1
                }
                let block = run.isEmpty ? frame : ByteBlock.concatenating(run)
                let merged = max(run.count, 1)
                let drop = lane.droppable ? Drop(epoch: epoch, lane: lane, first: inStream ? offset : 0, last: inStream ? last : 0, count: merged) : nil
                // TR-5: the room's alias, for the compact connections that were told it.
                let alias = aliases.alias(of: room)
                // TR-5: a droppable event of a room busy with them on this loop may wait for the
                // write delay (events that are never dropped are never held, nor counted).
                let hold = drop != nil && holdsRoomEvents(room)
                sent += deliver(block, to: audience, room: room, alias: alias, drop: drop, hold: hold) * merged
                if !observers.isEmpty, let watching = observers[room] {
                    // Observers see the room's whole stream; one that is also a member already
                    // had it by the member rules.
                    for s in watching where s.roomSlot(room) == nil && offer(block, to: s, room: room, alias: alias, drop: drop, hold: hold) {
                        sent += merged
                    }
                }
            case .joined(let sid, let room, let epoch, let offset):
                guard let s = sessions[sid] else { continue }
                addToRoom(s, room)
                if let request = s.takePendingResume(room.roomId) {
                    let outcome = resume(s, room, epoch: epoch, offset: offset, from: request)
                    // TR-1: an HTTP stream's cursor holds the room from here on, replayed or not.
                    s.connection?.joinedRoom(room.roomId, epoch: epoch, offset: offset)
                    s.sendResumeResult(roomId: room.roomId, resumed: outcome.resumed, replayed: outcome.replayed, reason: outcome.reason)
                } else {
                    s.connection?.joinedRoom(room.roomId, epoch: epoch, offset: offset)
                    if let n = s.takePendingRewind(room.roomId) { rewind(s, room, epoch: epoch, count: n) }
                }
            case .redact(let room, let epoch, let offset, let frame):
                rings[room]?.redact(epoch: epoch, offset: offset, frame: frame)
            case .roomGone(let room):
                rings[room] = nil
                for s in observers.removeValue(forKey: room) ?? [] { s.observing.remove(room.roomId) }
            case .left(let sid, let room):
                if let s = sessions[sid] {
                    removeFromRoom(s, room)
                    s.forgetAlias(of: room)
                    s.connection?.leftRoom(room.roomId)
                }
            case .tagged(let list, let room, let tags):
                for sid in list {
                    guard let s = sessions[sid] else { continue }
                    if s.roomSlot(room) != nil, let members = rooms[room] {
                        members.unindex(s, s.tags(in: room))
                        members.index(s, tags)
                    }
                    s.setTags(tags, in: room)
                }
            case .reply(let sid, let frame):
                sessions[sid]?.sendAnswer(frame)
            case .closeAll(let code, let reason):
                for session in Array(sessions.values) + Array(pendingSessions.values) { session.closeRaw(code, reason) }
            case .disconnectUser(let app, let user, let device, let code, let reason):
                // PX-5 in a cluster: every node closes its own connections of the user.
                _ = disconnect(app: app, user: user, device: device, code: CloseCode(rawValue: code) ?? .disconnectedByApp, reason: reason)
            }
        }
        return sent
    }

    /// Fills the resume windows with the events kept from before a restart (BX-1).
    func restore(_ items: [Published], at times: [Int64]) {
        for (item, at) in zip(items, times) {
            guard case .deliver(let frame, let audience, let offset, let epoch, let lane) = item, let room = audience.room else { continue }
            ring(room, epoch: epoch).append(offset: offset, frame: frame, audience: audience, lane: lane, at: at, window: resumeWindow)
        }
    }

    /// The largest block consecutive events are merged into (a merged block counts whole against
    /// a connection's output bound, so it stays far below it).
    static let maxMergedBytes = 64 * 1024

    /// What a slow connection may lose of a block (QS-3): its lane, and the stream offsets and
    /// number of the events in it (offsets 0 for transient messages).
    struct Drop {
        let epoch: String
        let lane: Lane
        let first: Int64
        let last: Int64
        let count: Int
    }

    /// TR-5: whether the room had a droppable event (a normal, low or transient message) on this
    /// loop within the write delay, so this one may wait to be written with the ones after it;
    /// notes this one. A room with fewer such messages than one per delay is never held, whatever
    /// the loop's other rooms do.
    private func holdsRoomEvents(_ room: RoomKey) -> Bool {
        guard writeDelay > .zero, let members = rooms[room] else { return false }
        let now = loop.now
        defer { members.lastEvent = now }
        guard let last = members.lastEvent else { return false }
        return now - last < writeDelay
    }

    /// Hands `frame` to one session, unless it is further behind than the lane's mark (then the
    /// session counts what it lost, for its `room.gap`). False: dropped. `hold`: the event may
    /// wait for the write delay (`holdsRoomEvents`; never one that is never dropped, high
    /// priority or system).
    @inline(__always)
    private func offer(_ frame: ByteBlock, to s: ClientSession, room: RoomKey?, alias: CompactEncoding.RoomAlias?, drop: Drop?,
                       hold: Bool) -> Bool {
        if let drop, let room, s.backlogBytes > marks.limit(drop.lane) {
            s.recordDrop(room, drop)
            counters.dropped(drop.lane, drop.count)
            return false
        }
        if s.hasGaps, let room { flushGapIfCaughtUp(s, room) }
        s.deliver(frame, alias: alias, hold: hold)
        return true
    }

    /// QS-3: a session's pending gap in the room goes out before the room's next event once the
    /// connection has caught up (its queue at or below the lowest mark), or once the gap has
    /// waited a tick (`gapsDue`). While it stays behind, the losses of a second are counted into
    /// one gap instead of a gap before each event it still gets (high-priority messages, room
    /// events): a reader a whole class behind would otherwise get a gap for every one of them,
    /// twice the frames it cannot keep up with.
    @inline(__always)
    private func flushGapIfCaughtUp(_ s: ClientSession, _ room: RoomKey) {
        if s.backlogBytes <= marks.limit(.low) { s.flushGap(room) } else if s.gapsDue { s.flushGapIfDue(room) }
    }

    /// Sends `frame` to the audience's sessions on this loop; returns how many it reached.
    /// `alias`: the room's (TR-5), for members that were told it; events to users or sessions
    /// (not by membership) keep the room id. `hold`: the event may wait for the write delay.
    private func deliver(_ frame: ByteBlock, to audience: Audience, room: RoomKey?, alias: CompactEncoding.RoomAlias?, drop: Drop? = nil,
                         hold: Bool) -> Int {
        var n = 0
        switch audience {
        case .room(let k):
            guard let members = rooms[k] else { return 0 }
            if drop == nil {
                // Never dropped: only a pending gap of the room may go out first.
                for s in members.list {
                    if s.hasGaps, let room { flushGapIfCaughtUp(s, room) }
                    s.deliver(frame, alias: alias, hold: hold)
                }
                return members.list.count
            }
            for s in members.list where offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) { n += 1 }
        case .roomExceptUsers(let k, let excluded):
            guard let members = rooms[k] else { return 0 }
            for s in members.list where !excluded.contains(s.userId) && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) { n += 1 }
        case .roomExceptSession(let k, let sid):
            guard let members = rooms[k] else { return 0 }
            for s in members.list where s.id != sid && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) { n += 1 }
        case .roomUsers(let k, let users, let except):
            // AU-2: the addressed members only.
            guard let members = rooms[k] else { return 0 }
            let wanted = Set(users)
            for s in members.list where wanted.contains(s.userId) && !except.excludes(s.id, user: s.userId)
                && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) {
                n += 1
            }
        case .roomTagged(let k, let tags, let except):
            // AU-1: the members whose tags match.
            guard let members = rooms[k] else { return 0 }
            if !tags.matches([]) {
                // A member without any of the tags it names cannot match: visit the members
                // carrying them only (a member carrying several, once).
                let names = tags.names
                if names.count == 1, case .tag(let t) = tags {
                    for s in (members.byTag[t] ?? [:]).values where !except.excludes(s.id, user: s.userId)
                        && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) {
                        n += 1
                    }
                    return n
                }
                var seen = Set<ObjectIdentifier>()
                for name in names {
                    for (id, s) in members.byTag[name] ?? [:] where seen.insert(id).inserted && tags.matches(s.tags(in: k))
                        && !except.excludes(s.id, user: s.userId) && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) {
                        n += 1
                    }
                }
                return n
            }
            for s in members.list where tags.matches(s.tags(in: k)) && !except.excludes(s.id, user: s.userId)
                && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) {
                n += 1
            }
        case .roomMemberDetail(let k, let except, let tags):
            // AU-4: one member's join or departure: not to connections that asked for counts only.
            guard let members = rooms[k] else { return 0 }
            for s in members.list where !except.excludes(s.id, user: s.userId) && !s.memberCountsOnly(in: k)
                && (tags?.matches(s.tags(in: k)) ?? true) && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) {
                n += 1
            }
        case .roomCountsOnly(let k):
            guard let members = rooms[k] else { return 0 }
            for s in members.list where s.memberCountsOnly(in: k) && offer(frame, to: s, room: room, alias: alias, drop: drop, hold: hold) { n += 1 }
        case .users(let app, let list):
            for u in list {
                userSessions(app, u)?.forEach { s in
                    s.deliver(frame, hold: false)
                    n += 1
                }
            }
        case .sessions(let list):
            for sid in list {
                guard let s = sessions[sid] else { continue }
                s.deliver(frame, hold: false)
                n += 1
            }
        }
        return n
    }

    func observe(_ s: ClientSession, _ room: RoomKey) {
        guard s.observing.insert(room.roomId).inserted else { return }
        observers[room, default: []].append(s)
    }

    func unobserve(_ s: ClientSession, _ room: RoomKey) {
        // (Checked first: a session that never observed is given no box by the removal.)
        guard s.observing.contains(room.roomId), s.observing.remove(room.roomId) != nil else { return }
        s.forgetAlias(of: room)
        observers[room]?.removeAll { $0 === s }
        if observers[room]?.isEmpty == true { observers[room] = nil }
    }

    private func addToRoom(_ s: ClientSession, _ room: RoomKey) {
        guard s.roomSlot(room) == nil else { return }
        let members = rooms[room] ?? {
            let m = RoomMembers()
            rooms[room] = m
            return m
        }()
        s.setRoomSlot(members.list.count, in: room)
        members.list.append(s)
        members.index(s, s.tags(in: room))
    }

    private func removeFromRoom(_ s: ClientSession, _ room: RoomKey) {
        let tags = s.tags(in: room)
        s.setTags([], in: room)
        s.forgetMemberCounts(in: room)
        guard let slot = s.removeRoomSlot(room), let members = rooms[room] else { return }
        members.unindex(s, tags)
        let last = members.list.removeLast()
        if last !== s {
            members.list[slot] = last
            last.setRoomSlot(slot, in: room)
        }
        if members.list.isEmpty { rooms[room] = nil }
    }

    /// Drops resume windows whose newest event has aged out (rooms gone quiet or destroyed).
    func sweepRings() {
        let now = clock()
        rings = rings.filter { $0.value.newestAt.map { now - $0 <= resumeWindow.maxAgeMilliseconds } ?? false }
    }

    var ringCount: Int { rings.count }

    /// The offsets a resume from `offset` would replay (nil: out of the window); for tests.
    func resumableOffsets(_ room: RoomKey, after offset: Int64) -> [Int64]? {
        rings[room]?.entries(after: offset, now: clock(), window: resumeWindow)?.map(\.offset)
    }

    // MARK: Resume (BX-1)

    private func ring(_ room: RoomKey, epoch: String) -> EventRing {
        if let r = rings[room], r.epoch == epoch { return r }
        let r = EventRing(epoch: epoch)
        rings[room] = r
        return r
    }

    /// TR-4: gives a member that just joined the room's last `count` messages it may see, oldest
    /// first, before anything published after its join (as many as the resume window holds).
    private func rewind(_ s: ClientSession, _ room: RoomKey, epoch: String, count: Int) {
        guard let ring = rings[room], ring.epoch == epoch else { return }
        let alias = aliases.alias(of: room)
        for e in ring.lastMessages(count, now: clock(), window: resumeWindow, include: { $0.reaches(s) }) { s.send(e.frame, alias: alias) }
    }

    /// Sends the events a reconnecting client missed; returns what its `room.resume` says.
    private func resume(_ s: ClientSession, _ room: RoomKey, epoch: String, offset current: Int64,
                        from request: ResumeRequest) -> (resumed: Bool, replayed: Int, reason: String?) {
        if request.epoch != epoch {
            // RC-1: the room was destroyed and created again while the client was away.
            s.sendEvent(.roomStatus(RoomStatusEvent(roomId: room.roomId, status: .reset, zimState: .connecting, zimEvent: .success,
                                                    time: clock())))
            return (false, 0, "epochChanged")
        }
        guard request.stream == resumeWindow.stream else { return (false, 0, "serverRestarted") }
        // The client's position is the stream's end: nothing was missed.
        if request.offset == current { return (true, 0, nil) }
        guard let ring = rings[room], ring.epoch == epoch else { return (false, 0, "outOfWindow") }
        guard let entries = ring.entries(after: request.offset, now: clock(), window: resumeWindow) else { return (false, 0, "outOfWindow") }
        var replayed = 0
        let alias = aliases.alias(of: room)
        for e in entries where e.reaches(s) {
            s.send(e.frame, alias: alias)
            replayed += 1
        }
        return (true, replayed, nil)
    }
}

/// One connection of a user, as the directory lists it (PX-5).
struct ConnectionInfo: Sendable {
    let sessionId: String
    let device: String
    let since: Int64
    let rooms: [String]
}

/// Events published and event frames handed to connections, for `/metrics` (the console's
/// charts): one relaxed atomic add per batch per loop, not per delivery. QS-3, QS-7: events a
/// slow connection lost, by lane.
final class FanoutCounters: Sendable {
    let events = Atomic<Int>(0)
    let deliveries = Atomic<Int>(0)
    let droppedNormal = Atomic<Int>(0)
    let droppedLow = Atomic<Int>(0)
    let droppedTransient = Atomic<Int>(0)

    func dropped(_ lane: Lane, _ n: Int) {
        switch lane {
        case .normal: droppedNormal.add(n, ordering: .relaxed)
        case .low: droppedLow.add(n, ordering: .relaxed)
        case .transient: droppedTransient.add(n, ordering: .relaxed)
        case .system, .high: break
        }
    }
}

/// QS-3: the bytes a connection may hold queued before it loses droppable events: normal
/// messages past `soft`, low and transient ones past a quarter of it. High-priority messages and
/// every other event are never dropped; past `--max-outbound-bytes` the connection is closed as a
/// slow consumer (4008) all the same.
struct DropMarks: Sendable {
    var soft = Limits.defaultOutboundSoftBytes

    func limit(_ lane: Lane) -> Int {
        switch lane {
        case .normal: return soft
        case .low, .transient: return soft / Limits.lowMarkFraction
        case .system, .high: return .max
        }
    }
}

/// How much of each room's stream is kept for resuming clients, and the deployment's stream id
/// (kept with the data, so positions stay valid across restarts; another id means other data).
struct ResumeWindow: Sendable {
    var maxEvents = 1024
    var maxAgeMilliseconds: Int64 = 5 * 60_000
    /// Bytes of event frames kept per room (whatever the count), so large messages cannot make a
    /// room's window hold more than this.
    var maxBytes = ResumeWindow.defaultMaxBytes
    var stream: String

    static let defaultMaxBytes = 1 << 20
}

/// A client's last position in a room's stream.
struct ResumeRequest: Sendable, Equatable {
    var epoch: String
    var stream: String
    var offset: Int64
}

/// Recent events of one room (shared frames, so the ring costs pointers, not copies).
final class EventRing {
    struct Entry {
        let offset: Int64
        let at: Int64
        var frame: ByteBlock
        let audience: Audience
        /// Messages travel in a class's lane; every other event in `.system` (TR-4 rewinds messages).
        let lane: Lane

        func reaches(_ s: ClientSession) -> Bool {
            switch audience {
            case .roomExceptUsers(_, let users): return !users.contains(s.userId)
            case .roomExceptSession(_, let sid): return sid != s.id
            case .roomUsers(_, let users, let except): return users.contains(s.userId) && !except.excludes(s.id, user: s.userId)
            case .roomTagged(let k, let tags, let except): return tags.matches(s.tags(in: k)) && !except.excludes(s.id, user: s.userId)
            case .roomMemberDetail(let k, let except, let tags):
                return !except.excludes(s.id, user: s.userId) && !s.memberCountsOnly(in: k) && (tags?.matches(s.tags(in: k)) ?? true)
            case .roomCountsOnly(let k): return s.memberCountsOnly(in: k)
            default: return true
            }
        }
    }
    let epoch: String
    private var entries: [Entry] = []
    private var head = 0
    /// Bytes of the frames from `head` on.
    private var bytes = 0

    init(epoch: String) {
        self.epoch = epoch
    }

    var newestAt: Int64? { entries.last?.at }

    func append(offset: Int64, frame: ByteBlock, audience: Audience, lane: Lane, at: Int64, window: ResumeWindow) {
        entries.append(Entry(offset: offset, at: at, frame: frame, audience: audience, lane: lane))
        bytes += frame.count
        while head < entries.count - 1
                && (entries.count - head > window.maxEvents || bytes > window.maxBytes || at - entries[head].at > window.maxAgeMilliseconds) {
            bytes -= entries[head].frame.count
            head += 1
        }
        if head > 256 && head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
    }

    /// MO-1: the entry at `offset` of this epoch carries `frame` from now on (a recalled message's
    /// tombstone); one that left the window stays gone.
    func redact(epoch: String, offset: Int64, frame: ByteBlock) {
        guard epoch == self.epoch else { return }
        var lo = head
        var hi = entries.count - 1
        while lo <= hi {
            let mid = (lo + hi) / 2
            let o = entries[mid].offset
            if o == offset {
                bytes += frame.count - entries[mid].frame.count
                entries[mid].frame = frame
                return
            }
            if o < offset { lo = mid + 1 } else { hi = mid - 1 }
        }
    }

    /// The entries after `offset`, or nil if some of them have already left the window (or the
    /// offset is ahead of this stream).
    func entries(after offset: Int64, now: Int64, window: ResumeWindow) -> [Entry]? {
        dropAged(now: now, window: window)
        guard let last = entries.last else { return offset == 0 ? [] : nil }
        if offset > last.offset { return nil }
        if offset == last.offset { return [] }
        guard head < entries.count, entries[head].offset <= offset + 1 else { return nil }
        return entries[head...].filter { $0.offset > offset }
    }

    /// TR-4: the last `count` messages the window holds that `include` takes, oldest first.
    func lastMessages(_ count: Int, now: Int64, window: ResumeWindow, include: (Entry) -> Bool) -> [Entry] {
        dropAged(now: now, window: window)
        var picked: [Entry] = []
        var i = entries.count - 1
        while i >= head && picked.count < count {
            if entries[i].lane != .system && include(entries[i]) { picked.append(entries[i]) }
            i -= 1
        }
        return picked.reversed()
    }

    private func dropAged(now: Int64, window: ResumeWindow) {
        while head < entries.count && now - entries[head].at > window.maxAgeMilliseconds {
            bytes -= entries[head].frame.count
            head += 1
        }
    }
}
