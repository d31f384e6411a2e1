import Foundation
import Synchronization
import Wire
#if canImport(Glibc)
import Glibc
#endif

/// A started `roomcast` with one known app, for end-to-end tests.
public final class GatewayProcess {
    public let process: RunningProcess
    public let port: UInt16
    public let appKey: String
    public let secret: String
    public let dataDirectory: String

    /// Starts roomcast on a free port with a fresh (or the given) data directory.
    public init(appKey: String = "testapp", secret: String = "test-secret-123456", dataDirectory: String? = nil,
                extra: [String] = [], port: UInt16? = nil) throws {
        self.appKey = appKey
        self.secret = secret
        self.dataDirectory = dataDirectory ?? temporaryDirectory("roomcast-e2e")
        process = try RunningProcess(path: try productPath("roomcast"),
                                     arguments: ["--port", "\(port ?? 0)", "--data-dir", self.dataDirectory, "--app", "\(appKey):\(secret)",
                                                 "--log-level", "warning"]
                                         // Tests open many connections from one address; the PX-1 tests set their own.
                                         + (extra.contains("--connects-per-ip") ? [] : ["--connects-per-ip", "1000000"]) + extra)
        self.port = try process.waitForPort()
    }

    public func rest() -> RESTClient { RESTClient(port: port, appKey: appKey, secret: secret) }

    /// A protocol client connected as `user` with a token from the REST API (nickname: the
    /// capitalised user id), after its conversation-status sync.
    public func client(_ user: String, device: String? = nil, cursor: Int64? = nil) throws -> ProtocolClient {
        let c = try ProtocolClient(port: port)
        try c.connect(token: try rest().token(user, nickname: user.capitalized, device: device), device: device, conversationCursor: cursor)
        return c
    }

    public func stop() { process.kill9() }
}

/// Signed REST calls (RongCloud header scheme), JSON in and out.
public struct RESTClient {
    public let port: UInt16
    public let appKey: String
    public let secret: String

    public struct Response: Sendable {
        public let status: Int
        public let body: [UInt8]
        /// Header fields of the answer (names as sent).
        public let headers: [(String, String)]

        public init(status: Int, body: [UInt8], headers: [(String, String)] = []) {
            self.status = status
            self.body = body
            self.headers = headers
        }

        public func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        public var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    public init(port: UInt16, appKey: String, secret: String) {
        self.port = port
        self.appKey = appKey
        self.secret = secret
    }

    public func signatureHeaders(nonce: String = UUID().uuidString, timestamp: Int64 = Int64(Date().timeIntervalSince1970)) -> [(String, String)] {
        let sig = Signing.sha1(secret: secret, nonce: nonce, timestamp: String(timestamp))
        return [("App-Key", appKey), ("Nonce", nonce), ("Timestamp", String(timestamp)), ("Signature", sig)]
    }

    @discardableResult
    public func call(_ method: String, _ path: String, _ body: Any? = nil, headers: [(String, String)]? = nil) throws -> Response {
        let bytes = try body.map { try JSONSerialization.data(withJSONObject: $0) }.map { Array($0) } ?? []
        return try call(method, path, bytes: bytes, headers: headers)
    }

    /// The same with the body's exact bytes (a replayed request is byte for byte the same).
    /// `vendor`: a vendor surface's call, whose refusals are in the vendor's shape (not checked
    /// against the native error table).
    @discardableResult
    public func call(_ method: String, _ path: String, bytes: [UInt8], headers: [(String, String)]? = nil, vendor: Bool = false) throws -> Response {
        var request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (k, v) in headers ?? signatureHeaders() { request += "\(k): \(v)\r\n" }
        if !bytes.isEmpty { request += "Content-Type: application/json\r\n" }
        request += "Content-Length: \(bytes.count)\r\n\r\n"
        let c = try TCPClient(port: port, timeout: 10)
        try c.send(Array(request.utf8) + bytes)
        let r = try c.readResponse()
        let response = Response(status: r.status, body: r.body, headers: r.headers)
        if r.status >= 400 && !vendor { try ErrorTableCheck.restError(status: r.status, json: response.json, text: response.text) }
        return response
    }

