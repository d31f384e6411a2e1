/// The limits of the HTTP/1.1 codec: one typed value with documented defaults, checked while bytes
/// arrive, before they are buffered (ARCHITECTURE §7.2).
public struct HTTPLimits: Sendable, Equatable {
    /// Request line (method, target, version) longer than this → 414.
    public var maxRequestLineBytes: Int = 8 * 1024
    /// Header section (after the request line, up to the empty line) larger than this → 431.
    public var maxHeaderBytes: Int = 32 * 1024
    /// More header fields than this → 431.
    public var maxHeaderCount: Int = 100
    /// A request body larger than this → 413 (for Content-Length, before any body byte is read).
    public var maxBodyBytes: Int = 1 << 20
    /// Longest chunk extension accepted on one chunk-size line → 400.
    public var maxChunkExtensionBytes: Int = 1024
    /// Empty lines tolerated before a request line (RFC 9112 §2.2).
    public var maxLeadingEmptyLines: Int = 8

    public init() {}
}

/// A request method. Any token is representable; well-known ones have names.
public struct HTTPMethod: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public init(stringLiteral value: String) { self.rawValue = value }
    public var description: String { rawValue }

    public static let GET: HTTPMethod = "GET"
    public static let HEAD: HTTPMethod = "HEAD"
    public static let POST: HTTPMethod = "POST"
    public static let PUT: HTTPMethod = "PUT"
    public static let PATCH: HTTPMethod = "PATCH"
    public static let DELETE: HTTPMethod = "DELETE"
    public static let OPTIONS: HTTPMethod = "OPTIONS"
}

public struct HTTPVersion: Hashable, Sendable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public init(major: Int, minor: Int) {
        self.major = major
        self.minor = minor
    }
    public static let http1_0 = HTTPVersion(major: 1, minor: 0)
    public static let http1_1 = HTTPVersion(major: 1, minor: 1)
    public var description: String { "HTTP/\(major).\(minor)" }
}

/// Header fields in arrival order. Request header names are stored lower-cased by the parser, so
/// look-ups compare against lower-case names.
///
/// A name is always a token (RFC 9110 §5.6.2; a name that is not one is stored as
/// `X-Invalid-Header-Name`) and a value never holds CR or LF (they become spaces), as fields are added: a field can never add a line or a field of
/// its own to a response (the encoder copies them as they are). A response built once and sent
/// many times is checked once.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}
    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: tokenSafe($0.0), value: lineSafe($0.1)) }
    }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: tokenSafe(name), value: lineSafe(value)))
    }

    /// A field from the request parser, which has refused CR and LF already.
    mutating func addParsed(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    public mutating func reserveCapacity(_ n: Int) { fields.reserveCapacity(n) }

    /// Replaces every field named `name` (case-insensitive) with one field.
    public mutating func replace(_ name: String, _ value: String) {
        let name = tokenSafe(name)
        fields.removeAll { Self.equalsIgnoringCase($0.name, name) }
        fields.append((name: name, value: lineSafe(value)))
    }

    /// The first value of `name` (case-insensitive).
    public subscript(_ name: String) -> String? {
        for f in fields where Self.equalsIgnoringCase(f.name, name) { return f.value }
        return nil
    }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.equalsIgnoringCase($0.name, name) }.map(\.value)
    }

    /// The comma-separated list elements of every `name` field, trimmed, empty ones dropped
    /// (RFC 9110 §5.6.1).
    public func listElements(_ name: String) -> [Substring] {
        var out: [Substring] = []
        for v in values(name) {
            for part in v.split(separator: ",", omittingEmptySubsequences: true) {
                let t = part.trimmingOWS()
                if !t.isEmpty { out.append(t) }
            }
        }
        return out
    }

    /// True if the list header `name` has the token `token` (case-insensitive).
    public func hasToken(_ name: String, _ token: String) -> Bool {
        listElements(name).contains { Self.equalsIgnoringCase($0, token) }
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> {
        fields.makeIterator()
    }

    public var count: Int { fields.count }

    static func equalsIgnoringCase<A: StringProtocol, B: StringProtocol>(_ a: A, _ b: B) -> Bool {
        let au = a.utf8, bu = b.utf8
        guard au.count == bu.count else { return false }
        for (x, y) in zip(au, bu) where x != y {
            let lx = (x >= 65 && x <= 90) ? x | 0x20 : x
            let ly = (y >= 65 && y <= 90) ? y | 0x20 : y
            if lx != ly { return false }
        }
        return true
    }
}

/// `name` if it is a token (the usual case); otherwise one fixed name that no framing or other
/// meaningful field has. (Mending a bad name byte by byte could make one: "Content Length".) The
/// value is kept, under that name, for whoever reads the response to see what went wrong.
func tokenSafe(_ name: String) -> String {
    if !name.isEmpty && name.utf8.allSatisfy(isTokenChar) { return name }
    return "X-Invalid-Header-Name"
}

/// `s` with every CR and LF replaced by a space (or `s` itself, the usual case).
func lineSafe(_ s: String) -> String {
    guard s.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A }) else { return s }
    return String(decoding: s.utf8.map { $0 == 0x0D || $0 == 0x0A ? 0x20 : $0 }, as: UTF8.self)
}

extension StringProtocol {
    /// Drops leading and trailing SP/HTAB (RFC 9110 OWS).
    func trimmingOWS() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return s
    }

    public func equalsIgnoringASCIICase<S: StringProtocol>(_ other: S) -> Bool {
        HTTPHeaders.equalsIgnoringCase(self, other)
    }
}

