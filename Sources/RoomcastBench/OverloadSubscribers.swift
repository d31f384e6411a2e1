import Reactor
import Synchronization
import WebSocket
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// What one subscriber saw of the overload phase, checked per client at the end.
struct SubscriberRecord {
    var slow = false
    /// Overload-phase messages received, by seq (a bit each); a second copy is a duplicate.
    var received: [UInt64] = []
    var duplicates = 0
    /// `room.gap` counts (roomcast), summed over the gaps received since the overload began.
    var gapNormal = 0
    var gapLow = 0
    var gapTransient = 0
    var gapEvents = 0
    /// Stream order: each message's offset comes after the last message's and the last gap's
    /// range; a gap's range comes after the previous gap's (it may span messages received while
    /// the connection was behind: one gap tells everything lost until it caught up).
    var lastOffset: Int64 = 0
    var lastGapTo: Int64 = 0
    var orderViolations = 0
    /// roomcast: high-priority messages (by content) whose event did not say `"priority":"high"`.
    var highUnmarked = 0
    /// Why and when the connection ended, if it did.
    var closeReason: String?
    var closedInPhase = -1
}

/// Latencies and counts of one phase over a runner's subscribers.
struct PhaseStats: Sendable {
    var delivered: UInt64 = 0
    var wireBytes: UInt64 = 0
    var gapEvents = 0
    var histogram = LatencyHistogram()
}

/// The overload phase's latency histograms, by reader and class.
struct OverloadHistograms: Sendable {
    var healthyHigh = LatencyHistogram()
    var healthyNormal = LatencyHistogram()
    var slowHigh = LatencyHistogram()
    var slowNormal = LatencyHistogram()

    mutating func merge(_ o: OverloadHistograms) {
        healthyHigh.merge(o.healthyHigh)
        healthyNormal.merge(o.healthyNormal)
        slowHigh.merge(o.slowHigh)
        slowNormal.merge(o.slowNormal)
    }
}

/// Subscribers for `roomcast-bench overload` on one event loop: each connects (roomcast: with its
/// own token, then `room.join`; nchan: `/sub?id=room`), records every message and `room.gap` it
/// gets, and the slow ones, once told, read at a fixed byte rate (a small SO_RCVBUF, and reads of
/// at most their share every 50 ms) instead of as fast as data comes.
final class OverloadRunner: WSClientDelegate, @unchecked Sendable {
    // Safety: everything is touched on `loop` only; the main thread reads the atomics, copies
    // state out with `onLoop`, and reads `records` only after the loop thread has been joined.
    let loop: EventLoop
    let address: Socket.Address
    let target: FanoutCommand.Target
    /// Global ids `first ..< first + count`; `isSlow(id)` picks the slow readers.
    let first: Int
    let count: Int
    let concurrency: Int
    let room: String
    let appKey: String
    let appSecret: String
    let slowReceiveBuffer: Int32
    private let isSlow: (Int) -> Bool
    private var clients: [WSClientConnection] = []
    private(set) var records: [SubscriberRecord] = []
    private var slowIndices: [Int] = []
    private var started = 0
    private var inFlight = 0
    private let ready = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let failure = Mutex<String?>(nil)

    /// The phase the main thread says is running (a close is recorded against it).
    private var currentPhase = 0
    static let maxPhases = 64
    /// The phase whose messages are checked per client.
    static let overloadPhase = 50
    private var phases = [PhaseStats](repeating: PhaseStats(), count: maxPhases)
    private var overloadTotal = 0
    private var overloadHistograms = OverloadHistograms()
    /// Paced reading: bytes a slow reader may read per tick (0: not paced), and each one's allowance.
    private var pacedBytesPerTick = 0.0
    private var allowance: [Double] = []
    static let paceTick: Duration = .milliseconds(50)

    var readyCount: Int { ready.load(ordering: .relaxed) }
    var settled: Int { readyCount + failed.load(ordering: .relaxed) }
    var firstFailure: String? { failure.withLock { $0 } }

    // Connection states kept in `tag`.
    private static let connecting = 0, authenticating = 1, joining = 2, subscribed = 3, dead = 4

