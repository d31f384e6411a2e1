import HTTP1
import Reactor
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// What one phase of open-loop publishing did, as its answers said.
struct PublishPhaseResult: Sendable {
    var offered = 0
    var sent = 0
    /// Answered 2xx: published.
    var accepted = 0
    var acceptedHigh = 0
    /// 429 with code 42902 for the fan-out latency budget ("fan-out is … behind"), by class.
    var refusedLatency = 0
    var refusedLatencyHigh = 0
    /// 429 with code 42902 for the room's message budget.
    var refusedBudget = 0
    var refusedBudgetHigh = 0
    /// Any other 429.
    var refusedOther = 0
    /// Any other answer (or a failed connection's sends).
    var errors = 0
    /// Sent and never answered (their connection closed): their fate is unknown.
    var unanswered = 0
    /// Sent and still unanswered when the phase was cut off (`freeze()`): the server is that far
    /// behind; their fate is unknown (they are not counted as published).
    var pendingAtCutoff = 0
    /// Not yet sent when the phase was cut off.
    var unsentAtCutoff = 0
    /// Sends that left more than 10 ms after they were due (every pipeline was full): the load
    /// generator, not the server, fell behind the offered rate.
    var lateSends = 0
    var maxSendLagMicroseconds: UInt64 = 0
    /// Due time → answer, over every answer.
    var answerHistogram = LatencyHistogram()
    var firstError: String?
    var finished = false
}

/// Open-loop publishing: message `i` of a phase is due at `start + i / rate` and is sent then,
/// whatever the answers to earlier ones (up to `pipeline` requests in flight on each of the
/// connections); its content carries its due time, so latency is measured from when it was due,
/// not from when a slowed-down publisher got round to it. Every `highEvery`-th message (`seq %
/// highEvery == 0`) is high priority (`"priority":"high"` for roomcast; nchan has no classes and
/// gets the same body). Content: `<due ns> <seq> <phase><h|n>`.
final class OpenLoopPublisher: PublisherConnectionOwner, @unchecked Sendable {
    // Safety: everything is touched on `loop` only; other threads read results through
    // `onLoop` (a task on the loop that copies them out).
    let loop: EventLoop
    let addresses: [Socket.Address]
    let target: FanoutCommand.Target
    let room: String
    let appKey: String
    let appSecret: String
    let pipeline: Int
    let connectionCount: Int
    private var connections: [PublisherConnection] = []
    private var phase = 0
    private var total = 0
    private var rate = 1.0
    private var highEvery = 10
    private var startedAt = Instant(nanoseconds: 0)
    private var sent = 0
    private var settled = 0
    private var active = false
    /// Cut off: answers that come later are not counted (the per-client check uses what was known then).
    private var frozen = false
    private var answeredSeqs: [Bool] = []
    private var result = PublishPhaseResult()
    /// The phase's seqs that were published (answered 2xx), and those whose answer never came.
    private(set) var acceptedSeqs: [Bool] = []
    private(set) var unansweredSeqs: [Bool] = []

    init(loop: EventLoop, addresses: [Socket.Address], target: FanoutCommand.Target, room: String, appKey: String, appSecret: String,
         connections: Int, pipeline: Int) {
        self.loop = loop
        self.addresses = addresses
        self.target = target
        self.room = room
        self.appKey = appKey
        self.appSecret = appSecret
        self.pipeline = pipeline
        self.connectionCount = connections
    }

    /// On the loop: opens the connections and starts the pacing timer (once).
    func open() {
        for i in 0..<connectionCount {
            let c = PublisherConnection(loop: loop, publisher: self)
            connections.append(c)
            c.open(addresses[i % addresses.count])
        }
        loop.scheduleRepeating(every: .milliseconds(1)) { [self] in pump() }
    }

    /// On the loop: starts a phase of `total` messages at `rate` per second.
    func start(phase: Int, total: Int, rate: Double, highEvery: Int) {
        self.phase = phase
        self.total = total
        self.rate = rate
        self.highEvery = max(1, highEvery)
        sent = 0
        settled = 0
        result = PublishPhaseResult()
        result.offered = total
        acceptedSeqs = [Bool](repeating: false, count: total)
        unansweredSeqs = [Bool](repeating: false, count: total)
        answeredSeqs = [Bool](repeating: false, count: total)
        frozen = false
        startedAt = Instant.now()
        active = total > 0
        if !active { result.finished = true }
        pump()
    }

    /// On the loop: the phase's results so far.
    var snapshot: PublishPhaseResult { result }

    /// On the loop: cuts the phase off. What was sent and not answered is pending (its seqs join
    /// `unansweredSeqs`), what was not sent never will be; later answers are ignored, so
    /// `acceptedSeqs` and `result.accepted` stay what they were now.
    func freeze() {
        guard !frozen else { return }
        frozen = true
        guard active else { return }
        for seq in 0..<min(sent, total) where !answeredSeqs[seq] && !unansweredSeqs[seq] {
            unansweredSeqs[seq] = true
            result.pendingAtCutoff += 1
        }
        result.unsentAtCutoff = total - sent
        active = false
        result.finished = true
    }

