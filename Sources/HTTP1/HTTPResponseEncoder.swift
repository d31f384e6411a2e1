/// A response's status line and header fields (the body travels separately).
public struct HTTPResponseHead: Sendable, Equatable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public init(status: HTTPStatus, headers: HTTPHeaders = HTTPHeaders()) {
        self.status = status
        self.headers = headers
    }
}

/// Serialises responses into bytes (RFC 9112 §4–6).
public enum HTTPResponseEncoder {
    /// Appends the status line and header section to `out`.
    ///
    /// - `date`: the IMF-fixdate to send (the server caches it per second).
    /// - `contentLength`: added unless the status forbids a body (1xx, 204, 304).
    /// - `close`: adds `Connection: close`.
    public static func encodeHead(_ head: HTTPResponseHead, contentLength: Int?, date: String?, close: Bool,
                                  into out: inout [UInt8]) {
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(head.status.code, to: &out)
        out.append(SP)
        out.append(contentsOf: head.status.reason.utf8)
        out.append(contentsOf: [CR, LF])
        for field in head.headers.fields {
            append(field.name, field.value, to: &out)
        }
        if let date { append("Date", date, to: &out) }
        let code = head.status.code
        if let contentLength, code >= 200, code != 204, code != 304 {
            out.append(contentsOf: "Content-Length: ".utf8)
            appendDecimal(contentLength, to: &out)
            out.append(contentsOf: [CR, LF])
        }
        if close { out.append(contentsOf: "Connection: close\r\n".utf8) }
        out.append(contentsOf: [CR, LF])
    }

    /// A whole response: head then body (omitted for HEAD requests, whose Content-Length still
    /// describes the body a GET would get).
    public static func encode(_ head: HTTPResponseHead, body: [UInt8], date: String?, close: Bool, headRequest: Bool = false,
                              into out: inout [UInt8]) {
        encodeHead(head, contentLength: body.count, date: date, close: close, into: &out)
        let code = head.status.code
        if !headRequest && code >= 200 && code != 204 && code != 304 { out.append(contentsOf: body) }
    }

    @inline(__always)
    static func append(_ name: String, _ value: String, to out: inout [UInt8]) {
        out.append(contentsOf: name.utf8)
        out.append(contentsOf: [COLON, SP])
        // A value is never allowed to smuggle a line break into the response.
        for b in value.utf8 { out.append(b == CR || b == LF ? SP : b) }
        out.append(contentsOf: [CR, LF])
    }

    @inline(__always)
    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        if value == 0 { out.append(0x30); return }
        var v = value
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var n = 0
        withUnsafeMutableBytes(of: &digits) { d in
            while v > 0 {
                d[n] = UInt8(v % 10) + 0x30
                v /= 10
                n += 1
            }
            for k in stride(from: n - 1, through: 0, by: -1) { out.append(d[k]) }
        }
    }
}

/// The IMF-fixdate of RFC 9110 §5.6.7 for a Unix time, e.g. "Sun, 06 Nov 1994 08:49:37 GMT".
public func httpDate(secondsSince1970 t: Int64) -> String {
    let days = t >= 0 ? t / 86400 : (t - 86399) / 86400
    let secs = t - days * 86400
    let (y, m, d) = civilFromDays(days)
    let weekday = Int((days % 7 + 11) % 7) // 1970-01-01 was a Thursday
    let wd = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][weekday]
    let mon = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"][m - 1]
    func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
    return "\(wd), \(two(Int64(d))) \(mon) \(y) \(two(secs / 3600)):\(two(secs % 3600 / 60)):\(two(secs % 60)) GMT"
}

/// Howard Hinnant's days-from-civil inverse: (year, month 1–12, day 1–31) for days since 1970-01-01.
public func civilFromDays(_ z0: Int64) -> (year: Int64, month: Int, day: Int) {
    let z = z0 + 719_468
    let era = (z >= 0 ? z : z - 146_096) / 146_097
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let y = yoe + era * 400
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    return (m <= 2 ? y + 1 : y, Int(m), Int(d))
}
