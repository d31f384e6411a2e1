import Foundation
import Testing
@testable import Chat
import Replication

/// The cluster's log carries domain commands (CLUSTER.md): every kind of command, with every
/// optional part present and absent, survives encoding and decoding unchanged.
@Suite("Command codec (cluster log)")
struct CommandCodecTests {
    /// One kind per command case: the switch has no default, so a new command does not compile
    /// until it has a kind here, and the corpus test then fails until the corpus holds one.
    enum Kind: CaseIterable {
        case configureApp, updateAppSettings, connect, disconnect, join, leave, leaveAll, switchRoom, updateMyInfo, createRoom, destroyRooms, updateRoom, setRoomOpen, block, unblock, mute, unmute, setRoomMuted, addToAllowlist, removeFromAllowlist, globalMute, globalUnmute, setRole, kick, setAttributes, removeAttributes, queueOffer, queueBatchUpdate, queuePoll, queueDrop, sendMessage, createGroup, dismissGroup, joinGroup, quitGroup, createChannel, changeChannelType, deleteChannel, addPrivateMembers, removePrivateMembers, setConversationStatus, setConversationTypeLevel, setGroupNotificationLevel, editMessageList, setProtectedSenders, setDistribution, setMemberTags, tagMute, sendToRooms, broadcast, queueBatchOffer, updateMemberInfo, recallMessage, editSensitiveWords, renameGroup, sendCommunityMessage, community, createUserGroups, deleteUserGroups, addUserGroupMembers, removeUserGroupMembers, bindUserGroups, unbindUserGroups, via
    }

    static func kind(_ c: Command) -> Kind {
        switch c {
        case .configureApp: .configureApp
        case .updateAppSettings: .updateAppSettings
        case .connect: .connect
        case .disconnect: .disconnect
        case .join: .join
        case .leave: .leave
        case .leaveAll: .leaveAll
        case .switchRoom: .switchRoom
        case .updateMyInfo: .updateMyInfo
        case .createRoom: .createRoom
        case .destroyRooms: .destroyRooms
        case .updateRoom: .updateRoom
        case .setRoomOpen: .setRoomOpen
        case .block: .block
        case .unblock: .unblock
        case .mute: .mute
        case .unmute: .unmute
        case .setRoomMuted: .setRoomMuted
        case .addToAllowlist: .addToAllowlist
        case .removeFromAllowlist: .removeFromAllowlist
        case .globalMute: .globalMute
        case .globalUnmute: .globalUnmute
        case .setRole: .setRole
        case .kick: .kick
        case .setAttributes: .setAttributes
        case .removeAttributes: .removeAttributes
        case .queueOffer: .queueOffer
        case .queueBatchUpdate: .queueBatchUpdate
        case .queuePoll: .queuePoll
        case .queueDrop: .queueDrop
        case .sendMessage: .sendMessage
        case .createGroup: .createGroup
        case .dismissGroup: .dismissGroup
        case .joinGroup: .joinGroup
        case .quitGroup: .quitGroup
        case .createChannel: .createChannel
        case .changeChannelType: .changeChannelType
        case .deleteChannel: .deleteChannel
        case .addPrivateMembers: .addPrivateMembers
        case .removePrivateMembers: .removePrivateMembers
        case .setConversationStatus: .setConversationStatus
        case .setConversationTypeLevel: .setConversationTypeLevel
        case .setGroupNotificationLevel: .setGroupNotificationLevel
        case .editMessageList: .editMessageList
        case .setProtectedSenders: .setProtectedSenders
        case .setDistribution: .setDistribution
        case .setMemberTags: .setMemberTags
        case .tagMute: .tagMute
        case .sendToRooms: .sendToRooms
        case .broadcast: .broadcast
        case .queueBatchOffer: .queueBatchOffer
        case .updateMemberInfo: .updateMemberInfo
        case .recallMessage: .recallMessage
        case .editSensitiveWords: .editSensitiveWords
        case .renameGroup: .renameGroup
        case .sendCommunityMessage: .sendCommunityMessage
        case .community: .community
        case .createUserGroups: .createUserGroups
        case .deleteUserGroups: .deleteUserGroups
        case .addUserGroupMembers: .addUserGroupMembers
        case .removeUserGroupMembers: .removeUserGroupMembers
        case .bindUserGroups: .bindUserGroups
        case .unbindUserGroups: .unbindUserGroups
        case .via: .via
        }
    }

