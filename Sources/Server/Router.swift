import HTTP1
import Reactor

/// A complete request as handed to a route handler.
public struct Request: Sendable {
    public var head: HTTPRequestHead
    public var body: [UInt8]
    /// Values of `{name}` segments of the matched route, percent-decoded.
    public var pathParameters: [String: String]
    public var peer: Socket.Address

    public init(head: HTTPRequestHead, body: [UInt8], pathParameters: [String: String] = [:],
                peer: Socket.Address = Socket.Address(host: "127.0.0.1", port: 0)) {
        self.head = head
        self.body = body
        self.pathParameters = pathParameters
        self.peer = peer
    }

    public var method: HTTPMethod { head.method }
    public var path: String { head.path }

    /// Query parameters, percent-decoded (`+` is a space), in order.
    public var queryItems: [(name: String, value: String)] {
        guard let query = head.query else { return [] }
        return parseFormEncoded(query)
    }

    public func query(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }
}

/// A response: status, header fields and a body.
public struct Response: Sendable, Equatable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// Close the connection after this response.
    public var closeConnection = false

    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public static func json(_ status: HTTPStatus = .ok, _ body: [UInt8], headers: HTTPHeaders = HTTPHeaders()) -> Response {
        var h = headers
        h.add("Content-Type", "application/json")
        return Response(status: status, headers: h, body: body)
    }

    public static func json(_ status: HTTPStatus = .ok, _ body: String, headers: HTTPHeaders = HTTPHeaders()) -> Response {
        json(status, Array(body.utf8), headers: headers)
    }
}

/// Completes a request, from any thread, exactly once. Later calls are ignored, and a response for
/// a connection that has gone is dropped.
public struct ResponseWriter: Sendable {
    let complete: @Sendable (Response) -> Void
    /// What a wrapping layer hands the handler along with the writer (the gateway's idempotency
    /// keeper, PX-2); nil for a plain writer.
    public let attachment: (any Sendable)?
    public init(attachment: (any Sendable)? = nil, _ complete: @escaping @Sendable (Response) -> Void) {
        self.complete = complete
        self.attachment = attachment
    }
    public func send(_ response: Response) { complete(response) }
}

/// A route's handler: answered at once on the loop, or later (from any thread) via the writer.
/// `local` runs on the connection's loop, knows which loop that is, and may answer with a
/// streaming response (TR-1), at once, or later through the writer.
public enum RouteHandler: Sendable {
    case sync(@Sendable (Request) -> Response)
    case async(@Sendable (Request, ResponseWriter) -> Void)
    case local(@Sendable (Request, LocalRoute) -> LocalAnswer)
}

/// What a `local` route handler is given besides its request: the loop it runs on (its index
/// among the server's loops) and a writer for an answer that comes later.
public struct LocalRoute: Sendable {
    public let loopIndex: Int
    public let writer: ResponseWriter
    public init(loopIndex: Int, writer: ResponseWriter) {
        self.loopIndex = loopIndex
        self.writer = writer
    }
}

/// A `local` route handler's answer (TR-1, TR-2).
public enum LocalAnswer {
    /// This response, now.
    case respond(Response)
    /// The writer will answer (from any thread).
    case later
    /// A response whose head goes out now and whose body the handler writes as it comes
    /// (`Connection.writeStream`), chunked on HTTP/1.1 (close-delimited for HTTP/1.0), until it
    /// calls `Connection.finishStream` or the connection goes.
    case stream(status: HTTPStatus, headers: HTTPHeaders, handler: ResponseStreamHandler)
}

/// Receives a streaming response's events, on the connection's event loop (TR-1).
public protocol ResponseStreamHandler: AnyObject {
    /// The head is queued: the body may be written from now on.
    func streamDidOpen(_ connection: Connection)
    /// The server is shutting down: finish the stream soon (a last message, then `finishStream`).
    func streamShouldFinish(_ connection: Connection)
    /// The connection is gone (the peer closed it, it failed, it stalled past the send timeout,
    /// or it was shed); not called after the handler's own `finishStream`.
    func streamDidClose(_ connection: Connection)
}

