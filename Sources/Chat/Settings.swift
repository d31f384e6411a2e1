/// Per-app behaviour switches (the vendors' console settings).
public struct AppSettings: Equatable, Sendable, Codable {
    /// RC-2/ZIM-4: tell other members who joined and left (`memberChanged`). It multiplies
    /// traffic, so it can be switched off.
    public var memberChangeEvents = true
    /// RC-4: a user may be in several rooms at once. Off by default, as RongCloud's console
    /// setting "a single user joins multiple chatrooms": joining a second room then moves the user
    /// out of the first (every device), and the user and that room's members are told. An app
    /// enables it (then NIM-2's `maxRoomsPerUser` caps the rooms).
    public var multipleRoomsPerUser = false
    /// NIM-9: enter/exit notifications (301/302) for the app (rooms can switch them off too).
    public var enterExitNotifications = true
    /// NIM-2: rooms one user may be in at once (when several are allowed).
    public var maxRoomsPerUser = 10
    /// ZIM-5: rooms the app may have; creation beyond it is refused. 0 = no limit.
    public var maxRooms = Limits.defaultMaxRooms
    /// Rooms one user's clients may create (join with enter/create, switch) per minute; the app
    /// server's own creations do not count. 0 = no limit.
    public var roomCreatesPerUserPerMinute = Limits.defaultRoomCreatesPerUserPerMinute
    /// Messages the app keeps on disk in all its rooms together; the oldest go first.
    public var historyLimitPerApp = Limits.defaultHistoryLimitPerApp
    /// NIM-8: how long room messages are kept, in milliseconds (10 days).
    public var historyRetentionMilliseconds: Int64 = 10 * 24 * 3600 * 1000
    /// Messages kept in memory per room for history queries (older ones are only in the store).
    public var historyLimitPerRoom = 1000
    /// NIM-8: largest message content in bytes.
    public var maxMessageBytes = Limits.defaultMaxMessageBytes
    /// NIM-16: default queue capacity of a room.
    public var defaultQueueLimit = 1000
    /// CS-4: the app's default Do-Not-Disturb level (the lowest priority).
    public var notificationLevel = NotificationLevel.default
    /// The app's WebSocket `Origin` allowlist (exact origins, `*`, or `*.host` patterns); nil allows
    /// any origin. Never empty: an empty list is stored as nil.
    public var allowedOrigins: [String]?
    /// PX-1: signed REST calls the app may make per second (all its surfaces together).
    public var restCallsPerSecond = Limits.defaultRestCallsPerSecond
    /// PX-1: messages one client connection may send per second.
    public var clientMessagesPerSecond = Limits.defaultClientMessagesPerSecond
    /// PX-1: room messages one user may send per second from its clients (all devices together).
    public var sendsPerUserPerSecond = Limits.defaultSendsPerUserPerSecond
    /// PX-4: the app's before-send hook (its moderation endpoint); nil: no hook.
    public var beforeSend: BeforeSendSettings?
    /// QS-2: messages one room accepts per second (RongCloud's published figure: 40 per 200 ms),
    /// the bucket holding a fifth of a second's worth; past it low, then normal messages are
    /// refused (42902), while high ones may use the reserved share.
    public var roomMessagesPerSecond = Limits.defaultRoomMessagesPerSecond
    /// QS-2: the share of a room's budget (percent) only high-priority messages may use.
    public var highPriorityReservePercent = Limits.defaultHighPriorityReservePercent
    /// QS-1 (RongCloud's low-priority message types, Nexconn's low-priority type list): messages
    /// of these types are low priority unless their sender or type is protected.
    public var lowPriorityMessageTypes: [String] = []
    /// QS-4 (RongCloud's message-type allowlist, Nexconn's priority type list): messages of these
    /// types are high priority, never dropped.
    public var protectedMessageTypes: [String] = []
    /// QS-4 (Nexconn's priority sender list): these users' messages are high priority in every room.
    public var prioritySenders: [String] = []
    /// QS-5: transient messages are sent to webhooks too (by default they are not).
    public var transientWebhooks = false
    /// MO-1: how long after sending a member may recall its own message from its client (the
    /// vendors' default of two minutes); 0: members may not recall their own messages. The room's
    /// creator and managers, and the app server, are not bound by it.
    public var recallWindowSeconds = Limits.defaultRecallWindowSeconds
    /// MO-2: the app's sensitive words (RongCloud's `/sensitiveword/*`), at most
    /// `Limits.maxSensitiveWordsPerApp`, unique by `SensitiveWord.key`. Checked on the text
    /// messages of clients, and of the app server when `sensitiveWordsOnServerSends` is on.
    public var sensitiveWords: [SensitiveWord] = []
    /// MO-2: the app server's messages are checked too (RongCloud does not by default).
    public var sensitiveWordsOnServerSends = false
    /// AU-4: past this many members present in a room, its members no longer get one event per
    /// join and departure (`room.memberChanged`, NIM's 301/302 notifications): they get one
    /// `room.members` summary per `memberSummaryIntervalMilliseconds` instead. 0 (the default):
    /// never, every member event goes out as the vendors send it.
    public var memberEventsThreshold = 0
    /// AU-4: how often a room's `room.members` summary may go out.
    public var memberSummaryIntervalMilliseconds = Limits.defaultMemberSummaryIntervalMilliseconds

    public init() {}

