/// Why a request was refused. Each maps to one status; after any of them the connection is closed
/// and nothing pipelined behind the request is answered.
public enum HTTPParserError: Error, Equatable, Sendable, CustomStringConvertible {
    case badRequest(String)
    case uriTooLong
    case headerFieldsTooLarge
    case payloadTooLarge
    case unsupportedTransferCoding(String)
    /// A method this codec cannot carry (CONNECT: what follows its 2xx is a tunnel).
    case methodNotImplemented(String)
    case versionNotSupported
    case expectationFailed

    public var status: HTTPStatus {
        switch self {
        case .badRequest: return .badRequest
        case .uriTooLong: return .uriTooLong
        case .headerFieldsTooLarge: return .headerFieldsTooLarge
        case .payloadTooLarge: return .payloadTooLarge
        case .unsupportedTransferCoding, .methodNotImplemented: return .notImplemented
        case .versionNotSupported: return .versionNotSupported
        case .expectationFailed: return .expectationFailed
        }
    }

    public var description: String {
        switch self {
        case .badRequest(let why): return "bad request: \(why)"
        case .uriTooLong: return "request line too long"
        case .headerFieldsTooLarge: return "header section too large"
        case .payloadTooLarge: return "body too large"
        case .unsupportedTransferCoding(let c): return "unsupported transfer coding: \(c)"
        case .methodNotImplemented(let m): return "method not implemented: \(m) (this server is not a proxy)"
        case .versionNotSupported: return "HTTP version not supported"
        case .expectationFailed: return "unsupported expectation"
        }
    }
}

/// An incremental HTTP/1.1 request parser (RFC 9112): bytes in, events out, no I/O.
///
/// Feed it any split of the byte stream — one byte at a time or many requests at once. Each call to
/// `parse` consumes a prefix of the buffer and reports one step: more data is needed, a head, a
/// piece of body (a range of the buffer given), the end of a request, or an error. Every byte is
/// validated as it arrives, and every limit is checked before the byte is buffered.
public struct HTTPRequestParser {
    public enum Event: Equatable, Sendable {
        case head(HTTPRequestHead)
        /// Body bytes: this range of the buffer passed to the call that returned it.
        case body(Range<Int>)
        case end
    }

    public enum Step: Equatable, Sendable {
        /// Everything given was consumed; feed more.
        case needMoreData
        case event(Event)
        case error(HTTPParserError)
    }

    private enum State: Equatable {
        case lineStart            // before the request line; empty lines are skipped
        case leadingLF            // CR of an empty line before the request line
        case method
        case target
        case version
        case requestLineLF        // CR after the version
        case fieldLineStart       // start of a header line (or the empty line)
        case fieldName
        case fieldValueLeadingWS
        case fieldValue
        case fieldLineLF          // CR after a field value
        case headEndLF            // CR of the empty line ending the head
        case headComplete         // head built, not yet reported
        case body(remaining: Int)
        case bodyEnd
        case chunkSize
        case chunkExtension
        case chunkSizeLF
        case chunkData(remaining: Int)
        case chunkDataCR
        case chunkDataLF
        case trailerLineStart
        case trailerName
        case trailerValue
        case trailerLineLF
        case trailerEndLF
        case failed               // see `error`
    }

    public let limits: HTTPLimits
    private var state: State = .lineStart

    // The head under construction: raw bytes plus the ranges that name its parts.
    private var scratch: [UInt8] = []
    private var methodEnd = 0
    /// The byte-wise path buffers no separators, so the target starts at `methodEnd`; the
    /// whole-head path copies the head as sent, and it starts after the space.
    private var targetStart = 0
    private var targetEnd = 0
    private var versionStart = 0
    private var fieldRanges: [(name: Range<Int>, value: Range<Int>)] = []
    private var currentNameStart = 0
    private var currentNameEnd = 0
    private var currentValueStart = 0
    private var valueLastNonWS = 0
    private var requestLineBytes = 0
    private var headerBytes = 0
    private var emptyLines = 0
    private var builtHead: HTTPRequestHead?

    // Chunked body bookkeeping.
    private var chunkValue = 0
    private var chunkDigits = 0
    private var chunkExtensionBytes = 0
    private var bodyBytes = 0
    private var trailerBytes = 0

