import Foundation
import Testing
@testable import Chat
import Replication

/// Snapshots of the cluster (BX-5, CLUSTER.md): a domain made from the image of another, taken at
/// any point of a run, gives exactly the same replies, events, mutations, webhook records and
/// query answers for everything that follows, and ends in the same state, as the domain it was
/// taken from. Random runs over every kind of command, with time moving so that mutes, blocks,
/// destroy delays and presence grace come due, and sessions connected across the cut.
@Suite("Domain images (cluster snapshots)")
struct DomainImageTests {
    /// A deterministic generator (the runs are reproducible from their seed).
    struct Random {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            var z = state
            z = (z ^ (z >> 33)) &* 0xFF51_AFD7_ED55_8CCD
            return z ^ (z >> 29)
        }
        mutating func int(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        mutating func pick<T>(_ xs: [T]) -> T { xs[int(xs.count)] }
        mutating func bool() -> Bool { next() & 1 == 1 }
    }

    enum Step {
        case command(Command)
        case tick
    }

    static let users = ["u0", "u1", "u2", "u3", "u4", "u5"]
    static let rooms = ["r0", "r1", "r2", "r3"]
    static func session(_ i: Int) -> SessionID { SessionID.make(incarnation: UInt64(i % 3 + 1), loop: 0, counter: UInt64(i)) }

