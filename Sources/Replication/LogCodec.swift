import Chat
import Foundation

/// The binary form of the records of the cluster's log that a chat is mostly made of (messages,
/// sessions joining, leaving and going away, ticks): every node decodes every entry, and this costs
/// no allocation beyond the strings it carries. Every other record travels as the JSON of its
/// `Codable` value (`LogRecord.encode`, below). The first byte tells them apart: JSON always
/// starts with `{` (0x7B), a binary record with its tag (below 0x20), so both sit in one log.
///
/// Binary layout: the tag, then the fields in order — unsigned integers as LEB128 varints, strings
/// as a varint byte count and their UTF-8 bytes, enums as one byte. A record that does not read
/// back exactly (short, trailing bytes, an unknown tag or enum value, a varint spelled longer than
/// it needs, invalid UTF-8) is an error, never a guess.
extension LogRecord {
    enum Tag: UInt8 {
        case sendMessage = 1
        case disconnect = 2
        case leave = 3
        case tick = 4
        case endSessions = 5
        case joinRoom = 6
        /// A signed REST call's change (its nonce, its idempotency claim), followed by the change
        /// itself as one of the records above.
        case signed = 7
        /// A message with options (QS-1, QS-5; format 3): `sendMessage`'s fields, then the class
        /// asked for (0 none, 1 low, 2 normal, 3 high), the type and the transient flag. Never
        /// JSON: a node of an older format must stop at it, not apply it without its options.
        case sendMessageWithOptions = 8
    }

    /// The oldest log format whose readers understand this record.
    static func requiredFormat(_ record: LogRecord) -> Int {
        var change: Command?
        switch record {
        case .command(let c): change = c
        case .signed(let call): if case .command(let c) = call.change { change = c }
        default: break
        }
        // MO-3, MO-5: community messages and controls are format 7's.
        var inner = change
        if case .via(_, let c)? = change { inner = c }
        switch inner {
        case .sendCommunityMessage?, .community?: return 7
        // MO-4: an older node knows no user groups.
        case .createUserGroups?, .deleteUserGroups?, .addUserGroupMembers?, .removeUserGroupMembers?, .bindUserGroups?, .unbindUserGroups?: return 7
        // MO-8: audited since format 7.
        case .destroyRooms?, .editMessageList?, .setProtectedSenders?: return 7
        default: break
        }
        // MO-8: a moderation command records an audit entry, which a node of an older format
        // would not: its state would differ from the others'.
        if change?.isModeration == true { return 6 }
        // MO-7: an account acting through the app server is format 5's.
        if case .account? = change?.actor { return 5 }
        switch change {
        case .sendMessage(_, _, _, _, _, let options)?:
            guard let options else { return 1 }
            return options.targets.isEmpty && options.targetTags == nil ? 3 : 4
        case .join(_, _, let profile, _)?:
            // AU-4: an older node would give a counts-only connection every member event.
            if profile.memberCountsOnly == true { return 6 }
            return profile.tags == nil && profile.notifyTargetTags == nil ? 1 : 4
        case .setMemberTags?, .tagMute?, .sendToRooms?, .broadcast?, .queueBatchOffer?, .updateMemberInfo?:
            return 4
        case .recallMessage?, .editSensitiveWords?, .renameGroup?:
            return 5
        case .updateAppSettings(_, let patch)?:
            // MO-1, MO-2: an older node would drop the settings it does not know.
            // AU-4: and the member-event threshold and summary interval.
            if patch.memberEventsThreshold != nil || patch.memberSummaryIntervalMilliseconds != nil { return 6 }
            return patch.recallWindowSeconds == nil && patch.sensitiveWordsOnServerSends == nil ? 1 : 5
        case .configureApp(_, let settings)?:
            let d = AppSettings()
            if settings.memberEventsThreshold != d.memberEventsThreshold
                || settings.memberSummaryIntervalMilliseconds != d.memberSummaryIntervalMilliseconds { return 6 }
            return settings.recallWindowSeconds == d.recallWindowSeconds && settings.sensitiveWords.isEmpty
                && settings.sensitiveWordsOnServerSends == d.sensitiveWordsOnServerSends ? 1 : 5
        default:
            return 1
        }
    }

