import Testing
@testable import Chat
@testable import Replication

/// The binary form of the cluster log's hot records (BX-5, CLUSTER.md): exact bytes, round trips,
/// and every malformed input refused with a typed error, never a crash or a guess.
@Suite("Log record binary codec (cluster log)")
struct LogCodecTests {
    static let sid = SessionID(0xFFFF_FFFF_FFFF_FFF1)

    /// Every record that has a binary form, with the edge values of each field.
    static var binaryCorpus: [LogRecord] {
        [
            .command(.sendMessage(app: "a", roomId: "r", .session(sid), .text, content: "hello \u{0}\u{1F600}")),
            .command(.sendMessage(app: "", roomId: "", .session(SessionID(0)), .custom, content: "")),
            .command(.sendMessage(app: "a", roomId: "r-ü", .server(userId: "", nickname: "n", avatar: "a"), .notification,
                                  content: String(repeating: "x", count: 300))),
            .command(.disconnect(sid)), .command(.disconnect(SessionID(127))), .command(.disconnect(SessionID(128))),
            .command(.leave(sid, roomId: "r")),
            .command(.join(sid, roomId: "r", EnterProfile(), .join)),
            .command(.join(SessionID(1), roomId: "r", EnterProfile(nickname: "N", avatar: "A", ext: "{\"a\":1}", notifyExt: "x"), .join)),
            .tick, .endSessions(incarnation: 0), .endSessions(incarnation: 1_048_575),
            // Signed REST calls' changes, with and without their nonce and idempotency claim.
            .signed(SignedCall(.command(.sendMessage(app: "a", roomId: "r", .server(userId: "u", nickname: "", avatar: ""), .text, content: "x")),
                               nonce: RequestNonce(app: "a", nonce: "n-1"), key: nil)),
            .signed(SignedCall(.command(.sendMessage(app: "a", roomId: "r", .session(sid), .custom, content: "")), nonce: nil,
                               key: IdempotencyClaim(app: "a", key: "k", fingerprint: "f0", claim: ClaimID(incarnation: 3, serial: 1 << 40)))),
            .signed(SignedCall(.command(.leave(sid, roomId: "r")), nonce: RequestNonce(app: "a", nonce: "ü"),
                               key: IdempotencyClaim(app: "a", key: "", fingerprint: "", claim: ClaimID(incarnation: 0, serial: 0)))),
            .signed(SignedCall(.command(.disconnect(sid)), nonce: nil, key: nil)),
        ]
    }

    @Test func hotRecordsRoundTripInBinary() throws {
        for record in Self.binaryCorpus {
            let bytes = try #require(LogRecord.binary(record), "\(record) has a binary form")
            #expect(bytes.first != LogRecord.jsonMark)
            #expect(try LogRecord.decodeBinary(bytes) == record)
        }
    }

