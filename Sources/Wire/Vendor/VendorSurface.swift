import Chat

/// The vendors' own server APIs on the wire (SPEC §8, VC-1..VC-4). Each surface is a table of
/// endpoints that translate a call into the same domain command or query the native API uses
/// (nothing about rooms, audiences, limits or durability is reimplemented per vendor) and render
/// the domain's reply or refusal in that vendor's shape and codes. Pure: no I/O, clocks or
/// randomness; the gateway passes in the time, the public URLs and a room-number source.

/// What one vendor call asks of the domain, and how its success is answered.
public struct VendorCall: Sendable {
    public enum Work: Sendable {
        case command(Command)
        /// Applied in order, each after the one before succeeded; a refusal whose code is in
        /// `tolerating` counts as success (RongCloud's old `create.json` re-creating a room).
        /// Every command is built, and so every field checked, before the first is applied.
        case commands([Command], tolerating: Set<ErrorCode>)
        case query(Query)
        /// The command, then (once it succeeded) the query, whose reply is rendered.
        case commandThenQuery(Command, Query)
    }
    public var work: Work
    /// This call's names for fields the domain names otherwise (a refusal names the parameter
    /// the caller sent: `roomIds` is RongCloud's `toChatroomId` on a publish); the vendor's
    /// usual names (`Vendor.wireName`) for the rest.
    public var fields: [String: String] = [:]
    /// Writes the success payload's fields into the surface's envelope (after `code`, or inside
    /// Nexconn's `result`). `Reply.done` after `commands`.
    public var render: @Sendable (Reply, inout JSONWriter) -> Void

    public init(_ work: Work, render: @escaping @Sendable (Reply, inout JSONWriter) -> Void = { _, _ in }) {
        self.work = work
        self.render = render
    }

    public static func command(_ c: Command, render: @escaping @Sendable (Reply, inout JSONWriter) -> Void = { _, _ in }) -> VendorResolution {
        .call(VendorCall(.command(c), render: render))
    }

    public static func query(_ q: Query, render: @escaping @Sendable (Reply, inout JSONWriter) -> Void) -> VendorResolution {
        .call(VendorCall(.query(q), render: render))
    }

    /// MO-8: the call as `vendor` made it: its moderation commands name the surface in the audit
    /// trail (`Command.via`).
    public func via(_ vendor: Vendor) -> VendorCall {
        var call = self
        switch work {
        case .command(let c): call.work = .command(c.via(vendor.auditSurface))
        case .commands(let list, let tolerating): call.work = .commands(list.map { $0.via(vendor.auditSurface) }, tolerating: tolerating)
        case .commandThenQuery(let c, let q): call.work = .commandThenQuery(c.via(vendor.auditSurface), q)
        case .query: break
        }
        return call
    }
}

public enum VendorResolution: Sendable {
    case call(VendorCall)
    /// The vendor has this endpoint and Roomcast cannot honour it: the vendor's own
    /// "service not enabled" answer, with a message that says so. It never pretends to succeed.
    case unsupported(String)
}

/// What an endpoint is given besides its parameters.
public struct VendorInput: Sendable {
    public var app: String
    public var params: VendorParams
    /// This deployment's public WebSocket URLs (the NIM-3 lookup's answer).
    public var publicURLs: [String]
    /// A fresh room number for rooms a NIM `create` makes (injected randomness).
    public var newRoomNumber: @Sendable () -> Int64

    public init(app: String, params: VendorParams, publicURLs: [String], newRoomNumber: @escaping @Sendable () -> Int64) {
        self.app = app
        self.params = params
        self.publicURLs = publicURLs
        self.newRoomNumber = newRoomNumber
    }

    var caller: Caller { .server(app) }
}

public struct VendorEndpoint: Sendable {
    public let path: String
    /// False for an endpoint that always answers "not supported" (listed apart in errors.md).
    public let supported: Bool
    /// Why an unsupported endpoint is not served (errors.md lists it); empty when served.
    public let why: String
    public let resolve: @Sendable (VendorInput) throws(ChatError) -> VendorResolution

