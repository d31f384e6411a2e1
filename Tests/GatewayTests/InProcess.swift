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
    /// Now in whole seconds (for signature timestamps and token expiries).
    var seconds: Int64 { now / 1000 }
    func advance(seconds: Int64) { ms.add(seconds * 1000, ordering: .relaxed) }
    var function: @Sendable () -> Int64 { { [self] in now } }
}

/// One value handed from another thread to a waiting one (no polling).
final class Handoff<T: Sendable>: @unchecked Sendable {
    // Safety: `value` is read and written only with `condition` locked.
    private let condition = NSCondition()
    private var value: T?

    /// Keeps the first value put.
    func put(_ v: T) {
        condition.lock()
        if value == nil { value = v }
        condition.broadcast()
        condition.unlock()
    }

    /// The value, once put; nil if none came within `timeout` seconds.
    func take(timeout: Double) -> T? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while value == nil {
            if !condition.wait(until: deadline) { break }
        }
        return value
    }
}

/// The gateway in-process, as Hummingbird's router test framework drives an application: the real
/// routes, engine, store (in memory) and one hub on one event loop, with a manual clock; REST
/// calls go straight to the router's handlers and WebSocket sessions write into recorders
/// (`SessionClient`). Nothing listens on a socket and nothing sleeps: "everything has arrived"
/// is `settle()`, and timers run when a test moves the clock with `advance(seconds:)`.
///
/// The test-facing API is the black-box clients' (`GatewayProcess.rest()`, `.client(_:device:cursor:)`,
/// `RESTClient.call`, `ProtocolClient.command/waitFor/drain`), so a test body moves between the two
/// with few edits.
final class InProcessGateway: @unchecked Sendable {
    // Safety: every field is immutable after init except `thread`, which only `init` writes and
    // only the first `stop()` (guarded by `stopped`) reads; the hub is reached only on `loop`'s
    // thread (through `onLoop`).
    let clock = ManualClock()
    let core: GatewayCore
    let loop: EventLoop
    private var thread: PosixThread?
    private let stopped = Atomic<Bool>(false)
    let appKey = "testapp"
    let secret = "test-secret-123456"
    static let otherApp = (key: "otherapp", secret: "other-secret-123456")

    init(_ configure: (inout GatewayConfiguration) -> Void = { _ in }) throws {
        var configuration = GatewayConfiguration()
        configuration.apps = [(key: appKey, secret: secret), Self.otherApp]
        configure(&configuration)
        var logger = Logger(label: "in-process")
        logger.logLevel = .critical
        core = try GatewayCore.singleNode(configuration: configuration, storage: .memory, publicURLs: ["ws://gateway.test/ws"], logger: logger,
                                          clock: clock.function)
        loop = try EventLoop(name: "in-process-hub")
        let loop = self.loop
        thread = PosixThread.start(name: "in-process-hub") { loop.run() }
        let core = self.core
        onLoop { core.startHub(loop: loop, index: 0); return true }
        // The engine's own timer is off (an hour); `advance(seconds:)` runs its tick.
        try core.start(ownURLs: ["ws://gateway.test/ws"], tickEvery: .seconds(3600))
    }

