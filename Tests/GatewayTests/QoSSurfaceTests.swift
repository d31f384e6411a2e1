import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// Room QoS through every surface that reaches it (SPEC §14; VC-4: one behaviour, several
/// spellings): RongCloud's low-priority types, message-type allowlist, chatroom user allowlist and
/// stop/resume distribution, Nexconn's low-priority and priority type lists and priority senders,
/// the native protected-senders and distribution routes. Each test checks what the call answers in
/// the vendor's shape, who then receives what, and that bad input names the vendor's field and
/// changes nothing.
@Suite("Room QoS surfaces (QS-1, QS-4, QS-6)")
struct QoSSurfaceTests {
    typealias J = [String: Any]

    /// A member's copy of a message, or nil if none came.
    static func message(_ c: SessionClient, _ content: String) -> J? {
        c.drain().first { $0.str("ev") == "room.message" && $0.obj("data").obj("message").str("content") == content }?.obj("data").obj("message")
    }

    static func rc(_ rest: InProcessREST, _ path: String, _ form: [(String, String)] = []) throws -> J {
        let r = try rest.vendor(.rongCloud, path, form)
        #expect(r.status == 200 && r.json.int("code") == 200, "\(path): \(r.text)")
        return r.json
    }

    static func nx(_ rest: InProcessREST, _ path: String, _ body: J = [:]) throws -> J {
        let r = try rest.vendor(.nexconn, path, json: body)
        #expect(r.status == 200 && r.json.int("code") == 0, "\(path): \(r.text)")
        return r.json
    }

    static func send(_ rest: InProcessREST, _ room: String, _ content: String, _ extra: J = [:]) throws -> RESTClient.Response {
        var body: J = ["content": content, "fromUserId": "admin"]
        for (k, v) in extra { body[k] = v }
        return try rest.call("POST", "/v1/rooms/\(room)/messages", body)
    }

    // QS-1, QS-4, VC-4: RongCloud's low-priority types and message-type allowlist are the app's
    // lists, the same ones Nexconn's type lists and the settings show; a message's type then
    // decides its class on the wire, and under backpressure a slow reader loses the low-priority
    // type and still gets the protected one.
    @Test func messageTypeListsDecideTheClassOnEverySurface() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let bob = try g.client("bob"), slow = try g.client("slow")
        for c in [bob, slow] { _ = try c.expectOK(try c.command("room.join", ["roomId": "r"])) }
        _ = [bob, slow].map { $0.drain() }

        // RongCloud adds, Nexconn and the settings read the same lists.
        _ = try Self.rc(rest, "/chatroom/message/priority/add.json", [("objectName", "RC:LikeMsg"), ("objectName", "App:Cheer")])
        _ = try Self.rc(rest, "/chatroom/whitelist/add.json", [("objectnames", "App:Gift")])
        #expect(try Self.rc(rest, "/chatroom/message/priority/query.json")["objectNames"] as? [String] == ["RC:LikeMsg", "App:Cheer"])
        #expect(try Self.rc(rest, "/chatroom/whitelist/query.json")["whitlistMsgType"] as? [String] == ["App:Gift"])
        #expect(try Self.nx(rest, "/v4/open-channel/low-priority-message-type-list/get").obj("result")["messageTypes"] as? [String] == ["RC:LikeMsg", "App:Cheer"])
        _ = try Self.nx(rest, "/v4/open-channel/priority-message-type-list/add", ["messageTypes": ["App:Crown"]])
        #expect(try Self.nx(rest, "/v4/open-channel/priority-message-type-list/get").obj("result")["messageTypes"] as? [String] == ["App:Gift", "App:Crown"])
        let settings = try rest.call("GET", "/v1/settings").json
        #expect(settings["lowPriorityMessageTypes"] as? [String] == ["RC:LikeMsg", "App:Cheer"] && settings["protectedMessageTypes"] as? [String] == ["App:Gift", "App:Crown"])