    /// Settings stored by an older version lack newer fields: those take their defaults.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = AppSettings()
        memberChangeEvents = try c.decodeIfPresent(Bool.self, forKey: .memberChangeEvents) ?? d.memberChangeEvents
        multipleRoomsPerUser = try c.decodeIfPresent(Bool.self, forKey: .multipleRoomsPerUser) ?? d.multipleRoomsPerUser
        enterExitNotifications = try c.decodeIfPresent(Bool.self, forKey: .enterExitNotifications) ?? d.enterExitNotifications
        maxRoomsPerUser = try c.decodeIfPresent(Int.self, forKey: .maxRoomsPerUser) ?? d.maxRoomsPerUser
        maxRooms = try c.decodeIfPresent(Int.self, forKey: .maxRooms) ?? d.maxRooms
        roomCreatesPerUserPerMinute = try c.decodeIfPresent(Int.self, forKey: .roomCreatesPerUserPerMinute) ?? d.roomCreatesPerUserPerMinute
        historyLimitPerApp = try c.decodeIfPresent(Int.self, forKey: .historyLimitPerApp) ?? d.historyLimitPerApp
        historyRetentionMilliseconds = try c.decodeIfPresent(Int64.self, forKey: .historyRetentionMilliseconds) ?? d.historyRetentionMilliseconds
        historyLimitPerRoom = try c.decodeIfPresent(Int.self, forKey: .historyLimitPerRoom) ?? d.historyLimitPerRoom
        maxMessageBytes = try c.decodeIfPresent(Int.self, forKey: .maxMessageBytes) ?? d.maxMessageBytes
        defaultQueueLimit = try c.decodeIfPresent(Int.self, forKey: .defaultQueueLimit) ?? d.defaultQueueLimit
        notificationLevel = try c.decodeIfPresent(NotificationLevel.self, forKey: .notificationLevel) ?? d.notificationLevel
        allowedOrigins = try c.decodeIfPresent([String].self, forKey: .allowedOrigins)
        restCallsPerSecond = try c.decodeIfPresent(Int.self, forKey: .restCallsPerSecond) ?? d.restCallsPerSecond
        clientMessagesPerSecond = try c.decodeIfPresent(Int.self, forKey: .clientMessagesPerSecond) ?? d.clientMessagesPerSecond
        sendsPerUserPerSecond = try c.decodeIfPresent(Int.self, forKey: .sendsPerUserPerSecond) ?? d.sendsPerUserPerSecond
        beforeSend = try c.decodeIfPresent(BeforeSendSettings.self, forKey: .beforeSend)
        roomMessagesPerSecond = try c.decodeIfPresent(Int.self, forKey: .roomMessagesPerSecond) ?? d.roomMessagesPerSecond
        highPriorityReservePercent = try c.decodeIfPresent(Int.self, forKey: .highPriorityReservePercent) ?? d.highPriorityReservePercent
        lowPriorityMessageTypes = try c.decodeIfPresent([String].self, forKey: .lowPriorityMessageTypes) ?? d.lowPriorityMessageTypes
        protectedMessageTypes = try c.decodeIfPresent([String].self, forKey: .protectedMessageTypes) ?? d.protectedMessageTypes
        prioritySenders = try c.decodeIfPresent([String].self, forKey: .prioritySenders) ?? d.prioritySenders
        transientWebhooks = try c.decodeIfPresent(Bool.self, forKey: .transientWebhooks) ?? d.transientWebhooks
        recallWindowSeconds = try c.decodeIfPresent(Int.self, forKey: .recallWindowSeconds) ?? d.recallWindowSeconds
        sensitiveWords = try c.decodeIfPresent([SensitiveWord].self, forKey: .sensitiveWords) ?? d.sensitiveWords
        sensitiveWordsOnServerSends = try c.decodeIfPresent(Bool.self, forKey: .sensitiveWordsOnServerSends) ?? d.sensitiveWordsOnServerSends
        memberEventsThreshold = try c.decodeIfPresent(Int.self, forKey: .memberEventsThreshold) ?? d.memberEventsThreshold
        memberSummaryIntervalMilliseconds = try c.decodeIfPresent(Int.self, forKey: .memberSummaryIntervalMilliseconds)
            ?? d.memberSummaryIntervalMilliseconds
    }

    /// QS-1, QS-4: the app's lists that decide a message's class.
    public enum MessageList: String, Equatable, Sendable, Codable, CaseIterable {
        case lowPriorityMessageTypes
        case protectedMessageTypes
        case prioritySenders

        /// The most entries a list holds, and the bytes of one.
        public var maxEntries: Int { SettingsLimits.maxListEntries }
        public var maxEntryBytes: Int { self == .prioritySenders ? Limits.maxUserIdBytes : SettingsLimits.maxMessageTypeBytes }
    }

    public subscript(list list: MessageList) -> [String] {
        get {
            switch list {
            case .lowPriorityMessageTypes: return lowPriorityMessageTypes
            case .protectedMessageTypes: return protectedMessageTypes
            case .prioritySenders: return prioritySenders
            }
        }
        set {
            switch list {
            case .lowPriorityMessageTypes: lowPriorityMessageTypes = newValue
            case .protectedMessageTypes: protectedMessageTypes = newValue
            case .prioritySenders: prioritySenders = newValue
            }
        }
    }
}

/// PX-4: where and how an app's room messages are checked before fan-out (RongCloud's message
/// callback, Nexconn's `pre_messaging`). The hook answers pass, drop or replace; no answer within
/// the timeout (or a broken one) passes the message when the app fails open, refuses it when it
/// fails closed.
public struct BeforeSendSettings: Equatable, Sendable, Codable {
    /// An absolute http or https URL (the gateway also applies the webhook egress policy to it).
    public var url: String
    public var timeoutMilliseconds = Limits.defaultBeforeSendTimeoutMilliseconds
    /// true: a message the hook did not judge in time is sent; false: it is refused (50302).
    public var failOpen = true
    /// true: messages the app server sends through REST skip the hook (RongCloud's default).
    public var bypassServerMessages = false
    /// How the request is signed: "standard" (Standard Webhooks headers keyed by the app secret),
    /// "rongcloud" (signature in the query string) or "nim" (CheckSum headers).
    public var signing = "standard"

