import ArgumentParser
import HTTP1
import Reactor
import Synchronization
import WebSocket
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// N subscribers in one room, messages published over HTTP, delivered messages/s and
/// publish→receive latency. Each message carries its send time (CLOCK_MONOTONIC, shared by every
/// thread and process on the machine).
///
/// Targets: `roomcast` (connect with a minted token, room.join, publish with signed
/// `POST /v1/rooms/{room}/messages`) and `nchan` (`/sub?id=room` WebSocket, `POST /pub?id=room`).
struct FanoutCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fanout",
        abstract: "Fan-out: N subscribers in one room, messages published over HTTP; delivered/s and latency.")

    enum Target: String, ExpressibleByArgument {
        case roomcast
        case nchan
    }

    @Option(help: "roomcast or nchan.")
    var target: Target = .roomcast

    @Option(help: "Server port on 127.0.0.1.")
    var port: UInt16?

    @Option(help: "Server ports on 127.0.0.1, comma-separated (nodes of a cluster): subscribers and publisher connections are spread over them round-robin; roomcast is prepared on each in turn.")
    var ports: String?

    /// `--ports`, else `--port`.
    var targetPorts: [UInt16] {
        if let ports { return ports.split(separator: ",").compactMap { UInt16(String($0.filter { $0 != " " })) } }
        return port.map { [$0] } ?? []
    }

    @Option(help: "Subscribers (WebSocket connections) in the room.")
    var subscribers = 1000

    @Option(help: "Event loops (threads) for the subscribers.")
    var clientLoops = 1

    @Option(help: "Publishes per second; 0 publishes --messages as fast as the publisher connections allow.")
    var rate = 100.0

    @Option(help: "Seconds to publish at --rate.")
    var duration = 10.0

    @Option(help: "Messages to publish when --rate is 0.")
    var messages = 200

    @Option(help: "Publisher HTTP connections (keep-alive).")
    var publishers = 2

    @Option(help: "Requests in flight per publisher connection (pipelined).")
    var pipeline = 16

    @Option(help: "Bytes of each published message's content (roomcast) or body (nchan): the send time, then padding; 0: the send time alone.")
    var payloadBytes = 0

    @Option(help: "Event encoding the roomcast subscribers ask for (TR-5): json (no subprotocol offered) or compact (roomcast.compact.v1).")
    var encoding = "json"

    @Option(help: "AU-1 (roomcast): every Nth subscriber joins with the tag --target-tag (0: none).")
    var taggedEvery = 0

    @Option(help: "AU-1 (roomcast): each message goes to the members carrying this tag only (targetTags); deliveries are expected at the tagged subscribers only.")
    var targetTag: String?

    @Option(help: "Room (roomcast) or channel (nchan) id.")
    var room = "fanout"

    @Option(help: "App key (roomcast).")
    var appKey = "bench"

    @Option(help: "App secret (roomcast).")
    var appSecret = "bench-secret-0123456789"

    @Option(help: "Connection attempts in flight at once.")
    var concurrency = 256

    @Option(help: "Seconds to wait for the last deliveries after the last publish.")
    var drain = 5.0

    @Option(help: "roomcast: set the app's before-send hook (PX-4) to this URL first (\"\": remove it).")
    var beforeSendUrl: String?

    @Option(help: "Server process ids, comma-separated: their CPU time (user + system, /proc/PID/stat) is printed for the whole run (run_cpu_s: room set-up, subscribers' connects and joins included) and from the first publish to the last delivery (publish_cpu_s).")
    var serverPids: String?

    func validate() throws {
        guard subscribers > 0 else { throw ValidationError("--subscribers must be positive") }
        guard (port == nil) != (ports == nil), !targetPorts.isEmpty,
              ports.map({ $0.split(separator: ",").count == targetPorts.count }) ?? true else {
            throw ValidationError("give --port or --ports (comma-separated port numbers)")
        }
        guard rate >= 0, duration > 0, messages > 0, publishers > 0, pipeline > 0, clientLoops > 0 else {
            throw ValidationError("--rate, --duration, --messages, --publishers, --pipeline and --client-loops must be positive")
        }
    }

    func run() throws {
        _ = raiseDescriptorLimit()
        let addresses = targetPorts.map { Socket.Address(host: "127.0.0.1", port: $0) }
        let pids = (serverPids ?? "").split(separator: ",").compactMap { Int32(String($0)) }
        let runCPUStart = Self.cpuSeconds(pids)
        // On each node in turn: a node answers once it has applied its own entry, so every
        // node then has the settings and the room (the cluster's log is one order).
        if target == .roomcast { for address in addresses { try prepareRoomcast(address) } }

        // Subscribers, spread over the client loops.
        var loops: [EventLoop] = []
        var runners: [SubscriberRunner] = []
        var threads: [PosixThread] = []
        let setupStart = Instant.now()
        for i in 0..<clientLoops {
            let loop = try EventLoop(name: "fanout-sub-\(i)")
            let share = subscribers / clientLoops + (i < subscribers % clientLoops ? 1 : 0)
            let runner = SubscriberRunner(loop: loop, addresses: addresses, target: target, first: i * (subscribers / clientLoops + 1),
                                          count: share, concurrency: max(1, concurrency / clientLoops), room: room,
                                          appKey: appKey, appSecret: appSecret, compact: encoding == "compact",
                                          tag: taggedEvery > 0 ? (targetTag ?? "tagged") : nil, taggedEvery: taggedEvery)
            loops.append(loop)
            runners.append(runner)
            loop.execute { runner.startMore() }
            threads.append(PosixThread.start(name: "fanout-sub-\(i)") { loop.run() })
        }
        while runners.reduce(0, { $0 + $1.settled }) < subscribers { usleep(10_000) }
        let ready = runners.reduce(0) { $0 + $1.readyCount }
        // AU-1: a targeted message is expected at the tagged subscribers only.
        let recipients = targetTag != nil ? runners.reduce(0) { $0 + $1.taggedReadyCount } : ready
        print("fanout: subscribers ready=\(ready)/\(subscribers)\(targetTag != nil ? " tagged=\(recipients)" : "") in \(fixed(seconds(Instant.now() - setupStart), 2)) s")
        if let f = runners.compactMap(\.firstFailure).first { print("fanout: first subscriber failure: \(f)") }
        fflush(nil)
        guard ready > 0 else {
            for l in loops { l.stop() }
            throw ExitCode.failure
        }
        usleep(500_000)

        // Publish.
        let total = rate > 0 ? Int((rate * duration).rounded()) : messages
        let pubLoop = try EventLoop(name: "fanout-pub")
        let publisher = Publisher(loop: pubLoop, addresses: addresses, target: target, room: room, appKey: appKey, appSecret: appSecret,
                                  payloadBytes: payloadBytes, targetTag: targetTag,
                                  total: total, rate: rate, connections: publishers, pipeline: pipeline)
        let pubThread = PosixThread.start(name: "fanout-pub") { pubLoop.run() }
        let cpuStart = Self.cpuSeconds(pids)
        let publishStart = Instant.now()
        pubLoop.execute { publisher.start() }
        while !publisher.finished { usleep(5_000) }
        let publishEnd = Instant.now()
        let expected = UInt64(publisher.accepted) * UInt64(recipients)
        // Wait for the deliveries (or the drain time).
        let deadline = Instant.now() + .milliseconds(Int64(drain * 1000))
        while Instant.now() < deadline {
            let delivered = runners.reduce(UInt64(0)) { $0 + $1.delivered }
            if delivered >= expected { break }
            usleep(1_000)
        }
        let cpuEnd = Self.cpuSeconds(pids)
        let publishCPU = cpuEnd - cpuStart
        let runCPU = cpuEnd - runCPUStart
        for l in loops { l.stop() }
        for t in threads { t.join() }
        pubLoop.stop()
        pubThread.join()

        var histogram = LatencyHistogram()
        var delivered: UInt64 = 0
        var lastDelivery = publishStart
        var lost = 0
        var wireBytes: UInt64 = 0
        for r in runners {
            wireBytes += r.deliveredWireBytes
            histogram.merge(r.histogram)
            delivered += r.delivered
            if r.lastDelivery > lastDelivery { lastDelivery = r.lastDelivery }
            lost += r.lostCount
        }
        let elapsed = seconds(lastDelivery - publishStart)
        let publishSeconds = seconds(publishEnd - publishStart)
        let perSecond = elapsed > 0 ? Double(delivered) / elapsed : 0
        func ms(_ us: UInt64) -> String { fixed(Double(us) / 1000, 2) }
        print("fanout: target=\(target.rawValue)\(target == .roomcast ? " encoding=\(encoding)" : "") subscribers=\(ready) published=\(publisher.accepted)/\(total) "
            + "publish_errors=\(publisher.errors) publish_seconds=\(fixed(publishSeconds, 2)) "
            + "published_per_s=\(Int(publishSeconds > 0 ? Double(publisher.accepted) / publishSeconds : 0)) "
            + "rate=\(rate > 0 ? String(Int(rate)) : "max")")
        if let e = publisher.firstError { print("fanout: first publish error: \(e)") }
        if addresses.count > 1 {
            let byPort = publisher.acceptedByPort.map { "\($0.port):\($0.accepted)" }.joined(separator: ",")
            let subs = addresses.map { a in "\(a.port):\(runners.reduce(0) { $0 + $1.readyCount(port: a.port) })" }.joined(separator: ",")
            print("fanout: published_by_port=\(byPort) subscribers_by_port=\(subs)")
        }
        print("fanout: delivered=\(delivered)/\(expected) (\(fixed(expected > 0 ? Double(delivered) * 100 / Double(expected) : 0, 2))%) "
            + "subscribers_lost=\(lost) elapsed=\(fixed(elapsed, 3)) s delivered_per_s=\(Int(perSecond)) "
            + "wire_bytes_per_delivery=\(delivered > 0 ? Int(wireBytes / delivered) : 0)")
        if !pids.isEmpty {
            print("fanout: run_cpu_s=\(fixed(runCPU, 3)) publish_cpu_s=\(fixed(publishCPU, 3)) "
                + "publish_cpu_s_per_million_deliveries=\(fixed(delivered > 0 ? publishCPU * 1e6 / Double(delivered) : 0, 3))")
        }
        // The load generator's own CPU since it started: beside the servers' it shows how the
        // cores were shared (all on the same machine).
        print("fanout: load_generator_run_cpu_s=\(fixed(Self.cpuSeconds([getpid()]), 3))")
        print("fanout: latency_ms p50=\(ms(histogram.quantile(0.5))) p99=\(ms(histogram.quantile(0.99))) "
            + "p99.9=\(ms(histogram.quantile(0.999))) max=\(ms(histogram.maximum))")
    }

    /// User + system CPU seconds of these processes so far (fields 14 and 15 of /proc/PID/stat).
    static func cpuSeconds(_ pids: [Int32]) -> Double {
        var ticks = 0
        for pid in pids {
            guard let f = fopen("/proc/\(pid)/stat", "r") else { continue }
            defer { fclose(f) }
            var buffer = [CChar](repeating: 0, count: 1024)
            guard fgets(&buffer, Int32(buffer.count), f) != nil else { continue }
            let line = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
            guard let close = line.lastIndex(of: ")") else { continue }
            let fields = line[line.index(after: close)...].split(separator: " ")
            if fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) { ticks += user + system }
        }
        return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// App settings for a large room (no per-join traffic), and the room itself.
    private func prepareRoomcast(_ address: Socket.Address) throws {
        let client = BlockingHTTP(address: address)
        func signed(_ method: String, _ path: String, _ body: String) throws -> Int {
            let status = try client.request(method, path, body: body, headers: RoomcastSignature.headers(appKey: appKey, secret: appSecret))
            return status
        }
        let settings = try signed("PATCH", "/v1/settings", #"{"memberChangeEvents":false,"enterExitNotifications":false,"multipleRoomsPerUser":true,"restCallsPerSecond":1000000,"clientMessagesPerSecond":1000000,"sendsPerUserPerSecond":1000000,"roomMessagesPerSecond":100000}"#)
        guard settings == 200 else {
            print("fanout: PATCH /v1/settings answered \(settings) (is the app \(appKey) configured?)")
            throw ExitCode.failure
        }
        if let url = beforeSendUrl {
            let hook = try signed("PATCH", "/v1/settings", #"{"beforeSend":{"url":"\#(url)","timeoutMs":2000,"failOpen":false}}"#)
            guard hook == 200 else {
                print("fanout: setting the before-send hook answered \(hook) (is the app allowed private addresses?)")
                throw ExitCode.failure
            }
        }
        let created = try signed("POST", "/v1/rooms", #"{"roomId":"\#(room)","keepAlive":true,"enterExitNotifications":false}"#)
        guard created == 201 || created == 409 else {
            print("fanout: POST /v1/rooms answered \(created)")
            throw ExitCode.failure
        }
    }
}

// MARK: Signing

enum RoomcastSignature {
    private static let lock = Mutex(UInt64(0))

    /// RongCloud-style headers: Signature = hex SHA1(secret + nonce + timestamp); nonces unique.
    static func headers(appKey: String, secret: String) -> [(String, String)] {
        let n = lock.withLock { v -> UInt64 in
            v += 1
            return v
        }
        let nonce = "\(getpid())-\(n)-\(UInt32.random(in: 0...UInt32.max))"
        let timestamp = String(time(nil))
        return [("App-Key", appKey), ("Nonce", nonce), ("Timestamp", timestamp),
                ("Signature", Signing.sha1(secret: secret, nonce: nonce, timestamp: timestamp))]
    }
}

// MARK: Subscribers

final class SubscriberRunner: WSClientDelegate, @unchecked Sendable {
    // Safety: the non-atomic state is touched on `loop` only; the main thread reads the atomics,
    // and reads `histogram`/`lastDelivery` only after the loop thread has been joined.
    let loop: EventLoop
    /// Subscriber `id` connects to `addresses[id % addresses.count]`.
    let addresses: [Socket.Address]
    let target: FanoutCommand.Target
    let first: Int
    let count: Int
    let concurrency: Int
    let room: String
    let appKey: String
    let appSecret: String
    /// TR-5: the subscribers offer roomcast.compact.v1.
    let compact: Bool
    /// AU-1: every `taggedEvery`th subscriber joins with `tag`.
    let tag: String?
    let taggedEvery: Int
    private let taggedReady = Atomic<Int>(0)
    var taggedReadyCount: Int { taggedReady.load(ordering: .relaxed) }
    private var clients: [WSClientConnection] = []
    private var started = 0
    private var inFlight = 0
    private let ready = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let lost = Atomic<Int>(0)
    private let deliveredCount = Atomic<UInt64>(0)
    private let deliveredBytes = Atomic<UInt64>(0)
    var deliveredWireBytes: UInt64 { deliveredBytes.load(ordering: .relaxed) }
    private let failure = Mutex<String?>(nil)
    private(set) var histogram = LatencyHistogram()
    private(set) var lastDelivery = Instant(nanoseconds: 0)

    var readyCount: Int { ready.load(ordering: .relaxed) }
    var settled: Int { readyCount + failed.load(ordering: .relaxed) }
    var lostCount: Int { lost.load(ordering: .relaxed) }
    var delivered: UInt64 { deliveredCount.load(ordering: .relaxed) }
    var firstFailure: String? { failure.withLock { $0 } }
    /// Subscribers on `port` (read after the loop thread has been joined).
    func readyCount(port: UInt16) -> Int {
        clients.indices.filter { clients[$0].tag == Self.subscribed && addresses[(first + $0) % addresses.count].port == port }.count
    }

    // Connection states kept in `tag`.
    private static let connecting = 0, authenticating = 1, joining = 2, subscribed = 3, dead = 4

    init(loop: EventLoop, addresses: [Socket.Address], target: FanoutCommand.Target, first: Int, count: Int, concurrency: Int,
         room: String, appKey: String, appSecret: String, compact: Bool = false, tag: String? = nil, taggedEvery: Int = 0) {
        self.compact = compact
        self.tag = tag
        self.taggedEvery = taggedEvery
        self.loop = loop
        self.addresses = addresses
        self.target = target
        self.first = first
        self.count = count
        self.concurrency = concurrency
        self.room = room
        self.appKey = appKey
        self.appSecret = appSecret
    }

    func startMore() {
        let path = target == .roomcast ? "/ws" : "/sub?id=\(room)"
        while started < count && inFlight < concurrency {
            let address = addresses[(first + started) % addresses.count]
            let headers = compact && target == .roomcast ? [("Sec-WebSocket-Protocol", WireEncoding.compact.rawValue)] : []
            let c = WSClientConnection(loop: loop, id: first + started, host: "127.0.0.1", port: address.port, path: path, headers: headers)
            c.delegate = self
            clients.append(c)
            started += 1
            inFlight += 1
            c.start(address: address)
        }
    }

    private func isTagged(_ id: Int) -> Bool { tag != nil && taggedEvery > 0 && id % taggedEvery == 0 }

    private func becameReady(_ c: WSClientConnection) {
        c.tag = Self.subscribed
        ready.add(1, ordering: .relaxed)
        if isTagged(c.id) { taggedReady.add(1, ordering: .relaxed) }
        inFlight -= 1
        startMore()
    }

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
        let now = Instant.now()
        let bytes: [UInt8]
        switch message {
        case .text(let b), .binary(let b): bytes = b
        default: return
        }
        switch client.tag {
        case Self.subscribed:
            guard let sent = Self.timestamp(in: bytes, target: target) else { return }
            deliveredCount.add(1, ordering: .relaxed)
            // Wire bytes: the frame's payload and its header (2, 4 or 10 bytes; unmasked).
            deliveredBytes.add(UInt64(bytes.count + (bytes.count < 126 ? 2 : bytes.count < 65_536 ? 4 : 10)), ordering: .relaxed)
            lastDelivery = now
            histogram.record(microseconds: now.nanoseconds >= sent ? (now.nanoseconds - sent) / 1000 : 0)
        case Self.authenticating:
            guard Self.isReply(bytes, id: 1) else { return }
            guard Self.contains(bytes, #""ok":"#) else { return fail(client, "connect refused: " + String(decoding: bytes.prefix(160), as: UTF8.self)) }
            client.tag = Self.joining
            let tags = isTagged(client.id) ? #","tags":["\#(tag ?? "")"]"# : ""
            client.sendText(Array(#"{"id":2,"op":"room.join","args":{"roomId":"\#(room)"\#(tags)}}"#.utf8))
        case Self.joining:
            guard Self.isReply(bytes, id: 2) else { return }
            guard Self.contains(bytes, #""ok":"#) else { return fail(client, "join refused: " + String(decoding: bytes.prefix(160), as: UTF8.self)) }
            becameReady(client)
        default:
            return
        }
    }

    private func fail(_ client: WSClientConnection, _ reason: String) {
        client.fail(reason)
    }

    func clientDidFail(_ client: WSClientConnection, reason: String) {
        failure.withLock { if $0 == nil { $0 = reason } }
        if client.tag == Self.subscribed {
            lost.add(1, ordering: .relaxed)
        } else if client.tag != Self.dead {
            failed.add(1, ordering: .relaxed)
            inFlight -= 1
        }
        client.tag = Self.dead
        startMore()
    }

    /// `{"id":N,` at the start of an answer.
    static func isReply(_ b: [UInt8], id: Int) -> Bool { contains(b.prefix(16), #"{"id":\#(id),"#) }

    static func contains<C: Collection>(_ haystack: C, _ needle: String) -> Bool where C.Element == UInt8 {
        let n = Array(needle.utf8)
        let h = Array(haystack)
        guard h.count >= n.count else { return false }
        for i in 0...(h.count - n.count) where h[i] == n[0] && Array(h[i..<(i + n.count)]) == n { return true }
        return false
    }

    /// The send time in a delivered message: the whole body (nchan) or the `content` of a
    /// `room.message` event (roomcast).
    static func timestamp(in b: [UInt8], target: FanoutCommand.Target) -> UInt64? {
        switch target {
        case .nchan:
            return digits(b, from: 0)
        case .roomcast:
            // `{"ev":"room.message"` … `"content":"<digits>"`, or compact `{"m":` … `"c":"<digits>"`
            // (TR-5), found without allocating.
            let compact = b.count > 5 && b[2] == UInt8(ascii: "m") && b[3] == UInt8(ascii: "\"")
            return b.withUnsafeBufferPointer { p -> UInt64? in
                let prefix = compact ? compactPrefix : messagePrefix, key = compact ? compactContentKey : contentKey
                guard p.count > prefix.count + key.count else { return nil }
                for j in 0..<prefix.count where p[j] != prefix[j] { return nil }
                var i = prefix.count
                let last = p.count - key.count
                outer: while i <= last {
                    for j in 0..<key.count where p[i + j] != key[j] {
                        i += 1
                        continue outer
                    }
                    return digits(b, from: i + key.count)
                }
                return nil
            }
        }
    }

    private static let messagePrefix = Array(#"{"ev":"room.message""#.utf8)
    private static let contentKey = Array(#""content":""#.utf8)
    private static let compactPrefix = Array(#"{"m":"#.utf8)
    private static let compactContentKey = Array(#""c":""#.utf8)

    static func digits(_ b: [UInt8], from start: Int) -> UInt64? {
        var v: UInt64 = 0
        var i = start
        while i < b.count, b[i] >= 48, b[i] <= 57 {
            v = v &* 10 &+ UInt64(b[i] - 48)
            i += 1
        }
        return i > start ? v : nil
    }
}

// MARK: Publisher

/// What a publisher connection reports to whoever publishes through it.
protocol PublisherConnectionOwner: AnyObject {
    /// An answer, matched in order to the request sent with `tag`.
    func answered(_ connection: PublisherConnection, status: Int, detail: String, tag: Int)
    /// The connection is closed; the requests it had in flight (`unansweredTags`) got no answer.
    func connectionFailed(_ connection: PublisherConnection, _ reason: String)
}

/// Publishes `total` messages over `connections` keep-alive HTTP connections with up to
/// `pipeline` requests in flight each, paced at `rate` per second (0: as fast as possible).
final class Publisher: PublisherConnectionOwner, @unchecked Sendable {
    // Safety: touched on `loop` only, except the atomics the main thread polls.
    let loop: EventLoop
    /// Connection `i` goes to `addresses[i % addresses.count]`.
    let addresses: [Socket.Address]
    let target: FanoutCommand.Target
    let room: String
    let appKey: String
    let appSecret: String
    let total: Int
    let rate: Double
    let pipeline: Int
    /// Content (body) bytes of each message: the send time, a space, then padding.
    let payloadBytes: Int
    /// AU-1: messages go to the members with this tag only.
    let targetTag: String?
    private var connections: [PublisherConnection] = []
    private var sent = 0
    private var startedAt = Instant(nanoseconds: 0)
    private let acceptedCount = Atomic<Int>(0)
    private let errorCount = Atomic<Int>(0)
    private let done = Atomic<Bool>(false)
    private let error = Mutex<String?>(nil)
    private var answered = 0

    var accepted: Int { acceptedCount.load(ordering: .relaxed) }
    var errors: Int { errorCount.load(ordering: .relaxed) }
    var finished: Bool { done.load(ordering: .relaxed) }
    var firstError: String? { error.withLock { $0 } }
    /// Accepted publishes per server port (read after the loop thread has been joined).
    var acceptedByPort: [(port: UInt16, accepted: Int)] {
        addresses.map { a in (a.port, connections.filter { $0.port == a.port }.reduce(0) { $0 + $1.accepted }) }
    }

    init(loop: EventLoop, addresses: [Socket.Address], target: FanoutCommand.Target, room: String, appKey: String, appSecret: String,
         payloadBytes: Int = 0, targetTag: String? = nil, total: Int, rate: Double, connections: Int, pipeline: Int) {
        self.payloadBytes = payloadBytes
        self.targetTag = targetTag
        self.loop = loop
        self.addresses = addresses
        self.target = target
        self.room = room
        self.appKey = appKey
        self.appSecret = appSecret
        self.total = total
        self.rate = rate
        self.pipeline = pipeline
        for _ in 0..<connections { self.connections.append(PublisherConnection(loop: loop, publisher: nil)) }
    }

    func start() {
        startedAt = Instant.now()
        for (i, c) in connections.enumerated() {
            c.publisher = self
            c.open(addresses[i % addresses.count])
        }
        pump()
        if rate > 0 { loop.scheduleRepeating(every: .milliseconds(1)) { [self] in pump() } }
    }

    /// Sends what is due (paced) or what the pipelines allow (unpaced).
    func pump() {
        let due: Int
        if rate > 0 {
            due = min(total, Int(seconds(Instant.now() - startedAt) * rate) + 1)
        } else {
            due = total
        }
        while sent < due {
            guard let c = connections.filter({ $0.isOpen && $0.inFlight < pipeline }).min(by: { $0.inFlight < $1.inFlight }) else { return }
            c.send(request())
            sent += 1
        }
    }

    private func request() -> [UInt8] {
        var stamp = String(Instant.now().nanoseconds)
        if payloadBytes > stamp.utf8.count + 1 { stamp += " " + String(repeating: "x", count: payloadBytes - stamp.utf8.count - 1) }
        switch target {
        case .nchan:
            return Array("POST /pub?id=\(room) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: \(stamp.utf8.count)\r\n\r\n\(stamp)".utf8)
        case .roomcast:
            let targeted = targetTag.map { #","targetTags":{"tag":"\#($0)"}"# } ?? ""
            let body = #"{"content":"\#(stamp)","fromUserId":"publisher"\#(targeted)}"#
            var r = "POST /v1/rooms/\(room)/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            for (k, v) in RoomcastSignature.headers(appKey: appKey, secret: appSecret) { r += "\(k): \(v)\r\n" }
            r += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
            return Array(r.utf8)
        }
    }

    func answered(_ connection: PublisherConnection, status: Int, detail: String, tag: Int) {
        answered += 1
        if (200..<300).contains(status) {
            connection.accepted += 1
            acceptedCount.add(1, ordering: .relaxed)
        } else {
            errorCount.add(1, ordering: .relaxed)
            error.withLock { if $0 == nil { $0 = "HTTP \(status): \(detail)" } }
        }
        if answered >= total { done.store(true, ordering: .relaxed) } else { pump() }
    }

    func connectionFailed(_ connection: PublisherConnection, _ reason: String) {
        error.withLock { if $0 == nil { $0 = reason } }
        if connections.allSatisfy({ !$0.isOpen }) { done.store(true, ordering: .relaxed) }
    }
}

/// One keep-alive HTTP/1.1 connection with pipelined requests; answers are matched in order.
final class PublisherConnection: EventHandler {
    let loop: EventLoop
    weak var publisher: (any PublisherConnectionOwner)?
    private var fd: Int32 = -1
    private var registration: RegistrationID?
    private var output = OutboundQueue()
    private var inbound: [UInt8] = []
    private(set) var inFlight = 0
    private(set) var isOpen = false
    private var connected = false
    /// The server port it was opened to, and the publishes it got accepted.
    private(set) var port: UInt16 = 0
    var accepted = 0

    /// The tags of the requests in flight, oldest first (answers come in order).
    private var tags: [Int] = []
    private var tagsHead = 0
    /// The tags of the requests sent and not answered (all of them once the connection failed).
    var unansweredTags: ArraySlice<Int> { tags[tagsHead...] }

    init(loop: EventLoop, publisher: (any PublisherConnectionOwner)?) {
        self.loop = loop
        self.publisher = publisher
    }

    func open(_ address: Socket.Address) {
        port = address.port
        do {
            let (fd, done) = try Socket.connect(to: address)
            self.fd = fd
            Socket.setNoDelay(fd)
            registration = try loop.register(fd: fd, events: EventLoop.readable | EventLoop.writable, handler: self)
            connected = done
            isOpen = true
        } catch {
            publisher?.connectionFailed(self, "publisher connect: \(error)")
        }
    }

    func send(_ bytes: [UInt8], tag: Int = 0) {
        inFlight += 1
        tags.append(tag)
        output.append(ByteBlock.from(bytes))
        if connected { flush() }
    }

    private func flush() {
        guard let r = registration else { return }
        do {
            let state = try output.flush(fd: fd, iovecs: loop.iovecs)
            loop.modify(r, events: state == .drained ? EventLoop.readable : EventLoop.readable | EventLoop.writable)
        } catch {
            fail("publisher write: \(error)")
        }
    }

    override func handleEvent(_ events: UInt32) {
        if !connected {
            let err = Socket.pendingError(fd)
            guard err == 0 else { return fail("publisher connect: errno \(err)") }
            connected = true
        }
        if events & EventLoop.writable != 0 { flush() }
        if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 { read() }
    }

    private func read() {
        let buffer = loop.readBuffer
        switch try? Socket.read(fd, into: buffer) {
        case .wouldBlock?: return
        case .processed(let n)? where n > 0:
            inbound.append(contentsOf: buffer[0..<n])
            parseAnswers()
        default:
            fail("publisher: the server closed the connection")
        }
    }

    /// Takes whole answers off `inbound`: status line, Content-Length, body.
    private func parseAnswers() {
        while let end = headerSectionEnd(inbound) {
            let head = String(decoding: inbound[0..<end], as: UTF8.self)
            let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            var length = 0
            for line in head.split(separator: "\r\n") {
                let lower = line.lowercased()
                if lower.hasPrefix("content-length:") { length = Int(String(lower.dropFirst(15).filter { $0 != " " && $0 != "\t" })) ?? 0 }
            }
            guard inbound.count >= end + 4 + length else { return }
            let body = String(decoding: inbound[(end + 4)..<(end + 4 + length)], as: UTF8.self)
            inbound.removeFirst(end + 4 + length)
            inFlight -= 1
            let tag = tags[tagsHead]
            tagsHead += 1
            if tagsHead >= 1024 {
                tags.removeFirst(tagsHead)
                tagsHead = 0
            }
            publisher?.answered(self, status: status, detail: String(body.prefix(200)), tag: tag)
        }
    }

    private func fail(_ reason: String) {
        guard isOpen else { return }
        isOpen = false
        if let r = registration { loop.deregister(r) }
        registration = nil
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
        publisher?.connectionFailed(self, reason)
    }
}

// MARK: A blocking HTTP call (setup only)

struct BlockingHTTP {
    let address: Socket.Address

    /// One request on a fresh connection; returns the status.
    func request(_ method: String, _ path: String, body: String, headers: [(String, String)]) throws -> Int {
        try exchange(method, path, body: body, headers: headers).status
    }

    /// One request on a fresh connection; returns the status and the response's body (read to
    /// the connection's close; not chunked).
    func exchange(_ method: String, _ path: String, body: String, headers: [(String, String)]) throws -> (status: Int, body: [UInt8]) {
        let loop = try EventLoop(name: "fanout-setup")
        let conn = OneShot(loop: loop)
        var r = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n"
        for (k, v) in headers { r += "\(k): \(v)\r\n" }
        r += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        let bytes = Array(r.utf8)
        let address = self.address
        loop.execute { conn.start(address, bytes) }
        let t = PosixThread.start(name: "fanout-setup") { loop.run() }
        while !conn.done.load(ordering: .acquiring) { usleep(1000) }
        loop.stop()
        t.join()
        return (conn.status, conn.body)
    }

    final class OneShot: EventHandler, @unchecked Sendable {
        // Safety: `status` and `inbound` are written on the loop before `done` is set (release)
        // and read by the caller after it sees `done` (acquire) and joins the loop thread.
        let loop: EventLoop
        let done = Atomic<Bool>(false)
        var status = 0
        /// What followed the response's head.
        var body: [UInt8] = []
        private var fd: Int32 = -1
        private var registration: RegistrationID?
        private var request: [UInt8] = []
        private var inbound: [UInt8] = []
        private var sent = false

        init(loop: EventLoop) { self.loop = loop }

        func start(_ address: Socket.Address, _ bytes: [UInt8]) {
            request = bytes
            do {
                let (fd, _) = try Socket.connect(to: address)
                self.fd = fd
                registration = try loop.register(fd: fd, events: EventLoop.writable | EventLoop.readable, handler: self)
            } catch {
                finish()
            }
        }

        override func handleEvent(_ events: UInt32) {
            if !sent, events & EventLoop.writable != 0 {
                guard Socket.pendingError(fd) == 0 else { return finish() }
                _ = request.withUnsafeBytes { try? Socket.write(fd, $0) }
                sent = true
                if let r = registration { loop.modify(r, events: EventLoop.readable) }
            }
            guard events & (EventLoop.readable | EventLoop.hangup) != 0 else { return }
            switch try? Socket.read(fd, into: loop.readBuffer) {
            case .wouldBlock?: return
            case .processed(let n)? where n > 0: inbound.append(contentsOf: loop.readBuffer[0..<n])
            default:
                let head = String(decoding: inbound.prefix(16), as: UTF8.self)
                status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
                let end: [UInt8] = Array("\r\n\r\n".utf8)
                if let at = (0..<max(0, inbound.count - 3)).first(where: { inbound[$0..<($0 + 4)].elementsEqual(end) }) {
                    body = Array(inbound[(at + 4)...])
                }
                finish()
            }
        }

        private func finish() {
            if let r = registration { loop.deregister(r) }
            registration = nil
            if fd >= 0 { closeDescriptor(fd) }
            fd = -1
            done.store(true, ordering: .releasing)
        }
    }
}
