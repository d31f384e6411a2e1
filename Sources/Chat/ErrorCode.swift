/// The one table of refusal codes, for every layer and surface: the domain's refusals (carried
/// by `ChatError`) and those the gateway makes before or around the domain (authentication, the
/// operator API, the WebSocket handshake, and the HTTP server's own refusals, carried by the Wire
/// module's `GatewayError`). A code shared by two layers (an unknown app, a reused nonce or
/// `Idempotency-Key`) is one case, whichever layer refuses.
///
/// Codes follow the vendors where they define one for the same situation (SPEC §11): RongCloud's
/// 1002/23406/23408/23409/23410/24406, NIM's 13002/13003. Situations no vendor names get
/// Roomcast codes in the 4xxxx range. A refusal the HTTP server makes by itself (no route, bad
/// framing, limits) has the code `HTTP status × 100`: the server's renderer finds its row by that
/// rule (`forHTTPStatus`).
public enum ErrorCode: Int, Sendable, CaseIterable {
    // MARK: Refusals of the domain (and of the gateway, where both can refuse)

    /// A request field is missing, malformed or out of range (RongCloud 1002; NIM 414).
    case invalidParameter = 1002
    /// The app key is unknown (RongCloud 1001-style).
    case unknownApp = 1001
    /// The user is not in the room (RongCloud 23406).
    case notInRoom = 23406
    /// Sending is refused: user, room-wide or global mute (RongCloud 23408; NIM 13004).
    case muted = 23408
    /// The user is blocked from the room (RongCloud 23409; NIM 13003).
    case blocked = 23409
    /// The room does not exist (RongCloud 23410; NIM 404).
    case roomNotFound = 23410
    /// The room is closed (NIM 13002 "chat room state abnormal").
    case roomClosed = 13002
    /// The user is not a member of the ultra group (RongCloud 24406).
    case notGroupMember = 24406
    /// A room with this id already exists (ZIM createRoom).
    case roomExists = 40901
    /// The operator's role does not allow this action (NIM 403).
    case permissionDenied = 40301
    /// Anonymous members receive but cannot send (NIM-3).
    case anonymousReadOnly = 40302
    /// A count limit was reached: rooms per user, fixed members, queue size (NIM 419).
    case limitExceeded = 41901
    /// The server's room limit was reached (ZIM switch/create refusal).
    case roomLimitReached = 41902
    /// A named item does not exist (queue key, ultra group, channel, webhook).
    case notFound = 40401
    /// The session is unknown or not connected.
    case unknownSession = 40101
    /// A group or channel with this id already exists.
    case alreadyExists = 40902
    /// The store could not be read or written; nothing changed; try again later.
    case storageUnavailable = 50301
    /// A rate limit was reached (PX-1: the app's REST calls, a connection's messages, a user's
    /// sends); nothing changed; try again after Retry-After (RongCloud 1008; NIM 416).
    case rateLimited = 42901
    /// QS-2: the room is over its message budget (low, then normal messages are refused first;
    /// high ones use the reserved share), or its fan-out is further behind than the latency
    /// budget; nothing was sent; try again after Retry-After (RongCloud 1008; NIM 416).
    case roomBusy = 42902
    /// PX-4: the app's before-send hook dropped the message; nobody received it.
    case messageRejected = 40303
    /// MO-2: the message holds one of the app's blocking sensitive words; nobody received it
    /// (RongCloud 21501).
    case sensitiveWordBlocked = 21501
    /// PX-4: the app's before-send hook did not judge the message in time (or answered nonsense)
    /// and the app fails closed; nobody received it; try again.
    case moderationUnavailable = 50302
    /// Cluster mode: the connection to PostgreSQL was lost while the change was being saved; it may
    /// or may not have been made. Check (read it back) before trying again.
    case outcomeUnknown = 50303
    /// Cluster mode: the signed request's nonce was used inside the window, on this node or on
    /// another one (the same code and status as the gateway's refusal, 40104).
    case nonceReused = 40104
    /// PX-2, cluster mode: the `Idempotency-Key` was claimed by another request (as 42200).
    case idempotencyKeyReused = 42200
    /// PX-2, cluster mode: the request with this `Idempotency-Key` is still being answered (as 40900).
    case idempotencyKeyInFlight = 40900
    /// PX-2, cluster mode: the request with this `Idempotency-Key` made its change, and the node
    /// that made it stopped (or lost PostgreSQL while saving) before its answer was kept. The
    /// change was made; its answer cannot be replayed. Do not retry it: read the state instead.
    case idempotentAnswerLost = 40903

    // MARK: Refusals of the gateway alone (authentication, operator API, protocol, HTTP layer)

    /// No credentials on a signed endpoint.
    case missingCredentials = 40100
    /// The signature does not match (RongCloud 1004; NIM 414).
    case badSignature = 1004
    /// The timestamp is outside ±300 s.
    case staleTimestamp = 40103
    /// A client token is missing, malformed, badly signed or for another app.
    case badToken = 40105
    /// The client token has expired.
    case tokenExpired = 40106
    /// The request is not valid JSON or not a known operation; or malformed HTTP.
    case badRequest = 40000
    /// TR-1, TR-2: a resume cursor (`Last-Event-ID`, `lastEventId`, a poll's `cursor`) that is
    /// malformed, names too many rooms, or was issued for another app.
    case badCursor = 40001
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
    /// TR-1, TR-2: no event stream or long-poll session with this id is open for the caller's
    /// app and user (it ended, or it is someone else's).
    case unknownStream = 40412
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

