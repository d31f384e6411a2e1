import Chat
import Logging
import Replication
import Store
import Webhooks
import Wire

/// What the engine remembers of an entry this node appended, until the log hands it back (or says
/// it could not take it).
struct Waiter {
    var replyTo: ReplyTo = .none
    /// The signed REST call whose nonce and idempotency key the entry carries.
    var stamp: RequestStamp?
    /// Appended without waiting (a nonce, a kept answer): appended again if the log could not take it.
    var owed: LogRecord?
    /// A session's disconnect: appended again if the log could not take it.
    var disconnecting: SessionID?
    /// PX-4: the session whose entry this is (its messages to judge wait for it).
    var session: SessionID?
    /// The leader's tick.
    var tick = false
    /// PX-2: an answer this node kept with the change it answers (its record needs no write here).
    var answerKeptHere = false
    /// A webhook change's caller, answered with the change's result once it is durable here.
    var webhookCaller: (@Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void)?
    /// Outcomes of this node's webhook deliveries (given back to be appended again if the log
    /// could not take them).
    var outcomes: [WebhookOutcome] = []
    var bytes = 0
    var since: Int64 = 0
}

/// Start-up: a node serves once it has applied the log as it was when it started, the apps it was
/// given exist in the log's state, and the webhook endpoints of its command line exist as it gives
/// them (each made once, through the log). A single node's log is empty at start and its apps are
/// in its store: only its endpoints are made. Checked on the engine's thread after each round of
/// entries and on the tick timer; asks are repeated every two seconds (an append refused while the
/// log was unreachable is not retried by itself).
struct CatchUp {
    var head: Int64
    var apps: [String]
    var endpoints: [(app: String, spec: WebhookService.EndpointSpec)]
    var done: @Sendable () -> Void
    var asks = 0
    var lastAsk: Int64?
    static let askEveryMilliseconds: Int64 = 2_000
}

extension Engine {
    // MARK: Appending

    /// Appends a change: a signed call's first change carries the call's nonce and key claim
    /// (`LogRecord.signed`), the others go as plain commands; a change of no signed call (a
    /// WebSocket op, the leader's work) goes as a command.
    func appendChange(_ change: SignedChange, stamp: RequestStamp?, replyTo: ReplyTo) {
        let record: LogRecord
        let carried = stamp?.takeForChange(incarnation: log.incarnation)
        if let carried {
            record = .signed(SignedCall(change, nonce: carried.nonce, key: carried.key))
        } else if case .command(let command) = change {
            record = .command(command)
        } else {
            record = .signed(SignedCall(change, nonce: nil, key: nil))
        }
        var waiter = Waiter(replyTo: replyTo, stamp: carried != nil ? stamp : nil)
        if case .command(let command) = change {
            if case .disconnect(let sid) = command { waiter.disconnecting = sid }
            if beforeSend != nil { waiter.session = ChatDomain.issuingSession(command) }
        }
        // Only the entry that carries the call's nonce and key hears what the log said of them; if
        // it is not in the log, the call's next change, or its nonce record, carries them.
        if !append(record, waiter), carried != nil { stamp?.giveBack() }
    }

    /// Appends a record; the waiter's caller is answered when this node applies it, or when the
    /// log cannot take it. A local log applies it before this returns. False: not appended (the
    /// caller was answered; a record appended without waiting is held to be appended later).
    @discardableResult
    func append(_ record: LogRecord, _ waiter: Waiter) -> Bool {
        let payload: LogPayload
        do {
            payload = try log.encode(record)
        } catch {
            logger.error("a record could not be encoded for the log", metadata: ["error": "\(error)"])
            answer(ChatError(.storageUnavailable, "the change could not be encoded for the log; nothing changed", field: nil), replyTo: waiter.replyTo)
            return false
        }
        // A disconnect is always taken (at most one per session of this node): it must reach the log.
        guard waiter.disconnecting != nil
            || (waiting.count < Limits.maxClusterWaiting && waitingBytes + payload.count <= Limits.maxClusterWaitingBytes) else {
            if let owed = waiter.owed {
                oweRecord(owed, bytes: payload.count)
                return false
            }
            answer(ChatError(.rateLimited, "the node has too many changes waiting for the cluster's log (at most \(Limits.maxClusterWaiting), "
                                 + "\(Limits.maxClusterWaitingBytes) bytes); try again", field: nil), replyTo: waiter.replyTo)
            return false
        }
        nextSeq += 1
        let seq = nextSeq
        var w = waiter
        w.bytes = payload.count
        w.since = clock()
        waiting[seq] = w
        waitingBytes += w.bytes
        if let sid = w.session { inFlight[sid, default: 0] += 1 }
        if let entry = log.append(payload, seq: seq) { applyEntries([entry]) }
        return true
    }