    /// Limits below their floor are raised to it: a request line and a header section may be
    /// limited to no less than one byte (a request always has them), every other limit to zero.
    /// The counting relies on it (what is left of a limit is never negative).
    public init(limits: HTTPLimits = HTTPLimits()) {
        var l = limits
        l.maxRequestLineBytes = max(1, l.maxRequestLineBytes)
        l.maxHeaderBytes = max(1, l.maxHeaderBytes)
        l.maxHeaderCount = max(0, l.maxHeaderCount)
        l.maxBodyBytes = max(0, l.maxBodyBytes)
        l.maxChunkExtensionBytes = max(0, l.maxChunkExtensionBytes)
        l.maxLeadingEmptyLines = max(0, l.maxLeadingEmptyLines)
        self.limits = l
        scratch.reserveCapacity(256)
    }

    /// True between requests: no byte of a next request has arrived yet.
    public var isIdle: Bool { state == .lineStart && emptyLines == 0 }

    /// Between requests, gives back the buffers the last head grew (a connection that will not
    /// read a request for a long while, e.g. one holding a streaming response, TR-1); the next
    /// head grows them again.
    public mutating func releaseBuffersIfIdle() {
        guard isIdle else { return }
        scratch = []
        fieldRanges = []
    }

    /// True once the head has been completely received (the slowloris timer stops here).
    public var isReadingBody: Bool {
        switch state {
        case .body, .bodyEnd, .chunkSize, .chunkExtension, .chunkSizeLF, .chunkData, .chunkDataCR, .chunkDataLF,
             .trailerLineStart, .trailerName, .trailerValue, .trailerLineLF, .trailerEndLF, .headComplete:
            return true
        default:
            return false
        }
    }

    /// What `next` reports: a payload-free value, cheap to return and to switch on. The head is
    /// taken with `takeHead()`, the error read from `error`.
    public enum Progress: Equatable, Sendable {
        /// Everything given was consumed; feed more.
        case needMoreData
        /// A head is complete: take it with `takeHead()`.
        case head
        /// Body bytes: this range of the buffer passed to the call that returned it.
        case body(Range<Int>)
        case end
        /// The request is refused: `error` says why.
        case error
    }

    /// Consumes a prefix of `buffer`; returns the step and how many bytes were consumed.
    public mutating func parse(_ buffer: UnsafeRawBufferPointer) -> (step: Step, consumed: Int) {
        let (progress, consumed) = next(buffer)
        switch progress {
        case .needMoreData: return (.needMoreData, consumed)
        case .head: return (.event(.head(takeHead())), consumed)
        case .body(let range): return (.event(.body(range)), consumed)
        case .end: return (.event(.end), consumed)
        case .error: return (.error(error!), consumed)
        }
    }

    /// Why the request was refused, once `next` has reported `.error` (it then reports it again on
    /// every call).
    public private(set) var error: HTTPParserError?

    /// The head `next` reported with `.head`. Called once per head.
    public mutating func takeHead() -> HTTPRequestHead {
        builtHead.take()!
    }

    /// `parse` without payloads: the connection's hot path.
    public mutating func next(_ buffer: UnsafeRawBufferPointer) -> (Progress, Int) {
        var i = 0
        let n = buffer.count
        while true {
            switch state {
            case .failed:
                return (.error, i)

            case .headComplete:
                switch builtHead!.framing {
                case .none, .contentLength(0): state = .bodyEnd
                case .contentLength(let length): state = .body(remaining: length)
                case .chunked:
                    state = .chunkSize
                    chunkValue = 0
                    chunkDigits = 0
                    bodyBytes = 0
                }
                return (.head, i)

            case .body(let remaining):
                if i == n { return (.needMoreData, i) }
                let take = min(remaining, n - i)
                let range = i..<(i + take)
                i += take
                state = remaining - take == 0 ? .bodyEnd : .body(remaining: remaining - take)
                return (.body(range), i)

            case .bodyEnd:
                resetForNextRequest()
                return (.end, i)

            case .chunkData(let remaining):
                if i == n { return (.needMoreData, i) }
                let take = min(remaining, n - i)
                let range = i..<(i + take)
                i += take
                state = remaining - take == 0 ? .chunkDataCR : .chunkData(remaining: remaining - take)
                return (.body(range), i)

            default:
                if i == n { return (.needMoreData, i) }
                if state == .lineStart, let end = wholeHead(buffer, from: i) {
                    i = end
                    switch buildHead() {
                    case .success(let head):
                        builtHead = head
                        state = .headComplete
                        continue
                    case .failure(let error):
                        fail(error)
                        return (.error, i)
                    }
                }
                // Runs of ordinary bytes in the long states are checked and buffered in one go;
                // the byte that ends a run goes through `step` like any other.
                if let error = scanRun(buffer, &i) {
                    fail(error)
                    return (.error, i)
                }
                if i == n { return (.needMoreData, i) }
                let byte = buffer[i]
                i += 1
                if let error = step(byte) {
                    fail(error)
                    return (.error, i)
                }
            }
        }
    }

