/// MO-8: the audit trail of moderation actions. Every moderation command the domain accepts
/// (recalls, blocks, mutes, room mutes and their allowlist, global and tag mutes, role changes,
/// kicks, sensitive words, closing and opening a room, stopping and resuming its distribution)
/// appends one entry to its app's trail as part of its outcome: who did it (the app server, a
/// NIM operator acting through it, or a member from its client), through which surface, what,
/// on what, and when (the command's time, never a clock). The entry is domain state like any
/// other: it goes through the engine's one log, is written with the command's other mutations,
/// is in the domain's image (snapshots) and is restored from the store after a restart.
///
/// A refused command records nothing (handlers validate before they change anything and record
/// last). Each app keeps its newest `Limits.auditEntriesPerApp` entries, the oldest dropped
/// first; each string of an entry is at most `Limits.auditMaxStringBytes` bytes, and an entry
/// lists at most `Limits.auditMaxTargets` targets (with how many there were).

/// The surface a moderation command came through.
public enum AuditSurface: String, Codable, Equatable, Sendable, CaseIterable {
    /// The native REST API (`/v1`).
    case native
    case rongCloud
    case nexconn
    case nim
    /// A connected client's op (a manager, the room's creator, a sender recalling its message).
    case client
}

/// Who performed a moderation action.
public struct AuditActor: Codable, Equatable, Sendable {
    public enum Kind: String, Codable, Equatable, Sendable {
        /// The app server (REST, the vendor surfaces).
        case server
        /// The app server in the name of a user (NIM's `operator`, MO-7).
        case `operator`
        /// A member, from its client.
        case user
    }
    public var kind: Kind
    /// The acting user ("" for the app server).
    public var userId: String

    public init(kind: Kind, userId: String = "") {
        self.kind = kind
        self.userId = userId
    }
}

/// What a moderation action did.
public enum AuditAction: String, Codable, Equatable, Sendable, CaseIterable {
    case recall
    case block
    case unblock
    case mute
    case unmute
    case roomMute
    case roomUnmute
    case allowlistAdd
    case allowlistRemove
    case globalMute
    case globalUnmute
    case tagMute
    case tagUnmute
    case role
    case kick
    case sensitiveWordAdd
    case sensitiveWordRemove
    case roomClose
    case roomOpen
    case distributionStop
    case distributionResume
    /// A room destroyed by the app server (every member is removed; log format 7).
    case roomDestroy
    /// QS-1, QS-4: an app's message-type lists and a room's protected senders (log format 7).
    case messageListAdd
    case messageListRemove
    case protectedSenderAdd
    case protectedSenderRemove
}

/// One entry of an app's audit trail.
public struct AuditEntry: Codable, Equatable, Sendable {
    /// Increases by one with each entry of the app (the paging cursor).
    public var id: Int64
    /// When the command was applied (ms, the log's time).
    public var time: Int64
    public var actor: AuditActor
    public var surface: AuditSurface
    public var action: AuditAction
    /// The room acted on ("" for app-wide actions: global mutes, sensitive words).
    public var roomId: String
    /// What was acted on: user ids, the words, the tag, or the recalled message's sender; at most
    /// `Limits.auditMaxTargets`.
    public var targets: [String]
    /// How many targets the command named (more than `targets` holds when it named too many).
    public var targetCount: Int
    /// MO-1: the recalled message.
    public var messageId: String?
    /// How long a mute, block or tag mute lasts (ms); nil when it has no end or no duration.
    public var durationMs: Int64?
    /// More of what was done: the role given, which mutes an unmute lifts ("" when nothing).
    public var detail: String

    public init(id: Int64, time: Int64, actor: AuditActor, surface: AuditSurface, action: AuditAction, roomId: String, targets: [String],
                targetCount: Int? = nil, messageId: String? = nil, durationMs: Int64? = nil, detail: String = "") {
        self.id = id
        self.time = time
        self.actor = actor
        self.surface = surface
        self.action = action
        self.roomId = roomId
        self.targets = targets
        self.targetCount = targetCount ?? targets.count
        self.messageId = messageId
        self.durationMs = durationMs
        self.detail = detail
    }

