import Foundation
import HTTP1
import Reactor
import Synchronization
import Testing
import TestKit
import WebSocket
@testable import Server
#if canImport(Glibc)
import Glibc
#endif

/// Counts requests a route answered, and records WebSocket messages delivered (any thread).
final class Tally: WebSocketHandler, Sendable {
    let requests = Atomic<Int>(0)
    let messages = Mutex<[String]>([])
    let writerDone = Atomic<Bool>(false)
    func webSocketDidOpen(_ connection: Connection) {}
    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage) {
        messages.withLock { $0.append(String(decoding: message.bytes, as: UTF8.self)) }
    }
    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?) {}
}

/// The connection shell's side of ServerConfiguration.maxOutboundBytes: input stops while the
/// queue is over the bound, and resumes, losing nothing, once the peer has read.
@Suite("Outbound bound: connection logic in process", .serialized)
struct OutboundBoundTests {
    static let bodySize = 64 * 1024

    @Test func pipelinedRequestsWaitWhileTheQueueIsOverTheBound() async throws {
        try await offPool { () throws in
            let tally = Tally()
            var routes = Router.Builder()
            routes.add(.GET, "/big", sync: { request in
                tally.requests.add(1, ordering: .relaxed)
                var body = Array("n=\(request.query("n") ?? "?");".utf8)
                body += [UInt8](repeating: 0x2E, count: Self.bodySize - body.count)
                return Response(status: .ok, body: body)
            })
            try withServer(router: routes.build(), configure: { $0.maxOutboundBytes = Self.bodySize }) { server in
                let client = try TCPClient(port: server.port, receiveBuffer: 4096)
                let count = 300
                try client.send((0..<count).map { "GET /big?n=\($0) HTTP/1.1\r\nHost: x\r\n\r\n" }.joined())
                // Unread, the server answers only what its socket buffer and the bound (one 64 KiB
                // response) hold; without the bound it would answer all 300 and queue 19 MiB.
                usleep(500_000)
                let answered = tally.requests.load(ordering: .relaxed)
                print("in-process pipeline: \(answered) of \(count) requests answered while the client did not read")
                #expect(answered < count / 2)
                // Reading resumes the pipeline: every response arrives, in request order.
                client.setTimeout(10)
                for i in 0..<count {
                    let r = try client.readResponse()
                    #expect(r.status == 200 && r.body.count == Self.bodySize)
                    #expect(r.body.starts(with: Array("n=\(i);".utf8)), "response \(i) out of order")
                }
                #expect(tally.requests.load(ordering: .relaxed) == count)
            }
        }
    }

    @Test func pingFloodStopsBeingReadUntilPongsAreRead() async throws {
        try await offPool { () throws in
            let tally = Tally()
            try withServer(upgradeHandler: { _, _, _ in .accept(tally) }, configure: { $0.maxOutboundBytes = Self.bodySize }) { server in
                let ws = try WSClient(port: server.port, path: "/ws", receiveBuffer: 4096)
                let payload = [UInt8](repeating: 0x70, count: 125)
                let ping = WebSocketFrameEncoder.frame(opcode: .ping, payload: payload, maskKey: 0x0102_0304)
                let pings = (8 << 20) / ping.count
                // Pings, then a message behind them; sent from another thread, since the server stops
                // taking them once its queue of pongs is over the bound.
                let flood = repeated(ping, pings) + WebSocketFrameEncoder.frame(opcode: .text, payload: Array("marker".utf8), maskKey: 0x0A0B_0C0D)
                let fd = ws.tcp.fd
                let writer = Thread {
                    var off = 0
                    while off < flood.count {
                        let n = flood[off...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                        if n <= 0 { break }
                        off += n
                    }
                    tally.writerDone.store(true, ordering: .releasing)
                }
                writer.start()
                usleep(1_500_000)
                // Without the bound the server would have read all 8 MiB and the message by now.
                #expect(tally.messages.withLock { $0.isEmpty }, "the server kept reading past its bound")
                // (Whether the writer finished says nothing: loopback socket buffers can take all 8 MiB
                // without the server reading any of it. The unread marker is the evidence.)

                // Read every pong: the server resumes each time its queue drains, and answers every ping.
                let pongs = repeated([0x8A, 125] + payload, pings)
                var received = 0
                ws.tcp.setTimeout(10)
                let same = pongs.withUnsafeBytes { expected -> Bool in
                    var buffer = [UInt8](repeating: 0, count: 1 << 16)
                    return buffer.withUnsafeMutableBytes { chunk in
                        while received < expected.count {
                            let n = recv(fd, chunk.baseAddress, min(chunk.count, expected.count - received), 0)
                            guard n > 0 else { Issue.record("read failed after \(received) of \(expected.count) bytes"); return false }
                            if memcmp(chunk.baseAddress!, expected.baseAddress! + received, n) != 0 { return false }
                            received += n
                        }
                        return true
                    }
                }
                #expect(same, "one pong per ping, in order (differs before byte \(received + (1 << 16)))")
                #expect(eventually(10) { tally.messages.withLock { $0 } == ["marker"] })
                #expect(eventually { tally.writerDone.load(ordering: .acquiring) })
            }
        }
    }
}
