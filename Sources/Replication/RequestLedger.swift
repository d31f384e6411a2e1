import Chat

/// Cluster mode (CLUSTER.md "Nonces and idempotency keys"): what signed REST calls leave in the
/// shared log that every node must judge alike — their nonces (SPEC §2) and their idempotency
/// keys (PX-2). Pure and deterministic, like the domain: it changes only through the entries
/// applied, by their log time and position, so every node that applied the same entries gives
/// the same verdicts.
///
/// Bounds: per app, nonces for `nonceMilliseconds` of log time and at most `maxNoncesPerApp`
/// (past it the oldest are forgotten early: the nodes' own caches, which learn every nonce from
/// the log, still refuse them for the whole window); keys for `keyMilliseconds` of log time and at
/// most `maxKeysPerApp` (the oldest go first, as the single node's kept answers do).
public struct RequestLedger {
    /// How long a nonce is remembered, in log time (twice the signature window).
    public let nonceMilliseconds: Int64
    public let maxNoncesPerApp: Int
    /// How long a key is remembered, in log time (24 h).
    public let keyMilliseconds: Int64
    public let maxKeysPerApp: Int

    /// Why a call's change is not applied again.
    public enum Duplicate: Equatable, Sendable {
        /// The key was claimed by another request (another fingerprint): 422, 42200.
        case otherRequest
        /// The same request was answered; its answer is kept (replay it).
        case answered
        /// The same request is still being answered by its node: 409, 40900.
        case inProgress
        /// The same request's change was made, and the node that made it stopped (or lost its
        /// connection to the log) before its answer was kept: 409, 40903.
        case answerLost
    }

    public enum Verdict: Equatable, Sendable {
        case admitted
        /// The nonce was used inside the window (401, 40104): nothing is applied.
        case nonceReused
        case duplicate(Duplicate)
    }

    enum KeyState: String, Equatable, Codable, Sendable {
        case pending
        case answered
        case lost
    }

    struct Key {
        var fingerprint: String
        var claim: ClaimID
        var position: Int64
        var at: Int64
        var state: KeyState
    }

    struct AppNonces {
        var seen: [String: Int64] = [:]
        var order = FIFO<(nonce: String, at: Int64)>()
    }

    struct AppKeys {
        var keys: [String: Key] = [:]
        /// Registration order; entries of keys released since are skipped (their position differs).
        var order = FIFO<(key: String, position: Int64)>()
    }

    private var nonces: [String: AppNonces] = [:]
    private var keys: [String: AppKeys] = [:]
    /// Node runs whose sessions were ended: a key they claimed and never answered is lost.
    private var endedRuns: Set<UInt64> = []
    /// Answered keys forgotten (expired or past the bound) since the last `takeForgotten`: their
    /// kept answers leave the node's replica too.
    private var forgotten: [(app: String, key: String)] = []

    public init(nonceMilliseconds: Int64, maxNoncesPerApp: Int = Limits.maxClusterNoncesPerApp,
                keyMilliseconds: Int64 = Limits.idempotencyRetentionMilliseconds, maxKeysPerApp: Int = Limits.maxIdempotentAnswersPerApp) {
        self.nonceMilliseconds = nonceMilliseconds
        self.maxNoncesPerApp = maxNoncesPerApp
        self.keyMilliseconds = keyMilliseconds
        self.maxKeysPerApp = maxKeysPerApp
    }

    // MARK: Entries

    /// Judges a signed call's first change (log entry `position`, log time `at`): its nonce first
    /// (remembered unless it was used), then its key (claimed unless it was).
    public mutating func admit(_ s: SignedCall, position: Int64, at: Int64) -> Verdict {
        if let n = s.nonce, !useNonce(n, at: at) { return .nonceReused }
        guard let c = s.key else { return .admitted }
        if let duplicate = claim(c, position: position, at: at) { return .duplicate(duplicate) }
        return .admitted
    }

    /// Remembers a nonce; false if it was already used inside the window.
    public mutating func useNonce(_ n: RequestNonce, at: Int64) -> Bool {
        // Taken out while it changes, so its tables are not copied (copy-on-write).
        var app = nonces.removeValue(forKey: n.app) ?? AppNonces()
        Self.expire(&app, before: at - nonceMilliseconds)
        guard app.seen[n.nonce] == nil else {
            nonces[n.app] = app
            return false
        }
        app.seen[n.nonce] = at
        app.order.append((n.nonce, at))
        while app.seen.count > maxNoncesPerApp, let oldest = app.order.popFirst() {
            if app.seen[oldest.nonce] == oldest.at { app.seen[oldest.nonce] = nil }
        }
        nonces[n.app] = app
        return true
    }

