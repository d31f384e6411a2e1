import Testing
import TestKit
@testable import WebSocket

@Suite("WebSocket handshake")
struct HandshakeTests {
    static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    func validate(method: String = "GET", http11: Bool = true, body: Bool = false, _ headers: [String: [String]],
                  origins: [String]? = nil, deflate: PerMessageDeflateConfiguration = PerMessageDeflateConfiguration())
        -> Result<WebSocketHandshake.Acceptance, WebSocketHandshake.Rejection> {
        WebSocketHandshake.validate(method: method, isHTTP11: http11, hasBody: body, header: { headers[$0] ?? [] },
                                    allowedOrigins: origins, deflate: deflate)
    }

    var good: [String: [String]] {
        ["upgrade": ["websocket"], "connection": ["Upgrade"], "sec-websocket-key": [Self.key], "sec-websocket-version": ["13"]]
    }

    @Test func rfcAcceptValue() {
        // RFC 6455 §1.3.
        #expect(WebSocketHandshake.acceptValue(forKey: Self.key) == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        guard case .success(let a) = validate(good) else { Issue.record("rejected"); return }
        #expect(a.acceptValue == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        #expect(a.deflate == nil)
    }

    @Test func tokenListsAndCaseAreAccepted() {
        var h = good
        h["upgrade"] = ["WebSocket"]
        h["connection"] = ["keep-alive, Upgrade"]
        guard case .success = validate(h) else { Issue.record("rejected"); return }
    }

    @Test func badRequests() {
        #expect(validate(method: "POST", good) == .failure(.badRequest("WebSocket upgrade must use GET")))
        #expect(validate(http11: false, good).statusCode == 400)
        #expect(validate(body: true, good).statusCode == 400)
        for (name, value) in [("upgrade", "h2c"), ("connection", "keep-alive"), ("sec-websocket-key", "short"),
                              ("sec-websocket-key", "AAAAAAAAAAAAAAAAAAAAAA=="  + "AA")] {
            var h = good
            h[name] = [value]
            #expect(validate(h).statusCode == 400, "\(name): \(value)")
        }
        for missing in ["upgrade", "connection", "sec-websocket-key", "sec-websocket-version"] {
            var h = good
            h[missing] = nil
            #expect(validate(h).statusCode == 400, "missing \(missing)")
        }
    }

    @Test func wrongVersionIs426() {
        var h = good
        h["sec-websocket-version"] = ["8"]
        #expect(validate(h) == .failure(.unsupportedVersion))
    }

    @Test func originAllowlist() {
        var h = good
        h["origin"] = ["https://app.example.com"]
        #expect(validate(h, origins: ["https://app.example.com"]).statusCode == 101)
        #expect(validate(h, origins: ["https://*.example.com"]).statusCode == 101)
        #expect(validate(h, origins: ["*"]).statusCode == 101)
        #expect(validate(h, origins: ["https://other.example.org"]).statusCode == 403)
        #expect(validate(h, origins: ["http://app.example.com"]).statusCode == 403)
        // Without an Origin (a non-browser client) the allowlist does not apply.
        #expect(validate(good, origins: ["https://app.example.com"]).statusCode == 101)
    }

    @Test func base64RoundTrip() {
        for n in 0..<40 {
            let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 * 37 + 11) }
            #expect(base64Decode(base64Encode(bytes)) == bytes)
        }
        #expect(base64Decode("abc") == nil)
        #expect(base64Decode("ab$=") == nil)
    }
}

extension Result where Success == WebSocketHandshake.Acceptance, Failure == WebSocketHandshake.Rejection {
    var statusCode: Int {
        switch self {
        case .success: return 101
        case .failure(let r): return r.statusCode
        }
    }
}

@Suite("permessage-deflate")
struct DeflateTests {
    let config = PerMessageDeflateConfiguration()

    @Test func negotiation() {
        #expect(config.negotiate(offers: []) == nil)
        #expect(config.negotiate(offers: ["x-webkit-deflate-frame"]) == nil)
        let plain = config.negotiate(offers: ["permessage-deflate"])
        #expect(plain?.responseHeaderValue == "permessage-deflate")
        let full = config.negotiate(offers: ["permessage-deflate; client_max_window_bits; server_no_context_takeover"])
        #expect(full?.serverNoContextTakeover == true)
        #expect(full?.responseHeaderValue == "permessage-deflate; server_no_context_takeover")
        let bits = config.negotiate(offers: ["permessage-deflate; server_max_window_bits=10; client_max_window_bits=12; client_no_context_takeover"])
        #expect(bits?.serverMaxWindowBits == 10)
        #expect(bits?.responseHeaderValue == "permessage-deflate; client_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12")
        // Invalid offers are declined; the next acceptable one wins (RFC 7692 §5, §7.1).
        #expect(config.negotiate(offers: ["permessage-deflate; server_max_window_bits=16"]) == nil)
        #expect(config.negotiate(offers: ["permessage-deflate; server_max_window_bits"]) == nil)
        #expect(config.negotiate(offers: ["permessage-deflate; unknown_param"]) == nil)
        #expect(config.negotiate(offers: ["permessage-deflate; server_no_context_takeover; server_no_context_takeover"]) == nil)
        #expect(config.negotiate(offers: ["permessage-deflate; server_no_context_takeover=1"]) == nil)
        #expect(config.negotiate(offers: ["permessage-deflate; client_max_window_bits=07"]) == nil)
        let second = config.negotiate(offers: ["permessage-deflate; server_max_window_bits=8, permessage-deflate; client_max_window_bits"])
        #expect(second?.serverMaxWindowBits == 15)
        var off = config
        off.enabled = false
        #expect(off.negotiate(offers: ["permessage-deflate"]) == nil)
    }

