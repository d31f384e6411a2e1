import Foundation
import Testing
@testable import Chat
@testable import Gateway
import TestKit
import Wire

/// Issue 32's idle session: what a session uses only for a while (the handshake's origin until its
/// connect succeeds, a join's resume or rewind until it takes effect, a refusal count) is held in
/// one box that is given back, so an idle joined session carries none of it.
@Suite struct IdleSessionTests {
    @Test func anIdleJoinedSessionKeepsNoneOfWhatItUsedForAWhile() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "before"]).status == 201)
        g.settle()

        let c = g.session(origin: "https://app.example")
        // The origin waits for the connect that checks it.
        #expect(g.onLoop { c.session!.holdsRareState })
        try c.expectOK(c.command("connect", ["token": try rest.token("ann")]))
        #expect(!g.onLoop { c.session!.holdsRareState })
        let joined = try c.expectOK(c.command("room.join", ["roomId": "r", "rewind": 1])).obj("joinInfo")
        g.settle()
        #expect(Self.contents(c.drain()) == ["before"])
        #expect(!g.onLoop { c.session!.holdsRareState })

        // A resume on another connection of the same user: given back once the join took effect.
        let again = g.session()
        try again.expectOK(again.command("connect", ["token": try rest.token("ann", device: "tablet")]))
        let epoch = try #require(joined.obj("room").str("epoch"))
        _ = try again.expectOK(again.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": "x", "offset": 0]]))
        g.settle()
        #expect(!g.onLoop { again.session!.holdsRareState })

        // Unobserving a room it never observed gives it nothing to hold.
        _ = try? again.command("room.unobserve", ["roomId": "r"])
        #expect(!g.onLoop { again.session!.holdsRareState })
    }

    @Test func aRefusedConnectKeepsTheOriginForTheNext() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let other = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        #expect(try other.call("PATCH", "/v1/settings", ["allowedOrigins": ["https://app.example"]]).status == 200)
        // The first app allows every origin; its connect is refused by the domain (an anonymous
        // member without a nickname), not closed, so the connection may try again.
        let c = g.session(origin: "https://evil.example")
        let refused = try c.command("connect", ["appKey": g.appKey, "anonymous": ["nickname": "", "avatar": "a.png"]])
        #expect(refused.obj("error").str("field") == "anonymous.nickname", "\(refused)")
        #expect(c.closeCode == nil)
        // The next connect, to an app that does not allow this origin, is still checked.
        _ = try? c.command("connect", ["token": try other.token("bob")])
        #expect(c.closeCode == CloseCode.originNotAllowed.rawValue)
    }

    /// A user's sessions on a loop (one word: none, one inline, or an array of two or more) against
    /// an array doing the same random appends and removals, in registration order after every step.
    @Test func aUsersSessionsOnALoopBehaveAsAnArray() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let pool = (0..<4).map { _ in g.session().session! }
        #expect(MemoryLayout<UserSessions>.size == 8)
        var rng = SplitMix64(seed: 32)
        for _ in 0..<100 {
            var list = UserSessions(pool[0])
            var model = [pool[0]]
            for _ in 0..<30 {
                let s = pool[Int(rng.next() % UInt64(pool.count))]
                if rng.next() % 2 == 0 && !model.contains(where: { $0 === s }) {
                    list.append(s)
                    model.append(s)
                } else {
                    list.remove(s)
                    model.removeAll { $0 === s }
                }
                #expect(list.all.map(ObjectIdentifier.init) == model.map(ObjectIdentifier.init))
                #expect(list.isEmpty == model.isEmpty)
            }
        }
    }

    /// `--malloc-arenas` (the arenas every thread shares) outside 0 to 1024 is refused, naming the
    /// flag, before anything starts.
    @Test func mallocArenasOutsideTheirBoundAreRefused() async throws {
        try await offPool { () throws in
            for bad in ["-1", "1025"] {
                let (status, log) = try roomcastRun(["--malloc-arenas=\(bad)"])
                #expect(status != nil && status != 0, "\(bad): \(String(describing: status))")
                #expect(log.contains("--malloc-arenas must be between 0 and 1024"), "\(bad): \(log)")
            }
        }
    }

    static func contents(_ events: [[String: Any]]) -> [String] {
        events.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
    }
}