    /// The caller of an entry of this node: it is no longer waiting.
    private func takeWaiting(_ seq: UInt64) -> Waiter? {
        guard let w = waiting.removeValue(forKey: seq) else { return nil }
        waitingBytes -= w.bytes
        return w
    }

    /// Callers whose entry has not come back within `Limits.clusterAnswerDeadlineMilliseconds`
    /// (PostgreSQL, or this node's way to it, stalled after the append was sent) are told the
    /// change may have been made (50303), as when the connection is lost during an append; if the
    /// entry comes back later it is applied as usual, with no one to answer. Sequence numbers grow
    /// with time, so the scan starts at the oldest caller and stops at the first young one.
    func expireWaiting() {
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
        logger.warning("changes were not back from the log in time; their callers are told they may have been made",
                       metadata: ["count": "\(expired.count)"])
        failed(expired, ambiguous: true)
    }

    /// A disconnect that cannot be appended now is owed to the log.
    func owe(_ command: Command) {
        if case .disconnect(let sid) = command { owedDisconnects.insert(sid) }
    }

    func appendOwedDisconnects() {
        guard isWritable, !owedDisconnects.isEmpty else { return }
        let owed = owedDisconnects.sorted()
        owedDisconnects = []
        for sid in owed { append(.command(.disconnect(sid)), Waiter(disconnecting: sid)) }
    }

    /// A record appended without waiting, held until the log takes writes (bounded: the oldest go).
    func oweRecord(_ record: LogRecord, bytes: Int) {
        owedRecords.append((record, bytes))
        owedBytes += bytes
        var dropped = 0
        while owedRecords.count > Limits.maxOwedClusterRecords || owedBytes > Limits.maxOwedClusterBytes, !owedRecords.isEmpty {
            owedBytes -= owedRecords.removeFirst().bytes
            dropped += 1
        }
        if dropped > 0 {
            logger.warning("records for the log (nonces, kept answers) dropped while it cannot be reached", metadata: ["dropped": "\(dropped)"])
        }
    }

    func appendOwedRecords() {
        guard isWritable, !owedRecords.isEmpty else { return }
        let owed = owedRecords
        owedRecords = []
        owedBytes = 0
        for o in owed { append(o.record, Waiter(owed: o.record)) }
    }

    /// Appends a record without waiting for it; while the log cannot take writes it is held.
    func appendOwed(_ record: LogRecord) {
        guard isWritable else {
            oweRecord(record, bytes: (try? log.encode(record).count) ?? 0)
            return
        }
        append(record, Waiter(owed: record))
    }

    /// The log could not take these records (or cannot say whether it did): their callers are
    /// told nothing is known to have changed (from any thread).
    public func appendFailed(_ seqs: [UInt64], ambiguous: Bool) {
        loop.execute { [self] in failed(seqs, ambiguous: ambiguous) }
    }

    private func failed(_ seqs: [UInt64], ambiguous: Bool) {
        for seq in seqs {
            guard let w = takeWaiting(seq) else { continue }
            if w.tick { tickInFlight = false }
            // Webhook outcomes wait for the next round.
            if !w.outcomes.isEmpty { webhookEntries.outcomes.insert(contentsOf: w.outcomes, at: 0) }
            // Appended again later (a second disconnect of a session changes nothing).
            if let sid = w.disconnecting { owedDisconnects.insert(sid) }
            // Records appended without waiting are appended again (each is harmless twice).
            if let record = w.owed { oweRecord(record, bytes: w.bytes) }
            // A change known not to be in the log leaves its call's nonce and key to the call's
            // own records (a later change, the nonce record, or nothing to release); one that may
            // be in it keeps its key's claim (abandoned if it is), and its nonce is sent again
            // (harmless if it is there).
            if ambiguous { w.stamp?.resendNonce() } else { w.stamp?.giveBack() }
            // The caller first, then what was held behind the entry.
            Self.refuse(w.replyTo, publisher: publisher, error: ambiguous ? Self.ambiguousError : Self.clusterError)
            landed(w)
        }
    }

    /// An entry of this node was applied or will not be: a session's messages held behind it may
    /// now be checked and judged.
    private func landed(_ w: Waiter) {
        guard let sid = w.session, let n = inFlight[sid] else { return }
        inFlight[sid] = n > 1 ? n - 1 : nil
        if n == 1, held[.session(sid)] != nil { drain(.session(sid)) }
    }