    public init(url: String) { self.url = url }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let d = BeforeSendSettings(url: "")
        url = try c.decode(String.self, forKey: .url)
        timeoutMilliseconds = try c.decodeIfPresent(Int.self, forKey: .timeoutMilliseconds) ?? d.timeoutMilliseconds
        failOpen = try c.decodeIfPresent(Bool.self, forKey: .failOpen) ?? d.failOpen
        bypassServerMessages = try c.decodeIfPresent(Bool.self, forKey: .bypassServerMessages) ?? d.bypassServerMessages
        signing = try c.decodeIfPresent(String.self, forKey: .signing) ?? d.signing
    }

    public static let signings = ["standard", "rongcloud", "nim"]
}

/// A change of the before-send hook: `url` "" removes it; nil fields keep their value (a new hook
/// takes the defaults).
public struct BeforeSendPatch: Equatable, Sendable, Codable {
    public var url: String?
    public var timeoutMilliseconds: Int?
    public var failOpen: Bool?
    public var bypassServerMessages: Bool?
    public var signing: String?
    public init(url: String? = nil, timeoutMilliseconds: Int? = nil, failOpen: Bool? = nil, bypassServerMessages: Bool? = nil, signing: String? = nil) {
        self.url = url
        self.timeoutMilliseconds = timeoutMilliseconds
        self.failOpen = failOpen
        self.bypassServerMessages = bypassServerMessages
        self.signing = signing
    }

    /// nil: the hook is removed (or stays absent).
    func applied(to current: BeforeSendSettings?) throws(ChatError) -> BeforeSendSettings? {
        typealias L = SettingsLimits
        if url == "" { return nil }
        var s: BeforeSendSettings
        if let url {
            guard url.utf8.count <= L.maxBeforeSendURLBytes,
                  // Schemes are case-insensitive (RFC 3986 §3.1), as the egress check takes them.
                  url.lowercased().hasPrefix("http://") || url.lowercased().hasPrefix("https://"), url.utf8.count > 8 else {
                throw .invalid("beforeSend.url", "beforeSend.url must be an absolute http or https URL of at most \(L.maxBeforeSendURLBytes) bytes (\"\" removes the hook)")
            }
            s = current ?? BeforeSendSettings(url: url)
            s.url = url
        } else {
            guard let current else {
                throw .invalid("beforeSend.url", "beforeSend.url is required to set up a before-send hook")
            }
            s = current
        }
        if let v = timeoutMilliseconds {
            guard L.beforeSendTimeoutMilliseconds.contains(v) else { throw L.rangeError("beforeSend.timeoutMs", L.beforeSendTimeoutMilliseconds) }
            s.timeoutMilliseconds = v
        }
        if let v = failOpen { s.failOpen = v }
        if let v = bypassServerMessages { s.bypassServerMessages = v }
        if let v = signing {
            guard BeforeSendSettings.signings.contains(v) else {
                throw .invalid("beforeSend.signing", "beforeSend.signing must be one of \(BeforeSendSettings.signings.joined(separator: ", "))")
            }
            s.signing = v
        }
        return s
    }
}

/// A partial change of an app's settings (`Command.updateAppSettings`): nil leaves a field as it
/// is. The domain validates every present field against `SettingsLimits` and merges them into the
/// app's current settings in one step, so changes of different fields never lose each other.
public struct AppSettingsPatch: Equatable, Sendable, Codable {
    public var memberChangeEvents: Bool?
    public var multipleRoomsPerUser: Bool?
    public var enterExitNotifications: Bool?
    public var maxRoomsPerUser: Int?
    public var maxRooms: Int?
    /// In seconds (the settings keep milliseconds).
    public var historyRetentionSeconds: Int64?
    public var historyLimitPerRoom: Int?
    public var maxMessageBytes: Int?
    public var defaultQueueLimit: Int?
    public var notificationLevel: NotificationLevel?
    /// An empty list clears the allowlist (nil: any origin).
    public var allowedOrigins: [String]?
    public var roomCreatesPerUserPerMinute: Int?
    public var historyLimitPerApp: Int?
    public var restCallsPerSecond: Int?
    public var clientMessagesPerSecond: Int?
    public var sendsPerUserPerSecond: Int?
    public var beforeSend: BeforeSendPatch?
    public var roomMessagesPerSecond: Int?
    public var highPriorityReservePercent: Int?
    /// Each replaces its list whole (QS-1, QS-4).
    public var lowPriorityMessageTypes: [String]?
    public var protectedMessageTypes: [String]?
    public var prioritySenders: [String]?
    public var transientWebhooks: Bool?
    public var recallWindowSeconds: Int?
    public var sensitiveWordsOnServerSends: Bool?
    /// AU-4.
    public var memberEventsThreshold: Int?
    public var memberSummaryIntervalMilliseconds: Int?

