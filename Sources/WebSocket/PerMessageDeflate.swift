import CZlib

/// The agreed parameters of permessage-deflate (RFC 7692 §7.1).
public struct PerMessageDeflateParameters: Equatable, Sendable {
    public var serverNoContextTakeover = false
    public var clientNoContextTakeover = false
    /// The LZ77 window the server compresses with (8–15; zlib's raw deflate supports 9–15).
    public var serverMaxWindowBits = 15
    /// Sent back only when the client offered `client_max_window_bits`.
    public var clientMaxWindowBits: Int?

    public init() {}

    /// The `Sec-WebSocket-Extensions` value of the response.
    public var responseHeaderValue: String {
        var s = "permessage-deflate"
        if serverNoContextTakeover { s += "; server_no_context_takeover" }
        if clientNoContextTakeover { s += "; client_no_context_takeover" }
        if serverMaxWindowBits != 15 { s += "; server_max_window_bits=\(serverMaxWindowBits)" }
        if let bits = clientMaxWindowBits { s += "; client_max_window_bits=\(bits)" }
        return s
    }
}

/// What the server is willing to do; `negotiate` picks the first acceptable client offer.
public struct PerMessageDeflateConfiguration: Equatable, Sendable {
    public var enabled = true
    /// Always reset the compressor between messages (lets one compressed frame be shared by many
    /// connections, and saves the 32 KiB window per connection between messages).
    public var forceServerNoContextTakeover = false
    /// zlib compression level (1 fastest … 9 smallest).
    public var compressionLevel: Int32 = 6
    /// zlib memLevel (1–9): memory per compressor is about 2^(windowBits+2) + 2^(memLevel+9) bytes.
    public var memoryLevel: Int32 = 8
    /// Messages shorter than this are sent uncompressed (RSV1 clear), which RFC 7692 allows.
    public var minimumSizeToCompress = 0
    /// Inflated messages larger than this close the connection with 1009 (zip-bomb guard).
    public var maxInflatedBytes = 16 << 20

    public init() {}

    /// Parses the client's `Sec-WebSocket-Extensions` values and returns the parameters of the
    /// first permessage-deflate offer this server can accept, or nil to decline them all.
    public func negotiate(offers headerValues: [String]) -> PerMessageDeflateParameters? {
        guard enabled else { return nil }
        for value in headerValues {
            for offer in Self.splitOffers(value) {
                let parts = offer.split(separator: ";").map { $0.trimmingCharacters() }
                guard let name = parts.first, name.lowercased() == "permessage-deflate" else { continue }
                if let accepted = accept(parameters: parts.dropFirst()) { return accepted }
            }
        }
        return nil
    }

    private func accept(parameters: ArraySlice<String>) -> PerMessageDeflateParameters? {
        var result = PerMessageDeflateParameters()
        result.serverNoContextTakeover = forceServerNoContextTakeover
        var seen = Set<String>()
        for parameter in parameters {
            let kv = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters() }
            let key = kv[0].lowercased()
            var value = kv.count > 1 ? kv[1] : nil
            if let v = value, v.hasPrefix("\""), v.hasSuffix("\""), v.count >= 2 { value = String(v.dropFirst().dropLast()) }
            // RFC 7692 §7.1: a repeated parameter makes the offer invalid.
            guard seen.insert(key).inserted else { return nil }
            switch key {
            case "server_no_context_takeover":
                guard value == nil else { return nil }
                result.serverNoContextTakeover = true
            case "client_no_context_takeover":
                guard value == nil else { return nil }
                result.clientNoContextTakeover = true
            case "server_max_window_bits":
                guard let v = value, let bits = Self.windowBits(v) else { return nil }
                // zlib cannot produce a raw deflate stream with a 256-byte window; decline this
                // offer rather than break the limit the client asked for.
                guard bits >= 9 else { return nil }
                result.serverMaxWindowBits = bits
            case "client_max_window_bits":
                if let v = value {
                    guard let bits = Self.windowBits(v) else { return nil }
                    result.clientMaxWindowBits = bits
                }
            default:
                return nil
            }
        }
        return result
    }

    static func windowBits(_ s: String) -> Int? {
        guard s.utf8.count <= 2, s.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let v = Int(s), (8...15).contains(v),
              !s.hasPrefix("0") else { return nil }
        return v
    }

    /// Splits a header value into extension offers at commas outside quoted strings.
    static func splitOffers(_ value: String) -> [String] {
        var out: [String] = []
        var current = ""
        var quoted = false
        for ch in value {
            if ch == "\"" { quoted.toggle() }
            if ch == "," && !quoted {
                out.append(current)
                current = ""
            } else {
                current.append(ch)
            }
        }
        out.append(current)
        return out.map { $0.trimmingCharacters() }.filter { !$0.isEmpty }
    }
}

