import HTTP1
import Logging
import Reactor
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public typealias UpgradeHandler = @Sendable (HTTPRequestHead, Socket.Address, _ loopIndex: Int) -> UpgradeDecision

/// One loop's counters. Only that loop writes them, so they never bounce between cores; readers
/// (/metrics, shutdown) sum the loops.
public final class LoopMetrics: Sendable {
    public let accepted = Atomic<Int>(0)
    public let open = Atomic<Int>(0)
    public let requests = Atomic<Int>(0)
    public let webSocketsOpened = Atomic<Int>(0)
    public let webSocketsOpen = Atomic<Int>(0)
    public let slowConsumers = Atomic<Int>(0)
    /// QS-3: connections closed because their output made no progress for the send timeout, and
    /// because all connections together held more than the total budget.
    public let sendTimeouts = Atomic<Int>(0)
    public let shedForBudget = Atomic<Int>(0)
    /// What this loop's connections held queued at its last sweep (bytes).
    public let outboundBytes = Atomic<Int>(0)
    /// How long each HTTP request took, from the loop iteration that read it to its answer being
    /// written or queued (a long-poll's wait included; event streams, WebSocket upgrades and
    /// malformed requests are not answers and are not counted).
    public let requestDurations = LatencyBuckets()
    /// Keeps two loops' counters off one cache line.
    private let padding: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
    public init() {}
}

/// What the application may ask of one loop's output (its thread only; `HTTPServer`'s
/// `onLoopStart` hands it over).
public final class LoopOutput {
    private unowned let context: LoopContext
    init(_ context: LoopContext) { self.context = context }

    /// Runs `body` on the loop once every connection with output queued now has been written
    /// (handed to its socket, or what the socket refused left queued); a fan-out to thousands is
    /// written in slices over several iterations. Output held for the write-delay window is not
    /// queued yet.
    public func whenWritten(_ body: @escaping () -> Void) { context.whenWritten(body) }
}

/// The server's counters: the sum over its loops.
public final class ServerMetrics: Sendable {
    public let loops: [LoopMetrics]
    public init(loops: Int) { self.loops = (0..<loops).map { _ in LoopMetrics() } }
    /// One per loop the configuration makes.
    public convenience init(for configuration: ServerConfiguration) { self.init(loops: max(1, configuration.eventLoops)) }
    public var accepted: Int { loops.reduce(0) { $0 + $1.accepted.load(ordering: .relaxed) } }
    public var open: Int { loops.reduce(0) { $0 + $1.open.load(ordering: .relaxed) } }
    public var requests: Int { loops.reduce(0) { $0 + $1.requests.load(ordering: .relaxed) } }
    public var webSocketsOpened: Int { loops.reduce(0) { $0 + $1.webSocketsOpened.load(ordering: .relaxed) } }
    public var webSocketsOpen: Int { loops.reduce(0) { $0 + $1.webSocketsOpen.load(ordering: .relaxed) } }
    public var slowConsumers: Int { loops.reduce(0) { $0 + $1.slowConsumers.load(ordering: .relaxed) } }
    public var sendTimeouts: Int { loops.reduce(0) { $0 + $1.sendTimeouts.load(ordering: .relaxed) } }
    public var shedForBudget: Int { loops.reduce(0) { $0 + $1.shedForBudget.load(ordering: .relaxed) } }
    /// What all connections held queued at their loops' last sweeps (bytes).
    public var outboundBytes: Int { loops.reduce(0) { $0 + $1.outboundBytes.load(ordering: .relaxed) } }
    /// Every loop's request durations together.
    public var requestDurations: LatencyBuckets.Snapshot { loops.reduce(LatencyBuckets.Snapshot()) { $0 + $1.requestDurations.snapshot } }
}