    /// Stops the engine, the store and the hub's loop (once; `deinit` does it too).
    func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        core.stop()
        loop.stop()
        thread?.join()
    }

    deinit { stop() }

    /// Runs `body` on the hub's loop and waits for it.
    @discardableResult
    func onLoop<T: Sendable>(_ body: @escaping @Sendable () -> T) -> T {
        let result = Handoff<T>()
        loop.execute { result.put(body()) }
        guard let out = result.take(timeout: 60) else { preconditionFailure("the in-process hub's loop did not run a task within 60 s") }
        return out
    }

    /// Every change committed, every query answered and every session task queued before this
    /// call has reached the hub and its sessions. Two rounds of (engine → store → loop): the
    /// store posts a batch's deliveries after the batch's callbacks, so the second round's empty
    /// commit is durable only after the first round's batch was handed to the loop; and work the
    /// loop passed to the engine before the first round ended (a connect's status sync) is
    /// answered before the second round.
    func settle() {
        for _ in 0..<2 {
            let done = Handoff<Bool>()
            let store = core.store
            let loop = self.loop
            core.engine.loop.execute {
                store.submit(Store.Commit(mutations: [], onDurable: { loop.execute { done.put(true) } }))
            }
            guard done.take(timeout: 60) != nil else { preconditionFailure("the in-process gateway did not settle within 60 s") }
        }
    }

    /// Moves the clock, then runs the engine's timers (mute expiry, destroy delays) and the hub's
    /// (token expiry, connect timeout), and settles.
    func advance(seconds: Int64) {
        clock.advance(seconds: seconds)
        core.engine.tick()
        settle()
        let core = self.core
        onLoop { core.hubs.hub(0)!.tick(); return true }
        settle()
    }

    // MARK: REST

    /// Signed REST calls through the router, as `GatewayProcess.rest()` makes them over HTTP.
    func rest(app: String? = nil, secret: String? = nil) -> InProcessREST {
        InProcessREST(gateway: self, appKey: app ?? appKey, secret: secret ?? self.secret)
    }

    /// One request through the router, answered as the HTTP server would (its own 404 and 405
    /// refusals rendered by the gateway's error renderer).
    func handle(_ head: HTTPRequestHead, body: [UInt8]) throws -> Response {
        switch core.router.match(method: head.method, path: head.path) {
        case .notFound:
            return GatewayCore.errorRenderer(ServerRefusal(status: .notFound, message: "no such path"))
        case .methodNotAllowed(let allowed):
            var r = GatewayCore.errorRenderer(ServerRefusal(status: .methodNotAllowed, message: "method not allowed"))
            r.headers.add("Allow", allowed.map(\.rawValue).joined(separator: ", "))
            return r
        case .handler(.sync(let handler), let parameters):
            return handler(Request(head: head, body: body, pathParameters: parameters))
        case .handler(.async(let handler), let parameters):
            let answer = Handoff<Response>()
            handler(Request(head: head, body: body, pathParameters: parameters), ResponseWriter { answer.put($0) })
            guard let response = answer.take(timeout: 10) else { throw TestKitError.timeout("no answer to \(head.method) \(head.target)") }
            return response
        case .handler(.local(let handler), let parameters):
            // Run on the hub's loop, as the server runs it on the connection's (a streaming answer
            // needs a connection: those routes are tested over sockets).
            let answer = Handoff<Response>()
            let request = Request(head: head, body: body, pathParameters: parameters)
            let immediate: Response? = onLoop {
                switch handler(request, LocalRoute(loopIndex: 0, writer: ResponseWriter { answer.put($0) })) {
                case .respond(let r): return r
                case .later: return nil
                case .stream: return Response(status: HTTPStatus(code: 501))
                }
            }
            if let immediate { return immediate }
            guard let response = answer.take(timeout: 60) else { throw TestKitError.timeout("no answer to \(head.method) \(head.target)") }
            return response
        }
    }

    // MARK: WebSocket sessions

    /// A session that has not sent `connect` (as `ProtocolClient(port:origin:)` is a socket that
    /// has not).
    func session(origin: String? = nil, encoding: WireEncoding = .json) -> SessionClient {
        let core = self.core
        let c = SessionClient(gateway: self, compact: encoding == .compact)
        onLoop {
            let s = core.session(hub: core.hubs.hub(0)!, origin: origin, encoding: encoding)
            c.session = s
            s.opened(c)
            return true
        }
        return c
    }

    /// A session connected as `user` with a token from the REST API (nickname: the capitalised
    /// user id), after its conversation-status sync (as `GatewayProcess.client`).
    func client(_ user: String, device: String? = nil, cursor: Int64? = nil, encoding: WireEncoding = .json) throws -> SessionClient {
        let c = session(encoding: encoding)
        try c.connect(token: try rest().token(user, nickname: user.capitalized, device: device), device: device, conversationCursor: cursor)
        return c
    }
}

/// `RESTClient` for the in-process gateway: the same calls and answers, through the router.
struct InProcessREST: Sendable {
    typealias Response = RESTClient.Response
    let gateway: InProcessGateway
    let appKey: String
    let secret: String

