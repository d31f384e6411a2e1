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

/// Webhooks (CL-6, CLUSTER.md §7): what the engine keeps between log entries. Touched only on
/// the engine's thread, as the rest of its state.
struct WebhookEntries {
    /// Names of the messages the entry being applied causes (shared webhooks).
    var naming = WebhookService.MessageNaming()
    /// The run that appended the entry being applied (nil: an origin no run of this version made).
    var run: UInt64?
    /// Runs whose pending deliveries wait for an owner: runs that ended, and the runs of entries
    /// applied after their end. The next entry appended by a run that has not ended takes them.
    var orphans: Set<UInt64> = []
    /// This node's delivery outcomes waiting to be appended (shared webhooks). At most one per
    /// delivery this node owned: bounded by them.
    var outcomes: [WebhookOutcome] = []
    /// The log time at which the replica last forgot final messages past the retention.
    var lastPrune: Int64 = 0
}

extension Engine {
    /// How often, in the log's time, the replica forgets final webhook messages past the retention.
    static let webhookPruneMilliseconds: Int64 = 60_000

    // MARK: Staging (process)

    /// The messages an outcome's webhook records make, owned by the run that appended the entry
    /// and sent here only when that is this run (in a cluster every node stages them; the others
    /// keep them parked). Named as the webhook service shares them (`WebhookService.Sharing`).
    func stageMessages(_ records: [WebhookRecord]) -> (staged: WebhookService.Staged, sendHere: Bool)? {
        guard let webhooks, !records.isEmpty else { return nil }
        let owner = webhookEntries.run ?? 0
        guard let staged = webhooks.stage(records, owner: owner, naming: &webhookEntries.naming) else { return nil }
        // A run that ended (or no run) cannot send them: the next live run's entry takes them.
        if webhookEntries.run == nil || endedIncarnations.contains(owner) { webhookEntries.orphans.insert(owner) }
        return (staged, owner == log.incarnation)
    }

    // MARK: Applying the log

    func beginWebhookEntry(_ e: LogEntry) {
        webhookEntries.naming.begin(position: e.position)
        webhookEntries.run = ClusterRun.incarnation(ofOrigin: e.origin)
    }

    /// After each entry: final messages past the retention are forgotten (at the entries' times,
    /// so on every node alike), and pending deliveries without an owner pass to the entry's run
    /// if it has not ended. That run is the leader for a run it found dead, the node's next run
    /// for a restart, and, for a run that left by itself, whichever run appends next (the leader
    /// appends a tick at least every minute).
    func endWebhookEntry(_ e: LogEntry) {
        guard let webhooks else { return }
        if e.at - webhookEntries.lastPrune >= Self.webhookPruneMilliseconds {
            webhookEntries.lastPrune = e.at
            commit(Store.Commit(mutations: [], extra: webhooks.prune(before: e.at - webhooks.configuration.retentionMs), onDurable: {}))
        }
        guard !webhookEntries.orphans.isEmpty, let run = webhookEntries.run, !endedIncarnations.contains(run) else { return }
        let owners = webhookEntries.orphans.sorted()
        webhookEntries.orphans = []
        commitWebhooks(webhooks.adopt(owners, by: run), answering: nil)
    }

    /// `endSessions(incarnation)`: the run's pending deliveries wait for a new owner.
    func orphanWebhookDeliveries(of incarnation: UInt64) {
        webhookEntries.orphans.insert(incarnation)
    }

    /// A webhook record of the log, applied alike on every node; `caller`: this node appended it
    /// for a caller, answered once the change is durable here.
    func applyWebhookRecord(_ record: LogRecord, _ e: LogEntry,
                            caller: (@Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void)?) {
        guard let webhooks else { return }
        let applied: WebhookService.Applied
        switch record {
        case .webhookEndpoint(let change):
            applied = webhooks.apply(change, position: e.position, at: e.at)
        case .webhookReplay(let replay):
            let owner = webhookEntries.run ?? 0
            if webhookEntries.run == nil || endedIncarnations.contains(owner) { webhookEntries.orphans.insert(owner) }
            applied = webhooks.apply(replay, at: e.at, owner: owner)
        case .webhookOutcomes(let outcomes):
            applied = webhooks.apply(outcomes, fromAnotherRun: webhookEntries.run != log.incarnation)
        default:
            return
        }
        commitWebhooks(applied, answering: caller)
    }

