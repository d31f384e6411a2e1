/// RFC 6455 §5.2 opcodes.
public enum WebSocketOpcode: UInt8, Sendable, Equatable {
    case continuation = 0x0
    case text = 0x1
    case binary = 0x2
    case close = 0x8
    case ping = 0x9
    case pong = 0xA

    public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// A close status code (RFC 6455 §7.4).
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ rawValue: UInt16) { self.rawValue = rawValue }

    public static let normal = WebSocketCloseCode(1000)
    public static let goingAway = WebSocketCloseCode(1001)
    public static let protocolError = WebSocketCloseCode(1002)
    public static let unsupportedData = WebSocketCloseCode(1003)
    /// Never sent on the wire: "no status code was present".
    public static let noStatus = WebSocketCloseCode(1005)
    /// Never sent on the wire: "closed without a close frame".
    public static let abnormal = WebSocketCloseCode(1006)
    public static let invalidPayload = WebSocketCloseCode(1007)
    public static let policyViolation = WebSocketCloseCode(1008)
    public static let messageTooBig = WebSocketCloseCode(1009)
    public static let mandatoryExtension = WebSocketCloseCode(1010)
    public static let internalError = WebSocketCloseCode(1011)

    /// Codes a peer may send in a close frame: the defined ones of §7.4.1 (1012–1014 were
    /// registered with IANA later), and the ranges for libraries (3000–3999) and applications
    /// (4000–4999). 1004–1006 and 1015 are reserved and never appear on the wire.
    public var isValidOnWire: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    public var description: String { String(rawValue) }
}

/// A protocol violation found while reading: the connection must close with `code`.
public struct WebSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    public let code: WebSocketCloseCode
    public let reason: String
    public init(_ code: WebSocketCloseCode, _ reason: String) {
        self.code = code
        self.reason = reason
    }
    public var description: String { "\(code.rawValue): \(reason)" }
}

/// The fixed part of a frame (RFC 6455 §5.2).
public struct WebSocketFrameHeader: Equatable, Sendable {
    public var fin: Bool
    public var rsv1: Bool
    public var opcode: WebSocketOpcode
    public var maskKey: UInt32?
    public var payloadLength: Int

    public init(fin: Bool, rsv1: Bool = false, opcode: WebSocketOpcode, maskKey: UInt32? = nil, payloadLength: Int) {
        self.fin = fin
        self.rsv1 = rsv1
        self.opcode = opcode
        self.maskKey = maskKey
        self.payloadLength = payloadLength
    }
}

/// Who is reading: a server requires masked frames, a client requires unmasked ones (§5.1).
public enum WebSocketRole: Sendable {
    case server
    case client
}

/// An incremental frame parser: bytes in, header / payload pieces / frame end out.
///
/// Payload is unmasked in place and returned as ranges of the buffer given, so a frame is never
/// copied here. The parser checks what can be checked per frame: reserved bits, opcodes, control
/// frame rules and masking. Message-level rules live in `WebSocketMessageAssembler`.
public struct WebSocketFrameParser {
    public enum Step: Equatable, Sendable {
        case needMoreData
        case header(WebSocketFrameHeader)
        /// Payload bytes (already unmasked): this range of the buffer passed to `parse`.
        case payload(Range<Int>)
        case frameEnd
        case error(WebSocketError)
    }

    private enum State: Equatable {
        case header
        case payload(remaining: Int)
        case end
        case failed(WebSocketError)
    }

    public let role: WebSocketRole
    /// Whether RSV1 may be set (permessage-deflate was negotiated).
    public var allowRSV1: Bool

    private var state: State = .header
    private var headerBytes: (UInt64, UInt64) = (0, 0) // up to 14 bytes of header
    private var headerCount = 0
    private var current = WebSocketFrameHeader(fin: true, opcode: .text, payloadLength: 0)
    private var maskOffset = 0

    public init(role: WebSocketRole, allowRSV1: Bool = false) {
        self.role = role
        self.allowRSV1 = allowRSV1
    }

    /// True when no partial frame is buffered.
    public var isAtFrameBoundary: Bool { state == .header && headerCount == 0 }

    private func headerByte(_ i: Int) -> UInt8 {
        withUnsafeBytes(of: headerBytes) { $0[i] }
    }

