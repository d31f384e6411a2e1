import Chat
import Foundation

/// How an endpoint wants its deliveries (WH-3).
public enum WebhookFormat: String, Equatable, Sendable, CaseIterable, Codable {
    /// Standard Webhooks: JSON `{type, timestamp, data}` with `webhook-id/-timestamp/-signature`.
    case standard
    /// RongCloud chatroom status sync: a JSON array of `{chatRoomId, userIds, status, type, time}`,
    /// signed in the query string with the app secret. Room create/join/quit/destroy only.
    case rongcloud
    /// NIM copy style: JSON with `eventType`, headers `AppKey`, `CurTime`, `MD5`, `CheckSum` (app secret).
    case nim

    /// The event types this format can express.
    public func supports(_ type: WebhookEventType) -> Bool {
        switch self {
        case .standard, .nim: return true
        case .rongcloud:
            switch type {
            case .roomCreated, .roomDestroyed, .memberJoined, .memberLeft, .memberKicked, .memberBlocked, .userOnline, .userOffline: return true
            default: return false
            }
        }
    }
}

/// One endpoint of one app (WH-1).
public struct WebhookEndpoint: Equatable, Sendable {
    public var id: String
    public var app: String
    public var url: String
    /// The current `whsec_` secret (Standard Webhooks).
    public var secret: String
    /// The secret being rotated out: it still signs (a second signature) until it expires.
    public var previousSecret: String?
    public var previousSecretExpiresAt: Int64?
    /// Event types delivered; empty means every type.
    public var events: [WebhookEventType]
    public var format: WebhookFormat
    /// May it reach loopback, private and link-local addresses (WH-5)?
    public var allowPrivateNetwork: Bool
    public var enabled: Bool
    public var disabledReason: String
    /// `api` (REST) or `config` (command line).
    public var origin: String
    public var createdAt: Int64

    public init(id: String, app: String, url: String, secret: String, previousSecret: String? = nil, previousSecretExpiresAt: Int64? = nil,
                events: [WebhookEventType], format: WebhookFormat, allowPrivateNetwork: Bool, enabled: Bool = true, disabledReason: String = "",
                origin: String, createdAt: Int64) {
        self.id = id
        self.app = app
        self.url = url
        self.secret = secret
        self.previousSecret = previousSecret
        self.previousSecretExpiresAt = previousSecretExpiresAt
        self.events = events
        self.format = format
        self.allowPrivateNetwork = allowPrivateNetwork
        self.enabled = enabled
        self.disabledReason = disabledReason
        self.origin = origin
        self.createdAt = createdAt
    }

    public func wants(_ type: WebhookEventType) -> Bool {
        enabled && format.supports(type) && (events.isEmpty || events.contains(type))
    }

    /// The secrets that sign at `now`: the current one, and the previous one until it expires.
    public func signingSecrets(now: Int64) -> [String] {
        if let p = previousSecret, let until = previousSecretExpiresAt, until > now { return [secret, p] }
        return [secret]
    }
}

/// One fact for the app server, with the id every attempt and replay of it carries.
public struct WebhookMessage: Equatable, Sendable {
    public var id: String
    public var app: String
    public var type: WebhookEventType
    public var time: Int64
    public var roomId: String
    public var userIds: [String]
    /// RongCloud status-sync `status` (0 API, 1 auto-exit, 2 blocked, 3 auto-destroy).
    public var cause: Int
    public var details: [String: String]
    /// Order of creation (per server).
    public var sequence: Int64

    public init(id: String, app: String, type: WebhookEventType, time: Int64, roomId: String, userIds: [String], cause: Int,
                details: [String: String], sequence: Int64) {
        self.id = id
        self.app = app
        self.type = type
        self.time = time
        self.roomId = roomId
        self.userIds = userIds
        self.cause = cause
        self.details = details
        self.sequence = sequence
    }
}

/// A delivery's state (WH-4).
public enum DeliveryStatus: String, Equatable, Sendable, CaseIterable {
    case pending
    case delivered
    /// Retries exhausted, 410 Gone, or the endpoint was disabled: the dead-letter list.
    case dead
}

/// One HTTP attempt of one delivery.
public struct DeliveryAttempt: Equatable, Sendable {
    public var attempt: Int
    public var time: Int64
    /// The HTTP status, 0 when there was no response.
    public var status: Int
    public var error: String
    public var durationMs: Int64
}

public struct DeliveryRecord: Equatable, Sendable {
    public var messageId: String
    public var endpointId: String
    public var type: WebhookEventType
    public var messageTime: Int64
    public var status: DeliveryStatus
    public var attempts: Int
    public var nextAttemptAt: Int64
    public var lastStatus: Int
    public var lastError: String
    public var updatedAt: Int64
    public var history: [DeliveryAttempt]
}
