import HTTP1
import Reactor

/// What the connection shell must do next.
public enum HTTPConnectionAction: Equatable, Sendable {
    /// A complete request: take it with `takeRequest()` and route it. No further request is
    /// parsed until `responseSent`. (Carried apart from the action, so that queueing and
    /// running actions never copies or destroys a head.)
    case request
    /// Write `HTTP/1.1 100 Continue` (the client waits for it before sending the body).
    case sendContinue
    /// Answer with this status and close; nothing behind the request is answered.
    case reject(HTTPStatus, reason: String)
    /// The request asks for the WebSocket path: validate the handshake; `leftover` are bytes that
    /// arrived after the head (the first frames).
    case upgrade(HTTPRequestHead, leftover: [UInt8])
    /// Close the connection (after any queued bytes are written).
    case close
}

/// One HTTP/1.1 connection as a pure state machine: bytes and clock ticks in, actions out.
///
/// Requests are handled one at a time in arrival order; bytes of pipelined requests wait in
/// `pending` until the current response has been queued, so responses leave in request order.
/// While the connection's output queue is over its bound, the next request waits too
/// (`outputBlocked`): a client that pipelines and never reads cannot make the server produce
/// more than the bound (ServerConfiguration.maxOutboundBytes).
public struct HTTPConnectionStateMachine {
    enum State: Equatable {
        /// Between requests, since this instant.
        case waiting(since: Instant)
        case readingHead(since: Instant)
        case readingBody(since: Instant)
        case awaitingResponse
        /// The last response is queued but the output queue is over its bound: nothing more is
        /// read or parsed until `outputDrained`. No timer runs: the peer is not idle, we are
        /// waiting for it to read.
        case outputBlocked
        case upgraded
        case closed
    }

    public let configuration: HTTPConnectionConfiguration
    public let upgradePath: String?
    private(set) var state: State
    private var parser: HTTPRequestParser
    private var body: [UInt8] = []
    /// The head of the request being read, with its body in `body`, then of the request a
    /// `.request` action announced, until the shell takes both (the next head is parsed only after
    /// `responseSent`). Kept apart, not as an optional tuple: destroying one of those goes through
    /// the runtime's generic witnesses.
    private var readyHead: HTTPRequestHead?
    private var pending: [UInt8] = []
    public private(set) var requestsStarted = 0

    /// A connection that will not read a request for a long while (a streaming response, TR-1)
    /// gives back what the last request grew, unless bytes of a next one are already here.
    public mutating func releaseIdleBuffers() {
        guard pending.isEmpty else { return }
        pending = []
        body = []
        parser.releaseBuffersIfIdle()
    }

    public init(configuration: HTTPConnectionConfiguration, upgradePath: String?, now: Instant) {
        self.configuration = configuration
        self.upgradePath = upgradePath
        self.parser = HTTPRequestParser(limits: configuration.limits)
        self.state = .waiting(since: now)
    }

    /// False while enough pipelined input is buffered, or while the output queue is over its
    /// bound: stop reading the socket until a response has been sent or the output drained.
    public var wantsInput: Bool {
        switch state {
        case .awaitingResponse: return pending.count < configuration.maxBufferedInput
        case .outputBlocked, .closed, .upgraded: return false
        default: return true
        }
    }

    public var isAwaitingResponse: Bool { state == .awaitingResponse }

    /// The request the last `.request` action announced. Called once per `.request`.
    public mutating func takeRequest() -> (head: HTTPRequestHead, body: [UInt8]) {
        let taken = body
        body = []
        return (readyHead.take()!, taken)
    }

    /// Waiting for the output queue to drain to its bound before the next request.
    public var isOutputBlocked: Bool { state == .outputBlocked }

    /// True between requests with nothing buffered: closing now loses nothing.
    public var isIdle: Bool {
        if case .waiting = state { return pending.isEmpty }
        return false
    }

    /// Whether another request may follow the current one on this connection.
    public var mayKeepAlive: Bool { requestsStarted < configuration.maxRequestsPerConnection }

