import Chat
import Engine
import Reactor
import Server
import WebSocket
import Wire

/// Where a session's frames go: its WebSocket connection, an HTTP event stream or long-poll
/// session (TR-1, TR-2: `ClientStream`), or, in tests, a recorder.
protocol SessionTransport: AnyObject {
    func sendFrame(_ frame: ByteBlock)
    /// TR-5: `frame` in the compact encoding, with the JSON `source` it was transcoded from (an
    /// HTTP stream reads the events' names and room positions from the JSON).
    func sendFrame(_ frame: ByteBlock, source: ByteBlock)
    /// A fan-out event (the hub's delivery): as `sendFrame`, but with `hold` a WebSocket may hold
    /// it for the loop's write-delay window (`ServerConfiguration.writeDelay`) to write it with
    /// the next ones.
    func sendEvent(_ frame: ByteBlock, source: ByteBlock, hold: Bool)
    func close(code: WebSocketCloseCode, reason: String)
    /// Bytes queued for the client and not yet written.
    var queuedBytes: Int { get }
    /// QS-3: the queued bytes the client has not taken (its marks are checked against them): a
    /// WebSocket's are what its socket refused at the last write (`Connection.backlogBytes`).
    var backlogBytes: Int { get }
    /// TR-1, TR-2: the session's membership of a room took effect at this stream position (after
    /// any resume's replay), or ended.
    func joinedRoom(_ roomId: String, epoch: String, offset: Int64)
    func leftRoom(_ roomId: String)
}

extension SessionTransport {
    func sendFrame(_ frame: ByteBlock, source: ByteBlock) { sendFrame(frame) }
    func sendEvent(_ frame: ByteBlock, source: ByteBlock, hold: Bool) { sendFrame(frame, source: source) }
    var backlogBytes: Int { queuedBytes }
    func joinedRoom(_ roomId: String, epoch: String, offset: Int64) {}
    func leftRoom(_ roomId: String) {}
}

extension Connection: SessionTransport {
    // Its own witness, so a compact WebSocket's deliveries make one direct call.
    func sendFrame(_ frame: ByteBlock, source: ByteBlock) { sendFrame(frame) }
    func sendEvent(_ frame: ByteBlock, source: ByteBlock, hold: Bool) { sendEvent(frame, hold: hold) }
}

/// One client WebSocket connection speaking the Roomcast protocol (openapi/websocket.md):
/// `{"id", "op", "args"}` commands answered with `{"id", "ok"}` or `{"id", "error"}`, and pushed
/// events `{"ev", "roomId", "epoch", "offset", "data"}`. Confined to its loop.
final class ClientSession: WebSocketHandler {
    let hub: Hub
    /// The gateway's shared state, through the hub (one reference a session fewer).
    var context: GatewayContext { hub.context }
    /// The handshake's `Origin`, checked against the app's allowed origins at connect; not kept
    /// once connected.
    var origin: String? { rareBox?.origin }
    /// Strong: `closed()` clears it, and the connection calls that when it is gone (its handler
    /// reference, the other half of the cycle, is cleared then too). A weak reference cost a
    /// side-table load and slow reference counting on every delivery. Confined to the loop, so
    /// the per-delivery read skips the dynamic exclusivity check.
    @exclusivity(unchecked) var connection: (any SessionTransport)?
    private(set) var id = SessionID(0)
    private(set) var app = ""
    private(set) var userId = ""
    /// The device the session connected as (PX-5 connection listings).
    private(set) var device = ""
    /// PX-1: this connection's messages per second.
    private var bucket: TokenBucket?
    // Four flags here, in the padding the bucket's optional leaves before the next 8-byte field
    // (the session's other four follow the token expiry, for the same reason).
    /// QS-3: whether this session lost anything it was not told yet (read per delivery; the
    /// counts are in `Rare.gaps`).
    @exclusivity(unchecked) private(set) var hasGaps = false
    /// QS-3: some pending gap has waited a tick (a second) while the connection stayed behind:
    /// such a gap goes out before its room's next event even so, so a reader that never catches
    /// up is still told what it lost, about once a second per room instead of before every event.
    @exclusivity(unchecked) private(set) var gapsDue = false
    /// TR-5: the event encoding negotiated in the handshake.
    let compact: Bool
    /// TR-5: a compact WebSocket connection: its join, switch and observe answers carry the
    /// room's alias, and the room's events carry the alias once the answer was sent. HTTP event
    /// streams and long-poll sessions keep room ids (their answers have no alias).
    let roomAliases: Bool
    let openedAt: Int64
    /// Token expiry (ms); nil for anonymous sessions.
    private var tokenExpiry: Int64?
    // The session's flags sit together (a class's fields are laid out in order, each aligned: a
    // lone Bool between two 8-byte fields costs 8 bytes).
    private(set) var authenticated = false
    private var connecting = false
    private var expiryNoticeSent = false
    /// BX-3: whether the token lets this session watch rooms.
    private var observerToken = false
    /// Position in each room's member list on this loop (kept by the hub), by room id: every room
    /// a session is in is of its own app (`roomSlot(_:)` checks the app), so no key carries it.
    private var roomSlots = RoomSlots()