/// How the request body is framed (RFC 9112 §6).
public enum HTTPBodyFraming: Equatable, Sendable {
    case none
    case contentLength(Int)
    case chunked
}

/// A parsed request line and header section, already checked for framing ambiguities.
public struct HTTPRequestHead: Sendable, Equatable {
    public var method: HTTPMethod
    /// The request target in origin-form, path and query as sent (an absolute-form target is
    /// reduced to them, its authority becoming the `host` field, RFC 9112 §3.2.2), or `*` for a
    /// server-wide OPTIONS.
    public var target: String
    public var version: HTTPVersion
    public var headers: HTTPHeaders
    public var framing: HTTPBodyFraming
    /// Whether the connection may carry another request after this one (RFC 9112 §9.3).
    public var keepAlive: Bool
    /// `Expect: 100-continue` was sent.
    public var expectContinue: Bool
    /// The path part of the target (before `?`), split once when the head is built.
    public let path: String
    /// The query part of the target (after `?`), if any.
    public let query: String?

    public init(method: HTTPMethod, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = HTTPHeaders(),
                framing: HTTPBodyFraming = .none, keepAlive: Bool = true, expectContinue: Bool = false) {
        let (path, query) = Self.split(target)
        self.init(method: method, target: target, path: path, query: query, version: version, headers: headers, framing: framing,
                  keepAlive: keepAlive, expectContinue: expectContinue)
    }

    init(method: HTTPMethod, target: String, path: String, query: String?, version: HTTPVersion, headers: HTTPHeaders,
         framing: HTTPBodyFraming, keepAlive: Bool, expectContinue: Bool) {
        self.method = method
        self.target = target
        self.path = path
        self.query = query
        self.version = version
        self.headers = headers
        self.framing = framing
        self.keepAlive = keepAlive
        self.expectContinue = expectContinue
    }

    static func split(_ target: String) -> (String, String?) {
        let u = target.utf8
        guard let q = u.firstIndex(of: 0x3F) else { return (target, nil) }
        return (String(target[..<q]), String(target[u.index(after: q)...]))
    }
}

/// A response status with its reason phrase (CR and LF in a given reason become spaces, as in
/// header fields). A code outside 100–999 cannot be written as a status line: it is taken as 500.
public struct HTTPStatus: Hashable, Sendable, CustomStringConvertible {
    public let code: Int
    public let reason: String
    public init(code: Int, reason: String? = nil) {
        let valid = (100...999).contains(code)
        self.code = valid ? code : 500
        self.reason = valid ? reason.map(lineSafe) ?? HTTPStatus.defaultReason(code) : HTTPStatus.defaultReason(500)
    }
    public var description: String { "\(code) \(reason)" }

    public static let `continue` = HTTPStatus(code: 100)
    public static let switchingProtocols = HTTPStatus(code: 101)
    public static let ok = HTTPStatus(code: 200)
    public static let created = HTTPStatus(code: 201)
    public static let accepted = HTTPStatus(code: 202)
    public static let noContent = HTTPStatus(code: 204)
    public static let badRequest = HTTPStatus(code: 400)
    public static let unauthorized = HTTPStatus(code: 401)
    public static let forbidden = HTTPStatus(code: 403)
    public static let notFound = HTTPStatus(code: 404)
    public static let methodNotAllowed = HTTPStatus(code: 405)
    public static let requestTimeout = HTTPStatus(code: 408)
    public static let conflict = HTTPStatus(code: 409)
    public static let gone = HTTPStatus(code: 410)
    public static let payloadTooLarge = HTTPStatus(code: 413)
    public static let uriTooLong = HTTPStatus(code: 414)
    public static let unsupportedMediaType = HTTPStatus(code: 415)
    public static let expectationFailed = HTTPStatus(code: 417)
    public static let unprocessableContent = HTTPStatus(code: 422)
    public static let upgradeRequired = HTTPStatus(code: 426)
    public static let tooManyRequests = HTTPStatus(code: 429)
    public static let headerFieldsTooLarge = HTTPStatus(code: 431)
    public static let internalServerError = HTTPStatus(code: 500)
    public static let notImplemented = HTTPStatus(code: 501)
    public static let serviceUnavailable = HTTPStatus(code: 503)
    public static let versionNotSupported = HTTPStatus(code: 505)

    static func defaultReason(_ code: Int) -> String {
        switch code {
        case 100: return "Continue"
        case 101: return "Switching Protocols"
        case 200: return "OK"
        case 201: return "Created"
        case 202: return "Accepted"
        case 204: return "No Content"
        case 301: return "Moved Permanently"
        case 302: return "Found"
        case 304: return "Not Modified"
        case 400: return "Bad Request"
        case 401: return "Unauthorized"
        case 403: return "Forbidden"
        case 404: return "Not Found"
        case 405: return "Method Not Allowed"
        case 406: return "Not Acceptable"
        case 408: return "Request Timeout"
        case 409: return "Conflict"
        case 410: return "Gone"
        case 411: return "Length Required"
        case 413: return "Content Too Large"
        case 414: return "URI Too Long"
        case 415: return "Unsupported Media Type"
        case 417: return "Expectation Failed"
        case 422: return "Unprocessable Content"
        case 426: return "Upgrade Required"
        case 429: return "Too Many Requests"
        case 430: return "Service Not Enabled"
        case 431: return "Request Header Fields Too Large"
        case 500: return "Internal Server Error"
        case 501: return "Not Implemented"
        case 502: return "Bad Gateway"
        case 503: return "Service Unavailable"
        case 504: return "Gateway Timeout"
        case 505: return "HTTP Version Not Supported"
        default: return "Status \(code)"
        }
    }
}