    /// A random step over a small world (so commands meet: the same rooms, users and sessions).
    static func step(_ r: inout Random) -> Step {
        let app = "app"
        let room = r.pick(rooms), user = r.pick(users), users2 = [r.pick(users), r.pick(users)]
        let s = session(r.int(10))
        let actor: Actor = r.int(3) == 0 ? .session(s) : .server
        let rc: RCNotify? = r.bool() ? RCNotify(extra: "e", needNotify: r.bool()) : nil
        let nim: NIMNotify? = r.bool() ? NIMNotify(notifyExt: "n", needNotify: r.bool()) : nil
        var config = RoomConfig(roomId: room)
        config.destroyPolicy = r.pick([.default, .whenEmpty(seconds: 5), .fixed(minutes: 1), .inactive(minutes: 60)])
        config.multiDevice = r.pick([.multiple, .single])
        config.attributes = r.bool() ? ["k": "v"] : [:]
        config.muteAllowlist = r.bool() ? [user] : []
        config.keepAlive = r.int(4) == 0
        let group = r.pick(["g0", "g1"]), channel = r.pick(["c0", "c1", "RCDefault"])
        let userGroup = r.pick(["ug0", "ug1", "ug2"])
        let commands: [Command] = [
            .connect(s, app: app, userId: r.int(8) == 0 ? nil : user, deviceId: r.pick(["phone", "web"]),
                     anonymous: AnonymousProfile(nickname: "anon", avatar: "a")),
            .connect(s, app: app, userId: user, deviceId: r.pick(["phone", "web"]), anonymous: nil),
            .disconnect(s),
            .join(s, roomId: room, EnterProfile(nickname: "N" + user, ext: r.bool() ? "x" : ""), .join),
            .join(s, roomId: room, EnterProfile(), .enter(config)),
            // AU-4: counts-only members, and summaries past a threshold pending across the cut.
            .join(s, roomId: room, EnterProfile(memberCountsOnly: true), .join),
            .updateAppSettings(app: app, {
                var p = AppSettingsPatch()
                p.memberEventsThreshold = r.pick([0, 1, 2])
                p.memberSummaryIntervalMilliseconds = r.pick([100, 1000])
                return p
            }()),
            .join(s, roomId: room, EnterProfile(), .create(config)),
            .leave(s, roomId: room), .leaveAll(s),
            .switchRoom(s, from: room, to: RoomConfig(roomId: r.pick(rooms)), createIfMissing: r.bool(), EnterProfile()),
            .updateMyInfo(s, roomId: room, nickname: "nn", avatar: nil, ext: "e", notifyExt: ""),
            .createRoom(app: app, config), .destroyRooms(app: app, [room]),
            .setRoomOpen(app: app, roomId: room, r.bool(), actor, nim: nim),
            .block(app: app, roomId: room, users2, minutes: r.pick([nil, 1, 2]), actor, rc: rc, nim: nim),
            .unblock(app: app, roomId: room, users2, actor, rc: rc, nim: nil),
            .mute(app: app, roomId: room, users2, r.pick([.minutes(1), .seconds(30), .permanent]), actor, rc: rc, nim: nim),
            .unmute(app: app, roomId: room, users2, r.pick([.all, .permanent, .temporary]), actor, rc: nil, nim: nim),
            .setRoomMuted(app: app, roomId: room, r.bool(), actor, rc: rc, nim: nil),
            .addToAllowlist(app: app, roomId: room, [user], rc: rc), .removeFromAllowlist(app: app, roomId: room, [user], rc: nil),
            .globalMute(app: app, [user], minutes: r.pick([0, 1]), rc: rc), .globalUnmute(app: app, [user], rc: nil),
            .setRole(app: app, roomId: room, target: user, r.pick([.setManager(true), .setCommon(true), .setManager(false), .assign(.guest)]),
                     actor, notifyExt: ""),
            .kick(app: app, roomId: room, target: user, actor, notifyExt: "bye"),
            .setAttributes(app: app, roomId: room, [KeyValue(r.pick(["a", "b"]), "v\(r.int(9))")], owner: nil, autoDelete: r.bool(), actor),
            .removeAttributes(app: app, roomId: room, ["a"], actor),
            .queueOffer(app: app, roomId: room, key: r.pick(["q0", "q1", "q2"]), value: "v", transient: r.bool(), actor),
            .queuePoll(app: app, roomId: room, key: r.bool() ? nil : "q0", actor), .queueDrop(app: app, roomId: room, actor),
            .queueBatchUpdate(app: app, roomId: room, [KeyValue("q1", "w")], actor, notify: nim),
            .sendMessage(app: app, roomId: room, .session(s), r.pick([.text, .custom]), content: "m\(r.int(1000))"),
            .sendMessage(app: app, roomId: room, .server(userId: user, nickname: "", avatar: ""), .text, content: String(repeating: "x", count: r.int(3000))),
            .createGroup(app: app, groupId: group, name: "G", creator: user), .dismissGroup(app: app, groupId: group),
            .joinGroup(app: app, groupId: group, users2), .quitGroup(app: app, groupId: group, [user]),
            .createChannel(app: app, groupId: group, channelId: channel, r.pick([.public, .private])),
            .changeChannelType(app: app, groupId: group, channelId: channel, r.pick([.public, .private])),
            .deleteChannel(app: app, groupId: group, channelId: channel),
            .addPrivateMembers(app: app, groupId: group, channelId: channel, [user]),
            .removePrivateMembers(app: app, groupId: group, channelId: channel, [user]),
            // MO-4: user groups, their members and their bindings (all cut across by images).
            .createUserGroups(app: app, groupId: group, r.bool() ? [userGroup] : ["ug0", "ug1"]),
            .deleteUserGroups(app: app, groupId: group, [userGroup]),
            .addUserGroupMembers(app: app, groupId: group, userGroupId: userGroup, users2),
            .removeUserGroupMembers(app: app, groupId: group, userGroupId: userGroup, [user]),
            .bindUserGroups(app: app, groupId: group, channelId: channel, r.bool() ? [userGroup] : ["ug1", "ug2"]),
            .unbindUserGroups(app: app, groupId: group, channelId: channel, [userGroup]),
            .setConversationStatus(app: app, userId: user, ConversationKey(type: .ultraGroup, targetId: group, channelId: channel),
                                   pinned: r.bool(), level: r.pick([nil, .allMessages, .mention]), .server),
            .setConversationTypeLevel(app: app, userId: user, r.pick([.group, .private, .ultraGroup]), r.pick([.default, .mentionUsers])),
            .setGroupNotificationLevel(app: app, groupId: group, channelId: r.bool() ? nil : channel, r.pick([.default, .mention])),
            // MO-3, MO-5: community messages (kept across the cut) and controls.
            .sendCommunityMessage(app: app, groupIds: [group], channelId: channel,
                                  CommunityDraft(fromUserId: user, type: "T", content: "c\(r.int(100))", stored: r.int(4) != 0,
                                                 metadata: r.bool() ? ["k": "v"] : nil), actor),
            .community(app: app, groupId: group, .editList(r.pick(CommunityList.allCases), channelId: r.pick(["", channel]), add: r.int(3) != 0,
                                                          users: [user]), .server),
            .community(app: app, groupId: group, .setFrozen(channelId: r.pick(["", channel]), r.bool()), .server),
        ]
        return r.int(12) == 0 ? .tick : .command(r.pick(commands))
    }

