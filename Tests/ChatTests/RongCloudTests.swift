import Foundation
import Testing
@testable import Chat

@Suite("RongCloud chatrooms (SPEC §3)")
struct RongCloudTests {
    // RC-1
    @Test func joinReportsJoiningThenJoinedToTheJoiningConnectionOnly() {
        let h = Harness()
        h.createRoom("r1") { $0.name = "Lobby" }
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(bob, "r1")
        h.clearInboxes()
        h.join(alice, "r1")
        let statuses = h.received(alice).statuses
        #expect(statuses.map(\.zimState) == [.connecting, .connected])
        #expect(statuses.first?.status == .joining)
        guard case .joined(let info)? = statuses.last?.status else { Issue.record("no joined"); return }
        #expect(info.memberCount == 2)
        #expect(info.joinTime == h.now)
        #expect(info.room.name == "Lobby")
        // Nobody else receives alice's status.
        #expect(h.received(bob).statuses.isEmpty)
    }

    // RC-1
    @Test func joinFailedCarriesTheCodeAndChangesNothing() {
        let h = Harness()
        let alice = h.connect("alice")
        let missing = h.join(alice, "nope")
        #expect(missing.error?.code == .roomNotFound)
        #expect(h.received(alice).statuses.map(\.status) == [.joining, .joinFailed(.roomNotFound)])
        #expect(missing.mutations.isEmpty)

        h.createRoom("r1")
        h.run(.block(app: h.app, roomId: "r1", ["alice"], minutes: 10, .server, rc: nil, nim: nil))
        h.clearInboxes()
        let blocked = h.join(alice, "r1")
        #expect(blocked.error?.code == .blocked)
        #expect(h.received(alice).statuses.last?.status == .joinFailed(.blocked))
        #expect(h.present("r1").isEmpty)
    }

    // RC-1
    @Test func quitGoesToTheLeavingConnection() {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        h.leave(alice, "r1")
        #expect(h.received(alice).statuses.map(\.status) == [.quit])
        #expect(h.received(bob).statuses.isEmpty)
        #expect(h.leave(alice, "r1").error?.code == .notInRoom)
    }

    // RC-1, RC-9
    @Test func destroyTellsOnlyOnlineMembersWithItsType() {
        let h = Harness()
        h.createRoom("r1")
        h.createRoom("r2")
        let alice = h.connect("alice"), bob = h.connect("bob"), carol = h.connect("carol")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.join(carol, "r2")
        h.clearInboxes()
        h.run(.destroyRooms(app: h.app, ["r1"]))
        #expect(h.received(alice).statuses.map(\.status) == [.destroyed(.manual)])
        #expect(h.received(bob).statuses.map(\.status) == [.destroyed(.manual)])
        #expect(h.received(carol).isEmpty)
        #expect(h.query(.room(app: h.app, roomId: "r1")) == nil)
        #expect(h.roomIndex[h.key("r1")]?.isEmpty ?? true)
    }

    // RC-1, BX-1: a room destroyed and created again is a new incarnation (clients get `reset`).
    @Test func recreatedRoomHasANewEpoch() {
        let h = Harness()
        h.createRoom("r1")
        let first = h.domain.epoch(app: h.app, roomId: "r1")
        h.run(.destroyRooms(app: h.app, ["r1"]))
        h.createRoom("r1")
        #expect(first != nil && h.domain.epoch(app: h.app, roomId: "r1") != first)
    }

    // RC-2
    @Test func memberChangesReachOtherMembersWithTheCount() {
        let h = Harness()
        h.createRoom("r1")
        h.createRoom("other")
        let alice = h.connect("alice"), bob = h.connect("bob"), dave = h.connect("dave")
        h.join(bob, "r1")
        h.join(dave, "other")
        h.clearInboxes()
        h.join(alice, "r1")
        #expect(h.received(bob).memberChanges == [MemberChangedEvent(roomId: "r1", changes: [MemberChange(userId: "alice", action: .join, nickname: "", avatar: "")], memberCount: 2)])
        #expect(h.received(alice).memberChanges.isEmpty)
        #expect(h.received(dave).isEmpty)
        h.clearInboxes()
        h.leave(alice, "r1")
        #expect(h.received(bob).memberChanges.map { $0.changes.map(\.action) } == [[.quit]])
        #expect(h.received(bob).memberChanges.first?.memberCount == 1)
    }

