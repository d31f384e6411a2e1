import Chat

/// Webhooks in a cluster (CL-6, CLUSTER.md §7): what the shared log carries about endpoints and
/// deliveries, so that every node holds the same endpoints, stages the same messages (with the
/// same ids and sequence numbers) and records the same outcomes.

/// A node run's name in the log's `origin` column: the node's id and the run's incarnation
/// (`node#r<incarnation>`), so that every node can tell which run appended an entry — the run
/// that owns the webhook messages the entry causes.
public enum ClusterRun {
    public static func origin(node: String, incarnation: Int64) -> String {
        node + "#r" + String(incarnation)
    }

    /// The incarnation of the run that appended an entry; nil for an origin that
    /// `origin(node:incarnation:)` did not make.
    public static func incarnation(ofOrigin origin: String) -> UInt64? {
        guard let hash = origin.lastIndex(of: "#") else { return nil }
        let rest = origin.utf8[origin.utf8.index(after: hash)...]
        guard rest.first == UInt8(ascii: "r") else { return nil }
        let digits = rest.dropFirst()
        guard !digits.isEmpty, digits.count <= 19, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return UInt64(String(decoding: digits, as: UTF8.self))
    }
}

/// The fields of a webhook endpoint that a create or an update gives (nil: left as it is): the
/// body of `POST` and `PATCH /v1/webhooks`, and what `--webhook` gives.
public struct WebhookEndpointSpec: Codable, Equatable, Sendable {
    public var url: String?
    public var secret: String?
    public var events: [String]?
    public var format: String?
    public var allowPrivateNetwork: Bool?
    public var enabled: Bool?

    public init(url: String? = nil, secret: String? = nil, events: [String]? = nil, format: String? = nil, allowPrivateNetwork: Bool? = nil,
                enabled: Bool? = nil) {
        self.url = url
        self.secret = secret
        self.events = events
        self.format = format
        self.allowPrivateNetwork = allowPrivateNetwork
        self.enabled = enabled
    }
}

/// A change of a webhook endpoint as the node that received it validated it, and as every node
/// applies it (validated again against the endpoints at the entry: a change that no longer fits,
/// e.g. of an endpoint deleted meanwhile, changes nothing anywhere and is refused to its caller).
/// Everything a node's own configuration or random generator decides is in the record.
public struct WebhookEndpointChange: Codable, Equatable, Sendable {
    public enum Action: String, Codable, Equatable, Sendable {
        /// A new endpoint (REST); its id is derived from the entry's position.
        case create
        case update
        case delete
        case rotateSecret
        /// An endpoint the nodes' command line gives (`--webhook`): made if absent, else given the
        /// command line's fields, as a single node does at every start.
        case ensure
    }

    public var action: Action
    public var app: String
    /// The endpoint changed; nil for `create`.
    public var id: String?
    public var spec: WebhookEndpointSpec
    /// A secret the receiving node made (create, ensure, rotateSecret): every node uses this one.
    public var generatedSecret: String?
    /// The receiving node's operator lets this app's endpoints reach private addresses
    /// (`--webhook-allow-private`).
    public var operatorAllowsPrivate: Bool
    /// The endpoint is one the receiving node's command line configures (`--webhook`).
    public var operatorEndpoint: Bool

    public init(action: Action, app: String, id: String?, spec: WebhookEndpointSpec, generatedSecret: String?, operatorAllowsPrivate: Bool,
                operatorEndpoint: Bool) {
        self.action = action
        self.app = app
        self.id = id
        self.spec = spec
        self.generatedSecret = generatedSecret
        self.operatorAllowsPrivate = operatorAllowsPrivate
        self.operatorEndpoint = operatorEndpoint
    }
}

/// `POST /v1/webhooks/{id}/replay` in a cluster: the messages are chosen from the replica as it is
/// at the entry, so every node queues the same deliveries.
public struct WebhookReplayChange: Codable, Equatable, Sendable {
    public var app: String
    public var endpointId: String
    public var messageIds: [String]?
    public var since: Int64?

    public init(app: String, endpointId: String, messageIds: [String]?, since: Int64?) {
        self.app = app
        self.endpointId = endpointId
        self.messageIds = messageIds
        self.since = since
    }
}

/// A delivery that reached its end on the node that owns it (delivered, or dead after the retry
/// schedule, a 410 or a disabled endpoint), recorded alike on every node.
public struct WebhookOutcome: Codable, Equatable, Sendable {
    public struct Attempt: Codable, Equatable, Sendable {
        public var attempt: Int
        public var time: Int64
        public var status: Int
        public var error: String
        public var durationMs: Int64

        public init(attempt: Int, time: Int64, status: Int, error: String, durationMs: Int64) {
            self.attempt = attempt
            self.time = time
            self.status = status
            self.error = error
            self.durationMs = durationMs
        }
    }

    public var endpointId: String
    public var messageId: String
    /// Delivered (true) or dead (false).
    public var delivered: Bool
    public var attempts: Int
    public var lastStatus: Int
    public var lastError: String
    /// When it ended (the owner's clock).
    public var at: Int64
    /// The owner's attempts, the last `Limits.maxWebhookOutcomeAttempts`.
    public var history: [Attempt]
    /// The receiver answered 410 Gone: the endpoint is disabled, with this reason.
    public var disabledReason: String?

    public init(endpointId: String, messageId: String, delivered: Bool, attempts: Int, lastStatus: Int, lastError: String, at: Int64,
                history: [Attempt], disabledReason: String? = nil) {
        self.endpointId = endpointId
        self.messageId = messageId
        self.delivered = delivered
        self.attempts = attempts
        self.lastStatus = lastStatus
        self.lastError = lastError
        self.at = at
        self.history = history
        self.disabledReason = disabledReason
    }
}