    /// What most sessions never use, or use only for a while (the origin until connected, joins
    /// waiting to resume or rewind, watching, tags, counts-only rooms, gaps, messages sent before
    /// the connect answer, refused messages), in one box made at its first use and given back
    /// when nothing in it is in use: an idle session carries one reference instead of 14 fields.
    private final class Rare {
        var origin: String?
        /// Resume positions to honour when the session's join takes effect.
        var pendingResume: [String: ResumeRequest] = [:]
        /// TR-4: joins that asked for the room's last messages first, until they take effect
        /// (counted with the pending resumes: at most `maxPendingResumes` together).
        var pendingRewind: [String: Int] = [:]
        /// BX-3: the rooms this session watches (kept by the hub).
        var observing: Set<String> = []
        /// The newest `room.observe` of each room whose existence check is still under way.
        var latestObserve: [String: UInt64] = [:]
        var observeSequence: UInt64 = 0
        /// AU-1: the member's tags in each room that gave it some (kept by the hub from the
        /// engine's stream).
        var roomTags: [RoomKey: [String]] = [:]
        /// AU-4: rooms this connection joined for member counts only.
        var memberCountsRooms: Set<RoomKey> = []
        /// QS-3: what this session lost per room since the last `room.gap` it was sent.
        var gaps: [RoomKey: Gap] = [:]
        /// Messages that arrived while `connect` was being answered, processed in order after it.
        var early: [[UInt8]] = []
        var earlyBytes = 0
        /// PX-1: how many messages were refused in a row.
        var refusedInARow = 0
        /// CS-3: where the conversation-status sync on connect starts.
        var syncCursor: Int64 = 0

        /// Nothing in it is in use. (A session that ever observed keeps its box: the observe
        /// sequence tells a late answer from the newest.)
        var isUnused: Bool {
            origin == nil && pendingResume.isEmpty && pendingRewind.isEmpty && observing.isEmpty && latestObserve.isEmpty
                && observeSequence == 0 && roomTags.isEmpty && memberCountsRooms.isEmpty && gaps.isEmpty && early.isEmpty
                && earlyBytes == 0 && refusedInARow == 0 && syncCursor == 0
        }
    }
    @exclusivity(unchecked) private var rareBox: Rare?
    /// The box, made now if the session had none.
    private var rare: Rare {
        if let b = rareBox { return b }
        let b = Rare()
        rareBox = b
        return b
    }

    /// Whether the session holds its box of rare state (the idle-memory tests).
    var holdsRareState: Bool { rareBox != nil }

    /// Gives the box back when nothing in it is in use.
    private func releaseRareIfUnused() {
        if let b = rareBox, b.isUnused { rareBox = nil }
    }

    /// BX-3: the rooms this session watches (kept by the hub).
    var observing: Set<String> {
        get { rareBox?.observing ?? [] }
        _modify { yield &rare.observing }
    }
    /// The resume position to honour now that the session's join of the room took effect, if its
    /// join asked for one (the hub).
    func takePendingResume(_ roomId: String) -> ResumeRequest? {
        guard let b = rareBox, let r = b.pendingResume.removeValue(forKey: roomId) else { return nil }
        releaseRareIfUnused()
        return r
    }
    /// TR-4: how many of the room's last messages the join that took effect asked for, if any.
    func takePendingRewind(_ roomId: String) -> Int? {
        guard let b = rareBox, let n = b.pendingRewind.removeValue(forKey: roomId) else { return nil }
        releaseRareIfUnused()
        return n
    }
    /// AU-1: the member's tags in the room (empty for most sessions).
    func tags(in room: RoomKey) -> [String] {
        guard let b = rareBox, !b.roomTags.isEmpty else { return [] }
        return b.roomTags[room] ?? []
    }
    /// AU-4: rooms this connection joined for member counts only.
    var memberCountsRooms: Set<RoomKey> { rareBox?.memberCountsRooms ?? [] }
    func memberCountsOnly(in room: RoomKey) -> Bool {
        guard let b = rareBox, !b.memberCountsRooms.isEmpty else { return false }
        return b.memberCountsRooms.contains(room)
    }
    /// The session left the room (the hub): its choice there goes with it.
    func forgetMemberCounts(in room: RoomKey) {
        if let b = rareBox, !b.memberCountsRooms.isEmpty, b.memberCountsRooms.remove(room) != nil { releaseRareIfUnused() }
    }
    func setTags(_ tags: [String], in room: RoomKey) {
        if tags.isEmpty {
            if let b = rareBox, b.roomTags.removeValue(forKey: room) != nil { releaseRareIfUnused() }
        } else {
            rare.roomTags[room] = tags
        }
    }

