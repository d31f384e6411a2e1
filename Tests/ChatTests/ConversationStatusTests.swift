import Foundation
import Testing
@testable import Chat

@Suite("Conversation status sync (SPEC §5)")
struct ConversationStatusTests {
    let dm = ConversationKey(type: .private, targetId: "bob")

    func changes(_ h: Harness, _ s: SessionID) -> [[ConversationStatusInfo]] {
        h.received(s).compactMap { if case .conversationStatusChanged(let l) = $0 { return l } else { return nil } }
    }

    func view(_ h: Harness, _ user: String, _ key: ConversationKey) -> ConversationStatusView? {
        if case .conversationStatus(let v)? = h.query(.conversationStatus(app: h.app, userId: user, key)) { return v }
        return nil
    }

    // CS-1
    @Test func badInputNamesTheFieldAndChangesNothing() {
        let h = Harness()
        #expect(throws: ChatError.self) { _ = try ConversationType.parse(2) }
        #expect(throws: ChatError.self) { _ = try NotificationLevel.parse(3) }
        let channelOnDM = h.run(.setConversationStatus(app: h.app, userId: "alice", ConversationKey(type: .private, targetId: "bob", channelId: "x"),
                                                       pinned: true, level: nil, .server))
        #expect(channelOnDM.error?.field == "channelId")
        let nothing = h.run(.setConversationStatus(app: h.app, userId: "alice", dm, pinned: nil, level: nil, .server))
        #expect(nothing.error?.field == "pinned")
        let badTarget = h.run(.setConversationStatus(app: h.app, userId: "alice", ConversationKey(type: .group, targetId: ""), pinned: true,
                                                     level: nil, .server))
        #expect(badTarget.error?.field == "targetId")
        #expect(h.query(.conversationStatuses(app: h.app, userId: "alice", since: 0, limit: 100)) == .conversationStatuses([], cursor: 0, more: false))
    }

    // CS-1, CS-2
    @Test func aServerChangeReachesEveryDeviceOfTheUserOnly() {
        let h = Harness()
        let phone = h.connect("alice", device: "phone"), tablet = h.connect("alice", device: "tablet"), bob = h.connect("bob")
        h.clearInboxes()
        let out = h.run(.setConversationStatus(app: h.app, userId: "alice", dm, pinned: true, level: .blocked, .server))
        #expect(out.succeeded)
        for s in [phone, tablet] {
            let events = changes(h, s)
            // One array event carrying both aspects: DND (type 1, value 0 = DND) and pinned (type 2, value 1).
            #expect(events.count == 1)
            #expect(events.first?.map(\.statusType) == [.mute, .top])
            #expect(events.first?.map(\.value) == [0, 1])
            #expect(events.first?.first?.level == .blocked)
        }
        #expect(h.received(bob).isEmpty)
        #expect(view(h, "alice", dm)?.status.pinned == true)
        // Setting what is already set changes nothing and tells nobody.
        h.clearInboxes()
        let same = h.run(.setConversationStatus(app: h.app, userId: "alice", dm, pinned: true, level: nil, .server))
        #expect(same.succeeded && same.effects.isEmpty && same.mutations.isEmpty)
        // Notifications back on: value 1 for levels -1 and 0.
        h.run(.setConversationStatus(app: h.app, userId: "alice", dm, pinned: nil, level: .allMessages, .server))
        #expect(changes(h, phone).last?.map(\.value) == [1])
    }

    // CS-2
    @Test func aDeviceChangeReachesTheUsersOtherDevices() {
        let h = Harness()
        let phone = h.connect("alice", device: "phone"), tablet = h.connect("alice", device: "tablet"), bob = h.connect("bob")
        h.clearInboxes()
        #expect(h.run(.setConversationStatus(app: h.app, userId: "alice", dm, pinned: true, level: nil, .session(phone))).succeeded)
        #expect(changes(h, tablet).map { $0.map(\.statusType) } == [[.top]])
        #expect(h.received(phone).isEmpty)
        #expect(h.received(bob).isEmpty)
        // A device cannot set another user's status.
        let other = h.run(.setConversationStatus(app: h.app, userId: "alice", dm, pinned: false, level: nil, .session(bob)))
        #expect(other.error?.code == .permissionDenied)
    }