/// Maps method and path to a handler. Paths are literal segments or `{name}` parameters.
/// A known path with another method gets 405 and `Allow`; HEAD falls back to GET.
public final class Router: Sendable {
    private struct Route: Sendable {
        let method: HTTPMethod
        let segments: [Segment]
        let handler: RouteHandler
    }
    private enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    /// Literal paths; per path a short list of (method, handler), scanned (no second hash).
    private let exact: PathTable<[(method: HTTPMethod, handler: RouteHandler)]>
    private let patterns: [Route]
    /// Every method some route takes (HEAD with GET), and OPTIONS: the `Allow` of a server-wide
    /// `OPTIONS *` (RFC 9110 §9.3.7).
    public let serverMethods: [HTTPMethod]
    /// Every route as it was added, in order. Matching never reads it: it is there so a test can
    /// hold a route table against what a server registered.
    public let registrations: [Registration]

    /// One `add` to the builder. A method and path added twice shows up twice here, although
    /// only the last handler is kept, so a check can see it.
    public struct Registration: Sendable, Equatable {
        public let method: HTTPMethod
        public let path: String
        /// The group that added it (the gateway names its signed route groups); nil for a plain `add`.
        public let group: String?
    }

    public enum Match {
        case handler(RouteHandler, parameters: [String: String])
        case methodNotAllowed(allowed: [HTTPMethod])
        case notFound
    }

    /// Build with `Router.Builder`.
    init(exact: [String: [HTTPMethod: RouteHandler]], patterns: [(HTTPMethod, String, RouteHandler)], registrations: [Registration]) {
        self.registrations = registrations
        self.exact = PathTable(exact.mapValues { byMethod in
            byMethod.map { (method: $0.key, handler: $0.value) }.sorted { $0.method.rawValue < $1.method.rawValue }
        })
        self.patterns = patterns.map { method, path, handler in
            Route(method: method, segments: Router.split(path).map { seg in
                seg.hasPrefix("{") && seg.hasSuffix("}") ? .parameter(String(seg.dropFirst().dropLast())) : .literal(String(seg))
            }, handler: handler)
        }
        self.serverMethods = Self.allowList(exact.values.flatMap(\.keys) + patterns.map(\.0) + [.OPTIONS])
    }

    public struct Builder {
        private var exact: [String: [HTTPMethod: RouteHandler]] = [:]
        private var patterns: [(HTTPMethod, String, RouteHandler)] = []
        private var registrations: [Registration] = []
        public init() {}

        private mutating func add(_ method: HTTPMethod, _ path: String, group: String?, handler: RouteHandler) {
            registrations.append(Registration(method: method, path: path, group: group))
            if path.contains("{") {
                patterns.append((method, path, handler))
            } else {
                exact[path, default: [:]][method] = handler
            }
        }

        /// A handler that answers later through the writer (from any thread); `group` names the
        /// set of routes it belongs to in `registrations`.
        public mutating func add(_ method: HTTPMethod, _ path: String, group: String? = nil,
                                 _ handler: @escaping @Sendable (Request, ResponseWriter) -> Void) {
            add(method, path, group: group, handler: .async(handler))
        }

        /// A handler that answers at once.
        public mutating func add(_ method: HTTPMethod, _ path: String, sync handler: @escaping @Sendable (Request) -> Response) {
            add(method, path, group: nil, handler: .sync(handler))
        }

        /// A handler that runs on the connection's loop and may stream its response (TR-1).
        public mutating func add(_ method: HTTPMethod, _ path: String, local handler: @escaping @Sendable (Request, LocalRoute) -> LocalAnswer) {
            add(method, path, group: nil, handler: .local(handler))
        }

        public func build() -> Router { Router(exact: exact, patterns: patterns, registrations: registrations) }
    }

