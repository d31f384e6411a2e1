import Chat
import Foundation

/// A small streaming JSON writer for the hot paths (events, replies): bytes appended directly,
/// commas handled by the writer.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []
    private var first: [Bool] = []
    private var afterKey = false

    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    private mutating func separator() {
        if afterKey {
            afterKey = false
            return
        }
        guard let isFirst = first.last else { return }
        if isFirst { first[first.count - 1] = false } else { bytes.append(0x2C) }
    }

    public mutating func beginObject() {
        separator()
        bytes.append(0x7B)
        first.append(true)
    }

    public mutating func endObject() {
        bytes.append(0x7D)
        first.removeLast()
    }

    public mutating func beginArray() {
        separator()
        bytes.append(0x5B)
        first.append(true)
    }

    public mutating func endArray() {
        bytes.append(0x5D)
        first.removeLast()
    }

    public mutating func key(_ k: String) {
        separator()
        appendQuoted(k)
        bytes.append(0x3A)
        afterKey = true
    }

    public mutating func string(_ s: String) {
        separator()
        appendQuoted(s)
    }

    public mutating func int<I: BinaryInteger>(_ v: I) {
        separator()
        bytes.append(contentsOf: String(v).utf8)
    }

    public mutating func bool(_ v: Bool) {
        separator()
        bytes.append(contentsOf: v ? Array("true".utf8) : Array("false".utf8))
    }

    public mutating func null() {
        separator()
        bytes.append(contentsOf: "null".utf8)
    }

    /// Already-encoded JSON (trusted: produced by this process).
    public mutating func raw(_ json: [UInt8]) {
        separator()
        bytes.append(contentsOf: json)
    }

    // Key/value shorthands.
    public mutating func field(_ k: String, _ v: String) { key(k); string(v) }
    public mutating func field(_ k: String, _ v: Int) { key(k); int(v) }
    public mutating func field(_ k: String, _ v: Int64) { key(k); int(v) }
    public mutating func field(_ k: String, _ v: Bool) { key(k); bool(v) }
    public mutating func field(_ k: String, _ v: [String]) {
        key(k)
        beginArray()
        for s in v { string(s) }
        endArray()
    }
    public mutating func fieldIfPresent(_ k: String, _ v: String?) { if let v { field(k, v) } }

    private mutating func appendQuoted(_ s: String) {
        bytes.append(0x22)
        // Runs of bytes that need no escape (nearly all of them) are copied at once; the bytes
        // written are the same as the loop's below.
        let copied: Void? = s.utf8.withContiguousStorageIfAvailable { utf8 in
            var start = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                if b >= 0x20 && b != 0x22 && b != 0x5C { continue }
                if i > start { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i])) }
                appendEscaped(b)
                start = i + 1
            }
            if start < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start...])) }
        }
        if copied == nil {
            for b in s.utf8 { appendEscaped(b) }
        }
        bytes.append(0x22)
    }

    /// One byte of a string's UTF-8, escaped if JSON needs it.
    private mutating func appendEscaped(_ b: UInt8) {
        switch b {
        case 0x22: bytes.append(contentsOf: [0x5C, 0x22])
        case 0x5C: bytes.append(contentsOf: [0x5C, 0x5C])
        case 0x0A: bytes.append(contentsOf: [0x5C, 0x6E])
        case 0x0D: bytes.append(contentsOf: [0x5C, 0x72])
        case 0x09: bytes.append(contentsOf: [0x5C, 0x74])
        case 0..<0x20:
            let hex = Array("0123456789abcdef".utf8)
            bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, hex[Int(b >> 4)], hex[Int(b & 0xF)]])
        default: bytes.append(b)
        }
    }

    /// A whole value built in one expression.
    public static func object(_ body: (inout JSONWriter) -> Void) -> [UInt8] {
        var w = JSONWriter()
        w.beginObject()
        body(&w)
        w.endObject()
        return w.bytes
    }
}

/// Decodes a request body into `T`, turning decoding failures into a `ChatError` that names the
/// field (SPEC §11: bad input gets a clear error naming the field).
public func decodeBody<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws(ChatError) -> T {
    let data = bytes.isEmpty ? Data("{}".utf8) : Data(bytes)
    do {
        return try JSONDecoder().decode(T.self, from: data)
    } catch let error as DecodingError {
        throw describe(error, in: data)
    } catch {
        throw ChatError(.invalidParameter, "the body is not valid JSON", field: "body")
    }
}

/// As `describe(_:)`, for a failure decoding `data`: Foundation's decoder reports a number that
/// does not fit its integer field (`1.5`, `1e30`, `9223372036854775808`) as corrupted data with no
/// field, so a body that is JSON after all names the first number that is not a 64-bit integer.
func describe(_ error: DecodingError, in data: Data) -> ChatError {
    if case .dataCorrupted(let ctx) = error, ctx.codingPath.isEmpty, let field = firstNonIntegerNumber(in: data) {
        return ChatError(.invalidParameter, "\(field) must be an integer (a whole number of at most 64 bits)", field: field)
    }
    return describe(error)
}

/// The path (as `describe` writes it) of the first number in `data` that is not a 64-bit integer,
/// if `data` is JSON; keys are visited in sorted order.
func firstNonIntegerNumber(in data: Data) -> String? {
    guard let root = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else { return nil }
    func walk(_ value: Any, _ path: String) -> String? {
        switch value {
        case let object as [String: Any]:
            for key in object.keys.sorted() {
                if let found = walk(object[key]!, path.isEmpty ? key : path + "." + key) { return found }
            }
        case let array as [Any]:
            for (i, element) in array.enumerated() {
                if let found = walk(element, path + "[\(i)]") { return found }
            }
        case let number as NSNumber:
            if Int64(number.stringValue) == nil { return path.isEmpty ? "body" : path }
        default:
            break
        }
        return nil
    }
    return walk(root, "")
}

func describe(_ error: DecodingError) -> ChatError {
    func path(_ p: [CodingKey]) -> String {
        let s = p.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
        return s.isEmpty ? "body" : s
    }
    switch error {
    case .typeMismatch(let type, let ctx):
        return ChatError(.invalidParameter, "\(path(ctx.codingPath)) must be \(typeName(type))", field: path(ctx.codingPath))
    case .valueNotFound(let type, let ctx):
        return ChatError(.invalidParameter, "\(path(ctx.codingPath)) must be \(typeName(type)), not null", field: path(ctx.codingPath))
    case .keyNotFound(let key, let ctx):
        let f = path(ctx.codingPath + [key])
        return ChatError(.invalidParameter, "\(f) is required", field: f)
    case .dataCorrupted(let ctx):
        if ctx.codingPath.isEmpty { return ChatError(.invalidParameter, "the body is not valid JSON", field: "body") }
        return ChatError(.invalidParameter, "\(path(ctx.codingPath)): \(ctx.debugDescription)", field: path(ctx.codingPath))
    @unknown default:
        return ChatError(.invalidParameter, "the body could not be read", field: "body")
    }
}

private func typeName(_ t: Any.Type) -> String {
    switch t {
    case is String.Type: return "a string"
    case is Bool.Type: return "a boolean"
    case is Int.Type, is Int64.Type: return "an integer"
    case is [String].Type: return "an array of strings"
    default:
        let s = "\(t)"
        if s.hasPrefix("Array") { return "an array" }
        if s.hasPrefix("Dictionary") { return "an object" }
        return "a \(s)"
    }
}