    private func due(_ seq: Int) -> Instant { startedAt + .nanoseconds(Int64(Double(seq) / rate * 1e9)) }

    /// Sends every message that is due, as far as the pipelines allow.
    private func pump() {
        guard active else { return }
        let now = Instant.now()
        let dueCount = min(total, Int(seconds(now - startedAt) * rate) + 1)
        while sent < dueCount {
            guard let c = connections.filter({ $0.isOpen && $0.inFlight < pipeline }).min(by: { $0.inFlight < $1.inFlight }) else {
                if connections.allSatisfy({ !$0.isOpen }) { giveUp() }
                return
            }
            let at = due(sent)
            let lag = now.nanoseconds > at.nanoseconds ? (now.nanoseconds - at.nanoseconds) / 1000 : 0
            if lag > 10_000 { result.lateSends += 1 }
            result.maxSendLagMicroseconds = max(result.maxSendLagMicroseconds, lag)
            c.send(request(seq: sent, dueAt: at), tag: phase << 32 | sent)
            sent += 1
            result.sent = sent
        }
    }

    /// Every connection is closed: what was not sent never will be.
    private func giveUp() {
        result.errors += total - sent
        settled += total - sent
        sent = total
        finishIfSettled()
    }

    private func request(seq: Int, dueAt: Instant) -> [UInt8] {
        let high = seq % highEvery == 0
        let content = "\(dueAt.nanoseconds) \(seq) \(phase)\(high ? "h" : "n")"
        switch target {
        case .nchan:
            return Array("POST /pub?id=\(room) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: \(content.utf8.count)\r\n\r\n\(content)".utf8)
        case .roomcast:
            let body = high ? #"{"content":"\#(content)","fromUserId":"publisher","priority":"high"}"#
                : #"{"content":"\#(content)","fromUserId":"publisher"}"#
            var r = "POST /v1/rooms/\(room)/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            for (k, v) in RoomcastSignature.headers(appKey: appKey, secret: appSecret) { r += "\(k): \(v)\r\n" }
            r += "Content-Length: \(body.utf8.count)\r\n\r\n" + body
            return Array(r.utf8)
        }
    }

    func answered(_ connection: PublisherConnection, status: Int, detail: String, tag: Int) {
        // A tag is phase << 32 | seq: an answer to an earlier phase's request (cut off) is ignored.
        let seq = tag & 0xFFFF_FFFF
        guard tag >> 32 == phase, seq < total, !frozen else { return }
        answeredSeqs[seq] = true
        let high = seq % highEvery == 0
        let now = Instant.now()
        let at = due(seq)
        result.answerHistogram.record(microseconds: now.nanoseconds > at.nanoseconds ? (now.nanoseconds - at.nanoseconds) / 1000 : 0)
        if (200..<300).contains(status) {
            result.accepted += 1
            if high { result.acceptedHigh += 1 }
            acceptedSeqs[seq] = true
        } else if status == 429 && detail.contains("42902") && detail.contains("fan-out") {
            result.refusedLatency += 1
            if high { result.refusedLatencyHigh += 1 }
        } else if status == 429 && detail.contains("42902") {
            result.refusedBudget += 1
            if high { result.refusedBudgetHigh += 1 }
        } else if status == 429 {
            result.refusedOther += 1
            if result.firstError == nil { result.firstError = "HTTP 429: \(detail)" }
        } else {
            result.errors += 1
            if result.firstError == nil { result.firstError = "HTTP \(status): \(detail)" }
        }
        settled += 1
        finishIfSettled()
    }

    func connectionFailed(_ connection: PublisherConnection, _ reason: String) {
        guard !frozen else { return }
        if result.firstError == nil { result.firstError = reason }
        for tag in connection.unansweredTags where tag >> 32 == phase && active {
            let seq = tag & 0xFFFF_FFFF
            guard seq < total, !answeredSeqs[seq], !unansweredSeqs[seq] else { continue }
            unansweredSeqs[seq] = true
            result.unanswered += 1
            settled += 1
        }
        if connections.allSatisfy({ !$0.isOpen }) { giveUp() }
        finishIfSettled()
    }

    private func finishIfSettled() {
        if active && sent >= total && settled >= total {
            active = false
            result.finished = true
        }
    }
}

/// Runs `body` on `loop` and waits for its value (polling: for the benchmark's main thread).
func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) -> T {
    let box = LoopResult<T>()
    loop.execute {
        let v = body()
        box.value.withLock { $0 = v }
    }
    while true {
        if let v = box.value.withLock({ $0 }) { return v }
        usleep(1_000)
    }
}

/// Where `onLoop` leaves the loop's answer.
final class LoopResult<T: Sendable>: Sendable {
    let value = Mutex<T?>(nil)
}
