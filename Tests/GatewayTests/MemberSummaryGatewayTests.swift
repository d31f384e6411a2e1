import Chat
@testable import Gateway
import Testing
import TestKit
import Wire

/// AU-4 through the gateway: the app's threshold and interval are settings, a join may ask for
/// member counts only, and `room.members` reaches whom the WebSocket document says, in the room's
/// stream; nobody else gets it.
@Suite("Member summaries through the gateway (AU-4)")
struct MemberSummaryGatewayTests {
    static func events(_ frames: [[String: Any]], _ name: String) -> [[String: Any]] { frames.filter { $0.str("ev") == name } }

    @Test("AU-4: past the threshold joins are summarized in the stream; counts-only joins get counts; another room's members get nothing")
    func summariesOverTheWire() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let set = try rest.call("PATCH", "/v1/settings", ["memberEventsThreshold": 2, "memberSummaryIntervalMs": 1000])
        #expect(set.status == 200 && set.json["memberEventsThreshold"] as? Int == 2 && set.json["memberSummaryIntervalMs"] as? Int == 1000)
        for room in ["r", "other"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let elsewhere = try g.client("elsewhere")
        _ = try elsewhere.expectOK(try elsewhere.command("room.join", ["roomId": "other"]))
        let counter = try g.client("counter")
        _ = try counter.expectOK(try counter.command("room.join", ["roomId": "r", "memberEvents": "counts"]))
        let alice = try g.client("alice")
        _ = try alice.expectOK(try alice.command("room.join", ["roomId": "r"]))
        var late: [SessionClient] = []
        for u in ["b", "c", "d"] {
            let s = try g.client(u)
            _ = try s.expectOK(try s.command("room.join", ["roomId": "r"]))
            late.append(s)
        }
        g.settle()
        let aliceBefore = alice.drain()
        // alice joined second (told to no one one by one but counter, which takes counts only);
        // b, c and d past the threshold: nobody is told of them one by one.
        #expect(Self.events(aliceBefore, "room.memberChanged").isEmpty, "\(aliceBefore)")
        #expect(Self.events(aliceBefore, "room.notification").isEmpty)
        #expect(Self.events(counter.drain(), "room.memberChanged").isEmpty)
        g.advance(seconds: 1)
        g.settle()
        let summary = Self.events(alice.drain(), "room.members")
        #expect(summary.count == 1)
        let data = summary.first?.obj("data")
        #expect(data?.int("memberCount") == 5 && data?.int("joined") == 3 && data?.int("left") == 0)
        #expect((data?["joinedIds"] as? [String]) == ["b", "c", "d"])
        // In the room's stream: it has an offset, so a resume replays it.
        #expect(summary.first?.int("offset") != nil)
        let counts = Self.events(counter.drain(), "room.members")
        #expect(counts.count == 1 && counts.first?.obj("data").int("joined") == 5 && counts.first?.obj("data")["joinedIds"] == nil)
        #expect(Self.events(elsewhere.drain(), "room.members").isEmpty)
    }

    @Test("AU-4: the rooms a connection asked counts for are bounded: joins that failed do not pile up, a room left is forgotten")
    func countsOnlyChoicesAreBounded() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        // The per-connection message rate is not what this test is about.
        #expect(try g.rest().call("PATCH", "/v1/settings", ["clientMessagesPerSecond": 10_000]).status == 200)
        let bob = try g.client("bob")
        for i in 0..<(3 * ClientSession.maxPendingResumes) {
            let reply = try bob.command("room.join", ["roomId": "missing-\(i)", "memberEvents": "counts"])
            #expect(reply.obj("error").int("code") != nil)
        }
        _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r", "memberEvents": "counts"]))
        g.settle()
        let core = g.core
        func held() -> (count: Int, inRoom: Bool) {
            g.onLoop { () -> (Int, Bool) in
                let s = core.hubs.hub(0)!.sessions.values.first { $0.userId == "bob" }
                return (s?.memberCountsRooms.count ?? -1, s?.memberCountsOnly(in: RoomKey(app: s?.app ?? "", roomId: "r")) ?? false)
            }
        }
        let joined = held()
        #expect(joined.count <= ClientSession.maxPendingResumes + 1 && joined.inRoom, "\(joined)")
        _ = try bob.expectOK(try bob.command("room.leave", ["roomId": "r"]))
        g.settle()
        #expect(held().inRoom == false)
    }

    @Test("AU-4: a bad memberEvents or setting names its field and changes nothing")
    func badInputNamesTheField() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let bob = try g.client("bob")
        let reply = try bob.command("room.join", ["roomId": "r", "memberEvents": "some"])
        #expect(reply.obj("error").int("code") == ErrorCode.invalidParameter.rawValue && reply.obj("error").str("field") == "memberEvents", "\(reply)")
        let members = try rest.call("GET", "/v1/rooms/r/members").json["members"] as? [[String: Any]] ?? []
        #expect(members.isEmpty, "\(members)")
        for (body, field) in [(["memberEventsThreshold": -1], "memberEventsThreshold"), (["memberSummaryIntervalMs": 10], "memberSummaryIntervalMs")] {
            let r = try rest.call("PATCH", "/v1/settings", body)
            #expect(r.status == 400 && r.json["field"] as? String == field, "\(r.json)")
        }
        let settings = try rest.call("GET", "/v1/settings").json
        #expect(settings["memberEventsThreshold"] as? Int == 0 && settings["memberSummaryIntervalMs"] as? Int == Limits.defaultMemberSummaryIntervalMilliseconds)
    }
}

/// AU-1: a room's tags with how many present members carry each (what the console shows).
@Suite("A room's tags (AU-1)")
struct RoomTagsTests {
    @Test("AU-1: GET /v1/rooms/{roomId}/tags lists the present members' tags and counts, by tag; a departure takes its tags away")
    func roomTagsAndCounts() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        #expect(try rest.call("GET", "/v1/rooms/r/tags").json["tags"] as? [[String: Any]] != nil)
        let vip = try g.client("vip"), cn = try g.client("cn")
        _ = try vip.expectOK(try vip.command("room.join", ["roomId": "r", "tags": ["vip", "cn"]]))
        _ = try cn.expectOK(try cn.command("room.join", ["roomId": "r", "tags": ["cn"]]))
        g.settle()
        func tags() throws -> [String] {
            let list = try rest.call("GET", "/v1/rooms/r/tags").json["tags"] as? [[String: Any]] ?? []
            return list.map { "\($0.str("tag") ?? "?")=\($0.int("count") ?? -1)" }
        }
        #expect(try tags() == ["cn=2", "vip=1"])
        _ = try vip.expectOK(try vip.command("room.leave", ["roomId": "r"]))
        g.settle()
        #expect(try tags() == ["cn=1"])
        // A missing room is 404 naming it.
        let missing = try rest.call("GET", "/v1/rooms/nope/tags")
        #expect(missing.status == 404 && missing.json.str("field") == "roomId", "\(missing.text)")
    }
}
