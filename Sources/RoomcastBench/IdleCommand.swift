import ArgumentParser
import Reactor
import Synchronization
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

/// Opens N WebSocket connections and holds them idle (for the server's memory per connection).
struct IdleCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "idle",
        abstract: "Open N WebSocket connections, hold them idle, and report when all are open.")

    @Option(help: "Server port on 127.0.0.1.")
    var port: UInt16

    @Option(help: "Upgrade path.")
    var path = "/"

    @Option(help: "Connections to open.")
    var connections = 10_000

    @Option(help: "Seconds to hold them open after the last one connected.")
    var hold = 10.0

    @Option(help: "Connection attempts in flight at once.")
    var concurrency = 256

    @Option(help: "A text message each connection sends once open (e.g. an auth frame).")
    var hello: String?

    func run() throws {
        raiseDescriptorLimit()
        let loop = try EventLoop(name: "bench-idle")
        let runner = IdleRunner(loop: loop, port: port, path: path, total: connections, concurrency: concurrency, hello: hello)
        loop.execute { runner.startMore() }
        let thread = PosixThread.start(name: "bench-idle") { loop.run() }
        let start = Instant.now()
        while runner.finished < connections { usleep(10_000) }
        let elapsed = seconds(Instant.now() - start)
        print("idle: open=\(runner.opened) failed=\(runner.failedCount) in \(fixed(elapsed, 2)) s")
        if let reason = runner.firstFailure { print("idle: first failure: \(reason)") }
        fflush(nil)
        usleep(UInt32(hold * 1_000_000))
        print("idle: dropped while holding=\(runner.droppedCount)")
        loop.stop()
        thread.join()
    }
}

final class IdleRunner: WSClientDelegate, @unchecked Sendable {
    // Safety: the non-atomic state is touched on `loop` only (the runner is handed to the loop
    // once, through `execute`); the main thread reads only the atomic counters.
    let loop: EventLoop
    let port: UInt16
    let path: String
    let total: Int
    let concurrency: Int
    let hello: [UInt8]?
    private var clients: [WSClientConnection] = []
    private var started = 0
    private var inFlight = 0
    private let openedCount = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    private let failure = Mutex<String?>(nil)
    var opened: Int { openedCount.load(ordering: .relaxed) }
    var failedCount: Int { failed.load(ordering: .relaxed) }
    var droppedCount: Int { dropped.load(ordering: .relaxed) }
    var firstFailure: String? { failure.withLock { $0 } }
    var finished: Int { opened + failedCount }

    init(loop: EventLoop, port: UInt16, path: String, total: Int, concurrency: Int, hello: String?) {
        self.loop = loop
        self.port = port
        self.path = path
        self.total = total
        self.concurrency = concurrency
        self.hello = hello.map { Array($0.utf8) }
    }

    func startMore() {
        while started < total && inFlight < concurrency {
            let c = WSClientConnection(loop: loop, id: started, host: "127.0.0.1", port: port, path: path)
            c.delegate = self
            clients.append(c)
            started += 1
            inFlight += 1
            c.start(address: Socket.Address(host: "127.0.0.1", port: port))
        }
    }

    func clientDidOpen(_ client: WSClientConnection) {
        client.tag = 1
        openedCount.add(1, ordering: .relaxed)
        inFlight -= 1
        if let hello { client.sendText(hello) }
        startMore()
    }

    func client(_ client: WSClientConnection, didReceive message: WebSocketMessageAssembler.Event) {}

    func clientDidFail(_ client: WSClientConnection, reason: String) {
        failure.withLock { if $0 == nil { $0 = reason } }
        if client.tag == 0 {
            failed.add(1, ordering: .relaxed)
            inFlight -= 1
        } else {
            dropped.add(1, ordering: .relaxed)
        }
        client.tag = 2
        startMore()
    }
}
