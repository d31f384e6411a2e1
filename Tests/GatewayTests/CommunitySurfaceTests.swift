import Chat
import Foundation
@testable import Gateway
import Testing
import TestKit
import Wire

/// MO-3, MO-5, MO-6 over the wire: Nexconn's and RongCloud's community-channel (ultra-group)
/// calls and the `group.send` op reach exactly the members who see the channel, the controls
/// hold members' sends, history comes back in each vendor's shape, and bad input names the
/// caller's own field and changes nothing.
@Suite("Community channels on the vendor surfaces and the protocol (MO-3, MO-5, MO-6)")
struct CommunitySurfaceTests {
    typealias J = [String: Any]

    /// Group "guild" (alice creator, bob, carol), private subchannel "vip" listing bob; dave is
    /// connected and in no group. Inboxes drained.
    func guild(_ g: InProcessGateway) throws -> (alice: SessionClient, bob: SessionClient, carol: SessionClient, dave: SessionClient) {
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "guild", "name": "Guild", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/guild/members", ["userIds": ["bob", "carol"]]).status == 200)
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/subchannel/create",
                                json: ["channelId": "guild", "subchannelId": "vip", "channelVisibility": 1]).json.int("code") == 0)
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/private-subchannel/member/add",
                                json: ["channelId": "guild", "subchannelId": "vip", "userIds": ["bob"]]).json.int("code") == 0)
        let a = try g.client("alice"), b = try g.client("bob"), c = try g.client("carol"), d = try g.client("dave")
        g.settle()
        for x in [a, b, c, d] { _ = x.drain() }
        return (a, b, c, d)
    }

    func received(_ c: SessionClient, _ ev: String) -> [J] {
        c.drain().filter { $0.str("ev") == ev }.map { $0.obj("data") }
    }

    @Test("MO-3: Nexconn's send reaches who sees the subchannel, update and metadata tell them, history shows the latest version")
    func nexconnMessages() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (alice, bob, carol, dave) = try guild(g)
        let rest = g.rest()
        let sent = try rest.vendor(.nexconn, "/v4/community-channel/message/send",
                                   json: ["fromUserId": "bob", "toChannelIds": ["guild"], "messageType": "RC:TxtMsg", "content": "{\"content\":\"hi\"}",
                                          "hasMetadata": true, "metadata": ["likes": "0"]])
        #expect(sent.json.int("code") == 0, "\(sent.text)")
        let ids = sent.json.obj("result")["messageIds"] as? [J] ?? []
        let id = try #require(ids.first?.str("messageId"))
        #expect(ids.first?.str("channelId") == "guild")
        g.settle()
        for c in [alice, bob, carol] {
            let m = received(c, "group.message")
            #expect(m.count == 1 && m.first?.str("messageId") == id && m.first?.str("channelId") == "RCDefault" && m.first?.str("fromUserId") == "bob")
        }
        #expect(received(dave, "group.message").isEmpty, "dave is in no group")

        // vip: only bob.
        let secret = try rest.vendor(.nexconn, "/v4/community-channel/message/send",
                                     json: ["fromUserId": "alice", "toChannelIds": ["guild"], "subchannelId": "vip", "messageType": "T", "content": "s"])
        #expect(secret.json.int("code") == 0)
        g.settle()
        #expect(received(bob, "group.message").count == 1)
        for c in [alice, carol, dave] { #expect(received(c, "group.message").isEmpty) }

        // Only the sender edits.
        let hijack = try rest.vendor(.nexconn, "/v4/community-channel/message/update",
                                     json: ["channelId": "guild", "fromUserId": "carol", "messageId": id, "content": "x"])
        #expect(hijack.status == 403 && hijack.json.str("field") == "fromUserId", "\(hijack.text)")
        let edit = try rest.vendor(.nexconn, "/v4/community-channel/message/update",
                                   json: ["channelId": "guild", "fromUserId": "bob", "messageId": id, "content": "{\"content\":\"hello\"}"])
        #expect(edit.json.int("code") == 0, "\(edit.text)")
        let meta = try rest.vendor(.nexconn, "/v4/community-channel/message/metadata/set",
                                   json: ["channelId": "guild", "messageId": id, "userId": "carol", "metadata": ["likes": "1", "pin": "yes"]])
        #expect(meta.json.int("code") == 0, "\(meta.text)")
        g.settle()
        for c in [alice, bob, carol] {
            let updates = received(c, "message.updated")
            #expect(updates.map { $0.str("change") ?? "" } == ["content", "metadata"])
            #expect(updates.last?.obj("message").str("content") == "{\"content\":\"hello\"}" && updates.last?.obj("message").int("version") == 1)
        }
        #expect(received(dave, "message.updated").isEmpty)
        let list = try rest.vendor(.nexconn, "/v4/community-channel/message/metadata/list", json: ["channelId": "guild", "messageId": id])
        let entries = list.json.obj("result")["metadata"] as? [J] ?? []
        #expect(entries.map { $0.str("key") ?? "" } == ["likes", "pin"] && entries.first?.str("value") == "1" && entries.first?.int("updatedAt") != nil)
        let deleted = try rest.vendor(.nexconn, "/v4/community-channel/message/metadata/delete",
                                      json: ["channelId": "guild", "messageId": id, "userId": "carol", "keys": ["pin"]])
        #expect(deleted.json.int("code") == 0, "\(deleted.text)")

        // MO-6: history, newest first, as carol may see it (not vip).
        let now = Int(g.clock.now) + 1
        let history = try rest.vendor(.nexconn, "/v4/community-channel/history-message/list",
                                      json: ["channelId": "guild", "userId": "carol", "startAt": now, "endAt": now - 60_000, "pageSize": 10, "includeStart": true])
        let messages = history.json.obj("result")["messages"] as? [J] ?? []
        #expect(messages.count == 1, "\(history.text)")
        #expect(messages.first?.str("messageId") == id && messages.first?.str("content") == "{\"content\":\"hello\"}"
                && messages.first?["hasMetadata"] as? Bool == true && messages.first?.str("subchannelId") == "RCDefault")
        let bobs = try rest.vendor(.nexconn, "/v4/community-channel/history-message/list",
                                   json: ["channelId": "guild", "userId": "bob", "startAt": now, "endAt": now - 60_000, "includeStart": true])
        #expect((bobs.json.obj("result")["messages"] as? [J])?.count == 2)
    }

    @Test("MO-5: Nexconn's mute, freeze and allowed-sender lists hold members' group.send with 23408; who is told")
    func nexconnControls() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (alice, bob, carol, dave) = try guild(g)
        let rest = g.rest()
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/mute-list/add", json: ["channelId": "guild", "userIds": ["carol"]]).json.int("code") == 0)
        g.settle()
        #expect(received(carol, "group.moderationChanged").first?.str("action") == "muteAdd")
        for c in [alice, bob, dave] { #expect(received(c, "group.moderationChanged").isEmpty) }
        let muted = try carol.command("group.send", ["groupId": "guild", "type": "T", "content": "let me speak"])
        #expect((muted["error"] as? J)?.int("code") == 23408, "\(muted)")
        g.settle()
        for c in [alice, bob] { #expect(received(c, "group.message").isEmpty, "a refused send reaches nobody") }
        let mutes = try rest.vendor(.nexconn, "/v4/community-channel/mute-list/get", json: ["channelId": "guild"])
        #expect((mutes.json.obj("result")["mutedMembers"] as? [J])?.compactMap { $0.str("userId") } == ["carol"])
        // Paged as the SDK pages (page, pageSize).
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/mute-list/add", json: ["channelId": "guild", "userIds": ["m1", "m2"]]).json.int("code") == 0)
        let page2 = try rest.vendor(.nexconn, "/v4/community-channel/mute-list/get", json: ["channelId": "guild", "page": 2, "pageSize": 2])
        #expect((page2.json.obj("result")["mutedMembers"] as? [J])?.compactMap { $0.str("userId") } == ["m2"], "\(page2.text)")
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/mute-list/remove", json: ["channelId": "guild", "userIds": ["m1", "m2"]]).json.int("code") == 0)
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/mute-list/remove", json: ["channelId": "guild", "userIds": ["carol"]]).json.int("code") == 0)
        let ok = try carol.expectOK(try carol.command("group.send", ["groupId": "guild", "type": "T", "content": "thanks"]))
        #expect((ok["messages"] as? [J])?.first?.str("fromUserId") == "carol")
        g.settle()
        #expect(received(alice, "group.message").first?.str("content") == "thanks")

        // Freeze the subchannel-less channel (the whole group); bob is allowed.
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/allowed-sender-list/add", json: ["channelId": "guild", "userIds": ["bob"]]).json.int("code") == 0)
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/freeze-list/set", json: ["channelId": "guild", "status": true]).json.int("code") == 0)
        g.settle()
        for c in [alice, bob, carol] { #expect(received(c, "group.moderationChanged").contains { $0.str("action") == "freeze" }) }
        #expect(received(dave, "group.moderationChanged").isEmpty)
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/freeze-list/get", json: ["channelId": "guild"]).json.obj("result")["status"] as? Bool == true)
        let frozen = try carol.command("group.send", ["groupId": "guild", "type": "T", "content": "?"])
        #expect((frozen["error"] as? J)?.int("code") == 23408)
        _ = try bob.expectOK(try bob.command("group.send", ["groupId": "guild", "type": "T", "content": "allowed"]))
        let allowed = try rest.vendor(.nexconn, "/v4/community-channel/allowed-sender-list/get", json: ["channelId": "guild"])
        #expect((allowed.json.obj("result")["members"] as? [J])?.compactMap { $0.str("userId") } == ["bob"])
        // Not a member, or cannot see: 24406.
        let stranger = try dave.command("group.send", ["groupId": "guild", "type": "T", "content": "hi"])
        #expect((stranger["error"] as? J)?.int("code") == 24406, "\(stranger)")
    }

    @Test("MO-3, MO-5, MO-6: RongCloud's ultra-group publish, modify, history, expansion and bans")
    func rongCloud() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (alice, bob, carol, dave) = try guild(g)
        let rest = g.rest()
        // The SDK sends the publish as a JSON body, values as strings.
        let publish = try rest.vendor(.rongCloud, "/message/ultragroup/publish.json",
                                      raw: #"{"fromUserId":"alice","toGroupIds":["guild"],"objectName":"RC:TxtMsg","content":"{\"content\":\"hi\"}","isPersisted":"1","expansion":true,"extraContent":"{\"k\":\"v\"}"}"#)
        #expect(publish.json.int("code") == 200, "\(publish.text)")
        let uid = try #require(publish.json.str("messageUID"))
        g.settle()
        for c in [alice, bob, carol] { #expect(received(c, "group.message").first?.str("messageId") == uid) }
        #expect(received(dave, "group.message").isEmpty)
        let modify = try rest.vendor(.rongCloud, "/ultragroup/msg/modify.json",
                                     [("groupId", "guild"), ("fromUserId", "alice"), ("msgUID", uid), ("content", "{\"content\":\"edited\"}")])
        #expect(modify.json.int("code") == 200, "\(modify.text)")
        let set = try rest.vendor(.rongCloud, "/ultragroup/message/expansion/set.json",
                                  [("groupId", "guild"), ("msgUID", uid), ("userId", "bob"), ("extraKeyVal", "{\"k\":\"w\",\"n\":\"1\"}")])
        #expect(set.json.int("code") == 200, "\(set.text)")
        let query = try rest.vendor(.rongCloud, "/ultragroup/message/expansion/query.json", [("groupId", "guild"), ("msgUID", uid)])
        let extra = query.json.obj("extraContent")
        #expect(extra.obj("k").str("v") == "w" && extra.obj("n").str("v") == "1" && extra.obj("k").int("ts") != nil, "\(query.text)")
        let del = try rest.vendor(.rongCloud, "/ultragroup/message/expansion/delete.json",
                                  [("groupId", "guild"), ("msgUID", uid), ("userId", "bob"), ("extraKey", "[\"n\"]")])
        #expect(del.json.int("code") == 200, "\(del.text)")
        let now = Int(g.clock.now)
        let history = try rest.vendor(.rongCloud, "/ultragroup/hismsg/query.json",
                                      [("groupId", "guild"), ("busChannel", "RCDefault"), ("startTime", String(now - 60_000)), ("endTime", String(now + 1))])
        let data = history.json["data"] as? [J] ?? []
        #expect(data.count == 1 && data.first?.str("msgUID") == uid && data.first?.str("content") == "{\"content\":\"edited\"}"
                && data.first?["expansion"] as? Bool == true, "\(history.text)")

        // userbanned, globalbanned and its whitelist hold members' sends.
        #expect(try rest.vendor(.rongCloud, "/ultragroup/userbanned/add.json", [("groupId", "guild"), ("userIds", "carol")]).json.int("code") == 200)
        let banned = try rest.vendor(.rongCloud, "/ultragroup/userbanned/get.json", [("groupId", "guild")])
        #expect((banned.json["users"] as? [J])?.compactMap { $0.str("id") } == ["carol"])
        #expect((try carol.command("group.send", ["groupId": "guild", "type": "T", "content": "x"])["error"] as? J)?.int("code") == 23408)
        #expect(try rest.vendor(.rongCloud, "/ultragroup/userbanned/del.json", [("groupId", "guild"), ("userIds", "carol")]).json.int("code") == 200)
        #expect(try rest.vendor(.rongCloud, "/ultragroup/globalbanned/set.json", [("groupId", "guild"), ("busChannel", "RCDefault"), ("status", "true")])
            .json.int("code") == 200)
        #expect(try rest.vendor(.rongCloud, "/ultragroup/globalbanned/get.json", [("groupId", "guild"), ("busChannel", "RCDefault")]).json["status"] as? Bool == true)
        #expect((try carol.command("group.send", ["groupId": "guild", "type": "T", "content": "x"])["error"] as? J)?.int("code") == 23408)
        #expect(try rest.vendor(.rongCloud, "/ultragroup/banned/whitelist/add.json", [("groupId", "guild"), ("busChannel", "RCDefault"), ("userIds", "carol")])
            .json.int("code") == 200)
        _ = try carol.expectOK(try carol.command("group.send", ["groupId": "guild", "type": "T", "content": "x"]))
        let white = try rest.vendor(.rongCloud, "/ultragroup/banned/whitelist/get.json", [("groupId", "guild"), ("busChannel", "RCDefault")])
        #expect((white.json["users"] as? [J])?.compactMap { $0.str("id") } == ["carol"])
        // Audited with the surface.
        let audit = try rest.call("GET", "/v1/audit?roomId=guild").json["entries"] as? [J] ?? []
        #expect(audit.first?.str("surface") == "rongCloud" && audit.first?.str("action") == "allowlistAdd", "\(audit.first ?? [:])")
    }

    @Test("MO-3, MO-5, MO-6: bad input on every new endpoint names the caller's field and changes nothing")
    func badInput() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        _ = try guild(g)
        let rest = g.rest()
        let nexconn: [(String, J, String)] = [
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "messageType": "T", "content": "x"], "toChannelIds"),
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "toChannelIds": ["guild", "a", "b", "c"], "messageType": "T", "content": "x"], "toChannelIds"),
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "toChannelIds": ["nope"], "messageType": "T", "content": "x"], "toChannelIds"),
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "toChannelIds": ["guild"], "messageType": "T", "content": ""], "content"),
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "toChannelIds": ["guild"], "subchannelId": "nope", "messageType": "T", "content": "x"], "subchannelId"),
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "toChannelIds": ["guild"], "messageType": "T", "content": "x", "shouldPersist": 2], "shouldPersist"),
            ("/v4/community-channel/message/send", ["fromUserId": "bob", "toChannelIds": ["guild"], "messageType": "T", "content": "x", "hasMetadata": true,
                                                    "metadata": ["bad key": "v"]], "metadata"),
            ("/v4/community-channel/message/update", ["channelId": "guild", "fromUserId": "bob", "messageId": "nope", "content": "x"], "messageId"),
            ("/v4/community-channel/message/metadata/set", ["channelId": "guild", "messageId": "nope", "userId": "bob"], "metadata"),
            ("/v4/community-channel/message/metadata/delete", ["channelId": "guild", "messageId": "nope", "userId": "bob", "keys": ["k"]], "messageId"),
            ("/v4/community-channel/message/metadata/list", ["channelId": "guild", "messageId": "nope"], "messageId"),
            ("/v4/community-channel/history-message/list", ["channelId": "guild", "userId": "bob", "startAt": 1, "endAt": 2, "includeStart": true], "endAt"),
            ("/v4/community-channel/history-message/list", ["channelId": "guild", "userId": "bob", "startAt": 2, "endAt": 1, "pageSize": 0], "pageSize"),
            ("/v4/community-channel/history-message/list", ["channelId": "guild", "userId": "bob", "startAt": 20 * 86_400_000, "endAt": 0], "startAt"),
            ("/v4/community-channel/history-message/list", ["channelId": "guild", "userId": "dave", "startAt": 2, "endAt": 1], "userId"),
            ("/v4/community-channel/mute-list/add", ["channelId": "guild", "userIds": []], "userIds"),
            ("/v4/community-channel/mute-list/add", ["channelId": "guild", "subchannelId": "nope", "userIds": ["bob"]], "subchannelId"),
            ("/v4/community-channel/allowed-sender-list/remove", ["channelId": "nope", "userIds": ["bob"]], "channelId"),
            ("/v4/community-channel/mute-list/get", ["channelId": "guild", "pageSize": 0], "pageSize"),
            ("/v4/community-channel/freeze-list/set", ["channelId": "guild"], "status"),
            ("/v4/community-channel/freeze-list/get", ["channelId": "guild", "subchannelId": "nope"], "subchannelId"),
            ("/v4/open-channel/history-message/list", ["channelId": "nope", "userId": "bob", "startAt": 2, "endAt": 1], "channelId"),
            ("/v4/open-channel/history-message/list", ["channelId": "nope", "userId": "bob", "startAt": 1, "endAt": 2], "endAt"),
        ]
        for (path, body, field) in nexconn {
            let r = try rest.vendor(.nexconn, path, json: body)
            #expect(r.json.int("code") != 0 && r.json.str("field") == field, "\(path) \(body): \(r.text)")
        }
        let rongCloud: [(String, [(String, String)], String)] = [
            ("/ultragroup/msg/modify.json", [("groupId", "guild"), ("fromUserId", "bob"), ("msgUID", "nope"), ("content", "x")], "msgUID"),
            ("/ultragroup/hismsg/query.json", [("groupId", "guild"), ("startTime", "5"), ("endTime", "1")], "startTime"),
            ("/ultragroup/hismsg/query.json", [("groupId", "guild"), ("startTime", "1"), ("endTime", "5"), ("pageSize", "101")], "pageSize"),
            ("/ultragroup/message/expansion/set.json", [("groupId", "guild"), ("msgUID", "nope"), ("userId", "bob"), ("extraKeyVal", "[1]")], "extraKeyVal"),
            ("/ultragroup/message/expansion/delete.json", [("groupId", "guild"), ("msgUID", "nope"), ("userId", "bob")], "extraKey"),
            ("/ultragroup/message/expansion/query.json", [("groupId", "guild"), ("msgUID", "nope")], "msgUID"),
            ("/ultragroup/userbanned/add.json", [("groupId", "guild"), ("userIds", (0...Limits.maxUsersPerCall).map { "u\($0)" }.joined(separator: ","))], "userIds"),
            ("/ultragroup/userbanned/get.json", [("groupId", "guild"), ("page", "0")], "page"),
            ("/ultragroup/globalbanned/set.json", [("groupId", "guild"), ("status", "maybe")], "status"),
            ("/ultragroup/banned/whitelist/add.json", [("groupId", "guild"), ("busChannel", "nope"), ("userIds", "bob")], "busChannel"),
        ]
        for (path, form, field) in rongCloud {
            let r = try rest.vendor(.rongCloud, path, form)
            #expect(r.json.int("code") != 200 && r.json.str("field") == field, "\(path) \(form): \(r.text)")
        }
        let publish = try rest.vendor(.rongCloud, "/message/ultragroup/publish.json",
                                      raw: #"{"fromUserId":"alice","toGroupIds":[],"objectName":"T","content":"x"}"#)
        #expect(publish.json.str("field") == "toGroupIds", "\(publish.text)")
        // Nothing changed: no message stored, no list, no freeze.
        let now = Int(g.clock.now)
        let history = try rest.vendor(.rongCloud, "/ultragroup/hismsg/query.json", [("groupId", "guild"), ("startTime", String(now - 60_000)), ("endTime", String(now + 1))])
        #expect((history.json["data"] as? [J])?.isEmpty == true)
        #expect(try rest.vendor(.nexconn, "/v4/community-channel/freeze-list/get", json: ["channelId": "guild"]).json.obj("result")["status"] as? Bool == false)
        #expect((try rest.vendor(.nexconn, "/v4/community-channel/mute-list/get", json: ["channelId": "guild"]).json.obj("result")["mutedMembers"] as? [J])?.isEmpty == true)
    }

    @Test("MO-1, MO-3: RongCloud's recall (conversationType 10) and Nexconn's delete (channelType 10) leave a tombstone and tell who saw it")
    func recalls() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let (alice, bob, carol, dave) = try guild(g)
        let rest = g.rest()
        var ids: [String] = []
        for text in ["one", "two"] {
            let r = try rest.vendor(.nexconn, "/v4/community-channel/message/send",
                                    json: ["fromUserId": "bob", "toChannelIds": ["guild"], "messageType": "T", "content": text])
            ids.append(try #require((r.json.obj("result")["messageIds"] as? [J])?.first?.str("messageId")))
        }
        g.settle()
        let sentAt = try #require(received(alice, "group.message").first?.int("sentAt"))
        for c in [bob, carol, dave] { _ = c.drain() }
        let rc = try rest.vendor(.rongCloud, "/message/recall.json", [("conversationType", "10"), ("fromUserId", "bob"), ("targetId", "guild"),
                                                                       ("messageUID", ids[0]), ("sentTime", String(sentAt)), ("busChannel", "RCDefault")])
        #expect(rc.json.int("code") == 200, "\(rc.text)")
        let nx = try rest.vendor(.nexconn, "/v4/message/delete", json: ["channelType": 10, "fromUserId": "bob", "channelId": "guild", "messageId": ids[1]])
        #expect(nx.json.int("code") == 0, "\(nx.text)")
        g.settle()
        for c in [alice, bob, carol] {
            let updates = received(c, "message.updated")
            #expect(updates.map { $0.str("change") ?? "" } == ["recalled", "recalled"])
            #expect(updates.allSatisfy { $0.obj("message")["recalled"] as? Bool == true && $0.obj("message").str("content") == "" })
        }
        #expect(received(dave, "message.updated").isEmpty)
        let again = try rest.vendor(.nexconn, "/v4/message/delete", json: ["channelType": 10, "fromUserId": "bob", "channelId": "guild", "messageId": ids[1]])
        #expect(again.status == 404 && again.json.str("field") == "messageId", "\(again.text)")
        let wrong = try rest.vendor(.rongCloud, "/message/recall.json", [("conversationType", "10"), ("fromUserId", "carol"), ("targetId", "guild"),
                                                                          ("messageUID", ids[0]), ("sentTime", String(sentAt))])
        #expect(wrong.json.int("code") != 200, "\(wrong.text)")
    }

    @Test("MO-6: Nexconn's open-channel history in its shape, newest first, what the participant may see")
    func openChannelHistory() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/rooms", ["roomId": "live"]).status == 201)
        for i in 0..<3 {
            #expect(try rest.call("POST", "/v1/rooms/live/messages", ["fromUserId": "host", "content": "m\(i)"]).status / 100 == 2)
            g.advance(seconds: 1)
        }
        #expect(try rest.call("POST", "/v1/rooms/live/messages", ["fromUserId": "host", "content": "private", "targets": ["vip"]]).status / 100 == 2)
        let now = Int(g.clock.now)
        let r = try rest.vendor(.nexconn, "/v4/open-channel/history-message/list",
                                json: ["channelId": "live", "userId": "fan", "startAt": now, "endAt": now - 60_000, "pageSize": 10, "includeStart": true])
        let messages = r.json.obj("result")["messages"] as? [J] ?? []
        #expect(messages.compactMap { $0.str("content") } == ["m2", "m1", "m0"], "\(r.text)")
        #expect(messages.first?.str("channelId") == "live" && messages.first?.str("fromUserId") == "host" && messages.first?.int("sentAt") != nil)
        let vip = try rest.vendor(.nexconn, "/v4/open-channel/history-message/list",
                                  json: ["channelId": "live", "userId": "vip", "startAt": now, "endAt": now - 60_000, "includeStart": true])
        #expect((vip.json.obj("result")["messages"] as? [J])?.first?.str("content") == "private")
    }
}
