import Chat
#if canImport(Glibc)
import Glibc
#endif
import Logging
import HTTP1
import Reactor
import Replication
import Store
import Synchronization
import Webhooks
import WebSocket
import Wire

/// The engine: one thread that owns the chat domain (like Redis's main thread). Every change is
/// appended to the engine's log and applied when the log hands it back (`EngineLog.swift`); each
/// outcome is committed by the store before its replies and events are released, so nothing is
/// acknowledged before it is durable. One path whatever the log: a single node's `LocalLog` hands
/// a record back at once, a cluster node's through PostgreSQL.
///
/// The engine's parts: this file (state, commands in, outcomes out), `EngineLog.swift` (appending
/// and applying the log, signed calls), `BeforeSendAdmission.swift` (messages held for the app's
/// hook), `EngineWebhooks.swift`, `EngineSnapshot.swift`, and `Publishing.swift` (what reaches
/// the I/O loops).
public final class Engine: @unchecked Sendable {
    // Safety: `domain`, `streams`, `lastTrim`, `held`, `nextTicket`, `webhookEntries`, `position`,
    // `lastAppliedAt`, `ledger`, `endedIncarnations`, `handledFailures`, the waiting and owed
    // records are touched only on `loop`'s thread: every entry point (`submit`, `query`,
    // `apply(entries:)`, `appendFailed`, `snapshot`, the timers) runs its work through
    // `loop.execute`; `restore` only before `start`; `thread` only by the owner's `start` and
    // `stop`; `appliedPosition` is an atomic.
    public let loop: EventLoop
    var domain: ChatDomain
    let store: Store
    let logger: Logger
    let clock: @Sendable () -> Int64
    let publisher: Publisher
    let webhooks: WebhookService?
    /// PX-4: judges room messages of apps with a before-send hook before they are appended.
    let beforeSend: BeforeSendService?
    /// Where every change goes, and what it is like (ReplicatedLog.swift).
    public let log: any ReplicatedLog
    /// `log.traits.keepsResumeEvents`, read per event.
    let keepsResumeEvents: Bool
    /// Stops the process (a replica that cannot be rebuilt here, a log it cannot follow).
    let halt: Halt
    /// QS-2: how far this node's I/O loops are behind, and what that refuses.
    let overload: OverloadPolicy
    /// QS-7: messages admitted and refused, by class.
    public let messageCounters = MessageCounters()
    private var thread: PosixThread?
    /// Called on the store thread once an app's settings change is durable (the REST layer's
    /// registry follows the domain).
    private let onAppSettings: @Sendable (String, AppSettings) -> Void
    /// Called (on the engine thread) with each nonce this node learns from the log, so that its
    /// own authenticator refuses a replay of it at once.
    let onNonceLearned: @Sendable (RequestNonce, Int64) -> Void

    // MARK: The log (EngineLog.swift)

