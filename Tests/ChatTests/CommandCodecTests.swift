import Foundation
import Testing
@testable import Chat

/// The cluster's log carries domain commands (CLUSTER.md): every kind of command, with every
/// optional part present and absent, survives encoding and decoding unchanged.
@Suite("Command codec (cluster log)")
struct CommandCodecTests {
    /// One index per case: the switch has no default, so a new command does not compile until it
    /// is numbered here, and the corpus test then fails until the corpus holds one.
    static func caseIndex(_ c: Command) -> Int {
        switch c {
        case .configureApp: 0
        case .updateAppSettings: 1
        case .connect: 2
        case .disconnect: 3
        case .join: 4
        case .leave: 5
        case .leaveAll: 6
        case .switchRoom: 7
        case .updateMyInfo: 8
        case .createRoom: 9
        case .destroyRooms: 10
        case .updateRoom: 11
        case .setRoomOpen: 12
        case .block: 13
        case .unblock: 14
        case .mute: 15
        case .unmute: 16
        case .setRoomMuted: 17
        case .addToAllowlist: 18
        case .removeFromAllowlist: 19
        case .globalMute: 20
        case .globalUnmute: 21
        case .setRole: 22
        case .kick: 23
        case .setAttributes: 24
        case .removeAttributes: 25
        case .queueOffer: 26
        case .queueBatchUpdate: 27
        case .queuePoll: 28
        case .queueDrop: 29
        case .sendMessage: 30
        case .createGroup: 31
        case .dismissGroup: 32
        case .joinGroup: 33
        case .quitGroup: 34
        case .createChannel: 35
        case .changeChannelType: 36
        case .deleteChannel: 37
        case .addPrivateMembers: 38
        case .removePrivateMembers: 39
        case .setConversationStatus: 40
        case .setConversationTypeLevel: 41
        case .setGroupNotificationLevel: 42
        }
    }
    static let caseCount = 43

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
            .createGroup(app: "a", groupId: "g", name: "G", creator: nil), .dismissGroup(app: "a", groupId: "g"),
            .joinGroup(app: "a", groupId: "g", ["u"]), .quitGroup(app: "a", groupId: "g", ["u"]),
            .createChannel(app: "a", groupId: "g", channelId: "c", .private), .changeChannelType(app: "a", groupId: "g", channelId: "c", .public),
            .deleteChannel(app: "a", groupId: "g", channelId: "c"),
            .addPrivateMembers(app: "a", groupId: "g", channelId: "c", ["u"]), .removePrivateMembers(app: "a", groupId: "g", channelId: "c", ["u"]),
            .setConversationStatus(app: "a", userId: "u", ConversationKey(type: .ultraGroup, targetId: "g", channelId: "c"), pinned: true, level: nil, .server),
            .setConversationStatus(app: "a", userId: "u", ConversationKey(type: .private, targetId: "v"), pinned: nil, level: .allMessages, .session(s)),
            .setConversationTypeLevel(app: "a", userId: "u", .group, .mentionUsers),
            .setGroupNotificationLevel(app: "a", groupId: "g", channelId: nil, .default),
        ]
    }

    @Test func everyKindOfCommandRoundTrips() throws {
        let corpus = Self.corpus
        #expect(Set(corpus.map(Self.caseIndex)) == Set(0..<Self.caseCount), "the corpus must hold every kind of command")
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        for c in corpus {
            let bytes = try encoder.encode(c)
            let back = try JSONDecoder().decode(Command.self, from: bytes)
            #expect(back == c, "\(String(decoding: bytes, as: UTF8.self))")
            #expect(try encoder.encode(back) == bytes)
        }
    }

    @Test func malformedPayloadsAreRefusedNotCrashed() {
        let bad = ["", "{}", "[]", "null", #"{"leave":{}}"#, #"{"disconnect":{"_0":"x"}}"#, #"{"disconnect":{"_0":-1}}"#,
                   #"{"sendMessage":{"app":"a","roomId":"r","_2":{"server":{}},"_3":"text","content":"x"}}"#, "\u{FF}"]
        for text in bad {
            #expect(throws: (any Error).self) { try JSONDecoder().decode(Command.self, from: Data(text.utf8)) }
        }
    }
}
