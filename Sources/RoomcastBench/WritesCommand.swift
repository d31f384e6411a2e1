import ArgumentParser
import HTTP1
import Reactor
import Synchronization
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// Acknowledged writes at a fixed rate (open loop) or as fast as answers come: signed
/// `POST /v1/rooms/{room}/messages` over keep-alive connections, spread over `--rooms` rooms.
/// Latency is measured from each request's scheduled time (so a stalled server is not hidden by
/// requests that were never sent: no coordinated omission) to its answer. `--record FILE` writes
/// one line per request, `scheduled_unix_ms latency_us status`, for scripts that look at a window
/// of the run (scripts/bench-backup.sh: the writes made while a backup ran).
struct WritesCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "writes",
        abstract: "Signed message writes at a fixed rate (or as fast as possible); latency from the scheduled time to the answer.")

    @Option(help: "Server port on 127.0.0.1.")
    var port: UInt16

    @Option(help: "Writes per second; 0: as fast as the connections allow (then --count writes).")
    var rate = 1000.0

    @Option(help: "Seconds to write at --rate.")
    var duration = 10.0

    @Option(help: "Writes to make when --rate is 0.")
    var count = 10_000

    @Option(help: "Keep-alive HTTP connections.")
    var connections = 8

    @Option(help: "Requests in flight per connection (pipelined).")
    var pipeline = 4

    @Option(help: "Rooms written to, round-robin (bench-0 … bench-N-1; created first, with the app's settings raised for a large history).")
    var rooms = 10

    @Option(help: "Bytes of each message's content.")
    var payloadBytes = 200

    @Option(help: "App key.")
    var appKey = "bench"

    @Option(help: "App secret.")
    var appSecret = "bench-secret-0123456789"

    @Option(help: "Write `scheduled_unix_ms latency_us status` per request to this file.")
    var record: String?

    @Flag(help: "Skip creating the rooms and raising the app's limits (already done).")
    var noPrepare = false

    @Option(help: "Stop scheduling writes once this file exists (checked every 100 ms); those in flight are still answered.")
    var stopFile: String?

    func validate() throws {
        guard rate >= 0, duration > 0, count > 0, connections > 0, pipeline > 0, rooms > 0, payloadBytes >= 1 else {
            throw ValidationError("--rate must not be negative; --duration, --count, --connections, --pipeline, --rooms and --payload-bytes must be positive")
        }
    }

    func run() throws {
        let address = Socket.Address(host: "127.0.0.1", port: port)
        if !noPrepare { try prepare(address) }
        let total = rate > 0 ? Int((rate * duration).rounded()) : count
        let loop = try EventLoop(name: "writes")
        let writer = Writer(loop: loop, address: address, rooms: rooms, payloadBytes: payloadBytes, appKey: appKey, appSecret: appSecret,
                            total: total, rate: rate, connections: connections, pipeline: pipeline)
        if let stopFile {
            loop.scheduleRepeating(every: .milliseconds(100)) { if access(stopFile, F_OK) == 0 { writer.stopScheduling() } }
        }
        let thread = PosixThread.start(name: "writes") { loop.run() }
        let started = Instant.now()
        loop.execute { writer.start() }
        while !writer.finished { usleep(5_000) }
        let elapsed = seconds(Instant.now() - started)
        loop.stop()
        thread.join()
        let h = writer.histogram
        func ms(_ us: UInt64) -> String { fixed(Double(us) / 1000, 2) }
        print("writes: acknowledged=\(writer.accepted)/\(writer.total) errors=\(writer.errors) seconds=\(fixed(elapsed, 2)) "
            + "per_s=\(Int(elapsed > 0 ? Double(writer.accepted) / elapsed : 0)) rate=\(rate > 0 ? String(Int(rate)) : "max")")
        if let e = writer.firstError { print("writes: first error: \(e)") }
        print("writes: latency_ms p50=\(ms(h.quantile(0.5))) p99=\(ms(h.quantile(0.99))) p99.9=\(ms(h.quantile(0.999))) max=\(ms(h.maximum))")
        if let record {
            guard let f = fopen(record, "w") else { throw ValidationError("cannot write \(record)") }
            for r in writer.records { fputs("\(r.scheduledUnixMs) \(r.latencyMicroseconds) \(r.status)\n", f) }
            fclose(f)
        }
        if writer.errors > 0 { throw ExitCode.failure }
    }

    /// Raises the app's limits (rate, history kept) and creates the rooms.
    private func prepare(_ address: Socket.Address) throws {
        let client = BlockingHTTP(address: address)
        func signed(_ method: String, _ path: String, _ body: String) throws -> Int {
            try client.request(method, path, body: body, headers: RoomcastSignature.headers(appKey: appKey, secret: appSecret))
        }
        let settings = try signed("PATCH", "/v1/settings", #"{"restCallsPerSecond":1000000,"sendsPerUserPerSecond":1000000,"historyLimitPerRoom":100000,"historyLimitPerApp":100000000,"historyRetentionSeconds":31536000,"maxMessageBytes":1048576,"roomMessagesPerSecond":100000}"#)
        guard settings == 200 else {
            print("writes: PATCH /v1/settings answered \(settings) (is the app \(appKey) configured?)")
            throw ExitCode.failure
        }
        for r in 0..<rooms {
            let created = try signed("POST", "/v1/rooms", #"{"roomId":"bench-\#(r)","keepAlive":true}"#)
            guard created == 201 || created == 409 else {
                print("writes: POST /v1/rooms answered \(created)")
                throw ExitCode.failure
            }
        }
    }
}

/// Sends `total` writes over keep-alive connections (answers matched in order on each), paced at
/// `rate` per second from the start (0: as fast as the pipelines allow).
final class Writer: @unchecked Sendable {
    // Safety: touched on `loop` only, except the atomics the main thread polls; `records` and
    // `histogram` are read after the loop thread has been joined.
    struct Record {
        var scheduledUnixMs: Int64
        var latencyMicroseconds: UInt64
        var status: Int
    }

    let loop: EventLoop
    let address: Socket.Address
    let rooms: Int
    let appKey: String
    let appSecret: String
    private(set) var total: Int
    let rate: Double
    let pipeline: Int
    let padding: String
    private var connections: [WriterConnection] = []
    /// Where the round-robin over the connections goes next.
    private var nextConnection = 0
    private var sent = 0
    private var answered = 0
    private var startedAt = Instant(nanoseconds: 0)
    private var startedUnixMs: Int64 = 0
    private let acceptedCount = Atomic<Int>(0)
    private let errorCount = Atomic<Int>(0)
    private let done = Atomic<Bool>(false)
    private let error = Mutex<String?>(nil)
    private(set) var histogram = LatencyHistogram()
    private(set) var records: [Record] = []

    var accepted: Int { acceptedCount.load(ordering: .relaxed) }
    var errors: Int { errorCount.load(ordering: .relaxed) }
    var finished: Bool { done.load(ordering: .relaxed) }
    var firstError: String? { error.withLock { $0 } }

    init(loop: EventLoop, address: Socket.Address, rooms: Int, payloadBytes: Int, appKey: String, appSecret: String, total: Int, rate: Double,
         connections: Int, pipeline: Int) {
        self.loop = loop
        self.address = address
        self.rooms = rooms
        self.appKey = appKey
        self.appSecret = appSecret
        self.total = total
        self.rate = rate
        self.pipeline = pipeline
        padding = String(repeating: "x", count: payloadBytes)
        records.reserveCapacity(total)
        for _ in 0..<connections { self.connections.append(WriterConnection(loop: loop)) }
    }

    func start() {
        startedAt = Instant.now()
        startedUnixMs = wallClockMilliseconds()
        for c in connections {
            c.writer = self
            c.open(address)
        }
        pump()
        if rate > 0 { loop.scheduleRepeating(every: .milliseconds(1)) { [self] in pump() } }
    }

    /// The time write `i` is due, from the start.
    private func scheduled(_ i: Int) -> Duration {
        rate > 0 ? .nanoseconds(Int64(Double(i) / rate * 1e9)) : .zero
    }

    func pump() {
        let due = rate > 0 ? min(total, Int(seconds(Instant.now() - startedAt) * rate) + 1) : total
        while sent < due {
            // Round-robin over the connections with room in their pipeline (the server closes a
            // connection after --max-requests-per-connection, so the load is spread).
            var chosen: WriterConnection?
            for k in 0..<connections.count {
                let c = connections[(nextConnection + k) % connections.count]
                if c.isOpen && c.inFlight < pipeline {
                    chosen = c
                    nextConnection = (nextConnection + k + 1) % connections.count
                    break
                }
            }
            guard let c = chosen else { return }
            // Open loop: latency counts from when the write was due, not from when a connection
            // had room for it.
            let due = rate > 0 ? startedAt + scheduled(sent) : Instant.now()
            c.send(request(sent), scheduled: due)
            sent += 1
        }
    }

    private func request(_ i: Int) -> [UInt8] {
        let body = #"{"content":"w\#(i) \#(padding)","fromUserId":"writer"}"#
        var r = "POST /v1/rooms/bench-\(i % rooms)/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        for (k, v) in RoomcastSignature.headers(appKey: appKey, secret: appSecret) { r += "\(k): \(v)\r\n" }
        r += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
        return Array(r.utf8)
    }

    func answered(status: Int, detail: String, scheduled: Instant) {
        answered += 1
        let now = Instant.now()
        let latency = UInt64(max(0, seconds(now - scheduled)) * 1e6)
        histogram.record(microseconds: latency)
        let offset = seconds(scheduled - startedAt)
        records.append(Record(scheduledUnixMs: startedUnixMs + Int64(offset * 1000), latencyMicroseconds: latency, status: status))
        if (200..<300).contains(status) {
            acceptedCount.add(1, ordering: .relaxed)
        } else {
            errorCount.add(1, ordering: .relaxed)
            error.withLock { if $0 == nil { $0 = "HTTP \(status): \(detail)" } }
        }
        if answered >= total { done.store(true, ordering: .relaxed) } else { pump() }
    }

    /// No more writes are scheduled; the run ends when those sent are answered.
    func stopScheduling() {
        guard total > sent else { return }
        total = sent
        if answered >= total { done.store(true, ordering: .relaxed) }
    }

    func connectionFailed(_ reason: String) {
        error.withLock { if $0 == nil { $0 = reason } }
        errorCount.add(1, ordering: .relaxed)
        if connections.allSatisfy({ !$0.isOpen }) { done.store(true, ordering: .relaxed) }
    }
}

/// One keep-alive HTTP/1.1 connection with pipelined requests; answers are matched in order.
final class WriterConnection: EventHandler {
    let loop: EventLoop
    weak var writer: Writer?
    private var fd: Int32 = -1
    private var registration: RegistrationID?
    private var output = OutboundQueue()
    private var inbound: [UInt8] = []
    /// Writes sent and not yet answered, in order: when they were due, and their bytes (sent again
    /// on a new connection if the server closes this one after an earlier answer).
    private var pending: [(scheduled: Instant, bytes: [UInt8])] = []
    private var pendingHead = 0
    /// The server answered `Connection: close`: nothing more is sent on this connection.
    private var closing = false
    var inFlight: Int { pending.count - pendingHead }
    private var openState = false
    var isOpen: Bool { openState && !closing }
    private var connected = false

    init(loop: EventLoop) {
        self.loop = loop
    }

    private var address: Socket.Address?

    func open(_ address: Socket.Address) {
        self.address = address
        do {
            let (fd, done) = try Socket.connect(to: address)
            self.fd = fd
            Socket.setNoDelay(fd)
            registration = try loop.register(fd: fd, events: EventLoop.readable | EventLoop.writable, handler: self)
            connected = done
            openState = true
            closing = false
        } catch {
            writer?.connectionFailed("connect: \(error)")
        }
    }

    func send(_ bytes: [UInt8], scheduled: Instant) {
        pending.append((scheduled, bytes))
        output.append(ByteBlock.from(bytes))
        if connected { flush() }
    }

    private func flush() {
        guard let r = registration else { return }
        do {
            let state = try output.flush(fd: fd, iovecs: loop.iovecs)
            loop.modify(r, events: state == .drained ? EventLoop.readable : EventLoop.readable | EventLoop.writable)
        } catch {
            fail("write: \(error)")
        }
    }

    override func handleEvent(_ events: UInt32) {
        if !connected {
            let err = Socket.pendingError(fd)
            guard err == 0 else { return fail("connect: errno \(err)") }
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
            // Closed after `Connection: close` (the server's requests-per-connection limit): the
            // writes sent after that answer were not read; open another connection and send them
            // again. Closed otherwise with writes unanswered: fail.
            if (closing || inFlight == 0), let address {
                let unanswered = Array(pending[pendingHead...])
                close()
                open(address)
                for p in unanswered { send(p.bytes, scheduled: p.scheduled) }
            } else {
                fail("the server closed the connection with \(inFlight) writes unanswered")
            }
        }
    }

    private func close() {
        openState = false
        if let r = registration { loop.deregister(r) }
        registration = nil
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
        inbound.removeAll()
        output = OutboundQueue()
        connected = false
        pending.removeAll()
        pendingHead = 0
    }

    private func parseAnswers() {
        while let end = headerSectionEnd(inbound) {
            let head = String(decoding: inbound[0..<end], as: UTF8.self)
            let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
            var length = 0
            var close = false
            for line in head.split(separator: "\r\n") {
                let lower = line.lowercased()
                if lower.hasPrefix("content-length:") { length = Int(String(lower.dropFirst(15).filter { $0 != " " && $0 != "\t" })) ?? 0 }
                if lower.hasPrefix("connection:") && lower.contains("close") { close = true }
            }
            guard inbound.count >= end + 4 + length else { return }
            let body = String(decoding: inbound[(end + 4)..<(end + 4 + length)], as: UTF8.self)
            inbound.removeFirst(end + 4 + length)
            if close { closing = true }
            let scheduled = pending[pendingHead].scheduled
            pendingHead += 1
            if pendingHead > 1024 {
                pending.removeFirst(pendingHead)
                pendingHead = 0
            }
            writer?.answered(status: status, detail: String(body.prefix(200)), scheduled: scheduled)
        }
    }

    private func fail(_ reason: String) {
        guard openState else { return }
        openState = false
        if let r = registration { loop.deregister(r) }
        registration = nil
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
        writer?.connectionFailed(reason)
    }
}