    static var corpus: [Command] {
        let s = SessionID(0xFFFF_FFFF_FFFF_FFF1)
        var settings = AppSettings()
        settings.allowedOrigins = ["https://a.example", "*.b.example"]
        settings.beforeSend = BeforeSendSettings(url: "https://hook.example/x")
        var patch = AppSettingsPatch(maxRoomsPerUser: 3, historyRetentionSeconds: 86_400, notificationLevel: .mention, allowedOrigins: [])
        patch.beforeSend = BeforeSendPatch(url: "", timeoutMilliseconds: 50, failOpen: false)
        var room = RoomConfig(roomId: "r-ü\u{1F600}\"\\")
        room.name = "name\n"
        room.attributes = ["k": "v", "k2": ""]
        room.destroyPolicy = .whenEmpty(seconds: 30)
        room.multiDevice = .multiple
        var update = RoomUpdate()
        update.name = "new"
        update.destroyPolicy = .fixed(minutes: 60)
        update.queueLimit = 7
        let profile = EnterProfile(nickname: "N", avatar: "", ext: "{\"a\":1}", notifyExt: "x")
        let rc = RCNotify(extra: "e", needNotify: false)
        let nim = NIMNotify(notifyExt: "n", needNotify: true)
        return [
            .configureApp(app: "a", settings), .configureApp(app: "a", AppSettings()),
            .updateAppSettings(app: "a", patch), .updateAppSettings(app: "a", AppSettingsPatch()),
            .connect(s, app: "a", userId: "u", deviceId: "d", anonymous: nil),
            .connect(SessionID(1), app: "a", userId: nil, deviceId: "", anonymous: AnonymousProfile(nickname: "guest", avatar: "http://x/y.png")),
            .disconnect(s),
            .join(s, roomId: "r", profile, .join), .join(s, roomId: "r", EnterProfile(), .enter(room)), .join(s, roomId: "r", profile, .create(room)),
            .leave(s, roomId: "r"), .leaveAll(s),
            .switchRoom(s, from: "r", to: room, createIfMissing: true, profile),
            .updateMyInfo(s, roomId: "r", nickname: nil, avatar: "a", ext: nil, notifyExt: ""),
            .createRoom(app: "a", room), .destroyRooms(app: "a", ["r1", "r2"]), .destroyRooms(app: "a", []),
            .updateRoom(app: "a", roomId: "r", update, .server, nim: nil), .updateRoom(app: "a", roomId: "r", RoomUpdate(), .session(s), nim: nim),
            .setRoomOpen(app: "a", roomId: "r", false, .server, nim: nim),
            .block(app: "a", roomId: "r", ["u1"], minutes: nil, .server, rc: rc, nim: nil), .block(app: "a", roomId: "r", ["u1", "u2"], minutes: 5, .session(s), rc: nil, nim: nim),
            .unblock(app: "a", roomId: "r", ["u1"], .server, rc: nil, nim: nil),
            .mute(app: "a", roomId: "r", ["u"], .minutes(3), .server, rc: rc, nim: nil), .mute(app: "a", roomId: "r", ["u"], .seconds(90), .server, rc: nil, nim: nil),
            .mute(app: "a", roomId: "r", ["u"], .permanent, .session(s), rc: nil, nim: nim),
            .unmute(app: "a", roomId: "r", ["u"], .temporary, .server, rc: nil, nim: nil),
            .setRoomMuted(app: "a", roomId: "r", true, .server, rc: rc, nim: nim),
            .addToAllowlist(app: "a", roomId: "r", ["u"], rc: nil), .removeFromAllowlist(app: "a", roomId: "r", ["u"], rc: rc),
            .globalMute(app: "a", ["u"], minutes: 0, rc: nil), .globalUnmute(app: "a", ["u"], rc: rc),
            .setRole(app: "a", roomId: "r", target: "u", .setManager(true), .server, notifyExt: ""),
            .setRole(app: "a", roomId: "r", target: "u", .assign(.guest), .session(s), notifyExt: "x"),
            .kick(app: "a", roomId: "r", target: "u", .server, notifyExt: "bye"),
            .setAttributes(app: "a", roomId: "r", [KeyValue("k", "v"), KeyValue("k2", "")], owner: nil, autoDelete: true, .session(s)),
            .setAttributes(app: "a", roomId: "r", [], owner: "o", autoDelete: false, .server),
            .removeAttributes(app: "a", roomId: "r", ["k"], .server),
            .queueOffer(app: "a", roomId: "r", key: "k", value: "v", transient: true, .session(s)),
            .queueBatchUpdate(app: "a", roomId: "r", [KeyValue("k", "v")], .server, notify: nim),
            .queuePoll(app: "a", roomId: "r", key: nil, .server), .queuePoll(app: "a", roomId: "r", key: "k", .session(s)),
            .queueDrop(app: "a", roomId: "r", .server),
            .sendMessage(app: "a", roomId: "r", .session(s), .text, content: "hello \u{0}\u{1F600}"),
            .sendMessage(app: "a", roomId: "r", .server(userId: "", nickname: "n", avatar: "a"), .custom, content: "{}"),
            // QS-1, QS-5: a message with options.
            .sendMessage(app: "a", roomId: "r", .session(s), .text, content: "hi", options: MessageOptions(priority: .high, type: "RC:TxtMsg", transient: true)),
            .editMessageList(app: "a", .lowPriorityMessageTypes, add: true, ["RC:TxtMsg"]),
            .setProtectedSenders(app: "a", roomId: "r", add: false, ["u"]),
            .setDistribution(app: "a", roomId: "r", stopped: true),
            // MO-7: the app server in the name of an account.
            .setRoomOpen(app: "a", roomId: "r", false, .account("host"), nim: nil),
            .setRole(app: "a", roomId: "r", target: "u", .setManager(true), .account("op"), notifyExt: ""),
            // MO-4.
            .renameGroup(app: "a", groupId: "g", name: "新的名字"),
            // MO-3, MO-5.
            .sendCommunityMessage(app: "a", groupIds: ["g", "h"], channelId: "RCDefault",
                                  CommunityDraft(fromUserId: "u", type: "RC:TxtMsg", content: "{\"c\":\"你好\"}"), .server),
            .sendCommunityMessage(app: "a", groupIds: ["g"], channelId: "c", CommunityDraft(fromUserId: "", type: "T", content: "x", stored: false,
                                                                                              targets: ["v", "w"], metadata: ["k": "v", "k2": ""]), .session(s)),
            .community(app: "a", groupId: "g", .edit(channelId: "c", messageId: "m", fromUserId: "u", content: "y"), .server),
            .community(app: "a", groupId: "g", .setMetadata(channelId: "c", messageId: "m", userId: "u", ["a": "b"]), .server),
            .community(app: "a", groupId: "g", .removeMetadata(channelId: "c", messageId: "m", userId: "u", keys: ["a"]), .server),
            .community(app: "a", groupId: "g", .editList(.muted, channelId: "", add: true, users: ["u"]), .server),
            .community(app: "a", groupId: "g", .editList(.allowedSenders, channelId: "c", add: false, users: ["u", "v"]), .server),
            .community(app: "a", groupId: "g", .setFrozen(channelId: "c", true), .server),
            .via(.nexconn, .community(app: "a", groupId: "g", .setFrozen(channelId: "", false), .server)),
            .createUserGroups(app: "a", groupId: "g", ["ug1", "ug2"]),
            .deleteUserGroups(app: "a", groupId: "g", ["ug1"]),
            .addUserGroupMembers(app: "a", groupId: "g", userGroupId: "ug2", ["u", "用户"]),
            .removeUserGroupMembers(app: "a", groupId: "g", userGroupId: "ug2", ["u"]),
            .bindUserGroups(app: "a", groupId: "g", channelId: "c", ["ug2"]),
            .unbindUserGroups(app: "a", groupId: "g", channelId: "c", ["ug2"]),
            // MO-2.
            .editSensitiveWords(app: "a", add: [SensitiveWord(word: "坏词"), SensitiveWord(word: "bad", replacement: "***")], remove: []),
            .editSensitiveWords(app: "a", add: [], remove: ["x", "y"]),
            // MO-1.
            .recallMessage(app: "a", roomId: "r", messageId: "m1", RecallOptions(), .server),
            .recallMessage(app: "a", roomId: "r", messageId: "m\u{1F600}", RecallOptions(sender: "u", sentTime: 1_700_000_000_000, operatorId: "o", notifyExt: "{\"x\":1}"), .session(s)),
            // AU-1, AU-2.
            .setMemberTags(app: "a", roomId: "r", userId: "u", ["vip", "cn"]),
            .setMemberTags(app: "a", roomId: "r", userId: "u", [], notifyTargetTags: .not(.tag("cn"))),
            .tagMute(app: "a", roomId: "r", tag: "vip", seconds: 60, notify: nim, notifyTargetTags: .and([.tag("a"), .not(.tag("b"))]), .server),
            // AU-3
            .sendToRooms(app: "a", roomIds: ["r1", "r2"], .server(userId: "u", nickname: "n", avatar: ""), .text, content: "hi"),
            .sendToRooms(app: "a", roomIds: ["r1"], .server(userId: "", nickname: "", avatar: ""), .custom, content: "{}",
                         options: MessageOptions(priority: .low, type: "T", targetTags: .tag("vip"))),
            .broadcast(app: "a", .server(userId: "u", nickname: "", avatar: "a"), .text, content: "all"),
            // AU-5
            .queueBatchOffer(app: "a", roomId: "r", [QueueOfferItem(key: "k", value: "v"), QueueOfferItem(key: "k2", value: "", owner: "u", transient: true)]),
            .updateMemberInfo(app: "a", roomId: "r", userId: "u", nickname: "n", avatar: nil, ext: "{}", save: true, notify: nim),
            .updateMemberInfo(app: "a", roomId: "r", userId: "u", nickname: nil, avatar: "a", ext: nil, save: false, notify: nil),
            .broadcast(app: "a", .server(userId: "", nickname: "", avatar: ""), .custom, content: "x", options: MessageOptions(priority: .normal, type: "RC:TxtMsg")),
            .sendMessage(app: "a", roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "t",
                         options: MessageOptions(targets: ["u1", "u2"])),
            .sendMessage(app: "a", roomId: "r", .session(s), .text, content: "t", options: MessageOptions(targetTags: .or([.tag("a"), .tag("b")]))),
            .join(s, roomId: "r", EnterProfile(nickname: "n", tags: ["a"], notifyTargetTags: .tag("a")), .join),
            .createGroup(app: "a", groupId: "g", name: "G", creator: nil), .dismissGroup(app: "a", groupId: "g"),
            .joinGroup(app: "a", groupId: "g", ["u"]), .quitGroup(app: "a", groupId: "g", ["u"]),
            .createChannel(app: "a", groupId: "g", channelId: "c", .private), .changeChannelType(app: "a", groupId: "g", channelId: "c", .public),
            .deleteChannel(app: "a", groupId: "g", channelId: "c"),
            .addPrivateMembers(app: "a", groupId: "g", channelId: "c", ["u"]), .removePrivateMembers(app: "a", groupId: "g", channelId: "c", ["u"]),
            .setConversationStatus(app: "a", userId: "u", ConversationKey(type: .ultraGroup, targetId: "g", channelId: "c"), pinned: true, level: nil, .server),
            .setConversationStatus(app: "a", userId: "u", ConversationKey(type: .private, targetId: "v"), pinned: nil, level: .allMessages, .session(s)),
            .setConversationTypeLevel(app: "a", userId: "u", .group, .mentionUsers),
            .setGroupNotificationLevel(app: "a", groupId: "g", channelId: nil, .default),
            // MO-8
            .via(.rongCloud, .mute(app: "a", roomId: "r", ["u"], .minutes(3), .server, rc: RCNotify(extra: "{}"), nim: nil)),
            .via(.nim, .recallMessage(app: "a", roomId: "r", messageId: "m", RecallOptions(operatorId: "op"), .account("op"))),
        ]
    }