    // RC-2: switchable per app.
    @Test func memberChangesCanBeSwitchedOff() {
        let h = Harness { $0.memberChangeEvents = false }
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(bob, "r1")
        h.join(alice, "r1")
        h.leave(alice, "r1")
        #expect(h.received(bob).memberChanges.isEmpty)
    }

    // RC-3
    @Test func multiDeviceSyncReachesOnlyTheUsersOtherOnlineDevices() {
        let h = Harness()
        h.createRoom("r1")
        let phone = h.connect("alice", device: "phone"), laptop = h.connect("alice", device: "laptop")
        let tablet = h.connect("alice", device: "tablet")
        let bob = h.connect("bob")
        h.join(bob, "r1")
        h.disconnect(tablet) // offline devices get nothing
        h.clearInboxes()
        h.join(phone, "r1")
        #expect(h.received(laptop).syncs == [MultiLoginSyncEvent(roomId: "r1", status: 1, reason: 0, time: h.now, extra: "")])
        #expect(h.received(phone).syncs.isEmpty)
        #expect(h.received(bob).syncs.isEmpty)
        #expect(h.received(tablet).isEmpty)
        h.clearInboxes()
        h.leave(phone, "r1")
        #expect(h.received(laptop).syncs.map { [$0.status, $0.reason] } == [[0, 1]])
        #expect(h.received(bob).syncs.isEmpty)
    }

    // RC-4
    @Test func oneRoomPerUserMovesTheUserAndTellsTheOldRoom() {
        let h = Harness { $0.multipleRoomsPerUser = false }
        h.createRoom("r1")
        h.createRoom("r2")
        let phone = h.connect("alice", device: "phone"), laptop = h.connect("alice", device: "laptop")
        let bob = h.connect("bob"), carol = h.connect("carol")
        h.join(phone, "r1")
        h.join(bob, "r1")
        h.join(carol, "r2")
        h.clearInboxes()
        h.join(laptop, "r2")
        #expect(h.present("r1") == ["bob"])
        #expect(h.present("r2") == ["carol", "alice"])
        // The user (every device) and every member of the room left behind are told.
        let expected = MultiLoginSyncEvent(roomId: "r1", status: 0, reason: 2, time: h.now, extra: "")
        #expect(h.received(phone).syncs.contains(expected))
        #expect(h.received(laptop).syncs.contains(expected))
        #expect(h.received(bob).syncs == [expected])
        #expect(!h.received(carol).syncs.contains(expected))
        // The connection moved out is told it quit r1 (RC-1 quit); nobody else gets a status.
        #expect(h.received(phone).statuses.map(\.roomId) == ["r1"] && h.received(phone).statuses.first?.status == .quit)
        #expect(h.received(bob).statuses.isEmpty && h.received(carol).statuses.isEmpty)
    }

    // RC-4: one room per user is the default of a new app ("No notification if Single User Joins
    // Multiple Chatrooms is enabled", so it starts disabled); enabling it stops the moves.
    @Test func oneRoomPerUserIsTheDefaultUntilTheAppEnablesMore() {
        #expect(AppSettings().multipleRoomsPerUser == false)
        let h = Harness()
        h.createRoom("r1")
        h.createRoom("r2")
        h.createRoom("r3")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        #expect(h.join(alice, "r2").succeeded)
        #expect(h.present("r1") == ["bob"])
        #expect(h.present("r2") == ["alice"])
        let moved = MultiLoginSyncEvent(roomId: "r1", status: 0, reason: 2, time: h.now, extra: "")
        #expect(h.received(bob).syncs == [moved])
        #expect(h.received(alice).syncs == [moved])
        // Settings stored without the field take the default too.
        let stored = try? JSONDecoder().decode(AppSettings.self, from: Data(#"{"memberChangeEvents":true}"#.utf8))
        #expect(stored?.multipleRoomsPerUser == false)
        // The app enables several rooms: no more moves.
        #expect(h.run(.updateAppSettings(app: h.app, AppSettingsPatch(multipleRoomsPerUser: true))).succeeded)
        h.clearInboxes()
        #expect(h.join(alice, "r3").succeeded)
        #expect(h.present("r2") == ["alice"] && h.present("r3") == ["alice"])
        #expect(h.received(alice).syncs.isEmpty)
    }

    // RC-4: no notification when several rooms are allowed.
    @Test func severalRoomsAllowedMeansNoMove() {
        let h = Harness { $0.multipleRoomsPerUser = true }
        h.createRoom("r1")
        h.createRoom("r2")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        h.join(alice, "r2")
        #expect(h.present("r1") == ["alice", "bob"])
        #expect(h.received(bob).syncs.isEmpty)
        #expect(h.received(alice).syncs.isEmpty)
    }

    // RC-5
    @Test func blockRemovesNotifiesEveryoneIncludingTheBlockedAndBarsReentry() {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob"), outsider = h.connect("zed")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        h.run(.block(app: h.app, roomId: "r1", ["alice"], minutes: 5, .server, rc: RCNotify(extra: "{\"why\":1}"), nim: nil))
        let expected = BlockEvent(roomId: "r1", operateType: 1, durationTime: 300_000, operateTime: h.now, userIdList: ["alice"], extra: "{\"why\":1}")
        #expect(h.received(bob).blocks == [expected])
        #expect(h.received(alice).blocks == [expected])
        #expect(h.received(outsider).isEmpty)
        #expect(h.present("r1") == ["bob"])
        #expect(h.join(alice, "r1").error?.code == .blocked)
        // The block lifts by itself at its expiry.
        h.advance(seconds: 301)
        h.tick()
        #expect(h.join(alice, "r1").succeeded)
    }