    public init(_ path: String, _ resolve: @escaping @Sendable (VendorInput) throws(ChatError) -> VendorResolution) {
        self.path = path
        self.supported = true
        self.why = ""
        self.resolve = resolve
    }

    /// An endpoint the vendor has and Roomcast does not honour.
    public static func unsupported(_ path: String, _ what: String) -> VendorEndpoint {
        VendorEndpoint(path: path, what: what)
    }

    private init(path: String, what: String) {
        self.path = path
        self.supported = false
        self.why = what
        self.resolve = { _ throws(ChatError) in .unsupported("\(path): \(what) — not supported by Roomcast") }
    }
}

/// An answer in a vendor's shape.
public struct VendorAnswer: Equatable, Sendable {
    public var status: Int
    public var body: [UInt8]
    /// Seconds to wait before retrying (read-only node).
    public var retryAfter: Int?

    public init(status: Int, body: [UInt8], retryAfter: Int? = nil) {
        self.status = status
        self.body = body
        self.retryAfter = retryAfter
    }
}

/// The three surfaces.
public enum Vendor: String, Sendable, CaseIterable {
    /// RongCloud v1: `POST /chatroom/*.json`, `/ultragroup/*.json`, `/conversation/*.json`.
    case rongCloud
    /// Nexconn v4: `POST /v4/open-channel/*`, `/v4/community-channel/*`, `/v4/channel/*`, `/v4/channel-type/*`.
    case nexconn
    /// NIM v1: `POST /nimserver/chatroom/*.action`.
    case nim

    /// MO-8: how the audit trail names this surface.
    public var auditSurface: AuditSurface {
        switch self {
        case .rongCloud: return .rongCloud
        case .nexconn: return .nexconn
        case .nim: return .nim
        }
    }

    public var endpoints: [VendorEndpoint] {
        switch self {
        case .rongCloud: return RongCloudV1.endpoints
        case .nexconn: return NexconnV4.endpoints
        case .nim: return NIMV1.endpoints
        }
    }

    /// PX-2: the headers a call carries its idempotency key in; Nexconn's SDK sends `X-Request-ID`.
    public var idempotencyKeyHeaders: [IdempotencyKeyHeader] {
        self == .nexconn ? [.idempotencyKey, .requestID] : [.idempotencyKey]
    }

    /// Reads the call's parameters as this vendor's SDKs send them. RongCloud's server SDKs send
    /// a few calls (MO-4 `usergroup/add.json`) as a JSON object: a RongCloud body that starts with
    /// `{` (which no form body does) is read as JSON, whatever `Content-Type` it declares (clients
    /// send form bodies declared as JSON too).
    public func params(_ body: [UInt8]) throws(ChatError) -> VendorParams {
        switch self {
        case .nim: return .form(body)
        // MO-3: RongCloud's ultra-group publish sends a JSON body; a form body never starts with `{`.
        case .rongCloud: return body.first(where: { $0 != 0x20 && $0 != 0x0A && $0 != 0x0D && $0 != 0x09 }) == 0x7B ? try .json(body) : .form(body)
        case .nexconn: return try .json(body)
        }
    }

    // MARK: Answers

    public func success(_ reply: Reply, _ render: (Reply, inout JSONWriter) -> Void) -> VendorAnswer {
        var w = JSONWriter()
        w.beginObject()
        switch self {
        case .rongCloud, .nim:
            w.field("code", 200)
            render(reply, &w)
        case .nexconn:
            w.field("code", 0)
            var inner = JSONWriter()
            inner.beginObject()
            render(reply, &inner)
            inner.endObject()
            if inner.bytes.count > 2 {
                w.key("result")
                w.raw(inner.bytes)
            }
        }
        w.endObject()
        return VendorAnswer(status: 200, body: w.bytes)
    }

