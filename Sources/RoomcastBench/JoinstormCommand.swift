import ArgumentParser
import Wire
import Reactor
import Synchronization
import WebSocket
#if canImport(Glibc)
import Glibc
#endif

/// AU-4: N clients join one room within a window and stay; every member event they are sent is
/// counted (frames and wire bytes of `room.memberChanged`, `room.notification` and
/// `room.members`), with the server's CPU over the run, and each client's last known member
/// count is checked against the room's (N, less the clients the server closed: they left it).
struct JoinstormCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "joinstorm",
        abstract: "N clients join one room within a window and stay: member-event traffic, server CPU, and each client's final member count.")

    @Option(help: "Server port on 127.0.0.1.")
    var port: UInt16

    @Option(help: "Clients that join the room.")
    var clients = 10_000

    @Option(help: "Seconds over which the joins are spread evenly.")
    var window = 10.0

    @Option(help: "The app's memberEventsThreshold (AU-4): 0 sends an event per member (the vendors' way), N > 0 summarizes past N members present.")
    var threshold = 0

    @Option(help: "The app's memberSummaryIntervalMs.")
    var intervalMs = 1000

    @Option(help: "Seconds to wait, after the last join, for the member events to arrive (the run stops earlier once member traffic has been quiet for two seconds, or two summary intervals).")
    var settle = 60.0

    @Option(help: "Room id.")
    var room = "joinstorm"

    @Option(help: "App key.")
    var appKey = "bench"

    @Option(help: "App secret.")
    var appSecret = "bench-secret-0123456789"

    @Option(help: "Server process id: its CPU time (user + system) from the first join to the end is printed.")
    var serverPid: Int32?

    func run() throws {
        raiseDescriptorLimit()
        let address = Socket.Address(host: "127.0.0.1", port: port)
        try prepare(address)
        let loop = try EventLoop(name: "bench-joinstorm")
        let runner = JoinstormRunner(loop: loop, address: address, total: clients, window: window, room: room, appKey: appKey, appSecret: appSecret)
        let cpu0 = serverPid.map { FanoutCommand.cpuSeconds([$0]) } ?? 0
        let start = Instant.now()
        loop.execute { runner.start() }
        let thread = PosixThread.start(name: "bench-joinstorm") { loop.run() }
        // Until every client is in (or failed), then until member traffic has been quiet for two
        // seconds, or `settle` runs out.
        while runner.settledCount < clients && seconds(Instant.now() - start) < window + settle { usleep(20_000) }
        let joinedAt = seconds(Instant.now() - start)
        var lastBytes = runner.memberBytes, quietSince = Instant.now()
        while seconds(Instant.now() - start) < window + settle {
            usleep(100_000)
            let b = runner.memberBytes
            if b != lastBytes { lastBytes = b; quietSince = Instant.now() }
            // Member traffic quiet for two summary intervals' worth: the room has settled.
            if seconds(Instant.now() - quietSince) >= max(2, 2 * Double(intervalMs) / 1000) { break }
        }
        let elapsed = seconds(Instant.now() - start)
        let cpu = serverPid.map { FanoutCommand.cpuSeconds([$0]) - cpu0 }
        loop.stop()
        thread.join()
        let r = runner.report()
        print("joinstorm: clients=\(clients) threshold=\(threshold) interval_ms=\(intervalMs) joined=\(r.joined) failed=\(r.failed) closed=\(r.closed) all_in_s=\(fixed(joinedAt, 2)) elapsed_s=\(fixed(elapsed, 2))")
        print("joinstorm: member_event_frames=\(r.frames) member_event_bytes=\(r.bytes) bytes_per_client=\(r.joined > 0 ? r.bytes / UInt64(r.joined) : 0) summaries=\(r.summaries) per_member_events=\(r.perMember)")
        print("joinstorm: final_count_right=\(r.right)/\(r.joined - r.closed) (room count \(r.joined - r.closed))")
        if let cpu { print("joinstorm: server_cpu_s=\(fixed(cpu, 3))") }
        if let f = r.firstFailure { print("joinstorm: first failure: \(f)") }
    }

    /// The app's member-event settings and limits for a big room, and the room.
    private func prepare(_ address: Socket.Address) throws {
        let client = BlockingHTTP(address: address)
        func signed(_ method: String, _ path: String, _ body: String) throws -> Int {
            try client.request(method, path, body: body, headers: RoomcastSignature.headers(appKey: appKey, secret: appSecret))
        }
        let settings = try signed("PATCH", "/v1/settings", #"{"memberChangeEvents":true,"enterExitNotifications":true,"multipleRoomsPerUser":true,"restCallsPerSecond":1000000,"memberEventsThreshold":\#(threshold),"memberSummaryIntervalMs":\#(intervalMs)}"#)
        guard settings == 200 else {
            print("joinstorm: PATCH /v1/settings answered \(settings) (is the app \(appKey) configured?)")
            throw ExitCode.failure
        }
        let created = try signed("POST", "/v1/rooms", #"{"roomId":"\#(room)","keepAlive":true}"#)
        guard created == 201 || created == 409 else {
            print("joinstorm: POST /v1/rooms answered \(created)")
            throw ExitCode.failure
        }
    }
}

final class JoinstormRunner: WSClientDelegate, @unchecked Sendable {
    // Safety: the per-client arrays and counters without atomics are touched on `loop` only (the
    // runner is handed to the loop through `execute`); the main thread reads the atomics while
    // it runs and the rest through `report()` after the loop thread has been joined.
    let loop: EventLoop
    let address: Socket.Address
    let total: Int
    let window: Double
    let room: String
    let appKey: String
    let appSecret: String
    private var clients: [WSClientConnection] = []
    /// Each client's last known member count (its join answer, then every member event).
    private var counts: [Int] = []
    private var started = 0
    private var begin = Instant(nanoseconds: 0)
    private var frames: UInt64 = 0
    private var summaries: UInt64 = 0
    private var perMember: UInt64 = 0
    private let bytes = Atomic<UInt64>(0)
    private let joined = Atomic<Int>(0)
    private let failed = Atomic<Int>(0)
    private let closed = Atomic<Int>(0)
    private let failure = Mutex<String?>(nil)

    var memberBytes: UInt64 { bytes.load(ordering: .relaxed) }
    var joinedCount: Int { joined.load(ordering: .relaxed) }
    var settledCount: Int { joinedCount + failed.load(ordering: .relaxed) }
    var closedCount: Int { closed.load(ordering: .relaxed) }

    private static let connecting = 0, authenticating = 1, joining = 2, member = 3, dead = 4

    init(loop: EventLoop, address: Socket.Address, total: Int, window: Double, room: String, appKey: String, appSecret: String) {
        self.loop = loop
        self.address = address
        self.total = total
        self.window = window
        self.room = room
        self.appKey = appKey
        self.appSecret = appSecret
        counts = Array(repeating: -1, count: total)
    }

    /// Starts the clients evenly over the window (checked every 10 ms).
    func start() {
        begin = Instant.now()
        loop.scheduleRepeating(every: .milliseconds(10)) { [self] in startDue() }
        startDue()
    }

    private func startDue() {
        let due = min(total, Int((seconds(Instant.now() - begin) / max(window, 0.001)) * Double(total)) + 1)
        while started < due {
            let c = WSClientConnection(loop: loop, id: started, host: "127.0.0.1", port: address.port, path: "/ws")
            c.delegate = self
            clients.append(c)
            started += 1
            c.start(address: address)
        }
    }

    func clientDidOpen(_ client: WSClientConnection) {
        client.tag = Self.authenticating
        let token = ClientToken.mint(TokenClaims(sub: "j\(client.id)", app: appKey, exp: Int64(time(nil)) + 3600), secret: appSecret)
        client.sendText(Array(#"{"id":1,"op":"connect","args":{"token":"\#(token)"}}"#.utf8))
    }

    func client(_ client: WSClientConnection, didReceive message: WebSocketMessageAssembler.Event) {
        guard case .text(let b) = message else { return }
        switch client.tag {
        case Self.member:
            let head = b.prefix(40)
            let summary = SubscriberRunner.contains(head, #""ev":"room.members""#)
            let changed = SubscriberRunner.contains(head, #""ev":"room.memberChanged""#)
            guard summary || changed || SubscriberRunner.contains(head, #""ev":"room.notification""#) else { return }
            frames += 1
            if summary { summaries += 1 } else { perMember += 1 }
            bytes.add(UInt64(b.count + (b.count < 126 ? 2 : b.count < 65_536 ? 4 : 10)), ordering: .relaxed)
            if summary || changed, let n = Self.memberCount(b) { setCount(client.id, n) }
        case Self.authenticating:
            guard SubscriberRunner.isReply(b, id: 1) else { return }
            guard SubscriberRunner.contains(b, #""ok":"#) else { return client.fail("connect refused: " + String(decoding: b.prefix(160), as: UTF8.self)) }
            client.tag = Self.joining
            client.sendText(Array(#"{"id":2,"op":"room.join","args":{"roomId":"\#(room)"}}"#.utf8))
        case Self.joining:
            guard SubscriberRunner.isReply(b, id: 2) else { return }
            guard SubscriberRunner.contains(b, #""ok":"#) else { return client.fail("join refused: " + String(decoding: b.prefix(160), as: UTF8.self)) }
            client.tag = Self.member
            joined.add(1, ordering: .relaxed)
            if let n = Self.memberCount(b) { setCount(client.id, n) }
        default:
            return
        }
    }

    private func setCount(_ id: Int, _ n: Int) {
        counts[id] = n
    }

    /// The number after the frame's `"memberCount":`.
    static func memberCount(_ b: [UInt8]) -> Int? {
        let key = Array(#""memberCount":"#.utf8)
        guard b.count > key.count else { return nil }
        var i = 0
        while i + key.count <= b.count {
            if b[i] == key[0] && Array(b[i..<(i + key.count)]) == key {
                return SubscriberRunner.digits(b, from: i + key.count).map { Int($0) }
            }
            i += 1
        }
        return nil
    }

    func clientDidFail(_ client: WSClientConnection, reason: String) {
        failure.withLock { if $0 == nil { $0 = reason } }
        if client.tag == Self.member { closed.add(1, ordering: .relaxed) } else if client.tag != Self.dead { failed.add(1, ordering: .relaxed) }
        client.tag = Self.dead
    }

    struct Report {
        let joined: Int, failed: Int, closed: Int, right: Int
        let frames: UInt64, bytes: UInt64, summaries: UInt64, perMember: UInt64
        let firstFailure: String?
    }

    func report() -> Report {
        Report(joined: joinedCount, failed: failed.load(ordering: .relaxed), closed: closed.load(ordering: .relaxed),
               right: clients.indices.filter { clients[$0].tag == Self.member && counts[$0] == joinedCount - closed.load(ordering: .relaxed) }.count,
               frames: frames, bytes: memberBytes, summaries: summaries, perMember: perMember, firstFailure: failure.withLock { $0 })
    }
}
