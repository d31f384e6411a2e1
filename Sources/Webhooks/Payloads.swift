import Chat
import Foundation
import HTTP1

/// The request one delivery attempt sends: body, headers and the query to append to the URL.
public struct RenderedRequest: Equatable, Sendable {
    public var body: [UInt8]
    public var headers: [(String, String)]
    public var query: String

    public static func == (a: RenderedRequest, b: RenderedRequest) -> Bool {
        a.body == b.body && a.query == b.query && a.headers.map { "\($0.0): \($0.1)" } == b.headers.map { "\($0.0): \($0.1)" }
    }
}

public enum WebhookRenderer {
    /// Standard Webhooks body: `{"type", "timestamp" (RFC 3339), "data": {...}}`.
    struct StandardBody: Encodable {
        struct Data: Encodable {
            var appKey: String
            var roomId: String
            var userIds: [String]
            var cause: Int
            var time: Int64
            var details: [String: String]
        }
        var type: String
        var timestamp: String
        var data: Data
    }

    /// RongCloud status sync element.
    struct RongCloudEvent: Encodable {
        var chatRoomId: String
        var userIds: [String]
        var status: Int
        var type: Int
        var time: Int64
    }

    /// RongCloud user online status sync element (PX-3): status "0" online, "1" offline; `os`
    /// carries the device the client connected as.
    struct RongCloudUserStatus: Encodable {
        var userid: String
        var status: String
        var os: String
        var time: Int64
    }

    /// NIM copy body.
    struct NIMBody: Encodable {
        var eventType: String
        var msgId: String
        var appKey: String
        var roomId: String
        var userIds: [String]
        var time: Int64
        var details: [String: String]
    }

    static func encode<T: Encodable>(_ v: T) -> [UInt8] {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? e.encode(v)) ?? Data("{}".utf8))
    }

    /// `2026-11-21T10:00:00.123Z`.
    static func rfc3339(_ ms: Int64) -> String {
        let days = ms >= 0 ? ms / 86_400_000 : (ms - 86_399_999) / 86_400_000
        let inDay = ms - days * 86_400_000
        let (y, mo, d) = civilFromDays(days)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let millis = inDay % 1000
        let frac = millis < 10 ? "00\(millis)" : (millis < 100 ? "0\(millis)" : "\(millis)")
        return "\(y)-\(two(Int64(mo)))-\(two(Int64(d)))T\(two(inDay / 3_600_000)):\(two(inDay / 60_000 % 60)):\(two(inDay / 1000 % 60)).\(frac)Z"
    }

    /// RongCloud status-sync `type`: 0 create, 1 join, 2 quit, 3 destroy.
    static func rongCloudType(_ t: WebhookEventType) -> Int? {
        switch t {
        case .roomCreated: return 0
        case .memberJoined: return 1
        case .memberLeft, .memberKicked, .memberBlocked: return 2
        case .roomDestroyed: return 3
        default: return nil
        }
    }

    /// The attempt's request; nil when the format cannot express the message's type.
    /// `now` (ms) stamps the signature; `nonce` is used by the RongCloud format.
    public static func render(_ m: WebhookMessage, for e: WebhookEndpoint, appSecret: String, now: Int64, nonce: String) -> RenderedRequest? {
        guard e.format.supports(m.type) else { return nil }
        switch e.format {
        case .standard:
            let body = encode(StandardBody(type: m.type.rawValue, timestamp: rfc3339(m.time),
                                           data: .init(appKey: m.app, roomId: m.roomId, userIds: m.userIds, cause: m.cause, time: m.time,
                                                       details: m.details)))
            let seconds = now / 1000
            return RenderedRequest(body: body, headers: [
                ("Content-Type", "application/json"), ("webhook-id", m.id), ("webhook-timestamp", String(seconds)),
                ("webhook-signature", StandardWebhooks.signature(id: m.id, timestamp: seconds, body: body, secrets: e.signingSecrets(now: now))),
            ], query: "")
        case .rongcloud:
            let body: [UInt8]
            if m.type == .userOnline || m.type == .userOffline {
                body = encode(m.userIds.map {
                    RongCloudUserStatus(userid: $0, status: m.type == .userOnline ? "0" : "1", os: m.details["device"] ?? "", time: m.time)
                })
            } else {
                guard let type = rongCloudType(m.type) else { return nil }
                body = encode([RongCloudEvent(chatRoomId: m.roomId, userIds: m.userIds, status: m.cause, type: type, time: m.time)])
            }
            return RenderedRequest(body: body, headers: [("Content-Type", "application/json"), ("X-Roomcast-Message-Id", m.id)],
                                   query: RongCloudCallback.query(appKey: m.app, appSecret: appSecret, nonce: nonce, timestamp: now))
        case .nim:
            let body = encode(NIMBody(eventType: m.type.rawValue, msgId: m.id, appKey: m.app, roomId: m.roomId, userIds: m.userIds, time: m.time,
                                      details: m.details))
            return RenderedRequest(body: body, headers: [("Content-Type", "application/json")]
                                   + NIMCallback.headers(appKey: m.app, appSecret: appSecret, body: body, curTime: now), query: "")
        }
    }
}