    /// A domain refusal in this vendor's codes (the table `VendorCodes` publishes). The refusals a
    /// cluster's log makes of a replayed nonce or a reused idempotency key are spelled as the
    /// single node spells them: a signature refusal, and the vendor's parameter error or
    /// "already exists".
    /// `asSent`: the error names a parameter as the caller sent it (refused while the call was
    /// read), not a domain field to translate.
    public func failure(_ e: ChatError, fields: [String: String] = [:], asSent: Bool = false) -> VendorAnswer {
        switch e.code {
        case .nonceReused: return authFailure(.nonceReused, message: e.message, field: e.field)
        case .idempotencyKeyReused: return failure(ChatError(.invalidParameter, e.message, field: e.field), fields: fields, asSent: asSent)
        case .idempotencyKeyInFlight: return failure(ChatError(.alreadyExists, e.message, field: e.field), fields: fields, asSent: asSent)
        default: break
        }
        let code = VendorCodes.code(self, e.code)
        let retry = ErrorTable.retryAfter(e.code)
        return answer(code: code, status: self == .nim ? 200 : e.code.httpStatus, message: e.message, field: e.field.map { asSent ? $0 : fields[$0] ?? wireName($0) }, retryAfter: retry)
    }

    /// The name this vendor's wire gives a field the domain names (a refusal names the field
    /// the caller sent).
    public func wireName(_ domainField: String) -> String {
        let names: [String: String]
        switch self {
        case .rongCloud:
            names = ["roomId": "chatroomId", "userIds": "userId", "minutes": "minute", "muteAllowlist": "whiteUserIds", "attributes": "entryInfo",
                     "attributesOwner": "entryOwnerId", "channelId": "busChannel", "notificationLevel": "unpushLevel", "destroy.minutes": "destroyTime",
                     "lowPriorityMessageTypes": "objectName", "protectedMessageTypes": "objectnames",
                     "sender": "fromUserId", "messageId": "messageUID", "notifyExt": "extra", "replacement": "replaceWord", "name": "groupName"]
        case .nexconn:
            names = ["roomId": "channelId", "userIds": "participantIds", "minutes": "durationMinutes", "muteAllowlist": "allowedSendersList",
                     "attributes": "metadata", "attributesOwner": "metadataOwnerId", "groupId": "channelId", "channelId": "subchannelId",
                     "notificationLevel": "noDisturbLevel", "destroy.minutes": "ttlMinutes", "keys": "metadataKeys", "key": "metadata", "value": "metadata",
                     "lowPriorityMessageTypes": "messageTypes", "protectedMessageTypes": "messageTypes",
                     "sender": "fromUserId", "sentTime": "sentAt", "notifyExt": "extra"]
        case .nim:
            names = ["roomId": "roomid", "userIds": "accids", "userId": "target", "seconds": "muteDuration", "broadcastUrl": "broadcasturl",
                     "queueModificationLevel": "queuelevel", "queueLimit": "sizeLimit", "destroy.minutes": "delaySeconds", "destroy.seconds": "delaySeconds",
                     "sender": "fromAcc", "messageId": "msgId", "sentTime": "msgTimetag"]
        }
        if let n = names[domainField] { return n }
        if domainField.hasPrefix("attributes.") { return (names["attributes"] ?? "attributes") + domainField.dropFirst("attributes".count) }
        return domainField
    }

    /// A refused signature, app key, timestamp or nonce.
    public func authFailure(_ code: ErrorCode, message: String, field: String?) -> VendorAnswer {
        let c = VendorCodes.auth(self, code)
        return answer(code: c.code, status: c.status, message: message, field: field, retryAfter: nil)
    }

    /// An endpoint the vendor has and Roomcast does not honour.
    public func unsupported(_ message: String) -> VendorAnswer {
        let c = VendorCodes.unsupported(self)
        return answer(code: c.code, status: c.status, message: message, field: nil, retryAfter: nil)
    }

    func answer(code: Int, status: Int, message: String, field: String?, retryAfter: Int?) -> VendorAnswer {
        let body = JSONWriter.object { w in
            w.field("code", code)
            // RongCloud and Nexconn name the message `errorMessage`; NIM names it `desc`.
            w.field(self == .nim ? "desc" : "errorMessage", message)
            w.fieldIfPresent("field", field)
        }
        return VendorAnswer(status: status, body: body, retryAfter: retryAfter)
    }
}

