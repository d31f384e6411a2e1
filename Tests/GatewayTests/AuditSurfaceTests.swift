import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// MO-8 on the wire: `GET /v1/audit` lists the moderation actions of every surface (native REST,
/// RongCloud, Nexconn, NIM, a client's op) with who did what, on what and when; a refused action
/// is not listed; bad parameters are refused naming the field; another app's entries are never
/// shown; the trail survives a restart of the binary.
@Suite("Audit trail of moderation actions (MO-8)")
struct AuditSurfaceTests {
    typealias J = [String: Any]

    func entries(_ r: InProcessREST, _ query: String = "") throws -> (entries: [J], next: Int?) {
        let page = try r.call("GET", "/v1/audit" + query)
        #expect(page.status == 200, "\(page.text)")
        return (page.json["entries"] as? [J] ?? [], page.json.int("next"))
    }

    @Test("MO-8: every surface's action is listed once, newest first, with its actor, surface, action, room, targets and the server's time")
    func everySurface() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "7", "creator": "admin"]).status == 201)
        let alice = try g.client("alice"), boss = try g.client("boss")
        for c in [alice, boss] { _ = try c.expectOK(try c.command("room.join", ["roomId": "7"])) }
        #expect(try rest.call("PUT", "/v1/rooms/7/members/boss/role", ["role": "manager"]).status == 200)
        #expect(try rest.call("POST", "/v1/rooms/7/mutes", ["userIds": ["u1"], "minutes": 5]).status == 200)
        #expect(try rest.vendor(.rongCloud, "/chatroom/user/gag/add.json", [("chatroomId", "7"), ("userId", "u2"), ("minute", "5")]).json.int("code") == 200)
        #expect(try rest.vendor(.nexconn, "/v4/open-channel/participant/mute-list/add",
                                json: ["channelId": "7", "participantIds": ["u3"], "durationMinutes": 5]).json.int("code") == 0)
        #expect(try rest.vendor(.nim, "/nimserver/chatroom/temporaryMute.action",
                                [("roomid", "7"), ("operator", "admin"), ("target", "u4"), ("muteDuration", "300")]).json.int("code") == 200)
        _ = try boss.expectOK(try boss.command("manage.mute", ["roomId": "7", "userIds": ["alice"], "seconds": 60]))
        // Refused: a missing room, and a member without the right. Neither is listed.
        #expect(try rest.call("POST", "/v1/rooms/nope/mutes", ["userIds": ["u1"], "minutes": 5]).status == 404)
        #expect(try alice.command("manage.kick", ["roomId": "7", "userId": "boss"])["error"] != nil)
        g.settle()
        let now = g.clock.now
        let (list, next) = try entries(rest)
        #expect(next == nil)
        let summary = list.map { e in "\(e.str("action") ?? "?") \(e.str("surface") ?? "?") \(e.obj("actor").str("type") ?? "?"):\(e.obj("actor").str("userId") ?? "?") \((e["targets"] as? [String] ?? []).joined(separator: ","))" }
        #expect(summary == ["mute client user:boss alice", "mute nim operator:admin u4", "mute nexconn server: u3", "mute rongCloud server: u2",
                            "mute native server: u1", "role native server: boss"], "\(summary)")
        #expect(list.map { $0.int("id") ?? 0 } == [6, 5, 4, 3, 2, 1])
        #expect(list.allSatisfy { $0.str("roomId") == "7" && Int64($0.int("time") ?? 0) == now && $0.int("targetCount") == 1 })
        #expect(list.first?.int("durationMs") == 60_000 && list[4].int("durationMs") == 300_000 && list.last?.str("detail") == "manager")
    }

    @Test("MO-8: a recall and the sensitive words through the native API are listed; roomId, limit and before page the trail")
    func recallWordsAndPaging() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        for id in ["a", "b"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": id]).status == 201) }
        let alice = try g.client("alice")
        _ = try alice.expectOK(try alice.command("room.join", ["roomId": "a"]))
        let sent = try alice.expectOK(try alice.command("room.send", ["roomId": "a", "content": "oops"]))
        let id = try #require(sent.obj("message").str("messageId"))
        #expect(try rest.call("DELETE", "/v1/rooms/a/messages/\(id)").status == 200)
        #expect(try rest.call("POST", "/v1/sensitive-words", ["words": [["word": "spam"]]]).status == 200)
        #expect(try rest.call("DELETE", "/v1/sensitive-words?words=spam").status == 200)
        for i in 0..<4 { #expect(try rest.call("PUT", "/v1/rooms/\(i % 2 == 0 ? "a" : "b")/mute", ["muted": i < 2]).status == 200) }
        let all = try entries(rest).entries
        #expect(all.map { $0.str("action") ?? "?" } == ["roomUnmute", "roomUnmute", "roomMute", "roomMute", "sensitiveWordRemove", "sensitiveWordAdd", "recall"])
        let recall = try #require(all.last)
        #expect(recall.str("messageId") == id && recall["targets"] as? [String] == ["alice"] && recall.str("roomId") == "a")
        #expect(all[5]["targets"] as? [String] == ["spam"] && all[5].str("roomId") == "")
        // Pages of 3, newest first.
        let p1 = try entries(rest, "?limit=3")
        #expect(p1.entries.map { $0.int("id") ?? 0 } == [7, 6, 5] && p1.next == 5)
        let p2 = try entries(rest, "?limit=3&before=\(p1.next ?? 0)")
        #expect(p2.entries.map { $0.int("id") ?? 0 } == [4, 3, 2] && p2.next == 2)
        let p3 = try entries(rest, "?limit=3&before=\(p2.next ?? 0)")
        #expect(p3.entries.map { $0.int("id") ?? 0 } == [1] && p3.next == nil)
        #expect(try entries(rest, "?roomId=b").entries.map { $0.int("id") ?? 0 } == [7, 5])
        #expect(try entries(rest, "?roomId=a&before=6&limit=1").entries.map { $0.int("id") ?? 0 } == [4])
    }

    @Test("MO-8: a bad limit, before or roomId is refused with 400 naming the field")
    func badParameters() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let cases = [("limit=0", "limit"), ("limit=\(Limits.maxAuditPage + 1)", "limit"), ("limit=x", "limit"), ("before=0", "before"),
                     ("before=abc", "before"), ("roomId=", "roomId"), ("roomId=\(String(repeating: "r", count: Limits.maxRoomIdBytes + 1))", "roomId")]
        for (query, field) in cases {
            let r = try g.rest().call("GET", "/v1/audit?\(query)")
            #expect(r.status == 400 && r.json.int("code") == ErrorCode.invalidParameter.rawValue && r.json.str("field") == field, "\(query): \(r.text)")
        }
        #expect(try g.rest().call("GET", "/v1/audit?limit=\(Limits.maxAuditPage)").status == 200)
    }

    @Test("MO-8: one app never sees another app's entries")
    func appsAreApart() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let mine = g.rest(), theirs = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        #expect(try mine.call("POST", "/v1/global-mutes", ["userIds": ["x"], "minutes": 1]).status == 200)
        #expect(try mine.vendor(.rongCloud, "/chatroom/user/ban/add.json", [("userId", "y"), ("minute", "1")]).json.int("code") == 200)
        #expect(try entries(theirs).entries.isEmpty)
        #expect(try theirs.call("POST", "/v1/global-mutes", ["userIds": ["z"], "minutes": 1]).status == 200)
        let other = try entries(theirs).entries
        #expect(other.count == 1 && other.first?["targets"] as? [String] == ["z"] && other.first?.int("id") == 1)
        // Its cursor reaches none of ours either.
        #expect(try entries(theirs, "?before=3").entries.count == 1)
        #expect(try entries(mine).entries.map { ($0["targets"] as? [String])?.first ?? "?" } == ["y", "x"])
    }

    @Test("MO-8: across a restart of the binary (kill -9), the trail is restored from disk and numbering goes on")
    func survivesARestart() async throws {
        try await offPool { () throws in
            let data = temporaryDirectory("roomcast-audit-restart")
            var g = try GatewayProcess(dataDirectory: data)
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
            #expect(try g.rest().call("POST", "/v1/rooms/r/blocks", ["userIds": ["bob"], "minutes": 10]).status == 200)
            #expect(try g.rest().call("POST", "/v1/rooms/r/mutes", ["userIds": ["carol"], "seconds": 60]).status == 200)
            let before = try g.rest().call("GET", "/v1/audit")
            #expect((before.json["entries"] as? [J])?.count == 2, "\(before.text)")
            g.stop() // kill -9
            g = try GatewayProcess(dataDirectory: data)
            defer { g.stop() }
            let after = try g.rest().call("GET", "/v1/audit")
            #expect(after.status == 200 && NSDictionary(dictionary: after.json).isEqual(to: before.json), "\(before.text) / \(after.text)")
            #expect(try g.rest().call("DELETE", "/v1/rooms/r/blocks?userIds=bob").status == 200)
            let list = try g.rest().call("GET", "/v1/audit").json["entries"] as? [J] ?? []
            #expect(list.map { $0.str("action") ?? "?" } == ["unblock", "mute", "block"] && list.map { $0.int("id") ?? 0 } == [3, 2, 1])
            #expect(list.allSatisfy { $0.str("surface") == "native" } && list[1].int("durationMs") == 60_000)
        }
    }
}
