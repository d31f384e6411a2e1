/// TR-5: the event encodings a WebSocket connection may speak, chosen in the opening handshake
/// with `Sec-WebSocket-Protocol` (openapi/websocket.md, "Encodings").
public enum WireEncoding: String, Sendable, CaseIterable {
    /// Today's events: `{"ev", "roomId", "epoch", "offset", "data"}`.
    case json = "roomcast.json.v1"
    /// The same events with short keys and without what the client knows already.
    case compact = "roomcast.compact.v1"

    /// The subprotocol names, in the order the server prefers them.
    public static let names = [WireEncoding.compact.rawValue, WireEncoding.json.rawValue]

    /// Why a handshake's `Sec-WebSocket-Protocol` was refused.
    public struct Refusal: Error, Equatable, Sendable {
        public let offered: [String]
        public var message: String {
            "Sec-WebSocket-Protocol offers none of this server's encodings (" + WireEncoding.names.joined(separator: ", ") + "): "
                + offered.joined(separator: ", ")
        }
    }

    /// Picks the encoding from the values of the handshake's `Sec-WebSocket-Protocol` fields: the
    /// client's first offer this server speaks (RFC 6455 §4.2.2: the server echoes it). Nothing
    /// offered: JSON, with no subprotocol echoed (nil name). Offers none of which this server
    /// speaks: refused (the handshake is answered 400, so the client does not carry on with a
    /// protocol it did not ask for). Pure.
    public static func negotiate(offers: [String]) -> Result<(encoding: WireEncoding, echo: String?), Refusal> {
        var list: [String] = []
        for value in offers {
            for token in value.split(separator: ",") {
                let t = token.trimmingSpaces()
                if !t.isEmpty { list.append(t) }
            }
        }
        if list.isEmpty { return .success((.json, nil)) }
        // Subprotocol names are case-sensitive tokens (RFC 6455 §4.1).
        for t in list {
            if let e = WireEncoding(rawValue: t) { return .success((e, t)) }
        }
        return .failure(Refusal(offered: Array(list.prefix(8))))
    }
}

