import Chat
import Engine
import Foundation
import Server
@testable import Gateway
import Testing
import TestKit
import Wire

/// Room QoS under overload (SPEC §14), in-process with a manual clock: the room's budget and its
/// high-priority reserve, what a slow connection loses and is told (`room.gap`), transient
/// messages, protected senders and stopped distribution. Who must not receive is checked with
/// the same care as who must.
@Suite("Room QoS under overload (QS-1..QS-7)")
struct QoSTests {
    static func send(_ rest: InProcessREST, _ room: String, _ content: String, priority: String? = nil, extra: [String: Any] = [:]) throws -> RESTClient.Response {
        var body: [String: Any] = ["content": content, "fromUserId": "admin"]
        if let priority { body["priority"] = priority }
        for (k, v) in extra { body[k] = v }
        return try rest.call("POST", "/v1/rooms/\(room)/messages", body)
    }

    /// Room `r` with `user` joined and its frames so far read; `unlimited`: the app's room budget
    /// at its maximum, so only the marks decide what is dropped.
    static func member(_ g: InProcessGateway, _ user: String, unlimited: Bool = false) throws -> SessionClient {
        let rest = g.rest()
        if unlimited { #expect(try rest.call("PATCH", "/v1/settings", ["roomMessagesPerSecond": 100_000]).status == 200) }
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let c = try g.client(user)
        _ = try c.expectOK(try c.command("room.join", ["roomId": "r"]))
        _ = c.drain()
        return c
    }

    static func contents(_ events: [[String: Any]]) -> [String] {
        events.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
    }

    // QS-1, QS-2: a room takes 40 messages per 200 ms of which 20 only high priority may use
    // (RongCloud's figures; the default reserve is 50%): at one instant 10 low (half of the
    // shared 20), then normal up to 20, then high up to 40; the rest are refused with 42902,
    // Retry-After and the field; the refused ones reach nobody.
    @Test func theRoomsBudgetRefusesLowThenNormalAndKeepsAShareForHigh() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let bob = try Self.member(g, "bob")
        var accepted: [String: Int] = [:]
        var refusals: [RESTClient.Response] = []
        for (priority, n) in [("low", 20), ("normal", 20), ("high", 24)] {
            for i in 0..<n {
                let r = try Self.send(rest, "r", "\(priority)-\(i)", priority: priority)
                if r.status == 201 { accepted[priority, default: 0] += 1 } else { refusals.append(r) }
            }
        }
        #expect(accepted == ["low": 10, "normal": 10, "high": 20])
        #expect(refusals.count == 24)
        for r in refusals {
            #expect(r.status == 429 && r.json.int("code") == ErrorCode.roomBusy.rawValue && r.json.str("field") == "roomId", "\(r.text)")
            #expect(r.header("Retry-After") == String(Limits.roomBudgetRetryAfterSeconds))
        }
        g.settle()
        let got = Self.contents(bob.drain())
        #expect(got.count == 40 && !got.contains("low-10") && !got.contains("normal-10") && !got.contains("high-20"))
        // The budget refills with time: a fifth of a second later the room takes normal messages again.
        g.advance(seconds: 1)
        #expect(try Self.send(rest, "r", "later").status == 201)
        // Another room has a budget of its own.
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "other"]).status == 201)
        #expect(try Self.send(rest, "other", "fine").status == 201)
    }

    // QS-2: a loop with batches not yet written is behind since the newest batch it has written
    // was handed over (or since the first it was handed when it was caught up); the batch being
    // written counts; caught up, it is not behind.
    @Test func aLoopIsBehindAsAConsumersLagIsRead() {
        let ms: UInt64 = 1_000_000
        var b = LoopBacklog()
        #expect(b.behind(now: 500 * ms) == 0 && b.count == 0)
        b.handed(at: 100 * ms)
        #expect(b.behind(now: 900 * ms) == 800 * ms, "the fan-out being written counts")
        b.handed(at: 300 * ms)
        b.handed(at: 350 * ms)
        #expect(b.count == 3 && b.behind(now: 420 * ms) == 320 * ms)
        b.written(handedAt: 100 * ms)
        #expect(b.behind(now: 420 * ms) == 320 * ms, "still from the newest batch written")
        b.written(handedAt: 300 * ms)
        #expect(b.behind(now: 420 * ms) == 120 * ms)
        b.written(handedAt: 350 * ms)
        #expect(b.count == 0 && b.behind(now: 420 * ms) == 0)
        b.written(handedAt: 400 * ms) // more than were handed: nothing changes
        #expect(b.count == 0 && b.behind(now: 420 * ms) == 0)
        // Caught up, the next batch starts the clock again; a clock read before it is no age.
        b.handed(at: 1_000 * ms)
        #expect(b.behind(now: 500 * ms) == 0 && b.behind(now: 1_030 * ms) == 30 * ms)
    }

    // QS-2 through the gateway: with the hub's loop held, nothing is written. Once the first
    // message's batch has waited past the budget, normal, low and transient messages to a room of
    // `overloadMinAudience` members are refused (42902, Retry-After, the field), a high one still
    // goes and a smaller room is not held back. Released, each member gets exactly what was
    // admitted, the refused reach nobody, and the room takes normal messages again.
    @Test func theLatencyBudgetRefusesWhileALoopIsBehind() throws {
        let g = try InProcessGateway { $0.fanoutLatencyBudgetMilliseconds = 50 }
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("PATCH", "/v1/settings", ["roomMessagesPerSecond": 100_000]).status == 200)
        for room in ["big", "small"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        var members: [SessionClient] = []
        for i in 0..<Limits.overloadMinAudience {
            let c = try g.client("m\(i)")
            _ = try c.expectOK(try c.command("room.join", ["roomId": "big"]))
            members.append(c)
        }
        let outside = try g.client("outside")
        _ = try outside.expectOK(try outside.command("room.join", ["roomId": "small"]))
        for c in members + [outside] { _ = c.drain() }

        let gate = DispatchSemaphore(value: 0)
        var released = false
        let release = { if !released { released = true; gate.signal() } }
        defer { release() }
        g.loop.execute { _ = gate.wait(timeout: .now() + 60) }
        #expect(try Self.send(rest, "big", "one").status == 201, "nothing is behind yet")
        // Its batch reaches the held loop once the store's batch ends; then the lag grows.
        let deadline = Date().addingTimeInterval(10)
        while g.core.hubs.backlogMilliseconds() <= 50 && Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        #expect(g.core.hubs.backlogMilliseconds() > 50)
        for (content, priority, extra) in [("two", "normal", [:]), ("three", "low", [:]), ("four", nil, ["transient": true])] as [(String, String?, [String: Any])] {
            let r = try Self.send(rest, "big", content, priority: priority, extra: extra)
            #expect(r.status == 429 && r.json.int("code") == ErrorCode.roomBusy.rawValue && r.json.str("field") == "roomId", "\(content): \(r.text)")
            #expect(r.header("Retry-After") != nil && r.text.contains("behind"), "\(content)")
        }
        #expect(try Self.send(rest, "big", "five", priority: "high").status == 201)
        #expect(try Self.send(rest, "small", "six").status == 201, "a room under \(Limits.overloadMinAudience) members is not held back")
        release()
        g.settle()
        for c in members { #expect(Self.contents(c.drain()) == ["one", "five"]) }
        #expect(Self.contents(outside.drain()) == ["six"])
        let history = try rest.call("GET", "/v1/rooms/big/messages?limit=20").json["messages"] as? [[String: Any]] ?? []
        #expect(Set(history.compactMap { $0.str("content") }) == ["one", "five"])
        #expect(try Self.send(rest, "big", "seven").status == 201, "written, the loop is caught up")
        #expect(Self.contents(members[0].drain()) == ["seven"])
    }

    // QS-1: the class travels with the message (only when it is not normal), and bad input
    // names its field and changes nothing.
    @Test func theClassIsOnTheMessageAndBadInputNamesTheField() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let bob = try Self.member(g, "bob")
        #expect(try Self.send(rest, "r", "hi", priority: "high", extra: ["messageType": "RC:TxtMsg"]).status == 201)
        let m = try bob.waitFor("room.message").obj("data").obj("message")
        #expect(m.str("priority") == "high" && m.str("messageType") == "RC:TxtMsg" && m["transient"] == nil)
        #expect(try Self.send(rest, "r", "plain").status == 201)
        let plain = try bob.waitFor("room.message").obj("data").obj("message")
        #expect(plain["priority"] == nil && plain["messageType"] == nil)
        for (extra, field) in [(["priority": "urgent"], "priority"), (["messageType": String(repeating: "t", count: 65)], "messageType")] as [([String: Any], String)] {
            let r = try Self.send(rest, "r", "bad", extra: extra)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(r.text)")
        }
        // A budget that is not a whole number names its field, as one out of bounds does, and
        // changes nothing.
        for value in [1.5, 1e30] {
            let r = try rest.call("PATCH", "/v1/settings", ["roomMessagesPerSecond": value])
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == "roomMessagesPerSecond", "\(r.text)")
        }
        #expect(try rest.call("GET", "/v1/settings").json.int("roomMessagesPerSecond") == Limits.defaultRoomMessagesPerSecond)
        // A WebSocket client asks for a class the same way.
        let reply = try bob.command("room.send", ["roomId": "r", "content": "x", "priority": "sometimes"])
        #expect(reply.obj("error").int("code") == 1002 && reply.obj("error").str("field") == "priority")
        g.settle()
        #expect(Self.contents(bob.drain()).isEmpty)
        let history = try rest.call("GET", "/v1/rooms/r/messages?limit=10").json["messages"] as? [[String: Any]] ?? []
        #expect(history.map { $0.str("content") ?? "" } == ["plain", "hi"])  // newest first
    }

    // QS-3: a connection holding more than its soft mark loses normal and low messages (low
    // first) but never high ones or other events; once it has caught up it is told, in one gap
    // however long it was behind, exactly which offsets it lost and how many of each class; a
    // reader that keeps up loses nothing.
    @Test func aSlowConnectionLosesLowThenNormalAndIsToldOnceCaughtUp() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("PATCH", "/v1/settings", ["roomMessagesPerSecond": 100_000]).status == 200)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let slow = try g.client("slow"), fast = try g.client("fast")
        for c in [slow, fast] { _ = try c.expectOK(try c.command("room.join", ["roomId": "r"])) }
        _ = slow.drain()
        _ = fast.drain()
        // Past a quarter of the soft mark: low messages go, normal ones still come.
        slow.queued.store(Limits.defaultOutboundSoftBytes / 2, ordering: .relaxed)
        for (i, p) in ["low", "normal", "low", "high"].enumerated() { #expect(try Self.send(rest, "r", "a\(i)", priority: p).status == 201) }
        g.settle()
        // Past the soft mark: normal ones go too; high ones and room events still come.
        slow.queued.store(Limits.defaultOutboundSoftBytes + 1, ordering: .relaxed)
        for (i, p) in ["normal", "low", "high", "normal"].enumerated() { #expect(try Self.send(rest, "r", "b\(i)", priority: p).status == 201) }
        #expect(try rest.call("PUT", "/v1/rooms/r/mute", ["muted": true, "needNotify": true]).status == 200)
        g.settle()
        // Still behind: what it got came without a gap before each of them.
        let whileBehind = slow.drain()
        #expect(!whileBehind.contains { $0.str("ev") == "room.gap" })
        // The slow reader catches up: the next event of the room comes after the one gap that
        // says everything it lost while behind.
        slow.queued.store(0, ordering: .relaxed)
        #expect(try rest.call("PUT", "/v1/rooms/r/mute", ["muted": false, "needNotify": true]).status == 200)
        #expect(try Self.send(rest, "r", "c0").status == 201)
        g.settle()
        let seen = whileBehind + slow.drain()
        let names = seen.compactMap { e -> String? in
            switch e.str("ev") {
            case "room.message": return e.obj("data").obj("message").str("content") ?? ""
            case "room.gap", "room.ban": return e.str("ev")
            default: return nil
            }
        }
        #expect(names == ["a1", "a3", "b2", "room.ban", "room.gap", "room.ban", "c0"], "\(names)")
        let gaps = seen.filter { $0.str("ev") == "room.gap" }.map { $0.obj("data") }
        #expect(gaps.count == 1)
        // The gap counts every class it lost and spans them; every offset in its span is an event
        // the client got or one the gap counts.
        let lowLost = gaps.reduce(0) { $0 + ($1.obj("dropped").int("low") ?? 0) }
        let normalLost = gaps.reduce(0) { $0 + ($1.obj("dropped").int("normal") ?? 0) }
        #expect(lowLost == 3 && normalLost == 2)
        let offsets = Set(seen.compactMap { $0.int("offset") })
        for gap in gaps {
            let from = try #require(gap.int("fromOffset")), to = try #require(gap.int("toOffset"))
            let gotInSpan = offsets.filter { (from...to).contains($0) }.count
            #expect(from <= to && to - from + 1 == gotInSpan + lowLost + normalLost, "span \(from)...\(to), got \(gotInSpan) of it")
        }
        // Delivered plus counted in gaps is everything the room sent.
        #expect(Self.contents(seen).count + lowLost + normalLost == 9)
        // The reader that kept up got every message and no gap.
        let all = fast.drain()
        #expect(Self.contents(all) == ["a0", "a1", "a2", "a3", "b0", "b1", "b2", "b3", "c0"] && !all.contains { $0.str("ev") == "room.gap" })
        // QS-7: the drops are counted.
        let metrics = try rest.call("GET", "/metrics").text
        #expect(metrics.contains("roomcast_events_dropped_total{class=\"low\"} 3") && metrics.contains("roomcast_events_dropped_total{class=\"normal\"} 2"))
    }

    /// The `roomcast_fanout_delay_seconds` series of one class: its cumulative buckets in order,
    /// and its count.
    static func fanoutDelay(_ metrics: String, _ lane: String) -> (buckets: [Int], count: Int) {
        var buckets: [Int] = [], count = -1
        for line in metrics.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let n = Int(parts[1]) else { continue }
            if parts[0].hasPrefix("roomcast_fanout_delay_seconds_bucket{class=\"\(lane)\",") { buckets.append(n) }
            if parts[0] == "roomcast_fanout_delay_seconds_count{class=\"\(lane)\"}" { count = n }
        }
        return (buckets, count)
    }

    // QS-7: the server's own share of each event's latency (hand-over to the loops → written or
    // queued for every connection), by class: each message is one observation of its own class
    // (one loop here), and the buckets are cumulative.
    @Test func theFanoutDelayIsMeasuredByClass() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let bob = try Self.member(g, "bob", unlimited: true)
        g.settle()
        let before = try rest.call("GET", "/metrics").text
        for (priority, n) in [("high", 3), ("low", 2), ("normal", 1)] {
            for i in 0..<n { #expect(try Self.send(rest, "r", "\(priority)-\(i)", priority: priority).status == 201) }
        }
        #expect(try Self.send(rest, "r", "barrage", extra: ["transient": true]).status == 201)
        g.settle()
        #expect(Self.contents(bob.drain()).count == 7)
        let after = try rest.call("GET", "/metrics").text
        for (lane, added) in [("high", 3), ("low", 2), ("normal", 1), ("transient", 1)] {
            let was = Self.fanoutDelay(before, lane), now = Self.fanoutDelay(after, lane)
            #expect(now.count - was.count == added, "\(lane)")
            #expect(now.buckets.count == LatencyBuckets.bounds.count + 1, "\(lane)")
            #expect(zip(now.buckets, now.buckets.dropFirst()).allSatisfy { $0 <= $1 }, "\(lane)")
        }
        // Nothing else moved the message classes; room events (the join) are "system".
        #expect(Self.fanoutDelay(after, "system").count >= 1)
    }

    // QS-7: a wait lands in the first bucket whose bound it does not exceed; bounds render in
    // seconds exactly; the histogram text is Prometheus's, one series per class.
    @Test func fanoutDelayBucketsAndText() {
        #expect(LatencyBuckets.bucket(microseconds: 0) == 0)
        #expect(LatencyBuckets.bucket(microseconds: 1_000) == 0)
        #expect(LatencyBuckets.bucket(microseconds: 1_001) == 1)
        #expect(LatencyBuckets.bucket(microseconds: 150_000) == LatencyBuckets.bounds.firstIndex(of: 150_000))
        #expect(LatencyBuckets.bucket(microseconds: 10_000_001) == LatencyBuckets.bounds.count)
        #expect(LatencyBuckets.seconds(2_500) == "0.0025" && LatencyBuckets.seconds(10_000_000) == "10" && LatencyBuckets.seconds(150_000) == "0.15")
        let d = FanoutDelay()
        var counts = [Int](repeating: 0, count: Lane.allCases.count)
        counts[Int(Lane.high.rawValue)] = 2
        d.record(counts, waitedNanoseconds: 120_000_000)
        counts = [Int](repeating: 0, count: Lane.allCases.count)
        counts[Int(Lane.high.rawValue)] = 1
        d.record(counts, waitedNanoseconds: 400_000)
        #expect(d.histogram(.high).count == 3 && d.histogram(.normal).count == 0)
        let text = d.render()
        #expect(text.contains("# TYPE roomcast_fanout_delay_seconds histogram\n"))
        #expect(text.contains("roomcast_fanout_delay_seconds_bucket{class=\"high\",le=\"0.001\"} 1\n"))
        #expect(text.contains("roomcast_fanout_delay_seconds_bucket{class=\"high\",le=\"0.1\"} 1\n"))
        #expect(text.contains("roomcast_fanout_delay_seconds_bucket{class=\"high\",le=\"0.15\"} 3\n"))
        #expect(text.contains("roomcast_fanout_delay_seconds_bucket{class=\"high\",le=\"+Inf\"} 3\n"))
        #expect(text.contains("roomcast_fanout_delay_seconds_sum{class=\"high\"} 0.2404\n"))
        #expect(text.contains("roomcast_fanout_delay_seconds_count{class=\"normal\"} 0\n"))
    }

    // QS-3, QS-5: transient messages are outside the stream (their gap counts have no epoch or
    // offsets); lost alternately with stream messages, every loss is still counted in the one gap.
    @Test func streamAndTransientLossesMixedAreAllCounted() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let slow = try Self.member(g, "slow", unlimited: true)
        slow.queued.store(Limits.defaultOutboundSoftBytes + 1, ordering: .relaxed)
        for i in 0..<6 { #expect(try Self.send(rest, "r", "m\(i)", extra: i % 2 == 1 ? ["transient": true] : [:]).status == 201) }
        g.settle()
        slow.queued.store(0, ordering: .relaxed)
        #expect(try Self.send(rest, "r", "c0").status == 201)
        g.settle()
        let seen = slow.drain()
        let gaps = seen.filter { $0.str("ev") == "room.gap" }
        #expect(gaps.count == 1, "\(gaps)")
        let gap = try #require(gaps.first)
        #expect(gap.obj("data").obj("dropped").int("normal") == 3 && gap.obj("data").obj("dropped").int("transient") == 3, "\(gap)")
        #expect(gap.str("epoch")?.isEmpty == false && gap.obj("data").int("fromOffset") != nil, "\(gap)")
        #expect(Self.contents(seen) == ["c0"])
    }

    // QS-3: a reader is as far behind as what its socket refused; bytes queued at once and not
    // yet offered to the socket (a burst from a loop that fell behind) count only past the soft
    // mark, so a burst under it drops nothing and a larger one is shed, not held toward 4008.
    @Test func aBurstNotYetWrittenCountsOnlyPastTheSoftMark() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let c = try Self.member(g, "burst", unlimited: true)
        let soft = Limits.defaultOutboundSoftBytes
        // The socket took everything at its last write; a whole soft mark is queued since.
        c.refused.store(0, ordering: .relaxed)
        c.queued.store(soft, ordering: .relaxed)
        for (i, p) in ["low", "normal"].enumerated() { #expect(try Self.send(rest, "r", "a\(i)", priority: p).status == 201) }
        g.settle()
        // Past the soft mark by more than the low mark: low messages go, normal ones still come.
        c.queued.store(soft + soft / Limits.lowMarkFraction + 1, ordering: .relaxed)
        for (i, p) in ["low", "normal"].enumerated() { #expect(try Self.send(rest, "r", "b\(i)", priority: p).status == 201) }
        g.settle()
        // Past twice the soft mark: normal ones go too; high ones still come.
        c.queued.store(2 * soft + 1, ordering: .relaxed)
        for (i, p) in ["normal", "high"].enumerated() { #expect(try Self.send(rest, "r", "c\(i)", priority: p).status == 201) }
        g.settle()
        c.queued.store(0, ordering: .relaxed)
        #expect(try Self.send(rest, "r", "d0").status == 201)
        g.settle()
        let seen = c.drain()
        #expect(Self.contents(seen) == ["a0", "a1", "b1", "c1", "d0"], "\(Self.contents(seen))")
        let gaps = seen.filter { $0.str("ev") == "room.gap" }.map { $0.obj("data").obj("dropped") }
        #expect(gaps.count == 1 && gaps.first?.int("low") == 1 && gaps.first?.int("normal") == 1, "\(gaps)")
    }

    // QS-3: a gap is told even when the room goes quiet, once the connection has room again
    // (the hub's one-second tick).
    @Test func aPendingGapIsToldWhenTheRoomGoesQuiet() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let slow = try Self.member(g, "slow")
        slow.queued.store(Limits.defaultOutboundSoftBytes + 1, ordering: .relaxed)
        #expect(try Self.send(rest, "r", "lost").status == 201)
        g.settle()
        g.onLoop { g.core.hubs.hub(0)!.tick() }
        #expect(Self.contents(slow.drain()).isEmpty)  // still over its mark: nothing yet
        slow.queued.store(0, ordering: .relaxed)
        g.onLoop { g.core.hubs.hub(0)!.tick() }
        let gap = try slow.waitFor("room.gap")
        #expect(gap.obj("data").obj("dropped").int("normal") == 1 && gap.str("epoch") != nil)
    }

    // QS-3: a reader that stays behind is still told what it lost: a gap that has waited a tick
    // goes out before the room's next event it gets; until it goes, losses are gathered in it.
    @Test func aReaderThatStaysBehindIsToldOnceASecond() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let slow = try Self.member(g, "slow")
        slow.queued.store(Limits.defaultOutboundSoftBytes + 1, ordering: .relaxed)
        for (i, p) in ["normal", "high", "normal", "high"].enumerated() { #expect(try Self.send(rest, "r", "a\(i)", priority: p).status == 201) }
        g.settle()
        g.onLoop { g.core.hubs.hub(0)!.tick() }
        for (i, p) in ["normal", "high"].enumerated() { #expect(try Self.send(rest, "r", "b\(i)", priority: p).status == 201) }
        g.settle()
        let seen = slow.drain()
        let names = seen.compactMap { e -> String? in
            e.str("ev") == "room.gap" ? "gap \(e.obj("data").obj("dropped").int("normal") ?? 0)"
                : e.str("ev") == "room.message" ? e.obj("data").obj("message").str("content") : nil
        }
        // Still behind at the tick: the gap, by then due, gathers b0 too and goes out before b1.
        #expect(names == ["a1", "a3", "gap 3", "b1"], "\(names)")
        // Nothing else was pending: caught up, no further gap comes.
        slow.queued.store(0, ordering: .relaxed)
        g.onLoop { g.core.hubs.hub(0)!.tick() }
        g.settle()
        #expect(!slow.drain().contains { $0.str("ev") == "room.gap" })
    }

    // QS-5: a transient message reaches the room's members, is not stored (history), has no
    // offset (not in the stream: a resume does not replay it) and is not sent to webhooks.
    @Test func transientMessagesAreNotStoredNorReplayed() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let bob = try Self.member(g, "bob")
        #expect(try Self.send(rest, "r", "before").status == 201)
        #expect(try Self.send(rest, "r", "barrage", extra: ["transient": true]).status == 201)
        #expect(try Self.send(rest, "r", "after").status == 201)
        let before = try bob.waitFor("room.message")
        let barrage = try bob.waitFor("room.message")
        #expect(barrage.obj("data").obj("message").str("content") == "barrage" && barrage["offset"] == nil && barrage["epoch"] == nil)
        #expect(barrage.obj("data").obj("message")["transient"] as? Bool == true)
        let after = try bob.waitFor("room.message")
        #expect(after.int("offset") == (before.int("offset") ?? -1) + 1, "the transient message took no offset")
        let history = try rest.call("GET", "/v1/rooms/r/messages?limit=10").json["messages"] as? [[String: Any]] ?? []
        #expect(Set(history.map { $0.str("content") ?? "" }) == ["before", "after"])
        // A resume from before it replays the stream without it.
        let c = try g.client("carol")
        _ = try c.expectOK(try c.command("room.join", ["roomId": "r", "resume": ["epoch": before.str("epoch") ?? "", "stream": g.core.window.stream,
                                                                                   "offset": (before.int("offset") ?? 1) - 1]]))
        g.settle()
        #expect(Self.contents(c.drain()) == ["before", "after"])
    }

    // QS-6: while a room's distribution is stopped its messages are accepted and kept, and no
    // member receives them; resumed, the next message is fanned out.
    @Test func stoppedDistributionKeepsMessagesAndSendsNone() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let bob = try g.client("bob"), alice = try g.client("alice")
        for c in [bob, alice] { _ = try c.expectOK(try c.command("room.join", ["roomId": "r"])) }
        _ = bob.drain()
        g.core.engine.submit(.setDistribution(app: g.appKey, roomId: "r", stopped: true), replyTo: .none)
        g.settle()
        #expect(try Self.send(rest, "r", "quiet").status == 201)
        _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "from alice"]))
        g.settle()
        #expect(Self.contents(bob.drain()).isEmpty)
        let room = try rest.call("GET", "/v1/rooms/r").json.obj("room")
        #expect(room["distributionStopped"] as? Bool == true)
        g.core.engine.submit(.setDistribution(app: g.appKey, roomId: "r", stopped: false), replyTo: .none)
        #expect(try Self.send(rest, "r", "again").status == 201)
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "again")
        let history = try rest.call("GET", "/v1/rooms/r/messages?limit=10").json["messages"] as? [[String: Any]] ?? []
        #expect(history.map { $0.str("content") ?? "" } == ["again", "from alice", "quiet"])  // newest first
    }

    // QS-4: a protected sender's messages are high priority: admitted from the reserved share
    // and never dropped; at most five protected senders per room (the sixth changes nothing).
    @Test func protectedSendersAreNeverDroppedAndAreBounded() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let vip = try g.client("vip"), slow = try g.client("slow")
        for c in [vip, slow] { _ = try c.expectOK(try c.command("room.join", ["roomId": "r"])) }
        _ = slow.drain()
        g.core.engine.submit(.setProtectedSenders(app: g.appKey, roomId: "r", add: true, ["vip", "a", "b", "c", "d"]), replyTo: .none)
        g.settle()
        let sixth = Handoff<Result<Reply, ChatError>>()
        g.core.engine.submit(.setProtectedSenders(app: g.appKey, roomId: "r", add: true, ["e"]), replyTo: .callback { sixth.put($0) })
        guard case .failure(let e)? = sixth.take(timeout: 5) else { Issue.record("a sixth protected sender was taken"); return }
        #expect(e.code == .invalidParameter && e.field == "userIds")
        let listed = Handoff<Result<Reply, ChatError>>()
        g.core.engine.query(.protectedSenders(app: g.appKey, roomId: "r")) { listed.put($0) }
        #expect(listed.take(timeout: 5) == .success(.userIds(["vip", "a", "b", "c", "d"])))
        slow.queued.store(Limits.defaultOutboundSoftBytes * 2, ordering: .relaxed)
        _ = try vip.expectOK(try vip.command("room.send", ["roomId": "r", "content": "vip", "priority": "low"]))
        g.settle()
        let m = try slow.waitFor("room.message").obj("data").obj("message")
        #expect(m.str("content") == "vip" && m.str("priority") == "high")
    }
}
