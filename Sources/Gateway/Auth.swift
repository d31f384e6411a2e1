import Chat
import Crypto
import Foundation
import HTTP1
import Synchronization

/// Gateway-level refusals (authentication, protocol); domain refusals are `ChatError`.
/// Both render through `ErrorTable`.
public enum GatewayErrorCode: Int, Sendable, CaseIterable {
    /// No credentials on a signed endpoint.
    case missingCredentials = 40100
    /// Unknown app key (RongCloud 1001).
    case unknownAppKey = 1001
    /// The signature does not match (RongCloud 1004; NIM 414).
    case badSignature = 1004
    /// The timestamp is outside ±300 s.
    case staleTimestamp = 40103
    /// The nonce was already used inside the window.
    case nonceReused = 40104
    /// A client token is missing, malformed, badly signed or for another app.
    case badToken = 40105
    /// The client token has expired.
    case tokenExpired = 40106
    /// The request is not valid JSON or not a known operation.
    case badRequest = 40000
    /// The server is draining.
    case unavailable = 50300
    /// No such route.
    case noSuchPath = 40400

    public var httpStatus: Int {
        switch self {
        case .missingCredentials, .unknownAppKey, .badSignature, .staleTimestamp, .nonceReused, .badToken, .tokenExpired: return 401
        case .badRequest: return 400
        case .unavailable: return 503
        case .noSuchPath: return 404
        }
    }

    public var summary: String {
        switch self {
        case .missingCredentials: return "signature headers are missing"
        case .unknownAppKey: return "unknown app key"
        case .badSignature: return "the signature does not match"
        case .staleTimestamp: return "the timestamp is more than 300 s away from the server's clock"
        case .nonceReused: return "the nonce was already used"
        case .badToken: return "the client token is invalid"
        case .tokenExpired: return "the client token has expired"
        case .badRequest: return "malformed request"
        case .unavailable: return "the server is shutting down"
        case .noSuchPath: return "no such path"
        }
    }
}

public struct GatewayError: Error, Equatable, Sendable {
    public let code: GatewayErrorCode
    public let message: String
    public let field: String?
    public init(_ code: GatewayErrorCode, _ message: String, field: String? = nil) {
        self.code = code
        self.message = message
        self.field = field
    }
}

/// Apps known to the gateway: key → secret and per-app settings the domain does not hold.
public final class AppRegistry: Sendable {
    public struct App: Sendable, Equatable {
        public var key: String
        public var secret: String
        /// WebSocket Origin allowlist for this app (nil: any origin).
        public var allowedOrigins: [String]?
    }
    private let apps = Mutex<[String: App]>([:])

    public init() {}

    public func set(_ app: App) { apps.withLock { $0[app.key] = app } }
    public func app(_ key: String) -> App? { apps.withLock { $0[key] } }
    public var all: [App] { apps.withLock { Array($0.values) }.sorted { $0.key < $1.key } }
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

    init(windowMilliseconds: Int64) {
        self.windowMilliseconds = windowMilliseconds
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
}

/// Verifies signed REST requests (SPEC §2).
///
/// - RongCloud: `App-Key`, `Nonce`, `Timestamp`, `Signature` (or `RC-` prefixed), with
///   `Signature = hex(SHA1(appSecret + nonce + timestamp))`.
/// - NIM: `AppKey`, `Nonce`, `CurTime`, `CheckSum`, same formula.
/// - Native (recommended): `X-Roomcast-Key`, `X-Roomcast-Timestamp`, `X-Roomcast-Nonce`,
///   `X-Roomcast-Signature = hex(HMAC-SHA256(appSecret, METHOD \n target \n timestamp \n nonce \n hex(SHA256(body))))`.
///
/// Timestamps may be seconds or milliseconds and must be within ±300 s; a nonce may not be reused
/// inside the window.
public final class RequestAuthenticator: Sendable {
    let apps: AppRegistry
    let nonces: NonceCache
    let clock: @Sendable () -> Int64
    public static let window: Int64 = 300_000

    public init(apps: AppRegistry, clock: @escaping @Sendable () -> Int64) {
        self.apps = apps
        self.clock = clock
        self.nonces = NonceCache(windowMilliseconds: Self.window)
    }

    public func authenticate(_ head: HTTPRequestHead, body: [UInt8]) -> Result<String, GatewayError> {
        let h = head.headers
        if let key = h["x-roomcast-key"] {
            return verify(key: key, nonce: h["x-roomcast-nonce"], timestamp: h["x-roomcast-timestamp"], signature: h["x-roomcast-signature"]) {
                secret, nonce, ts in
                let bodyHash = hex(Array(SHA256.hash(data: body)))
                let canonical = "\(head.method.rawValue)\n\(head.target)\n\(ts)\n\(nonce)\n\(bodyHash)"
                return hex(Array(HMAC<SHA256>.authenticationCode(for: Array(canonical.utf8), using: SymmetricKey(data: Array(secret.utf8)))))
            }
        }
        if let key = h["app-key"] ?? h["rc-app-key"] {
            return verify(key: key, nonce: h["nonce"] ?? h["rc-nonce"], timestamp: h["timestamp"] ?? h["rc-timestamp"],
                          signature: h["signature"] ?? h["rc-signature"], sign: Self.sha1Signature)
        }
        if let key = h["appkey"] {
            return verify(key: key, nonce: h["nonce"], timestamp: h["curtime"], signature: h["checksum"], sign: Self.sha1Signature)
        }
        return .failure(GatewayError(.missingCredentials, "sign the request (App-Key/Nonce/Timestamp/Signature, AppKey/Nonce/CurTime/CheckSum, or X-Roomcast-*)", field: "headers"))
    }