    public init(memberChangeEvents: Bool? = nil, multipleRoomsPerUser: Bool? = nil, enterExitNotifications: Bool? = nil,
                maxRoomsPerUser: Int? = nil, maxRooms: Int? = nil, historyRetentionSeconds: Int64? = nil, historyLimitPerRoom: Int? = nil,
                maxMessageBytes: Int? = nil, defaultQueueLimit: Int? = nil, notificationLevel: NotificationLevel? = nil,
                allowedOrigins: [String]? = nil, roomCreatesPerUserPerMinute: Int? = nil, historyLimitPerApp: Int? = nil) {
        self.roomCreatesPerUserPerMinute = roomCreatesPerUserPerMinute
        self.historyLimitPerApp = historyLimitPerApp
        self.memberChangeEvents = memberChangeEvents
        self.multipleRoomsPerUser = multipleRoomsPerUser
        self.enterExitNotifications = enterExitNotifications
        self.maxRoomsPerUser = maxRoomsPerUser
        self.maxRooms = maxRooms
        self.historyRetentionSeconds = historyRetentionSeconds
        self.historyLimitPerRoom = historyLimitPerRoom
        self.maxMessageBytes = maxMessageBytes
        self.defaultQueueLimit = defaultQueueLimit
        self.notificationLevel = notificationLevel
        self.allowedOrigins = allowedOrigins
    }

    /// `settings` with every present field applied, or the first bad field's error (in
    /// declaration order). Nothing is applied unless every field is valid.
    func applied(to settings: AppSettings) throws(ChatError) -> AppSettings {
        typealias L = SettingsLimits
        var s = settings
        if let v = memberChangeEvents { s.memberChangeEvents = v }
        if let v = multipleRoomsPerUser { s.multipleRoomsPerUser = v }
        if let v = enterExitNotifications { s.enterExitNotifications = v }
        if let v = maxRoomsPerUser {
            guard L.maxRoomsPerUser.contains(v) else { throw L.rangeError("maxRoomsPerUser", L.maxRoomsPerUser) }
            s.maxRoomsPerUser = v
        }
        if let v = maxRooms {
            guard v >= L.minMaxRooms else { throw .invalid("maxRooms", "maxRooms must not be negative") }
            s.maxRooms = v
        }
        if let v = historyRetentionSeconds {
            guard L.historyRetentionSeconds.contains(v) else { throw L.rangeError("historyRetentionSeconds", L.historyRetentionSeconds) }
            s.historyRetentionMilliseconds = v * 1000
        }
        if let v = historyLimitPerRoom {
            guard L.historyLimitPerRoom.contains(v) else { throw L.rangeError("historyLimitPerRoom", L.historyLimitPerRoom) }
            s.historyLimitPerRoom = v
        }
        if let v = maxMessageBytes {
            guard L.maxMessageBytes.contains(v) else { throw L.rangeError("maxMessageBytes", L.maxMessageBytes) }
            s.maxMessageBytes = v
        }
        if let v = defaultQueueLimit {
            guard L.defaultQueueLimit.contains(v) else { throw L.rangeError("defaultQueueLimit", L.defaultQueueLimit) }
            s.defaultQueueLimit = v
        }
        if let v = notificationLevel { s.notificationLevel = v }
        if let v = roomCreatesPerUserPerMinute {
            guard L.roomCreatesPerUserPerMinute.contains(v) else { throw L.rangeError("roomCreatesPerUserPerMinute", L.roomCreatesPerUserPerMinute) }
            s.roomCreatesPerUserPerMinute = v
        }
        if let v = historyLimitPerApp {
            guard L.historyLimitPerApp.contains(v) else { throw L.rangeError("historyLimitPerApp", L.historyLimitPerApp) }
            s.historyLimitPerApp = v
        }
        if let v = restCallsPerSecond {
            guard L.ratePerSecond.contains(v) else { throw L.rangeError("restCallsPerSecond", L.ratePerSecond) }
            s.restCallsPerSecond = v
        }
        if let v = clientMessagesPerSecond {
            guard L.ratePerSecond.contains(v) else { throw L.rangeError("clientMessagesPerSecond", L.ratePerSecond) }
            s.clientMessagesPerSecond = v
        }
        if let v = sendsPerUserPerSecond {
            guard L.ratePerSecond.contains(v) else { throw L.rangeError("sendsPerUserPerSecond", L.ratePerSecond) }
            s.sendsPerUserPerSecond = v
        }
        if let v = beforeSend { s.beforeSend = try v.applied(to: s.beforeSend) }
        if let v = roomMessagesPerSecond {
            guard L.roomMessagesPerSecond.contains(v) else { throw L.rangeError("roomMessagesPerSecond", L.roomMessagesPerSecond) }
            s.roomMessagesPerSecond = v
        }
        if let v = highPriorityReservePercent {
            guard L.highPriorityReservePercent.contains(v) else { throw L.rangeError("highPriorityReservePercent", L.highPriorityReservePercent) }
            s.highPriorityReservePercent = v
        }
        for (list, value) in [(AppSettings.MessageList.lowPriorityMessageTypes, lowPriorityMessageTypes),
                              (.protectedMessageTypes, protectedMessageTypes), (.prioritySenders, prioritySenders)] {
            guard let value else { continue }
            s[list: list] = try L.validatedList(value, list)
        }
        if let v = transientWebhooks { s.transientWebhooks = v }
        if let v = recallWindowSeconds {
            guard L.recallWindowSeconds.contains(v) else { throw L.rangeError("recallWindowSeconds", L.recallWindowSeconds) }
            s.recallWindowSeconds = v
        }
        if let v = sensitiveWordsOnServerSends { s.sensitiveWordsOnServerSends = v }
        if let v = memberEventsThreshold {
            guard L.memberEventsThreshold.contains(v) else { throw L.rangeError("memberEventsThreshold", L.memberEventsThreshold) }
            s.memberEventsThreshold = v
        }
        if let v = memberSummaryIntervalMilliseconds {
            guard L.memberSummaryIntervalMilliseconds.contains(v) else {
                throw L.rangeError("memberSummaryIntervalMs", L.memberSummaryIntervalMilliseconds)
            }
            s.memberSummaryIntervalMilliseconds = v
        }
        if let v = allowedOrigins {
            try L.validateAllowedOrigins(v)
            s.allowedOrigins = v.isEmpty ? nil : v
        }
        return s
    }
}

