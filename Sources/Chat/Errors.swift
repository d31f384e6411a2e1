/// Every refusal of the domain: a stable code, a message, and the field it is about.
///
/// Codes follow the vendors where they define one for the same situation (SPEC §11): RongCloud's
/// 1002/23406/23408/23409/23410/24406, NIM's 13002/13003. Situations no vendor names get
/// Roomcast codes in the 4xxxx range. `ChatErrorCode.table` is the one table the docs print.
public struct ChatError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: ChatErrorCode
    public let message: String
    /// The request field the error is about, when there is one.
    public let field: String?

    public init(_ code: ChatErrorCode, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String {
        field.map { "\(code.rawValue) \($0): \(message)" } ?? "\(code.rawValue): \(message)"
    }

    static func invalid(_ field: String, _ message: String) -> ChatError {
        ChatError(.invalidParameter, message, field: field)
    }

    /// NIM-3: the one refusal of every change an anonymous session asks for (messages, attributes,
    /// queue, own profile, management, room updates and creation, conversation status).
    static func anonymousReadOnly() -> ChatError {
        ChatError(.anonymousReadOnly, "anonymous members receive but cannot send or change anything", field: "session")
    }
}

public enum ChatErrorCode: Int, Sendable, CaseIterable {
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
        }
    }

    /// The NIM status code for the same situation (used by the NIM adapter).
    public var nimCode: Int {
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
        }
    }
}
