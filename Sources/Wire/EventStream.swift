import Chat

/// TR-1: Server-Sent Events framing (the WHATWG HTML "event stream" format). Pure.
public enum EventStreamFormat {
    /// One event: `event: NAME`, one `data: ` line per line of `data` (a CR LF, LF or CR ends a
    /// line, as the format reads them), `id: ID` when given, then the blank line that dispatches it.
    /// `name` and `id` must hold no line breaks (event names and cursors never do).
    public static func event(name: String, data: UnsafeRawBufferPointer, id: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(data.count + name.utf8.count + (id?.utf8.count ?? 0) + 24)
        out.append(contentsOf: eventPrefix)
        out.append(contentsOf: name.utf8)
        out.append(lf)
        out.append(contentsOf: dataPrefix)
        var i = 0
        while i < data.count {
            let b = data[i]
            if b == cr || b == lf {
                // CR LF is one line break.
                if b == cr && i + 1 < data.count && data[i + 1] == lf { i += 1 }
                out.append(lf)
                out.append(contentsOf: dataPrefix)
            } else {
                out.append(b)
            }
            i += 1
        }
        out.append(lf)
        if let id {
            out.append(contentsOf: idPrefix)
            out.append(contentsOf: id.utf8)
            out.append(lf)
        }
        out.append(lf)
        return out
    }

    public static func event(name: String, data: [UInt8], id: String?) -> [UInt8] {
        data.withUnsafeBytes { event(name: name, data: $0, id: id) }
    }

    /// A comment line (ignored by readers): keeps proxies from closing an idle stream.
    public static let heartbeat: [UInt8] = Array(": heartbeat\n\n".utf8)

    private static let eventPrefix = Array("event: ".utf8)
    private static let dataPrefix = Array("data: ".utf8)
    private static let idPrefix = Array("id: ".utf8)
    private static let lf: UInt8 = 0x0A
    private static let cr: UInt8 = 0x0D
}

/// TR-1, TR-2: where an HTTP event stream (or a long-poll session) stands in every room it is
/// in: the app, the server's stream id (what a WebSocket's `resume.stream` names), the session's
/// event sequence (TR-2 polls acknowledge by it; 0 means none) and each room's epoch and last
/// offset. Sent as the SSE `id:` and a poll's `cursor`: base64url (no padding) of a versioned
/// binary form. Pure.
public struct StreamCursor: Equatable, Sendable {
    public struct Room: Equatable, Sendable {
        public var roomId: String
        public var epoch: String
        public var offset: Int64
        public init(roomId: String, epoch: String, offset: Int64) {
            self.roomId = roomId
            self.epoch = epoch
            self.offset = offset
        }
    }

    public var app: String
    public var stream: String
    public var sequence: UInt64
    public var rooms: [Room]

    public init(app: String, stream: String, sequence: UInt64 = 0, rooms: [Room]) {
        self.app = app
        self.stream = stream
        self.sequence = sequence
        self.rooms = rooms
    }

    static let version: UInt8 = 1

    /// Why a cursor is refused (the caller names the field it came in).
    public enum Refusal: Error, Equatable, Sendable {
        /// Not base64url, cut short, trailing bytes, an unknown version, a negative offset, a
        /// string that is not UTF-8 or an empty room id.
        case malformed(String)
        /// Issued for another app.
        case otherApp
        /// More rooms than a stream may be in (`Limits.maxStreamRooms`).
        case tooManyRooms

        public var message: String {
            switch self {
            case .malformed(let why): return "the cursor is malformed: \(why)"
            case .otherApp: return "the cursor was issued for another app"
            case .tooManyRooms: return "the cursor names more than \(Limits.maxStreamRooms) rooms"
            }
        }
    }

    public var encoded: String {
        var out: [UInt8] = [Self.version]
        func string(_ s: String) {
            Self.varint(UInt64(s.utf8.count), &out)
            out.append(contentsOf: s.utf8)
        }
        string(app)
        string(stream)
        Self.varint(sequence, &out)
        Self.varint(UInt64(rooms.count), &out)
        for r in rooms {
            string(r.roomId)
            string(r.epoch)
            Self.varint(UInt64(bitPattern: r.offset), &out)
        }
        return base64URL(out)
    }

    /// The cursor `text` stands for, if it is well formed, for `app`, and within the room bound.
    public static func decode(_ text: String, app: String) -> Result<StreamCursor, Refusal> {
        // The longest a cursor can be: every string at its bound, with its length.
        guard text.utf8.count <= maxEncodedBytes else { return .failure(.malformed("too long")) }
        guard !text.isEmpty, text.utf8.allSatisfy(isBase64URL), text.utf8.count % 4 != 1, let bytes = base64URLDecode(text) else {
            return .failure(.malformed("not base64url"))
        }
        var reader = Reader(bytes: bytes)
        do {
            guard try reader.byte() == version else { return .failure(.malformed("unknown version")) }
            let cursorApp = try reader.string()
            let stream = try reader.string()
            let sequence = try reader.varint()
            let count = try reader.varint()
            guard cursorApp == app else { return .failure(.otherApp) }
            guard count <= UInt64(Limits.maxStreamRooms) else { return .failure(.tooManyRooms) }
            var rooms: [Room] = []
            for _ in 0..<Int(count) {
                let roomId = try reader.string()
                let epoch = try reader.string()
                let offset = Int64(bitPattern: try reader.varint())
                guard !roomId.isEmpty else { return .failure(.malformed("empty room id")) }
                guard offset >= 0 else { return .failure(.malformed("negative offset")) }
                rooms.append(Room(roomId: roomId, epoch: epoch, offset: offset))
            }
            guard reader.atEnd else { return .failure(.malformed("trailing bytes")) }
            return .success(StreamCursor(app: cursorApp, stream: stream, sequence: sequence, rooms: rooms))
        } catch let refusal {
            return .failure(refusal)
        }
    }