    /// The common case in one pass: a whole, well-formed head at `b[start...]` (request line with
    /// HTTP/1.1 or HTTP/1.0, fields without obsolete folding, within every limit). It is copied to
    /// `scratch` as sent, names lower-cased in place, and the index after it returned. For anything
    /// else (a head cut short by the end of the buffer, any malformed or unusual form, a limit
    /// reached) nothing is changed and nil returned: the byte-wise path then reads the same bytes
    /// and gives its exact error. The tests feed every request whole and a byte at a time and
    /// require the same outcome, so the two paths cannot drift apart unseen.
    mutating func wholeHead(_ b: UnsafeRawBufferPointer, from start: Int) -> Int? {
        // Never looks further than the longest head the limits allow: bounded work per request.
        // (Each limit is clamped first, so limits near Int.max cannot overflow the sum.)
        let window = min(limits.maxRequestLineBytes, Int.max / 4) + 2 + min(limits.maxHeaderBytes, Int.max / 4)
        let n = b.count - start <= window ? b.count : start + window
        var i = start
        while i < n && isTokenChar(b[i]) { i += 1 }
        guard i > start, i < n, b[i] == SP else { return nil }
        let methodStop = i
        i += 1
        i = scanVisible(b, from: i, to: n, obsText: false)
        // The target, a space, "HTTP/1.x" and CRLF.
        guard i > methodStop + 1, n - i >= 11, b[i] == SP else { return nil }
        let targetStop = i
        let v = i + 1
        guard b[v] == 0x48, b[v + 1] == 0x54, b[v + 2] == 0x54, b[v + 3] == 0x50, b[v + 4] == SLASH, b[v + 5] == 0x31,
              b[v + 6] == 0x2E, b[v + 7] == 0x31 || b[v + 7] == 0x30, b[v + 8] == CR, b[v + 9] == LF,
              v + 8 - start <= limits.maxRequestLineBytes
        else { return nil }
        i = v + 10
        let fieldsStart = i
        while true {
            guard i < n else { return abandonWholeHead() }
            if b[i] == CR {
                guard i + 1 < n, b[i + 1] == LF else { return abandonWholeHead() }
                i += 2
                break
            }
            let nameStart = i
            while i < n && isTokenChar(b[i]) { i += 1 }
            guard i > nameStart, i < n, b[i] == COLON, fieldRanges.count < limits.maxHeaderCount else { return abandonWholeHead() }
            let nameStop = i
            i += 1
            while i < n, b[i] == SP || b[i] == HTAB { i += 1 }
            let valueStart = i
            var valueStop = i
            while i < n {
                let j = scanVisible(b, from: i, to: n, obsText: true)
                if j > i {
                    i = j
                    valueStop = j
                } else if b[i] == SP || b[i] == HTAB {
                    i += 1
                } else {
                    break
                }
            }
            guard i + 1 < n, b[i] == CR, b[i + 1] == LF else { return abandonWholeHead() }
            i += 2
            fieldRanges.append((name: (nameStart - start)..<(nameStop - start), value: (valueStart - start)..<(valueStop - start)))
        }
        guard i - fieldsStart <= limits.maxHeaderBytes else { return abandonWholeHead() }
        scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: b[start..<i]))
        scratch.withUnsafeMutableBufferPointer { out in
            for (name, _) in fieldRanges {
                for k in name { out[k] = lower(out[k]) }
            }
        }
        methodEnd = methodStop - start
        targetStart = methodEnd + 1
        targetEnd = targetStop - start
        versionStart = v - start
        return i
    }

    private mutating func abandonWholeHead() -> Int? {
        fieldRanges.removeAll(keepingCapacity: true)
        return nil
    }

    private mutating func fail(_ error: HTTPParserError) {
        state = .failed
        self.error = error
    }

    private mutating func resetForNextRequest() {
        state = .lineStart
        scratch.removeAll(keepingCapacity: true)
        fieldRanges.removeAll(keepingCapacity: true)
        requestLineBytes = 0
        headerBytes = 0
        emptyLines = 0
        trailerBytes = 0
    }

    /// Advances over one byte of the head or of chunk framing.
    @inline(__always)
    private mutating func step(_ byte: UInt8) -> HTTPParserError? {
        switch state {
        case .lineStart:
            if byte == CR { state = .leadingLF; return nil }
            if byte == LF { return .badRequest("bare LF") }
            guard isTokenChar(byte) else { return .badRequest("invalid character in method") }
            state = .method
            requestLineBytes = 1
            scratch.append(byte)
            return nil

        case .leadingLF:
            guard byte == LF else { return .badRequest("bare CR") }
            emptyLines += 1
            if emptyLines > limits.maxLeadingEmptyLines { return .badRequest("too many empty lines") }
            state = .lineStart
            return nil

        case .method:
            if let e = countRequestLine() { return e }
            if byte == SP {
                methodEnd = scratch.count
                targetStart = methodEnd
                state = .target
                return nil
            }
            guard isTokenChar(byte) else { return .badRequest("invalid character in method") }
            scratch.append(byte)
            return nil

        case .target:
            if let e = countRequestLine() { return e }
            if byte == SP {
                guard scratch.count > targetStart else { return .badRequest("empty request target") }
                targetEnd = scratch.count
                versionStart = scratch.count
                state = .version
                return nil
            }
            guard byte > 0x20 && byte < 0x7F else {
                return byte == CR || byte == LF ? .badRequest("missing HTTP version") : .badRequest("invalid character in request target")
            }
            scratch.append(byte)
            return nil

        case .version:
            // The line ending is not part of the request line's length.
            if byte == CR { state = .requestLineLF; return nil }
            if byte == LF { return .badRequest("bare LF") }
            if let e = countRequestLine() { return e }
            guard scratch.count - versionStart < 8 else { return .badRequest("malformed HTTP version") }
            scratch.append(byte)
            return nil

        case .requestLineLF:
            guard byte == LF else { return .badRequest("bare CR") }
            return checkVersion() ?? { state = .fieldLineStart; return nil }()

        case .fieldLineStart:
            headerBytes += 1
            if headerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            if byte == CR { state = .headEndLF; return nil }
            if byte == LF { return .badRequest("bare LF") }
            if byte == SP || byte == HTAB { return .badRequest("obsolete line folding") }
            guard isTokenChar(byte) else { return .badRequest("invalid character in field name") }
            if fieldRanges.count >= limits.maxHeaderCount { return .headerFieldsTooLarge }
            currentNameStart = scratch.count
            scratch.append(lower(byte))
            state = .fieldName
            return nil

        case .fieldName:
            headerBytes += 1
            if headerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            if byte == COLON {
                currentNameEnd = scratch.count
                currentValueStart = scratch.count
                valueLastNonWS = scratch.count
                state = .fieldValueLeadingWS
                return nil
            }
            if byte == SP || byte == HTAB { return .badRequest("whitespace before colon") }
            guard isTokenChar(byte) else { return .badRequest("invalid character in field name") }
            scratch.append(lower(byte))
            return nil

        case .fieldValueLeadingWS:
            headerBytes += 1
            if headerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            if byte == SP || byte == HTAB { return nil }
            currentValueStart = scratch.count
            valueLastNonWS = scratch.count
            state = .fieldValue
            return stepFieldValue(byte)

        case .fieldValue:
            headerBytes += 1
            if headerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            return stepFieldValue(byte)

        case .fieldLineLF:
            headerBytes += 1
            if headerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            guard byte == LF else { return .badRequest("bare CR") }
            fieldRanges.append((name: currentNameStart..<currentNameEnd, value: currentValueStart..<valueLastNonWS))
            state = .fieldLineStart
            return nil

        case .headEndLF:
            headerBytes += 1
            if headerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            guard byte == LF else { return .badRequest("bare CR") }
            switch buildHead() {
            case .success(let head):
                builtHead = head
                state = .headComplete
                return nil
            case .failure(let error):
                return error
            }

        case .chunkSize:
            if let digit = hexValue(byte) {
                chunkDigits += 1
                // 15 hex digits fit comfortably in Int; more is an overflow attempt.
                guard chunkDigits <= 15 else { return .badRequest("chunk size overflows") }
                chunkValue = chunkValue << 4 | digit
                return nil
            }
            guard chunkDigits > 0 else { return .badRequest("invalid chunk size") }
            if byte == CR { state = .chunkSizeLF; return nil }
            if byte == SEMICOLON || byte == SP || byte == HTAB {
                chunkExtensionBytes = 1
                state = .chunkExtension
                return nil
            }
            return byte == LF ? .badRequest("bare LF") : .badRequest("invalid chunk size")

        case .chunkExtension:
            if byte == CR { state = .chunkSizeLF; return nil }
            if byte == LF { return .badRequest("bare LF") }
            chunkExtensionBytes += 1
            guard chunkExtensionBytes <= limits.maxChunkExtensionBytes else { return .badRequest("chunk extension too long") }
            guard byte == HTAB || (byte >= 0x20 && byte != 0x7F) else { return .badRequest("invalid character in chunk extension") }
            return nil

        case .chunkSizeLF:
            guard byte == LF else { return .badRequest("bare CR") }
            if chunkValue == 0 {
                state = .trailerLineStart
                return nil
            }
            bodyBytes += chunkValue
            guard bodyBytes <= limits.maxBodyBytes else { return .payloadTooLarge }
            state = .chunkData(remaining: chunkValue)
            chunkValue = 0
            chunkDigits = 0
            return nil

        case .chunkDataCR:
            guard byte == CR else { return .badRequest("chunk data longer than its size") }
            state = .chunkDataLF
            return nil

        case .chunkDataLF:
            guard byte == LF else { return .badRequest("bare CR") }
            state = .chunkSize
            return nil

        case .trailerLineStart:
            trailerBytes += 1
            if trailerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            if byte == CR { state = .trailerEndLF; return nil }
            if byte == LF { return .badRequest("bare LF") }
            if byte == SP || byte == HTAB { return .badRequest("obsolete line folding") }
            guard isTokenChar(byte) else { return .badRequest("invalid character in trailer name") }
            state = .trailerName
            return nil

        case .trailerName:
            trailerBytes += 1
            if trailerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            if byte == COLON { state = .trailerValue; return nil }
            if byte == SP || byte == HTAB { return .badRequest("whitespace before colon") }
            guard isTokenChar(byte) else { return .badRequest("invalid character in trailer name") }
            return nil

        case .trailerValue:
            // Trailers are checked like header fields, then discarded.
            trailerBytes += 1
            if trailerBytes > limits.maxHeaderBytes { return .headerFieldsTooLarge }
            if byte == CR { state = .trailerLineLF; return nil }
            if byte == LF { return .badRequest("bare LF") }
            guard byte == HTAB || (byte >= 0x20 && byte != 0x7F) else { return .badRequest("invalid character in trailer value") }
            return nil

        case .trailerLineLF:
            guard byte == LF else { return .badRequest("bare CR") }
            state = .trailerLineStart
            return nil

        case .trailerEndLF:
            guard byte == LF else { return .badRequest("bare CR") }
            state = .bodyEnd
            return nil

        case .headComplete, .body, .bodyEnd, .chunkData, .failed:
            preconditionFailure("handled by next()")
        }
    }

    /// Consumes a run of bytes that need no decision (token characters of a method or field
    /// name, visible characters of a target or field value), with the same limits as `step`:
    /// a run never buffers past a limit, it fails at that byte.
    @inline(__always)
    private mutating func scanRun(_ buffer: UnsafeRawBufferPointer, _ i: inout Int) -> HTTPParserError? {
        let n = buffer.count
        var j = i
        switch state {
        case .method:
            while j < n && isTokenChar(buffer[j]) { j += 1 }
            guard j > i else { return nil }
            let allowed = limits.maxRequestLineBytes - requestLineBytes
            if j - i > allowed {
                i += allowed + 1
                return .uriTooLong
            }
            requestLineBytes += j - i
            scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i..<j]))
        case .target:
            j = scanVisible(buffer, from: j, to: n, obsText: false)
            guard j > i else { return nil }
            let allowed = limits.maxRequestLineBytes - requestLineBytes
            if j - i > allowed {
                i += allowed + 1
                return .uriTooLong
            }
            requestLineBytes += j - i
            scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i..<j]))
        case .version:
            // "HTTP/1.1": letters, digits, '/' and '.', at most 8 bytes (checked at the CR).
            while j < n, j - i < 8, buffer[j] > 0x20 && buffer[j] < 0x7F { j += 1 }
            guard j > i else { return nil }
            // Two limits apply to these bytes; as in `step`, the first byte past either fails the
            // request, the line's limit winning a tie (`step` counts the line first).
            let allowed = limits.maxRequestLineBytes - requestLineBytes
            let versionRoom = 8 - (scratch.count - versionStart)
            if j - i > allowed && allowed <= versionRoom {
                i += allowed + 1
                return .uriTooLong
            }
            if j - i > versionRoom {
                i += versionRoom + 1
                return .badRequest("malformed HTTP version")
            }
            requestLineBytes += j - i
            scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i..<j]))
        case .fieldName:
            while j < n && isTokenChar(buffer[j]) { j += 1 }
            guard j > i else { return nil }
            let allowed = limits.maxHeaderBytes - headerBytes
            if j - i > allowed {
                i += allowed + 1
                return .headerFieldsTooLarge
            }
            headerBytes += j - i
            for k in i..<j { scratch.append(lower(buffer[k])) }
        case .fieldValue:
            // field-vchar only; spaces go through `step`, which tracks trailing whitespace.
            j = scanVisible(buffer, from: j, to: n, obsText: true)
            guard j > i else { return nil }
            let allowed = limits.maxHeaderBytes - headerBytes
            if j - i > allowed {
                i += allowed + 1
                return .headerFieldsTooLarge
            }
            headerBytes += j - i
            scratch.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[i..<j]))
            valueLastNonWS = scratch.count
        default:
            return nil
        }
        i = j
        return nil
    }

    @inline(__always)
    private mutating func countRequestLine() -> HTTPParserError? {
        requestLineBytes += 1
        return requestLineBytes > limits.maxRequestLineBytes ? .uriTooLong : nil
    }

    @inline(__always)
    private mutating func stepFieldValue(_ byte: UInt8) -> HTTPParserError? {
        if byte == CR {
            state = .fieldLineLF
            return nil
        }
        if byte == LF { return .badRequest("bare LF") }
        if byte == SP || byte == HTAB {
            scratch.append(byte)
            return nil
        }
        // field-vchar = VCHAR / obs-text; every other control character is refused.
        guard byte > 0x20 && byte != 0x7F else { return .badRequest("invalid character in field value") }
        scratch.append(byte)
        valueLastNonWS = scratch.count
        return nil
    }

    private func checkVersion() -> HTTPParserError? {
        // HTTP-version = "HTTP" "/" DIGIT "." DIGIT
        let v = versionStart
        guard scratch.count - v == 8, scratch[v] == 0x48, scratch[v + 1] == 0x54, scratch[v + 2] == 0x54, scratch[v + 3] == 0x50,
              scratch[v + 4] == 0x2F, isDigit(scratch[v + 5]), scratch[v + 6] == 0x2E, isDigit(scratch[v + 7])
        else { return .badRequest("malformed HTTP version") }
        let major = scratch[versionStart + 5], minor = scratch[versionStart + 7]
        guard major == 0x31, minor == 0x30 || minor == 0x31 else { return .versionNotSupported }
        return nil
    }

    private func string(_ range: Range<Int>) -> String {
        scratch.withUnsafeBufferPointer { String(decoding: UnsafeBufferPointer(rebasing: $0[range]), as: UTF8.self) }
    }

    /// A field's (lower-cased) name. The names most requests carry are string literals, which cost
    /// nothing to make; others are decoded from the buffer.
    private func fieldName(_ r: Range<Int>) -> String {
        switch r.count {
        case 4: if nameEquals(r, "host") { return "host" }
        case 6:
            if nameEquals(r, "accept") { return "accept" }
            if nameEquals(r, "expect") { return "expect" }
            if nameEquals(r, "origin") { return "origin" }
        case 7: if nameEquals(r, "upgrade") { return "upgrade" }
        case 10:
            if nameEquals(r, "connection") { return "connection" }
            if nameEquals(r, "user-agent") { return "user-agent" }
        case 12: if nameEquals(r, "content-type") { return "content-type" }
        case 13: if nameEquals(r, "authorization") { return "authorization" }
        case 14: if nameEquals(r, "content-length") { return "content-length" }
        case 15: if nameEquals(r, "accept-encoding") { return "accept-encoding" }
        case 17: if nameEquals(r, "transfer-encoding") { return "transfer-encoding" }
        default: break
        }
        return string(r)
    }

    /// The request's method; the common ones without decoding a string.
    private func method() -> HTTPMethod {
        switch methodEnd {
        case 3:
            if nameEquals(0..<3, "GET") { return HTTPMethod("GET") }
            if nameEquals(0..<3, "PUT") { return HTTPMethod("PUT") }
        case 4:
            if nameEquals(0..<4, "POST") { return HTTPMethod("POST") }
            if nameEquals(0..<4, "HEAD") { return HTTPMethod("HEAD") }
        case 5: if nameEquals(0..<5, "PATCH") { return HTTPMethod("PATCH") }
        case 6: if nameEquals(0..<6, "DELETE") { return HTTPMethod("DELETE") }
        default: break
        }
        return HTTPMethod(string(0..<methodEnd))
    }

    private func nameEquals(_ range: Range<Int>, _ lowercased: StaticString) -> Bool {
        guard range.count == lowercased.utf8CodeUnitCount else { return false }
        let p = lowercased.utf8Start
        var k = 0
        for idx in range {
            if scratch[idx] != p[k] { return false }
            k += 1
        }
        return true
    }

    /// Turns the buffered head into a request and applies the rules of RFC 9112 §3.2 (target and
    /// Host) and §6 (framing).
    private func buildHead() -> Result<HTTPRequestHead, HTTPParserError> {
        let version: HTTPVersion = scratch[versionStart + 7] == 0x31 ? .http1_1 : .http1_0

        // RFC 9112 §3.2: origin-form for everything but CONNECT (authority-form) and a server-wide
        // OPTIONS (asterisk-form); absolute-form accepted from anyone (§3.2.2), its authority
        // replacing Host. The common case costs one byte compare and a length check.
        var originStart = targetStart
        var authority: Range<Int>?
        var asterisk = false
        let isConnect = methodEnd == 7 && nameEquals(0..<7, "CONNECT")
        if scratch[targetStart] != SLASH || isConnect {
            switch RequestTarget.form(scratch, targetStart..<targetEnd) {
            case .failure(let error):
                return .failure(error)
            case .success(.authority):
                guard isConnect else { return .failure(.badRequest("authority-form target without CONNECT")) }
                // A tunnel is not an HTTP message stream this codec could frame.
                return .failure(.methodNotImplemented("CONNECT"))
            case .success(_) where isConnect:
                return .failure(.badRequest("CONNECT needs an authority-form target"))
            case .success(.asterisk):
                guard methodEnd == 7 && nameEquals(0..<7, "OPTIONS") else {
                    return .failure(.badRequest("asterisk-form target without OPTIONS"))
                }
                asterisk = true
            case .success(.absolute(let a, let rest)):
                authority = a
                originStart = rest.lowerBound
                // OPTIONS to an absolute URI without a path is the server-wide OPTIONS (§3.2.4).
                if rest.isEmpty && methodEnd == 7 && nameEquals(0..<7, "OPTIONS") { asterisk = true }
            case .success(.origin):
                break
            }
        }
        var headers = HTTPHeaders()
        headers.reserveCapacity(fieldRanges.count)
        var hostCount = 0
        var contentLength: Int?
        var sawContentLength = false
        var transferCodings: [Substring] = []
        var sawTransferEncoding = false
        var connectionClose = false
        var connectionKeepAlive = false
        var expectContinue = false

        for (nameRange, valueRange) in fieldRanges {
            let name = fieldName(nameRange)
            if nameEquals(nameRange, "host") {
                hostCount += 1
                // RFC 9112 §3.2: an invalid Host is refused even when the target's authority
                // replaces it.
                guard RequestTarget.isValidHost(scratch, valueRange) else { return .failure(.badRequest("invalid Host")) }
                headers.addParsed(name, string(authority ?? valueRange))
                continue
            }
            let value = string(valueRange)
            headers.addParsed(name, value)
            if nameEquals(nameRange, "content-length") {
                sawContentLength = true
                // RFC 9110 §8.6: a list of identical values may be treated as one; anything else
                // (differing values, non-digits, overflow) is a framing attack.
                for element in value.split(separator: ",", omittingEmptySubsequences: false) {
                    let trimmed = element.trimmingOWS()
                    guard !trimmed.isEmpty, trimmed.utf8.count <= 18, trimmed.utf8.allSatisfy(isDigit),
                          let parsed = Int(trimmed) else {
                        return .failure(.badRequest("invalid Content-Length"))
                    }
                    if let existing = contentLength, existing != parsed {
                        return .failure(.badRequest("conflicting Content-Length values"))
                    }
                    contentLength = parsed
                }
            } else if nameEquals(nameRange, "transfer-encoding") {
                sawTransferEncoding = true
                for element in value.split(separator: ",", omittingEmptySubsequences: true) {
                    let t = element.trimmingOWS()
                    if !t.isEmpty { transferCodings.append(t) }
                }
            } else if nameEquals(nameRange, "connection") {
                for element in value.split(separator: ",") {
                    let t = element.trimmingOWS()
                    if t.equalsIgnoringASCIICase("close") { connectionClose = true }
                    if t.equalsIgnoringASCIICase("keep-alive") { connectionKeepAlive = true }
                }
            } else if nameEquals(nameRange, "expect") {
                guard value.trimmingOWS().equalsIgnoringASCIICase("100-continue") else {
                    return .failure(.expectationFailed)
                }
                expectContinue = true
            }
        }

        // RFC 9112 §3.2: exactly one Host in HTTP/1.1; never more than one.
        if hostCount > 1 { return .failure(.badRequest("more than one Host")) }
        if hostCount == 0 && version == .http1_1 { return .failure(.badRequest("missing Host")) }
        if hostCount == 0, let authority { headers.addParsed("host", string(authority)) }

        var framing: HTTPBodyFraming = .none
        if sawTransferEncoding {
            // RFC 9112 §6.1–6.3: TE with CL is a smuggling vector; refuse the message.
            if sawContentLength { return .failure(.badRequest("both Content-Length and Transfer-Encoding")) }
            if version == .http1_0 { return .failure(.badRequest("Transfer-Encoding in HTTP/1.0")) }
            if let unknown = transferCodings.first(where: { !$0.equalsIgnoringASCIICase("chunked") }) {
                return .failure(.unsupportedTransferCoding(String(unknown)))
            }
            guard transferCodings.count == 1 else { return .failure(.badRequest("invalid Transfer-Encoding")) }
            framing = .chunked
        } else if let length = contentLength {
            if length > limits.maxBodyBytes { return .failure(.payloadTooLarge) }
            framing = .contentLength(length)
        } else if sawContentLength {
            return .failure(.badRequest("invalid Content-Length"))
        }

        let keepAlive = version == .http1_1 ? !connectionClose : (connectionKeepAlive && !connectionClose)
        // The target handed on is in origin-form (an absolute-form target reduced to its path
        // and query; an empty path is "/", RFC 9112 §3.3), or "*".
        let target: String
        let path: String
        var query: String?
        if asterisk {
            target = "*"
            path = target
        } else {
            let q = scratch[originStart..<targetEnd].firstIndex(of: QUESTION)
            if (q ?? targetEnd) == originStart {
                target = "/" + string(originStart..<targetEnd)
                path = "/"
            } else {
                target = string(originStart..<targetEnd)
                path = q.map { string(originStart..<$0) } ?? target
            }
            if let q { query = string((q + 1)..<targetEnd) }
        }
        return .success(HTTPRequestHead(
            method: method(),
            target: target,
            path: path,
            query: query,
            version: version,
            headers: headers,
            framing: framing,
            keepAlive: keepAlive,
            expectContinue: expectContinue))
    }
}