    /// RongCloud signature headers; the timestamp is the manual clock's unless given.
    func signatureHeaders(nonce: String = UUID().uuidString, timestamp: Int64? = nil) -> [(String, String)] {
        let ts = String(timestamp ?? gateway.clock.seconds)
        return [("App-Key", appKey), ("Nonce", nonce), ("Timestamp", ts), ("Signature", Signing.sha1(secret: secret, nonce: nonce, timestamp: ts))]
    }

    /// A call signed as this app unless `headers` are given. Every refusal is checked against the
    /// error table.
    @discardableResult
    func call(_ method: String, _ path: String, _ body: Any? = nil, headers: [(String, String)]? = nil) throws -> Response {
        try call(method, path, bytes: try body.map { Array(try JSONSerialization.data(withJSONObject: $0)) } ?? [], headers: headers)
    }

    @discardableResult
    func call(_ method: String, _ path: String, bytes: [UInt8], headers: [(String, String)]? = nil) throws -> Response {
        var fields = [("Host", "gateway.test")] + (headers ?? signatureHeaders())
        if !bytes.isEmpty { fields.append(("Content-Type", "application/json")) }
        fields.append(("Content-Length", String(bytes.count)))
        let head = HTTPRequestHead(method: HTTPMethod(method), target: path, headers: HTTPHeaders(fields))
        let r = try gateway.handle(head, body: bytes)
        let response = Response(status: r.status.code, body: head.method == .HEAD ? [] : r.body, headers: r.headers.map { ($0.name, $0.value) })
        if response.status >= 400 { try ErrorTableCheck.restError(status: response.status, json: response.json, text: response.text) }
        return response
    }

    func token(_ user: String, nickname: String? = nil, device: String? = nil, ttl: Int? = nil) throws -> String {
        var body: [String: Any] = [:]
        if let nickname { body["nickname"] = nickname }
        if let device { body["device"] = device }
        if let ttl { body["ttlSeconds"] = ttl }
        let r = try call("POST", "/v1/users/\(user)/tokens", body)
        guard r.status == 201, let t = r.json["token"] as? String else { throw TestKitError.protocolError("token: \(r.status) \(r.text)") }
        return t
    }

    /// NIM signature headers (`AppKey`, `Nonce`, `CurTime`, `CheckSum`).
    func nimHeaders(nonce: String = UUID().uuidString, curTime: Int64? = nil) -> [(String, String)] {
        let ts = String(curTime ?? gateway.clock.seconds)
        return [("AppKey", appKey), ("Nonce", nonce), ("CurTime", ts), ("CheckSum", Signing.sha1(secret: secret, nonce: nonce, timestamp: ts))]
    }

    /// A vendor-surface call: a form body (RongCloud, NIM; values percent-encoded unless `raw`)
    /// or a JSON body (Nexconn), signed as that vendor's SDK signs. Every answer is checked
    /// against the vendor's published code table (`VendorCodes.rows`): a refusal has a row with
    /// that HTTP status and a message.
    @discardableResult
    func vendor(_ vendor: Vendor, _ path: String, _ form: [(String, String)] = [], json: Any? = nil, raw: String? = nil,
                headers: [(String, String)]? = nil) throws -> Response {
        let bytes: [UInt8]
        let contentType: String
        // RongCloud's server SDKs send a few calls (MO-4 usergroup/add.json) as JSON.
        if vendor == .nexconn || (vendor == .rongCloud && json != nil) {
            if let raw { bytes = Array(raw.utf8) } else { bytes = Array(try JSONSerialization.data(withJSONObject: json ?? [String: Any]())) }
            contentType = "application/json"
        } else {
            let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~"))
            bytes = Array((raw ?? form.map { "\($0.0.addingPercentEncoding(withAllowedCharacters: allowed)!)=\($0.1.addingPercentEncoding(withAllowedCharacters: allowed)!)" }
                .joined(separator: "&")).utf8)
            contentType = "application/x-www-form-urlencoded"
        }
        var fields = [("Host", "gateway.test"), ("Content-Type", contentType)] + (headers ?? (vendor == .nim ? nimHeaders() : signatureHeaders()))
        fields.append(("Content-Length", String(bytes.count)))
        let head = HTTPRequestHead(method: .POST, target: path, headers: HTTPHeaders(fields))
        let r = try gateway.handle(head, body: bytes)
        let response = Response(status: r.status.code, body: r.body, headers: r.headers.map { ($0.name, $0.value) })
        guard let code = response.json.int("code") else { throw TestKitError.protocolError("\(path): no code in \(response.text)") }
        let success = vendor == .nexconn ? 0 : 200
        if code != success || response.status != 200 {
            guard let row = VendorCodes.rows(vendor).first(where: { $0.code == code }) else {
                throw TestKitError.protocolError("\(path): code \(code) is not in the \(vendor) table: \(response.text)")
            }
            guard row.status == response.status else {
                throw TestKitError.protocolError("\(path): code \(code) came with HTTP \(response.status); the table says \(row.status)")
            }
            guard response.json[vendor == .nim ? "desc" : "errorMessage"] is String else {
                throw TestKitError.protocolError("\(path): refusal without a message: \(response.text)")
            }
        }
        return response
    }
}