    public mutating func parse(_ buffer: UnsafeMutableRawBufferPointer) -> (step: Step, consumed: Int) {
        var i = 0
        let n = buffer.count
        while true {
            switch state {
            case .failed(let error):
                return (.error(error), i)

            case .end:
                state = .header
                return (.frameEnd, i)

            case .payload(let remaining):
                if remaining == 0 {
                    state = .end
                    continue
                }
                if i == n { return (.needMoreData, i) }
                let take = min(remaining, n - i)
                if let key = current.maskKey {
                    unmask(buffer, from: i, count: take, key: key)
                }
                state = .payload(remaining: remaining - take)
                let range = i..<(i + take)
                i += take
                return (.payload(range), i)

            case .header:
                // Collect bytes until the header is complete.
                while i < n {
                    let needed = requiredHeaderLength()
                    if headerCount >= needed { break }
                    withUnsafeMutableBytes(of: &headerBytes) { $0[headerCount] = buffer[i] }
                    headerCount += 1
                    i += 1
                    if headerCount == 1 || headerCount == 2 {
                        if let error = checkEarly() {
                            state = .failed(error)
                            return (.error(error), i)
                        }
                    }
                }
                if headerCount < 2 || headerCount < requiredHeaderLength() { return (.needMoreData, i) }
                switch decodeHeader() {
                case .failure(let error):
                    state = .failed(error)
                    return (.error(error), i)
                case .success(let header):
                    current = header
                    headerCount = 0
                    headerBytes = (0, 0)
                    maskOffset = 0
                    state = .payload(remaining: header.payloadLength)
                    return (.header(header), i)
                }
            }
        }
    }

    private func requiredHeaderLength() -> Int {
        if headerCount < 2 { return 2 }
        let b1 = headerByte(1)
        let masked = b1 & 0x80 != 0
        var len = 2
        switch b1 & 0x7F {
        case 126: len += 2
        case 127: len += 8
        default: break
        }
        if masked { len += 4 }
        return len
    }

    /// Checks that can be made from the first two bytes, so garbage fails fast.
    private func checkEarly() -> WebSocketError? {
        let b0 = headerByte(0)
        if headerCount == 1 {
            if b0 & 0x30 != 0 { return WebSocketError(.protocolError, "reserved bits set") }
            if b0 & 0x40 != 0 && !allowRSV1 { return WebSocketError(.protocolError, "RSV1 set without an extension") }
            guard let opcode = WebSocketOpcode(rawValue: b0 & 0x0F) else {
                return WebSocketError(.protocolError, "unknown opcode")
            }
            if opcode.isControl && b0 & 0x80 == 0 { return WebSocketError(.protocolError, "fragmented control frame") }
            if opcode.isControl && b0 & 0x40 != 0 { return WebSocketError(.protocolError, "RSV1 on a control frame") }
            return nil
        }
        let b1 = headerByte(1)
        let masked = b1 & 0x80 != 0
        if role == .server && !masked { return WebSocketError(.protocolError, "unmasked client frame") }
        if role == .client && masked { return WebSocketError(.protocolError, "masked server frame") }
        if WebSocketOpcode(rawValue: b0 & 0x0F)!.isControl && b1 & 0x7F > 125 {
            return WebSocketError(.protocolError, "control frame payload over 125 bytes")
        }
        return nil
    }

    private func decodeHeader() -> Result<WebSocketFrameHeader, WebSocketError> {
        let b0 = headerByte(0), b1 = headerByte(1)
        var offset = 2
        var length = Int(b1 & 0x7F)
        if length == 126 {
            length = Int(headerByte(2)) << 8 | Int(headerByte(3))
            offset = 4
        } else if length == 127 {
            var v: UInt64 = 0
            for k in 2..<10 { v = v << 8 | UInt64(headerByte(k)) }
            guard v >> 63 == 0, v <= UInt64(Int.max / 2) else {
                return .failure(WebSocketError(.protocolError, "payload length has its top bit set"))
            }
            length = Int(v)
            offset = 10
        }
        var key: UInt32?
        if b1 & 0x80 != 0 {
            key = UInt32(headerByte(offset)) << 24 | UInt32(headerByte(offset + 1)) << 16
                | UInt32(headerByte(offset + 2)) << 8 | UInt32(headerByte(offset + 3))
        }
        return .success(WebSocketFrameHeader(
            fin: b0 & 0x80 != 0, rsv1: b0 & 0x40 != 0, opcode: WebSocketOpcode(rawValue: b0 & 0x0F)!,
            maskKey: key, payloadLength: length))
    }

