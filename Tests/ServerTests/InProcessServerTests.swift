import HTTP1
import Logging
import Reactor
import Synchronization
import Testing
import TestKit
import WebSocket
@testable import Server
#if canImport(Glibc)
import Glibc
#endif

/// Runs an `HTTPServer` in this process on a free port for the duration of `body`.
func withServer(router: Router = Router.Builder().build(), upgradeHandler: UpgradeHandler? = nil,
                errorRenderer: @escaping ErrorRenderer = ServerRefusal.defaultRenderer,
                configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: (HTTPServer) throws -> Void) throws {
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.eventLoops = 1
    configuration.drainTimeout = .seconds(2)
    configure(&configuration)
    var logger = Logger(label: "server-test")
    logger.logLevel = .warning
    let server = try HTTPServer(configuration: configuration, router: router, upgradeHandler: upgradeHandler,
                                errorRenderer: errorRenderer, logger: logger)
    try server.start()
    defer { server.shutdown() }
    try body(server)
}

/// Records the close code each WebSocket connection reports (called on the loop thread).
final class CloseCodeRecorder: WebSocketHandler, Sendable {
    let codes = Mutex<[WebSocketCloseCode?]>([])
    func webSocketDidOpen(_ connection: Connection) {}
    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {}
    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) {
        codes.withLock { $0.append(code) }
    }
    var all: [WebSocketCloseCode?] { codes.withLock { $0 } }
}

