import Testing
@testable import Chat

/// MO-4: an ultra group's user groups, bound to channels: their members see a private channel as
/// if on its list, and every audience that follows who sees a channel follows them.
@Suite("Ultra-group user groups (MO-4)")
struct UserGroupTests {
    /// g1 with members alice, bob and carol; dave is online but not a member. Channel priv is
    /// private with an empty list, pub is public.
    func setUp() -> (Harness, alice: SessionID, bob: SessionID, carol: SessionID, dave: SessionID) {
        let h = Harness()
        #expect(h.run(.createGroup(app: h.app, groupId: "g1", name: "Guild", creator: "alice")).succeeded)
        #expect(h.run(.joinGroup(app: h.app, groupId: "g1", ["bob", "carol"])).succeeded)
        #expect(h.run(.createChannel(app: h.app, groupId: "g1", channelId: "priv", .private)).succeeded)
        #expect(h.run(.createChannel(app: h.app, groupId: "g1", channelId: "pub", .public)).succeeded)
        let a = h.connect("alice"), b = h.connect("bob"), c = h.connect("carol"), d = h.connect("dave")
        h.clearInboxes()
        return (h, a, b, c, d)
    }

    func userGroups(_ h: Harness) -> [UserGroupInfo] {
        guard case .userGroups(let list, _)? = h.query(.userGroups(app: h.app, groupId: "g1", page: 1, pageSize: 100)) else { return [] }
        return list
    }

    func bound(_ h: Harness, _ channel: String) -> [String] {
        guard case .userGroups(let list, _)? = h.query(.channelUserGroups(app: h.app, groupId: "g1", channelId: channel, page: 1, pageSize: 100))
        else { return [] }
        return list.map(\.userGroupId)
    }

    func visible(_ h: Harness, _ user: String) -> [String] {
        guard case .channels(let list, _)? = h.query(.userChannels(app: h.app, groupId: "g1", userId: user, page: 1, pageSize: 100)) else { return [] }
        return list.map(\.channelId)
    }

    func kicked(_ h: Harness, _ s: SessionID) -> [String] {
        h.received(s).flatMap { e -> [String] in if case .channelUsersKicked(let l) = e { return l.map(\.channelId) } else { return [] } }
    }

    func typeChanges(_ h: Harness, _ s: SessionID) -> [ChannelChangeType] {
        h.received(s).flatMap { e -> [ChannelChangeType] in if case .channelTypeChanged(let l) = e { return l.map(\.changeType) } else { return [] } }
    }

    func disbanded(_ h: Harness, _ s: SessionID) -> Int {
        h.received(s).filter { if case .channelDisbanded = $0 { return true } else { return false } }.count
    }

    @Test func anUltraGroupHoldsAtMostFiftyUserGroupsAndABadCallChangesNothing() {
        let (h, _, _, _, _) = setUp()
        let limit = Limits.maxUserGroupsPerGroup
        #expect(limit == 50 && Limits.maxUserGroupsPerCall == 10)
        for batch in 0..<(limit / 10) {
            let ids = (0..<10).map { "ug\(batch * 10 + $0)" }
            #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", ids)).succeeded)
        }
        #expect(userGroups(h).count == limit)
        // Creating an existing one again is no change; one more is past the bound.
        let again = h.run(.createUserGroups(app: h.app, groupId: "g1", ["ug0"]))
        #expect(again.succeeded && again.mutations.isEmpty)
        let past = h.run(.createUserGroups(app: h.app, groupId: "g1", ["ug0", "extra"]))
        #expect(past.error?.code == .limitExceeded && past.error?.field == "userGroupIds" && past.mutations.isEmpty)
        #expect(userGroups(h).count == limit)

        // Bad input names the field and changes nothing: too many, duplicates, bad ids, no ids.
        #expect(h.run(.deleteUserGroups(app: h.app, groupId: "g1", ["ug1"])).succeeded)
        for bad in [(0...10).map { "n\($0)" }, ["a", "a"], ["ok", "has space"], [], [String(repeating: "x", count: Limits.maxUserGroupIdBytes + 1)]] {
            let out = h.run(.createUserGroups(app: h.app, groupId: "g1", bad))
            #expect(out.error?.code == .invalidParameter && out.error?.field == "userGroupIds", "\(bad)")
            #expect(out.mutations.isEmpty && out.webhooks.isEmpty)
        }
        #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", [String(repeating: "x", count: Limits.maxUserGroupIdBytes)])).succeeded)
        #expect(h.run(.createUserGroups(app: h.app, groupId: "nope", ["a"])).error?.code == .notFound)
        #expect(userGroups(h).count == limit)
    }