    /// Claims a key for a call; nil when the call may make its change, else why not.
    mutating func claim(_ c: IdempotencyClaim, position: Int64, at: Int64) -> Duplicate? {
        var app = keys.removeValue(forKey: c.app) ?? AppKeys()
        expire(&app, appKey: c.app, before: at - keyMilliseconds)
        defer { keys[c.app] = app }
        if let k = app.keys[c.key] {
            if k.fingerprint != c.fingerprint { return .otherRequest }
            switch k.state {
            case .answered: return .answered
            case .lost: return .answerLost
            case .pending: return endedRuns.contains(k.claim.incarnation) ? .answerLost : .inProgress
            }
        }
        register(&app, appKey: c.app, c.key, Key(fingerprint: c.fingerprint, claim: c.claim, position: position, at: at, state: .pending))
        return nil
    }

    /// What a call with this key would be told, without claiming it: nil when the key is free.
    /// A retry asks before it runs again, since the first call's change can be applied on this
    /// node before its answer record is (a handler that reads before it writes would otherwise
    /// answer from the changed state, e.g. "already exists").
    public func peek(app appKey: String, key: String, fingerprint: String, at: Int64) -> Duplicate? {
        guard let k = keys[appKey]?.keys[key], k.at >= at - keyMilliseconds else { return nil }
        if k.fingerprint != fingerprint { return .otherRequest }
        switch k.state {
        case .answered: return .answered
        case .lost: return .answerLost
        case .pending: return endedRuns.contains(k.claim.incarnation) ? .answerLost : .inProgress
        }
    }

    /// The claiming call's answer: true when every node keeps it (the key is the claim's, or is
    /// new: a call that made no change registers its key with its answer).
    public mutating func keepAnswer(_ a: KeptAnswer, position: Int64, at: Int64) -> Bool {
        var app = keys.removeValue(forKey: a.ref.app) ?? AppKeys()
        expire(&app, appKey: a.ref.app, before: at - keyMilliseconds)
        defer { keys[a.ref.app] = app }
        if let k = app.keys[a.ref.key] {
            // Another call holds the key (it got there first): this answer is not the key's.
            guard k.claim == a.ref.claim else { return false }
            app.keys[a.ref.key]!.state = .answered
            return true
        }
        register(&app, appKey: a.ref.app, a.ref.key, Key(fingerprint: a.fingerprint, claim: a.ref.claim, position: position, at: at, state: .answered))
        return true
    }

    /// The claiming call's answer is not kept ("try again"): the key is forgotten.
    public mutating func release(_ ref: KeyRef) {
        guard let k = keys[ref.app]?.keys[ref.key], k.claim == ref.claim, k.state == .pending else { return }
        keys[ref.app]!.keys[ref.key] = nil
    }

    /// The claiming call's node cannot tell whether its change was made: if the claim holds the
    /// key, the change was made and its answer is lost.
    public mutating func abandon(_ ref: KeyRef) {
        guard let k = keys[ref.app]?.keys[ref.key], k.claim == ref.claim, k.state == .pending else { return }
        keys[ref.app]!.keys[ref.key]!.state = .lost
    }

    /// A node run was ended (`endSessions`): the keys it claimed and has not answered are lost.
    public mutating func endRun(_ incarnation: UInt64) {
        endedRuns.insert(incarnation)
    }

    /// Forgets every nonce and key past its time (the leader's ticks call it, so apps that are
    /// quiet do not hold theirs).
    public mutating func expire(at: Int64) {
        for app in nonces.keys.sorted() {
            Self.expire(&nonces[app]!, before: at - nonceMilliseconds)
            if nonces[app]!.seen.isEmpty { nonces[app] = nil }
        }
        for appKey in keys.keys.sorted() {
            var app = keys.removeValue(forKey: appKey)!
            expire(&app, appKey: appKey, before: at - keyMilliseconds)
            keys[appKey] = app.keys.isEmpty ? nil : app
        }
    }

    /// Answered keys forgotten since the last call (their kept answers are deleted too).
    public mutating func takeForgotten() -> [(app: String, key: String)] {
        defer { forgotten = [] }
        return forgotten
    }

    // MARK: Snapshots (CLUSTER.md)