extension Substring {
    func trimmingSpaces() -> String {
        var s = self[...]
        while let f = s.first, f == " " || f == "\t" { s = s.dropFirst() }
        while let l = s.last, l == " " || l == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// TR-5: turns an event frame's JSON payload into its compact form (openapi/websocket.md,
/// "Encodings"). The rules:
/// - The envelope `{"ev","roomId","epoch","offset","data"}` becomes `{"e","r","p","o","d"}`;
///   `data` is unchanged. `epoch` is left out whenever the event has an `offset`: a connection
///   only gets stream events of a room it joined (or observes), whose answer named the room's
///   epoch, and a room's epoch changes only when it is destroyed, which ends that membership.
///   An event with an epoch and no offset (`room.gap`) keeps it as `p`.
/// - `room.message` is flattened: `{"m": roomId, "o": offset, ...the message's fields}` with the
///   message's keys shortened (`messageKeys`), its `roomId` left out (the room's), and these left
///   out when they have their usual value: `senderNickname`, `senderAvatar`, `roomExt`,
///   `content` (""), `type` ("text"), `fromServer` (false); booleans that are there are `1`.
/// - With a `RoomAlias` (the room's node-wide alias, told to the connection by its join, switch or
///   observe answer), the room id in `m` or `r` is written as the alias, a JSON number, when it is
///   that room's; any other room id stays a string.
/// - Anything that is not an event (answers to commands) is sent as it is.
/// Pure: the same JSON gives the same bytes.
public enum CompactEncoding {
    /// TR-5: a room's alias on one node: the JSON string of its room id (quotes included) and the
    /// number written instead.
    public struct RoomAlias: Sendable, Equatable {
        public let quotedRoomId: [UInt8]
        public let number: Int32

        public init(roomId: String, number: Int32) {
            // Room ids are identifiers: visible ASCII without `"` or `\` (Validate.identifier),
            // so their JSON string needs no escapes.
            quotedRoomId = Array(("\"" + roomId + "\"").utf8)
            self.number = number
        }
    }

    /// Message keys and their compact names (a one-to-one table; the client reverses it).
    public static let messageKeys: [(long: String, short: String)] = [
        ("messageId", "i"), ("sender", "s"), ("senderNickname", "n"), ("senderAvatar", "a"), ("roomExt", "x"),
        ("type", "k"), ("content", "c"), ("time", "t"), ("fromServer", "f"), ("priority", "pr"),
        ("messageType", "y"), ("transient", "tr"), ("recalled", "rc"), ("targets", "to"), ("targetTags", "tt"),
    ]
    /// Message fields left out when they hold this JSON value.
    static let usualValues: [String: String] = [
        "senderNickname": "\"\"", "senderAvatar": "\"\"", "roomExt": "\"\"", "content": "\"\"", "type": "\"text\"",
        "fromServer": "false",
    ]
    static let shortKey: [String: String] = Dictionary(uniqueKeysWithValues: messageKeys.map { ($0.long, $0.short) })
    private static let eventPrefix = Array(#"{"ev":"#.utf8)

    /// The compact payload of `json`, or nil when it is not an event (sent as it is).
    public static func transcode(_ json: UnsafeRawBufferPointer, alias: RoomAlias? = nil) -> [UInt8]? {
        guard json.count > eventPrefix.count, json.starts(with: eventPrefix) else { return nil }
        var scanner = Scanner(json)
        guard let envelope = scanner.objectMembers(), scanner.atEnd else { return nil }
        var ev: Range<Int>?, room: Range<Int>?, epoch: Range<Int>?, offset: Range<Int>?, data: Range<Int>?
        for (key, value) in envelope {
            switch key {
            case "ev": ev = value
            case "roomId": room = value
            case "epoch": epoch = value
            case "offset": offset = value
            case "data": data = value
            default: return nil
            }
        }
        guard let ev, let data else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(json.count / 2)
        func append(_ s: String) { out.append(contentsOf: s.utf8) }
        func append(_ r: Range<Int>) { out.append(contentsOf: json[r]) }
        // The room: its alias when the event is of the aliased room, else its id.
        func appendRoom(_ r: Range<Int>) {
            if let alias, json[r].elementsEqual(alias.quotedRoomId) { append(String(alias.number)) } else { append(r) }
        }
        // The stream position: the offset, or the epoch when there is none (room.gap).
        func appendPosition() {
            if let offset {
                append(#","o":"#)
                append(offset)
            } else if let epoch {
                append(#","p":"#)
                append(epoch)
            }
        }
        if let room, bytes(json, ev) == Array(#""room.message""#.utf8), let message = flatMessage(json, data: data, room: room) {
            append(#"{"m":"#)
            appendRoom(room)
            appendPosition()
            for (key, value) in message {
                append(",\"\(key)\":")
                if bytes(json, value) == Array("true".utf8) { append("1") } else { append(value) }
            }
            append("}")
            return out
        }
        append(#"{"e":"#)
        append(ev)
        if let room {
            append(#","r":"#)
            appendRoom(room)
        }
        appendPosition()
        append(#","d":"#)
        append(data)
        append("}")
        return out
    }

    public static func transcode(_ json: [UInt8], alias: RoomAlias? = nil) -> [UInt8]? {
        json.withUnsafeBytes { transcode($0, alias: alias) }
    }

    /// The message's compact members (short key, value range), or nil when `data` is not
    /// `{"message": {...}}` of this room with only known fields (then the envelope form is used).
    private static func flatMessage(_ json: UnsafeRawBufferPointer, data: Range<Int>, room: Range<Int>) -> [(String, Range<Int>)]? {
        var d = Scanner(json, range: data)
        guard let members = d.objectMembers(), d.atEnd, members.count == 1, members[0].0 == "message" else { return nil }
        var m = Scanner(json, range: members[0].1)
        guard let fields = m.objectMembers(), m.atEnd else { return nil }
        var out: [(String, Range<Int>)] = []
        for (key, value) in fields {
            if key == "roomId" {
                guard bytes(json, value) == bytes(json, room) else { return nil }
                continue
            }
            guard let short = shortKey[key] else { return nil }
            if let usual = usualValues[key], bytes(json, value) == Array(usual.utf8) { continue }
            out.append((short, value))
        }
        return out
    }

    private static func bytes(_ json: UnsafeRawBufferPointer, _ r: Range<Int>) -> [UInt8] { Array(json[r]) }

    /// Just enough of a JSON reader to find an object's members and their values' byte ranges
    /// (values are copied, never interpreted). Input is the server's own writer's output.
    struct Scanner {
        let json: UnsafeRawBufferPointer
        var i: Int
        let end: Int

        init(_ json: UnsafeRawBufferPointer, range: Range<Int>? = nil) {
            self.json = json
            i = range?.lowerBound ?? 0
            end = range?.upperBound ?? json.count
        }

        var atEnd: Bool { i == end }

        /// `{"k": v, ...}` from here: the keys (unescaped only when plain) and value ranges.
        mutating func objectMembers() -> [(String, Range<Int>)]? {
            guard i < end, json[i] == UInt8(ascii: "{") else { return nil }
            i += 1
            var out: [(String, Range<Int>)] = []
            if i < end, json[i] == UInt8(ascii: "}") {
                i += 1
                return out
            }
            while true {
                guard let k = string(), i < end, json[i] == UInt8(ascii: ":") else { return nil }
                i += 1
                let start = i
                guard skipValue() else { return nil }
                // Keys with escapes are not ours: the caller falls back (nil key never matches).
                out.append((String(decoding: json[(k.lowerBound + 1)..<(k.upperBound - 1)], as: UTF8.self), start..<i))
                guard i < end else { return nil }
                if json[i] == UInt8(ascii: ",") {
                    i += 1
                    continue
                }
                guard json[i] == UInt8(ascii: "}") else { return nil }
                i += 1
                return out
            }
        }

        /// A string token's range, quotes included.
        mutating func string() -> Range<Int>? {
            guard i < end, json[i] == UInt8(ascii: "\"") else { return nil }
            let start = i
            i += 1
            while i < end {
                let c = json[i]
                if c == UInt8(ascii: "\\") {
                    i += 2
                    continue
                }
                i += 1
                if c == UInt8(ascii: "\"") { return start..<i }
            }
            return nil
        }

        mutating func skipValue() -> Bool {
            guard i < end else { return false }
            switch json[i] {
            case UInt8(ascii: "\""):
                return string() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while i < end {
                    let c = json[i]
                    if c == UInt8(ascii: "\"") {
                        guard string() != nil else { return false }
                        continue
                    }
                    if c == UInt8(ascii: "{") || c == UInt8(ascii: "[") { depth += 1 }
                    if c == UInt8(ascii: "}") || c == UInt8(ascii: "]") { depth -= 1 }
                    i += 1
                    if depth == 0 { return true }
                }
                return false
            default:
                let start = i
                while i < end, json[i] != UInt8(ascii: ","), json[i] != UInt8(ascii: "}"), json[i] != UInt8(ascii: "]") { i += 1 }
                return i > start
            }
        }
    }
}