    /// The leader appends a tick when something is due (or now and then, for pruning).
    func appendTickIfDue() {
        guard log.isLeader, log.isWritable, !tickInFlight else { return }
        let now = clock() + log.clockOffsetMilliseconds
        // Pending webhook deliveries without an owner (their run left) pass to the run of the
        // next entry: this tick's, at once (CL-6).
        guard (domain.nextDeadline ?? .max) <= now || now - lastTickAppended >= Self.idleTickMilliseconds || !webhookEntries.orphans.isEmpty else { return }
        lastTickAppended = now
        tickInFlight = true
        if !append(.tick, Waiter(tick: true)) { tickInFlight = false }
    }

    /// The last log position this node has applied and committed (any thread).
    public var applied: Int64 { appliedPosition.load(ordering: .acquiring) }

    // MARK: Applying

    /// Applies entries of the log in position order (from a shared log's reader thread): the
    /// same change on every node, with the entry's time and ids. This node's own entries answer
    /// their callers.
    public func apply(entries: [LogEntry]) {
        loop.execute { [self] in applyEntries(entries) }
    }

    func applyEntries(_ entries: [LogEntry]) {
        for e in entries {
            if e.position <= position { continue }
            guard e.position == position + 1 else { halt("the log skipped from position \(position) to \(e.position)") }
            position = e.position
            lastAppliedAt = e.at
            let waiter = e.origin == log.origin ? takeWaiting(e.seq) : nil
            if waiter?.tick == true { tickInFlight = false }
            // Messages held behind this entry are checked once it is applied.
            defer { if let waiter { landed(waiter) } }
            log.traits.ids.begin(position: e.position, at: e.at)
            beginWebhookEntry(e)
            defer { endWebhookEntry(e) }
            let record: LogRecord
            do {
                record = try e.payload.record()
            } catch {
                // Skipping would let this node differ from those that can read it (a newer
                // version wrote it): stop instead, and let the operator upgrade this node.
                halt("a log entry cannot be decoded (written by a newer roomcast?)", metadata: ["position": "\(e.position)", "error": "\(error)"])
            }
            applyRecord(record, e, waiter: waiter)
        }
        // Published once the replica has committed what these entries changed (commits run in
        // order): a read after `applied` reached a position sees that position's changes.
        let reached = position
        let waitingForCatchUp = catchingUp != nil
        // (A commit that writes nothing: it runs once the commits before it are durable. A store
        // that failed refuses those; the replica is then lost, and the engine handles that.)
        commit(Store.Commit(mutations: [], onDurable: { [self] in
            appliedPosition.store(reached, ordering: .releasing)
            if waitingForCatchUp { loop.execute { [self] in continueCatchingUp() } }
        }))
    }

    private func applyRecord(_ record: LogRecord, _ e: LogEntry, waiter: Waiter?) {
        let replyTo = waiter?.replyTo ?? .none
        switch record {
        case .command(let command):
            if let sid = ChatDomain.issuingSession(command), endedIncarnations.contains(sid.incarnation) {
                process(.failure(ChatError(.unknownSession, "the session's node run was ended by the cluster; reconnect", field: nil)),
                        replyTo: replyTo, now: e.at, stageWebhooks: false)
                return
            }
            process(applyCommand(command, at: e.at), replyTo: replyTo, now: e.at, stageWebhooks: true)
        case .tick:
            process(domain.tick(now: e.at), replyTo: replyTo, now: e.at, stageWebhooks: true)
            ledger.expire(at: e.at)
            forgetAnswers()
        case .endSessions(let incarnation):
            endedIncarnations.insert(incarnation)
            orphanWebhookDeliveries(of: incarnation)
            ledger.endRun(incarnation)
            if incarnation == log.incarnation {
                halt("the cluster declared this node run dead (its heartbeats stopped) and ended its sessions; the next start rejoins")
            }
            for sid in domain.sessions(ofIncarnation: incarnation) {
                process(domain.apply(.disconnect(sid), now: e.at), replyTo: .none, now: e.at, stageWebhooks: true)
            }
        case .ensureApp(let key):
            if !domain.hasApp(key) {
                process(domain.apply(.configureApp(app: key, AppSettings()), now: e.at), replyTo: replyTo, now: e.at, stageWebhooks: true)
            }
        case .webhookEndpoint, .webhookReplay, .webhookOutcomes:
            applyWebhookRecord(record, e, caller: waiter?.webhookCaller)
        case .signed(let call):
            applySigned(call, position: e.position, at: e.at, stamp: waiter?.stamp, replyTo: replyTo)
        case .nonce(let n):
            if ledger.useNonce(n, at: e.at) { onNonceLearned(n, e.at) }
        case .answer(let a):
            // Every node keeps it, but the one that kept it with its change already has it.
            let keep = ledger.keepAnswer(a, position: e.position, at: e.at) && waiter?.answerKeptHere != true
            let forgotten = ledger.takeForgotten()
            let stored = StoredAnswer(fingerprint: a.fingerprint, status: a.status, contentType: a.contentType, body: a.body, at: e.at)
            var write: (@Sendable (Store.Transaction) throws -> Void)?
            if keep || !forgotten.isEmpty {
                let app = a.ref.app, key = a.ref.key
                write = { tx in
                    if !forgotten.isEmpty { try Store.forgetAnswers(forgotten, tx) }
                    if keep { try Store.keepAnswer(app: app, key: key, stored, tx) }
                }
            }
            // The call that kept it is answered once it is kept (PX-2: a retry finds it).
            commit(Store.Commit(mutations: [], extra: write, onDurable: {
                if case .callback(let callback) = replyTo { callback(.success(.done)) }
            }, onFailed: { Self.refuse(replyTo, publisher: self.publisher) }))
        case .releaseKey(let ref):
            ledger.release(ref)
        case .abandonKey(let ref):
            ledger.abandon(ref)
        }
    }