    /// The ledger's state as a value, for a cluster snapshot: a node that starts from it judges
    /// every later entry as a node that applied the whole log does.
    public struct Image: Codable, Equatable, Sendable {
        struct NonceAt: Codable, Equatable, Sendable {
            var nonce: String
            var at: Int64
        }
        /// An app's nonces, oldest first, as they expire (each nonce once: the ledger's `seen`
        /// is the same nonces with their times). Encoded as one string, a line per nonce (its
        /// log time, a space, the nonce with `\` and line feeds escaped), not an object each: a
        /// busy app holds hundreds of thousands, and an encoder that builds a value per object
        /// took ten times the JSON's size in memory at every snapshot. Snapshots of layout 1
        /// (`seen` and `order` as arrays of objects) still decode.
        struct Nonces: Codable, Equatable, Sendable {
            var app: String
            var order: [NonceAt]

            init(app: String, order: [NonceAt]) {
                self.app = app
                self.order = order
            }

            private enum CodingKeys: String, CodingKey { case app, list, order }

            init(from decoder: any Decoder) throws {
                let c = try decoder.container(keyedBy: CodingKeys.self)
                app = try c.decode(String.self, forKey: .app)
                if let list = try c.decodeIfPresent(String.self, forKey: .list) {
                    order = try Self.parse(list, codingPath: c.codingPath + [CodingKeys.list])
                } else {
                    order = try c.decode([NonceAt].self, forKey: .order)
                }
            }

            func encode(to encoder: any Encoder) throws {
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(app, forKey: .app)
                var list = ""
                list.reserveCapacity(order.count * 36)
                for (i, n) in order.enumerated() {
                    if i > 0 { list.append("\n") }
                    list.append(String(n.at))
                    list.append(" ")
                    if n.nonce.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\n") }) {
                        // Byte by byte: a backslash or line feed followed by a combining mark is
                        // one Character, which a character-wise replacement would pass over.
                        var escaped: [UInt8] = []
                        for byte in n.nonce.utf8 {
                            switch byte {
                            case UInt8(ascii: "\\"): escaped += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
                            case UInt8(ascii: "\n"): escaped += [UInt8(ascii: "\\"), UInt8(ascii: "n")]
                            default: escaped.append(byte)
                            }
                        }
                        list.append(String(decoding: escaped, as: UTF8.self))
                    } else {
                        list.append(n.nonce)
                    }
                }
                try c.encode(list, forKey: .list)
            }

