import Foundation
import Testing
import TestKit

/// Ultra-group channels (SPEC §4) and conversation status (SPEC §5) in-process (real routes,
/// engine and hub; in-memory store, manual clock): REST changes, the events each device receives
/// (two devices of one user, and users who must receive nothing), the WebSocket ops and
/// connect-time sync. That all of it survives `kill -9` is DeliveryTests'
/// `killNineKeepsGroupsAndConversationStatuses`, against the real binary.
@Suite("Ultra groups and conversation status in-process")
struct GroupsAndConversationsTests {
    func infos(_ e: [String: Any]) -> [[String: Any]] { e.obj("data")["infoList"] as? [[String: Any]] ?? [] }

    // UG-1, UG-2, UG-3, UG-4, UG-5, UG-6
    @Test func channelChangesReachExactlyTheSeedsAudiences() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "g1", "name": "Guild", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/members", ["userIds": ["bob", "carol"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/g1/channels", ["channelId": "c1", "type": "public"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/channels", ["channelId": "p1", "type": 1]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/channels/c1/private-members", ["userIds": ["alice"]]).status == 200)
        #expect(try rest.call("POST", "/v1/groups/g1/channels/p1/private-members", ["userIds": ["bob", "carol"]]).status == 200)
        let phone = try g.client("alice", device: "phone"), tablet = try g.client("alice", device: "tablet")
        let bob = try g.client("bob"), carol = try g.client("carol"), dave = try g.client("dave")

        // UG-2: public → private: alice (on the list, both devices) 2; bob and carol 6; dave nothing.
        #expect(try rest.call("PATCH", "/v1/groups/g1/channels/c1", ["type": "private"]).json.obj("channel").str("type") == "private")
        for c in [phone, tablet] {
            let e = try c.waitFor("group.channelTypeChanged")
            #expect(infos(e).map { $0.int("changeType") } == [2] && infos(e).first?.str("channelId") == "c1")
        }
        for c in [bob, carol] { #expect(infos(try c.waitFor("group.channelTypeChanged")).first?.int("changeType") == 6) }
        #expect(dave.eventNames(within: 0.3).isEmpty)
        // One array event per recipient per call (UG-5).
        for c in [phone, tablet, bob, carol] { #expect(!c.eventNames(within: 0).contains("group.channelTypeChanged")) }

        // UG-2: private → public: only the private list (alice), type 3.
        #expect(try rest.call("PATCH", "/v1/groups/g1/channels/c1", ["type": 0]).status == 200)
        for c in [phone, tablet] { #expect(infos(try c.waitFor("group.channelTypeChanged")).first?.int("changeType") == 3) }
        for c in [bob, carol, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }

        // UG-1: the default channel never turns private; a stranger fails the whole add (24406).
        let defaultPrivate = try rest.call("PATCH", "/v1/groups/g1/channels/RCDefault", ["type": "private"])
        #expect(defaultPrivate.status == 400 && defaultPrivate.json.str("field") == "type")
        let stranger = try rest.call("POST", "/v1/groups/g1/channels/p1/private-members", ["userIds": ["alice", "dave"]])
        #expect(stranger.status == 403 && stranger.json.int("code") == 24406 && stranger.json.str("field") == "userIds")
        let tooMany = try rest.call("POST", "/v1/groups/g1/channels/p1/private-members", ["userIds": (0..<21).map { "u\($0)" }])
        #expect(tooMany.status == 400 && tooMany.json.str("field") == "userIds")
        #expect(try rest.call("GET", "/v1/groups/g1/channels/p1/private-members").json["userIds"] as? [String] == ["bob", "carol"])

        // UG-4: taking bob off a private list tells bob only, about himself.
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/p1/private-members?userIds=bob").status == 200)
        let kicked = try bob.waitFor("group.channelUserKicked")
        #expect(infos(kicked).map { $0.str("userId") } == ["bob"] && infos(kicked).first?.str("channelId") == "p1")
        for c in [phone, tablet, carol, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }
        // From a public channel's list: nobody hears.
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/c1/private-members?userIds=alice").status == 200)
        for c in [phone, tablet, bob, carol, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }

        // UG-6: paged channels, and what each user can see.
        let page = try rest.call("GET", "/v1/groups/g1/channels?page=2&pageSize=2").json
        #expect((page["channels"] as? [[String: Any]])?.compactMap { $0.str("channelId") } == ["p1"] && page.int("total") == 3)
        let bobSees = try bob.expectOK(try bob.command("group.channels", ["groupId": "g1"]))
        #expect((bobSees["channels"] as? [[String: Any]])?.compactMap { $0.str("channelId") } == ["RCDefault", "c1"])
        let carolSees = try rest.call("GET", "/v1/groups/g1/users/carol/channels").json
        #expect((carolSees["channels"] as? [[String: Any]])?.compactMap { $0.str("channelId") } == ["RCDefault", "c1", "p1"])
        #expect(try dave.command("group.channels", ["groupId": "g1"]).obj("error").int("code") == 24406)

        // UG-3: deleting the private channel tells its list (carol) only; the public one, every
        // group member (alice's two devices too).
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/p1").status == 200)
        #expect(infos(try carol.waitFor("group.channelDisbanded")).first?.str("channelId") == "p1")
        for c in [phone, tablet, bob, dave] { #expect(c.eventNames(within: 0.3).isEmpty) }
        #expect(try rest.call("DELETE", "/v1/groups/g1/channels/c1").status == 200)
        for c in [carol, bob, phone, tablet] { #expect(infos(try c.waitFor("group.channelDisbanded")).first?.str("channelId") == "c1") }
        #expect(dave.eventNames(within: 0.3).isEmpty)
        for c in [phone, tablet, bob, carol] { #expect(c.eventNames(within: 0).isEmpty) }
    }

    // CS-1, CS-2, CS-3, CS-4
    @Test func statusChangesReachEveryDeviceOfTheUserAndSyncOnConnect() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let rest = g.rest()
        let phone = try g.client("alice", device: "phone"), tablet = try g.client("alice", device: "tablet"), bob = try g.client("bob")
        #expect(phone.syncedStatuses.isEmpty && phone.conversationCursor == 0)

        // CS-1/CS-2: a server change reaches both of alice's devices as one array; bob nothing.
        let set = try rest.call("PUT", "/v1/users/alice/conversations/1/bob", ["pinned": true, "notificationLevel": 5])
        #expect(set.status == 200 && set.json.obj("status").int("version") == 1)
        for c in [phone, tablet] {
            let list = infos(try c.waitFor("conversation.statusChanged"))
            #expect(list.map { $0.int("conversationStatusType") } == [1, 2])
            #expect(list.map { $0.int("conversationStatusValue") } == [0, 1])
            #expect(list.first?.int("notificationLevel") == 5 && list.first?.str("targetId") == "bob")
        }
        #expect(bob.eventNames(within: 0.3).isEmpty)
        let bad = try rest.call("PUT", "/v1/users/alice/conversations/1/bob", ["notificationLevel": 3])
        #expect(bad.status == 400 && bad.json.str("field") == "notificationLevel")
        let badType = try rest.call("PUT", "/v1/users/alice/conversations/2/bob", ["pinned": true])
        #expect(badType.status == 400 && badType.json.str("field") == "conversationType")

        // CS-2 from a device: the other device hears it, the changing one gets the answer only.
        let ok = try phone.expectOK(try phone.command("conversation.set", ["conversationType": 3, "targetId": "team", "pinned": true]))
        #expect(ok.obj("status").int("version") == 2)
        #expect(infos(try tablet.waitFor("conversation.statusChanged")).first?.str("targetId") == "team")
        #expect(phone.eventNames(within: 0.3).isEmpty)
        #expect(bob.eventNames(within: 0).isEmpty)

        // CS-4: defaults and the effective level.
        #expect(try rest.call("POST", "/v1/groups", ["groupId": "g1", "creator": "alice"]).status == 201)
        #expect(try rest.call("POST", "/v1/groups/g1/channels", ["channelId": "c1"]).status == 201)
        #expect(try rest.call("PUT", "/v1/groups/g1/notification-level", ["notificationLevel": 1]).status == 200)
        #expect(try rest.call("PUT", "/v1/groups/g1/notification-level", ["notificationLevel": 2, "channelId": "c1"]).status == 200)
        let viaChannel = try phone.expectOK(try phone.command("conversation.get", ["conversationType": 10, "targetId": "g1", "channelId": "c1"]))
        #expect(viaChannel.obj("status").int("effectiveLevel") == 2 && viaChannel.obj("status").str("levelSource") == "channelDefault")
        #expect(try rest.call("PUT", "/v1/users/alice/conversation-types/10", ["notificationLevel": 4]).status == 200)
        let viaType = try rest.call("GET", "/v1/users/alice/conversations/10/g1?channelId=c1").json.obj("status")
        #expect(viaType.int("effectiveLevel") == 4 && viaType.str("levelSource") == "conversationType")
        #expect(try rest.call("GET", "/v1/users/bob/conversations/10/g1?channelId=c1").json.obj("status").int("effectiveLevel") == 2)
        #expect(try rest.call("PUT", "/v1/users/alice/conversations/10/g1", ["channelId": "c1", "notificationLevel": -1]).status == 200)
        _ = [phone, tablet].map { $0.drain(for: 0.3) }

        // CS-3: a device that never synced gets every status, then statusSynced with the cursor.
        let laptop = try g.client("alice", device: "laptop")
        #expect(laptop.conversationCursor == 3)
        #expect(Set(laptop.syncedStatuses.compactMap { $0.str("targetId") }) == ["bob", "team", "g1"])
        #expect(laptop.syncedStatuses.count == 6)
        // From a cursor: only what changed after it.
        let resumed = try g.client("alice", device: "laptop", cursor: 2)
        #expect(resumed.syncedStatuses.compactMap { $0.str("targetId") } == ["g1", "g1"] && resumed.conversationCursor == 3)
        let current = try g.client("alice", device: "laptop", cursor: 3)
        #expect(current.syncedStatuses.isEmpty && current.conversationCursor == 3)
        #expect(try bob.command("connect", ["token": "x"]).obj("error").int("code") != nil)

        // What the REST API reads back (DeliveryTests reads the same after kill -9).
        let status = try rest.call("GET", "/v1/users/alice/conversations/1/bob").json.obj("status")
        #expect(status["pinned"] as? Bool == true && status.int("notificationLevel") == 5 && status.int("version") == 1)
        #expect(try rest.call("GET", "/v1/users/alice/conversation-types/10").json.int("notificationLevel") == 4)
        #expect(try rest.call("GET", "/v1/groups/g1/notification-level?channelId=c1").json.int("notificationLevel") == 2)
        // A device that synced up to version 1 gets the two statuses changed since (team, g1).
        let again = try g.client("alice", device: "phone", cursor: 1)
        #expect(again.syncedStatuses.count == 4 && again.conversationCursor == 3)
        // The next change continues the version sequence.
        #expect(try rest.call("PUT", "/v1/users/alice/conversations/6/system", ["pinned": true]).json.obj("status").int("version") == 4)
    }
}