    /// Callers waiting for their entry, by this node's sequence number (bounded by
    /// `Limits.maxClusterWaiting` and `Limits.maxClusterWaitingBytes`; a local log answers them
    /// before `append` returns).
    var waiting: [UInt64: Waiter] = [:]
    /// No caller below this sequence number is waiting (the deadline's scan starts here).
    var waitingFloor: UInt64 = 1
    var waitingBytes = 0
    /// Records appended without waiting (nonces of calls that made no change, kept answers, keys
    /// released) that the log could not take: appended once it can, at most
    /// `Limits.maxOwedClusterRecords` and `Limits.maxOwedClusterBytes` (the oldest are dropped).
    var owedRecords: [(record: LogRecord, bytes: Int)] = []
    var owedBytes = 0
    /// Disconnects the log could not take (PostgreSQL unreachable, or the store read-only):
    /// appended again once it takes writes, so a closed connection never stays a session.
    var owedDisconnects: Set<SessionID> = []
    /// Signed REST calls' nonces and idempotency keys, judged alike on every node (CLUSTER.md).
    var ledger = RequestLedger(nonceMilliseconds: 2 * Signing.windowMilliseconds)
    /// Node runs whose sessions were ended (`endSessions`): their commands are refused when
    /// applied, on every node alike, so a session a dead run made after its end cannot appear.
    var endedIncarnations: Set<UInt64> = []
    /// PX-4: entries of a session on their way through the log. A message of such a session is
    /// checked for the hook only once they are applied (a `room.join` pipelined before a
    /// `room.send` must be in the replica when the send is checked).
    var inFlight: [SessionID: Int] = [:]
    var nextSeq: UInt64 = 0
    /// The last position applied by the engine (engine thread only).
    var position: Int64 = 0
    /// The log time of the entry at `position` (a snapshot records it).
    var lastAppliedAt: Int64 = 0
    /// The last position applied and committed to this node's replica, so what it changed can be
    /// read (read by other threads: the log reader's hand-off bound, heartbeats, /readyz).
    let appliedPosition = Atomic<Int64>(0)
    /// The leader's tick record is on its way through the log (one at a time).
    var tickInFlight = false
    var lastTickAppended: Int64 = 0
    /// How often the leader appends a tick when nothing is due (history pruning, bucket sweeps).
    static let idleTickMilliseconds: Int64 = 60_000
    /// Webhooks, between log entries (EngineWebhooks.swift).
    var webhookEntries = WebhookEntries()
    /// Start-up: what the node waits for before it serves (EngineLog.swift, `catchUp`).
    var catchingUp: CatchUp?

    // MARK: PX-4 (BeforeSendAdmission.swift)

    var held: [HoldKey: [Held]] = [:]
    var nextTicket: UInt64 = 0

    // MARK: Room streams (BX-1)

    struct Stream {
        var epoch: String
        var offset: Int64
    }
    var streams: [RoomKey: Stream] = [:]

    /// MO-1: where each room's recent messages sit in its stream, so that a recall can put the
    /// message's tombstone in their place in the resume windows. Bounded as the windows are (the
    /// retention's events and age per room).
    struct MessagePlaces {
        struct Place {
            let id: String
            let epoch: String
            let offset: Int64
            let at: Int64
        }
        private var places: [Place] = []
        private var head = 0

        mutating func add(_ p: Place, retention: Retention) {
            places.append(p)
            while head < places.count && (places.count - head > retention.maxEvents || p.at - places[head].at > retention.maxAgeMilliseconds) {
                head += 1
            }
            if head > 256 && head * 2 > places.count {
                places.removeFirst(head)
                head = 0
            }
        }

        func place(of id: String) -> Place? {
            var i = places.count - 1
            while i >= head {
                if places[i].id == id { return places[i] }
                i -= 1
            }
            return nil
        }
    }
    var messagePlaces: [RoomKey: MessagePlaces] = [:]

    /// MO-1 at start-up, before `start()`: where the messages of the kept stream events sit (the
    /// resume windows restored from disk), so that a recall after a restart puts its tombstone in
    /// their place too. `places` are in stream order.
    public func rememberMessagePlaces(_ places: [(room: RoomKey, epoch: String, offset: Int64, at: Int64, messageId: String)]) {
        for p in places {
            messagePlaces[p.room, default: MessagePlaces()].add(.init(id: p.messageId, epoch: p.epoch, offset: p.offset, at: p.at), retention: retention)
        }
    }

    /// How long and how many events of each room's stream are kept for resuming clients (BX-1);
    /// they are written with the outcome that caused them, so a client can resume across a restart.
    public struct Retention: Sendable {
        public var maxEvents: Int
        public var maxAgeMilliseconds: Int64
        public init(maxEvents: Int, maxAgeMilliseconds: Int64) {
            self.maxEvents = maxEvents
            self.maxAgeMilliseconds = maxAgeMilliseconds
        }
    }
    private let retention: Retention
    private var lastTrim: Int64 = 0
    /// A fresh domain with the durable state (start-up's restore), for a replica lost on a single
    /// node (`ReplicaLoss.reloadFromDisk`).
    private let reload: @Sendable () throws -> ChatDomain
    /// The store failures this engine has reacted to (a failed batch fails every commit in it).
    private var handledFailures = 0
    /// The close code sessions get when the engine reloads its state.
    public static let reloadCloseCode: UInt16 = CloseCode.tryAgainLater.rawValue
    /// How often kept events and nonces past the windows are deleted.
    static let trimIntervalMilliseconds: Int64 = 30_000

