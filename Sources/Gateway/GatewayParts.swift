import Chat
import Foundation
import Engine
import Reactor
import Server
import Synchronization

/// The WebSocket URLs the address lookup hands out; set once the port is bound.
final class PublicURLs: Sendable {
    private let urls: Mutex<[String]>
    init(_ urls: [String]) { self.urls = Mutex(urls) }
    var value: [String] { urls.withLock { $0 } }
    func set(_ v: [String]) { urls.withLock { $0 = v } }
}

/// PX-1: new WebSocket connections per client address, in token buckets shared by every loop.
/// At most `maxAddresses` are remembered: past that, the full (idle) ones are forgotten, and if
/// that is not enough all are (a flood from that many addresses is not one client's).
final class ConnectLimiter: Sendable {
    let perSecond: Int
    static let maxAddresses = 65_536
    private let buckets = Mutex<[String: TokenBucket]>([:])

    init(perSecond: Int) { self.perSecond = perSecond }

    var addressCount: Int { buckets.withLock { $0.count } }

    func take(_ address: String, now: Int64) -> Bool {
        buckets.withLock { b in
            if b.count >= Self.maxAddresses {
                b = b.filter { var bucket = $0.value; return !bucket.isFull(now: now) }
                if b.count >= Self.maxAddresses { b = [:] }
            }
            var bucket = b[address] ?? TokenBucket(rate: perSecond, now: now)
            let ok = bucket.take(now: now)
            b[address] = bucket
            return ok
        }
    }
}

/// Whether /readyz says ready.
final class ReadyFlag: Sendable {
    private let value = Atomic<Bool>(false)
    var isReady: Bool { value.load(ordering: .relaxed) }
    func set(_ v: Bool) { value.store(v, ordering: .relaxed) }
}

/// Per-loop hubs, looked up from the upgrade handler; the publisher's sink: each committed batch
/// reaches every loop's hub once, in commit order. It also measures how far the loops are behind
/// the engine (QS-2's latency budget): a batch's age when its loop has written it.
final class HubTable: PublishedSink, FanoutPressure {
    private let table = Mutex<[Int: Entry]>([:])
    /// QS-7: how long each loop took to get each event out (`roomcast_fanout_delay_seconds`).
    let delay = FanoutDelay()
    /// Monotonic nanoseconds (injected by tests).
    private let nanoseconds: @Sendable () -> UInt64

    init(nanoseconds: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }) {
        self.nanoseconds = nanoseconds
    }

    private final class Entry: Sendable {
        let hub: LoopBound<Hub>
        /// Batches handed to the loop and not yet written, and the time the last written one was
        /// handed over (a backlog is at least as old as that).
        let pending = Atomic<Int>(0)
        let lastStamp = Atomic<Int64>(0)
        init(_ hub: LoopBound<Hub>) { self.hub = hub }
    }

    func set(_ index: Int, _ hub: LoopBound<Hub>) { table.withLock { $0[index] = Entry(hub) } }

    /// Forgets every hub (the gateway has stopped: its loops are done). Each hub holds the
    /// gateway's context, which holds this table: without this the two would keep each other.
    func removeAll() { table.withLock { $0.removeAll() } }

    /// The hub of `index`; call on that loop's thread.
    func hub(_ index: Int) -> Hub? { table.withLock { $0[index] }?.hub.value }

    /// The hub of `index` with its loop, from any thread.
    func bound(_ index: Int) -> LoopBound<Hub>? { table.withLock { $0[index] }?.hub }

    /// A committed batch, to every hub on its own loop (called on the store's writer thread).
    func deliver(_ batch: [Published]) {
        let stamp = monotonicMilliseconds()
        let handed = nanoseconds()
        let lanes = FanoutDelay.lanes(of: batch)
        let delay = self.delay, nanoseconds = self.nanoseconds
        for entry in table.withLock({ Array($0.values) }) {
            // The first batch of an idle loop starts its backlog's clock.
            if entry.pending.add(1, ordering: .relaxed).newValue == 1 { entry.lastStamp.store(stamp, ordering: .relaxed) }
            entry.hub.loop.execute {
                let hub = entry.hub.value
                let delivered = hub.apply(batch) > 0
                // The loop is behind until its connections have the batch (a fan-out is written in
                // slices): the latency budget and the delay (of a loop that delivered some of the
                // batch) both count to then.
                hub.whenWritten {
                    if delivered, let lanes { delay.record(lanes, waitedNanoseconds: nanoseconds() &- handed) }
                    entry.lastStamp.store(stamp, ordering: .relaxed)
                    entry.pending.subtract(1, ordering: .relaxed)
                }
            }
        }
    }

    /// Runs `body` on every hub, each on its own loop (OP-2: a disabled app's sessions close).
    func onEveryHub(_ body: @escaping @Sendable (Hub) -> Void) {
        for entry in table.withLock({ Array($0.values) }) { entry.hub.loop.execute { body(entry.hub.value) } }
    }

    /// How long the slowest loop has been behind: the age of the last batch it has written while
    /// more wait (0 when every loop is caught up).
    func backlogMilliseconds() -> Int64 {
        let now = monotonicMilliseconds()
        var oldest: Int64 = 0
        for entry in table.withLock({ Array($0.values) }) where entry.pending.load(ordering: .relaxed) > 0 {
            oldest = max(oldest, now - entry.lastStamp.load(ordering: .relaxed))
        }
        return oldest
    }
}

/// QS-7: the server's own share of an event's latency, by class: from the moment a committed batch
/// is handed to the I/O loops until a loop has written it to every connection of its audience on
/// that loop (handed to the socket, or left queued behind what a connection has not read; the
/// loop writes a fan-out in slices, and a normal, low or transient message of a busy room may be
/// held for up to `--write-delay` first, which is not counted). One observation per event for
/// each loop that delivered some of its batch. What the clients' own reading adds is not in it:
/// on a machine shared with the subscribers, that is where a message waits.
final class FanoutDelay: Sendable {
    private let lanes = Lane.allCases.map { _ in LatencyBuckets() }

    /// How many events of each lane the batch holds (nil: no event, nothing to record).
    static func lanes(of batch: [Published]) -> [Int]? {
        var counts = [Int](repeating: 0, count: Lane.allCases.count)
        var any = false
        for case .deliver(_, _, _, _, let lane) in batch {
            counts[Int(lane.rawValue)] += 1
            any = true
        }
        return any ? counts : nil
    }

    /// Records `counts[lane]` events of each lane that waited this long.
    func record(_ counts: [Int], waitedNanoseconds: UInt64) {
        for (lane, n) in counts.enumerated() where n > 0 { lanes[lane].record(nanoseconds: waitedNanoseconds, count: n) }
    }

    func histogram(_ lane: Lane) -> LatencyBuckets.Snapshot { lanes[Int(lane.rawValue)].snapshot }

    /// The Prometheus text of the histogram, one series per class.
    func render() -> String {
        let name = "roomcast_fanout_delay_seconds"
        var text = "# HELP \(name) From a committed event's hand-over to the I/O loops until a loop has written it to every connection of its audience there (what a socket refused stays queued; a write-delay hold is not counted); per event and delivering loop, by class (QS-7).\n"
        text += "# TYPE \(name) histogram\n"
        for lane in Lane.allCases { text += histogram(lane).render(name, label: "class=\"\(lane.name)\"") }
        return text
    }
}

/// Milliseconds of a monotonic clock (for ages; never compared with wall time).
func monotonicMilliseconds() -> Int64 {
    Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000)
}
