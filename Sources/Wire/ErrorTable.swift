import Chat

/// Gateway-level refusals (authentication, protocol, and the HTTP layer's own refusals); domain
/// refusals are `ChatError`. Both render through `ErrorTable`.
///
/// A refusal the HTTP server makes by itself (no route, bad framing, limits) has the code
/// `HTTP status × 100`: the server's renderer finds its row by that rule.
public enum GatewayErrorCode: Int, Sendable, CaseIterable {
    /// No credentials on a signed endpoint.
    case missingCredentials = 40100
    /// Unknown app key (RongCloud 1001).
    case unknownAppKey = 1001
    /// The signature does not match (RongCloud 1004; NIM 414).
    case badSignature = 1004
    /// The timestamp is outside ±300 s.
    case staleTimestamp = 40103
    /// The nonce was already used inside the window.
    case nonceReused = 40104
    /// A client token is missing, malformed, badly signed or for another app.
    case badToken = 40105
    /// The client token has expired.
    case tokenExpired = 40106
    /// The request is not valid JSON or not a known operation; or malformed HTTP.
    case badRequest = 40000
    /// A WebSocket handshake from an Origin the server does not allow.
    case originForbidden = 40300
    /// No such route.
    case noSuchPath = 40400
    /// The path exists, the method does not (with `Allow`).
    case methodNotAllowed = 40500
    /// The request head or body did not arrive in time.
    case requestTimeout = 40800
    /// The body is larger than the limit.
    case bodyTooLarge = 41300
    /// The request line is too long.
    case targetTooLong = 41400
    /// An `Expect` other than `100-continue`.
    case expectationFailed = 41700
    /// A WebSocket handshake with an unsupported version.
    case upgradeRequired = 42600
    /// The header section is too large or has too many fields.
    case headersTooLarge = 43100
    /// PX-2: the `Idempotency-Key` was used before with another request (method, path or body).
    case idempotencyKeyReused = 42200
    /// PX-2: a request with this `Idempotency-Key` is still being answered.
    case idempotencyKeyInFlight = 40900
    /// A transfer coding the server does not implement, or a CONNECT request.
    case unsupportedCoding = 50100
    /// The call would change what only this node holds, and this node is one of a cluster (webhook
    /// endpoints are configured on every node's command line instead; a user's connections on
    /// other nodes are out of its reach).
    case notOnClusterNodes = 50101
    /// OP-2: the operator credential (`Authorization: Bearer …`) is missing or wrong.
    case operatorUnauthorized = 40110
    /// OP-2: the operator API is off: the node was started without `--operator-token`.
    case operatorAPIOff = 40310
    /// OP-2: the app is disabled by the operator (or being removed).
    case appDisabled = 40311
    /// OP-2: no app with this key (operator API and `roomcast apps`).
    case appNotFound = 40410
    /// OP-1, OP-2: the data directory holds no roomcast database (`roomcast apps`, `backup`).
    case noDatabase = 40411
    /// OP-2: the app is being removed; it is deleted with its data when its node next starts.
    case appRemoving = 40911
    /// OP-1: a backup of this node is already being written.
    case backupInProgress = 40912
    /// OP-1: a node (or a restore) is running on the data directory.
    case dataDirectoryInUse = 40913
    /// OP-1: `restore` into a directory that is not empty, without `--force`.
    case dataDirectoryNotEmpty = 40914
    /// OP-3: the data directory or backup was written by a newer roomcast.
    case writtenByNewerVersion = 40915
    /// OP-1: the file is not a usable backup (not SQLite, damaged, or not a roomcast store).
    case notABackup = 42210
    /// OP-1: the backup could not be written (e.g. the disk is full); no file was left under its name.
    case backupFailed = 50010
    /// The server is starting or draining.
    case unavailable = 50300
    /// An HTTP version other than 1.0 and 1.1.
    case versionNotSupported = 50500

    public var httpStatus: Int {
        switch self {
        case .missingCredentials, .unknownAppKey, .badSignature, .staleTimestamp, .nonceReused, .badToken, .tokenExpired: return 401
        default: return rawValue / 100
        }
    }

