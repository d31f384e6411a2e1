import Testing
@testable import WebSocket

/// Runs an assembler over `bytes` in pieces of `chunk` bytes; returns events and the first error.
func assemble(_ bytes: [UInt8], chunk: Int? = nil, role: WebSocketRole = .server, maxMessage: Int = 1 << 20,
              inflater: MessageInflater? = nil) -> (events: [WebSocketMessageAssembler.Event], error: WebSocketError?) {
    var assembler = WebSocketMessageAssembler(role: role, maxMessageBytes: maxMessage, inflater: inflater)
    var events: [WebSocketMessageAssembler.Event] = []
    var offset = 0
    let size = chunk ?? max(1, bytes.count)
    while offset < bytes.count {
        var piece = Array(bytes[offset..<min(offset + size, bytes.count)])
        offset += piece.count
        var used = 0
        while used <= piece.count {
            let (step, consumed) = piece.withUnsafeMutableBytes { assembler.parse(UnsafeMutableRawBufferPointer(rebasing: $0[used...])) }
            used += consumed
            switch step {
            case .needMoreData: used = piece.count + 1
            case .error(let e): return (events, e)
            case .event(let ev): events.append(ev)
            }
        }
    }
    return (events, nil)
}

let key: UInt32 = 0x37FA_213D

func masked(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true, rsv1: Bool = false) -> [UInt8] {
    WebSocketFrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, rsv1: rsv1, maskKey: key)
}

func text(_ s: String) -> [UInt8] { Array(s.utf8) }

@Suite("WebSocket frames")
struct FrameTests {
    @Test func rfcMaskedHelloExample() {
        // RFC 6455 §5.7: a single-frame masked text message containing "Hello".
        let frame: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
        #expect(masked(.text, text("Hello")) == frame)
        for chunk in [nil, 1, 2, 3] {
            #expect(assemble(frame, chunk: chunk).events == [.text(text("Hello"))])
        }
    }

    @Test func rfcUnmaskedExamplesReadAsClient() {
        // RFC 6455 §5.7: unmasked "Hello", fragmented "Hel" + "lo", and an unmasked ping.
        #expect(assemble([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F], role: .client).events == [.text(text("Hello"))])
        #expect(assemble([0x01, 0x03, 0x48, 0x65, 0x6C, 0x80, 0x02, 0x6C, 0x6F], role: .client).events == [.text(text("Hello"))])
        #expect(assemble([0x89, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F], role: .client).events == [.ping(text("Hello"))])
    }

    @Test("length encodings, whole and drip-fed", arguments: [0, 1, 125, 126, 127, 65535, 65536, 200_000])
    func lengths(_ n: Int) {
        let payload = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let frame = masked(.binary, payload)
        #expect(frame.count == WebSocketFrameEncoder.headerLength(payloadLength: n, masked: true) + n)
        #expect(assemble(frame).events == [.binary(payload)])
        #expect(assemble(frame, chunk: n < 1000 ? 1 : 997).events == [.binary(payload)])
    }

    @Test func fragmentsWithInterleavedControl() {
        let bytes = masked(.text, text("Hel"), fin: false) + masked(.ping, text("p")) + masked(.continuation, text("lo"), fin: false)
            + masked(.continuation, [], fin: true)
        for chunk in [nil, 1, 5] {
            #expect(assemble(bytes, chunk: chunk).events == [.ping(text("p")), .text(text("Hello"))])
        }
    }

    @Test func closeFramesDecode() {
        #expect(assemble(masked(.close, [])).events == [.close(code: nil, reason: "")])
        #expect(assemble(masked(.close, [0x03, 0xE8] + text("bye"))).events == [.close(code: .normal, reason: "bye")])
        #expect(assemble(masked(.close, [0x0F, 0xA0])).events == [.close(code: WebSocketCloseCode(4000), reason: "")])
    }

    struct BadFrame: Sendable, CustomTestStringConvertible {
        let name: String
        let bytes: [UInt8]
        let code: UInt16
        var testDescription: String { "\(code) \(name)" }
    }