/// The server's state on one event loop: its listener, its connections, the writes to flush before
/// sleeping, and the cached `Date` value. Confined to that loop.
final class LoopContext {
    let index: Int
    let loop: EventLoop
    let configuration: ServerConfiguration
    /// The WebSocket timers and bound every connection of this loop shares.
    let webSocketSettings: WebSocketConnectionStateMachine.Settings
    let router: Router
    let upgradeHandler: UpgradeHandler
    let errorRenderer: ErrorRenderer
    let logger: Logger
    let metrics: LoopMetrics
    /// Every loop's counters (the budget of all connections' output is the server's).
    let serverMetrics: ServerMetrics
    @exclusivity(unchecked) private(set) var connections: [Connection] = []
    /// Connections with output to write before the loop sleeps. HTTP answers go first: a REST
    /// call's answer is not held behind a fan-out to thousands of WebSockets.
    @exclusivity(unchecked) var dirty: [Connection] = []
    /// `dirty[..<dirtyHead]` are written; the rest wait for the next slice.
    private var dirtyHead = 0
    /// Entries taken off the front of `dirty` so far (written), so `dirtyDropped + dirtyHead` counts
    /// every entry written and `dirtyDropped + dirty.count` every entry made: `whenWritten`'s marks.
    private var dirtyDropped = 0
    /// `whenWritten`'s calls, in order of their marks.
    private var afterWritten: [(mark: Int, body: () -> Void)] = []
    @exclusivity(unchecked) var dirtyHTTP: [Connection] = []
    /// Connections whose events wait for the write-delay window (`ServerConfiguration.writeDelay`);
    /// each at most once (`Connection.isHeld`), so the list is bounded by the connections.
    @exclusivity(unchecked) private var held: [Connection] = []
    /// The closing window's list, kept between windows for its storage.
    @exclusivity(unchecked) private var releasing: [Connection] = []
    /// The write-delay window: `.quiet` (events are written before the loop sleeps, as without a
    /// delay), `.writing` (this iteration wrote events: the window opens when the loop sleeps) or
    /// `.open` (events wait for it to close).
    private var window = EventWindow.quiet
    /// An event was written at once (`wroteEvent`) while the window was open: the loop is still
    /// busy, so the next window opens as after one that held events.
    private var wroteInWindow = false
    enum EventWindow { case quiet, writing, open }
    private(set) var date = HTTPDate(secondsSince1970: 0)
    private var dateSecond: Int64 = -1
    var draining = false
    private var listener: Listener?

    init(index: Int, loop: EventLoop, configuration: ServerConfiguration, router: Router, upgradeHandler: @escaping UpgradeHandler,
         errorRenderer: @escaping ErrorRenderer, logger: Logger, metrics: ServerMetrics) {
        self.serverMetrics = metrics
        self.index = index
        self.loop = loop
        self.configuration = configuration
        self.webSocketSettings = WebSocketConnectionStateMachine.Settings(configuration.webSocket)
        self.router = router
        self.upgradeHandler = upgradeHandler
        self.errorRenderer = errorRenderer
        self.logger = logger
        self.metrics = metrics.loops[index]
        refreshDate()
    }

    /// The loop's time of its current iteration.
    var now: Instant { loop.now }

    func start(listenerFD: Int32) throws {
        let listener = Listener(fd: listenerFD, context: self)
        listener.registration = try loop.register(fd: listenerFD, events: EventLoop.readable, handler: listener)
        self.listener = listener
        loop.addBeforeSleepHook { [unowned self] in self.flushDirty() }
        loop.scheduleRepeating(every: .seconds(1)) { [unowned self] in self.sweep() }
    }

    func accepted(fd: Int32, peer: Socket.Address) {
        if draining {
            closeDescriptor(fd)
            return
        }
        Socket.setNoDelay(fd)
        let connection = Connection(context: self, fd: fd, peer: peer, now: now)
        do {
            try connection.start()
        } catch {
            logger.error("cannot register connection", metadata: ["error": "\(error)"])
            closeDescriptor(fd)
            return
        }
        connection.index = Int32(connections.count)
        connections.append(connection)
        metrics.accepted.add(1, ordering: .relaxed)
        metrics.open.add(1, ordering: .relaxed)
    }

    func remove(_ connection: Connection) {
        let i = Int(connection.index)
        guard i >= 0, i < connections.count, connections[i] === connection else { return }
        let last = connections.removeLast()
        if last !== connection {
            connections[i] = last
            last.index = Int32(i)
        }
        connection.index = -1
        metrics.open.subtract(1, ordering: .relaxed)
    }

