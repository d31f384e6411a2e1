import Chat
import Foundation
import Store
import Replication
import Synchronization

/// Cluster snapshots (CLUSTER.md "Snapshots and trimming"): everything a node has made from the
/// log up to a position, so that a node can start there instead of at the log's first entry, and
/// the entries before it can be deleted. The engine's part is a value (`SnapshotState`); the
/// replica's part is its SQLite image, taken by the store in commit order at the same position.
public struct SnapshotState: Codable, Equatable, Sendable {
    /// Bumped when the layout changes (the domain image has its own version inside). 2: the
    /// request ledger's nonces as one string per app (layout 1 still decodes).
    public static let version = 2

    public struct StreamImage: Codable, Equatable, Sendable {
        var app: String
        var roomId: String
        var epoch: String
        var offset: Int64
    }

    public var version = SnapshotState.version
    /// The last log position applied, and its time.
    public var position: Int64
    public var at: Int64
    public var domain: DomainImage
    /// Each room stream's epoch and offset (BX-1: offsets go on from there).
    var streams: [StreamImage]
    /// Node runs whose sessions were ended: their later commands are refused.
    var endedIncarnations: [UInt64]
    /// Signed calls' nonces and idempotency keys (PX-2).
    var ledger: RequestLedger.Image
    /// CL-6: runs whose pending webhook deliveries wait for an owner, and the log time of the
    /// replica's last webhook pruning.
    var webhookOrphans: [UInt64]
    var webhookLastPrune: Int64

    /// The nonces the ledger holds (a starting node's own checks learn them).
    public var ledgerNonces: [(app: String, nonce: String, at: Int64)] { ledger.nonceList }

    public func encoded() throws -> [UInt8] { Array(try JSONEncoder().encode(self)) }

    public static func decode(_ bytes: [UInt8]) throws -> SnapshotState {
        let state = try JSONDecoder().decode(SnapshotState.self, from: Data(bytes))
        guard (1...version).contains(state.version) else {
            throw SnapshotError("the snapshot's layout is version \(state.version); this roomcast reads version \(version)")
        }
        return state
    }
}

public struct SnapshotError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A snapshot as the engine hands it over: its state and the replica's image at its position
/// (read in pieces; a file store's holds a read transaction or its copy until it is closed).
public struct Snapshot: Sendable {
    public var state: SnapshotState
    public var replica: ReplicaImage
}

extension Engine {
    /// PX-2: what the log has decided about an idempotency key so far on this node
    /// (nil: free), without claiming it (any thread; `reply` on the engine's).
    public func keyVerdict(app: String, key: String, fingerprint: String, reply: @escaping @Sendable (RequestLedger.Duplicate?) -> Void) {
        loop.execute { [self] in reply(ledger.peek(app: app, key: key, fingerprint: fingerprint, at: lastAppliedAt)) }
    }

    /// Takes a snapshot at the position applied so far (engine thread) and the replica's image in
    /// commit order at that position (store thread); `done` is called on the store's thread.
    public func snapshot(_ done: @escaping @Sendable (Result<Snapshot, Error>) -> Void) {
        loop.execute { [self] in
            guard position > 0 else {
                done(.failure(SnapshotError("nothing applied yet")))
                return
            }
            let state = snapshotState()
            let replica = SnapshotImage()
            // The image does not fail the commit (a failed commit stops a cluster node).
            commit(Store.Commit(mutations: [], onDurable: {
                switch replica.take() {
                case .success(let image): done(.success(Snapshot(state: state, replica: image)))
                case .failure(let error): done(.failure(error))
                }
            }, onFailed: {
                done(.failure(SnapshotError("the replica could not be read")))
            }, image: { result in
                switch result {
                case .success(let image): replica.set(image)
                case .failure(let error): replica.fail("the replica could not be read: \(error)")
                }
            }))
        }
    }

    /// The engine's part of a snapshot at the position applied so far (engine thread).
    private func snapshotState() -> SnapshotState {
        SnapshotState(
            position: position, at: lastAppliedAt, domain: domain.image(),
            streams: streams.sorted { ($0.key.app, $0.key.roomId) < ($1.key.app, $1.key.roomId) }.map {
                SnapshotState.StreamImage(app: $0.key.app, roomId: $0.key.roomId, epoch: $0.value.epoch, offset: $0.value.offset)
            },
            endedIncarnations: endedIncarnations.sorted(), ledger: ledger.image,
            webhookOrphans: webhookEntries.orphans.sorted(), webhookLastPrune: webhookEntries.lastPrune)
    }

    /// CL-9 (catch-up from a node's own position): the engine's part of a snapshot at the position
    /// applied so far, for a stopping node whose log reader has stopped (nothing is applied after
    /// it). Its replica holds that position once the store has drained (`applied` then equals the
    /// state's position). Nil when nothing was applied or the engine did not answer within `timeout`.
    public func checkpointState(timeoutMilliseconds: Int = 5_000) -> SnapshotState? {
        let result = Mutex<SnapshotState?>(nil)
        let done = DispatchSemaphore(value: 0)
        loop.execute { [self] in
            if position > 0 { result.withLock { $0 = snapshotState() } }
            done.signal()
        }
        guard done.wait(timeout: .now() + .milliseconds(timeoutMilliseconds)) == .success else { return nil }
        return result.withLock { $0 }
    }

    /// Before `start` only (it touches the engine thread's state directly): the engine goes on from
    /// a snapshot (its domain was made from the image, its replica loaded from the snapshot's).
    public func restore(_ state: SnapshotState) {
        position = state.position
        lastAppliedAt = state.at
        appliedPosition.store(state.position, ordering: .releasing)
        streams = [:]
        for s in state.streams { streams[RoomKey(app: s.app, roomId: s.roomId)] = Stream(epoch: s.epoch, offset: s.offset) }
        endedIncarnations = Set(state.endedIncarnations)
        ledger = RequestLedger(image: state.ledger, nonceMilliseconds: ledger.nonceMilliseconds, maxNoncesPerApp: ledger.maxNoncesPerApp,
                               keyMilliseconds: ledger.keyMilliseconds, maxKeysPerApp: ledger.maxKeysPerApp)
        webhookEntries.orphans = Set(state.webhookOrphans)
        webhookEntries.lastPrune = state.webhookLastPrune
    }
}

/// The replica's image, written once on the store's thread and read in the same commit's callback.
private final class SnapshotImage: @unchecked Sendable {
    // Safety: `set`/`fail` run in a commit's `image` and `take` in the same commit's `onDurable`,
    // both on the store's writer thread, one after the other.
    private var result: Result<ReplicaImage, SnapshotError> = .failure(SnapshotError("the replica was not read"))
    func set(_ image: ReplicaImage) { result = .success(image) }
    func fail(_ why: String) { result = .failure(SnapshotError(why)) }
    func take() -> Result<ReplicaImage, SnapshotError> {
        defer { result = .failure(SnapshotError("taken")) }
        return result
    }
}
