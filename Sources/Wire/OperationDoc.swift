import Chat

/// What the OpenAPI document says of one native REST operation (`NativeRoute`). Typed rather than
/// a JSON dictionary so the route table can be a set of `Sendable` constants shared by the gateway
/// and the document; `OpenAPIDocument` renders it.
public struct OperationDoc: Sendable {
    /// The OpenAPI tag operations are grouped under.
    public enum Tag: String, Sendable {
        case rooms = "Rooms"
        case members = "Members"
        case moderation = "Moderation"
        case attributes = "Attributes"
        case queue = "Queue"
        case messages = "Messages"
        case tokens = "Tokens"
        case settings = "Settings"
        case ultraGroups = "Ultra groups"
        case conversations = "Conversation status"
        case webhooks = "Webhooks"
        case qos = "Room QoS"
    }

    /// The schema of a path or query parameter: the few shapes the native API's parameters take.
    public enum Schema: Sendable {
        /// A room, user or app id (`Validate.identifier`).
        case id
        /// A comma-separated list of ids.
        case idList
        /// A comma-separated list of attribute keys.
        case attributeKeyList
        case string(_ description: String = "", maxLength: Int? = nil)
        case integer(_ description: String = "", minimum: Int? = nil, maximum: Int? = nil)
        case boolean(_ description: String = "")
        /// A string that is one of these.
        case oneOf([String])
        /// An integer that is one of these.
        case oneOfIntegers([Int])
        /// A string matching this regular expression.
        case pattern(String)
    }

    public struct Parameter: Sendable {
        public enum Location: String, Sendable {
            case path, query
        }
        public let name: String
        public let location: Location
        public let schema: Schema
        public let required: Bool
        public let description: String

        /// Path parameters are always required.
        public static func path(_ name: String, _ schema: Schema = .string(), description: String = "") -> Parameter {
            Parameter(name: name, location: .path, schema: schema, required: true, description: description)
        }

        public static func query(_ name: String, _ schema: Schema = .string(), required: Bool = false, description: String = "") -> Parameter {
            Parameter(name: name, location: .query, schema: schema, required: required, description: description)
        }
    }

    /// Where stateful testing goes from an operation's answer: each target takes `parameter`
    /// from `value` (a runtime expression on the answer). Targets are routes, so a link cannot
    /// name an operation that does not exist.
    public struct Links: Sendable {
        public let parameter: String
        public let value: String
        public let targets: [NativeRoute]
    }

    public let summary: String
    public let tag: Tag
    /// The SPEC ids the operation serves.
    public let spec: [String]
    public let parameters: [Parameter]
    /// The request body's schema (a name in `components/schemas`); nil: no body.
    public let body: String?
    /// The success status and its schema's name.
    public let ok: (status: Int, schema: String)
    public let operationId: String?
    public let links: Links?

    public init(_ summary: String, tag: Tag, spec: [String], params: [Parameter] = [], body: String? = nil, ok: (status: Int, schema: String),
                id operationId: String? = nil, links: Links? = nil) {
        self.summary = summary
        self.tag = tag
        self.spec = spec
        self.parameters = params
        self.body = body
        self.ok = ok
        self.operationId = operationId
        self.links = links
    }
}

extension OperationDoc.Parameter {
    static let roomId = path("roomId", .id, description: "Room id (1–64 bytes)")
    static let userId = path("userId", .id)
    static let tag = path("tag", .string("A member tag (1–\(Limits.maxTagBytes) bytes)", maxLength: Limits.maxTagBytes))
    static let groupId = path("groupId", .id, description: "Ultra group id (1–64 bytes)")
    static let channelId = path("channelId", .id, description: "Channel (busChannel) id")
    static let userGroupId = path("userGroupId", .id, description: "User group id (1–\(Limits.maxUserGroupIdBytes) bytes; MO-4)")
    static let webhookId = path("id", .pattern("^(ep|cfg)_[0-9a-f]+$"), description: "Endpoint id")
    static let page: [OperationDoc.Parameter] = [
        query("page", .integer("1-based; default 1", minimum: 1)),
        query("pageSize", .integer("default 20", minimum: 1, maximum: Limits.maxPageSize)),
    ]
    static let conversationType = path("conversationType", .oneOfIntegers(ConversationType.allCases.map(\.rawValue)),
                                       description: "1 private, 3 group, 6 system, 10 ultra group")
    /// A conversation's address: the user, the conversation type and the target.
    static let conversation: [OperationDoc.Parameter] = [userId, conversationType, path("targetId", .id)]
}
