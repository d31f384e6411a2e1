import Chat
#if canImport(Glibc)
import Glibc
#endif
import Logging
import HTTP1
import Reactor
import Store
import Synchronization
import Webhooks
import WebSocket
import Wire

/// What the engine hands every I/O loop, in the order it happened. Frames are encoded once and
/// shared by reference.
public enum Published: Sendable {
    /// An event for an audience. Room-stream events carry their offset and room epoch (BX-1).
    case deliver(frame: ByteBlock, audience: Audience, offset: Int64, epoch: String)
    /// A session entered a room: it receives the room's events from here on; `offset` is the
    /// stream's offset at that point (BX-1).
    case joined(SessionID, RoomKey, epoch: String, offset: Int64)
    case left(SessionID, RoomKey)
    /// The room no longer exists (destroyed): its observers stop watching it.
    case roomGone(RoomKey)
    /// The answer to a WebSocket command, in order with the events it caused.
    case reply(SessionID, frame: ByteBlock)
    /// The engine reloaded its state from disk (a commit failed): every session is closed with
    /// this code and reconnects (and resumes).
    case closeAll(code: UInt16, reason: String)
}

/// Where a command's answer goes.
public enum ReplyTo: Sendable {
    /// REST: called once the change is durable (on the store thread).
    case callback(@Sendable (Result<Reply, ChatError>) -> Void)
    /// REST with an idempotency key (PX-2): `keep` turns the answer into a write that runs in the
    /// change's own transaction (nil: nothing to keep), so the change and its kept answer are
    /// durable together; then `then` is called as `callback` is.
    case keeping(@Sendable (Result<Reply, ChatError>) -> (@Sendable (Store.Transaction) throws -> Void)?,
                 then: @Sendable (Result<Reply, ChatError>) -> Void)
    /// WebSocket: encoded on the engine thread and delivered in order with the events.
    case session(SessionID, encode: @Sendable (Result<Reply, ChatError>) -> [UInt8])
    case none
}

/// The engine: one thread that owns the chat domain (like Redis's main thread). Commands arrive
/// through its event loop's inbox; each outcome is committed by the store before its replies and
/// events are released, so nothing is acknowledged before it is durable.
public final class Engine: @unchecked Sendable {
    // Safety: `domain`, `streams`, `lastTrim`, `held` and `nextTicket` are touched only on `loop`'s thread: every entry
    // point (`submit`, `query`, the tick timer) runs its work through `loop.execute`; `thread`
    // only by the owner's `start` and `stop`.
    public let loop: EventLoop
    private var domain: ChatDomain
    private let store: Store
    private let logger: Logger
    private let clock: @Sendable () -> Int64
    private let publisher: Publisher
    private let webhooks: WebhookService?
    /// PX-4: judges room messages of apps with a before-send hook before they are applied.
    private let beforeSend: BeforeSendService?
    private var thread: PosixThread?

    /// PX-4: commands held while a before-send hook judges a message, per issuing session (the
    /// app server's messages under a key of their own each), so that a session's commands are
    /// applied in the order they came: a later message waits for an earlier one's verdict, and so
    /// does anything else the session asked for after it. At most `Limits.maxHeldPerSession`
    /// per session (past it 42901); each message waits at most its app's timeout and
    /// `Limits.beforeSendVerdictSlackMilliseconds` for a verdict.
    private struct Held {
        var command: Command
        var replyTo: ReplyTo
        var hook: BeforeSendSettings?
        var verdict: BeforeSendVerdict?
        var ticket: UInt64
        /// The hook was asked (a message held behind others is checked and asked in its turn).
        var asked: Bool
    }
    private enum HoldKey: Hashable {
        case session(SessionID)
        case server(UInt64)
    }
    private var held: [HoldKey: [Held]] = [:]
    private var nextTicket: UInt64 = 0

    struct Stream {
        var epoch: String
        var offset: Int64
    }
    private var streams: [RoomKey: Stream] = [:]

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
    /// A fresh domain with the durable state (start-up's restore), for after a failed commit.
    private let reload: @Sendable () throws -> ChatDomain
    /// The close code sessions get when the engine reloads its state.
    public static let reloadCloseCode: UInt16 = CloseCode.tryAgainLater.rawValue
    /// How often kept events and nonces past the windows are deleted.
    static let trimIntervalMilliseconds: Int64 = 30_000

