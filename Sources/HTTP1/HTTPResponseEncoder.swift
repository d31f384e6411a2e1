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
    /// Exact size of `write`'s output, so the caller can allocate once.
    public static func encodedSize(_ head: HTTPResponseHead, body: [UInt8], date: HTTPDate?, close: Bool, headRequest: Bool,
                                   keepAlive: Bool = false) -> Int {
        let code = head.status.code
        var n = 9 + decimalDigits(code) + 1 + head.status.reason.utf8.count + 2
        for f in head.headers.fields { n += f.name.utf8.count + 2 + f.value.utf8.count + 2 }
        if keepAlive { n += 24 }
        if let date { n += 6 + date.text.utf8.count + 2 }
        let hasBody = code >= 200 && code != 204 && code != 304
        if hasBody { n += 16 + decimalDigits(body.count) + 2 }
        if close { n += 19 }
        n += 2
        if hasBody && !headRequest { n += body.count }
        return n
    }

    /// Writes a whole response to `out` (which has `encodedSize` bytes); returns the bytes written.
    /// Names, values and reasons are copied as they are: `HTTPHeaders` and `HTTPStatus` hold no CR
    /// or LF, and an `HTTPDate` is made only from a time. `keepAlive` adds `Connection: keep-alive`
    /// (what an HTTP/1.0 client needs to keep the connection).
    @discardableResult
    public static func write(_ head: HTTPResponseHead, body: [UInt8], date: HTTPDate?, close: Bool, headRequest: Bool,
                             keepAlive: Bool = false, to out: UnsafeMutableRawPointer) -> Int {
        var p = out
        @inline(__always) func raw(_ s: StaticString) {
            p.copyMemory(from: s.utf8Start, byteCount: s.utf8CodeUnitCount)
            p += s.utf8CodeUnitCount
        }
        @inline(__always) func text(_ s: String) {
            let u = s.utf8
            let n = u.count
            // Native and small strings lend their bytes; any other is copied a byte at a time.
            let copied: Void? = u.withContiguousStorageIfAvailable { b in
                if n > 0 { p.copyMemory(from: b.baseAddress!, byteCount: n) }
            }
            if copied == nil {
                for (i, c) in u.enumerated() { p.storeBytes(of: c, toByteOffset: i, as: UInt8.self) }
            }
            p += n
        }
        @inline(__always) func byte(_ b: UInt8) {
            p.storeBytes(of: b, as: UInt8.self)
            p += 1
        }
        @inline(__always) func decimal(_ v: Int) {
            let digits = decimalDigits(v)
            var x = v
            for i in stride(from: digits - 1, through: 0, by: -1) {
                p.storeBytes(of: UInt8(x % 10) + 0x30, toByteOffset: i, as: UInt8.self)
                x /= 10
            }
            p += digits
        }
        @inline(__always) func field(_ name: String, _ value: String) {
            text(name)
            raw(": ")
            text(value)
            raw("\r\n")
        }
        let code = head.status.code
        raw("HTTP/1.1 ")
        decimal(code)
        byte(SP)
        text(head.status.reason)
        raw("\r\n")
        for f in head.headers.fields { field(f.name, f.value) }
        if keepAlive { raw("Connection: keep-alive\r\n") }
        if let date { field("Date", date.text) }
        let hasBody = code >= 200 && code != 204 && code != 304
        if hasBody {
            raw("Content-Length: ")
            decimal(body.count)
            raw("\r\n")
        }
        if close { raw("Connection: close\r\n") }
        raw("\r\n")
        if hasBody && !headRequest && !body.isEmpty {
            body.withUnsafeBytes { p.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            p += body.count
        }
        return p - out
    }

    /// The head of a streaming response (TR-1): its body follows in chunks (`Transfer-Encoding:
    /// chunked`) or, for an HTTP/1.0 client, until the connection closes (`Connection: close`).
    public static func streamHead(_ head: HTTPResponseHead, date: HTTPDate?, chunked: Bool) -> [UInt8] {
        var out = "HTTP/1.1 \(head.status.code) \(head.status.reason)\r\n"
        for f in head.headers.fields { out += "\(f.name): \(f.value)\r\n" }
        if let date { out += "Date: \(date.text)\r\n" }
        out += chunked ? "Transfer-Encoding: chunked\r\n\r\n" : "Connection: close\r\n\r\n"
        return Array(out.utf8)
    }

    /// The chunk header of `count` bytes of data (RFC 9112 §7.1): hex size, CRLF.
    public static func chunkHeader(_ count: Int) -> [UInt8] { Array((String(count, radix: 16) + "\r\n").utf8) }

    /// The last chunk of a chunked body, with no trailer.
    public static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    static func decimalDigits(_ v: Int) -> Int {
        var n = 1
        var x = v
        while x >= 10 {
            x /= 10
            n += 1
        }
        return n
    }

    /// A whole response appended to `out` (the same bytes as `write`).
    public static func encode(_ head: HTTPResponseHead, body: [UInt8], date: HTTPDate?, close: Bool, headRequest: Bool = false,
                              into out: inout [UInt8]) {
        let size = encodedSize(head, body: body, date: date, close: close, headRequest: headRequest)
        let start = out.count
        out.append(contentsOf: repeatElement(0, count: size))
        out.withUnsafeMutableBytes { raw in
            _ = write(head, body: body, date: date, close: close, headRequest: headRequest, to: raw.baseAddress! + start)
        }
    }
}

/// A `Date` field value: made only from a time, so it never holds anything but an IMF-fixdate.
public struct HTTPDate: Sendable, Equatable {
    public let text: String
    public init(secondsSince1970 t: Int64) { text = httpDate(secondsSince1970: t) }
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