    private func commitWebhooks(_ applied: WebhookService.Applied,
                                answering caller: (@Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void)?) {
        let done = applied.done
        commit(Store.Commit(mutations: [], extra: applied.write, onDurable: {
            let result = done()
            caller?(result)
        }))
    }

    // MARK: This node's outcomes

    /// Appends the outcomes of this node's deliveries (shared webhooks; every
    /// `Limits.clusterWebhookOutcomeFlushMilliseconds`), at most `Limits.maxWebhookOutcomesPerRecord`
    /// a record; those the log cannot take now wait for the next round.
    func flushWebhookOutcomes() {
        guard let webhooks else { return }
        webhookEntries.outcomes.append(contentsOf: webhooks.takeOutcomes())
        guard log.isWritable else { return }
        while !webhookEntries.outcomes.isEmpty {
            let batch = Array(webhookEntries.outcomes.prefix(Limits.maxWebhookOutcomesPerRecord))
            webhookEntries.outcomes.removeFirst(batch.count)
            // Not taken: given back (`Waiter.outcomes`), appended in a later round.
            guard append(.webhookOutcomes(batch), Waiter(outcomes: batch)) else {
                webhookEntries.outcomes.insert(contentsOf: batch, at: 0)
                return
            }
        }
    }

    /// Before a cluster node leaves, once its delivery thread has stopped: what that thread
    /// finished is appended, so the run that takes its deliveries over does not send them again.
    /// Returns when they are applied here, or after `timeoutMilliseconds`.
    public func settleWebhookOutcomes(timeoutMilliseconds: Int64) {
        let deadline = wallClockMilliseconds() + timeoutMilliseconds
        // The delivery thread's last outcomes are reported once its last writes are durable.
        let written = Atomic<Bool>(false)
        store.submit(Store.Commit(mutations: [], onDurable: { written.store(true, ordering: .releasing) }))
        while !written.load(ordering: .acquiring) && wallClockMilliseconds() < deadline { usleep(2_000) }
        let settled = Atomic<Bool>(false)
        while wallClockMilliseconds() < deadline {
            loop.execute { [self] in
                flushWebhookOutcomes()
                settled.store(webhookEntries.outcomes.isEmpty && !waiting.values.contains { !$0.outcomes.isEmpty }, ordering: .releasing)
            }
            usleep(20_000)
            if settled.load(ordering: .acquiring) { return }
        }
        logger.warning("some webhook outcomes were not appended before leaving; the run that takes over may send those messages again")
    }

    // MARK: Changes through REST (the command line's endpoints: `catchUp`)

    /// A webhook endpoint change or replay (WH-1, WH-4): checked against the replica, appended,
    /// and answered once this node has applied it (in a cluster every node applies it alike). Bad
    /// input is refused before anything is appended.
    public func webhookChange(_ request: WebhookService.AdminRequest,
                              completion: @escaping @Sendable (Result<WebhookService.AdminResult, ChatError>) -> Void) {
        loop.execute { [self] in
            guard let webhooks else {
                return completion(.failure(ChatError(.storageUnavailable, "this engine has no webhooks", field: nil)))
            }
            guard isWritable else { return completion(.failure(store.isWritable ? Self.clusterError : Self.storageError)) }
            let record: LogRecord
            do throws(ChatError) {
                record = try webhooks.record(for: request)
            } catch {
                return completion(.failure(error))
            }
            // Refused on its way (the log unreachable, too many waiting): the entry's reply says so.
            append(record, Waiter(replyTo: .callback { result in
                if case .failure(let error) = result { completion(.failure(error)) }
            }, webhookCaller: completion))
        }
    }
}
