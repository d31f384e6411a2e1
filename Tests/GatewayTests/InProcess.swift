import Chat
import Engine
import Foundation
@testable import Gateway
import HTTP1
import Logging
import Reactor
import Server
import Store
import Synchronization
import Testing
import TestKit
import WebSocket
import Wire

/// Milliseconds the tests move by hand (SPEC §13: time is injected).
final class ManualClock: Sendable {
    private let ms = Atomic<Int64>(1_800_000_000_000)
    var now: Int64 { ms.load(ordering: .relaxed) }
    func advance(seconds: Int64) { ms.add(seconds * 1000, ordering: .relaxed) }
    var function: @Sendable () -> Int64 { { [self] in now } }
}

/// Waits up to `seconds` for `condition` (in-process work takes microseconds to milliseconds).
func eventually(_ seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while !condition() {
        if Date() > deadline { return false }
        usleep(200)
    }
    return true
}

/// The gateway in-process, as Hummingbird's router test framework drives an application: the real
/// routes, engine, store (in memory) and one hub on one event loop, with a manual clock; REST
/// calls go straight to the router's handlers and WebSocket sessions write into recorders. Nothing
/// listens on a socket.
final class InProcessGateway: @unchecked Sendable {
    // Safety: every field is immutable after init; the hub is reached only on `loop`'s thread
    // (through `onLoop`).
    let clock = ManualClock()
    let core: GatewayCore
    let loop: EventLoop
    private var thread: PosixThread?
    let appKey = "testapp"
    let secret = "test-secret-123456"
    private let nonce = Atomic<Int>(0)

    init(_ configure: (inout GatewayConfiguration) -> Void = { _ in }) throws {
        var configuration = GatewayConfiguration()
        configuration.apps = [(key: appKey, secret: secret), (key: "otherapp", secret: "other-secret-123456")]
        configure(&configuration)
        var logger = Logger(label: "in-process")
        logger.logLevel = .critical
        let store = try Store(inMemory: logger)
        core = try GatewayCore(configuration: configuration, store: store, publicURLs: ["ws://gateway.test/ws"], logger: logger,
                               clock: clock.function)
        loop = try EventLoop(name: "in-process-hub")
        let loop = self.loop
        thread = PosixThread.start(name: "in-process-hub") { loop.run() }
        let core = self.core
        onLoop { core.startHub(loop: loop, index: 0); return true }
        core.feed([loop])
        store.start()
        core.engine.start(tickEvery: .seconds(3600))
        core.ready.set(true)
    }

    deinit {
        core.engine.stop()
        core.store.stop()
        loop.stop()
        thread?.join()
    }

