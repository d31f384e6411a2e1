#if canImport(Glibc)
import Glibc
#endif
import HTTP1
import Reactor
import WebSocket

/// Everything the server layer can be tuned with, in one value with documented defaults.
public struct ServerConfiguration: Sendable {
    /// Address to listen on.
    public var host = "127.0.0.1"
    /// Port to listen on; 0 picks a free port (see `HTTPServer.port`).
    public var port: UInt16 = 8080
    /// Event loops (threads), each with its own SO_REUSEPORT listener. Default: one per core.
    public var eventLoops = max(1, systemCoreCount())
    public var http = HTTPConnectionConfiguration()
    public var webSocket = WebSocketConfiguration()
    /// The one bound on what a connection makes the server hold for its peer: HTTP responses,
    /// `100 Continue`, WebSocket messages, pongs, pings and close frames all count, each queued
    /// block with its bookkeeping (`OutboundQueue.heldBytes`). While a connection's queue is over
    /// it, the connection is not read (as nginx does): no further pipelined request is parsed and
    /// no further WebSocket frame is read until the peer has taken enough for the queue to drop
    /// to the bound. What one read (at most `EventLoop` read buffer, 256 KiB) asks for, and an
    /// HTTP response already produced, can pass it once. A WebSocket message queued past it
    /// closes the connection as a slow consumer (`webSocket.slowConsumerCloseCode`).
    public var maxOutboundBytes = 4 << 20
    /// QS-3: a connection with output queued that makes no progress (the peer takes nothing) for
    /// this long is closed, whatever its phase (nginx's `send_timeout`, 60 s): a pipelining HTTP
    /// client that never reads, or a WebSocket that stopped reading, cannot hold its queue forever.
    public var sendTimeout: Duration = .seconds(60)
    /// QS-3: what all connections together may hold queued. Past it, the connections that made
    /// progress least recently are closed first (WebSockets as slow consumers, 4008), each loop
    /// shedding its share, until the total is back under it (checked every second).
    public var maxTotalOutboundBytes = 1 << 30
    /// QS-3: the kernel send buffer of each WebSocket (SO_SNDBUF, set at the upgrade; Linux keeps
    /// twice it for its bookkeeping). What a slow reader has not read waits in the connection's
    /// own queue beyond it, where its low, normal and transient events are dropped and counted in
    /// a `room.gap`. 0 leaves the kernel's autotuning (up to `net.ipv4.tcp_wmem`'s maximum).
    public var webSocketSendBufferBytes = 128 << 10
    /// How long a WebSocket's events may wait to be written with the events after them (Centrifugo
    /// PRO's `client.write_delay`). Zero (the default) writes them before the loop next sleeps.
    /// Past zero, a loop that has just written events (`Connection.sendEvent`) holds the next ones
    /// for this long and then writes each connection's held events in one `writev`; a window that
    /// held nothing ends it, so the first event after a quiet window goes at once
    /// (`LoopContext.holds`). A busy room then costs one write for several events instead of one
    /// each, the syscalls and TCP segments that are most of a delivery's CPU (BENCHMARKS.md), for
    /// at most this much latency. Answers, control frames and HTTP responses are never held, and
    /// one sent to a held connection takes the held events with it in order.
    public var writeDelay: Duration = .zero
    /// What a connection's queue may hold for the write-delay window: past it the connection is
    /// written at once. The gateway sets half its lowest QS-3 mark, so held events alone never
    /// make a reader that keeps up look slow (a dropped event, a `room.gap`, a 4008 close).
    public var maxHeldBytes = 32 << 10
    /// How long a shutdown waits for responses and WebSocket close handshakes before it cuts.
    public var drainTimeout: Duration = .seconds(10)

    public init() {}
}

/// Per-connection HTTP rules: codec limits and timers.
public struct HTTPConnectionConfiguration: Sendable {
    public var limits = HTTPLimits()
    /// A request head not complete this long after its first byte → 408 and close (slowloris).
    public var headerTimeout: Duration = .seconds(10)
    /// A request body not complete this long after its head → 408 and close.
    public var bodyTimeout: Duration = .seconds(30)
    /// An idle keep-alive connection is closed after this long.
    public var keepAliveTimeout: Duration = .seconds(75)
    /// After this many requests a connection answers with `Connection: close`.
    public var maxRequestsPerConnection = 10_000
    /// Pipelined bytes buffered while a response is pending; past this, reading pauses.
    public var maxBufferedInput = 64 * 1024
    /// How long a closing connection keeps draining input after sending its last bytes (so the
    /// peer reads our final response instead of getting a reset; nginx's lingering close).
    public var lingerTimeout: Duration = .seconds(2)

    public init() {}
}

public struct WebSocketConfiguration: Sendable {
    /// Path that upgrades to WebSocket; nil disables WebSocket.
    public var path: String? = "/ws"
    /// Largest message accepted (also after inflation); larger → close 1009.
    public var maxMessageBytes = 1 << 20
    /// Allowed `Origin` values (exact, `*`, or `https://*.example.com`); nil allows any.
    public var allowedOrigins: [String]?
    public var deflate = PerMessageDeflateConfiguration()
    /// A ping is sent after this long without inbound traffic.
    public var pingInterval: Duration = .seconds(25)
    /// No pong (or other traffic) this long after a ping → close.
    public var pongTimeout: Duration = .seconds(10)
    /// After sending a close frame, wait this long for the peer's close before dropping TCP.
    public var closeTimeout: Duration = .seconds(5)
    /// Close code sent to a consumer whose queue passes `ServerConfiguration.maxOutboundBytes`
    /// when a message is queued.
    public var slowConsumerCloseCode = WebSocketCloseCode(4008)

    public init() {}
}

func systemCoreCount() -> Int {
    Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))
}
