import Testing
@testable import Chat

@Suite("Ultra-group channels (SPEC §4)")
struct UltraGroupTests {
    /// A group g1 with members alice, bob and carol; dave is online but not a member.
    func setUp() -> (Harness, alice: SessionID, bob: SessionID, carol: SessionID, dave: SessionID) {
        let h = Harness()
        #expect(h.run(.createGroup(app: h.app, groupId: "g1", name: "Guild", creator: "alice")).succeeded)
        #expect(h.run(.joinGroup(app: h.app, groupId: "g1", ["bob", "carol"])).succeeded)
        let a = h.connect("alice"), b = h.connect("bob"), c = h.connect("carol"), d = h.connect("dave")
        h.clearInboxes()
        return (h, a, b, c, d)
    }

    func channels(_ h: Harness, _ group: String = "g1") -> [ChannelInfo] {
        guard case .channels(let list, _)? = h.query(.channels(app: h.app, groupId: group, page: 1, pageSize: 100)) else { return [] }
        return list
    }

    func privateMembers(_ h: Harness, _ channel: String) -> [String] {
        guard case .userIdsPage(let ids, _)? = h.query(.privateMembers(app: h.app, groupId: "g1", channelId: channel, page: 1, pageSize: 100)) else {
            return []
        }
        return ids
    }

    func typeChanges(_ h: Harness, _ s: SessionID) -> [[ChannelTypeChange]] {
        h.received(s).compactMap { if case .channelTypeChanged(let l) = $0 { return l } else { return nil } }
    }

    func disbanded(_ h: Harness, _ s: SessionID) -> [[ChannelDisbanded]] {
        h.received(s).compactMap { if case .channelDisbanded(let l) = $0 { return l } else { return nil } }
    }

    func kicked(_ h: Harness, _ s: SessionID) -> [[ChannelUserKicked]] {
        h.received(s).compactMap { if case .channelUsersKicked(let l) = $0 { return l } else { return nil } }
    }

