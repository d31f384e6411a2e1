import Chat
import Foundation
import HTTP1

/// A JSON value read strictly (a number is never a boolean, a string never a number): the
/// Nexconn v4 bodies and NIM's JSON-array form values.
public enum JSONValue: Decodable, Equatable, Sendable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if c.decodeNil() { self = .null; return }
        if let b = try? c.decode(Bool.self) { self = .bool(b); return }
        if let i = try? c.decode(Int64.self) { self = .int(i); return }
        if let d = try? c.decode(Double.self) { self = .double(d); return }
        if let s = try? c.decode(String.self) { self = .string(s); return }
        if let a = try? c.decode([JSONValue].self) { self = .array(a); return }
        self = .object(try c.decode([String: JSONValue].self))
    }

    /// Parses a whole document; nil when it is not JSON.
    public static func parse(_ bytes: [UInt8]) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(bytes))
    }

    /// The text a form value would carry for this scalar (objects and arrays re-encoded).
    var text: String? {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .bool(let b): return b ? "true" : "false"
        case .double(let d): return String(d)
        case .null, .array, .object: return nil
        }
    }
}

/// The parameters of one vendor call, read the way that vendor's SDKs send them: a form body
/// (RongCloud v1 and NIM v1: repeated keys for arrays, comma-joined or JSON-array strings where
/// the vendor uses them) or a JSON object (Nexconn v4). Every accessor refuses a malformed value
/// with `invalidParameter` naming the vendor's field, so a surface turns it into its own code.
public struct VendorParams: Sendable {
    enum Source: Sendable {
        case form([(name: String, value: String)])
        case json([String: JSONValue])
    }
    let source: Source

    /// A form body (`application/x-www-form-urlencoded`), also when the sender did not
    /// percent-encode it: RongCloud's Python SDK sends values raw (spaces, JSON, UTF-8). A body
    /// holding a byte that an encoded body never holds (space, quote, brace, bracket, non-ASCII)
    /// is read raw, split on `&` and the first `=` with nothing decoded; any other body is decoded
    /// (a `%` that does not start an escape is kept as it is).
    public static func form(_ body: [UInt8]) -> VendorParams {
        let text = String(decoding: body, as: UTF8.self)
        guard isRaw(body) else { return VendorParams(source: .form(parseFormEncoded(text))) }
        let items = text.split(separator: "&", omittingEmptySubsequences: true).map { pair -> (name: String, value: String) in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (name: String(kv[0]), value: kv.count > 1 ? String(kv[1]) : "")
        }
        return VendorParams(source: .form(items))
    }

    /// Whether a form body was sent without percent-encoding.
    static func isRaw(_ body: [UInt8]) -> Bool {
        body.contains { b in b >= 0x80 || b == 0x20 || b == 0x22 || b == 0x7B || b == 0x7D || b == 0x5B || b == 0x5D }
    }

