import Testing
@testable import HTTP1

/// The malformed-request corpus: every row must be refused with its status, whether the bytes
/// arrive at once or one at a time. (The server closes the connection after any refusal; the
/// black-box tests in ServerTests check that part on a real socket.)
struct MalformedCase: CustomTestStringConvertible, Sendable {
    let name: String
    let request: [UInt8]
    let status: Int
    var testDescription: String { "\(status) \(name)" }
}

private func m(_ name: String, _ request: String, _ status: Int) -> MalformedCase {
    MalformedCase(name: name, request: Array(request.utf8), status: status)
}

private func raw(_ name: String, _ request: [UInt8], _ status: Int) -> MalformedCase {
    MalformedCase(name: name, request: request, status: status)
}

private let get = "GET / HTTP/1.1\r\n"
private let post = "POST / HTTP/1.1\r\nHost: a\r\n"
private let chunked = "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

let malformedCorpus: [MalformedCase] = [
    // Smuggling: framing ambiguities (RFC 9112 §6.3).
    m("CL with TE", post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    m("TE with CL", post + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400),
    m("TE with CL 0", post + "Transfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", 400),
    m("differing CL list", post + "Content-Length: 5, 6\r\n\r\n", 400),
    m("differing CL fields", post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
    m("CL not digits", post + "Content-Length: abc\r\n\r\n", 400),
    m("CL negative", post + "Content-Length: -1\r\n\r\n", 400),
    m("CL plus sign", post + "Content-Length: +5\r\n\r\n", 400),
    m("CL inner space", post + "Content-Length: 5 5\r\n\r\n", 400),
    m("CL empty", post + "Content-Length: \r\n\r\n", 400),
    m("CL hex", post + "Content-Length: 0x10\r\n\r\n", 400),
    m("CL overflow", post + "Content-Length: 99999999999999999999999\r\n\r\n", 400),
    m("CL empty list element", post + "Content-Length: 5,\r\n\r\n", 400),
    m("CL valid and invalid", post + "Content-Length: 5\r\nContent-Length: x\r\n\r\n", 400),
    m("CL underscore", post + "Content-Length: 1_0\r\n\r\n", 400),
    m("CL tab inside", post + "Content-Length: 5\t6\r\n\r\n", 400),
    m("CL differing with spaces", post + "Content-Length:  5 , 6 \r\n\r\n", 400),
    m("TE chunked twice", post + "Transfer-Encoding: chunked, chunked\r\n\r\n", 400),
    m("TE chunked on two lines", post + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    m("TE empty", post + "Transfer-Encoding: \r\n\r\n", 400),
    m("TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),

    // Line endings.
    m("bare LF after request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400),
    m("bare LF after field", get + "Host: a\n\r\n", 400),
    m("bare LF ending head", get + "Host: a\r\n\n", 400),
    m("bare LF before request", "\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("bare CR in request line", "GET / HTTP/1.1\rHost: a\r\n\r\n", 400),
    m("bare CR in value", get + "Host: a\rb\r\n\r\n", 400),
    m("bare CR ending head", get + "Host: a\r\n\rX", 400),
    m("CR CR", get + "Host: a\r\r\n\r\n", 400),
    m("too many leading empty lines", String(repeating: "\r\n", count: 9) + get + "Host: a\r\n\r\n", 400),

    // Field syntax.
    m("obs-fold with space", get + "Host: a\r\nX-A: b\r\n c\r\n\r\n", 400),
    m("obs-fold with tab", get + "Host: a\r\nX-A: b\r\n\tc\r\n\r\n", 400),
    m("obs-fold first line", get + " Host: a\r\n\r\n", 400),
    m("space before colon", get + "Host : a\r\n\r\n", 400),
    m("tab before colon", get + "Host\t: a\r\n\r\n", 400),
    m("no colon", get + "Host a\r\n\r\n", 400),
    m("name ends at CR", get + "Host\r\n\r\n", 400),
    m("empty name", get + "Host: a\r\n: value\r\n\r\n", 400),
    m("paren in name", get + "Ho(st: a\r\n\r\n", 400),
    m("at sign in name", get + "Host: a\r\nX@Y: b\r\n\r\n", 400),
    m("slash in name", get + "Host: a\r\nX/Y: b\r\n\r\n", 400),
    m("bracket in name", get + "Host: a\r\nX[Y]: b\r\n\r\n", 400),
    raw("non-ASCII in name", Array(get.utf8) + [0x48, 0xC3, 0xA9, 0x3A, 0x20, 0x61, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("NUL in name", Array(get.utf8) + [0x48, 0x00, 0x3A, 0x20, 0x61, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("NUL in value", Array((get + "Host: a").utf8) + [0x00, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("SOH in value", Array((get + "Host: a").utf8) + [0x01, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("DEL in value", Array((get + "Host: a").utf8) + [0x7F, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("ESC in value", Array((get + "Host: a").utf8) + [0x1B, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("VT in value", Array((get + "Host: a").utf8) + [0x0B, 0x0D, 0x0A, 0x0D, 0x0A], 400),
    raw("FF in value", Array((get + "Host: a").utf8) + [0x0C, 0x0D, 0x0A, 0x0D, 0x0A], 400),

    // Host (RFC 9112 §3.2).
    m("missing Host in 1.1", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400),
    m("two Hosts", get + "Host: a\r\nHost: b\r\n\r\n", 400),
    m("two identical Hosts", get + "Host: a\r\nHost: a\r\n\r\n", 400),
    m("two Hosts in 1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    // Host = uri-host [ ":" port ] (RFC 9110 §7.2); an invalid value is a 400 (RFC 9112 §3.2).
    m("Host with space", get + "Host: a b\r\n\r\n", 400),
    m("Host with slash", get + "Host: a/b\r\n\r\n", 400),
    m("Host with userinfo", get + "Host: user@a\r\n\r\n", 400),
    m("Host with query", get + "Host: a?b\r\n\r\n", 400),
    m("Host with backslash", get + "Host: a\\b\r\n\r\n", 400),
    m("Host as a list", get + "Host: a, b\r\n\r\n", 400),
    m("Host port not digits", get + "Host: a:b\r\n\r\n", 400),
    m("Host port over 65535", get + "Host: a:65536\r\n\r\n", 400),
    m("Host port of 6 digits", get + "Host: a:000080\r\n\r\n", 400),
    m("Host with two ports", get + "Host: a:1:2\r\n\r\n", 400),
    m("Host port only", get + "Host: :80\r\n\r\n", 400),
    m("Host short percent escape", get + "Host: a%2\r\n\r\n", 400),
    m("Host bad percent escape", get + "Host: a%zz\r\n\r\n", 400),
    m("Host IPv6 unclosed", get + "Host: [::1\r\n\r\n", 400),
    m("Host IPv6 empty", get + "Host: []\r\n\r\n", 400),
    m("Host IPv6 bad character", get + "Host: [::g]\r\n\r\n", 400),
    m("Host IPv6 then junk", get + "Host: [::1]x\r\n\r\n", 400),
    raw("Host obs-text", Array((get + "Host: caf").utf8) + [0xC3, 0xA9] + Array("\r\n\r\n".utf8), 400),
    m("Host invalid in 1.0", "GET / HTTP/1.0\r\nHost: a b\r\n\r\n", 400),
    m("Host invalid behind absolute-form", "GET http://a/ HTTP/1.1\r\nHost: a/b\r\n\r\n", 400),
    m("absolute-form without Host in 1.1", "GET http://a/ HTTP/1.1\r\n\r\n", 400),

    // Request target forms (RFC 9112 §3.2): origin, absolute, authority (CONNECT), asterisk (OPTIONS).
    m("target without leading slash", "GET healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("dot-relative target", "GET ./healthz HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("query-only target", "GET ?x=1 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("asterisk with GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("asterisk with M-SEARCH", "M-SEARCH * HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("asterisk with a query", "OPTIONS *?x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("asterisk then path", "OPTIONS */x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("authority-form with GET", "GET example.com:80 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("CONNECT with origin-form", "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("CONNECT without port", "CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("CONNECT with absolute-form", "CONNECT http://example.com:443/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("unsupported scheme", "GET ftp://a/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("scheme starting with a digit", "GET 1http://a/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("scheme without //", "GET http:/a/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("scheme only", "GET http: HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("empty authority", "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("userinfo in target", "GET http://user:pw@a/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("target port over 65535", "GET http://a:99999/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("target port not digits", "GET http://a:8o/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("fragment in target authority", "GET http://a#b/x HTTP/1.1\r\nHost: a\r\n\r\n", 400),

    // Request line.
    m("double space", "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("trailing space", "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400),
    m("missing version", "GET /\r\nHost: a\r\n\r\n", 400),
    m("lower-case version", "GET / http/1.1\r\nHost: a\r\n\r\n", 400),
    m("short version", "GET / HTTP/1\r\nHost: a\r\n\r\n", 400),
    m("long version", "GET / HTTP/1.1x\r\nHost: a\r\n\r\n", 400),
    m("two-digit major", "GET / HTTP/11.1\r\nHost: a\r\n\r\n", 400),
    m("version letters", "GET / HTTP/a.b\r\nHost: a\r\n\r\n", 400),
    m("paren in method", "GE(T / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("leading space", " GET / HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("tab delimiter", "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    m("space in target", "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400),
    raw("control in target", Array("GET /a".utf8) + [0x01] + Array("b HTTP/1.1\r\nHost: a\r\n\r\n".utf8), 400),
    raw("tab in target", Array("GET /a".utf8) + [0x09] + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8), 400),
    raw("DEL in target", Array("GET /a".utf8) + [0x7F] + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8), 400),
    raw("non-ASCII in target", Array("GET /".utf8) + [0xFF] + Array(" HTTP/1.1\r\nHost: a\r\n\r\n".utf8), 400),
    raw("NUL in method", [0x47, 0x00, 0x54] + Array(" / HTTP/1.1\r\nHost: a\r\n\r\n".utf8), 400),

    // Chunked framing.
    m("chunk size not hex", chunked + "zz\r\n", 400),
    m("chunk size missing", chunked + "\r\nabc\r\n", 400),
    m("chunk size overflow", chunked + "FFFFFFFFFFFFFFFFFF\r\n", 400),
    m("chunk size negative", chunked + "-1\r\n", 400),
    m("chunk longer than size", chunked + "3\r\nabcd\r\n0\r\n\r\n", 400),
    m("chunk data without CRLF", chunked + "3\r\nabcX\n", 400),
    m("chunk size bare LF", chunked + "3\nabc\r\n", 400),
    m("chunk size garbage", chunked + "3x\r\nabc\r\n", 400),
    raw("chunk extension with NUL", Array((chunked + "3;e").utf8) + [0x00, 0x0D, 0x0A], 400),
    m("chunk extension too long", chunked + "3;" + String(repeating: "e", count: 2000) + "\r\n", 400),
    m("chunk end bare CR", chunked + "0\r\n\rX", 400),
    m("trailer with space in name", chunked + "0\r\nBad Trailer: x\r\n\r\n", 400),
    m("trailer bare LF", chunked + "0\r\nX-T: 1\n\r\n", 400),
    m("trailer obs-fold", chunked + "0\r\nX-T: 1\r\n 2\r\n\r\n", 400),
    raw("trailer with NUL", Array((chunked + "0\r\nX-T: ").utf8) + [0x00, 0x0D, 0x0A, 0x0D, 0x0A], 400),

    // Expectations.
    m("unknown expectation", post + "Expect: something-else\r\nContent-Length: 1\r\n\r\nx", 417),

    // 414: request line too long.
    m("long target", "GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
    m("request line 8193 bytes", "GET /" + String(repeating: "a", count: 8193 - 14) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414),
    m("long method", String(repeating: "G", count: 9000) + " / HTTP/1.1\r\nHost: a\r\n\r\n", 414),

    // 431: header section too large.
    m("101 fields", get + "Host: a\r\n" + (1...100).map { "X-\($0): v\r\n" }.joined() + "\r\n", 431),
    m("one huge field", get + "Host: a\r\nX-Big: " + String(repeating: "b", count: 33_000) + "\r\n\r\n", 431),
    m("many medium fields", get + "Host: a\r\n" + (1...40).map { "X-\($0): " + String(repeating: "v", count: 1000) + "\r\n" }.joined() + "\r\n", 431),
    m("huge trailers", chunked + "0\r\nX-T: " + String(repeating: "t", count: 33_000) + "\r\n\r\n", 431),

    // 413: body too large.
    m("CL over limit", post + "Content-Length: 1048577\r\n\r\n", 413),
    m("CL far over limit", post + "Content-Length: 1000000000000000\r\n\r\n", 413),
    m("chunk over limit", chunked + "100001\r\n", 413),
    m("chunks sum over limit", chunked + "80000\r\n" + String(repeating: "x", count: 0x80000) + "\r\n80001\r\n", 413),

    // 501: CONNECT (a tunnel, not HTTP messages) and unknown transfer codings.
    m("CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501),
    m("CONNECT to an IPv6 literal", "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n", 501),
    m("TE gzip", post + "Transfer-Encoding: gzip\r\n\r\n", 501),
    m("TE gzip, chunked", post + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
    m("TE identity", post + "Transfer-Encoding: identity\r\n\r\n", 501),
    m("TE deflate", post + "Transfer-Encoding: deflate\r\n\r\n", 501),
    m("TE compress, chunked", post + "Transfer-Encoding: compress, chunked\r\n\r\n", 501),
    m("TE chunked, gzip", post + "Transfer-Encoding: chunked, gzip\r\n\r\n", 501),
    m("TE custom", post + "Transfer-Encoding: x-custom\r\n\r\n", 501),

    // 505: versions other than 1.0 and 1.1.
    m("HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    m("HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505),
    m("HTTP/0.9", "GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505),
    m("HTTP/3.0", "GET / HTTP/3.0\r\nHost: a\r\n\r\n", 505),
    m("HTTP/9.9", "GET / HTTP/9.9\r\nHost: a\r\n\r\n", 505),
    m("HTTP/1.9", "GET / HTTP/1.9\r\nHost: a\r\n\r\n", 505),
]

@Suite("HTTP/1.1 request parser: malformed corpus")
struct MalformedRequestTests {
    @Test func corpusIsLarge() {
        #expect(malformedCorpus.count >= 100)
    }

    @Test("refused whole", arguments: malformedCorpus)
    func refusedWhole(_ c: MalformedCase) {
        let out = parse(c.request)
        #expect(out.error?.status.code == c.status, "\(c.name): \(String(describing: out.error))")
        // Nothing of a refused request reaches the application.
        #expect(out.ends == 0, "\(c.name)")
    }

    @Test("refused drip-fed", arguments: malformedCorpus)
    func refusedDripFed(_ c: MalformedCase) {
        let whole = parse(c.request)
        let dripped = parse(c.request, chunk: 1)
        #expect(dripped.error == whole.error, "\(c.name)")
    }

    @Test("nothing pipelined behind a refused request is parsed", arguments: malformedCorpus.prefix(20))
    func pipelinedAfterErrorIgnored(_ c: MalformedCase) {
        let out = parse(c.request + Array("GET /next HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
        #expect(out.error != nil)
        #expect(!out.heads.contains { $0.target == "/next" })
    }
}