    /// Whether `connection`'s new event waits for the write-delay window to close (the caller
    /// marks it held) or is written before the loop sleeps. A loop that wrote no event for a
    /// window writes the next at once, with every event of the same iteration (a room's whole
    /// fan-out); from the iteration's end, events wait for the window to close, `writeDelay`
    /// later, and go out together. The window opens again after one that held anything, so a busy
    /// loop writes each connection at most once a window, and a quiet room's event is not delayed.
    func holds(_ connection: Connection) -> Bool {
        switch window {
        case .quiet:
            guard configuration.writeDelay > .zero else { return false }
            window = .writing
            return false
        case .writing:
            return false
        case .open:
            held.append(connection)
            return true
        }
    }

    /// An event written at once (`Connection.sendEvent` with `hold` false): as the first event of
    /// a quiet loop, it opens the window for the events after it.
    func wroteEvent() {
        switch window {
        case .quiet: if configuration.writeDelay > .zero { window = .writing }
        case .open: wroteInWindow = true
        case .writing: break
        }
    }

    /// The loop is about to sleep after writing events: hold the next ones for a window.
    private func openWindowIfWriting() {
        guard window == .writing else { return }
        window = .open
        _ = loop.schedule(after: configuration.writeDelay) { [unowned self] in self.closeWindow() }
    }

    private func closeWindow() {
        swap(&releasing, &held)
        for connection in releasing { connection.windowClosed() }
        // What was held is written now (before the loop sleeps): the next events wait for another window.
        window = releasing.isEmpty && !wroteInWindow ? .quiet : .writing
        wroteInWindow = false
        releasing.removeAll(keepingCapacity: releasing.count <= Self.flushBudget * 64)
    }

    /// Writes queued output, one writev per connection: every HTTP answer, then at most
    /// `flushBudget` WebSocket connections in the order they became dirty. Returns true if some are
    /// left: the loop then polls (without sleeping) and comes back for them. A fan-out to many
    /// thousands of connections is thus written in slices, and events, answers and requests that
    /// arrive meanwhile are taken between slices: a new event joins the queues of the connections
    /// not yet written (one writev carries both), and a REST answer is not held behind the whole
    /// fan-out.
    func flushDirty() -> Bool {
        openWindowIfWriting()
        flushHTTP()
        var budget = Self.flushBudget
        while dirtyHead < dirty.count {
            if budget == 0 {
                // Under a steady fan-out the list may never run empty (connections written in this
                // pass are added again by the next event): drop the written prefix once it is
                // most of the list, so the list stays within about twice the dirty connections.
                if dirtyHead >= Self.flushBudget * 4 && dirtyHead * 2 >= dirty.count {
                    dirty.removeSubrange(0..<dirtyHead)
                    dirtyDropped += dirtyHead
                    dirtyHead = 0
                }
                runWritten()
                return true
            }
            let connection = dirty[dirtyHead]
            dirtyHead += 1
            connection.flush()
            budget -= 1
            // An HTTP answer queued by this flush (input resumed) goes out first.
            if !dirtyHTTP.isEmpty { flushHTTP() }
        }
        dirtyDropped += dirty.count
        dirty.removeAll(keepingCapacity: dirty.count <= Self.flushBudget * 64)
        dirtyHead = 0
        runWritten()
        return false
    }

    /// Runs `body` once every connection with output queued now has been written (a fan-out to
    /// thousands is written in slices over several iterations): its output handed to its socket,
    /// or what the socket refused left queued. Output held for the write-delay window is not
    /// queued yet. Loop thread only.
    func whenWritten(_ body: @escaping () -> Void) {
        afterWritten.append((dirtyDropped + dirty.count, body))
    }

    private func runWritten() {
        guard let first = afterWritten.first, first.mark <= dirtyDropped + dirtyHead else { return }
        let written = dirtyDropped + dirtyHead
        let due = afterWritten.prefix { $0.mark <= written }.count
        let bodies = afterWritten[..<due].map(\.body)
        afterWritten.removeFirst(due)
        for body in bodies { body() }
    }

