import Foundation
import Testing
import TestKit

/// Every client operation of the WebSocket protocol (openapi/websocket.md), end to end: what the
/// caller gets back, who is told, and that a client in another room is told nothing. In-process
/// (real routes, engine and hub; in-memory store, manual clock).
@Suite("WebSocket protocol operations in-process")
struct ProtocolOpsTests {
    func ok(_ c: SessionClient, _ op: String, _ args: [String: Any] = [:]) throws -> [String: Any] {
        try c.expectOK(try c.command(op, args))
    }

    func errorCode(_ c: SessionClient, _ op: String, _ args: [String: Any]) throws -> Int? {
        try c.command(op, args).obj("error").int("code")
    }

    func notification(_ c: SessionClient, _ type: Int) throws -> [String: Any] {
        try c.waitFor("room.notification") { $0.obj("data").int("eventType") == type }.obj("data")
    }

    // RC-3, NIM-13, NIM-10, NIM-11, NIM-14
    @Test func roomQueriesUpdatesAndOtherDevices() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "ops", "creator": "alice", "multiDevice": "multiple"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "other"]).status == 201)
        let bob = try g.client("bob"), carol = try g.client("carol")
        _ = try ok(bob, "room.join", ["roomId": "ops"])
        _ = try ok(carol, "room.join", ["roomId": "other"])
        try carol.waitFor("room.status") { $0.obj("data").str("status") == "joined" }
        let tablet = try g.client("alice", device: "tablet")
        let alice = try g.client("alice", device: "phone")
        _ = try ok(alice, "room.join", ["roomId": "ops"])

        // RC-3: alice's other online device learns of the join; bob (another user) does not.
        let sync = try tablet.waitFor("room.multiLoginSync").obj("data")
        #expect(sync.str("roomId") == "ops" && sync.int("status") == 1)
        #expect(!bob.eventNames(within: 0.3).contains("room.multiLoginSync"))
        _ = alice.drain(for: 0)

        // NIM-1: room.info for a member; NIM-13: members and members by id.
        let info = try ok(alice, "room.info", ["roomId": "ops"]).obj("room")
        #expect(info.str("roomId") == "ops" && info.int("onlineUserCount") == 2)
        let members = try ok(bob, "room.members", ["roomId": "ops", "order": "asc"])
        #expect((members["members"] as? [[String: Any]])?.compactMap { $0.str("userId") } == ["bob", "alice"])
        #expect(members.int("total") == 2)
        let byIds = try ok(alice, "room.membersByIds", ["roomId": "ops", "userIds": ["bob"]])
        #expect((byIds["members"] as? [[String: Any]])?.first?.str("userId") == "bob")
        // Carol is not in the room: member-only queries are refused and change nothing.
        #expect(try errorCode(carol, "room.members", ["roomId": "ops"]) == 23406)
        #expect(try errorCode(carol, "room.info", ["roomId": "ops"]) == 23406)

        // NIM-10: the creator updates the room; members get 312; a common member may not.
        let updated = try ok(alice, "room.update", ["roomId": "ops", "name": "Renamed", "needNotify": true, "notifyExt": "why"])
        #expect(updated.obj("room").str("name") == "Renamed")
        let n312 = try notification(bob, 312)
        #expect(n312.str("notifyExt") == "why" && n312.obj("source").str("userId") == "alice")
        #expect(try errorCode(bob, "room.update", ["roomId": "ops", "name": "Mine"]) == 40301)

        // NIM-14: bob changes his own member info; the room gets 316 with the new nickname.
        _ = try ok(bob, "member.update", ["roomId": "ops", "nickname": "Bobby", "notifyExt": "hi"])
        let n316 = try notification(alice, 316)
        #expect(n316.obj("source").str("nickname") == "Bobby")
        #expect(try errorCode(bob, "member.update", ["roomId": "ops"]) == 1002)

        // NIM-8: a message, then history as another member sees it.
        _ = try ok(alice, "room.send", ["roomId": "ops", "content": "first", "type": "custom"])
        let history = try ok(bob, "room.history", ["roomId": "ops", "limit": 10])
        let contents = (history["messages"] as? [[String: Any]])?.compactMap { $0.str("content") } ?? []
        #expect(contents.contains("first"))
        #expect(try errorCode(carol, "room.history", ["roomId": "ops"]) == 23406)

        // Leaving every room answers with the rooms left.
        #expect(try ok(bob, "room.leaveAll")["roomIds"] as? [String] == ["ops"])
        #expect(carol.eventNames(within: 0.2).isEmpty)
        #expect(tablet.eventNames(within: 0).allSatisfy { $0 == "room.multiLoginSync" })
    }

    // NIM-16, RC-10, ZIM-8
    @Test func queueAndAttributesOperations() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "q", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "other"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob"), carol = try g.client("carol")
        for c in [alice, bob] { _ = try ok(c, "room.join", ["roomId": "q"]) }
        _ = try ok(carol, "room.join", ["roomId": "other"])
        try carol.waitFor("room.status") { $0.obj("data").str("status") == "joined" }
        _ = [alice, bob].map { $0.drain(for: 0.2) }

        // NIM-16: offer (317 offer to every member), list, batch update (320, missing keys), poll, drop.
        _ = try ok(bob, "queue.offer", ["roomId": "q", "key": "k1", "value": "v1"])
        let offer = try notification(alice, 317).obj("ext")
        #expect(offer.str("changeType") == "offer" && offer.str("key") == "k1" && offer.str("value") == "v1")
        #expect(try notification(bob, 317).obj("ext").str("changeType") == "offer")
        let list = try ok(alice, "queue.list", ["roomId": "q"])
        #expect((list["elements"] as? [[String: Any]])?.map { [$0.str("key"), $0.str("value")] } == [["k1", "v1"]])
        let batch = try ok(alice, "queue.batchUpdate", ["roomId": "q", "elements": ["k1": "v2", "zz": "x"], "needNotify": true, "notifyExt": "b"])
        #expect(batch["missingKeys"] as? [String] == ["zz"])
        let n320 = try notification(bob, 320)
        #expect(n320.obj("ext").obj("elements").str("k1") == "v2" && n320.str("notifyExt") == "b")
        let polled = try ok(bob, "queue.poll", ["roomId": "q"])
        #expect(polled.str("key") == "k1" && polled.str("value") == "v2")
        #expect(try notification(alice, 317).obj("ext").str("changeType") == "poll")
        #expect(try errorCode(bob, "queue.poll", ["roomId": "q"]) == 40401)
        _ = try ok(bob, "queue.offer", ["roomId": "q", "key": "k2", "value": "v"])
        _ = try ok(alice, "queue.drop", ["roomId": "q"])
        try alice.waitFor("room.notification") { $0.obj("data").obj("ext").str("changeType") == "drop" }
        #expect((try ok(alice, "queue.list", ["roomId": "q"])["elements"] as? [Any])?.isEmpty == true)

        // RC-10 / ZIM-8: attributes set, read, removed; every member is told.
        let set = try ok(alice, "attributes.set", ["roomId": "q", "entries": ["seat": "1"]])
        #expect((set["entries"] as? [[String: Any]])?.first?.str("key") == "seat")
        let changed = try bob.waitFor("room.attributes").obj("data")
        #expect((changed["updated"] as? [[String: Any]])?.first?.str("value") == "1" && changed.str("operator") == "alice")
        let got = try ok(bob, "attributes.get", ["roomId": "q", "keys": ["seat"]])
        #expect((got["entries"] as? [[String: Any]])?.first?.str("owner") == "alice")
        #expect(try errorCode(bob, "attributes.remove", ["roomId": "q", "keys": ["seat"]]) == 40301)
        #expect(try ok(alice, "attributes.remove", ["roomId": "q", "keys": ["seat"]])["keys"] as? [String] == ["seat"])
        #expect(try bob.waitFor("room.attributes").obj("data")["removed"] as? [String] == ["seat"])
        #expect(try errorCode(carol, "attributes.get", ["roomId": "q"]) == 23406)
        #expect(carol.eventNames(within: 0.2).isEmpty)
    }

    // NIM-12, NIM-15, NIM-17, NIM-6
    @Test func managerOperations() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "m", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "other"]).status == 201)
        let alice = try g.client("alice"), bob = try g.client("bob"), dave = try g.client("dave"), carol = try g.client("carol")
        for c in [alice, bob, dave] { _ = try ok(c, "room.join", ["roomId": "m"]) }
        _ = try ok(carol, "room.join", ["roomId": "other"])
        try carol.waitFor("room.status") { $0.obj("data").str("status") == "joined" }
        _ = [alice, bob, dave].map { $0.drain(for: 0.2) }

        // NIM-12: a common member may not manage; the creator makes bob a manager (307, always sent).
        #expect(try errorCode(dave, "manage.mute", ["roomId": "m", "userIds": ["bob"]]) == 40301)
        let role = try ok(alice, "manage.setRole", ["roomId": "m", "userId": "bob", "role": "manager"])
        #expect((role["members"] as? [[String: Any]])?.first?.str("type") == "manager")
        #expect(try notification(dave, 307).obj("source").str("userId") == "alice")

        // NIM-15: a temporary mute (314 with its duration) refuses dave's sends; unmute (315) lifts it.
        _ = try ok(bob, "manage.mute", ["roomId": "m", "userIds": ["dave"], "seconds": 60, "notifyExt": "quiet"])
        let n314 = try notification(alice, 314)
        #expect(n314.obj("ext").int("duration") == 60 && (n314["targets"] as? [[String: Any]])?.first?.str("userId") == "dave")
        #expect(try errorCode(dave, "room.send", ["roomId": "m", "content": "x"]) == 23408)
        _ = try ok(bob, "manage.unmute", ["roomId": "m", "userIds": ["dave"], "kind": "temporary"])
        _ = try notification(dave, 315)
        _ = try ok(dave, "room.send", ["roomId": "m", "content": "back"])

        // NIM-17: room-wide mute (318) stops common members, not managers; 319 lifts it.
        _ = try ok(alice, "manage.roomMute", ["roomId": "m", "muted": true])
        _ = try notification(dave, 318)
        #expect(try errorCode(dave, "room.send", ["roomId": "m", "content": "x"]) == 23408)
        _ = try ok(bob, "room.send", ["roomId": "m", "content": "manager speaks"])
        _ = try ok(alice, "manage.roomMute", ["roomId": "m", "muted": false])
        _ = try notification(dave, 319)

        // NIM-12: block removes dave (303 to the room, kicked reason 5) and bars his return; unblock (304).
        _ = try ok(bob, "manage.block", ["roomId": "m", "userIds": ["dave"], "minutes": 5])
        _ = try notification(alice, 303)
        #expect(try dave.waitFor("room.kicked").obj("data").int("reason") == 5)
        #expect(try errorCode(dave, "room.join", ["roomId": "m"]) == 23409)
        _ = try ok(bob, "manage.unblock", ["roomId": "m", "userIds": ["dave"]])
        _ = try notification(alice, 304)
        _ = try ok(dave, "room.join", ["roomId": "m"])

        // NIM-6: kick (313 to the others; the kicked connection gets reason 2 with the notifyExt).
        _ = alice.drain(for: 0.2)
        _ = try ok(bob, "manage.kick", ["roomId": "m", "userId": "dave", "notifyExt": "bye"])
        let kicked = try dave.waitFor("room.kicked").obj("data")
        #expect(kicked.int("reason") == 2 && kicked.str("ext") == "bye")
        #expect(try notification(alice, 313).str("notifyExt") == "bye")
        // A manager may not act on the creator.
        #expect(try errorCode(bob, "manage.kick", ["roomId": "m", "userId": "alice"]) == 40301)
        #expect(carol.eventNames(within: 0.2).isEmpty)
    }
}
