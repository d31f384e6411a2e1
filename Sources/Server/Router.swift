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
public enum RouteHandler: Sendable {
    case sync(@Sendable (Request) -> Response)
    case async(@Sendable (Request, ResponseWriter) -> Void)
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
    private let exact: [String: [(method: HTTPMethod, handler: RouteHandler)]]
    private let patterns: [Route]
    /// Every method some route takes (HEAD with GET), and OPTIONS: the `Allow` of a server-wide
    /// `OPTIONS *` (RFC 9110 §9.3.7).
    public let serverMethods: [HTTPMethod]

    public enum Match {
        case handler(RouteHandler, parameters: [String: String])
        case methodNotAllowed(allowed: [HTTPMethod])
        case notFound
    }

    /// Build with `Router.Builder`.
    init(exact: [String: [HTTPMethod: RouteHandler]], patterns: [(HTTPMethod, String, RouteHandler)]) {
        self.exact = exact.mapValues { byMethod in byMethod.map { (method: $0.key, handler: $0.value) }.sorted { $0.method.rawValue < $1.method.rawValue } }
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
        public init() {}

        private mutating func add(_ method: HTTPMethod, _ path: String, handler: RouteHandler) {
            if path.contains("{") {
                patterns.append((method, path, handler))
            } else {
                exact[path, default: [:]][method] = handler
            }
        }

        /// A handler that answers later through the writer (from any thread).
        public mutating func add(_ method: HTTPMethod, _ path: String, _ handler: @escaping @Sendable (Request, ResponseWriter) -> Void) {
            add(method, path, handler: .async(handler))
        }

        /// A handler that answers at once.
        public mutating func add(_ method: HTTPMethod, _ path: String, sync handler: @escaping @Sendable (Request) -> Response) {
            add(method, path, handler: .sync(handler))
        }

        public func build() -> Router { Router(exact: exact, patterns: patterns) }
    }

    public func match(method: HTTPMethod, path key: String) -> Match {
        if let routes = exact[key] {
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
