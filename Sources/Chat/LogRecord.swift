/// One entry of the cluster's shared log (CLUSTER.md), as every node applies it: a command, or
/// what the leader or a starting node appends for the whole cluster. Applying a record depends
/// only on the domain's state and the entry (its time and position), never on the node.
public enum LogRecord: Codable, Equatable, Sendable {
    /// The version of the records' encoding this build writes and reads; a cluster whose log was
    /// written by a newer one refuses this node (it could not apply every entry). 1: JSON only;
    /// 2: the hot records in their binary form (`LogCodec.swift`), the rest in JSON. A node writes
    /// what the cluster's format (set by its first node) allows, so older nodes can still read it.
    public static let format = 2
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
}

extension SessionID {
    /// Bits of a session id: the run of the node that made it (`incarnation`, 20 bits), the I/O
    /// loop (8 bits) and a counter (36 bits). A single node's incarnation is 0; in a cluster every
    /// start of a node takes a new one, so ids never collide across nodes.
    public static let incarnationBits = 20
    public static let loopBits = 8
    public static let counterBits = 36

    public static func make(incarnation: UInt64, loop: Int, counter: UInt64) -> SessionID {
        let i = incarnation & ((1 << UInt64(incarnationBits)) - 1)
        let l = UInt64(loop) & ((1 << UInt64(loopBits)) - 1)
        let c = counter & ((1 << UInt64(counterBits)) - 1)
        return SessionID(i << UInt64(loopBits + counterBits) | l << UInt64(counterBits) | c)
    }

    /// The node run that made this session.
    public var incarnation: UInt64 { raw >> UInt64(Self.loopBits + Self.counterBits) }
}

extension ChatDomain {
    /// The sessions a node run made, in id order (so every node ends them in the same order).
    public func sessions(ofIncarnation incarnation: UInt64) -> [SessionID] {
        sessions.keys.filter { $0.incarnation == incarnation }.sorted()
    }

    /// Whether the app exists.
    public func hasApp(_ key: String) -> Bool { apps[key] != nil }
}
