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

/// The loop writes a fan-out in slices of `LoopContext.flushBudget` connections and takes what
/// arrived between slices (ARCHITECTURE §4): nothing is lost or reordered on the way.
@Suite("Fan-out written in slices", .serialized)
struct FlushSliceTests {
    @Test func aFanOutLargerThanASliceReachesEveryConnectionInOrder() async throws {
        try await offPool { () throws in
            let list = ConnectionList()
            try withServer(upgradeHandler: { _, _, _ in .accept(list) }) { server in
                let count = LoopContext.flushBudget * 2 + 17
                let clients = try (0..<count).map { _ in try WSClient(port: server.port, path: "/ws") }
                #expect(eventually(10) { list.opened.load(ordering: .relaxed) == count })
                let loop = try #require(list.loop.withLock { $0 })
                let frames = (1...4).map { ByteBlock.from(WebSocketFrameEncoder.frame(opcode: .text, payload: Array("event \($0)".utf8))) }
                let box = LoopBoundList(list)
                // Event 1 to everyone; events 2-4 each posted from the task before, so they are taken
                // while the earlier ones are still being written slice by slice.
                loop.execute {
                    @Sendable func send(_ i: Int) {
                        for c in box.list.connections { c.sendFrame(frames[i]) }
                        if i + 1 < frames.count { loop.execute { send(i + 1) } }
                    }
                    send(0)
                }
                for (n, client) in clients.enumerated() {
                    for i in 1...4 {
                        let text = try client.readText(timeout: 10)
                        #expect(text == "event \(i)", "connection \(n): frame \(i) was \(text)")
                    }
                }
            }
        }
    }

    @Test func aSteadyFanOutKeepsTheSliceListBounded() async throws {
        try await offPool { () throws in
            let list = ConnectionList()
            try withServer(upgradeHandler: { _, _, _ in .accept(list) }) { server in
                let count = LoopContext.flushBudget * 2 + 17
                let clients = try (0..<count).map { _ in try WSClient(port: server.port, path: "/ws") }
                #expect(eventually(10) { list.opened.load(ordering: .relaxed) == count })
                let loop = try #require(list.loop.withLock { $0 })
                let events = 120
                let frames = (0..<events).map { ByteBlock.from(WebSocketFrameEncoder.frame(opcode: .text, payload: Array("e\($0)".utf8))) }
                let box = LoopBoundList(list)
                let progress = SliceProgress()
                // One event per loop iteration, faster than a pass over the connections (three
                // slices): the list of dirty connections never runs empty.
                loop.execute {
                    @Sendable func send(_ i: Int) {
                        let connections = box.list.connections
                        for c in connections { c.sendFrame(frames[i]) }
                        let held = connections[0].context.dirtyListCount
                        progress.largest.withLock { $0 = max($0, held) }
                        if i + 1 < frames.count { loop.execute { send(i + 1) } } else { progress.done.store(true, ordering: .releasing) }
                    }
                    send(0)
                }
                #expect(eventually(10) { progress.done.load(ordering: .acquiring) })
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
                #expect(most <= 2 * count + 4 * LoopContext.flushBudget, "the slice list held \(most) entries for \(count) connections")
            }
        }
    }
}

/// Carries the list into loop tasks (`@Sendable` closures).
struct LoopBoundList: @unchecked Sendable {
    // Safety: only dereferenced inside tasks run on the server's loop.
    let list: ConnectionList
    init(_ list: ConnectionList) { self.list = list }
}

/// The steady fan-out's largest slice list and its end (written on the loop, read by the test).
final class SliceProgress: Sendable {
    let largest = Mutex(0)
    let done = Atomic<Bool>(false)
}
