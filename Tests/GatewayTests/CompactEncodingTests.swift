import Chat
import Engine
import Foundation
import Reactor
@testable import Gateway
import Testing
import TestKit
import Wire

/// TR-5: the compact event encoding: byte-exact transcoding (pure), the subprotocol negotiation,
/// and delivery to JSON and compact members of one room (in process).
@Suite("Compact encoding (TR-5)")
struct CompactEncodingTests {
    typealias J = [String: Any]

    static let message = ChatMessage(id: "mkz3p0a40001c0ffee42", roomId: "fanout", sender: "publisher", senderNickname: "", senderAvatar: "",
                                     senderExt: "", kind: .text, content: "25000000000001", time: 1_764_300_000_000, fromServer: true)

    func compact(_ json: [UInt8]) -> String? { CompactEncoding.transcode(json).map { String(decoding: $0, as: UTF8.self) } }

    @Test("TR-5: a short room message is flattened, byte for byte, and fits 120 wire bytes")
    func shortMessageBytes() throws {
        let json = Encode.event(.message(Self.message), roomId: "fanout", epoch: "mkz3ozzz0001abcdef12", offset: 12345)
        let c = try #require(compact(json))
        #expect(c == #"{"m":"fanout","o":12345,"i":"mkz3p0a40001c0ffee42","s":"publisher","c":"25000000000001","t":1764300000000,"f":1}"#)
        // The frame header of a payload under 126 bytes is 2 bytes.
        #expect(c.utf8.count + 2 <= 120, "\(c.utf8.count + 2) wire bytes")
        #expect(json.count + 2 > 3 * (c.utf8.count + 2) / 2, "JSON \(json.count) bytes against compact \(c.utf8.count)")
    }

    @Test("TR-5: the message's unusual fields keep short keys; a transient message has no offset and no epoch")
    func unusualMessageFields() throws {
        var m = Self.message
        m.senderNickname = "Pub"
        m.kind = .custom
        m.fromServer = false
        m.priority = .high
        m.type = "gift"
        m.transient = true
        m.targets = ["a", "b"]
        m.targetTags = .tag("vip")
        let json = Encode.event(.message(m), roomId: "fanout", epoch: nil, offset: nil)
        #expect(compact(json) == #"{"m":"fanout","i":"mkz3p0a40001c0ffee42","s":"publisher","n":"Pub","k":"custom","c":"25000000000001","t":1764300000000,"pr":"high","y":"gift","tr":1,"to":["a","b"],"tt":{"tag":"vip"}}"#)
    }

