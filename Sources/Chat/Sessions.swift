/// Session ids across node runs, and the domain's view of sessions by run and by user (used when
/// a node run ends, and by PX-5's disconnects).
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

    /// PX-5: a user's sessions on every node (those of `device` only, when given), in id order:
    /// the same on every node that has applied the same entries.
    public func sessions(app: String, userId: String, device: String?) -> [SessionID] {
        (apps[app]?.userSessions[userId] ?? []).filter { sid in device == nil || sessions[sid]?.deviceId == device }.sorted()
    }
}