    public var summary: String {
        switch self {
        case .missingCredentials: return "signature headers are missing"
        case .unknownAppKey: return "unknown app key"
        case .badSignature: return "the signature does not match"
        case .staleTimestamp: return "the timestamp is more than 300 s away from the server's clock"
        case .nonceReused: return "the nonce was already used"
        case .badToken: return "the client token is invalid"
        case .tokenExpired: return "the client token has expired"
        case .badRequest: return "malformed request (JSON, protocol message or HTTP framing)"
        case .originForbidden: return "WebSocket handshake from an Origin that is not allowed"
        case .idempotencyKeyReused: return "the Idempotency-Key was used before with another request (method, path or body)"
        case .idempotencyKeyInFlight: return "a request with this Idempotency-Key is still being answered; retry it"
        case .noSuchPath: return "no such path"
        case .methodNotAllowed: return "the path does not take this method (see Allow)"
        case .requestTimeout: return "the request did not arrive in time"
        case .bodyTooLarge: return "the body is larger than the limit"
        case .targetTooLong: return "the request line is too long"
        case .expectationFailed: return "unsupported Expect"
        case .upgradeRequired: return "unsupported WebSocket version (see Sec-WebSocket-Version)"
        case .headersTooLarge: return "the header section is too large"
        case .unsupportedCoding: return "unsupported transfer coding, or CONNECT"
        case .unavailable: return "the server is starting or shutting down"
        case .versionNotSupported: return "HTTP version not supported"
        case .notOnClusterNodes: return "not available on a cluster node (it would act on the receiving node only)"
        case .operatorUnauthorized: return "the operator credential (Authorization: Bearer) is missing or wrong"
        case .operatorAPIOff: return "the operator API is off: start the node with --operator-token (ROOMCAST_OPERATOR_TOKEN)"
        case .appDisabled: return "the app is disabled by the operator (roomcast apps enable)"
        case .appNotFound: return "no app with this key (operator API, roomcast apps)"
        case .noDatabase: return "the data directory holds no roomcast database (check --data-dir)"
        case .appRemoving: return "the app is being removed: it is deleted with its data when its node next starts"
        case .backupInProgress: return "a backup of this node is already being written; try again when it is done"
        case .dataDirectoryInUse: return "a node (or a restore) is running on the data directory; stop it first"
        case .dataDirectoryNotEmpty: return "the data directory is not empty (restore --force replaces its database)"
        case .writtenByNewerVersion: return "the data directory or backup was written by a newer roomcast; it is left as it is"
        case .notABackup: return "the file is not a usable roomcast backup (not SQLite, damaged, or not a roomcast store)"
        case .backupFailed: return "the backup could not be written (e.g. the disk is full); no file was left under its name"
        }
    }

    /// The row for a refusal the HTTP server makes by itself with `status`.
    public static func forHTTPStatus(_ status: Int) -> GatewayErrorCode? {
        GatewayErrorCode(rawValue: status * 100)
    }
}

public struct GatewayError: Error, Equatable, Sendable {
    public let code: GatewayErrorCode
    public let message: String
    public let field: String?
    public init(_ code: GatewayErrorCode, _ message: String, field: String? = nil) {
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
    public static func retryAfter(_ code: ChatErrorCode) -> Int? {
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

    public static let rows: [Row] = {
        var seen = Set<Int>()
        let all = ChatErrorCode.allCases.map { Row(code: $0.rawValue, httpStatus: $0.httpStatus, nimCode: $0.nimCode, meaning: $0.summary) }
            + GatewayErrorCode.allCases.map { Row(code: $0.rawValue, httpStatus: $0.httpStatus, nimCode: nil, meaning: $0.summary) }
        // The domain and the gateway share 1001 (unknown app): one row per code.
        return all.filter { seen.insert($0.code).inserted }
    }()

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
        body(code: GatewayErrorCode.forHTTPStatus(httpStatus)?.rawValue ?? httpStatus * 100, message: message, field: nil)
    }
}