    /// `positions`: each room's stream as the store last had it (offsets continue from there for
    /// rooms whose epoch is unchanged).
    public init(domain: ChatDomain, store: Store, log: any ReplicatedLog, publisher: Publisher, webhooks: WebhookService?,
                beforeSend: BeforeSendService? = nil, clock: @escaping @Sendable () -> Int64,
                retention: Retention, positions: [RoomKey: (epoch: String, offset: Int64)] = [:],
                reload: @escaping @Sendable () throws -> ChatDomain,
                onAppSettings: @escaping @Sendable (String, AppSettings) -> Void = { _, _ in },
                onNonceLearned: @escaping @Sendable (RequestNonce, Int64) -> Void = { _, _ in }, halt: Halt? = nil,
                overload: OverloadPolicy = OverloadPolicy(), logger: Logger) throws {
        self.overload = overload
        self.reload = reload
        self.onNonceLearned = onNonceLearned
        self.log = log
        keepsResumeEvents = log.traits.keepsResumeEvents
        self.halt = halt ?? Halt(logger: logger)
        self.onAppSettings = onAppSettings
        self.beforeSend = beforeSend
        self.domain = domain
        self.store = store
        self.publisher = publisher
        self.webhooks = webhooks
        self.clock = clock
        self.logger = logger
        self.retention = retention
        for (room, p) in positions where domain.epoch(app: room.app, roomId: room.roomId) == p.epoch {
            streams[room] = Stream(epoch: p.epoch, offset: p.offset)
        }
        loop = try EventLoop(name: "roomcast-engine", readBufferSize: 16)
    }

    public func start(tickEvery interval: Duration = .milliseconds(250)) {
        let loop = self.loop
        loop.execute { [self] in
            loop.scheduleRepeating(every: interval) { [self] in timers() }
            loop.scheduleRepeating(every: .milliseconds(Limits.clusterWebhookOutcomeFlushMilliseconds)) { [self] in flushWebhookOutcomes() }
        }
        thread = PosixThread.start(name: "roomcast-engine") { loop.run() }
    }

    /// Runs the domain's timers now (the tick timer does this every interval; in-process tests
    /// call it after moving their manual clock).
    public func tick() {
        loop.execute { [self] in timers() }
    }

    /// What the tick timer does: records the log could not take are appended again, callers whose
    /// entry did not come back in time are told, the leader appends a tick when something is due,
    /// and kept events past the windows are deleted.
    private func timers() {
        guard store.isWritable else { return }
        appendOwedDisconnects()
        expireWaiting()
        appendOwedRecords()
        appendTickIfDue()
        continueCatchingUp()
        trimIfDue()
    }

    /// Deletes kept room events past the resume window, and the streams of rooms that are gone.
    private func trimIfDue() {
        let now = clock()
        guard now - lastTrim >= Self.trimIntervalMilliseconds else { return }
        lastTrim = now
        var stale: [(room: RoomKey, currentEpoch: String?)] = []
        for (room, s) in streams {
            let current = domain.epoch(app: room.app, roomId: room.roomId)
            if current != s.epoch { stale.append((room, current)) }
        }
        for (room, _) in stale {
            streams[room] = nil
            messagePlaces[room] = nil
        }
        let gone = stale
        let retention = self.retention
        let before = now - retention.maxAgeMilliseconds
        // History quotas on disk (per room and per app; retention by age is the domain's tick).
        let quotas = domain.appKeys.compactMap { key in domain.appSettings(key).map { (key, $0.historyLimitPerRoom, $0.historyLimitPerApp) } }
        commit(Store.Commit(mutations: [], extra: { tx in
            for (app, perRoom, perApp) in quotas { try Store.trimMessages(app: app, perRoom: perRoom, perApp: perApp, tx) }
            try Store.forgetRoomEvents(gone, tx)
            try Store.trimRoomEvents(before: before, keepPerRoom: retention.maxEvents, tx)
            try Store.trimNonces(before: now - 2 * Signing.windowMilliseconds, tx)
        }, onDurable: {}))
    }