    /// Queries whose answers must agree too (they read state the steps do not all report).
    static func queries() -> [Query] {
        var q: [Query] = [.globalMutes(app: "app"), .roomIds(app: "app"), .online(app: "app", users),
                          .group(app: "app", groupId: "g0"), .groupMembers(app: "app", groupId: "g1", page: 1, pageSize: 10)]
        for room in rooms {
            q += [.room(app: "app", roomId: room), .members(app: "app", roomId: room, .present, .ascending, limit: 100, after: nil),
                  .members(app: "app", roomId: room, .regular, .descending, limit: 100, after: nil), .blocks(app: "app", roomId: room),
                  .mutes(app: "app", roomId: room), .allowlist(app: "app", roomId: room), .queue(app: "app", roomId: room),
                  .attributes(app: "app", roomId: room, keys: [])]
        }
        for i in 0..<10 { q.append(.roomsOfSession(session(i))) }
        for u in users { q.append(.conversationStatuses(app: "app", userId: u, since: 0, limit: 100)) }
        for g in ["g0", "g1"] {
            q.append(.communityHistory(app: "app", groupId: g, CommunityHistoryQuery(channelId: nil, viewer: nil, oldest: 1_800_000_000_000,
                                                                                   newest: 1_800_000_000_000 + 86_400_000, limit: 100, newestFirst: true)))
            for c in ["", "c0", "RCDefault"] { q.append(.communityRules(app: "app", groupId: g, channelId: c)) }
            q += [.userGroups(app: "app", groupId: g, page: 1, pageSize: 100), .channels(app: "app", groupId: g, page: 1, pageSize: 100)]
            for u in users { q.append(.userChannels(app: "app", groupId: g, userId: u, page: 1, pageSize: 100)) }
            for c in ["c0", "c1", "RCDefault"] { q.append(.channelUserGroups(app: "app", groupId: g, channelId: c, page: 1, pageSize: 100)) }
        }
        return q
    }

    /// What a step did, as text (ids included: they come from the entry).
    static func apply(_ d: ChatDomain, _ ids: EntryIDs, _ step: Step, position: Int, at: Int64) -> String {
        ids.begin(position: Int64(position), at: at)
        let o: Outcome
        switch step {
        case .command(let c): o = d.apply(c, now: at)
        case .tick: o = d.tick(now: at)
        }
        return "\(o.reply) \(o.effects) \(o.mutations) \(o.webhooks)"
    }

    static func answers(_ d: ChatDomain, now: Int64) -> [String] {
        queries().map { "\(d.query($0, now: now))" } + rooms.map {
            "\((try? d.historyInMemory(app: "app", roomId: $0, start: 0, limit: 100, .descending, kinds: [], now: now)).map { "\($0.messages) \($0.complete)" } ?? "-")"
        }
    }

