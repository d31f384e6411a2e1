import Foundation

/// A Server-Sent Events reader over `TCPClient`, for black-box tests of `GET /sse` (TR-1): sends
/// the request, reads the head, then the chunked body as events (`event`, `data`, `id`) and
/// comments, as an `EventSource` parses them.
public final class EventStreamClient {
    public struct Event: Sendable {
        public var name: String
        public var data: String
        public var id: String?
        /// `data` as a JSON object (empty when it is not one).
        public var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any] ?? [:] }
    }

    public let tcp: TCPClient
    public private(set) var status = 0
    public private(set) var headers: [(String, String)] = []
    /// The body of a refusal (a response that is not a stream).
    public private(set) var refusal: [String: Any] = [:]
    /// Comment lines (`: ...`) received so far.
    public private(set) var comments: [String] = []
    /// The last chunk arrived: the server ended the stream.
    public private(set) var ended = false
    /// The last `id` received (what `EventSource` sends back as `Last-Event-ID`).
    public private(set) var lastEventId: String?
    private var text: [UInt8] = []
    private var pending: [Event] = []
    private var current = Event(name: "", data: "", id: nil)
    private var hasData = false

    /// Opens `target` (path and query) with the extra header fields given (`receiveBuffer`: as
    /// `TCPClient`'s, to play a slow reader).
    public init(port: UInt16, target: String, headers extra: [(String, String)] = [], receiveBuffer: Int32? = nil) throws {
        tcp = try TCPClient(port: port, timeout: 5, receiveBuffer: receiveBuffer)
        var request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n"
        for (name, value) in extra { request += "\(name): \(value)\r\n" }
        try tcp.send(request + "\r\n")
        // The head alone: a stream's body is chunked, a refusal's has a length.
        while true {
            if let end = headEnd() {
                let head = String(decoding: try tcp.read(exactly: end + 4).dropLast(4), as: UTF8.self)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst().split(separator: " ")
                status = statusLine.count > 1 ? Int(statusLine[1]) ?? 0 : 0
                headers = lines.compactMap { line in
                    guard let c = line.firstIndex(of: ":") else { return nil }
                    return (String(line[..<c]), line[line.index(after: c)...].trimmingCharacters(in: .whitespaces))
                }
                break
            }
            guard try tcp.fill() else { throw TestKitError.protocolError("EOF before the response head") }
        }
        if status != 200 {
            let body = try tcp.read(exactly: Int(header("Content-Length") ?? "0") ?? 0)
            refusal = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
        }
    }

    public func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }

    private func headEnd() -> Int? {
        let b = tcp.buffer
        guard b.count >= 4 else { return nil }
        for i in 0...(b.count - 4) where b[i] == 13 && b[i + 1] == 10 && b[i + 2] == 13 && b[i + 3] == 10 { return i }
        return nil
    }

    private func line() throws -> [UInt8] {
        while true {
            let b = tcp.buffer
            if b.count >= 2, let i = (0..<(b.count - 1)).first(where: { b[$0] == 13 && b[$0 + 1] == 10 }) {
                return Array(try tcp.read(exactly: i + 2).dropLast(2))
            }
            guard try tcp.fill() else { throw TestKitError.protocolError("EOF inside the chunked body") }
        }
    }

    /// Reads one chunk into the event parser. Throws on timeout or EOF.
    private func readChunk() throws {
        let size = String(decoding: try line(), as: UTF8.self)
        guard let n = Int(size, radix: 16) else { throw TestKitError.protocolError("bad chunk size \(size)") }
        if n == 0 {
            _ = try line()
            ended = true
            return
        }
        text.append(contentsOf: try tcp.read(exactly: n))
        guard try tcp.read(exactly: 2) == [13, 10] else { throw TestKitError.protocolError("chunk without CRLF") }
        parse()
    }

    /// The event-stream format's line rules (LF line ends, as the server writes them).
    private func parse() {
        while let nl = text.firstIndex(of: 10) {
            let l = String(decoding: text[..<nl], as: UTF8.self)
            text.removeFirst(nl + 1)
            if l.isEmpty {
                if hasData {
                    if current.name.isEmpty { current.name = "message" }
                    pending.append(current)
                    if let id = current.id { lastEventId = id }
                }
                current = Event(name: "", data: "", id: nil)
                hasData = false
                continue
            }
            if l.hasPrefix(":") {
                comments.append(String(l.dropFirst()).trimmingCharacters(in: .whitespaces))
                continue
            }
            let field = l.firstIndex(of: ":").map { String(l[..<$0]) } ?? l
            var value = l.firstIndex(of: ":").map { String(l[l.index(after: $0)...]) } ?? ""
            if value.hasPrefix(" ") { value.removeFirst() }
            switch field {
            case "event": current.name = value
            case "data":
                current.data += hasData ? "\n" + value : value
                hasData = true
            case "id": current.id = value
            default: break
            }
        }
    }

    /// The next event, waiting up to `timeout` seconds; nil when none came (or the stream ended).
    public func next(timeout: Double = 5) throws -> Event? {
        let deadline = Date().addingTimeInterval(timeout)
        while pending.isEmpty && !ended {
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            tcp.setTimeout(left)
            do { try readChunk() } catch TestKitError.timeout(_) { return nil }
        }
        return pending.isEmpty ? nil : pending.removeFirst()
    }

    /// Events until one matches (returned with those before it), or throws after `timeout`.
    public func waitFor(_ name: String, timeout: Double = 5, where match: (Event) -> Bool = { _ in true }) throws -> (Event, [Event]) {
        var passed: [Event] = []
        let deadline = Date().addingTimeInterval(timeout)
        while let e = try next(timeout: max(0.01, deadline.timeIntervalSinceNow)) {
            if e.name == name && match(e) { return (e, passed) }
            passed.append(e)
        }
        throw TestKitError.timeout("no \(name) event; got \(passed.map(\.name))")
    }

    /// Every event that arrives within `seconds`.
    public func drain(for seconds: Double = 0.5) throws -> [Event] {
        var out: [Event] = []
        let deadline = Date().addingTimeInterval(seconds)
        while let e = try next(timeout: max(0.01, deadline.timeIntervalSinceNow)) { out.append(e) }
        return out
    }

    /// Waits for a comment line (a heartbeat) within `timeout` seconds.
    public func waitForComment(timeout: Double) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        let before = comments.count
        while comments.count == before && !ended && deadline.timeIntervalSinceNow > 0 {
            tcp.setTimeout(deadline.timeIntervalSinceNow)
            do { try readChunk() } catch TestKitError.timeout(_) { break }
        }
        return comments.count > before
    }
}
