import Chat
import Testing
import TestKit
import Wire

/// TR-4: a join may ask for the room's last messages first (`rewind`): those the member may see,
/// oldest first, before anything published after its join; not with a resume, which replays what
/// the client missed instead; a bad count names the field and joins nothing.
@Suite("Rewind on join (TR-4)")
struct RewindTests {
    static func contents(_ events: [[String: Any]]) -> [String] {
        events.filter { $0.str("ev") == "room.message" }.compactMap { $0.obj("data").obj("message").str("content") }
    }

    @Test("TR-4: the last messages this member may see, in stream order, before live events; none of another room's")
    func rewindGivesTheLastMessagesFirst() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        for room in ["r", "other"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let elsewhere = try g.client("elsewhere")
        _ = try elsewhere.expectOK(try elsewhere.command("room.join", ["roomId": "other"]))
        _ = elsewhere.drain()
        for i in 0..<4 { #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m\(i)"]).status == 201) }
        // AU-2: a message for carol only is not bob's to see, now or rewound.
        #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "for carol", "targets": ["carol"]]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms/other/messages", ["content": "other room"]).status == 201)
        #expect(try rest.call("PUT", "/v1/rooms/r/mute", ["muted": false]).status == 200)  // a room event, not a message
        g.settle()

        let bob = try g.client("bob")
        let joined = try bob.expectOK(try bob.command("room.join", ["roomId": "r", "rewind": 3])).obj("joinInfo")
        #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "live"]).status == 201)
        g.settle()
        let seen = bob.drain()
        #expect(Self.contents(seen) == ["m1", "m2", "m3", "live"], "\(Self.contents(seen))")
        // Offsets in stream order, none past the join's position before the live message.
        let offsets = seen.filter { $0.str("ev") == "room.message" }.compactMap { $0.int("offset") }
        #expect(offsets == offsets.sorted() && Set(offsets).count == offsets.count)
        let position = try #require(joined.int("offset"))
        #expect(offsets.prefix(3).allSatisfy { $0 <= position })
        // The other room's member got its own room's message, and nothing of r's.
        #expect(Self.contents(elsewhere.drain()) == ["other room"])
    }

    @Test("TR-4: more than the room holds gives what it holds; with a resume only what was missed comes, once")
    func rewindAndResume() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        for i in 0..<2 { #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "m\(i)"]).status == 201) }
        g.settle()
        let bob = try g.client("bob")
        let joined = try bob.expectOK(try bob.command("room.join", ["roomId": "r", "rewind": Limits.maxRewindMessages])).obj("joinInfo")
        g.settle()
        let first = bob.drain()
        #expect(Self.contents(first) == ["m0", "m1"])
        let last = try #require(first.compactMap { $0.int("offset") }.max())
        let epoch = try #require(joined.obj("room").str("epoch"))
        // The connection drops; one more message; the resume gives that one only, not the rewind's.
        bob.drop()
        g.settle()
        #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "missed"]).status == 201)
        let again = try g.client("bob")
        _ = try again.expectOK(try again.command("room.join", ["roomId": "r", "rewind": 5,
                                                               "resume": ["epoch": epoch, "stream": bob.stream, "offset": last]]))
        g.settle()
        #expect(Self.contents(again.drain()) == ["missed"])
    }

    @Test("TR-4: a rewind of 0 or more than the bound names the field, and joins nothing")
    func badRewindNamesTheField() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let bob = try g.client("bob")
        for bad in [0, Limits.maxRewindMessages + 1, -1] {
            let reply = try bob.command("room.join", ["roomId": "r", "rewind": bad])
            #expect(reply.obj("error").int("code") == ErrorCode.invalidParameter.rawValue && reply.obj("error").str("field") == "rewind", "\(reply)")
        }
        #expect(try rest.call("POST", "/v1/rooms/r/messages", ["content": "after"]).status == 201)
        g.settle()
        #expect(Self.contents(bob.drain()).isEmpty)
        let members = try rest.call("GET", "/v1/rooms/r/members").json["members"] as? [[String: Any]] ?? []
        #expect(members.isEmpty, "\(members)")
    }
}
