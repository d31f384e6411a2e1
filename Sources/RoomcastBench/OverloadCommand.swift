import ArgumentParser
import Reactor
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Issue 27's overload benchmark: one room of healthy subscribers plus slow readers, open-loop
/// publishing past the capacity measured in the same run, a share of it high priority; then, for
/// every subscriber, whether what it received plus what `room.gap` told it it lost is what was
/// published.
///
/// 1. Warm-up: 10 messages at 10/s; every subscriber must get them (and the wire bytes per
///    delivery are measured, for the slow readers' rate).
/// 2. Capacity (unless `--rate` is given, or with `--search`): steps of `--step-seconds` at an
///    open-loop rate; a step passes when every publish is accepted (2xx), every subscriber gets
///    every message within the step and `--drain-step` seconds after it, no `room.gap` comes, and
///    publish→receive p99 (from each message's due time) is at most `--capacity-p99-ms`. The rate
///    doubles from `--search-start` while steps pass (halves while the first fails), then
///    `--bisect` bisections between the last pass and the first failure; the capacity is the
///    highest rate that passed. All subscribers read at full speed here.
/// 3. Overload: `--rate`, or `--overload-factor` × the capacity, for `--duration` seconds,
///    open-loop, every `1/--high-fraction`-th message high priority. The slow readers read
///    `--slow-fraction` of the bytes a subscriber is sent at that rate (wire bytes per delivery ×
///    rate), in 50 ms slices, with SO_RCVBUF `--slow-receive-buffer`; after the last answer they
///    read at full speed again, and every subscriber is waited for (up to `--drain` seconds) until
///    it has received or been told of every published message.
///
/// "Published" is what was answered 2xx; a 429 (42902) is a refusal, not a publish. The per-client
/// check: received (distinct, published) + counted in gaps == published, no duplicates, offsets
/// and gap ranges in stream order, and the connection still open.
struct OverloadCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "overload",
        abstract: "Overload: healthy and slow subscribers in one room, open-loop publishing past the measured capacity; per-client accounting.")

    @Option(help: "roomcast or nchan.")
    var target: FanoutCommand.Target = .roomcast

    @Option(help: "Server port on 127.0.0.1.")
    var port: UInt16

    @Option(help: "Healthy subscribers (read as fast as data comes).")
    var subscribers = 10_000

    @Option(help: "Slow readers, spread evenly among the subscribers.")
    var slowReaders = 500

    @Option(help: "A slow reader reads this fraction of the bytes a subscriber is sent at the offered rate.")
    var slowFraction = 0.1

    @Option(help: "SO_RCVBUF of a slow reader's socket (the kernel doubles it; 0: the kernel's default, autotuned).")
    var slowReceiveBuffer: Int32 = 131_072

    @Option(help: "Event loops (threads) for the subscribers.")
    var clientLoops = 2

    @Option(help: "Offered publishes per second in the overload phase; 0: --overload-factor x the capacity measured first.")
    var rate = 0.0

    @Option(help: "The overload phase offers this many times the measured capacity (when --rate is 0).")
    var overloadFactor = 2.0

    @Option(help: "Seconds of the overload phase.")
    var duration = 30.0

    @Option(help: "Share of the messages sent high priority (every round(1/x)-th).")
    var highFraction = 0.1

    @Flag(help: "Measure the capacity even when --rate is given (reported, not used).")
    var search = false

    @Option(help: "A capacity step passes only with publish->receive p99 at most this (ms).")
    var capacityP99Ms = 100.0

    @Option(help: "Seconds of each capacity step.")
    var stepSeconds = 3.0

    @Option(help: "Seconds a capacity step waits for its last deliveries.")
    var drainStep = 2.0

    @Option(help: "First rate of the capacity search (publishes/s).")
    var searchStart = 16.0

    @Option(help: "Bisections after the doubling.")
    var bisect = 3

    @Option(help: "Publisher HTTP connections (keep-alive).")
    var publishers = 16

    @Option(help: "Requests in flight per publisher connection (pipelined); past it a due message waits and counts as late.")
    var pipeline = 256

    @Option(help: "Seconds to wait, after the overload phase's last answer, for every subscriber to have everything.")
    var drain = 20.0

    @Option(help: "Room (roomcast) or channel (nchan) id.")
    var room = "overload"

    @Option(help: "App key (roomcast).")
    var appKey = "bench"

    @Option(help: "App secret (roomcast).")
    var appSecret = "bench-secret-0123456789"

    @Option(help: "roomcast: the app's room message budget (roomMessagesPerSecond) to set; high, so that the latency budget and the per-connection drops are what is measured.")
    var roomMessagesPerSecond = 100_000

    @Option(help: "Connection attempts in flight at once.")
    var concurrency = 256

    @Option(help: "Server process ids, comma-separated: their RSS (VmRSS) is sampled every 100 ms and their CPU time read per phase.")
    var serverPids: String?

    func validate() throws {
        guard subscribers > 0, slowReaders >= 0, clientLoops > 0, publishers > 0, pipeline > 0 else {
            throw ValidationError("--subscribers, --client-loops, --publishers and --pipeline must be positive")
        }
        guard duration > 0, rate >= 0, overloadFactor > 0, highFraction > 0, highFraction <= 1, slowFraction > 0 else {
            throw ValidationError("--duration, --overload-factor, --high-fraction and --slow-fraction must be positive (--high-fraction at most 1)")
        }
    }

    func run() throws {
        let total = subscribers + slowReaders
        let limit = raiseDescriptorLimit()
        guard limit >= total + publishers + 64 else {
            print("overload: the descriptor limit is \(limit): \(total) subscribers need more (ulimit -n)")
            throw ExitCode.failure
        }
        let address = Socket.Address(host: "127.0.0.1", port: port)
        let pids = (serverPids ?? "").split(separator: ",").compactMap { Int32(String($0)) }
        let sampler = ServerSampler(pids: pids)
        let sampleThread = PosixThread.start(name: "overload-rss") { sampler.run() }
        defer {
            sampler.stop()
            sampleThread.join()
        }
        let rssBeforeConnects = sampler.current
        print("overload: target=\(target.rawValue) subscribers=\(subscribers) slow_readers=\(slowReaders) loadavg=\(loadAverage())")
        if target == .roomcast { try prepareRoomcast(address) }

        // Subscribers, spread over the client loops; slow reader k is subscriber k*total/slow.
        let slow = slowReaders
        let isSlow: (Int) -> Bool = { id in slow > 0 && (id * slow) / total != ((id + 1) * slow) / total }
        var loops: [EventLoop] = []
        var runners: [OverloadRunner] = []
        var threads: [PosixThread] = []
        let setupStart = Instant.now()
        var first = 0
        for i in 0..<clientLoops {
            let loop = try EventLoop(name: "overload-sub-\(i)")
            let share = total / clientLoops + (i < total % clientLoops ? 1 : 0)
            let runner = OverloadRunner(loop: loop, address: address, target: target, first: first, count: share,
                                        concurrency: max(1, concurrency / clientLoops), room: room, appKey: appKey, appSecret: appSecret,
                                        slowReceiveBuffer: slowReceiveBuffer, isSlow: isSlow)
            first += share
            loops.append(loop)
            runners.append(runner)
            loop.execute { runner.start() }
            threads.append(PosixThread.start(name: "overload-sub-\(i)") { loop.run() })
        }
        let setupDeadline = Instant.now() + .seconds(120)
        while runners.reduce(0, { $0 + $1.settled }) < total && Instant.now() < setupDeadline { usleep(10_000) }
        let ready = runners.reduce(0) { $0 + $1.readyCount }
        print("overload: subscribers ready=\(ready)/\(total) in \(fixed(seconds(Instant.now() - setupStart), 2)) s")
        if let f = runners.compactMap(\.firstFailure).first { print("overload: first subscriber failure: \(f)") }
        fflush(nil)
        guard ready == total else {
            for l in loops { l.stop() }
            for t in threads { t.join() }
            print("overload: not every subscriber is ready; stopping")
            throw ExitCode.failure
        }
        usleep(500_000)

        let pubLoop = try EventLoop(name: "overload-pub")
        let publisher = OpenLoopPublisher(loop: pubLoop, addresses: [address], target: target, room: room, appKey: appKey,
                                          appSecret: appSecret, connections: publishers, pipeline: pipeline)
        let pubThread = PosixThread.start(name: "overload-pub") { pubLoop.run() }
        pubLoop.execute { publisher.open() }
        let highEvery = max(1, Int((1 / highFraction).rounded()))
        usleep(200_000)

        var phase = 0
        /// Runs one phase and waits for its answers and deliveries; returns what it did.
        func step(rate r: Double, seconds s: Double, drainSeconds: Double) -> StepResult {
            let n = max(1, Int((r * s).rounded()))
            let p = phase
            phase += 1
            for runner in runners { onLoop(runner.loop) { runner.setPhase(p) } }
            onLoop(pubLoop) { publisher.start(phase: p, total: n, rate: r, highEvery: highEvery) }
            let answerDeadline = Instant.now() + .milliseconds(Int64((s + 30) * 1000))
            var pub = onLoop(pubLoop) { publisher.snapshot }
            while !pub.finished && Instant.now() < answerDeadline {
                usleep(20_000)
                pub = onLoop(pubLoop) { publisher.snapshot }
            }
            pub = onLoop(pubLoop) {
                publisher.freeze()
                return publisher.snapshot
            }
            let live = total - closedCount(runners)
            let expected = UInt64(pub.accepted) * UInt64(live)
            var stats = PhaseStats()
            let deadline = Instant.now() + .milliseconds(Int64(drainSeconds * 1000))
            repeat {
                usleep(50_000)
                stats = PhaseStats()
                for runner in runners {
                    let st = onLoop(runner.loop) { runner.stats(phase: p) }
                    stats.delivered += st.delivered
                    stats.wireBytes += st.wireBytes
                    stats.gapEvents += st.gapEvents
                    stats.histogram.merge(st.histogram)
                }
            } while stats.delivered < expected && Instant.now() < deadline
            return StepResult(rate: r, publish: pub, stats: stats, expected: expected)
        }

        // 1. Warm-up.
        let warm = step(rate: 10, seconds: 1, drainSeconds: 5)
        let wirePerDelivery = warm.stats.delivered > 0 ? Double(warm.stats.wireBytes) / Double(warm.stats.delivered) : 0
        print("overload: warmup published=\(warm.publish.accepted)/\(warm.publish.offered) delivered=\(warm.stats.delivered)/\(warm.expected) "
            + "wire_bytes_per_delivery=\(Int(wirePerDelivery)) p99_ms=\(ms(warm.stats.histogram.quantile(0.99)))")
        fflush(nil)
        guard warm.stats.delivered == warm.expected, warm.expected > 0 else {
            print("overload: the warm-up did not reach every subscriber; stopping")
            stopAll(loops, threads, pubLoop, pubThread)
            throw ExitCode.failure
        }

        // 2. Capacity.
        var capacity = 0.0
        if rate == 0 || search {
            func passes(_ r: Double) -> Bool {
                let res = step(rate: r, seconds: stepSeconds, drainSeconds: drainStep)
                let p99 = Double(res.stats.histogram.quantile(0.99)) / 1000
                // Late sends (the load generator's publisher starved of CPU) are reported, not
                // judged: latency counts from each message's due time, so they show there.
                let ok = res.publish.accepted == res.publish.offered && res.stats.delivered == res.expected && res.stats.gapEvents == 0
                    && p99 <= capacityP99Ms
                print("overload: capacity_step rate=\(fixed(r, 1)) published=\(res.publish.accepted)/\(res.publish.offered) "
                    + "refused_latency=\(res.publish.refusedLatency) refused_budget=\(res.publish.refusedBudget) errors=\(res.publish.errors) "
                    + "delivered=\(res.stats.delivered)/\(res.expected) gaps=\(res.stats.gapEvents) late_sends=\(res.publish.lateSends) "
                    + "p50_ms=\(ms(res.stats.histogram.quantile(0.5))) p99_ms=\(fixed(p99, 2)) max_ms=\(ms(res.stats.histogram.maximum)) "
                    + "\(ok ? "pass" : "fail") loadavg=\(loadAverage())")
                fflush(nil)
                // Let a failed step's backlog clear before the next one.
                usleep(ok ? 500_000 : 1_500_000)
                return ok
            }
            var r = searchStart
            var lo = 0.0, hi = 0.0
            if passes(r) {
                lo = r
                while hi == 0 {
                    r *= 2
                    if passes(r) { lo = r } else { hi = r }
                    if r > 100_000 { break }
                }
            } else {
                hi = r
                while lo == 0 && r > 1 {
                    r /= 2
                    if passes(r) { lo = r } else { hi = r }
                }
            }
            if lo > 0 && hi > 0 {
                for _ in 0..<bisect {
                    let mid = ((lo + hi) / 2).rounded()
                    if mid <= lo || mid >= hi { break }
                    if passes(mid) { lo = mid } else { hi = mid }
                }
            }
            capacity = lo
            print("overload: capacity=\(fixed(capacity, 1)) first_failing=\(fixed(hi, 1)) p99_bound_ms=\(fixed(capacityP99Ms, 0))")
            fflush(nil)
        }
        let offered = rate > 0 ? rate : overloadFactor * capacity
        guard offered > 0 else {
            print("overload: no capacity measured (no step passed); stopping")
            stopAll(loops, threads, pubLoop, pubThread)
            throw ExitCode.failure
        }

        // 3. Overload.
        let count = max(1, Int((offered * duration).rounded()))
        let slowBytesPerSecond = slowFraction * offered * wirePerDelivery
        let closedBefore = closedCount(runners)
        for runner in runners { onLoop(runner.loop) { runner.beginOverload(total: count) } }
        for runner in runners { onLoop(runner.loop) { runner.pace(bytesPerSecond: slowBytesPerSecond) } }
        usleep(200_000)
        // The server's own share of the latency (QS-7), when it exports it: read before and after.
        let metricsClient = BlockingHTTP(address: address)
        func serverDelay() -> (fanout: HistogramScrape, requests: HistogramScrape)? {
            guard target == .roomcast, let r = try? metricsClient.exchange("GET", "/metrics", body: "", headers: []), r.status == 200 else { return nil }
            let text = String(decoding: r.body, as: UTF8.self)
            return (HistogramScrape(text, name: "roomcast_fanout_delay_seconds"), HistogramScrape(text, name: "roomcast_http_request_duration_seconds"))
        }
        let delayAtStart = serverDelay()
        let rssAtStart = sampler.current
        let pssAtStart = sampler.currentPSS
        sampler.resetPeak()
        let cpuStart = FanoutCommand.cpuSeconds(pids)
        let loadStart = loadAverage()
        let start = Instant.now()
        let p = OverloadRunner.overloadPhase
        for runner in runners { onLoop(runner.loop) { runner.setPhase(p) } }
        onLoop(pubLoop) { publisher.start(phase: p, total: count, rate: offered, highEvery: highEvery) }
        print("overload: overload_phase rate=\(fixed(offered, 1)) messages=\(count) high_every=\(highEvery) "
            + "slow_read_bytes_per_s=\(Int(slowBytesPerSecond)) closed_before=\(closedBefore) loadavg=\(loadStart)")
        fflush(nil)
        let answerDeadline = start + .milliseconds(Int64((duration + 30) * 1000))
        var pub = onLoop(pubLoop) { publisher.snapshot }
        while !pub.finished && Instant.now() < answerDeadline {
            usleep(50_000)
            pub = onLoop(pubLoop) { publisher.snapshot }
        }
        // Cut off here (the answers' deadline): what is still unanswered is pending, not published,
        // and answers that come during the drain change nothing in the per-client check.
        pub = onLoop(pubLoop) {
            publisher.freeze()
            return publisher.snapshot
        }
        let publishEnd = Instant.now()
        let loadEnd = loadAverage()
        // Slow readers read at full speed again; wait until every subscriber has everything.
        for runner in runners { onLoop(runner.loop) { runner.pace(bytesPerSecond: 0) } }
        let published = pub.accepted
        let drainDeadline = Instant.now() + .milliseconds(Int64(drain * 1000))
        var settledSubs = 0
        repeat {
            usleep(200_000)
            settledSubs = runners.reduce(0) { n, runner in n + onLoop(runner.loop) { runner.settledCount(published: published) } }
        } while settledSubs < total && Instant.now() < drainDeadline
        let drainSeconds = seconds(Instant.now() - publishEnd)
        let cpu = FanoutCommand.cpuSeconds(pids) - cpuStart
        let delayAtEnd = serverDelay()
        let rssPeak = sampler.peak
        let pssPeak = sampler.peakPSS
        let sockPeak = sampler.socketPeakPages
        let accepted = onLoop(pubLoop) { publisher.acceptedSeqs }
        let unanswered = onLoop(pubLoop) { publisher.unansweredSeqs }
        stopAll(loops, threads, pubLoop, pubThread)

        // Per client: received + counted in gaps == published.
        var report = OverloadReport()
        report.offered = count
        report.rate = offered
        report.capacity = capacity
        report.publish = pub
        var highLostByMessage = [Bool](repeating: false, count: count)
        var histograms = OverloadHistograms()
        for runner in runners {
            histograms.merge(runner.overload)
            for r in runner.records {
                report.add(r, accepted: accepted, published: published, unanswered: unanswered, highEvery: highEvery, highLost: &highLostByMessage)
            }
        }
        report.highMessagesLost = highLostByMessage.filter { $0 }.count

        func line(_ name: String, _ h: LatencyHistogram) -> String {
            "\(name)_count=\(h.total) \(name)_p50_ms=\(ms(h.quantile(0.5))) \(name)_p99_ms=\(ms(h.quantile(0.99))) \(name)_max_ms=\(ms(h.maximum))"
        }
        print("overload: published=\(pub.accepted)/\(count) published_high=\(pub.acceptedHigh) refused_latency=\(pub.refusedLatency) "
            + "refused_latency_high=\(pub.refusedLatencyHigh) refused_budget=\(pub.refusedBudget) refused_budget_high=\(pub.refusedBudgetHigh) "
            + "refused_other=\(pub.refusedOther) errors=\(pub.errors) unanswered=\(pub.unanswered) pending_at_cutoff=\(pub.pendingAtCutoff) "
            + "unsent_at_cutoff=\(pub.unsentAtCutoff) late_sends=\(pub.lateSends) "
            + "max_send_lag_ms=\(ms(pub.maxSendLagMicroseconds)) answer_p99_ms=\(ms(pub.answerHistogram.quantile(0.99))) "
            + "publish_seconds=\(fixed(seconds(publishEnd - start), 2))")
        if let e = pub.firstError { print("overload: first publish error: \(e)") }
        print("overload: " + line("healthy_high", histograms.healthyHigh) + " " + line("healthy_normal", histograms.healthyNormal))
        print("overload: " + line("slow_high", histograms.slowHigh) + " " + line("slow_normal", histograms.slowNormal))
        print("overload: " + report.summary)
        if let before = delayAtStart, let after = delayAtEnd {
            // Bucket bounds: "≤ this"; the histogram's resolution is its buckets.
            var parts = ["high", "normal", "low", "system"].map { lane -> String in
                let q = after.fanout.quantile(0.99, of: lane, since: before.fanout)
                return "server_fanout_\(lane)_count=\(after.fanout.count(lane) - before.fanout.count(lane)) server_fanout_\(lane)_p99_le_ms=\(q.map { fixed($0 * 1000, 1) } ?? "-")"
            }
            // The publishes (and the one /metrics read) as the server timed them.
            let q = after.requests.quantile(0.99, of: "", since: before.requests)
            parts.append("server_requests_count=\(after.requests.count("") - before.requests.count("")) server_requests_p99_le_ms=\(q.map { fixed($0 * 1000, 1) } ?? "-")")
            print("overload: " + parts.joined(separator: " "))
        }
        for (reason, n) in report.closeReasons.sorted(by: { $0.value > $1.value }).prefix(6) { print("overload: closed \(n)x: \(reason)") }
        print("overload: drain_seconds=\(fixed(drainSeconds, 2)) settled=\(settledSubs)/\(total) server_cpu_s=\(fixed(cpu, 2)) "
            + "load_generator_cpu_s=\(fixed(FanoutCommand.cpuSeconds([getpid()]), 2)) loadavg_end=\(loadEnd)")
        print("overload: rss_before_connects_mib=\(mib(rssBeforeConnects)) rss_at_overload_start_mib=\(mib(rssAtStart)) "
            + "rss_peak_mib=\(mib(rssPeak)) rss_growth_mib=\(mib(max(0, rssPeak - rssAtStart))) "
            + "pss_at_overload_start_mib=\(mib(pssAtStart)) pss_peak_mib=\(mib(pssPeak)) pss_growth_mib=\(mib(max(0, pssPeak - pssAtStart))) "
            + "kernel_tcp_mem_peak_mib=\(mib(sockPeak * Int(sysconf(Int32(_SC_PAGESIZE)))))")
        fflush(nil)
    }

    struct StepResult {
        var rate: Double
        var publish: PublishPhaseResult
        var stats: PhaseStats
        var expected: UInt64
    }

    private func closedCount(_ runners: [OverloadRunner]) -> Int {
        runners.reduce(0) { n, runner in n + onLoop(runner.loop) { runner.records.filter { $0.closeReason != nil }.count } }
    }

    private func stopAll(_ loops: [EventLoop], _ threads: [PosixThread], _ pubLoop: EventLoop, _ pubThread: PosixThread) {
        for l in loops { l.stop() }
        for t in threads { t.join() }
        pubLoop.stop()
        pubThread.join()
    }

    private func ms(_ us: UInt64) -> String { fixed(Double(us) / 1000, 2) }
    private func mib(_ bytes: Int) -> String { fixed(Double(bytes) / 1_048_576, 1) }

    /// The app's settings: no per-join traffic, the senders' limits out of the way, and the room's
    /// budget at `--room-messages-per-second`; then the room.
    private func prepareRoomcast(_ address: Socket.Address) throws {
        let client = BlockingHTTP(address: address)
        func signed(_ method: String, _ path: String, _ body: String) throws -> Int {
            try client.request(method, path, body: body, headers: RoomcastSignature.headers(appKey: appKey, secret: appSecret))
        }
        let settings = try signed("PATCH", "/v1/settings", #"{"memberChangeEvents":false,"enterExitNotifications":false,"multipleRoomsPerUser":true,"restCallsPerSecond":1000000,"clientMessagesPerSecond":1000000,"sendsPerUserPerSecond":1000000,"roomMessagesPerSecond":\#(roomMessagesPerSecond)}"#)
        guard settings == 200 else {
            print("overload: PATCH /v1/settings answered \(settings) (is the app \(appKey) configured?)")
            throw ExitCode.failure
        }
        let created = try signed("POST", "/v1/rooms", #"{"roomId":"\#(room)","keepAlive":true,"enterExitNotifications":false}"#)
        guard created == 201 || created == 409 else {
            print("overload: POST /v1/rooms answered \(created)")
            throw ExitCode.failure
        }
    }
}

/// The per-client check, summed.
struct OverloadReport {
    var offered = 0
    var rate = 0.0
    var capacity = 0.0
    var publish = PublishPhaseResult()
    var healthy = 0
    var slow = 0
    /// Subscribers for which received + counted in gaps != published, or that were closed, or
    /// that saw duplicates, a refused message, or events out of stream order.
    var failedHealthy = 0
    var failedSlow = 0
    var healthyClosed = 0
    var slowClosed = 0
    var slowWithGaps = 0
    var healthyWithGaps = 0
    var gapEvents = 0
    var gapCountedNormal = 0
    var gapCountedLow = 0
    var gapCountedTransient = 0
    var receivedHealthy = 0
    var receivedSlow = 0
    /// Published messages a client neither received nor was told of (open connections only).
    var silentlyLost = 0
    var clientsSilentlyLosing = 0
    /// Counted in gaps beyond what a client missed.
    var overCounted = 0
    var duplicates = 0
    /// Received messages whose publish was refused (should be none).
    var receivedRefused = 0
    var orderViolations = 0
    var highUnmarked = 0
    /// High-priority messages missing at a client (deliveries), and (set by the caller) how many
    /// distinct high messages some client lacks.
    var highLostDeliveries = 0
    var highMessagesLost = 0
    var closeReasons: [String: Int] = [:]

    mutating func add(_ r: SubscriberRecord, accepted: [Bool], published: Int, unanswered: [Bool], highEvery: Int, highLost: inout [Bool]) {
        var got = 0, refused = 0, missingHigh = 0
        for seq in 0..<accepted.count {
            let has = seq / 64 < r.received.count && r.received[seq / 64] & (UInt64(1) << UInt64(seq % 64)) != 0
            if accepted[seq] {
                if has { got += 1 } else if seq % highEvery == 0 {
                    missingHigh += 1
                    highLost[seq] = true
                }
            } else if has && !unanswered[seq] {
                refused += 1
            }
        }
        let gaps = r.gapNormal + r.gapLow + r.gapTransient
        let closed = r.closeReason != nil
        let ok = !closed && got + gaps == published && r.duplicates == 0 && refused == 0 && r.orderViolations == 0
        if r.slow {
            slow += 1
            receivedSlow += got
            if !ok { failedSlow += 1 }
            if closed { slowClosed += 1 }
            if r.gapEvents > 0 { slowWithGaps += 1 }
        } else {
            healthy += 1
            receivedHealthy += got
            if !ok { failedHealthy += 1 }
            if closed { healthyClosed += 1 }
            if r.gapEvents > 0 { healthyWithGaps += 1 }
        }
        if let reason = r.closeReason {
            // Close codes and reasons, without per-connection detail.
            let key = (r.slow ? "slow: " : "healthy: ") + String(reason.prefix(60)) + " (phase \(r.closedInPhase == OverloadRunner.overloadPhase ? "overload" : String(r.closedInPhase)))"
            closeReasons[key, default: 0] += 1
        }
        if !closed && got + gaps < published {
            silentlyLost += published - got - gaps
            clientsSilentlyLosing += 1
        }
        if got + gaps > published { overCounted += got + gaps - published }
        gapEvents += r.gapEvents
        gapCountedNormal += r.gapNormal
        gapCountedLow += r.gapLow
        gapCountedTransient += r.gapTransient
        duplicates += r.duplicates
        receivedRefused += refused
        orderViolations += r.orderViolations
        highUnmarked += r.highUnmarked
        highLostDeliveries += missingHigh
    }

    var summary: String {
        "clients_failing=\(failedHealthy + failedSlow) failing_healthy=\(failedHealthy)/\(healthy) failing_slow=\(failedSlow)/\(slow) "
            + "healthy_closed=\(healthyClosed) slow_closed=\(slowClosed) slow_with_gaps=\(slowWithGaps) healthy_with_gaps=\(healthyWithGaps) "
            + "gap_events=\(gapEvents) gap_normal=\(gapCountedNormal) gap_low=\(gapCountedLow) gap_transient=\(gapCountedTransient) "
            + "received_healthy=\(receivedHealthy) received_slow=\(receivedSlow) silently_lost=\(silentlyLost) "
            + "clients_silently_losing=\(clientsSilentlyLosing) over_counted=\(overCounted) duplicates=\(duplicates) "
            + "received_refused=\(receivedRefused) order_violations=\(orderViolations) high_unmarked=\(highUnmarked) "
            + "high_lost_deliveries=\(highLostDeliveries) high_messages_lost=\(highMessagesLost)"
    }
}

/// Samples the servers' resident memory every 100 ms, keeping the peaks: VmRSS summed over the
/// pids, and PSS (/proc/PID/smaps_rollup: shared pages divided among the processes that map
/// them, so nginx's workers do not each count nchan's shared memory), and the kernel's TCP
/// memory (/proc/net/sockstat, pages: socket buffers of every TCP socket on the machine).
final class ServerSampler: Sendable {
    let pids: [Int32]
    private let rssPeak = Atomic<Int>(0)
    private let pssPeak = Atomic<Int>(0)
    private let tcpPeak = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)

    init(pids: [Int32]) {
        self.pids = pids
        resetPeak()
    }

    var current: Int { Self.memory(pids, file: "status", key: "VmRSS:") }
    var currentPSS: Int { Self.memory(pids, file: "smaps_rollup", key: "Pss:") }
    var peak: Int { rssPeak.load(ordering: .relaxed) }
    var peakPSS: Int { pssPeak.load(ordering: .relaxed) }
    var socketPeakPages: Int { tcpPeak.load(ordering: .relaxed) }

    func resetPeak() {
        rssPeak.store(current, ordering: .relaxed)
        pssPeak.store(currentPSS, ordering: .relaxed)
        tcpPeak.store(Self.tcpPages(), ordering: .relaxed)
    }

    func stop() { stopped.store(true, ordering: .relaxed) }

    func run() {
        while !stopped.load(ordering: .relaxed) {
            let rss = current, pss = currentPSS, t = Self.tcpPages()
            if rss > rssPeak.load(ordering: .relaxed) { rssPeak.store(rss, ordering: .relaxed) }
            if pss > pssPeak.load(ordering: .relaxed) { pssPeak.store(pss, ordering: .relaxed) }
            if t > tcpPeak.load(ordering: .relaxed) { tcpPeak.store(t, ordering: .relaxed) }
            usleep(100_000)
        }
    }

    /// `key`'s value in kB (a line "Key:   N kB" of /proc/PID/`file`), summed over the pids, in bytes.
    static func memory(_ pids: [Int32], file: String, key: String) -> Int {
        var total = 0
        for pid in pids {
            for line in lines("/proc/\(pid)/\(file)") where line.hasPrefix(key) {
                total += (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
            }
        }
        return total
    }

    /// `TCP: inuse … mem N`: pages of socket buffers, every TCP socket on the machine.
    static func tcpPages() -> Int {
        for line in lines("/proc/net/sockstat") where line.hasPrefix("TCP:") {
            let f = line.split(separator: " ")
            if let i = f.firstIndex(of: "mem"), i + 1 < f.count { return Int(f[i + 1]) ?? 0 }
        }
        return 0
    }

    static func lines(_ path: String) -> [String] {
        guard let f = fopen(path, "r") else { return [] }
        defer { fclose(f) }
        var out: [String] = []
        var buffer = [CChar](repeating: 0, count: 512)
        while fgets(&buffer, Int32(buffer.count), f) != nil {
            out.append(String(decoding: buffer.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return out
    }
}

/// The 1-, 5- and 15-minute load averages (/proc/loadavg), as "a/b/c".
func loadAverage() -> String {
    guard let line = ServerSampler.lines("/proc/loadavg").first else { return "?" }
    return line.split(separator: " ").prefix(3).joined(separator: "/")
}

/// A histogram as scraped from `/metrics` (`roomcast_fanout_delay_seconds` by class, QS-7;
/// `roomcast_http_request_duration_seconds`): per series label, the cumulative count at each
/// bucket bound (seconds; +Inf as infinity). A series without labels is under "".
struct HistogramScrape {
    var buckets: [String: [(bound: Double, cumulative: Int)]] = [:]

    init(_ text: String, name: String) {
        let prefix = name + "_bucket{"
        for line in text.split(separator: "\n") where line.hasPrefix(prefix) {
            let rest = line.dropFirst(prefix.count)
            guard let leStart = rest.range(of: "le=\""), let leEnd = rest[leStart.upperBound...].firstIndex(of: "\""),
                  let space = rest.lastIndex(of: " "), let n = Int(rest[rest.index(after: space)...]) else { continue }
            // `class="high",le=...`: the label's value; `le=...` alone: "".
            var series = ""
            if let q1 = rest.firstIndex(of: "\""), q1 < leStart.lowerBound,
               let q2 = rest[rest.index(after: q1)...].firstIndex(of: "\"") { series = String(rest[rest.index(after: q1)..<q2]) }
            let le = rest[leStart.upperBound..<leEnd]
            let bound = le == "+Inf" ? Double.infinity : Double(le) ?? .nan
            buckets[series, default: []].append((bound, n))
        }
    }

    func count(_ series: String) -> Int { buckets[series]?.last?.cumulative ?? 0 }

    /// The smallest bucket bound (seconds) under which a fraction `q` of the observations made
    /// since `earlier` fall (nil: none were made).
    func quantile(_ q: Double, of series: String, since earlier: HistogramScrape) -> Double? {
        guard let now = buckets[series] else { return nil }
        let was = earlier.buckets[series] ?? []
        let delta = now.enumerated().map { i, b in (b.bound, b.cumulative - (i < was.count ? was[i].cumulative : 0)) }
        guard let total = delta.last?.1, total > 0 else { return nil }
        let need = Int((q * Double(total)).rounded(.up))
        return delta.first { $0.1 >= need }?.0
    }
}
