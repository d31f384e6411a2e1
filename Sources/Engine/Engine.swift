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
import Replication

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
    /// PX-5 in a cluster: close this node's connections of a user (one device's, when given).
    case disconnectUser(app: String, userId: String, device: String?, code: UInt16, reason: String)
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

/// Cluster mode (CLUSTER.md): where the engine appends the records it wants applied. The
/// engine's own entries come back, like everyone's, through `Engine.apply(entries:)`.
public protocol ReplicatedLog: AnyObject, Sendable {
    /// The log can be appended to now (PostgreSQL reachable): while false, changes are refused.
    var isWritable: Bool { get }
    /// This node appends the cluster's time-driven records (it holds the leader lock).
    var isLeader: Bool { get }
    /// The log's clock (PostgreSQL's) minus this node's, in milliseconds: the leader compares
    /// the domain's deadlines, which are in log time, with its clock plus this.
    var clockOffsetMilliseconds: Int64 { get }
    /// Appends an encoded `LogRecord` under this node's sequence number `seq`. If it is known
    /// not to be in the log, or cannot be known, the log calls `Engine.appendFailed` for it.
    func append(_ payload: [UInt8], seq: UInt64)
}

/// One entry of the shared log as the engine applies it.
public struct ReplicatedEntry: Sendable {
    public var position: Int64
    public var origin: String
    public var seq: UInt64
    public var at: Int64
    public var payload: [UInt8]

    public init(position: Int64, origin: String, seq: UInt64, at: Int64, payload: [UInt8]) {
        self.position = position
        self.origin = origin
        self.seq = seq
        self.at = at
        self.payload = payload
    }
}

/// What a cluster node's engine is given.
public struct ClusterRole: Sendable {
    public let log: ReplicatedLog
    /// This node run's name in the log's `origin` column.
    public let origin: String
    /// This node run's incarnation: its sessions' ids carry it.
    public let incarnation: UInt64
    /// The ids the domain makes while applying an entry (its `makeID`).
    public let ids: EntryIDs
    /// The cluster's log format (`LogRecord.format` of its first node): what this node may write.
    public let logFormat: Int

    public init(log: ReplicatedLog, origin: String, incarnation: UInt64, ids: EntryIDs, logFormat: Int = LogRecord.format) {
        self.log = log
        self.origin = origin
        self.incarnation = incarnation
        self.ids = ids
        self.logFormat = logFormat
    }
}

/// The engine: one thread that owns the chat domain (like Redis's main thread). Commands arrive
/// through its event loop's inbox; each outcome is committed by the store before its replies and
/// events are released, so nothing is acknowledged before it is durable.
public final class Engine: @unchecked Sendable {
    // Safety: `domain`, `streams`, `lastTrim`, `held`, `nextTicket`, `replicatedHooks`, `position`,
    // `lastAppliedAt`, `ledger`, `endedIncarnations`, the waiting and owed records are touched only on
    // `loop`'s thread: every entry point (`submit`, `query`, `apply(entries:)`, `webhookOutcomes`,
    // `snapshot`, the timers) runs its work through `loop.execute`; `restore` only before `start`;
    // `thread` only by the owner's `start` and `stop`; `appliedPosition` is an atomic.
    public let loop: EventLoop
    var domain: ChatDomain
    let store: Store
    let logger: Logger
    let clock: @Sendable () -> Int64
    private let publisher: Publisher
    let webhooks: WebhookService?
    /// PX-4: judges room messages of apps with a before-send hook before they are applied.
    private let beforeSend: BeforeSendService?
    private var thread: PosixThread?
    /// Called on the store thread once an app's settings change is durable (the REST layer's
    /// registry follows the domain, on every node of a cluster).
    private let onAppSettings: @Sendable (String, AppSettings) -> Void