    // RC-5: without needNotify nobody is told; unblock reaches only the unblocked users.
    @Test func unblockNotifiesOnlyTheUnblocked() {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob"), carol = h.connect("carol")
        h.join(bob, "r1")
        h.join(alice, "r1")
        h.clearInboxes()
        h.run(.block(app: h.app, roomId: "r1", ["alice"], minutes: 60, .server, rc: nil, nim: nil))
        #expect(h.received(bob).blocks.isEmpty)
        #expect(h.received(alice).blocks.isEmpty)
        h.clearInboxes()
        h.run(.unblock(app: h.app, roomId: "r1", ["alice"], .server, rc: RCNotify(extra: "x"), nim: nil))
        #expect(h.received(alice).blocks == [BlockEvent(roomId: "r1", operateType: 0, durationTime: 0, operateTime: h.now, userIdList: ["alice"], extra: "x")])
        #expect(h.received(bob).blocks.isEmpty)
        #expect(h.received(carol).isEmpty)
    }

    // RC-6 0/1, 2/3, 4/5: all members.
    @Test("room bans reach all members", arguments: [BanType.muteUsers, .unmuteUsers, .roomMuteOn, .roomMuteOff, .allowlistAdd, .allowlistRemove])
    func roomBanEventsReachAllMembers(_ type: BanType) {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob"), outsider = h.connect("zed")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        let rc = RCNotify(extra: "e")
        switch type {
        case .muteUsers: h.run(.mute(app: h.app, roomId: "r1", ["bob"], .minutes(2), .server, rc: rc, nim: nil))
        case .unmuteUsers: h.run(.unmute(app: h.app, roomId: "r1", ["bob"], .all, .server, rc: rc, nim: nil))
        case .roomMuteOn: h.run(.setRoomMuted(app: h.app, roomId: "r1", true, .server, rc: rc, nim: nil))
        case .roomMuteOff: h.run(.setRoomMuted(app: h.app, roomId: "r1", false, .server, rc: rc, nim: nil))
        case .allowlistAdd: h.run(.addToAllowlist(app: h.app, roomId: "r1", ["bob"], rc: rc))
        case .allowlistRemove: h.run(.removeFromAllowlist(app: h.app, roomId: "r1", ["bob"], rc: rc))
        default: Issue.record("not a room ban")
        }
        for s in [alice, bob] {
            let bans = h.received(s).bans
            #expect(bans.map(\.banType) == [type])
            #expect(bans.first?.operateTime == h.now)
            #expect(bans.first?.extra == "e")
            #expect(bans.first?.roomId == "r1")
        }
        #expect(h.received(outsider).isEmpty)
        if type == .muteUsers { #expect(h.received(alice).bans.first?.durationTime == 120_000) }
        if type == .muteUsers || type == .allowlistAdd { #expect(h.received(alice).bans.first?.userIdList == ["bob"]) }
    }

    // RC-6 6/7: only the muted users, once for each chatroom they are in, with that chatroom's id
    // (the seed: "returns data including: chatroom ID"); a muted user in no room gets nothing.
    @Test func globalMuteIsToldToTheMutedUsersOncePerRoomWithItsId() {
        let h = Harness { $0.multipleRoomsPerUser = true }
        h.createRoom("r1")
        h.createRoom("r2")
        let alice = h.connect("alice"), aliceLaptop = h.connect("alice", device: "laptop")
        let bob = h.connect("bob"), carol = h.connect("carol"), dave = h.connect("dave")
        h.join(alice, "r1")
        h.join(aliceLaptop, "r2")
        h.join(bob, "r1")
        h.join(dave, "r2")
        h.clearInboxes()
        h.run(.globalMute(app: h.app, ["alice", "carol", "dave"], minutes: 10, rc: RCNotify(extra: "g")))
        let r1 = BanEvent(roomId: "r1", banType: .globalMute, durationTime: 600_000, operateTime: h.now, userIdList: ["alice"], extra: "g")
        let r2 = BanEvent(roomId: "r2", banType: .globalMute, durationTime: 600_000, operateTime: h.now, userIdList: ["alice", "dave"], extra: "g")
        // Every ban event names a room.
        #expect(h.lastOutcome.effects.allSatisfy { if case .deliver(.ban(let e), _) = $0 { !e.roomId.isEmpty } else { true } })
        #expect(h.received(alice).bans == [r1, r2])
        #expect(h.received(aliceLaptop).bans == [r1, r2])
        #expect(h.received(dave).bans == [r2])
        // Carol is muted but in no room; bob is in r1 but not muted.
        #expect(h.received(carol).isEmpty)
        #expect(h.received(bob).isEmpty)
        // Only the muted users are the audience.
        let audiences = h.lastOutcome.effects.compactMap { if case .deliver(.ban, let a) = $0 { a } else { nil } }
        #expect(audiences == [.users(app: h.app, ["alice"]), .users(app: h.app, ["alice", "dave"])])
        h.clearInboxes()
        h.run(.globalUnmute(app: h.app, ["alice"], rc: RCNotify()))
        #expect(h.received(alice).bans.map { [$0.roomId, String($0.banType.rawValue)] } == [["r1", "6"], ["r2", "6"]])
        #expect(h.received(alice).bans.allSatisfy { $0.userIdList == ["alice"] && $0.durationTime == 0 })
        #expect(h.received(bob).isEmpty && h.received(dave).isEmpty)
        // Without needNotify nobody is told.
        h.clearInboxes()
        h.run(.globalMute(app: h.app, ["alice"], minutes: 10, rc: nil))
        #expect(h.received(alice).isEmpty)
    }

    // RC-7
    @Test func mutesAreEnforced() {
        let h = Harness()
        h.createRoom("r1") { $0.creator = "owner" }
        let alice = h.connect("alice"), bob = h.connect("bob"), owner = h.connect("owner"), mgr = h.connect("mgr")
        for s in [alice, bob, owner, mgr] { h.join(s, "r1") }
        h.run(.setRole(app: h.app, roomId: "r1", target: "mgr", .setManager(true), .server, notifyExt: ""))
        func send(_ s: SessionID) -> ErrorCode? {
            h.run(.sendMessage(app: h.app, roomId: "r1", .session(s), .text, content: "hi")).error?.code
        }
        #expect(send(alice) == nil)
        h.run(.mute(app: h.app, roomId: "r1", ["alice"], .minutes(1), .server, rc: nil, nim: nil))
        #expect(send(alice) == .muted)
        #expect(send(bob) == nil)
        // The expiry lifts the mute at its time, even before a tick.
        h.advance(seconds: 61)
        #expect(send(alice) == nil)

        // Room-wide mute: only the allowlist, managers and the creator speak.
        h.run(.setRoomMuted(app: h.app, roomId: "r1", true, .server, rc: nil, nim: nil))
        h.run(.addToAllowlist(app: h.app, roomId: "r1", ["bob"], rc: nil))
        #expect(send(alice) == .muted)
        #expect(send(bob) == nil)
        #expect(send(owner) == nil)
        #expect(send(mgr) == nil)

        // A global mute holds in every room and the allowlist does not lift it.
        h.run(.globalMute(app: h.app, ["bob"], minutes: 5, rc: nil))
        #expect(send(bob) == .muted)

        // The app server is never blocked.
        let server = h.run(.sendMessage(app: h.app, roomId: "r1", .server(userId: "alice", nickname: "", avatar: ""), .text, content: "from server"))
        #expect(server.succeeded)
    }

    // RC-8
    @Test func limitsAreRefusedWholeAndChangeNothing() {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice")
        h.join(alice, "r1")
        let before = h.fingerprint("r1")
        let twentyOne = (1...21).map { "u\($0)" }
        let refusals: [(Command, String)] = [
            (.block(app: h.app, roomId: "r1", twentyOne, minutes: 10, .server, rc: nil, nim: nil), "userIds"),
            (.mute(app: h.app, roomId: "r1", twentyOne, .minutes(10), .server, rc: nil, nim: nil), "userIds"),
            (.globalMute(app: h.app, twentyOne, minutes: 10, rc: nil), "userIds"),
            (.block(app: h.app, roomId: "r1", ["alice"], minutes: 43201, .server, rc: nil, nim: nil), "minutes"),
            (.mute(app: h.app, roomId: "r1", ["alice"], .minutes(43201), .server, rc: nil, nim: nil), "minutes"),
            (.mute(app: h.app, roomId: "r1", ["alice"], .minutes(0), .server, rc: nil, nim: nil), "minutes"),
            (.globalMute(app: h.app, ["alice"], minutes: 43201, rc: nil), "minutes"),
            (.block(app: h.app, roomId: "r1", ["alice"], minutes: 10, .server, rc: RCNotify(extra: String(repeating: "x", count: 4097)), nim: nil), "extra"),
            (.addToAllowlist(app: h.app, roomId: "r1", twentyOne, rc: nil), "userIds"),
            (.block(app: h.app, roomId: "r1", ["alice", "alice"], minutes: 10, .server, rc: nil, nim: nil), "userIds"),
            (.block(app: h.app, roomId: "r1", [], minutes: 10, .server, rc: nil, nim: nil), "userIds"),
        ]
        for (command, field) in refusals {
            let out = h.run(command)
            #expect(out.error?.code == .invalidParameter, "\(field)")
            #expect(out.error?.field == field)
            #expect(out.effects.isEmpty && out.mutations.isEmpty && out.webhooks.isEmpty)
            #expect(h.fingerprint("r1") == before)
        }
        // 43200 minutes is the largest accepted duration.
        #expect(h.run(.mute(app: h.app, roomId: "r1", ["alice"], .minutes(43200), .server, rc: nil, nim: nil)).succeeded)
    }

    // RC-5, RC-6, RC-8, NIM-9, SPEC §13: `extra` and `notifyExt` are checked whenever they are
    // given, also without needNotify; the refusal names the field and changes nothing.
    @Test func extraAndNotifyExtLimitsHoldWithoutNeedNotify() {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        let before = h.fingerprint("r1")
        let longExtra = RCNotify.given(needNotify: false, extra: String(repeating: "x", count: Limits.maxExtraBytes + 1))
        let longExt = NIMNotify.given(needNotify: false, notifyExt: String(repeating: "n", count: Limits.maxNotifyExtBytes + 1))
        #expect(longExtra?.needNotify == false && longExt?.needNotify == false)
        var update = RoomUpdate()
        update.name = "renamed"
        let refusals: [(Command, String)] = [
            (.block(app: h.app, roomId: "r1", ["alice"], minutes: 10, .server, rc: longExtra, nim: nil), "extra"),
            (.unblock(app: h.app, roomId: "r1", ["alice"], .server, rc: longExtra, nim: nil), "extra"),
            (.mute(app: h.app, roomId: "r1", ["alice"], .minutes(10), .server, rc: longExtra, nim: nil), "extra"),
            (.unmute(app: h.app, roomId: "r1", ["alice"], .all, .server, rc: longExtra, nim: nil), "extra"),
            (.setRoomMuted(app: h.app, roomId: "r1", true, .server, rc: longExtra, nim: nil), "extra"),
            (.addToAllowlist(app: h.app, roomId: "r1", ["alice"], rc: longExtra), "extra"),
            (.removeFromAllowlist(app: h.app, roomId: "r1", ["alice"], rc: longExtra), "extra"),
            (.globalMute(app: h.app, ["alice"], minutes: 10, rc: longExtra), "extra"),
            (.globalUnmute(app: h.app, ["alice"], rc: longExtra), "extra"),
            (.block(app: h.app, roomId: "r1", ["alice"], minutes: 10, .server, rc: nil, nim: longExt), "notifyExt"),
            (.mute(app: h.app, roomId: "r1", ["alice"], .permanent, .server, rc: nil, nim: longExt), "notifyExt"),
            (.updateRoom(app: h.app, roomId: "r1", update, .server, nim: longExt), "notifyExt"),
            (.queueBatchUpdate(app: h.app, roomId: "r1", [KeyValue(key: "k", value: "v")], .server, notify: longExt), "notifyExt"),
        ]
        for (command, field) in refusals {
            let out = h.run(command)
            #expect(out.error?.code == .invalidParameter, "\(command)")
            #expect(out.error?.field == field, "\(command)")
            #expect(out.effects.isEmpty && out.mutations.isEmpty && out.webhooks.isEmpty, "\(command)")
            #expect(h.fingerprint("r1") == before, "\(command)")
        }
        // Within the limits and without needNotify, the change is made and nobody is told.
        let quiet = RCNotify.given(needNotify: false, extra: String(repeating: "x", count: Limits.maxExtraBytes))
        #expect(h.run(.mute(app: h.app, roomId: "r1", ["alice"], .minutes(10), .server, rc: quiet, nim: nil)).succeeded)
        #expect(h.run(.globalMute(app: h.app, ["bob"], minutes: 10, rc: quiet)).succeeded)
        let quietExt = NIMNotify.given(needNotify: false, notifyExt: "n")
        #expect(h.run(.updateRoom(app: h.app, roomId: "r1", update, .server, nim: quietExt)).succeeded)
        #expect(h.received(alice).isEmpty && h.received(bob).isEmpty)
        #expect(h.info("r1", "alice")?.isTempMuted == true)
        // Neither field given: no notification fields at all; needNotify alone: sent with "".
        #expect(RCNotify.given(needNotify: nil, extra: nil) == nil && NIMNotify.given(needNotify: false, notifyExt: nil) == nil)
        #expect(RCNotify.given(needNotify: true, extra: nil) == RCNotify(extra: ""))
        h.run(.unmute(app: h.app, roomId: "r1", ["alice"], .all, .server, rc: RCNotify.given(needNotify: true, extra: nil), nim: nil))
        #expect(h.received(bob).bans.map(\.banType) == [.unmuteUsers])
    }

    // RC-9
    @Test func roomLifecycleFromTheServer() {
        let h = Harness()
        #expect(h.createRoom(String(repeating: "a", count: 64)).succeeded)
        #expect(h.createRoom(String(repeating: "a", count: 65)).error?.field == "roomId")
        #expect(h.createRoom("bad/id").error?.code == .invalidParameter)
        #expect(h.createRoom("r1").succeeded)
        #expect(h.createRoom("r1").error?.code == .roomExists)
        h.createRoom("r2")
        guard case .rooms(let rooms)? = h.query(.rooms(app: h.app, ["r1", "r2", "missing"])) else { Issue.record("no rooms"); return }
        #expect(rooms.map(\.roomId) == ["r1", "r2"])
        // Member list ordered by join time, both ways, with is-in-room.
        let users = ["a", "b", "c", "d"].map { h.connect($0) }
        for (i, s) in users.enumerated() {
            h.advance(seconds: Int64(i + 1))
            h.join(s, "r1")
        }
        guard case .members(let asc, let total)? = h.query(.members(app: h.app, roomId: "r1", .present, .ascending, limit: 3, after: nil)) else { return }
        #expect(asc.map(\.userId) == ["a", "b", "c"])
        #expect(total == 4)
        guard case .members(let desc, _)? = h.query(.members(app: h.app, roomId: "r1", .present, .descending, limit: 500, after: nil)) else { return }
        #expect(desc.map(\.userId) == ["d", "c", "b", "a"])
        #expect(h.domain.query(.members(app: h.app, roomId: "r1", .present, .ascending, limit: 501, after: nil), now: h.now).error?.field == "limit")
        guard case .presence(let p)? = h.query(.isInRoom(app: h.app, roomId: "r1", ["a", "zz"])) else { return }
        #expect(p.map(\.inRoom) == [true, false])
        #expect(h.run(.destroyRooms(app: h.app, ["r1", "r2"])).succeeded)
        #expect(h.domain.roomCount(app: h.app) == 1)
        #expect(h.run(.destroyRooms(app: h.app, ["missing"])).error?.code == .roomNotFound)
    }

    // RC-9
    @Test func inactiveRoomsAreDestroyedAutomatically() {
        let h = Harness()
        h.createRoom("idle") { $0.destroyPolicy = .inactive(minutes: 60) }
        h.createRoom("busy") { $0.destroyPolicy = .inactive(minutes: 60) }
        h.createRoom("fixed") { $0.destroyPolicy = .fixed(minutes: 90) }
        h.createRoom("kept") {
            $0.destroyPolicy = .inactive(minutes: 60)
            $0.keepAlive = true
        }
        let alice = h.connect("alice")
        h.join(alice, "busy")
        h.advance(seconds: 50 * 60)
        h.run(.sendMessage(app: h.app, roomId: "busy", .session(alice), .text, content: "still here"))
        h.advance(seconds: 11 * 60)
        h.clearInboxes()
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "idle")) == nil)
        #expect(h.query(.room(app: h.app, roomId: "busy")) != nil)
        #expect(h.query(.room(app: h.app, roomId: "fixed")) != nil)
        // Minute 91: the fixed-lifetime room (90 min) is gone; "busy" lives until 60 minutes after
        // its last message (minute 110).
        h.advance(seconds: 30 * 60)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "fixed")) == nil)
        #expect(h.query(.room(app: h.app, roomId: "busy")) != nil)
        h.advance(seconds: 19 * 60)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "busy")) == nil)
        #expect(h.received(alice).statuses.map(\.status) == [.destroyed(.auto)])
        // Keep-alive rooms are never destroyed automatically.
        h.advance(seconds: 7 * 24 * 3600)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "kept")) != nil)
        // Policy bounds: 60…10080 minutes.
        #expect(h.createRoom("x") { $0.destroyPolicy = .inactive(minutes: 59) }.error?.code == .invalidParameter)
        #expect(h.createRoom("y") { $0.destroyPolicy = .fixed(minutes: 10081) }.error?.code == .invalidParameter)
    }

    // RC-10
    @Test func attributesAreBroadcastAndAutoDeleteWithTheirOwner() {
        let h = Harness()
        h.createRoom("r1")
        let alice = h.connect("alice"), bob = h.connect("bob"), outsider = h.connect("zed")
        h.join(alice, "r1")
        h.join(bob, "r1")
        h.clearInboxes()
        let set = h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue("seat1", "alice"), KeyValue("topic", "hello")], owner: nil, autoDelete: true, .session(alice)))
        #expect(set.succeeded)
        #expect(h.received(bob).attributeChanges.first?.updated.map(\.key) == ["seat1", "topic"])
        #expect(h.received(alice).attributeChanges.count == 1)
        #expect(h.received(outsider).isEmpty)
        // Bob cannot overwrite alice's entry (he is not a manager).
        #expect(h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue("seat1", "bob")], owner: nil, autoDelete: false, .session(bob))).error?.code == .permissionDenied)
        h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue("stays", "v")], owner: "bob", autoDelete: false, .server))
        h.clearInboxes()
        h.leave(alice, "r1")
        #expect(h.received(bob).attributeChanges.map(\.removed) == [["seat1", "topic"]])
        guard case .attributes(let left)? = h.query(.attributes(app: h.app, roomId: "r1", keys: [])) else { return }
        #expect(left.map(\.key) == ["stays"])
        // Limits: key 128 chars of [A-Za-z0-9+=-_], value 4096 bytes.
        #expect(h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue(String(repeating: "k", count: 129), "v")], owner: nil, autoDelete: false, .server)).error?.code == .invalidParameter)
        #expect(h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue("bad key", "v")], owner: nil, autoDelete: false, .server)).error?.code == .invalidParameter)
        #expect(h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue("k", String(repeating: "v", count: 4097))], owner: nil, autoDelete: false, .server)).error?.code == .invalidParameter)
        #expect(h.run(.setAttributes(app: h.app, roomId: "r1", [KeyValue("k", String(repeating: "v", count: 4096))], owner: nil, autoDelete: false, .server)).succeeded)
        h.clearInboxes()
        h.run(.removeAttributes(app: h.app, roomId: "r1", ["k"], .server))
        #expect(h.received(bob).attributeChanges.map(\.removed) == [["k"]])
    }
}