    /// hex(SHA1(secret + nonce + timestamp)): RongCloud's Signature and NIM's CheckSum.
    static func sha1Signature(secret: String, nonce: String, timestamp: String) -> String {
        hex(Array(Insecure.SHA1.hash(data: Array((secret + nonce + timestamp).utf8))))
    }

    private func verify(key: String, nonce: String?, timestamp: String?, signature: String?,
                        sign: (String, String, String) -> String) -> Result<String, GatewayError> {
        guard let app = apps.app(key) else { return .failure(GatewayError(.unknownAppKey, "unknown app key", field: "App-Key")) }
        guard let nonce, !nonce.isEmpty, nonce.utf8.count <= 128 else {
            return .failure(GatewayError(.missingCredentials, "a nonce of 1 to 128 characters is required", field: "Nonce"))
        }
        guard let timestamp, let ts = Int64(timestamp), ts > 0 else {
            return .failure(GatewayError(.missingCredentials, "a numeric timestamp is required", field: "Timestamp"))
        }
        guard let signature, !signature.isEmpty else {
            return .failure(GatewayError(.missingCredentials, "a signature is required", field: "Signature"))
        }
        // Seconds or milliseconds (the SDKs send seconds, the docs say milliseconds).
        let ms = ts < 100_000_000_000 ? ts * 1000 : ts
        let now = clock()
        guard abs(now - ms) <= Self.window else {
            return .failure(GatewayError(.staleTimestamp, "timestamp is more than 300 s from the server time", field: "Timestamp"))
        }
        let expected = sign(app.secret, nonce, timestamp)
        guard constantTimeEqual(expected, signature.lowercased()) else {
            return .failure(GatewayError(.badSignature, "signature mismatch", field: "Signature"))
        }
        guard nonces.use(app: key, nonce: nonce, now: now) else {
            return .failure(GatewayError(.nonceReused, "nonce already used", field: "Nonce"))
        }
        return .success(key)
    }
}

func hex(_ bytes: [UInt8]) -> String { hexEncoded(bytes) }

func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var diff: UInt8 = 0
    for i in 0..<x.count { diff |= x[i] ^ y[i] }
    return diff == 0
}

// MARK: Client tokens (JWT, HS256)

/// The claims Roomcast puts in (and accepts from) client tokens.
public struct TokenClaims: Codable, Equatable, Sendable {
    /// User id.
    public var sub: String
    /// App key.
    public var app: String
    /// Expiry (seconds since 1970).
    public var exp: Int64
    public var iat: Int64?
    public var name: String?
    public var avatar: String?
    public var device: String?

    public init(sub: String, app: String, exp: Int64, iat: Int64? = nil, name: String? = nil, avatar: String? = nil, device: String? = nil) {
        self.sub = sub
        self.app = app
        self.exp = exp
        self.iat = iat
        self.name = name
        self.avatar = avatar
        self.device = device
    }
}

/// JWT with the algorithm pinned to HS256 and the app secret as key: `alg: none` and key
/// confusion (an RS256 header) are refused.
public enum ClientToken {
    static let header = base64URL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))

    public static func mint(_ claims: TokenClaims, secret: String) -> String {
        let payload = base64URL(Array(try! JSONEncoder().encode(claims)))
        let signingInput = header + "." + payload
        let mac = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return signingInput + "." + base64URL(Array(mac))
    }

    /// Verifies signature and app; returns the claims. Expiry is the caller's decision (a grace
    /// may apply), but `exp` is required.
    public static func verify(_ token: String, apps: AppRegistry) -> Result<TokenClaims, GatewayError> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]), let payloadBytes = base64URLDecode(parts[1]),
              let sig = base64URLDecode(parts[2]) else {
            return .failure(GatewayError(.badToken, "token is not a JWT", field: "token"))
        }
        struct Header: Decodable {
            let alg: String
            let typ: String?
        }
        guard let h = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)), h.alg == "HS256" else {
            return .failure(GatewayError(.badToken, "token algorithm must be HS256", field: "token"))
        }
        guard let claims = try? JSONDecoder().decode(TokenClaims.self, from: Data(payloadBytes)) else {
            return .failure(GatewayError(.badToken, "token claims must include sub, app and exp", field: "token"))
        }
        // Seconds since 1970, before the year 5000: expiry arithmetic in milliseconds stays in range.
        guard claims.exp > 0 && claims.exp < 95_617_584_000 else {
            return .failure(GatewayError(.badToken, "token exp must be seconds since 1970", field: "token"))
        }
        guard let app = apps.app(claims.app) else {
            return .failure(GatewayError(.badToken, "token is for an unknown app", field: "token"))
        }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(sig, authenticating: signingInput, using: SymmetricKey(data: Array(app.secret.utf8))) else {
            return .failure(GatewayError(.badToken, "token signature is invalid", field: "token"))
        }
        return .success(claims)
    }
}

func base64URL(_ bytes: [UInt8]) -> String {
    Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

func base64URLDecode<S: StringProtocol>(_ s: S) -> [UInt8]? {
    var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while t.count % 4 != 0 { t += "=" }
    return Data(base64Encoded: t).map { Array($0) }
}