    /// `positions`: each room's stream as the store last had it (offsets continue from there for
    /// rooms whose epoch is unchanged).
    public init(domain: ChatDomain, store: Store, publisher: Publisher, webhooks: WebhookService?, beforeSend: BeforeSendService? = nil,
                clock: @escaping @Sendable () -> Int64,
                retention: Retention, positions: [RoomKey: (epoch: String, offset: Int64)] = [:],
                reload: @escaping @Sendable () throws -> ChatDomain, logger: Logger) throws {
        self.reload = reload
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
            loop.scheduleRepeating(every: interval) { [self] in
                guard store.isWritable else { return }
                process(domain.tick(now: clock()), replyTo: .none)
                trimIfDue()
            }
        }
        thread = PosixThread.start(name: "roomcast-engine") { loop.run() }
    }

    /// Runs the domain's timers now (the tick timer does this every interval; in-process tests
    /// call it after moving their manual clock).
    public func tick() {
        loop.execute { [self] in
            guard store.isWritable else { return }
            process(domain.tick(now: clock()), replyTo: .none)
            trimIfDue()
        }
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
        for (room, _) in stale { streams[room] = nil }
        let gone = stale
        let retention = self.retention
        let before = now - retention.maxAgeMilliseconds
        // History quotas on disk (per room and per app; retention by age is the domain's tick).
        let quotas = domain.appKeys.compactMap { key in domain.appSettings(key).map { (key, $0.historyLimitPerRoom, $0.historyLimitPerApp) } }
        store.submit(Store.Commit(mutations: [], extra: { tx in
            for (app, perRoom, perApp) in quotas { try Store.trimMessages(app: app, perRoom: perRoom, perApp: perApp, tx) }
            try Store.forgetRoomEvents(gone, tx)
            try Store.trimRoomEvents(before: before, keepPerRoom: retention.maxEvents, tx)
            try Store.trimNonces(before: now - 2 * Signing.windowMilliseconds, tx)
        }, onDurable: {}))
    }

    public func stop() {
        loop.stop()
        thread?.join()
        thread = nil
    }

    /// Applies a command (from any thread).
    public func submit(_ command: Command, replyTo: ReplyTo) {
        loop.execute { [self] in
            // Read-only (a commit failed and the disk has not recovered): refuse before applying.
            guard store.isWritable else {
                Self.refuse(replyTo, publisher: publisher)
                return
            }
            if beforeSend != nil, admitThroughHook(command, replyTo: replyTo) { return }
            process(domain.apply(command, now: clock()), replyTo: replyTo)
        }
    }

    // MARK: The before-send hook (PX-4)

    /// Takes a command over when a hook must judge it first, or when its session has commands
    /// held before it; false: apply it now.
    private func admitThroughHook(_ command: Command, replyTo: ReplyTo) -> Bool {
        let session = ChatDomain.issuingSession(command)
        let queued = session.map { held[.session($0)] != nil } ?? false
        var hook: BeforeSendSettings?
        if case .sendMessage(let app, _, let sender, _, _) = command, let settings = domain.appSettings(app)?.beforeSend {
            if case .session = sender { hook = settings } else if !settings.bypassServerMessages { hook = settings }
        }
        guard hook != nil || queued else { return false }
        if let session, let q = held[.session(session)], q.count >= Limits.maxHeldPerSession {
            process(.failure(ChatError(.rateLimited, "at most \(Limits.maxHeldPerSession) commands of a connection wait behind messages being moderated",
                                       field: nil)), replyTo: replyTo)
            return true
        }
        nextTicket &+= 1
        let ticket = nextTicket
        let key: HoldKey = session.map { .session($0) } ?? .server(ticket)
        guard let hook else {
            held[key, default: []].append(Held(command: command, replyTo: replyTo, hook: nil, verdict: nil, ticket: ticket, asked: false))
            return true
        }
        // What every send checks (membership, mutes, size) comes first: the hook sees only
        // messages that would be sent, and a refused one is answered at once. Behind held
        // commands the check may depend on them (a join held before it): a message that fails
        // it then waits, and is checked and judged when its turn comes.
        held[key, default: []].append(Held(command: command, replyTo: replyTo, hook: hook, verdict: nil, ticket: ticket, asked: false))
        if !ask(key, ticket: ticket, hook: hook, command: command, holdOnRefusal: queued) { drain(key) }
        return true
    }

    /// Checks a held message and asks the hook about it. A message the checks refuse is answered
    /// (and false returned) unless `holdOnRefusal`, when it stays held, not yet asked.
    private func ask(_ key: HoldKey, ticket: UInt64, hook: BeforeSendSettings, command: Command, holdOnRefusal: Bool) -> Bool {
        guard let i = held[key]?.firstIndex(where: { $0.ticket == ticket }) else { return false }
        do {
            guard let subject = try domain.precheckSend(command, now: clock()) else { return false }
            held[key]![i].asked = true
            beforeSend?.check(subject, settings: hook) { [self] verdict in
                loop.execute { [self] in judged(key, ticket: ticket, verdict) }
            }
            // The engine's own deadline: a verdict that never comes cannot hold the session.
            let limit = hook.timeoutMilliseconds + Limits.beforeSendVerdictSlackMilliseconds
            _ = loop.schedule(after: .milliseconds(limit)) { [self] in
                judged(key, ticket: ticket, .failed("no verdict within \(limit) ms"))
            }
            return true
        } catch {
            if holdOnRefusal { return true }
            let h = held[key]!.remove(at: i)
            if held[key]!.isEmpty { held[key] = nil }
            process(.failure(error), replyTo: h.replyTo)
            return false
        }
    }

    /// A verdict arrived (the first one counts: the engine's deadline or the hook's answer).
    private func judged(_ key: HoldKey, ticket: UInt64, _ verdict: BeforeSendVerdict) {
        guard let i = held[key]?.firstIndex(where: { $0.ticket == ticket }), held[key]![i].verdict == nil else { return }
        held[key]![i].verdict = verdict
        drain(key)
    }

    /// Applies a session's held commands from the oldest while they are ready; a message that was
    /// held unasked is checked and sent to the hook when it comes first.
    private func drain(_ key: HoldKey) {
        while let first = held[key]?.first {
            if let hook = first.hook, first.verdict == nil {
                if first.asked { return }
                if ask(key, ticket: first.ticket, hook: hook, command: first.command, holdOnRefusal: false) { return }
                continue
            }
            held[key]!.removeFirst()
            if held[key]!.isEmpty { held[key] = nil }
            release(first)
        }
    }

    private func release(_ h: Held) {
        guard store.isWritable else {
            Self.refuse(h.replyTo, publisher: publisher)
            return
        }
        var command = h.command
        if let hook = h.hook, let verdict = h.verdict {
            var outcome = verdict
            if case .replace(let content) = verdict, case .sendMessage(let app, let roomId, let sender, let kind, _) = command {
                let limit = domain.appSettings(app)?.maxMessageBytes ?? Limits.defaultMaxMessageBytes
                if content.isEmpty || content.utf8.count > limit {
                    // The hook rejected the original: a replacement that cannot be sent drops it.
                    outcome = .drop(reason: "its replacement is empty or longer than maxMessageBytes (\(limit))")
                } else {
                    command = .sendMessage(app: app, roomId: roomId, sender, kind, content: content)
                }
            }
            let unavailable = { (why: String) in
                ChatError(.moderationUnavailable, "the app's before-send hook gave no verdict (\(why)); nothing was sent; try again", field: "content")
            }
            switch outcome {
            case .pass, .replace:
                break
            case .drop(let reason):
                let message = reason.isEmpty ? "the app's moderation dropped the message" : "the app's moderation dropped the message: \(reason)"
                process(.failure(ChatError(.messageRejected, message, field: "content")), replyTo: h.replyTo)
                return
            case .overloaded(let why):
                process(.failure(ChatError(.rateLimited, why, field: nil)), replyTo: h.replyTo)
                return
            case .unavailable(let why):
                process(.failure(unavailable(why)), replyTo: h.replyTo)
                return
            case .failed(let why):
                if !hook.failOpen {
                    process(.failure(unavailable(why + "; the app fails closed")), replyTo: h.replyTo)
                    return
                }
                logger.debug("before-send hook failed; the app fails open", metadata: ["why": "\(why)"])
            }
        }
        process(domain.apply(command, now: clock()), replyTo: h.replyTo)
    }

    static let storageError = ChatError(.storageUnavailable, "the server cannot save changes now (storage unavailable); nothing changed; try again later")

    /// Answers a command that was not (or could not be made) durable.
    private static func refuse(_ replyTo: ReplyTo, publisher: Publisher) {
        switch replyTo {
        case .callback(let callback), .keeping(_, then: let callback): callback(.failure(storageError))
        case .session(let sid, let encode): publisher.deliver([.reply(sid, frame: Frames.text(encode(.failure(storageError))))])
        case .none: break
        }
    }

    /// A commit failed: nothing of it (or after it) is on disk, so the in-memory state is
    /// reloaded from disk, as at start-up, and every session is closed to reconnect and resume.
    /// Called by the store (any thread).
    public func storeFailed() {
        loop.execute { [self] in
            do {
                domain = try reload()
                streams = [:]
                for (room, p) in try store.lastOffsets() where domain.epoch(app: room.app, roomId: room.roomId) == p.epoch {
                    streams[room] = Stream(epoch: p.epoch, offset: p.offset)
                }
            } catch {
                logger.critical("cannot reload the state from disk after a failed commit; stopping", metadata: ["error": "\(error)"])
                exit(75) // EX_TEMPFAIL
            }
            logger.error("a commit failed: state reloaded from disk; read-only until writes work again")
            publisher.deliver([.closeAll(code: Self.reloadCloseCode, reason: "the server reloaded its state; reconnect and resume")])
        }
    }

    /// Answers a query (from any thread); nothing changes, so nothing waits for the store.
    public func query(_ q: Query, reply: @escaping @Sendable (Result<Reply, ChatError>) -> Void) {
        loop.execute { [self] in
            if case .history(let app, let roomId, let start, let limit, let order, let kinds) = q {
                history(app: app, roomId: roomId, start: start, limit: limit, order, kinds: kinds, reply: reply)
            } else {
                reply(domain.query(q, now: clock()))
            }
        }
    }

    /// NIM-8: from the newest messages kept in memory when they hold the answer, else from the
    /// store on its reader thread (every acknowledged message is there).
    private func history(app: String, roomId: String, start: Int64, limit: Int, _ order: SortOrder, kinds: [ChatMessage.Kind],
                         reply: @escaping @Sendable (Result<Reply, ChatError>) -> Void) {
        let h: (messages: [ChatMessage], complete: Bool, oldest: Int64)
        do {
            h = try domain.historyInMemory(app: app, roomId: roomId, start: start, limit: limit, order, kinds: kinds, now: clock())
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
                                                           kinds: kinds, oldest: h.oldest))))
            } catch {
                logger.error("history read failed", metadata: ["error": "\(error)"])
                reply(.failure(ChatError(.storageUnavailable, "history could not be read; try again", field: nil)))
            }
        }
    }

    private func process(_ out: Outcome, replyTo: ReplyTo) {
        var items: [Published] = []
        items.reserveCapacity(out.effects.count + 1)
        var touched: [RoomKey] = []
        var kept: [StoredRoomEvent] = []
        var joinedAt: [String: Int64] = [:]
        let now = clock()
        for effect in out.effects {
            switch effect {
            case .deliver(let event, let audience):
                var offset: Int64 = 0
                var epoch = ""
                if let room = audience.room {
                    let current = domain.epoch(app: room.app, roomId: room.roomId) ?? streams[room]?.epoch ?? ""
                    var s = streams[room] ?? Stream(epoch: current, offset: 0)
                    if s.epoch != current { s = Stream(epoch: current, offset: 0) }
                    s.offset += 1
                    streams[room] = s
                    offset = s.offset
                    epoch = current
                    touched.append(room)
                }
                let json = Encode.event(event, roomId: audience.room?.roomId, epoch: audience.room == nil ? nil : epoch,
                                        offset: audience.room == nil ? nil : offset)
                items.append(.deliver(frame: Frames.text(json), audience: audience, offset: offset, epoch: epoch))
                if let room = audience.room {
                    var except: [String] = []
                    if case .roomExceptUsers(_, let users) = audience { except = users }
                    kept.append(StoredRoomEvent(room: room, epoch: epoch, offset: offset, at: now, exceptUsers: except, payload: json))
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
            }
        }
        // Streams of rooms that no longer exist are forgotten (a recreated room starts a new epoch).
        var gone: [(room: RoomKey, currentEpoch: String?)] = []
        for room in Set(touched) where domain.epoch(app: room.app, roomId: room.roomId) == nil {
            streams[room] = nil
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
        let staged = webhooks?.stage(out.webhooks)
        let webhooks = self.webhooks
        var extra: (@Sendable (Store.Transaction) throws -> Void)?
        let outbox = staged.map(WebhookService.persist)
        var keepAnswer: (@Sendable (Store.Transaction) throws -> Void)?
        if case .keeping(let keep, _) = replyTo { keepAnswer = keep(reply) }
        if !kept.isEmpty || !gone.isEmpty || outbox != nil || keepAnswer != nil {
            let events = kept
            let forgotten = gone
            let answer = keepAnswer
            extra = { tx in
                // The room-stream events, kept for resuming clients (BX-1), durable with the change.
                if !events.isEmpty { try Store.append(events, tx) }
                if !forgotten.isEmpty { try Store.forgetRoomEvents(forgotten, tx) }
                try outbox?(tx)
                // PX-2: the caller's answer, kept with the change it answers.
                try answer?(tx)
            }
        }
        store.submit(Store.Commit(mutations: out.mutations, extra: extra, onDurable: {
            publisher.enqueue(published)
            if let staged { webhooks?.enqueue(staged) }
            switch replyTo {
            case .callback(let callback), .keeping(_, then: let callback): callback(reply)
            case .session, .none: break
            }
        }, onFailed: {
            // Not durable: its events are dropped and its caller is told (the engine reloads).
            Self.refuse(replyTo, publisher: publisher)
        }))
    }
}

/// Collects what each committed batch releases and posts it once per I/O loop per batch (the
/// store thread calls `enqueue` per commit and `flush` after each batch).
public final class Publisher: @unchecked Sendable {
    // Safety: `pending` is touched only on the store's writer thread (`enqueue` and `flush` are
    // called from the store's callbacks); `deliver` is set once before the store starts.
    private var pending: [Published] = []
    public var deliver: @Sendable ([Published]) -> Void = { _ in }

    public init() {}

    public func enqueue(_ items: [Published]) {
        pending.append(contentsOf: items)
    }

    public func flush() {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending = []
        deliver(batch)
    }
}

/// Server-to-client WebSocket frames (unmasked).
public enum Frames {
    public static func text(_ payload: [UInt8]) -> ByteBlock {
        let count = payload.count
        return ByteBlock.make(count: WebSocketFrameEncoder.headerLength(payloadLength: count, masked: false) + count) { out in
            let h = WebSocketFrameEncoder.writeHeader(opcode: .text, payloadLength: count, to: out.baseAddress!)
            payload.withUnsafeBytes { src in
                if count > 0 { (out.baseAddress! + h).copyMemory(from: src.baseAddress!, byteCount: count) }
            }
        }
    }
}

/// Ids for messages, room epochs and anonymous users: time-ordered and unique across restarts.
public final class IDGenerator: @unchecked Sendable {
    // Safety: `counter` is mutated only by `next()`, which only the engine thread calls (the
    // domain's single thread); `clock` and `salt` are immutable.
    private let clock: @Sendable () -> Int64
    private var counter: UInt32 = 0
    private let salt = randomHex(4)

    public init(clock: @escaping @Sendable () -> Int64) {
        self.clock = clock
    }

    public func next() -> String {
        counter &+= 1
        let t = String(UInt64(clock()), radix: 36)
        let c = String(counter % 1_679_616, radix: 36)
        return t + String(repeating: "0", count: max(0, 4 - c.count)) + c + salt
    }
}

/// `bytes` random bytes as lowercase hex.
public func randomHex(_ bytes: Int) -> String {
    var g = SystemRandomNumberGenerator()
    return hexEncoded((0..<bytes).map { _ in UInt8.random(in: 0...255, using: &g) })
}
