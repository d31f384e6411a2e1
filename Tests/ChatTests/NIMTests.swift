import Testing
@testable import Chat

@Suite("NetEase NIM chat rooms (SPEC §6)")
struct NIMTests {
    /// A room with a creator, a manager, a common member and a guest, all online.
    func staffedRoom(_ configure: (inout AppSettings) -> Void = { _ in }) -> (Harness, creator: SessionID, manager: SessionID, common: SessionID, guest: SessionID) {
        let h = Harness(configure)
        h.createRoom("r") { $0.creator = "c" }
        let c = h.connect("c"), m = h.connect("m"), co = h.connect("co"), g = h.connect("g")
        for s in [c, m, co, g] { h.join(s, "r") }
        h.run(.setRole(app: h.app, roomId: "r", target: "m", .setManager(true), .server, notifyExt: ""))
        h.run(.setRole(app: h.app, roomId: "r", target: "co", .setCommon(true), .server, notifyExt: ""))
        h.clearInboxes()
        return (h, c, m, co, g)
    }

    // NIM-1
    @Test func roomModelAndCloseFromTheServer() {
        let h = Harness()
        let out = h.createRoom("r") {
            $0.name = "Live"
            $0.announcement = "welcome"
            $0.creator = "c"
            $0.ext = String(repeating: "e", count: 4096)
            $0.broadcastUrl = "rtmp://x"
            $0.queueModificationLevel = .managers
        }
        guard case .success(.room(let info)) = out.reply else { Issue.record("no room"); return }
        #expect(info.name == "Live" && info.announcement == "welcome" && info.creator == "c" && info.broadcastUrl == "rtmp://x")
        #expect(info.queueModificationLevel == .managers && !info.muted && info.open && info.onlineUserCount == 0)
        #expect(h.createRoom("r2") { $0.ext = String(repeating: "e", count: 4097) }.error?.field == "ext")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "r")
        h.join(bob, "r")
        h.clearInboxes()
        h.run(.setRoomOpen(app: h.app, roomId: "r", false, .server, nim: NIMNotify(notifyExt: "bye")))
        for s in [alice, bob] {
            #expect(h.received(s).notifications.map(\.type) == [.closed])
            #expect(h.received(s).kicks == [KickedEvent(roomId: "r", reason: .roomClosed, ext: "bye", time: h.now)])
        }
        #expect(h.present("r").isEmpty)
        #expect(h.join(alice, "r").error?.code == .roomClosed)
        h.run(.setRoomOpen(app: h.app, roomId: "r", true, .server, nim: nil))
        #expect(h.join(alice, "r").succeeded)
    }

