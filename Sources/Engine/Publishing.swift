import Chat
import HTTP1
import Reactor
import Replication
import Store
import Synchronization
import WebSocket

/// What the engine hands every I/O loop, in the order it happened. Frames are encoded once and
/// shared by reference.
public enum Published: Sendable {
    /// An event for an audience. Room-stream events carry their offset and room epoch (BX-1); a
    /// transient message has neither (offset 0). `lane`: what a slow connection may lose (QS-3).
    case deliver(frame: ByteBlock, audience: Audience, offset: Int64, epoch: String, lane: Lane)
    /// A session entered a room: it receives the room's events from here on; `offset` is the
    /// stream's offset at that point (BX-1).
    case joined(SessionID, RoomKey, epoch: String, offset: Int64)
    case left(SessionID, RoomKey)
    /// AU-1: these sessions' member carries these tags in the room (audiences by tag match them).
    case tagged([SessionID], RoomKey, [String])
    /// MO-1: the event at this offset of the room's stream is now `frame` (a recalled message's
    /// tombstone): resuming clients get it instead.
    case redact(RoomKey, epoch: String, offset: Int64, frame: ByteBlock)
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

    /// The same caller, answered without keeping the answer (PX-2: a call the log refused keeps
    /// nothing under the key, which is another call's).
    var keepingNothing: ReplyTo {
        if case .keeping(_, let then) = self { return .callback(then) }
        return self
    }
}

/// How an event travels to a connection that reads slower than its rooms (QS-1, QS-3, QS-5):
/// past a connection's soft marks transient, then low, then normal messages are dropped (and
/// counted in a `room.gap`); high-priority messages and every other event are never dropped.
public enum Lane: UInt8, Sendable, CaseIterable {
    case system
    case high
    case normal
    case low
    case transient

    public init(_ event: ChatEvent) {
        guard case .message(let m) = event else {
            self = .system
            return
        }
        if m.transient {
            self = .transient
            return
        }
        switch m.priority {
        case .high: self = .high
        case .normal: self = .normal
        case .low: self = .low
        }
    }

    /// A slow connection may lose it.
    public var droppable: Bool { self == .normal || self == .low || self == .transient }

    /// The metric label.
    public var name: String {
        switch self {
        case .system: return "system"
        case .high: return "high"
        case .normal: return "normal"
        case .low: return "low"
        case .transient: return "transient"
        }
    }
}

extension Lane {
    public init(_ priority: MessagePriority) {
        switch priority {
        case .high: self = .high
        case .normal: self = .normal
        case .low: self = .low
        }
    }
}

/// QS-2: how far the I/O loops are behind the engine (the gateway's hub table measures it).
public protocol FanoutPressure: Sendable {
    /// How long the slowest loop has been behind, in milliseconds (0: caught up).
    func backlogMilliseconds() -> Int64
}

/// QS-2: the latency budget. While the loops are further behind than `latencyBudgetMilliseconds`,
/// rooms of at least `minAudience` members refuse all but high-priority messages.
public struct OverloadPolicy: Sendable {
    public var pressure: (any FanoutPressure)?
    public var latencyBudgetMilliseconds: Int64
    public var minAudience: Int

    public init(pressure: (any FanoutPressure)? = nil, latencyBudgetMilliseconds: Int64 = Limits.defaultFanoutLatencyBudgetMilliseconds,
                minAudience: Int = Limits.overloadMinAudience) {
        self.pressure = pressure
        self.latencyBudgetMilliseconds = latencyBudgetMilliseconds
        self.minAudience = minAudience
    }
}

/// QS-7: messages admitted to rooms and refused (the room's budget, the latency budget), by lane.
public final class MessageCounters: Sendable {
    private final class Count: Sendable {
        let value = Atomic<Int>(0)
    }
    private let admittedCounts = Lane.allCases.map { _ in Count() }
    private let refusedCounts = Lane.allCases.map { _ in Count() }

    public init() {}

    public func admitted(_ lane: Lane, count: Int = 1) { admittedCounts[Int(lane.rawValue)].value.add(count, ordering: .relaxed) }
    public func refused(_ lane: Lane) { refusedCounts[Int(lane.rawValue)].value.add(1, ordering: .relaxed) }
    public func admitted(of lane: Lane) -> Int { admittedCounts[Int(lane.rawValue)].value.load(ordering: .relaxed) }
    public func refused(of lane: Lane) -> Int { refusedCounts[Int(lane.rawValue)].value.load(ordering: .relaxed) }
}

/// Where the publisher hands each committed batch: every I/O loop's hub (the gateway's
/// `HubTable`), or a test's recorder. Called on the store's writer thread.
public protocol PublishedSink: Sendable {
    func deliver(_ batch: [Published])
}

/// Collects what each committed batch releases and hands it to the sink once per batch (the
/// store calls `enqueue` per commit, from the engine's `onDurable`, and `flush` after each batch:
/// the store is made with `afterBatch: publisher.flush`).
public final class Publisher: @unchecked Sendable {
    // Safety: `pending` is touched only on the store's writer thread (`enqueue` and `flush` are
    // called from the store's callbacks); `sink` is immutable.
    private var pending: [Published] = []
    private let sink: any PublishedSink

    public init(sink: any PublishedSink) {
        self.sink = sink
    }

    public func enqueue(_ items: [Published]) {
        pending.append(contentsOf: items)
    }

    /// Hands items to the sink at once, outside any batch: a refusal's reply (nothing was
    /// committed for it) or a reload's `closeAll`.
    public func deliver(_ items: [Published]) {
        sink.deliver(items)
    }

    public func flush() {
        guard !pending.isEmpty else { return }
        let batch = pending
        pending = []
        sink.deliver(batch)
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


/// Ids for messages, room epochs and anonymous users: time-ordered and unique across restarts
/// (a single node's log; `EntryIDs` are a cluster's).
public final class IDGenerator: EntryIDMaker, @unchecked Sendable {
    // Safety: `counter` is mutated only by `next()`, which only the engine thread calls (the
    // domain's single thread); `clock` and `salt` are immutable.
    private let clock: @Sendable () -> Int64
    private var counter: UInt32 = 0
    private let salt = randomHex(4)

    public init(clock: @escaping @Sendable () -> Int64) {
        self.clock = clock
    }

    /// Fresh ids do not depend on the entry.
    public func begin(position: Int64, at: Int64) {}

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