/// An in-process WebSocket session with `ProtocolClient`'s API: the session writes its frames
/// here (on the hub's loop) instead of to a socket. Every frame it receives and every command it
/// sends is recorded in the `FrameLog` (for scripts/websocket-schema.sh), every error answer is
/// checked against the error table, and every close code against the close-code table.
final class SessionClient: SessionTransport, @unchecked Sendable {
    // Safety: `inbox`, `read` and `serverClose` are touched only with `condition` locked;
    // `session` only on the gateway's loop (in `onLoop` tasks and transport callbacks); the
    // rest only by the test's thread.
    private let condition = NSCondition()
    private var inbox: [String] = []
    private var read = 0
    private var serverClose: UInt16?
    private var blocks = 0
    private var serverCloseReason: String?
    let gateway: InProcessGateway
    var session: ClientSession?
    private let logId = FrameLog.nextConnection()
    private var nextId = 1
    private var connected = false

    /// Events not yet taken by a test, in arrival order.
    private(set) var events: [[String: Any]] = []
    var userId = ""
    var stream = ""
    /// The events the last `waitFor` passed over.
    private(set) var skipped: [[String: Any]] = []
    /// Conversation statuses the connect-time sync delivered (CS-3), in order.
    private(set) var syncedStatuses: [[String: Any]] = []
    /// The cursor `conversation.statusSynced` handed out.
    private(set) var conversationCursor: Int64 = 0

    /// TR-5: the session speaks the compact encoding; frames are decoded as the JS client does
    /// (`CompactDecoder`), with each room's epoch from its join answer.
    let compact: Bool
    private var epochs: [String: String] = [:]
    /// TR-5: the room aliases the answers named (alias → room id).
    private(set) var aliases: [Int: String] = [:]

    init(gateway: InProcessGateway, compact: Bool = false) {
        self.gateway = gateway
        self.compact = compact
    }

    /// Every text frame received so far, as sent (the compact tests read the bytes).
    var rawFrames: [String] { condition.withLock { inbox } }

    // MARK: SessionTransport (on the hub's loop)

    /// What the session sees as queued for this client (QS-3): a test sets it to play a slow reader.
    let queued = Atomic<Int>(0)
    var queuedBytes: Int { queued.load(ordering: .relaxed) }
    /// What the socket refused at the last write (QS-3, `Connection.backlogBytes`); -1: all of
    /// `queued` (a reader that is behind by all of it).
    let refused = Atomic<Int>(-1)
    var backlogBytes: Int {
        let r = refused.load(ordering: .relaxed)
        return r < 0 ? queuedBytes : r
    }

    func sendFrame(_ frame: ByteBlock) {
        // A block may hold several frames back to back (a batch's events merged by the hub).
        let texts = Self.payloads(frame.array).map { String(decoding: $0, as: UTF8.self) }
        condition.lock()
        defer { condition.unlock() }
        // As the real connection does: nothing is sent after the close frame.
        guard serverClose == nil else { return }
        blocks += 1
        for text in texts {
            FrameLog.record(logId, "in", text, compact: compact)
            inbox.append(text)
        }
        condition.broadcast()
    }

    /// Blocks the session handed to its transport (each may carry several frames).
    var blocksReceived: Int {
        condition.lock()
        defer { condition.unlock() }
        return blocks
    }