// MARK: Byte classes

@usableFromInline let CR: UInt8 = 0x0D
@usableFromInline let LF: UInt8 = 0x0A
@usableFromInline let SP: UInt8 = 0x20
@usableFromInline let HTAB: UInt8 = 0x09
@usableFromInline let COLON: UInt8 = 0x3A
@usableFromInline let SEMICOLON: UInt8 = 0x3B

/// tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
/// (RFC 9110 §5.6.2), as a 128-bit mask of the ASCII bytes: a shift and a test, with no table
/// behind a lazy global (whose initialisation check the hot loops paid on every access).
/// `ByteClassTests` checks the masks against the grammar's character lists.
@inline(__always) func isTokenChar(_ b: UInt8) -> Bool {
    inMask(b, low: 0x03FF_6CFA_0000_0000, high: 0x57FF_FFFF_C7FF_FFFE)
}

/// The first index in `i..<n` whose byte is not VCHAR (0x21–0x7E), or with `obsText` neither VCHAR
/// nor obs-text (0x80–0xFF); `n` if there is none. Eight bytes at a time while it can: a word has
/// a byte below 0x21 iff `(x - 0x21…21) & ~x & 0x80…80` is non-zero, a 0x7F iff the same test for
/// zero holds of `x ^ 0x7F…7F`, and a byte from 0x80 iff `x & 0x80…80` is non-zero. The word that
/// fails is then read a byte at a time.
@inline(__always) func scanVisible(_ b: UnsafeRawBufferPointer, from i: Int, to n: Int, obsText: Bool) -> Int {
    var i = i
    if let p = b.baseAddress {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        while n - i >= 8 {
            let x = p.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            let del = x ^ (0x7F &* ones)
            var stop = ((x &- 0x21 &* ones) & ~x) | ((del &- ones) & ~del)
            if !obsText { stop |= x }
            if stop & highs != 0 { break }
            i += 8
        }
    }
    while i < n {
        let c = b[i]
        guard c > 0x20 && c != 0x7F && (obsText || c < 0x80) else { break }
        i += 1
    }
    return i
}

/// True if `b` is below 128 and its bit is set in `low` (bytes 0–63) or `high` (bytes 64–127).
@inline(__always) func inMask(_ b: UInt8, low: UInt64, high: UInt64) -> Bool {
    b < 64 ? (low >> UInt64(b)) & 1 != 0 : b < 128 && (high >> UInt64(b &- 64)) & 1 != 0
}

@inline(__always) func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }
@inline(__always) func lower(_ b: UInt8) -> UInt8 { (b >= 0x41 && b <= 0x5A) ? b | 0x20 : b }
@inline(__always) func hexValue(_ b: UInt8) -> Int? {
    switch b {
    case 0x30...0x39: return Int(b - 0x30)
    case 0x41...0x46: return Int(b - 0x41 + 10)
    case 0x61...0x66: return Int(b - 0x61 + 10)
    default: return nil
    }
}

/// True if `token` is a valid RFC 9110 token.
public func isHTTPToken<S: StringProtocol>(_ token: S) -> Bool {
    !token.isEmpty && token.utf8.allSatisfy(isTokenChar)
}
