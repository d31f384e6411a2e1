import Chat

/// One entry of the cluster's shared log (CLUSTER.md), as every node applies it: a command, or
/// what the leader or a starting node appends for the whole cluster. Applying a record depends
/// only on the domain's state and the entry (its time and position), never on the node.
public enum LogRecord: Codable, Equatable, Sendable {
    /// The version of the records' encoding this build writes and reads; a cluster whose log was
    /// written by a newer one refuses this node (it could not apply every entry). 1: JSON only;
    /// 2: the hot records in their binary form (`LogCodec.swift`), the rest in JSON, and the
    /// records of signed calls and webhooks; 3: messages with options (QS-1, QS-5); 4: member tags, messages for some members
    /// only, tag mutes (AU-1, AU-2); 5: message recalls and the recall window (MO-1), sensitive words (MO-2), ultra-group renames (MO-4), NIM operators acting through the app server (MO-7); 6: moderation commands, which record the audit trail, and vendor commands naming their surface (MO-8), member-event summaries and counts-only members (AU-4); 7: ultra-group channel messages, their edits and metadata, and the channels' mute, allowed-sender and freeze controls (MO-3, MO-5), ultra-group user groups (MO-4), and room destroys, message-type lists and protected senders in the audit trail (MO-8). A node of a newer format raises the cluster's when it
    /// joins (older nodes then stop at the first record they cannot read, and refuse to start
    /// until upgraded).
    public static let format = 7
    /// The first format with binary records.
    public static let binaryFormat = 2

    /// A change a client or app server asked for.
    case command(Command)
    /// Time-driven work (expiries, destroy policies, presence grace) up to the entry's time;
    /// appended by the leader.
    case tick
    /// Every session of a node's run (`SessionID.incarnation`) ends, as if each disconnected: the
    /// node died (appended by the leader) or restarted (appended by the node itself).
    case endSessions(incarnation: UInt64)
    /// An app given to the nodes on their command line exists, with default settings if it is
    /// new; an existing app is left as it is.
    case ensureApp(String)

    // MARK: Webhooks in a cluster (CL-6, CLUSTER.md §7)

    /// A webhook endpoint is created, changed, given a new secret or removed (REST on any node),
    /// or made as the nodes' command line gives it (`ensure`).
    case webhookEndpoint(WebhookEndpointChange)
    /// Messages are queued again for an endpoint (`POST /v1/webhooks/{id}/replay`).
    case webhookReplay(WebhookReplayChange)
    /// Deliveries that reached their end on the node that owns them.
    case webhookOutcomes([WebhookOutcome])

    // Signed REST calls (CLUSTER.md "Nonces and idempotency keys"): what a node alone cannot
    // judge, every node judges alike from these records (`RequestLedger`).

    /// The first change a signed REST call makes, with the call's nonce (SPEC §2) and, when it was
    /// sent with an `Idempotency-Key`, its claim on the key (PX-2): refused on every node if the
    /// nonce was already used, not applied again if the key was.
    case signed(SignedCall)
    /// The nonce of a signed call that made no change (a read, a refusal before any change):
    /// every node remembers it, so the call cannot be replayed to another node.
    case nonce(RequestNonce)
    /// PX-2: the answer the claiming call's node sent, kept by every node for retries.
    case answer(KeptAnswer)
    /// PX-2: the claiming call's answer says "try again" (429, 5xx, `Retry-After`) and is not
    /// kept: the key is forgotten, so a retry runs the call again (as on one node).
    case releaseKey(KeyRef)
    /// PX-2: the claiming call's node could not learn whether its change reached the log (the
    /// connection to PostgreSQL was lost while committing it). If it did, its answer is lost.
    case abandonKey(KeyRef)
}

/// A signed REST call's nonce (SPEC §2), per app.
public struct RequestNonce: Codable, Equatable, Hashable, Sendable {
    public var app: String
    public var nonce: String
    public init(app: String, nonce: String) {
        self.app = app
        self.nonce = nonce
    }
}

/// Which call claimed an idempotency key: the node run that appended it and a number unique in
/// that run. An answer, release or abandon names it, so it can act only on its own claim.
public struct ClaimID: Codable, Equatable, Hashable, Sendable {
    public var incarnation: UInt64
    public var serial: UInt64
    public init(incarnation: UInt64, serial: UInt64) {
        self.incarnation = incarnation
        self.serial = serial
    }
}

/// PX-2: a call's claim on an idempotency key: "the same request" is the same fingerprint
/// (SHA-256 of method, target and body).
public struct IdempotencyClaim: Codable, Equatable, Sendable {
    public var app: String
    public var key: String
    public var fingerprint: String
    public var claim: ClaimID
    public init(app: String, key: String, fingerprint: String, claim: ClaimID) {
        self.app = app
        self.key = key
        self.fingerprint = fingerprint
        self.claim = claim
    }
}

/// `LogRecord.signed`: a change and what its call carries. A call that makes several changes
/// sends the first with these, the rest as plain `command` records.
public struct SignedCall: Codable, Equatable, Sendable {
    public var change: SignedChange
    public var nonce: RequestNonce?
    public var key: IdempotencyClaim?
    public init(_ change: SignedChange, nonce: RequestNonce?, key: IdempotencyClaim?) {
        self.change = change
        self.nonce = nonce
        self.key = key
    }
}

/// What a signed REST call changes: a domain command, or (PX-5) a user's connections on every node.
public enum SignedChange: Codable, Equatable, Sendable {
    case command(Command)
    /// Close a user's connections (one device's, when given) on every node; the node that
    /// appended it answers with how many sessions matched.
    case disconnectUser(UserDisconnect)
}

/// An idempotency key as its claiming call names it.
public struct KeyRef: Codable, Equatable, Sendable {
    public var app: String
    public var key: String
    public var claim: ClaimID
    public init(app: String, key: String, claim: ClaimID) {
        self.app = app
        self.key = key
        self.claim = claim
    }
}

/// PX-2: the answer sent to the call that claimed a key, as every node keeps it (an answer of a
/// call that made no change registers the key with it).
public struct KeptAnswer: Codable, Equatable, Sendable {
    public var ref: KeyRef
    public var fingerprint: String
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    public init(ref: KeyRef, fingerprint: String, status: Int, contentType: String, body: [UInt8]) {
        self.ref = ref
        self.fingerprint = fingerprint
        self.status = status
        self.contentType = contentType
        self.body = body
    }
}

/// PX-5: `DELETE /v1/users/{userId}/connections` for the whole cluster.
public struct UserDisconnect: Codable, Equatable, Sendable {
    public var app: String
    public var userId: String
    /// Only this device's connections (nil: all of the user's).
    public var device: String?
    /// The WebSocket close code the connections get (4010, or 4011 to let them reconnect).
    public var closeCode: UInt16
    public var reason: String
    public init(app: String, userId: String, device: String?, closeCode: UInt16, reason: String) {
        self.app = app
        self.userId = userId
        self.device = device
        self.closeCode = closeCode
        self.reason = reason
    }
}
