import Foundation
import Testing
import TestKit

/// The seed scenarios in-process (real routes, engine, hub; in-memory store, manual clock): REST
/// calls into the router, events observed by several sessions, and who receives nothing.
/// SmokeTests runs one of them against the real binary over sockets.
@Suite("Gateway scenarios in-process")
struct ScenarioTests {
    func join(_ c: SessionClient, _ room: String, _ extra: [String: Any] = [:]) throws -> [String: Any] {
        var args: [String: Any] = ["roomId": room]
        for (k, v) in extra { args[k] = v }
        return try c.expectOK(try c.command("room.join", args))
    }

    // RC-1, RC-2, RC-5, RC-6, RC-7
    @Test func rongCloudModerationReachesExactlyItsAudience() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        try Scenarios.rongCloudModeration(g)
    }

    // NIM-6, NIM-9, NIM-12, NIM-16
    @Test func nimRolesQueueAndKicks() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "nim", "creator": "owner"]).status == 201)
        let owner = try g.client("owner"), guest = try g.client("guest"), viewer = try g.client("viewer"), outsider = try g.client("outsider")
        _ = try join(owner, "nim")
        _ = try join(guest, "nim", ["ext": "{\"vip\":true}", "notifyExt": "hello"])
        // NIM-2/NIM-9: the enter notification carries notifyExt and the member's ext.
        let enter = try owner.waitFor("room.notification") { $0.obj("data").int("eventType") == 301 }
        #expect(enter.obj("data").str("notifyExt") == "hello")
        #expect(enter.obj("data").obj("source").str("ext") == "{\"vip\":true}")
        _ = try join(viewer, "nim")
        _ = [owner, guest, viewer].map { $0.drain(for: 0.2) }

        // NIM-12: a role change over REST notifies the room (307) and changes the type.
        let role = try rest.call("PUT", "/v1/rooms/nim/members/guest/role", ["role": "manager", "notifyExt": "promoted"])
        #expect(role.status == 200)
        #expect((role.json["members"] as? [[String: Any]])?.first?.str("type") == "manager")
        for c in [owner, guest, viewer] {
            let n = try c.waitFor("room.notification")
            #expect(n.obj("data").int("eventType") == 307)
            #expect(n.obj("data").str("notifyExt") == "promoted")
        }
        #expect(try rest.call("PUT", "/v1/rooms/nim/members/guest/role", ["role": "admin"]).json.str("field") == "role")

        // NIM-16: a transient element goes when its owner leaves: one 320 for the others.
        _ = try viewer.expectOK(try viewer.command("queue.offer", ["roomId": "nim", "key": "mic", "value": "viewer", "transient": true]))
        #expect(try owner.waitFor("room.notification").obj("data").obj("ext").str("changeType") == "offer")
        _ = owner.drain(for: 0.2)
        _ = guest.drain(for: 0.2)
        _ = try viewer.expectOK(try viewer.command("room.leave", ["roomId": "nim"]))
        let clear = try owner.waitFor("room.notification") { $0.obj("data").int("eventType") == 320 }
        #expect(clear.obj("data").obj("ext").str("changeType") == "partialClear")
        #expect(clear.obj("data").obj("ext").obj("elements").str("mic") == "viewer")
        #expect(try rest.call("GET", "/v1/rooms/nim/queue").json["elements"] as? [Any] != nil)

        // NIM-15: the new manager kicks from the client; NIM-6 reason 2 with the ext.
        _ = try join(viewer, "nim")
        _ = [owner, guest, viewer].map { $0.drain(for: 0.2) }
        _ = try guest.expectOK(try guest.command("manage.kick", ["roomId": "nim", "userId": "viewer", "notifyExt": "bye"]))
        let kicked = try viewer.waitFor("room.kicked")
        #expect(kicked.obj("data").int("reason") == 2)
        #expect(kicked.obj("data").str("ext") == "bye")
        #expect(try owner.waitFor("room.notification").obj("data").int("eventType") == 313)
        // A manager may not act on the creator.
        #expect(try guest.command("manage.kick", ["roomId": "nim", "userId": "owner"]).obj("error").int("code") == 40301)
        #expect(outsider.eventNames().isEmpty)
    }

    // ZIM-1, ZIM-2, ZIM-4, ZIM-5, ZIM-6
    @Test func zimCreateJoinSwitchAndLeaveAll() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        // ZIM users may be in several rooms; RC-4's default is one room per user.
        #expect(try g.rest().call("PATCH", "/v1/settings", ["multipleRoomsPerUser": true]).status == 200)
        let alice = try g.client("alice"), bob = try g.client("bob"), carol = try g.client("carol"), eve = try g.client("eve")
        _ = try join(alice, "z1", ["mode": "create", "room": ["name": "One", "destroy": ["policy": "whenEmpty", "seconds": 60]]])
        // ZIM-1: creating again fails; ZIM-2: joining a missing room fails.
        #expect(try bob.command("room.join", ["roomId": "z1", "mode": "create"]).obj("error").int("code") == 40901)
        #expect(try bob.command("room.join", ["roomId": "missing"]).obj("error").int("code") == 23410)
        _ = try join(bob, "z1")
        _ = try join(carol, "z2", ["mode": "enter"])
        _ = try join(eve, "other", ["mode": "enter"])
        _ = [alice, bob, carol, eve].map { $0.drain(for: 0.2) }

        // ZIM-5: alice switches z1 → z2.
        let switched = try alice.command("room.switch", ["from": "z1", "to": ["roomId": "z2"], "createIfMissing": false])
        _ = try alice.expectOK(switched)
        let states = alice.drain(for: 0.3).filter { $0.str("ev") == "room.status" }
            .map { "\($0.str("roomId") ?? ""):\($0.obj("data").str("zimState") ?? ""):\($0.obj("data").str("zimEvent") ?? "")" }
        #expect(states == ["z2:connecting:activeSwitch", "z2:connected:success", "z1:disconnected:success"])
        #expect(try bob.waitFor("room.memberChanged").obj("data")["members"].map { ($0 as? [[String: Any]])?.first?.str("action") } == "quit")
        #expect(try carol.waitFor("room.memberChanged").obj("data")["members"].map { ($0 as? [[String: Any]])?.first?.str("action") } == "join")
        #expect(eve.eventNames().isEmpty)

        // A switch to a missing room without creation fails with the seed's states.
        let failed = try alice.command("room.switch", ["from": "z2", "to": ["roomId": "nowhere"]])
        #expect(failed.obj("error").int("code") == 23410)
        let failStates = alice.drain(for: 0.3).map { $0.obj("data").str("zimEvent") ?? "" }
        #expect(failStates == ["activeSwitch", "switchFailed"])

        // ZIM-6: leave all rooms of this connection only.
        _ = try join(alice, "z3", ["mode": "enter"])
        let left = try alice.expectOK(try alice.command("room.leaveAll"))
        #expect(Set(left["roomIds"] as? [String] ?? []) == ["z2", "z3"])
    }
}
