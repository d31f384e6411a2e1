/// Turns frames into messages and control events (RFC 6455 §5.4–5.5, RFC 7692 §6–7).
///
/// Enforces the message-level rules: continuation order, RSV1 only on a message's first frame,
/// the message size limit (checked from frame headers before payload is buffered, and on inflated
/// output), and UTF-8 validity of text checked piece by piece so a bad byte fails at once.
public struct WebSocketMessageAssembler {
    public enum Event: Equatable, Sendable {
        case text([UInt8])
        case binary([UInt8])
        case ping([UInt8])
        case pong([UInt8])
        /// A valid close frame: its code (nil when the frame had no payload) and reason.
        case close(code: WebSocketCloseCode?, reason: String)
    }

    public enum Step: Equatable, Sendable {
        case needMoreData
        case event(Event)
        case error(WebSocketError)
    }

    public let maxMessageBytes: Int
    private var parser: WebSocketFrameParser
    private let inflater: MessageInflater?

    private var frame = WebSocketFrameHeader(fin: true, opcode: .text, payloadLength: 0)
    private var messageOpcode: WebSocketOpcode?
    private var messageCompressed = false
    private var message: [UInt8] = []
    private var control: [UInt8] = []
    private var utf8 = UTF8Validator()
    private var failed: WebSocketError?

    public init(role: WebSocketRole, maxMessageBytes: Int, inflater: MessageInflater? = nil) {
        self.maxMessageBytes = maxMessageBytes
        self.parser = WebSocketFrameParser(role: role, allowRSV1: inflater != nil)
        self.inflater = inflater
    }

    /// True when no partial frame or message is held (nothing would be lost by stopping here).
    public var isIdle: Bool { parser.isAtFrameBoundary && messageOpcode == nil }

    public mutating func parse(_ buffer: UnsafeMutableRawBufferPointer) -> (step: Step, consumed: Int) {
        if let failed { return (.error(failed), 0) }
        var offset = 0
        while true {
            let (step, used) = parser.parse(UnsafeMutableRawBufferPointer(rebasing: buffer[offset...]))
            let base = offset
            offset += used
            switch step {
            case .needMoreData:
                return (.needMoreData, offset)
            case .error(let e):
                return fail(e, offset)
            case .header(let header):
                if let e = begin(header) { return fail(e, offset) }
            case .payload(let range):
                let chunk = UnsafeRawBufferPointer(rebasing: buffer[(base + range.lowerBound)..<(base + range.upperBound)])
                if let e = accept(chunk) { return fail(e, offset) }
            case .frameEnd:
                switch finishFrame() {
                case .failure(let e): return fail(e, offset)
                case .success(let event?): return (.event(event), offset)
                case .success(nil): continue
                }
            }
        }
    }

    private mutating func fail(_ error: WebSocketError, _ consumed: Int) -> (step: Step, consumed: Int) {
        failed = error
        message = []
        return (.error(error), consumed)
    }

    private mutating func begin(_ header: WebSocketFrameHeader) -> WebSocketError? {
        frame = header
        if header.opcode.isControl {
            control.removeAll(keepingCapacity: true)
            return nil
        }
        if header.opcode == .continuation {
            guard messageOpcode != nil else { return WebSocketError(.protocolError, "continuation frame without a message") }
            if header.rsv1 { return WebSocketError(.protocolError, "RSV1 on a continuation frame") }
        } else {
            guard messageOpcode == nil else { return WebSocketError(.protocolError, "new message before the last one ended") }
            messageOpcode = header.opcode
            messageCompressed = header.rsv1
            message = []
            utf8.reset()
        }
        // Checked before any payload byte is kept. For compressed messages the compressed size is
        // bounded too; the inflated size is checked as it is produced.
        if message.count + header.payloadLength > maxMessageBytes {
            return WebSocketError(.messageTooBig, "message exceeds \(maxMessageBytes) bytes")
        }
        return nil
    }

    private mutating func accept(_ chunk: UnsafeRawBufferPointer) -> WebSocketError? {
        if frame.opcode.isControl {
            control.append(contentsOf: chunk)
            return nil
        }
        let before = message.count
        if messageCompressed, let inflater {
            do {
                try inflater.inflate(chunk, into: &message)
            } catch .tooLarge {
                return WebSocketError(.messageTooBig, "inflated message exceeds \(min(maxMessageBytes, inflater.maxOutputBytes)) bytes")
            } catch {
                return WebSocketError(.invalidPayload, "invalid compressed data")
            }
            if message.count > maxMessageBytes { return WebSocketError(.messageTooBig, "message exceeds \(maxMessageBytes) bytes") }
        } else {
            message.append(contentsOf: chunk)
        }
        return checkText(from: before)
    }

    private mutating func checkText(from start: Int) -> WebSocketError? {
        guard messageOpcode == .text, message.count > start else { return nil }
        let ok = message.withUnsafeBytes { utf8.validate(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        return ok ? nil : WebSocketError(.invalidPayload, "invalid UTF-8 in text message")
    }

    private mutating func finishFrame() -> Result<Event?, WebSocketError> {
        switch frame.opcode {
        case .ping: return .success(.ping(control))
        case .pong: return .success(.pong(control))
        case .close: return Self.decodeClose(control).map { Optional($0) }
        case .text, .binary, .continuation:
            guard frame.fin, let opcode = messageOpcode else { return .success(nil) }
            if messageCompressed, let inflater {
                let before = message.count
                do {
                    try inflater.finishMessage(into: &message)
                } catch .tooLarge {
                    return .failure(WebSocketError(.messageTooBig, "inflated message too large"))
                } catch {
                    return .failure(WebSocketError(.invalidPayload, "invalid compressed data"))
                }
                if message.count > maxMessageBytes { return .failure(WebSocketError(.messageTooBig, "message too large")) }
                if let e = checkText(from: before) { return .failure(e) }
            }
            if opcode == .text && !utf8.isComplete {
                return .failure(WebSocketError(.invalidPayload, "text message ends inside a UTF-8 sequence"))
            }
            let done = message
            message = []
            messageOpcode = nil
            return .success(opcode == .text ? .text(done) : .binary(done))
        }
    }

    /// Validates a close frame's payload (RFC 6455 §5.5.1, §7.4).
    static func decodeClose(_ payload: [UInt8]) -> Result<Event, WebSocketError> {
        if payload.isEmpty { return .success(.close(code: nil, reason: "")) }
        guard payload.count >= 2 else { return .failure(WebSocketError(.protocolError, "close frame with a 1-byte payload")) }
        let code = WebSocketCloseCode(UInt16(payload[0]) << 8 | UInt16(payload[1]))
        guard code.isValidOnWire else { return .failure(WebSocketError(.protocolError, "invalid close code \(code.rawValue)")) }
        var v = UTF8Validator()
        let reason = payload[2...]
        guard v.validate(reason), v.isComplete else {
            return .failure(WebSocketError(.invalidPayload, "close reason is not UTF-8"))
        }
        return .success(.close(code: code, reason: String(decoding: reason, as: UTF8.self)))
    }
}
