import Chat
import Engine
import Foundation
import Reactor
@testable import Gateway
import Testing
import TestKit
import Wire

/// TR-5: room aliases in the compact encoding: the join, switch and observe answers of a compact
/// WebSocket connection carry a node-wide number for the (app, room) pair, and the room's events
/// carry it instead of the room id from then on (openapi/websocket.md, Encodings).
@Suite("Room aliases (TR-5)")
struct RoomAliasTests {
    typealias J = [String: Any]

    static let benchRoom = "lat1000-100-roomcast-compact"
    static let message = ChatMessage(id: "mx0fpybx000244422069", roomId: benchRoom, sender: "publisher", senderNickname: "", senderAvatar: "",
                                     senderExt: "", kind: .text, content: "47871372267982", time: 1_795_871_832_333, fromServer: true)

    func text(_ bytes: [UInt8]?) -> String? { bytes.map { String(decoding: $0, as: UTF8.self) } }

    @Test("TR-5: with the room's alias a short message is byte for byte {\"m\":N,...}, 120 wire bytes or fewer with a 28-byte room id")
    func aliasedMessageBytes() throws {
        let json = Encode.event(.message(Self.message), roomId: Self.benchRoom, epoch: "mx0fpaaa0001abcdef12", offset: 2)
        let alias = CompactEncoding.RoomAlias(roomId: Self.benchRoom, number: 7)
        let c = try #require(text(CompactEncoding.transcode(json, alias: alias)))
        #expect(c == #"{"m":7,"o":2,"i":"mx0fpybx000244422069","s":"publisher","c":"47871372267982","t":1795871832333,"f":1}"#)
        // A payload under 126 bytes has a 2-byte frame header.
        #expect(c.utf8.count + 2 <= 120, "\(c.utf8.count + 2) wire bytes")
        // Without the alias: the room id, 27 bytes more (the 133–135 bytes measured before).
        let plain = try #require(text(CompactEncoding.transcode(json)))
        #expect(plain == #"{"m":"lat1000-100-roomcast-compact","o":2,"i":"mx0fpybx000244422069","s":"publisher","c":"47871372267982","t":1795871832333,"f":1}"#)
        #expect(plain.utf8.count - c.utf8.count == 29)
        // The largest alias still fits.
        let widest = CompactEncoding.RoomAlias(roomId: Self.benchRoom, number: Int32(Limits.maxRoomAliases))
        #expect(try #require(CompactEncoding.transcode(json, alias: widest)).count + 2 <= 120)
    }

