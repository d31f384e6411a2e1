import Chat
import Foundation
import Testing
import TestKit
import WebSocket

/// `--write-delay` (TR-5, paced fan-out) on a running gateway: the hub's room events wait for the
/// loop's window, a command's answer does not and takes the held event before it; the bound is
/// declared once (`Limits.writeDelayMilliseconds`) and a value past it is refused naming the flag.
extension HardeningTests {
    func text(_ ws: WSClient, timeout: Double) throws -> String {
        while true {
            if case .text(let s) = try ws.readFrame(timeout: timeout) { return s }
        }
    }

    @Test("TR-5: with --write-delay a room event waits for the window; an answer is not held and comes after the held event")
    func writeDelayHoldsEventsNotAnswers() async throws {
        try await offPool { () throws in
            let g = try GatewayProcess(extra: ["--write-delay", "\(Limits.writeDelayMilliseconds.upperBound)"])
            defer { g.stop() }
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "wd"]).status == 201)
            let ws = try joined(g, offer: nil, user: "reader", room: "wd")
            // The join's answer was not held (joined() waited at most 5 s for it); a message's event is.
            #expect(try g.rest().call("POST", "/v1/rooms/wd/messages", ["content": "held-1", "fromUserId": "host"]).status == 201)
            let posted = Date()
            #expect(throws: (any Error).self) { try self.text(ws, timeout: 0.3) }
            try ws.tcp.send(try frame(["id": 3, "op": "room.members", "args": ["roomId": "wd"]]))
            let first = try text(ws, timeout: 5)
            #expect(first.contains("held-1") && first.contains(#""ev":"room.message""#), "\(first)")
            #expect(try answer(ws, id: 3)["ok"] != nil)
            let answered = Date().timeIntervalSince(posted)
            #expect(answered < 0.9, "the answer waited for the window: \(answered) s")
            // The next event after the window: held, then written when its own window closes.
            Thread.sleep(forTimeInterval: 1.2)
            #expect(try g.rest().call("POST", "/v1/rooms/wd/messages", ["content": "held-2", "fromUserId": "host"]).status == 201)
            let sent = Date()
            let second = try text(ws, timeout: 5)
            #expect(second.contains("held-2"), "\(second)")
            #expect(Date().timeIntervalSince(sent) > 0.5, "not held")
        }
    }

    @Test("TR-5: a --write-delay outside its bound is refused, naming the flag")
    func writeDelayOutOfBoundsIsRefused() async throws {
        try await offPool { () throws in
            for bad in ["-1", "\(Limits.writeDelayMilliseconds.upperBound + 1)"] {
                let p = try RunningProcess(path: try productPath("roomcast"),
                                           arguments: ["--port", "0", "--data-dir", temporaryDirectory("roomcast-wd"), "--write-delay=\(bad)"])
                let (status, log) = p.finish(timeout: 20)
                #expect(status != nil && status != 0, "\(bad): \(String(describing: status))")
                #expect(log.contains("--write-delay must be 0 to \(Limits.writeDelayMilliseconds.upperBound) milliseconds"), "\(bad): \(log)")
            }
        }
    }
}