    func close(code: WebSocketCloseCode, reason: String) {
        condition.lock()
        let first = serverClose == nil
        if first {
            serverClose = code.rawValue
            serverCloseReason = reason
        }
        condition.broadcast()
        condition.unlock()
        // The real connection tells the session once the closing handshake is over.
        if first, let session {
            let box = LoopBoundBox(session)
            gateway.loop.execute { box.value.closed() }
        }
    }

    // MARK: The test's side

    /// The close reason the server sent with its close code.
    var closeReason: String? { condition.withLock { serverCloseReason } }

    /// The close code the server sent (checked against the close-code table).
    var closeCode: UInt16? {
        let code = condition.withLock { serverClose }
        if let code, CloseCode(rawValue: code) == nil { Issue.record("close code \(code) is not in the close-code table") }
        return code
    }

    /// The network goes away under the session (as a dropped TCP connection: the server sees the
    /// connection close; nothing more arrives).
    func drop() {
        condition.withLock { if serverClose == nil { serverClose = 1006 } }
        let box = LoopBoundBox(self)
        gateway.onLoop { box.value.session?.closed(); return true }
    }

    /// Sends one text message as it is (not recorded: it need not be JSON).
    func send(_ text: String) {
        let bytes = Array(text.utf8)
        let box = LoopBoundBox(self)
        gateway.onLoop { box.value.session?.handle(bytes); return true }
    }

    /// The next message, waiting until `deadline`; nil when none came. Throws once the server
    /// has closed and everything before the close was read.
    private func next(until deadline: Date) throws -> [String: Any]? {
        condition.lock()
        while read == inbox.count && serverClose == nil {
            if !condition.wait(until: deadline) { break }
        }
        if read < inbox.count {
            let text = inbox[read]
            read += 1
            if read > 1024 && read * 2 > inbox.count {
                inbox.removeFirst(read)
                read = 0
            }
            condition.unlock()
            let parsed = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? ["unparsable": text]
            guard compact else { return parsed }
            if let ok = parsed["ok"] as? [String: Any], let room = (ok["joinInfo"] as? [String: Any])?["room"] as? [String: Any],
               let roomId = room["roomId"] as? String, let epoch = room["epoch"] as? String {
                epochs[roomId] = epoch
                if let alias = CompactDecoder.alias(inAnswer: parsed) { aliases[alias] = roomId }
            } else if let ok = parsed["ok"] as? [String: Any], let roomId = ok["roomId"] as? String, let alias = CompactDecoder.alias(inAnswer: parsed) {
                // room.observe's answer.
                aliases[alias] = roomId
            }
            return CompactDecoder.decode(parsed, epochs: epochs, aliases: aliases)
        }
        let code = serverClose
        condition.unlock()
        guard let code else { return nil }
        try ErrorTableCheck.closeCode(code)
        throw TestKitError.protocolError("closed by server: \(code)")
    }

    /// Connects with a token and waits for the conversation-status sync to finish (CS-3);
    /// returns the `ok` object.
    @discardableResult
    func connect(token: String, device: String? = nil, conversationCursor: Int64? = nil) throws -> [String: Any] {
        var args: [String: Any] = ["token": token]
        if let device { args["device"] = device }
        if let conversationCursor { args["conversationCursor"] = conversationCursor }
        let ok = try expectOK(try command("connect", args))
        connected = true
        userId = ok["userId"] as? String ?? ""
        stream = ok["stream"] as? String ?? ""
        let synced = try waitFor("conversation.statusSynced")
        self.conversationCursor = Int64(synced.obj("data").int("cursor") ?? 0)
        syncedStatuses = skipped.filter { $0.str("ev") == "conversation.statusChanged" }.flatMap { $0.obj("data")["infoList"] as? [[String: Any]] ?? [] }
        // Anything else that arrived meanwhile stays queued, in order.
        events.insert(contentsOf: skipped.filter { $0.str("ev") != "conversation.statusChanged" }, at: 0)
        return ok
    }