    @Test("TR-5: other events keep their data and lose the epoch only when they have an offset; answers pass unchanged")
    func envelopeRules() throws {
        let kicked = Encode.event(.kicked(.init(roomId: "r1", reason: .byManager, ext: "", time: 5)), roomId: "r1", epoch: "E1", offset: 7)
        let data = try #require(String(decoding: kicked, as: UTF8.self).range(of: #""data":"#)).upperBound
        let dataText = String(String(decoding: kicked, as: UTF8.self)[data...].dropLast())
        #expect(compact(kicked) == #"{"e":"room.kicked","r":"r1","o":7,"d":"# + dataText + "}")
        let gap = Encode.gap(roomId: "r1", epoch: "E1", first: 0, last: 0, normal: 0, low: 0, transient: 2)
        let g = try #require(compact(gap))
        #expect(g.hasPrefix(#"{"e":"room.gap","r":"r1","p":"E1","d":{"#), "\(g)")
        // Not an event: sent as it is.
        #expect(CompactEncoding.transcode(Array(#"{"id":3,"ok":{}}"#.utf8)) == nil)
        // A message field the table does not know falls back to the envelope form (never guessed).
        let odd = Array(#"{"ev":"room.message","roomId":"r1","epoch":"E","offset":1,"data":{"message":{"messageId":"x","newField":1}}}"#.utf8)
        #expect(compact(odd) == #"{"e":"room.message","r":"r1","o":1,"d":{"message":{"messageId":"x","newField":1}}}"#)
    }

    @Test("TR-5: a merged block's frames are each transcoded; the block is unchanged when nothing in it is an event")
    func blocks() throws {
        let a = Encode.event(.message(Self.message), roomId: "fanout", epoch: "E", offset: 1)
        let answer = Array(#"{"id":1,"ok":{}}"#.utf8)
        let block = ByteBlockTestSupport.concat([Frames.text(a), Frames.text(answer)])
        let out = Frames.compact(block)
        let expected = Frames.text(Array(try #require(compact(a)).utf8)).array + Frames.text(answer).array
        #expect(out.array == expected)
        let plain = Frames.text(answer)
        #expect(Frames.compact(plain).base == plain.base)
    }

    @Test("TR-5: negotiation: compact, JSON, the client's first known offer, none (JSON, nothing echoed), unknown alone refused")
    func negotiation() throws {
        func pick(_ offers: [String]) -> (WireEncoding, String?)? {
            if case .success(let c) = WireEncoding.negotiate(offers: offers) { return (c.encoding, c.echo) }
            return nil
        }
        #expect(pick(["roomcast.compact.v1"])! == (.compact, "roomcast.compact.v1"))
        #expect(pick(["roomcast.json.v1"])! == (.json, "roomcast.json.v1"))
        #expect(pick(["chat, roomcast.json.v1", "roomcast.compact.v1"])! == (.json, "roomcast.json.v1"))
        #expect(pick([])! == (.json, nil))
        #expect(pick(["roomcast.compact.v2"]) == nil)
        // Names are case-sensitive.
        #expect(pick(["Roomcast.Compact.V1"]) == nil)
        guard case .failure(let refusal) = WireEncoding.negotiate(offers: ["mqtt"]) else { Issue.record("mqtt accepted"); return }
        #expect(refusal.message.contains("roomcast.compact.v1") && refusal.message.contains("mqtt"))
    }

    @Test("TR-5: a JSON and a compact member of one room get the same events; a client outside the room gets nothing; transcoded once")
    func deliveryToBothEncodings() throws {
        let g = try InProcessGateway()
        defer { g.stop() }
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "c1"]).status == 201)
        #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "other"]).status == 201)
        let plain = try g.client("plain")
        let small = try g.client("small", encoding: .compact)
        let small2 = try g.client("small2", encoding: .compact)
        let outside = try g.client("outside", encoding: .compact)
        var aliases: [Int?] = []
        for c in [plain, small, small2] { aliases.append(CompactDecoder.alias(inAnswer: try c.command("room.join", ["roomId": "c1"]))) }
        // TR-5: the compact members were told the room's alias (the same one); the JSON member none.
        let alias = try #require(aliases[1])
        #expect(aliases == [nil, alias, alias])
        _ = try outside.expectOK(try outside.command("room.join", ["roomId": "other"]))
        g.settle()
        for c in [plain, small, small2, outside] { _ = c.drain() }
        let before = g.onLoop { [core = g.core] in core.hubs.hub(0)!.compactCache.transcoded }
        #expect(try g.rest().call("POST", "/v1/rooms/c1/messages", ["content": "hello", "fromUserId": "host"]).status == 201)
        #expect(try g.rest().call("POST", "/v1/rooms/c1/messages", ["content": "to a only", "fromUserId": "host", "targets": ["small"]]).status == 201)
        g.settle()
        let json = try plain.waitFor("room.message")
        let mine = try small.waitFor("room.message")
        // The compact member's event, decoded, is the JSON member's.
        #expect(NSDictionary(dictionary: mine) == NSDictionary(dictionary: json), "\(mine) vs \(json)")
        #expect(try small2.waitFor("room.message").obj("data").obj("message").str("content") == "hello")
        // The targeted one: only small (compact) has it; plain and small2 do not.
        #expect(try small.waitFor("room.message").obj("data").obj("message").str("content") == "to a only")
        #expect(!plain.drain().contains { $0.str("ev") == "room.message" })
        #expect(!small2.drain().contains { $0.str("ev") == "room.message" })
        #expect(outside.drain().isEmpty)
        // On the wire: the compact members got the flat form, the JSON member the envelope.
        #expect(small.rawFrames.contains { $0.hasPrefix(#"{"m":\#(alias),"o":"#) && $0.contains(#""c":"hello""#) })
        #expect(plain.rawFrames.contains { $0.hasPrefix(#"{"ev":"room.message""#) })
        #expect(!plain.rawFrames.contains { $0.hasPrefix(#"{"m":"#) })
        // Two events; the first reached two compact members and was transcoded once for both.
        let after = g.onLoop { [core = g.core] in core.hubs.hub(0)!.compactCache.transcoded }
        #expect(after - before == 2, "transcoded \(after - before) blocks")
    }
}

enum ByteBlockTestSupport {
    static func concat(_ blocks: [ByteBlock]) -> ByteBlock { ByteBlock.concatenating(blocks) }
}