    init(loop: EventLoop, address: Socket.Address, target: FanoutCommand.Target, first: Int, count: Int, concurrency: Int,
         room: String, appKey: String, appSecret: String, slowReceiveBuffer: Int32, isSlow: @escaping (Int) -> Bool) {
        self.loop = loop
        self.address = address
        self.target = target
        self.first = first
        self.count = count
        self.concurrency = concurrency
        self.room = room
        self.appKey = appKey
        self.appSecret = appSecret
        self.slowReceiveBuffer = slowReceiveBuffer
        self.isSlow = isSlow
    }

    /// On the loop: opens the connections (at most `concurrency` attempts at once) and starts the
    /// pacing timer.
    func start() {
        loop.scheduleRepeating(every: Self.paceTick) { [self] in pace() }
        startMore()
    }

    private func startMore() {
        let path = target == .roomcast ? "/ws" : "/sub?id=\(room)"
        while started < count && inFlight < concurrency {
            let id = first + started
            let c = WSClientConnection(loop: loop, id: id, host: "127.0.0.1", port: address.port, path: path)
            c.delegate = self
            clients.append(c)
            var record = SubscriberRecord()
            record.slow = isSlow(id)
            if record.slow { slowIndices.append(started) }
            records.append(record)
            allowance.append(0)
            started += 1
            inFlight += 1
            c.start(address: address, receiveBuffer: record.slow && slowReceiveBuffer > 0 ? slowReceiveBuffer : nil)
        }
    }

    private func becameReady(_ c: WSClientConnection) {
        c.tag = Self.subscribed
        ready.add(1, ordering: .relaxed)
        inFlight -= 1
        startMore()
    }

    // MARK: Phases (called on the loop)

    func setPhase(_ phase: Int) { currentPhase = phase }

    /// The overload phase's `total` messages are to be checked per client from now on.
    func beginOverload(total: Int) {
        overloadTotal = total
        let words = (total + 63) / 64
        for i in records.indices {
            records[i].received = [UInt64](repeating: 0, count: words)
            records[i].gapNormal = 0
            records[i].gapLow = 0
            records[i].gapTransient = 0
            records[i].gapEvents = 0
        }
        currentPhase = Self.overloadPhase
    }

    /// Slow readers read `bytesPerSecond` each from now on (0: as fast as data comes again).
    func pace(bytesPerSecond: Double) {
        pacedBytesPerTick = bytesPerSecond * seconds(Self.paceTick)
        for i in slowIndices {
            allowance[i] = 0
            clients[i].setPaced(bytesPerSecond > 0)
        }
    }

    private func pace() {
        guard pacedBytesPerTick > 0 else { return }
        for i in slowIndices where clients[i].paced {
            // Credit is not banked past one tick: a reader that found nothing does not burst later.
            allowance[i] = min(allowance[i] + pacedBytesPerTick, pacedBytesPerTick * 2)
            let n = clients[i].readPaced(upTo: Int(allowance[i]))
            allowance[i] -= Double(n)
        }
    }

    func stats(phase: Int) -> PhaseStats { phases[min(phase, Self.maxPhases - 1)] }
    var overload: OverloadHistograms { overloadHistograms }

    /// Subscribers that have everything of the overload phase (`published` messages): received +
    /// counted in gaps ≥ published, or closed. (Polled while draining.)
    func settledCount(published: Int) -> Int {
        var n = 0
        for r in records {
            if r.closeReason != nil { n += 1; continue }
            var got = 0
            for w in r.received { got += w.nonzeroBitCount }
            if got + r.gapNormal + r.gapLow + r.gapTransient >= published { n += 1 }
        }
        return n
    }

    // MARK: Events

