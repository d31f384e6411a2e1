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

    /// What it reads of the configuration: the three timers in nanoseconds and the message bound.
    /// Every connection of a loop shares one (`LoopContext.webSocketSettings`): an open connection
    /// keeps one reference, not 32 bytes of copies.
    public final class Settings: Sendable {
        let pingInterval: UInt64
        let pongTimeout: UInt64
        let closeTimeout: UInt64
        let maxMessageBytes: Int

        public init(_ configuration: WebSocketConfiguration) {
            pingInterval = Settings.nanoseconds(configuration.pingInterval)
            pongTimeout = Settings.nanoseconds(configuration.pongTimeout)
            closeTimeout = Settings.nanoseconds(configuration.closeTimeout)
            maxMessageBytes = configuration.maxMessageBytes
        }

        private static func nanoseconds(_ d: Duration) -> UInt64 {
            let (s, atto) = d.components
            guard s >= 0 else { return 0 }
            let ns = s.multipliedReportingOverflow(by: 1_000_000_000)
            return ns.overflow ? UInt64.max : UInt64(ns.partialValue) &+ UInt64(max(0, atto / 1_000_000_000))
        }
    }
    private let settings: Settings
    private var pingInterval: UInt64 { settings.pingInterval }
    private var pongTimeout: UInt64 { settings.pongTimeout }
    private var closeTimeout: UInt64 { settings.closeTimeout }
    private(set) var state: State = .open
    /// Between frames an assembler holds nothing a new one would not (`isIdle`), so an idle
    /// connection keeps none (about 190 bytes each): a read starts one on the stack, and only a
    /// frame or message left partly read keeps it, boxed, until it ends.
    private final class PartlyRead {
        var assembler: WebSocketMessageAssembler
        init(_ assembler: WebSocketMessageAssembler) { self.assembler = assembler }
    }
    private var partlyRead: PartlyRead?
    private var maxMessageBytes: Int { settings.maxMessageBytes }
    private let inflater: MessageInflater?
    private var lastInbound: Instant
    private var pingSentAt: Instant?
    /// A ping is waiting for its pong.
    public var awaitingPong: Bool { pingSentAt != nil }

    public init(configuration: WebSocketConfiguration, inflater: MessageInflater?, now: Instant) {
        self.init(settings: Settings(configuration), inflater: inflater, now: now)
    }

    public init(settings: Settings, inflater: MessageInflater?, now: Instant) {
        self.settings = settings
        self.inflater = inflater
        self.lastInbound = now
    }

    /// Nanoseconds from `start` to `now` (zero if `now` is earlier).
    private static func elapsed(_ now: Instant, since start: Instant) -> UInt64 {
        now.nanoseconds >= start.nanoseconds ? now.nanoseconds - start.nanoseconds : 0
    }

    /// No frame or message is partly read.
    public var isIdle: Bool { partlyRead == nil }

    public mutating func read(_ buffer: UnsafeMutableRawBufferPointer, now: Instant, into actions: inout [WebSocketConnectionAction]) {
        guard state != .closed else { return }
        lastInbound = now
        pingSentAt = nil
        if let kept = partlyRead {
            read(buffer, with: &kept.assembler, now: now, into: &actions)
            if kept.assembler.isIdle || state == .closed { partlyRead = nil }
        } else {
            var assembler = WebSocketMessageAssembler(role: .server, maxMessageBytes: maxMessageBytes, inflater: inflater)
            read(buffer, with: &assembler, now: now, into: &actions)
            if !assembler.isIdle && state != .closed { partlyRead = PartlyRead(assembler) }
        }
    }

    private mutating func read(_ buffer: UnsafeMutableRawBufferPointer, with assembler: inout WebSocketMessageAssembler, now: Instant,
                               into actions: inout [WebSocketConnectionAction]) {
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
                if Self.elapsed(now, since: sent) >= pongTimeout {
                    fail(.goingAway, "no pong", into: &actions)
                }
            } else if Self.elapsed(now, since: lastInbound) >= pingInterval {
                pingSentAt = now
                actions.append(.sendPing)
            }
        case .closeSent(let at):
            if Self.elapsed(now, since: at) >= closeTimeout {
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
