import Testing
@testable import Chat

@Suite("ZEGOCLOUD ZIM rooms (SPEC §7)")
struct ZIMTests {
    func config(_ id: String, _ configure: (inout RoomConfig) -> Void = { _ in }) -> RoomConfig {
        var c = RoomConfig(roomId: id)
        c.destroyPolicy = .whenEmpty(seconds: 0)
        configure(&c)
        return c
    }

    // ZIM-1
    @Test func createRoomFailsIfItExistsAndTheCreatorIsIn() {
        let h = Harness()
        let alice = h.connect("alice"), bob = h.connect("bob")
        let created = h.join(alice, "z1", mode: .create(config("z1") { $0.name = "Z" }))
        #expect(created.succeeded)
        #expect(h.present("z1") == ["alice"])
        #expect(h.info("z1", "alice")?.type == .creator)
        let again = h.join(bob, "z1", mode: .create(config("z1")))
        #expect(again.error?.code == .roomExists)
        #expect(h.present("z1") == ["alice"])
    }

    // ZIM-2
    @Test func joinRoomFailsIfMissing() {
        let h = Harness()
        let alice = h.connect("alice")
        #expect(h.join(alice, "nope").error?.code == .roomNotFound)
        #expect(h.received(alice).statuses.last?.zimEvent == .roomNotExist)
        #expect(h.query(.room(app: h.app, roomId: "nope")) == nil)
    }

    // ZIM-3
    @Test func enterRoomCreatesWithAdvancedConfig() {
        let h = Harness()
        let alice = h.connect("alice"), bob = h.connect("bob")
        let c = config("z") {
            $0.attributes = ["k1": "v1"]
            $0.destroyPolicy = .whenEmpty(seconds: 90)
        }
        #expect(h.join(alice, "z", mode: .enter(c)).succeeded)
        #expect(h.join(bob, "z", mode: .enter(c)).succeeded)
        #expect(h.present("z") == ["alice", "bob"])
        guard case .attributes(let attrs)? = h.query(.attributes(app: h.app, roomId: "z", keys: [])) else { return }
        #expect(attrs.map(\.key) == ["k1"])
        guard case .room(let info)? = h.query(.room(app: h.app, roomId: "z")) else { return }
        #expect(info.destroyPolicy == .whenEmpty(seconds: 90))
    }

    // ZIM-4
    @Test func membersJoinedAndLeftGoToTheOthersWithLists() {
        let h = Harness()
        h.createRoom("z") { $0.destroyPolicy = .whenEmpty(seconds: 60) }
        let alice = h.connect("alice"), bob = h.connect("bob"), outsider = h.connect("zed")
        h.join(alice, "z")
        h.clearInboxes()
        h.join(bob, "z", EnterProfile(nickname: "Bobby"))
        #expect(h.received(alice).memberChanges.map { $0.changes.map(\.userId) } == [["bob"]])
        #expect(h.received(alice).memberChanges.first?.changes.first?.nickname == "Bobby")
        #expect(h.received(bob).memberChanges.isEmpty)
        h.leave(bob, "z")
        #expect(h.received(alice).memberChanges.map { $0.changes.map(\.action) } == [[.join], [.quit]])
        #expect(h.received(outsider).isEmpty)
    }

    // ZIM-5: success, exactly as the seed's table.
    @Test func switchRoomSucceedsWithTheSeedsSequence() {
        let h = Harness()
        h.createRoom("room1") { $0.destroyPolicy = .whenEmpty(seconds: 60) }
        h.createRoom("room2") { $0.destroyPolicy = .whenEmpty(seconds: 60) }
        let alice = h.connect("alice"), r1 = h.connect("r1member"), r2 = h.connect("r2member")
        h.join(alice, "room1")
        h.join(r1, "room1")
        h.join(r2, "room2")
        h.clearInboxes()
        let out = h.run(.switchRoom(alice, from: "room1", to: RoomConfig(roomId: "room2"), createIfMissing: false, EnterProfile()))
        #expect(out.succeeded)
        let seq = h.received(alice).statuses.map { "\($0.roomId):\($0.zimState):\($0.zimEvent)" }
        #expect(seq == ["room2:connecting:activeSwitch", "room2:connected:success", "room1:disconnected:success"])
        #expect(h.received(r2).memberChanges.map { $0.changes.map(\.action) } == [[.join]])
        #expect(h.received(r1).memberChanges.map { $0.changes.map(\.action) } == [[.quit]])
        #expect(h.present("room1") == ["r1member"])
        #expect(h.present("room2") == ["r2member", "alice"])
    }

