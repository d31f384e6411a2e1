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
            #expect((try c.command("room.send", ["roomId": "7", "content": "x"])["error"] as? J)?["code"] as? Int == ErrorCode.muted.rawValue)
        }
        _ = try plain.expectOK(try plain.command("room.send", ["roomId": "7", "content": "fine"]))
        let late = try g.client("late")
        _ = try late.expectOK(try late.command("room.join", ["roomId": "7", "tags": ["cn"]]))
        #expect((try late.command("room.send", ["roomId": "7", "content": "x"])["error"] as? J)?["code"] as? Int == ErrorCode.muted.rawValue)
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

    @Test("AU-5: NIM's queryMembersByRole answers the fixed members holding any asked role, and refuses an unknown role naming roles")
    func nimMembersByRole() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        // A NIM room made by host: only its creator may name managers (MO-7).
        let created = try nim(g, "create", [("creator", "host"), ("name", "Roles")])
        let room = try #require((created.json["chatroom"] as? J)?.int("roomid")).description
        for user in ["vip", "cn", "plain"] {
            let c = try g.client(user)
            _ = try c.expectOK(try c.command("room.join", ["roomId": room]))
        }
        for (target, opt) in [("vip", "1"), ("cn", "2"), ("plain", "-2")] {
            let r = try nim(g, "setMemberRole", [("roomid", room), ("operator", "host"), ("target", target), ("opt", opt), ("optvalue", "true")])
            #expect(r.json.int("code") == 200, "\(r.text)")
        }
        func byRole(_ roles: String) throws -> [String] {
            let r = try nim(g, "queryMembersByRole", [("roomid", room), ("roles", roles)])
            #expect(r.json.int("code") == 200, "\(r.text)")
            return (r.json.obj("desc")["data"] as? [J] ?? []).map { $0.str("accid") ?? "?" }
        }
        #expect(try byRole(#"{"manager":true}"#) == ["vip"])
        #expect(Set(try byRole(#"{"manager":true,"common":true}"#)) == ["vip", "cn"])
        #expect(try byRole(#"{"mute":true}"#) == ["plain"])
        #expect(try byRole(#"{"creator":true}"#) == ["host"])
        #expect(try byRole(#"{"manager":false,"blacklist":true}"#).isEmpty)
        let bad = try nim(g, "queryMembersByRole", [("roomid", room), ("roles", #"{"owner":true}"#)])
        #expect(bad.json.int("code") == 414 && bad.json.str("field") == "roles", "\(bad.text)")
        let none = try nim(g, "queryMembersByRole", [("roomid", room), ("roles", #"{"manager":false}"#)])
        #expect(none.json.int("code") == 414 && none.json.str("field") == "roles")
    }

    @Test("AU-5: NIM's queueBatchOffer puts each element (owners' transient ones leave with them) and names the keys it could not put")
    func nimQueueBatchOffer() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (vip, cn, plain) = try taggedRoom(g)
        #expect(try nim(g, "queueInit", [("roomid", "7"), ("sizeLimit", "3")]).json.int("code") == 200)
        let elements = #"[{"key":"a","value":"1","accid":"vip","transient":true},{"key":"b","value":"2"},{"key":"c","value":"3","accid":"gone","transient":true},{"key":"d","value":"4"},{"key":"e","value":"5"}]"#
        let r = try nim(g, "queueBatchOffer", [("roomid", "7"), ("operator", "host"), ("elements", elements)])
        #expect(r.json.int("code") == 200, "\(r.text)")
        // c's owner is not in the room; e finds the queue full (a, b, d).
        #expect(r.json.obj("desc")["failedKeys"] as? [String] == ["c", "e"], "\(r.text)")
        g.settle()
        let offers = plain.drain().filter { $0.str("ev") == "room.notification" && $0.obj("data").int("eventType") == NotificationType.queueChange.rawValue }
        #expect(offers.count == 3)
        let list = try nim(g, "queueList", [("roomid", "7")]).json.obj("desc")["list"] as? [J] ?? []
        #expect(list.flatMap { $0.keys } == ["a", "b", "d"])
        // vip's transient element leaves with vip.
        _ = try vip.expectOK(try vip.command("room.leave", ["roomId": "7"]))
        g.settle()
        let after = try nim(g, "queueList", [("roomid", "7")]).json.obj("desc")["list"] as? [J] ?? []
        #expect(after.flatMap { $0.keys } == ["b", "d"])
        // Bad input changes nothing, naming the field.
        let dup = try nim(g, "queueBatchOffer", [("roomid", "7"), ("operator", "host"), ("elements", #"[{"key":"x"},{"key":"x"}]"#)])
        #expect(dup.json.int("code") == 414 && dup.json.str("field") == "elements")
        let high = try nim(g, "queueBatchOffer", [("roomid", "7"), ("operator", "host"), ("elements", #"[{"key":"y"}]"#), ("highPriority", "1")])
        #expect(high.json.int("code") == 414 && high.json.str("field") == "highPriority")
        _ = cn
    }

    @Test("AU-5: NIM's updateMyRoomRole sets a present member's room profile, tells the room unless asked not to, and refuses a member not in the room")
    func nimUpdateMyRoomRole() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (vip, cn, plain) = try taggedRoom(g)
        let r = try nim(g, "updateMyRoomRole", [("roomid", "7"), ("accid", "cn"), ("nick", "Cee"), ("ext", #"{"lvl":3}"#), ("notifyExt", "hi")])
        #expect(r.json.int("code") == 200, "\(r.text)")
        g.settle()
        for c in [vip, plain] {
            let n = try c.waitFor("room.notification").obj("data")
            #expect(n.int("eventType") == NotificationType.memberInfoUpdated.rawValue && n.str("notifyExt") == "hi")
        }
        let info = try nim(g, "queryMembers", [("roomid", "7"), ("accids", #"["cn"]"#)]).json.obj("desc")["data"] as? [J] ?? []
        #expect(info.first?.str("nick") == "Cee" && info.first?.str("ext") == #"{"lvl":3}"#)
        #expect(try nim(g, "updateMyRoomRole", [("roomid", "7"), ("accid", "cn"), ("avator", "x.png"), ("needNotify", "false")]).json.int("code") == 200)
        g.settle()
        #expect(!vip.drain().contains { $0.str("ev") == "room.notification" })
        let absent = try nim(g, "updateMyRoomRole", [("roomid", "7"), ("accid", "nobody"), ("nick", "N")])
        #expect(absent.json.int("code") != 200 && absent.json.str("field") == "accid", "\(absent.text)")
        let long = try nim(g, "updateMyRoomRole", [("roomid", "7"), ("accid", "cn"), ("nick", String(repeating: "n", count: Limits.maxNicknameBytes + 1))])
        #expect(long.json.int("code") == 414 && long.json.str("field") == "nick")
        _ = cn
    }
}