    /// The layout is the log's wire format: pinned byte for byte.
    @Test func layoutIsExact() throws {
        #expect(LogRecord.binary(.tick) == [4])
        #expect(LogRecord.binary(.endSessions(incarnation: 300)) == [5, 0xAC, 0x02])
        #expect(LogRecord.binary(.command(.disconnect(SessionID(1)))) == [2, 1])
        #expect(LogRecord.binary(.command(.leave(SessionID(2), roomId: "ab"))) == [3, 2, 2, 0x61, 0x62])
        #expect(LogRecord.binary(.command(.sendMessage(app: "a", roomId: "r", .session(SessionID(5)), .custom, content: "hi")))
                == [1, 1, 0x61, 1, 0x72, 0, 5, 1, 2, 0x68, 0x69])
        #expect(LogRecord.binary(.command(.sendMessage(app: "a", roomId: "r", .server(userId: "u", nickname: "", avatar: ""), .text, content: "")))
                == [1, 1, 0x61, 1, 0x72, 1, 1, 0x75, 0, 0, 0, 0])
        // The largest session id takes ten varint bytes.
        #expect(LogRecord.binary(.command(.disconnect(SessionID(.max)))) == [2] + [UInt8](repeating: 0xFF, count: 9) + [0x01])
        // A signed change: its flags (1: a nonce, 2: a key), the nonce, then the change's own record.
        #expect(LogRecord.binary(.signed(SignedCall(.command(.disconnect(SessionID(1))), nonce: RequestNonce(app: "a", nonce: "n"), key: nil)))
                == [7, 1, 1, 0x61, 1, 0x6E, 2, 1])
        #expect(try LogRecord.decodeBinary([2] + [UInt8](repeating: 0xFF, count: 9) + [0x01]) == .command(.disconnect(SessionID(.max))))
    }

    /// Records without a binary form travel as JSON (the Engine's encoder): nil here.
    @Test func otherRecordsHaveNoBinaryForm() throws {
        #expect(LogRecord.binary(.ensureApp("a")) == nil)
        #expect(LogRecord.binary(.command(.join(Self.sid, roomId: "r", EnterProfile(), .enter(RoomConfig(roomId: "r"))))) == nil)
        #expect(LogRecord.binary(.command(.createRoom(app: "a", RoomConfig(roomId: "r")))) == nil)
        #expect(LogRecord.binary(.signed(SignedCall(.command(.createRoom(app: "a", RoomConfig(roomId: "r"))), nonce: nil, key: nil))) == nil)
        #expect(LogRecord.binary(.signed(SignedCall(.disconnectUser(UserDisconnect(app: "a", userId: "u", device: nil, closeCode: 4010, reason: "")),
                                                    nonce: nil, key: nil))) == nil)
        for c in CommandCodecTests.corpus {
            if let bytes = LogRecord.binary(.command(c)) { #expect(try LogRecord.decodeBinary(bytes) == .command(c)) }
        }
    }

    /// Every strict prefix of a valid record is short, and a valid record with a byte more has a
    /// trailing byte: both refused with the error that says so.
    @Test func truncatedAndOverlongRecordsAreRefused() throws {
        for record in Self.binaryCorpus {
            let bytes = try #require(LogRecord.binary(record))
            for n in 0..<bytes.count {
                #expect(throws: LogCodecError.self) { try LogRecord.decodeBinary(Array(bytes.prefix(n))) }
            }
            #expect(throws: LogCodecError.trailingBytes(1)) { try LogRecord.decodeBinary(bytes + [0]) }
        }
        #expect(throws: LogCodecError.truncated) { try LogRecord.decodeBinary([]) }
        #expect(throws: LogCodecError.truncated) { try LogRecord.decodeBinary([1, 1, 0x61, 1, 0x72, 0, 5, 1, 9, 0x68]) }
    }

    @Test func malformedValuesAreRefused() {
        #expect(throws: LogCodecError.unknownTag(0)) { try LogRecord.decodeBinary([0]) }
        #expect(throws: LogCodecError.unknownTag(9)) { try LogRecord.decodeBinary([9, 1]) }
        // A signed change with unknown flags, without its change, or whose change is not a command.
        #expect(throws: LogCodecError.badValue("signed", 4)) { try LogRecord.decodeBinary([7, 4, 2, 1]) }
        #expect(throws: LogCodecError.truncated) { try LogRecord.decodeBinary([7, 0]) }
        #expect(throws: LogCodecError.badValue("signed change", 4)) { try LogRecord.decodeBinary([7, 0, 4]) }
        #expect(throws: LogCodecError.badValue("signed change", 7)) { try LogRecord.decodeBinary([7, 0, 7, 0, 2, 1]) }
        #expect(throws: LogCodecError.unknownTag(0xFF)) { try LogRecord.decodeBinary([0xFF]) }
        // Sender 2 and kind 3 do not exist.
        #expect(throws: LogCodecError.badValue("sender", 2)) { try LogRecord.decodeBinary([1, 1, 0x61, 1, 0x72, 2, 5, 0, 0]) }
        #expect(throws: LogCodecError.badValue("kind", 3)) { try LogRecord.decodeBinary([1, 1, 0x61, 1, 0x72, 0, 5, 3, 0]) }
        // A varint past 64 bits.
        #expect(throws: LogCodecError.badValue("varint", 2)) { try LogRecord.decodeBinary([2] + [UInt8](repeating: 0xFF, count: 9) + [0x02]) }
        #expect(throws: LogCodecError.self) { try LogRecord.decodeBinary([2] + [UInt8](repeating: 0x80, count: 11)) }
        // A varint spelled longer than it needs (0 as two bytes), and a string that is not UTF-8.
        #expect(throws: LogCodecError.badValue("varint", 0)) { try LogRecord.decodeBinary([2, 0x80, 0x00]) }
        #expect(throws: LogCodecError.invalidUTF8) { try LogRecord.decodeBinary([3, 1, 2, 0xC3, 0x28]) }
        // A string longer than what is left.
        #expect(throws: LogCodecError.truncated) { try LogRecord.decodeBinary([3, 1, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x61]) }
    }

    /// Any byte string decodes or throws: a deterministic sweep of short inputs under each tag.
    @Test func arbitraryBytesNeverCrash() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<20_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let n = Int(state >> 60)
            var bytes: [UInt8] = [UInt8(truncatingIfNeeded: state >> 8) % 9]
            for i in 0..<n { bytes.append(UInt8(truncatingIfNeeded: state >> UInt64(i * 4 % 56))) }
            if let record = try? LogRecord.decodeBinary(bytes) {
                // What reads back encodes to the same bytes (one form per record).
                #expect(LogRecord.binary(record) == bytes)
            }
        }
    }
}