    static let badFrames: [BadFrame] = [
        BadFrame(name: "unmasked client frame", bytes: WebSocketFrameEncoder.frame(opcode: .text, payload: text("hi")), code: 1002),
        BadFrame(name: "RSV1 without extension", bytes: masked(.text, text("hi"), rsv1: true), code: 1002),
        BadFrame(name: "RSV2", bytes: { var f = masked(.text, text("hi")); f[0] |= 0x20; return f }(), code: 1002),
        BadFrame(name: "RSV3", bytes: { var f = masked(.text, text("hi")); f[0] |= 0x10; return f }(), code: 1002),
        BadFrame(name: "opcode 3", bytes: { var f = masked(.text, text("hi")); f[0] = 0x83; return f }(), code: 1002),
        BadFrame(name: "opcode 7", bytes: { var f = masked(.text, text("hi")); f[0] = 0x87; return f }(), code: 1002),
        BadFrame(name: "opcode B", bytes: { var f = masked(.ping, text("hi")); f[0] = 0x8B; return f }(), code: 1002),
        BadFrame(name: "opcode F", bytes: { var f = masked(.ping, text("hi")); f[0] = 0x8F; return f }(), code: 1002),
        BadFrame(name: "fragmented ping", bytes: masked(.ping, text("hi"), fin: false), code: 1002),
        BadFrame(name: "fragmented close", bytes: masked(.close, [0x03, 0xE8], fin: false), code: 1002),
        BadFrame(name: "126-byte ping", bytes: masked(.ping, [UInt8](repeating: 0x61, count: 126)), code: 1002),
        BadFrame(name: "126-byte close", bytes: masked(.close, [0x03, 0xE8] + [UInt8](repeating: 0x61, count: 124)), code: 1002),
        BadFrame(name: "continuation without message", bytes: masked(.continuation, text("x")), code: 1002),
        BadFrame(name: "text inside fragmented text", bytes: masked(.text, text("a"), fin: false) + masked(.text, text("b")), code: 1002),
        BadFrame(name: "binary inside fragmented text", bytes: masked(.text, text("a"), fin: false) + masked(.binary, text("b")), code: 1002),
        BadFrame(name: "64-bit length top bit", bytes: [0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4], code: 1002),
        BadFrame(name: "close with 1-byte payload", bytes: masked(.close, [0x03]), code: 1002),
        BadFrame(name: "close code 0", bytes: masked(.close, [0x00, 0x00]), code: 1002),
        BadFrame(name: "close code 999", bytes: masked(.close, [0x03, 0xE7]), code: 1002),
        BadFrame(name: "close code 1004", bytes: masked(.close, [0x03, 0xEC]), code: 1002),
        BadFrame(name: "close code 1005", bytes: masked(.close, [0x03, 0xED]), code: 1002),
        BadFrame(name: "close code 1006", bytes: masked(.close, [0x03, 0xEE]), code: 1002),
        BadFrame(name: "close code 1015", bytes: masked(.close, [0x03, 0xF7]), code: 1002),
        BadFrame(name: "close code 2000", bytes: masked(.close, [0x07, 0xD0]), code: 1002),
        BadFrame(name: "close code 5000", bytes: masked(.close, [0x13, 0x88]), code: 1002),
        BadFrame(name: "close reason not UTF-8", bytes: masked(.close, [0x03, 0xE8, 0xCE, 0xBA, 0xE1]), code: 1007),
        BadFrame(name: "invalid UTF-8 text", bytes: masked(.text, [0xC0, 0xAF]), code: 1007),
        BadFrame(name: "text ends mid-character", bytes: masked(.text, [0x61, 0xE2, 0x82]), code: 1007),
        BadFrame(name: "message over limit", bytes: masked(.binary, [UInt8](repeating: 1, count: 1025)), code: 1009),
        BadFrame(name: "fragments over limit",
                 bytes: masked(.binary, [UInt8](repeating: 1, count: 600), fin: false) + masked(.continuation, [UInt8](repeating: 1, count: 600)),
                 code: 1009),
    ]

    @Test("bad frames fail with their close code", arguments: badFrames)
    func badFrameFails(_ f: BadFrame) {
        for chunk in [nil, 1] {
            let result = assemble(f.bytes, chunk: chunk, maxMessage: 1024)
            #expect(result.error?.code.rawValue == f.code, "\(f.name) chunk \(String(describing: chunk)): \(String(describing: result.error))")
        }
    }

    @Test func oversizedMessageFailsFromItsHeaderAlone() {
        // 1009 is decided from the length field: not one payload byte needs to arrive.
        let header = Array(masked(.binary, [UInt8](repeating: 0, count: 70_000)).prefix(14))
        #expect(assemble(header, maxMessage: 65_536).error?.code == .messageTooBig)
    }

    @Test func invalidUTF8FailsFastMidFrame() {
        // The frame announces 100 bytes; the bad sequence is at byte 3 and the rest never comes.
        var frame = masked(.text, [0x61, 0x62, 0xED, 0xA0, 0x80] + [UInt8](repeating: 0x61, count: 95))
        frame.removeLast(90)
        #expect(assemble(frame).error?.code == .invalidPayload)
        #expect(assemble(frame, chunk: 1).error?.code == .invalidPayload)
    }

    @Test func invalidUTF8FailsFastAcrossFragments() {
        // A code point split across fragments is fine; a bad continuation in fragment 2 fails
        // before the message ends.
        let ok = masked(.text, [0xCE], fin: false) + masked(.continuation, [0xBA], fin: true)
        #expect(assemble(ok).events == [.text([0xCE, 0xBA])])
        let bad = masked(.text, [0xCE], fin: false) + masked(.continuation, [0x41], fin: false)
        #expect(assemble(bad).error?.code == .invalidPayload)
    }

    @Test func closePayloadTruncatesOnCharacterBoundary() {
        let reason = String(repeating: "é", count: 100) // 200 bytes
        let payload = WebSocketFrameEncoder.closePayload(code: .normal, reason: reason)
        #expect(payload.count <= 125)
        var v = UTF8Validator()
        let ok = v.validate(payload[2...])
        #expect(ok && v.isComplete)
    }
}
