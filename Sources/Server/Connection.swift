import HTTP1
import Logging
import Reactor
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Receives a WebSocket connection's events, on the connection's event loop.
public protocol WebSocketHandler: AnyObject {
    func webSocketDidOpen(_ connection: Connection)
    func webSocket(_ connection: Connection, didReceive message: WebSocketMessage)
    /// Called once when the connection is gone; `code` is the close code we or the peer sent.
    func webSocketDidClose(_ connection: Connection, code: WebSocketCloseCode?)
}

/// The application's answer to a valid WebSocket handshake.
public enum UpgradeDecision {
    case accept(WebSocketHandler)
    /// Accepted speaking this subprotocol, one the client offered: echoed in the 101's
    /// `Sec-WebSocket-Protocol` (RFC 6455 §4.2.2).
    case acceptSpeaking(WebSocketHandler, subprotocol: String)
    case reject(Response)
}

/// One accepted TCP connection: the shell that performs the I/O its state machines ask for.
/// Confined to its event loop; its hot properties skip dynamic exclusivity checks (the loop
/// never holds two accesses to them at once).
public final class Connection: EventHandler {
    enum Phase: Equatable {
        case http
        case webSocket
        /// Output done (or abandoned); draining input until EOF or the deadline, then close.
        case lingering(deadline: Instant)
        case closed
    }

    let context: LoopContext
    public let peer: Socket.Address
    // After `peer` (a String and a UInt16): it fits in the padding before the next 8-byte field.
    let fd: Int32
    // The small fields sit in the padding after `registration` and `phase` (each 9 bytes before
    // an 8-byte field): a class's fields are laid out in order, each aligned.
    private(set) var registration: RegistrationID?
    /// Input may be waiting that was not read (reading paused while a response is pending, or
    /// while the output queue is over its bound). Edge-triggered registration reports it only
    /// once, so it is read when the pause ends.
    private var readPending = false
    /// A continuation of a read loop that used its budget is scheduled.
    private var resumeScheduled = false
    /// Full read buffers taken from one connection per turn of the loop.
    static let readBudget = 8
    private var inReadLoop = false
    @exclusivity(unchecked) var isDirty = false
    /// Events wait in the queue for the loop's write-delay window to close (`LoopContext.holds`).
    @exclusivity(unchecked) var isHeld = false
    /// Close (gracefully) once the output queue is empty.
    private var closeWhenFlushed = false
    private var peerSentEOF = false
    var phase: Phase = .http {
        didSet { updateAcceptsFrames() }
    }
    private var closeCode: WebSocketCloseCode?
    /// Set when our close frame is queued: nothing may be sent after it. (Not the state
    /// machine's state: messages received before a protocol error are still delivered, and the
    /// application's replies to them must go out before the close frame.)
    private var closeFrameQueued = false {
        didSet { updateAcceptsFrames() }
    }
    /// `phase == .webSocket && !closeFrameQueued`, kept as one flag for the per-delivery check.
    @exclusivity(unchecked) private var acceptsFrames = false
    // The state machines are stored apart from `phase` and mutated in place: keeping them in
    // an enum payload meant copying them out and back on every read, which also copied their
    // buffers. A connection is confined to its loop, so these skip dynamic exclusivity checks.
    /// The HTTP phase's state machine, on the heap: once upgraded, a WebSocket connection (most of
    /// the connections a gateway holds) does not carry its ~600 bytes.
    private final class HTTPState {
        @exclusivity(unchecked) var machine: HTTPConnectionStateMachine
        var requestSequence: UInt64 = 0
        /// The request in flight, and a response its handler gave before returning.
        @exclusivity(unchecked) var inFlight: InFlight?
        var dispatching = false
        var syncResponse: Response?
        /// The state machine's actions, run from a queue, so a response completed while a request
        /// is being dispatched continues the pipeline iteratively, not by recursion.
        @exclusivity(unchecked) var actions: [HTTPConnectionAction] = []
        var runningActions = false
        // A streaming response (TR-1): its handler, whether its body is chunked, and whether the
        // connection may take another request once it ends. (An HTTP phase's: kept here.)
        var streamHandler: ResponseStreamHandler?
        var streamChunked = false
        var streamKeepAlive = false
        init(_ machine: HTTPConnectionStateMachine) { self.machine = machine }
    }
    /// The HTTP phase's state, or a WebSocket's permessage-deflate: never both (the upgrade ends
    /// the one before the other begins), so one reference holds either (`httpState`, `deflate`).
    private enum PhaseState {
        case none
        case http(HTTPState)
        case deflate(Deflate)
    }
    @exclusivity(unchecked) private var phaseState = PhaseState.none
    /// The HTTP phase's state, until the connection is upgraded or closed (`endHTTPPhase`).
    private var httpState: HTTPState? {
        if case .http(let state) = phaseState { return state }
        return nil
    }
    /// Lets the HTTP phase's state go (a WebSocket's deflate state stays).
    private func endHTTPPhase() {
        if case .http = phaseState { phaseState = .none }
    }
    @exclusivity(unchecked) private var ws: WebSocketConnectionStateMachine?
    /// Position in `context.connections`, -1 when not in it. (32 bits: it sits in the padding
    /// after `ws`.)
    var index: Int32 = -1
    @exclusivity(unchecked) private var output = OutboundQueue()
    /// ServerConfiguration.maxOutboundBytes: past it, input is not read (see `readAvailable`).
    private var maxOutboundBytes: Int { context.configuration.maxOutboundBytes }