func eventually(_ timeout: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Instant.now() + .milliseconds(Int64(timeout * 1000))
    while Instant.now() < deadline {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

@Suite("HTTPServer in process", .serialized)
struct InProcessServerTests {
    /// The code the handler is told is the one in the close frame the server sent.
    @Test func closeCodeComesFromTheCloseFrameSent() async throws {
        try await offPool { () throws in
            let recorder = CloseCodeRecorder()
            try withServer(upgradeHandler: { _, _, _ in .accept(recorder) }) { server in
                let a = try WSClient(port: server.port, path: "/ws")
                try a.close(code: 1000)
                #expect(try a.readFrame() == .close(1000, ""))
                #expect(eventually { recorder.all.count == 1 })

                let b = try WSClient(port: server.port, path: "/ws")
                try b.send(.close, [])
                #expect(try b.readFrame() == .close(nil, ""))
                #expect(eventually { recorder.all.count == 2 })

                let c = try WSClient(port: server.port, path: "/ws")
                try c.tcp.send(WebSocketFrameEncoder.frame(opcode: .text, payload: Array("unmasked".utf8)))
                guard case .close(1002, _) = try c.readFrame() else { Issue.record("no 1002 close"); return }
                #expect(eventually { recorder.all.count == 3 })

                #expect(recorder.all == [.normal, .noStatus, .protocolError])
            }
        }
    }

    // MARK: Refusals go through the error renderer

    private static let router: Router = {
        var routes = Router.Builder()
        routes.add(.GET, "/thing", sync: { _ in Response.json(.ok, "{}") })
        return routes.build()
    }()

    private static let upgrade = "Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"

    /// Renders a plain-text body and tries to set the fields the server owns.
    private static let customRenderer: ErrorRenderer = { refusal in
        let headers = HTTPHeaders([("Content-Type", "text/plain"), ("X-Refusal", "\(refusal.status.code)"), ("Allow", "NOPE"),
                                   ("Sec-WebSocket-Version", "99"), ("Content-Length", "999"), ("Connection", "keep-alive")])
        return Response(status: .ok, headers: headers, body: Array("refused \(refusal.status.code): \(refusal.message)".utf8))
    }

    private static func fields(_ r: TCPClient.HTTPResponse, _ name: String) -> [String] {
        r.headers.filter { $0.0.lowercased() == name.lowercased() }.map(\.1)
    }

    @Test func customRendererAnswersUnknownPathAndWrongMethod() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router, errorRenderer: Self.customRenderer) { server in
                let c = try TCPClient(port: server.port)
                try c.send("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
                let notFound = try c.readResponse()
                #expect(notFound.status == 404)
                #expect(notFound.text == "refused 404: no such path")
                #expect(notFound.header("X-Refusal") == "404")
                #expect(notFound.header("Content-Type") == "text/plain")
                #expect(Self.fields(notFound, "Content-Length") == ["\(notFound.body.count)"])
                #expect(notFound.header("Connection") == nil)
                #expect(notFound.header("Allow") == nil)

                // The same connection stays usable: a 405 keeps its Allow, whatever the renderer said.
                try c.send("DELETE /thing HTTP/1.1\r\nHost: x\r\n\r\n")
                let wrongMethod = try c.readResponse()
                #expect(wrongMethod.status == 405)
                #expect(wrongMethod.text == "refused 405: method not allowed")
                #expect(Self.fields(wrongMethod, "Allow") == ["GET, HEAD"])
                #expect(wrongMethod.header("Connection") == nil)

                try c.send("GET /thing HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try c.readResponse().status == 200)
            }
        }
    }

    @Test func customRendererAnswersMalformedRequestsAndCloses() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router, errorRenderer: Self.customRenderer) { server in
                let c = try TCPClient(port: server.port)
                try c.send("GET /thing HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\nGET /thing HTTP/1.1\r\nHost: x\r\n\r\n")
                let r = try c.readResponse()
                #expect(r.status == 400)
                #expect(r.text.hasPrefix("refused 400: "))
                #expect(Self.fields(r, "Connection") == ["close"])
                #expect(Self.fields(r, "Content-Length") == ["\(r.body.count)"])
                #expect(c.waitForClose(), "the request behind a refused one is not answered")
            }
        }
    }

    @Test func customRendererAnswersRefusedHandshakes() async throws {
        try await offPool { () throws in
            try withServer(errorRenderer: Self.customRenderer, configure: { $0.webSocket.allowedOrigins = ["https://ok.example"] }) { server in
                func attempt(_ request: String) throws -> TCPClient.HTTPResponse {
                    let c = try TCPClient(port: server.port)
                    try c.send(request)
                    let r = try c.readResponse()
                    #expect(Self.fields(r, "Connection") == ["close"])
                    #expect(c.waitForClose())
                    return r
                }
                let version = try attempt("GET /ws HTTP/1.1\r\n" + Self.upgrade + "Sec-WebSocket-Version: 8\r\nOrigin: https://ok.example\r\n\r\n")
                #expect(version.status == 426)
                #expect(version.text == "refused 426: unsupported WebSocket version")
                #expect(Self.fields(version, "Sec-WebSocket-Version") == ["13"])

                let origin = try attempt("GET /ws HTTP/1.1\r\n" + Self.upgrade + "Sec-WebSocket-Version: 13\r\nOrigin: https://evil.example\r\n\r\n")
                #expect(origin.status == 403)
                #expect(origin.text == "refused 403: origin not allowed: https://evil.example")
                #expect(Self.fields(origin, "Sec-WebSocket-Version").isEmpty)

                let badKey = try attempt("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: nope\r\nSec-WebSocket-Version: 13\r\nOrigin: https://ok.example\r\n\r\n")
                #expect(badKey.status == 400)
                #expect(badKey.text.hasPrefix("refused 400: "))

                // A valid handshake with no upgrade handler installed.
                let noHandler = try attempt("GET /ws HTTP/1.1\r\n" + Self.upgrade + "Sec-WebSocket-Version: 13\r\nOrigin: https://ok.example\r\n\r\n")
                #expect(noHandler.status == 404)
                #expect(noHandler.text == "refused 404: no WebSocket here")
            }
        }
    }

    @Test func defaultRendererUsesStatusTimesHundred() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router, configure: { $0.http.limits.maxBodyBytes = 10 }) { server in
                func answer(_ request: String) throws -> TCPClient.HTTPResponse {
                    let c = try TCPClient(port: server.port)
                    try c.send(request)
                    return try c.readResponse()
                }
                let notFound = try answer("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(notFound.text == "{\"code\":40400,\"message\":\"no such path\"}")
                #expect(notFound.header("Content-Type") == "application/json")
                let wrongMethod = try answer("POST /thing HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
                #expect(wrongMethod.text == "{\"code\":40500,\"message\":\"method not allowed\"}")
                #expect(wrongMethod.header("Allow") == "GET, HEAD")
                #expect(try answer("POST /thing HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n").text.hasPrefix("{\"code\":41300,"))
                #expect(try answer("GET /thing HTTP/2.0\r\nHost: x\r\n\r\n").text.hasPrefix("{\"code\":50500,"))
                #expect(try answer("GET /ws HTTP/1.1\r\n" + Self.upgrade + "Sec-WebSocket-Version: 8\r\n\r\n").text
                        == "{\"code\":42600,\"message\":\"unsupported WebSocket version\"}")
                #expect(try answer("GET /ws HTTP/1.1\r\n" + Self.upgrade + "Sec-WebSocket-Version: 13\r\n\r\n").text
                        == "{\"code\":40400,\"message\":\"no WebSocket here\"}")
            }
        }
    }

    // MARK: Request targets (RFC 9112 §3.2)

    @Test func absoluteFormIsRoutedByItsPathAndAsteriskFormAnswered() async throws {
        try await offPool { () throws in
            let hosts = Mutex<[String]>([])
            var routes = Router.Builder()
            routes.add(.GET, "/thing", sync: { request in
                hosts.withLock { $0.append(request.head.headers["host"] ?? "-") }
                return Response.json(.ok, "{\"target\":\(jsonQuote(request.head.target))}")
            })
            routes.add(.DELETE, "/items/{id}", sync: { _ in Response(status: .noContent) })
            try withServer(router: routes.build()) { server in
                let c = try TCPClient(port: server.port)
                try c.send("GET http://example.com:8080/thing?x=1 HTTP/1.1\r\nHost: ignored.example\r\n\r\n")
                let absolute = try c.readResponse()
                #expect(absolute.status == 200)
                #expect(absolute.text == "{\"target\":\"/thing?x=1\"}")
                #expect(hosts.withLock { $0 } == ["example.com:8080"], "the target's authority replaces Host")

                try c.send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
                let options = try c.readResponse()
                #expect(options.status == 200)
                #expect(options.header("Allow") == "DELETE, GET, HEAD, OPTIONS")
                #expect(options.header("Content-Length") == "0")
                // The connection stays usable after both.
                try c.send("GET /thing HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try c.readResponse().status == 200)
            }
        }
    }

    @Test func targetsInNoFormAndInvalidHostsAreRefused() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router) { server in
                for (request, status) in [("GET thing HTTP/1.1\r\nHost: x\r\n\r\n", 400),
                                          ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
                                          ("GET /thing HTTP/1.1\r\nHost: x/y\r\n\r\n", 400),
                                          ("GET /thing HTTP/1.1\r\nHost: x:70000\r\n\r\n", 400),
                                          ("CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 501)] {
                    let c = try TCPClient(port: server.port)
                    try c.send(request + "GET /thing HTTP/1.1\r\nHost: x\r\n\r\n")
                    let r = try c.readResponse()
                    #expect(r.status == status, "\(request)")
                    #expect(r.header("Connection") == "close")
                    #expect(c.waitForClose(), "nothing behind a refused request is answered")
                }
            }
        }
    }

    @Test func defaultRendererQuotesTheMessage() {
        let r = ServerRefusal.defaultRenderer(ServerRefusal(status: .badRequest, message: "bad \"header\"\n"))
        #expect(r.status == .badRequest)
        #expect(r.body == Array("{\"code\":40000,\"message\":\"bad \\\"header\\\"\\n\"}".utf8))
        #expect(r.headers["Content-Type"] == "application/json")
    }
}