    /// Runs `body` on the hub's loop and waits for it.
    @discardableResult
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Mutex<T?>(nil)
        loop.execute { result.withLock { $0 = body() } }
        var out: T?
        _ = eventually(10) { out = result.withLock { $0 }; return out != nil }
        return out!
    }

    /// Every change committed before this call has reached the hub (two store batches: the
    /// second starts after the first one's deliveries were handed to the loop).
    func settle() {
        for _ in 0..<2 {
            let done = Atomic<Bool>(false)
            let store = core.store
            let loop = self.loop
            core.engine.loop.execute {
                store.submit(Store.Commit(mutations: [], onDurable: { loop.execute { done.store(true, ordering: .releasing) } }))
            }
            _ = eventually { done.load(ordering: .acquiring) }
        }
    }

    /// Moves the clock, then runs the engine's timers and the hub's (token expiry, connect timeout).
    func advance(seconds: Int64) {
        clock.advance(seconds: seconds)
        core.engine.tick()
        settle()
        let core = self.core
        onLoop { core.hubs.hub(0)!.tick() }
        settle()
    }

    // MARK: REST

    struct Answer {
        let status: Int
        let headers: HTTPHeaders
        let body: [UInt8]
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
        var code: Int? { (json["code"] as? NSNumber)?.intValue }
        var field: String? { json["field"] as? String }
    }

    func signature(app: String? = nil, secret: String? = nil) -> [(String, String)] {
        let n = "n\(nonce.add(1, ordering: .relaxed).newValue)"
        let ts = String(clock.now / 1000)
        return [("App-Key", app ?? appKey), ("Nonce", n), ("Timestamp", ts),
                ("Signature", Signing.sha1(secret: secret ?? self.secret, nonce: n, timestamp: ts))]
    }

    /// A REST call through the router (signed as `testapp` unless `headers` are given). Every
    /// refusal is checked against the error table.
    @discardableResult
    func call(_ method: HTTPMethod, _ target: String, _ body: Any? = nil, headers: [(String, String)]? = nil) throws -> Answer {
        try call(method, target, bytes: try body.map { Array(try JSONSerialization.data(withJSONObject: $0)) } ?? [], headers: headers)
    }

    @discardableResult
    func call(_ method: HTTPMethod, _ target: String, bytes: [UInt8], headers: [(String, String)]? = nil) throws -> Answer {
        let head = HTTPRequestHead(method: method, target: target, headers: HTTPHeaders(headers ?? signature()))
        let answer: Answer
        switch core.router.match(method: method, path: head.path) {
        case .notFound:
            let r = GatewayCore.errorRenderer(ServerRefusal(status: .notFound, message: "no such path"))
            answer = Answer(status: r.status.code, headers: r.headers, body: r.body)
        case .methodNotAllowed:
            let r = GatewayCore.errorRenderer(ServerRefusal(status: .methodNotAllowed, message: "method not allowed"))
            answer = Answer(status: r.status.code, headers: r.headers, body: r.body)
        case .handler(let handler, let parameters):
            let request = Request(head: head, body: bytes, pathParameters: parameters)
            let response = Mutex<Response?>(nil)
            switch handler {
            case .sync(let h): response.withLock { $0 = h(request) }
            case .async(let h): h(request, ResponseWriter { r in response.withLock { if $0 == nil { $0 = r } } })
            }
            var out: Response?
            guard eventually(5, { out = response.withLock { $0 }; return out != nil }) else { throw TestFailure("no answer to \(method) \(target)") }
            answer = Answer(status: out!.status.code, headers: out!.headers, body: out!.body)
        }
        if answer.status >= 400 { try ErrorTableCheck.restError(status: answer.status, json: answer.json, text: String(decoding: answer.body, as: UTF8.self)) }
        return answer
    }

    func token(_ user: String, ttl: Int? = nil, nickname: String? = nil) throws -> String {
        var body: [String: Any] = [:]
        if let ttl { body["ttlSeconds"] = ttl }
        if let nickname { body["nickname"] = nickname }
        let a = try call(.POST, "/v1/users/\(user)/tokens", body)
        guard a.status == 201, let t = a.json["token"] as? String else { throw TestFailure("token: \(a.status)") }
        return t
    }

    // MARK: WebSocket sessions

    /// A session whose frames are recorded (connected with a token unless `connect` is false).
    func client(_ user: String? = nil, origin: String? = nil) throws -> SessionClient {
        let core = self.core
        let c = SessionClient(gateway: self)
        let session = onLoop { () -> LoopBoundBox<ClientSession> in
            let s = core.session(hub: core.hubs.hub(0)!, origin: origin)
            s.opened(c)
            return LoopBoundBox(s)
        }.value
        c.session = session
        if let user {
            let ok = try c.expectOK(c.command("connect", ["token": try token(user, nickname: user.capitalized)]))
            c.userId = ok["userId"] as? String ?? ""
            try c.waitFor("conversation.statusSynced")
        }
        return c
    }
}

/// Carries a loop-confined object out of `onLoop` (the tests touch it again only on the loop).
struct LoopBoundBox<T: AnyObject>: @unchecked Sendable {
    // Safety: `value` is only used inside `onLoop` closures (the loop's thread).
    let value: T
    init(_ value: T) { self.value = value }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// A recorded session: what the server wrote to it, decoded; and its close code.
final class SessionClient: SessionTransport, @unchecked Sendable {
    // Safety: `frames` and `closeCode` are behind `state`; `session` is set once before use and
    // touched only on the gateway's loop; `events`, `nextId` and `userId` only by the test thread.
    private let state = Mutex<(frames: [[UInt8]], closeCode: UInt16?)>(([], nil))
    unowned let gateway: InProcessGateway
    var session: ClientSession?
    var nextId = 1
    var userId = ""
    /// Events read so far and not yet taken.
    var events: [[String: Any]] = []
    private var read = 0