    private mutating func unmask(_ buffer: UnsafeMutableRawBufferPointer, from start: Int, count: Int, key: UInt32) {
        @inline(__always) func keyByte(_ offset: Int) -> UInt8 {
            UInt8(truncatingIfNeeded: key >> (24 - 8 * UInt32(offset & 3)))
        }
        var j = start
        let end = start + count
        // Byte-wise until the mask is aligned, then 8 bytes at a time.
        while j < end && maskOffset & 3 != 0 {
            buffer[j] ^= keyByte(maskOffset)
            maskOffset += 1
            j += 1
        }
        // The key in memory order (byte 0 first), as a little-endian word.
        let word32 = UInt32(keyByte(0)) | UInt32(keyByte(1)) << 8 | UInt32(keyByte(2)) << 16 | UInt32(keyByte(3)) << 24
        let word64 = UInt64(word32) | UInt64(word32) << 32
        let base = buffer.baseAddress!
        while end - j >= 8 {
            let v = base.loadUnaligned(fromByteOffset: j, as: UInt64.self)
            base.storeBytes(of: v ^ word64, toByteOffset: j, as: UInt64.self)
            j += 8
            maskOffset += 8
        }
        while j < end {
            buffer[j] ^= keyByte(maskOffset)
            maskOffset += 1
            j += 1
        }
    }
}

/// Writes frames (RFC 6455 §5.2). The server sends unmasked frames; a client passes a mask key.
public enum WebSocketFrameEncoder {
    public static func headerLength(payloadLength: Int, masked: Bool) -> Int {
        let base = payloadLength < 126 ? 2 : (payloadLength <= 0xFFFF ? 4 : 10)
        return base + (masked ? 4 : 0)
    }

    /// Writes the header at `out` and returns its length.
    @discardableResult
    public static func writeHeader(fin: Bool = true, rsv1: Bool = false, opcode: WebSocketOpcode, payloadLength: Int,
                                   maskKey: UInt32? = nil, to out: UnsafeMutableRawPointer) -> Int {
        out.storeBytes(of: (fin ? 0x80 : 0) | (rsv1 ? 0x40 : 0) | opcode.rawValue, as: UInt8.self)
        let maskBit: UInt8 = maskKey == nil ? 0 : 0x80
        var n = 2
        if payloadLength < 126 {
            out.storeBytes(of: maskBit | UInt8(payloadLength), toByteOffset: 1, as: UInt8.self)
        } else if payloadLength <= 0xFFFF {
            out.storeBytes(of: maskBit | 126, toByteOffset: 1, as: UInt8.self)
            out.storeBytes(of: UInt16(payloadLength).bigEndian, toByteOffset: 2, as: UInt16.self)
            n = 4
        } else {
            out.storeBytes(of: maskBit | 127, toByteOffset: 1, as: UInt8.self)
            out.storeBytes(of: UInt64(payloadLength).bigEndian, toByteOffset: 2, as: UInt64.self)
            n = 10
        }
        if let key = maskKey {
            out.storeBytes(of: key.bigEndian, toByteOffset: n, as: UInt32.self)
            n += 4
        }
        return n
    }

    /// A complete frame as bytes.
    public static func frame(opcode: WebSocketOpcode, payload: some Collection<UInt8>, fin: Bool = true, rsv1: Bool = false,
                             maskKey: UInt32? = nil) -> [UInt8] {
        let count = payload.count
        let h = headerLength(payloadLength: count, masked: maskKey != nil)
        var out = [UInt8](repeating: 0, count: h + count)
        out.withUnsafeMutableBytes { raw in
            _ = writeHeader(fin: fin, rsv1: rsv1, opcode: opcode, payloadLength: count, maskKey: maskKey, to: raw.baseAddress!)
            var j = h
            for b in payload {
                raw[j] = b
                j += 1
            }
            if let key = maskKey { applyMask(key, to: UnsafeMutableRawBufferPointer(rebasing: raw[h...])) }
        }
        return out
    }

    /// The payload of a close frame: the code then a UTF-8 reason (truncated to fit 125 bytes).
    public static func closePayload(code: WebSocketCloseCode, reason: String = "") -> [UInt8] {
        var payload = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)]
        var reasonBytes = Array(reason.utf8.prefix(123))
        // Do not cut a multi-byte character in half.
        while !reasonBytes.isEmpty && !isCompleteUTF8(reasonBytes) { reasonBytes.removeLast() }
        payload.append(contentsOf: reasonBytes)
        return payload
    }

    private static func isCompleteUTF8(_ bytes: [UInt8]) -> Bool {
        var v = UTF8Validator()
        return v.validate(bytes[...]) && v.isComplete
    }

    public static func applyMask(_ key: UInt32, to buffer: UnsafeMutableRawBufferPointer) {
        let k = [UInt8(truncatingIfNeeded: key >> 24), UInt8(truncatingIfNeeded: key >> 16),
                 UInt8(truncatingIfNeeded: key >> 8), UInt8(truncatingIfNeeded: key)]
        for j in 0..<buffer.count { buffer[j] ^= k[j & 3] }
    }
}
