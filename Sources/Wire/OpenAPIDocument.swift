import Chat
import Foundation

/// The OpenAPI 3.1 description of the REST API, built here (one source of truth), served at
/// `/openapi.json`, and written to `openapi/roomcast.openapi.json` by `roomcast openapi`
/// (a test keeps the file identical to this). Its paths come from the tables the gateway routes
/// by: the native route table (`NativeRoute.all`) and the vendors' endpoint tables.
public enum OpenAPIDocument {
    public static let json: String = {
        let data = try! JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }()

    // MARK: Schema helpers

    static func ref(_ name: String) -> [String: Any] { ["$ref": "#/components/schemas/\(name)"] }
    static func str(_ description: String = "", maxLength: Int? = nil) -> [String: Any] {
        var s: [String: Any] = ["type": "string"]
        if !description.isEmpty { s["description"] = description }
        if let maxLength { s["maxLength"] = maxLength }
        return s
    }
    static func int(_ description: String = "", minimum: Int? = nil, maximum: Int? = nil) -> [String: Any] {
        var s: [String: Any] = ["type": "integer"]
        if !description.isEmpty { s["description"] = description }
        if let minimum { s["minimum"] = minimum }
        if let maximum { s["maximum"] = maximum }
        return s
    }
    static func bool(_ description: String = "") -> [String: Any] {
        description.isEmpty ? ["type": "boolean"] : ["type": "boolean", "description": description]
    }
    static func arr(_ items: [String: Any], maxItems: Int? = nil) -> [String: Any] {
        var s: [String: Any] = ["type": "array", "items": items]
        if let maxItems { s["maxItems"] = maxItems }
        return s
    }
    static func obj(_ props: [String: [String: Any]], required: [String] = [], description: String = "") -> [String: Any] {
        var s: [String: Any] = ["type": "object", "properties": props]
        if !required.isEmpty { s["required"] = required }
        if !description.isEmpty { s["description"] = description }
        return s
    }
    static var stringMap: [String: Any] { ["type": "object", "additionalProperties": ["type": "string"]] }
    /// Room, user and app ids: 1–64 bytes of visible ASCII except `/ ? # % " \` (Validate.identifier).
    static var id: [String: Any] {
        ["type": "string", "minLength": 1, "maxLength": Limits.maxRoomIdBytes, "pattern": #"^[!$&'()*+,\-.0-9:;<=>@A-Z\[\]^_`a-z{|}~]+$"#]
    }
    /// A comma-separated list of ids in a query parameter.
    static var idList: [String: Any] {
        let one = #"[!$&'()*+\-.0-9:;<=>@A-Z\[\]^_`a-z{|}~]{1,64}"#
        return ["type": "string", "pattern": "^\(one)(,\(one))*$"]
    }
    /// A comma-separated list of attribute keys in a query parameter (Validate.attributeKey).
    static var attributeKeyList: [String: Any] {
        let one = "[0-9A-Za-z+=_-]{1,128}"
        return ["type": "string", "pattern": "^\(one)(,\(one))*$"]
    }
    static var userIds: [String: Any] { ["type": "array", "items": id, "minItems": 1, "maxItems": Limits.maxUsersPerCall, "uniqueItems": true] }

    // MARK: Operation helpers

    static func param(_ name: String, _ location: String = "path", _ schema: [String: Any] = str(), required: Bool? = nil,
                      description: String = "") -> [String: Any] {
        var p: [String: Any] = ["name": name, "in": location, "required": required ?? (location == "path"), "schema": schema]
        if !description.isEmpty { p["description"] = description }
        return p
    }

    static func parameter(_ p: OperationDoc.Parameter) -> [String: Any] {
        param(p.name, p.location.rawValue, schema(p.schema), required: p.required, description: p.description)
    }

    static func schema(_ s: OperationDoc.Schema) -> [String: Any] {
        switch s {
        case .id: return id
        case .idList: return idList
        case .attributeKeyList: return attributeKeyList
        case .string(let description, let maxLength): return str(description, maxLength: maxLength)
        case .integer(let description, let minimum, let maximum): return int(description, minimum: minimum, maximum: maximum)
        case .boolean(let description): return bool(description)
        case .oneOf(let values): return ["type": "string", "enum": values]
        case .oneOfIntegers(let values): return ["type": "integer", "enum": values]
        case .pattern(let pattern): return ["type": "string", "pattern": pattern]
        }
    }

    /// A native operation: signed by any of the three schemes, answered with its schema or a
    /// refusal from the error table.
    static func operation(_ d: OperationDoc) -> [String: Any] {
        var o: [String: Any] = [
            "summary": d.summary,
            "description": "SPEC: " + d.spec.joined(separator: ", "),
            "tags": [d.tag.rawValue],
            "security": [["RongCloudSignature": []], ["NIMCheckSum": []], ["RoomcastHMAC": []]],
            "responses": responses(d.ok),
        ]
        if !d.parameters.isEmpty { o["parameters"] = d.parameters.map(parameter) }
        if let operationId = d.operationId { o["operationId"] = operationId }
        if let links = d.links, var responses = o["responses"] as? [String: Any], var okResponse = responses[String(d.ok.status)] as? [String: Any] {
            okResponse["links"] = self.links(links)
            responses[String(d.ok.status)] = okResponse
            o["responses"] = responses
        }
        if let body = d.body {
            o["requestBody"] = ["required": true, "content": ["application/json": ["schema": ref(body)]]]
        }
        return o
    }

    static func responses(_ ok: (status: Int, schema: String)) -> [String: Any] {
        let error: [String: Any] = ["description": "Refused; see the error table", "content": ["application/json": ["schema": ref("Error")]]]
        return [
            String(ok.status): ["description": "Done", "content": ["application/json": ["schema": ref(ok.schema)]]],
            "400": error, "401": error, "403": error, "404": error, "409": error, "413": error, "422": error, "429": error,
            "default": error,
        ]
    }

    /// Stateful testing follows these from a created room or group to the operations on it; each
    /// link is named after its target's operation id.
    static func links(_ l: OperationDoc.Links) -> [String: Any] {
        var out: [String: Any] = [:]
        for target in l.targets {
            guard let operationId = target.doc.operationId else { preconditionFailure("a link's target \(target.path) has no operation id") }
            out[operationId.prefix(1).uppercased() + operationId.dropFirst()] = ["operationId": operationId, "parameters": [l.parameter: l.value]]
        }
        return out
    }

    /// The native API's paths, from the route table (`NativeRoute.all`): the routes the gateway serves.
    static var nativePaths: [String: Any] {
        var out: [String: [String: Any]] = [:]
        for route in NativeRoute.all {
            out[route.path, default: [:]][route.method.rawValue.lowercased()] = operation(route.doc)
        }
        return out
    }

    // MARK: The document

    static var document: [String: Any] {
        [
            "openapi": "3.1.0",
            "info": [
                "title": "Roomcast REST API",
                "version": "1.0.0",
                "description": """
                    Self-hosted chat-room gateway. Every /v1 call is signed (see securitySchemes). Errors are \
                    {"code", "message", "field"} with the codes of the error table (openapi/errors.md). The WebSocket \
                    protocol is described in openapi/websocket.md and served at /websocket.json.
                    """,
            ],
            "servers": [["url": "http://127.0.0.1:8080"]],
            "paths": withIdempotencyKeys(nativePaths, NativeRoute.idempotencyKeyHeaders).merging(paths) { a, _ in a }.merging(vendorPaths) { a, _ in a }
                .merging(adminPaths) { a, _ in a },
            "components": ["schemas": allSchemas.merging(vendorSchemas) { a, _ in a }.merging(adminSchemas) { a, _ in a },
                           "securitySchemes": securitySchemes.merging(operatorSecurityScheme) { a, _ in a }, "responses": vendorResponses,
                           "requestBodies": vendorRequestBodies, "parameters": idempotencyParameters],
        ]
    }

    /// PX-2: every state-changing operation takes an `Idempotency-Key` (Nexconn's paths also
    /// `X-Request-ID`, which its SDK sends).
    static var idempotencyParameters: [String: Any] { [
        "IdempotencyKey": ["name": IdempotencyKeyHeader.idempotencyKey.rawValue, "in": "header", "required": false,
                           "description": "A retry with the same key and request gets the first answer again for 24 h (Idempotent-Replayed: true), on a cluster from any node; another request with it is refused with 422 (42200); 409 (40900) while the first is being answered; on a cluster, 409 (40903) when the first made its change and its answer was lost with the node that made it",
                           "schema": ["type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"]],
        "RequestID": ["name": IdempotencyKeyHeader.requestID.rawValue, "in": "header", "required": false, "description": "Nexconn's idempotency key (as Idempotency-Key)",
                      "schema": ["type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[!-~]+$"]],
    ] }

    static func idempotencyParameter(_ header: IdempotencyKeyHeader) -> [String: Any] {
        switch header {
        case .idempotencyKey: return ["$ref": "#/components/parameters/IdempotencyKey"]
        case .requestID: return ["$ref": "#/components/parameters/RequestID"]
        }
    }

    /// The header parameters of a state-changing operation, as the gateway reads them (`headers`:
    /// the surface's, in the order it looks for them).
    static func withIdempotencyKeys(_ paths: [String: Any], _ headers: [IdempotencyKeyHeader]) -> [String: Any] {
        var out = paths
        for (path, value) in paths {
            guard var item = value as? [String: Any] else { continue }
            for method in ["post", "put", "patch", "delete"] {
                guard var o = item[method] as? [String: Any] else { continue }
                var params = o["parameters"] as? [Any] ?? []
                params.append(contentsOf: headers.map(idempotencyParameter))
                o["parameters"] = params
                item[method] = o
            }
            out[path] = item
        }
        return out
    }

    static var securitySchemes: [String: Any] {
        [
            "RongCloudSignature": [
                "type": "apiKey", "in": "header", "name": "App-Key",
                "description": "With headers Nonce, Timestamp (seconds or milliseconds, within ±300 s) and Signature = lowercase hex SHA1(appSecret + nonce + timestamp). RC- prefixed names are accepted. A nonce may be used once (on a cluster, once on any node).",
            ],
            "NIMCheckSum": [
                "type": "apiKey", "in": "header", "name": "AppKey",
                "description": "With headers Nonce, CurTime and CheckSum = hex SHA1(appSecret + nonce + curTime).",
            ],
            "ClientToken": [
                "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                "description": "TR-1, TR-2: a client token (POST /v1/users/{userId}/tokens), as the WebSocket's connect takes it; or the token query parameter.",
            ],
            "RoomcastHMAC": [
                "type": "apiKey", "in": "header", "name": "X-Roomcast-Key",
                "description": "Recommended. With X-Roomcast-Timestamp, X-Roomcast-Nonce and X-Roomcast-Signature = hex HMAC-SHA256(appSecret, METHOD \\n target \\n timestamp \\n nonce \\n hex SHA256(body)).",
            ],
        ]
    }

    /// The routes that are not signed: health, metrics and the two documents (the gateway's
    /// assembly registers them, not its signed route groups).
    static var paths: [String: Any] {
        [
            "/healthz": ["get": ["summary": "Liveness", "tags": ["Health"], "security": [], "description": "SPEC: BX-2",
                                 "responses": ["200": ["description": "Alive", "content": ["application/json": ["schema": ref("Status")]]]]]],
            "/readyz": ["get": ["summary": "Readiness", "tags": ["Health"], "security": [], "description": "SPEC: BX-2",
                                "responses": ["200": ["description": "Ready", "content": ["application/json": ["schema": ref("Status")]]],
                                              "503": ["description": "Starting or draining", "content": ["application/json": ["schema": ref("Status")]]]]]],
            "/openapi.json": ["get": ["summary": "This document", "tags": ["Health"], "security": [],
                                      "responses": ["200": ["description": "OpenAPI 3.1", "content": ["application/json": ["schema": ["type": "object"]]]]]]],
            "/websocket.json": ["get": ["summary": "The WebSocket protocol (JSON Schema 2020-12)", "tags": ["Health"], "security": [],
                                        "responses": ["200": ["description": "JSON Schema", "content": ["application/json": ["schema": ["type": "object"]]]]]]],
            "/metrics": ["get": ["summary": "Prometheus metrics: connections, requests, store commits, webhook attempts, outcomes, latency and queue depth",
                                 "tags": ["Health"], "security": [], "description": "SPEC: BX-2, WH-4",
                                 "responses": ["200": ["description": "Prometheus text format 0.0.4",
                                                       "content": ["text/plain": ["schema": ["type": "string"]]]]]]],
        ].merging(clientPaths) { a, _ in a }
    }

    /// TR-1, TR-2: the client protocol over plain HTTP (openapi/sse.md), authenticated by the
    /// client token.
    static var clientPaths: [String: Any] {
        let error: [String: Any] = ["description": "Refused; see the error table", "content": ["application/json": ["schema": ref("Error")]]]
        // What the HTTP layer refuses before any route (414 a request line too long, 431, ...).
        let refusal: [String: Any] = ["$ref": "#/components/responses/HTTPRefusal"]
        let token: [String: Any] = ["name": "token", "in": "query", "required": false, "schema": ["type": "string"],
                                    "description": "The client token, when it cannot go in Authorization: Bearer (EventSource)"]
        let rooms: [String: Any] = ["name": "rooms", "in": "query", "required": false,
                                    "schema": ["type": "string", "pattern": #"^[!$&'()*+\-.0-9:;<=>@A-Z\[\]^_`a-z{|}~]+(,[!$&'()*+\-.0-9:;<=>@A-Z\[\]^_`a-z{|}~]+)*$"#],
                                    "description": "Rooms to join (as room.join), comma-separated, at most \(Limits.maxStreamRooms); without it the cursor's rooms"]
        let encoding: [String: Any] = ["name": "encoding", "in": "query", "required": false, "schema": ["type": "string", "enum": ["json", "compact"]],
                                       "description": "The event encoding (TR-5); another value is refused 400 (40000, field encoding)"]
        let cursor = { (name: String, place: String) -> [String: Any] in
            ["name": name, "in": place, "required": false, "schema": ["type": "string", "maxLength": 4096],
             "description": "A cursor the server handed out: every room it names is resumed. Malformed, over \(Limits.maxStreamRooms) rooms or another app's: 400 (\(ErrorCode.badCursor.rawValue)) naming this field"]
        }
        let stream: [String: Any] = ["name": "stream", "in": "query", "required": false, "schema": ["type": "string", "maxLength": 40],
                                     "description": "The stream id of the hello event (another user's or an ended one: 404, \(ErrorCode.unknownStream.rawValue))"]
        let security: [[String: [String]]] = [["ClientToken": []], [:]]
        return [
            "/sse": ["get": [
                "summary": "Server-Sent Events: a client session's events as text/event-stream (openapi/sse.md)", "tags": ["Clients"],
                "security": security, "description": "SPEC: TR-1",
                "parameters": [token, rooms, encoding, cursor("Last-Event-ID", "header"), cursor("lastEventId", "query")],
                "responses": ["200": ["description": "The stream: hello, join, the protocol's events, close; heartbeat comments",
                                      "content": ["text/event-stream": ["schema": ["type": "string"]]]],
                              "400": error, "401": error, "403": error, "503": error, "default": refusal]]],
            "/poll": ["get": [
                "summary": "Long-polling: opens a client session, or takes the next events of one", "tags": ["Clients"],
                "security": security, "description": "SPEC: TR-2",
                "parameters": [token, rooms, encoding, stream, cursor("cursor", "query"),
                               ["name": "wait", "in": "query", "required": false, "schema": ["type": "integer", "minimum": 0],
                                "description": "Seconds to wait for events (default \(Limits.defaultPollWaitSeconds), at most \(Limits.maxPollWaitSeconds))"]],
                "responses": ["200": ["description": "The events not acknowledged yet, each with its cursor", "content": ["application/json": ["schema": ref("PollAnswer")]]],
                              "400": error, "401": error, "403": error, "404": error, "503": error, "default": refusal]]],
            "/client/ops": ["post": [
                "summary": "A command of an event stream's or poll session's client, answered as on a WebSocket", "tags": ["Clients"],
                "security": security, "description": "SPEC: TR-1, TR-2",
                "parameters": [token, stream, ["name": "X-Roomcast-Stream", "in": "header", "required": false, "schema": ["type": "string", "maxLength": 40],
                                               "description": "The stream id (or the stream parameter)"]],
                "requestBody": ["required": true, "content": ["application/json": ["schema": obj(["id": int(), "op": str(), "args": ["type": "object"]], required: ["id", "op", "args"])]]],
                "responses": ["200": ["description": "{\"id\", \"ok\"} or {\"id\", \"error\"}, as websocket.md describes",
                                      "content": ["application/json": ["schema": ["type": "object"]]]],
                              "400": error, "401": error, "404": error, "503": error, "default": refusal]]],
        ]
    }

    static var schemas: [String: Any] {
        let destroy = obj(["policy": ["type": "string", "enum": ["inactive", "fixed", "whenEmpty"]],
                           "minutes": int("inactive/fixed: \(Limits.minDestroyMinutes)–\(Limits.maxDestroyMinutes)", minimum: Limits.minDestroyMinutes, maximum: Limits.maxDestroyMinutes),
                           "seconds": int("whenEmpty: 0–\(Limits.maxDestroyDelaySeconds)", minimum: 0, maximum: Limits.maxDestroyDelaySeconds)], required: ["policy"])
        // Requests: the policy decides which duration is required, so each policy is its own shape.
        let destroyRequest: [String: Any] = ["oneOf": [
            obj(["policy": ["type": "string", "enum": ["inactive", "fixed"]],
                 "minutes": int("\(Limits.minDestroyMinutes)–\(Limits.maxDestroyMinutes)", minimum: Limits.minDestroyMinutes, maximum: Limits.maxDestroyMinutes)], required: ["policy", "minutes"]),
            obj(["policy": ["type": "string", "enum": ["whenEmpty"]],
                 "seconds": int("0–\(Limits.maxDestroyDelaySeconds); omitted: 0", minimum: 0, maximum: Limits.maxDestroyDelaySeconds)], required: ["policy"]),
        ]]
        let creationAttributes: [String: Any] = [
            "type": "object", "maxProperties": 20,
            "propertyNames": ["pattern": #"^[0-9A-Za-z+=_-]{1,128}$"#],
            "additionalProperties": ["type": "string", "maxLength": Limits.maxAttributeValueBytes],
            "description": "Up to 20 attributes; keys 1–128 of letters, digits, + = - _; values up to 4096 bytes",
        ]
        let room = obj([
            "roomId": str(), "name": str(), "announcement": str(), "creator": str(), "ext": str(), "broadcastUrl": str(),
            "onlineUserCount": int(), "queueModificationLevel": int(minimum: 0, maximum: 1), "muted": bool(), "open": bool(),
            "createdAt": int(), "destroy": destroy, "keepAlive": bool(), "multiDevice": ["type": "string", "enum": ["single", "multiple"]],
            "enterExitNotifications": bool(), "epoch": str("Changes when the room is destroyed and created again"),
            "distributionStopped": bool("QS-6: true while the room's distribution is stopped (its messages are accepted, stored and sent to webhooks, and no member receives them); absent otherwise"),
        ], required: ["roomId", "name", "onlineUserCount", "open", "epoch"])
        let member = obj([
            "userId": str(), "nickname": str(), "avatar": str(), "ext": str(),
            "type": ["type": "string", "enum": MemberType.allCases.map(\.rawValue)], "isMuted": bool(), "isTempMuted": bool(),
            "tempMuteRemainingSeconds": int(), "isBlocklisted": bool(), "isOnline": bool(), "enterTime": int(),
            "tags": arr(str(maxLength: Limits.maxTagBytes), maxItems: Limits.maxTagsPerMember),
        ], required: ["userId", "type"])
        let message = obj([
            "messageId": str(), "roomId": str(), "sender": str(), "senderNickname": str(), "senderAvatar": str(), "roomExt": str(),
            "type": ["type": "string", "enum": ["text", "custom", "notification"]], "content": str(), "time": int(), "fromServer": bool(),
            "priority": ["type": "string", "enum": [MessagePriority.high.rawValue, MessagePriority.low.rawValue],
                         "description": "QS-1: the class the message travelled with; absent: normal"],
            "messageType": str("QS-1: the message's type name, as sent (the app's type lists decide its class by it); absent: none"),
            "transient": bool("QS-5: true for a transient message (not stored, no offset, not replayed); absent otherwise"),
            "targets": arr(str(), maxItems: Limits.maxMessageTargets), "targetTags": ref("TagExpression"),
            "recalled": bool("MO-1: the message was recalled; this is its tombstone (content empty)"),
        ], required: ["messageId", "roomId", "type", "content", "time"])
        /// QS-1, QS-4: the app's message lists as the settings show them and as a PATCH replaces them.
        let typeList = arr(["type": "string", "minLength": 1, "maxLength": SettingsLimits.maxMessageTypeBytes], maxItems: SettingsLimits.maxListEntries)
        let senderList = arr(id, maxItems: SettingsLimits.maxListEntries)
        let qosSettings: [String: [String: Any]] = [
            "roomMessagesPerSecond": int("QS-2: messages one room accepts per second (default \(Limits.defaultRoomMessagesPerSecond), RongCloud's 40 per 200 ms); past it low, then normal messages are refused with 42902 and Retry-After",
                                         minimum: SettingsLimits.roomMessagesPerSecond.lowerBound, maximum: SettingsLimits.roomMessagesPerSecond.upperBound),
            "highPriorityReservePercent": int("QS-2: the share of a room's budget (percent) only high-priority messages may use (default \(Limits.defaultHighPriorityReservePercent))",
                                              minimum: SettingsLimits.highPriorityReservePercent.lowerBound, maximum: SettingsLimits.highPriorityReservePercent.upperBound),
            "lowPriorityMessageTypes": typeList.merging(["description": "QS-1: messages of these types are low priority unless their sender or type is protected (RongCloud's low-priority message types, Nexconn's low-priority-message-type-list)"]) { a, _ in a },
            "protectedMessageTypes": typeList.merging(["description": "QS-4: messages of these types are high priority, never dropped (RongCloud's message-type allowlist, Nexconn's priority-message-type-list)"]) { a, _ in a },
            "prioritySenders": senderList.merging(["description": "QS-4: these users' messages are high priority in every room of the app (a room's own protected senders: /v1/rooms/{roomId}/protected-senders)"]) { a, _ in a },
            "transientWebhooks": bool("QS-5: transient messages are sent to webhooks too (default false)"),
            "sensitiveWordsOnServerSends": bool("MO-2: the app server's text messages are screened for the app's sensitive words too (default false, as RongCloud)"),
            "recallWindowSeconds": int("MO-1: how long after sending a member may recall its own message from its client (default \(Limits.defaultRecallWindowSeconds), the vendors' two minutes; 0: not at all); creators, managers and the app server are not bound by it",
                                       minimum: SettingsLimits.recallWindowSeconds.lowerBound, maximum: SettingsLimits.recallWindowSeconds.upperBound),
            "memberEventsThreshold": int("AU-4: past this many members present in a room, members get one room.members summary per memberSummaryIntervalMs (counts, and the first \(Limits.maxMemberSummaryIds) user ids who joined and who left) instead of room.memberChanged and enter/exit notifications for each member; 0 (default): never. Webhooks still tell every member",
                                         minimum: SettingsLimits.memberEventsThreshold.lowerBound, maximum: SettingsLimits.memberEventsThreshold.upperBound),
            "memberSummaryIntervalMs": int("AU-4: how often a room's room.members summary may go out (default \(Limits.defaultMemberSummaryIntervalMilliseconds))",
                                           minimum: SettingsLimits.memberSummaryIntervalMilliseconds.lowerBound,
                                           maximum: SettingsLimits.memberSummaryIntervalMilliseconds.upperBound),
        ]
        let userExpiry = obj(["userId": str(), "until": ["type": ["integer", "null"], "description": "ms; null: no expiry"]], required: ["userId"])
        let attribute = obj(["key": str(), "value": str(), "owner": str(), "autoDelete": bool()], required: ["key", "value"])
        let notify: [String: [String: Any]] = [
            "needNotify": bool("Send the RongCloud-style event (with extra)"), "extra": str("JSON string, used when needNotify", maxLength: Limits.maxExtraBytes),
            "notifyExt": str("Send the NIM notification with this notifyExt", maxLength: Limits.maxNotifyExtBytes),
        ]
        return [
            "Error": obj(["code": int(), "message": str(), "field": str()], required: ["code", "message"]),
            "PollAnswer": obj(["stream": str("The session's id"), "cursor": str("Send it with the next poll"),
                               "events": arr(obj(["event": str(), "data": ["type": "object"], "cursor": str()], required: ["event", "data", "cursor"]))],
                              required: ["stream", "cursor", "events"]),
            "Status": obj(["status": str(), "code": int("When not ready: 50300 starting or draining, 50301 read-only (storage unavailable)"), "message": str()], required: ["status"]),
            "Empty": obj([:]),
            "Count": obj(["count": int(minimum: 0)], required: ["count"]),
            "TagCounts": obj(["tags": arr(obj(["tag": str(maxLength: Limits.maxTagBytes), "count": int(minimum: 1)], required: ["tag", "count"]),
                                          maxItems: Limits.maxTagsPerRoom)], required: ["tags"]),
            "RenameGroup": obj(["name": str("1–\(Limits.maxNameBytes) bytes", maxLength: Limits.maxNameBytes)], required: ["name"]),
            "SensitiveWords": obj(["words": arr(obj(["word": str("1–\(Limits.maxSensitiveWordChars) characters, no whitespace or commas", maxLength: 4 * Limits.maxSensitiveWordChars),
                                                    "replacement": str("Replaces the word; absent: the word blocks the message", maxLength: 4 * Limits.maxSensitiveWordChars)],
                                                   required: ["word"]), maxItems: Limits.maxSensitiveWordsPerCall)], required: ["words"]),
            "SensitiveWordList": obj(["words": arr(obj(["word": str(), "type": ["type": "string", "enum": ["replace", "block"]], "replacement": str()],
                                                       required: ["word", "type"]), maxItems: Limits.maxSensitiveWordsPerApp)], required: ["words"]),
            "TagExpression": tagExpressionSchema,
            "AuditPage": obj(["entries": arr(obj([
                "id": int("Increases by one with each entry of the app", minimum: 1), "time": int("When it was applied (ms)"),
                "actor": obj(["type": ["type": "string", "enum": ["server", "operator", "user"]], "userId": str("\"\" for the app server")],
                             required: ["type", "userId"]),
                "surface": ["type": "string", "enum": AuditSurface.allCases.map(\.rawValue)],
                "action": ["type": "string", "enum": AuditAction.allCases.map(\.rawValue)],
                "roomId": str("\"\" for app-wide actions (global mutes, sensitive words)", maxLength: Limits.auditMaxStringBytes),
                "targets": arr(str("User ids, words, the tag, or the recalled message's sender", maxLength: Limits.auditMaxStringBytes), maxItems: Limits.auditMaxTargets),
                "targetCount": int("How many targets the action named", minimum: 0),
                "messageId": str("The recalled message", maxLength: Limits.auditMaxStringBytes),
                "durationMs": int("How long a mute or block lasts; absent when it has no end", minimum: 0),
                "detail": str("The role given, or which mutes an unmute lifts", maxLength: Limits.auditMaxStringBytes),
            ], required: ["id", "time", "actor", "surface", "action", "roomId", "targets", "targetCount", "detail"]), maxItems: Limits.maxAuditPage),
                              "next": ["type": ["integer", "null"], "description": "Pass as before for the next (older) page; null on the last page"]],
                             required: ["entries", "next"]),
            "SetMemberTags": obj(["tags": arr(str(maxLength: Limits.maxTagBytes), maxItems: Limits.maxTagsPerMember),
                                  "notifyTargetTags": ref("TagExpression")], required: ["tags"]),
            "TagMute": obj(["seconds": int("0 lifts the mute", minimum: 0, maximum: Limits.maxTagMuteSeconds), "needNotify": bool("Default true"),
                            "notifyExt": str(maxLength: Limits.maxNotifyExtBytes),
                            "notifyTargetTags": ref("TagExpression")], required: ["seconds"]),
            "Room": room,
            "RoomResponse": obj(["room": ref("Room")], required: ["room"]),
            "UserPresence": obj(["userId": str(), "online": bool(), "connections": int(minimum: 0)], required: ["userId", "online", "connections"]),
            "PresenceQuery": obj(["userIds": ["type": "array", "items": id, "minItems": 1, "maxItems": Limits.maxPresenceQueryUsers]], required: ["userIds"]),
            "PresenceList": obj(["users": arr(obj(["userId": str(), "online": bool(), "connections": int(minimum: 0)],
                                                  required: ["userId", "online", "connections"]))], required: ["users"]),
            "UserConnections": obj(["userId": str(), "connections": arr(obj(["sessionId": str(), "device": str(), "node": str("The public WebSocket URL of the node holding the connection (empty while that node has announced none)"),
                                                                           "since": int("Connected at (ms; on a cluster, when its connect reached the shared log)"), "rooms": arr(str())],
                                                                          required: ["sessionId", "device", "node", "since", "rooms"]))],
                                   required: ["userId", "connections"]),
            "Disconnected": obj(["disconnected": int("Connections closed (on a cluster: the matching connections on every node)", minimum: 0), "closeCode": int()], required: ["disconnected", "closeCode"]),
            "RoomIdList": obj(["roomIds": arr(str())], required: ["roomIds"]),
            "RoomDirectoryPage": obj(["rooms": arr(obj(["roomId": str(), "name": str(), "onlineCount": int(minimum: 0), "creator": str(),
                                                        "createdAt": int(), "muted": bool(), "open": bool(), "epoch": str()],
                                                       required: ["roomId", "name", "onlineCount", "creator", "createdAt", "muted", "open", "epoch"])),
                                      "nextCursor": ["type": ["string", "null"], "description": "Pass as cursor for the next page; null on the last page"]],
                                     required: ["rooms", "nextCursor"]),
            "RoomsOrIds": ["oneOf": [obj(["rooms": arr(ref("Room"))], required: ["rooms"]), obj(["roomIds": arr(str())], required: ["roomIds"])]],
            "Member": member,
            "Members": obj(["members": arr(ref("Member")), "total": int()], required: ["members", "total"]),
            "Presence": obj(["users": arr(obj(["userId": str(), "inRoom": bool()], required: ["userId", "inRoom"]))], required: ["users"]),
            "UserExpiries": obj(["users": arr(userExpiry)], required: ["users"]),
            "UserIds": obj(["userIds": arr(str())], required: ["userIds"]),
            "Keys": obj(["keys": arr(str())], required: ["keys"]),
            "Attributes": obj(["entries": arr(attribute)], required: ["entries"]),
            "Queue": obj(["elements": arr(obj(["key": str(), "value": str()], required: ["key", "value"]))], required: ["elements"]),
            "QueueElement": obj(["key": str(), "value": str()], required: ["key", "value"]),
            "MissingKeys": obj(["missingKeys": arr(str())], required: ["missingKeys"]),
            "Message": message,
            "MessageResponse": obj(["message": ref("Message")], required: ["message"]),
            "Messages": obj(["messages": arr(ref("Message"))], required: ["messages"]),
            "BroadcastResult": obj(["messageId": str(), "rooms": int("The rooms with members present that it was sent to", minimum: 0)], required: ["messageId", "rooms"]),
            "Token": obj(["token": str(), "userId": str(), "expiresAt": int("ms")], required: ["token", "userId", "expiresAt"]),
            "Addresses": obj(["roomId": str(), "addresses": arr(str())], required: ["roomId", "addresses"]),
            "Settings": obj([
                "memberChangeEvents": bool(), "multipleRoomsPerUser": bool(), "enterExitNotifications": bool(), "maxRoomsPerUser": int(),
                "maxRooms": int(), "historyRetentionSeconds": int(), "historyLimitPerRoom": int(), "maxMessageBytes": int(),
                "defaultQueueLimit": int(), "notificationLevel": ref("NotificationLevelValue"),
                "allowedOrigins": ["type": ["array", "null"], "items": ["type": "string"]],
                "roomCreatesPerUserPerMinute": int("Rooms one user's clients may create per minute (0: no limit); the app server's do not count"),
                "historyLimitPerApp": int("Messages the app keeps on disk in all its rooms together"),
                "restCallsPerSecond": int("PX-1: signed REST calls per second, all surfaces together (429 / RongCloud 1008 / NIM 416 past it)"),
                "clientMessagesPerSecond": int("PX-1: messages per second one WebSocket connection may send (42901 past it; close 4029 when it goes on)"),
                "sendsPerUserPerSecond": int("PX-1: room messages per second one user may send from its clients"),
                "beforeSend": ["oneOf": [ref("BeforeSend"), ["type": "null"]],
                               "description": "PX-4: the before-send hook room messages are judged by before fan-out; null: none"],
                "sensitiveWordCount": int("MO-2: how many sensitive words the app has (GET /v1/sensitive-words lists them)", minimum: 0),
            ].merging(qosSettings) { a, _ in a }),
            "BeforeSend": obj([
                "url": str("The app's moderation endpoint (http or https; loopback and private addresses only for apps the operator allows)"),
                "timeoutMs": int("How long a verdict may take; past it the message is judged by failOpen",
                                 minimum: SettingsLimits.beforeSendTimeoutMilliseconds.lowerBound, maximum: SettingsLimits.beforeSendTimeoutMilliseconds.upperBound),
                "failOpen": bool("true: a message without a verdict (timeout, error status, broken answer) is sent; false: refused with 50302"),
                "bypassServerMessages": bool("true: messages the app server sends through REST skip the hook"),
                "signing": ["type": "string", "enum": BeforeSendSettings.signings,
                            "description": "standard: Standard Webhooks headers keyed by the app secret; rongcloud: signature in the query; nim: CheckSum headers"],
            ], required: ["url", "timeoutMs", "failOpen", "bypassServerMessages", "signing"]),
            "SettingsUpdate": obj([
                "memberChangeEvents": bool(), "multipleRoomsPerUser": bool(), "enterExitNotifications": bool(),
                "maxRoomsPerUser": int(minimum: SettingsLimits.maxRoomsPerUser.lowerBound, maximum: SettingsLimits.maxRoomsPerUser.upperBound), "maxRooms": int(minimum: SettingsLimits.minMaxRooms), "historyRetentionSeconds": int(minimum: Int(SettingsLimits.historyRetentionSeconds.lowerBound), maximum: Int(SettingsLimits.historyRetentionSeconds.upperBound)),
                "historyLimitPerRoom": int(minimum: SettingsLimits.historyLimitPerRoom.lowerBound, maximum: SettingsLimits.historyLimitPerRoom.upperBound), "maxMessageBytes": int(minimum: SettingsLimits.maxMessageBytes.lowerBound, maximum: SettingsLimits.maxMessageBytes.upperBound),
                "defaultQueueLimit": int(minimum: SettingsLimits.defaultQueueLimit.lowerBound, maximum: SettingsLimits.defaultQueueLimit.upperBound), "notificationLevel": ref("NotificationLevelValue"),
                "allowedOrigins": arr(str(maxLength: SettingsLimits.allowedOriginBytes.upperBound), maxItems: SettingsLimits.maxAllowedOrigins),
                "roomCreatesPerUserPerMinute": int(minimum: SettingsLimits.roomCreatesPerUserPerMinute.lowerBound,
                                                   maximum: SettingsLimits.roomCreatesPerUserPerMinute.upperBound),
                "historyLimitPerApp": int(minimum: SettingsLimits.historyLimitPerApp.lowerBound, maximum: SettingsLimits.historyLimitPerApp.upperBound),
                "restCallsPerSecond": int(minimum: SettingsLimits.ratePerSecond.lowerBound, maximum: SettingsLimits.ratePerSecond.upperBound),
                "clientMessagesPerSecond": int(minimum: SettingsLimits.ratePerSecond.lowerBound, maximum: SettingsLimits.ratePerSecond.upperBound),
                "sendsPerUserPerSecond": int(minimum: SettingsLimits.ratePerSecond.lowerBound, maximum: SettingsLimits.ratePerSecond.upperBound),
                "beforeSend": obj([
                    "url": str("Sets (or moves) the hook; \"\" removes it. Required when the app has no hook yet",
                               maxLength: SettingsLimits.maxBeforeSendURLBytes),
                    "timeoutMs": int(minimum: SettingsLimits.beforeSendTimeoutMilliseconds.lowerBound,
                                     maximum: SettingsLimits.beforeSendTimeoutMilliseconds.upperBound),
                    "failOpen": bool(), "bypassServerMessages": bool(),
                    "signing": ["type": "string", "enum": BeforeSendSettings.signings],
                ]),
            ].merging(qosSettings) { a, _ in a }, description: "Only the fields given change; each list given replaces that list whole"),
            "TokenRequest": obj(["ttlSeconds": int(minimum: 1, maximum: Int(Limits.maxTokenTTLSeconds)), "nickname": str(), "avatar": str(), "device": str(),
                                 "observer": bool("An operator's token: it may also watch any of the app's rooms with room.observe, without joining (BX-3)"),
                                 "tags": arr(str(maxLength: Limits.maxTagBytes), maxItems: Limits.maxTagsPerMember)]),
            "CreateRoom": obj([
                "roomId": id, "name": str(maxLength: Limits.maxNameBytes), "announcement": str(maxLength: Limits.maxAnnouncementBytes), "ext": str(maxLength: Limits.maxExtBytes),
                "broadcastUrl": str(maxLength: Limits.maxBroadcastUrlBytes), "creator": id, "queueModificationLevel": int(minimum: 0, maximum: 1), "destroy": destroyRequest,
                "keepAlive": bool(), "multiDevice": ["type": "string", "enum": ["single", "multiple"]], "muted": bool(),
                "muteAllowlist": userIds, "attributes": creationAttributes, "attributesOwner": id, "enterExitNotifications": bool(),
                "queueLimit": int(minimum: 1, maximum: 10_000),
            ], required: ["roomId"]),
            "UpdateRoom": obj([
                "name": str(maxLength: Limits.maxNameBytes), "announcement": str(maxLength: Limits.maxAnnouncementBytes), "ext": str(maxLength: Limits.maxExtBytes), "broadcastUrl": str(maxLength: Limits.maxBroadcastUrlBytes),
                "queueModificationLevel": int(minimum: 0, maximum: 1), "destroy": destroyRequest, "keepAlive": bool(),
                "multiDevice": ["type": "string", "enum": ["single", "multiple"]], "enterExitNotifications": bool(),
                "queueLimit": int(minimum: 1, maximum: Limits.maxQueueLimit), "needNotify": bool("Send notification 312"), "notifyExt": str(maxLength: Limits.maxNotifyExtBytes),
            ]),
            "OpenRoom": obj(["open": bool(), "notifyExt": str(maxLength: Limits.maxNotifyExtBytes)], required: ["open"]),
            "UserIdList": obj(["userIds": ["type": "array", "items": id, "minItems": 1, "maxItems": Limits.maxIsInRoomIds, "uniqueItems": true]], required: ["userIds"]),
            "SetRole": obj(["role": ["type": "string", "enum": RoleTarget.allCases.map(\.rawValue)], "notifyExt": str(maxLength: Limits.maxNotifyExtBytes)], required: ["role"]),
            "Block": obj(["userIds": userIds, "minutes": int("\(Limits.minDurationMinutes)–\(Limits.maxDurationMinutes); omitted: no expiry", minimum: Limits.minDurationMinutes, maximum: Limits.maxDurationMinutes)]
                         .merging(notify) { a, _ in a }, required: ["userIds"]),
            "Mute": obj(["userIds": userIds, "minutes": int(minimum: Limits.minDurationMinutes, maximum: Limits.maxDurationMinutes), "seconds": int(minimum: 1, maximum: Limits.maxTempMuteSeconds)]
                        .merging(notify) { a, _ in a }, required: ["userIds"]),
            "RoomMute": obj(["muted": bool()].merging(notify) { a, _ in a }, required: ["muted"]),
            "Allowlist": obj(["userIds": userIds, "needNotify": bool(), "extra": str(maxLength: Limits.maxExtraBytes)], required: ["userIds"]),
            "GlobalMute": obj(["userIds": userIds, "minutes": int(minimum: Limits.minDurationMinutes, maximum: Limits.maxDurationMinutes), "needNotify": bool(), "extra": str(maxLength: Limits.maxExtraBytes)],
                              required: ["userIds", "minutes"]),
            "SetAttributes": obj(["entries": ["type": "object", "minProperties": 1,
                                              "propertyNames": ["pattern": #"^[0-9A-Za-z+=_-]{1,128}$"#],
                                              "additionalProperties": ["type": "string", "maxLength": Limits.maxAttributeValueBytes]], "ownerId": id, "autoDelete": bool()], required: ["entries"]),
            "QueueValue": obj(["value": str(maxLength: Limits.maxQueueValueBytes)], required: ["value"]),
            "QueueBatch": obj(["elements": stringMap, "needNotify": bool(), "notifyExt": str(maxLength: Limits.maxNotifyExtBytes)], required: ["elements"]),
            "SendMessage": obj(["type": ["type": "string", "enum": ["text", "custom"]], "content": ["type": "string", "minLength": 1, "maxLength": Limits.defaultMaxMessageBytes, "description": "At most the app's maxMessageBytes bytes (default \(Limits.defaultMaxMessageBytes))"], "fromUserId": id,
                                "nickname": str(), "avatar": str()].merging(messageOptions) { a, _ in a }, required: ["content"]),
            "SendToRooms": obj(["roomIds": ["type": "array", "items": id, "minItems": 1, "maxItems": Limits.maxRoomsPerSend,
                                            "description": "AU-3: the rooms (at most \(Limits.maxRoomsPerSend); a repeated id is sent to once)"],
                                "type": ["type": "string", "enum": ["text", "custom"]],
                                "content": ["type": "string", "minLength": 1, "maxLength": Limits.defaultMaxMessageBytes, "description": "At most the app's maxMessageBytes bytes (default \(Limits.defaultMaxMessageBytes))"],
                                "fromUserId": id, "nickname": str(), "avatar": str()].merging(messageOptions) { a, _ in a }, required: ["roomIds", "content"]),
            "Broadcast": obj(["type": ["type": "string", "enum": ["text", "custom"]],
                              "content": ["type": "string", "minLength": 1, "maxLength": Limits.defaultMaxMessageBytes, "description": "At most the app's maxMessageBytes bytes (default \(Limits.defaultMaxMessageBytes))"],
                              "fromUserId": id, "nickname": str(), "avatar": str(),
                              "priority": messageOptions["priority"]!, "messageType": messageOptions["messageType"]!], required: ["content"]),
            "ProtectedSenders": obj(["userIds": ["type": "array", "items": id, "minItems": 1, "maxItems": Limits.maxProtectedSendersPerRoom, "uniqueItems": true,
                                                 "description": "Added to the room's protected senders, which hold at most \(Limits.maxProtectedSendersPerRoom)"]],
                                    required: ["userIds"]),
            "Distribution": obj(["stopped": bool("true: stop the room's fan-out; false: resume it with the next message")], required: ["stopped"]),
        ]
    }

    /// QS-1, QS-5: what a sender may ask of a message besides its content (the REST send body and
    /// `room.send`'s args).
    public static var messageOptions: [String: [String: Any]] {
        [
            "priority": ["type": "string", "enum": MessagePriority.allCases.reversed().map(\.rawValue),
                         "description": "QS-1: the message's class (default normal; the app's protected senders and types make it high whatever is asked, its low-priority types make it low when none is asked). Under overload low messages are refused and dropped first, then normal ones; high ones never are dropped. only these three names are taken: for ZIM's levels low, medium, high send low, normal, high"],
            "messageType": ["type": "string", "minLength": 1, "maxLength": SettingsLimits.maxMessageTypeBytes,
                            "description": "QS-1: the message's type name (e.g. RongCloud's RC:TxtMsg or the app's own), matched against the app's lowPriorityMessageTypes and protectedMessageTypes"],
            "transient": bool("QS-5 (ZIM barrage): not stored, not in the room's stream (no offset, not replayed), sent to webhooks only when the app's transientWebhooks is on, dropped first"),
            "targets": ["type": "array", "items": id, "maxItems": Limits.maxMessageTargets,
                        "description": "AU-2: only these members receive it, read it in history and resume it"],
            "targetTags": ref("TagExpression"),
        ]
    }

    /// AU-1: NIM's tag expression, `{"tag": "vip"}` or `{"op": "and"|"or"|"not", "tags": [...]}`.
    static var tagExpressionSchema: [String: Any] {
        ["description": "A tag, or and/or/not over expressions (not takes one); at most \(Limits.maxTagExpressionTerms) tags in \(Limits.maxTagExpressionDepth) levels",
         "oneOf": [obj(["tag": str(maxLength: Limits.maxTagBytes)], required: ["tag"]),
                   obj(["op": ["type": "string", "enum": ["and", "or", "not"]], "tags": ["type": "array", "items": ref("TagExpression"), "minItems": 1]],
                       required: ["op", "tags"])]]
    }

    // MARK: Ultra groups and conversation status (SPEC §4, §5)

    static var allSchemas: [String: Any] { schemas.merging(groupSchemas) { a, _ in a }.merging(webhookSchemas) { a, _ in a } }

    static var groupSchemas: [String: Any] {
        let level: [String: Any] = ["type": "integer", "enum": NotificationLevel.allCases.map(\.rawValue),
                                    "description": "-1 all, 0 not set (inherit), 1 @mentions incl. @all, 2 @me only, 4 @all only, 5 none"]
        let channelType: [String: Any] = ["oneOf": [["type": "string", "enum": ["public", "private"]], ["type": "integer", "enum": [0, 1]]]]
        let group = obj(["groupId": str(), "name": str(), "creator": str(), "memberCount": int(), "channelCount": int(), "createdAt": int(),
                         "notificationLevel": level], required: ["groupId", "name", "memberCount", "channelCount", "notificationLevel"])
        let channel = obj(["groupId": str(), "channelId": str(), "type": ["type": "string", "enum": ["public", "private"]], "isDefault": bool(),
                           "privateMemberCount": int(), "createdAt": int(), "notificationLevel": level],
                          required: ["groupId", "channelId", "type", "isDefault", "privateMemberCount"])
        let status = obj(["conversationType": int(), "targetId": str(), "channelId": str(), "pinned": bool(), "notificationLevel": level,
                          "version": int(), "updatedAt": int(), "effectiveLevel": level,
                          "levelSource": ["type": "string", "enum": ["channel", "conversation", "conversationType", "channelDefault", "groupDefault",
                                                                     "app", "none"]]],
                         required: ["conversationType", "targetId", "channelId", "pinned", "notificationLevel", "version"])
        return [
            "NotificationLevelValue": level,
            "Group": group,
            "GroupResponse": obj(["group": ref("Group")], required: ["group"]),
            "Channel": channel,
            "ChannelResponse": obj(["channel": ref("Channel")], required: ["channel"]),
            "Channels": obj(["channels": arr(ref("Channel")), "total": int()], required: ["channels", "total"]),
            "MetadataEntry": obj(["key": str(maxLength: Limits.maxMetadataKeyChars), "value": str(maxLength: Limits.maxMetadataValueBytes),
                                  "updatedAt": int("When the entry was last set (ms)")], required: ["key", "value", "updatedAt"]),
            "CommunityMessage": obj(["messageId": str(), "groupId": str(), "channelId": str(), "fromUserId": str(), "type": str(), "content": str(),
                                     "sentAt": int(), "fromServer": bool(), "stored": bool("Present (false) when the message is not kept in history"),
                                     "recalled": bool("MO-1: present (true) on a recalled message's tombstone"),
                                     "version": int("Edits so far (absent: none)", minimum: 1), "editedAt": int(),
                                     "targets": arr(str(), maxItems: Limits.maxMessageTargets),
                                     "metadata": arr(ref("MetadataEntry"), maxItems: Limits.maxMetadataEntriesPerMessage)],
                                    required: ["messageId", "groupId", "channelId", "fromUserId", "type", "content", "sentAt", "fromServer"],
                                    description: "MO-3: a message of an ultra group's channel; metadata is present when it was sent with metadata"),
            "CommunityMessages": obj(["messages": arr(ref("CommunityMessage"))], required: ["messages"]),
            "UserIdsPage": obj(["userIds": arr(str()), "total": int()], required: ["userIds", "total"]),
            "NotificationLevel": obj(["notificationLevel": level], required: ["notificationLevel"]),
            "ConversationStatus": status,
            "ConversationStatusResponse": obj(["status": ref("ConversationStatus")], required: ["status"]),
            "ConversationStatuses": obj(["statuses": arr(ref("ConversationStatus")), "cursor": int(), "more": bool()],
                                        required: ["statuses", "cursor", "more"]),
            "CreateGroup": obj(["groupId": id, "name": str(maxLength: Limits.maxNameBytes), "creator": id], required: ["groupId"]),
            "GroupUsers": obj(["userIds": ["type": "array", "items": id, "minItems": 1, "maxItems": Limits.maxGroupUsersPerCall, "uniqueItems": true]], required: ["userIds"]),
            "UserIds20": obj(["userIds": userIds], required: ["userIds"]),
            "UserGroupIds": obj(["userGroupIds": ["type": "array", "items": str(maxLength: Limits.maxUserGroupIdBytes), "minItems": 1,
                                                   "maxItems": Limits.maxUserGroupsPerCall, "uniqueItems": true]], required: ["userGroupIds"]),
            "UserGroup": obj(["userGroupId": str(maxLength: Limits.maxUserGroupIdBytes),
                              "userIds": ["type": "array", "items": str(), "maxItems": Limits.maxUsersPerUserGroup],
                              "channelIds": ["type": "array", "items": str(), "maxItems": Limits.maxChannelsPerGroup]],
                             required: ["userGroupId", "userIds", "channelIds"]),
            "UserGroups": obj(["userGroups": ["type": "array", "items": ref("UserGroup"), "maxItems": Limits.maxUserGroupsPerGroup], "total": int()],
                              required: ["userGroups", "total"]),
            "CreateChannel": obj(["channelId": id, "type": channelType], required: ["channelId"]),
            "ChangeChannelType": obj(["type": channelType], required: ["type"]),
            "GroupNotificationLevel": obj(["notificationLevel": level, "channelId": id], required: ["notificationLevel"]),
            "NotificationLevelBody": obj(["notificationLevel": level], required: ["notificationLevel"]),
            "SetConversationStatus": obj(["channelId": id, "pinned": bool(), "notificationLevel": level],
                                         description: "Give pinned, notificationLevel or both; channelId for ultra groups (type 10) only")
                .merging(["anyOf": [["required": ["pinned"]], ["required": ["notificationLevel"]]]]) { a, _ in a },
        ]
    }

    // MARK: Webhooks (SPEC §9)

    enum DeliveryStatusNames {
        static let all = ["pending", "delivered", "dead"]
    }

    static var webhookSchemas: [String: Any] {
        let events: [String: Any] = ["type": "array", "items": ["type": "string", "enum": ["*"] + WebhookEventType.allCases.map(\.rawValue)],
                                     "minItems": 1, "uniqueItems": true]
        let format: [String: Any] = ["type": "string", "enum": ["standard", "rongcloud", "nim"]]
        let url: [String: Any] = ["type": "string", "maxLength": 2048, "pattern": "^https?://",
                                  "description": "http or https; loopback, private and link-local targets need allowPrivateNetwork, which only apps the operator lists with --webhook-allow-private may set (others: 403, code 40301)"]
        let secret: [String: Any] = ["type": "string", "pattern": "^whsec_[A-Za-z0-9+/=]+$", "description": "whsec_ + base64 of 16–64 bytes; generated when omitted"]
        let endpoint = obj(["id": str(), "url": str(), "events": arr(str()), "format": format, "allowPrivateNetwork": bool(), "enabled": bool(),
                            "disabledReason": str(), "origin": ["type": "string", "enum": ["api", "config"]], "createdAt": int(),
                            "rotating": bool("Two secrets sign during a rotation"), "secret": str("Only when created or rotated")],
                           required: ["id", "url", "events", "format", "allowPrivateNetwork", "enabled"])
        let attempt = obj(["attempt": int(), "time": int(), "status": int("HTTP status; 0: no response"), "error": str(), "durationMs": int()],
                          required: ["attempt", "time", "status"])
        let delivery = obj(["messageId": str(), "type": str(), "messageTime": int(), "status": ["type": "string", "enum": DeliveryStatusNames.all],
                            "attempts": int(), "nextAttemptAt": int(), "lastStatus": int(), "lastError": str(), "updatedAt": int(),
                            "history": arr(attempt)], required: ["messageId", "type", "status", "attempts", "history"])
        return [
            "WebhookEndpoint": endpoint,
            "WebhookEndpointResponse": obj(["endpoint": ref("WebhookEndpoint")], required: ["endpoint"]),
            "WebhookEndpoints": obj(["endpoints": arr(ref("WebhookEndpoint"))], required: ["endpoints"]),
            "WebhookEndpointCreate": obj(["url": url, "secret": secret, "events": events, "format": format, "allowPrivateNetwork": bool()],
                                         required: ["url"]),
            "WebhookEndpointUpdate": obj(["url": url, "secret": secret, "events": events, "format": format, "allowPrivateNetwork": bool(),
                                          "enabled": bool()]),
            "WebhookDelivery": delivery,
            "WebhookDeliveries": obj(["deliveries": arr(ref("WebhookDelivery")), "next": ["type": ["integer", "null"]]], required: ["deliveries", "next"]),
            "WebhookReplay": ["oneOf": [obj(["messageIds": ["type": "array", "items": str(), "minItems": 1, "maxItems": 1000]], required: ["messageIds"]),
                                        obj(["since": int("ms", minimum: 0)], required: ["since"])]],
            "WebhookReplayed": obj(["queued": int()], required: ["queued"]),
        ]
    }

    // MARK: Vendor surfaces (SPEC §8)

    /// Every vendor path, generated from the endpoint tables. Parameters and answers follow each
    /// vendor's own documents (openapi/errors.md lists the codes); here they are described as the
    /// form or JSON object each one takes and the envelope each one answers.
    static var vendorPaths: [String: Any] {
        var out: [String: Any] = [:]
        for vendor in Vendor.allCases {
            let body = ["$ref": "#/components/requestBodies/" + (vendor == .nexconn ? "VendorJSON" : "VendorForm")]
            // Each vendor's SDKs sign with that vendor's headers (every scheme is accepted).
            let security = [[vendor == .nim ? "NIMCheckSum" : "RongCloudSignature": [String]()]]
            var responses: [String: Any] = ["default": ["$ref": "#/components/responses/HTTPRefusal"]]
            for row in VendorCodes.rows(vendor) {
                responses[String(row.status)] = ["$ref": "#/components/responses/" + (row.status == 200 ? "VendorAnswer" : "VendorRefusal")]
            }
            for endpoint in vendor.endpoints {
                var o: [String: Any] = [
                    "summary": endpoint.supported ? "\(vendor.title): \(endpoint.path)" : "\(vendor.title): \(endpoint.path) (not supported: 'service not enabled')",
                    "description": "SPEC: " + (vendor == .rongCloud ? "VC-1" : vendor == .nim ? "VC-2" : "VC-3") + ", VC-4",
                    "tags": [vendor.title],
                    "security": security,
                    "requestBody": body,
                    "responses": responses,
                ]
                // Every vendor call may change something: each takes the surface's idempotency headers.
                o["parameters"] = vendor.idempotencyKeyHeaders.map(idempotencyParameter)
                o["operationId"] = vendor.rawValue + endpoint.path.split(whereSeparator: { !$0.isLetter && !$0.isNumber }).map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
                out[endpoint.path] = ["post": o]
            }
        }
        return out
    }

    static var vendorResponses: [String: Any] {
        [
            "VendorAnswer": ["description": "Done (NIM: refusals too, with NIM's code and desc)", "content": ["application/json": ["schema": ref("VendorAnswer")]]],
            "VendorRefusal": ["description": "Refused with the vendor's code; see openapi/errors.md", "content": ["application/json": ["schema": ref("VendorRefusal")]]],
            "HTTPRefusal": ["description": "Refused by the HTTP layer; see the error table", "content": ["application/json": ["schema": ref("Error")]]],
        ]
    }

    static var vendorRequestBodies: [String: Any] {
        [
            "VendorForm": ["required": false, "content": ["application/x-www-form-urlencoded": ["schema": ["type": "object", "additionalProperties": ["type": "string"]]]]],
            "VendorJSON": ["required": false, "content": ["application/json": ["schema": ["type": "object"]]]],
        ]
    }

    static var vendorSchemas: [String: Any] {
        [
            "VendorAnswer": ["type": "object", "required": ["code"], "properties": ["code": int("200 (RongCloud, NIM) or 0 (Nexconn) on success; NIM refusals carry their code here too")],
                             "additionalProperties": true],
            "VendorRefusal": obj(["code": int(), "errorMessage": str(), "field": str()], required: ["code", "errorMessage"]),
        ]
    }
}
