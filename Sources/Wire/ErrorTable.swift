import Chat

/// A refusal the gateway makes before or around the domain (authentication, protocol, the HTTP
/// layer, the operator API); domain refusals are `ChatError`. Both carry an `ErrorCode` and
/// render through `ErrorTable`.
public struct GatewayError: Error, Equatable, Sendable {
    public let code: ErrorCode
    public let message: String
    public let field: String?
    public init(_ code: ErrorCode, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }
}

/// Whether and how a client should reconnect after a close code (as centrifuge's disconnect
/// table says for each of its codes).
public enum Reconnect: String, Sendable, CaseIterable {
    /// Reconnect with exponential backoff and jitter, resuming its rooms.
    case withBackoff = "yes, with backoff"
    /// Reconnect with a fresh token (ask the app server for one first).
    case withNewToken = "yes, with a new token"
    /// Do not reconnect: the same attempt fails again until the client or the app changes.
    case never = "no"
}

/// Every WebSocket close code the gateway sends, what it means and what the client should do.
public enum CloseCode: UInt16, Sendable, CaseIterable {
    /// The answer to the client's own close (its code is echoed; 1000 when it sent none).
    case normal = 1000
    case goingAway = 1001
    case protocolError = 1002
    case unsupportedData = 1003
    case invalidPayload = 1007
    case messageTooBig = 1009
    /// The server could not save a change (e.g. a full disk) and reloaded its state from disk.
    case tryAgainLater = 1013
    /// The message was not a protocol message (not JSON, or not `{"id", "op", "args"}`), or more
    /// than 64 KiB was sent before the connect answer.
    case badRequest = 4000
    /// The first message was not `connect`, it had no credentials, or it did not come in time.
    case notAuthenticated = 4001
    /// The token expired and was not refreshed within the grace period.
    case tokenExpired = 4002
    /// The connection's Origin is not on the app's allowlist.
    case originNotAllowed = 4003
    /// The token (or app key) is invalid.
    case badToken = 4004
    /// The client did not read its events fast enough (slow consumer).
    case slowConsumer = 4008
    /// The app server disconnected the connection (`DELETE /v1/users/{userId}/connections`); the
    /// close reason is the app's. 4010: do not reconnect; 4011: reconnect (e.g. to another node).
    case disconnectedByApp = 4010
    case disconnectedByAppReconnect = 4011
    /// The connection went on sending past its messages-per-second limit (PX-1).
    case rateLimited = 4029

    public var meaning: String {
        switch self {
        case .normal: return "The server answers the client's own close (echoing its code)"
        case .goingAway: return "The server is shutting down, or the client did not answer a ping"
        case .protocolError: return "WebSocket protocol error (RFC 6455)"
        case .unsupportedData: return "A binary message (the protocol is JSON text)"
        case .invalidPayload: return "Invalid UTF-8 or invalid compressed data"
        case .messageTooBig: return "A message larger than the limit (also after inflation)"
        case .tryAgainLater: return "The server could not save a change (e.g. its disk is full) and reloaded its state; it refuses changes (50301) until it can save again"
        case .badRequest: return "The message was not JSON or not {\"id\", \"op\", \"args\"} (answered first with an error whose id is null), or more than 64 KiB was sent before the connect answer"
        case .notAuthenticated: return "The first message was not connect, it had no credentials, or it did not come within the connect timeout"
        case .tokenExpired: return "The token expired and was not refreshed within the grace period"
        case .originNotAllowed: return "The Origin is not on the app's allowlist"
        case .badToken: return "The token (or app key) is invalid"
        case .slowConsumer: return "The client did not read its events fast enough; other clients are unaffected"
        case .disconnectedByApp: return "The app server disconnected this connection (DELETE /v1/users/{userId}/connections); the close reason is the app's"
        case .disconnectedByAppReconnect: return "The app server disconnected this connection and lets it connect again (DELETE /v1/users/{userId}/connections?reconnect=true); the close reason is the app's"
        case .rateLimited: return "The connection went on sending past its messages-per-second limit (its commands were already refused with 42901)"
        }
    }

