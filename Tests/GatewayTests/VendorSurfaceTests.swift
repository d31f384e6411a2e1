import Chat
import Foundation
import Synchronization
@testable import Gateway
import Testing
import TestKit
import Wire

/// The vendors' server APIs on the wire (SPEC §8): RongCloud v1 (VC-1), NIM v1 (VC-2), Nexconn v4
/// (VC-3), each a translation into the native API's commands (VC-4).
@Suite("Vendor surfaces")
struct VendorSurfaceTests {
    typealias J = [String: Any]

    // MARK: Pure readers

    // VC-1/VC-2/VC-3: parameters as each vendor's SDK sends them.
    @Test func paramsReadEachVendorsEncoding() throws {
        // RongCloud: repeated keys; a JSON value sent without percent-encoding stays intact.
        let rc = VendorParams.form(Array(#"chatroomId=r1&userId=a&userId=b&entryInfo={"k":"v%1","n":"x"}&userIds=u1,u2,,u3&minute=5"#.utf8))
        #expect(try rc.required("chatroomId") == "r1")
        #expect(try rc.list("userId") == ["a", "b"])
        #expect(try rc.commaList("userIds") == ["u1", "u2", "u3"])
        #expect(try rc.int("minute") == 5)
        #expect(try rc.stringMap("entryInfo")?.map { "\($0.key)=\($0.value)" } == ["k=v%1", "n=x"])
        #expect(throws: ChatError.self) { try rc.required("missing") }
        // As the Python SDK sends it: nothing percent-encoded, UTF-8 and spaces as they are.
        let sdk = VendorParams.form(Array("chatroom[r2]=中文 y+1%41&userId=a b".utf8))
        #expect(try sdk.string("chatroom[r2]") == "中文 y+1%41" && sdk.list("userId") == ["a b"])
        // An encoded body is decoded (`+` is a space).
        let encoded = VendorParams.form(Array("name=a%20b+c&extra=%7B%22k%22%3A1%7D".utf8))
        #expect(try encoded.string("name") == "a b c" && encoded.string("extra") == #"{"k":1}"#)
        let badInt = VendorParams.form(Array("minute=five".utf8))
        #expect(throws: ChatError(.invalidParameter, "minute must be an integer", field: "minute")) { try badInt.int("minute") }
        // NIM: JSON-array strings inside the form.
        let nim = VendorParams.form(Array(#"accids=%5B%22a%22%2C%22b%22%5D&bad=%5B1%5D"#.utf8))
        #expect(try nim.jsonArrayString("accids") == ["a", "b"])
        #expect(throws: ChatError(.invalidParameter, "bad must be a JSON array of strings", field: "bad")) { try nim.jsonArrayString("bad") }
        // Nexconn: strict JSON types; a number is not a string, a string not a boolean.
        let nx = try VendorParams.json(Array(#"{"channelId":"c","participantIds":["a"],"durationMinutes":5,"needNotify":true,"n":1,"s":"true"}"#.utf8))
        #expect(try nx.list("participantIds") == ["a"] && nx.int("durationMinutes") == 5 && nx.bool("needNotify") == true)
        #expect(throws: ChatError(.invalidParameter, "n must be a string", field: "n")) { try nx.string("n") }
        #expect(throws: ChatError(.invalidParameter, "s must be true or false", field: "s")) { try nx.bool("s") }
        #expect(throws: ChatError(.invalidParameter, "the body must be a JSON object", field: "body")) { try VendorParams.json(Array("[1]".utf8)) }
        #expect(throws: ChatError(.invalidParameter, "the body must be a JSON object", field: "body")) { try VendorParams.json(Array("{\"a\":".utf8)) }
    }

    // VC-1: RongCloud answers times as `yyyy-MM-dd HH:mm:ss`, UTC.
    @Test func vendorTimeIsUTCCivilTime() {
        #expect(VendorTime.dateTime(milliseconds: 0) == "1970-01-01 00:00:00")
        #expect(VendorTime.dateTime(milliseconds: 1_800_000_000_000) == "2027-01-15 08:00:00")
        #expect(VendorTime.dateTime(milliseconds: 1_709_210_096_000) == "2024-02-29 12:34:56")
        #expect(VendorTime.dateTime(milliseconds: -1000) == "1969-12-31 23:59:59")
        #expect(NIMV1.hostPort("ws://gateway.test/ws") == "gateway.test:80")
        #expect(NIMV1.hostPort("wss://chat.example.com/ws") == "chat.example.com:443")
        #expect(NIMV1.hostPort("ws://127.0.0.1:8080/ws") == "127.0.0.1:8080")
        #expect(NIMV1.hostPort("ws://[::1]:9000/ws") == "[::1]:9000")
    }

    // MARK: One behaviour, several spellings (VC-4)

    /// An event with what differs per room (its id, epoch, offset, the users' names) taken out.
    static func normalized(_ e: J, room: String, users: [String: String]) throws -> String {
        var e = e
        e["epoch"] = nil
        e["offset"] = nil
        var text = String(decoding: try JSONSerialization.data(withJSONObject: e, options: [.sortedKeys]), as: UTF8.self)
        for (name, placeholder) in users { text = text.replacingOccurrences(of: name, with: placeholder) }
        return text.replacingOccurrences(of: "\"\(room)\"", with: "\"ROOM\"")
    }

    // VC-4, RC-6, NIM-12: a mute with its notification, asked through each surface, gives the
    // members the same events as the native call, refuses the muted user's send with the same
    // code, and reaches nobody outside the room.
    @Test func everySurfaceGivesClientsTheSameEvents() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "elsewhere"]).status == 201)
        let carol = try g.client("carol")
        try carol.expectOK(carol.command("room.join", ["roomId": "elsewhere"]))
        _ = carol.drain()

        // RongCloud-style mutes (minutes, needNotify + extra) and NIM-style (seconds, notifyExt).
        let rcStyle: [(String, (String, String) throws -> Bool)] = [
            ("native", { room, user in try rest.call("POST", "/v1/rooms/\(room)/mutes", ["userIds": [user], "minutes": 5, "needNotify": true, "extra": "x"]).status == 200 }),
            ("rongcloud", { room, user in
                try rest.vendor(.rongCloud, "/chatroom/user/gag/add.json", [("chatroomId", room), ("userId", user), ("minute", "5"), ("needNotify", "true"), ("extra", "x")]).json.int("code") == 200
            }),
            ("nexconn", { room, user in
                try rest.vendor(.nexconn, "/v4/open-channel/participant/mute-list/add",
                                        json: ["channelId": room, "participantIds": [user], "durationMinutes": 5, "needNotify": true, "extra": "x"]).json.int("code") == 0
            }),
        ]
        let nimStyle: [(String, (String, String) throws -> Bool)] = [
            ("native", { room, user in try rest.call("POST", "/v1/rooms/\(room)/mutes", ["userIds": [user], "seconds": 300, "notifyExt": "n"]).status == 200 }),
            ("nim", { room, user in
                try rest.vendor(.nim, "/nimserver/chatroom/temporaryMute.action",
                                        [("roomid", room), ("operator", "admin"), ("target", user), ("muteDuration", "300"), ("needNotify", "true"), ("notifyExt", "n")]).json.int("code") == 200
            }),
        ]
        var number = 100
        for (style, surfaces) in [("rc", rcStyle), ("nim", nimStyle)] {
            var seen: [String: [String]] = [:]
            for (name, mute) in surfaces {
                number += 1
                let room = String(number)
                // NIM's temporaryMute takes the room's creator or a manager as its operator (MO-7).
                #expect(try rest.call("POST", "/v1/rooms", ["roomId": room, "creator": "admin"]).status == 201)
                let alice = try g.client("alice\(room)"), dave = try g.client("dave\(room)")
                try alice.expectOK(alice.command("room.join", ["roomId": room]))
                try dave.expectOK(dave.command("room.join", ["roomId": room]))
                _ = [alice, dave].map { $0.drain() }
                #expect(try mute(room, "dave\(room)"), "\(name)")
                let users = ["alice\(room)": "ALICE", "dave\(room)": "DAVE", "Alice\(room)": "ALICE", "Dave\(room)": "DAVE"]
                let events = try [alice, dave].flatMap { c in
                    try c.drain().map { e in
                        // MO-7: NIM's notification names its operator as the source (NIM's
                        // fromAccount); the native call acts as the app server (no source).
                        guard name == "nim", var data = e["data"] as? J, data["source"] != nil else { return try Self.normalized(e, room: room, users: users) }
                        #expect((data["source"] as? J)?.str("userId") == "admin", "\(e)")
                        data["source"] = NSNull()
                        var plain = e
                        plain["data"] = data
                        return try Self.normalized(plain, room: room, users: users)
                    }
                }
                #expect(!events.isEmpty, "\(name): no event")
                seen[name] = events
                let refused = try dave.command("room.send", ["roomId": room, "content": "hi"])
                #expect((refused["error"] as? J)?["code"] as? Int == ErrorCode.muted.rawValue, "\(name)")
            }
            let reference = seen["native"]!
            for (name, events) in seen { #expect(events == reference, "\(style): \(name) differs from native") }
        }
        #expect(carol.eventNames().isEmpty)
    }

    // MARK: RongCloud v1 (VC-1)

    @Test func rongCloudChatroomCallsAnswerInItsShapes() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        func rc(_ path: String, _ form: [(String, String)] = []) throws -> J {
            let r = try rest.vendor(.rongCloud, path, form)
            #expect(r.status == 200 && r.json.int("code") == 200, "\(path): \(r.text)")
            return r.json
        }
        // create_new with the mute-all flag, its allowlist and attributes (entryInfo unencoded, as the SDK sends it).
        let raw = #"chatroomId=live&destroyType=1&destroyTime=120&isBan=true&whiteUserIds=vip&entryOwnerId=host&entryInfo={"topic":"a b"}"#
        #expect(try rest.vendor(.rongCloud, "/chatroom/create_new.json", raw: raw).json.int("code") == 200)
        let info = try rc("/chatroom/get.json", [("chatroomId", "live")])
        #expect(info.str("chatroomId") == "live" && info.int("destroyType") == 1 && info.int("destroyTime") == 120 && info["ban"] as? Bool == true)
        #expect(info.int("createTime") == Int(g.clock.now) && info.int("memberCount") == 0)
        #expect(try rc("/chatroom/ban/check.json", [("chatroomId", "live")]).int("status") == 1)
        #expect(try rc("/chatroom/ban/query.json", [("page", "1"), ("size", "10")])["chatroomids"] as? [String] == ["live"])
        #expect(try rc("/chatroom/user/ban/whitelist/query.json", [("chatroomId", "live")])["userIds"] as? [String] == ["vip"])
        let entries = try rc("/chatroom/entry/query.json", [("chatroomId", "live")])["keys"] as? [J] ?? []
        #expect(entries.count == 1 && entries[0].str("key") == "topic" && entries[0].str("value") == "a b" && entries[0].str("userID") == "host")
        // MO-6: with the time it was last set, as RongCloud gives it.
        #expect(entries.first?.str("lastSetTime") == VendorTime.dateTime(milliseconds: g.clock.now), "\(entries)")

        // A ZIM-style room (destroyed once empty) has no RongCloud destroy type: none is invented.
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "zim", "destroy": ["policy": "whenEmpty", "seconds": 30]]).status == 201)
        let zim = try rc("/chatroom/get.json", [("chatroomId", "zim")])
        #expect(zim["destroyType"] == nil && zim["destroyTime"] == nil && zim.str("chatroomId") == "zim")