    private func flushHTTP() {
        while !dirtyHTTP.isEmpty {
            let batch = dirtyHTTP
            dirtyHTTP.removeAll(keepingCapacity: true)
            for connection in batch { connection.flush() }
        }
    }

    /// Entries in the slice list, written ones not yet dropped included; for tests (see `flushDirty`).
    var dirtyListCount: Int { dirty.count }

    /// WebSocket connections written per loop iteration (see `flushDirty`).
    static let flushBudget = 256

    /// Once a second: the Date header, every connection's timers (the send timeout among them),
    /// and the budget of all connections' queued output.
    func sweep() {
        refreshDate()
        let t = Instant.now()
        var i = 0
        var held = 0
        while i < connections.count {
            let c = connections[i]
            c.tick(now: t)
            // tick may have removed c (swapping the last connection into slot i)
            if i < connections.count && connections[i] === c {
                held += c.queuedBytes
                i += 1
            }
        }
        metrics.outboundBytes.store(held, ordering: .relaxed)
        shedOverBudget(held: held)
    }

    /// QS-3: while all loops' connections together hold more than `maxTotalOutboundBytes`, this
    /// loop closes its share of the excess (in proportion to what it holds), the connections that
    /// made progress least recently first.
    private func shedOverBudget(held: Int) {
        let total = serverMetrics.outboundBytes
        let budget = configuration.maxTotalOutboundBytes
        guard total > budget, held > 0 else { return }
        var share = Int(Double(total - budget) * Double(held) / Double(total)) + 1
        let stalest = connections.filter { $0.queuedBytes > 0 }.sorted { (a: Connection, b: Connection) in a.lastMoved < b.lastMoved }
        for c in stalest where share > 0 {
            share -= c.queuedBytes
            metrics.shedForBudget.add(1, ordering: .relaxed)
            logger.info("closing a connection: all connections hold more output than the server's budget",
                        metadata: ["connection.peer": "\(c.peer)", "queued": "\(c.queuedBytes)", "total": "\(total)", "budget": "\(budget)"])
            c.shed()
        }
    }

    private func refreshDate() {
        let seconds = wallClockMilliseconds() / 1000
        if seconds != dateSecond {
            dateSecond = seconds
            date = HTTPDate(secondsSince1970: seconds)
        }
    }

    func responseWriter(for connection: Connection, sequence: UInt64) -> ResponseWriter {
        let target = LoopBound(connection, loop: loop)
        let loop = self.loop
        return ResponseWriter { response in
            if loop.inEventLoop {
                target.value.complete(sequence, response)
            } else {
                loop.execute { target.value.complete(sequence, response) }
            }
        }
    }

    /// Stops accepting and starts closing connections gracefully.
    func beginDrain() {
        draining = true
        if let listener {
            if let r = listener.registration { loop.deregister(r) }
            closeDescriptor(listener.fd)
            self.listener = nil
        }
        for connection in connections { connection.drain() }
    }

    /// Drops whatever is still open (the drain deadline passed).
    func closeAll() {
        while let c = connections.last { c.closeNow() }
    }
}

/// Accepts connections on one loop's SO_REUSEPORT listening socket.
final class Listener: EventHandler {
    let fd: Int32
    unowned let context: LoopContext
    var registration: RegistrationID?

    init(fd: Int32, context: LoopContext) {
        self.fd = fd
        self.context = context
    }

    override func handleEvent(_ events: UInt32) {
        // Bounded, so one busy listener cannot starve the loop's other connections.
        for _ in 0..<256 {
            do {
                guard let (fd, peer) = try Socket.accept(fd) else { return }
                context.accepted(fd: fd, peer: peer)
            } catch {
                // EMFILE/ENFILE: out of descriptors. The socket stays readable, so pause accepting
                // for a moment instead of spinning.
                context.logger.warning("accept failed; pausing accepts for 100 ms", metadata: ["error": "\(error)"])
                guard let registration else { return }
                context.loop.modify(registration, events: 0)
                context.loop.schedule(after: .milliseconds(100)) { [weak self] in
                    guard let self, let r = self.registration else { return }
                    self.context.loop.modify(r, events: EventLoop.readable)
                }
                return
            }
        }
    }
}
