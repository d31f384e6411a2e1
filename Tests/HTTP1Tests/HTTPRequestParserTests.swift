import Testing
@testable import HTTP1

@Suite("HTTP/1.1 request parser: valid requests")
struct ValidRequestTests {
    static let valid: [(String, String)] = [
        ("simple GET", "GET /healthz HTTP/1.1\r\nHost: example.com\r\n\r\n"),
        ("query string", "GET /v1/rooms?ids=a,b&x=%20 HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n"),
        ("POST with Content-Length", "POST /v1/rooms HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world"),
        ("chunked with extension and trailer",
         "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n"),
        ("upper-case chunk size", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\nA\r\n0123456789\r\n0\r\n\r\n"),
        ("HTTP/1.0 without Host", "GET / HTTP/1.0\r\n\r\n"),
        ("leading empty line", "\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("identical duplicate Content-Length", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"),
        ("identical Content-Length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc"),
        ("obs-text in value", "GET / HTTP/1.1\r\nHost: a\r\nX-Name: caf\u{e9}\r\n\r\n"),
        ("empty header value", "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\n\r\n"),
        ("Expect 100-continue", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok"),
        ("zero-length body", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"),
        ("exotic but valid method", "M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n"),
    ]

    @Test("whole and drip-fed parses agree", arguments: valid.map { $0.1 })
    func dripFeedMatchesWhole(_ request: String) {
        let whole = parse(bytes(request))
        #expect(whole.error == nil)
        #expect(whole.ends == 1)
        for chunk in [1, 2, 3, 7, 13] {
            #expect(parse(bytes(request), chunk: chunk) == whole, "chunk size \(chunk)")
        }
    }

    @Test func headFields() {
        let out = parse(bytes("GET /a/b?c=d HTTP/1.1\r\nHOST: example.com\r\nX-Spaces:   padded value  \r\n\r\n"), chunk: 1)
        let head = try! #require(out.heads.first)
        #expect(head.method == .GET)
        #expect(head.target == "/a/b?c=d")
        #expect(head.path == "/a/b")
        #expect(head.query == "c=d")
        #expect(head.version == .http1_1)
        // Names are stored lower-case; values lose surrounding whitespace only.
        #expect(head.headers["host"] == "example.com")
        #expect(head.headers["Host"] == "example.com")
        #expect(head.headers["x-spaces"] == "padded value")
        #expect(head.keepAlive)
        #expect(head.framing == .none)
    }

    @Test func bodiesAreDeliveredWhole() {
        let chunked = "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        for chunk in [nil, 1, 4] {
            let out = parse(bytes(chunked), chunk: chunk)
            #expect(out.bodies == [bytes("hello world")])
            #expect(out.heads.first?.framing == .chunked)
        }
        let sized = parse(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde"), chunk: 2)
        #expect(sized.bodies == [bytes("abcde")])
        #expect(sized.heads.first?.framing == .contentLength(5))
    }

    @Test func pipelinedRequestsInOneBuffer() {
        let three = "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nPOST /2 HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nokGET /3 HTTP/1.1\r\nHost: a\r\n\r\n"
        for chunk in [nil, 1, 5] {
            let out = parse(bytes(three), chunk: chunk)
            #expect(out.heads.map(\.target) == ["/1", "/2", "/3"])
            #expect(out.bodies == [[], bytes("ok"), []])
            #expect(out.error == nil)
        }
    }

    @Test func keepAliveRules() {
        // RFC 9112 §9.3: 1.1 persists unless "close"; 1.0 only with "keep-alive".
        #expect(parse(bytes("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")).heads[0].keepAlive == false)
        #expect(parse(bytes("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, CLOSE\r\n\r\n")).heads[0].keepAlive == false)
        #expect(parse(bytes("GET / HTTP/1.0\r\n\r\n")).heads[0].keepAlive == false)
        #expect(parse(bytes("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")).heads[0].keepAlive == true)
    }

    @Test func expectContinueIsReported() {
        let head = parse(bytes("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n")).heads[0]
        #expect(head.expectContinue)
    }

    @Test func limitsAreInclusive() {
        var limits = HTTPLimits()
        limits.maxRequestLineBytes = 20
        // "GET /123456 HTTP/1.1" is exactly 20 bytes: accepted.
        #expect(parse(bytes("GET /123456 HTTP/1.1\r\nHost: a\r\n\r\n"), limits: limits).error == nil)
        #expect(parse(bytes("GET /1234567 HTTP/1.1\r\nHost: a\r\n\r\n"), limits: limits).error == .uriTooLong)
        limits = HTTPLimits()
        limits.maxBodyBytes = 5
        #expect(parse(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nabcde"), limits: limits).error == nil)
        #expect(parse(bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 6\r\n\r\nabcdef"), limits: limits).error == .payloadTooLarge)
        limits.maxHeaderCount = 2
        #expect(parse(bytes("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n\r\n"), limits: limits).error == nil)
        #expect(parse(bytes("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n"), limits: limits).error == .headerFieldsTooLarge)
    }

    @Test func oversizedBodyIsRefusedBeforeAnyBodyByte() {
        // 413 is decided from Content-Length alone: the body is never read.
        var parser = HTTPRequestParser()
        let head = bytes("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n")
        let (step, consumed) = head.withUnsafeBytes { parser.parse($0) }
        #expect(step == .error(.payloadTooLarge))
        #expect(consumed == head.count)
    }

    @Test func limitIsCheckedBeforeBuffering() {
        // A request line that never ends fails at byte 8193, not when a CRLF finally arrives.
        var parser = HTTPRequestParser()
        var fed = 0
        var result: HTTPRequestParser.Step = .needMoreData
        let start = bytes("GET /")
        _ = start.withUnsafeBytes { parser.parse($0) }
        fed = start.count
        let a: [UInt8] = [0x61]
        while fed < 20_000 {
            result = a.withUnsafeBytes { parser.parse($0).step }
            fed += 1
            if result != .needMoreData { break }
        }
        #expect(result == .error(.uriTooLong))
        #expect(fed == 8193)
    }

    @Test func errorIsTerminal() {
        var parser = HTTPRequestParser()
        let bad = bytes("GET / HTTP/1.1\r\nHost : a\r\n\r\n")
        let first = bad.withUnsafeBytes { parser.parse($0).step }
        guard case .error = first else { Issue.record("expected an error"); return }
        let again = bytes("GET / HTTP/1.1\r\nHost: a\r\n\r\n").withUnsafeBytes { parser.parse($0).step }
        #expect(again == first)
    }
}
