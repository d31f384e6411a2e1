import Chat
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Reactor
import Store
import Synchronization
import Webhooks
import Replication

/// Cluster mode, webhooks (CL-6, CLUSTER.md §7): what the engine keeps between log entries.
/// Touched only on the engine's thread, as the rest of its state.
struct ReplicatedHooks {
    /// Names of the messages the entry being applied causes.
    var naming = WebhookService.MessageNaming()
    /// The run that appended the entry being applied (nil: an origin no run of this version made).
    var run: UInt64?
    /// Runs whose pending deliveries wait for an owner: runs that ended, and the runs of entries
    /// applied after their end. The next entry appended by a run that has not ended takes them.
    var orphans: Set<UInt64> = []
    /// This node's delivery outcomes waiting to be appended, and those on their way (by the
    /// entry's sequence number). At most one per delivery this node owned: bounded by them.
    var outcomes: [WebhookOutcome] = []
    var appending: [UInt64: [WebhookOutcome]] = [:]
    /// Callers of the webhook changes this node appended, by sequence number.
    var callers: [UInt64: @Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void] = [:]
    /// The log time at which the replica last forgot final messages past the retention.
    var lastPrune: Int64 = 0
}

extension Engine {
    /// How often, in the log's time, the replica forgets final webhook messages past the retention.
    static let webhookPruneMilliseconds: Int64 = 60_000

    // MARK: Staging (process)

    /// The messages an outcome's webhook records make. On one node: named at random, all sent
    /// here. In a cluster: named after the entry and owned by the run that appended it, sent here
    /// only when that is this run (every node stages them, the others keep them parked).
    func stageMessages(_ records: [WebhookRecord]) -> (staged: WebhookService.Staged, sendHere: Bool)? {
        guard let webhooks, !records.isEmpty else { return nil }
        guard let cluster else { return webhooks.stage(records).map { ($0, true) } }
        let owner = replicatedHooks.run ?? 0
        guard let staged = webhooks.stage(records, owner: owner, naming: &replicatedHooks.naming) else { return nil }
        // A run that ended (or no run) cannot send them: the next live run's entry takes them.
        if replicatedHooks.run == nil || endedIncarnations.contains(owner) { replicatedHooks.orphans.insert(owner) }
        return (staged, owner == cluster.incarnation)
    }

    // MARK: Applying the log

    func beginWebhookEntry(_ e: ReplicatedEntry) {
        replicatedHooks.naming.begin(position: e.position)
        replicatedHooks.run = ClusterRun.incarnation(ofOrigin: e.origin)
    }

    /// After each entry: final messages past the retention are forgotten (at the entries' times,
    /// so on every node alike), and pending deliveries without an owner pass to the entry's run
    /// if it has not ended. That run is the leader for a run it found dead, the node's next run
    /// for a restart, and, for a run that left by itself, whichever run appends next (the leader
    /// appends a tick at least every minute).
    func endWebhookEntry(_ e: ReplicatedEntry) {
        guard let webhooks else { return }
        if e.at - replicatedHooks.lastPrune >= Self.webhookPruneMilliseconds {
            replicatedHooks.lastPrune = e.at
            store.submit(Store.Commit(mutations: [], extra: webhooks.prune(before: e.at - webhooks.configuration.retentionMs), onDurable: {}))
        }
        guard !replicatedHooks.orphans.isEmpty, let run = replicatedHooks.run, !endedIncarnations.contains(run) else { return }
        let owners = replicatedHooks.orphans.sorted()
        replicatedHooks.orphans = []
        commitWebhooks(webhooks.adopt(owners, by: run), answering: nil)
    }

    /// `endSessions(incarnation)`: the run's pending deliveries wait for a new owner.
    func orphanWebhookDeliveries(of incarnation: UInt64) {
        replicatedHooks.orphans.insert(incarnation)
    }

    /// A webhook record of the log, applied alike on every node; `own`: this node appended it
    /// (its caller is answered once the change is durable here).
    func applyWebhookRecord(_ record: LogRecord, _ e: ReplicatedEntry, own: Bool) {
        guard let webhooks else { return }
        let caller = own ? replicatedHooks.callers.removeValue(forKey: e.seq) : nil
        let applied: WebhookService.Applied
        switch record {
        case .webhookEndpoint(let change):
            applied = webhooks.apply(change, position: e.position, at: e.at)
        case .webhookReplay(let replay):
            let owner = replicatedHooks.run ?? 0
            if replicatedHooks.run == nil || endedIncarnations.contains(owner) { replicatedHooks.orphans.insert(owner) }
            applied = webhooks.apply(replay, at: e.at, owner: owner)
        case .webhookOutcomes(let outcomes):
            if own { replicatedHooks.appending[e.seq] = nil }
            applied = webhooks.apply(outcomes)
        default:
            return
        }
        commitWebhooks(applied, answering: caller)
    }

