import Foundation
import Testing
import TestKit
#if canImport(Glibc)
import Glibc
#endif

/// Starts the built `roomcast` binary on a free port.
func startRoomcast(_ extra: [String] = []) throws -> (RunningProcess, UInt16) {
    let process = try RunningProcess(path: try productPath("roomcast"),
                                     arguments: ["--port", "0", "--data-dir", temporaryDirectory("roomcast-server"), "--log-level", "warning"] + extra)
    return (process, try process.waitForPort())
}

@Suite("roomcast over real sockets: HTTP")
struct BlackBoxHTTPTests {
    @Test func healthAndReadiness() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let health = try c.readResponse()
            #expect(health.status == 200)
            #expect(health.header("Content-Type") == "application/json")
            #expect(health.header("Date")?.hasSuffix(" GMT") == true)
            #expect(health.text.contains("\"ok\""))
            try c.send("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try c.readResponse().status == 200)
        }
    }

    @Test func unknownPathAndWrongMethod() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET /no/such/path HTTP/1.1\r\nHost: x\r\n\r\n")
            let notFound = try c.readResponse()
            #expect(notFound.status == 404)
            #expect(notFound.text.contains("\"code\":40400,"))
            try c.send("DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let r = try c.readResponse()
            #expect(r.status == 405)
            #expect(r.header("Allow") == "GET, HEAD")
            #expect(r.text.contains("\"code\":40500,"))
            try c.send("TRACE /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try c.readResponse().status == 405)
        }
    }

    @Test func headHasLengthButNoBody() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try c.readResponse(headRequest: true)
            #expect(head.status == 200)
            #expect(head.header("Content-Length") == "15")
            // The next response starts right after the HEAD response's header section.
            #expect(try c.readResponse().text == "{\"status\":\"ok\"}")
        }
    }

    @Test func pipelinedResponsesInRequestOrder() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\n\r\nPOST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try (0..<4).map { _ in try c.readResponse().status } == [200, 404, 405, 200])
        }
    }

    /// RFC 9112 §3.2.2: a server must accept the absolute form; §3.2.4: OPTIONS *.
    @Test func absoluteAndAsteriskFormTargets() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET http://127.0.0.1:\(port)/healthz HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
            let health = try c.readResponse()
            #expect(health.status == 200)
            #expect(health.text == "{\"status\":\"ok\"}")
            try c.send("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n")
            let options = try c.readResponse()
            #expect(options.status == 200)
            #expect(options.header("Allow")?.contains("GET") == true)
        }
    }

    @Test func chunkedAndExpectContinue() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("POST /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            #expect(try c.readResponse().status == 100)
            try c.send("body")
            #expect(try c.readResponse().status == 405)
            try c.send("POST /healthz HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try c.readResponse().status == 405)
            #expect(try c.readResponse().status == 200)
        }
    }

    @Test func http10ClosesUnlessKeepAlive() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            defer { server.kill9() }
            let a = try TCPClient(port: port)
            try a.send("GET /healthz HTTP/1.0\r\n\r\n")
            #expect(try a.readResponse().header("Connection") == "close")
            #expect(a.waitForClose())
            let b = try TCPClient(port: port)
            try b.send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /healthz HTTP/1.0\r\n\r\n")
            #expect(try b.readResponse().header("Connection") == "keep-alive")
            #expect(try b.readResponse().status == 200)
            #expect(b.waitForClose())
        }
    }

    /// Each refusal closes the connection, and a request pipelined behind it gets no response.
    @Test("refusals close the connection", arguments: [
        ("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n", 400),
        ("GET / HTTP/1.1\nHost: x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost : x\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\n\r\n", 400),
        ("GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
        ("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        ("GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
        ("GET healthz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("GET /healthz HTTP/1.1\r\nHost: x y\r\n\r\n", 400),
        ("GET /healthz HTTP/1.1\r\nHost: user@x\r\n\r\n", 400),
        ("GET * HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ("CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n", 501),
        ("GET /" + String(repeating: "a", count: 9000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414),
        ("GET / HTTP/1.1\r\nHost: x\r\n" + (0..<101).map { "X-\($0): v\r\n" }.joined() + "\r\n", 431),
    ])
    func refusalCloses(_ request: String, _ status: Int) throws {
        let (server, port) = try startRoomcast()
        defer { server.kill9() }
        let c = try TCPClient(port: port)
        try c.send(request + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        let r = try c.readResponse()
        #expect(r.status == status)
        #expect(r.header("Connection") == "close")
        // HTTP-level refusals carry code = status × 100 (the error table's convention).
        #expect(r.text.contains("\"code\":\(status * 100),"))
        #expect(c.waitForClose(), "connection must close and nothing more be answered")
    }

    @Test func oversizedBodyRefusedWithoutReadingIt() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast(["--max-body-bytes", "1000"])
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            // Only the head is sent: the 413 must not wait for the body.
            try c.send("POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
            let r = try c.readResponse()
            #expect(r.status == 413)
            #expect(c.waitForClose())
        }
    }

    /// Starts roomcast with `option` at one second, lets `feed` write a request that never
    /// completes, and expects 408 (its body naming `code`) within four seconds, then a close.
    private func expect408(_ option: String, code: String, _ feed: @escaping (TCPClient) throws -> Void) async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast([option, "1"])
            defer { server.kill9() }
            let c = try TCPClient(port: port, timeout: 5)
            let start = Date()
            try feed(c)
            let r = try c.readResponse()
            #expect(r.status == 408)
            #expect(r.text.contains(code), "\(r.text)")
            #expect(Date().timeIntervalSince(start) < 4)
            #expect(c.waitForClose())
        }
    }

    @Test func slowlorisGets408() async throws {
        try await expect408("--header-timeout", code: "40800") { c in
            try c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n")
            for _ in 0..<3 {
                usleep(300_000)
                try? c.send("X-Drip: 1\r\n")
            }
        }
    }

    // A body that stops coming (a slow POST) gets 408 once --body-timeout has passed since the
    // head, and a close.
    @Test func aStalledBodyGets408() async throws {
        try await expect408("--body-timeout", code: "40800") { c in
            try c.send("POST /v1/rooms HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"roomId\"")
        }
    }

    @Test func idleKeepAliveIsClosed() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast(["--keep-alive-timeout", "1"])
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try c.readResponse().status == 200)
            #expect(c.waitForClose(timeout: 4))
        }
    }

    @Test func requestCapClosesConnection() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast(["--max-requests-per-connection", "2"])
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try c.readResponse().header("Connection") == nil)
            #expect(try c.readResponse().header("Connection") == "close")
            #expect(c.waitForClose())
        }
    }

    @Test func optionsComeFromEnvironment() async throws {
        try await offPool { () throws in
            let port = freePort()
            let process = try RunningProcess(path: try productPath("roomcast"), arguments: ["--data-dir", temporaryDirectory()],
                                             environment: ["ROOMCAST_PORT": "\(port)", "ROOMCAST_HOST": "127.0.0.1", "ROOMCAST_LOG_LEVEL": "warning"])
            defer { process.kill9() }
            #expect(try process.waitForPort() == port)
        }
    }

    @Test func helpDescribesOptions() async throws {
        try await offPool { () throws in
            let process = try RunningProcess(path: try productPath("roomcast"), arguments: ["--help"])
            #expect(process.waitForExit() == 0)
            for option in ["--host", "--port", "--max-body-bytes", "--header-timeout", "--body-timeout", "--ws-path", "ROOMCAST_PORT"] {
                #expect(process.log.contains(option), "\(option)")
            }
        }
    }

    @Test func sigtermDrainsAndExitsZero() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast()
            let idle = try TCPClient(port: port)
            try idle.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try idle.readResponse().status == 200)
            server.signal(SIGTERM)
            #expect(idle.waitForClose())
            #expect(server.waitForExit() == 0)
            #expect((try? TCPClient(port: port)) == nil, "listener must be closed")
        }
    }
}
