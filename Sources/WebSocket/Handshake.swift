import Crypto

/// The server side of the opening handshake (RFC 6455 §4.2).
public enum WebSocketHandshake {
    /// Why an upgrade request was refused, and the status to answer with.
    public enum Rejection: Error, Equatable, Sendable {
        /// 400: not a valid upgrade request (method, Upgrade, Connection, key, body).
        case badRequest(String)
        /// 426 with `Sec-WebSocket-Version: 13`.
        case unsupportedVersion
        /// 403: the Origin is not on the allowlist.
        case forbiddenOrigin(String)

        public var statusCode: Int {
            switch self {
            case .badRequest: return 400
            case .unsupportedVersion: return 426
            case .forbiddenOrigin: return 403
            }
        }
    }

    public struct Acceptance: Equatable, Sendable {
        public var acceptValue: String
        public var deflate: PerMessageDeflateParameters?
        public init(acceptValue: String, deflate: PerMessageDeflateParameters?) {
            self.acceptValue = acceptValue
            self.deflate = deflate
        }
        /// Header fields of the 101 response.
        public var responseHeaders: [(name: String, value: String)] {
            var h: [(name: String, value: String)] = [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", acceptValue),
            ]
            if let deflate { h.append(("Sec-WebSocket-Extensions", deflate.responseHeaderValue)) }
            return h
        }
        public static func == (a: Acceptance, b: Acceptance) -> Bool {
            a.acceptValue == b.acceptValue && a.deflate == b.deflate
        }
    }

    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

    /// `Sec-WebSocket-Accept` for a key: base64(SHA-1(key + GUID)).
    public static func acceptValue(forKey key: String) -> String {
        let digest = Insecure.SHA1.hash(data: Array((key + guid).utf8))
        return base64Encode(Array(digest))
    }

    /// Checks an upgrade request. `header` returns every value of a (lower-case) header name.
    /// `allowedOrigins`: nil allows any origin; otherwise exact origins, `*`, or `*.host` patterns.
    public static func validate(method: String, isHTTP11: Bool, hasBody: Bool, header: (String) -> [String],
                                allowedOrigins: [String]?, deflate: PerMessageDeflateConfiguration) -> Result<Acceptance, Rejection> {
        guard method == "GET" else { return .failure(.badRequest("WebSocket upgrade must use GET")) }
        guard isHTTP11 else { return .failure(.badRequest("WebSocket upgrade needs HTTP/1.1")) }
        guard !hasBody else { return .failure(.badRequest("upgrade request must not have a body")) }
        guard tokens(header("upgrade")).contains("websocket") else {
            return .failure(.badRequest("missing Upgrade: websocket"))
        }
        guard tokens(header("connection")).contains("upgrade") else {
            return .failure(.badRequest("missing Connection: Upgrade"))
        }
        let keys = header("sec-websocket-key")
        guard keys.count == 1, let key = keys.first?.trimmingCharacters(), let raw = base64Decode(key), raw.count == 16 else {
            return .failure(.badRequest("Sec-WebSocket-Key must be 16 bytes in base64"))
        }
        let versions = header("sec-websocket-version").map { $0.trimmingCharacters() }
        guard !versions.isEmpty else { return .failure(.badRequest("missing Sec-WebSocket-Version")) }
        guard versions == ["13"] else { return .failure(.unsupportedVersion) }
        if let allowedOrigins, let origin = header("origin").first {
            guard originAllowed(origin.trimmingCharacters(), allowedOrigins) else { return .failure(.forbiddenOrigin(origin)) }
        }
        return .success(Acceptance(acceptValue: acceptValue(forKey: key),
                                   deflate: deflate.negotiate(offers: header("sec-websocket-extensions"))))
    }

    static func tokens(_ values: [String]) -> Set<String> {
        var out = Set<String>()
        for v in values {
            for t in v.split(separator: ",") { out.insert(t.trimmingCharacters().lowercased()) }
        }
        return out
    }

    /// Exact (case-insensitive) match, `*` for any, or `scheme://*.example.com` for subdomains.
    public static func originAllowed(_ origin: String, _ allowed: [String]) -> Bool {
        let o = origin.lowercased()
        for pattern in allowed.map({ $0.lowercased() }) {
            if pattern == "*" || pattern == o { return true }
            let parts = pattern.split(separator: "://*.", maxSplits: 1, omittingEmptySubsequences: false)
            if parts.count == 2 {
                let (scheme, suffix) = (parts[0], parts[1])
                if o.hasPrefix(scheme + "://"), o.hasSuffix("." + suffix) { return true }
            }
        }
        return false
    }
}

private let base64Alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

/// Standard base64 with padding (RFC 4648 §4).
public func base64Encode(_ bytes: [UInt8]) -> String {
    var out = [UInt8]()
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var i = 0
    while i + 3 <= bytes.count {
        let v = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
        out.append(base64Alphabet[Int(v >> 18 & 63)])
        out.append(base64Alphabet[Int(v >> 12 & 63)])
        out.append(base64Alphabet[Int(v >> 6 & 63)])
        out.append(base64Alphabet[Int(v & 63)])
        i += 3
    }
    let rest = bytes.count - i
    if rest > 0 {
        var v = UInt32(bytes[i]) << 16
        if rest == 2 { v |= UInt32(bytes[i + 1]) << 8 }
        out.append(base64Alphabet[Int(v >> 18 & 63)])
        out.append(base64Alphabet[Int(v >> 12 & 63)])
        out.append(rest == 2 ? base64Alphabet[Int(v >> 6 & 63)] : 0x3D)
        out.append(0x3D)
    }
    return String(decoding: out, as: UTF8.self)
}

/// Strict standard base64 decoding (padding required); nil if malformed.
public func base64Decode(_ string: String) -> [UInt8]? {
    let chars = Array(string.utf8)
    guard chars.count % 4 == 0 else { return nil }
    var out = [UInt8]()
    out.reserveCapacity(chars.count / 4 * 3)
    func value(_ c: UInt8) -> UInt32? {
        switch c {
        case 0x41...0x5A: return UInt32(c - 0x41)
        case 0x61...0x7A: return UInt32(c - 0x61 + 26)
        case 0x30...0x39: return UInt32(c - 0x30 + 52)
        case 0x2B: return 62
        case 0x2F: return 63
        default: return nil
        }
    }
    var i = 0
    while i < chars.count {
        let last = i + 4 == chars.count
        let pad = last ? (chars[i + 3] == 0x3D ? (chars[i + 2] == 0x3D ? 2 : 1) : 0) : 0
        guard let a = value(chars[i]), let b = value(chars[i + 1]) else { return nil }
        let c = pad >= 2 ? 0 : value(chars[i + 2])
        let d = pad >= 1 ? 0 : value(chars[i + 3])
        guard let c, let d else { return nil }
        let v = a << 18 | b << 12 | c << 6 | d
        out.append(UInt8(v >> 16 & 0xFF))
        if pad < 2 { out.append(UInt8(v >> 8 & 0xFF)) }
        if pad < 1 { out.append(UInt8(v & 0xFF)) }
        i += 4
    }
    return out
}
