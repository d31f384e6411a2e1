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
        ("exotic but valid method", "M-SEARCH /x HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("absolute-form", "GET http://example.com/healthz?x=1 HTTP/1.1\r\nHost: other.example\r\n\r\n"),
        ("absolute-form, https, no path", "GET HTTPS://Example.COM:8443?q HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("absolute-form in 1.0 without Host", "GET http://a/x HTTP/1.0\r\n\r\n"),
        ("absolute-form to an IPv6 literal", "POST http://[::1]:8080/v1/rooms HTTP/1.1\r\nHost: [::1]:8080\r\nContent-Length: 2\r\n\r\n{}"),
        ("asterisk-form", "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("double slash is an origin-form path", "GET //x HTTP/1.1\r\nHost: a\r\n\r\n"),
        ("Host IPv4 and port", "GET / HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n\r\n"),
        ("Host IPv6 and port", "GET / HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n"),
        ("Host IPvFuture", "GET / HTTP/1.1\r\nHost: [v1.fe:80]\r\n\r\n"),
        ("Host percent-encoded and sub-delims", "GET / HTTP/1.1\r\nHost: a%41b!$&'()*+,;=_~-.x\r\n\r\n"),
        ("Host with empty port", "GET / HTTP/1.1\r\nHost: a:\r\n\r\n"),
        ("Host port 65535", "GET / HTTP/1.1\r\nHost: a:65535\r\n\r\n"),
        ("empty Host", "GET / HTTP/1.1\r\nHost: \r\n\r\n"),
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

    /// TR-1: a connection holding a stream gives back the head's buffers between requests; the
    /// next request parses as on a fresh parser, and a parser mid-request keeps them.
    @Test func buffersReleasedBetweenRequestsParseTheNextAlike() {
        var parser = HTTPRequestParser(limits: HTTPLimits())
        func heads(_ text: String) -> [HTTPRequestHead] {
            var out: [HTTPRequestHead] = []
            let data = bytes(text)
            var used = 0
            while used < data.count {
                let (step, n) = data.withUnsafeBytes { parser.parse(UnsafeRawBufferPointer(rebasing: $0[used...])) }
                used += n
                if case .event(.head(let h)) = step { out.append(h) }
                if case .needMoreData = step { break }
                if case .error = step { break }
            }
            while case (.event(let e), _) = [UInt8]().withUnsafeBytes({ parser.parse($0) }) { if case .head(let h) = e { out.append(h) } }
            return out
        }
        let first = "GET /sse?rooms=a HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + String(repeating: "t", count: 300) + "\r\n\r\n"
        #expect(heads(first).map(\.target) == ["/sse?rooms=a"])
        parser.releaseBuffersIfIdle()
        let second = "POST /client/ops HTTP/1.1\r\nHost: y\r\nContent-Length: 0\r\n\r\n"
        let again = heads(second)
        #expect(again.map(\.target) == ["/client/ops"] && again.first?.headers["host"] == "y")
        #expect(again == parse(bytes(second)).heads)
        // Mid-request: nothing is released, and the request completes.
        #expect(heads("GET /half HTTP/1.1\r\nHo").isEmpty)
        parser.releaseBuffersIfIdle()
        #expect(heads("st: z\r\n\r\n").map(\.target) == ["/half"])
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

    /// RFC 9112 §3.2.2: an absolute-form target is reduced to origin-form and its authority
    /// replaces Host (routing, signing and logging see one spelling of the target).
    @Test func absoluteFormIsReducedToOriginForm() {
        for chunk in [nil, 1] {
            let out = parse(bytes("GET http://example.com:8080/v1/rooms?limit=2 HTTP/1.1\r\nHost: other.example\r\nAccept: */*\r\n\r\n"), chunk: chunk)
            let head = try! #require(out.heads.first)
            #expect(head.target == "/v1/rooms?limit=2")
            #expect(head.path == "/v1/rooms")
            #expect(head.query == "limit=2")
            #expect(head.headers.values("host") == ["example.com:8080"])
            #expect(head.headers["accept"] == "*/*")
        }
        let noPath = parse(bytes("GET HTTPS://Example.COM?q HTTP/1.1\r\nHost: x\r\n\r\n")).heads[0]
        #expect(noPath.target == "/?q")
        #expect(noPath.path == "/")
        #expect(noPath.query == "q")
        #expect(noPath.headers["host"] == "Example.COM")
        let bare = parse(bytes("GET http://a HTTP/1.1\r\nHost: a\r\n\r\n")).heads[0]
        #expect(bare.target == "/" && bare.path == "/" && bare.query == nil)
        // HTTP/1.0 may omit Host; the authority supplies it.
        let old = parse(bytes("GET http://a:81/x HTTP/1.0\r\n\r\n")).heads[0]
        #expect(old.headers.values("host") == ["a:81"])
        #expect(old.path == "/x")
    }

    @Test func asteriskFormIsAServerWideOptions() {
        let star = parse(bytes("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), chunk: 1).heads[0]
        #expect(star.method == .OPTIONS && star.target == "*" && star.path == "*" && star.query == nil)
        // RFC 9112 §3.2.4: OPTIONS to an absolute URI with no path is the same request.
        let absolute = parse(bytes("OPTIONS http://a:8080 HTTP/1.1\r\nHost: a:8080\r\n\r\n")).heads[0]
        #expect(absolute.target == "*" && absolute.path == "*")
        #expect(parse(bytes("OPTIONS http://a:8080/x HTTP/1.1\r\nHost: a\r\n\r\n")).heads[0].target == "/x")
    }

    @Test func targetAndHostRefusalsSayWhy() {
        func error(_ s: String) -> HTTPParserError? { parse(bytes(s)).error }
        #expect(error("GET healthz HTTP/1.1\r\nHost: a\r\n\r\n") == .badRequest("invalid request target"))
        #expect(error("GET * HTTP/1.1\r\nHost: a\r\n\r\n") == .badRequest("asterisk-form target without OPTIONS"))
        #expect(error("GET a:1 HTTP/1.1\r\nHost: a\r\n\r\n") == .badRequest("authority-form target without CONNECT"))
        #expect(error("GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n") == .badRequest("unsupported scheme in request target"))
        #expect(error("GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n") == .badRequest("userinfo in request target"))
        #expect(error("GET / HTTP/1.1\r\nHost: a b\r\n\r\n") == .badRequest("invalid Host"))
        #expect(error("CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n") == .methodNotImplemented("CONNECT"))
        #expect(HTTPParserError.methodNotImplemented("CONNECT").status == .notImplemented)
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