    /// Returns once the engine has run everything submitted before the call (at most 3 s): a
    /// stopping node's last records are then on their way to the log.
    public func barrier() {
        let done = Atomic<Bool>(false)
        loop.execute { done.store(true, ordering: .releasing) }
        for _ in 0..<3_000 where !done.load(ordering: .acquiring) { usleep(1_000) }
    }

    public func stop() {
        loop.stop()
        thread?.join()
        thread = nil
    }

    /// Changes can be made now: the store can write and the log can be appended.
    var isWritable: Bool { store.isWritable && log.isWritable }

    /// Applies a command (from any thread). `stamp`: the signed REST call it comes from; its first
    /// change carries the call's nonce and idempotency key into the log.
    public func submit(_ command: Command, stamp: RequestStamp? = nil, replyTo: ReplyTo) {
        loop.execute { [self] in
            // Read-only (a commit failed and the disk has not recovered, or the cluster's log is
            // unreachable): refuse before applying.
            guard isWritable else {
                owe(command)
                refuse(replyTo)
                return
            }
            if let refusal = overloaded(command) {
                answer(refusal, replyTo: replyTo)
                return
            }
            if beforeSend != nil, admitThroughHook(command, stamp: stamp, replyTo: replyTo) { return }
            perform(command, stamp: stamp, replyTo: replyTo)
        }
    }

    /// QS-2: while this node's I/O loops are further behind than the latency budget, normal, low
    /// and transient messages to rooms with a large audience are refused before they reach the log
    /// (42902, `Retry-After`), so the backlog stops growing instead of holding seconds of work;
    /// high-priority messages still go, and small rooms are not held back by a large one.
    private func overloaded(_ command: Command) -> ChatError? {
        guard let pressure = overload.pressure, let profile = domain.overloadProfile(command),
              profile.priority != .high || profile.transient, profile.audience >= overload.minAudience else { return nil }
        let backlog = pressure.backlogMilliseconds()
        guard backlog > overload.latencyBudgetMilliseconds else { return nil }
        messageCounters.refused(profile.transient ? .transient : Lane(profile.priority))
        let what = profile.transient ? "transient" : profile.priority.rawValue
        return ChatError(.roomBusy, "the room's fan-out is \(backlog) ms behind (the budget is \(overload.latencyBudgetMilliseconds) ms): "
                         + "\(what) messages are refused now; try again", field: "roomId")
    }

    /// Appends a command; it is applied when the log hands it back (at once on a single node).
    func perform(_ command: Command, stamp: RequestStamp?, replyTo: ReplyTo) {
        appendChange(.command(command), stamp: stamp, replyTo: replyTo)
    }

    static let storageError = ChatError(.storageUnavailable, "the server cannot save changes now (storage unavailable); nothing changed; try again later")
    static let clusterError = ChatError(.storageUnavailable, "the cluster's log (PostgreSQL) cannot be reached; nothing changed; try again later")
    static let ambiguousError = ChatError(.outcomeUnknown,
                                          "the connection to the cluster's log (PostgreSQL) was lost while saving: the change may have been made; check before retrying")

    /// Answers a command that was not (or could not be made) durable.
    static func refuse(_ replyTo: ReplyTo, publisher: Publisher, error: ChatError = storageError) {
        switch replyTo {
        case .callback(let callback), .keeping(_, then: let callback): callback(.failure(error))
        case .session(let sid, let encode): publisher.deliver([.reply(sid, frame: Frames.text(encode(.failure(error))))])
        case .none: break
        }
    }

