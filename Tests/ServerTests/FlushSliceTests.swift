import Reactor
import Synchronization
import Testing
import TestKit
import WebSocket
@testable import Server
#if canImport(Glibc)
import Glibc
#endif

/// Keeps the open connections (the list is touched on the server's one loop only).
final class ConnectionList: WebSocketHandler, @unchecked Sendable {
    // Safety: `connections` is read and written only on the loop thread (the handler callbacks and
    // the tasks the test posts to that loop); `opened` and `loop` are synchronised.
    var connections: [Connection] = []
    let opened = Atomic<Int>(0)
    let loop = Mutex<EventLoop?>(nil)
    func webSocketDidOpen(_ connection: Connection) {
        connections.append(connection)
        loop.withLock { $0 = connection.context.loop }
        opened.add(1, ordering: .relaxed)
    }
    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {}
    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) {}
}

/// The steady fan-out's largest slice list (written on the loop, read by the test once every
/// frame has arrived).
final class SliceProgress: Sendable {
    let largest = Mutex(0)
}

/// The loop writes a fan-out in slices of `LoopContext.flushBudget` connections and takes what
/// arrived between slices (ARCHITECTURE §4): nothing is lost or reordered on the way.
@Suite("Fan-out written in slices", .serialized)
struct FlushSliceTests {
    /// More connections than two slices (one server loop), and `frames` sent to all of them from
    /// loop tasks, each event posted by the task before it: the next is taken while the earlier
    /// ones are still being written slice by slice. `sent` runs on the loop after each event.
    func sliced(frames: [ByteBlock], sent: @escaping @Sendable ([Connection]) -> Void = { _ in },
                _ check: (_ clients: [WSClient]) throws -> Void) async throws {
        try await offPool { () throws in
            let list = ConnectionList()
            try withServer(upgradeHandler: { _, _, _ in .accept(list) }) { server in
                let count = LoopContext.flushBudget * 2 + 17
                let clients = try (0..<count).map { _ in try WSClient(port: server.port, path: "/ws") }
                #expect(eventually(10) { list.opened.load(ordering: .relaxed) == count })
                let loop = try #require(list.loop.withLock { $0 })
                let bound = LoopBound(list, loop: loop)
                loop.execute {
                    @Sendable func send(_ i: Int) {
                        let connections = bound.value.connections
                        for c in connections { c.sendFrame(frames[i]) }
                        sent(connections)
                        if i + 1 < frames.count { loop.execute { send(i + 1) } }
                    }
                    send(0)
                }
                try check(clients)
            }
        }
    }

    static func frames(_ texts: [String]) -> [ByteBlock] {
        texts.map { ByteBlock.from(WebSocketFrameEncoder.frame(opcode: .text, payload: Array($0.utf8))) }
    }

    @Test func aFanOutLargerThanASliceReachesEveryConnectionInOrder() async throws {
        try await sliced(frames: Self.frames((1...4).map { "event \($0)" })) { clients in
            for (n, client) in clients.enumerated() {
                for i in 1...4 {
                    let text = try client.readText(timeout: 10)
                    #expect(text == "event \(i)", "connection \(n): frame \(i) was \(text)")
                }
            }
        }
    }

    // QS-7: `whenWritten` (what roomcast_fanout_delay_seconds waits for) runs once the slice
    // passes have written every connection that had output queued when it was asked, not before.
    @Test func whenWrittenWaitsForEverySliceOfTheFanOut() async throws {
        let seen = Mutex<(queuedWhenAsked: Int, queuedWhenRun: Int)?>(nil)
        try await sliced(frames: Self.frames(["one"]), sent: { connections in
            let queued = connections.filter { $0.queuedBytes > 0 }.count
            connections[0].context.whenWritten {
                let left = connections.filter { $0.queuedBytes > 0 }.count
                seen.withLock { $0 = (queued, left) }
            }
        }) { clients in
            for client in clients {
                let text = try client.readText(timeout: 10)
                #expect(text == "one")
            }
            #expect(eventually(5) { seen.withLock { $0 } != nil })
            let s = seen.withLock { $0 }
            #expect(s?.queuedWhenAsked == clients.count, "every connection had the event queued when asked")
            #expect(s?.queuedWhenRun == 0, "and none had it queued any more when the body ran")
        }
    }

    @Test func aSteadyFanOutKeepsTheSliceListBounded() async throws {
        // One event per loop iteration, faster than a pass over the connections (three slices):
        // the list of dirty connections never runs empty.
        let events = 120
        let progress = SliceProgress()
        try await sliced(frames: Self.frames((0..<events).map { "e\($0)" }), sent: { connections in
            let held = connections[0].context.dirtyListCount
            progress.largest.withLock { $0 = max($0, held) }
        }) { clients in
            for (n, client) in clients.enumerated() {
                for i in 0..<events {
                    let text = try client.readText(timeout: 10)
                    guard text == "e\(i)" else {
                        Issue.record("connection \(n): frame \(i) was \(text)")
                        return
                    }
                }
            }
            // Without dropping the written prefix the list grew by a slice per event (about
            // 30,000 entries here); with it, it stays within a few passes' worth.
            let most = progress.largest.withLock { $0 }
            #expect(most <= 2 * clients.count + 4 * LoopContext.flushBudget, "the slice list held \(most) entries for \(clients.count) connections")
        }
    }
}