    /// Generous: strings of up to 255 bytes each (room ids are at most 64).
    static let maxEncodedBytes = ((3 * 260 + 40) + Limits.maxStreamRooms * (2 * 260 + 10)) * 4 / 3 + 4

    private static func isBase64URL(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
    }

    private static func varint(_ value: UInt64, _ out: inout [UInt8]) {
        var v = value
        while v >= 0x80 {
            out.append(UInt8(v & 0x7F) | 0x80)
            v >>= 7
        }
        out.append(UInt8(v))
    }

    private struct Reader {
        let bytes: [UInt8]
        var at = 0
        var atEnd: Bool { at == bytes.count }

        mutating func byte() throws(Refusal) -> UInt8 {
            guard at < bytes.count else { throw .malformed("cut short") }
            defer { at += 1 }
            return bytes[at]
        }

        mutating func varint() throws(Refusal) -> UInt64 {
            var value: UInt64 = 0
            var shift: UInt64 = 0
            while true {
                let b = try byte()
                guard shift < 64, shift < 63 || b <= 1 else { throw .malformed("number too large") }
                value |= UInt64(b & 0x7F) << shift
                if b & 0x80 == 0 { return value }
                shift += 7
            }
        }

        mutating func string() throws(Refusal) -> String {
            let n = try varint()
            guard n <= 255, UInt64(bytes.count - at) >= n else { throw .malformed("cut short") }
            let slice = bytes[at..<(at + Int(n))]
            at += Int(n)
            guard let s = String(validating: slice, as: UTF8.self) else { throw .malformed("not UTF-8") }
            return s
        }
    }
}

/// TR-1, TR-2: what a server text frame's JSON payload is, read from its first keys (the encoder
/// writes `ev`, `roomId`, `epoch`, `offset` in that order, and answers start with `id`). Pure.
public enum FrameKind: Equatable, Sendable {
    /// An event, with its room-stream position when it has one.
    case event(name: String, roomId: String?, epoch: String?, offset: Int64?)
    /// An answer to a command; nil when its `id` is null.
    case answer(id: Int?, bodyStart: Int)
    case other

    /// `payload` is a JSON (not compact) event or answer as `Encode` writes it.
    public static func of(_ payload: UnsafeRawBufferPointer) -> FrameKind {
        var s = Scanner(bytes: payload)
        guard s.literal("{\"") else { return .other }
        if s.literal("id\":") {
            if s.literal("null,") { return .answer(id: nil, bodyStart: s.at) }
            guard let id = s.integer(), s.literal(",") else { return .other }
            return .answer(id: Int(id), bodyStart: s.at)
        }
        guard s.literal("ev\":"), let name = s.string() else { return .other }
        var roomId: String?
        var epoch: String?
        var offset: Int64?
        if s.literal(",\"roomId\":") { roomId = s.string() }
        if s.literal(",\"epoch\":") { epoch = s.string() }
        if s.literal(",\"offset\":") { offset = s.integer() }
        return .event(name: name, roomId: roomId, epoch: epoch, offset: offset)
    }

    private struct Scanner {
        let bytes: UnsafeRawBufferPointer
        var at = 0

        mutating func literal(_ text: StaticString) -> Bool {
            let n = text.utf8CodeUnitCount
            guard bytes.count - at >= n else { return false }
            for i in 0..<n where bytes[at + i] != text.utf8Start[i] { return false }
            at += n
            return true
        }

        /// A JSON string without escapes (names, room ids and epochs have none); nil otherwise.
        mutating func string() -> String? {
            guard at < bytes.count, bytes[at] == 0x22 else { return nil }
            var end = at + 1
            while end < bytes.count, bytes[end] != 0x22 {
                if bytes[end] == 0x5C { return nil }
                end += 1
            }
            guard end < bytes.count else { return nil }
            let s = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[(at + 1)..<end]), as: UTF8.self)
            at = end + 1
            return s
        }

        mutating func integer() -> Int64? {
            var negative = false
            if at < bytes.count, bytes[at] == 0x2D {
                negative = true
                at += 1
            }
            var value: Int64 = 0
            var digits = 0
            while at < bytes.count, bytes[at] >= 0x30, bytes[at] <= 0x39, digits < 18 {
                value = value * 10 + Int64(bytes[at] - 0x30)
                at += 1
                digits += 1
            }
            return digits == 0 ? nil : (negative ? -value : value)
        }
    }
}
