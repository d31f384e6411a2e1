import HTTP1
import Logging
import Reactor
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The HTTP/1.1 + WebSocket server: one event loop thread per core, each with its own
/// SO_REUSEPORT listener and its own connections (nothing shared, no locks on the data path).
public final class HTTPServer: Sendable {
    public let configuration: ServerConfiguration
    public let metrics: ServerMetrics
    public let loops: [EventLoop]
    private let router: Router
    private let upgradeHandler: UpgradeHandler
    private let errorRenderer: ErrorRenderer
    private let onLoopStart: @Sendable (EventLoop, Int, LoopOutput) -> Void
    private let logger: Logger
    private let state = Mutex<State>(State())
    private let drainingLoops = Atomic<Int>(0)

    private struct State {
        var threads: [PosixThread] = []
        var port: UInt16 = 0
        var contexts: [Int: LoopBound<LoopContext>] = [:]
        var stopped = false
    }

    /// - `upgradeHandler`: decides on valid WebSocket handshakes (called on the connection's loop);
    ///   without one, every handshake is refused with 404.
    /// - `errorRenderer`: renders the refusals the server makes by itself (unknown path, wrong
    ///   method, malformed or timed-out requests, refused handshakes).
    /// - `onLoopStart`: runs on each loop's thread before it serves (per-loop application state),
    ///   with a handle on that loop's output.
    /// - `metrics`: the counters the server keeps (made beforehand by an owner that reports them,
    ///   `ServerMetrics(for:)`), or new ones.
    public init(configuration: ServerConfiguration, router: Router,
                upgradeHandler: UpgradeHandler? = nil,
                errorRenderer: @escaping ErrorRenderer = ServerRefusal.defaultRenderer,
                onLoopStart: @escaping @Sendable (EventLoop, Int, LoopOutput) -> Void = { _, _, _ in },
                metrics: ServerMetrics? = nil,
                logger: Logger) throws {
        self.configuration = configuration
        self.router = router
        self.upgradeHandler = upgradeHandler ?? { _, _, _ in
            .reject(ServerRefusal(status: .notFound, message: "no WebSocket here").response(renderedBy: errorRenderer, close: true))
        }
        self.errorRenderer = errorRenderer
        self.onLoopStart = onLoopStart
        self.logger = logger
        loops = try (0..<max(1, configuration.eventLoops)).map { try EventLoop(name: "roomcast-io-\($0)") }
        let metrics = metrics ?? ServerMetrics(for: configuration)
        precondition(metrics.loops.count == loops.count, "the server's metrics are made for its configuration's loops")
        self.metrics = metrics
    }

    /// The port actually bound (useful with port 0).
    public var port: UInt16 { state.withLock { $0.port } }

    /// Binds the listeners and starts the loop threads. Returns once every loop is serving.
    public func start() throws {
        ignoreSIGPIPE()
        raiseDescriptorLimit()
        var fds: [Int32] = []
        var port = configuration.port
        do {
            for _ in loops {
                let fd = try Socket.listen(on: Socket.Address(host: configuration.host, port: port), reusePort: true)
                if port == 0 { port = try Socket.localAddress(fd).port }
                fds.append(fd)
            }
        } catch {
            fds.forEach(closeDescriptor)
            throw error
        }
        state.withLock { $0.port = port }
        let ready = Atomic<Int>(0)
        let failure = Mutex<String?>(nil)
        for (index, loop) in loops.enumerated() {
            let fd = fds[index]
            let thread = PosixThread.start(name: loop.name) { [self] in
                let context = LoopContext(index: index, loop: loop, configuration: configuration, router: router,
                                          upgradeHandler: upgradeHandler, errorRenderer: errorRenderer, logger: logger, metrics: metrics)
                do {
                    try context.start(listenerFD: fd)
                } catch {
                    failure.withLock { $0 = "\(error)" }
                }
                state.withLock { $0.contexts[index] = LoopBound(context, loop: loop) }
                onLoopStart(loop, index, LoopOutput(context))
                ready.add(1, ordering: .releasing)
                loop.run()
            }
            state.withLock { $0.threads.append(thread) }
        }
        while ready.load(ordering: .acquiring) < loops.count { usleep(1000) }
        if let message = failure.withLock({ $0 }) {
            stopLoops()
            throw ServerError.startFailed(message)
        }
        logger.info("listening", metadata: ["host": "\(configuration.host)", "port": "\(port)", "loops": "\(loops.count)"])
    }

    public enum ServerError: Error, CustomStringConvertible {
        case startFailed(String)
        public var description: String {
            switch self {
            case .startFailed(let m): return "server failed to start: \(m)"
            }
        }
    }

    /// Graceful shutdown: stop accepting, let in-flight responses finish, close WebSockets with
    /// 1001, wait up to `drainTimeout`, then stop the loops. Returns when every loop has exited.
    public func shutdown() {
        let contexts = state.withLock { $0.contexts }
        for (_, bound) in contexts {
            bound.loop.execute { bound.value.beginDrain() }
        }
        let deadline = Instant.now() + configuration.drainTimeout
        while metrics.open > 0 && Instant.now() < deadline {
            usleep(10_000)
        }
        let left = metrics.open
        if left > 0 { logger.warning("drain timeout; dropping connections", metadata: ["open": "\(left)"]) }
        let done = Atomic<Int>(0)
        for (_, bound) in contexts {
            bound.loop.execute {
                bound.value.closeAll()
                done.add(1, ordering: .releasing)
            }
        }
        while done.load(ordering: .acquiring) < contexts.count { usleep(1000) }
        stopLoops()
    }

    private func stopLoops() {
        let threads = state.withLock { s -> [PosixThread] in
            if s.stopped { return [] }
            s.stopped = true
            return s.threads
        }
        for loop in loops { loop.stop() }
        for t in threads { t.join() }
    }
}
