import HTTP1
import Reactor
import Synchronization
import Testing
import TestKit
@testable import Server

/// Writes `hello\n` when its stream opens, and (unless it streams forever) `bye` and the end 50 ms
/// later; records when the server tells it the connection went.
final class Streamer: ResponseStreamHandler, Sendable {
    let forever: Bool
    let closed = Atomic<Int>(0)
    init(forever: Bool) { self.forever = forever }

    func streamDidOpen(_ connection: Connection) {
        Array("hello\n".utf8).withUnsafeBytes { connection.writeStream($0) }
        guard !forever else { return }
        _ = connection.context.loop.schedule(after: .milliseconds(50)) {
            Array("bye".utf8).withUnsafeBytes { connection.writeStream($0) }
            connection.finishStream()
        }
    }

    func streamShouldFinish(_ connection: Connection) { connection.finishStream() }
    func streamDidClose(_ connection: Connection) { closed.add(1, ordering: .relaxed) }
}

/// TR-1: a streaming response (`LocalAnswer.stream`): chunked on HTTP/1.1, after which the
/// connection takes its next request; close-delimited on HTTP/1.0; the handler is told when the
/// reader goes away.
@Suite("Streaming responses (TR-1)", .serialized)
struct StreamingResponseTests {
    static let finite = Streamer(forever: false)
    static let endless = Streamer(forever: true)
    static let router: Router = {
        var b = Router.Builder()
        b.add(.GET, "/stream", local: { _, _ in .stream(status: .ok, headers: HTTPHeaders([("Content-Type", "text/plain")]), handler: finite) })
        b.add(.GET, "/forever", local: { _, _ in .stream(status: .ok, headers: HTTPHeaders(), handler: endless) })
        b.add(.GET, "/refused", local: { _, _ in .respond(Response(status: .forbidden)) })
        b.add(.GET, "/plain", sync: { _ in Response(status: .ok, body: Array("plain".utf8)) })
        return b.build()
    }()

    /// Reads until `suffix` has arrived; returns everything read.
    static func read(_ c: TCPClient, until suffix: String) throws -> String {
        var text = ""
        while !text.hasSuffix(suffix) {
            let bytes = try c.readSome()
            if bytes.isEmpty { break }
            text += String(decoding: bytes, as: UTF8.self)
        }
        return text
    }

    @Test("TR-1: chunks byte for byte, the last chunk, then the next request on the same connection")
    func chunkedThenKeepAlive() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router) { server in
                let c = try TCPClient(port: server.port)
                try c.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
                let text = try Self.read(c, until: "0\r\n\r\n")
                let parts = text.components(separatedBy: "\r\n\r\n")
                let head = parts[0]
                #expect(head.hasPrefix("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nDate: "))
                #expect(head.hasSuffix("\r\nTransfer-Encoding: chunked") && !head.contains("Content-Length"))
                let body = text[try #require(text.range(of: "\r\n\r\n")).upperBound...]
                #expect(Array(body.utf8) == Array("6\r\nhello\n\r\n3\r\nbye\r\n0\r\n\r\n".utf8))
                try c.send("GET /plain HTTP/1.1\r\nHost: x\r\n\r\n")
                let next = try c.readResponse()
                #expect(next.status == 200 && next.text == "plain")
                // A local route may answer at once too.
                try c.send("GET /refused HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try c.readResponse().status == 403)
            }
        }
    }

    @Test("TR-1: an HTTP/1.0 client gets the body until the connection closes")
    func closeDelimitedForHTTP10() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router) { server in
                let c = try TCPClient(port: server.port)
                try c.send("GET /stream HTTP/1.0\r\nHost: x\r\n\r\n")
                var bytes: [UInt8] = []
                while case let more = try c.readSome(), !more.isEmpty { bytes += more }
                let text = String(decoding: bytes, as: UTF8.self)
                #expect(text.contains("\r\nConnection: close\r\n\r\n") && !text.contains("Transfer-Encoding"))
                #expect(text.hasSuffix("\r\n\r\nhello\nbye"))
            }
        }
    }

    @Test("TR-1: the handler is told when the reader goes away")
    func readerGoesAway() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router) { server in
                let before = Self.endless.closed.load(ordering: .relaxed)
                let c = try TCPClient(port: server.port)
                try c.send("GET /forever HTTP/1.1\r\nHost: x\r\n\r\n")
                _ = try Self.read(c, until: "hello\n\r\n")
                c.shutdown()
                #expect(eventually { Self.endless.closed.load(ordering: .relaxed) == before + 1 })
            }
        }
    }
}