    @Test func rfcHelloVectors() throws {
        // RFC 7692 §7.2.3.1 and §7.2.3.2: "Hello" compressed, and again with context takeover.
        let deflater = try MessageDeflater(windowBits: 15, noContextTakeover: false)
        #expect(try deflater.compress(Array("Hello".utf8)) == [0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00])
        #expect(try deflater.compress(Array("Hello".utf8)) == [0xF2, 0x00, 0x11, 0x00, 0x00])
        let inflater = try MessageInflater(noContextTakeover: false, maxOutputBytes: 1 << 20)
        var out: [UInt8] = []
        try ([0xF2, 0x48, 0xCD, 0xC9, 0xC9, 0x07, 0x00] as [UInt8]).withUnsafeBytes { _ = try inflater.inflate($0, into: &out) }
        try inflater.finishMessage(into: &out)
        #expect(out == Array("Hello".utf8))
        out = []
        try ([0xF2, 0x00, 0x11, 0x00, 0x00] as [UInt8]).withUnsafeBytes { _ = try inflater.inflate($0, into: &out) }
        try inflater.finishMessage(into: &out)
        #expect(out == Array("Hello".utf8))
    }

    /// (sender resets its context, receiver resets its context). A receiver may keep its window
    /// when the sender resets (harmless); the reverse would break the stream, so it is not a valid pairing.
    @Test("round trips", arguments: [(false, false), (true, false), (true, true)])
    func roundTrips(_ noTakeover: (Bool, Bool)) throws {
        let deflater = try MessageDeflater(windowBits: 15, noContextTakeover: noTakeover.0)
        let inflater = try MessageInflater(noContextTakeover: noTakeover.1, maxOutputBytes: 4 << 20)
        var rng = SplitMix64(seed: 7)
        for size in [0, 1, 100, 10_000, 300_000] {
            let message = (0..<size).map { _ in UInt8(rng.next() % 16) + 0x41 }
            let compressed = try deflater.compress(message)
            var out: [UInt8] = []
            // Inflate in uneven pieces, as frames would deliver it.
            var i = 0
            while i < compressed.count {
                let j = min(compressed.count, i + 777)
                try compressed[i..<j].withUnsafeBytes { _ = try inflater.inflate($0, into: &out) }
                i = j
            }
            try inflater.finishMessage(into: &out)
            #expect(out == message, "size \(size)")
        }
    }

    @Test func compressedMessagesThroughTheAssembler() throws {
        let deflater = try MessageDeflater(windowBits: 15, noContextTakeover: false)
        let first = try deflater.compress(Array("hello hello hello".utf8))
        let second = try deflater.compress(Array("hello again".utf8))
        // The second message is split into a compressed first frame and a continuation (RSV1 only on the first).
        let bytes = masked(.text, first, rsv1: true) + masked(.text, Array(second.prefix(3)), fin: false, rsv1: true)
            + masked(.continuation, Array(second.dropFirst(3)))
        for chunk in [nil, 1] {
            let inflater = try MessageInflater(noContextTakeover: false, maxOutputBytes: 1 << 20)
            let result = assemble(bytes, chunk: chunk, inflater: inflater)
            #expect(result.error == nil)
            #expect(result.events == [.text(Array("hello hello hello".utf8)), .text(Array("hello again".utf8))])
        }
    }

    @Test func rsv1OnContinuationFails() throws {
        let inflater = try MessageInflater(noContextTakeover: false, maxOutputBytes: 1 << 20)
        let bytes = masked(.text, [0xF2], fin: false, rsv1: true) + masked(.continuation, [0x48], rsv1: true)
        #expect(assemble(bytes, inflater: inflater).error?.code == .protocolError)
    }

    @Test func decompressionBombIsStopped() throws {
        // 8 MiB of zeros compress to ~8 KiB; with a 1 MiB cap the connection fails with 1009
        // while inflating, long before the whole output would exist.
        let deflater = try MessageDeflater(windowBits: 15, noContextTakeover: true)
        let bomb = try deflater.compress([UInt8](repeating: 0, count: 8 << 20))
        #expect(bomb.count < 16_384)
        let inflater = try MessageInflater(noContextTakeover: true, maxOutputBytes: 1 << 20)
        let result = assemble(masked(.binary, bomb, rsv1: true), maxMessage: 1 << 20, inflater: inflater)
        #expect(result.error?.code == .messageTooBig)
        #expect(result.events.isEmpty)
    }

    @Test func corruptDataFails() throws {
        let inflater = try MessageInflater(noContextTakeover: false, maxOutputBytes: 1 << 20)
        #expect(assemble(masked(.binary, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF], rsv1: true), inflater: inflater).error?.code == .invalidPayload)
    }

    @Test func invalidUTF8InsideCompressedTextFails() throws {
        let deflater = try MessageDeflater(windowBits: 15, noContextTakeover: false)
        let bad = try deflater.compress([0x61, 0xED, 0xA0, 0x80])
        let inflater = try MessageInflater(noContextTakeover: false, maxOutputBytes: 1 << 20)
        #expect(assemble(masked(.text, bad, rsv1: true), inflater: inflater).error?.code == .invalidPayload)
    }
}
