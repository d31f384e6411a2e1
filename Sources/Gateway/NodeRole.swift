import Chat
import ClusterNode
import Engine
import HTTP1
import Server
import Store
import Wire

/// What the gateway shows of the nodes that follow the engine's log, and what it starts and stops
/// beside the engine: itself alone (`SingleNode`), or one member of a cluster (`ClusterMember`).
/// Chosen once, by the factory that builds the gateway for its log.
protocol NodeRole: Sendable {
    /// The log position applied before the node serves (the log's head when the node started).
    var headAtStart: Int64 { get }
    /// The WebSocket URL of each node run, by incarnation (PX-5's connection listing, CL-5).
    func urlsByRun() -> [UInt64: String]
    /// `/readyz` once the node is ready and its store can write: nil when all is well, else the
    /// refusal (a cluster whose PostgreSQL cannot be reached).
    var unavailable: Response? { get }
    /// More for `/readyz` (a cluster's members and how far this node has applied the log).
    func describe(_ w: inout JSONWriter, applied: Int64)
    /// Joins the log (starts a cluster's threads).
    func start()
    /// This node's own URLs, announced to the other nodes once it can serve (empty: leaving).
    func announce(_ urls: [String])
    /// Before the engine stops: what the drained calls left for the log reaches it.
    func flush()
    /// Leaves the log (stops a cluster's threads; the other nodes end this run's sessions).
    func stop()
    /// CL-9: whether a stopping node records its replica's position (a cluster node, whose
    /// replica can go on from there at its next start).
    var keepsCheckpoint: Bool { get }
    /// After the engine and the store stopped: records `state`'s position for the next start,
    /// if the replica holds exactly that position.
    func saveCheckpoint(_ state: SnapshotState)
    /// OP-2: whether the apps this node serves live in its own store, where `roomcast apps` and
    /// the operator API change them and the apps watcher picks the change up. A cluster's apps
    /// are its nodes' `--app` list instead (the same on every node).
    var appsInOwnStore: Bool { get }
    /// How far this node's applied position is behind the log's head (`/metrics`), where the log
    /// is shared; nil when the log is the node's own (nothing to lag behind).
    func applyLag(_ engine: Engine) -> (@Sendable () -> Int64)?
}

/// A single node: the log is its own (`LocalLog`); every session is on this node.
final class SingleNode: NodeRole {
    let ownURLs: PublicURLs

    init(ownURLs: PublicURLs) {
        self.ownURLs = ownURLs
    }

    var headAtStart: Int64 { 0 }
    var appsInOwnStore: Bool { true }
    func applyLag(_ engine: Engine) -> (@Sendable () -> Int64)? { nil }
    func urlsByRun() -> [UInt64: String] { [0: ownURLs.value.first ?? ""] }
    var unavailable: Response? { nil }
    func describe(_ w: inout JSONWriter, applied: Int64) {}
    func start() {}
    func announce(_ urls: [String]) {}
    func flush() {}
    func stop() {}
    var keepsCheckpoint: Bool { false }
    func saveCheckpoint(_ state: SnapshotState) {}
}

/// A member of a cluster on PostgreSQL (CL-1..CL-6): the shared log (`ClusterLink`) and the
/// threads that join it to the engine (`ClusterReplicator`).
final class ClusterMember: NodeRole {
    let link: ClusterLink
    let replicator: ClusterReplicator
    let engine: Engine
    let store: Store
    let ownURLs: PublicURLs

    init(link: ClusterLink, replicator: ClusterReplicator, engine: Engine, store: Store, ownURLs: PublicURLs) {
        self.link = link
        self.replicator = replicator
        self.engine = engine
        self.store = store
        self.ownURLs = ownURLs
    }

    static let unreachable = Response.json(.serviceUnavailable, JSONWriter.object { w in
        w.field("status", "read-only: the cluster's log (PostgreSQL) cannot be reached")
        w.field("code", ErrorCode.storageUnavailable.rawValue)
        w.field("message", "changes are refused until the node reaches PostgreSQL again; reads and connections continue")
    })

    var headAtStart: Int64 { link.headAtStart }
    var appsInOwnStore: Bool { false }

    func applyLag(_ engine: Engine) -> (@Sendable () -> Int64)? {
        let link = self.link
        return { max(0, link.members.head - engine.applied) }
    }

    func urlsByRun() -> [UInt64: String] {
        var urls: [UInt64: String] = [:]
        for m in link.members.members { urls[UInt64(m.incarnation)] = m.urls.first ?? "" }
        urls[link.incarnation] = ownURLs.value.first ?? ""
        return urls
    }

    var unavailable: Response? { link.isWritable ? nil : Self.unreachable }

    func describe(_ w: inout JSONWriter, applied: Int64) {
        let (members, head) = link.members
        w.key("cluster")
        w.beginObject()
        w.field("node", link.configuration.nodeID)
        w.field("incarnation", Int64(link.incarnation))
        w.field("leader", link.isLeader)
        w.field("applied", applied)
        w.field("head", max(head, applied))
        w.field("lag", max(0, head - applied))
        w.field("snapshot", link.snapshotPosition)
        // CL-9: what this run started from ("log", "snapshot" or "own-replica") and its position.
        w.field("start", link.start.name)
        w.field("startPosition", link.start.position)
        w.key("members")
        w.beginArray()
        for m in members {
            w.beginObject()
            w.field("node", m.id)
            w.field("urls", m.urls)
            w.field("applied", m.applied)
            w.endObject()
        }
        w.endArray()
        w.endObject()
    }

    func start() { replicator.start() }
    func announce(_ urls: [String]) { link.setOwnURLs(urls) }
    func flush() { link.flush(milliseconds: 3_000) }
    func stop() { replicator.stop() }
    var keepsCheckpoint: Bool { true }

    func saveCheckpoint(_ state: SnapshotState) { link.saveCheckpoint(state, replica: store, applied: engine.applied) }
}
