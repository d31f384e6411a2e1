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
    func withConnection(delay: Duration, maxHeld: Int = ServerConfiguration().maxHeldBytes, _ check: (_ client: WSClient, _ post: @escaping @Sendable (@escaping @Sendable (Connection) -> Void) -> Void) throws -> Void) async throws {
        try await offPool { () throws in
            let list = ConnectionList()
            try withServer(upgradeHandler: { _, _, _ in .accept(list) }, configure: { $0.writeDelay = delay; $0.maxHeldBytes = maxHeld }) { server in
                let client = try WSClient(port: server.port, path: "/ws")
                #expect(eventually(10) { list.opened.load(ordering: .relaxed) == 1 })
                let loop = try #require(list.loop.withLock { $0 })
                let bound = LoopBound(list, loop: loop)
                try check(client) { body in loop.execute { body(bound.value.connections[0]) } }
            }
        }
    }

    @Test("TR-5: with a write delay the first event of a quiet loop goes at once, later ones wait for the window (at most the delay), an answer is not held and takes the held events first, and the loop is quiet again after a window that held nothing")
    func eventsWaitForTheWindowAndAnswersDoNot() async throws {
        try await withConnection(delay: .seconds(2)) { (client, post) throws in
            // Quiet loop: written before it sleeps, and the window opens (2 s).
            let opened = Instant.now()
            post { $0.sendEvent(Self.text("event 1")) }
            #expect(try client.readText(timeout: 5) == "event 1")
            #expect(Instant.now() - opened < .seconds(1))
            // Inside the window: held.
            post { $0.sendEvent(Self.text("event 2")) }
            #expect(throws: (any Error).self) { try client.readText(timeout: 0.4) }
            let asked = Instant.now()
            post { c in
                c.sendEvent(Self.text("event 3"))
                c.sendFrame(Self.text("answer"))
                c.sendEvent(Self.text("event 4"))
            }
            // The answer goes out at once with everything queued before and with it, in order.
            for expected in ["event 2", "event 3", "answer", "event 4"] {
                #expect(try client.readText(timeout: 5) == expected)
            }
            let answered = Instant.now() - asked
            #expect(answered < .milliseconds(1000), "the answer was held: \(answered)")
            // Still inside the window: held until it closes, about 2 s after it opened.
            post { $0.sendEvent(Self.text("event 5")) }
            #expect(try client.readText(timeout: 5) == "event 5")
            let released = Instant.now() - opened
            #expect(released >= .milliseconds(1500) && released < .milliseconds(3500), "event 5 came \(released) after the window opened")
            // That window held something, so another follows (until about 4 s); after it, nothing
            // held, the loop is quiet again and an event goes at once.
            while Instant.now() - opened < .milliseconds(4600) { usleep(20_000) }
            let sent = Instant.now()
            post { $0.sendEvent(Self.text("event 6")) }
            #expect(try client.readText(timeout: 5) == "event 6")
            #expect(Instant.now() - sent < .milliseconds(1000), "a quiet loop held event 6")
        }
    }

    @Test("TR-5, QS-3: a held queue past maxHeldBytes is written at once, so held events never make a reader that keeps up look slow")
    func aQueuePastTheHoldBoundIsNotHeld() async throws {
        let event = Self.text(String(repeating: "x", count: 100))
        try await withConnection(delay: .seconds(3), maxHeld: 3 * (event.count + 64)) { (client, post) throws in
            let opened = Instant.now()
            post { $0.sendEvent(Self.text("first")) }
            #expect(try client.readText(timeout: 5) == "first")
            // Two held events stay under the bound: held.
            post { c in
                c.sendEvent(event)
                c.sendEvent(event)
            }
            #expect(throws: (any Error).self) { try client.readText(timeout: 0.4) }
            // The fourth passes it: all four go now, long before the window closes.
            post { c in
                c.sendEvent(event)
                c.sendEvent(event)
            }
            for _ in 0..<4 { #expect(try client.readText(timeout: 5).count == 100) }
            let at = Instant.now() - opened
            #expect(at < .milliseconds(2500), "held past its bound until \(at)")
        }
    }

    @Test("TR-5: a held connection that is closed writes its held events before the close frame, without waiting for the window")
    func aCloseTakesTheHeldEvents() async throws {
        try await withConnection(delay: .seconds(3)) { (client, post) throws in
            post { $0.sendEvent(Self.text("first")) }
            #expect(try client.readText(timeout: 5) == "first")
            post { $0.sendEvent(Self.text("held")) }
            #expect(throws: (any Error).self) { try client.readText(timeout: 0.3) }
            let closing = Instant.now()
            post { $0.close(code: .goingAway, reason: "bye") }
            #expect(try client.readText(timeout: 5) == "held")
            guard case .close(let code, _) = try client.readFrame(timeout: 5) else {
                Issue.record("no close frame after the held event")
                return
            }
            #expect(code == WebSocketCloseCode.goingAway.rawValue)
            #expect(Instant.now() - closing < .milliseconds(2000), "the close waited for the window")
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
