import Chat
import Engine
import Foundation
import Reactor
import Testing
import Wire

/// TR-1, TR-2 without sockets: the event-stream framing byte by byte, the resume cursor's
/// encoding against a corpus of malformed ones, and how frames are read for their names and
/// stream positions.
@Suite("Event stream framing and cursors (TR-1, TR-2)")
struct EventStreamFormatTests {
    static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test("TR-1: one event is event, data and id lines and a blank line, byte for byte")
    func oneEventByteForByte() {
        let data = Array(#"{"ev":"room.message","roomId":"r1","offset":3}"#.utf8)
        let bytes = EventStreamFormat.event(name: "room.message", data: data, id: "AQR0")
        let expected = Array("event: room.message\ndata: ".utf8) + data + Array("\nid: AQR0\n\n".utf8)
        #expect(bytes == expected)
        // No id line without an id.
        #expect(EventStreamFormat.event(name: "hello", data: Array("{}".utf8), id: nil) == Array("event: hello\ndata: {}\n\n".utf8))
    }

    @Test("TR-1: multi-line data is one data line per line (LF, CR LF and CR each end a line), the id after it")
    func multiLineData() {
        let bytes = EventStreamFormat.event(name: "x", data: Array("a\nb\r\nc\rd".utf8), id: "7")
        #expect(Self.text(bytes) == "event: x\ndata: a\ndata: b\ndata: c\ndata: d\nid: 7\n\n")
        // A trailing line break is an empty last line; empty data is one empty data line.
        #expect(Self.text(EventStreamFormat.event(name: "x", data: Array("a\n".utf8), id: nil)) == "event: x\ndata: a\ndata: \n\n")
        #expect(Self.text(EventStreamFormat.event(name: "x", data: [], id: nil)) == "event: x\ndata: \n\n")
        // Bytes are copied as they are: UTF-8 stays whole.
        let utf8 = Array("é→😀".utf8)
        #expect(EventStreamFormat.event(name: "x", data: utf8, id: nil) == Array("event: x\ndata: ".utf8) + utf8 + [10, 10])
        #expect(Self.text(EventStreamFormat.heartbeat) == ": heartbeat\n\n")
    }

    static let cursor = StreamCursor(app: "testapp", stream: "811d44d4cc587282", sequence: 42, rooms: [
        .init(roomId: "r1", epoch: "mx08k9180001910f8bdb", offset: 0),
        .init(roomId: "lobby", epoch: "mx08k9180002910f8bdb", offset: 1 << 40),
    ])

    @Test("TR-1: base64url as RFC 4648 writes it, without padding")
    func base64URLVectors() {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors { #expect(base64URL(Array(plain.utf8)) == encoded) }
        let all = (0...255).map { UInt8($0) }
        #expect(base64URL(all) == Data(all).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: ""))
        #expect(base64URL([0xFB, 0xFF]) == "-_8" && base64URLDecode("-_8") == [0xFB, 0xFF])
    }

    @Test("TR-1: a cursor survives encoding, in base64url without padding; a stream without rooms too")
    func cursorRoundTrip() throws {
        let text = Self.cursor.encoded
        #expect(text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || $0 == 0x2D || $0 == 0x5F })
        #expect(try StreamCursor.decode(text, app: "testapp").get() == Self.cursor)
        let empty = StreamCursor(app: "a", stream: "s", rooms: [])
        #expect(try StreamCursor.decode(empty.encoded, app: "a").get() == empty)
        var full = empty
        full.rooms = (0..<Limits.maxStreamRooms).map { .init(roomId: String(repeating: "r", count: Limits.maxRoomIdBytes - 2) + "\($0)", epoch: "e", offset: Int64($0)) }
        #expect(try StreamCursor.decode(full.encoded, app: "a").get() == full)
    }

    /// The binary form as `encoded` writes it, for the malformed corpus.
    static func raw(version: UInt8 = 1, app: String = "testapp", rooms: [(String, String, UInt64)] = [("r1", "e", 3)], trailing: [UInt8] = []) -> [UInt8] {
        func varint(_ v: UInt64) -> [UInt8] {
            var out: [UInt8] = []
            var x = v
            while x >= 0x80 {
                out.append(UInt8(x & 0x7F) | 0x80)
                x >>= 7
            }
            return out + [UInt8(x)]
        }
        func string(_ s: String) -> [UInt8] { varint(UInt64(s.utf8.count)) + Array(s.utf8) }
        var out = [version] + string(app) + string("stream") + varint(0) + varint(UInt64(rooms.count))
        for (room, epoch, offset) in rooms { out += string(room) + string(epoch) + varint(offset) }
        return out + trailing
    }

    @Test("TR-1: malformed cursors are refused, each for its reason: truncated, bad base64, another app, too many rooms, negative offsets")
    func malformedCorpus() {
        func refusal(_ text: String) -> StreamCursor.Refusal? {
            if case .failure(let r) = StreamCursor.decode(text, app: "testapp") { return r }
            return nil
        }
        func isMalformed(_ text: String) -> Bool {
            if case .malformed? = refusal(text) { return true }
            return false
        }
        let good = Self.cursor.encoded
        #expect(refusal(good) == nil)
        // Truncated: every proper prefix of the bytes, and of the text.
        let bytes = Self.raw()
        for n in 0..<bytes.count { #expect(isMalformed(base64URL(Array(bytes[..<n]))), "prefix of \(n) bytes") }
        for n in stride(from: 1, to: good.utf8.count, by: 3) { #expect(refusal(String(good.prefix(n))) != nil, "text prefix \(n)") }
        // Bad base64: other alphabets, padding, a length no base64 has, junk.
        for bad in ["", "A", "AQR0=", "AQR0+/", "AQ R0", "AQR0\n", "%%%%", "AQR0!", good + "=", String(good.dropLast()) + "*"] {
            #expect(isMalformed(bad), "\(bad)")
        }
        #expect(isMalformed(String(repeating: "A", count: 8192)))
        // Another app's cursor.
        #expect(refusal(base64URL(Self.raw(app: "otherapp"))) == .otherApp)
        var other = Self.cursor
        other.app = "otherapp"
        #expect(refusal(other.encoded) == .otherApp)
        // Too many rooms.
        let many = (0...Limits.maxStreamRooms).map { ("r\($0)", "e", UInt64(1)) }
        #expect(refusal(base64URL(Self.raw(rooms: many))) == .tooManyRooms)
        // Negative offsets (as the encoder would write them), an empty room id, an unknown
        // version, trailing bytes, a varint past 64 bits, a string that is not UTF-8.
        #expect(refusal(base64URL(Self.raw(rooms: [("r1", "e", UInt64(bitPattern: -1))]))) == .malformed("negative offset"))
        #expect(refusal(base64URL(Self.raw(rooms: [("r1", "e", UInt64(bitPattern: Int64.min))]))) == .malformed("negative offset"))
        #expect(refusal(base64URL(Self.raw(rooms: [("", "e", 1)]))) == .malformed("empty room id"))
        #expect(refusal(base64URL(Self.raw(version: 2))) == .malformed("unknown version"))
        #expect(refusal(base64URL(Self.raw(trailing: [0]))) == .malformed("trailing bytes"))
        #expect(isMalformed(base64URL([1, 1, 0x61, 0] + Array(repeating: 0xFF, count: 11))))
        #expect(isMalformed(base64URL([1, 2, 0xC3, 0x28] + Array(Self.raw().dropFirst(9)))))
    }

    @Test("TR-1: frames are read for their event name and stream position, answers for their id")
    func frameKinds() {
        func kind(_ s: String) -> FrameKind { Array(s.utf8).withUnsafeBytes { FrameKind.of($0) } }
        let message = Encode.event(.roomStatus(RoomStatusEvent(roomId: "r1", status: .joining, zimState: .connecting, zimEvent: .success, time: 1)),
                                   roomId: "r1", epoch: "ep", offset: 9)
        #expect(message.withUnsafeBytes { FrameKind.of($0) } == .event(name: "room.status", roomId: "r1", epoch: "ep", offset: 9))
        #expect(kind(#"{"ev":"room.resume","roomId":"r1","data":{}}"#) == .event(name: "room.resume", roomId: "r1", epoch: nil, offset: nil))
        #expect(kind(#"{"ev":"token.expired","data":{}}"#) == .event(name: "token.expired", roomId: nil, epoch: nil, offset: nil))
        #expect(kind(#"{"id":7,"ok":{}}"#) == .answer(id: 7, bodyStart: 8))
        #expect(kind(#"{"id":null,"error":{}}"#) == .answer(id: nil, bodyStart: 11))
        #expect(kind("[1]") == .other)
        #expect(kind(#"{"ev":"a\"b"}"#) == .other)
    }

    @Test("TR-1: a batch's merged frames are read one by one")
    func framesOfABlock() {
        let block = ByteBlock.concatenating([Frames.text(Array("{\"ev\":\"a\"}".utf8)), Frames.text(Array(repeating: 0x20, count: 300)),
                                             Frames.text(Array("{}".utf8))])
        var sizes: [Int] = []
        #expect(Frames.forEach(in: block) { _, _, payload in sizes.append(payload.count) })
        #expect(sizes == [10, 300, 2])
    }
}