    /// What answering the request in flight needs to know about it (not the whole head).
    private struct InFlight {
        var keepAlive: Bool
        var http10: Bool
        var headRequest: Bool
        /// The loop iteration that read the request (its cached time).
        var started: Instant
    }

    /// The streaming response's handler (TR-1), while one is open.
    private var streamHandler: ResponseStreamHandler? { httpState?.streamHandler }

    // WebSocket.
    private var wsHandler: WebSocketHandler?
    /// permessage-deflate, when negotiated: its parameters and the compressor (made at the first
    /// message worth compressing). One reference on the connection, nil for most.
    private final class Deflate {
        let parameters: PerMessageDeflateParameters
        var deflater: MessageDeflater?
        init(_ parameters: PerMessageDeflateParameters) { self.parameters = parameters }
    }
    /// Set at the upgrade, once the HTTP phase is over (`PhaseState`).
    private var deflate: Deflate? {
        if case .deflate(let d) = phaseState { return d }
        return nil
    }
    private func updateAcceptsFrames() { acceptsFrames = phase == .webSocket && !closeFrameQueued }

    init(context: LoopContext, fd: Int32, peer: Socket.Address, now: Instant) {
        self.context = context
        self.fd = fd
        self.peer = peer
        self.phaseState = .http(HTTPState(HTTPConnectionStateMachine(
            configuration: context.configuration.http, upgradePath: context.configuration.webSocket.path, now: now)))
    }

    func start() throws(SyscallError) {
        // Registered once, edge-triggered, for both directions (as nginx does): no epoll_ctl
        // calls to toggle write interest, and the kernel does not re-poll idle sockets.
        registration = try context.loop.register(
            fd: fd, events: EventLoop.readable | EventLoop.writable | EventLoop.hangup | EventLoop.edgeTriggered, handler: self)
    }

    public var isWebSocket: Bool { phase == .webSocket }

    // MARK: Events

    public override func handleEvent(_ events: UInt32) {
        if events & EventLoop.writable != 0 && !output.isEmpty { flush() }
        if events & (EventLoop.readable | EventLoop.hangup | EventLoop.error) != 0 {
            if phase == .closed { return }
            readAvailable()
        }
    }