    func refuse(_ replyTo: ReplyTo) {
        Self.refuse(replyTo, publisher: publisher, error: store.isWritable ? Self.clusterError : Self.storageError)
    }

    // MARK: The replica

    /// Submits a commit to the store; if it fails, the engine learns that its replica is lost.
    func commit(_ c: Store.Commit) {
        var c = c
        let failed = c.onFailed
        c.onFailed = { [self] in
            failed?()
            replicaFailed()
        }
        store.submit(c)
    }

    /// A commit failed: nothing of it (or after it) is on disk. What that means is the log's
    /// (`ReplicaLoss`): a single node reloads its state from disk, as at start-up, and closes every
    /// session to reconnect and resume; a cluster node stops and rebuilds from the shared log.
    /// Each failure of the store is handled once (a failed batch fails every commit in it).
    private func replicaFailed() {
        loop.execute { [self] in
            let failures = store.failures
            guard failures > handledFailures else { return }
            handledFailures = failures
            switch log.traits.replicaLoss {
            case .rebuildFromLog:
                halt("a commit to this node's replica failed; it is rebuilt from the cluster's log at the next start")
            case .reloadFromDisk:
                do {
                    domain = try reload()
                    streams = [:]
                    for (room, p) in try store.lastOffsets() where domain.epoch(app: room.app, roomId: room.roomId) == p.epoch {
                        streams[room] = Stream(epoch: p.epoch, offset: p.offset)
                    }
                } catch {
                    halt("cannot reload the state from disk after a failed commit", metadata: ["error": "\(error)"])
                }
                logger.error("a commit failed: state reloaded from disk; read-only until writes work again")
                publisher.deliver([.closeAll(code: Self.reloadCloseCode, reason: "the server reloaded its state; reconnect and resume")])
            }
        }
    }

    // MARK: Queries

    /// Answers a query (from any thread); nothing changes, so nothing waits for the store.
    public func query(_ q: Query, reply: @escaping @Sendable (Result<Reply, ChatError>) -> Void) {
        loop.execute { [self] in
            if case .history(let app, let roomId, let start, let limit, let order, let kinds, let filter) = q {
                history(app: app, roomId: roomId, start: start, limit: limit, order, kinds: kinds, filter: filter, reply: reply)
            } else {
                reply(domain.query(q, now: clock()))
            }
        }
    }

    /// NIM-8: from the newest messages kept in memory when they hold the answer, else from the
    /// store on its reader thread (every acknowledged message is there).
    private func history(app: String, roomId: String, start: Int64, limit: Int, _ order: SortOrder, kinds: [ChatMessage.Kind],
                         filter: HistoryFilter, reply: @escaping @Sendable (Result<Reply, ChatError>) -> Void) {
        let h: (messages: [ChatMessage], complete: Bool, oldest: Int64)
        let resolved: ResolvedHistoryFilter
        do {
            resolved = try domain.resolve(filter, app: app, roomId: roomId)
            h = try domain.historyInMemory(app: app, roomId: roomId, start: start, limit: limit, order, kinds: kinds, filter: resolved, now: clock())
        } catch {
            reply(.failure(error))
            return
        }
        if h.complete {
            reply(.success(.messages(h.messages)))
            return
        }
        let logger = self.logger
        store.read { store in
            do {
                reply(.success(.messages(try store.history(app: app, roomId: roomId, start: start, limit: limit, descending: order == .descending,
                                                           kinds: kinds, oldest: h.oldest, filter: resolved))))
            } catch {
                logger.error("history read failed", metadata: ["error": "\(error)"])
                reply(.failure(ChatError(.storageUnavailable, "history could not be read; try again", field: nil)))
            }
        }
    }

    // MARK: Outcomes