    /// Sends a command and waits for its answer (events that arrive meanwhile are kept). `args`
    /// nil sends none.
    func command(_ op: String, _ args: [String: Any]? = [:], timeout: Double = 5) throws -> [String: Any] {
        let id = nextId
        nextId += 1
        var msg: [String: Any] = ["id": id, "op": op]
        if let args { msg["args"] = args }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: msg), as: UTF8.self)
        FrameLog.record(logId, "out", text)
        let m = try commandText(text, id: id, timeout: timeout)
        if let error = m["error"] as? [String: Any] { try ErrorTableCheck.wsError(error) }
        return m
    }

    /// Sends `text` as it is (a command however malformed) and waits for the answer with `id`
    /// (events that arrive meanwhile are kept).
    func commandText(_ text: String, id: Int, timeout: Double = 5) throws -> [String: Any] {
        send(text)
        let deadline = Date().addingTimeInterval(timeout)
        while let m = try next(until: deadline) {
            if let rid = m["id"] as? Int, rid == id, m["ev"] == nil { return m }
            if m["ev"] != nil { events.append(m) }
        }
        throw TestKitError.timeout("no answer to \(text)")
    }

    @discardableResult
    func expectOK(_ reply: [String: Any]) throws -> [String: Any] {
        guard let ok = reply["ok"] as? [String: Any] else { throw TestKitError.protocolError("expected ok, got \(reply)") }
        return ok
    }

    /// Waits for an event named `name` (optionally matching `where`), removing it and anything
    /// before it from the queue. Throws on timeout or close.
    @discardableResult
    func waitFor(_ name: String, timeout: Double = 5, where match: ([String: Any]) -> Bool = { _ in true }) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let i = events.firstIndex(where: { ($0["ev"] as? String) == name && match($0) }) {
                let e = events[i]
                skipped = Array(events[..<i])
                events.removeFirst(i + 1)
                return e
            }
            guard let m = try next(until: deadline) else {
                throw TestKitError.timeout("no \(name) event; have \(events.map { $0["ev"] ?? "?" })")
            }
            if m["ev"] != nil { events.append(m) }
        }
    }

    /// Waits until every event of every change committed before this call has arrived (the
    /// gateway settles). False when the session is not connected or was closed.
    func barrier() -> Bool {
        gateway.settle()
        return connected && condition.withLock { serverClose == nil }
    }

    /// Every event committed so far, plus those already queued, taken. The gateway settles
    /// first whatever `seconds` says: nothing is left in flight, so "nothing else arrived" holds
    /// without waiting.
    func drain(for seconds: Double = 0.3) -> [[String: Any]] {
        gateway.settle()
        while let m = try? next(until: .distantPast) {
            if m["ev"] != nil { events.append(m) }
        }
        let out = events
        events = []
        return out
    }

    /// Names of the events received so far (after the gateway settled).
    func eventNames(within seconds: Double = 0.3) -> [String] {
        drain(for: seconds).compactMap { $0["ev"] as? String }
    }

    /// The payloads of the frames in `bytes`, in order, read by the WebSocket module's own parser
    /// in the client's role (so a frame the server should not send is a test failure, not data).
    /// The blocks a connection writes hold whole frames; a frame cut short is a failure too.
    static func payloads(_ bytes: [UInt8]) -> [[UInt8]] {
        var parser = WebSocketFrameParser(role: .client, allowRSV1: false)
        var out: [[UInt8]] = []
        var current: [UInt8] = []
        var copy = bytes
        copy.withUnsafeMutableBytes { buffer in
            var at = 0
            while true {
                let (step, used) = parser.parse(UnsafeMutableRawBufferPointer(rebasing: buffer[at...]))
                let base = at
                at += used
                switch step {
                case .needMoreData:
                    if !parser.isAtFrameBoundary { Issue.record("a block ends inside a frame") }
                    return
                case .header:
                    current = []
                case .payload(let range):
                    current.append(contentsOf: buffer[(base + range.lowerBound)..<(base + range.upperBound)])
                case .frameEnd:
                    out.append(current)
                case .error(let error):
                    Issue.record("the server wrote a frame a client must refuse: \(error)")
                    return
                }
            }
        }
        return out
    }
}

/// Carries a loop-confined object into or out of a loop task (touched only on the loop's thread).
struct LoopBoundBox<T: AnyObject>: @unchecked Sendable {
    // Safety: `value` is only used inside tasks on the gateway's loop.
    let value: T
    init(_ value: T) { self.value = value }
}