    // UG-1
    @Test func aGroupStartsWithItsPublicDefaultChannelWhichNeverTurnsPrivate() {
        let (h, _, _, _, _) = setUp()
        #expect(channels(h).map(\.channelId) == ["RCDefault"])
        #expect(channels(h).first?.type == .public && channels(h).first?.isDefault == true)
        #expect(h.run(.createGroup(app: h.app, groupId: "g1", name: "Again", creator: nil)).error?.code == .alreadyExists)

        let toPrivate = h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "RCDefault", .private))
        #expect(toPrivate.error?.code == .invalidParameter && toPrivate.error?.field == "type")
        #expect(toPrivate.mutations.isEmpty && toPrivate.effects.isEmpty)
        let delete = h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "RCDefault"))
        #expect(delete.error?.field == "channelId")
        #expect(channels(h).first?.type == .public)
        #expect(h.run(.createChannel(app: h.app, groupId: "nope", channelId: "c", .public)).error?.code == .notFound)
    }

    // UG-1
    @Test func privateListsTakeAtMostTwentyGroupMembersOrNothing() {
        let (h, _, _, _, _) = setUp()
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "c1", .private))
        // dave is not a member: the whole call fails with 24406 and nobody is added.
        let refused = h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "c1", ["alice", "dave", "bob"]))
        #expect(refused.error?.code == .notGroupMember)
        #expect(refused.error?.code.rawValue == 24406)
        #expect(refused.error?.field == "userIds")
        #expect(privateMembers(h, "c1").isEmpty)
        let tooMany = (0..<21).map { "u\($0)" }
        #expect(h.run(.joinGroup(app: h.app, groupId: "g1", tooMany)).succeeded)
        #expect(h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "c1", tooMany)).error?.field == "userIds")
        #expect(privateMembers(h, "c1").isEmpty)
        #expect(h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "c1", ["alice", "bob"])).succeeded)
        #expect(privateMembers(h, "c1") == ["alice", "bob"])
        // Adding needs no notification.
        #expect(h.received(SessionID(1)).isEmpty)
    }

    // UG-2, UG-5
    @Test func publicToPrivateTellsEveryMemberWithTwoOrSix() {
        let (h, alice, bob, carol, dave) = setUp()
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "c1", .public))
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "c1", ["alice"]))
        let tablet = h.connect("alice", device: "tablet")
        h.clearInboxes()
        #expect(h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "c1", .private)).succeeded)
        // One array event per recipient (each of alice's devices), with the right change type.
        for s in [alice, tablet] { #expect(typeChanges(h, s).map { $0.map(\.changeType) } == [[.publicToPrivate]]) }
        for s in [bob, carol] { #expect(typeChanges(h, s).map { $0.map(\.changeType) } == [[.publicToPrivateUserNotIn]]) }
        #expect(typeChanges(h, bob).first?.first?.channelId == "c1")
        // dave is not in the group: nothing.
        #expect(h.received(dave).isEmpty)
        #expect(channels(h).first { $0.channelId == "c1" }?.type == .private)
    }

    // UG-2
    @Test func privateToPublicTellsOnlyThePrivateList() {
        let (h, alice, bob, carol, dave) = setUp()
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "c1", .private))
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "c1", ["alice", "carol"]))
        h.clearInboxes()
        #expect(h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "c1", .public)).succeeded)
        for s in [alice, carol] { #expect(typeChanges(h, s).map { $0.map(\.changeType) } == [[.privateToPublic]]) }
        #expect(h.received(bob).isEmpty)
        #expect(h.received(dave).isEmpty)
        // Setting the type it already has changes nothing and tells nobody.
        h.clearInboxes()
        let same = h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "c1", .public))
        #expect(same.succeeded && same.effects.isEmpty && same.mutations.isEmpty)
    }

    // UG-3
    @Test func deletingAChannelTellsItsAudience() {
        let (h, alice, bob, carol, dave) = setUp()
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "pub", .public))
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "priv", .private))
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "priv", ["bob"]))
        h.clearInboxes()
        #expect(h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "pub")).succeeded)
        for s in [alice, bob, carol] { #expect(disbanded(h, s).map { $0.map(\.channelId) } == [["pub"]]) }
        #expect(h.received(dave).isEmpty)
        h.clearInboxes()
        #expect(h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "priv")).succeeded)
        #expect(disbanded(h, bob).map { $0.map(\.channelId) } == [["priv"]])
        for s in [alice, carol, dave] { #expect(h.received(s).isEmpty) }
        #expect(channels(h).map(\.channelId) == ["RCDefault"])
        #expect(h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "priv")).error?.code == .notFound)
    }

    // UG-4, UG-5
    @Test func removingFromAPrivateListTellsOnlyTheRemovedEachAboutThemselves() {
        let (h, alice, bob, carol, dave) = setUp()
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "priv", .private))
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "pub", .public))
        for c in ["priv", "pub"] { h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: c, ["alice", "bob", "carol"])) }
        h.clearInboxes()
        #expect(h.run(.removePrivateMembers(app: h.app, groupId: "g1", channelId: "priv", ["alice", "bob"])).succeeded)
        #expect(kicked(h, alice).map { $0.map(\.userId) } == [["alice"]])
        #expect(kicked(h, bob).map { $0.map(\.userId) } == [["bob"]])
        #expect(h.received(carol).isEmpty)
        #expect(h.received(dave).isEmpty)
        #expect(privateMembers(h, "priv") == ["carol"])
        // A public channel's list changes silently.
        h.clearInboxes()
        #expect(h.run(.removePrivateMembers(app: h.app, groupId: "g1", channelId: "pub", ["alice"])).succeeded)
        for s in [alice, bob, carol, dave] { #expect(h.received(s).isEmpty) }
        #expect(privateMembers(h, "pub") == ["bob", "carol"])
    }

    // UG-6
    @Test func queriesArePaged() {
        let (h, _, _, _, _) = setUp()
        for c in ["a", "b", "c"] { h.run(.createChannel(app: h.app, groupId: "g1", channelId: c, c == "b" ? .private : .public)) }
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "b", ["carol"]))
        guard case .channels(let page2, let total)? = h.query(.channels(app: h.app, groupId: "g1", page: 2, pageSize: 2)) else {
            Issue.record("no channels")
            return
        }
        #expect(page2.map(\.channelId) == ["b", "c"] && total == 4)
        #expect(h.query(.channels(app: h.app, groupId: "g1", page: 3, pageSize: 2)) == .channels([], total: 4))
        // A page far past the end is empty, not an arithmetic overflow.
        #expect(h.query(.channels(app: h.app, groupId: "g1", page: Int.max / 2, pageSize: 32)) == .channels([], total: 4))
        #expect(h.domain.query(.channels(app: h.app, groupId: "g1", page: 0, pageSize: 2), now: h.now).error?.field == "page")
        #expect(h.domain.query(.channels(app: h.app, groupId: "g1", page: 1, pageSize: 101), now: h.now).error?.field == "pageSize")
        #expect(h.query(.groupMembers(app: h.app, groupId: "g1", page: 2, pageSize: 2)) == .userIdsPage(["carol"], total: 3))
        // Bob sees the public channels; carol also the private one whose list holds her.
        guard case .channels(let bobs, _)? = h.query(.userChannels(app: h.app, groupId: "g1", userId: "bob", page: 1, pageSize: 50)),
              case .channels(let carols, _)? = h.query(.userChannels(app: h.app, groupId: "g1", userId: "carol", page: 1, pageSize: 50)) else {
            Issue.record("no user channels")
            return
        }
        #expect(bobs.map(\.channelId) == ["RCDefault", "a", "c"])
        #expect(carols.map(\.channelId) == ["RCDefault", "a", "b", "c"])
        #expect(h.domain.query(.userChannels(app: h.app, groupId: "g1", userId: "dave", page: 1, pageSize: 10), now: h.now).error?.code == .notGroupMember)
    }

    // UG-1
    @Test func quittingTakesUsersOffEveryPrivateList() {
        let (h, _, _, _, _) = setUp()
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "priv", .private))
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "priv", ["bob", "carol"]))
        let out = h.run(.quitGroup(app: h.app, groupId: "g1", ["bob"]))
        #expect(out.mutations.contains(.deletePrivateMember(app: h.app, groupId: "g1", channelId: "priv", "bob")))
        #expect(privateMembers(h, "priv") == ["carol"])
        #expect(h.query(.groupMembers(app: h.app, groupId: "g1", page: 1, pageSize: 10)) == .userIdsPage(["alice", "carol"], total: 2))
        #expect(h.run(.dismissGroup(app: h.app, groupId: "g1")).succeeded)
        #expect(h.domain.query(.group(app: h.app, groupId: "g1"), now: h.now).error?.code == .notFound)
    }
}