    /// Cluster mode: nil on a single node. The domain changes only by applying log entries, in
    /// order; this node's own entries are answered when they are applied.
    let cluster: ClusterRole?
    /// Callers waiting for their entry, by this node's sequence number, and the bytes of those
    /// entries (bounded by `Limits.maxClusterWaiting` and `Limits.maxClusterWaitingBytes`); the
    /// signed REST call an entry carries the nonce of, and the records appended without waiting
    /// (appended again if the log could not take them).
    private var waiting: [UInt64: (replyTo: ReplyTo, bytes: Int, stamp: RequestStamp?, owed: LogRecord?, since: Int64)] = [:]
    /// No caller below this sequence number is waiting (the deadline's scan starts here).
    private var waitingFloor: UInt64 = 1
    private var waitingBytes = 0
    /// Records appended without waiting (nonces of calls that made no change, kept answers, keys
    /// released) that the log could not take: appended once it can, at most
    /// `Limits.maxOwedClusterRecords` and `Limits.maxOwedClusterBytes` (the oldest are dropped).
    private var owedRecords: [(record: LogRecord, bytes: Int)] = []
    private var owedBytes = 0
    /// Signed REST calls' nonces and idempotency keys, judged alike on every node (CLUSTER.md).
    var ledger = RequestLedger(nonceMilliseconds: 2 * Signing.windowMilliseconds)
    /// Called (on the engine thread) with each nonce this node learns from the log, so that its
    /// own authenticator refuses a replay of it at once.
    private let onNonceLearned: @Sendable (RequestNonce, Int64) -> Void
    /// Disconnects of this node's sessions on their way to the log, and those that could not be
    /// appended (PostgreSQL unreachable): appended again once the log takes writes, so a closed
    /// connection never stays a session on the other nodes.
    private var waitingDisconnects: [UInt64: SessionID] = [:]
    private var owedDisconnects: Set<SessionID> = []
    /// Node runs whose sessions were ended (`endSessions`): their commands are refused when
    /// applied, on every node alike, so a session a dead run made after its end cannot appear.
    var endedIncarnations: Set<UInt64> = []
    /// PX-4 in a cluster: entries of a session on their way through the log. A message of such a
    /// session is checked for the hook only once they are applied (a `room.join` pipelined before
    /// a `room.send` must be in the replica when the send is checked, as on one node).
    private var inFlight: [SessionID: Int] = [:]
    private var inFlightSessions: [UInt64: SessionID] = [:]
    private var nextSeq: UInt64 = 0
    /// The last position applied by the engine (engine thread only).
    var position: Int64 = 0
    /// The log time of the entry at `position` (a snapshot records it).
    var lastAppliedAt: Int64 = 0
    /// The last position applied and committed to this node's replica, so what it changed can be
    /// read (read by other threads: the log reader's hand-off bound, heartbeats, /readyz).
    let appliedPosition = Atomic<Int64>(0)
    /// The leader's tick record on its way through the log (one at a time).
    private var tickSeq: UInt64?
    private var lastTickAppended: Int64 = 0
    /// How often the leader appends a tick when nothing is due (history pruning, bucket sweeps).
    static let idleTickMilliseconds: Int64 = 60_000
    /// Cluster mode, webhooks (CL-6): see EngineWebhooks.swift.
    var replicatedHooks = ReplicatedHooks()

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
        /// The signed REST call the command comes from (cluster mode).
        var stamp: RequestStamp?
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
    var streams: [RoomKey: Stream] = [:]

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
                reload: @escaping @Sendable () throws -> ChatDomain, cluster: ClusterRole? = nil,
                onAppSettings: @escaping @Sendable (String, AppSettings) -> Void = { _, _ in },
                onNonceLearned: @escaping @Sendable (RequestNonce, Int64) -> Void = { _, _ in }, logger: Logger) throws {
        self.reload = reload
        self.onNonceLearned = onNonceLearned
        self.cluster = cluster
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
            loop.scheduleRepeating(every: interval) { [self] in
                guard store.isWritable else { return }
                if cluster != nil {
                    appendOwedDisconnects()
                    expireWaiting()
                    appendOwedRecords()
                    appendTickIfDue()
                } else {
                    process(domain.tick(now: clock()), replyTo: .none)
                }
                trimIfDue()
            }
            if cluster != nil {
                loop.scheduleRepeating(every: .milliseconds(Limits.clusterWebhookOutcomeFlushMilliseconds)) { [self] in flushWebhookOutcomes() }
            }
        }
        thread = PosixThread.start(name: "roomcast-engine") { loop.run() }
    }

    /// Runs the domain's timers now (the tick timer does this every interval; in-process tests
    /// call it after moving their manual clock).
    public func tick() {
        loop.execute { [self] in
            guard store.isWritable else { return }
            if cluster != nil {
                expireWaiting()
                appendTickIfDue()
            } else {
                process(domain.tick(now: clock()), replyTo: .none)
            }
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

    /// Returns once the engine has run everything submitted before the call (at most 3 s): a
    /// stopping cluster node's last records are then on their way to the log.
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

    /// Changes can be made now: the store can write and, in a cluster, the log can be appended.
    var isWritable: Bool { store.isWritable && cluster?.log.isWritable != false }

    /// Applies a command (from any thread). `stamp`: the signed REST call it comes from; in a
    /// cluster its first change carries the call's nonce and idempotency key (ignored on one node,
    /// whose authenticator and idempotency store judge them).
    public func submit(_ command: Command, stamp: RequestStamp? = nil, replyTo: ReplyTo) {
        loop.execute { [self] in
            // Read-only (a commit failed and the disk has not recovered, or the cluster's log is
            // unreachable): refuse before applying.
            guard isWritable else {
                owe(command)
                refuse(replyTo)
                return
            }
            if beforeSend != nil, admitThroughHook(command, stamp: stamp, replyTo: replyTo) { return }
            perform(command, stamp: stamp, replyTo: replyTo)
        }
    }

    /// Applies a command now, or in a cluster appends it to the log (applied when it comes back).
    private func perform(_ command: Command, stamp: RequestStamp?, replyTo: ReplyTo) {
        if cluster != nil {
            appendChange(.command(command), stamp: stamp, replyTo: replyTo)
        } else {
            process(domain.apply(command, now: clock()), replyTo: replyTo)
        }
    }

    // MARK: Cluster mode (CLUSTER.md)

    /// Appends a signed call's change: the call's first change carries its nonce and key claim
    /// (`LogRecord.signed`), the others go as plain commands; a change of no signed call (a
    /// WebSocket op, the leader's work) goes as it always did.
    private func appendChange(_ change: SignedChange, stamp: RequestStamp?, replyTo: ReplyTo) {
        guard let cluster else { return }
        var record: LogRecord
        let carried = stamp?.takeForChange(incarnation: cluster.incarnation)
        if let carried {
            record = .signed(SignedCall(change, nonce: carried.nonce, key: carried.key))
        } else if case .command(let command) = change {
            record = .command(command)
        } else {
            record = .signed(SignedCall(change, nonce: nil, key: nil))
        }
        // Only the entry that carries the call's nonce and key hears what the log said of them.
        if append(record, replyTo: replyTo, stamp: carried != nil ? stamp : nil) == nil, carried != nil {
            // Not in the log: the call's next change, or its nonce record, carries them.
            stamp?.giveBack()
        }
    }

    /// Appends a record; `replyTo` is answered when this node applies it (or when the append fails).
    /// `owed`: appended without waiting, and appended again later if the log cannot take it now.
    @discardableResult
    func append(_ record: LogRecord, replyTo: ReplyTo, stamp: RequestStamp? = nil, owed: Bool = false) -> UInt64? {
        guard let cluster else { return nil }
        let payload: [UInt8]
        do {
            payload = try LogRecord.encode(record, format: cluster.logFormat)
        } catch {
            logger.error("a command could not be encoded for the cluster's log", metadata: ["error": "\(error)"])
            process(.failure(ChatError(.storageUnavailable, "the change could not be encoded for the cluster's log; nothing changed", field: nil)), replyTo: replyTo)
            return nil
        }
        var disconnecting: SessionID?
        if case .command(.disconnect(let sid)) = record { disconnecting = sid }
        // A disconnect is always taken (at most one per session of this node): it must reach the log.
        guard disconnecting != nil
            || (waiting.count < Limits.maxClusterWaiting && waitingBytes + payload.count <= Limits.maxClusterWaitingBytes) else {
            if owed {
                oweRecord(record, bytes: payload.count)
                return nil
            }
            process(.failure(ChatError(.rateLimited, "the node has too many changes waiting for the cluster's log (at most \(Limits.maxClusterWaiting), \(Limits.maxClusterWaitingBytes) bytes); try again",
                                       field: nil)), replyTo: replyTo)
            return nil
        }
        nextSeq += 1
        waiting[nextSeq] = (replyTo, payload.count, stamp, owed ? record : nil, clock())
        waitingBytes += payload.count
        if let disconnecting { waitingDisconnects[nextSeq] = disconnecting }
        if beforeSend != nil, case .command(let command) = record, let sid = ChatDomain.issuingSession(command) {
            inFlight[sid, default: 0] += 1
            inFlightSessions[nextSeq] = sid
        }
        cluster.log.append(payload, seq: nextSeq)
        return nextSeq
    }

    /// The caller of an entry of this node: it is no longer waiting.
    private func takeWaiting(_ seq: UInt64) -> (replyTo: ReplyTo, stamp: RequestStamp?, owed: LogRecord?)? {
        guard let w = waiting.removeValue(forKey: seq) else { return nil }
        waitingBytes -= w.bytes
        return (w.replyTo, w.stamp, w.owed)
    }

    /// Callers whose entry has not come back within `Limits.clusterAnswerDeadlineMilliseconds`
    /// (PostgreSQL, or this node's way to it, stalled after the append was sent) are told the
    /// change may have been made (50303), as when the connection is lost during an append; if the
    /// entry comes back later it is applied as usual, with no one to answer. Sequence numbers grow
    /// with time, so the scan starts at the oldest caller and stops at the first young one.
    private func expireWaiting() {
        guard !waiting.isEmpty else { return }
        let cutoff = clock() - Limits.clusterAnswerDeadlineMilliseconds
        var expired: [UInt64] = []
        while waitingFloor <= nextSeq {
            if let w = waiting[waitingFloor] {
                guard w.since < cutoff else { break }
                expired.append(waitingFloor)
            }
            waitingFloor += 1
        }
        guard !expired.isEmpty else { return }
        logger.warning("cluster: changes were not back from the log in time; their callers are told they may have been made",
                       metadata: ["count": "\(expired.count)"])
        appendFailed(expired, ambiguous: true)
    }

    /// A disconnect that cannot be appended now is owed to the log.
    private func owe(_ command: Command) {
        if cluster != nil, case .disconnect(let sid) = command { owedDisconnects.insert(sid) }
    }

    private func appendOwedDisconnects() {
        guard let cluster, cluster.log.isWritable, !owedDisconnects.isEmpty else { return }
        let owed = owedDisconnects.sorted()
        owedDisconnects = []
        for sid in owed { append(.command(.disconnect(sid)), replyTo: .none) }
    }

    /// A record appended without waiting, held until the log takes writes (bounded: the oldest go).
    private func oweRecord(_ record: LogRecord, bytes: Int) {
        owedRecords.append((record, bytes))
        owedBytes += bytes
        var dropped = 0
        while owedRecords.count > Limits.maxOwedClusterRecords || owedBytes > Limits.maxOwedClusterBytes, !owedRecords.isEmpty {
            owedBytes -= owedRecords.removeFirst().bytes
            dropped += 1
        }
        if dropped > 0 {
            logger.warning("cluster: records for the log (nonces, kept answers) dropped while PostgreSQL cannot be reached",
                           metadata: ["dropped": "\(dropped)"])
        }
    }

    private func appendOwedRecords() {
        guard let cluster, cluster.log.isWritable, !owedRecords.isEmpty else { return }
        let owed = owedRecords
        owedRecords = []
        owedBytes = 0
        for o in owed { append(o.record, replyTo: .none, owed: true) }
    }

    /// Appends a record without waiting for it; while the log cannot take writes it is held.
    private func appendOwed(_ record: LogRecord) {
        guard let cluster else { return }
        guard cluster.log.isWritable, store.isWritable else {
            oweRecord(record, bytes: (try? LogRecord.encode(record, format: cluster.logFormat).count) ?? 0)
            return
        }
        append(record, replyTo: .none, owed: true)
    }

    // MARK: Signed REST calls in a cluster (CLUSTER.md "Nonces and idempotency keys")

    /// A signed REST call was answered (from any thread): if none of its changes carried its
    /// nonce into the log, a record of its own does, so no node accepts the call again.
    public func finish(_ stamp: RequestStamp) {
        loop.execute { [self] in
            guard cluster != nil, stamp.takeNonceAlone() else { return }
            appendOwed(.nonce(stamp.nonce))
        }
    }

    /// PX-2: the answer the call with an idempotency key was sent (from any thread): every node
    /// keeps it, for retries sent to any node.
    public func keepAnswer(_ stamp: RequestStamp, status: Int, contentType: String, body: [UInt8]) {
        loop.execute { [self] in
            guard let cluster, let key = stamp.key, let ref = stamp.ref(incarnation: cluster.incarnation) else { return }
            appendOwed(.answer(KeptAnswer(ref: ref, fingerprint: key.fingerprint, status: status, contentType: contentType, body: body)))
        }
    }

    /// PX-2: the call with an idempotency key was answered "try again" (not kept; from any
    /// thread): a key its change claimed is released (a retry runs the call again, as on one
    /// node); a key whose change may or may not be in the log is marked lost if it is.
    public func answerNotKept(_ stamp: RequestStamp) {
        loop.execute { [self] in
            guard let cluster, let ref = stamp.ref(incarnation: cluster.incarnation), stamp.refusal == nil else { return }
            let claim = stamp.claimState
            guard claim.sent else { return }
            appendOwed(claim.admitted ? .releaseKey(ref) : .abandonKey(ref))
        }
    }

    /// PX-5 in a cluster: closes a user's connections on every node (each node its own); the
    /// caller is answered with how many sessions matched when this node applies the record.
    public func disconnectUser(_ d: UserDisconnect, stamp: RequestStamp?, replyTo: ReplyTo) {
        loop.execute { [self] in
            guard cluster != nil else { return process(.failure(ChatError(.invalidParameter, "not a cluster node", field: nil)), replyTo: replyTo) }
            guard isWritable else { return refuse(replyTo) }
            appendChange(.disconnectUser(d), stamp: stamp, replyTo: replyTo)
        }
    }

    /// The log could not take these records (or cannot say whether it did): their callers are
    /// told nothing is known to have changed (from any thread).
    public func appendFailed(_ seqs: [UInt64], ambiguous: Bool) {
        loop.execute { [self] in
            for seq in seqs {
                if seq == tickSeq { tickSeq = nil }
                webhookAppendFailed(seq)
                // Appended again later (a second disconnect of a session changes nothing).
                if let sid = waitingDisconnects.removeValue(forKey: seq) { owedDisconnects.insert(sid) }
                // The caller first, then what was held behind the entry.
                defer { landed(seq) }
                guard let w = takeWaiting(seq) else { continue }
                // Records appended without waiting are appended again (each is harmless twice).
                if let record = w.owed { oweRecord(record, bytes: (try? LogRecord.encode(record, format: cluster?.logFormat ?? LogRecord.format).count) ?? 0) }
                // A change known not to be in the log leaves its call's nonce and key to the
                // call's own records (a later change, the nonce record, or nothing to release);
                // one that may be in it keeps its key's claim (abandoned if it is), and its nonce
                // is sent again (harmless if it is there).
                if ambiguous { w.stamp?.resendNonce() } else { w.stamp?.giveBack() }
                Self.refuse(w.replyTo, publisher: publisher, error: ambiguous ? Self.ambiguousError : Self.clusterError)
            }
        }
    }

    /// An entry of this node was applied or will not be: a session's messages held behind it may
    /// now be checked and judged.
    private func landed(_ seq: UInt64) {
        guard let sid = inFlightSessions.removeValue(forKey: seq), let n = inFlight[sid] else { return }
        inFlight[sid] = n > 1 ? n - 1 : nil
        if n == 1, held[.session(sid)] != nil { drain(.session(sid)) }
    }

    /// The leader appends a tick when something is due (or now and then for pruning).
    private func appendTickIfDue() {
        guard let cluster, cluster.log.isLeader, cluster.log.isWritable, tickSeq == nil else { return }
        let now = clock() + cluster.log.clockOffsetMilliseconds
        // Pending webhook deliveries without an owner (their run left) pass to the run of the
        // next entry: this tick's, at once (CL-6).
        guard (domain.nextDeadline ?? .max) <= now || now - lastTickAppended >= Self.idleTickMilliseconds || !replicatedHooks.orphans.isEmpty else { return }
        lastTickAppended = now
        tickSeq = append(.tick, replyTo: .none)
    }

    /// Appends `ensureApp` for each app this node was given that the cluster does not know yet.
    public func ensureApps(_ keys: [String]) {
        loop.execute { [self] in
            for key in keys.sorted() where !domain.hasApp(key) { append(.ensureApp(key), replyTo: .none) }
        }
    }

    /// The last log position this node has applied (any thread).
    public var applied: Int64 { appliedPosition.load(ordering: .acquiring) }

    /// Applies entries of the shared log in position order (from the log's reader thread): the
    /// same change on every node, with the entry's time and ids derived from its position. This
    /// node's own entries answer their callers.
    public func apply(entries: [ReplicatedEntry]) {
        loop.execute { [self] in
            guard let cluster else { return }
            for e in entries {
                if e.position <= position { continue }
                guard e.position == position + 1 else {
                    logger.critical("the cluster's log skipped from \(position) to \(e.position); stopping")
                    exit(75)
                }
                position = e.position
                lastAppliedAt = e.at
                let own = e.origin == cluster.origin
                var replyTo = ReplyTo.none
                var stamp: RequestStamp?
                if own {
                    if let w = takeWaiting(e.seq) {
                        replyTo = w.replyTo
                        stamp = w.stamp
                    }
                    waitingDisconnects[e.seq] = nil
                    if e.seq == tickSeq { tickSeq = nil }
                }
                // Messages held behind this entry are checked once it is applied.
                defer { if own { landed(e.seq) } }
                cluster.ids.begin(position: e.position, at: e.at)
                beginWebhookEntry(e)
                defer { endWebhookEntry(e) }
                let record: LogRecord
                do {
                    record = try LogRecord.decode(e.payload)
                } catch {
                    // Skipping would let this node differ from those that can read it (a newer
                    // version wrote it): stop instead, and let the operator upgrade this node.
                    logger.critical("a log entry cannot be decoded (written by a newer roomcast?); stopping",
                                    metadata: ["position": "\(e.position)", "error": "\(error)"])
                    exit(75)
                }
                switch record {
                case .command(let command):
                    if let sid = ChatDomain.issuingSession(command), endedIncarnations.contains(sid.incarnation) {
                        process(.failure(ChatError(.unknownSession, "the session's node run was ended by the cluster; reconnect", field: nil)),
                                replyTo: replyTo, now: e.at, stageWebhooks: false)
                        continue
                    }
                    process(domain.apply(command, now: e.at), replyTo: replyTo, now: e.at, stageWebhooks: true)
                case .tick:
                    process(domain.tick(now: e.at), replyTo: replyTo, now: e.at, stageWebhooks: true)
                    ledger.expire(at: e.at)
                    forgetAnswers()
                case .endSessions(let incarnation):
                    endedIncarnations.insert(incarnation)
                    orphanWebhookDeliveries(of: incarnation)
                    ledger.endRun(incarnation)
                    if incarnation == cluster.incarnation {
                        logger.critical("the cluster declared this node dead (its heartbeats stopped) and ended its sessions; stopping to rejoin")
                        exit(75)
                    }
                    for sid in domain.sessions(ofIncarnation: incarnation) {
                        process(domain.apply(.disconnect(sid), now: e.at), replyTo: .none, now: e.at, stageWebhooks: true)
                    }
                case .ensureApp(let key):
                    if !domain.hasApp(key) {
                        process(domain.apply(.configureApp(app: key, AppSettings()), now: e.at), replyTo: replyTo, now: e.at, stageWebhooks: true)
                    }
                case .webhookEndpoint, .webhookReplay, .webhookOutcomes:
                    applyWebhookRecord(record, e, own: own)
                case .signed(let call):
                    applySigned(call, position: e.position, at: e.at, own: own, stamp: stamp, replyTo: replyTo)
                case .nonce(let n):
                    if ledger.useNonce(n, at: e.at) { onNonceLearned(n, e.at) }
                case .answer(let a):
                    let keep = ledger.keepAnswer(a, position: e.position, at: e.at)
                    let forgotten = ledger.takeForgotten()
                    guard keep || !forgotten.isEmpty else { break }
                    let stored = StoredAnswer(fingerprint: a.fingerprint, status: a.status, contentType: a.contentType, body: a.body, at: e.at)
                    store.submit(Store.Commit(mutations: [], extra: { tx in
                        if !forgotten.isEmpty { try Store.forgetAnswers(forgotten, tx) }
                        if keep { try Store.keepAnswer(app: a.ref.app, key: a.ref.key, stored, tx) }
                    }, onDurable: {}))
                case .releaseKey(let ref):
                    ledger.release(ref)
                case .abandonKey(let ref):
                    ledger.abandon(ref)
                }
            }
            // Published once the replica has committed what these entries changed (commits run in
            // order): a read after `applied` reached a position sees that position's changes.
            let reached = position
            // (An `extra` that writes nothing: a store that cannot write refuses it instead of
            // publishing a position whose changes it did not commit.)
            store.submit(Store.Commit(mutations: [], extra: { _ in }, onDurable: { [self] in appliedPosition.store(reached, ordering: .releasing) }))
        }
    }

    /// A signed call's first change: refused alike on every node if its nonce was used or its
    /// idempotency key was claimed; otherwise applied, the key now this call's.
    private func applySigned(_ call: SignedCall, position: Int64, at: Int64, own: Bool, stamp: RequestStamp?, replyTo: ReplyTo) {
        let verdict = ledger.admit(call, position: position, at: at)
        if let n = call.nonce, verdict != .nonceReused { onNonceLearned(n, at) }
        forgetAnswers()
        switch verdict {
        case .nonceReused:
            stamp?.refused(.nonceReused)
            process(.failure(ChatError(.nonceReused, "nonce already used", field: stamp?.nonceField ?? "Nonce")), replyTo: replyTo, now: at,
                    stageWebhooks: false)
        case .duplicate(let d):
            stamp?.refused(.duplicate(d))
            process(.failure(Self.duplicateError(d, header: stamp?.key?.header ?? "Idempotency-Key")), replyTo: replyTo, now: at, stageWebhooks: false)
        case .admitted:
            if call.key != nil { stamp?.admitted() }
            switch call.change {
            case .command(let command):
                process(domain.apply(command, now: at), replyTo: replyTo, now: at, stageWebhooks: true)
            case .disconnectUser(let d):
                // PX-5: every node closes its own matching connections (their disconnects come
                // back through the log); the count is the domain's, the same on every node.
                let matching = domain.sessions(app: d.app, userId: d.userId, device: d.device)
                publish([.disconnectUser(app: d.app, userId: d.userId, device: d.device, code: d.closeCode, reason: d.reason)],
                        reply: .success(.disconnected(matching.count)), replyTo: replyTo)
            }
        }
    }

    /// PX-2: why a call's change is not applied again, as its refusal (the gateway replays a kept
    /// answer instead of `answered`'s).
    static func duplicateError(_ d: RequestLedger.Duplicate, header: String) -> ChatError {
        switch d {
        case .otherRequest:
            return ChatError(.idempotencyKeyReused, "this \(header) was used with another request", field: header)
        case .answered, .inProgress:
            return ChatError(.idempotencyKeyInFlight, "a request with this \(header) is still being answered", field: header)
        case .answerLost:
            return answerLostError(header: header)
        }
    }

    /// PX-2, 40903: the key's change was made and its answer lost.
    public static func answerLostError(header: String) -> ChatError {
        ChatError(.idempotentAnswerLost, "the request with this \(header) made its change, but its answer was lost (the node that made it stopped, "
                  + "or lost the cluster's database, before the answer was kept); do not retry it: read the state instead", field: header)
    }

    /// Deletes the kept answers of keys the ledger forgot (past its bound, or expired).
    private func forgetAnswers() {
        let forgotten = ledger.takeForgotten()
        guard !forgotten.isEmpty else { return }
        store.submit(Store.Commit(mutations: [], extra: { tx in try Store.forgetAnswers(forgotten, tx) }, onDurable: {}))
    }

    /// Hands items to the I/O loops and answers the caller, in order with every other outcome.
    private func publish(_ items: [Published], reply: Result<Reply, ChatError>, replyTo: ReplyTo) {
        let publisher = self.publisher
        var published = items
        if case .session(let sid, let encode) = replyTo { published.append(.reply(sid, frame: Frames.text(encode(reply)))) }
        let all = published
        store.submit(Store.Commit(mutations: [], onDurable: {
            publisher.enqueue(all)
            switch replyTo {
            case .callback(let callback), .keeping(_, then: let callback): callback(reply)
            case .session, .none: break
            }
        }, onFailed: { Self.refuse(replyTo, publisher: publisher) }))
    }

    // MARK: The before-send hook (PX-4)

    /// Takes a command over when a hook must judge it first, or when its session has commands
    /// held before it; false: apply it now.
    private func admitThroughHook(_ command: Command, stamp: RequestStamp?, replyTo: ReplyTo) -> Bool {
        let session = ChatDomain.issuingSession(command)
        var hook: BeforeSendSettings?
        if case .sendMessage(let app, _, let sender, _, _) = command, let settings = domain.appSettings(app)?.beforeSend {
            if case .session = sender { hook = settings } else if !settings.bypassServerMessages { hook = settings }
        }
        // Held: behind the session's held commands, or (a message to judge) behind its entries
        // still on their way through the cluster's log. Other commands keep their order in the log.
        let queued = session.map { held[.session($0)] != nil || (hook != nil && inFlight[$0] != nil) } ?? false
        guard hook != nil || queued else { return false }
        var disconnecting = false
        if case .disconnect = command { disconnecting = true }
        // A disconnect is never refused: the session must leave.
        if !disconnecting, let session, let q = held[.session(session)], q.count >= Limits.maxHeldPerSession {
            process(.failure(ChatError(.rateLimited, "at most \(Limits.maxHeldPerSession) commands of a connection wait behind messages being moderated",
                                       field: nil)), replyTo: replyTo)
            return true
        }
        nextTicket &+= 1
        let ticket = nextTicket
        let key: HoldKey = session.map { .session($0) } ?? .server(ticket)
        guard let hook else {
            held[key, default: []].append(Held(command: command, replyTo: replyTo, hook: nil, verdict: nil, ticket: ticket, asked: false, stamp: stamp))
            return true
        }
        // What every send checks (membership, mutes, size) comes first: the hook sees only
        // messages that would be sent, and a refused one is answered at once. Behind held
        // commands the check may depend on them (a join held before it): a message that fails
        // it then waits, and is checked and judged when its turn comes.
        held[key, default: []].append(Held(command: command, replyTo: replyTo, hook: hook, verdict: nil, ticket: ticket, asked: false, stamp: stamp))
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
                if ask(key, ticket: first.ticket, hook: hook, command: first.command, holdOnRefusal: entriesInFlight(key)) { return }
                continue
            }
            held[key]!.removeFirst()
            if held[key]!.isEmpty { held[key] = nil }
            release(first)
        }
    }

    /// The session behind `key` has entries on their way through the cluster's log.
    private func entriesInFlight(_ key: HoldKey) -> Bool {
        if case .session(let sid) = key { return inFlight[sid] != nil }
        return false
    }

    private func release(_ h: Held) {
        guard isWritable else {
            owe(h.command)
            refuse(h.replyTo)
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
        perform(command, stamp: h.stamp, replyTo: h.replyTo)
    }

    static let storageError = ChatError(.storageUnavailable, "the server cannot save changes now (storage unavailable); nothing changed; try again later")
    static let clusterError = ChatError(.storageUnavailable, "the cluster's log (PostgreSQL) cannot be reached; nothing changed; try again later")
    static let ambiguousError = ChatError(.outcomeUnknown,
                                          "the connection to the cluster's log (PostgreSQL) was lost while saving: the change may have been made; check before retrying")

    /// Answers a command that was not (or could not be made) durable.
    private static func refuse(_ replyTo: ReplyTo, publisher: Publisher, error: ChatError = storageError) {
        switch replyTo {
        case .callback(let callback), .keeping(_, then: let callback): callback(.failure(error))
        case .session(let sid, let encode): publisher.deliver([.reply(sid, frame: Frames.text(encode(.failure(error))))])
        case .none: break
        }
    }

    private func refuse(_ replyTo: ReplyTo) {
        Self.refuse(replyTo, publisher: publisher, error: store.isWritable ? Self.clusterError : Self.storageError)
    }

    /// A commit failed: nothing of it (or after it) is on disk, so the in-memory state is
    /// reloaded from disk, as at start-up, and every session is closed to reconnect and resume.
    /// Called by the store (any thread).
    public func storeFailed() {
        loop.execute { [self] in
            if cluster != nil {
                // The replica cannot go back to a durable state of its own: the node restarts
                // and replays the cluster's log.
                logger.critical("a commit to this node's replica failed; stopping to rebuild it from the cluster's log")
                exit(75)
            }
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
        process(out, replyTo: replyTo, now: clock(), stageWebhooks: true)
    }

    /// `now`: the time of the change (a log entry's in a cluster). `stageWebhooks`: false when the
    /// outcome cannot have any (a refusal). In a cluster every node stages them; the entry's run
    /// sends them (EngineWebhooks.swift).
    private func process(_ out: Outcome, replyTo: ReplyTo, now: Int64, stageWebhooks: Bool) {
        var items: [Published] = []
        items.reserveCapacity(out.effects.count + 1)
        var touched: [RoomKey] = []
        var kept: [StoredRoomEvent] = []
        var joinedAt: [String: Int64] = [:]
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
                // A cluster node keeps no copy: it rebuilds its state and its hubs' resume windows
                // from the cluster's log when it starts, never from its replica.
                if cluster == nil, let room = audience.room {
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
        let staging = stageWebhooks ? stageMessages(out.webhooks) : nil
        let staged = staging?.staged
        let sendHere = staging?.sendHere == true
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
        var settingsChanged: [(String, AppSettings)] = []
        for case .putApp(let key, let settings) in out.mutations { settingsChanged.append((key, settings)) }
        let changed = settingsChanged
        let onAppSettings = self.onAppSettings
        store.submit(Store.Commit(mutations: out.mutations, extra: extra, onDurable: {
            for (key, settings) in changed { onAppSettings(key, settings) }
            publisher.enqueue(published)
            if let staged, sendHere { webhooks?.enqueue(staged) }
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