    // ZIM-5: failure when the target is missing and creation is off.
    @Test func switchRoomFailsWithoutCreation() {
        let h = Harness()
        h.createRoom("room1")
        let alice = h.connect("alice"), r1 = h.connect("r1member")
        h.join(alice, "room1")
        h.join(r1, "room1")
        h.clearInboxes()
        let out = h.run(.switchRoom(alice, from: "room1", to: RoomConfig(roomId: "room2"), createIfMissing: false, EnterProfile()))
        #expect(out.error?.code == .roomNotFound)
        let seq = h.received(alice).statuses.map { "\($0.roomId):\($0.zimState):\($0.zimEvent)" }
        #expect(seq == ["room2:connecting:activeSwitch", "room2:disconnected:switchFailed"])
        // Nothing else happened: still in room 1, room 2 not created, room 1 told nothing.
        #expect(h.present("room1") == ["alice", "r1member"])
        #expect(h.query(.room(app: h.app, roomId: "room2")) == nil)
        #expect(h.received(r1).isEmpty)
    }

    // ZIM-5: creation when missing, and refusal at the server's room limit.
    @Test func switchRoomCreatesOrHitsTheRoomLimit() {
        let h = Harness { $0.maxRooms = 2 }
        h.createRoom("room1") { $0.destroyPolicy = .whenEmpty(seconds: 60) }
        let alice = h.connect("alice")
        h.join(alice, "room1")
        let created = h.run(.switchRoom(alice, from: "room1", to: config("room2") { $0.name = "Two" }, createIfMissing: true, EnterProfile()))
        #expect(created.succeeded)
        guard case .room(let info)? = h.query(.room(app: h.app, roomId: "room2")) else { Issue.record("not created"); return }
        #expect(info.name == "Two")
        h.clearInboxes()
        let limited = h.run(.switchRoom(alice, from: "room2", to: config("room3"), createIfMissing: true, EnterProfile()))
        #expect(limited.error?.code == .roomLimitReached)
        #expect(h.received(alice).statuses.last?.zimEvent == .switchFailed)
        #expect(h.present("room2") == ["alice"])
    }

    // ZIM-6
    @Test func leaveAllRoomsTouchesOnlyThisDevice() {
        let h = Harness { $0.multipleRoomsPerUser = true } // RC-4: several rooms need the app setting
        for id in ["a", "b", "c"] { h.createRoom(id) }
        let phone = h.connect("alice", device: "phone"), laptop = h.connect("alice", device: "laptop")
        h.join(phone, "a")
        h.join(phone, "b")
        h.join(laptop, "c")
        h.clearInboxes()
        let out = h.run(.leaveAll(phone))
        #expect(try! out.reply.get() == .roomIds(["a", "b"]))
        // One state change per room, all Disconnected/Success.
        #expect(h.received(phone).statuses.map { "\($0.roomId):\($0.zimState):\($0.zimEvent)" } == ["a:disconnected:success", "b:disconnected:success"])
        #expect(h.present("c") == ["alice"])
        #expect(h.received(laptop).statuses.isEmpty)
    }