    /// Applies a command to the domain; QS-7 counts what the room's budget did with a message.
    private func applyCommand(_ command: Command, at: Int64) -> Outcome {
        let out = domain.apply(command, now: at)
        let options: MessageOptions?
        switch command {
        case .sendMessage(_, _, _, _, _, let o), .sendToRooms(_, _, _, _, _, let o), .broadcast(_, _, _, _, let o): options = o
        default: return out
        }
        switch out.reply {
        case .success(.message(let m)): messageCounters.admitted(m.transient ? .transient : Lane(m.priority))
        // AU-3: a list send's message in each room; a broadcast's, transient, in each room it reached.
        case .success(.messages(let ms)): for m in ms { messageCounters.admitted(m.transient ? .transient : Lane(m.priority)) }
        case .success(.broadcast(_, let rooms)): messageCounters.admitted(.transient, count: rooms)
        case .failure(let e) where e.code == .roomBusy:
            messageCounters.refused(options?.transient == true ? .transient : Lane(options?.priority ?? .normal))
        default: break
        }
        return out
    }

    /// A signed call's first change: refused alike on every node if its nonce was used or its
    /// idempotency key was claimed; otherwise applied, the key now this call's.
    private func applySigned(_ call: SignedCall, position: Int64, at: Int64, stamp: RequestStamp?, replyTo: ReplyTo) {
        let verdict = ledger.admit(call, position: position, at: at)
        if let n = call.nonce, verdict != .nonceReused { onNonceLearned(n, at) }
        forgetAnswers()
        switch verdict {
        // A call the log refuses keeps no answer (the key is another call's, or the call is a replay).
        case .nonceReused:
            stamp?.refused(.nonceReused)
            process(.failure(ChatError(.nonceReused, "nonce already used", field: stamp?.nonceField ?? "Nonce")), replyTo: replyTo.keepingNothing,
                    now: at, stageWebhooks: false)
        case .duplicate(let d):
            stamp?.refused(.duplicate(d))
            process(.failure(Self.duplicateError(d, header: stamp?.key?.header ?? "Idempotency-Key")), replyTo: replyTo.keepingNothing, now: at,
                    stageWebhooks: false)
        case .admitted:
            if call.key != nil { stamp?.admitted() }
            switch call.change {
            case .command(let command):
                process(applyCommand(command, at: at), replyTo: replyTo, now: at, stageWebhooks: true)
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
        commit(Store.Commit(mutations: [], extra: { tx in try Store.forgetAnswers(forgotten, tx) }, onDurable: {}))
    }

    // MARK: Signed REST calls (CLUSTER.md "Nonces and idempotency keys")

    /// A signed REST call was answered (from any thread): if none of its changes carried its
    /// nonce into the log, a record of its own does, so no node accepts the call again.
    public func finish(_ stamp: RequestStamp) {
        loop.execute { [self] in
            guard stamp.takeNonceAlone() else { return }
            appendOwed(.nonce(stamp.nonce))
        }
    }

    /// PX-2: the answer the call with an idempotency key is sent (from any thread): it is kept in
    /// the log's state (every node's replica), and `then` runs once this node has it, so a retry
    /// finds it. If the log cannot take it now it is appended later and `then` runs at once.
    /// `keptWithChange`: this node already wrote it with the change it answers (`ReplyTo.keeping`).
    public func keepAnswer(_ stamp: RequestStamp, status: Int, contentType: String, body: [UInt8], keptWithChange: Bool = false,
                           then: @escaping @Sendable () -> Void) {
        loop.execute { [self] in
            guard let key = stamp.key, let ref = stamp.ref(incarnation: log.incarnation) else { return then() }
            let record = LogRecord.answer(KeptAnswer(ref: ref, fingerprint: key.fingerprint, status: status, contentType: contentType, body: body))
            guard isWritable else {
                oweRecord(record, bytes: (try? log.encode(record).count) ?? 0)
                return then()
            }
            // Answered when applied here, and also when the log could not take it (kept later).
            if !append(record, Waiter(replyTo: .callback { _ in then() }, owed: record, answerKeptHere: keptWithChange)) { then() }
        }
    }

    /// PX-2: the call with an idempotency key was answered "try again" (not kept; from any
    /// thread): a key its change claimed is released (a retry runs the call again); a key whose
    /// change may or may not be in the log is marked lost if it is.
    public func answerNotKept(_ stamp: RequestStamp) {
        loop.execute { [self] in
            guard let ref = stamp.ref(incarnation: log.incarnation), stamp.refusal == nil else { return }
            let claim = stamp.claimState
            guard claim.sent else { return }
            appendOwed(claim.admitted ? .releaseKey(ref) : .abandonKey(ref))
        }
    }

    /// PX-5: closes a user's connections (one device's, when given) on every node, each node its
    /// own; the caller is answered with how many sessions matched when this node applies it.
    public func disconnectUser(_ d: UserDisconnect, stamp: RequestStamp?, replyTo: ReplyTo) {
        loop.execute { [self] in
            guard isWritable else { return refuse(replyTo) }
            appendChange(.disconnectUser(d), stamp: stamp, replyTo: replyTo)
        }
    }

    // MARK: Start-up

    /// Calls `done` (on the engine's thread) once the node has caught up (`CatchUp`): applied the
    /// log up to `head`, made the apps in `apps` exist, and the command line's webhook endpoints.
    public func catchUp(to head: Int64, apps: [String], endpoints: [(app: String, spec: WebhookService.EndpointSpec)],
                        done: @escaping @Sendable () -> Void) {
        loop.execute { [self] in
            catchingUp = CatchUp(head: head, apps: apps.sorted(), endpoints: endpoints, done: done)
            continueCatchingUp()
        }
    }

    func continueCatchingUp() {
        guard var c = catchingUp, applied >= c.head else { return }
        let now = clock()
        let due = c.lastAsk.map { now - $0 >= CatchUp.askEveryMilliseconds } ?? true
        let missingApps = c.apps.filter { !domain.hasApp($0) }
        if !missingApps.isEmpty {
            if due {
                c.lastAsk = now
                catchingUp = c
                for key in missingApps { append(.ensureApp(key), Waiter()) }
            }
            return
        }
        // CL-6: the endpoints of the command line exist as it gives them. After three asks an
        // endpoint that exists but differs is left as the log has it (another node's command line
        // gives it otherwise): the nodes do not take turns changing it.
        let changes = c.endpoints.compactMap { h -> (id: String, change: WebhookEndpointChange)? in
            guard let webhooks, let url = h.spec.url, let change = try? webhooks.ensureChange(app: h.app, h.spec) else { return nil }
            return (WebhookService.configuredID(app: h.app, url: url), change)
        }
        let absent = changes.filter { webhooks?.endpoint(app: $0.change.app, id: $0.id) == nil }
        if changes.isEmpty || (absent.isEmpty && c.asks >= 3) {
            if !changes.isEmpty {
                logger.warning("cluster: a --webhook endpoint differs from this node's command line; another node's gives it otherwise: give every node the same --webhook list",
                               metadata: ["endpoints": "\(changes.map(\.id))"])
            }
            catchingUp = nil
            logger.info("caught up with the log", metadata: ["applied": "\(applied)"])
            c.done()
            return
        }
        guard due else { return }
        c.lastAsk = now
        c.asks += 1
        catchingUp = c
        for change in changes { append(.webhookEndpoint(change.change), Waiter()) }
    }
}