extension StringProtocol {
    func trimmingCharacters() -> String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// A zlib failure (never expected with valid parameters; reported rather than trapped).
public struct ZlibError: Error, Equatable, Sendable {
    public let code: Int32
}

/// Compresses messages with raw deflate, one `Z_SYNC_FLUSH` per message, trailing
/// `00 00 ff ff` removed (RFC 7692 §7.2.1).
public final class MessageDeflater {
    // The z_stream must not move after deflateInit2 (zlib keeps a pointer back to it).
    private let stream: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool
    private var scratch: [UInt8] = []

    public init(windowBits: Int, noContextTakeover: Bool, level: Int32 = 6, memoryLevel: Int32 = 8) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        self.noContextTakeover = noContextTakeover
        let rc = czlib_deflate_init2(stream, level, -Int32(max(9, windowBits)), memoryLevel, Z_DEFAULT_STRATEGY)
        guard rc == Z_OK else {
            stream.deallocate()
            throw ZlibError(code: rc)
        }
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
    }

    /// The compressed payload of one message.
    public func compress(_ input: UnsafeRawBufferPointer) throws -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(input.count / 2 + 64)
        let inputBase = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.next_in = inputBase
        stream.pointee.avail_in = uInt(input.count)
        if scratch.isEmpty { scratch = [UInt8](repeating: 0, count: 16 * 1024) }
        repeat {
            let produced: Int = try scratch.withUnsafeMutableBufferPointer { buf in
                stream.pointee.next_out = buf.baseAddress
                stream.pointee.avail_out = uInt(buf.count)
                let rc = deflate(stream, Z_SYNC_FLUSH)
                guard rc == Z_OK || rc == Z_BUF_ERROR else { throw ZlibError(code: rc) }
                return buf.count - Int(stream.pointee.avail_out)
            }
            out.append(contentsOf: scratch[0..<produced])
        } while stream.pointee.avail_out == 0
        stream.pointee.next_in = nil
        if out.count >= 4 && out.suffix(4) == [0x00, 0x00, 0xFF, 0xFF] { out.removeLast(4) }
        if noContextTakeover { deflateReset(stream) }
        return out
    }

    public func compress(_ input: [UInt8]) throws -> [UInt8] {
        try input.withUnsafeBytes { try compress($0) }
    }
}

/// Decompresses messages piece by piece as frames arrive, with a cap on the output size.
public final class MessageInflater {
    private let stream: UnsafeMutablePointer<z_stream>
    private let noContextTakeover: Bool
    public let maxOutputBytes: Int
    private static let tail: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]
    /// Bytes inflated per zlib call (on the stack).
    private static let scratchBytes = 16 * 1024

    public enum InflateError: Error, Equatable {
        case tooLarge
        case corrupt
    }

    public init(windowBits: Int = 15, noContextTakeover: Bool, maxOutputBytes: Int) throws {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        self.noContextTakeover = noContextTakeover
        self.maxOutputBytes = maxOutputBytes
        let rc = czlib_inflate_init2(stream, -Int32(windowBits))
        guard rc == Z_OK else {
            stream.deallocate()
            throw ZlibError(code: rc)
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
    }

    /// Inflates a piece of a compressed message, appending to `output` (which holds the message
    /// so far). Returns how many bytes were appended.
    @discardableResult
    public func inflate(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) throws(InflateError) -> Int {
        guard input.count > 0 else { return 0 }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        defer { stream.pointee.next_in = nil }
        let before = output.count
        // zlib writes into a scratch area on the stack, and only what it produced is appended:
        // no zero-filling of a large tail per piece, and no per-connection buffer.
        var failure: InflateError?
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.scratchBytes) { scratch in
            while true {
                let room = min(Self.scratchBytes, maxOutputBytes - output.count + 1)
                stream.pointee.next_out = scratch.baseAddress!
                stream.pointee.avail_out = uInt(room)
                let rc = CZlib.inflate(stream, Z_SYNC_FLUSH)
                let produced = room - Int(stream.pointee.avail_out)
                output.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[0..<produced]))
                if output.count > maxOutputBytes {
                    failure = .tooLarge
                    return
                }
                switch rc {
                case Z_OK, Z_BUF_ERROR:
                    break
                case Z_STREAM_END:
                    // The sender ended its stream with a final block (a BFINAL block);
                    // whatever follows starts a new one.
                    inflateReset(stream)
                default:
                    failure = .corrupt
                    return
                }
                if stream.pointee.avail_in == 0 && stream.pointee.avail_out > 0 { return }
                if rc == Z_BUF_ERROR && produced == 0 { return }
            }
        }
        stream.pointee.next_out = nil
        if let failure { throw failure }
        return output.count - before
    }

    /// Ends the message: feeds the `00 00 ff ff` the sender removed.
    @discardableResult
    public func finishMessage(into output: inout [UInt8]) throws(InflateError) -> Int {
        var failure: InflateError?
        var n = 0
        Self.tail.withUnsafeBytes { raw in
            do throws(InflateError) { n = try inflate(raw, into: &output) } catch { failure = error }
        }
        if noContextTakeover { inflateReset(stream) }
        if let failure { throw failure }
        return n
    }
}
