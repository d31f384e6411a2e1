import HTTP1
import Reactor
import Testing
import WebSocket
@testable import Server

private let t0 = Instant(nanoseconds: 1_000_000_000_000)
private func at(_ seconds: Double) -> Instant { t0 + .milliseconds(Int64(seconds * 1000)) }

private func feed(_ sm: inout HTTPConnectionStateMachine, _ s: String, at now: Instant = t0) -> [HTTPConnectionAction] {
    var actions: [HTTPConnectionAction] = []
    Array(s.utf8).withUnsafeBytes { sm.read($0, now: now, into: &actions) }
    return actions
}

/// The targets of the requests `actions` announce, taken from the machine as the shell does.
private func targets(_ sm: inout HTTPConnectionStateMachine, _ actions: [HTTPConnectionAction]) -> [String] {
    actions.compactMap { $0 == .request ? sm.takeRequest().head.target : nil }
}

@Suite("HTTP connection state machine")
struct HTTPConnectionStateMachineTests {
    let config = HTTPConnectionConfiguration()

    @Test func pipelinedRequestsWaitForEachResponse() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: "/ws", now: t0)
        let a = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HTTP/1.1\r\nHost: a\r\n\r\n")
        // Only the first request is released; the others wait in order.
        #expect(targets(&sm, a) == ["/1"])
        #expect(sm.isAwaitingResponse)
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: true, outputOverBound: false, now: t0, into: &next)
        #expect(targets(&sm, next) == ["/2"])
        next = []
        sm.responseSent(keepAlive: true, outputOverBound: false, now: t0, into: &next)
        #expect(targets(&sm, next) == ["/3"])
        next = []
        sm.responseSent(keepAlive: true, outputOverBound: false, now: t0, into: &next)
        #expect(next.isEmpty)
        #expect(sm.isIdle)
    }

    @Test func bytesArrivingDuringAResponseAreKept() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        let released = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HT")
        #expect(targets(&sm, released) == ["/1"])
        #expect(feed(&sm, "TP/1.1\r\nHost: a\r\n\r\n").isEmpty)
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: true, outputOverBound: false, now: t0, into: &next)
        #expect(targets(&sm, next) == ["/2"])
    }

    @Test func readingPausesWhenTooMuchIsBuffered() {
        var c = config
        c.maxBufferedInput = 64
        var sm = HTTPConnectionStateMachine(configuration: c, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(sm.wantsInput)
        _ = feed(&sm, String(repeating: "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", count: 3))
        #expect(!sm.wantsInput)
    }

    @Test func nextRequestWaitsWhileOutputIsOverTheBound() {
        // Pipelined requests never read: after a response that leaves the queue over the bound, no
        // further request is parsed or read until the queue drains (nginx-style backpressure).
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        let released = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\nGET /3 HT")
        #expect(targets(&sm, released) == ["/1"])
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: true, outputOverBound: true, now: at(1), into: &next)
        #expect(next.isEmpty)
        #expect(sm.isOutputBlocked)
        #expect(!sm.wantsInput)
        #expect(!sm.isIdle)
        // Not an idle keep-alive connection: no timer closes it while the peer has our bytes to read.
        sm.tick(now: at(1000), into: &next)
        #expect(next.isEmpty)
        // Draining releases the held request, in order; the rest of the pipeline follows as usual.
        sm.outputDrained(now: at(1001), into: &next)
        #expect(targets(&sm, next) == ["/2"])
        #expect(sm.isAwaitingResponse)
        next = []
        sm.responseSent(keepAlive: true, outputOverBound: false, now: at(1001), into: &next)
        #expect(next.isEmpty && sm.wantsInput)
        let last = feed(&sm, "TP/1.1\r\nHost: a\r\n\r\n", at: at(1002))
        #expect(targets(&sm, last) == ["/3"])
    }

    @Test func drainingWithNothingHeldWaitsForTheNextRequest() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: true, outputOverBound: true, now: at(0), into: &next)
        // A drain that is not awaited changes nothing.
        var none: [HTTPConnectionAction] = []
        var other = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        other.outputDrained(now: at(1), into: &none)
        #expect(none.isEmpty && other.isIdle)

        sm.outputDrained(now: at(100), into: &next)
        #expect(next.isEmpty)
        #expect(sm.isIdle && sm.wantsInput)
        // The keep-alive timer counts from the drain, not from the response.
        sm.tick(now: at(174), into: &next)
        #expect(next.isEmpty)
        sm.tick(now: at(175), into: &next)
        #expect(next == [.close])
    }

    @Test func eofWhileBlockedKeepsHeldRequests() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: true, outputOverBound: true, now: t0, into: &next)
        sm.peerClosed(into: &next)
        #expect(next.isEmpty, "a request held back is still answered")
        sm.outputDrained(now: t0, into: &next)
        #expect(targets(&sm, next) == ["/2"])

        var idle = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&idle, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        next = []
        idle.responseSent(keepAlive: true, outputOverBound: true, now: t0, into: &next)
        idle.peerClosed(into: &next)
        #expect(next == [.close], "nothing held back: close once the output is written")
    }

    @Test func closingResponseOverTheBoundStillCloses() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: false, outputOverBound: true, now: t0, into: &next)
        #expect(next == [.close])
        sm.outputDrained(now: t0, into: &next)
        #expect(next == [.close])
    }

    @Test func closeAfterResponseWhenNotKeepAlive() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: false, outputOverBound: false, now: t0, into: &next)
        // The second request is never answered.
        #expect(next == [.close])
    }

    @Test func slowlorisHeadTimesOut() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET / HTTP/1.1\r\nHost:", at: at(1))
        var actions: [HTTPConnectionAction] = []
        sm.tick(now: at(10.9), into: &actions)
        #expect(actions.isEmpty)
        // Drip-feeding more bytes does not reset the head timer.
        _ = feed(&sm, " a\r\nX-A: 1\r\n", at: at(10.95))
        sm.tick(now: at(11.0), into: &actions)
        #expect(actions == [.reject(.requestTimeout, reason: "request head not received in time")])
    }

    @Test func slowBodyTimesOut() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\nabc", at: at(0))
        var actions: [HTTPConnectionAction] = []
        sm.tick(now: at(29), into: &actions)
        #expect(actions.isEmpty)
        sm.tick(now: at(30), into: &actions)
        #expect(actions.first == .reject(.requestTimeout, reason: "request body not received in time"))
    }

    @Test func idleKeepAliveCloses() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        var actions: [HTTPConnectionAction] = []
        sm.tick(now: at(74), into: &actions)
        #expect(actions.isEmpty)
        sm.tick(now: at(75), into: &actions)
        #expect(actions == [.close])
    }

    @Test func awaitingResponseHasNoTimer() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        var actions: [HTTPConnectionAction] = []
        sm.tick(now: at(1000), into: &actions)
        #expect(actions.isEmpty)
    }

    @Test func expectContinue() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        let a = feed(&sm, "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        #expect(a == [.sendContinue])
        let b = feed(&sm, "ok")
        guard b.first == .request else { Issue.record("no request"); return }
        #expect(sm.takeRequest().body == Array("ok".utf8))
    }

    @Test func upgradeHandsOverTheRest() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: "/ws", now: t0)
        let a = feed(&sm, "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n\u{81}\u{80}")
        guard case .upgrade(let head, let leftover) = a.first else { Issue.record("no upgrade"); return }
        #expect(head.path == "/ws")
        #expect(leftover == Array("\u{81}\u{80}".utf8))
        #expect(!sm.wantsInput)
    }

    @Test func malformedRequestRejectsAndStops() {
        var sm = HTTPConnectionStateMachine(configuration: config, upgradePath: nil, now: t0)
        let a = feed(&sm, "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\nGET /next HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(a.count == 1)
        #expect(a.first.map { if case .reject(let s, _) = $0 { return s.code } else { return 0 } } == 400)
        #expect(feed(&sm, "GET /again HTTP/1.1\r\nHost: a\r\n\r\n").isEmpty)
    }

    @Test func requestCap() {
        var c = config
        c.maxRequestsPerConnection = 2
        var sm = HTTPConnectionStateMachine(configuration: c, upgradePath: nil, now: t0)
        _ = feed(&sm, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(sm.mayKeepAlive)
        var next: [HTTPConnectionAction] = []
        sm.responseSent(keepAlive: true, outputOverBound: false, now: t0, into: &next)
        _ = feed(&sm, "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
        #expect(!sm.mayKeepAlive)
    }
}

private func wsFeed(_ sm: inout WebSocketConnectionStateMachine, _ bytes: [UInt8], at now: Instant = t0) -> [WebSocketConnectionAction] {
    var actions: [WebSocketConnectionAction] = []
    var copy = bytes
    copy.withUnsafeMutableBytes { sm.read($0, now: now, into: &actions) }
    return actions
}

private func clientFrame(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) -> [UInt8] {
    WebSocketFrameEncoder.frame(opcode: opcode, payload: payload, fin: fin, maskKey: 0x0102_0304)
}

@Suite("WebSocket connection state machine")
struct WebSocketConnectionStateMachineTests {
    let config = WebSocketConfiguration()

    @Test func deliversMessagesAndAnswersPings() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        let a = wsFeed(&sm, clientFrame(.text, Array("hi".utf8)) + clientFrame(.ping, [1, 2]))
        #expect(a == [.deliver(.text(Array("hi".utf8))), .sendPong(payload: [1, 2])])
    }

    // TR-5 (an idle session's memory): between frames the machine keeps no assembler; a frame or
    // a fragmented message split over reads is kept, byte by byte, until it ends.
    @Test func keepsPartlyReadFramesAcrossReadsAndNothingBetweenThem() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        #expect(sm.isIdle)
        let message = clientFrame(.text, Array("hel".utf8), fin: false) + clientFrame(.ping, [7])
            + clientFrame(.continuation, Array("lo".utf8))
        var actions: [WebSocketConnectionAction] = []
        for (i, byte) in message.enumerated() {
            actions += wsFeed(&sm, [byte])
            #expect(sm.isIdle == (i == message.count - 1), "after byte \(i)")
        }
        #expect(actions == [.sendPong(payload: [7]), .deliver(.text(Array("hello".utf8)))])
        // A whole frame in one read leaves nothing behind; a frame cut in its header does.
        #expect(wsFeed(&sm, clientFrame(.binary, [1, 2, 3])) == [.deliver(.binary([1, 2, 3]))])
        #expect(sm.isIdle)
        let next = clientFrame(.text, Array("ok".utf8))
        #expect(wsFeed(&sm, Array(next.prefix(1))).isEmpty)
        #expect(!sm.isIdle)
        #expect(wsFeed(&sm, Array(next.dropFirst())) == [.deliver(.text(Array("ok".utf8)))])
        #expect(sm.isIdle)
        // A message left open is still checked as one: a new message before it ends fails.
        _ = wsFeed(&sm, clientFrame(.text, Array("a".utf8), fin: false))
        let failed = wsFeed(&sm, clientFrame(.text, Array("b".utf8)))
        guard case .sendClose(let code, _) = failed.first else { Issue.record("no close"); return }
        #expect(code == .protocolError)
        #expect(sm.isIdle, "a closed connection keeps nothing")
    }

    @Test func peerInitiatedCloseIsEchoed() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        let a = wsFeed(&sm, clientFrame(.close, [0x03, 0xE8]) + clientFrame(.text, Array("late".utf8)))
        #expect(a == [.sendClose(code: .normal, reason: ""), .closeAfterFlush])
    }

    @Test func emptyCloseIsAnsweredWithAnEmptyClose() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        #expect(wsFeed(&sm, clientFrame(.close, [])) == [.sendClose(code: nil, reason: ""), .closeAfterFlush])
    }

    @Test func protocolErrorSendsCloseWithCode() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        let a = wsFeed(&sm, WebSocketFrameEncoder.frame(opcode: .text, payload: [UInt8]([0x61]))) // unmasked
        guard case .sendClose(let code, _) = a.first else { Issue.record("no close"); return }
        #expect(code == .protocolError)
        #expect(a.last == .closeAfterFlush)
    }

    @Test func keepAlivePingThenCloseWhenPongsStop() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        var actions: [WebSocketConnectionAction] = []
        sm.tick(now: at(24), into: &actions)
        #expect(actions.isEmpty)
        sm.tick(now: at(25), into: &actions)
        #expect(actions == [.sendPing])
        actions = []
        sm.tick(now: at(34), into: &actions)
        #expect(actions.isEmpty)
        sm.tick(now: at(35), into: &actions)
        #expect(actions == [.sendClose(code: .goingAway, reason: "no pong"), .closeAfterFlush])
    }

    // QS-3: a slow reader's pong waits behind the events it has not read yet; while it still
    // takes output it is alive, and the pong timeout counts from the last time it did.
    @Test func aPeerStillTakingOutputIsNotClosedForALatePong() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        var actions: [WebSocketConnectionAction] = []
        sm.tick(now: at(25), into: &actions)
        #expect(actions == [.sendPing])
        actions = []
        sm.tick(now: at(35), outputDrainedAt: at(30), into: &actions)
        #expect(actions.isEmpty, "it took output 5 s after the ping")
        sm.tick(now: at(39.9), outputDrainedAt: at(30), into: &actions)
        #expect(actions.isEmpty)
        // Output taken before the ping says nothing about the pong.
        sm.tick(now: at(40), outputDrainedAt: at(20), into: &actions)
        #expect(actions == [.sendClose(code: .goingAway, reason: "no pong"), .closeAfterFlush], "no pong and nothing taken for 10 s")
    }

    @Test func pongKeepsTheConnection() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        var actions: [WebSocketConnectionAction] = []
        sm.tick(now: at(25), into: &actions)
        _ = wsFeed(&sm, clientFrame(.pong, []), at: at(26))
        actions = []
        sm.tick(now: at(40), into: &actions)
        #expect(actions.isEmpty)
        sm.tick(now: at(51), into: &actions) // 25 s after the pong: the next ping
        #expect(actions == [.sendPing])
    }

    @Test func serverCloseWaitsForPeerThenTimesOut() {
        var sm = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        var actions: [WebSocketConnectionAction] = []
        sm.close(code: .goingAway, reason: "bye", now: at(0), into: &actions)
        #expect(actions == [.sendClose(code: .goingAway, reason: "bye")])
        // Data after our close is ignored; the peer's close completes the handshake.
        #expect(wsFeed(&sm, clientFrame(.text, Array("x".utf8)), at: at(1)).isEmpty)
        actions = []
        sm.tick(now: at(4.9), into: &actions)
        #expect(actions.isEmpty)
        sm.tick(now: at(5), into: &actions)
        #expect(actions == [.closeNow])

        var sm2 = WebSocketConnectionStateMachine(configuration: config, inflater: nil, now: t0)
        var ignore: [WebSocketConnectionAction] = []
        sm2.close(code: .goingAway, reason: "bye", now: at(0), into: &ignore)
        #expect(wsFeed(&sm2, clientFrame(.close, [0x03, 0xE9]), at: at(1)) == [.closeAfterFlush])
    }
}

