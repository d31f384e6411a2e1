import Chat
import Foundation
import Testing
import TestKit
import WebSocket

/// `--write-delay` (TR-5, paced fan-out) on a running gateway: the hub's room events wait for the
/// loop's window, a command's answer does not and takes the held event before it; the bound is
/// declared once (`Limits.writeDelayMilliseconds`) and a value past it is refused naming the flag.
extension HardeningTests {
    /// A gateway with the longest write delay (1 s, long enough to tell held from not on a loaded
    /// machine) and one I/O loop, so every connection shares the loop's window.
    func longWindowGateway(_ extra: [String] = []) throws -> GatewayProcess {
        try GatewayProcess(extra: ["--write-delay", "\(Limits.writeDelayMilliseconds.upperBound)", "--event-loops", "1"] + extra)
    }

    func text(_ ws: WSClient, timeout: Double) throws -> String {
        while true {
            if case .text(let s) = try ws.readFrame(timeout: timeout) { return s }
        }
    }

    @Test("TR-5: with --write-delay the hub's room events wait for the window; a command's answer takes the held event first")
    func writeDelayHoldsEventsNotAnswers() async throws {
        try await offPool { () throws in
            let g = try longWindowGateway()
            defer { g.stop() }
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "wd"]).status == 201)
            let ws = try joined(g, offer: nil, user: "reader", room: "wd")
            // Answers are never held (joined() read two). The first event of a quiet loop is not either.
            let windowOpens = Date()
            #expect(try g.rest().call("POST", "/v1/rooms/wd/messages", ["content": "first-1", "fromUserId": "host"]).status == 201)
            let first = try text(ws, timeout: 5)
            #expect(first.contains("first-1") && first.contains(#""ev":"room.message""#), "\(first)")
            // The window (1 s) is open: the next event waits.
            #expect(try g.rest().call("POST", "/v1/rooms/wd/messages", ["content": "held-2", "fromUserId": "host"]).status == 201)
            // Not before the window closes, a second after it opened (which was after `windowOpens`).
            if let early = try? text(ws, timeout: 0.3) {
                // Only a machine stalled past the whole window may see it here.
                let after = Date().timeIntervalSince(windowOpens)
                #expect(after >= 1.0 && early.contains("held-2"), "held-2 came \(after) s after the window could open: \(early)")
                return
            }
            try ws.tcp.send(try frame(["id": 3, "op": "room.members", "args": ["roomId": "wd"]]))
            // The held event comes first, then the answer (that answers are never held is the
            // server's WriteDelayTests, with a window long enough to tell on a loaded machine).
            let second = try text(ws, timeout: 5)
            #expect(second.contains("held-2") && second.contains(#""ev":"room.message""#), "\(second)")
            #expect(try answer(ws, id: 3)["ok"] != nil)
        }
    }

    @Test("TR-5, QS-1: a high-priority message is never held: it goes at once, with the held message before it")
    func writeDelayNeverHoldsHighPriority() async throws {
        try await offPool { () throws in
            let g = try longWindowGateway()
            defer { g.stop() }
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "wh"]).status == 201)
            let ws = try joined(g, offer: nil, user: "reader", room: "wh")
            #expect(try g.rest().call("POST", "/v1/rooms/wh/messages", ["content": "first-1", "fromUserId": "host"]).status == 201)
            #expect(try text(ws, timeout: 5).contains("first-1"))
            // The window opened when first-1 was written, before it was read here: it closes at
            // most a second after `opened`. A normal message waits for that; a high-priority one does not.
            let opened = Date()
            #expect(try g.rest().call("POST", "/v1/rooms/wh/messages", ["content": "held-2", "fromUserId": "host"]).status == 201)
            #expect(try g.rest().call("POST", "/v1/rooms/wh/messages", ["content": "high-3", "fromUserId": "host", "priority": "high"]).status == 201)
            let posted = Date().timeIntervalSince(opened)
            let second = try text(ws, timeout: 5)
            let third = try text(ws, timeout: 5)
            let arrived = Date().timeIntervalSince(opened)
            // In order: the held message goes out with the high-priority one, not after it.
            #expect(second.contains("held-2") && third.contains("high-3"), "\(second) / \(third)")
            // Held, both would come at the window's close. A machine so loaded that the two posts
            // took most of the window cannot tell.
            if posted < 0.7 { #expect(arrived < 0.9, "held until the window closed: \(arrived) s (posted at \(posted) s)") }
        }
    }

    @Test("TR-5: only a busy room's events are held: a quiet room's event goes at once while another room on the loop holds")
    func writeDelayHoldsOnlyBusyRooms() async throws {
        try await offPool { () throws in
            let g = try longWindowGateway()
            defer { g.stop() }
            for room in ["busy", "quiet"] { #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": room]).status == 201) }
            let busy = try joined(g, offer: nil, user: "reader", room: "busy")
            let quiet = try joined(g, offer: nil, user: "other", room: "quiet")
            // The joins' events opened the loop's window (a second each, while events come); once one
            // has closed with nothing held or written, the loop is quiet, and the next window opens when first-1 is written, after `beforeFirst`:
            // it cannot close before a second from there.
            Thread.sleep(forTimeInterval: 2.5)
            let beforeFirst = Date()
            #expect(try g.rest().call("POST", "/v1/rooms/busy/messages", ["content": "first-1", "fromUserId": "host"]).status == 201)
            #expect(try text(busy, timeout: 5).contains("first-1"))
            // The loop's window (1 s) opened when first-1 was written, before it was read here.
            let opened = Date()
            #expect(try g.rest().call("POST", "/v1/rooms/busy/messages", ["content": "held-2", "fromUserId": "host"]).status == 201)
            #expect(try g.rest().call("POST", "/v1/rooms/quiet/messages", ["content": "quiet-1", "fromUserId": "host"]).status == 201)
            let posted = Date().timeIntervalSince(opened)
            let q = try text(quiet, timeout: 5)
            let quietArrived = Date().timeIntervalSince(opened)
            #expect(q.contains("quiet-1"), "\(q)")
            // The quiet room had no event in the window before: not held (A machine so loaded
            // that the posts took most of the window cannot tell.)
            if posted < 0.7 { #expect(quietArrived < 0.9, "the quiet room's event waited \(quietArrived) s (posted at \(posted) s)") }
            // The busy room's second message was held to the window's close.
            let b = try text(busy, timeout: 5)
            #expect(b.contains("held-2"), "\(b)")
            #expect(Date().timeIntervalSince(beforeFirst) >= 0.95, "held-2 was not held to the window's close")
        }
    }

    @Test("TR-5, QS-3: with --write-delay and the smallest marks, a reader that keeps up loses no low-priority message to holding and gets no room.gap")
    func writeDelayNeverDropsForAReaderThatKeepsUp() async throws {
        try await offPool { () throws in
            // The low mark is 256 bytes: three held messages would pass it, were the held bytes
            // not bounded (half that mark, by the gateway).
            let g = try longWindowGateway(["--outbound-soft-bytes", "1024"])
            defer { g.stop() }
            #expect(try g.rest().call("POST", "/v1/rooms", ["roomId": "wl"]).status == 201)
            let ws = try joined(g, offer: nil, user: "reader", room: "wl")
            // The first message opens the window; the next ones come while it is open.
            for i in 0..<8 {
                #expect(try g.rest().call("POST", "/v1/rooms/wl/messages", ["content": "low-\(i)", "fromUserId": "host", "priority": "low"]).status == 201)
            }
            var got: [String] = []
            while got.count < 8 {
                let t = try text(ws, timeout: 5)
                #expect(!t.contains("room.gap"), "\(t)")
                if t.contains(#""ev":"room.message""#), let r = t.range(of: #"low-[0-9]"#, options: .regularExpression) { got.append(String(t[r])) }
            }
            #expect(got == (0..<8).map { "low-\($0)" })
        }
    }

    @Test("TR-5: a --write-delay outside its bound, or more than half the send timeout, or a variable that is not a number, is refused, naming it")
    func writeDelayOutOfBoundsIsRefused() async throws {
        try await offPool { () throws in
            // Held output makes no progress: the delay must stay within half the send timeout.
            let (status, log) = try roomcastRun(["--write-delay", "600", "--send-timeout", "1"])
            #expect(status != nil && status != 0 && log.contains("--write-delay must be at most half of --send-timeout (1 s)"), "\(log)")
            // A variable that is not a number is refused naming it, not taken as unset.
            for (name, bad, says) in [("ROOMCAST_WRITE_DELAY", "abc", "an integer"), ("ROOMCAST_SEND_TIMEOUT", "30s", "an integer"),
                                      ("ROOMCAST_EVENT_LOOPS", "two", "an integer")] {
                let (status, log) = try roomcastRun([], environment: [name: bad])
                #expect(status == 64 && log.contains("\(name) must be \(says) (got \"\(bad)\")"), "\(name)=\(bad): \(String(describing: status)) \(log)")
            }
            // The flag wins over a bad variable (here refused for its own bound), and --help is not stopped by one.
            let (flagStatus, flagLog) = try roomcastRun(["--write-delay", "2000"], environment: ["ROOMCAST_WRITE_DELAY": "abc"])
            #expect(flagStatus == 64 && flagLog.contains("--write-delay must be 0 to") && !flagLog.contains("ROOMCAST_WRITE_DELAY"), "\(flagLog)")
            let (helpStatus, helpLog) = try roomcastRun(["--help"], environment: ["ROOMCAST_WRITE_DELAY": "abc"])
            #expect(helpStatus == 0 && helpLog.contains("--write-delay"), "\(String(describing: helpStatus)) \(helpLog.prefix(300))")
            for bad in ["-1", "\(Limits.writeDelayMilliseconds.upperBound + 1)"] {
                let (status, log) = try roomcastRun(["--write-delay=\(bad)"])
                #expect(status != nil && status != 0, "\(bad): \(String(describing: status))")
                #expect(log.contains("--write-delay must be 0 to \(Limits.writeDelayMilliseconds.upperBound) milliseconds"), "\(bad): \(log)")
            }
        }
    }
}