/// How each surface spells Roomcast's refusals (SPEC §13: where a vendor defines a code for the
/// same situation, it is used). errors.md prints this table.
public enum VendorCodes {
    /// RongCloud and Nexconn share RongCloud's codes (1002, 23406, 23408, 23409, 23410, 24406);
    /// the domain's codes are already theirs where they define one, and Roomcast's own otherwise.
    /// NIM answers its status codes (414, 404, 403, 13002, 13003, 13004, 417, 419, 500).
    public static func code(_ vendor: Vendor, _ code: ErrorCode) -> Int {
        switch vendor {
        case .rongCloud, .nexconn: return code == .rateLimited || code == .roomBusy ? 1008 : code.rawValue
        // Every domain refusal has its NIM code; a gateway-only one answers as its HTTP status.
        case .nim: return code.nimCode ?? code.httpStatus
        }
    }

    /// Signature refusals: RongCloud and Nexconn 1001 (unknown app key) or 1004 (HTTP 401);
    /// NIM 414 (431 for a replayed nonce, NIM's "repeated HTTP request"), HTTP 200.
    public static func auth(_ vendor: Vendor, _ code: ErrorCode) -> (code: Int, status: Int) {
        switch vendor {
        case .rongCloud, .nexconn: return (code == .unknownApp || code == .appDisabled ? 1001 : 1004, 401)
        case .nim: return (code == .nonceReused ? 431 : 414, 200)
        }
    }

    /// "Service not enabled": RongCloud/Nexconn 1009 (HTTP 430); NIM 403 ("no permission").
    public static func unsupported(_ vendor: Vendor) -> (code: Int, status: Int) {
        switch vendor {
        case .rongCloud, .nexconn: return (1009, 430)
        case .nim: return (403, 200)
        }
    }

    /// Every code a surface can answer with its HTTP status, for the published table.
    public static func rows(_ vendor: Vendor) -> [(code: Int, status: Int, meaning: String)] {
        var rows: [(code: Int, status: Int, meaning: String)] = []
        var seen = Set<Int>()
        func add(_ code: Int, _ status: Int, _ meaning: String) {
            guard seen.insert(code).inserted else { return }
            rows.append((code, status, meaning))
        }
        add(vendor == .nexconn ? 0 : 200, 200, "success")
        let authMeanings: [(ErrorCode, String)] = vendor == .nim
            ? [(.badSignature, "parameter error, or an unknown app key, a missing, stale or wrong CheckSum"), (.nonceReused, "nonce already used (repeated request)")]
            : [(.unknownApp, "unknown app key"), (.badSignature, "signature missing or wrong, stale timestamp or reused nonce")]
        for (g, meaning) in authMeanings {
            let c = auth(vendor, g)
            add(c.code, c.status, meaning)
        }
        // A replayed nonce and a reused key (also when a cluster's log refuses them) are answered
        // with the rows above and the vendor's parameter error or "already exists".
        for c in ErrorCode.domainCodes where ![.nonceReused, .idempotencyKeyReused, .idempotencyKeyInFlight].contains(c) {
            add(code(vendor, c), vendor == .nim ? 200 : c.httpStatus, c.summary)
        }
        let u = unsupported(vendor)
        add(u.code, u.status, "not supported by Roomcast (the vendor's \"service not enabled\")")
        return rows
    }

