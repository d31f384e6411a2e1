import Crypto
import Foundation
import HTTP1

/// Request signing, each scheme implemented once (SPEC §2). The gateway's authenticator, the
/// vendor surfaces and the test clients all sign and verify through here.
public enum Signing {
    /// How a request was signed.
    public enum Scheme: Sendable, Equatable {
        /// RongCloud: `App-Key`, `Nonce`, `Timestamp`, `Signature` (also `RC-` prefixed),
        /// `Signature = hex(SHA1(appSecret + nonce + timestamp))`.
        case rongCloud
        /// NIM: `AppKey`, `Nonce`, `CurTime`, `CheckSum`, the same formula.
        case nim
        /// Native (recommended): `X-Roomcast-Key`, `X-Roomcast-Timestamp`, `X-Roomcast-Nonce`,
        /// `X-Roomcast-Signature = hex(HMAC-SHA256(appSecret, METHOD \n target \n timestamp \n nonce \n hex(SHA256(body))))`.
        case native
    }

    /// The credentials a request carries, read from its header fields (`header` looks a field up
    /// by lowercase name). Nil when it carries no app key in any scheme.
    public struct Credentials: Sendable, Equatable {
        public var scheme: Scheme
        public var appKey: String
        public var nonce: String?
        public var timestamp: String?
        public var signature: String?
        /// The header names, for error messages that name the field.
        public var nonceField: String
        public var timestampField: String
        public var signatureField: String
        public var keyField: String

        public static func read(_ header: (String) -> String?) -> Credentials? {
            if let key = header("x-roomcast-key") {
                return Credentials(scheme: .native, appKey: key, nonce: header("x-roomcast-nonce"), timestamp: header("x-roomcast-timestamp"),
                                   signature: header("x-roomcast-signature"), nonceField: "X-Roomcast-Nonce",
                                   timestampField: "X-Roomcast-Timestamp", signatureField: "X-Roomcast-Signature", keyField: "X-Roomcast-Key")
            }
            if let key = header("app-key") ?? header("rc-app-key") {
                return Credentials(scheme: .rongCloud, appKey: key, nonce: header("nonce") ?? header("rc-nonce"),
                                   timestamp: header("timestamp") ?? header("rc-timestamp"), signature: header("signature") ?? header("rc-signature"),
                                   nonceField: "Nonce", timestampField: "Timestamp", signatureField: "Signature", keyField: "App-Key")
            }
            if let key = header("appkey") {
                return Credentials(scheme: .nim, appKey: key, nonce: header("nonce"), timestamp: header("curtime"), signature: header("checksum"),
                                   nonceField: "Nonce", timestampField: "CurTime", signatureField: "CheckSum", keyField: "AppKey")
            }
            return nil
        }
    }

    /// hex(SHA1(secret + nonce + timestamp)): RongCloud's Signature and NIM's CheckSum.
    public static func sha1(secret: String, nonce: String, timestamp: String) -> String {
        hexEncoded(Insecure.SHA1.hash(data: Array((secret + nonce + timestamp).utf8)))
    }

    /// The native scheme's signature over method, target, timestamp, nonce and the body's hash.
    public static func native(secret: String, method: String, target: String, timestamp: String, nonce: String, body: [UInt8]) -> String {
        let bodyHash = hexEncoded(SHA256.hash(data: body))
        let canonical = "\(method)\n\(target)\n\(timestamp)\n\(nonce)\n\(bodyHash)"
        return hexEncoded(HMAC<SHA256>.authenticationCode(for: Array(canonical.utf8), using: SymmetricKey(data: Array(secret.utf8))))
    }

    /// The signature `credentials` should carry for this request.
    public static func expected(_ c: Credentials, secret: String, nonce: String, timestamp: String, method: String, target: String,
                                body: [UInt8]) -> String {
        switch c.scheme {
        case .rongCloud, .nim: return sha1(secret: secret, nonce: nonce, timestamp: timestamp)
        case .native: return native(secret: secret, method: method, target: target, timestamp: timestamp, nonce: nonce, body: body)
        }
    }

    /// Timestamps may be seconds (what the SDKs send) or milliseconds (what the docs say).
    public static func milliseconds(_ timestamp: Int64) -> Int64 {
        timestamp < 100_000_000_000 ? timestamp * 1000 : timestamp
    }

    /// How far a timestamp may be from the server's clock, and how long a nonce is remembered.
    public static let windowMilliseconds: Int64 = 300_000