        // The classes on the wire: a listed low type is low, a protected type high even when low is asked.
        #expect(try Self.send(rest, "r", "like", ["messageType": "RC:LikeMsg"]).status == 201)
        #expect(try Self.send(rest, "r", "gift", ["messageType": "App:Gift", "priority": "low"]).status == 201)
        #expect(try Self.send(rest, "r", "text", ["messageType": "RC:TxtMsg"]).status == 201)
        g.settle()
        let got = bob.drain().filter { $0.str("ev") == "room.message" }.map { $0.obj("data").obj("message") }
        #expect(got.map { "\($0.str("content") ?? ""):\($0.str("priority") ?? "normal")" } == ["like:low", "gift:high", "text:normal"])

        // QS-3 with the lists: past a quarter of its soft mark a slow reader loses the low type and
        // gets the protected one; the reader that keeps up gets both.
        slow.queued.store(Limits.defaultOutboundSoftBytes / 2, ordering: .relaxed)
        _ = slow.drain()
        #expect(try Self.send(rest, "r", "like2", ["messageType": "App:Cheer"]).status == 201)
        #expect(try Self.send(rest, "r", "crown", ["messageType": "App:Crown"]).status == 201)
        g.settle()
        let slowSaw = slow.drain()
        // Still behind: the loss is told once it has caught up (below).
        #expect(slowSaw.compactMap { $0.str("ev") == "room.message" ? $0.obj("data").obj("message").str("content") : $0.str("ev") } == ["crown"])
        #expect(bob.drain().compactMap { $0.obj("data").obj("message").str("content") } == ["like2", "crown"])