    @Test func everyKindOfCommandRoundTrips() throws {
        let corpus = Self.corpus
        #expect(Set(corpus.map(Self.kind)) == Set(Kind.allCases), "the corpus must hold every kind of command")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for c in corpus {
            let bytes = try encoder.encode(c)
            let back = try JSONDecoder().decode(Command.self, from: bytes)
            #expect(back == c, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(try encoder.encode(back) == bytes)
        }
    }

    /// MO-1: a recall, and a change of the recall window, need log format 5: a cluster still on
    /// format 4 has nodes that would apply them wrongly (or not at all), so they are not written.
    /// MO-2, MO-4, MO-7: so do sensitive-word edits, renames and commands in an account's name.
    /// (MO-8 raised the recall, the sensitive-word edit and the room closing, as moderation, to 6.)
    @Test func recallsNeedFormatFive() throws {
        var patch = AppSettingsPatch()
        patch.recallWindowSeconds = 30
        let records: [LogRecord] = [.command(.recallMessage(app: "a", roomId: "r", messageId: "m", RecallOptions(), .server)),
                                    .command(.updateAppSettings(app: "a", patch)),
                                    .command(.editSensitiveWords(app: "a", add: [SensitiveWord(word: "w")], remove: [])),
                                    .command(.setRoomOpen(app: "a", roomId: "r", false, .account("host"), nim: nil))]
        for record in records {
            #expect(throws: (any Error).self) { try LogRecord.encode(record, format: 4) }
            #expect(try LogRecord.decode(try LogRecord.encode(record, format: LogRecord.format)) == record)
        }
        #expect(LogRecord.format >= 5)
        // A settings change without the window is still readable by format 4.
        _ = try LogRecord.encode(.command(.updateAppSettings(app: "a", AppSettingsPatch(maxRooms: 3))), format: 4)
    }

    /// MO-8: a moderation command records an audit entry, which a node of format 5 would not (its
    /// state would differ): moderation commands, and vendor commands naming their surface, need
    /// format 6; other commands do not.
    @Test("MO-3, MO-4, MO-5, MO-8: community messages and controls, user groups, and the newly audited commands need log format 7")
    func communityAndUserGroupsNeedFormatSeven() throws {
        let commands: [Command] = [
            .sendCommunityMessage(app: "a", groupIds: ["g"], channelId: "c", CommunityDraft(fromUserId: "u", type: "T", content: "x"), .server),
            .community(app: "a", groupId: "g", .setFrozen(channelId: "", true), .server),
            .via(.nexconn, .community(app: "a", groupId: "g", .editList(.muted, channelId: "c", add: true, users: ["u"]), .server)),
            .createUserGroups(app: "a", groupId: "g", ["ug"]), .bindUserGroups(app: "a", groupId: "g", channelId: "c", ["ug"]),
            .destroyRooms(app: "a", ["r"]), .editMessageList(app: "a", .lowPriorityMessageTypes, add: true, ["T"]),
            .setProtectedSenders(app: "a", roomId: "r", add: true, ["u"]),
        ]
        for c in commands {
            #expect(throws: (any Error).self) { try LogRecord.encode(.command(c), format: 6) }
            #expect(try LogRecord.decode(try LogRecord.encode(.command(c), format: 7)) == .command(c))
        }
    }

    @Test("MO-8: moderation commands and vendor-surface wrappers need log format 6")
    func moderationNeedsFormatSix() throws {
        let records: [LogRecord] = [
            .command(.block(app: "a", roomId: "r", ["u"], minutes: 1, .server, rc: nil, nim: nil)),
            .command(.via(.nexconn, .globalMute(app: "a", ["u"], minutes: 1, rc: nil))),
            .signed(SignedCall(.command(.kick(app: "a", roomId: "r", target: "u", .server, notifyExt: "")), nonce: RequestNonce(app: "a", nonce: "n"), key: nil)),
        ]
        for record in records {
            #expect(throws: (any Error).self) { try LogRecord.encode(record, format: 5) }
            #expect(try LogRecord.decode(try LogRecord.encode(record, format: 6)) == record)
        }
        #expect(LogRecord.format >= 6)
        _ = try LogRecord.encode(.command(.createRoom(app: "a", RoomConfig(roomId: "r"))), format: 5)
    }

    @Test func malformedPayloadsAreRefusedNotCrashed() {
        let bad = ["", "{}", "[]", "null", #"{"leave":{}}"#, #"{"disconnect":{"_0":"x"}}"#, #"{"disconnect":{"_0":-1}}"#,
                   #"{"sendMessage":{"app":"a","roomId":"r","_2":{"server":{}},"_3":"text","content":"x"}}"#, "\u{FF}"]
        for text in bad {
            #expect(throws: (any Error).self) { try JSONDecoder().decode(Command.self, from: Data(text.utf8)) }
        }
    }

    /// AU-4: a counts-only join and the member-event settings need log format 6 (a format-5 node
    /// would send such a connection every member event, or keep sending them past the
    /// threshold); a plain join keeps its binary form.
    @Test func memberSummariesNeedFormatSix() throws {
        var patch = AppSettingsPatch()
        patch.memberEventsThreshold = 100
        var interval = AppSettingsPatch()
        interval.memberSummaryIntervalMilliseconds = 500
        let records: [LogRecord] = [.command(.join(SessionID(7), roomId: "r", EnterProfile(memberCountsOnly: true), .join)),
                                    .command(.updateAppSettings(app: "a", patch)), .command(.updateAppSettings(app: "a", interval))]
        for record in records {
            #expect(throws: (any Error).self) { try LogRecord.encode(record, format: 5) }
            #expect(try LogRecord.decode(try LogRecord.encode(record, format: 6)) == record)
        }
        let plain = LogRecord.command(.join(SessionID(7), roomId: "r", EnterProfile(nickname: "n"), .join))
        #expect(try LogRecord.encode(plain, format: 2).first != UInt8(ascii: "{"))
    }
}
