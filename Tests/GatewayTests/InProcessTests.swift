import Chat
import Foundation
@testable import Gateway
import Store
import Synchronization
import Testing
import TestKit
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
        defer { g.stop() }
        let rest = g.rest()
        for round in 0..<40 {
            let patches: [[UInt8]] = try ([
                ["maxRoomsPerUser": 2 + round % 7], ["historyLimitPerRoom": 100 + round],
                ["memberChangeEvents": round % 2 == 0], ["allowedOrigins": ["https://r\(round).example"]],
            ] as [[String: Any]]).map { Array(try JSONSerialization.data(withJSONObject: $0)) }
            let failures = Mutex(0)
            DispatchQueue.concurrentPerform(iterations: patches.count) { i in
                if (try? rest.call("PATCH", "/v1/settings", bytes: patches[i]).status) != 200 { failures.withLock { $0 += 1 } }
            }
            #expect(failures.withLock { $0 } == 0)
            let s = try rest.call("GET", "/v1/settings").json
            #expect((s["maxRoomsPerUser"] as? Int) == 2 + round % 7, "round \(round)")
            #expect((s["historyLimitPerRoom"] as? Int) == 100 + round, "round \(round)")
            #expect((s["memberChangeEvents"] as? Bool) == (round % 2 == 0), "round \(round)")
            #expect((s["allowedOrigins"] as? [String]) == ["https://r\(round).example"], "round \(round)")
        }
        // Durable with the acknowledged batch: the stored row has it.
        let row = try #require(try g.core.store.apps().first { $0.key == g.appKey })
        #expect(row.allowedOrigins == "https://r39.example")
        // The other app is untouched.
        let other = try g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret).call("GET", "/v1/settings").json
        #expect(other["allowedOrigins"] is NSNull && (other["maxRoomsPerUser"] as? Int) == AppSettings().maxRoomsPerUser)
    }

    // §2: a bad field is refused with its name and changes nothing.
    @Test func badSettingsChangeNothing() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let before = try g.rest().call("GET", "/v1/settings").body
        for (body, field) in [(["maxRoomsPerUser": 0, "maxRooms": 5], "maxRoomsPerUser"), (["historyRetentionSeconds": 59], "historyRetentionSeconds"),
                              (["allowedOrigins": Array(repeating: "https://a.example", count: 101)], "allowedOrigins"),
                              (["notificationLevel": 3], "notificationLevel")] as [([String: Any], String)] {
            let r = try g.rest().call("PATCH", "/v1/settings", body)
            #expect(r.status == 400 && r.json.int("code") == ErrorCode.invalidParameter.rawValue, "\(body)")
            #expect(r.json.str("field") == field, "\(body)")
        }
        #expect(try g.rest().call("GET", "/v1/settings").body == before)
    }

    // Per-app Origin allowlist (§2): a session from another Origin is closed with 4003 once the
    // PATCH is acknowledged.
    @Test func originAllowlistTakesEffectForNewSessions() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("PATCH", "/v1/settings", ["allowedOrigins": ["https://app.example"]]).status == 200)
        let allowed = g.session(origin: "https://app.example")
        try allowed.expectOK(allowed.command("connect", ["token": try g.rest().token("ann")]))
        let refused = g.session(origin: "https://evil.example")
        _ = try? refused.command("connect", ["token": try g.rest().token("bob")])
        #expect(refused.closeCode == CloseCode.originNotAllowed.rawValue)
        #expect(CloseCode.originNotAllowed.reconnect == .never)
    }

    // §2 tokens: the expiry notice, the grace period and the close, on the manual clock.
    @Test func tokenExpiryAndGraceWithoutSleeping() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let c = g.session()
        try c.expectOK(c.command("connect", ["token": try g.rest().token("ann", ttl: 60)]))
        g.advance(seconds: 30)
        #expect(!c.eventNames().contains("token.expired"))
        g.advance(seconds: 31)
        let notice = try c.waitFor("token.expired")
        #expect((notice["data"] as? [String: Any])?["graceSeconds"] as? Int == 60)
        #expect(c.closeCode == nil)
        // A refresh in the grace period keeps the connection.
        try c.expectOK(c.command("token.refresh", ["token": try g.rest().token("ann", ttl: 120)]))
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
        defer { g.stop() }
        let c = g.session()
        g.advance(seconds: 9)
        #expect(c.closeCode == nil)
        g.advance(seconds: 2)
        #expect(c.closeCode == CloseCode.notAuthenticated.rawValue)
    }

    // The op table drives dispatch: unknown ops, missing args and wrong types are refused with
    // the documented code and the field named.
    @Test func opTableDispatchRefusesBadMessages() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let c = try g.client("ann")
        let unknown = try c.command("room.dance", ["roomId": "r"])
        #expect((unknown["error"] as? [String: Any])?["code"] as? Int == ErrorCode.badRequest.rawValue)
        let missing = try c.command("room.join", nil)
        #expect((missing["error"] as? [String: Any])?["field"] as? String == "args")
        let noRoom = try c.command("room.send", ["content": "hi"])
        #expect((noRoom["error"] as? [String: Any])?["field"] as? String == "args.roomId")
        let wrongType = try c.command("manage.mute", ["roomId": "r", "userIds": "bob"])
        #expect((wrongType["error"] as? [String: Any])?["field"] as? String == "args.userIds")
        // `args` that is not an object is `args`; a number that is not an integer names its field
        // (Foundation's decoder names none for it); neither closes the connection.
        let arrayArgs = try c.commandText(#"{"id":900,"op":"room.info","args":[]}"#, id: 900)
        #expect((arrayArgs["error"] as? [String: Any])?["field"] as? String == "args", "\(arrayArgs)")
        for limit in ["1.5", "1e30", "9223372036854775808"] {
            let fractional = try c.commandText(#"{"id":901,"op":"room.history","args":{"roomId":"r","limit":\#(limit)}}"#, id: 901)
            #expect((fractional["error"] as? [String: Any])?["field"] as? String == "args.limit", "\(fractional)")
            #expect((fractional["error"] as? [String: Any])?["code"] as? Int == ErrorCode.invalidParameter.rawValue)
        }
        let already = try c.command("connect", ["token": "x"])
        #expect((already["error"] as? [String: Any])?["code"] as? Int == ErrorCode.badRequest.rawValue)
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
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "rc"]).status == 201)
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "elsewhere"]).status == 201)
        let alice = try g.client("alice"), dave = try g.client("dave"), carol = try g.client("carol")
        try alice.expectOK(alice.command("room.join", ["roomId": "rc"]))
        try dave.expectOK(dave.command("room.join", ["roomId": "rc"]))
        try carol.expectOK(carol.command("room.join", ["roomId": "elsewhere"]))
        _ = [alice, dave, carol].map { $0.drain() }
        #expect(try g.rest().call("POST", "/v1/rooms/rc/mutes", ["userIds": ["dave"], "minutes": 5, "needNotify": true, "extra": "x"]).status == 200)
        for c in [alice, dave] {
            let e = try c.waitFor("room.ban")
            let data = e["data"] as? [String: Any] ?? [:]
            #expect(data["banType"] as? Int == 1 && data["durationTime"] as? Int == 300_000 && data["extra"] as? String == "x")
        }
        #expect(carol.eventNames().isEmpty)
        let refused = try dave.command("room.send", ["roomId": "rc", "content": "hi"])
        #expect((refused["error"] as? [String: Any])?["code"] as? Int == ErrorCode.muted.rawValue)
        // Five minutes later the mute has expired (the engine's timer, on the manual clock).
        g.advance(seconds: 301)
        try dave.expectOK(dave.command("room.send", ["roomId": "rc", "content": "back"]))
        #expect(try alice.waitFor("room.message").description.contains("back"))
        #expect(!carol.eventNames().contains("room.message"))
    }

    // The HTTP layer's own refusals render through the error table (404 → 40400).
    @Test func unknownPathsAnswerWithTheTablesCode() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let r = try g.rest().call("GET", "/v1/nothing-here")
        #expect(r.status == 404 && r.json.int("code") == ErrorCode.noSuchPath.rawValue)
        let unsigned = try g.rest().call("GET", "/v1/rooms", headers: [])
        #expect(unsigned.status == 401 && unsigned.json.int("code") == ErrorCode.missingCredentials.rawValue)
    }

    // BX-1 in-process (DeliveryTests keeps the same over a dropped TCP connection): a client that
    // drops and comes back with its position gets exactly the events it missed, in order, then
    // live ones; a position from another server run or a recreated room is not resumed.
    @Test func resumeDeliversExactlyTheMissedEventsInOrder() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob")
        _ = try alice.expectOK(try alice.command("room.join", ["roomId": "r"]))
        _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
        for i in 0..<3 { _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "before\(i)"])) }
        var last = try bob.waitFor("room.message") { $0.obj("data").obj("message").str("content") == "before2" }
        let epoch = last.str("epoch")!
        let offset = last.int("offset")!
        let stream = bob.stream
        // Bob drops; the room moves on without him.
        bob.drop()
        for i in 0..<5 { _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "missed\(i)"])) }
        #expect(bob.eventNames().isEmpty)
        // He comes back with his position.
        let back = try g.client("bob")
        _ = try back.expectOK(try back.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": stream, "offset": offset]]))
        let events = back.drain()
        let replayed = events.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
        #expect(replayed == (0..<5).map { "missed\($0)" })
        let offsets = events.compactMap { $0.str("ev") == "room.message" ? $0.int("offset") : nil }
        #expect(offsets == offsets.sorted() && offsets.first ?? 0 > offset)
        let result = events.first { $0.str("ev") == "room.resume" }
        #expect(result?.obj("data")["resumed"] as? Bool == true)
        #expect(result?.obj("data").int("replayed") == 5)
        // Live events continue after the replay.
        _ = try alice.expectOK(try alice.command("room.send", ["roomId": "r", "content": "after"]))
        last = try back.waitFor("room.message")
        #expect(last.obj("data").obj("message").str("content") == "after")

        // A position from another server run cannot be resumed; a recreated room is a reset.
        let stale = try g.client("carol")
        _ = try stale.expectOK(try stale.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": "other-run", "offset": 3]]))
        #expect(try stale.waitFor("room.resume").obj("data").str("reason") == "serverRestarted")
        #expect(try rest.call("DELETE", "/v1/rooms/r").status == 200)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let reset = try g.client("dave")
        _ = try reset.expectOK(try reset.command("room.join", ["roomId": "r", "resume": ["epoch": epoch, "stream": stream, "offset": offset]]))
        let resetEvents = reset.drain()
        let statuses = resetEvents.filter { $0.str("ev") == "room.status" }.compactMap { $0.obj("data").str("status") }
        // RC-1: reset, then joined.
        #expect(statuses.firstIndex(of: "reset").map { i in statuses[(i + 1)...].contains("joined") } == true)
        #expect(resetEvents.first { $0.str("ev") == "room.resume" }?.obj("data").str("reason") == "epochChanged")
    }

    // ZIM-1 destroy policy: a room created with `whenEmpty` 60 s is destroyed 60 s after its last
    // member left, not before; a member coming back meanwhile keeps it (the engine's timer, on the
    // manual clock).
    @Test func emptyRoomIsDestroyedAfterItsDelay() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let alice = try g.client("alice"), bob = try g.client("bob")
        _ = try alice.expectOK(try alice.command("room.join", ["roomId": "z", "mode": "create", "room": ["destroy": ["policy": "whenEmpty", "seconds": 60]]]))
        _ = try alice.expectOK(try alice.command("room.leave", ["roomId": "z"]))
        g.advance(seconds: 59)
        #expect(try rest.call("GET", "/v1/rooms/z").status == 200)
        _ = try bob.expectOK(try bob.command("room.join", ["roomId": "z"]))
        g.advance(seconds: 120)
        #expect(try rest.call("GET", "/v1/rooms/z").status == 200)
        _ = try bob.expectOK(try bob.command("room.leave", ["roomId": "z"]))
        g.advance(seconds: 59)
        #expect(try rest.call("GET", "/v1/rooms/z").status == 200)
        g.advance(seconds: 2)
        #expect(try rest.call("GET", "/v1/rooms/z").status == 404)
        #expect(try bob.command("room.join", ["roomId": "z"]).obj("error").int("code") == ErrorCode.roomNotFound.rawValue)
    }

    // RC-6 7: a global mute ends when its minutes are over; until then the user cannot send in
    // any room.
    @Test func globalMuteExpiresOnTheClock() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let carol = try g.client("carol")
        _ = try carol.expectOK(try carol.command("room.join", ["roomId": "r"]))
        #expect(try rest.call("POST", "/v1/global-mutes", ["userIds": ["carol"], "minutes": 1]).status == 200)
        #expect(try carol.command("room.send", ["roomId": "r", "content": "x"]).obj("error").int("code") == ErrorCode.muted.rawValue)
        g.advance(seconds: 59)
        #expect(try carol.command("room.send", ["roomId": "r", "content": "x"]).obj("error").int("code") == ErrorCode.muted.rawValue)
        g.advance(seconds: 2)
        _ = try carol.expectOK(try carol.command("room.send", ["roomId": "r", "content": "back"]))
        #expect((try rest.call("GET", "/v1/global-mutes").json["users"] as? [Any])?.isEmpty == true)
    }
}

extension InProcessTests {
    // BX-1 bound: resume positions wait for their join; joins that fail cannot pile them up.
    @Test func pendingResumesAreBounded() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("PATCH", "/v1/settings", ["clientMessagesPerSecond": 1_000_000, "sendsPerUserPerSecond": 1_000_000]).status == 200)
        let c = try g.client("ann")
        let resume: [String: Any] = ["epoch": "e", "stream": "s", "offset": 1]
        for i in 0..<ClientSession.maxPendingResumes {
            let r = try c.command("room.join", ["roomId": "missing\(i)", "resume": resume])
            #expect(r.obj("error").int("code") == ErrorCode.roomNotFound.rawValue)
        }
        let refused = try c.command("room.join", ["roomId": "one-more", "resume": resume])
        #expect(refused.obj("error").int("code") == ErrorCode.limitExceeded.rawValue && refused.obj("error").str("field") == "args.resume")
    }
}