    // NIM-2
    @Test func enterProfileTravelsWithMessagesAndNotifications() {
        let h = Harness()
        h.createRoom("r")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(bob, "r")
        h.join(alice, "r", EnterProfile(nickname: "Ali", avatar: "ali.png", ext: "{\"level\":9}", notifyExt: "{\"hi\":1}"))
        let enter = h.received(bob).notifications.first { $0.type == .enter }
        #expect(enter?.notifyExt == "{\"hi\":1}")
        #expect(enter?.source?.nickname == "Ali")
        #expect(enter?.source?.ext == "{\"level\":9}")
        h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), .text, content: "hello"))
        let m = h.received(bob).messages.first
        #expect(m?.senderExt == "{\"level\":9}")
        #expect(m?.senderNickname == "Ali" && m?.senderAvatar == "ali.png")
        h.run(.mute(app: h.app, roomId: "r", ["bob"], .seconds(30), .session(alice), rc: nil, nim: NIMNotify()))
        // Alice is a guest, so she may not mute; NIM-12.
        #expect(h.lastOutcome.error?.code == .permissionDenied)
    }

    // NIM-2: at most 10 rooms at once (once the app allows several rooms per user, RC-4).
    @Test func roomsPerUserAreCapped() {
        let h = Harness { $0.multipleRoomsPerUser = true }
        let alice = h.connect("alice"), laptop = h.connect("alice", device: "laptop")
        for i in 0..<11 { h.createRoom("r\(i)") }
        for i in 0..<5 { #expect(h.join(alice, "r\(i)").succeeded) }
        for i in 5..<10 { #expect(h.join(laptop, "r\(i)").succeeded) }
        let refused = h.join(alice, "r10")
        #expect(refused.error?.code == .limitExceeded)
        #expect(!h.present("r10").contains("alice"))
    }

    // NIM-3
    @Test func anonymousMembersReceiveButCannotSend() {
        let h = Harness()
        h.createRoom("r")
        #expect(h.connectAnonymous(nickname: "", avatar: "a.png").1.error?.field == "anonymous.nickname")
        #expect(h.connectAnonymous(nickname: "Guest", avatar: "").1.error?.field == "anonymous.avatar")
        let (anon, out) = h.connectAnonymous(nickname: "Guest", avatar: "g.png")
        guard case .success(.session(let id)) = out.reply else { Issue.record("no session"); return }
        #expect(id.hasPrefix("anon-"))
        let bob = h.connect("bob")
        h.join(anon, "r")
        h.join(bob, "r")
        #expect(h.memberType("r", id) == .anonymous)
        #expect(h.info("r", id)?.nickname == "Guest")
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", .session(anon), .text, content: "hi")).error?.code == .anonymousReadOnly)
        h.run(.sendMessage(app: h.app, roomId: "r", .session(bob), .text, content: "hello"))
        #expect(h.received(anon).messages.map(\.content) == ["hello"])
        // Each anonymous connection gets its own generated id.
        let (other, _) = h.connectAnonymous()
        #expect(h.domain.userId(of: other) != id)
    }

    // NIM-3: "an anonymous member receives but cannot send" — nor change anything else: every
    // state-changing op from an anonymous session is refused with 40302 (field `session`) and
    // changes nothing, in a muted room as in an open one; joining, leaving and reading stay allowed.
    @Test("anonymous sessions change nothing", arguments: [false, true])
    func anonymousSessionsChangeNothing(roomMuted: Bool) {
        let h = Harness()
        h.createRoom("r") {
            $0.creator = "c"
            $0.muted = roomMuted
            $0.attributes = ["seat": "c"]
        }
        h.run(.queueOffer(app: h.app, roomId: "r", key: "mic", value: "c", transient: false, .server))
        let (anon, out) = h.connectAnonymous()
        guard case .success(.session(let anonId)) = out.reply else { Issue.record("no session"); return }
        let bob = h.connect("bob")
        #expect(h.join(anon, "r").succeeded)
        h.join(bob, "r")
        h.clearInboxes()
        let before = h.fingerprint("r")
        let a = Actor.session(anon)
        var update = RoomUpdate()
        update.name = "mine"
        let writes: [Command] = [
            .sendMessage(app: h.app, roomId: "r", .session(anon), .text, content: "hi"),
            .setAttributes(app: h.app, roomId: "r", [KeyValue(key: "mine", value: "v")], owner: nil, autoDelete: false, a),
            .setAttributes(app: h.app, roomId: "r", [KeyValue(key: "mine", value: "v")], owner: nil, autoDelete: true, a),
            .removeAttributes(app: h.app, roomId: "r", ["seat"], a),
            .queueOffer(app: h.app, roomId: "r", key: "k", value: "v", transient: false, a),
            .queueOffer(app: h.app, roomId: "r", key: "k", value: "v", transient: true, a),
            .queueBatchUpdate(app: h.app, roomId: "r", [KeyValue(key: "mic", value: "x")], a, notify: NIMNotify()),
            .queuePoll(app: h.app, roomId: "r", key: nil, a),
            .queuePoll(app: h.app, roomId: "r", key: "mic", a),
            .queueDrop(app: h.app, roomId: "r", a),
            .updateMyInfo(anon, roomId: "r", nickname: "New", avatar: nil, ext: nil, notifyExt: ""),
            .updateRoom(app: h.app, roomId: "r", update, a, nim: NIMNotify()),
            .setRoomOpen(app: h.app, roomId: "r", false, a, nim: nil),
            .setRoomMuted(app: h.app, roomId: "r", !roomMuted, a, rc: nil, nim: NIMNotify()),
            .block(app: h.app, roomId: "r", ["bob"], minutes: 5, a, rc: nil, nim: NIMNotify()),
            .unblock(app: h.app, roomId: "r", ["bob"], a, rc: nil, nim: NIMNotify()),
            .mute(app: h.app, roomId: "r", ["bob"], .seconds(30), a, rc: nil, nim: NIMNotify()),
            .unmute(app: h.app, roomId: "r", ["bob"], .all, a, rc: nil, nim: NIMNotify()),
            .setRole(app: h.app, roomId: "r", target: "bob", .setCommon(true), a, notifyExt: ""),
            .kick(app: h.app, roomId: "r", target: "bob", a, notifyExt: ""),
            .setConversationStatus(app: h.app, userId: anonId, ConversationKey(type: .group, targetId: "g"), pinned: true, level: nil, a),
            // Even where the room is missing or the anonymous member is not in it: the refusal comes first.
            .setAttributes(app: h.app, roomId: "elsewhere", [KeyValue(key: "k", value: "v")], owner: nil, autoDelete: false, a),
        ]
        for command in writes {
            let refused = h.run(command)
            #expect(refused.error?.code == .anonymousReadOnly, "\(command)")
            #expect(refused.error?.field == "session", "\(command)")
            #expect(refused.effects.isEmpty && refused.mutations.isEmpty && refused.webhooks.isEmpty, "\(command)")
            #expect(h.fingerprint("r") == before, "\(command)")
        }
        #expect(h.received(bob).isEmpty)
        #expect(h.info("r", anonId)?.nickname == "Anon")
        // Creating a room (ZIM createRoom, enterRoom of a missing room, switchRoom creating its
        // target) writes a room and its attributes: refused too, and nothing is created.
        var config = RoomConfig(roomId: "new")
        config.attributes = ["k": "v"]
        for mode: JoinMode in [.create(config), .enter(config)] {
            let refused = h.join(anon, "new", mode: mode)
            #expect(refused.error?.code == .anonymousReadOnly && refused.error?.field == "session")
            #expect(refused.mutations.isEmpty && refused.webhooks.isEmpty)
            #expect(h.received(anon).statuses.last?.status == .joinFailed(.anonymousReadOnly))
        }
        let switched = h.run(.switchRoom(anon, from: "r", to: config, createIfMissing: true, EnterProfile()))
        #expect(switched.error?.code == .anonymousReadOnly && switched.mutations.isEmpty)
        #expect(h.query(.room(app: h.app, roomId: "new")) == nil)
        #expect(h.present("r").contains(anonId))
        // Reading, entering an existing room (also through enterRoom), and leaving stay allowed.
        #expect(h.domain.query(.roomAsMember(anon, roomId: "r"), now: h.now).error == nil)
        #expect(h.query(.attributes(app: h.app, roomId: "r", keys: [])) != nil)
        #expect(h.leave(anon, "r").succeeded)
        h.createRoom("other")
        #expect(h.join(anon, "other", mode: .enter(RoomConfig(roomId: "other"))).succeeded)
        #expect(h.leave(anon, "other").succeeded)
        // The app server still writes to the room, and the anonymous member receives it.
        #expect(h.join(anon, "r").succeeded)
        h.run(.sendMessage(app: h.app, roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "server"))
        #expect(h.received(anon).messages.map(\.content) == ["server"])
    }

    // NIM-4
    @Test func singleDevicePolicyKicksTheOldDeviceWithReason3() {
        let h = Harness()
        h.createRoom("single") { $0.multiDevice = .single }
        h.createRoom("multi") { $0.multiDevice = .multiple }
        let phone = h.connect("alice", device: "phone"), laptop = h.connect("alice", device: "laptop"), bob = h.connect("bob")
        h.join(bob, "single")
        h.join(phone, "single")
        h.clearInboxes()
        h.join(laptop, "single")
        #expect(h.received(phone).kicks.map(\.reason) == [.conflictingLogin])
        #expect(h.received(laptop).kicks.isEmpty)
        // The user never left, so the room is not told about a departure.
        #expect(h.received(bob).memberChanges.isEmpty)
        #expect(h.present("single") == ["bob", "alice"])
        #expect(h.roomIndex[h.key("single")]?.contains(phone) == false)
        h.join(phone, "multi")
        h.join(laptop, "multi")
        #expect(Set(h.roomIndex[h.key("multi")] ?? []) == [phone, laptop])
    }

    // NIM-5: connection states follow the statuses (entering 0, entered 1, enterFailed 2).
    @Test func connectionStatesOfEntry() {
        let h = Harness()
        h.createRoom("r")
        let alice = h.connect("alice")
        h.join(alice, "r")
        #expect(h.received(alice).statuses.map(\.status.nimState) == [0, 1])
        h.run(.block(app: h.app, roomId: "r", ["alice"], minutes: 10, .server, rc: nil, nim: nil))
        h.clearInboxes()
        // A refused re-entry (after a reconnect) reports enterFailed with the reason.
        h.join(alice, "r")
        #expect(h.received(alice).statuses.map(\.status.nimState) == [0, 2])
        #expect(h.received(alice).statuses.last?.status == .joinFailed(.blocked))
    }

    // NIM-5, RC-1: a refused re-entry that must not be retried automatically (autoLoginFailed):
    // blocked, room closed (13002) and room missing; other failures may be retried.
    @Test func refusedReentryOfAClosedRoomIsNotRetried() {
        let h = Harness()
        h.createRoom("r")
        let alice = h.connect("alice")
        h.join(alice, "r")
        h.run(.setRoomOpen(app: h.app, roomId: "r", false, .server, nim: nil))
        h.clearInboxes()
        let closed = h.join(alice, "r")
        #expect(closed.error?.code == .roomClosed && closed.error?.code.rawValue == 13002)
        #expect(h.received(alice).statuses.map(\.status) == [.joining, .joinFailed(.roomClosed)])
        #expect(h.received(alice).statuses.last?.status.nimState == 2)
        #expect(ErrorCode.roomClosed.allowsAutoRejoin == false)
        #expect(ErrorCode.blocked.allowsAutoRejoin == false)
        #expect(ErrorCode.roomNotFound.allowsAutoRejoin == false)
        let noStop = ErrorCode.allCases.filter { !$0.allowsAutoRejoin }
        #expect(Set(noStop) == [.blocked, .roomClosed, .roomNotFound])
    }

    // NIM-6
    @Test func kickReasons() {
        var (h, creator, manager, common, guest) = staffedRoom()
        h.run(.kick(app: h.app, roomId: "r", target: "g", .session(manager), notifyExt: "{\"why\":\"spam\"}"))
        #expect(h.received(guest).kicks == [KickedEvent(roomId: "r", reason: .byManager, ext: "{\"why\":\"spam\"}", time: h.now)])
        #expect(h.received(common).notifications.map(\.type) == [.kicked])
        #expect(h.received(guest).notifications.isEmpty)
        #expect(!h.present("r").contains("g"))
        h.clearInboxes()
        h.run(.block(app: h.app, roomId: "r", ["co"], minutes: nil, .session(creator), rc: nil, nim: NIMNotify(notifyExt: "x")))
        #expect(h.received(common).kicks.map(\.reason) == [.blocklisted])
        (h, _, _, _, guest) = staffedRoom()
        h.run(.setRoomOpen(app: h.app, roomId: "r", false, .server, nim: nil))
        #expect(h.received(guest).kicks.map(\.reason) == [.roomClosed])
    }

    // NIM-7
    @Test func exitRoom() {
        let h = Harness()
        h.createRoom("r")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "r")
        h.join(bob, "r")
        h.clearInboxes()
        #expect(h.leave(alice, "r").succeeded)
        #expect(h.received(bob).notifications.map(\.type) == [.exit])
        #expect(h.present("r") == ["bob"])
    }

    // NIM-8
    @Test func messagesHistoryAndRetention() {
        let h = Harness()
        h.createRoom("r")
        h.createRoom("other")
        let alice = h.connect("alice"), aliceLaptop = h.connect("alice", device: "laptop"), bob = h.connect("bob"), dave = h.connect("dave")
        h.join(alice, "r")
        h.join(aliceLaptop, "r")
        h.join(bob, "r")
        h.join(dave, "other")
        h.clearInboxes()
        var times: [Int64] = []
        for i in 0..<5 {
            h.advance(seconds: 10)
            times.append(h.now)
            h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), i % 2 == 0 ? .text : .custom, content: "m\(i)"))
        }
        // Everyone in the room but the sending connection (the sender's other device included).
        #expect(h.received(bob).messages.map(\.content) == ["m0", "m1", "m2", "m3", "m4"])
        #expect(h.received(aliceLaptop).messages.count == 5)
        #expect(h.received(alice).messages.isEmpty)
        #expect(h.received(dave).isEmpty)
        guard case .messages(let newest)? = h.query(.history(app: h.app, roomId: "r", start: 0, limit: 2, .descending, kinds: [])) else { return }
        #expect(newest.map(\.content) == ["m4", "m3"])
        guard case .messages(let after)? = h.query(.history(app: h.app, roomId: "r", start: times[1], limit: 100, .ascending, kinds: [.text])) else { return }
        #expect(after.map(\.content) == ["m2", "m4"])
        #expect(h.domain.query(.history(app: h.app, roomId: "r", start: 0, limit: 101, .descending, kinds: []), now: h.now).error?.field == "limit")
        #expect(h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), .text, content: String(repeating: "x", count: 16 * 1024 + 1))).error?.field == "content")
        // Retention is inclusive: exactly ten days old is kept, one second more is gone.
        h.advance(seconds: 10 * 24 * 3600)
        guard case .messages(let boundary)? = h.query(.history(app: h.app, roomId: "r", start: 0, limit: 100, .descending, kinds: [])) else { return }
        #expect(boundary.map(\.content) == ["m4"])
        h.advance(seconds: 1)
        guard case .messages(let old)? = h.query(.history(app: h.app, roomId: "r", start: 0, limit: 100, .descending, kinds: [])) else { return }
        #expect(old.isEmpty)
        #expect(h.tick().mutations.contains { if case .pruneMessages = $0 { return true } else { return false } })
    }

    // NIM-9
    @Test func enterExitNotificationsSwitchPerAppAndPerRoom() {
        let h = Harness { $0.enterExitNotifications = false }
        h.createRoom("r")
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(bob, "r")
        h.join(alice, "r")
        h.leave(alice, "r")
        #expect(h.received(bob).notifications.isEmpty)

        let h2 = Harness()
        h2.createRoom("quiet") { $0.enterExitNotifications = false }
        h2.createRoom("loud")
        let a = h2.connect("alice"), b = h2.connect("bob")
        h2.join(b, "quiet")
        h2.join(b, "loud")
        h2.join(a, "quiet")
        h2.join(a, "loud")
        #expect(h2.received(b).notifications.map { [$0.roomId] } == [["loud"]])
    }

    // NIM-9: every notification type carries source, targets, notifyExt and ext.
    @Test func notificationTypesAndTheirFields() {
        let (h, creator, manager, common, guest) = staffedRoom()
        let ext = NIMNotify(notifyExt: "{\"n\":1}")
        h.run(.mute(app: h.app, roomId: "r", ["g"], .seconds(90), .session(manager), rc: nil, nim: ext))
        let temp = h.received(common).notifications.last
        #expect(temp?.type == .tempMuteAdd)
        #expect(temp?.source?.userId == "m")
        #expect(temp?.targets.map(\.userId) == ["g"])
        #expect(temp?.notifyExt == "{\"n\":1}")
        #expect(temp?.ext == .tempMute(durationSeconds: 90))
        h.run(.unmute(app: h.app, roomId: "r", ["g"], .temporary, .session(manager), rc: nil, nim: ext))
        h.run(.mute(app: h.app, roomId: "r", ["g"], .permanent, .session(manager), rc: nil, nim: ext))
        h.run(.unmute(app: h.app, roomId: "r", ["g"], .permanent, .session(manager), rc: nil, nim: ext))
        h.run(.block(app: h.app, roomId: "r", ["g"], minutes: nil, .session(creator), rc: nil, nim: ext))
        h.run(.unblock(app: h.app, roomId: "r", ["g"], .session(creator), rc: nil, nim: ext))
        h.run(.setRoomMuted(app: h.app, roomId: "r", true, .session(manager), rc: nil, nim: ext))
        h.run(.setRoomMuted(app: h.app, roomId: "r", false, .session(manager), rc: nil, nim: ext))
        h.run(.updateRoom(app: h.app, roomId: "r", { var u = RoomUpdate(); u.announcement = "new"; return u }(), .session(creator), nim: ext))
        h.run(.setRole(app: h.app, roomId: "r", target: "co", .setCommon(false), .session(manager), notifyExt: "x"))
        h.run(.setRole(app: h.app, roomId: "r", target: "m", .setManager(false), .session(creator), notifyExt: "x"))
        let types = h.received(common).notifications.map(\.type.rawValue)
        #expect(types == [314, 315, 305, 306, 303, 304, 318, 319, 312, 310, 308])
        // The guest, blocked at 303, was removed and heard nothing after.
        #expect(!h.received(guest).notifications.map(\.type).contains(.blocklistRemove))
    }

    // NIM-10
    @Test func roomInfoForMembersAndUpdateWithNotification() {
        let h = Harness()
        h.createRoom("r") { $0.creator = "c" }
        let c = h.connect("c"), outsider = h.connect("zed")
        h.join(c, "r")
        #expect(h.domain.query(.roomAsMember(outsider, roomId: "r"), now: h.now).error?.code == .notInRoom)
        guard case .success(.room(let info)) = h.domain.query(.roomAsMember(c, roomId: "r"), now: h.now) else { Issue.record("no info"); return }
        #expect(info.creator == "c")
        var u = RoomUpdate()
        u.name = "Renamed"
        h.clearInboxes()
        h.run(.updateRoom(app: h.app, roomId: "r", u, .server, nim: nil))
        #expect(h.received(c).notifications.isEmpty)
        h.run(.updateRoom(app: h.app, roomId: "r", u, .server, nim: NIMNotify(notifyExt: "upd")))
        #expect(h.received(c).notifications.map(\.notifyExt) == ["upd"])
        #expect(h.received(c).notifications.first?.type == .infoUpdated)
    }

    // NIM-11
    @Test func memberModel() {
        let (h, _, _, _, _) = staffedRoom()
        h.run(.mute(app: h.app, roomId: "r", ["g"], .seconds(120), .server, rc: nil, nim: nil))
        h.advance(seconds: 30)
        let g = h.info("r", "g")!
        #expect(g.type == .guest && g.isTempMuted && !g.isMuted && !g.isBlocklisted && g.isOnline)
        #expect(g.tempMuteRemainingSeconds == 90)
        #expect(g.enterTime > 0)
        #expect(h.info("r", "c")?.type == .creator)
        #expect(h.info("r", "m")?.type == .manager)
        #expect(h.info("r", "co")?.type == .common)
    }

    // NIM-12
    @Test func roleMatrix() {
        let (h, creator, manager, common, guest) = staffedRoom()
        // Only the creator sets or removes managers.
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "g", .setManager(true), .session(manager), notifyExt: "")).error?.code == .permissionDenied)
        // Managers cannot act on the creator or on other managers.
        h.run(.setRole(app: h.app, roomId: "r", target: "co", .setManager(true), .session(creator), notifyExt: ""))
        #expect(h.run(.kick(app: h.app, roomId: "r", target: "co", .session(manager), notifyExt: "")).error?.code == .permissionDenied)
        #expect(h.run(.mute(app: h.app, roomId: "r", ["c"], .seconds(10), .session(manager), rc: nil, nim: nil)).error?.code == .permissionDenied)
        // A removed manager becomes common; a removed common member becomes a guest.
        h.run(.setRole(app: h.app, roomId: "r", target: "co", .setManager(false), .session(creator), notifyExt: ""))
        #expect(h.memberType("r", "co") == .common)
        h.run(.setRole(app: h.app, roomId: "r", target: "co", .setCommon(false), .session(manager), notifyExt: ""))
        #expect(h.memberType("r", "co") == .guest)
        // Blocklisting makes a fixed (limited) member, disconnects and bars entry.
        h.run(.block(app: h.app, roomId: "r", ["g"], minutes: nil, .session(manager), rc: nil, nim: nil))
        #expect(h.memberType("r", "g") == .limited)
        #expect(h.info("r", "g")?.isOnline == false)
        #expect(h.join(guest, "r").error?.code == .blocked)
        // Unblocking makes a guest — who is a member only while online, so the record goes.
        h.run(.unblock(app: h.app, roomId: "r", ["g"], .session(manager), rc: nil, nim: nil))
        #expect(h.memberType("r", "g") == nil)
        h.join(guest, "r")
        #expect(h.memberType("r", "g") == .guest)
        // Permanent mute makes a fixed member, unmute a guest, and a temp mute is untouched.
        h.run(.mute(app: h.app, roomId: "r", ["g"], .seconds(600), .session(manager), rc: nil, nim: nil))
        #expect(h.memberType("r", "g") == .guest) // a temp mute never changes identity
        h.run(.mute(app: h.app, roomId: "r", ["g"], .permanent, .session(manager), rc: nil, nim: nil))
        #expect(h.memberType("r", "g") == .limited)
        h.run(.unmute(app: h.app, roomId: "r", ["g"], .permanent, .session(manager), rc: nil, nim: nil))
        #expect(h.memberType("r", "g") == .guest)
        #expect(h.info("r", "g")?.isTempMuted == true)
        // A new temp mute replaces the old one (no accumulation).
        h.run(.mute(app: h.app, roomId: "r", ["g"], .seconds(60), .session(manager), rc: nil, nim: nil))
        #expect(h.info("r", "g")?.tempMuteRemainingSeconds == 60)
        // A guest who leaves is no member at all.
        h.leave(guest, "r")
        #expect(h.memberType("r", "g") == nil)
        _ = common
    }

    // NIM-12: 1000 fixed members at most.
    @Test func fixedMembersAreCappedAt1000() {
        let h = Harness()
        h.createRoom("r") { $0.creator = "c" }
        for i in 0..<999 {
            h.run(.setRole(app: h.app, roomId: "r", target: "u\(i)", .setCommon(true), .server, notifyExt: ""))
        }
        guard case .members(_, let total)? = h.query(.members(app: h.app, roomId: "r", .regular, .ascending, limit: 1, after: nil)) else { return }
        #expect(total == 1000)
        #expect(h.run(.setRole(app: h.app, roomId: "r", target: "one-more", .setCommon(true), .server, notifyExt: "")).error?.code == .limitExceeded)
        #expect(h.run(.mute(app: h.app, roomId: "r", ["one-more"], .permanent, .server, rc: nil, nim: nil)).error?.code == .limitExceeded)
        // Temporary mutes do not make fixed members, so they still work.
        #expect(h.run(.mute(app: h.app, roomId: "r", ["one-more"], .seconds(5), .server, rc: nil, nim: nil)).succeeded)
    }

    // NIM-12: role names from the API; unknown roles are refused whole.
    @Test func assignRoleByName() throws {
        let (h, creator, _, _, _) = staffedRoom()
        #expect(throws: ChatError.self) { try RoleTarget.parse("owner") }
        h.run(.setRole(app: h.app, roomId: "r", target: "g", .assign(try RoleTarget.parse("common")), .session(creator), notifyExt: ""))
        #expect(h.memberType("r", "g") == .common)
        h.run(.setRole(app: h.app, roomId: "r", target: "m", .assign(.common), .session(creator), notifyExt: ""))
        #expect(h.memberType("r", "m") == .common)
        h.run(.setRole(app: h.app, roomId: "r", target: "g", .assign(.guest), .session(creator), notifyExt: ""))
        #expect(h.memberType("r", "g") == .guest)
    }

    // NIM-13
    @Test func memberQueriesByTypeWithAnchor() {
        let (h, _, _, _, _) = staffedRoom()
        for u in ["x", "y", "z"] {
            h.advance(seconds: 1)
            h.join(h.connect(u), "r")
        }
        func ids(_ f: MemberFilter, _ order: SortOrder = .ascending, limit: Int = 500, after: String? = nil) -> [String] {
            guard case .members(let list, _)? = h.query(.members(app: h.app, roomId: "r", f, order, limit: limit, after: after)) else { return [] }
            return list.map(\.userId)
        }
        #expect(ids(.regular) == ["c", "m", "co"])
        #expect(ids(.temporary) == ["g", "x", "y", "z"])
        #expect(ids(.temporaryNewestFirst, limit: 2) == ["z", "y"])
        #expect(ids(.temporaryNewestFirst, limit: 2, after: "y") == ["x", "g"])
        h.leave(h.roomIndex[h.key("r")]!.first { h.connected[$0] == "co" }!, "r")
        #expect(ids(.regularOnline) == ["c", "m"])
        #expect(ids(.regular) == ["c", "m", "co"])
        guard case .members(let some, _)? = h.query(.membersByIds(app: h.app, roomId: "r", ["c", "nobody", "x"])) else { return }
        #expect(some.map(\.userId) == ["c", "x"])
        #expect(h.domain.query(.membersByIds(app: h.app, roomId: "r", (0...20).map { "u\($0)" }), now: h.now).error?.field == "userIds")
    }

    // NIM-14
    @Test func memberUpdatesOwnInfo() {
        let (h, _, _, common, guest) = staffedRoom()
        h.run(.updateMyInfo(guest, roomId: "r", nickname: "Gee", avatar: nil, ext: "{\"v\":2}", notifyExt: "me"))
        let n = h.received(common).notifications.last
        #expect(n?.type == .memberInfoUpdated)
        #expect(n?.source?.nickname == "Gee" && n?.source?.ext == "{\"v\":2}" && n?.notifyExt == "me")
        #expect(h.info("r", "g")?.nickname == "Gee")
        #expect(h.run(.updateMyInfo(guest, roomId: "r", nickname: nil, avatar: nil, ext: String(repeating: "e", count: 4097), notifyExt: "")).error?.field == "ext")
    }

    // NIM-15
    @Test func managersActFromTheClient() {
        let (h, _, manager, common, guest) = staffedRoom()
        #expect(h.run(.mute(app: h.app, roomId: "r", ["g"], .seconds(30), .session(manager), rc: nil, nim: NIMNotify())).succeeded)
        #expect(h.run(.kick(app: h.app, roomId: "r", target: "co", .session(manager), notifyExt: "bye")).succeeded)
        #expect(h.received(common).kicks.map(\.ext) == ["bye"])
        // A guest cannot manage anyone.
        #expect(h.run(.kick(app: h.app, roomId: "r", target: "m", .session(guest), notifyExt: "")).error?.code == .permissionDenied)
        #expect(h.run(.block(app: h.app, roomId: "r", ["m"], minutes: nil, .session(guest), rc: nil, nim: nil)).error?.code == .permissionDenied)
    }

    // NIM-16
    @Test func queueRules() {
        let (h, creator, manager, common, guest) = staffedRoom()
        #expect(h.run(.queueOffer(app: h.app, roomId: "r", key: "mic1", value: "g", transient: true, .session(guest))).succeeded)
        let offer = h.received(common).notifications.last
        #expect(offer?.type == .queueChange && offer?.ext == .queue(.offer, key: "mic1", value: "g"))
        h.run(.queueOffer(app: h.app, roomId: "r", key: "mic2", value: "co", transient: false, .session(common)))
        h.run(.queueOffer(app: h.app, roomId: "r", key: "mic3", value: "g2", transient: true, .session(guest)))
        // Updating an element makes the writer its owner (the last writer).
        h.run(.queueOffer(app: h.app, roomId: "r", key: "mic3", value: "taken", transient: true, .session(common)))
        #expect(h.received(common).notifications.last?.ext == .queue(.update, key: "mic3", value: "taken"))
        guard case .queue(let list)? = h.query(.queue(app: h.app, roomId: "r")) else { return }
        #expect(list.map(\.key) == ["mic1", "mic2", "mic3"])
        // When the guest leaves, only the transient elements it still owns go, in one 320.
        h.clearInboxes()
        h.leave(guest, "r")
        let clear = h.received(common).notifications.filter { $0.type == .queueBatchChange }
        #expect(clear.count == 1)
        #expect(clear.first?.ext == .queueBatch(.partialClear, elements: [(key: "mic1", value: "g")]))
        guard case .queue(let after)? = h.query(.queue(app: h.app, roomId: "r")) else { return }
        #expect(after.map(\.key) == ["mic2", "mic3"])
        // Batch update: at most 100, returns keys that did not exist.
        let batch = h.run(.queueBatchUpdate(app: h.app, roomId: "r", [KeyValue("mic2", "x"), KeyValue("ghost", "y")], .session(manager), notify: NIMNotify(notifyExt: "b")))
        #expect(try! batch.reply.get() == .missingKeys(["ghost"]))
        #expect(h.received(common).notifications.last?.ext == .queueBatch(.batchUpdate, elements: [(key: "mic2", value: "x")]))
        #expect(h.run(.queueBatchUpdate(app: h.app, roomId: "r", (0...100).map { KeyValue("k\($0)", "v") }, .server, notify: nil)).error?.field == "elements")
        #expect(h.run(.queueBatchUpdate(app: h.app, roomId: "r", [KeyValue("mic2", "x")], .server, notify: NIMNotify(notifyExt: String(repeating: "n", count: 2049)))).error?.field == "notifyExt")
        // Poll by key and from the head; drop all.
        #expect(try! h.run(.queuePoll(app: h.app, roomId: "r", key: "mic3", .session(common))).reply.get() == .queueElement(key: "mic3", value: "taken"))
        #expect(try! h.run(.queuePoll(app: h.app, roomId: "r", key: nil, .session(common))).reply.get() == .queueElement(key: "mic2", value: "x"))
        #expect(h.run(.queuePoll(app: h.app, roomId: "r", key: nil, .session(common))).error?.code == .notFound)
        h.run(.queueOffer(app: h.app, roomId: "r", key: "a", value: "1", transient: false, .session(common)))
        h.run(.queueDrop(app: h.app, roomId: "r", .session(common)))
        #expect(h.received(common).notifications.last?.ext == .queue(.drop, key: "", value: ""))
        // Limits: key 32 bytes (128 in a batch), value 4096 bytes.
        #expect(h.run(.queueOffer(app: h.app, roomId: "r", key: String(repeating: "k", count: 33), value: "v", transient: false, .server)).error?.field == "key")
        #expect(h.run(.queueOffer(app: h.app, roomId: "r", key: "k", value: String(repeating: "v", count: 4097), transient: false, .server)).error?.field == "value")
        // Modification level 1: only the creator and managers.
        var u = RoomUpdate()
        u.queueModificationLevel = .managers
        h.run(.updateRoom(app: h.app, roomId: "r", u, .session(creator), nim: nil))
        #expect(h.run(.queueOffer(app: h.app, roomId: "r", key: "k", value: "v", transient: false, .session(common))).error?.code == .permissionDenied)
        #expect(h.run(.queueOffer(app: h.app, roomId: "r", key: "k", value: "v", transient: false, .session(manager))).succeeded)
    }

    // NIM-16: a transient element also goes when its owner's connection drops.
    @Test func transientElementsGoWhenTheOwnerDrops() {
        let (h, _, _, common, guest) = staffedRoom()
        h.run(.queueOffer(app: h.app, roomId: "r", key: "seat", value: "g", transient: true, .session(guest)))
        h.clearInboxes()
        h.disconnect(guest)
        #expect(h.received(common).notifications.filter { $0.type == .queueBatchChange }.count == 1)
        guard case .queue(let list)? = h.query(.queue(app: h.app, roomId: "r")) else { return }
        #expect(list.isEmpty)
    }

    // NIM-17
    @Test func roomWideMuteLetsOnlyStaffSpeak() {
        let (h, creator, manager, common, guest) = staffedRoom()
        h.run(.setRoomMuted(app: h.app, roomId: "r", true, .session(manager), rc: nil, nim: NIMNotify()))
        #expect(h.received(guest).notifications.map(\.type) == [.roomMuted])
        func send(_ s: SessionID) -> Bool { h.run(.sendMessage(app: h.app, roomId: "r", .session(s), .text, content: "x")).succeeded }
        #expect(send(creator) && send(manager))
        #expect(!send(common) && !send(guest))
        #expect(h.run(.setRoomMuted(app: h.app, roomId: "r", false, .session(common), rc: nil, nim: nil)).error?.code == .permissionDenied)
        h.run(.setRoomMuted(app: h.app, roomId: "r", false, .session(creator), rc: nil, nim: NIMNotify()))
        #expect(h.received(guest).notifications.map(\.type) == [.roomMuted, .roomUnmuted])
        #expect(send(guest))
    }
}