    private func commitWebhooks(_ applied: WebhookService.Applied,
                                answering caller: (@Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void)?) {
        let done = applied.done
        store.submit(Store.Commit(mutations: [], extra: applied.write, onDurable: {
            let result = done()
            caller?(result)
        }))
    }

    // MARK: This node's outcomes

    /// Outcomes of this node's deliveries (from the store's thread): appended within
    /// `Limits.clusterWebhookOutcomeFlushMilliseconds`.
    public func webhookOutcomes(_ list: [WebhookOutcome]) {
        loop.execute { [self] in replicatedHooks.outcomes.append(contentsOf: list) }
    }

    /// Appends the waiting outcomes, at most `Limits.maxWebhookOutcomesPerRecord` a record; those
    /// the log cannot take now wait for the next round.
    func flushWebhookOutcomes() {
        guard let cluster, cluster.log.isWritable else { return }
        while !replicatedHooks.outcomes.isEmpty {
            let batch = Array(replicatedHooks.outcomes.prefix(Limits.maxWebhookOutcomesPerRecord))
            guard let seq = append(.webhookOutcomes(batch), replyTo: .none) else { return }
            replicatedHooks.outcomes.removeFirst(batch.count)
            replicatedHooks.appending[seq] = batch
        }
    }

    /// An entry of this node is not in the log: its outcomes wait to be appended again (a webhook
    /// change's caller is answered through the entry's reply).
    func webhookAppendFailed(_ seq: UInt64) {
        if let batch = replicatedHooks.appending.removeValue(forKey: seq) { replicatedHooks.outcomes.insert(contentsOf: batch, at: 0) }
        replicatedHooks.callers[seq] = nil
    }

    /// Before a cluster node leaves, once its delivery thread has stopped: what that thread
    /// finished is appended, so the run that takes its deliveries over does not send them again.
    /// Returns when they are applied here, or after `timeoutMilliseconds`.
    public func settleWebhookOutcomes(timeoutMilliseconds: Int64) {
        guard cluster != nil else { return }
        let deadline = wallClockMilliseconds() + timeoutMilliseconds
        // The delivery thread's last outcomes are reported once its last writes are durable.
        let written = Atomic<Bool>(false)
        store.submit(Store.Commit(mutations: [], onDurable: { written.store(true, ordering: .releasing) }))
        while !written.load(ordering: .acquiring) && wallClockMilliseconds() < deadline { usleep(2_000) }
        let settled = Atomic<Bool>(false)
        while wallClockMilliseconds() < deadline {
            loop.execute { [self] in
                flushWebhookOutcomes()
                settled.store(replicatedHooks.outcomes.isEmpty && replicatedHooks.appending.isEmpty, ordering: .releasing)
            }
            usleep(20_000)
            if settled.load(ordering: .acquiring) { return }
        }
        logger.warning("cluster: some webhook outcomes were not appended before leaving; the run that takes over may send those messages again")
    }

    // MARK: Changes through REST, and the command line's endpoints

    /// A webhook endpoint change or replay asked of this node (cluster mode): checked against the
    /// replica, appended, and answered once this node has applied it (every node applies it
    /// alike). Bad input is refused before anything is appended.
    public func webhookChange(_ request: WebhookService.AdminRequest,
                              completion: @escaping @Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void) {
        loop.execute { [self] in
            guard cluster != nil, let webhooks else {
                return completion(.failure(ChatError(.storageUnavailable, "webhook changes go through the cluster's log; this node has none", field: nil)))
            }
            guard isWritable else { return completion(.failure(store.isWritable ? Self.clusterError : Self.storageError)) }
            let record: LogRecord
            do throws(ChatError) {
                record = try webhooks.record(for: request)
            } catch {
                return completion(.failure(error))
            }
            // Refused on its way (the log unreachable, too many waiting): the entry's reply says so.
            let seq = append(record, replyTo: .callback { result in
                if case .failure(let error) = result { completion(.failure(error)) }
            })
            if let seq { replicatedHooks.callers[seq] = completion }
        }
    }

    /// Appends what makes the endpoints this node's command line gives exist as it gives them
    /// (`--webhook`; each is made once for the cluster, with the secret of the first record
    /// applied, unless the command line gives one).
    public func ensureWebhookEndpoints(_ list: [(app: String, spec: WebhookService.EndpointSpec)]) {
        loop.execute { [self] in
            guard cluster != nil, let webhooks else { return }
            for (app, spec) in list {
                do throws(ChatError) {
                    if let change = try webhooks.ensureChange(app: app, spec) { append(.webhookEndpoint(change), replyTo: .none) }
                } catch {
                    logger.error("cluster: a --webhook endpoint cannot be made", metadata: ["app": "\(app)", "error": "\(error)"])
                }
            }
        }
    }
}
