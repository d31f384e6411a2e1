import Foundation
import HTTP1
import Reactor
import Testing
import TestKit
import WebSocket
@testable import Server
#if canImport(Glibc)
import Glibc
#endif

/// QS-3 at the server: output that makes no progress for the send timeout is closed, and all
/// connections together have an output budget past which the ones that made progress least
/// recently are closed first. Past each bound, with the server still serving everyone else.
@Suite("Send timeout and the output budget (QS-3)", .serialized)
struct OutputBudgetTests {
    /// `GET /big`: 256 KiB (much more than the clients' 2 KiB receive buffers take).
    static let router: Router = {
        var b = Router.Builder()
        let big = Response(status: .ok, headers: HTTPHeaders(), body: [UInt8](repeating: 0x61, count: 256 * 1024))
        b.add(.GET, "/big", sync: { _ in big })
        b.add(.GET, "/small", sync: { _ in Response(status: .ok, headers: HTTPHeaders(), body: Array("ok".utf8)) })
        return b.build()
    }()

    /// Pipelines `count` requests for `/big` and never reads.
    static func pipelineAndStall(_ port: UInt16, count: Int) throws -> TCPClient {
        let c = try TCPClient(port: port, receiveBuffer: 2048)
        try c.send(Array(String(repeating: "GET /big HTTP/1.1\r\nHost: x\r\n\r\n", count: count).utf8))
        return c
    }

    // An HTTP client that pipelines requests and never reads used to keep its connection and its
    // queued answers for as long as it liked (the keep-alive timeout does not run while the
    // server waits to write). Now its output's lack of progress closes it after the send timeout.
    @Test func outputThatMakesNoProgressIsClosedAfterTheSendTimeout() async throws {
        try await offPool { () throws in
            try withServer(router: Self.router, configure: { $0.sendTimeout = .seconds(1) }) { server in
                let stalled = try Self.pipelineAndStall(server.port, count: 20)
                // Queued answers, or (on a machine too busy to look within the second) already
                // closed for them: a send timeout only counts output that was held.
                #expect(eventually(3) { server.metrics.outboundBytes > 0 || server.metrics.sendTimeouts > 0 }, "the stalled client's answers are queued")
                #expect(eventually(10) { server.metrics.sendTimeouts == 1 }, "closed after the send timeout")
                #expect(eventually(5) { server.metrics.outboundBytes == 0 && server.metrics.open == 0 }, "and nothing is held for it any more")
                _ = stalled
                // The server serves others all along.
                let other = try TCPClient(port: server.port)
                try other.send(Array("GET /small HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                #expect(try other.readResponse().text == "ok")
            }
        }
    }

    /// Sends `count` binary messages of `size` bytes as soon as the WebSocket opens.
    final class Burst: WebSocketHandler, Sendable {
        let count: Int, size: Int
        init(count: Int, size: Int) {
            self.count = count
            self.size = size
        }
        func webSocketDidOpen(_ connection: Connection) {
            let payload = [UInt8](repeating: 0x62, count: size)
            for _ in 0..<count { connection.send(.binary(payload)) }
        }
        func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {}
        func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) {}
    }

    // A reader that is slow but steady is not closed for the send timeout. Linux reports its socket
    // writable again only once a third of the send buffer has drained (a WebSocket's is fixed at
    // 128 KiB, which the kernel doubles: about 85 KB), so no write succeeds for longer than the
    // timeout at this pace; the kernel's unacknowledged bytes falling between two ticks count as
    // progress. Once it stops reading, it is closed.
    @Test func aSlowSteadyReaderIsNotClosedForTheSendTimeout() async throws {
        try await offPool { () throws in
            let burst = Burst(count: 64, size: 16 * 1024)
            try withServer(upgradeHandler: { _, _, _ in .accept(burst) }, configure: { $0.sendTimeout = .seconds(3) }) { server in
                let ws = try WSClient(port: server.port, path: "/ws", receiveBuffer: 4096)
                // A read every 400 ms takes at most what the receive buffer holds (4 KiB, which the
                // kernel doubles): at most 60 KB in a send timeout, less than the 85 KB that would
                // make the socket writable again. For 8 s: more than two timeouts.
                let end = Date().addingTimeInterval(8)
                var read = 0, reads = 0
                while Date() < end {
                    usleep(400_000)
                    read += try ws.tcp.readSome().count
                    reads += 1
                }
                #expect(read > 30_000 && read <= reads * 8192, "read \(read) bytes in \(reads) reads")
                #expect(server.metrics.sendTimeouts == 0, "a reader that keeps reading is not timed out")
                #expect(server.metrics.open == 1)
                // Stopped, it is closed after the send timeout.
                #expect(eventually(12) { server.metrics.sendTimeouts == 1 }, "closed once it stopped reading")
            }
        }
    }

    // Past the budget of all connections' output, connections are closed (the stalest first)
    // until what is held is back under it; a client that reads keeps its connection.
    @Test func allConnectionsTogetherStayWithinTheOutputBudget() async throws {
        try await offPool { () throws in
            let budget = 1 << 20
            try withServer(router: Self.router, configure: { $0.maxTotalOutboundBytes = budget }) { server in
                let reader = try TCPClient(port: server.port)
                var stalled: [TCPClient] = []
                for _ in 0..<4 {
                    stalled.append(try Self.pipelineAndStall(server.port, count: 12))
                    usleep(100_000)
                }
                #expect(eventually(10) { server.metrics.shedForBudget >= 1 }, "over the budget: connections are shed")
                // Within a few sweeps what is held is back under the budget, and it stays there.
                #expect(eventually(10) { server.metrics.outboundBytes <= budget }, "held \(server.metrics.outboundBytes)")
                let shed = server.metrics.shedForBudget
                #expect(shed >= 1 && shed <= 4)
                // The reading client was never a candidate: it gets every answer.
                for _ in 0..<3 {
                    try reader.send(Array("GET /small HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                    #expect(try reader.readResponse().text == "ok")
                }
                _ = stalled
            }
        }
    }
}