/// What `Connection` writes for each control action: the same bytes as before the actions were typed.
@Suite("WebSocket control frames on the wire")
struct WebSocketControlFrameTests {
    @Test func pongEchoesThePingPayload() {
        #expect(Connection.pongFrame([1, 2]) == [0x8A, 0x02, 1, 2])
        #expect(Connection.pongFrame([]) == [0x8A, 0x00])
    }

    @Test func pingIsEmpty() {
        #expect(Connection.pingBlock.array == [0x89, 0x00])
    }

    @Test func closeCarriesCodeAndReason() {
        #expect(Connection.closeFrame(code: .normal, reason: "") == [0x88, 0x02, 0x03, 0xE8])
        #expect(Connection.closeFrame(code: .goingAway, reason: "bye") == [0x88, 0x05, 0x03, 0xE9] + Array("bye".utf8))
    }

    @Test func closeWithoutCodeIsEmpty() {
        #expect(Connection.closeFrame(code: nil, reason: "") == [0x88, 0x00])
        // A reason cannot travel without a code.
        #expect(Connection.closeFrame(code: nil, reason: "ignored") == [0x88, 0x00])
    }

    @Test func longReasonIsCutToFitAControlFrame() {
        let frame = Connection.closeFrame(code: .policyViolation, reason: String(repeating: "x", count: 200))
        #expect(frame.count == 2 + 125)
        #expect(Array(frame[0...3]) == [0x88, 125, 0x03, 0xF0])
    }
}
