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
func withServer(router: Router = Router.Builder().build(),
                upgradeHandler: @escaping UpgradeHandler = { _, _, _ in .reject(Response(status: .notFound)) },
                _ body: (HTTPServer) throws -> Void) throws {
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.eventLoops = 1
    configuration.drainTimeout = .seconds(2)
    var logger = Logger(label: "server-test")
    logger.logLevel = .warning
    let server = try HTTPServer(configuration: configuration, router: router, upgradeHandler: upgradeHandler, logger: logger)
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
    @Test func closeCodeComesFromTheCloseFrameSent() throws {
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