        // The old create (repeated `chatroom[id]=name`) keeps rooms that exist.
        #expect(try rc("/chatroom/create.json", [("chatroom[old1]", "One"), ("chatroom[live]", "Again")]).int("code") == 200)
        let rooms = try rc("/chatroom/query.json", [("chatroomId", "old1"), ("chatroomId", "live"), ("chatroomId", "nope")])["chatRooms"] as? [J] ?? []
        #expect(rooms.map { $0.str("chrmId") ?? "" } == ["old1", "live"] && rooms[0].str("name") == "One")
        #expect(rooms[0].str("time") == VendorTime.dateTime(milliseconds: g.clock.now))

        // Members: users [{id,time}], isInChrm boolean, result [{userId,isInChrm 0/1}].
        let alice = try g.client("alice"), bob = try g.client("bob")
        try alice.expectOK(alice.command("room.join", ["roomId": "live"]))
        try bob.expectOK(bob.command("room.join", ["roomId": "live"]))
        let members = try rc("/chatroom/user/query.json", [("chatroomId", "live"), ("count", "10"), ("order", "2")])
        #expect(members.int("total") == 2)
        let users = members["users"] as? [J] ?? []
        #expect(users.map { $0.str("id") ?? "" } == ["bob", "alice"])
        #expect(users.allSatisfy { ($0.str("time") ?? "").range(of: #"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$"#, options: .regularExpression) != nil })
        #expect(try rc("/chatroom/user/exist.json", [("chatroomId", "live"), ("userId", "alice")])["isInChrm"] as? Bool == true)
        #expect(try rc("/chatroom/user/exist.json", [("chatroomId", "live"), ("userId", "zed")])["isInChrm"] as? Bool == false)
        let exist = try rest.vendor(.rongCloud, "/chatroom/users/exist.json", [("chatroomId", "live"), ("userId", "alice"), ("userId", "zed")])
        #expect(exist.text.contains(#"{"userId":"alice","isInChrm":1}"#) && exist.text.contains(#"{"userId":"zed","isInChrm":0}"#))