            /// (Read as UTF-8 bytes, not characters: a nonce ending in a carriage return must not
            /// join the line feed after it.)
            static func parse(_ list: String, codingPath: [any CodingKey]) throws -> [NonceAt] {
                var order: [NonceAt] = []
                guard !list.isEmpty else { return order }
                let backslash = UInt8(ascii: "\\"), space = UInt8(ascii: " ")
                for line in list.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
                    guard let gap = line.firstIndex(of: space), let at = Int64(String(decoding: line[..<gap], as: UTF8.self)) else {
                        throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "a nonce line is not \"<time> <nonce>\""))
                    }
                    var nonce: [UInt8] = []
                    var escaped = false
                    for byte in line[line.index(after: gap)...] {
                        if escaped {
                            nonce.append(byte == UInt8(ascii: "n") ? UInt8(ascii: "\n") : byte)
                            escaped = false
                        } else if byte == backslash {
                            escaped = true
                        } else {
                            nonce.append(byte)
                        }
                    }
                    order.append(NonceAt(nonce: String(decoding: nonce, as: UTF8.self), at: at))
                }
                return order
            }
        }
        struct KeyImage: Codable, Equatable, Sendable {
            var key: String
            var fingerprint: String
            var claim: ClaimID
            var position: Int64
            var at: Int64
            var state: KeyState
        }
        struct KeyAt: Codable, Equatable, Sendable {
            var key: String
            var position: Int64
        }
        struct Keys: Codable, Equatable, Sendable {
            var app: String
            var keys: [KeyImage]
            var order: [KeyAt]
        }
        var nonces: [Nonces] = []
        var keys: [Keys] = []
        var endedRuns: [UInt64] = []

        /// Every nonce held, with its app and time.
        public var nonceList: [(app: String, nonce: String, at: Int64)] {
            nonces.flatMap { n in n.order.map { (n.app, $0.nonce, $0.at) } }
        }
    }

    public var image: Image {
        var image = Image()
        image.nonces = nonces.keys.sorted().map { app in
            let n = nonces[app]!
            return Image.Nonces(app: app, order: n.order.elements.map { Image.NonceAt(nonce: $0.nonce, at: $0.at) })
        }
        image.keys = keys.keys.sorted().map { app in
            let k = keys[app]!
            return Image.Keys(app: app, keys: k.keys.sorted { $0.key < $1.key }.map {
                Image.KeyImage(key: $0.key, fingerprint: $0.value.fingerprint, claim: $0.value.claim, position: $0.value.position, at: $0.value.at,
                               state: $0.value.state)
            }, order: k.order.elements.map { Image.KeyAt(key: $0.key, position: $0.position) })
        }
        image.endedRuns = endedRuns.sorted()
        return image
    }

    /// A ledger in the state of `image`, with these bounds.
    public init(image: Image, nonceMilliseconds: Int64, maxNoncesPerApp: Int = Limits.maxClusterNoncesPerApp,
                keyMilliseconds: Int64 = Limits.idempotencyRetentionMilliseconds, maxKeysPerApp: Int = Limits.maxIdempotentAnswersPerApp) {
        self.init(nonceMilliseconds: nonceMilliseconds, maxNoncesPerApp: maxNoncesPerApp, keyMilliseconds: keyMilliseconds, maxKeysPerApp: maxKeysPerApp)
        for n in image.nonces {
            var app = AppNonces()
            // `seen` holds exactly the nonces of `order` (each leaves both at once).
            for o in n.order {
                app.seen[o.nonce] = o.at
                app.order.append((o.nonce, o.at))
            }
            nonces[n.app] = app
        }
        for k in image.keys {
            var app = AppKeys()
            for key in k.keys {
                app.keys[key.key] = Key(fingerprint: key.fingerprint, claim: key.claim, position: key.position, at: key.at, state: key.state)
            }
            for o in k.order { app.order.append((o.key, o.position)) }
            keys[k.app] = app
        }
        endedRuns = Set(image.endedRuns)
    }

    // MARK: Reading (tests, /metrics-style counts)

    public func nonceCount(app: String) -> Int { nonces[app]?.seen.count ?? 0 }
    public func keyCount(app: String) -> Int { keys[app]?.keys.count ?? 0 }

    // MARK: Bookkeeping

    private mutating func register(_ app: inout AppKeys, appKey: String, _ key: String, _ k: Key) {
        app.keys[key] = k
        app.order.append((key, k.position))
        while app.keys.count > maxKeysPerApp, let oldest = app.order.popFirst() {
            drop(&app, appKey: appKey, oldest)
        }
        // Entries of released keys are skipped when they come first; compacted if they pile up.
        if app.order.count > 2 * max(app.keys.count, 1024) {
            let live = app.keys
            app.order.removeAll { live[$0.key]?.position != $0.position }
        }
    }

    private mutating func drop(_ app: inout AppKeys, appKey: String, _ entry: (key: String, position: Int64)) {
        guard let k = app.keys[entry.key], k.position == entry.position else { return }
        app.keys[entry.key] = nil
        if k.state == .answered { forgotten.append((appKey, entry.key)) }
    }

    private static func expire(_ app: inout AppNonces, before cutoff: Int64) {
        while let first = app.order.first, first.at < cutoff {
            _ = app.order.popFirst()
            if app.seen[first.nonce] == first.at { app.seen[first.nonce] = nil }
        }
    }

    private mutating func expire(_ app: inout AppKeys, appKey: String, before cutoff: Int64) {
        while let first = app.order.first {
            if let k = app.keys[first.key], k.position == first.position, k.at >= cutoff { break }
            _ = app.order.popFirst()
            drop(&app, appKey: appKey, first)
        }
    }
}

/// A queue with O(1) append and removal at the front (log-time order: an entry's time never goes
/// back along the log).
struct FIFO<Element> {
    private var items: [Element] = []
    private var head = 0

    var count: Int { items.count - head }
    var first: Element? { head < items.count ? items[head] : nil }

    mutating func append(_ e: Element) { items.append(e) }

    mutating func popFirst() -> Element? {
        guard head < items.count else { return nil }
        let e = items[head]
        head += 1
        if head >= 1024 && head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return e
    }

    /// The elements, first to last.
    var elements: [Element] { Array(items[head...]) }

    mutating func removeAll(where drop: (Element) -> Bool) {
        items = items[head...].filter { !drop($0) }
        head = 0
    }
}
