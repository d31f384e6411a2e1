import Chat
import Foundation
import HTTP1
import Store
import Synchronization
import Wire

/// Apps known to the gateway: key → secret and per-app settings the domain does not hold.
public final class AppRegistry: Sendable {
    public struct App: Sendable, Equatable {
        public var key: String
        public var secret: String
        /// WebSocket Origin allowlist for this app (nil: any origin).
        public var allowedOrigins: [String]?
        /// PX-1 rates from the app's settings.
        public var restCallsPerSecond = Limits.defaultRestCallsPerSecond
        public var clientMessagesPerSecond = Limits.defaultClientMessagesPerSecond
        /// OP-2: the secret before the last rotation, accepted until `previousSecretExpiresAt` (ms).
        public var previousSecret: String?
        public var previousSecretExpiresAt: Int64 = 0

        public init(key: String, secret: String, allowedOrigins: [String]?, settings: AppSettings = AppSettings()) {
            self.key = key
            self.secret = secret
            self.allowedOrigins = allowedOrigins
            restCallsPerSecond = settings.restCallsPerSecond
            clientMessagesPerSecond = settings.clientMessagesPerSecond
        }
    }
    private let apps = Mutex<[String: App]>([:])
    /// PX-1: each app's REST bucket, shared by every loop (one short lock per call).
    private let restBuckets = Mutex<[String: TokenBucket]>([:])

    /// Takes one of the app's REST tokens: false when it is at its limit.
    public func takeRESTCall(_ key: String, now: Int64) -> Bool {
        guard let rate = app(key)?.restCallsPerSecond else { return true }
        return restBuckets.withLock { b in
            var bucket = b[key].flatMap { $0.rate == Double(rate) ? $0 : nil } ?? TokenBucket(rate: rate, now: now)
            let ok = bucket.take(now: now)
            b[key] = bucket
            return ok
        }
    }

    public init() {}

    public func set(_ app: App) { apps.withLock { $0[app.key] = app } }
    public func app(_ key: String) -> App? { apps.withLock { $0[key] } }
    public var all: [App] { apps.withLock { Array($0.values) }.sorted { $0.key < $1.key } }
    /// The secret of `key`: what the gateway signs with (tokens, webhooks).
    public func secret(_ key: String) -> String? { app(key)?.secret }

    /// OP-2: the secrets a signature or client token of `key` may be made with at `now`: the
    /// current one and, within its grace after a rotation, the previous one.
    public func acceptedSecrets(_ key: String, now: Int64) -> [String] {
        guard let app = app(key) else { return [] }
        if let previous = app.previousSecret, now < app.previousSecretExpiresAt { return [app.secret, previous] }
        return [app.secret]
    }

    /// OP-2: apps the operator disabled (or is removing): refused with 40311 rather than as unknown.
    private let disabledKeys = Mutex<Set<String>>([])
    public func isDisabled(_ key: String) -> Bool { disabledKeys.withLock { $0.contains(key) } }

    /// Stops serving `key` (disabled or removed by the operator).
    public func disable(_ key: String) {
        apps.withLock { _ = $0.removeValue(forKey: key) }
        disabledKeys.withLock { _ = $0.insert(key) }
    }

    /// Serves `app` (again).
    public func enable(_ app: App) {
        disabledKeys.withLock { _ = $0.remove(app.key) }
        set(app)
    }
}

/// Nonces seen inside the replay window, per app. Bounded by the window: entries older than
/// twice the window are dropped as new ones arrive.
final class NonceCache: Sendable {
    private struct State {
        var seen: [String: Int64] = [:]
        var lastPrune: Int64 = 0
    }
    private let state = Mutex<State>(State())
    let windowMilliseconds: Int64

    init(windowMilliseconds: Int64, seen: [(app: String, nonce: String, at: Int64)] = []) {
        self.windowMilliseconds = windowMilliseconds
        state.withLock { s in
            for n in seen { s.seen[n.app + "\u{0}" + n.nonce] = n.at }
        }
    }

    /// Records the nonce; false if it was already used inside the window.
    func use(app: String, nonce: String, now: Int64) -> Bool {
        state.withLock { s in
            if now - s.lastPrune > windowMilliseconds {
                s.seen = s.seen.filter { now - $0.value <= 2 * windowMilliseconds }
                s.lastPrune = now
            }
            let key = app + "\u{0}" + nonce
            if let at = s.seen[key], now - at <= 2 * windowMilliseconds { return false }
            s.seen[key] = now
            return true
        }
    }

    /// Cluster mode: a nonce another node (or this one) accepted, learned from the log at log time
    /// `at`: a later use of it on this node is refused. An entry already held is left as it is.
    func learn(app: String, nonce: String, at: Int64) {
        state.withLock { s in
            let key = app + "\u{0}" + nonce
            if s.seen[key] == nil { s.seen[key] = at }
        }
    }
}