    /// The vendor surfaces' codes and endpoints, for `openapi/errors.md`.
    public static var markdown: String {
        var out = """
            ## Vendor surfaces (SPEC §8)

            Beside `/v1`, Roomcast answers the vendors' own server APIs at their paths, signed as each vendor signs
            (RongCloud `App-Key`/`Nonce`/`Timestamp`/`Signature`, also `RC-` prefixed and lowercase, seconds or
            milliseconds; NIM `AppKey`/`Nonce`/`CurTime`/`CheckSum`). Each call becomes the same domain command the
            native API sends, so events, limits and durability do not depend on the surface (VC-4). A refusal names
            the field with the vendor's own parameter name in `field`.

            - **RongCloud v1** (`POST`, form body): success `{"code":200,…}`; refusals `{"code","errorMessage","field"}`.
            - **Nexconn v4** (`POST`, JSON body): success `{"code":0,"result":{…}}`; refusals `{"code","errorMessage","field"}`.
            - **NIM v1** (`POST`, form body, lists as JSON-array strings): success `{"code":200,<key>:…}`; refusals are
              HTTP 200 `{"code","desc","field"}` (NIM's SDKs treat any other status as a transport failure). Rooms are
              reached by numeric id: the canonical decimal form of a positive 64-bit number (`create` picks one below
              2^53); other Roomcast ids are refused with 414. `requestAddr` answers `addr` as `host:port` items (NIM's
              shape) and `urls` with the WebSocket URLs a Roomcast client connects to (both from `--public-url`).
            - Endpoints a vendor has and Roomcast does not honour answer the vendor's "service not enabled" code
              (RongCloud and Nexconn 1009 with HTTP 430, NIM 403) with a message that says so.
            - Room QoS (SPEC §14, QS-1, QS-4, QS-6): RongCloud's low-priority message types
              (`/chatroom/message/priority/*`, `objectName`, \(RongCloudFamily.lowPriorityTypesPerCall.lowerBound)–\(RongCloudFamily.lowPriorityTypesPerCall.upperBound) per call; query answers `objectNames`) and message-type
              allowlist (`/chatroom/whitelist/*`, `objectnames`, \(RongCloudFamily.protectedTypesPerCall.lowerBound)–\(RongCloudFamily.protectedTypesPerCall.upperBound) per call; query answers `whitlistMsgType`,
              RongCloud's spelling), and Nexconn's `low-priority-message-type-list` and `priority-message-type-list`
              (`messageTypes`), are the app's low-priority and protected types (each list holds up to
              \(SettingsLimits.maxListEntries) types; RongCloud documents 20). RongCloud's chatroom user allowlist
              (`/chatroom/user/whitelist/*`, `chatroomId` + `userId`; query answers `users`) and Nexconn's priority senders
              (`channelId` + `participantIds`, at `/priority-sender-list/*` as its SDKs call it and at
              `/participant/priority-sender-list/*` as its endpoint list publishes it; query answers `participantIds`) are
              a room's protected senders: at most \(Limits.maxProtectedSendersPerRoom); a call that would pass it is refused with 1002 naming
              `userId` / `participantIds` and nothing changes. `/chatroom/message/stopDistribution.json` and
              `resumeDistribution.json` (`chatroomId`) stop and resume a room's fan-out (its messages are still
              accepted, stored and sent to webhooks). Nexconn's `/v4/open-channel/message/send` reads `priority`
              (0 standard, 1 allowlisted and 2 high are high, 3 low) and `messageType` (the type lists apply). An
              unknown room is 23410 on both. Roomcast's NIM surface has no room message send, so NIM's
              `highPriority` for messages has nowhere to arrive (native `priority` is the equivalent).


            """
        for v in Vendor.allCases {
            out += "### \(v.title)\n\n| Code | HTTP | Meaning |\n|---|---|---|\n"
            for r in rows(v) { out += "| \(r.code) | \(r.status) | \(r.meaning) |\n" }
            out += "\nEndpoints (`POST`):\n\n"
            out += v.endpoints.filter(\.supported).map { "`\($0.path)`" }.joined(separator: ", ") + "\n\n"
            let unserved = v.endpoints.filter { !$0.supported }
            if unserved.isEmpty {
                out += "Not supported: none (every endpoint above is served).\n\n"
            } else {
                out += "Not supported (answered with \(unsupported(v).code)), and why:\n\n"
                var reasons: [String] = []
                var paths: [String: [String]] = [:]
                for e in unserved {
                    if paths[e.why] == nil { reasons.append(e.why) }
                    paths[e.why, default: []].append("`\(e.path)`")
                }
                for why in reasons { out += "- " + paths[why]!.joined(separator: ", ") + ": " + why + ".\n" }
                out += "\n"
            }
        }
        return out
    }
}

extension Vendor {
    public var title: String {
        switch self {
        case .rongCloud: return "RongCloud v1"
        case .nexconn: return "Nexconn v4"
        case .nim: return "NIM v1"
        }
    }
}