    public func match(method: HTTPMethod, path key: String) -> Match {
        if let routes = exact.value(for: key) {
            if let r = routes.first(where: { $0.method == method }) ?? (method == .HEAD ? routes.first(where: { $0.method == .GET }) : nil) {
                return .handler(r.handler, parameters: [:])
            }
            return .methodNotAllowed(allowed: Self.allowList(routes.map(\.method)))
        }
        let segments = Self.split(key)
        var allowed: [HTTPMethod] = []
        var getFallback: (RouteHandler, [String: String])?
        for route in patterns {
            guard let params = Self.bind(route.segments, segments) else { continue }
            if route.method == method { return .handler(route.handler, parameters: params) }
            if method == .HEAD && route.method == .GET { getFallback = (route.handler, params) }
            allowed.append(route.method)
        }
        if let (h, p) = getFallback { return .handler(h, parameters: p) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: Self.allowList(allowed))
    }

    private static func allowList(_ methods: [HTTPMethod]) -> [HTTPMethod] {
        var set = Set(methods)
        if set.contains(.GET) { set.insert(.HEAD) }
        return set.sorted { $0.rawValue < $1.rawValue }
    }

    private static func bind(_ pattern: [Segment], _ path: [Substring]) -> [String: String]? {
        guard pattern.count == path.count else { return nil }
        var params: [String: String] = [:]
        for (p, s) in zip(pattern, path) {
            switch p {
            case .literal(let l): if l != s { return nil }
            case .parameter(let name):
                guard let decoded = percentDecode(s, plusAsSpace: false), !decoded.isEmpty else { return nil }
                params[name] = decoded
            }
        }
        return params
    }

    static func split(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { $0 }
    }
}

/// A fixed map from path to value, built once: open addressing with linear probing over an
/// FNV-1a hash of the path's bytes, at most half full. A lookup hashes the path's bytes once and
/// compares one or two stored paths; a `Dictionary<String, _>` runs SipHash through the generic
/// `Hasher` on every request. Nothing is ever inserted after `init`, so a client's chosen paths
/// cannot lengthen the probe runs (the table's layout depends only on the routes). A path matches
/// by its bytes (request targets are ASCII; the parser refuses anything else in one), not by
/// Unicode canonical equivalence as a `String`-keyed dictionary would.
struct PathTable<Value: Sendable>: Sendable {
    private let entries: [(hash: UInt64, path: String, value: Value)]
    /// Index into `entries`, or -1 for an empty slot; the count is a power of two.
    private let slots: [Int]

    init(_ map: [String: Value]) {
        var size = 8
        while size < map.count * 2 { size *= 2 }
        var slots = [Int](repeating: -1, count: size)
        var entries: [(hash: UInt64, path: String, value: Value)] = []
        for (path, value) in map.sorted(by: { $0.key < $1.key }) {
            let h = Self.hash(path)
            var i = Int(truncatingIfNeeded: h) & (size - 1)
            while slots[i] >= 0 { i = (i + 1) & (size - 1) }
            slots[i] = entries.count
            entries.append((hash: h, path: path, value: value))
        }
        self.slots = slots
        self.entries = entries
    }

    func value(for path: String) -> Value? {
        let h = Self.hash(path)
        let mask = slots.count - 1
        var i = Int(truncatingIfNeeded: h) & mask
        while true {
            let e = slots[i]
            if e < 0 { return nil }
            if entries[e].hash == h && entries[e].path == path { return entries[e].value }
            i = (i + 1) & mask
        }
    }

    static func hash(_ s: String) -> UInt64 {
        var h: UInt64 = 0xCBF2_9CE4_8422_2325
        let prime: UInt64 = 0x0000_0100_0000_01B3
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { bytes in
            for b in bytes { h = (h ^ UInt64(b)) &* prime }
        }
        if done == nil {
            for b in s.utf8 { h = (h ^ UInt64(b)) &* prime }
        }
        return h
    }
}