    /// A refusal made before anything was applied (nothing to stage or keep).
    func answer(_ error: ChatError, replyTo: ReplyTo) {
        process(.failure(error), replyTo: replyTo, now: clock(), stageWebhooks: false)
    }

    /// Commits what applying an entry did, then hands its events and reply to the I/O loops and
    /// answers its caller. `now`: the entry's time. `stageWebhooks`: false when the outcome cannot
    /// have any (a refusal).
    func process(_ out: Outcome, replyTo: ReplyTo, now: Int64, stageWebhooks: Bool) {
        var items: [Published] = []
        items.reserveCapacity(out.effects.count + 1)
        var touched: [RoomKey] = []
        var kept: [StoredRoomEvent] = []
        var redacted: [(room: RoomKey, epoch: String, offset: Int64, payload: [UInt8])] = []
        var joinedAt: [String: Int64] = [:]
        for effect in out.effects {
            switch effect {
            case .deliver(let event, let audience):
                var offset: Int64 = 0
                var epoch = ""
                let lane = Lane(event)
                // QS-5: a transient message is outside the room's stream (no offset, no resume).
                if lane != .transient, let room = audience.room {
                    let current = domain.epoch(app: room.app, roomId: room.roomId) ?? streams[room]?.epoch ?? ""
                    var s = streams[room] ?? Stream(epoch: current, offset: 0)
                    if s.epoch != current { s = Stream(epoch: current, offset: 0) }
                    s.offset += 1
                    streams[room] = s
                    offset = s.offset
                    epoch = current
                    touched.append(room)
                }
                let inStream = audience.room != nil && lane != .transient
                if let room = audience.room {
                    switch event {
                    case .message(let m) where inStream:
                        messagePlaces[room, default: MessagePlaces()].add(.init(id: m.id, epoch: epoch, offset: offset, at: now), retention: retention)
                    case .messageRecalled(let r):
                        // MO-1: the recalled message's place in the resume windows (and on disk)
                        // holds its tombstone from now on.
                        if let place = messagePlaces[room]?.place(of: r.messageId), place.epoch == epoch {
                            let tombstone = Encode.event(.message(r.tombstone), roomId: room.roomId, epoch: place.epoch, offset: place.offset)
                            items.append(.redact(room, epoch: place.epoch, offset: place.offset, frame: Frames.text(tombstone)))
                            if keepsResumeEvents { redacted.append((room, place.epoch, place.offset, tombstone)) }
                        }
                    default: break
                    }
                }
                let json = Encode.event(event, roomId: audience.room?.roomId, epoch: inStream ? epoch : nil, offset: inStream ? offset : nil)
                items.append(.deliver(frame: Frames.text(json), audience: audience, offset: offset, epoch: epoch, lane: lane))
                if keepsResumeEvents, inStream, let room = audience.room {
                    var except: [String] = []
                    var addressed: StoredRoomEvent.Addressed?
                    switch audience {
                    case .roomExceptUsers(_, let users): except = users
                    case .roomUsers(_, let users, let exclusion):
                        addressed = .users(users)
                        if case .user(let u) = exclusion { except = [u] }
                    case .roomTagged(_, let tags, let exclusion), .roomMemberDetail(_, let exclusion, let tags?):
                        addressed = .tags(tags)
                        if case .user(let u) = exclusion { except = [u] }
                    case .roomMemberDetail(_, let exclusion, nil):
                        if case .user(let u) = exclusion { except = [u] }
                    default: break
                    }
                    kept.append(StoredRoomEvent(room: room, epoch: epoch, offset: offset, at: now, exceptUsers: except, payload: json, addressed: addressed))
                }
            case .joined(let sid, let room):
                let epoch = domain.epoch(app: room.app, roomId: room.roomId) ?? ""
                // BX-1: the joiner's starting position is the stream's offset at this point: the
                // events after it (also later in this outcome) reach it, the ones before did not.
                let offset = streams[room].flatMap { $0.epoch == epoch ? $0.offset : nil } ?? 0
                joinedAt[room.roomId] = offset
                items.append(.joined(sid, room, epoch: epoch, offset: offset))
            case .left(let sid, let room):
                items.append(.left(sid, room))
                touched.append(room)
            case .tagged(let sessions, let room, let tags):
                items.append(.tagged(sessions, room, tags))
            }
        }
        // Streams of rooms that no longer exist are forgotten (a recreated room starts a new epoch).
        var gone: [(room: RoomKey, currentEpoch: String?)] = []
        for room in Set(touched) where domain.epoch(app: room.app, roomId: room.roomId) == nil {
            streams[room] = nil
            messagePlaces[room] = nil
            gone.append((room, nil))
            items.append(.roomGone(room))
        }
        var answer = out.reply
        if case .success(.joined(var info)) = answer, let offset = joinedAt[info.room.roomId] {
            info.offset = offset
            answer = .success(.joined(info))
        }
        let reply = answer
        if case .session(let sid, let encode) = replyTo {
            items.append(.reply(sid, frame: Frames.text(encode(answer))))
        }
        let publisher = self.publisher
        let published = items
        // Webhook messages are written in the same transaction as the change (the outbox, WH-4)
        // and handed to the delivery thread once it is durable.
        let staging = stageWebhooks ? stageMessages(out.webhooks) : nil
        let staged = staging?.staged
        let sendHere = staging?.sendHere == true
        let webhooks = self.webhooks
        var extra: (@Sendable (Store.Transaction) throws -> Void)?
        let outbox = staged.map(WebhookService.persist)
        var keepAnswer: (@Sendable (Store.Transaction) throws -> Void)?
        if case .keeping(let keep, _) = replyTo { keepAnswer = keep(reply) }
        if !kept.isEmpty || !gone.isEmpty || outbox != nil || keepAnswer != nil || !redacted.isEmpty {
            let events = kept
            let forgotten = gone
            let answer = keepAnswer
            let redactions = redacted
            extra = { tx in
                // The room-stream events, kept for resuming clients (BX-1), durable with the change.
                if !events.isEmpty { try Store.append(events, tx) }
                for r in redactions { try Store.redact(room: r.room, epoch: r.epoch, offset: r.offset, payload: r.payload, tx) }
                if !forgotten.isEmpty { try Store.forgetRoomEvents(forgotten, tx) }
                try outbox?(tx)
                // PX-2: the caller's answer, kept with the change it answers.
                try answer?(tx)
            }
        }
        var settingsChanged: [(String, AppSettings)] = []
        for case .putApp(let key, let settings) in out.mutations { settingsChanged.append((key, settings)) }
        let changed = settingsChanged
        let onAppSettings = self.onAppSettings
        commit(Store.Commit(mutations: out.mutations, extra: extra, onDurable: {
            for (key, settings) in changed { onAppSettings(key, settings) }
            publisher.enqueue(published)
            if let staged, sendHere { webhooks?.enqueue(staged) }
            switch replyTo {
            case .callback(let callback), .keeping(_, then: let callback): callback(reply)
            case .session, .none: break
            }
        }, onFailed: {
            // Not durable: its events are dropped and its caller is told (the replica is lost).
            Self.refuse(replyTo, publisher: publisher)
        }))
    }

    /// Hands items to the I/O loops and answers the caller, in order with every other outcome.
    func publish(_ items: [Published], reply: Result<Reply, ChatError>, replyTo: ReplyTo) {
        let publisher = self.publisher
        var published = items
        if case .session(let sid, let encode) = replyTo { published.append(.reply(sid, frame: Frames.text(encode(reply)))) }
        let all = published
        commit(Store.Commit(mutations: [], onDurable: {
            publisher.enqueue(all)
            switch replyTo {
            case .callback(let callback), .keeping(_, then: let callback): callback(reply)
            case .session, .none: break
            }
        }, onFailed: { Self.refuse(replyTo, publisher: publisher) }))
    }
}
