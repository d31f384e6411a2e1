import Chat

/// The one table of refusals: every code with its HTTP status, WebSocket close code (when the
/// refusal closes a connection), vendor code, and meaning. REST bodies and WebSocket errors
/// render through here, and `docs` prints it for `openapi/`.
public enum ErrorTable {
    public struct Row: Sendable {
        public let code: Int
        public let httpStatus: Int
        public let nimCode: Int?
        public let meaning: String
    }

    public static var rows: [Row] {
        var seen = Set<Int>()
        let all = ChatErrorCode.allCases.map { Row(code: $0.rawValue, httpStatus: $0.httpStatus, nimCode: $0.nimCode, meaning: $0.summary) }
            + GatewayErrorCode.allCases.map { Row(code: $0.rawValue, httpStatus: $0.httpStatus, nimCode: nil, meaning: $0.summary) }
        // The domain and the gateway share 1001 (unknown app): one row per code.
        return all.filter { seen.insert($0.code).inserted }
    }

    /// The table as Markdown (written to openapi/errors.md).
    public static var markdown: String {
        var out = """
            # Roomcast error codes

            Every refusal has a stable code. REST answers `{"code", "message", "field"}` with the HTTP status below;
            the WebSocket protocol answers `{"id", "error": {"code", "message", "field"}}`. `field` names the request
            field at fault when there is one. Where a vendor defines a code for the situation, Roomcast uses it
            (RongCloud 1xxx/23xxx/24xxx); the NIM column is what the NIM-compatible surface reports.

            | Code | HTTP | NIM | Meaning |
            |---|---|---|---|

            """
        for r in rows {
            out += "| \(r.code) | \(r.httpStatus) | \(r.nimCode.map(String.init) ?? "–") | \(r.meaning) |\n"
        }
        out += """

            ## WebSocket close codes

            | Code | Meaning |
            |---|---|
            | 1001 | the server is shutting down |
            | 1002 | protocol error (RFC 6455) |
            | 1003 | binary message (the protocol is JSON text) |
            | 1007 | invalid UTF-8 or invalid compressed data |
            | 1009 | message larger than the limit (also after inflation) |
            | \(CloseCodes.badRequest) | the message was not JSON or not a known operation |
            | \(CloseCodes.notAuthenticated) | the first message was not `connect`, or it did not come in time |
            | \(CloseCodes.tokenExpired) | the token expired and was not refreshed within the grace period |
            | \(CloseCodes.originNotAllowed) | the Origin is not on the app's allowlist |
            | \(CloseCodes.badToken) | the token is invalid (signature, algorithm, app) |
            | \(CloseCodes.slowConsumer) | slow consumer: the client's outbound queue passed the bound |

            """
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
}

/// WebSocket close codes the gateway uses (documented in openapi/websocket.md).
public enum CloseCodes {
    /// The message was not JSON or not a known operation.
    public static let badRequest: UInt16 = 4000
    /// The first message was not `connect`, or it did not come within the connect timeout.
    public static let notAuthenticated: UInt16 = 4001
    /// The client token expired and was not refreshed within the grace period.
    public static let tokenExpired: UInt16 = 4002
    /// The connection's Origin is not on the app's allowlist.
    public static let originNotAllowed: UInt16 = 4003
    /// The token is invalid.
    public static let badToken: UInt16 = 4004
    /// The client did not read its events fast enough (slow consumer).
    public static let slowConsumer: UInt16 = 4008
}