    /// Reads until the socket is drained (edge-triggered), unless input is paused: the HTTP state
    /// machine waits for a response or for the output to drain, or a WebSocket's output queue is
    /// over the bound (pongs and close frames a peer asks for count too, so a peer that sends
    /// pings and never reads is held at the bound). `readPending` remembers to come back.
    private func readAvailable() {
        if inReadLoop { return }
        inReadLoop = true
        defer { inReadLoop = false }
        let buffer = context.loop.readBuffer
        var fullReads = 0
        while phase != .closed && !peerSentEOF {
            // Fairness: a peer that keeps its socket full (a flood) gets at most `readBudget` full
            // buffers per turn; then the loop serves its other connections and comes back to this
            // one on its next iteration (edge-triggered, so no new edge would announce the rest).
            if fullReads == Self.readBudget {
                readPending = true
                if !resumeScheduled {
                    resumeScheduled = true
                    _ = context.loop.schedule(after: .zero) { [weak self] in
                        guard let self else { return }
                        self.resumeScheduled = false
                        if self.readPending && !self.inReadLoop && self.phase != .closed { self.readAvailable() }
                    }
                }
                return
            }
            if phase == .http ? httpState?.machine.wantsInput != true : (phase == .webSocket && output.heldBytes > maxOutboundBytes) {
                readPending = true
                return
            }
            let result: IOResult<Int>
            do {
                result = try Socket.read(fd, into: buffer)
            } catch {
                if !error.isDisconnect { context.logger.debug("read failed", metadata: ["connection.peer": "\(peer)", "error": "\(error)"]) }
                closeNow()
                return
            }
            switch result {
            case .wouldBlock:
                readPending = false
                return
            case .processed(0):
                readPending = false
                peerSentEOF = true
                handleEOF()
                return
            case .processed(let n):
                received(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<n]))
                // Answer while the connection is hot: one writev for every response this read
                // produced. (Writes queued from elsewhere — fan-out, deferred responses — still
                // wait for the loop's before-sleep flush, which batches them.)
                if isDirty { flush() }
                // A short read drained the socket; new data will raise a new edge.
                if n < buffer.count {
                    readPending = false
                    return
                }
                fullReads += 1
            }
        }
    }

    private func received(_ bytes: UnsafeMutableRawBufferPointer) {
        let now = context.now
        switch phase {
        case .http:
            let state = httpState!
            state.machine.read(UnsafeRawBufferPointer(bytes), now: now, into: &state.actions)
            runHTTPActions()
        case .webSocket:
            var actions: [WebSocketConnectionAction] = []
            ws!.read(bytes, now: now, into: &actions)
            perform(actions)
        case .lingering:
            return // discard
        case .closed:
            return
        }
    }

    private func handleEOF() {
        switch phase {
        case .http where streamHandler != nil:
            // A streaming response's reader went away: nothing more can reach it.
            closeNow()
        case .http:
            let state = httpState!
            state.machine.peerClosed(into: &state.actions)
            // A request still being answered keeps the connection until its response is written.
            runHTTPActions()
        case .webSocket:
            var actions: [WebSocketConnectionAction] = []
            ws!.peerClosed(into: &actions)
            perform(actions)
        case .lingering:
            closeNow()
        case .closed:
            break
        }
    }

    /// QS-3: when the peer last took output (or output was first queued after an empty queue).
    private(set) var lastProgress = Instant(nanoseconds: 0)
    /// When the peer last took output: a WebSocket whose pong is late but which still reads is
    /// not closed for it (QS-3).
    private var progress = OutputProgress()

    /// QS-3, the server's budget of all connections' output: closed now, a WebSocket with the
    /// slow-consumer code (what it has not started to receive is dropped).
    func shed() {
        if phase == .webSocket {
            closeSlowConsumer(counted: false)
        } else {
            closeNow()
        }
    }

    /// QS-3: when the output last moved: the kernel took more of the queue (or output was first
    /// queued), or, seen at a tick, the kernel's unacknowledged bytes fell.
    var lastMoved: Instant { max(lastProgress, progress.lastTaken ?? lastProgress) }

    func tick(now: Instant) {
        guard phase != .closed else { return }
        // QS-3: while output waits, and while a pong is awaited, the kernel's unacknowledged bytes
        // say whether the peer still reads: Linux reports the socket writable again only once a
        // third of its send buffer has drained, which takes a slow reader longer than a send
        // timeout, and a pong waits behind what the peer has not read.
        let awaitingPong = phase == .webSocket && ws?.awaitingPong == true
        let unsent = awaitingPong || !output.isEmpty ? Socket.unsentBytes(fd) : nil
        let drained = progress.tick(now: now, unsent: unsent, patience: context.configuration.sendTimeout)
        // QS-3: output that made no progress for the send timeout (nginx's send_timeout).
        if !output.isEmpty, now - lastMoved > context.configuration.sendTimeout {
            context.metrics.sendTimeouts.add(1, ordering: .relaxed)
            context.logger.info("closing a connection whose output made no progress for the send timeout",
                                metadata: ["connection.peer": "\(peer)", "queued": "\(output.heldBytes)"])
            closeNow()
            return
        }
        switch phase {
        case .http:
            let state = httpState!
            state.machine.tick(now: now, into: &state.actions)
            if !state.actions.isEmpty { runHTTPActions() }
        case .webSocket:
            var actions: [WebSocketConnectionAction] = []
            ws!.tick(now: now, outputDrainedAt: drained, into: &actions)
            if !actions.isEmpty { perform(actions) }
        case .lingering(let deadline):
            if now >= deadline { closeNow() }
        case .closed:
            break
        }
    }

    // MARK: HTTP

    private func runHTTPActions() {
        // The state is held here: an action may end the HTTP phase. An upgrade empties the queue
        // first, so nothing behind it runs; after a close the rest still runs from this state.
        guard let state = httpState, !state.runningActions else { return }
        state.runningActions = true
        var i = 0
        while i < state.actions.count {
            let action = state.actions[i]
            i += 1
            run(action)
        }
        state.actions.removeAll(keepingCapacity: !isWebSocket)
        state.runningActions = false
    }

    private func run(_ action: HTTPConnectionAction) {
            switch action {
            case .request:
                guard let state = httpState else { return }
                let (head, body) = state.machine.takeRequest()
                dispatch(head, body)
            case .sendContinue:
                enqueue(Self.continueBlock)
            case .reject(let status, let reason):
                context.logger.debug("request refused", metadata: ["connection.peer": "\(peer)", "status": "\(status.code)", "reason": "\(reason)"])
                write(refusal(status, reason, close: true), close: true)
                beginClose()
            case .upgrade(let head, let leftover):
                upgrade(head, leftover: leftover)
            case .close:
                beginClose()
            }
    }

    private static let continueBlock = ByteBlock.from(Array("HTTP/1.1 100 Continue\r\n\r\n".utf8))

    /// (The head and body are consumed: the request handed to the handler takes them over, no copy.)
    private func dispatch(_ head: consuming HTTPRequestHead, _ body: consuming [UInt8]) {
        guard let state = httpState else { return }
        state.requestSequence &+= 1
        let sequence = state.requestSequence
        state.inFlight = InFlight(keepAlive: head.keepAlive, http10: head.version == .http1_0, headRequest: head.method == .HEAD,
                                  started: context.now)
        context.metrics.requests.add(1, ordering: .relaxed)
        // Only `OPTIONS *` has this path (the parser accepts the asterisk-form for nothing else):
        // it asks about the server, not a resource (RFC 9110 §9.3.7).
        if head.path.utf8.count == 1 && head.path == "*" {
            var h = HTTPHeaders()
            h.add("Allow", context.router.serverMethods.map(\.rawValue).joined(separator: ", "))
            complete(sequence, Response(status: .ok, headers: h))
            return
        }
        switch context.router.match(method: head.method, path: head.path) {
        case .notFound:
            complete(sequence, refusal(.notFound, "no such path"))
        case .methodNotAllowed(let allowed):
            var h = HTTPHeaders()
            h.add("Allow", allowed.map(\.rawValue).joined(separator: ", "))
            complete(sequence, refusal(.methodNotAllowed, "method not allowed", headers: h))
        case .handler(.sync(let handler), let parameters):
            complete(sequence, handler(Request(head: head, body: body, pathParameters: parameters, peer: peer)))
        case .handler(.async(let handler), let parameters):
            let writer = context.responseWriter(for: self, sequence: sequence)
            state.dispatching = true
            handler(Request(head: head, body: body, pathParameters: parameters, peer: peer), writer)
            state.dispatching = false
            if let response = state.syncResponse {
                state.syncResponse = nil
                complete(sequence, response)
            }
        case .handler(.local(let handler), let parameters):
            let writer = context.responseWriter(for: self, sequence: sequence)
            state.dispatching = true
            let answer = handler(Request(head: head, body: body, pathParameters: parameters, peer: peer),
                                 LocalRoute(loopIndex: context.index, writer: writer))
            state.dispatching = false
            switch answer {
            case .respond(let response):
                state.syncResponse = nil
                complete(sequence, response)
            case .later:
                if let response = state.syncResponse {
                    state.syncResponse = nil
                    complete(sequence, response)
                }
            case .stream(let status, let headers, let streamHandler):
                state.syncResponse = nil
                openStream(status: status, headers: headers, handler: streamHandler)
            }
        }
    }

    // MARK: Streaming responses (TR-1)

    /// Queues a streaming response's head and hands the connection to `handler`. The request
    /// stays in flight (a pipelined request behind it waits) until `finishStream`.
    private func openStream(status: HTTPStatus, headers: HTTPHeaders, handler: ResponseStreamHandler) {
        guard let state = httpState, let request = state.inFlight else { return }
        state.inFlight = nil
        // The stream may last for hours: what the request's head grew is given back.
        state.machine.releaseIdleBuffers()
        // HTTP/1.0 has no chunked coding: its body ends with the connection.
        state.streamChunked = !request.http10
        state.streamKeepAlive = request.keepAlive && state.streamChunked
        state.streamHandler = handler
        // As for a WebSocket (QS-3): a slow reader's backlog stays in the queue, where the
        // handler's drop marks see it, not in an autotuned kernel buffer.
        if context.configuration.webSocketSendBufferBytes > 0 { Socket.setSendBuffer(fd, bytes: context.configuration.webSocketSendBufferBytes) }
        enqueue(ByteBlock.from(HTTPResponseEncoder.streamHead(HTTPResponseHead(status: status, headers: headers), date: context.date,
                                                              chunked: state.streamChunked)))
        handler.streamDidOpen(self)
    }

    /// Writes `bytes` as the next piece of the streaming response's body (one chunk). Ignored
    /// when no stream is open. Bounding what is queued is the handler's part (`isOverOutboundBound`).
    public func writeStream(_ bytes: UnsafeRawBufferPointer) {
        guard let state = httpState, state.streamHandler != nil, bytes.count > 0 else { return }
        guard state.streamChunked else {
            enqueue(ByteBlock.copying(bytes))
            return
        }
        let header = HTTPResponseEncoder.chunkHeader(bytes.count)
        enqueue(ByteBlock.make(count: header.count + bytes.count + 2) { out in
            header.withUnsafeBytes { out.baseAddress!.copyMemory(from: $0.baseAddress!, byteCount: header.count) }
            (out.baseAddress! + header.count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            out[header.count + bytes.count] = 0x0D
            out[header.count + bytes.count + 1] = 0x0A
        })
    }

    /// The output queue holds more than `ServerConfiguration.maxOutboundBytes`.
    public var isOverOutboundBound: Bool { output.heldBytes > maxOutboundBytes }

    /// A slow streaming reader (QS-3): what it has not started to receive is dropped, so the
    /// handler's last message follows whatever chunk is mid-write.
    public func dropUnsentStream() {
        guard streamHandler != nil else { return }
        context.metrics.slowConsumers.add(1, ordering: .relaxed)
        context.logger.info("closing slow consumer", metadata: ["connection.peer": "\(peer)", "queued": "\(output.heldBytes)"])
        output.dropUnstarted()
    }

    /// Ends the streaming response: the last chunk, then the connection takes its next request
    /// (or closes, as any response would). The handler is not told (it ended it).
    public func finishStream() {
        guard let state = httpState, state.streamHandler != nil else { return }
        state.streamHandler = nil
        guard state.streamChunked else {
            beginClose()
            return
        }
        enqueue(ByteBlock.from(HTTPResponseEncoder.lastChunk))
        let keepAlive = state.streamKeepAlive && state.machine.mayKeepAlive && !context.draining && !peerSentEOF
        state.machine.responseSent(keepAlive: keepAlive, outputOverBound: output.heldBytes > maxOutboundBytes, now: context.now, into: &state.actions)
        runHTTPActions()
        if readPending && !inReadLoop { readAvailable() }
    }

    /// A handler's response arrives (on the loop). Out-of-date or duplicate ones are ignored.
    func complete(_ sequence: UInt64, _ response: Response) {
        guard phase == .http, let state = httpState, sequence == state.requestSequence, let request = state.inFlight else { return }
        if state.dispatching {
            if state.syncResponse == nil { state.syncResponse = response }
            return
        }
        state.inFlight = nil
        let keepAlive = request.keepAlive && state.machine.mayKeepAlive && !context.draining && !response.closeConnection && !peerSentEOF
        write(response, http10: request.http10, headRequest: request.headRequest, close: !keepAlive)
        context.metrics.requestDurations.record(nanoseconds: Instant.now().nanoseconds &- request.started.nanoseconds)
        // The response is queued whatever its size; past the bound, the next pipelined request
        // waits until the peer has read enough (`flush` → `outputDrained`).
        state.machine.responseSent(keepAlive: keepAlive, outputOverBound: output.heldBytes > maxOutboundBytes,
                                   now: context.now, into: &state.actions)
        runHTTPActions()
        // Input paused for this response may be waiting (no new edge will announce it).
        if readPending && !inReadLoop { readAvailable() }
    }

    /// A refusal of the server's own, rendered by the application's renderer.
    private func refusal(_ status: HTTPStatus, _ message: String, headers: HTTPHeaders = HTTPHeaders(), close: Bool = false) -> Response {
        ServerRefusal(status: status, message: message).response(renderedBy: context.errorRenderer, headers: headers, close: close)
    }

    private func write(_ response: Response, http10: Bool = false, headRequest: Bool = false, close: Bool) {
        // Encoded straight into one exactly-sized block: no intermediate buffer, one allocation.
        let responseHead = HTTPResponseHead(status: response.status, headers: response.headers)
        let keepAlive10 = http10 && !close
        let date = context.date
        let size = HTTPResponseEncoder.encodedSize(responseHead, body: response.body, date: date, close: close,
                                                   headRequest: headRequest, keepAlive: keepAlive10)
        enqueue(ByteBlock.make(count: size) { out in
            HTTPResponseEncoder.write(responseHead, body: response.body, date: date, close: close, headRequest: headRequest,
                                      keepAlive: keepAlive10, to: out.baseAddress!)
        })
    }

    // MARK: WebSocket

    private func upgrade(_ head: HTTPRequestHead, leftover: [UInt8]) {
        let ws = context.configuration.webSocket
        let result = WebSocketHandshake.validate(
            method: head.method.rawValue, isHTTP11: head.version == .http1_1,
            hasBody: head.framing != .none && head.framing != .contentLength(0),
            header: { head.headers.values($0) }, allowedOrigins: ws.allowedOrigins, deflate: ws.deflate)
        let acceptance: WebSocketHandshake.Acceptance
        switch result {
        case .failure(let rejection):
            var headers = HTTPHeaders()
            if case .unsupportedVersion = rejection { headers.add("Sec-WebSocket-Version", "13") }
            let message: String
            switch rejection {
            case .badRequest(let why): message = why
            case .unsupportedVersion: message = "unsupported WebSocket version"
            case .forbiddenOrigin(let origin): message = "origin not allowed: \(origin)"
            }
            write(refusal(HTTPStatus(code: rejection.statusCode), message, headers: headers, close: true),
                  http10: head.version == .http1_0, headRequest: head.method == .HEAD, close: true)
            beginClose()
            return
        case .success(let a):
            acceptance = a
        }
        let decision = context.upgradeHandler(head, peer, context.index)
        let handler: WebSocketHandler
        var subprotocol: String?
        switch decision {
        case .accept(let h):
            handler = h
        case .acceptSpeaking(let h, let name):
            handler = h
            subprotocol = name
        case .reject(let response):
            write(response, headRequest: head.method == .HEAD, close: true)
            beginClose()
            return
        }
        var inflater: MessageInflater?
        var negotiated: Deflate?
        if let p = acceptance.deflate {
            do {
                inflater = try MessageInflater(windowBits: 15, noContextTakeover: p.clientNoContextTakeover,
                                               maxOutputBytes: min(ws.deflate.maxInflatedBytes, ws.maxMessageBytes))
                negotiated = Deflate(p)
            } catch {
                inflater = nil
            }
        }
        var responseHead = HTTPResponseHead(status: .switchingProtocols)
        for h in WebSocketHandshake.Acceptance(acceptValue: acceptance.acceptValue, deflate: negotiated?.parameters).responseHeaders {
            responseHead.headers.add(h.name, h.value)
        }
        if let subprotocol { responseHead.headers.add("Sec-WebSocket-Protocol", subprotocol) }
        let size = HTTPResponseEncoder.encodedSize(responseHead, body: [], date: nil, close: false, headRequest: false)
        enqueue(ByteBlock.make(count: size) { out in
            HTTPResponseEncoder.write(responseHead, body: [], date: nil, close: false, headRequest: false, to: out.baseAddress!)
        })

        phase = .webSocket
        // QS-3: a slow reader's backlog stays in the connection's queue, where past the soft mark
        // its droppable events are shed and told as a gap, not in a kernel buffer autotuned to
        // megabytes where nothing can be shed.
        if context.configuration.webSocketSendBufferBytes > 0 { Socket.setSendBuffer(fd, bytes: context.configuration.webSocketSendBufferBytes) }
        // The actions behind the upgrade are not run (`runHTTPActions` holds the state).
        httpState?.actions.removeAll()
        endHTTPPhase()
        if let negotiated { phaseState = .deflate(negotiated) }
        self.ws = WebSocketConnectionStateMachine(settings: context.webSocketSettings, inflater: inflater, now: context.now)
        wsHandler = handler
        context.metrics.webSocketsOpened.add(1, ordering: .relaxed)
        context.metrics.webSocketsOpen.add(1, ordering: .relaxed)
        handler.webSocketDidOpen(self)
        if !leftover.isEmpty {
            var copy = leftover
            copy.withUnsafeMutableBytes { received($0) }
        }
    }

    private func perform(_ actions: [WebSocketConnectionAction]) {
        for action in actions {
            switch action {
            case .deliver(let message):
                wsHandler?.webSocket(self, didReceive: message)
            case .sendPong(let payload):
                enqueue(ByteBlock.from(Self.pongFrame(payload)))
            case .sendPing:
                enqueue(Self.pingBlock)
            case .sendClose(let code, let reason):
                if closeFrameQueued { continue }
                closeFrameQueued = true
                // An empty close carries no code: the handler is told 1005 (RFC 6455 §7.1.5).
                closeCode = code ?? .noStatus
                enqueue(ByteBlock.from(Self.closeFrame(code: code, reason: reason)))
            case .closeAfterFlush:
                beginClose()
            case .closeNow:
                closeNow()
            }
        }
    }

    static func pongFrame(_ payload: [UInt8]) -> [UInt8] {
        WebSocketFrameEncoder.frame(opcode: .pong, payload: payload)
    }

    static let pingBlock = ByteBlock.from(WebSocketFrameEncoder.frame(opcode: .ping, payload: [UInt8]()))

    /// A close frame; without a code the payload is empty (a reason cannot be sent without one).
    static func closeFrame(code: WebSocketCloseCode?, reason: String) -> [UInt8] {
        WebSocketFrameEncoder.frame(opcode: .close, payload: code.map { WebSocketFrameEncoder.closePayload(code: $0, reason: reason) } ?? [])
    }

    /// Sends a text or binary message (compressed when permessage-deflate was negotiated).
    public func send(_ message: WebSocketMessage) {
        guard acceptsFrames else { return }
        let opcode: WebSocketOpcode
        switch message {
        case .text: opcode = .text
        case .binary: opcode = .binary
        }
        var payload = message.bytes
        var rsv1 = false
        if let d = deflate, payload.count >= context.configuration.webSocket.deflate.minimumSizeToCompress {
            do {
                let p = d.parameters
                if d.deflater == nil {
                    d.deflater = try MessageDeflater(windowBits: p.serverMaxWindowBits, noContextTakeover: p.serverNoContextTakeover,
                                                     level: context.configuration.webSocket.deflate.compressionLevel,
                                                     memoryLevel: context.configuration.webSocket.deflate.memoryLevel)
                }
                payload = try d.deflater!.compress(payload)
                rsv1 = true
            } catch {
                context.logger.error("deflate failed; sending uncompressed", metadata: ["error": "\(error)"])
            }
        }
        let count = payload.count
        let block = ByteBlock.make(count: WebSocketFrameEncoder.headerLength(payloadLength: count, masked: false) + count) { out in
            let h = WebSocketFrameEncoder.writeHeader(rsv1: rsv1, opcode: opcode, payloadLength: count, to: out.baseAddress!)
            payload.withUnsafeBytes { src in
                if count > 0 { (out.baseAddress! + h).copyMemory(from: src.baseAddress!, byteCount: count) }
            }
        }
        sendFrame(block)
    }

    /// Bytes queued for the peer and not yet written (each queued piece counts 64 bytes more).
    public var queuedBytes: Int { output.heldBytes }

    /// The part of `queuedBytes` the socket did not take at the last write (QS-3: how far behind
    /// the reader is). What was queued since, not yet offered to the socket (this iteration's
    /// events, or held ones), is not counted: a loop that fell behind and queues several events at
    /// once does not make a reader that keeps up look slow.
    public var backlogBytes: Int { output.stalledBytes }

    /// Queues an already-encoded frame (fan-out: the same block goes to many connections).
    /// A consumer whose queue passes the bound (ServerConfiguration.maxOutboundBytes) is closed
    /// as slow.
    public func sendFrame(_ frame: ByteBlock) {
        guard acceptsFrames else { return }
        enqueue(frame)
        if output.heldBytes > maxOutboundBytes {
            closeSlowConsumer()
        }
    }

    /// As `sendFrame`, for an event that may wait up to `ServerConfiguration.writeDelay` to be
    /// written with the events after it (`LoopContext.holds`). It is never reordered: whatever is
    /// queued later, an answer included, goes out after it, and an answer written sooner takes it
    /// along.
    ///
    /// `hold` false: the event is written before the loop sleeps (with whatever is held before
    /// it), but counts as an event written, so the loop's window opens after it as after any.
    public func sendEvent(_ frame: ByteBlock, hold: Bool = true) {
        guard acceptsFrames else { return }
        append(frame)
        if !isDirty {
            // Held only while the queue stays small (`ServerConfiguration.maxHeldBytes`).
            let small = output.heldBytes <= context.configuration.maxHeldBytes
            if !hold {
                context.wroteEvent()
                markDirty()
            } else if isHeld {
                if !small { markDirty() }
            } else if small && context.holds(self) {
                isHeld = true
            } else {
                markDirty()
            }
        }
        if output.heldBytes > maxOutboundBytes {
            closeSlowConsumer()
        }
    }

    /// The write-delay window closed: what is held is written before the loop sleeps.
    func windowClosed() {
        isHeld = false
        if !output.isEmpty { markDirty() }
    }

    private func closeSlowConsumer(counted: Bool = true) {
        if counted { context.metrics.slowConsumers.add(1, ordering: .relaxed) }
        context.logger.info("closing slow consumer", metadata: ["connection.peer": "\(peer)", "queued": "\(output.heldBytes)"])
        // What it has not started to receive is dropped; the close frame follows whatever frame is
        // mid-write. If the peer reads again it sees the code; if not, the close-handshake timer
        // (closeTimeout) drops the connection.
        output.dropUnstarted()
        close(code: context.configuration.webSocket.slowConsumerCloseCode, reason: "slow consumer")
    }

    /// Starts the closing handshake (e.g. 1001 on shutdown).
    public func close(code: WebSocketCloseCode, reason: String) {
        guard phase == .webSocket else { return }
        var actions: [WebSocketConnectionAction] = []
        ws!.close(code: code, reason: reason, now: context.now, into: &actions)
        perform(actions)
    }

    // MARK: Output and closing

    func enqueue(_ block: ByteBlock) {
        append(block)
        markDirty()
    }

    private func append(_ block: ByteBlock) {
        // QS-3: the send timeout counts from when there is something to send.
        if output.isEmpty { lastProgress = context.now }
        output.append(block)
    }

    private func markDirty() {
        guard !isDirty else { return }
        isDirty = true
        // A streaming response is written with the WebSockets (in slices), not ahead of them.
        if isWebSocket || streamHandler != nil { context.dirty.append(self) } else { context.dirtyHTTP.append(self) }
    }

    /// Writes what is queued (called before the loop sleeps, and on writability).
    func flush() {
        isDirty = false
        if phase == .closed { return }
        if !output.isEmpty {
            let before = output.pendingBytes
            do {
                _ = try output.flush(fd: fd, iovecs: context.loop.iovecs)
            } catch {
                closeNow()
                return
            }
            if output.pendingBytes < before {
                lastProgress = context.now
                progress.wrote(at: context.now)
            }
            if (readPending || (phase == .http && httpState!.machine.isOutputBlocked)) && output.heldBytes <= maxOutboundBytes {
                resumeInput()
                if phase == .closed { return }
            }
            // The socket is full: its writable edge calls flush again. (Checked on the queue, not on
            // the flush's result: resuming input may have queued more.)
            if !output.isEmpty { return }
        }
        if closeWhenFlushed { finishClose() }
    }

    /// The output queue is within its bound again: input paused for it continues.
    private func resumeInput() {
        if phase == .http, let state = httpState, state.machine.isOutputBlocked {
            state.machine.outputDrained(now: context.now, into: &state.actions)
            runHTTPActions()
        }
        // Input that arrived while paused raised no new edge. (Inside a read loop this is a no-op:
        // the loop checks again before its next read.)
        if readPending && !inReadLoop && phase != .closed { readAvailable() }
    }

    /// Close once everything queued has been written.
    func beginClose() {
        closeWhenFlushed = true
        if phase == .closed { return }
        if case .lingering = phase { return }
        markDirty()
    }

    private func finishClose() {
        if case .lingering = phase { return }
        if peerSentEOF {
            closeNow()
            return
        }
        // Send FIN, then drain what the peer still sends so our last bytes are not lost to a reset.
        Socket.shutdownWrite(fd)
        notifyClosed()
        phase = .lingering(deadline: context.now + context.configuration.http.lingerTimeout)
        endHTTPPhase()
        ws = nil
        // Input already waiting raises no new edge: drain it now.
        readAvailable()
    }

    func closeNow() {
        if phase == .closed { return }
        notifyClosed()
        phase = .closed
        endHTTPPhase()
        ws = nil
        output.removeAll()
        if let registration { context.loop.deregister(registration) }
        registration = nil
        closeDescriptor(fd)
        context.remove(self)
    }

    private func notifyClosed() {
        if let state = httpState, let handler = state.streamHandler {
            state.streamHandler = nil
            handler.streamDidClose(self)
        }
        if let handler = wsHandler {
            wsHandler = nil
            context.metrics.webSocketsOpen.subtract(1, ordering: .relaxed)
            handler.webSocketDidClose(self, code: closeCode)
        }
    }

    /// Shutdown: idle HTTP connections close now, busy ones after their response, WebSockets
    /// get a 1001 close frame.
    func drain() {
        switch phase {
        case .http where streamHandler != nil:
            streamHandler?.streamShouldFinish(self)
        case .http:
            if httpState?.machine.isIdle == true { beginClose() }
        case .webSocket:
            close(code: .goingAway, reason: "server shutting down")
        case .lingering, .closed:
            break
        }
    }
}

/// A JSON string literal for `s` (quotes and escapes included).
public func jsonQuote(_ s: String) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}
