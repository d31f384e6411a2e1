/// The forms of a request target (RFC 9112 §3.2) and the syntax of `Host` (RFC 9110 §7.2), checked
/// on the parser's buffered head: index arithmetic over bytes, no allocation.
enum RequestTarget {
    enum Form: Equatable {
        /// `/path?query` (§3.2.1): what nearly every request uses.
        case origin
        /// `http://authority/path?query` (§3.2.2): `rest` is the path-abempty and query, which may
        /// be empty.
        case absolute(authority: Range<Int>, rest: Range<Int>)
        /// `*` (§3.2.4).
        case asterisk
        /// `host:port` (§3.2.3), CONNECT's form.
        case authority
    }

    /// The form of `b[r]` (a non-empty target of visible ASCII), or why it has none.
    static func form(_ b: [UInt8], _ r: Range<Int>) -> Result<Form, HTTPParserError> {
        let first = b[r.lowerBound]
        if first == SLASH { return .success(.origin) }
        if first == STAR && r.count == 1 { return .success(.asterisk) }
        if isValidAuthority(b, r, requirePort: true) { return .success(.authority) }
        // absolute-URI = scheme ":" hier-part [ "?" query ]; scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )
        var i = r.lowerBound
        guard isAlpha(first) else { return .failure(.badRequest("invalid request target")) }
        while i < r.upperBound, isAlpha(b[i]) || isDigit(b[i]) || b[i] == 0x2B || b[i] == 0x2D || b[i] == 0x2E { i += 1 }
        guard i < r.upperBound, b[i] == COLON else { return .failure(.badRequest("invalid request target")) }
        let scheme = r.lowerBound..<i
        guard schemeIs(b, scheme, "http") || schemeIs(b, scheme, "https") else {
            return .failure(.badRequest("unsupported scheme in request target"))
        }
        // http-URI = "http" "://" authority path-abempty [ "?" query ] (RFC 9110 §4.2.1)
        guard r.upperBound - i >= 3, b[i + 1] == SLASH, b[i + 2] == SLASH else {
            return .failure(.badRequest("invalid request target"))
        }
        let authorityStart = i + 3
        var end = authorityStart
        while end < r.upperBound, b[end] != SLASH, b[end] != QUESTION { end += 1 }
        let authority = authorityStart..<end
        // RFC 9110 §4.2.4: userinfo in an http(s) URI is an error.
        if b[authority].contains(AT) { return .failure(.badRequest("userinfo in request target")) }
        guard isValidAuthority(b, authority, requirePort: false), !authority.isEmpty else {
            return .failure(.badRequest("invalid authority in request target"))
        }
        return .success(.absolute(authority: authority, rest: end..<r.upperBound))
    }

    /// A valid `Host` field value: empty, or uri-host [ ":" port ] (RFC 9110 §7.2, RFC 9112 §3.2).
    static func isValidHost(_ b: [UInt8], _ r: Range<Int>) -> Bool {
        r.isEmpty || isValidAuthority(b, r, requirePort: false)
    }

    /// uri-host [ ":" port ] with a non-empty host: an IP-literal in brackets, or a reg-name (which
    /// covers IPv4 addresses) of unreserved, sub-delims and %HH; a port of at most 5 digits and at
    /// most 65535 (RFC 3986 allows more digits; no TCP port has them). No userinfo.
    static func isValidAuthority(_ b: [UInt8], _ r: Range<Int>, requirePort: Bool) -> Bool {
        precondition(r.lowerBound >= 0 && r.upperBound <= b.count)
        // Read through a buffer pointer: every index below is kept within `r`, checked above.
        return b.withUnsafeBufferPointer { isValidAuthority($0, r, requirePort: requirePort) }
    }

    private static func isValidAuthority(_ b: UnsafeBufferPointer<UInt8>, _ r: Range<Int>, requirePort: Bool) -> Bool {
        var i = r.lowerBound
        let n = r.upperBound
        if i < n && b[i] == 0x5B { // "[" IPv6address / IPvFuture "]" (RFC 3986 §3.2.2)
            i += 1
            let start = i
            let future = i < n && (b[i] == 0x76 || b[i] == 0x56) // "v"
            while i < n && b[i] != 0x5D {
                let c = b[i]
                guard hexValue(c) != nil || c == COLON || c == 0x2E || (future && isRegNameChar(c)) else { return false }
                i += 1
            }
            guard i < n, i > start else { return false }
            i += 1
        } else {
            while i < n && b[i] != COLON {
                if b[i] == PERCENT {
                    guard i + 2 < n, hexValue(b[i + 1]) != nil, hexValue(b[i + 2]) != nil else { return false }
                    i += 3
                    continue
                }
                guard isRegNameChar(b[i]) else { return false }
                i += 1
            }
            guard i > r.lowerBound else { return false }
        }
        if i == n { return !requirePort }
        guard b[i] == COLON else { return false }
        i += 1
        let digits = n - i
        guard digits <= 5, !requirePort || digits > 0 else { return false }
        var port = 0
        while i < n {
            guard isDigit(b[i]) else { return false }
            port = port * 10 + Int(b[i] - 0x30)
            i += 1
        }
        return port <= 65535
    }

    /// Scheme names are case-insensitive (RFC 3986 §3.1).
    private static func schemeIs(_ b: [UInt8], _ r: Range<Int>, _ name: StaticString) -> Bool {
        guard r.count == name.utf8CodeUnitCount else { return false }
        let p = name.utf8Start
        for (k, i) in r.enumerated() where lower(b[i]) != p[k] { return false }
        return true
    }
}

@usableFromInline let SLASH: UInt8 = 0x2F
@usableFromInline let STAR: UInt8 = 0x2A
@usableFromInline let QUESTION: UInt8 = 0x3F
@usableFromInline let AT: UInt8 = 0x40
@usableFromInline let PERCENT: UInt8 = 0x25

@inline(__always) func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) >= 0x61 && (b | 0x20) <= 0x7A }

/// reg-name characters other than pct-encoded: unreserved = ALPHA / DIGIT / "-" / "." / "_" / "~",
/// sub-delims = "!" / "$" / "&" / "'" / "(" / ")" / "*" / "+" / "," / ";" / "=" (RFC 3986 §2), as a
/// mask (see `isTokenChar`).
@inline(__always) func isRegNameChar(_ b: UInt8) -> Bool {
    inMask(b, low: 0x2BFF_7FD2_0000_0000, high: 0x47FF_FFFE_87FF_FFFE)
}