    public static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<x.count { diff |= x[i] ^ y[i] }
        return diff == 0
    }
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
    /// BX-3: the holder may watch any room of the app (`room.observe`) without joining it. Only
    /// an app server (holding the secret) mints such tokens; the console asks for one.
    public var obs: Bool?
    /// AU-1: the tags the holder enters its rooms with (a join may give its own).
    public var tags: [String]?

    public init(sub: String, app: String, exp: Int64, iat: Int64? = nil, name: String? = nil, avatar: String? = nil, device: String? = nil,
                observer: Bool = false, tags: [String]? = nil) {
        self.tags = tags
        self.obs = observer ? true : nil
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
    static let headerJSON = Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8)
    static let header = base64URL(headerJSON)

    public static func mint(_ claims: TokenClaims, secret: String) -> String {
        let payload = base64URL(Array(try! JSONEncoder().encode(claims)))
        let signingInput = header + "." + payload
        let mac = HMAC<SHA256>.authenticationCode(for: Array(signingInput.utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return signingInput + "." + base64URL(Array(mac))
    }

    /// Verifies signature and app (`secret` looks an app's secret up by key); returns the claims.
    /// Expiry is the caller's decision (a grace may apply), but `exp` is required.
    public static func verify(_ token: String, secret: (String) -> String?) -> Result<TokenClaims, GatewayError> {
        verify(token, secrets: { secret($0).map { [$0] } ?? [] })
    }

    /// The same, accepting a token signed with any of the app's `secrets` (OP-2: within a rotated
    /// secret's grace, the current and the previous one).
    public static func verify(_ token: String, secrets: (String) -> [String]) -> Result<TokenClaims, GatewayError> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = base64URLDecode(parts[0]), let payloadBytes = base64URLDecode(parts[1]),
              let sig = base64URLDecode(parts[2]) else {
            return .failure(GatewayError(.badToken, "token is not a JWT", field: "token"))
        }
        struct Header: Decodable {
            let alg: String
            let typ: String?
        }
        // The header `mint` writes (nearly every token's) is known without parsing it.
        guard headerBytes == headerJSON || (try? JSONDecoder().decode(Header.self, from: Data(headerBytes)))?.alg == "HS256" else {
            return .failure(GatewayError(.badToken, "token algorithm must be HS256", field: "token"))
        }
        guard let claims = try? JSONDecoder().decode(TokenClaims.self, from: Data(payloadBytes)) else {
            return .failure(GatewayError(.badToken, "token claims must include sub, app and exp", field: "token"))
        }
        // Seconds since 1970, before the year 5000: expiry arithmetic in milliseconds stays in range.
        guard claims.exp > 0 && claims.exp < 95_617_584_000 else {
            return .failure(GatewayError(.badToken, "token exp must be seconds since 1970", field: "token"))
        }
        let appSecrets = secrets(claims.app)
        guard !appSecrets.isEmpty else {
            return .failure(GatewayError(.badToken, "token is for an unknown app", field: "token"))
        }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard appSecrets.contains(where: { HMAC<SHA256>.isValidAuthenticationCode(sig, authenticating: signingInput, using: SymmetricKey(data: Array($0.utf8))) }) else {
            return .failure(GatewayError(.badToken, "token signature is invalid", field: "token"))
        }
        return .success(claims)
    }
}

/// Base64url without padding (RFC 4648 §5). Written straight into the string's storage: an HTTP
/// event stream writes a cursor with every event it sends (TR-1).
public func base64URL(_ bytes: [UInt8]) -> String {
    let n = bytes.count
    let count = n / 3 * 4 + [0, 2, 3][n % 3]
    return String(unsafeUninitializedCapacity: count) { out in
        var o = 0
        var i = 0
        while i + 3 <= n {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out[o] = base64URLAlphabet[Int(v >> 18)]
            out[o + 1] = base64URLAlphabet[Int(v >> 12 & 63)]
            out[o + 2] = base64URLAlphabet[Int(v >> 6 & 63)]
            out[o + 3] = base64URLAlphabet[Int(v & 63)]
            i += 3
            o += 4
        }
        if n - i == 1 {
            let v = UInt32(bytes[i]) << 16
            out[o] = base64URLAlphabet[Int(v >> 18)]
            out[o + 1] = base64URLAlphabet[Int(v >> 12 & 63)]
        } else if n - i == 2 {
            let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out[o] = base64URLAlphabet[Int(v >> 18)]
            out[o + 1] = base64URLAlphabet[Int(v >> 12 & 63)]
            out[o + 2] = base64URLAlphabet[Int(v >> 6 & 63)]
        }
        return count
    }
}

private let base64URLAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

/// Decodes base64url (RFC 4648 §5), taking the standard alphabet's `+` and `/` too, with or
/// without its `=` padding (whole or part); nil for anything else: another character, padding
/// inside or past the last group, a last group of one character or of padding alone. The unused low bits of the last character are not
/// checked (as Foundation's decoder). Pure, on the bytes: a client token is three of these on every
/// connect.
public func base64URLDecode<S: StringProtocol>(_ s: S) -> [UInt8]? {
    var utf8 = Array(s.utf8)
    // Padding is optional: strip what there is, then the groups' lengths say what it would be.
    var pads = 0
    while let last = utf8.last, last == UInt8(ascii: "=") {
        utf8.removeLast()
        pads += 1
    }
    let n = utf8.count
    let tail = n % 4
    // A last group of one character holds no byte; padding, if given, must be within the last
    // group (it may be short: "QQ=" is "QQ==").
    guard tail != 1, pads == 0 || (tail != 0 && tail + pads <= 4) else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(n / 4 * 3 + (tail == 0 ? 0 : tail - 1))
    var acc: UInt32 = 0
    var bits = 0
    for c in utf8 {
        let v = base64URLValue[Int(c)]
        guard v < 64 else { return nil }
        acc = acc << 6 | UInt32(v)
        bits += 6
        if bits >= 8 {
            bits -= 8
            out.append(UInt8(truncatingIfNeeded: acc >> UInt32(bits)))
            acc &= (1 << UInt32(bits)) - 1
        }
    }
    return out
}

/// Each byte's value in either base64 alphabet, or 64 (not a base64 character).
private let base64URLValue: [UInt8] = {
    var table = [UInt8](repeating: 64, count: 256)
    for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() { table[Int(c)] = UInt8(i) }
    for c in "-+".utf8 { table[Int(c)] = 62 }
    for c in "_/".utf8 { table[Int(c)] = 63 }
    return table
}()