    init(gateway: InProcessGateway) {
        self.gateway = gateway
    }

    // SessionTransport (on the loop)
    func sendFrame(_ frame: ByteBlock) {
        let bytes = frame.array
        var parser = WebSocketFrameParserForTests(bytes)
        let payload = parser.payload()
        state.withLock { $0.frames.append(payload) }
    }

    func close(code: WebSocketCloseCode, reason: String) {
        state.withLock { if $0.closeCode == nil { $0.closeCode = code.rawValue } }
        if (try? ErrorTableCheck.closeCode(code.rawValue)) == nil { Issue.record("close code \(code.rawValue) is not in the close-code table") }
    }

    var closeCode: UInt16? { state.withLock { $0.closeCode } }

    /// Frames written since the last read.
    private func take() -> [[String: Any]] {
        let start = read
        let new: [[UInt8]] = state.withLock { s in Array(s.frames[start...]) }
        read += new.count
        return new.map { (try? JSONSerialization.jsonObject(with: Data($0))) as? [String: Any] ?? ["unparsable": String(decoding: $0, as: UTF8.self)] }
    }

    /// Sends raw bytes as one text message (on the loop).
    func send(_ text: String) {
        let bytes = Array(text.utf8)
        let box = LoopBoundBox(self)
        gateway.onLoop { box.value.session!.handle(bytes); return true }
    }

    func command(_ op: String, _ args: [String: Any]? = [:]) throws -> [String: Any] {
        let id = nextId
        nextId += 1
        var msg: [String: Any] = ["id": id, "op": op]
        if let args { msg["args"] = args }
        send(String(decoding: try JSONSerialization.data(withJSONObject: msg), as: UTF8.self))
        var reply: [String: Any]?
        let ok = eventually {
            for f in take() {
                if (f["id"] as? NSNumber)?.intValue == id, f["ev"] == nil { reply = f } else if f["ev"] != nil { events.append(f) }
            }
            return reply != nil || closeCode != nil
        }
        guard ok, let reply else { throw TestFailure("no answer to \(op) (close \(closeCode.map(String.init) ?? "none"))") }
        if let error = reply["error"] as? [String: Any] { try ErrorTableCheck.wsError(error) }
        return reply
    }

    @discardableResult
    func expectOK(_ reply: [String: Any]) throws -> [String: Any] {
        guard let ok = reply["ok"] as? [String: Any] else { throw TestFailure("expected ok, got \(reply)") }
        return ok
    }

    /// Everything that has arrived (after the gateway settled), taken.
    func drain() -> [[String: Any]] {
        gateway.settle()
        events += take().filter { $0["ev"] != nil }
        defer { events = [] }
        return events
    }

    func eventNames() -> [String] { drain().compactMap { $0["ev"] as? String } }

    @discardableResult
    func waitFor(_ name: String, where match: ([String: Any]) -> Bool = { _ in true }) throws -> [String: Any] {
        var found: [String: Any]?
        _ = eventually {
            events += take().filter { $0["ev"] != nil }
            if let i = events.firstIndex(where: { ($0["ev"] as? String) == name && match($0) }) {
                found = events[i]
                events.removeFirst(i + 1)
            }
            return found != nil
        }
        guard let found else { throw TestFailure("no \(name); have \(events.compactMap { $0["ev"] })") }
        return found
    }
}

/// Reads the payload of one unmasked server frame.
struct WebSocketFrameParserForTests {
    let bytes: [UInt8]
    init(_ bytes: [UInt8]) { self.bytes = bytes }
    mutating func payload() -> [UInt8] {
        guard bytes.count >= 2 else { return [] }
        var length = Int(bytes[1] & 0x7F)
        var offset = 2
        if length == 126 {
            length = Int(bytes[2]) << 8 | Int(bytes[3])
            offset = 4
        } else if length == 127 {
            length = (0..<8).reduce(0) { $0 << 8 | Int(bytes[2 + $1]) }
            offset = 10
        }
        return Array(bytes[offset..<min(bytes.count, offset + length)])
    }
}