    public func token(_ user: String, nickname: String? = nil, device: String? = nil, ttl: Int? = nil) throws -> String {
        var body: [String: Any] = [:]
        if let nickname { body["nickname"] = nickname }
        if let device { body["device"] = device }
        if let ttl { body["ttlSeconds"] = ttl }
        let r = try call("POST", "/v1/users/\(user)/tokens", body)
        guard r.status == 201, let t = r.json["token"] as? String else { throw TestKitError.protocolError("token: \(r.status) \(r.text)") }
        return t
    }
}

/// Appends every protocol frame the tests exchange to the file named by `ROOMCAST_FRAME_LOG`
/// (JSON lines `{"conn", "dir": "out"|"in", "frame"}`), so `scripts/websocket-schema.sh` can check
/// them against the published protocol schema. Black-box clients (`ProtocolClient`) and the
/// in-process sessions of GatewayTests both record through it.
public enum FrameLog {
    private static let sink = Mutex<FileHandle?>({
        guard let path = ProcessInfo.processInfo.environment["ROOMCAST_FRAME_LOG"] else { return nil }
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        let h = FileHandle(forWritingAtPath: path)
        _ = try? h?.seekToEnd()
        return h
    }())
    private static let counter = Mutex(0)

    /// A new connection id for `record` (unique in this process).
    public static func nextConnection() -> Int { counter.withLock { $0 += 1; return $0 } }

    /// Appends one frame: `dir` is "out" (client to server) or "in"; `text` must be JSON.
    /// `compact`: a server frame of a connection that chose the compact encoding (TR-5), checked
    /// against `CompactServerMessage`.
    public static func record(_ conn: Int, _ dir: String, _ text: String, compact: Bool = false) {
        sink.withLock { h in
            guard let h else { return }
            let line = "{\"conn\":\(conn),\"dir\":\"\(dir)\",\(compact ? "\"encoding\":\"compact\"," : "")\"frame\":\(text)}\n"
            h.write(Data(line.utf8))
        }
    }
}

/// A client speaking the Roomcast WebSocket protocol: commands with ids, replies, and the events
/// that arrive in between (kept in order, for "who received what" assertions).
public final class ProtocolClient {
    public let ws: WSClient
    private let logId = FrameLog.nextConnection()
    private var nextId = 1
    /// Events not yet taken by a test, in arrival order.
    public private(set) var events: [[String: Any]] = []
    public private(set) var closeCode: UInt16?
    public var userId = ""
    public var stream = ""
    private var connected = false

    public init(port: UInt16, origin: String? = nil, receiveBuffer: Int32? = nil) throws {
        ws = try WSClient(port: port, path: "/ws", headers: origin.map { ["Origin": $0] } ?? [:], receiveBuffer: receiveBuffer)
    }

    /// The events the last `waitFor` passed over.
    public private(set) var skipped: [[String: Any]] = []
    /// Conversation statuses the connect-time sync delivered (CS-3), in order.
    public private(set) var syncedStatuses: [[String: Any]] = []
    /// The cursor `conversation.statusSynced` handed out.
    public private(set) var conversationCursor: Int64 = 0

    /// Connects with a token and waits for the conversation-status sync to finish (CS-3);
    /// returns the `ok` object.
    @discardableResult
    public func connect(token: String, device: String? = nil, conversationCursor: Int64? = nil) throws -> [String: Any] {
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

    /// Sends a command and waits for its answer (events that arrive meanwhile are kept).
    public func command(_ op: String, _ args: [String: Any] = [:], timeout: Double = 5) throws -> [String: Any] {
        let id = nextId
        nextId += 1
        let msg: [String: Any] = ["id": id, "op": op, "args": args]
        let text = String(decoding: try JSONSerialization.data(withJSONObject: msg), as: UTF8.self)
        FrameLog.record(logId, "out", text)
        try ws.sendText(text)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let m = try next(timeout: deadline.timeIntervalSinceNow)
            if let rid = m["id"] as? Int, rid == id {
                if let error = m["error"] as? [String: Any] { try ErrorTableCheck.wsError(error) }
                return m
            }
            if m["ev"] != nil { events.append(m) }
        }
        throw TestKitError.timeout("no answer to \(op)")
    }

    @discardableResult
    public func expectOK(_ reply: [String: Any]) throws -> [String: Any] {
        guard let ok = reply["ok"] as? [String: Any] else { throw TestKitError.protocolError("expected ok, got \(reply)") }
        return ok
    }

