import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// AU-3 on every surface: native `POST /v1/messages` and `/v1/messages/broadcast`, RongCloud's
/// chatroom publish and broadcast, Nexconn's open-channel send and broadcast — who receives,
/// who must not, and refusals with each surface's code naming the caller's own parameter,
/// changing nothing.
@Suite("Many rooms at once on every surface (AU-3)")
struct MultiRoomSurfaceTests {
    typealias J = [String: Any]

    /// Rooms a, b, c and an empty one; one member in each of a, b, c.
    func rooms(_ g: InProcessGateway) throws -> (a: SessionClient, b: SessionClient, c: SessionClient) {
        for r in ["a", "b", "c", "empty"] { #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": r]).status == 201) }
        let a = try g.client("ua"), b = try g.client("ub"), c = try g.client("uc")
        _ = try a.expectOK(try a.command("room.join", ["roomId": "a"]))
        _ = try b.expectOK(try b.command("room.join", ["roomId": "b"]))
        _ = try c.expectOK(try c.command("room.join", ["roomId": "c"]))
        g.settle()
        for s in [a, b, c] { _ = s.drain() }
        return (a, b, c)
    }

    func messages(_ s: SessionClient) -> [J] {
        s.drain().filter { $0.str("ev") == "room.message" }.map { $0.obj("data").obj("message") }
    }

    @Test("AU-3: native list send and broadcast reach the named rooms, or every room with members, and nobody else")
    func native() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (a, b, c) = try rooms(g)
        let rest = g.rest()
        let sent = try rest.call("POST", "/v1/messages", ["roomIds": ["a", "b"], "content": "two rooms", "fromUserId": "ops"])
        #expect(sent.status == 201, "\(sent.text)")
        let list = sent.json["messages"] as? [J] ?? []
        #expect(list.map { $0.str("roomId") } == ["a", "b"])
        g.settle()
        #expect(messages(a).map { $0.str("content") } == ["two rooms"])
        #expect(messages(b).map { $0.str("content") } == ["two rooms"])
        #expect(messages(c).isEmpty, "room c was not named")
        let history = try rest.call("GET", "/v1/rooms/a/messages?order=asc").json["messages"] as? [J] ?? []
        #expect(history.map { $0.str("content") } == ["two rooms"])

        // A missing room refuses the whole call with the field named; nothing reaches a or b.
        let missing = try rest.call("POST", "/v1/messages", ["roomIds": ["a", "nope"], "content": "x"])
        #expect(missing.status == 404 && missing.json.int("code") == ErrorCode.roomNotFound.rawValue && missing.json.str("field") == "roomIds")
        let tooMany = try rest.call("POST", "/v1/messages", ["roomIds": (0...Limits.maxRoomsPerSend).map { "r\($0)" }, "content": "x"])
        #expect(tooMany.status == 400 && tooMany.json.str("field") == "roomIds")
        g.settle()
        #expect(messages(a).isEmpty && messages(b).isEmpty)

        let cast = try rest.call("POST", "/v1/messages/broadcast", ["content": "everyone", "fromUserId": "ops"])
        #expect(cast.status == 201 && cast.json.int("rooms") == 3, "\(cast.text)")
        let id = try #require(cast.json.str("messageId"))
        g.settle()
        for s in [a, b, c] {
            let got = messages(s)
            #expect(got.map { $0.str("content") } == ["everyone"] && got.first?.str("messageId") == id && got.first?.str("priority") == "high")
        }
        let again = try rest.call("POST", "/v1/messages/broadcast", ["content": "too soon"])
        #expect(again.status == 429 && again.json.int("code") == ErrorCode.rateLimited.rawValue)
        // Not kept: the room's history holds the list send only.
        let after = try rest.call("GET", "/v1/rooms/a/messages?order=asc").json["messages"] as? [J] ?? []
        #expect(after.map { $0.str("content") } == ["two rooms"])
    }

