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
/// the engine (QS-2's latency budget, `LoopBacklog`).
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
        /// The batches handed to the loop and not yet written (`deliver`'s caller adds, the loop
        /// removes, the engine reads).
        let backlog = Mutex(LoopBacklog())
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

    /// A committed batch, to every hub on its own loop (called on the store's writer thread; a
    /// refusal's reply or a reload's `closeAll` comes from the engine's, `Publisher.deliver`).
    func deliver(_ batch: [Published]) {
        let handed = nanoseconds()
        let lanes = FanoutDelay.lanes(of: batch)
        let delay = self.delay, nanoseconds = self.nanoseconds
        for entry in table.withLock({ Array($0.values) }) {
            entry.backlog.withLock { $0.handed(at: handed) }
            entry.hub.loop.execute {
                let hub = entry.hub.value
                let delivered = hub.apply(batch) > 0
                // The batch is the loop's until its connections have it (a fan-out is written in
                // slices): the latency budget and the delay (of a loop that delivered some of the
                // batch) both count to then.
                hub.whenWritten {
                    if delivered, let lanes { delay.record(lanes, waitedNanoseconds: nanoseconds() &- handed) }
                    entry.backlog.withLock { $0.written(handedAt: handed) }
                }
            }
        }
    }

    /// Runs `body` on every hub, each on its own loop (OP-2: a disabled app's sessions close).
    func onEveryHub(_ body: @escaping @Sendable (Hub) -> Void) {
        for entry in table.withLock({ Array($0.values) }) { entry.hub.loop.execute { body(entry.hub.value) } }
    }

    /// How long the slowest loop has been behind (`LoopBacklog.behind`; 0 when every loop has
    /// written every batch).
    func backlogMilliseconds() -> Int64 {
        let now = nanoseconds()
        var oldest: UInt64 = 0
        for entry in table.withLock({ Array($0.values) }) { oldest = max(oldest, entry.backlog.withLock { $0.behind(now: now) }) }
        return Int64(oldest / 1_000_000)
    }
}

/// QS-2: how far one loop is behind the engine, as a consumer's lag is read: while it has
/// batches not yet written, the time since the newest batch it has written was handed over (or,
/// when it has written none since it was last caught up, since the first one it was then handed).
/// The fan-out being written counts: a room whose one message takes longer than the budget to
/// write (many thousands of members on a machine that cannot write them that fast) has its normal
/// messages refused while it is written, and the CPU they would take goes to the ones admitted.
///
/// Four other readings were built and measured at twice the capacity, and left: the age of the
/// oldest batch not yet written (younger by one batch's interval), and readings that let one slow
/// fan-out through (counting only while a batch or an event waits behind another). Each refused
/// fewer normal messages and let the high-priority p99 rise (BENCHMARKS.md, Overload).
///
/// Two numbers whatever the backlog: batches are counted, not kept. (With two callers of
/// `HubTable.deliver`, `since` may be a written batch's stamp a few microseconds off the newest.)
struct LoopBacklog {
    /// Batches handed over and not yet written.
    private(set) var count = 0
    private var since: UInt64 = 0

    mutating func handed(at nanoseconds: UInt64) {
        if count == 0 { since = nanoseconds }
        count += 1
    }

    /// The oldest batch not yet written, handed over at `nanoseconds`, has been written.
    mutating func written(handedAt nanoseconds: UInt64) {
        guard count > 0 else { return }
        count -= 1
        since = nanoseconds
    }

    /// Nanoseconds the loop is behind (0: it has written every batch).
    func behind(now: UInt64) -> UInt64 {
        count > 0 ? now &- min(now, since) : 0
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

