import Testing
@testable import HTTP1

@Suite struct ResponseEncoderTests {
    @Test func encodesStatusHeadersAndBody() {
        var head = HTTPResponseHead(status: .ok)
        head.headers.add("Content-Type", "application/json")
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(head, body: Array("{}".utf8), date: HTTPDate(secondsSince1970: 784_111_777), close: false, into: &out)
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
        head.headers.add("X-Unicode", "välüé ✓")
        for body in [[], Array("x".utf8), [UInt8](repeating: 7, count: 12345)] {
            for (close, headRequest, keepAlive) in [(false, false, false), (true, false, false), (false, true, false), (false, false, true)] {
                let date = HTTPDate(secondsSince1970: 784_111_777)
                let size = HTTPResponseEncoder.encodedSize(head, body: body, date: date, close: close, headRequest: headRequest, keepAlive: keepAlive)
                var out = [UInt8](repeating: 0, count: size)
                let written = out.withUnsafeMutableBytes {
                    HTTPResponseEncoder.write(head, body: body, date: date, close: close, headRequest: headRequest, keepAlive: keepAlive,
                                              to: $0.baseAddress!)
                }
                #expect(written == size)
                #expect(String(decoding: out, as: UTF8.self).contains("Connection: keep-alive\r\n") == keepAlive)
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

    /// Every way a field or a status reaches the encoder keeps it to its own line: `add`,
    /// `replace`, the array initialiser, a reason phrase. Values lose line breaks; a name that is
    /// not a token (a colon in it would make a field of its own) is stored as one fixed name.
    @Test func namesReasonsAndEveryInsertionCannotInjectLinesOrFields() {
        var head = HTTPResponseHead(status: HTTPStatus(code: 200, reason: "OK\r\nSet-Cookie: r"),
                                    headers: HTTPHeaders([("X-A\nSet-Cookie", "v\r")]))
        head.headers.replace("X-B", "\nSet-Cookie: b")
        head.headers.add("X-C\r\nSet-Cookie: c", "w")
        head.headers.add("Set-Cookie: sid=evil; x", "v")
        head.headers.add("", "empty name")
        var out: [UInt8] = []
        HTTPResponseEncoder.encode(head, body: [], date: nil, close: false, into: &out)
        let text = String(decoding: out, as: UTF8.self)
        #expect(!text.contains("\nSet-Cookie"))
        #expect(text == "HTTP/1.1 200 OK  Set-Cookie: r\r\nX-Invalid-Header-Name: v \r\nX-B:  Set-Cookie: b\r\n"
            + "X-Invalid-Header-Name: w\r\nX-Invalid-Header-Name: v\r\nX-Invalid-Header-Name: empty name\r\nContent-Length: 0\r\n\r\n")
        // A bad name is never mended into a meaningful one ("Content Length" is not Content-Length).
        var framing = HTTPHeaders()
        framing.add("Content Length", "0")
        framing.add("Transfer\tEncoding", "chunked")
        #expect(framing.values("content-length").isEmpty && framing.values("transfer-encoding").isEmpty)
        #expect(framing.values("X-Invalid-Header-Name") == ["0", "chunked"])
    }

    /// A status line needs a three-digit code: any other is answered as 500.
    @Test func codesOutsideThreeDigitsAre500() {
        for code in [-1, 0, 99, 1000, Int.max] {
            let status = HTTPStatus(code: code, reason: "odd")
            #expect(status.code == 500 && status.reason == "Internal Server Error")
            var out: [UInt8] = []
            HTTPResponseEncoder.encode(HTTPResponseHead(status: status), body: [], date: nil, close: false, into: &out)
            #expect(String(decoding: out, as: UTF8.self).hasPrefix("HTTP/1.1 500 Internal Server Error\r\n"))
        }
        #expect(HTTPStatus(code: 100).code == 100 && HTTPStatus(code: 999, reason: "x").reason == "x")
    }

    @Test func imfFixdate() {
        #expect(httpDate(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT") // RFC 9110 §5.6.7
        #expect(httpDate(secondsSince1970: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(httpDate(secondsSince1970: 951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(httpDate(secondsSince1970: 1_795_260_000) == "Sat, 21 Nov 2026 11:20:00 GMT")
    }
}