    /// Events of one room a slow connection lost: the stream offsets they span and how many of
    /// each lane (transient messages have no offsets).
    struct Gap {
        var epoch: String
        var first: Int64 = 0
        var last: Int64 = 0
        var normal = 0
        var low = 0
        var transient = 0
        /// It has waited a tick: it goes out before the room's next event, caught up or not.
        var due = false
    }
    static let maxPendingResumes = 64

    /// TR-5: the aliases this connection was told (in answers already sent) of the rooms it is in
    /// or observes; a room's events use the alias only then, so a client never reads an alias
    /// before the answer that names it (a resume's replay and the join's own events come first).
    /// A few entries: a linear scan beats hashing.
    @exclusivity(unchecked) private var toldAliases: [Int32] = []

    init(hub: Hub, origin: String?, now: Int64, encoding: WireEncoding = .json, roomAliases: Bool = false) {
        self.hub = hub
        self.openedAt = now
        compact = encoding == .compact
        self.roomAliases = roomAliases && compact
        if let origin { rare.origin = origin }
    }

    // MARK: Room slots (kept by the hub)

    /// This session's position in `room`'s member list on this loop, if it is a member.
    func roomSlot(_ room: RoomKey) -> Int? { room.app == app ? roomSlots[room.roomId] : nil }

    func setRoomSlot(_ slot: Int, in room: RoomKey) {
        precondition(room.app == app, "a session joins rooms of its own app only")
        roomSlots[room.roomId] = slot
    }

    func removeRoomSlot(_ room: RoomKey) -> Int? {
        room.app == app ? roomSlots.removeValue(forKey: room.roomId) : nil
    }

    /// The rooms this session is a member of on this loop, in no particular order.
    var joinedRoomIds: [String] { roomSlots.keys }
    var joinedRooms: [RoomKey] { roomSlots.keys.map { RoomKey(app: app, roomId: $0) } }

    // MARK: WebSocketHandler

    func webSocketDidOpen(_ connection: Connection) { opened(connection) }