        // Blocks (RC-5): removed at once, listed with the end time; rollback lets them back.
        _ = alice.drain()
        _ = try rc("/chatroom/user/block/add.json", [("chatroomId", "live"), ("userId", "bob"), ("minute", "10"), ("needNotify", "true"), ("extra", "e")])
        #expect(try alice.waitFor("room.block")["data"].map { "\($0)" }?.contains("e") == true)
        let blocked = try rc("/chatroom/user/block/list.json", [("chatroomId", "live")])["users"] as? [J] ?? []
        #expect(blocked.count == 1 && blocked[0].str("userId") == "bob" && blocked[0].str("time") == VendorTime.dateTime(milliseconds: g.clock.now + 600_000))
        #expect((try bob.command("room.join", ["roomId": "live"])["error"] as? J)?["code"] as? Int == ErrorCode.blocked.rawValue)
        _ = try rc("/chatroom/user/block/rollback.json", [("chatroomId", "live"), ("userId", "bob")])
        try bob.expectOK(bob.command("room.join", ["roomId": "live"]))

        // Gags, global mutes, keep-alive, attribute removal, destroy-type change.
        _ = try rc("/chatroom/user/gag/add.json", [("chatroomId", "live"), ("userId", "alice"), ("minute", "1")])
        #expect((try rc("/chatroom/user/gag/list.json", [("chatroomId", "live")])["users"] as? [J])?.first?.str("userId") == "alice")
        _ = try rc("/chatroom/user/gag/rollback.json", [("chatroomId", "live"), ("userId", "alice")])
        #expect((try rc("/chatroom/user/gag/list.json", [("chatroomId", "live")])["users"] as? [J])?.isEmpty == true)
        _ = try rc("/chatroom/user/ban/add.json", [("userId", "alice"), ("userId", "bob"), ("minute", "30")])
        #expect((try rc("/chatroom/user/ban/query.json")["users"] as? [J])?.map { $0.str("userId") ?? "" } == ["alice", "bob"])
        _ = try rc("/chatroom/user/ban/remove.json", [("userId", "alice"), ("userId", "bob")])
        _ = try rc("/chatroom/keepalive/add.json", [("chatroomId", "live")])
        #expect(try rc("/chatroom/keepalive/query.json")["chatroomIds"] as? [String] == ["live"])
        _ = try rc("/chatroom/keepalive/remove.json", [("chatroomId", "live")])
        #expect(try rc("/chatroom/keepalive/query.json")["chatroomIds"] as? [String] == [])
        _ = try rc("/chatroom/entry/set.json", [("chatroomId", "live"), ("userId", "alice"), ("key", "k2"), ("value", "v2"), ("autoDelete", "1")])
        _ = try rc("/chatroom/entry/remove.json", [("chatroomId", "live"), ("userId", "host"), ("key", "topic")])
        let left = try rc("/chatroom/entry/query.json", [("chatroomId", "live")])["keys"] as? [J] ?? []
        #expect(left.map { $0.str("key") ?? "" } == ["k2"] && left[0].int("autoDelete") == 1)
        _ = try rc("/chatroom/ban/rollback.json", [("chatroomId", "live")])
        _ = try rc("/chatroom/destroy/set.json", [("chatroomId", "live"), ("destroyType", "0"), ("destroyTime", "90")])
        let after = try rc("/chatroom/get.json", [("chatroomId", "live")])
        #expect(after.int("destroyType") == 0 && after.int("destroyTime") == 90 && after["ban"] as? Bool == false)
        _ = try rc("/chatroom/destroy.json", [("chatroomId", "live"), ("chatroomId", "old1")])
        let gone = try rest.vendor(.rongCloud, "/chatroom/get.json", [("chatroomId", "live")])
        #expect(gone.status == 404 && gone.json.int("code") == 23410)
        #expect(try alice.waitFor("room.status") { ($0["data"] as? J)?.str("status") == "destroyed" }.isEmpty == false)
    }

    // VC-1: ultra groups and conversation status in RongCloud's shapes (comma-joined userIds).
    @Test func rongCloudUltraGroupAndConversationCalls() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        func rc(_ path: String, _ form: [(String, String)]) throws -> J {
            let r = try rest.vendor(.rongCloud, path, form)
            #expect(r.status == 200 && r.json.int("code") == 200, "\(path): \(r.text)")
            return r.json
        }
        _ = try rc("/ultragroup/create.json", [("userId", "owner"), ("groupId", "ug"), ("groupName", "Guild")])
        _ = try rc("/ultragroup/join.json", [("userId", "ann"), ("groupId", "ug")])
        _ = try rc("/ultragroup/channel/create.json", [("groupId", "ug"), ("busChannel", "secret"), ("type", "0")])
        let notMember = try rest.vendor(.rongCloud, "/ultragroup/channel/private/users/add.json", [("groupId", "ug"), ("busChannel", "secret"), ("userIds", "ann,stranger")])
        #expect(notMember.json.int("code") == 24406)
        _ = try rc("/ultragroup/channel/private/users/add.json", [("groupId", "ug"), ("busChannel", "secret"), ("userIds", "ann,owner")])
        _ = try rc("/ultragroup/channel/type/change.json", [("groupId", "ug"), ("busChannel", "secret"), ("type", "1")])
        let list = try rc("/ultragroup/channel/get.json", [("groupId", "ug"), ("page", "1"), ("limit", "10")])["channelList"] as? [J] ?? []
        #expect(list.contains { $0.str("channelId") == "secret" && $0.int("type") == 1 })
        #expect(try rc("/ultragroup/channel/private/users/get.json", [("groupId", "ug"), ("busChannel", "secret"), ("page", "1"), ("pageSize", "10")])["users"] as? [String] == ["ann", "owner"])
        _ = try rc("/ultragroup/channel/private/users/del.json", [("groupId", "ug"), ("busChannel", "secret"), ("userIds", "ann")])
        let annSees = try rc("/ultragroup/user/channel/query.json", [("groupId", "ug"), ("userId", "ann"), ("page", "1"), ("pageSize", "10")])["data"] as? [String] ?? []
        #expect(!annSees.contains("secret"))
        _ = try rc("/ultragroup/notdisturb/set.json", [("groupId", "ug"), ("unpushLevel", "1")])
        #expect(try rc("/ultragroup/notdisturb/get.json", [("groupId", "ug")]).int("unpushLevel") == 1)
        #expect(try rest.vendor(.rongCloud, "/ultragroup/notdisturb/set.json", [("groupId", "ug"), ("unpushLevel", "3")]).json.int("code") == 1002)
        _ = try rc("/ultragroup/channel/del.json", [("groupId", "ug"), ("busChannel", "secret")])
        _ = try rc("/ultragroup/quit.json", [("userId", "ann"), ("groupId", "ug")])

        // Conversation pin and Do-Not-Disturb (CS-1, CS-2, CS-4).
        _ = try rc("/conversation/top/set.json", [("userId", "ann"), ("conversationType", "1"), ("targetId", "bob"), ("setTop", "true")])
        _ = try rc("/conversation/notification/set.json", [("conversationType", "3"), ("requestId", "ann"), ("targetId", "g1"), ("unpushLevel", "5")])
        #expect(try rc("/conversation/notification/get.json", [("conversationType", "3"), ("requestId", "ann"), ("targetId", "g1")]).int("isMuted") == 5)
        _ = try rc("/conversation/type/notification/set.json", [("conversationType", "1"), ("requestId", "ann"), ("unpushLevel", "2")])
        #expect(try rc("/conversation/type/notification/get.json", [("conversationType", "1"), ("requestId", "ann")]).int("isMuted") == 2)
        let status = try rest.call("GET", "/v1/users/ann/conversations/1/bob").json
        #expect((status["status"] as? J)?["pinned"] as? Bool == true)
        _ = try rc("/ultragroup/dis.json", [("groupId", "ug")])
    }

    // VC-4: what Roomcast cannot honour says so with the vendor's own code; nothing pretends.
    @Test func unsupportedEndpointsSayTheyAreNotSupported() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        // MO-4 served RongCloud's last unsupported endpoints (its user groups).
        #expect(Vendor.rongCloud.endpoints.filter { !$0.supported }.isEmpty)
        let nx = try rest.vendor(.nexconn, "/v4/channel/tag/add", json: ["userId": "u"])
        #expect(nx.status == 430 && nx.json.int("code") == 1009)
        let nim = try rest.vendor(.nim, "/nimserver/chatroom/addRobot.action", [("roomid", "1"), ("accids", "[\"a\"]")])
        #expect(nim.status == 200 && nim.json.int("code") == 403 && (nim.json.str("desc") ?? "").contains("not supported"))
    }

    // MARK: Nexconn v4 (VC-3)

    @Test func nexconnAnswersWithTheSDKsModelTypes() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        func nx(_ path: String, _ body: J) throws -> (J, String) {
            let r = try rest.vendor(.nexconn, path, json: body)
            #expect(r.status == 200 && r.json.int("code") == 0, "\(path): \(r.text)")
            return ((r.json["result"] as? J) ?? [:], r.text)
        }
        _ = try nx("/v4/open-channel/create", ["channelId": "oc", "destroyType": 0, "ttlMinutes": 60, "shouldFreeze": true, "allowedSendersList": ["vip"],
                                               "metadataOwnerId": "host", "metadata": ["k": "v"]])
        let (info, text) = try nx("/v4/open-channel/get", ["channelId": "oc"])
        #expect(text.contains(#""isFrozen":true"#) && info.int("createdAt") == Int(g.clock.now) && info.int("ttlMinutes") == 60 && info.str("channelId") == "oc")
        let alice = try g.client("alice")
        try alice.expectOK(alice.command("room.join", ["roomId": "oc"]))
        let (_, exist) = try nx("/v4/open-channel/participant/exist", ["channelId": "oc", "participantIds": ["alice", "bob"]])
        #expect(exist.contains(#"{"participantId":"alice","isInOpenChannel":1}"#) && exist.contains(#"{"participantId":"bob","isInOpenChannel":0}"#))
        let (list, _) = try nx("/v4/open-channel/participant/list", ["channelId": "oc", "pageSize": 10, "order": 1])
        #expect(list.int("total") == 1 && (list["participants"] as? [J])?.first?.str("participantId") == "alice")
        // A message from the app server reaches the channel's members (NIM-8).
        _ = alice.drain()
        _ = try nx("/v4/open-channel/message/send", ["fromUserId": "host", "toChannelIds": ["oc"], "messageType": "RC:TxtMsg", "content": #"{"content":"hello"}"#])
        #expect(try alice.waitFor("room.message").description.contains("hello"))
        // One missing channel among several: refused whole, nothing sent anywhere.
        let missing = try rest.vendor(.nexconn, "/v4/open-channel/message/send", json: ["fromUserId": "host", "toChannelIds": ["oc", "nope"], "messageType": "RC:TxtMsg", "content": "x"])
        #expect(missing.status == 404 && missing.json.int("code") == 23410 && missing.json.str("field") == "toChannelIds")
        #expect(!alice.eventNames().contains("room.message"))
        #expect(try nx("/v4/open-channel/freeze/check", ["channelId": "oc"]).0.int("status") == 1)
        #expect(try nx("/v4/open-channel/freeze-list/get", ["page": 1, "pageSize": 50]).0["channelIds"] as? [String] == ["oc"])
        _ = try nx("/v4/open-channel/freeze-list/remove", ["channelId": "oc"])
        #expect(try nx("/v4/open-channel/participant/allowed-sender-list/get", ["channelId": "oc"]).0["participantIds"] as? [String] == ["vip"])
        // Both spellings of the global mute list (the SDK's path and its docstring's).
        _ = try nx("/v4/open-channel/global-mute-list/add", ["participantIds": ["alice"], "durationMinutes": 10])
        let muted = try nx("/v4/open-channel/participant/global-mute-list/get", [:]).0["mutedParticipants"] as? [J] ?? []
        #expect(muted.first?.str("participantId") == "alice" && muted.first?.str("muteExpiresAt") == VendorTime.dateTime(milliseconds: g.clock.now + 600_000))
        _ = try nx("/v4/open-channel/participant/global-mute-list/remove", ["participantIds": ["alice"]])
        #expect((try nx("/v4/open-channel/global-mute-list/get", [:]).0["mutedParticipants"] as? [J])?.isEmpty == true)
        _ = try nx("/v4/open-channel/participant/ban-list/add", ["channelId": "oc", "participantIds": ["alice"], "durationMinutes": 5])
        #expect(try alice.waitFor("room.kicked").isEmpty == false)
        #expect((try nx("/v4/open-channel/participant/ban-list/get", ["channelId": "oc"]).0["bannedParticipants"] as? [J])?.first?.str("banExpiresAt") != nil)
        _ = try nx("/v4/open-channel/metadata/batch/set", ["channelId": "oc", "metadataOwnerId": "host", "metadata": ["k2": "v2"], "shouldAutoDelete": false])
        let (_, meta) = try nx("/v4/open-channel/metadata/batch/get", ["channelId": "oc", "metadataKeys": ["k2"]])
        #expect(meta.contains(#""key":"k2","value":"v2","metadataOwnerId":"host","shouldAutoDelete":0,"updatedAt":\#(g.clock.now)"#), "\(meta)")

        // Community channels (ultra groups) and channel status.
        _ = try nx("/v4/community-channel/create", ["userId": "owner", "channelId": "cc", "name": "Guild"])
        _ = try nx("/v4/community-channel/join", ["userId": "ann", "channelId": "cc"])
        #expect(try nx("/v4/community-channel/member/exist", ["userId": "ann", "channelId": "cc"]).1.contains(#""isMember":true"#))
        #expect(try nx("/v4/community-channel/member/exist", ["userId": "zed", "channelId": "cc"]).1.contains(#""isMember":false"#))
        _ = try nx("/v4/community-channel/subchannel/create", ["channelId": "cc", "subchannelId": "s1", "channelVisibility": 0])
        _ = try nx("/v4/community-channel/private-subchannel/member/add", ["channelId": "cc", "subchannelId": "s1", "userIds": ["owner"]])
        _ = try nx("/v4/community-channel/subchannel-type/update", ["channelId": "cc", "subchannelId": "s1", "channelVisibility": 1])
        let subs = try nx("/v4/community-channel/subchannel/list", ["channelId": "cc", "page": 1, "pageSize": 20]).0["subchannels"] as? [J] ?? []
        #expect(subs.contains { $0.str("subchannelId") == "s1" && $0.int("channelVisibility") == 1 })
        #expect(try nx("/v4/community-channel/private-subchannel/member/list", ["channelId": "cc", "subchannelId": "s1"]).0["members"] as? [String] == ["owner"])
        #expect(!(try nx("/v4/community-channel/user/subchannel/list", ["channelId": "cc", "userId": "ann"]).0["subChannels"] as? [String] ?? ["s1"]).contains("s1"))
        _ = try nx("/v4/channel/pin/set", ["userId": "ann", "channelType": 1, "channelId": "bob", "isPin": true])
        let (attribute, _) = try nx("/v4/channel/attribute/get", ["userId": "ann", "channelType": 1, "channelId": "bob"])
        #expect((attribute["pin"] as? J)?["isPinned"] as? Bool == true && attribute.int("channelType") == 1)
        _ = try nx("/v4/channel/push/set", ["channelType": "3", "requestId": "ann", "channelId": "g1", "noDisturbLevel": 5])
        #expect(try nx("/v4/channel/push/get", ["channelType": "3", "requestId": "ann", "channelId": "g1"]).0.int("noDisturbLevel") == 5)
        _ = try nx("/v4/channel-type/push/set", ["channelType": "1", "requestId": "ann", "noDisturbLevel": 1])
        #expect(try nx("/v4/channel-type/push/get", ["channelType": "1", "requestId": "ann"]).0.int("noDisturbLevel") == 1)
        _ = try nx("/v4/open-channel/destroy", ["channelIds": ["oc"]])
        let gone = try rest.vendor(.nexconn, "/v4/open-channel/get", json: ["channelId": "oc"])
        #expect(gone.status == 404 && gone.json.int("code") == 23410 && gone.json["errorMessage"] is String)
    }

    // MARK: NIM v1 (VC-2)

    @Test func nimAnswersWithItsKeysAndNumericRooms() throws {
        let numbers = SequenceSource([4242, 4243])
        let g = try InProcessGateway { $0.roomNumber = { numbers.next() } }
        defer { g.stop() }
        let rest = g.rest()
        func nim(_ name: String, _ form: [(String, String)]) throws -> (J, String) {
            let r = try rest.vendor(.nim, "/nimserver/chatroom/\(name).action", form)
            #expect(r.status == 200 && r.json.int("code") == 200, "\(name): \(r.text)")
            return (r.json, r.text)
        }
        let (created, text) = try nim("create", [("creator", "host"), ("name", "Room"), ("announcement", "hi"), ("queuelevel", "1")])
        #expect(text.contains(#""roomid":4242,"#) && (created["chatroom"] as? J)?.str("creator") == "host")
        #expect((try rest.call("GET", "/v1/rooms/4242").json["room"] as? J)?.str("name") == "Room")
        let (got, _) = try nim("get", [("roomid", "4242"), ("needOnlineUserCount", "true")])
        #expect((got["chatroom"] as? J)?.int("onlineusercount") == 0 && (got["chatroom"] as? J)?["valid"] as? Bool == true)
        let (addr, _) = try nim("requestAddr", [("roomid", "4242"), ("accid", "alice"), ("clienttype", "1")])
        #expect(addr["addr"] as? [String] == ["gateway.test:80"] && addr["urls"] as? [String] == ["ws://gateway.test/ws"])
        let (batch, batchText) = try nim("getBatch", [("roomids", "[\"4242\",\"999\"]")])
        #expect((batch["succRooms"] as? [J])?.count == 1 && batchText.contains(#""noExistRooms":[999]"#))
        // MO-7: as NIM's Java SDK sends them (List<Long>: JSON numbers), the same answer.
        let (sdkBatch, sdkBatchText) = try nim("getBatch", [("roomids", "[4242,999]")])
        #expect((sdkBatch["succRooms"] as? [J])?.count == 1 && sdkBatchText.contains(#""noExistRooms":[999]"#))
        for bad in ["[4242.5]", "[true]", "[-1]", "[\"04242\"]", "4242"] {
            let r = try rest.vendor(.nim, "/nimserver/chatroom/getBatch.action", [("roomids", bad)])
            #expect(r.json.int("code") == 414 && r.json.str("field") == "roomids", "\(bad): \(r.text)")
        }

        let alice = try g.client("alice"), bob = try g.client("bob")
        try alice.expectOK(alice.command("room.join", ["roomId": "4242"]))
        try bob.expectOK(bob.command("room.join", ["roomId": "4242"]))
        _ = [alice, bob].map { $0.drain() }
        let (role, _) = try nim("setMemberRole", [("roomid", "4242"), ("operator", "host"), ("target", "bob"), ("opt", "1"), ("optvalue", "true")])
        #expect((role["desc"] as? J)?.str("type") == "MANAGER" && (role["desc"] as? J)?.str("accid") == "bob")
        let (mute, _) = try nim("temporaryMute", [("roomid", "4242"), ("operator", "host"), ("target", "alice"), ("muteDuration", "60")])
        #expect((mute["desc"] as? J)?.int("muteDuration") == 60)
        #expect((try alice.command("room.send", ["roomId": "4242", "content": "x"])["error"] as? J)?["code"] as? Int == ErrorCode.muted.rawValue)
        _ = try nim("temporaryMute", [("roomid", "4242"), ("operator", "host"), ("target", "alice"), ("muteDuration", "0")])
        try alice.expectOK(alice.command("room.send", ["roomId": "4242", "content": "x"]))
        _ = try nim("muteRoom", [("roomid", "4242"), ("operator", "host"), ("mute", "true"), ("needNotify", "true")])
        #expect((try rest.call("GET", "/v1/rooms/4242").json["room"] as? J)?["muted"] as? Bool == true)
        _ = try nim("muteRoom", [("roomid", "4242"), ("operator", "host"), ("mute", "false")])
        let (members, _) = try nim("membersByPage", [("roomid", "4242"), ("type", "0"), ("endtime", "0"), ("limit", "10")])
        let data = (members["desc"] as? J)?["data"] as? [J] ?? []
        #expect(Set(data.compactMap { $0.str("accid") }) == ["host", "bob"])
        let (some, _) = try nim("queryMembers", [("roomid", "4242"), ("accids", "[\"alice\"]")])
        #expect(((some["desc"] as? J)?["data"] as? [J])?.first?["onlineStat"] as? Bool == true)
        _ = try nim("kickMember", [("roomid", "4242"), ("targetAccid", "alice"), ("accid", "host")])
        #expect(try alice.waitFor("room.kicked").isEmpty == false)

        // Queue (NIM-16).
        _ = try nim("queueInit", [("roomid", "4242"), ("sizeLimit", "10")])
        _ = try nim("queueOffer", [("roomid", "4242"), ("key", "k1"), ("value", "v1")])
        _ = try nim("queueOffer", [("roomid", "4242"), ("key", "k2"), ("value", "v2")])
        #expect(try nim("queueList", [("roomid", "4242")]).1.contains(#""list":[{"k1":"v1"},{"k2":"v2"}]"#))
        #expect(try nim("queueMultiGet", [("roomid", "4242"), ("keys", "[\"k2\"]")]).1.contains(#""list":[{"k2":"v2"}]"#))
        let (updated, _) = try nim("queueBatchUpdateElements", [("roomid", "4242"), ("operator", "host"), ("elements", #"{"k1":"w1","zz":"q"}"#)])
        #expect((updated["desc"] as? J)?["noExistElementKey"] as? [String] == ["zz"])
        #expect(((try nim("queuePoll", [("roomid", "4242"), ("key", "")]).0["desc"] as? J)?.str("value")) == "w1")
        _ = try nim("queueDrop", [("roomid", "4242")])
        #expect(try nim("queueList", [("roomid", "4242")]).1.contains(#""list":[]"#))
        #expect(try nim("queryUserRoomIds", [("creator", "host")]).1.contains(#""roomids":"[4242]""#))
        let (closed, _) = try nim("toggleCloseStat", [("roomid", "4242"), ("operator", "host"), ("valid", "false")])
        #expect((closed["desc"] as? J)?["valid"] as? Bool == false)

        // Refusals are HTTP 200 with NIM's code and a string desc.
        for (form, code) in [([("roomid", "abc"), ("needOnlineUserCount", "true")], 414), ([("roomid", "0042")], 414), ([("roomid", "777")], 404)] as [([(String, String)], Int)] {
            let r = try rest.vendor(.nim, "/nimserver/chatroom/get.action", form)
            #expect(r.status == 200 && r.json.int("code") == code && r.json["desc"] is String, "\(form)")
        }
    }

    // MARK: Bad input on each surface (SPEC §13)

    // VC-1..VC-3: 21 ids, 43201 minutes, a 65-byte room id, a missing parameter, a malformed body,
    // a wrong signature, a replayed nonce and a stale timestamp each get the vendor's code and
    // change nothing.
    @Test func badInputGetsTheVendorsCodeAndChangesNothing() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "r"]).status == 201)
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "7"]).status == 201)
        let ids21 = (1...21).map { "u\($0)" }
        let long = String(repeating: "x", count: 65)

        // RongCloud: 1002 / HTTP 400 for parameters, 1004 / HTTP 401 for signatures.
        let rcBad: [([(String, String)], String)] = [
            ([("chatroomId", "r"), ("minute", "5")] + ids21.map { ("userId", $0) }, "userId"),
            ([("chatroomId", "r"), ("userId", "a"), ("minute", "43201")], "minute"),
            ([("chatroomId", long), ("userId", "a"), ("minute", "5")], "chatroomId"),
            ([("chatroomId", "r"), ("userId", "a")], "minute"),
            ([("chatroomId", "r"), ("userId", "a"), ("minute", "five")], "minute"),
        ]
        for (form, field) in rcBad {
            let r = try rest.vendor(.rongCloud, "/chatroom/user/gag/add.json", form)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(field): \(r.text)")
        }
        // Nexconn: the same codes in its envelope; a malformed JSON body too.
        let nxBad: [(Any?, String?, String)] = [
            (["channelId": "r", "participantIds": ids21, "durationMinutes": 5], nil, "participantIds"),
            (["channelId": "r", "participantIds": ["a"], "durationMinutes": 43201], nil, "durationMinutes"),
            (["channelId": long, "participantIds": ["a"], "durationMinutes": 5], nil, "channelId"),
            (["channelId": "r", "participantIds": ["a"]], nil, "durationMinutes"),
            (["channelId": "r", "participantIds": "a", "durationMinutes": 5], nil, "participantIds"),
            (nil, #"{"channelId":"r","#, "body"),
        ]
        for (json, raw, field) in nxBad {
            let r = try rest.vendor(.nexconn, "/v4/open-channel/participant/mute-list/add", json: json, raw: raw)
            #expect(r.status == 400 && r.json.int("code") == 1002 && r.json.str("field") == field, "\(field): \(r.text)")
        }
        // NIM: 414 with HTTP 200.
        let nimBad: [([(String, String)], String)] = [
            ([("roomid", "7"), ("accids", "[" + ids21.map { "\"\($0)\"" }.joined(separator: ",") + "]")], "accids"),
            ([("roomid", long), ("accids", "[\"a\"]")], "roomid"),
            ([("roomid", "7")], "accids"),
            ([("roomid", "7"), ("accids", "a,b")], "accids"),
        ]
        for (form, field) in nimBad {
            let r = try rest.vendor(.nim, "/nimserver/chatroom/queryMembers.action", form)
            #expect(r.status == 200 && r.json.int("code") == 414 && r.json.str("field") == field, "\(field): \(r.text)")
        }
        let tooLong = try rest.vendor(.nim, "/nimserver/chatroom/temporaryMute.action",
                                      [("roomid", "7"), ("operator", "h"), ("target", "a"), ("muteDuration", "2592001")])
        #expect(tooLong.json.int("code") == 414)

        // Per-call list bounds hold on every surface: 1001 ids to check, 101 rooms, 11 channels.
        let exist = try rest.vendor(.rongCloud, "/chatroom/users/exist.json", [("chatroomId", "r")] + (0...Limits.maxIsInRoomIds).map { ("userId", "u\($0)") })
        #expect(exist.status == 400 && exist.json.int("code") == 1002)
        let batch = try rest.vendor(.nim, "/nimserver/chatroom/getBatch.action", [("roomids", "[" + (1...101).map { "\"\($0)\"" }.joined(separator: ",") + "]")])
        #expect(batch.json.int("code") == 414)
        let send = try rest.vendor(.nexconn, "/v4/open-channel/message/send", json: ["fromUserId": "h", "toChannelIds": (1...11).map { "c\($0)" }, "messageType": "RC:TxtMsg", "content": "x"])
        #expect(send.status == 400 && send.json.str("field") == "toChannelIds")
        // A parameter refused while the call is read is named as the caller sent it: Nexconn's
        // channelId (its room) and RongCloud's userId stay theirs, not the domain's renamed.
        let noChannel = try rest.vendor(.nexconn, "/v4/open-channel/get", json: [String: Any]())
        #expect(noChannel.status == 400 && noChannel.json.str("field") == "channelId", "\(noChannel.text)")
        let noUsers = try rest.vendor(.rongCloud, "/chatroom/user/gag/add.json", [("chatroomId", "r"), ("minute", "5")])
        #expect(noUsers.status == 400 && noUsers.json.str("field") == "userId", "\(noUsers.text)")

        // A deeply nested body is refused, not recursed into; the old create checks every id first.
        let deep = try rest.vendor(.nexconn, "/v4/open-channel/get", raw: String(repeating: "[", count: 100_000))
        #expect(deep.status == 400 && deep.json.int("code") == 1002)
        let deepForm = try rest.vendor(.nim, "/nimserver/chatroom/queryMembers.action", [("roomid", "7"), ("accids", String(repeating: "[", count: 100_000))])
        #expect(deepForm.json.int("code") == 414)
        let partial = try rest.vendor(.rongCloud, "/chatroom/create.json", [("chatroom[fine]", "Fine"), ("chatroom[\(long)]", "Too long")])
        #expect(partial.status == 400 && partial.json.int("code") == 1002)
        #expect(try rest.vendor(.rongCloud, "/chatroom/get.json", [("chatroomId", "fine")]).json.int("code") == 23410)

        // Signatures: wrong, replayed, stale.
        let gag = [("chatroomId", "r"), ("userId", "a"), ("minute", "5")]
        var wrong = rest.signatureHeaders()
        wrong[3].1 = String(repeating: "0", count: 40)
        #expect(try rest.vendor(.rongCloud, "/chatroom/user/gag/add.json", gag, headers: wrong).json.int("code") == 1004)
        let once = rest.signatureHeaders(nonce: "once-1")
        #expect(try rest.vendor(.rongCloud, "/chatroom/user/gag/list.json", [("chatroomId", "r")], headers: once).json.int("code") == 200)
        let replay = try rest.vendor(.rongCloud, "/chatroom/user/gag/add.json", gag, headers: once)
        #expect(replay.status == 401 && replay.json.int("code") == 1004 && replay.json.str("field") == "Nonce")
        let stale = try rest.vendor(.nexconn, "/v4/open-channel/participant/mute-list/add", json: ["channelId": "r", "participantIds": ["a"], "durationMinutes": 5],
                                    headers: rest.signatureHeaders(timestamp: (g.clock.now - 301_000)))
        #expect(stale.status == 401 && stale.json.int("code") == 1004 && stale.json.str("field") == "Timestamp")
        let unknown = try g.rest(app: "nobody").vendor(.nexconn, "/v4/open-channel/get", json: ["channelId": "r"])
        #expect(unknown.status == 401 && unknown.json.int("code") == 1001)
        var nimWrong = rest.nimHeaders()
        nimWrong[3].1 = "bad"
        #expect(try rest.vendor(.nim, "/nimserver/chatroom/get.action", [("roomid", "7")], headers: nimWrong).json.int("code") == 414)
        let nimOnce = rest.nimHeaders(nonce: "nim-once")
        _ = try rest.vendor(.nim, "/nimserver/chatroom/get.action", [("roomid", "7")], headers: nimOnce)
        let nimReplay = try rest.vendor(.nim, "/nimserver/chatroom/temporaryMute.action",
                                        [("roomid", "7"), ("operator", "h"), ("target", "a"), ("muteDuration", "60")], headers: nimOnce)
        #expect(nimReplay.status == 200 && nimReplay.json.int("code") == 431)
        let nimStale = try rest.vendor(.nim, "/nimserver/chatroom/get.action", [("roomid", "7")], headers: rest.nimHeaders(curTime: g.clock.seconds + 301))
        #expect(nimStale.json.int("code") == 414 && nimStale.json.str("field") == "CurTime")

        // Nothing changed: no mutes anywhere, both rooms as they were.
        for room in ["r", "7"] {
            #expect((try rest.call("GET", "/v1/rooms/\(room)/mutes").json["users"] as? [Any])?.isEmpty ?? true, "\(room)")
            #expect((try rest.call("GET", "/v1/rooms/\(room)/mutes").text).contains("\"a\"") == false)
        }
        #expect(try rest.call("GET", "/v1/rooms").text.contains(long) == false)
    }
}

/// Hands out the given numbers in order (then the last one again): an injected room-number source.
final class SequenceSource: Sendable {
    private let state: Mutex<(values: [Int64], index: Int)>
    init(_ values: [Int64]) { state = Mutex((values, 0)) }
    func next() -> Int64 {
        state.withLock { s in
            let v = s.values[min(s.index, s.values.count - 1)]
            s.index += 1
            return v
        }
    }
}
