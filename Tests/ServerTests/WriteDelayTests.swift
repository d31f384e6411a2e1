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

    /// The delay of the tests below: long, so that what was held and what was not stay far apart
    /// on a loaded machine (a held frame comes about this long after its window opened).
    static let window = Duration.seconds(4)

    /// True when nothing arrives for `seconds` (the event is held). Something arriving is a defect
    /// unless the window (opened at `opened`) had already closed, on a machine that stalled that
    /// long: then the run cannot show holding, and the caller ends it.
    static func held(_ client: WSClient, for seconds: Double, opened: Instant) -> Bool {
        guard let early = try? client.readText(timeout: seconds) else { return true }
        let after = Instant.now() - opened
        #expect(after >= window, "\(early) came \(after) after the window opened, before it closed")
        return false
    }

    /// Sends `first` on a quiet loop: it goes at once (not held), and the window opens. Returns
    /// when it was sent.
    static func openWindow(_ client: WSClient, _ post: (@escaping @Sendable (Connection) -> Void) -> Void, first: String) throws -> Instant {
        let opened = Instant.now()
        post { $0.sendEvent(text(first)) }
        #expect(try client.readText(timeout: 10) == first)
        #expect(Instant.now() - opened < window / 2, "the first event of a quiet loop was held")
        return opened
    }

    @Test("TR-5: with a write delay the first event of a quiet loop goes at once, later ones wait for the window (at most the delay), an answer is not held and takes the held events first, and the loop is quiet again after a window that held nothing")
    func eventsWaitForTheWindowAndAnswersDoNot() async throws {
        try await withConnection(delay: Self.window) { (client, post) throws in
            // Quiet loop: written before it sleeps, and the window opens.
            let opened = try Self.openWindow(client, post, first: "event 1")
            // Inside the window: held.
            post { $0.sendEvent(Self.text("event 2")) }
            guard Self.held(client, for: 0.4, opened: opened) else { return }
            let asked = Instant.now()
            post { c in
                c.sendEvent(Self.text("event 3"))
                c.sendFrame(Self.text("answer"))
                c.sendEvent(Self.text("event 4"))
            }
            // The answer goes out at once with everything queued before and with it, in order
            // (held, it would come with the window's close, about 3.5 s from now).
            for expected in ["event 2", "event 3", "answer", "event 4"] {
                #expect(try client.readText(timeout: 10) == expected)
            }
            let answered = Instant.now() - asked
            #expect(answered < Self.window / 2, "the answer was held: \(answered)")
            // Still inside the window: held until it closes.
            post { $0.sendEvent(Self.text("event 5")) }
            #expect(try client.readText(timeout: 10) == "event 5")
            let released = Instant.now() - opened
            #expect(released >= Self.window * 3 / 4, "event 5 came \(released) after the window opened")
            // That window held something, so another follows; after it, nothing held, the loop is
            // quiet again and an event goes at once.
            while Instant.now() - opened < Self.window * 2 + .milliseconds(600) { usleep(20_000) }
            let sent = Instant.now()
            post { $0.sendEvent(Self.text("event 6")) }
            #expect(try client.readText(timeout: 10) == "event 6")
            #expect(Instant.now() - sent < Self.window / 2, "a quiet loop held event 6")
        }
    }

    @Test("TR-5, QS-3: a held queue past maxHeldBytes is written at once, so held events never make a reader that keeps up look slow")
    func aQueuePastTheHoldBoundIsNotHeld() async throws {
        let event = Self.text(String(repeating: "x", count: 100))
        try await withConnection(delay: Self.window, maxHeld: 3 * (event.count + 64)) { (client, post) throws in
            let opened = try Self.openWindow(client, post, first: "first")
            // Two held events stay under the bound: held.
            post { c in
                c.sendEvent(event)
                c.sendEvent(event)
            }
            guard Self.held(client, for: 0.4, opened: opened) else { return }
            // The fourth passes it: all four go now, long before the window closes.
            let passed = Instant.now()
            post { c in
                c.sendEvent(event)
                c.sendEvent(event)
            }
            for _ in 0..<4 { #expect(try client.readText(timeout: 10).count == 100) }
            let at = Instant.now() - passed
            #expect(at < Self.window / 2, "held past its bound for \(at)")
        }
    }

    @Test("TR-5: a held connection that is closed writes its held events before the close frame, without waiting for the window")
    func aCloseTakesTheHeldEvents() async throws {
        try await withConnection(delay: Self.window) { (client, post) throws in
            let opened = try Self.openWindow(client, post, first: "first")
            post { $0.sendEvent(Self.text("held")) }
            guard Self.held(client, for: 0.3, opened: opened) else { return }
            let closing = Instant.now()
            post { $0.close(code: .goingAway, reason: "bye") }
            #expect(try client.readText(timeout: 10) == "held")
            guard case .close(let code, _) = try client.readFrame(timeout: 10) else {
                Issue.record("no close frame after the held event")
                return
            }
            #expect(code == WebSocketCloseCode.goingAway.rawValue)
            #expect(Instant.now() - closing < Self.window / 2, "the close waited for the window")
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