    // ZIM-7
    @Test func emptyRoomIsDestroyedAfterItsDelay() {
        let h = Harness()
        let alice = h.connect("alice"), bob = h.connect("bob")
        h.join(alice, "delayed", mode: .create(config("delayed") { $0.destroyPolicy = .whenEmpty(seconds: 90) }))
        h.join(alice, "instant", mode: .create(config("instant")))
        h.leave(alice, "instant")
        #expect(h.query(.room(app: h.app, roomId: "instant")) == nil)
        h.leave(alice, "delayed")
        h.advance(seconds: 60)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "delayed")) != nil)
        // Someone entering cancels the countdown; it restarts when the room empties again.
        h.join(bob, "delayed")
        h.advance(seconds: 60)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "delayed")) != nil)
        h.leave(bob, "delayed")
        h.advance(seconds: 89)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "delayed")) != nil)
        h.advance(seconds: 1)
        h.tick()
        #expect(h.query(.room(app: h.app, roomId: "delayed")) == nil)
        // The delay is 0…10800 seconds.
        #expect(h.join(alice, "x", mode: .create(config("x") { $0.destroyPolicy = .whenEmpty(seconds: 10801) })).error?.code == .invalidParameter)
    }

    // ZIM-8
    @Test func attributesAtCreationAndUpdatesAreBroadcast() {
        let h = Harness()
        let alice = h.connect("alice"), bob = h.connect("bob")
        let tooMany = config("z") { c in for i in 0..<21 { c.attributes["k\(i)"] = "v" } }
        #expect(h.join(alice, "z", mode: .create(tooMany)).error?.field == "attributes")
        h.join(alice, "z", mode: .create(config("z") { $0.attributes = ["mode": "quiz"] }))
        h.join(bob, "z")
        h.clearInboxes()
        h.run(.setAttributes(app: h.app, roomId: "z", [KeyValue("mode", "vote")], owner: nil, autoDelete: false, .session(alice)))
        #expect(h.received(bob).attributeChanges.first?.updated == [AttributesEvent.Entry(key: "mode", value: "vote", owner: "alice", autoDelete: false, updatedAt: h.now)])
        #expect(h.received(alice).attributeChanges.count == 1)
    }
}