    public mutating func read(_ bytes: UnsafeRawBufferPointer, now: Instant, into actions: inout [HTTPConnectionAction]) {
        switch state {
        case .awaitingResponse, .outputBlocked:
            pending.append(contentsOf: bytes)
        case .closed, .upgraded:
            return
        case .waiting, .readingHead, .readingBody:
            process(bytes, now: now, into: &actions)
        }
    }

    /// The response to the current request has been queued. With `keepAlive` false the connection
    /// closes. Otherwise buffered pipelined bytes are parsed now, unless `outputOverBound` (the
    /// connection's output queue is over its bound): then they wait for `outputDrained`.
    public mutating func responseSent(keepAlive: Bool, outputOverBound: Bool, now: Instant, into actions: inout [HTTPConnectionAction]) {
        guard state == .awaitingResponse else { return }
        guard keepAlive else {
            state = .closed
            pending = []
            actions.append(.close)
            return
        }
        if outputOverBound {
            state = .outputBlocked
            return
        }
        resume(now: now, into: &actions)
    }

    /// The output queue has drained to its bound: parse what was held back.
    public mutating func outputDrained(now: Instant, into actions: inout [HTTPConnectionAction]) {
        guard state == .outputBlocked else { return }
        resume(now: now, into: &actions)
    }

    private mutating func resume(now: Instant, into actions: inout [HTTPConnectionAction]) {
        state = .waiting(since: now)
        if !pending.isEmpty {
            let buffered = pending
            pending = []
            buffered.withUnsafeBytes { process($0, now: now, into: &actions) }
        }
    }

    /// Checks the timers: slowloris (head), slow body, idle keep-alive.
    public mutating func tick(now: Instant, into actions: inout [HTTPConnectionAction]) {
        switch state {
        case .waiting(let since):
            if now - since >= configuration.keepAliveTimeout {
                state = .closed
                actions.append(.close)
            }
        case .readingHead(let since):
            if now - since >= configuration.headerTimeout {
                state = .closed
                actions.append(.reject(.requestTimeout, reason: "request head not received in time"))
            }
        case .readingBody(let since):
            if now - since >= configuration.bodyTimeout {
                state = .closed
                actions.append(.reject(.requestTimeout, reason: "request body not received in time"))
            }
        case .awaitingResponse, .outputBlocked, .upgraded, .closed:
            break
        }
    }

    /// The peer sent EOF. A request in flight, or held back while the output drains, is still
    /// answered (the shell closes after that answer); otherwise the connection closes once its
    /// queued output is written.
    public mutating func peerClosed(into actions: inout [HTTPConnectionAction]) {
        switch state {
        case .awaitingResponse, .closed, .upgraded:
            return
        case .outputBlocked where !pending.isEmpty:
            return
        default:
            state = .closed
            actions.append(.close)
        }
    }

    private mutating func process(_ bytes: UnsafeRawBufferPointer, now: Instant, into actions: inout [HTTPConnectionAction]) {
        var offset = 0
        while true {
            let (progress, used) = parser.next(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            let base = offset
            offset += used
            switch progress {
            case .needMoreData:
                switch state {
                case .waiting:
                    if !parser.isIdle { state = .readingHead(since: now) }
                case .readingHead:
                    if parser.isReadingBody { state = .readingBody(since: now) }
                default:
                    break
                }
                return
            case .error:
                let error = parser.error!
                state = .closed
                actions.append(.reject(error.status, reason: error.description))
                return
            case .head:
                let h = parser.takeHead()
                requestsStarted += 1
                // (Lengths first: comparing two different strings costs far more than their counts.)
                if let upgradePath, h.path.utf8.count == upgradePath.utf8.count, h.path == upgradePath {
                    state = .upgraded
                    actions.append(.upgrade(h, leftover: Array(bytes[offset...])))
                    return
                }
                if h.framing != .none && h.framing != .contentLength(0) {
                    state = .readingBody(since: now)
                    if h.expectContinue { actions.append(.sendContinue) }
                }
                readyHead = consume h
                body = []
            case .body(let range):
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[(base + range.lowerBound)..<(base + range.upperBound)]))
            case .end:
                state = .awaitingResponse
                if offset < bytes.count { pending.append(contentsOf: bytes[offset...]) }
                actions.append(.request)
                return
            }
        }
    }
}