/// Verifies signed REST requests (SPEC §2) in any of the schemes of `Signing`. Timestamps may be
/// seconds or milliseconds and must be within ±300 s; a nonce may not be reused inside the window,
/// also across restarts: each accepted nonce is recorded (`record`, written to the store before any
/// command the request carries) and the recent ones are loaded at start (`seen`).
public final class RequestAuthenticator: Sendable {
    let apps: AppRegistry
    let nonces: NonceCache
    let clock: @Sendable () -> Int64
    let record: @Sendable (_ app: String, _ nonce: String, _ at: Int64) -> Void

    public init(apps: AppRegistry, clock: @escaping @Sendable () -> Int64, seen: [(app: String, nonce: String, at: Int64)] = [],
                record: @escaping @Sendable (_ app: String, _ nonce: String, _ at: Int64) -> Void = { _, _, _ in }) {
        self.apps = apps
        self.clock = clock
        self.record = record
        self.nonces = NonceCache(windowMilliseconds: Signing.windowMilliseconds, seen: seen)
    }

    /// A request that passed: its app, its nonce and the header that carried it.
    public struct Accepted: Sendable {
        public let app: String
        public let nonce: String
        public let nonceField: String
    }

    /// Cluster mode: a nonce learned from the log (see `NonceCache.learn`). One already past the
    /// window is not kept: a node starting up replays the whole log, every nonce it ever saw.
    public func learn(app: String, nonce: String, at: Int64) {
        guard clock() - at <= 2 * nonces.windowMilliseconds else { return }
        nonces.learn(app: app, nonce: nonce, at: at)
    }

    public func authenticate(_ head: HTTPRequestHead, body: [UInt8]) -> Result<Accepted, GatewayError> {
        guard let c = Signing.Credentials.read({ head.headers[$0] }) else {
            return .failure(GatewayError(.missingCredentials, "sign the request (App-Key/Nonce/Timestamp/Signature, AppKey/Nonce/CurTime/CheckSum, or X-Roomcast-*)", field: "headers"))
        }
        guard apps.app(c.appKey) != nil else {
            if apps.isDisabled(c.appKey) { return .failure(GatewayError(.appDisabled, "the app is disabled by the operator", field: c.keyField)) }
            return .failure(GatewayError(.unknownApp, "unknown app key", field: c.keyField))
        }
        guard let nonce = c.nonce, !nonce.isEmpty, nonce.utf8.count <= 128 else {
            return .failure(GatewayError(.missingCredentials, "a nonce of 1 to 128 characters is required", field: c.nonceField))
        }
        guard let timestamp = c.timestamp, let ts = Int64(timestamp), ts > 0 else {
            return .failure(GatewayError(.missingCredentials, "a numeric timestamp is required", field: c.timestampField))
        }
        guard let signature = c.signature, !signature.isEmpty else {
            return .failure(GatewayError(.missingCredentials, "a signature is required", field: c.signatureField))
        }
        let now = clock()
        guard abs(now - Signing.milliseconds(ts)) <= Signing.windowMilliseconds else {
            return .failure(GatewayError(.staleTimestamp, "timestamp is more than 300 s from the server time", field: c.timestampField))
        }
        // OP-2: within a rotation's grace, a call signed with the previous secret is accepted too.
        let given = signature.lowercased()
        let matches = apps.acceptedSecrets(c.appKey, now: now).contains { secret in
            Signing.constantTimeEqual(Signing.expected(c, secret: secret, nonce: nonce, timestamp: timestamp, method: head.method.rawValue,
                                                       target: head.target, body: body), given)
        }
        guard matches else {
            return .failure(GatewayError(.badSignature, "signature mismatch", field: c.signatureField))
        }
        guard nonces.use(app: c.appKey, nonce: nonce, now: now) else {
            return .failure(GatewayError(.nonceReused, "nonce already used", field: c.nonceField))
        }
        record(c.appKey, nonce, now)
        return .success(Accepted(app: c.appKey, nonce: nonce, nonceField: c.nonceField))
    }
}

extension AppRegistry {
    /// The apps in the store, with their settings (`only`: just these keys).
    static func load(_ store: Store, only keys: Set<String>?) throws -> AppRegistry {
        let registry = AppRegistry()
        for row in try store.apps() where keys?.contains(row.key) ?? true {
            let settings = (try? JSONDecoder().decode(AppSettings.self, from: Data(row.settings.utf8))) ?? AppSettings()
            registry.set(App(key: row.key, secret: row.secret,
                             allowedOrigins: row.allowedOrigins.isEmpty ? nil : row.allowedOrigins.split(separator: "\n").map(String.init),
                             settings: settings))
        }
        return registry
    }
}