    func opened(_ transport: any SessionTransport) {
        connection = transport
        hub.pendingSessions[ObjectIdentifier(self)] = self
    }

    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {
        guard case .text(let bytes) = message else {
            close(.unsupportedData, "binary messages are not part of the protocol")
            return
        }
        handle(bytes)
    }

    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) { closed() }

    func closed() {
        hub.pendingSessions[ObjectIdentifier(self)] = nil
        if authenticated || connecting {
            hub.unregister(self)
            context.engine.submit(.disconnect(id), replyTo: .none)
        }
        authenticated = false
        connecting = false
        self.connection = nil
    }

    // MARK: Sending

    /// Every frame to the client goes through here: a compact session gets the events in the
    /// compact encoding (TR-5), transcoded once per block on this loop (the hub's cache).
    func send(_ frame: ByteBlock) {
        if compact { connection?.sendFrame(hub.compactCache.frame(for: frame), source: frame) } else { connection?.sendFrame(frame) }
    }

    /// A room's event to a member or observer: compact with the room's alias when this
    /// connection was told it (TR-5), else as `send`.
    @inline(__always)
    func send(_ frame: ByteBlock, alias: CompactEncoding.RoomAlias?) {
        guard compact else {
            connection?.sendFrame(frame)
            return
        }
        let told = alias.flatMap { a in toldAliases.contains(a.number) ? a : nil }
        connection?.sendFrame(hub.compactCache.frame(for: frame, alias: told), source: frame)
    }

    /// A fan-out event (the hub's delivery to members, users or sessions), as `send(_:alias:)`;
    /// with `hold` (a busy room's droppable event), a WebSocket may hold it for the write-delay
    /// window. Without it (high priority, system, a quiet room's), and replays (resume, rewind)
    /// and answers (`send`), it is written before the loop sleeps, with whatever was held before.
    @inline(__always)
    func deliver(_ frame: ByteBlock, alias: CompactEncoding.RoomAlias? = nil, hold: Bool) {
        guard compact else {
            connection?.sendEvent(frame, source: frame, hold: hold)
            return
        }
        let told = alias.flatMap { a in toldAliases.contains(a.number) ? a : nil }
        connection?.sendEvent(hub.compactCache.frame(for: frame, alias: told), source: frame, hold: hold)
    }

    /// An answer from the engine's stream. TR-5: a join or switch answer that carries an alias
    /// (the last member of `ok`, `…,"alias":N}}`) makes the room's later events use it.
    func sendAnswer(_ frame: ByteBlock) {
        if roomAliases, let n = Self.answeredAlias(frame) { told(n) }
        send(frame)
    }

    /// The alias a join or switch answer frame ends with, if any.
    static func answeredAlias(_ frame: ByteBlock) -> Int32? {
        var found: Int32?
        let all = frame.bytes
        Frames.forEach(in: frame) { _, _, payload in
            let tail = Array(#","alias":"#.utf8)
            var end = payload.upperBound
            guard payload.count > tail.count + 3, all[end - 1] == UInt8(ascii: "}"), all[end - 2] == UInt8(ascii: "}") else { return }
            end -= 2
            var start = end
            while start > payload.lowerBound, all[start - 1] >= UInt8(ascii: "0"), all[start - 1] <= UInt8(ascii: "9") { start -= 1 }
            guard start < end, end - start <= 10, start - payload.lowerBound >= tail.count,
                  all[(start - tail.count)..<start].elementsEqual(tail),
                  let n = Int32(String(decoding: all[start..<end], as: UTF8.self)) else { return }
            found = n
        }
        return found
    }

    private func told(_ alias: Int32) {
        if !toldAliases.contains(alias) { toldAliases.append(alias) }
    }

    /// The session is no longer in the room nor observing it: its events stop, and so does its
    /// alias here (a later join is told it again, after its replay).
    func forgetAlias(of room: RoomKey) {
        guard !toldAliases.isEmpty, roomSlot(room) == nil, !observing.contains(room.roomId), let a = hub.aliases.alias(of: room) else { return }
        toldAliases.removeAll { $0 == a.number }
    }

    /// QS-3: how far behind the client is (0 once its connection is gone): what its socket did
    /// not take at the last write, or more when what was queued since passes that by more than
    /// the soft mark (the loop fell behind and queues a burst at once, before it writes: a reader
    /// is not kept from its marks for that long). So a reader that keeps up is not dropped for
    /// events that reached it together, and a slow one's queue stays within twice the soft mark.
    var backlogBytes: Int {
        guard let c = connection else { return 0 }
        return max(c.backlogBytes, c.queuedBytes - hub.marks.soft)
    }

    /// QS-3: counts a dropped block for the room's next `room.gap`.
    /// Transient messages are outside the stream (no epoch, no offsets): their losses join the
    /// pending gap whatever its epoch. A stream loss in another epoch than the pending gap's (the
    /// room's stream began again) sends the pending gap first, so no count is lost.
    func recordDrop(_ room: RoomKey, _ drop: Hub.Drop) {
        var g: Gap
        if let pending = rareBox?.gaps[room] {
            if drop.first > 0 && !pending.epoch.isEmpty && pending.epoch != drop.epoch {
                flushGap(room)
                g = Gap(epoch: drop.epoch)
            } else {
                g = pending
                if g.epoch.isEmpty && drop.first > 0 { g.epoch = drop.epoch }
            }
        } else {
            g = Gap(epoch: drop.epoch)
        }
        let box = rare
        if drop.first > 0 {
            if g.first == 0 { g.first = drop.first }
            g.last = drop.last
        }
        switch drop.lane {
        case .normal: g.normal += drop.count
        case .low: g.low += drop.count
        case .transient: g.transient += drop.count
        case .system, .high: break
        }
        box.gaps[room] = g
        hasGaps = true
    }

    /// Sends the room's pending `room.gap`, if it has one (before anything else of that room).
    func flushGap(_ room: RoomKey) {
        guard let box = rareBox, let g = box.gaps.removeValue(forKey: room) else { return }
        hasGaps = !box.gaps.isEmpty
        if !hasGaps {
            gapsDue = false
            releaseRareIfUnused()
        }
        sendJSON(Encode.gap(roomId: room.roomId, epoch: g.epoch, first: g.first, last: g.last, normal: g.normal, low: g.low, transient: g.transient))
    }

    /// Sends the room's pending `room.gap` if it has waited a tick.
    func flushGapIfDue(_ room: RoomKey) {
        if rareBox?.gaps[room]?.due == true { flushGap(room) }
    }

    /// Sends every pending `room.gap` (the hub's tick, once the connection has room again).
    func flushGaps() {
        guard let box = rareBox else { return }
        for room in box.gaps.keys.sorted(by: { $0.roomId < $1.roomId }) { flushGap(room) }
    }

    func sendJSON(_ bytes: [UInt8]) { send(Frames.text(bytes)) }

    func sendEvent(_ event: ChatEvent) {
        sendJSON(Encode.event(event, roomId: nil, epoch: nil, offset: nil))
    }

    func sendResumeResult(roomId: String, resumed: Bool, replayed: Int, reason: String?) {
        sendJSON(Encode.resumeResult(roomId: roomId, resumed: resumed, replayed: replayed, reason: reason))
    }

    func close(_ code: CloseCode, _ reason: String) { closeRaw(code.rawValue, reason) }

    func closeRaw(_ code: UInt16, _ reason: String) {
        connection?.close(code: WebSocketCloseCode(code), reason: reason)
    }

    private func reply(_ id: Int?, error: GatewayError) {
        sendJSON(Encode.errorFrame(id: id, error))
    }

    private func reply(_ id: Int?, _ result: Result<Reply, ChatError>) {
        sendJSON(Encode.replyFrame(id: id, result))
    }

    // MARK: Commands

    /// The caller this session's ops act as.
    private var caller: Caller { Caller(app: app, actor: .session(id), userId: userId) }

    /// At most this many bytes of messages are held while `connect` is answered.
    static let maxEarlyBytes = 64 * 1024

    /// One protocol message: its op from the op table, its `args` decoded into the op's action.
    func handle(_ bytes: [UInt8]) {
        if connecting {
            // A client may send commands right behind connect (even in the same TCP write).
            let box = rare
            guard box.earlyBytes + bytes.count <= Self.maxEarlyBytes else {
                reply(nil, error: GatewayError(.badRequest, "more than \(Self.maxEarlyBytes) bytes sent before the connect answer", field: "op"))
                close(.badRequest, "too much sent before the connect answer")
                return
            }
            box.early.append(bytes)
            box.earlyBytes += bytes.count
            return
        }
        guard let envelope = OpTable.envelope(bytes) else {
            // Without an id the answer cannot be matched: the error, then close 4000 (as documented).
            reply(nil, error: GatewayError(.badRequest, "a message is {\"id\": number, \"op\": string, \"args\": object}",
                                           field: OpTable.envelopeField(bytes)))
            close(.badRequest, "not a protocol message")
            return
        }
        let rid = envelope.id
        if authenticated, var b = bucket {
            let allowed = b.take(now: context.clock())
            bucket = b
            guard allowed else {
                let box = rare
                box.refusedInARow += 1
                // Refused answers cost the server too: a client that keeps flooding is closed.
                if box.refusedInARow > Int(b.rate) * Limits.floodSecondsBeforeClose {
                    close(.rateLimited, "message rate limit exceeded")
                } else {
                    reply(rid, .failure(ChatError(.rateLimited, "at most \(Int(b.rate)) messages a second per connection", field: "op")))
                }
                return
            }
            if let box = rareBox, box.refusedInARow != 0 {
                box.refusedInARow = 0
                releaseRareIfUnused()
            }
        }
        if !authenticated {
            guard envelope.op == "connect" else {
                close(.notAuthenticated, "the first message must be connect")
                return
            }
        } else if envelope.op == "connect" {
            reply(rid, error: GatewayError(.badRequest, "already connected", field: "op"))
            return
        }
        guard let op = OpTable.byName[envelope.op] else {
            reply(rid, error: GatewayError(.badRequest, "unknown op \(envelope.op)", field: "op"))
            return
        }
        let action: OpAction
        do {
            action = try op.action(bytes, caller)
        } catch {
            reply(rid, .failure(error))
            return
        }
        switch action {
        case .command(let c): command(rid, c)
        case .query(let q): query(rid, q)
        case .memberQuery(let roomId, let q): memberQuery(rid, roomId: roomId, q)
        case .connect(let a):
            if let c = a.conversationCursor, c < 0 {
                reply(rid, .failure(ChatError(.invalidParameter, "conversationCursor must not be negative", field: "args.conversationCursor")))
                return
            }
            if let c = a.conversationCursor, c != 0 { rare.syncCursor = c } else { rareBox?.syncCursor = 0 }
            connect(rid, a)
        case .refreshToken(let token): refresh(rid, token)
        case .join(let roomId, let a): join(rid, roomId: roomId, a)
        case .observe(let roomId): observe(rid, roomId: roomId)
        case .unobserve(let roomId):
            do {
                try Validate.identifier(roomId, field: "args.roomId", maxBytes: Limits.maxRoomIdBytes)
                hub.unobserve(self, RoomKey(app: app, roomId: roomId))
                reply(rid, .success(.done))
            } catch {
                reply(rid, .failure(error))
            }
        }
    }

    private func command(_ rid: Int?, _ command: Command) {
        if roomAliases, Self.joinsRoom(command) {
            // TR-5: the joined room's alias, given on the engine's thread as the answer is made,
            // before any of the room's events to this connection are transcoded.
            let aliases = hub.aliases
            let app = app
            context.engine.submit(command, replyTo: .session(id, encode: { result in
                guard case .success(.joined(let info)) = result, let a = aliases.assign(RoomKey(app: app, roomId: info.room.roomId)) else {
                    return Encode.replyFrame(id: rid, result)
                }
                return Encode.replyFrame(id: rid, result, alias: a.number)
            }))
            return
        }
        context.engine.submit(command, replyTo: .session(id, encode: { result in Encode.replyFrame(id: rid, result) }))
    }

    /// Commands whose answer makes the connection a member of a room (`room.join`, `room.switch`).
    private static func joinsRoom(_ command: Command) -> Bool {
        switch command {
        case .join, .switchRoom: return true
        default: return false
        }
    }

    private func query(_ rid: Int?, _ q: Query) {
        let me = LoopBound(self, loop: hub.loop)
        context.engine.query(q) { result in
            let frame = Encode.replyFrame(id: rid, result)
            me.loop.execute { me.value.sendJSON(frame) }
        }
    }

    /// Queries a member may ask about a room it is in.
    private func memberQuery(_ rid: Int?, roomId: String, _ q: Query) {
        guard roomSlots[roomId] != nil else {
            do {
                try Validate.identifier(roomId, field: "roomId", maxBytes: Limits.maxRoomIdBytes)
                reply(rid, .failure(ChatError(.notInRoom, "you are not in room \(roomId)", field: "roomId")))
            } catch {
                reply(rid, .failure(error))
            }
            return
        }
        query(rid, q)
    }

    // MARK: Connect, tokens, join

    private func connect(_ rid: Int?, _ a: ConnectRequest) {
        let now = context.clock()
        let appKey: String
        let user: String?
        var anonymous: AnonymousProfile?
        var device = a.device ?? "default"
        if let token = a.token {
            switch Self.verify(token: token, context: context, now: now) {
            case .failure(let refusal):
                reply(rid, error: refusal.error)
                close(refusal.close, refusal.reason)
                return
            case .success(let claims):
                appKey = claims.app
                user = claims.sub
                tokenExpiry = claims.exp * 1000
                observerToken = claims.obs == true
                device = claims.device ?? device
                if claims.name != nil || claims.avatar != nil || claims.tags != nil {
                    profile = TokenProfile(nickname: claims.name ?? "", avatar: claims.avatar ?? "", tags: claims.tags)
                }
            }
        } else if let key = a.appKey, let anon = a.anonymous {
            guard context.apps.app(key) != nil else {
                reply(rid, error: GatewayError(.unknownApp, "unknown app key", field: "appKey"))
                close(.badToken, "unknown app")
                return
            }
            appKey = key
            user = nil
            anonymous = AnonymousProfile(nickname: anon.nickname ?? "", avatar: anon.avatar ?? "")
        } else {
            reply(rid, error: GatewayError(.badToken, "connect needs a token, or an appKey with an anonymous profile", field: "token"))
            close(.notAuthenticated, "no credentials")
            return
        }
        if !Self.originAllowed(origin, app: appKey, context: context) {
            close(.originNotAllowed, "origin not allowed")
            return
        }
        connecting = true
        self.device = device
        id = hub.makeSessionID()
        app = appKey
        let stream = hub.resumeWindow.stream
        let me = LoopBound(self, loop: hub.loop)
        let sid = id
        let expiresAt = tokenExpiry
        context.engine.submit(.connect(sid, app: appKey, userId: user, deviceId: device, anonymous: anonymous), replyTo: .callback({ result in
            me.loop.execute { me.value.connected(rid, result, stream: stream, expiresAt: expiresAt, anonymous: user == nil) }
        }))
    }

    /// Why a client token is refused: the error the client is answered with, and the close code
    /// and reason its connection gets.
    struct TokenRefusal: Error {
        let error: GatewayError
        let close: CloseCode
        let reason: String
    }

    /// The one check of a client token, for `connect` and for the HTTP transports (TR-1, TR-2):
    /// signed by one of the app's accepted secrets, and not expired.
    static func verify(token: String, context: GatewayContext, now: Int64) -> Result<TokenClaims, TokenRefusal> {
        switch ClientToken.verify(token, secrets: { [context] in context.apps.acceptedSecrets($0, now: now) }) {
        case .failure(let e):
            return .failure(TokenRefusal(error: e, close: .badToken, reason: e.message))
        case .success(let claims):
            if claims.exp * 1000 <= now {
                return .failure(TokenRefusal(error: GatewayError(.tokenExpired, "the token has expired", field: "token"), close: .tokenExpired,
                                             reason: "token expired"))
            }
            return .success(claims)
        }
    }

    /// The app's Origin allowlist (browsers send Origin; other clients need not).
    static func originAllowed(_ origin: String?, app: String, context: GatewayContext) -> Bool {
        guard let allowed = context.apps.app(app)?.allowedOrigins, let origin else { return true }
        return WebSocketHandshake.originAllowed(origin, allowed)
    }

    /// The enter profile from the token, used when a join does not name one; nil when the token
    /// gives none (most sessions: a reference, not the 80 bytes of an `EnterProfile`, on each).
    private final class TokenProfile {
        let nickname: String
        let avatar: String
        let tags: [String]?
        init(nickname: String, avatar: String, tags: [String]?) {
            self.nickname = nickname
            self.avatar = avatar
            self.tags = tags
        }
    }
    private var profile: TokenProfile?

    private func connected(_ rid: Int?, _ result: Result<Reply, ChatError>, stream: String, expiresAt: Int64?, anonymous: Bool) {
        connecting = false
        defer {
            if let box = rareBox, !box.early.isEmpty {
                let held = box.early
                box.early = []
                box.earlyBytes = 0
                for message in held where connection != nil { handle(message) }
            }
            releaseRareIfUnused()
        }
        guard connection != nil else {
            // Closed meanwhile: the engine still has the session; tell it.
            if case .success = result { context.engine.submit(.disconnect(id), replyTo: .none) }
            return
        }
        switch result {
        case .failure(let e):
            reply(rid, .failure(e))
        case .success(let r):
            if case .session(let u) = r { userId = u }
            authenticated = true
            bucket = TokenBucket(rate: context.apps.app(app)?.clientMessagesPerSecond ?? Limits.defaultClientMessagesPerSecond, now: context.clock())
            hub.pendingSessions[ObjectIdentifier(self)] = nil
            hub.register(self)
            sendJSON(Encode.connected(id: rid, sessionId: String(id.raw), userId: userId, anonymous: anonymous, stream: stream,
                                      expiresAt: expiresAt))
            if !anonymous { syncConversations(after: rareBox?.syncCursor ?? 0) }
            // Connected: the origin was checked, the cursor used. (A refused connect keeps the
            // origin: the next connect is checked against it too.)
            if let b = rareBox {
                b.origin = nil
                b.syncCursor = 0
            }
        }
    }

    /// CS-3: every status changed after `cursor`, as `conversation.statusChanged` batches, then
    /// `conversation.statusSynced` with the code and the cursor to keep.
    private func syncConversations(after cursor: Int64) {
        let me = LoopBound(self, loop: hub.loop)
        context.engine.query(.conversationStatuses(app: app, userId: userId, since: cursor, limit: Limits.maxStatusSyncPage)) { result in
            var frames: [[UInt8]] = []
            var next: Int64?
            var end = cursor
            var code = 0
            switch result {
            case .success(.conversationStatuses(let statuses, let c, let more)):
                var i = 0
                while i < statuses.count {
                    let chunk = statuses[i..<min(statuses.count, i + 100)]
                    let infos = chunk.flatMap { [ConversationStatusInfo.mute($0), ConversationStatusInfo.top($0)] }
                    frames.append(Encode.event(.conversationStatusChanged(infos), roomId: nil, epoch: nil, offset: nil))
                    i += 100
                }
                end = c
                if more { next = c }
            case .failure(let e):
                code = e.code.rawValue
            default:
                code = ErrorCode.invalidParameter.rawValue
            }
            let done: [UInt8]? = next == nil ? Encode.statusSynced(code: code, cursor: end) : nil
            let more = next
            let batches = frames
            me.loop.execute {
                let s = me.value
                for f in batches { s.sendJSON(f) }
                if let more { s.syncConversations(after: more) } else if let done { s.sendJSON(done) }
            }
        }
    }

    private func refresh(_ rid: Int?, _ token: String) {
        switch ClientToken.verify(token, secrets: { [context] in context.apps.acceptedSecrets($0, now: context.clock()) }) {
        case .failure(let e):
            reply(rid, error: e)
        case .success(let claims):
            guard claims.app == app, claims.sub == userId else {
                reply(rid, error: GatewayError(.badToken, "the new token is for another user or app", field: "token"))
                return
            }
            guard claims.exp * 1000 > context.clock() else {
                reply(rid, error: GatewayError(.tokenExpired, "the new token has expired", field: "token"))
                return
            }
            tokenExpiry = claims.exp * 1000
            expiryNoticeSent = false
            observerToken = claims.obs == true
            if !observerToken {
                for roomId in observing { hub.unobserve(self, RoomKey(app: app, roomId: roomId)) }
            }
            reply(rid, .success(.done))
        }
    }

    private func join(_ rid: Int?, roomId: String, _ a: JoinRequest) {
        let mode: JoinMode
        do {
            mode = try a.joinMode(roomId: roomId)
        } catch {
            reply(rid, .failure(error))
            return
        }
        let rewind: Int?
        let countsOnly: Bool
        do {
            rewind = try a.rewindCount()
            countsOnly = try a.memberCountsOnly()
        } catch {
            reply(rid, .failure(error))
            return
        }
        if a.resume != nil || rewind != nil {
            // A resume (or rewind) waits for its join to take effect; a join that fails leaves it
            // behind, so a session holds at most this many.
            let box = rare
            let waiting = box.pendingResume.count + box.pendingRewind.count
            guard box.pendingResume[roomId] != nil || box.pendingRewind[roomId] != nil || waiting < Self.maxPendingResumes else {
                reply(rid, .failure(ChatError(.limitExceeded, "at most \(Self.maxPendingResumes) joins with resume or rewind may wait at once",
                                              field: a.resume != nil ? "args.resume" : "args.rewind")))
                return
            }
        }
        if let r = a.resume { rare.pendingResume[roomId] = ResumeRequest(epoch: r.epoch, stream: r.stream, offset: r.offset) }
        if let rewind { rare.pendingRewind[roomId] = rewind }
        var p: EnterProfile
        do {
            p = try a.fields.profile()
        } catch {
            reply(rid, .failure(error))
            return
        }
        if let profile {
            if p.nickname.isEmpty { p.nickname = profile.nickname }
            if p.avatar.isEmpty { p.avatar = profile.avatar }
            // AU-1: the token's tags, unless the join gives its own.
            if p.tags == nil { p.tags = profile.tags }
        }
        // AU-4: the hub leaves this connection out of the room's per-member events from now on.
        let key = RoomKey(app: app, roomId: roomId)
        if countsOnly {
            p.memberCountsOnly = true
            // Bounded: the rooms it is in plus joins on their way. A join that failed leaves its
            // room here, so past that the rooms it is not in go.
            let box = rare
            if box.memberCountsRooms.count >= roomSlots.count + Self.maxPendingResumes {
                box.memberCountsRooms = box.memberCountsRooms.filter { roomSlot($0) != nil }
            }
            box.memberCountsRooms.insert(key)
        } else {
            forgetMemberCounts(in: key)
        }
        command(rid, .join(id, roomId: roomId, p, mode))
    }

    // MARK: Observing (BX-3)

    /// Starts watching at once (so nothing published after the answer is missed), then checks
    /// that the room exists; a missing room stops the watch and is refused.
    private func observe(_ rid: Int?, roomId: String) {
        do {
            try Validate.identifier(roomId, field: "args.roomId", maxBytes: Limits.maxRoomIdBytes)
        } catch {
            reply(rid, .failure(error))
            return
        }
        guard observerToken else {
            reply(rid, .failure(ChatError(.permissionDenied, "room.observe needs a token issued with observer: true", field: "token")))
            return
        }
        guard observing.contains(roomId) || observing.count < Limits.maxObservedRooms else {
            reply(rid, .failure(ChatError(.limitExceeded, "at most \(Limits.maxObservedRooms) rooms may be observed at once", field: "args.roomId")))
            return
        }
        let room = RoomKey(app: app, roomId: roomId)
        let wasObserving = observing.contains(roomId)
        hub.observe(self, room)
        let box = rare
        box.observeSequence += 1
        let sequence = box.observeSequence
        box.latestObserve[roomId] = sequence
        let me = LoopBound(self, loop: hub.loop)
        context.engine.query(.room(app: app, roomId: roomId)) { result in
            me.loop.execute {
                let s = me.value
                // Only the newest observe of a room decides whether its watch stays.
                let newest = s.rareBox?.latestObserve[roomId] == sequence
                if newest { s.rareBox?.latestObserve[roomId] = nil }
                switch result {
                case .success(.room(let info)) where s.observing.contains(roomId):
                    // TR-5: the alias is told with the answer; the room's events use it after.
                    let alias = s.roomAliases ? s.hub.aliases.assign(room) : nil
                    s.sendJSON(Encode.observed(id: rid, roomId: roomId, epoch: info.epoch, alias: alias?.number))
                    if let alias { s.told(alias.number) }
                case .success(.room):
                    // Unobserved (or the token was refreshed to one that may not watch) meanwhile.
                    s.reply(rid, .failure(ChatError(.permissionDenied, "no longer observing \(roomId)", field: "args.roomId")))
                case .success:
                    s.reply(rid, .failure(ChatError(.roomNotFound, "room \(roomId) does not exist", field: "args.roomId")))
                case .failure(let e):
                    if !wasObserving && newest { s.hub.unobserve(s, room) }
                    s.reply(rid, .failure(e))
                }
            }
        }
    }

    // MARK: Timers

    /// Called once a second by the hub: connect timeout and token expiry with its grace.
    func tick(now: Int64) {
        // QS-3: what was lost is told even when the room goes quiet, once there is room for it.
        if hasGaps {
            if backlogBytes <= hub.marks.limit(.low) {
                flushGaps()
            } else {
                if let box = rareBox { for room in box.gaps.keys { box.gaps[room]!.due = true } }
                gapsDue = true
            }
        }
        if !authenticated {
            if !connecting && now - openedAt > context.connectTimeoutMilliseconds {
                close(.notAuthenticated, "connect timeout")
            }
            return
        }
        guard let expiry = tokenExpiry, now >= expiry else { return }
        if now >= expiry + context.tokenGraceMilliseconds {
            close(.tokenExpired, "token expired")
        } else if !expiryNoticeSent {
            expiryNoticeSent = true
            sendJSON(Encode.tokenExpired(graceSeconds: context.tokenGraceMilliseconds / 1000))
        }
    }
}

