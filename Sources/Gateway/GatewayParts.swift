import Chat
import Engine
import Reactor
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
/// reaches every loop's hub once, in commit order.
final class HubTable: PublishedSink {
    private let table = Mutex<[Int: LoopBound<Hub>]>([:])

    func set(_ index: Int, _ hub: LoopBound<Hub>) { table.withLock { $0[index] = hub } }

    /// The hub of `index`; call on that loop's thread.
    func hub(_ index: Int) -> Hub? { table.withLock { $0[index] }?.value }

    /// A committed batch, to every hub on its own loop (called on the store's writer thread).
    func deliver(_ batch: [Published]) {
        for bound in table.withLock({ Array($0.values) }) {
            bound.loop.execute { bound.value.apply(batch) }
        }
    }

    /// Runs `body` on every hub, each on its own loop, and hands the results to `done` (on the
    /// loop that finishes last).
    func gather<T: Sendable>(_ body: @escaping @Sendable (Hub) -> T, done: @escaping @Sendable ([T]) -> Void) {
        let hubs = table.withLock { Array($0.values) }
        guard !hubs.isEmpty else { return done([]) }
        let collected = Mutex<(results: [T], left: Int)>(([], hubs.count))
        for bound in hubs {
            bound.loop.execute {
                let result = body(bound.value)
                let all: [T]? = collected.withLock { c in
                    c.results.append(result)
                    c.left -= 1
                    return c.left == 0 ? c.results : nil
                }
                if let all { done(all) }
            }
        }
    }
}
