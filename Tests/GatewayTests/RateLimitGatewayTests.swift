import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// PX-1 at the gateway: an app's REST calls per second (every surface, its own codes), a
/// connection's messages per second (closed with 4029 when it goes on), new connections per
/// address; one app at its limit does not hold up another.
@Suite("Rate limits at the gateway (PX-1)")
struct RateLimitGatewayTests {
    @Test func anAppsRESTCallsPerSecondOnEverySurface() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let other = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        #expect(try other.call("POST", "/v1/rooms", ["roomId": "theirs"]).status == 201)
        let bob = g.session()
        _ = try bob.connect(token: try other.token("bob"))
        _ = try bob.expectOK(try bob.command("room.join", ["roomId": "theirs"]))
        #expect(try rest.call("PATCH", "/v1/settings", ["restCallsPerSecond": 3]).json.int("restCallsPerSecond") == 3)
        for i in 0..<3 { #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r\(i)"]).status == 201) }
        let refused = try rest.call("POST", "/v1/rooms", ["roomId": "r3"])
        #expect(refused.status == 429 && refused.json.int("code") == 42901 && refused.header("Retry-After") == "1")
        // The vendors' surfaces share the bucket and answer in their codes.
        let rc = try rest.vendor(.rongCloud, "/chatroom/query.json", [("chatroomId", "r0")])
        #expect(rc.status == 429 && rc.json.int("code") == 1008)
        let nim = try rest.vendor(.nim, "/nimserver/chatroom/get.action", [("roomid", "1")])
        #expect(nim.status == 200 && nim.json.int("code") == 416)
        // Nothing was made; the other app is not held up: its calls and its deliveries go on.
        #expect(try other.call("POST", "/v1/rooms/theirs/messages", ["content": "still flowing"]).status == 201)
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "still flowing")
        g.advance(seconds: 1)
        #expect(try rest.call("GET", "/v1/rooms").json["roomIds"] as? [String] == ["r0", "r1", "r2"])
    }

    @Test func aConnectionsMessagesPerSecondThenClosedWhenItGoesOn() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("PATCH", "/v1/settings", ["clientMessagesPerSecond": 3]).status == 200)
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let flooder = try g.client("flood"), calm = try g.client("calm")
        // Three messages a second are answered (here: refused for not being in the room, 23406).
        for _ in 0..<3 { #expect(try flooder.command("room.info", ["roomId": "r"]).obj("error").int("code") == 23406) }
        let refused = try flooder.command("room.join", ["roomId": "r"]).obj("error")
        #expect(refused.int("code") == 42901 && refused.str("field") == "op")
        // Another connection is not affected.
        _ = try calm.expectOK(try calm.command("room.join", ["roomId": "r"]))
        // Going on past the limit (more than 2 s worth of refusals) closes the connection.
        for i in 0..<10 { flooder.send(#"{"id":\#(100 + i),"op":"room.leaveAll","args":{}}"#) }
        g.settle()
        #expect(flooder.closeCode == 4029)
        #expect(calm.closeCode == nil)
        // A second later the budget is back for a new connection of the same user.
        g.advance(seconds: 1)
        let again = try g.client("flood")
        _ = try again.expectOK(try again.command("room.join", ["roomId": "r"]))
    }

    // PX-1: the limiter itself, on injected time: per address, refilled at its rate, and at most
    // `maxAddresses` remembered (idle ones forgotten first, then all).
    @Test func connectLimiterPerAddressAndBounded() {
        let limiter = ConnectLimiter(perSecond: 2)
        #expect(limiter.take("10.0.0.1", now: 0) && limiter.take("10.0.0.1", now: 0))
        #expect(!limiter.take("10.0.0.1", now: 0) && !limiter.take("10.0.0.1", now: 499))
        #expect(limiter.take("10.0.0.2", now: 0))  // another address has its own bucket
        #expect(limiter.take("10.0.0.1", now: 500))
        for i in 0..<ConnectLimiter.maxAddresses { _ = limiter.take("a\(i)", now: 1_000) }
        #expect(limiter.addressCount <= ConnectLimiter.maxAddresses)
        // One more address at the bound: the idle (full) buckets are dropped, so the map shrinks.
        #expect(limiter.take("b", now: 60_000))
        #expect(limiter.addressCount < 100)
    }

    // PX-1 over real sockets: a burst of upgrades from one address past --connects-per-ip is
    // refused with 429 (30 tries at 2 a second: passing them all would take 14 s).
    @Test func newConnectionsPerAddress() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--connects-per-ip", "2"])
            defer { g.stop() }
            var refusals: [String] = []
            var open: [WSClient] = []
            for _ in 0..<30 {
                do { open.append(try WSClient(port: g.port, path: "/ws")) } catch { refusals.append("\(error)") }
            }
            #expect(!refusals.isEmpty && refusals.allSatisfy { $0.contains("429") && $0.contains("42901") }, "\(refusals)")
            #expect(open.count >= 2)
            // REST is not a connection upgrade: not counted.
            #expect(try g.rest().call("GET", "/v1/rooms").status == 200)
        }
    }
}
