import Foundation
import Testing
import TestKit

/// End-to-end smoke tests against the real `roomcast` binary over real sockets, so the wiring the
/// in-process tests skip stays covered: the CLI and its app, the HTTP server and its request
/// signing over the wire, WebSocket upgrades (and their Origin header) on every I/O loop, and the
/// engine's stream fanned out to every loop's hub. The same scenarios run in-process
/// (ScenarioTests, InProcessTests).
@Suite("Smoke tests over real sockets", .serialized)
struct SmokeTests {
    func join(_ c: ProtocolClient, _ room: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        var args: [String: Any] = ["roomId": room]
        for (k, v) in extra { args[k] = v }
        return try c.expectOK(try c.command("room.join", args))
    }

    // RC-1, RC-2, RC-5, RC-6, RC-7
    @Test func rongCloudModerationReachesExactlyItsAudience() throws {
        let g = try GatewayProcess()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "rc"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "elsewhere"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob"), dave = try g.client("dave"), carol = try g.client("carol")
        let joined = try join(alice, "rc")
        #expect(joined.obj("joinInfo").int("memberCount") == 1)
        try alice.waitFor("room.status") { $0.obj("data").str("status") == "joined" }
        _ = try join(bob, "rc")
        _ = try join(dave, "rc")
        _ = try join(carol, "elsewhere")
        // RC-2: alice saw bob and dave arrive.
        try alice.waitFor("room.memberChanged") { ($0.obj("data")["members"] as? [[String: Any]])?.first?.str("userId") == "dave" }
        _ = [alice, bob, dave, carol].map { $0.drain(for: 0.2) }

        // RC-6: mute dave with needNotify → every member; carol (another room) nothing.
        #expect(try rest.call("POST", "/v1/rooms/rc/mutes", ["userIds": ["dave"], "minutes": 5, "needNotify": true, "extra": "{\"k\":1}"]).status == 200)
        for c in [alice, bob, dave] {
            let e = try c.waitFor("room.ban")
            #expect(e.obj("data").int("banType") == 1)
            #expect(e.obj("data").int("durationTime") == 300_000)
            #expect(e.obj("data")["userIdList"] as? [String] == ["dave"])
            #expect(e.obj("data").str("extra") == "{\"k\":1}")
            #expect(e.int("offset") != nil && e.str("epoch") != nil)
        }
        #expect(carol.eventNames().isEmpty)

        // RC-7: dave's send is refused; alice's goes to the others.
        let refused = try dave.command("room.send", ["roomId": "rc", "content": "hi"])
        #expect(refused.obj("error").int("code") == 23408)
        _ = try alice.expectOK(try alice.command("room.send", ["roomId": "rc", "content": "hello"]))
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "hello")
        #expect(try dave.waitFor("room.message").obj("data").obj("message").str("sender") == "alice")
        #expect(!alice.eventNames().contains("room.message"))

        // RC-5: block bob with needNotify → everyone incl. bob; bob is removed and barred.
        #expect(try rest.call("POST", "/v1/rooms/rc/blocks", ["userIds": ["bob"], "minutes": 10, "needNotify": true]).status == 200)
        for c in [alice, bob, dave] { #expect(try c.waitFor("room.block").obj("data").int("operateType") == 1) }
        #expect(try bob.waitFor("room.kicked").obj("data").int("reason") == 5)
        try alice.waitFor("room.memberChanged") { ($0.obj("data")["members"] as? [[String: Any]])?.first?.str("action") == "quit" }
        let rejoin = try bob.command("room.join", ["roomId": "rc"])
        #expect(rejoin.obj("error").int("code") == 23409)
        try bob.waitFor("room.status") { $0.obj("data").str("status") == "joinFailed" && $0.obj("data")["autoRejoin"] as? Bool == false }
        #expect(carol.eventNames().isEmpty)
        _ = [alice, dave].map { $0.drain(for: 0.2) }

        // RC-5: unblock tells only bob.
        #expect(try rest.call("DELETE", "/v1/rooms/rc/blocks?userIds=bob&needNotify=true").status == 200)
        #expect(try bob.waitFor("room.block").obj("data").int("operateType") == 0)
        #expect(!alice.eventNames().contains("room.block"))
        #expect(!dave.eventNames().contains("room.block"))

        // RC-6 7: a global mute tells only the muted user, wherever they are.
        #expect(try rest.call("POST", "/v1/global-mutes", ["userIds": ["carol"], "minutes": 1, "needNotify": true]).status == 200)
        #expect(try carol.waitFor("room.ban").obj("data").int("banType") == 7)
        #expect(!alice.eventNames().contains("room.ban"))

        // RC-1: destroy tells the online members.
        #expect(try rest.call("DELETE", "/v1/rooms/rc").status == 200)
        #expect(try alice.waitFor("room.status").obj("data").str("status") == "destroyed")
        #expect(try dave.waitFor("room.status").obj("data").str("destroyType") == "manual")
        #expect(carol.eventNames().isEmpty)
    }

    // SPEC §2: the per-app Origin allowlist applies to the Origin header of a real WebSocket
    // upgrade.
    @Test func perAppOriginAllowlist() throws {
        let g = try GatewayProcess()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("PATCH", "/v1/settings", ["allowedOrigins": ["https://app.example.com"]]).status == 200)
        let good = try ProtocolClient(port: g.port, origin: "https://app.example.com")
        try good.connect(token: try rest.token("u1"))
        let bad = try ProtocolClient(port: g.port, origin: "https://evil.example.net")
        #expect(throws: (any Error).self) { try bad.connect(token: try rest.token("u2")) }
        #expect(bad.closeCode == 4003)
    }
}