    /// Reads the next message (skipping pings); records a close.
    private func next(timeout: Double) throws -> [String: Any] {
        while true {
            switch try ws.readFrame(timeout: max(0.001, timeout)) {
            case .text(let s):
                FrameLog.record(logId, "in", s)
                return (try? JSONSerialization.jsonObject(with: Data(s.utf8))) as? [String: Any] ?? [:]
            case .ping, .pong: continue
            case .close(let code, _):
                closeCode = code
                try ErrorTableCheck.closeCode(code)
                throw TestKitError.protocolError("closed by server: \(code ?? 0)")
            case .binary: continue
            }
        }
    }

    /// Waits for an event named `name` (optionally matching `where`), removing it and anything
    /// before it from the queue. Throws on timeout.
    @discardableResult
    public func waitFor(_ name: String, timeout: Double = 5, where match: ([String: Any]) -> Bool = { _ in true }) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let i = events.firstIndex(where: { ($0["ev"] as? String) == name && match($0) }) {
                let e = events[i]
                skipped = Array(events[..<i])
                events.removeFirst(i + 1)
                return e
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw TestKitError.timeout("no \(name) event; have \(events.map { $0["ev"] ?? "?" })") }
            do {
                let m = try next(timeout: left)
                if m["ev"] != nil { events.append(m) }
            } catch TestKitError.timeout {
                continue
            }
        }
    }

    /// Waits until every event of every change committed before this call has arrived, without
    /// sleeping: a command that is refused still goes through the engine's ordered commit path,
    /// so its answer comes after everything committed before it. False when the connection cannot
    /// take a command (not connected with `connect(token:)`, or closed).
    public func barrier() -> Bool {
        guard connected, closeCode == nil else { return false }
        return (try? command("room.leave", ["roomId": "~barrier"])) != nil
    }

    /// Collects every event committed so far (after a barrier; without one, what arrives within
    /// `seconds`), plus those already queued; `drain(for: 0)` reads what is there without waiting.
    public func drain(for seconds: Double = 0.3) -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(seconds > 0 && barrier() ? 0 : seconds)
        while true {
            let waitMs = max(0, Int32(deadline.timeIntervalSinceNow * 1000))
            guard ws.tcp.hasBufferedData || ws.tcp.poll(milliseconds: waitMs) else { break }
            guard let m = try? next(timeout: 2) else { break }
            if m["ev"] != nil { events.append(m) }
        }
        let out = events
        events = []
        return out
    }

    /// Names of the events received within `seconds`.
    public func eventNames(within seconds: Double = 0.3) -> [String] {
        drain(for: seconds).compactMap { $0["ev"] as? String }
    }
}

extension Dictionary where Key == String, Value == Any {
    public func obj(_ k: String) -> [String: Any] { self[k] as? [String: Any] ?? [:] }
    public func str(_ k: String) -> String? { self[k] as? String }
    public func int(_ k: String) -> Int? { (self[k] as? NSNumber)?.intValue }
}

/// Every refusal the end-to-end tests see is checked against the one error table: a REST error
/// has a row with that HTTP status, a WebSocket error a row, and a close code is in the
/// close-code table. A mismatch fails the test that produced it.
public enum ErrorTableCheck {
    public static func restError(status: Int, json: [String: Any], text: String) throws {
        // Bodies that are not errors of ours (e.g. a webhook receiver's) are not checked.
        guard let code = (json["code"] as? NSNumber)?.intValue else { throw TestKitError.protocolError("error body without a code: \(text)") }
        guard let row = ErrorTable.row(code) else { throw TestKitError.protocolError("code \(code) is not in the error table: \(text)") }
        guard row.httpStatus == status else {
            throw TestKitError.protocolError("code \(code) came with HTTP \(status); the error table says \(row.httpStatus)")
        }
        guard json["message"] is String else { throw TestKitError.protocolError("error \(code) without a message: \(text)") }
    }

    public static func wsError(_ error: [String: Any]) throws {
        guard let code = (error["code"] as? NSNumber)?.intValue, ErrorTable.row(code) != nil else {
            throw TestKitError.protocolError("WebSocket error not in the error table: \(error)")
        }
    }

    public static func closeCode(_ code: UInt16?) throws {
        guard let code else { return }
        guard CloseCode(rawValue: code) != nil else { throw TestKitError.protocolError("close code \(code) is not in the close-code table") }
    }
}