    static func run(seed: UInt64, steps: Int) throws {
        var r = Random(state: seed)
        let t0: Int64 = 1_800_000_000_000
        let plan: [(Step, Int64)] = {
            var t = t0
            var out: [(Step, Int64)] = []
            for _ in 0..<steps {
                // Mostly milliseconds apart, now and then past a mute, block or grace period.
                t += r.int(10) == 0 ? Int64(r.int(90_000)) : Int64(r.int(200))
                out.append((step(&r), t))
            }
            return out
        }()
        let cut = r.int(steps)
        var settings = AppSettings()
        settings.multipleRoomsPerUser = true
        settings.historyLimitPerRoom = 20

        let idsA = EntryIDs()
        let a = ChatDomain(makeID: { idsA.next() })
        a.presenceGraceMilliseconds = 3_000
        _ = a.apply(.configureApp(app: "app", settings), now: t0)
        var made = 0
        for (i, (s, at)) in plan.prefix(cut).enumerated() {
            if Self.apply(a, idsA, s, position: i + 1, at: at).contains("success") { made += 1 }
        }
        // The image through its bytes, as a snapshot travels.
        let bytes = try JSONEncoder().encode(a.image())
        let image = try JSONDecoder().decode(DomainImage.self, from: bytes)
        #expect(image == a.image())
        let idsB = EntryIDs()
        let b = try ChatDomain(image: image, makeID: { idsB.next() })
        #expect(b.image() == a.image(), "seed \(seed): the restored domain's image differs")
        let now = plan[max(0, cut - 1)].1
        #expect(answers(b, now: now) == answers(a, now: now), "seed \(seed): answers differ right after the cut at \(cut)")
        for (i, (s, at)) in plan.enumerated().dropFirst(cut) {
            let x = Self.apply(a, idsA, s, position: i + 1, at: at), y = Self.apply(b, idsB, s, position: i + 1, at: at)
            #expect(x == y, "seed \(seed), step \(i + 1) (cut \(cut)): \(s)")
            if x != y { return }
            if x.contains("success") { made += 1 }
        }
        let end = (plan.last?.1 ?? t0) + 1
        #expect(answers(b, now: end) == answers(a, now: end), "seed \(seed): answers differ at the end")
        #expect(b.image() == a.image(), "seed \(seed): states differ at the end")
        // Not vacuous: the run changed things.
        #expect(made > steps / 10, "seed \(seed): only \(made) of \(steps) steps succeeded")
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8] as [UInt64])
    func aDomainFromAnImageContinuesExactlyAsTheOriginal(seed: UInt64) throws {
        try Self.run(seed: seed, steps: 600)
    }

    /// An image of another version, or one that names the same thing twice, is refused.
    @Test func badImagesAreRefused() throws {
        let d = ChatDomain(makeID: { "x" })
        _ = d.apply(.configureApp(app: "app", AppSettings()), now: 1)
        _ = d.apply(.connect(Self.session(1), app: "app", userId: "u", deviceId: "d", anonymous: nil), now: 2)
        var image = d.image()
        image.version = DomainImage.version + 1
        #expect(throws: DomainImageError.version(DomainImage.version + 1)) { try ChatDomain(image: image, makeID: { "x" }) }
        image = d.image()
        image.sessions.append(image.sessions[0])
        #expect(throws: DomainImageError.self) { try ChatDomain(image: image, makeID: { "x" }) }
        image = d.image()
        image.apps.append(image.apps[0])
        #expect(throws: DomainImageError.self) { try ChatDomain(image: image, makeID: { "x" }) }
        // A session refers to its app's state: one of an app the image lacks is refused.
        image = d.image()
        image.sessions[0].app = "other"
        #expect(throws: DomainImageError.self) { try ChatDomain(image: image, makeID: { "x" }) }

        // A room's present users are members with a session there, each once (issue 32: their
        // join-order slots live in the member records).
        _ = d.apply(.createRoom(app: "app", RoomConfig(roomId: "r")), now: 3)
        _ = d.apply(.join(Self.session(1), roomId: "r", EnterProfile(), .join), now: 4)
        #expect(try ChatDomain(image: d.image(), makeID: { "x" }).image() == d.image())
        for corrupt in [["u", "u"], ["u", "nobody"]] {
            image = d.image()
            image.apps[0].rooms[0].present = corrupt
            #expect(throws: DomainImageError.self, "\(corrupt)") { try ChatDomain(image: image, makeID: { "x" }) }
        }
    }
}