    @Test("TR-5: enveloped events carry the alias as r; another room's event and events without a room are untouched by it")
    func aliasedEnvelopes() throws {
        let alias = CompactEncoding.RoomAlias(roomId: "r1", number: 12)
        let kicked = Encode.event(.kicked(.init(roomId: "r1", reason: .byManager, ext: "", time: 5)), roomId: "r1", epoch: "E1", offset: 7)
        let whole = String(decoding: kicked, as: UTF8.self)
        let data = String(whole[try #require(whole.range(of: #""data":"#)).upperBound...].dropLast())
        #expect(text(CompactEncoding.transcode(kicked, alias: alias)) == #"{"e":"room.kicked","r":12,"o":7,"d":"# + data + "}")
        let gap = Encode.gap(roomId: "r1", epoch: "E1", first: 0, last: 0, normal: 0, low: 0, transient: 2)
        #expect(try #require(text(CompactEncoding.transcode(gap, alias: alias))).hasPrefix(#"{"e":"room.gap","r":12,"p":"E1","d":{"#))
        // Room r10 starts like r1: compared whole, it keeps its id.
        let other = Encode.event(.kicked(.init(roomId: "r10", reason: .byManager, ext: "", time: 5)), roomId: "r10", epoch: "E1", offset: 7)
        #expect(text(CompactEncoding.transcode(other, alias: alias)) == text(CompactEncoding.transcode(other)))
        #expect(try #require(text(CompactEncoding.transcode(other, alias: alias))).hasPrefix(#"{"e":"room.kicked","r":"r10","#))
        let odd = Array(#"{"ev":"room.message","roomId":"r1","epoch":"E","offset":1,"data":{"message":{"messageId":"x","newField":1}}}"#.utf8)
        #expect(text(CompactEncoding.transcode(odd, alias: alias)) == #"{"e":"room.message","r":12,"o":1,"d":{"message":{"messageId":"x","newField":1}}}"#)
        let roomless = Encode.event(.conversationStatusChanged([]), roomId: nil, epoch: nil, offset: nil)
        #expect(CompactEncoding.transcode(roomless, alias: alias) == CompactEncoding.transcode(roomless))
        // A merged block: each frame with the alias.
        let a = Encode.event(.message(Self.message), roomId: Self.benchRoom, epoch: "E", offset: 1)
        let b = Encode.event(.message(Self.message), roomId: Self.benchRoom, epoch: "E", offset: 2)
        let benchAlias = CompactEncoding.RoomAlias(roomId: Self.benchRoom, number: 3)
        let block = ByteBlock.concatenating([Frames.text(a), Frames.text(b)])
        let expected = Frames.text(try #require(CompactEncoding.transcode(a, alias: benchAlias))).array
            + Frames.text(try #require(CompactEncoding.transcode(b, alias: benchAlias))).array
        #expect(Frames.compact(block, alias: benchAlias).array == expected)
    }

    @Test("TR-5: the node's table: one number per (app, room), from 1, the same on every ask, never reused; past the bound none")
    func aliasTable() {
        let table = RoomAliases(bound: 3)
        let a = table.assign(RoomKey(app: "app1", roomId: "x"))?.number
        let b = table.assign(RoomKey(app: "app2", roomId: "x"))?.number
        let c = table.assign(RoomKey(app: "app1", roomId: "y"))?.number
        #expect([a, b, c] == [1, 2, 3])
        #expect(table.assign(RoomKey(app: "app1", roomId: "x"))?.number == 1)
        #expect(table.alias(of: RoomKey(app: "app2", roomId: "x"))?.quotedRoomId == Array(#""x""#.utf8))
        // Full: a new room gets none (its events keep the id); the known ones keep theirs.
        #expect(table.assign(RoomKey(app: "app2", roomId: "z")) == nil)
        #expect(table.alias(of: RoomKey(app: "app2", roomId: "z")) == nil)
        #expect(table.assign(RoomKey(app: "app1", roomId: "y"))?.number == 3)
        #expect(table.count == 3)
        #expect(RoomAliases().assign(RoomKey(app: "a", roomId: "r")) != nil)
    }

    /// The `m` of the compact room.message frames with `content`, as received.
    func messageRoomFields(_ c: SessionClient, content: String) -> [Any] {
        c.rawFrames.compactMap { raw -> Any? in
            guard let f = (try? JSONSerialization.jsonObject(with: Data(raw.utf8))) as? J, f["c"] as? String == content else { return nil }
            return f["m"]
        }
    }

    func joinAlias(_ c: SessionClient, _ room: String) throws -> Int? {
        let answer = try c.command("room.join", ["roomId": room])
        _ = try c.expectOK(answer)
        return CompactDecoder.alias(inAnswer: answer)
    }

    @Test("TR-5: two rooms and two apps get distinct aliases, the same for every connection; events decode to the right room; JSON answers have none")
    func distinctAliasesPerRoomAndApp() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        let other = g.rest(app: InProcessGateway.otherApp.key, secret: InProcessGateway.otherApp.secret)
        for room in ["x", "y"] { #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        #expect(try other.call("POST", "/v1/rooms", ["roomId": "x"]).status == 201)
        // A connection is in one room at a time (the one-room rule): one connection per room.
        let ax1 = try g.client("ax1", encoding: .compact)
        let ax2 = try g.client("ax2", encoding: .compact)
        let ay = try g.client("ay", encoding: .compact)
        let bx = g.session(encoding: .compact)
        try bx.connect(token: try other.token("bx"))
        let plain = try g.client("plain")

        let aliasAX = try #require(try joinAlias(ax1, "x"))
        let aliasAY = try #require(try joinAlias(ay, "y"))
        let aliasBX = try #require(try joinAlias(bx, "x"))
        #expect(Set([aliasAX, aliasAY, aliasBX]).count == 3, "\(aliasAX) \(aliasAY) \(aliasBX)")
        // Another connection of the node gets the same number for the room.
        #expect(try joinAlias(ax2, "x") == aliasAX)
        // A JSON connection's answer is as before: no alias.
        let plainAnswer = try plain.command("room.join", ["roomId": "x"])
        #expect(plainAnswer.obj("ok")["alias"] == nil)
        #expect(!plain.rawFrames.contains { $0.contains(#""alias""#) })
        g.settle()
        for c in [ax1, ax2, ay, bx, plain] { _ = c.drain() }

        #expect(try g.rest().call("POST", "/v1/rooms/x/messages", ["content": "to-x", "fromUserId": "host"]).status == 201)
        #expect(try g.rest().call("POST", "/v1/rooms/y/messages", ["content": "to-y", "fromUserId": "host"]).status == 201)
        #expect(try other.call("POST", "/v1/rooms/x/messages", ["content": "to-other-x", "fromUserId": "host"]).status == 201)
        g.settle()
        // On the wire: the numbers; decoded: the rooms, the same events a JSON member gets.
        #expect(messageRoomFields(ax1, content: "to-x").map { $0 as? Int } == [aliasAX])
        #expect(messageRoomFields(ax2, content: "to-x").map { $0 as? Int } == [aliasAX])
        #expect(messageRoomFields(ay, content: "to-y").map { $0 as? Int } == [aliasAY])
        #expect(messageRoomFields(bx, content: "to-other-x").map { $0 as? Int } == [aliasBX])
        let x = try ax1.waitFor("room.message")
        let y = try ay.waitFor("room.message")
        #expect(x.str("roomId") == "x" && x.obj("data").obj("message").str("content") == "to-x")
        #expect(y.str("roomId") == "y" && y.obj("data").obj("message").str("content") == "to-y")
        #expect(x.str("epoch")?.isEmpty == false && y.int("offset") != nil)
        let json = try plain.waitFor("room.message")
        #expect(NSDictionary(dictionary: x) == NSDictionary(dictionary: json), "\(x) vs \(json)")
        let bEvent = try bx.waitFor("room.message")
        #expect(bEvent.str("roomId") == "x" && bEvent.obj("data").obj("message").str("content") == "to-other-x")
        // Nothing crosses apps or rooms.
        #expect(messageRoomFields(bx, content: "to-x").isEmpty && messageRoomFields(ax1, content: "to-other-x").isEmpty)
        #expect(messageRoomFields(ay, content: "to-x").isEmpty && messageRoomFields(ax2, content: "to-y").isEmpty)
        #expect(!plain.rawFrames.contains { $0.contains("to-other-x") || $0.contains("to-y") })
    }

    @Test("TR-5: a member of room A never gets room B's events, under A's alias or at all, also after moving from B to A")
    func noEventUnderAnotherRoomsAlias() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        for room in ["a", "b"] { #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let onlyA = try g.client("only-a", encoding: .compact)
        let onlyB = try g.client("only-b", encoding: .compact)
        let mover = try g.client("mover", encoding: .compact)
        let aliasA = try #require(try joinAlias(onlyA, "a"))
        let aliasB = try #require(try joinAlias(onlyB, "b"))
        #expect(aliasA != aliasB)
        // The mover was in b (told b's alias), then joined a (the one-room rule leaves b).
        #expect(try joinAlias(mover, "b") == aliasB)
        #expect(try joinAlias(mover, "a") == aliasA)
        g.settle()
        for c in [onlyA, onlyB, mover] { _ = c.drain() }
        for i in 0..<3 {
            #expect(try g.rest().call("POST", "/v1/rooms/b/messages", ["content": "b\(i)", "fromUserId": "host"]).status == 201)
            #expect(try g.rest().call("POST", "/v1/rooms/a/messages", ["content": "a\(i)", "fromUserId": "host"]).status == 201)
        }
        g.settle()
        for i in 0..<3 {
            for c in [onlyA, mover] {
                #expect(messageRoomFields(c, content: "b\(i)").isEmpty)
                #expect(messageRoomFields(c, content: "a\(i)").map { $0 as? Int } == [aliasA])
            }
            #expect(messageRoomFields(onlyB, content: "b\(i)").map { $0 as? Int } == [aliasB])
            #expect(messageRoomFields(onlyB, content: "a\(i)").isEmpty)
        }
        for (c, room) in [(onlyA, "a"), (mover, "a"), (onlyB, "b")] {
            let rooms = c.drain().filter { $0.str("ev") == "room.message" }.map { $0.str("roomId") }
            #expect(rooms == [room, room, room], "\(rooms)")
        }
    }

    @Test("TR-5: with aliases an event is still transcoded once per loop for all its compact members (CompactFrameCache.transcoded)")
    func transcodedOncePerEvent() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "once"]).status == 201)
        let members = try (0..<4).map { try g.client("m\($0)", encoding: .compact) }
        let plain = try g.client("plain")
        let aliases = try members.map { try joinAlias($0, "once") }
        #expect(Set(aliases.compactMap { $0 }).count == 1 && aliases.allSatisfy { $0 != nil })
        _ = try plain.expectOK(try plain.command("room.join", ["roomId": "once"]))
        g.settle()
        for c in members + [plain] { _ = c.drain() }
        let before = g.onLoop { [core = g.core] in core.hubs.hub(0)!.compactCache.transcoded }
        #expect(try g.rest().call("POST", "/v1/rooms/once/messages", ["content": "one", "fromUserId": "host"]).status == 201)
        g.settle()
        for m in members { #expect(messageRoomFields(m, content: "one").map { $0 as? Int } == [aliases[0]]) }
        let after = g.onLoop { [core = g.core] in core.hubs.hub(0)!.compactCache.transcoded }
        #expect(after - before == 1, "transcoded \(after - before) blocks")
    }

    @Test("TR-5: a resume's replay comes before the join answer with the room id, later events with the alias the answer named")
    func replayBeforeTheAnswerKeepsTheRoomId() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "pos"]).status == 201)
        let bob = try g.client("bob", encoding: .compact)
        let joined = try bob.expectOK(try bob.command("room.join", ["roomId": "pos"]))
        let epoch = try #require(joined.obj("joinInfo").obj("room").str("epoch"))
        #expect(try g.rest().call("POST", "/v1/rooms/pos/messages", ["content": "seen", "fromUserId": "host"]).status == 201)
        let seen = try #require(try bob.waitFor("room.message").int("offset"))
        bob.drop()
        g.settle()
        for i in 0..<2 { #expect(try g.rest().call("POST", "/v1/rooms/pos/messages", ["content": "missed\(i)", "fromUserId": "host"]).status == 201) }
        let again = try g.client("bob", encoding: .compact)
        let answer = try again.command("room.join", ["roomId": "pos", "resume": ["epoch": epoch, "stream": bob.stream, "offset": seen]])
        let alias = try #require(CompactDecoder.alias(inAnswer: answer))
        #expect(try g.rest().call("POST", "/v1/rooms/pos/messages", ["content": "live", "fromUserId": "host"]).status == 201)
        g.settle()
        let raw = again.rawFrames
        let answerAt = try #require(raw.firstIndex { $0.contains(#""alias":\#(alias)"#) })
        for i in 0..<2 {
            let at = try #require(raw.firstIndex { $0.contains("missed\(i)") })
            #expect(at < answerAt && raw[at].hasPrefix(#"{"m":"pos","#), "\(raw[at])")
        }
        let live = try #require(raw.firstIndex { $0.contains(#""c":"live""#) })
        #expect(live > answerAt && raw[live].hasPrefix(#"{"m":\#(alias),"#), "\(raw[live])")
        // Decoded: the same room throughout, the replay exactly once.
        let contents = again.drain().filter { $0.str("ev") == "room.message" && $0.str("roomId") == "pos" }
            .compactMap { $0.obj("data").obj("message").str("content") }
        #expect(contents == ["missed0", "missed1", "live"])
    }

    @Test("TR-5: room.observe's answer carries the alias on a compact connection; the watched room's events carry it after")
    func observeAnswerCarriesTheAlias() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "live"]).status == 201)
        let member = try g.client("member", encoding: .compact)
        let memberAlias = try #require(try joinAlias(member, "live"))
        let r = try g.rest().call("POST", "/v1/users/console/tokens", ["observer": true, "ttlSeconds": 600])
        let watcher = g.session(encoding: .compact)
        _ = try watcher.connect(token: try #require(r.json.str("token")))
        let answer = try watcher.command("room.observe", ["roomId": "live"])
        #expect(try watcher.expectOK(answer).str("roomId") == "live")
        #expect(CompactDecoder.alias(inAnswer: answer) == memberAlias)
        g.settle()
        _ = watcher.drain()
        #expect(try g.rest().call("POST", "/v1/rooms/live/messages", ["content": "watched", "fromUserId": "host"]).status == 201)
        g.settle()
        #expect(messageRoomFields(watcher, content: "watched").map { $0 as? Int } == [memberAlias])
        #expect(try watcher.waitFor("room.message").str("roomId") == "live")
        // Unobserved: nothing more of the room, under any name.
        _ = try watcher.expectOK(try watcher.command("room.unobserve", ["roomId": "live"]))
        #expect(try g.rest().call("POST", "/v1/rooms/live/messages", ["content": "after", "fromUserId": "host"]).status == 201)
        g.settle()
        #expect(messageRoomFields(watcher, content: "after").isEmpty)
    }

    @Test("TR-5: room.switch's answer carries the new room's alias; a join answer is parsed for it only at the end of ok")
    func switchAnswerAndParsing() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        for room in ["from", "to"] { #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
        let c = try g.client("mover", encoding: .compact)
        let fromAlias = try #require(try joinAlias(c, "from"))
        let answer = try c.command("room.switch", ["from": "from", "to": ["roomId": "to"]])
        #expect(try c.expectOK(answer).obj("joinInfo").obj("room").str("roomId") == "to")
        let toAlias = try #require(CompactDecoder.alias(inAnswer: answer))
        #expect(toAlias != fromAlias)
        g.settle()
        _ = c.drain()
        #expect(try g.rest().call("POST", "/v1/rooms/to/messages", ["content": "there", "fromUserId": "host"]).status == 201)
        g.settle()
        #expect(messageRoomFields(c, content: "there").map { $0 as? Int } == [toAlias])
        #expect(try c.waitFor("room.message").str("roomId") == "to")

        #expect(ClientSession.answeredAlias(Frames.text(Array(#"{"id":3,"ok":{"joinInfo":{"memberCount":1},"alias":42}}"#.utf8))) == 42)
        #expect(ClientSession.answeredAlias(Frames.text(Array(#"{"id":3,"ok":{"attributes":{"alias":42}}}"#.utf8))) == nil)
        #expect(ClientSession.answeredAlias(Frames.text(Array(#"{"id":3,"ok":{"joinInfo":{"memberCount":1}}}"#.utf8))) == nil)
        #expect(ClientSession.answeredAlias(Frames.text(Array(#"{"id":3,"error":{"code":1}}"#.utf8))) == nil)
    }
}
