import Chat
import Foundation
@testable import Gateway
import Store
import Synchronization
import Testing
import Wire

/// Gateway behaviour in-process: the real routes, engine, store (in memory) and hub, a manual
/// clock, no sockets and no sleeps.
@Suite("Gateway in-process")
struct InProcessTests {
    // §2 settings: each PATCH is one command the engine applies, so concurrent changes of
    // different fields all stay (they used to overwrite each other), and the Origin allowlist is
    // durable in the same batch as the rest.
    @Test func concurrentSettingsChangesAllStay() throws {
        let g = try InProcessGateway()
        for round in 0..<40 {
            let patches: [[UInt8]] = try ([
                ["maxRoomsPerUser": 2 + round % 7], ["historyLimitPerRoom": 100 + round],
                ["memberChangeEvents": round % 2 == 0], ["allowedOrigins": ["https://r\(round).example"]],
            ] as [[String: Any]]).map { Array(try JSONSerialization.data(withJSONObject: $0)) }
            let failures = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: patches.count) { i in
                if (try? g.call(.PATCH, "/v1/settings", bytes: patches[i]).status) != 200 { failures.withLock { $0 += 1 } }
            }
            #expect(failures.withLock { $0 } == 0)
            let s = try g.call(.GET, "/v1/settings").json
            #expect((s["maxRoomsPerUser"] as? Int) == 2 + round % 7, "round \(round)")
            #expect((s["historyLimitPerRoom"] as? Int) == 100 + round, "round \(round)")
            #expect((s["memberChangeEvents"] as? Bool) == (round % 2 == 0), "round \(round)")
            #expect((s["allowedOrigins"] as? [String]) == ["https://r\(round).example"], "round \(round)")
        }
        // Durable with the acknowledged batch: the stored row has it.
        let row = try #require(try g.core.store.apps().first { $0.key == g.appKey })
        #expect(row.allowedOrigins == "https://r39.example")
        // The other app is untouched.
        let other = try g.call(.GET, "/v1/settings", headers: g.signature(app: "otherapp", secret: "other-secret-123456")).json
        #expect(other["allowedOrigins"] is NSNull && (other["maxRoomsPerUser"] as? Int) == AppSettings().maxRoomsPerUser)
    }

    // §2: a bad field is refused with its name and changes nothing.
    @Test func badSettingsChangeNothing() throws {
        let g = try InProcessGateway()
        let before = try g.call(.GET, "/v1/settings").body
        for (body, field) in [(["maxRoomsPerUser": 0, "maxRooms": 5], "maxRoomsPerUser"), (["historyRetentionSeconds": 59], "historyRetentionSeconds"),
                              (["allowedOrigins": Array(repeating: "https://a.example", count: 101)], "allowedOrigins"),
                              (["notificationLevel": 3], "notificationLevel")] as [([String: Any], String)] {
            let r = try g.call(.PATCH, "/v1/settings", body)
            #expect(r.status == 400 && r.code == ChatErrorCode.invalidParameter.rawValue, "\(body)")
            #expect(r.field == field, "\(body)")
        }
        #expect(try g.call(.GET, "/v1/settings").body == before)
    }

    // Per-app Origin allowlist (§2): a session from another Origin is closed with 4003 once the
    // PATCH is acknowledged.
    @Test func originAllowlistTakesEffectForNewSessions() throws {
        let g = try InProcessGateway()
        #expect(try g.call(.PATCH, "/v1/settings", ["allowedOrigins": ["https://app.example"]]).status == 200)
        let allowed = try g.client(nil, origin: "https://app.example")
        try allowed.expectOK(allowed.command("connect", ["token": try g.token("ann")]))
        let refused = try g.client(nil, origin: "https://evil.example")
        _ = try? refused.command("connect", ["token": try g.token("bob")])
        #expect(refused.closeCode == CloseCode.originNotAllowed.rawValue)
        #expect(CloseCode.originNotAllowed.reconnect == .never)
    }

    // §2 tokens: the expiry notice, the grace period and the close, on the manual clock.
    @Test func tokenExpiryAndGraceWithoutSleeping() throws {
        let g = try InProcessGateway()
        let c = try g.client(nil)
        try c.expectOK(c.command("connect", ["token": try g.token("ann", ttl: 60)]))
        g.advance(seconds: 30)
        #expect(!c.eventNames().contains("token.expired"))
        g.advance(seconds: 31)
        let notice = try c.waitFor("token.expired")
        #expect((notice["data"] as? [String: Any])?["graceSeconds"] as? Int == 60)
        #expect(c.closeCode == nil)
        // A refresh in the grace period keeps the connection.
        try c.expectOK(c.command("token.refresh", ["token": try g.token("ann", ttl: 120)]))
        g.advance(seconds: 100)
        #expect(c.closeCode == nil)
        g.advance(seconds: 21)
        _ = try c.waitFor("token.expired")
        g.advance(seconds: 60)
        #expect(c.closeCode == CloseCode.tokenExpired.rawValue)
        #expect(CloseCode.tokenExpired.reconnect == .withNewToken)
    }

    // §2: a connection that never sends connect is closed with 4001 after the connect timeout.
    @Test func connectTimeoutWithoutSleeping() throws {
        let g = try InProcessGateway()
        let c = try g.client(nil)
        g.advance(seconds: 9)
        #expect(c.closeCode == nil)
        g.advance(seconds: 2)
        #expect(c.closeCode == CloseCode.notAuthenticated.rawValue)
    }

    // The op table drives dispatch: unknown ops, missing args and wrong types are refused with
    // the documented code and the field named.
    @Test func opTableDispatchRefusesBadMessages() throws {
        let g = try InProcessGateway()
        let c = try g.client("ann")
        let unknown = try c.command("room.dance", ["roomId": "r"])
        #expect((unknown["error"] as? [String: Any])?["code"] as? Int == GatewayErrorCode.badRequest.rawValue)
        let missing = try c.command("room.join", nil)
        #expect((missing["error"] as? [String: Any])?["field"] as? String == "args")
        let noRoom = try c.command("room.send", ["content": "hi"])
        #expect((noRoom["error"] as? [String: Any])?["field"] as? String == "args.roomId")
        let wrongType = try c.command("manage.mute", ["roomId": "r", "userIds": "bob"])
        #expect((wrongType["error"] as? [String: Any])?["field"] as? String == "args.userIds")
        let already = try c.command("connect", ["token": "x"])
        #expect((already["error"] as? [String: Any])?["code"] as? Int == GatewayErrorCode.badRequest.rawValue)
        // Every op of the table is known to the dispatcher (none answers "unknown op").
        for op in OpTable.all where op.name != "connect" {
            let r = try c.command(op.name, [:])
            let message = (r["error"] as? [String: Any])?["message"] as? String ?? ""
            #expect(!message.hasPrefix("unknown op"), "\(op.name)")
        }
    }

    // RC-6, NIM-12: moderation from REST reaches every member of the room and no one else; the
    // operator's own client moderation (NIM-15) always notifies.
    @Test func moderationReachesExactlyTheRoom() throws {
        let g = try InProcessGateway()
        #expect(try g.call(.POST, "/v1/rooms", ["roomId": "rc"]).status == 201)
        #expect(try g.call(.POST, "/v1/rooms", ["roomId": "elsewhere"]).status == 201)
        let alice = try g.client("alice"), dave = try g.client("dave"), carol = try g.client("carol")
        try alice.expectOK(alice.command("room.join", ["roomId": "rc"]))
        try dave.expectOK(dave.command("room.join", ["roomId": "rc"]))
        try carol.expectOK(carol.command("room.join", ["roomId": "elsewhere"]))
        _ = [alice, dave, carol].map { $0.drain() }
        #expect(try g.call(.POST, "/v1/rooms/rc/mutes", ["userIds": ["dave"], "minutes": 5, "needNotify": true, "extra": "x"]).status == 200)
        for c in [alice, dave] {
            let e = try c.waitFor("room.ban")
            let data = e["data"] as? [String: Any] ?? [:]
            #expect(data["banType"] as? Int == 1 && data["durationTime"] as? Int == 300_000 && data["extra"] as? String == "x")
        }
        #expect(carol.eventNames().isEmpty)
        let refused = try dave.command("room.send", ["roomId": "rc", "content": "hi"])
        #expect((refused["error"] as? [String: Any])?["code"] as? Int == ChatErrorCode.muted.rawValue)
        // Five minutes later the mute has expired (the engine's timer, on the manual clock).
        g.advance(seconds: 301)
        try dave.expectOK(dave.command("room.send", ["roomId": "rc", "content": "back"]))
        #expect(try alice.waitFor("room.message").description.contains("back"))
        #expect(!carol.eventNames().contains("room.message"))
    }

    // The HTTP layer's own refusals render through the error table (404 → 40400).
    @Test func unknownPathsAnswerWithTheTablesCode() throws {
        let g = try InProcessGateway()
        let r = try g.call(.GET, "/v1/nothing-here")
        #expect(r.status == 404 && r.code == GatewayErrorCode.noSuchPath.rawValue)
        let unsigned = try g.call(.GET, "/v1/rooms", headers: [])
        #expect(unsigned.status == 401 && unsigned.code == GatewayErrorCode.missingCredentials.rawValue)
    }
}