    @Test func aUserGroupHoldsAtMostAHundredGroupMembers() {
        let (h, _, _, _, _) = setUp()
        let limit = Limits.maxUsersPerUserGroup
        #expect(limit == 100)
        let users = (0..<(limit + 1)).map { "m\($0)" }
        #expect(h.run(.joinGroup(app: h.app, groupId: "g1", Array(users[0..<limit]))).succeeded)
        #expect(h.run(.joinGroup(app: h.app, groupId: "g1", [users[limit]])).succeeded)
        #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", ["team"])).succeeded)
        for start in stride(from: 0, to: limit, by: Limits.maxUsersPerCall) {
            #expect(h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", Array(users[start..<start + Limits.maxUsersPerCall]))).succeeded)
        }
        #expect(userGroups(h).first?.userIds.count == limit)
        let past = h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", [users[limit], users[0]]))
        #expect(past.error?.code == .limitExceeded && past.error?.field == "userIds" && past.mutations.isEmpty)
        // Users already in it take no room.
        #expect(h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", [users[0]])).succeeded)
        #expect(userGroups(h).first?.userIds.count == limit)
        // More than 20 users per call, or none, or duplicates: refused.
        for bad in [Array(users[0...20]), [], ["m1", "m1"]] {
            let out = h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", bad))
            #expect(out.error?.field == "userIds" && out.mutations.isEmpty, "\(bad)")
        }
        let unknown = h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "other", ["m1"]))
        #expect(unknown.error?.code == .notFound && unknown.error?.field == "userGroupId")
    }

    @Test func onlyGroupMembersJoinAUserGroupOrNobodyDoes() {
        let (h, _, _, _, _) = setUp()
        #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", ["team"])).succeeded)
        let out = h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", ["bob", "dave"]))
        #expect(out.error?.code == .notGroupMember && out.error?.field == "userIds")
        #expect(out.error?.code.rawValue == 24406)
        #expect(out.mutations.isEmpty && out.webhooks.isEmpty)
        #expect(userGroups(h).first?.userIds == [])
    }

    @Test func aChannelIsBoundToAtMostTenKnownUserGroups() {
        let (h, _, _, _, _) = setUp()
        let ids = (0...Limits.maxUserGroupsPerChannel).map { "ug\($0)" }
        #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", Array(ids[0..<10]))).succeeded)
        #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", [ids[10]])).succeeded)
        #expect(h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "priv", Array(ids[0..<10]))).succeeded)
        let past = h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "priv", [ids[10]]))
        #expect(past.error?.code == .limitExceeded && past.error?.field == "userGroupIds" && past.mutations.isEmpty)
        #expect(bound(h, "priv") == Array(ids[0..<10]))
        // An unknown user group refuses the whole call.
        let unknown = h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["ug1", "nope"]))
        #expect(unknown.error?.code == .notFound && unknown.error?.field == "userGroupIds" && unknown.mutations.isEmpty)
        #expect(bound(h, "pub") == [])
        #expect(h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "missing", ["ug1"])).error?.field == "channelId")
        #expect(h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "pub", [])).error?.field == "userGroupIds")
        #expect(h.run(.unbindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["a b"])).error?.field == "userGroupIds")
        // Unbinding what is not bound is no change.
        #expect(h.run(.unbindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["ug1"])).mutations.isEmpty)
    }

    @Test func aPrivateChannelIsSeenThroughItsBoundUserGroups() {
        let (h, alice, bob, carol, dave) = setUp()
        #expect(h.run(.createUserGroups(app: h.app, groupId: "g1", ["team"])).succeeded)
        #expect(h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", ["bob"])).succeeded)
        #expect(visible(h, "bob") == ["RCDefault", "pub"])
        #expect(h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "priv", ["team"])).succeeded)
        #expect(visible(h, "bob") == ["RCDefault", "priv", "pub"])
        #expect(visible(h, "carol") == ["RCDefault", "pub"])
        // A member added to the bound group sees it; the explicit list is unchanged.
        #expect(h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", ["carol"])).succeeded)
        #expect(visible(h, "carol") == ["RCDefault", "priv", "pub"])
        #expect(h.query(.privateMembers(app: h.app, groupId: "g1", channelId: "priv", page: 1, pageSize: 10)) == .userIdsPage([], total: 0))
        guard case .userGroups(let mine, _)? = h.query(.userUserGroups(app: h.app, groupId: "g1", userId: "carol", page: 1, pageSize: 10)),
              case .channels(let teamChannels, _)? = h.query(.userGroupChannels(app: h.app, groupId: "g1", userGroupId: "team", page: 1, pageSize: 10))
        else { Issue.record("no answers"); return }
        #expect(mine.map(\.userGroupId) == ["team"] && teamChannels.map(\.channelId) == ["priv"])
        #expect(userGroups(h) == [UserGroupInfo(userGroupId: "team", userIds: ["bob", "carol"], channelIds: ["priv"])])
        // Gaining sight tells nobody (as a private list's additions do).
        for s in [alice, bob, carol, dave] { #expect(h.received(s).isEmpty) }

        // Removing carol from the group hides it from her, and tells her alone.
        #expect(h.run(.removeUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", ["carol"])).succeeded)
        #expect(visible(h, "carol") == ["RCDefault", "pub"])
        #expect(kicked(h, carol) == ["priv"])
        for s in [alice, bob, dave] { #expect(h.received(s).isEmpty) }
    }

    @Test func onlyThoseWhoLoseSightAreTold() {
        let (h, alice, bob, carol, dave) = setUp()
        h.run(.createUserGroups(app: h.app, groupId: "g1", ["t1", "t2"]))
        h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "t1", ["bob", "carol"]))
        h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "t2", ["bob"]))
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "priv", ["carol"]))
        h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "priv", ["t1", "t2"]))
        h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["t1"]))
        h.clearInboxes()
        // Unbinding t1: bob still sees priv through t2, carol through the list: nobody is told.
        #expect(h.run(.unbindUserGroups(app: h.app, groupId: "g1", channelId: "priv", ["t1"])).succeeded)
        for s in [alice, bob, carol, dave] { #expect(h.received(s).isEmpty) }
        // Taking carol off the list while t1 is bound again: she still sees it, no event.
        h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "priv", ["t1"]))
        #expect(h.run(.removePrivateMembers(app: h.app, groupId: "g1", channelId: "priv", ["carol"])).succeeded)
        #expect(kicked(h, carol).isEmpty && visible(h, "carol").contains("priv"))
        // Deleting t1 hides priv from carol (bob keeps t2); its bindings go, pub's too.
        let delete = h.run(.deleteUserGroups(app: h.app, groupId: "g1", ["t1", "unknown"]))
        #expect(delete.succeeded && delete.mutations == [.deleteUserGroup(app: h.app, groupId: "g1", userGroupId: "t1")])
        #expect(kicked(h, carol) == ["priv"] && kicked(h, bob).isEmpty)
        #expect(bound(h, "priv") == ["t2"] && bound(h, "pub") == [])
        // A public channel's bindings change silently.
        h.clearInboxes()
        h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["t2"]))
        #expect(h.run(.unbindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["t2"])).succeeded)
        for s in [alice, bob, carol, dave] { #expect(h.received(s).isEmpty) }
    }

    @Test func typeChangesAndDeletionsReachThoseWhoSeeThroughGroups() {
        let (h, alice, bob, carol, dave) = setUp()
        h.run(.createUserGroups(app: h.app, groupId: "g1", ["team"]))
        h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "team", ["bob"]))
        // Bound while public: no effect until it turns private.
        h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "pub", ["team"]))
        h.run(.addPrivateMembers(app: h.app, groupId: "g1", channelId: "pub", ["carol"]))
        h.clearInboxes()
        #expect(h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "pub", .private)).succeeded)
        #expect(typeChanges(h, bob) == [.publicToPrivate] && typeChanges(h, carol) == [.publicToPrivate])
        #expect(typeChanges(h, alice) == [.publicToPrivateUserNotIn])
        #expect(h.received(dave).isEmpty)
        #expect(visible(h, "bob").contains("pub") && !visible(h, "alice").contains("pub"))
        h.clearInboxes()
        #expect(h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "pub", .public)).succeeded)
        #expect(typeChanges(h, bob) == [.privateToPublic] && typeChanges(h, carol) == [.privateToPublic])
        #expect(h.received(alice).isEmpty && h.received(dave).isEmpty)
        // Deleting a private channel tells who saw it (list and groups), and drops its bindings.
        h.run(.changeChannelType(app: h.app, groupId: "g1", channelId: "pub", .private))
        h.clearInboxes()
        let out = h.run(.deleteChannel(app: h.app, groupId: "g1", channelId: "pub"))
        #expect(out.succeeded)
        #expect(disbanded(h, bob) == 1 && disbanded(h, carol) == 1 && disbanded(h, alice) == 0 && disbanded(h, dave) == 0)
        #expect(userGroups(h).first?.channelIds == [])
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "pub", .private))
        #expect(bound(h, "pub") == [] && !visible(h, "bob").contains("pub"))
    }

    @Test func leavingTheUltraGroupLeavesItsUserGroupsAndDismissingDropsAll() {
        let (h, _, _, _, _) = setUp()
        h.run(.createUserGroups(app: h.app, groupId: "g1", ["t1", "t2"]))
        h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "t1", ["bob", "carol"]))
        h.run(.addUserGroupMembers(app: h.app, groupId: "g1", userGroupId: "t2", ["bob"]))
        h.run(.bindUserGroups(app: h.app, groupId: "g1", channelId: "priv", ["t1"]))
        let quit = h.run(.quitGroup(app: h.app, groupId: "g1", ["bob"]))
        #expect(quit.mutations.contains(.deleteUserGroupMember(app: h.app, groupId: "g1", userGroupId: "t1", "bob")))
        #expect(quit.mutations.contains(.deleteUserGroupMember(app: h.app, groupId: "g1", userGroupId: "t2", "bob")))
        #expect(userGroups(h).map(\.userIds) == [["carol"], []])
        // Rejoining does not restore the user groups.
        h.run(.joinGroup(app: h.app, groupId: "g1", ["bob"]))
        #expect(!visible(h, "bob").contains("priv"))
        #expect(h.run(.dismissGroup(app: h.app, groupId: "g1")).succeeded)
        h.run(.createGroup(app: h.app, groupId: "g1", name: "Again", creator: "alice"))
        #expect(userGroups(h).isEmpty)
    }
}