    @Test("AU-3: RongCloud's chatroom publish to several rooms and its broadcast, with RongCloud's codes")
    func rongCloud() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (a, b, c) = try rooms(g)
        let rest = g.rest()
        let published = try rest.vendor(.rongCloud, "/message/chatroom/publish.json",
                                        [("fromUserId", "ops"), ("toChatroomId", "a"), ("toChatroomId", "c"), ("objectName", "RC:TxtMsg"),
                                         ("content", #"{"content":"hi"}"#), ("isPersisted", "1")])
        #expect(published.json.int("code") == 200, "\(published.text)")
        g.settle()
        let got = messages(a)
        #expect(got.map { $0.str("content") } == [#"{"content":"hi"}"#] && got.first?.str("type") == "text" && got.first?.str("messageType") == "RC:TxtMsg")
        #expect(messages(c).count == 1)
        #expect(messages(b).isEmpty, "room b was not named")

        let missing = try rest.vendor(.rongCloud, "/message/chatroom/publish.json",
                                      [("fromUserId", "ops"), ("toChatroomId", "a"), ("toChatroomId", "gone"), ("objectName", "RC:TxtMsg"), ("content", "x")])
        #expect(missing.status == 404 && missing.json.int("code") == 23410 && missing.json.str("field") == "toChatroomId", "\(missing.text)")
        let flag = try rest.vendor(.rongCloud, "/message/chatroom/publish.json",
                                   [("fromUserId", "ops"), ("toChatroomId", "a"), ("objectName", "RC:TxtMsg"), ("content", "x"), ("isIncludeSender", "2")])
        #expect(flag.status == 400 && flag.json.int("code") == 1002 && flag.json.str("field") == "isIncludeSender")
        g.settle()
        #expect(messages(a).isEmpty)

        let cast = try rest.vendor(.rongCloud, "/message/chatroom/broadcast.json", [("fromUserId", "ops"), ("objectName", "App:Notice"), ("content", "all")])
        #expect(cast.json.int("code") == 200, "\(cast.text)")
        g.settle()
        for s in [a, b, c] { #expect(messages(s).map { $0.str("type") } == ["custom"]) }
        // RongCloud's rate for broadcasts: one a second; past it 1008 with HTTP 429.
        let soon = try rest.vendor(.rongCloud, "/message/chatroom/broadcast.json", [("fromUserId", "ops"), ("objectName", "App:Notice"), ("content", "again")])
        #expect(soon.status == 429 && soon.json.int("code") == 1008)
        g.advance(seconds: 1)
        #expect(try rest.vendor(.rongCloud, "/message/chatroom/broadcast.json", [("fromUserId", "ops"), ("objectName", "App:Notice"), ("content", "later")])
            .json.int("code") == 200)
    }

    @Test("AU-3: Nexconn's open-channel send is one command (a full channel sends nothing anywhere) and its broadcast is served")
    func nexconn() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (a, b, c) = try rooms(g)
        let rest = g.rest()
        // A budget of one message at a time per room; room b spends it first.
        #expect(try rest.call("PATCH", "/v1/settings", ["roomMessagesPerSecond": 5]).status == 200)
        #expect(try rest.call("POST", "/v1/rooms/b/messages", ["content": "fills b"]).status == 201)
        g.settle()
        _ = messages(b)
        let busy = try rest.vendor(.nexconn, "/v4/open-channel/message/send",
                                   json: ["fromUserId": "host", "toChannelIds": ["a", "b"], "messageType": "RC:TxtMsg", "content": "x"])
        #expect(busy.status == 429 && busy.json.int("code") == 1008 && busy.json.str("field") == "toChannelIds", "\(busy.text)")
        g.settle()
        #expect(messages(a).isEmpty, "room a had room in its budget, and got nothing: the call is one")

        let cast = try rest.vendor(.nexconn, "/v4/open-channel/message/broadcast", json: ["fromUserId": "host", "messageType": "RC:TxtMsg", "content": "hello all", "priority": 3])
        #expect(cast.status == 200 && cast.json.int("code") == 0, "\(cast.text)")
        g.settle()
        for s in [a, b, c] {
            let got = messages(s)
            #expect(got.map { $0.str("content") } == ["hello all"] && got.first?.str("priority") == "low")
        }
        let bad = try rest.vendor(.nexconn, "/v4/open-channel/message/broadcast", json: ["fromUserId": "host", "content": "no type"])
        #expect(bad.status == 400 && bad.json.str("field") == "messageType")
    }
}
