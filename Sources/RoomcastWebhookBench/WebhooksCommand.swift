import ArgumentParser
import Chat
import Foundation
import Logging
import Reactor
import Server
import Store
import Synchronization
import Webhooks
#if canImport(Glibc)
import Glibc
#endif

/// A webhook receiver: answers every `POST /hook` with 204 (our own server, two loops).
struct ReceiveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "receive", abstract: "Answer POST /hook with 204 until stopped (a webhook receiver).")

    @Option(help: "Port on 127.0.0.1 (0: any; the chosen port is printed).")
    var port: UInt16 = 0

    @Option(help: "Event loops.")
    var eventLoops = 1

    func run() throws {
        blockSignals([SIGINT, SIGTERM])
        var c = ServerConfiguration()
        c.host = "127.0.0.1"
        c.port = port
        c.eventLoops = eventLoops
        c.http.maxRequestsPerConnection = 1 << 30
        var routes = Router.Builder()
        let accepted = Response(status: .noContent)
        routes.add(.POST, "/hook", sync: { _ in accepted })
        var logger = Logger(label: "receiver")
        logger.logLevel = .warning
        let server = try HTTPServer(configuration: c, router: routes.build(), logger: logger)
        try server.start()
        print("receive: listening on http://127.0.0.1:\(server.port)/hook")
        fflush(nil)
        _ = waitForSignal([SIGINT, SIGTERM])
        server.shutdown()
    }
}

/// WH-6 speed: N webhook messages written to the outbox (as the engine does, in batches), then
/// delivered, signed (Standard Webhooks), to a receiver through the libcurl delivery thread.
struct WebhooksCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks", abstract: "Deliver N signed webhooks through the durable outbox to a local receiver; print deliveries/s.")

    @Option(help: "Receiver port on 127.0.0.1 (POST /hook).")
    var receiverPort: UInt16

    @Option(help: "Messages to deliver.")
    var messages = 100_000

    @Option(help: "Attempts in flight at once.")
    var concurrency = 64

    @Option(help: "Messages per outbox transaction (the engine commits outcomes in batches like this).")
    var batch = 500

    func run() throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("roomcast-webhook-bench-\(getpid())").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try Store(path: dir + "/bench.sqlite", durability: .normal, logger: logger)
        try store.upsertApp(key: "bench", secret: "bench-secret", origin: "config", settings: AppSettings(), now: wallClockMilliseconds())
        var config = WebhookService.Configuration()
        config.maxInFlight = concurrency
        config.maxInFlightPerEndpoint = concurrency
        let ids = Atomic<Int>(0)
        let service = WebhookService(store: store, configuration: config, logger: logger, clock: wallClockMilliseconds,
                                     random: { Double.random(in: 0..<1) }, makeID: { String(ids.add(1, ordering: .relaxed).newValue) },
                                     appSecret: { _ in "bench-secret" })
        try service.configure(app: "bench", .init(url: "http://127.0.0.1:\(receiverPort)/hook", allowPrivateNetwork: true))
        store.start()
        try service.start()

        let start = Instant.now()
        var written = 0
        while written < messages {
            let n = min(batch, messages - written)
            let now = wallClockMilliseconds()
            let records = (0..<n).map { i in
                WebhookRecord(app: "bench", type: .messageSent, roomId: "room\(i % 100)", userIds: ["user\(i)"], time: now,
                              details: ["messageId": "m\(written + i)", "type": "text", "content": "hello, this is message \(written + i)"])
            }
            guard let staged = service.stage(records) else { throw ValidationError("no endpoint wants the messages") }
            store.submit(Store.Commit(mutations: [], extra: WebhookService.persist(staged), onDurable: { service.enqueue(staged) }))
            written += n
        }
        let deadline = Instant.now() + .seconds(300)
        while service.stats.delivered.load(ordering: .relaxed) < messages && Instant.now() < deadline { usleep(2_000) }
        let elapsed = seconds(Instant.now() - start)
        let delivered = service.stats.delivered.load(ordering: .relaxed)
        print("webhooks: delivered=\(delivered)/\(messages) attempts=\(service.stats.attempts.load(ordering: .relaxed)) "
            + "failed_attempts=\(service.stats.failedAttempts.load(ordering: .relaxed)) concurrency=\(concurrency) "
            + "elapsed=\(Int(elapsed * 1000)) ms deliveries_per_s=\(Int(Double(delivered) / elapsed))")
        service.stop()
        store.stop()
        if delivered < messages { throw ExitCode.failure }
    }
}