    public var reconnect: Reconnect {
        switch self {
        case .goingAway, .notAuthenticated, .slowConsumer, .tryAgainLater, .disconnectedByAppReconnect, .rateLimited: return .withBackoff
        case .tokenExpired: return .withNewToken
        case .normal, .protocolError, .unsupportedData, .invalidPayload, .messageTooBig, .badRequest, .originNotAllowed, .badToken,
             .disconnectedByApp: return .never
        }
    }
}

/// The one table of refusals: every code with its HTTP status, vendor code and meaning, and the
/// close codes. REST bodies, WebSocket errors and the HTTP server's own refusals render through
/// here, and `markdown` prints it for `openapi/errors.md`.
public enum ErrorTable {
    /// What a read-only node (storage unavailable, 50301) tells callers to wait before trying
    /// again, on every surface.
    public static let retryAfterSeconds = 5

    /// The `Retry-After` (seconds) a refusal with this code carries on every surface, if any.
    public static func retryAfter(_ code: ErrorCode) -> Int? {
        switch code {
        case .storageUnavailable, .outcomeUnknown: return retryAfterSeconds
        case .rateLimited, .moderationUnavailable: return Limits.rateLimitRetryAfterSeconds
        case .roomBusy: return Limits.roomBudgetRetryAfterSeconds
        default: return nil
        }
    }

    public struct Row: Sendable {
        public let code: Int
        public let httpStatus: Int
        public let nimCode: Int?
        public let meaning: String
    }

    public static let rows: [Row] = ErrorCode.allCases.map {
        Row(code: $0.rawValue, httpStatus: $0.httpStatus, nimCode: $0.nimCode, meaning: $0.summary)
    }

    /// The row of `code`, if the table has it.
    public static func row(_ code: Int) -> Row? { rowsByCode[code] }
    private static let rowsByCode: [Int: Row] = Dictionary(rows.map { ($0.code, $0) }, uniquingKeysWith: { a, _ in a })

    /// The table as Markdown (written to openapi/errors.md).
    public static var markdown: String {
        var out = """
            # Roomcast error codes

            Every refusal has a stable code. REST answers `{"code", "message", "field"}` with the HTTP status below;
            the WebSocket protocol answers `{"id", "error": {"code", "message", "field"}}`. `field` names the request
            field at fault when there is one. Where a vendor defines a code for the situation, Roomcast uses it
            (RongCloud 1xxx/23xxx/24xxx); the NIM column is what the NIM-compatible surface reports. Refusals the
            HTTP layer makes by itself (no route, malformed framing, limits) have the code HTTP status × 100.

            | Code | HTTP | NIM | Meaning |
            |---|---|---|---|

            """
        for r in rows {
            out += "| \(r.code) | \(r.httpStatus) | \(r.nimCode.map(String.init) ?? "–") | \(r.meaning) |\n"
        }
        out += "\n## WebSocket close codes\n\n" + closeCodeMarkdown
        out += "\n" + VendorCodes.markdown
        return out
    }

    /// The close codes with the reconnect advice (also in openapi/websocket.md).
    public static var closeCodeMarkdown: String {
        var out = "| Code | Meaning | Reconnect? |\n|---|---|---|\n"
        for c in CloseCode.allCases { out += "| \(c.rawValue) | \(c.meaning) | \(c.reconnect.rawValue) |\n" }
        return out
    }

    /// `{"code","message","field"}`.
    public static func body(code: Int, message: String, field: String?) -> [UInt8] {
        JSONWriter.object { w in
            w.field("code", code)
            w.field("message", message)
            w.fieldIfPresent("field", field)
        }
    }

    public static func body(_ e: ChatError) -> [UInt8] { body(code: e.code.rawValue, message: e.message, field: e.field) }
    public static func body(_ e: GatewayError) -> [UInt8] { body(code: e.code.rawValue, message: e.message, field: e.field) }

    /// The body of a refusal the HTTP server makes by itself: its row's code (status × 100).
    public static func body(httpStatus: Int, message: String) -> [UInt8] {
        body(code: ErrorCode.forHTTPStatus(httpStatus)?.rawValue ?? httpStatus * 100, message: message, field: nil)
    }
}