    // CS-3
    @Test func syncReturnsWhatChangedAfterACursorInChangeOrder() {
        let h = Harness()
        let keys = ["bob", "carol", "dave"].map { ConversationKey(type: .private, targetId: $0) }
        for k in keys { h.run(.setConversationStatus(app: h.app, userId: "alice", k, pinned: true, level: nil, .server)) }
        h.run(.setConversationStatus(app: h.app, userId: "alice", keys[0], pinned: nil, level: .mention, .server))
        guard case .conversationStatuses(let all, let cursor, let more)? = h.query(.conversationStatuses(app: h.app, userId: "alice", since: 0, limit: 100)) else {
            Issue.record("no statuses")
            return
        }
        // A device that never synced gets every status; bob's came last (it changed last).
        #expect(all.map(\.key.targetId) == ["carol", "dave", "bob"] && cursor == 4 && !more)
        #expect(all.map(\.version) == [2, 3, 4])
        guard case .conversationStatuses(let since2, _, _)? = h.query(.conversationStatuses(app: h.app, userId: "alice", since: 2, limit: 100)) else {
            Issue.record("no statuses")
            return
        }
        #expect(since2.map(\.key.targetId) == ["dave", "bob"])
        #expect(h.query(.conversationStatuses(app: h.app, userId: "alice", since: 0, limit: 1))
                == .conversationStatuses([all[0]], cursor: 2, more: true))
        #expect(h.query(.conversationStatuses(app: h.app, userId: "alice", since: 4, limit: 10)) == .conversationStatuses([], cursor: 4, more: false))
        // Another user's statuses are their own.
        #expect(h.query(.conversationStatuses(app: h.app, userId: "bob", since: 0, limit: 10)) == .conversationStatuses([], cursor: 0, more: false))
    }

    // CS-4
    @Test func theEffectiveLevelFollowsThePriority() {
        let h = Harness { $0.notificationLevel = .mentionAll }
        h.run(.createGroup(app: h.app, groupId: "g1", name: "", creator: "alice"))
        h.run(.createChannel(app: h.app, groupId: "g1", channelId: "c1", .public))
        let channel = ConversationKey(type: .ultraGroup, targetId: "g1", channelId: "c1")
        func effective() -> (NotificationLevel?, LevelSource?) {
            let v = view(h, "alice", channel)
            return (v?.effectiveLevel, v?.source)
        }
        #expect(effective() == (.mentionAll, .app))
        h.run(.setGroupNotificationLevel(app: h.app, groupId: "g1", channelId: nil, .mention))
        #expect(effective() == (.mention, .groupDefault))
        h.run(.setGroupNotificationLevel(app: h.app, groupId: "g1", channelId: "c1", .mentionUsers))
        #expect(effective() == (.mentionUsers, .channelDefault))
        h.run(.setConversationTypeLevel(app: h.app, userId: "alice", .ultraGroup, .blocked))
        #expect(effective() == (.blocked, .conversationType))
        h.run(.setConversationStatus(app: h.app, userId: "alice", ConversationKey(type: .ultraGroup, targetId: "g1"), pinned: nil, level: .allMessages, .server))
        #expect(effective() == (.allMessages, .conversation))
        h.run(.setConversationStatus(app: h.app, userId: "alice", channel, pinned: nil, level: .mention, .server))
        #expect(effective() == (.mention, .channel))
        // Back to "not set" at the channel: the whole-group setting decides again.
        h.run(.setConversationStatus(app: h.app, userId: "alice", channel, pinned: nil, level: .default, .server))
        #expect(effective() == (.allMessages, .conversation))
        // Another user inherits only the defaults.
        if case .conversationStatus(let v)? = h.query(.conversationStatus(app: h.app, userId: "bob", channel)) {
            #expect(v.effectiveLevel == .mentionUsers && v.source == .channelDefault)
        } else {
            Issue.record("no view")
        }
        #expect(h.query(.conversationTypeLevel(app: h.app, userId: "alice", .ultraGroup)) == .notificationLevel(.blocked))
        #expect(h.query(.groupNotificationLevel(app: h.app, groupId: "g1", channelId: "c1")) == .notificationLevel(.mentionUsers))
        // Nothing set anywhere: every message notifies.
        let plain = Harness()
        if case .conversationStatus(let v)? = plain.query(.conversationStatus(app: plain.app, userId: "x", dm)) {
            #expect(v.effectiveLevel == .allMessages && v.source == LevelSource.none)
        }
    }

    // CS-4: settings written by an older version (no notificationLevel) still load.
    @Test func olderSettingsDecodeWithDefaults() throws {
        let json = #"{"memberChangeEvents":false,"multipleRoomsPerUser":true,"enterExitNotifications":true,"maxRoomsPerUser":3,"maxRooms":0,"historyRetentionMilliseconds":1000,"historyLimitPerRoom":10,"maxMessageBytes":100,"defaultQueueLimit":5}"#
        let s = try JSONDecoder().decode(AppSettings.self, from: Data(json.utf8))
        #expect(s.memberChangeEvents == false && s.maxRoomsPerUser == 3 && s.notificationLevel == .default)
    }
}
