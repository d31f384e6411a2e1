import HTTP1

/// A request the server layer refuses by itself, without a route handler: an unknown path (404),
/// a method the path does not take (405), a request the HTTP parser or the connection's timers
/// reject (400, 408, 413, 414, 431, 501, 505), a refused WebSocket handshake (400, 403, 426, and
/// 404 when the server has no upgrade handler).
public struct ServerRefusal: Sendable, Equatable {
    public let status: HTTPStatus
    /// Why, in words.
    public let message: String

    public init(status: HTTPStatus, message: String) {
        self.status = status
        self.message = message
    }
}

/// Renders the server's own refusals, so that they read like the application's other errors.
/// Called on the connection's loop.
///
/// The renderer chooses the body and may add header fields. The status, the framing
/// (`Content-Length`, `Transfer-Encoding`, `Connection`, whether the connection closes) and the
/// protocol's fields (`Allow` on 405, `Sec-WebSocket-Version` on 426) stay the server's: what the
/// renderer returns for them is replaced.
public typealias ErrorRenderer = @Sendable (ServerRefusal) -> Response

extension ServerRefusal {
    /// `{"code":<status × 100>,"message":"..."}`: the error table's code for an HTTP-level refusal
    /// is its status times 100 (404 → 40400, 413 → 41300).
    public static let defaultRenderer: ErrorRenderer = { refusal in
        .json(refusal.status, "{\"code\":\(refusal.status.code * 100),\"message\":\(jsonQuote(refusal.message))}")
    }

    /// Fields a renderer may not set: the encoder writes the framing, the server the protocol's.
    private static let serverFields = ["Content-Length", "Transfer-Encoding", "Connection", "Allow", "Sec-WebSocket-Version"]

    /// The refusal as `renderer` renders it, with the server's status, framing and protocol
    /// fields (`protocolHeaders`) put in place of the renderer's.
    func response(renderedBy renderer: ErrorRenderer, headers protocolHeaders: HTTPHeaders = HTTPHeaders(), close: Bool) -> Response {
        var response = renderer(self)
        response.status = status
        var headers = HTTPHeaders()
        for field in response.headers where !Self.serverFields.contains(where: { $0.equalsIgnoringASCIICase(field.name) }) {
            headers.add(field.name, field.value)
        }
        for field in protocolHeaders { headers.add(field.name, field.value) }
        response.headers = headers
        response.closeConnection = close
        return response
    }
}
