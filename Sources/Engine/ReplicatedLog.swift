import Chat
import Replication
import Store
import Synchronization

/// Where the engine appends every change, and what that log is like (ARCHITECTURE "one path, two
/// logs"). The engine has one path: a change is appended, and the domain changes only when the log
/// hands the entry back (`Engine.apply`). A single node's log (`LocalLog`) hands it back at once,
/// on the engine thread, with no encoding; a cluster node's log (`ClusterLog`, in ClusterNode)
/// goes through PostgreSQL and hands entries back from its reader thread. Where the two differ
/// (ids, kept resume events, what a lost replica means) it is a property of the log, read here.
public protocol ReplicatedLog: AnyObject, Sendable {
    /// This node run's name in the entries' `origin` (`ClusterRun.origin`): an entry whose origin is
    /// this one was appended here, and answers its caller when it is applied.
    var origin: String { get }
    /// This node run's incarnation: its sessions' ids carry it (0 on a single node).
    var incarnation: UInt64 { get }
    /// The log can be appended to now (the store can write; in a cluster, PostgreSQL is
    /// reachable): while false, changes are refused.
    var isWritable: Bool { get }
    /// This node appends the time-driven records (ticks). A single node always does; in a
    /// cluster, the node holding the leader lock.
    var isLeader: Bool { get }
    /// The log's clock minus this node's, in milliseconds: the leader compares the domain's
    /// deadlines, which are in log time, with its clock plus this (0 on a single node).
    var clockOffsetMilliseconds: Int64 { get }
    /// What the engine does differently for this log.
    var traits: LogTraits { get }
    /// The record as this log carries it: its bytes in a shared log (they count against the
    /// engine's bound on changes waiting for the log), the value itself in a local one.
    func encode(_ record: LogRecord) throws -> LogPayload
    /// Appends a record under this node's sequence number `seq`. A log that orders it at once
    /// returns the entry, which the engine applies now, on its own thread; otherwise the entry comes
    /// back through `Engine.apply(entries:)`, or `Engine.appendFailed` if it is known not to be in
    /// the log or cannot be known to be.
    func append(_ payload: LogPayload, seq: UInt64) -> LogEntry?
}

/// The differences between the logs, as the engine reads them.
public struct LogTraits: Sendable {
    /// Room-stream events are written to the replica with the change that caused them, so clients
    /// resume across a restart from this node's disk (a single node). A cluster node rebuilds its
    /// state and its hubs' resume windows from the shared log when it starts, so it keeps none.
    public var keepsResumeEvents: Bool
    /// What a commit to the replica that fails means.
    public var replicaLoss: ReplicaLoss
    /// Makes the domain's ids while an entry is applied.
    public var ids: any EntryIDMaker

    public init(keepsResumeEvents: Bool, replicaLoss: ReplicaLoss, ids: any EntryIDMaker) {
        self.keepsResumeEvents = keepsResumeEvents
        self.replicaLoss = replicaLoss
        self.ids = ids
    }
}

/// What a failed commit to the replica means.
public enum ReplicaLoss: Sendable {
    /// The replica is this node's own durable state: reload it from disk (start-up's restore),
    /// close every session so clients reconnect and resume, and refuse changes until the store can
    /// write again (a single node on a full disk).
    case reloadFromDisk
    /// The replica is made from the shared log: stop, and rebuild it from the log at the next start.
    case rebuildFromLog
}

/// A record as a log carries it.
public enum LogPayload: Sendable {
    /// In a local log: the record itself, never encoded.
    case record(LogRecord)
    /// In a shared log: its encoding (`LogRecord.encode`).
    case bytes([UInt8])

    /// Bytes it holds while it waits for the log (0 for a record a local log applies at once).
    public var count: Int {
        if case .bytes(let b) = self { return b.count }
        return 0
    }

    /// The record (decoded from a shared log's bytes).
    public func record() throws -> LogRecord {
        switch self {
        case .record(let r): return r
        case .bytes(let b): return try LogRecord.decode(b)
        }
    }
}

/// One entry of the log as the engine applies it.
public struct LogEntry: Sendable {
    public var position: Int64
    /// The node run that appended it (`ReplicatedLog.origin`).
    public var origin: String
    /// That run's sequence number for it.
    public var seq: UInt64
    /// The log's time of the entry: the domain applies it at this time.
    public var at: Int64
    public var payload: LogPayload

    public init(position: Int64, origin: String, seq: UInt64, at: Int64, payload: LogPayload) {
        self.position = position
        self.origin = origin
        self.seq = seq
        self.at = at
        self.payload = payload
    }

    /// An entry read from a shared log.
    public init(position: Int64, origin: String, seq: UInt64, at: Int64, payload: [UInt8]) {
        self.init(position: position, origin: origin, seq: seq, at: at, payload: .bytes(payload))
    }
}

/// A single node's log: a cluster of one. `append` orders the record at once and hands it straight
/// back to the engine, on the engine's thread, with the node's time: no thread hop, no encoding,
/// nothing shared. Positions start again at 1 with each run (nothing outside this process reads
/// them), so the domain's ids are made fresh (`IDGenerator`), not from positions. It is the
/// leader, and writable while the store is.
public final class LocalLog: ReplicatedLog, @unchecked Sendable {
    // Safety: `position` is touched only by `append`, which only the engine's thread calls; the
    // rest is immutable (the store's writability is its own atomic).
    public static let origin = ClusterRun.origin(node: "local", incarnation: 0)
    private let store: Store
    private let clock: @Sendable () -> Int64
    private var position: Int64 = 0
    public let traits: LogTraits

    public init(store: Store, clock: @escaping @Sendable () -> Int64, ids: any EntryIDMaker) {
        self.store = store
        self.clock = clock
        traits = LogTraits(keepsResumeEvents: true, replicaLoss: .reloadFromDisk, ids: ids)
    }

    public var origin: String { Self.origin }
    public var incarnation: UInt64 { 0 }
    public var isWritable: Bool { store.isWritable }
    public var isLeader: Bool { true }
    public var clockOffsetMilliseconds: Int64 { 0 }

    public func encode(_ record: LogRecord) throws -> LogPayload { .record(record) }

    public func append(_ payload: LogPayload, seq: UInt64) -> LogEntry? {
        position += 1
        return LogEntry(position: position, origin: Self.origin, seq: seq, at: clock(), payload: payload)
    }
}
