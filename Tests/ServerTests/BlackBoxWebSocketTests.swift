import Foundation
import Testing
import TestKit
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

func startEcho(_ extra: [String] = []) throws -> (RunningProcess, UInt16) {
    let port = freePort()
    let process = try RunningProcess(path: try productPath("roomcast-echo"), arguments: ["--port", "\(port)"] + extra)
    return (process, try process.waitForPort())
}

@Suite("roomcast-echo over real sockets: WebSocket", .serialized)
struct BlackBoxWebSocketTests {
    @Test func upgradeAndEcho() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho()
            defer { server.kill9() }
            let ws = try WSClient(port: port)
            #expect(ws.handshakeResponse.header("Sec-WebSocket-Accept") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
            try ws.sendText("hello")
            #expect(try ws.readFrame() == .text("hello"))
            try ws.send(.binary, [0, 1, 2, 255])
            #expect(try ws.readFrame() == .binary([0, 1, 2, 255]))
            try ws.send(.text, Array("frag".utf8), fin: false)
            try ws.send(.ping, Array("p".utf8))
            try ws.send(.continuation, Array("ment".utf8))
            #expect(try ws.readFrame() == .pong(Array("p".utf8)))
            #expect(try ws.readFrame() == .text("fragment"))
        }
    }

    @Test func closeHandshakeEchoesCode() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho()
            defer { server.kill9() }
            let ws = try WSClient(port: port)
            try ws.close(code: 1000)
            #expect(try ws.readFrame() == .close(1000, ""))
            #expect(ws.tcp.waitForClose())
        }
    }

    @Test func protocolErrorClosesWith1002() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho()
            defer { server.kill9() }
            let ws = try WSClient(port: port)
            // An unmasked client frame.
            try ws.tcp.send(WebSocketFrameEncoder.frame(opcode: .text, payload: Array("x".utf8)))
            guard case .close(let code, _) = try ws.readFrame() else { Issue.record("no close"); return }
            #expect(code == 1002)
            #expect(ws.tcp.waitForClose())
        }
    }

    @Test func oversizedMessageClosesWith1009() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho(["--max-message-bytes", "1000"])
            defer { server.kill9() }
            let ws = try WSClient(port: port)
            try ws.send(.binary, [UInt8](repeating: 7, count: 1001))
            guard case .close(let code, _) = try ws.readFrame() else { Issue.record("no close"); return }
            #expect(code == 1009)
        }
    }

    @Test func permessageDeflateIsNegotiatedAndUsed() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho()
            defer { server.kill9() }
            let ws = try WSClient(port: port, headers: ["Sec-WebSocket-Extensions": "permessage-deflate; client_max_window_bits"])
            #expect(ws.handshakeResponse.header("Sec-WebSocket-Extensions") == "permessage-deflate")
            // Send a compressed message; the echo comes back compressed (RSV1) and inflates to the same text.
            let deflater = try MessageDeflater(windowBits: 15, noContextTakeover: false)
            let text = String(repeating: "compress me ", count: 50)
            try ws.tcp.send(WebSocketFrameEncoder.frame(opcode: .text, payload: try deflater.compress(Array(text.utf8)), rsv1: true, maskKey: 0x11223344))
            let head = try ws.tcp.read(exactly: 2)
            #expect(head[0] == 0xC1, "FIN + RSV1 + text")
            let length = Int(head[1] & 0x7F)
            #expect(length < text.utf8.count)
            let payload = try ws.tcp.read(exactly: length)
            let inflater = try MessageInflater(noContextTakeover: false, maxOutputBytes: 1 << 20)
            var out: [UInt8] = []
            try payload.withUnsafeBytes { _ = try inflater.inflate($0, into: &out) }
            try inflater.finishMessage(into: &out)
            #expect(String(decoding: out, as: UTF8.self) == text)
        }
    }

    @Test func handshakeRefusals() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho()
            defer { server.kill9() }
            func attempt(_ request: String) throws -> TCPClient.HTTPResponse {
                let c = try TCPClient(port: port)
                try c.send(request)
                let r = try c.readResponse()
                if r.status != 101 { #expect(c.waitForClose(), "a refused upgrade closes the connection") }
                return r
            }
            let base = "Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            #expect(try attempt("GET / HTTP/1.1\r\n" + base + "Sec-WebSocket-Version: 13\r\n\r\n").status == 101)
            #expect(try attempt("POST / HTTP/1.1\r\n" + base + "Sec-WebSocket-Version: 13\r\nContent-Length: 0\r\n\r\n").status == 400)
            #expect(try attempt("GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").status == 400)
            #expect(try attempt("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").status == 400)
            #expect(try attempt("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: nope\r\nSec-WebSocket-Version: 13\r\n\r\n").status == 400)
            let wrongVersion = try attempt("GET / HTTP/1.1\r\n" + base + "Sec-WebSocket-Version: 8\r\n\r\n")
            #expect(wrongVersion.status == 426)
            #expect(wrongVersion.header("Sec-WebSocket-Version") == "13")
            #expect(wrongVersion.text.contains("\"code\":42600,"))
        }
    }

    @Test func originOutsideAllowlistIs403() async throws {
        try await offPool { () throws in
            let (server, port) = try startRoomcast(["--allowed-origin", "https://app.example.com"])
            defer { server.kill9() }
            let c = try TCPClient(port: port)
            try c.send("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nOrigin: https://evil.example.net\r\n\r\n")
            #expect(try c.readResponse().status == 403)
        }
    }

    @Test func sigtermSendsGoingAwayAndExitsZero() async throws {
        try await offPool { () throws in
            let (server, port) = try startEcho()
            let a = try WSClient(port: port)
            let b = try WSClient(port: port)
            try a.sendText("before")
            #expect(try a.readFrame() == .text("before"))
            server.signal(SIGTERM)
            for ws in [a, b] {
                guard case .close(let code, _) = try ws.readFrame() else { Issue.record("no close"); continue }
                #expect(code == 1001)
                try ws.close(code: 1001)
            }
            #expect(server.waitForExit() == 0)
        }
    }
}