    /// A JSON object body (Nexconn v4); an empty body is an empty object.
    public static func json(_ body: [UInt8]) throws(ChatError) -> VendorParams {
        if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return VendorParams(source: .json([:])) }
        guard case .object(let o)? = JSONValue.parse(body) else {
            throw ChatError(.invalidParameter, "the body must be a JSON object", field: "body")
        }
        return VendorParams(source: .json(o))
    }

    /// Form items whose name is `prefix[<key>]` (RongCloud's `chatroom[<id>]=<name>`), as
    /// (key, value) in the order sent; none for a JSON body.
    public func bracketed(_ prefix: String) -> [(key: String, value: String)] {
        guard case .form(let items) = source else { return [] }
        return items.compactMap { item in
            guard item.name.hasPrefix(prefix + "["), item.name.hasSuffix("]") else { return nil }
            return (key: String(item.name.dropFirst(prefix.count + 1).dropLast()), value: item.value)
        }
    }

    // MARK: Scalars

    /// The value as text (the first one of a repeated form key). A JSON value must be a string.
    public func string(_ name: String) throws(ChatError) -> String? {
        switch source {
        case .form(let items): return items.first { $0.name == name }?.value
        case .json(let o):
            switch o[name] {
            case nil, .null?: return nil
            case .string(let s)?: return s
            default: throw ChatError(.invalidParameter, "\(name) must be a string", field: name)
            }
        }
    }

    public func required(_ name: String) throws(ChatError) -> String {
        guard let v = try string(name), !v.isEmpty else { throw ChatError(.invalidParameter, "\(name) is required", field: name) }
        return v
    }

    /// An integer: form text of digits, or a JSON integer.
    public func int(_ name: String) throws(ChatError) -> Int? {
        switch source {
        case .form(let items):
            guard let text = items.first(where: { $0.name == name })?.value, !text.isEmpty else { return nil }
            guard let i = Int(text.trimmingCharacters(in: .whitespaces)) else {
                throw ChatError(.invalidParameter, "\(name) must be an integer", field: name)
            }
            return i
        case .json(let o):
            switch o[name] {
            case nil, .null?: return nil
            case .int(let i)?: return Int(i)
            default: throw ChatError(.invalidParameter, "\(name) must be an integer", field: name)
            }
        }
    }

    public func requiredInt(_ name: String) throws(ChatError) -> Int {
        guard let v = try int(name) else { throw ChatError(.invalidParameter, "\(name) is required", field: name) }
        return v
    }

    /// A boolean: form `true`/`false`/`1`/`0`, or a JSON boolean (or 0/1, as the vendors' own
    /// models use both).
    public func bool(_ name: String) throws(ChatError) -> Bool? {
        let text: String?
        switch source {
        case .form(let items): text = items.first { $0.name == name }?.value
        case .json(let o):
            switch o[name] {
            case nil, .null?: return nil
            case .bool(let b)?: return b
            case .int(let i)? where i == 0 || i == 1: return i == 1
            default: throw ChatError(.invalidParameter, "\(name) must be true or false", field: name)
            }
        }
        guard let text, !text.isEmpty else { return nil }
        switch text.lowercased() {
        case "true", "1": return true
        case "false", "0": return false
        default: throw ChatError(.invalidParameter, "\(name) must be true or false", field: name)
        }
    }

    // MARK: Lists

    /// An array: repeated form keys (`userId=a&userId=b`; a key given once with commas is one
    /// item), or a JSON array of strings.
    public func list(_ name: String) throws(ChatError) -> [String] {
        switch source {
        case .form(let items): return items.filter { $0.name == name }.map(\.value)
        case .json: return try jsonStrings(name)
        }
    }

    /// One comma-joined form value (`userIds=a,b`, RongCloud ultra-group calls), or a JSON array.
    public func commaList(_ name: String) throws(ChatError) -> [String] {
        switch source {
        case .form(let items):
            return items.filter { $0.name == name }.flatMap { $0.value.split(separator: ",", omittingEmptySubsequences: true).map(String.init) }
        case .json: return try jsonStrings(name)
        }
    }

    /// A JSON array of strings carried as one form value (`accids=["a","b"]`, NIM v1).
    public func jsonArrayString(_ name: String) throws(ChatError) -> [String]? {
        guard let text = try string(name), !text.isEmpty else { return nil }
        guard case .array(let items)? = JSONValue.parse(Array(text.utf8)) else {
            throw ChatError(.invalidParameter, "\(name) must be a JSON array of strings", field: name)
        }
        return try items.map { (v: JSONValue) throws(ChatError) -> String in
            guard case .string(let s) = v else { throw ChatError(.invalidParameter, "\(name) must be a JSON array of strings", field: name) }
            return s
        }
    }

    /// MO-7: a JSON array of ids that the official SDKs send as numbers (NIM's Java SDK sends
    /// `List<Long>`) or as strings; each as its canonical decimal string.
    public func jsonIdArray(_ name: String) throws(ChatError) -> [String]? {
        guard let text = try string(name), !text.isEmpty else { return nil }
        guard case .array(let items)? = JSONValue.parse(Array(text.utf8)) else {
            throw ChatError(.invalidParameter, "\(name) must be a JSON array of ids (numbers or strings)", field: name)
        }
        return try items.map { (v: JSONValue) throws(ChatError) -> String in
            switch v {
            case .string(let s): return s
            case .int(let n): return String(n)
            default: throw ChatError(.invalidParameter, "\(name) must be a JSON array of ids (numbers or strings)", field: name)
            }
        }
    }

    /// A JSON object carried as one form value, or given as an object in a JSON body.
    public func object(_ name: String) throws(ChatError) -> [String: JSONValue]? {
        switch source {
        case .json(let o):
            switch o[name] {
            case nil, .null?: return nil
            case .object(let v)?: return v
            case .string(let s)?: return try Self.objectText(s, name)
            default: throw ChatError(.invalidParameter, "\(name) must be a JSON object", field: name)
            }
        case .form:
            guard let text = try string(name), !text.isEmpty else { return nil }
            return try Self.objectText(text, name)
        }
    }

    /// A JSON object of string values (attributes, queue elements) in either source.
    public func stringMap(_ name: String) throws(ChatError) -> [(key: String, value: String)]? {
        guard let o = try object(name) else { return nil }
        return try o.keys.sorted().map { (k: String) throws(ChatError) -> (key: String, value: String) in
            guard case .string(let v)? = o[k] else { throw ChatError(.invalidParameter, "\(name).\(k) must be a string", field: name) }
            return (key: k, value: v)
        }
    }

    /// The raw JSON value of a JSON body's field.
    public func value(_ name: String) -> JSONValue? {
        if case .json(let o) = source { return o[name] }
        return nil
    }

    private static func objectText(_ text: String, _ name: String) throws(ChatError) -> [String: JSONValue] {
        guard case .object(let o)? = JSONValue.parse(Array(text.utf8)) else {
            throw ChatError(.invalidParameter, "\(name) must be a JSON object", field: name)
        }
        return o
    }

    private func jsonStrings(_ name: String) throws(ChatError) -> [String] {
        guard case .json(let o) = source else { return [] }
        switch o[name] {
        case nil, .null?: return []
        case .array(let items)?:
            return try items.map { (v: JSONValue) throws(ChatError) -> String in
                guard case .string(let s) = v else { throw ChatError(.invalidParameter, "\(name) must be an array of strings", field: name) }
                return s
            }
        default: throw ChatError(.invalidParameter, "\(name) must be an array of strings", field: name)
        }
    }
}

/// Vendor time formats, pure (no Foundation calendars): RongCloud answers times as
/// `yyyy-MM-dd HH:mm:ss` in UTC (its global data centres' zone).
public enum VendorTime {
    public static func dateTime(milliseconds ms: Int64) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secOfDay = seconds - days * 86_400
        // Days since 1970-01-01 to a civil date (H. Hinnant's algorithm, public domain description).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let yyyy = y < 1000 ? String(repeating: "0", count: 4 - String(y).count) + String(y) : String(y)
        return "\(yyyy)-\(two(m))-\(two(d)) \(two(secOfDay / 3600)):\(two(secOfDay / 60 % 60)):\(two(secOfDay % 60))"
    }
}
