import Reactor
import WebSocket

/// A message received from a WebSocket peer.
public enum WebSocketMessage: Equatable, Sendable {
    case text([UInt8])
    case binary([UInt8])

    public var bytes: [UInt8] {
        switch self {
        case .text(let b), .binary(let b): return b
        }
    }
}

public enum WebSocketConnectionAction: Equatable, Sendable {
    /// Hand a message to the application.
    case deliver(WebSocketMessage)
    /// Answer a ping: a pong frame carrying the ping's payload.
    case sendPong(payload: [UInt8])
    /// A keep-alive ping with an empty payload.
    case sendPing
    /// A close frame. A nil code sends an empty close payload (the answer to an empty close);
    /// otherwise the payload is the code and `reason` (cut to fit a control frame).
    case sendClose(code: WebSocketCloseCode?, reason: String)
    /// Stop reading; close TCP once queued bytes are written (the peer has seen our close).
    case closeAfterFlush
    /// Drop the TCP connection now.
    case closeNow
}

/// One WebSocket connection's protocol state (RFC 6455 §5.5, §7): frames in, actions out.
/// Keep-alive pings and the close handshake are driven by `tick(now:)` with the time given.
public struct WebSocketConnectionStateMachine {
    enum State: Equatable {
        case open
        /// We sent a close frame at this instant and wait for the peer's.
        case closeSent(at: Instant)
        case closed
    }

    // The three timers it needs, not the whole configuration (kept once per open connection).
    private let pingInterval: Duration
    private let pongTimeout: Duration
    private let closeTimeout: Duration
    private(set) var state: State = .open
    private var assembler: WebSocketMessageAssembler
    private var lastInbound: Instant
    private var pingSentAt: Instant?
    /// A ping is waiting for its pong.
    public var awaitingPong: Bool { pingSentAt != nil }

    public init(configuration: WebSocketConfiguration, inflater: MessageInflater?, now: Instant) {
        self.pingInterval = configuration.pingInterval
        self.pongTimeout = configuration.pongTimeout
        self.closeTimeout = configuration.closeTimeout
        self.assembler = WebSocketMessageAssembler(role: .server, maxMessageBytes: configuration.maxMessageBytes, inflater: inflater)
        self.lastInbound = now
    }

    public mutating func read(_ buffer: UnsafeMutableRawBufferPointer, now: Instant, into actions: inout [WebSocketConnectionAction]) {
        guard state != .closed else { return }
        lastInbound = now
        pingSentAt = nil
        var offset = 0
        while offset <= buffer.count {
            let (step, used) = assembler.parse(UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]))
            offset += used
            switch step {
            case .needMoreData:
                return
            case .error(let error):
                fail(error.code, error.reason, into: &actions)
                return
            case .event(let event):
                handle(event, now: now, into: &actions)
                if state == .closed { return }
            }
        }
    }

    private mutating func handle(_ event: WebSocketMessageAssembler.Event, now: Instant, into actions: inout [WebSocketConnectionAction]) {
        switch event {
        case .text(let bytes):
            if state == .open { actions.append(.deliver(.text(bytes))) }
        case .binary(let bytes):
            if state == .open { actions.append(.deliver(.binary(bytes))) }
        case .ping(let payload):
            if state == .open { actions.append(.sendPong(payload: payload)) }
        case .pong:
            break
        case .close(let code, _):
            if state == .open {
                // Echo the peer's code (§5.5.1); an empty close is answered with an empty close.
                actions.append(.sendClose(code: code, reason: ""))
            }
            state = .closed
            actions.append(.closeAfterFlush)
        }
    }

    /// Fails the connection (§7.1.7): send a close frame with the code, then close.
    private mutating func fail(_ code: WebSocketCloseCode, _ reason: String, into actions: inout [WebSocketConnectionAction]) {
        if state == .open {
            actions.append(.sendClose(code: code, reason: reason))
        }
        state = .closed
        actions.append(.closeAfterFlush)
    }

    /// Starts the closing handshake from our side (shutdown 1001, policy closes, slow consumers).
    public mutating func close(code: WebSocketCloseCode, reason: String, now: Instant, into actions: inout [WebSocketConnectionAction]) {
        guard state == .open else { return }
        actions.append(.sendClose(code: code, reason: reason))
        state = .closeSent(at: now)
    }

    /// Keep-alive and close timers. `outputDrainedAt`: when the peer last took some of the
    /// connection's queued output (QS-3): a slow reader's pong waits behind what it has not read
    /// yet, so while it still takes output the pong timeout counts from the last time it did.
    public mutating func tick(now: Instant, outputDrainedAt: Instant? = nil, into actions: inout [WebSocketConnectionAction]) {
        switch state {
        case .open:
            if var sent = pingSentAt {
                if let drained = outputDrainedAt, drained > sent {
                    sent = drained
                    pingSentAt = drained
                }
                if now - sent >= pongTimeout {
                    fail(.goingAway, "no pong", into: &actions)
                }
            } else if now - lastInbound >= pingInterval {
                pingSentAt = now
                actions.append(.sendPing)
            }
        case .closeSent(let at):
            if now - at >= closeTimeout {
                state = .closed
                actions.append(.closeNow)
            }
        case .closed:
            break
        }
    }

    /// The peer closed TCP without a close handshake.
    public mutating func peerClosed(into actions: inout [WebSocketConnectionAction]) {
        guard state != .closed else { return }
        state = .closed
        actions.append(.closeNow)
    }
}