/// Bounds of the app settings a client may set (`AppSettingsPatch`), declared once for
/// validation and for the published API documents.
public enum SettingsLimits {
    public static let maxRoomsPerUser: ClosedRange<Int> = 1...1000
    /// `maxRooms` has no upper bound (0 = no limit).
    public static let minMaxRooms = 0
    /// One minute to 365 days.
    public static let historyRetentionSeconds: ClosedRange<Int64> = 60...31_536_000
    public static let historyLimitPerRoom: ClosedRange<Int> = 1...100_000
    public static let maxMessageBytes: ClosedRange<Int> = 1...1_048_576
    public static let defaultQueueLimit: ClosedRange<Int> = 1...10_000
    /// 0 = no limit.
    public static let roomCreatesPerUserPerMinute: ClosedRange<Int> = 0...10_000
    public static let historyLimitPerApp: ClosedRange<Int> = 1...100_000_000
    /// MO-1: 0 (members may not recall their own messages) to a day, as ZIM's longest window.
    public static let recallWindowSeconds: ClosedRange<Int> = 0...86_400
    /// PX-1 rates (per second; a bucket holds one second's worth).
    public static let ratePerSecond: ClosedRange<Int> = 1...1_000_000
    public static let maxAllowedOrigins = 100
    /// PX-4: how long the before-send hook may take (milliseconds).
    public static let beforeSendTimeoutMilliseconds: ClosedRange<Int> = 50...10_000
    public static let maxBeforeSendURLBytes = 2048
    /// Bytes (UTF-8) of one allowed origin.
    public static let allowedOriginBytes: ClosedRange<Int> = 1...256
    /// QS-2: a room's message budget per second, and the share only high priority may use.
    public static let roomMessagesPerSecond: ClosedRange<Int> = 1...100_000
    public static let highPriorityReservePercent: ClosedRange<Int> = 0...90
    /// QS-1, QS-4: entries of each of an app's message lists, and the bytes of a message type.
    public static let maxListEntries = 100
    public static let maxMessageTypeBytes = 64
    /// AU-4: members present past which a room's member events are summarized (0 = never), and
    /// how often a summary may go out (milliseconds).
    public static let memberEventsThreshold: ClosedRange<Int> = 0...1_000_000
    public static let memberSummaryIntervalMilliseconds: ClosedRange<Int> = 100...60_000

    /// A list as given, checked (each entry 1 to its bytes, at most `maxListEntries`), without
    /// repeats, in the order given.
    static func validatedList(_ entries: [String], _ list: AppSettings.MessageList) throws(ChatError) -> [String] {
        var seen = Set<String>(), out: [String] = []
        for e in entries where seen.insert(e).inserted {
            guard !e.isEmpty, e.utf8.count <= list.maxEntryBytes else {
                throw .invalid(list.rawValue, "\(list.rawValue) entries are 1 to \(list.maxEntryBytes) bytes")
            }
            out.append(e)
        }
        guard out.count <= maxListEntries else { throw .invalid(list.rawValue, "\(list.rawValue) holds at most \(maxListEntries) entries") }
        return out
    }

    static func rangeError<T: BinaryInteger>(_ field: String, _ range: ClosedRange<T>) -> ChatError {
        .invalid(field, "\(field) must be \(range.lowerBound) to \(range.upperBound)")
    }

    /// At most `maxAllowedOrigins` origins of `allowedOriginBytes` each.
    static func validateAllowedOrigins(_ origins: [String]) throws(ChatError) {
        guard origins.count <= maxAllowedOrigins, origins.allSatisfy({ allowedOriginBytes.contains($0.utf8.count) }) else {
            throw .invalid("allowedOrigins", "allowedOrigins holds up to \(maxAllowedOrigins) origins")
        }
    }
}

/// When an idle or finished room is destroyed automatically (RC-9, ZIM-7).
public enum DestroyPolicy: Equatable, Sendable, Codable {
    /// RC type 0: after this many minutes without a message or a join (60…10080).
    case inactive(minutes: Int)
    /// RC type 1: this many minutes after creation (60…10080).
    case fixed(minutes: Int)
    /// ZIM: this many seconds after the last member left (0…10800).
    case whenEmpty(seconds: Int)

    public static let `default` = DestroyPolicy.inactive(minutes: 60)
}

/// NIM-4: may one user be in the room from several devices at once?
public enum MultiDevicePolicy: String, Equatable, Sendable, Codable {
    case single
    case multiple
}

/// NIM-1: who may change the queue.
public enum QueueModificationLevel: Int, Equatable, Sendable, Codable {
    case anyone = 0
    case managers = 1
}

/// Everything a room is created with. Fields are validated by `validate()` before anything changes.
public struct RoomConfig: Equatable, Sendable, Codable {
    public var roomId: String
    public var name = ""
    public var announcement = ""
    public var ext = ""
    public var broadcastUrl = ""
    public var creator: String?
    public var queueModificationLevel = QueueModificationLevel.anyone
    public var destroyPolicy = DestroyPolicy.default
    public var keepAlive = false
    public var multiDevice = MultiDevicePolicy.multiple
    public var muted = false
    public var muteAllowlist: [String] = []
    public var attributes: [String: String] = [:]
    public var attributesOwner: String?
    public var enterExitNotifications = true
    public var queueLimit: Int?

    public init(roomId: String) {
        self.roomId = roomId
    }
}