    /// `s` cut to at most `Limits.auditMaxStringBytes` bytes, on a character boundary.
    static func bounded(_ s: String) -> String {
        guard s.utf8.count > Limits.auditMaxStringBytes else { return s }
        var out = ""
        var bytes = 0
        for c in s {
            let n = c.utf8.count
            guard bytes + n <= Limits.auditMaxStringBytes else { break }
            out.append(c)
            bytes += n
        }
        return out
    }
}

/// An app's trail: its newest entries, oldest first.
struct AuditTrail {
    private(set) var entries: [AuditEntry] = []
    /// The id the next entry gets.
    private(set) var nextId: Int64 = 1

    init() {}

    /// A trail holding these entries (oldest first), as an image or the store has them.
    init(entries: [AuditEntry]) {
        self.entries = Array(entries.suffix(Limits.auditEntriesPerApp))
        nextId = (entries.last?.id ?? 0) + 1
    }

    mutating func append(_ e: AuditEntry) {
        entries.append(e)
        nextId = e.id + 1
        if entries.count > Limits.auditEntriesPerApp { entries.removeFirst(entries.count - Limits.auditEntriesPerApp) }
    }

    /// Newest first: the entries (of one room, when given) older than `before`, at most `limit`,
    /// and the cursor for the next page when older ones follow.
    func page(roomId: String?, before: Int64?, limit: Int) -> (entries: [AuditEntry], next: Int64?) {
        var out: [AuditEntry] = []
        var i = entries.count - 1
        while i >= 0 {
            let e = entries[i]
            i -= 1
            if let before, e.id >= before { continue }
            if let roomId, e.roomId != roomId { continue }
            if out.count == limit { return (out, out.last?.id) }
            out.append(e)
        }
        return (out, nil)
    }
}

extension ChatDomain {
    /// Appends an entry for a moderation action that was just applied (handlers call it last,
    /// once nothing can refuse the command any more).
    func audit(_ app: AppState, _ action: AuditAction, by actor: Actor, roomId: String, targets: [String] = [], messageId: String? = nil,
               durationMs: Int64? = nil, detail: String = "", now: Int64, _ out: inout Outcome) {
        let who: AuditActor
        switch actor {
        case .server: who = AuditActor(kind: .server)
        case .account(let user): who = AuditActor(kind: .operator, userId: AuditEntry.bounded(user))
        case .session(let sid): who = AuditActor(kind: .user, userId: AuditEntry.bounded(sessions[sid]?.userId ?? ""))
        }
        let surface = auditSurface ?? (actor.session != nil ? .client : .native)
        let entry = AuditEntry(id: app.audit.nextId, time: now, actor: who, surface: surface, action: action, roomId: AuditEntry.bounded(roomId),
                               targets: targets.prefix(Limits.auditMaxTargets).map(AuditEntry.bounded), targetCount: targets.count,
                               messageId: messageId.map(AuditEntry.bounded), durationMs: durationMs, detail: AuditEntry.bounded(detail))
        app.audit.append(entry)
        out.mutations.append(.appendAudit(app: app.key, entry))
    }

    /// The app's audit trail, newest first (→ `Reply.audit`).
    func auditPage(_ appKey: String, roomId: String?, before: Int64?, limit: Int) throws(ChatError) -> Reply {
        let app = try app(appKey)
        guard limit >= 1 && limit <= Limits.maxAuditPage else {
            throw .invalid("limit", "limit must be between 1 and \(Limits.maxAuditPage)")
        }
        if let before, before < 1 { throw .invalid("before", "before is an entry id (1 or more)") }
        if let roomId { try Validate.maxBytes(roomId, Limits.maxRoomIdBytes, field: "roomId") }
        let page = app.audit.page(roomId: roomId, before: before, limit: limit)
        return .audit(page.entries, next: page.next)
    }

    /// Start-up: the app's kept entries, oldest first.
    public func restoreAudit(app: String, _ entries: [AuditEntry]) {
        apps[app]?.audit = AuditTrail(entries: entries)
    }
}
