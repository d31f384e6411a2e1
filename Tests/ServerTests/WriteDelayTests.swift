import Reactor
import Synchronization
import Testing
import TestKit
import WebSocket
@testable import Server
#if canImport(Glibc)
import Glibc
#endif

/// `ServerConfiguration.writeDelay` (TR-5's paced fan-out): an event (`sendEvent`) waits for the
/// loop's window, at most the delay; an answer (`sendFrame`) is never held and takes what is held
/// with it, in order; with no delay an event goes out before the loop sleeps.
@Suite("Write delay", .serialized)
struct WriteDelayTests {
    static func text(_ s: String) -> ByteBlock { ByteBlock.from(WebSocketFrameEncoder.frame(opcode: .text, payload: Array(s.utf8))) }

    /// One WebSocket on a one-loop server with `delay`; `post` runs a body on the loop with the
    /// server side of the connection.
    func withConnection(delay: Duration, _ check: (_ client: WSClient, _ post: @escaping @Sendable (@escaping @Sendable (Connection) -> Void) -> Void) throws -> Void) async throws {
        try await offPool { () throws in
            let list = ConnectionList()
            try withServer(upgradeHandler: { _, _, _ in .accept(list) }, configure: { $0.writeDelay = delay }) { server in
                let client = try WSClient(port: server.port, path: "/ws")
                #expect(eventually(10) { list.opened.load(ordering: .relaxed) == 1 })
                let loop = try #require(list.loop.withLock { $0 })
                let bound = LoopBound(list, loop: loop)
                try check(client) { body in loop.execute { body(bound.value.connections[0]) } }
            }
        }
    }

    @Test("TR-5: with a write delay an event waits for the window, an answer is not held and takes the held event first, and a later event goes out when the window closes")
    func eventsWaitForTheWindowAndAnswersDoNot() async throws {
        try await withConnection(delay: .seconds(2)) { (client, post) throws in
            let opened = Instant.now()
            post { $0.sendEvent(Self.text("event 1")) }
            // Held: nothing arrives well inside the window.
            #expect(throws: (any Error).self) { try client.readText(timeout: 0.5) }
            let asked = Instant.now()
            post { c in
                c.sendEvent(Self.text("event 2"))
                c.sendFrame(Self.text("answer"))
                c.sendEvent(Self.text("event 3"))
            }
            // The answer goes out at once with everything queued before and with it, in order.
            #expect(try client.readText(timeout: 5) == "event 1")
            #expect(try client.readText(timeout: 5) == "event 2")
            #expect(try client.readText(timeout: 5) == "answer")
            #expect(try client.readText(timeout: 5) == "event 3")
            let answered = Instant.now() - asked
            #expect(answered < .milliseconds(1400), "the answer was held: \(answered)")
            // The window was opened by event 1: nothing waits past it by more than the delay.
            #expect(Instant.now() - opened < .seconds(4))
            // A new window once the first has closed: held again, then written when it closes.
            while Instant.now() - opened < .milliseconds(2500) { usleep(20_000) }
            let sent = Instant.now()
            post { $0.sendEvent(Self.text("event 4")) }
            #expect(try client.readText(timeout: 6) == "event 4")
            let waited = Instant.now() - sent
            #expect(waited >= .milliseconds(1500), "event 4 was not held: \(waited)")
        }
    }

    @Test("TR-5: without a write delay (the default) an event is written before the loop sleeps")
    func noDelayWritesAtOnce() async throws {
        #expect(ServerConfiguration().writeDelay == .zero)
        try await withConnection(delay: .zero) { (client, post) throws in
            let sent = Instant.now()
            post { $0.sendEvent(Self.text("event")) }
            #expect(try client.readText(timeout: 5) == "event")
            #expect(Instant.now() - sent < .seconds(1))
        }
    }
}