    /// The binary form of `record`, or nil when it has none (the log then carries its JSON).
    public static func binary(_ record: LogRecord) -> [UInt8]? {
        var w = LogWriter()
        switch record {
        case .command(.sendMessage(let app, let roomId, let sender, let kind, let content, let options)):
            // A message for some members only (AU-1, AU-2; format 4) travels as JSON.
            if let options, !options.targets.isEmpty || options.targetTags != nil { return nil }
            w.tag(options == nil ? .sendMessage : .sendMessageWithOptions)
            w.string(app)
            w.string(roomId)
            switch sender {
            case .session(let sid):
                w.byte(0)
                w.varint(sid.raw)
            case .server(let userId, let nickname, let avatar):
                w.byte(1)
                w.string(userId)
                w.string(nickname)
                w.string(avatar)
            }
            w.byte(kind.code)
            w.string(content)
            if let options {
                w.byte(options.priority.map { $0.code } ?? 0)
                w.string(options.type)
                w.byte(options.transient ? 1 : 0)
            }
        case .command(.disconnect(let sid)):
            w.tag(.disconnect)
            w.varint(sid.raw)
        case .command(.leave(let sid, let roomId)):
            w.tag(.leave)
            w.varint(sid.raw)
            w.string(roomId)
        case .command(.join(let sid, let roomId, let profile, .join))
            where profile.tags == nil && profile.notifyTargetTags == nil && profile.memberCountsOnly == nil:
            w.tag(.joinRoom)
            w.varint(sid.raw)
            w.string(roomId)
            w.string(profile.nickname)
            w.string(profile.avatar)
            w.string(profile.ext)
            w.string(profile.notifyExt)
        case .signed(let call):
            guard case .command(let command) = call.change, let inner = binary(.command(command)) else { return nil }
            w.tag(.signed)
            w.byte((call.nonce == nil ? 0 : 1) | (call.key == nil ? 0 : 2))
            if let n = call.nonce {
                w.string(n.app)
                w.string(n.nonce)
            }
            if let k = call.key {
                w.string(k.app)
                w.string(k.key)
                w.string(k.fingerprint)
                w.varint(k.claim.incarnation)
                w.varint(k.claim.serial)
            }
            w.bytes.append(contentsOf: inner)
        case .tick:
            w.tag(.tick)
        case .endSessions(let incarnation):
            w.tag(.endSessions)
            w.varint(incarnation)
        default:
            return nil
        }
        return w.bytes
    }

    /// The first byte of a record in JSON.
    public static let jsonMark = UInt8(ascii: "{")

    /// Reads a binary record (one that does not start with `jsonMark`).
    public static func decodeBinary(_ bytes: [UInt8]) throws(LogCodecError) -> LogRecord {
        guard let first = bytes.first else { throw .truncated }
        guard let tag = Tag(rawValue: first) else { throw .unknownTag(first) }
        var r = LogReader(bytes: bytes, at: 1)
        let record: LogRecord
        switch tag {
        case .sendMessage, .sendMessageWithOptions:
            let app = try r.string()
            let roomId = try r.string()
            let sender: MessageSender
            switch try r.byte() {
            case 0: sender = .session(SessionID(try r.varint()))
            case 1: sender = .server(userId: try r.string(), nickname: try r.string(), avatar: try r.string())
            case let b: throw .badValue("sender", b)
            }
            let k = try r.byte()
            guard let kind = ChatMessage.Kind(code: k) else { throw .badValue("kind", k) }
            let content = try r.string()
            var options: MessageOptions?
            if tag == .sendMessageWithOptions {
                let p = try r.byte()
                guard p <= 3 else { throw .badValue("priority", p) }
                let type = try r.string()
                let t = try r.byte()
                guard t <= 1 else { throw .badValue("transient", t) }
                options = MessageOptions(priority: p == 0 ? nil : MessagePriority(code: p), type: type, transient: t == 1)
            }
            record = .command(.sendMessage(app: app, roomId: roomId, sender, kind, content: content, options: options))
        case .disconnect:
            record = .command(.disconnect(SessionID(try r.varint())))
        case .leave:
            record = .command(.leave(SessionID(try r.varint()), roomId: try r.string()))
        case .joinRoom:
            let sid = SessionID(try r.varint())
            let roomId = try r.string()
            let profile = EnterProfile(nickname: try r.string(), avatar: try r.string(), ext: try r.string(), notifyExt: try r.string())
            record = .command(.join(sid, roomId: roomId, profile, .join))
        case .signed:
            let flags = try r.byte()
            guard flags <= 3 else { throw .badValue("signed", flags) }
            let nonce = flags & 1 == 0 ? nil : RequestNonce(app: try r.string(), nonce: try r.string())
            var key: IdempotencyClaim?
            if flags & 2 != 0 {
                key = IdempotencyClaim(app: try r.string(), key: try r.string(), fingerprint: try r.string(),
                                       claim: ClaimID(incarnation: try r.varint(), serial: try r.varint()))
            }
            // The change: one record of its own, to the end (never another signed one: no nesting).
            guard r.at < bytes.count else { throw .truncated }
            guard bytes[r.at] != Tag.signed.rawValue else { throw .badValue("signed change", bytes[r.at]) }
            guard case .command(let command) = try decodeBinary(Array(bytes[r.at...])) else { throw .badValue("signed change", bytes[r.at]) }
            return .signed(SignedCall(.command(command), nonce: nonce, key: key))
        case .tick:
            record = .tick
        case .endSessions:
            record = .endSessions(incarnation: try r.varint())
        }
        guard r.at == bytes.count else { throw .trailingBytes(bytes.count - r.at) }
        return record
    }
}