    /// RC-1, NIM-5: may a client enter again on its own (after a reconnect) when a join failed with
    /// this code? Not when it is blocked (RongCloud KICKED_FROM_CHATROOM; NIM "banned"), when the
    /// room does not exist (RC_CHATROOM_NOT_EXIST) or when the room is closed (NIM's "abnormal
    /// status of a chat room", 13002): the client gets `autoLoginFailed` and decides itself.
    /// Every other failure may be retried.
    public var allowsAutoRejoin: Bool {
        switch self {
        case .blocked, .roomNotFound, .roomClosed: return false
        default: return true
        }
    }

    /// HTTP status for REST answers.
    public var httpStatus: Int {
        switch self {
        case .invalidParameter: return 400
        case .unknownApp, .unknownSession, .nonceReused: return 401
        case .idempotencyKeyInFlight, .idempotentAnswerLost: return 409
        case .idempotencyKeyReused: return 422
        case .notInRoom, .muted, .blocked, .roomClosed, .permissionDenied, .anonymousReadOnly, .notGroupMember, .messageRejected, .sensitiveWordBlocked: return 403
        case .roomNotFound, .notFound: return 404
        case .roomExists, .alreadyExists: return 409
        case .limitExceeded, .roomLimitReached: return 422
        case .storageUnavailable, .moderationUnavailable, .outcomeUnknown: return 503
        case .rateLimited, .roomBusy: return 429
        case .missingCredentials, .badSignature, .staleTimestamp, .badToken, .tokenExpired: return 401
        default: return rawValue / 100
        }
    }

    /// The NIM status code for the same situation (used by the NIM adapter).
    public var nimCode: Int? {
        switch self {
        case .invalidParameter: return 414
        case .unknownApp, .unknownSession: return 302
        case .nonceReused: return 431
        case .idempotencyKeyReused: return 414
        case .idempotencyKeyInFlight, .idempotentAnswerLost: return 417
        case .notInRoom: return 404
        case .muted: return 13004
        case .blocked: return 13003
        case .roomNotFound, .notFound: return 404
        case .roomClosed: return 13002
        case .roomExists, .alreadyExists: return 417
        case .permissionDenied, .anonymousReadOnly, .notGroupMember, .messageRejected, .sensitiveWordBlocked: return 403
        case .limitExceeded, .roomLimitReached: return 419
        case .storageUnavailable, .moderationUnavailable, .outcomeUnknown: return 500
        case .rateLimited, .roomBusy: return 416
        default: return nil
        }
    }

    public var summary: String {
        switch self {
        case .invalidParameter: return "a request field is missing, malformed or out of range"
        case .unknownApp: return "unknown app"
        case .notInRoom: return "the user is not in the room"
        case .muted: return "sending refused: the user, the room or the user app-wide is muted"
        case .blocked: return "the user is blocked from the room"
        case .roomNotFound: return "the room does not exist"
        case .roomClosed: return "the room is closed"
        case .notGroupMember: return "the user is not a member of the ultra group"
        case .roomExists: return "a room with this id already exists"
        case .permissionDenied: return "the operator's role does not allow this"
        case .anonymousReadOnly: return "anonymous members cannot send"
        case .limitExceeded: return "a count limit was reached"
        case .roomLimitReached: return "the server's room limit was reached"
        case .notFound: return "no such item"
        case .unknownSession: return "unknown session"
        case .alreadyExists: return "already exists"
        case .storageUnavailable: return "the store could not be read or written; nothing changed; try again"
        case .rateLimited: return "a rate limit was reached; nothing changed; try again after Retry-After"
        case .roomBusy: return "the room is over its message budget or its fan-out is behind: low, then normal messages are refused first; nothing was sent; try again after Retry-After"
        case .messageRejected: return "the app's before-send hook dropped the message; nobody received it"
        case .sensitiveWordBlocked: return "the message holds a blocked sensitive word (MO-2); nobody received it"
        case .moderationUnavailable: return "the app's before-send hook did not judge the message in time and the app fails closed; nobody received it; try again"
        case .outcomeUnknown: return "the connection to the cluster's database was lost while saving: the change may or may not have been made; check before trying again"
        case .nonceReused: return "the nonce was already used"
        case .idempotencyKeyReused: return "the Idempotency-Key was used before with another request (method, path or body)"
        case .idempotencyKeyInFlight: return "a request with this Idempotency-Key is still being answered; retry it"
        case .idempotentAnswerLost: return "the request with this Idempotency-Key made its change, but its answer was lost (the node that made it stopped, or lost the cluster's database, before the answer was kept); do not retry it: read the state instead"
        case .missingCredentials: return "signature headers are missing"
        case .badSignature: return "the signature does not match"
        case .staleTimestamp: return "the timestamp is more than 300 s away from the server's clock"
        case .badToken: return "the client token is invalid"
        case .tokenExpired: return "the client token has expired"
        case .badRequest: return "malformed request (JSON, protocol message or HTTP framing)"
        case .badCursor: return "the resume cursor is malformed, names too many rooms, or was issued for another app; nothing changed (start without it)"
        case .unknownStream: return "no event stream or poll session with this id is open for this user (it ended, or it is not yours)"
        case .originForbidden: return "WebSocket handshake from an Origin that is not allowed"
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

    /// The codes the domain can refuse with (the vendor surfaces' tables list these), in the
    /// table's order: every case declared before the gateway's own.
    public static let domainCodes: [ErrorCode] = Array(allCases.prefix(through: allCases.firstIndex(of: lastDomainCode)!))
    private static let lastDomainCode = ErrorCode.idempotentAnswerLost

    /// The row for a refusal the HTTP server makes by itself with `status`.
    public static func forHTTPStatus(_ status: Int) -> ErrorCode? {
        ErrorCode(rawValue: status * 100)
    }
}