/// Limits shared by validation (SPEC RC-8, RC-9, RC-10, NIM-1, NIM-16, ZIM-7/8).
public enum Limits {
    public static let maxRoomIdBytes = 64
    /// TR-1, TR-2: rooms one HTTP event stream or long-poll session may name (its `rooms`, and
    /// so its resume cursor).
    public static let maxStreamRooms = 20
    /// TR-1: the default seconds between heartbeat comments on an idle event stream
    /// (`--sse-heartbeat`).
    public static let defaultSSEHeartbeatSeconds = 15
    /// TR-2: the longest a poll waits for events (`wait`), and how long it waits when it does not say.
    public static let maxPollWaitSeconds = 30
    public static let defaultPollWaitSeconds = 20
    /// TR-2: a long-poll session no poll has reached for this long is closed and forgotten.
    public static let pollSessionTimeoutSeconds = 60
    /// TR-5: room aliases one node hands out (compact WebSocket connections' join, switch and
    /// observe answers). An alias is never reused nor changes meaning while the node runs, so the
    /// table only grows: past this many (app, room) keys, further rooms get no alias and their
    /// compact events carry the room id, as before. At most about 100 bytes an entry (two ids of
    /// at most 64 bytes, shared with the rooms' own keys): a few MB at the bound.
    public static let maxRoomAliases = 65_536
    /// Rooms one observer connection may watch at once (BX-3, `room.observe`).
    public static let maxObservedRooms = 100
    /// TR-4: the most messages a join may ask to be given first (RongCloud gives a new member up
    /// to the room's last 50).
    public static let maxRewindMessages = 50
    /// Rooms per page of the room directory (PX-5), and the default.
    public static let maxDirectoryPage = 100
    public static let defaultDirectoryPage = 20
    /// The reason an app server gives when it disconnects a user's connections (PX-5): it is the
    /// WebSocket close reason, which must fit a control frame (123 bytes).
    public static let maxDisconnectReasonBytes = 100
    /// Users one presence query may name (PX-3).
    public static let maxPresenceQueryUsers = 100
    /// PX-1 defaults of a new app (`PATCH /v1/settings` changes them) and of the server.
    public static let defaultRestCallsPerSecond = 1000
    public static let defaultClientMessagesPerSecond = 50
    public static let defaultSendsPerUserPerSecond = 20
    /// QS-2: RongCloud's published figure, 40 messages per 200 ms.
    public static let defaultRoomMessagesPerSecond = 200
    /// QS-2: RongCloud keeps 20 of its 40 per 200 ms for high-priority messages only.
    public static let defaultHighPriorityReservePercent = 50
    /// AU-1: a member's tags (NIM's), the bytes of one, what an expression may name, and the
    /// distinct tags a room's members may carry (the room's tag index).
    public static let maxTagsPerMember = 10
    public static let maxTagBytes = 32
    public static let maxTagExpressionTerms = 20
    public static let maxTagExpressionDepth = 4
    public static let maxTagsPerRoom = 1000
    /// AU-1: the longest tag mute (NIM's temporary mutes: 30 days).
    public static let maxTagMuteSeconds = 30 * 24 * 3600
    /// AU-2: the members a message may be addressed to (NIM's receiver list).
    public static let maxMessageTargets = 100
    /// AU-3: the rooms one list send may name (RongCloud's recommended most, Nexconn's
    /// `toChannelIds`), and an app's broadcasts a second (RongCloud's rate for its chatroom
    /// broadcast).
    public static let maxRoomsPerSend = 10
    public static let broadcastsPerSecond = 1
    /// QS-4: protected senders per room (RongCloud's chatroom user whitelist).
    public static let maxProtectedSendersPerRoom = 5
    /// QS-3: bytes a connection may hold queued before its normal messages are dropped (low and
    /// transient ones past a quarter of it): a sixteenth of the hard bound (`--max-outbound-bytes`,
    /// 4 MiB by default).
    public static let outboundSoftFraction = 16
    public static let defaultOutboundSoftBytes = (4 << 20) / outboundSoftFraction
    /// QS-3: low and transient messages are dropped past this fraction of the soft mark.
    public static let lowMarkFraction = 4
    /// QS-2: how far behind a node's I/O loops may be before rooms of at least
    /// `overloadMinAudience` members refuse all but high-priority messages (the high-priority
    /// target is 150 ms at the 99th percentile).
    public static let defaultFanoutLatencyBudgetMilliseconds: Int64 = 100
    public static let overloadMinAudience = 100
    /// TR-5: milliseconds a WebSocket's events may wait to be written with the next ones
    /// (`--write-delay`; Centrifugo PRO's `client.write_delay`); 0 holds nothing.
    public static let writeDelayMilliseconds = 0...1000
    /// TR-5: the default write delay. Only a room that sent a normal, low or transient message in
    /// the window before has its next ones held, so a room quieter than that is never delayed,
    /// whatever the other rooms do; events that are never dropped (high priority, system) and
    /// events to users rather than rooms are never held. Past a room's 33 events a second it costs
    /// at most 30 ms of latency for about half the writes (BENCHMARKS.md, the write delay).
    public static let defaultWriteDelayMilliseconds = 30
    /// QS-2: the seconds a room over its budget asks senders to wait (`Retry-After`).
    public static let roomBudgetRetryAfterSeconds = 1
    public static let defaultConnectsPerIPPerSecond = 50
    /// A connection that goes on sending this many seconds' worth of its rate past the limit is closed (4029).
    public static let floodSecondsBeforeClose = 2
    /// What a rate-limited caller is told to wait (seconds): a bucket refills at least one token a second.
    public static let rateLimitRetryAfterSeconds = 1
    /// PX-2: answers kept per app for Idempotency-Key replays (the oldest go first past it), and
    /// for how long (in a cluster also the keys claimed and not answered yet, in log time).
    public static let maxIdempotentAnswersPerApp = 100_000
    public static let idempotencyRetentionMilliseconds: Int64 = 24 * 3600 * 1000
    /// Cluster mode: request nonces every node remembers per app (`RequestLedger`), for twice
    /// the signature window of log time. 1,000,000 covers 1,666 signed calls a second for the
    /// whole 600 s (the default limit is 1,000); past it the oldest are forgotten early, and the
    /// nodes' own caches, which learn every nonce from the log, still refuse them.
    public static let maxClusterNoncesPerApp = 1_000_000
    /// Cluster mode: records a node appends without waiting for them (nonces of calls that made
    /// no change, kept answers, released keys) that are held while PostgreSQL cannot be reached,
    /// and appended when it can; past either bound the oldest are dropped (and logged).
    public static let maxOwedClusterRecords = 10_000
    public static let maxOwedClusterBytes = 16 * 1_048_576
    /// PX-4: the before-send hook's default timeout, and what the server holds for it: messages
    /// waiting for a verdict per app, their bytes per app and in all (counted as their requests
    /// are sent, twice: ours and libcurl's copy; past any bound a message is refused with 42901
    /// whatever the app's policy), the bytes of a hook's answer that are read, and of a drop
    /// reason passed on.
    public static let defaultBeforeSendTimeoutMilliseconds = 800
    public static let maxBeforeSendPendingPerApp = 1000
    public static let maxBeforeSendPendingBytesPerApp = 8 * 1_048_576
    /// All apps together (a backstop: it takes 32 apps at their own bound to reach it).
    public static let maxBeforeSendPendingBytes = 256 * 1_048_576
    public static let maxBeforeSendAnswerBytes = 64 * 1024
    /// Hook connections open at once, to one host and in all; more requests wait for one.
    public static let maxBeforeSendConnectionsPerHost = 32
    public static let maxBeforeSendConnections = 256
    /// Commands of one connection held behind messages waiting for verdicts; past it 42901.
    public static let maxHeldPerSession = 64
    /// Cluster mode: changes of one node waiting for their log entry to come back applied; past
    /// it 42901 (PostgreSQL is slower than the node's callers).
    public static let maxClusterWaiting = 100_000
    public static let maxClusterWaitingBytes = 64 * 1_048_576
    /// A cluster node's caller waits at most this long for its change to come back from the log;
    /// then it is answered 50303 (the change may have been made).
    public static let clusterAnswerDeadlineMilliseconds: Int64 = 30_000
    /// Cluster snapshots: each part (the engine's state, the replica's image) is compressed with
    /// zlib and stored in PostgreSQL in chunks of at most this many bytes, so a part of any size
    /// fits (a `bytea` takes up to 1 GB; a chunk stays well below it), and publishing or loading
    /// one holds one chunk (and libpq's copy of it), not a second copy of the whole. (64 MiB until
    /// the replica's part was streamed, CL-9: then the chunk was most of what a snapshot holds.
    /// Readers take chunks of any size.)
    public static let snapshotChunkBytes = 16 * 1_048_576
    /// CL-9: the replica's part of a cluster snapshot is read from its copy on disk (the leader)
    /// and written to the replica's file (a starting node) in pieces of this many bytes: neither
    /// holds the whole replica in memory.
    public static let snapshotPieceBytes = 4 * 1_048_576
    /// Cluster mode: how long a node keeps delivered and dead webhook messages (for the delivery
    /// log and replays) in its in-memory replica.
    public static let clusterWebhookRetentionMilliseconds: Int64 = 3_600_000
    /// Cluster mode (CL-6): every node holds every webhook message, so a delivery that is not
    /// delivered this long after it was queued is dead (the retry schedule's later attempts are
    /// not made; it can be replayed). Parked messages are therefore kept at most this long
    /// pending and `clusterWebhookRetentionMilliseconds` once final.
    public static let clusterWebhookMaxPendingMilliseconds: Int64 = clusterWebhookRetentionMilliseconds
    /// Cluster mode (CL-6): the outcomes of a node's deliveries are appended to the log at most
    /// every this many milliseconds, at most this many per record, each with at most this many
    /// attempts and this many bytes of each attempt's error.
    public static let clusterWebhookOutcomeFlushMilliseconds = 100
    public static let maxWebhookOutcomesPerRecord = 500
    public static let maxWebhookOutcomeAttempts = 20
    public static let maxWebhookErrorBytes = 256
    /// How long past its app's timeout the engine waits for a verdict before it judges the
    /// message as if the hook had failed (a transfer that never ends cannot hold a connection).
    public static let beforeSendVerdictSlackMilliseconds = 2000
    public static let maxBeforeSendReasonBytes = 100
    public static let maxUserIdBytes = 64
    public static let maxUsersPerCall = 20
    public static let minDurationMinutes = 1
    public static let maxDurationMinutes = 43_200
    public static let maxTempMuteSeconds = 2_592_000
    public static let minDestroyMinutes = 60
    public static let maxDestroyMinutes = 10_080
    public static let maxDestroyDelaySeconds = 10_800
    public static let maxExtBytes = 4096
    public static let maxNotifyExtBytes = 2048
    public static let maxExtraBytes = 4096
    public static let maxNameBytes = 128
    public static let maxAnnouncementBytes = 4096
    public static let maxAttributeKeyChars = 128
    public static let maxAttributeValueBytes = 4096
    public static let maxAttributesPerRoom = 100
    public static let maxAttributesAtCreation = 20
    public static let maxQueueKeyBytes = 32
    public static let maxQueueBatchKeyBytes = 128
    public static let maxQueueValueBytes = 4096
    public static let maxQueueBatch = 100
    public static let maxFixedMembers = 1000
    public static let maxMemberQueryIds = 20
    public static let maxMemberListCount = 500
    public static let maxHistoryLimit = 100
    public static let maxAllowlist = 20
    public static let maxNicknameBytes = 128
    public static let maxAvatarBytes = 1024
    public static let maxIsInRoomIds = 1000
    public static let maxChannelIdBytes = 64
    public static let maxChannelsPerGroup = 1000
    /// An app holds at most this many ultra groups, and an ultra group at most this many members
    /// (our bounds: every group and member is held in memory on every node). Past either, the
    /// create or the add is refused whole (41901) and nothing changes.
    public static let maxUltraGroupsPerApp = 10_000
    public static let maxUltraGroupMembers = 100_000
    public static let maxGroupUsersPerCall = 100
    /// MO-4 (RongCloud's and Nexconn's bounds): user groups per ultra group, members per user
    /// group, user groups bound to one channel, user groups one call creates, deletes, binds or
    /// unbinds, and a user group id's bytes (an identifier, as group ids). A call adds or removes at most
    /// `maxUsersPerCall` users of a user group.
    public static let maxUserGroupsPerGroup = 50
    public static let maxUsersPerUserGroup = 100
    public static let maxUserGroupsPerChannel = 10
    public static let maxUserGroupsPerCall = 10
    public static let maxUserGroupIdBytes = 64
    public static let maxPageSize = 100
    /// MO-3: a community message goes to at most this many ultra groups at once (Nexconn's
    /// `toChannelIds`, RongCloud's `toGroupIds`).
    public static let maxCommunitySendGroups = 3
    /// MO-3: each channel keeps its newest stored messages, at most this many and at most this
    /// many bytes of content and metadata (the oldest go first; the newest always stays).
    public static let maxCommunityHistoryPerChannel = 1000
    public static let maxCommunityHistoryBytesPerChannel = 4 * 1_048_576
    /// MO-3: and all of an app's channels together keep at most this many bytes: past it the
    /// app's oldest stored community message goes first, whichever channel holds it.
    public static let maxCommunityHistoryBytesPerApp = 256 * 1_048_576
    /// MO-6: a history query spans at most 14 days (Nexconn, RongCloud).
    public static let maxCommunityHistorySpanMilliseconds: Int64 = 14 * 86_400_000
    /// MO-3 metadata (RongCloud's message expansion): keys of 1…32 characters from
    /// `A-Z a-z 0-9 + = - _`, values of at most 4,096 bytes, 100 entries per call, 300 per message.
    public static let maxMetadataKeyChars = 32
    public static let maxMetadataValueBytes = 4096
    public static let maxMetadataEntriesPerCall = 100
    public static let maxMetadataEntriesPerMessage = 300
    /// MO-5: a channel's (or group's) mute list and allowed-sender list each hold at most this many users.
    public static let maxCommunityListUsers = 1000
    public static let maxStatusSyncPage = 1000
    public static let maxBroadcastUrlBytes = 1024
    public static let maxQueueLimit = 10_000
    /// Largest message content of the default app settings (each app may change it).
    public static let defaultMaxMessageBytes = 16 * 1024
    /// Longest lifetime of a client token issued by the REST API.
    public static let maxTokenTTLSeconds: Int64 = 30 * 24 * 3600
    /// Messages and content bytes of each room kept in memory for history queries; the rest of
    /// the history (up to the app's historyLimitPerRoom and historyRetentionSeconds) is read from disk.
    public static let historyMemoryMessagesPerRoom = 50
    public static let historyMemoryBytesPerRoom = 64 * 1024
    /// MO-1: a recall's note to the room (RongCloud `extra`, NIM `notifyExt`: NIM documents 1024).
    public static let maxRecallExtBytes = 1024
    /// MO-1: a message id as a recall names it (Roomcast's ids are far shorter).
    public static let maxMessageIdBytes = 128
    /// MO-2: sensitive words an app may have (RongCloud's default is 50; the matching cost does
    /// not grow with the list), the characters of one word or replacement (RongCloud's 32), and
    /// the words one call adds or removes (RongCloud removes at most 50 per batch call).
    public static let maxSensitiveWordsPerApp = 10_000
    /// MO-8: the audit trail's entries kept per app (the oldest are dropped first), the strings of
    /// an entry (cut to this many bytes), the targets an entry lists, and a page of `GET /v1/audit`
    /// (at most, and when no limit is given).
    public static let auditEntriesPerApp = 1_000
    public static let auditMaxStringBytes = 128
    public static let auditMaxTargets = 20
    public static let maxAuditPage = 100
    public static let defaultAuditPage = 50
    public static let maxSensitiveWordChars = 32
    public static let maxSensitiveWordsPerCall = 100
    public static let maxSensitiveWordsPerRongCloudBatch = 50
    /// AU-4: a new app's interval between two `room.members` summaries of a room, and the user
    /// ids of those who joined and of those who left one summary names (the counts are exact).
    public static let defaultMemberSummaryIntervalMilliseconds = 1000
    public static let maxMemberSummaryIds = 50
    /// MO-1: the recall window of a new app (RongCloud's, NIM's and ZIM's two minutes).
    public static let defaultRecallWindowSeconds = 120
    /// Quota defaults of a new app (each app may change them).
    public static let defaultMaxRooms = 10_000
    public static let defaultRoomCreatesPerUserPerMinute = 10
    public static let defaultHistoryLimitPerApp = 1_000_000
}