public enum LogCodecError: Error, Equatable {
    case truncated
    case unknownTag(UInt8)
    case badValue(String, UInt8)
    case trailingBytes(Int)
    case invalidUTF8
    /// The record needs a newer log format than the cluster's.
    case needsFormat(Int)
}

extension MessagePriority {
    var code: UInt8 {
        switch self {
        case .low: 1
        case .normal: 2
        case .high: 3
        }
    }

    init?(code: UInt8) {
        switch code {
        case 1: self = .low
        case 2: self = .normal
        case 3: self = .high
        default: return nil
        }
    }
}

extension ChatMessage.Kind {
    var code: UInt8 {
        switch self {
        case .text: 0
        case .custom: 1
        case .notification: 2
        }
    }

    init?(code: UInt8) {
        switch code {
        case 0: self = .text
        case 1: self = .custom
        case 2: self = .notification
        default: return nil
        }
    }
}

struct LogWriter {
    var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(64) }

    mutating func tag(_ t: LogRecord.Tag) { bytes.append(t.rawValue) }
    mutating func byte(_ b: UInt8) { bytes.append(b) }

    mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    mutating func string(_ s: String) {
        var s = s
        s.withUTF8 { u in
            varint(UInt64(u.count))
            bytes.append(contentsOf: u)
        }
    }
}

struct LogReader {
    let bytes: [UInt8]
    var at: Int

    mutating func byte() throws(LogCodecError) -> UInt8 {
        guard at < bytes.count else { throw .truncated }
        defer { at += 1 }
        return bytes[at]
    }

    mutating func varint() throws(LogCodecError) -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            let b = try byte()
            // A tenth byte may carry only the top bit of 64.
            guard shift < 63 || (shift == 63 && b <= 1) else { throw .badValue("varint", b) }
            value |= UInt64(b & 0x7F) << shift
            if b < 0x80 {
                // One form per value: a last byte of 0 after others would be a longer spelling.
                guard b != 0 || shift == 0 else { throw .badValue("varint", b) }
                return value
            }
            shift += 7
        }
    }

    mutating func string() throws(LogCodecError) -> String {
        let n = try varint()
        guard n <= UInt64(bytes.count - at) else { throw .truncated }
        let end = at + Int(n)
        defer { at = end }
        // A node writes a Swift string's UTF-8: anything else is damage, never repaired.
        guard let s = bytes.withUnsafeBufferPointer({ String(validating: UnsafeBufferPointer(rebasing: $0[at..<end]), as: UTF8.self) }) else {
            throw .invalidUTF8
        }
        return s
    }
}

// MARK: Encoding and decoding

extension LogRecord {
    /// The bytes of a record in the cluster's log: its binary form where it has one (the hot
    /// records, above) and the cluster's `format` allows it, else the JSON of the
    /// `Codable` record.
    public static func encode(_ record: LogRecord, format: Int = LogRecord.format) throws -> [UInt8] {
        // A record newer than the cluster's format: its older nodes could not read it.
        let needed = requiredFormat(record)
        guard needed <= format else { throw LogCodecError.needsFormat(needed) }
        if format >= binaryFormat, let bytes = binary(record) { return bytes }
        return Array(try JSONEncoder().encode(record))
    }

    public static func decode(_ bytes: [UInt8]) throws -> LogRecord {
        if bytes.first == jsonMark { return try JSONDecoder().decode(LogRecord.self, from: Data(bytes)) }
        return try decodeBinary(bytes)
    }
}
