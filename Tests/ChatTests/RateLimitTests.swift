@testable import Chat
import Testing

/// PX-1 in the domain: token buckets on injected time, and a user's room sends per second.
@Suite("Rate limits (PX-1)")
struct RateLimitTests {
    @Test func bucketRefillsAtItsRate() {
        var b = TokenBucket(rate: 4, now: 0)
        var seen: [Bool] = []
        for _ in 0..<5 { seen.append(b.take(now: 0)) }
        seen.append(b.take(now: 249))  // 0.996 of a token
        seen.append(b.take(now: 250))
        #expect(seen == [true, true, true, true, false, false, true])
        let fullNow = b.isFull(now: 250), fullLater = b.isFull(now: 1250)
        #expect(!fullNow && fullLater)  // never more than the burst
        seen = []
        for _ in 0..<5 { seen.append(b.take(now: 1250)) }
        #expect(seen == [true, true, true, true, false])
        var slow = TokenBucket(rate: 1, burst: 3, now: 0)
        seen = []
        for _ in 0..<4 { seen.append(slow.take(now: 0)) }
        seen.append(slow.take(now: 999))
        seen.append(slow.take(now: 1000))
        #expect(seen == [true, true, true, false, false, true])
    }

    @Test func aUsersSendsPerSecondAllDevicesTogether() {
        let h = Harness { $0.sendsPerUserPerSecond = 2; $0.multipleRoomsPerUser = true }
        #expect(h.createRoom("r").succeeded)
        let phone = h.connect("alice", device: "phone"), laptop = h.connect("alice", device: "laptop"), bob = h.connect("bob")
        for s in [phone, laptop, bob] { #expect(h.join(s, "r").succeeded) }
        func send(_ s: SessionID) -> Outcome { h.run(.sendMessage(app: h.app, roomId: "r", .session(s), .text, content: "x")) }
        #expect(send(phone).succeeded && send(laptop).succeeded)
        let refused = send(phone)
        guard case .failure(let e) = refused.reply else { Issue.record("third send passed"); return }
        #expect(e.code == .rateLimited && e.field == "roomId")
        #expect(refused.effects.isEmpty && refused.mutations.isEmpty)  // nothing changed, nobody told
        #expect(send(bob).succeeded)  // another user has its own bucket
        // The app server is not limited by its users' buckets.
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", .server(userId: "alice", nickname: "", avatar: ""), .text, content: "s")).succeeded)
        h.advance(seconds: 1)
        #expect(send(laptop).succeeded)
        // Idle users' buckets are forgotten by the tick (bounded memory).
        h.advance(seconds: 120)
        _ = h.tick()
        #expect(h.domain.apps[h.app]?.sendBuckets.isEmpty == true)
    }
}