        // Removing through either surface: the type is normal again.
        _ = try Self.nx(rest, "/v4/open-channel/low-priority-message-type-list/remove", ["messageTypes": ["RC:LikeMsg"]])
        _ = try Self.rc(rest, "/chatroom/whitelist/delete.json", [("objectnames", "App:Gift")])
        #expect(try Self.rc(rest, "/chatroom/message/priority/query.json")["objectNames"] as? [String] == ["App:Cheer"])
        #expect(try Self.rc(rest, "/chatroom/whitelist/query.json")["whitlistMsgType"] as? [String] == ["App:Crown"])
        slow.queued.store(0, ordering: .relaxed)
        #expect(try Self.send(rest, "r", "like3", ["messageType": "RC:LikeMsg"]).status == 201)
        g.settle()
        let like3 = try #require(Self.message(bob, "like3"))
        #expect(like3["priority"] == nil && like3.str("messageType") == "RC:LikeMsg")
        let caughtUp = slow.drain()
        #expect(caughtUp.compactMap { $0.str("ev") == "room.message" ? $0.obj("data").obj("message").str("content") : $0.str("ev") } == ["room.gap", "like3"])
        #expect(caughtUp.first { $0.str("ev") == "room.gap" }?.obj("data").obj("dropped").int("low") == 1)
    }

    // QS-1, SPEC §13: 0 types, more than a call takes, an over-long type or a malformed list get
    // the vendor's parameter error naming its own field, and no list changes.
    @Test func badTypeListsNameTheVendorsFieldAndChangeNothing() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        _ = try Self.rc(rest, "/chatroom/message/priority/add.json", [("objectName", "keep:low")])
        _ = try Self.rc(rest, "/chatroom/whitelist/add.json", [("objectnames", "keep:high")])
        let six = (1...6).map { ("objectName", "T:\($0)") }
        let rcBad: [(String, [(String, String)], String)] = [
            ("/chatroom/message/priority/add.json", [], "objectName"),
            ("/chatroom/message/priority/add.json", six, "objectName"),
            ("/chatroom/message/priority/remove.json", six, "objectName"),
            ("/chatroom/message/priority/add.json", [("objectName", String(repeating: "t", count: SettingsLimits.maxMessageTypeBytes + 1))], "objectName"),
            ("/chatroom/whitelist/add.json", [], "objectnames"),
            ("/chatroom/whitelist/add.json", (1...21).map { ("objectnames", "T:\($0)") }, "objectnames"),
            ("/chatroom/whitelist/delete.json", [("objectName", "keep:high")], "objectnames"),  // RongCloud's lowercase name
        ]
        for (path, form, field) in rcBad {
            let r = try rest.vendor(.rongCloud, path, form)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(path) \(form.count): \(r.text)")
        }
        let nxBad: [(String, J, String)] = [
            ("/v4/open-channel/low-priority-message-type-list/add", [:], "messageTypes"),
            ("/v4/open-channel/low-priority-message-type-list/add", ["messageTypes": (1...6).map { "T:\($0)" }], "messageTypes"),
            ("/v4/open-channel/low-priority-message-type-list/add", ["messageTypes": "RC:LikeMsg"], "messageTypes"),
            ("/v4/open-channel/priority-message-type-list/add", ["messageTypes": [""]], "messageTypes"),
            ("/v4/open-channel/priority-message-type-list/remove", ["messageTypes": []], "messageTypes"),
        ]
        for (path, body, field) in nxBad {
            let r = try rest.vendor(.nexconn, path, json: body)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(path): \(r.text)")
        }
        // The native settings refuse a list past its bound the same way (its own field name).
        let tooMany = try rest.call("PATCH", "/v1/settings", ["lowPriorityMessageTypes": (0...SettingsLimits.maxListEntries).map { "T:\($0)" }])
        #expect(tooMany.status == 400 && tooMany.json.int("code") == 1002 && tooMany.json.str("field") == "lowPriorityMessageTypes")
        let settings = try rest.call("GET", "/v1/settings").json
        #expect(settings["lowPriorityMessageTypes"] as? [String] == ["keep:low"] && settings["protectedMessageTypes"] as? [String] == ["keep:high"])
    }

    // QS-4, VC-4: a room's protected senders are RongCloud's chatroom user allowlist, Nexconn's
    // priority senders (at both paths its SDKs and its endpoint list name) and the native route:
    // at most five, the sixth refused on each surface with its field, nothing changed; a protected
    // sender's messages are high and reach a slow reader that loses everyone else's.
    @Test func protectedSendersAreOneListOnEverySurface() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        for room in ["r", "other"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let slow = try g.client("slow"), elsewhere = try g.client("elsewhere")
        _ = try slow.expectOK(try slow.command("room.join", ["roomId": "r"]))
        _ = try elsewhere.expectOK(try elsewhere.command("room.join", ["roomId": "other"]))
        _ = [slow, elsewhere].map { $0.drain() }

        _ = try Self.rc(rest, "/chatroom/user/whitelist/add.json", [("chatroomId", "r"), ("userId", "host"), ("userId", "cohost")])
        _ = try Self.nx(rest, "/v4/open-channel/priority-sender-list/add", ["channelId": "r", "participantIds": ["mod"]])
        _ = try Self.nx(rest, "/v4/open-channel/participant/priority-sender-list/add", ["channelId": "r", "participantIds": ["guest"]])
        #expect(try rest.call("POST", "/v1/rooms/r/protected-senders", ["userIds": ["vip"]]).status == 200)
        let five = ["host", "cohost", "mod", "guest", "vip"]
        #expect(try Self.rc(rest, "/chatroom/user/whitelist/query.json", [("chatroomId", "r")])["users"] as? [String] == five)
        #expect(try Self.nx(rest, "/v4/open-channel/priority-sender-list/get", ["channelId": "r"]).obj("result")["participantIds"] as? [String] == five)
        #expect(try Self.nx(rest, "/v4/open-channel/participant/priority-sender-list/get", ["channelId": "r"]).obj("result")["participantIds"] as? [String] == five)
        #expect(try rest.call("GET", "/v1/rooms/r/protected-senders").json["userIds"] as? [String] == five)
        // Another room's list is its own.
        #expect(try Self.rc(rest, "/chatroom/user/whitelist/query.json", [("chatroomId", "other")])["users"] as? [String] == [])

        // The sixth, on every surface: the vendor's parameter error naming its field; nothing changes.
        let rcSixth = try rest.vendor(.rongCloud, "/chatroom/user/whitelist/add.json", [("chatroomId", "r"), ("userId", "sixth")])
        #expect(rcSixth.status == 400 && rcSixth.json.int("code") == 1002 && rcSixth.json.str("field") == "userId", "\(rcSixth.text)")
        for path in ["/v4/open-channel/priority-sender-list/add", "/v4/open-channel/participant/priority-sender-list/add"] {
            let nxSixth = try rest.vendor(.nexconn, path, json: ["channelId": "r", "participantIds": ["sixth"]])
            #expect(nxSixth.status == 400 && nxSixth.json.int("code") == 1002 && nxSixth.json.str("field") == "participantIds", "\(nxSixth.text)")
        }
        let nativeSixth = try rest.call("POST", "/v1/rooms/r/protected-senders", ["userIds": ["sixth"]])
        #expect(nativeSixth.status == 400 && nativeSixth.json.int("code") == 1002 && nativeSixth.json.str("field") == "userIds")
        // A call names at most as many users as a room may protect, removals too (the schema's
        // maxItems), and the refusal says that bound.
        let sixIds = try rest.call("DELETE", "/v1/rooms/r/protected-senders?userIds=" + (five + ["sixth"]).joined(separator: ","))
        #expect(sixIds.status == 400 && sixIds.json.int("code") == 1002 && sixIds.json.str("field") == "userIds"
                && sixIds.json.str("message")?.contains("1 to \(Limits.maxProtectedSendersPerRoom)") == true, "\(sixIds.text)")
        // Missing users, an unknown room: the vendor's codes and fields.
        let none = try rest.vendor(.rongCloud, "/chatroom/user/whitelist/add.json", [("chatroomId", "r")])
        #expect(none.status == 400 && none.json.int("code") == 1002 && none.json.str("field") == "userId")
        let missingRC = try rest.vendor(.rongCloud, "/chatroom/user/whitelist/add.json", [("chatroomId", "nowhere"), ("userId", "a")])
        #expect(missingRC.status == 404 && missingRC.json.int("code") == 23410 && missingRC.json.str("field") == "chatroomId", "\(missingRC.text)")
        let missingNX = try rest.vendor(.nexconn, "/v4/open-channel/priority-sender-list/get", json: ["channelId": "nowhere"])
        #expect(missingNX.status == 404 && missingNX.json.int("code") == 23410 && missingNX.json.str("field") == "channelId", "\(missingNX.text)")
        #expect(try rest.call("GET", "/v1/rooms/nowhere/protected-senders").status == 404)
        #expect(try rest.call("GET", "/v1/rooms/r/protected-senders").json["userIds"] as? [String] == five)

        // Who receives what: the slow reader is past its soft mark; the protected sender's low
        // message still reaches it (as high), an ordinary sender's normal one does not; the other
        // room's member gets neither.
        slow.queued.store(Limits.defaultOutboundSoftBytes + 1, ordering: .relaxed)
        #expect(try Self.send(rest, "r", "plain", ["fromUserId": "someone"]).status == 201)
        #expect(try Self.send(rest, "r", "from host", ["fromUserId": "host", "priority": "low"]).status == 201)
        g.settle()
        let seen = slow.drain()
        #expect(seen.compactMap { $0.str("ev") == "room.message" ? $0.obj("data").obj("message").str("content") : $0.str("ev") } == ["from host"])
        #expect(seen.last?.obj("data").obj("message").str("priority") == "high")
        // Its loss is told once it has caught up (the hub's tick), as one gap.
        slow.queued.store(0, ordering: .relaxed)
        g.onLoop { g.core.hubs.hub(0)!.tick() }
        #expect(try slow.waitFor("room.gap").obj("data").obj("dropped").int("normal") == 1)
        #expect(elsewhere.drain().isEmpty)

        // Removing through each surface empties the list.
        _ = try Self.rc(rest, "/chatroom/user/whitelist/remove.json", [("chatroomId", "r"), ("userId", "host"), ("userId", "cohost")])
        _ = try Self.nx(rest, "/v4/open-channel/priority-sender-list/remove", ["channelId": "r", "participantIds": ["mod"]])
        _ = try Self.nx(rest, "/v4/open-channel/participant/priority-sender-list/remove", ["channelId": "r", "participantIds": ["guest"]])
        #expect(try rest.call("DELETE", "/v1/rooms/r/protected-senders?userIds=vip").status == 200)
        #expect(try rest.call("GET", "/v1/rooms/r/protected-senders").json["userIds"] as? [String] == [])
        let noIds = try rest.call("DELETE", "/v1/rooms/r/protected-senders")
        #expect(noIds.status == 400 && noIds.json.str("field") == "userIds")
    }

    // QS-6, VC-4: RongCloud's stop/resumeDistribution and the native route stop and resume the
    // same fan-out: while stopped no member receives the room's messages (another room's members
    // are untouched), the messages are kept; resumed, the next one is fanned out. Bad input and
    // unknown rooms change nothing.
    @Test func distributionStopsAndResumesOnEverySurface() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        for room in ["r", "other"] { #expect(try rest.call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let bob = try g.client("bob"), carol = try g.client("carol")
        _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
        _ = try carol.expectOK(try carol.command("room.join", ["roomId": "other"]))
        _ = [bob, carol].map { $0.drain() }

        _ = try Self.rc(rest, "/chatroom/message/stopDistribution.json", [("chatroomId", "r")])
        #expect(try rest.call("GET", "/v1/rooms/r").json.obj("room")["distributionStopped"] as? Bool == true)
        #expect(try Self.send(rest, "r", "quiet 1").status == 201)
        #expect(try Self.send(rest, "other", "elsewhere").status == 201)
        g.settle()
        #expect(bob.drain().filter { $0.str("ev") == "room.message" }.isEmpty)
        #expect(Self.message(carol, "elsewhere") != nil)
        _ = try Self.rc(rest, "/chatroom/message/resumeDistribution.json", [("chatroomId", "r")])
        #expect(try rest.call("GET", "/v1/rooms/r").json.obj("room")["distributionStopped"] == nil)
        #expect(try Self.send(rest, "r", "loud 1").status == 201)
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "loud 1")

        // The native route, the same switch.
        #expect(try rest.call("PUT", "/v1/rooms/r/distribution", ["stopped": true]).status == 200)
        #expect(try Self.send(rest, "r", "quiet 2").status == 201)
        g.settle()
        #expect(bob.drain().filter { $0.str("ev") == "room.message" }.isEmpty)
        #expect(try rest.call("PUT", "/v1/rooms/r/distribution", ["stopped": false]).status == 200)
        #expect(try Self.send(rest, "r", "loud 2").status == 201)
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "loud 2")
        let history = try rest.call("GET", "/v1/rooms/r/messages?limit=10").json["messages"] as? [J] ?? []
        #expect(history.map { $0.str("content") ?? "" } == ["loud 2", "quiet 2", "loud 1", "quiet 1"])

        // Bad input: an unknown room, a missing room, a body without stopped; nothing stops.
        let missing = try rest.vendor(.rongCloud, "/chatroom/message/stopDistribution.json", [("chatroomId", "nowhere")])
        #expect(missing.status == 404 && missing.json.int("code") == 23410 && missing.json.str("field") == "chatroomId", "\(missing.text)")
        let noRoom = try rest.vendor(.rongCloud, "/chatroom/message/stopDistribution.json")
        #expect(noRoom.status == 400 && noRoom.json.int("code") == 1002 && noRoom.json.str("field") == "chatroomId")
        let noFlag = try rest.call("PUT", "/v1/rooms/r/distribution", ["stop": true])
        #expect(noFlag.status == 400 && noFlag.json.int("code") == 1002 && noFlag.json.str("field") == "stopped", "\(noFlag.text)")
        #expect(try rest.call("PUT", "/v1/rooms/nowhere/distribution", ["stopped": true]).status == 404)
        #expect(try rest.call("GET", "/v1/rooms/r").json.obj("room")["distributionStopped"] == nil)
        #expect(try Self.send(rest, "r", "loud 3").status == 201)
        #expect(try bob.waitFor("room.message").obj("data").obj("message").str("content") == "loud 3")
    }

    // QS-1: Nexconn's message send reads its priority (0 standard, 1 allowlisted and 2 high are
    // high, 3 low) and its messageType (the app's type lists); a bad priority sends nothing.
    @Test func nexconnSendsCarryTheirPriorityAndType() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        let bob = try g.client("bob")
        _ = try bob.expectOK(try bob.command("room.join", ["roomId": "r"]))
        _ = bob.drain()
        _ = try Self.nx(rest, "/v4/open-channel/low-priority-message-type-list/add", ["messageTypes": ["App:Like"]])
        func nxSend(_ content: String, _ type: String, _ priority: Int?) throws -> RESTClient.Response {
            var body: J = ["fromUserId": "host", "toChannelIds": ["r"], "messageType": type, "content": content]
            if let priority { body["priority"] = priority }
            return try rest.vendor(.nexconn, "/v4/open-channel/message/send", json: body)
        }
        for (content, type, priority) in [("std", "RC:TxtMsg", 0), ("allow", "RC:TxtMsg", 1), ("high", "App:Like", 2), ("low", "RC:TxtMsg", 3)] as [(String, String, Int)] {
            let r = try nxSend(content, type, priority)
            #expect(r.status == 200 && r.json.int("code") == 0, "\(r.text)")
        }
        #expect(try nxSend("like", "App:Like", nil).json.int("code") == 0)
        g.settle()
        let got = bob.drain().filter { $0.str("ev") == "room.message" }.map { $0.obj("data").obj("message") }
        #expect(got.map { "\($0.str("content") ?? ""):\($0.str("priority") ?? "normal"):\($0.str("messageType") ?? "")" }
                == ["std:normal:RC:TxtMsg", "allow:high:RC:TxtMsg", "high:high:App:Like", "low:low:RC:TxtMsg", "like:low:App:Like"])
        for (priority, type, field) in [(4, "RC:TxtMsg", "priority"), (0, String(repeating: "t", count: SettingsLimits.maxMessageTypeBytes + 1), "messageType")] {
            let bad = try nxSend("bad", type, priority)
            #expect(bad.status == 400 && bad.json.int("code") == 1002 && bad.json.str("field") == field, "\(bad.text)")
        }
        g.settle()
        #expect(bob.drain().filter { $0.str("ev") == "room.message" }.isEmpty)
    }

    // QS-4, QS-6: what these endpoints used to refuse is now served, and what stays unsupported
    // still says so.
    @Test func theQoSEndpointsAreNoLongerUnsupported() {
        let paths = ["/chatroom/message/priority/add.json", "/chatroom/message/priority/remove.json", "/chatroom/message/priority/query.json",
                     "/chatroom/user/whitelist/add.json", "/chatroom/user/whitelist/remove.json", "/chatroom/user/whitelist/query.json",
                     "/chatroom/whitelist/add.json", "/chatroom/whitelist/delete.json", "/chatroom/whitelist/query.json",
                     "/chatroom/message/stopDistribution.json", "/chatroom/message/resumeDistribution.json"]
        let rc = Dictionary(uniqueKeysWithValues: Vendor.rongCloud.endpoints.map { ($0.path, $0.supported) })
        for p in paths { #expect(rc[p] == true, "\(p)") }
        let nx = Dictionary(uniqueKeysWithValues: Vendor.nexconn.endpoints.map { ($0.path, $0.supported) })
        for base in ["low-priority-message-type-list", "priority-message-type-list", "priority-sender-list", "participant/priority-sender-list"] {
            for verb in ["add", "remove", "get"] { #expect(nx["/v4/open-channel/\(base)/\(verb)"] == true, "\(base)/\(verb)") }
        }
    }
}
