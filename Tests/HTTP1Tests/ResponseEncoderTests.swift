import Testing
@testable import HTTP1

@Suite struct ResponseEncoderTests {
    @Test func encodesStatusHeadersAndBody() {
        var head = HTTPResponseHead(status: .ok)
        head.headers.add("Content-Type", "application/json")
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(head, body: Array("{}".utf8), date: "Sun, 06 Nov 1994 08:49:37 GMT", close: false, into: &out)
        #expect(String(decoding: out, as: UTF8.self) ==
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\nContent-Length: 2\r\n\r\n{}")
    }

    @Test func headResponseKeepsLengthButNoBody() {
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(HTTPResponseHead(status: .ok), body: Array("hello".utf8), date: nil, close: true, headRequest: true, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
    }

    @Test func sizeIsExact() {
        var head = HTTPResponseHead(status: HTTPStatus(code: 418, reason: "I'm a teapot"))
        head.headers.add("X-Ünïcode", "välue")
        for body in [[], Array("x".utf8), [UInt8](repeating: 7, count: 12345)] {
            for (close, headRequest) in [(false, false), (true, false), (false, true)] {
                var out: [UInt8] = []
                HTTPResponseEncoder.encode(head, body: body, date: "Sun, 06 Nov 1994 08:49:37 GMT", close: close, headRequest: headRequest, into: &out)
                let size = HTTPResponseEncoder.encodedSize(head, body: body, date: "Sun, 06 Nov 1994 08:49:37 GMT", close: close, headRequest: headRequest)
                #expect(out.count == size)
            }
        }
    }

    @Test func noContentHasNoLength() {
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(HTTPResponseHead(status: .noContent), body: [], date: nil, close: false, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "HTTP/1.1 204 No Content\r\n\r\n")
    }

    @Test func headerValuesCannotInjectLines() {
        var head = HTTPResponseHead(status: .ok)
        head.headers.add("X-Evil", "a\r\nSet-Cookie: x")
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(head, body: [], date: nil, close: false, into: &out)
        #expect(!String(decoding: out, as: UTF8.self).contains("\r\nSet-Cookie"))
        #expect(String(decoding: out, as: UTF8.self).contains("X-Evil: a  Set-Cookie: x\r\n"))
    }

    /// Every way a field or a status reaches the encoder drops line breaks: `add`, `replace`, the
    /// array initialiser, names as well as values, and a reason phrase.
    @Test func namesReasonsAndEveryInsertionCannotInjectLines() {
        var head = HTTPResponseHead(status: HTTPStatus(code: 200, reason: "OK\r\nSet-Cookie: r"),
                                    headers: HTTPHeaders([("X-A\nSet-Cookie", "v\r")]))
        head.headers.replace("X-B", "\nSet-Cookie: b")
        head.headers.add("X-C\r\nSet-Cookie: c", "w")
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(head, body: [], date: nil, close: false, into: &out)
        let text = String(decoding: out, as: UTF8.self)
        #expect(!text.contains("\nSet-Cookie"))
        #expect(text == "HTTP/1.1 200 OK  Set-Cookie: r\r\nX-A Set-Cookie: v \r\nX-B:  Set-Cookie: b\r\nX-C  Set-Cookie: c: w\r\n"
            + "Content-Length: 0\r\n\r\n")
    }

    @Test func imfFixdate() {
        #expect(httpDate(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT") // RFC 9110 §5.6.7
        #expect(httpDate(secondsSince1970: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(httpDate(secondsSince1970: 951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(httpDate(secondsSince1970: 1_795_260_000) == "Sat, 21 Nov 2026 11:20:00 GMT")
    }
}