@Suite("Bad input is refused whole")
struct BadInputTests {
    @Test func refusalsNameTheirFieldAndChangeNothing() {
        let h = Harness()
        h.createRoom("r") { $0.creator = "c" }
        let c = h.connect("c")
        h.join(c, "r")
        h.run(.queueOffer(app: h.app, roomId: "r", key: "k", value: "v", transient: false, .server))
        let before = h.fingerprint("r")
        var update = RoomUpdate()
        update.ext = String(repeating: "e", count: 4097)
        let cases: [(Command, String)] = [
            (.block(app: h.app, roomId: "r", (1...21).map { "u\($0)" }, minutes: 1, .server, rc: nil, nim: nil), "userIds"),
            (.mute(app: h.app, roomId: "r", ["u"], .minutes(43201), .server, rc: nil, nim: nil), "minutes"),
            (.queueOffer(app: h.app, roomId: "r", key: "k2", value: String(repeating: "v", count: 4097), transient: false, .server), "value"),
            (.queueBatchUpdate(app: h.app, roomId: "r", [KeyValue("k", String(repeating: "v", count: 4097))], .server, notify: nil), "elements.k"),
            (.updateRoom(app: h.app, roomId: "r", update, .server, nim: nil), "ext"),
            (.updateRoom(app: h.app, roomId: "r", RoomUpdate(), .server, nim: NIMNotify(notifyExt: String(repeating: "n", count: 2049))), "notifyExt"),
            (.mute(app: h.app, roomId: "r", ["u"], .seconds(2_592_001), .server, rc: nil, nim: nil), "seconds"),
            (.setAttributes(app: h.app, roomId: "r", [KeyValue("k", "v")], owner: nil, autoDelete: true, .server), "autoDelete"),
        ]
        for (command, field) in cases {
            let out = h.run(command)
            #expect(out.error?.code == .invalidParameter, "\(field)")
            #expect(out.error?.field == field, "\(field): \(String(describing: out.error))")
            #expect(out.effects.isEmpty && out.mutations.isEmpty && out.webhooks.isEmpty, "\(field)")
            #expect(h.fingerprint("r") == before, "\(field)")
        }
        var create = RoomConfig(roomId: "n")
        create.ext = String(repeating: "e", count: 4097)
        #expect(h.run(.createRoom(app: h.app, create)).error?.field == "ext")
        #expect(h.query(.room(app: h.app, roomId: "n")) == nil)
        // Unknown roles never reach the domain as commands.
        #expect(throws: ChatError(.invalidParameter, "unknown role 'admin'; use manager, common or guest", field: "role")) {
            try RoleTarget.parse("admin")
        }
    }

    @Test func unknownAppAndSession() {
        let h = Harness()
        #expect(h.run(.createRoom(app: "nope", RoomConfig(roomId: "r"))).error?.code == .unknownApp)
        #expect(h.run(.leave(SessionID(999), roomId: "r")).error?.code == .unknownSession)
    }

    @Test func mutationsReplayIntoTheSameState() {
        // Applying the mutations of a run to a fresh domain (as the store does at start-up)
        // restores every durable fact.
        let h = Harness()
        h.createRoom("r") {
            $0.creator = "c"
            $0.muteAllowlist = ["w"]
            $0.attributes = ["a": "1"]
        }
        var mutations: [Mutation] = h.lastOutcome.mutations
        let c = h.connect("c")
        h.join(c, "r")
        for cmd: Command in [
            .setRole(app: h.app, roomId: "r", target: "m", .setManager(true), .server, notifyExt: ""),
            .block(app: h.app, roomId: "r", ["b"], minutes: 30, .server, rc: nil, nim: nil),
            .mute(app: h.app, roomId: "r", ["p"], .permanent, .server, rc: nil, nim: nil),
            .mute(app: h.app, roomId: "r", ["t"], .seconds(600), .server, rc: nil, nim: nil),
            .globalMute(app: h.app, ["g"], minutes: 5, rc: nil),
            .queueOffer(app: h.app, roomId: "r", key: "q1", value: "v1", transient: false, .server),
            .queueOffer(app: h.app, roomId: "r", key: "q2", value: "v2", transient: false, .server),
            .sendMessage(app: h.app, roomId: "r", .session(c), .text, content: "hello"),
        ] {
            mutations += h.run(cmd).mutations
        }
        let fresh = ChatDomain(makeID: { "x" })
        fresh.restoreApp(h.app, AppSettings())
        for m in mutations {
            switch m {
            case .putRoom(let r): fresh.restoreRoom(r)
            case .putMember(let k, let rec): fresh.restoreMember(k, rec)
            case .putBlock(let k, let u, let until): fresh.restoreBlock(k, u, until: until)
            case .putPermanentMute(let k, let u): fresh.restorePermanentMute(k, u)
            case .putTempMute(let k, let u, let until): fresh.restoreTempMute(k, u, until: until)
            case .putAllowlist(let k, let u): fresh.restoreAllowlist(k, u)
            case .putGlobalMute(let app, let u, let until): fresh.restoreGlobalMute(app: app, u, until: until)
            case .putAttribute(let k, let name, let a): fresh.restoreAttribute(k, name, a)
            case .putQueueElement(let k, let name, let e, let seq): fresh.restoreQueueElement(k, name, e, sequence: seq)
            case .appendMessage(let k, let msg): fresh.restoreMessage(k, msg)
            default: break
            }
        }
        func view(_ d: ChatDomain) -> [String] {
            // Online state is not durable; compare everything else.
            var out: [String] = []
            if case .success(.members(let list, _)) = d.query(.members(app: h.app, roomId: "r", .regular, .ascending, limit: 500, after: nil), now: h.now) {
                out.append(list.map { "\($0.userId):\($0.type):\($0.isMuted):\($0.isTempMuted):\($0.isBlocklisted)" }.joined(separator: ","))
            }
            let queries: [Query] = [.blocks(app: h.app, roomId: "r"), .mutes(app: h.app, roomId: "r"), .allowlist(app: h.app, roomId: "r"),
                                    .globalMutes(app: h.app), .attributes(app: h.app, roomId: "r", keys: []), .queue(app: h.app, roomId: "r"),
                                    .history(app: h.app, roomId: "r", start: 0, limit: 100, .descending, kinds: [])]
            for q in queries { out.append(String(describing: d.query(q, now: h.now))) }
            return out
        }
        #expect(view(fresh) == view(h.domain))
        guard case .success(.room(let info)) = fresh.query(.room(app: h.app, roomId: "r"), now: h.now) else { Issue.record("no room"); return }
        #expect(info.creator == "c" && info.epoch == h.domain.epoch(app: h.app, roomId: "r"))
    }
}