    func clientDidOpen(_ client: WSClientConnection) {
        switch target {
        case .nchan:
            becameReady(client)
        case .roomcast:
            client.tag = Self.authenticating
            let exp = Int64(time(nil)) + 3600
            let token = ClientToken.mint(TokenClaims(sub: "sub\(client.id)", app: appKey, exp: exp), secret: appSecret)
            client.sendText(Array(#"{"id":1,"op":"connect","args":{"token":"\#(token)"}}"#.utf8))
        }
    }

    func client(_ client: WSClientConnection, didReceive message: WebSocketMessageAssembler.Event) {
        let bytes: [UInt8]
        switch message {
        case .text(let b), .binary(let b): bytes = b
        default: return
        }
        switch client.tag {
        case Self.subscribed:
            received(bytes, by: client.id - first, at: Instant.now())
        case Self.authenticating:
            guard SubscriberRunner.isReply(bytes, id: 1) else { return }
            guard SubscriberRunner.contains(bytes, #""ok":"#) else {
                return client.fail("connect refused: " + String(decoding: bytes.prefix(160), as: UTF8.self))
            }
            client.tag = Self.joining
            client.sendText(Array(#"{"id":2,"op":"room.join","args":{"roomId":"\#(room)"}}"#.utf8))
        case Self.joining:
            guard SubscriberRunner.isReply(bytes, id: 2) else { return }
            guard SubscriberRunner.contains(bytes, #""ok":"#) else {
                return client.fail("join refused: " + String(decoding: bytes.prefix(160), as: UTF8.self))
            }
            becameReady(client)
        default:
            return
        }
    }

    private func received(_ bytes: [UInt8], by i: Int, at now: Instant) {
        switch OverloadWire.parse(bytes, target: target) {
        case .message(let m):
            let phase = min(m.phase, Self.maxPhases - 1)
            let latency = now.nanoseconds >= m.due ? (now.nanoseconds - m.due) / 1000 : 0
            phases[phase].delivered += 1
            phases[phase].wireBytes += UInt64(bytes.count + (bytes.count < 126 ? 2 : bytes.count < 65_536 ? 4 : 10))
            phases[phase].histogram.record(microseconds: latency)
            if let offset = m.offset {
                if offset <= records[i].lastOffset { records[i].orderViolations += 1 }
                records[i].lastOffset = offset
            }
            guard m.phase == Self.overloadPhase, m.seq < overloadTotal else { return }
            let word = m.seq / 64, bit = UInt64(1) << UInt64(m.seq % 64)
            if records[i].received[word] & bit != 0 {
                records[i].duplicates += 1
                return
            }
            records[i].received[word] |= bit
            if m.high && target == .roomcast && !m.markedHigh { records[i].highUnmarked += 1 }
            switch (records[i].slow, m.high) {
            case (false, true): overloadHistograms.healthyHigh.record(microseconds: latency)
            case (false, false): overloadHistograms.healthyNormal.record(microseconds: latency)
            case (true, true): overloadHistograms.slowHigh.record(microseconds: latency)
            case (true, false): overloadHistograms.slowNormal.record(microseconds: latency)
            }
        case .gap(let g):
            phases[min(currentPhase, Self.maxPhases - 1)].gapEvents += 1
            if let from = g.from, let to = g.to {
                if from <= records[i].lastGapTo || to < from { records[i].orderViolations += 1 }
                records[i].lastOffset = max(records[i].lastOffset, to)
                records[i].lastGapTo = to
            }
            records[i].gapEvents += 1
            records[i].gapNormal += g.normal
            records[i].gapLow += g.low
            records[i].gapTransient += g.transient
        case .other:
            return
        }
    }

    func clientDidFail(_ client: WSClientConnection, reason: String) {
        failure.withLock { if $0 == nil { $0 = reason } }
        let i = client.id - first
        if client.tag == Self.subscribed {
            records[i].closeReason = reason
            records[i].closedInPhase = currentPhase
        } else if client.tag != Self.dead {
            records[i].closeReason = "never subscribed: " + reason
            failed.add(1, ordering: .relaxed)
            inFlight -= 1
        }
        client.tag = Self.dead
        startMore()
    }
}

/// What the overload benchmark reads from a delivered frame, without allocating.
enum OverloadWire {
    struct Message {
        var due: UInt64
        var seq: Int
        var phase: Int
        var high: Bool
        /// roomcast: the event's stream offset.
        var offset: Int64?
        /// roomcast: the event said `"priority":"high"`.
        var markedHigh: Bool
    }

    struct Gap {
        var from: Int64?
        var to: Int64?
        var normal = 0
        var low = 0
        var transient = 0
    }

    enum Parsed {
        case message(Message)
        case gap(Gap)
        case other
    }

    private static let messagePrefix = Array(#"{"ev":"room.message""#.utf8)
    private static let gapPrefix = Array(#"{"ev":"room.gap""#.utf8)
    private static let offsetKey = Array(#""offset":"#.utf8)
    private static let contentKey = Array(#""content":""#.utf8)
    private static let priorityHigh = Array(#""priority":"high""#.utf8)
    private static let fromKey = Array(#""fromOffset":"#.utf8)
    private static let toKey = Array(#""toOffset":"#.utf8)
    private static let normalKey = Array(#""normal":"#.utf8)
    private static let lowKey = Array(#""low":"#.utf8)
    private static let transientKey = Array(#""transient":"#.utf8)

    static func parse(_ b: [UInt8], target: FanoutCommand.Target) -> Parsed {
        b.withUnsafeBufferPointer { p -> Parsed in
            switch target {
            case .nchan:
                guard let m = content(p, from: 0) else { return .other }
                return .message(m)
            case .roomcast:
                if starts(p, messagePrefix) {
                    let offset = find(p, offsetKey, from: messagePrefix.count).flatMap { number(p, from: $0)?.value }
                    guard let c = find(p, contentKey, from: messagePrefix.count), var m = content(p, from: c) else { return .other }
                    m.offset = offset.map(Int64.init)
                    if m.high { m.markedHigh = find(p, priorityHigh, from: c) != nil }
                    return .message(m)
                }
                if starts(p, gapPrefix) {
                    var g = Gap()
                    g.from = find(p, fromKey, from: gapPrefix.count).flatMap { number(p, from: $0) }.map { Int64($0.value) }
                    g.to = find(p, toKey, from: gapPrefix.count).flatMap { number(p, from: $0) }.map { Int64($0.value) }
                    g.normal = find(p, normalKey, from: gapPrefix.count).flatMap { number(p, from: $0) }.map { Int($0.value) } ?? 0
                    g.low = find(p, lowKey, from: gapPrefix.count).flatMap { number(p, from: $0) }.map { Int($0.value) } ?? 0
                    g.transient = find(p, transientKey, from: gapPrefix.count).flatMap { number(p, from: $0) }.map { Int($0.value) } ?? 0
                    return .gap(g)
                }
                return .other
            }
        }
    }

    /// `<due ns> <seq> <phase><h|n>` at `i`.
    private static func content(_ p: UnsafeBufferPointer<UInt8>, from i: Int) -> Message? {
        guard let due = number(p, from: i), due.end < p.count, p[due.end] == 32,
              let seq = number(p, from: due.end + 1), seq.end < p.count, p[seq.end] == 32,
              let phase = number(p, from: seq.end + 1), phase.end < p.count else { return nil }
        return Message(due: due.value, seq: Int(seq.value), phase: Int(phase.value), high: p[phase.end] == UInt8(ascii: "h"),
                       offset: nil, markedHigh: false)
    }

    private static func starts(_ p: UnsafeBufferPointer<UInt8>, _ prefix: [UInt8]) -> Bool {
        guard p.count >= prefix.count else { return false }
        for j in 0..<prefix.count where p[j] != prefix[j] { return false }
        return true
    }

    /// The index just after the first `key` at or after `from`.
    private static func find(_ p: UnsafeBufferPointer<UInt8>, _ key: [UInt8], from: Int) -> Int? {
        guard p.count >= key.count else { return nil }
        var i = from
        let last = p.count - key.count
        outer: while i <= last {
            for j in 0..<key.count where p[i + j] != key[j] {
                i += 1
                continue outer
            }
            return i + key.count
        }
        return nil
    }

    private static func number(_ p: UnsafeBufferPointer<UInt8>, from start: Int) -> (value: UInt64, end: Int)? {
        var v: UInt64 = 0
        var i = start
        while i < p.count, p[i] >= 48, p[i] <= 57 {
            v = v &* 10 &+ UInt64(p[i] - 48)
            i += 1
        }
        return i > start ? (v, i) : nil
    }
}
