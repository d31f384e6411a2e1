import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// AU-1 on the surfaces other than the native send (which `Scenarios.audiences` covers in
/// process, against the binary and on three nodes): NIM's tag calls, tags from a token, tag
/// mutes and what their notifications reach, and NIM's tag history — each with who must not
/// receive, and bad input refused with the vendor's code and the field, changing nothing.
@Suite("Audiences on every surface (AU-1, AU-2)")
struct AudienceSurfaceTests {
    typealias J = [String: Any]

    /// Room 7 with vip (tags vip, cn), cn (cn) and plain (none), their inboxes drained.
    func taggedRoom(_ g: InProcessGateway) throws -> (vip: SessionClient, cn: SessionClient, plain: SessionClient) {
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "7"]).status == 201)
        let vip = try g.client("vip"), cn = try g.client("cn"), plain = try g.client("plain")
        _ = try vip.expectOK(try vip.command("room.join", ["roomId": "7", "tags": ["vip", "cn"]]))
        _ = try cn.expectOK(try cn.command("room.join", ["roomId": "7", "tags": ["cn"]]))
        _ = try plain.expectOK(try plain.command("room.join", ["roomId": "7"]))
        g.settle()
        for c in [vip, cn, plain] { _ = c.drain() }
        return (vip, cn, plain)
    }

    func nim(_ g: InProcessGateway, _ path: String, _ form: [(String, String)]) throws -> RESTClient.Response {
        try g.rest().vendor(.nim, path.hasPrefix("/") ? path : "/nimserver/chatroom/\(path).action", form)
    }

    @Test("AU-1: NIM's tag count, tag list and tag change, with the change's notification to its notifyTargetTags only")
    func nimTagCountsListsAndChanges() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (vip, cn, plain) = try taggedRoom(g)
        let count = try nim(g, "tagMembersCount", [("roomid", "7"), ("tag", "cn")])
        #expect(count.json.int("code") == 200 && count.json.obj("data").int("onlineUserCount") == 2 && count.json.obj("data").str("tag") == "cn", "\(count.text)")
        let listed = try nim(g, "tagMembersQuery", [("roomid", "7"), ("tag", "vip"), ("endTime", "0"), ("limit", "10")])
        let data = listed.json.obj("desc")["data"] as? [J] ?? []
        #expect(data.map { $0.str("accid") } == ["vip"] && data.first?.str("tags") == #"["vip","cn"]"#, "\(listed.text)")

        let changed = try nim(g, "updateChatRoomRoleTag", [("roomId", "7"), ("accid", "plain"), ("tags", #"["vip"]"#),
                                                            ("notifyTargetTags", #"{"tag":"cn"}"#)])
        #expect(changed.json.int("code") == 200, "\(changed.text)")
        g.settle()
        #expect(try plain.waitFor("room.tagsUpdated").obj("data")["tags"] as? [String] == ["vip"])
        // The 316 reached the cn members (vip and cn), not plain (no cn tag).
        for c in [vip, cn] {
            #expect(try c.waitFor("room.notification").obj("data").int("eventType") == NotificationType.memberInfoUpdated.rawValue)
        }
        #expect(!plain.drain().contains { $0.str("ev") == "room.notification" })
        #expect(try nim(g, "tagMembersCount", [("roomid", "7"), ("tag", "vip")]).json.obj("data").int("onlineUserCount") == 2)
    }

    @Test("AU-1: a NIM tag mute silences the tag (newcomers included) and tells only its notifyTargetTags")
    func nimTagMute() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (vip, cn, plain) = try taggedRoom(g)
        let muted = try nim(g, "tagTemporaryMute", [("roomid", "7"), ("operator", "host"), ("targetTag", "cn"), ("muteDuration", "60"),
                                                     ("notifyTargetTags", #"{"op":"not","tags":[{"tag":"vip"}]}"#)])
        #expect(muted.json.int("code") == 200 && muted.json.obj("desc").int("muteDuration") == 60, "\(muted.text)")
        g.settle()
        // not(vip): cn and plain are told, vip is not.
        for c in [cn, plain] { #expect(try c.waitFor("room.notification").obj("data").int("eventType") == NotificationType.tempMuteAdd.rawValue) }
        #expect(!vip.drain().contains { $0.str("ev") == "room.notification" })
        for c in [vip, cn] {
            #expect((try c.command("room.send", ["roomId": "7", "content": "x"])["error"] as? J)?["code"] as? Int == ChatErrorCode.muted.rawValue)
        }
        _ = try plain.expectOK(try plain.command("room.send", ["roomId": "7", "content": "fine"]))
        let late = try g.client("late")
        _ = try late.expectOK(try late.command("room.join", ["roomId": "7", "tags": ["cn"]]))
        #expect((try late.command("room.send", ["roomId": "7", "content": "x"])["error"] as? J)?["code"] as? Int == ChatErrorCode.muted.rawValue)
        g.advance(seconds: 61)
        _ = try cn.expectOK(try cn.command("room.send", ["roomId": "7", "content": "again"]))
    }

    @Test("AU-1: a token's tags are the member's unless its join gives its own")
    func tokenTags() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (vip, _, _) = try taggedRoom(g)
        let issued = try g.rest().call("POST", "/v1/users/tok/tokens", ["tags": ["vip"]])
        #expect(issued.status == 201)
        let tok = g.session()
        _ = try tok.connect(token: try #require(issued.json.str("token")))
        _ = try tok.expectOK(try tok.command("room.join", ["roomId": "7"]))
        #expect(try g.rest().call("GET", "/v1/rooms/7/tags/vip/count").json.int("count") == 2)
        _ = tok.drain()
        _ = vip.drain()
        #expect(try g.rest().call("POST", "/v1/rooms/7/messages", ["content": "vips", "targetTags": ["tag": "vip"]]).status == 201)
        #expect(try tok.waitFor("room.message").obj("data").obj("message").str("content") == "vips")
        // Bad token tags are refused at issue.
        let bad = try g.rest().call("POST", "/v1/users/tok/tokens", ["tags": [String(repeating: "x", count: Limits.maxTagBytes + 1)]])
        #expect(bad.status == 400 && bad.json.str("field") == "tags", "\(bad.text)")
    }

    @Test("AU-1: NIM's tag history lists the messages sent to a tag; AU-2 listed messages are not in it")
    func nimTagHistory() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        _ = try taggedRoom(g)
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms/7/messages", ["content": "vip-1", "targetTags": ["tag": "vip"]]).status == 201)
        g.advance(seconds: 1)
        #expect(try rest.call("POST", "/v1/rooms/7/messages", ["content": "cn-1", "targetTags": ["tag": "cn"]]).status == 201)
        g.advance(seconds: 1)
        #expect(try rest.call("POST", "/v1/rooms/7/messages", ["content": "listed", "targets": ["plain"]]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms/7/messages", ["content": "all"]).status == 201)
        for path in ["/nimserver/history/queryTagHistoryMsg.action", "/nimserver/chatroom/queryTagHistoryMsg.action"] {
            let r = try nim(g, path, [("roomId", "7"), ("tags", #"["vip"]"#), ("reverse", "1"), ("limit", "10")])
            #expect((r.json["msgs"] as? [J])?.compactMap { $0.str("body") } == ["vip-1"], "\(r.text)")
        }
        let both = try nim(g, "/nimserver/history/queryTagHistoryMsg.action", [("roomId", "7"), ("tags", #"["vip","cn"]"#)])
        #expect((both.json["msgs"] as? [J])?.compactMap { $0.str("body") } == ["cn-1", "vip-1"], "newest first by default: \(both.text)")
    }

    @Test("AU-1: bad tag calls get NIM's 414 with the field named and change nothing")
    func nimBadInput() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (_, cn, _) = try taggedRoom(g)
        let deep = String(repeating: #"{"op":"not","tags":["#, count: Limits.maxTagExpressionDepth) + #"{"tag":"a"}"# + String(repeating: "]}", count: Limits.maxTagExpressionDepth)
        let cases: [(String, [(String, String)], String)] = [
            ("tagTemporaryMute", [("roomid", "7"), ("operator", "h"), ("targetTag", "cn"), ("muteDuration", "60"), ("notifyTargetTags", deep)], "notifyTargetTags"),
            ("tagTemporaryMute", [("roomid", "7"), ("operator", "h"), ("targetTag", "cn"), ("muteDuration", "60"), ("notifyTargetTags", #"{"op":"xor","tags":[{"tag":"a"}]}"#)], "notifyTargetTags"),
            ("tagTemporaryMute", [("roomid", "7"), ("operator", "h"), ("targetTag", "cn"), ("muteDuration", String(Limits.maxTagMuteSeconds + 1))], "muteDuration"),
            ("tagTemporaryMute", [("roomid", "7"), ("operator", "h"), ("targetTag", String(repeating: "t", count: Limits.maxTagBytes + 1)), ("muteDuration", "5")], "targetTag"),
            ("updateChatRoomRoleTag", [("roomId", "7"), ("accid", "cn"), ("tags", "[" + (0...Limits.maxTagsPerMember).map { "\"t\($0)\"" }.joined(separator: ",") + "]")], "tags"),
            ("tagMembersQuery", [("roomid", "7"), ("tag", "cn"), ("limit", "0")], "limit"),
        ]
        for (name, form, field) in cases {
            let r = try nim(g, name, form)
            #expect(r.json.int("code") == 414 && r.json.str("field") == field && (r.json.str("desc") ?? "").contains(field), "\(name): \(r.text)")
        }
        g.settle()
        #expect(!cn.drain().contains { $0.str("ev") == "room.notification" || $0.str("ev") == "room.tagsUpdated" })
        _ = try cn.expectOK(try cn.command("room.send", ["roomId": "7", "content": "not muted"]))
        #expect(try nim(g, "tagMembersCount", [("roomid", "7"), ("tag", "cn")]).json.obj("data").int("onlineUserCount") == 2)
    }
}
