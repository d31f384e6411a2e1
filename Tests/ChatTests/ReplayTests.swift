import Foundation
import Testing
@testable import Chat
@testable import Replication

/// Applying the shared log (CLUSTER.md), in one process: commands carried through the log's codec,
/// each with the entry's time and ids derived from its position, give the same outcomes as the
/// commands themselves — replies, events and their audiences, durable mutations, webhook records,
/// ids included. (Agreement across processes, whose hash seeds differ, is
/// `ReplayAcrossProcessesTests` in ClusterTests.)
@Suite("Replaying the shared log")
struct ReplayTests {
    enum Entry {
        case command(Command)
        case tick
    }

    static func entries() -> [(Entry, at: Int64)] {
        let t0: Int64 = 1_800_000_000_000
        let a = SessionID(1 << 48 | 1), b = SessionID(2 << 48 | 1), anon = SessionID(3 << 48 | 7)
        var settings = AppSettings()
        settings.multipleRoomsPerUser = true
        var room = RoomConfig(roomId: "live")
        room.attributes = ["topic": "x"]
        var list: [(Entry, Int64)] = [
            (.command(.configureApp(app: "app", settings)), t0),
            (.command(.createRoom(app: "app", room)), t0 + 1),
            (.command(.connect(a, app: "app", userId: "alice", deviceId: "phone", anonymous: nil)), t0 + 2),
            (.command(.connect(b, app: "app", userId: "bob", deviceId: "web", anonymous: nil)), t0 + 2),
            (.command(.connect(anon, app: "app", userId: nil, deviceId: "", anonymous: AnonymousProfile(nickname: "guest", avatar: "a"))), t0 + 3),
            (.command(.join(a, roomId: "live", EnterProfile(nickname: "Alice"), .join)), t0 + 4),
            (.command(.join(b, roomId: "live", EnterProfile(nickname: "Bob"), .join)), t0 + 4),
            (.command(.join(anon, roomId: "live", EnterProfile(), .join)), t0 + 5),
            (.command(.join(a, roomId: "other", EnterProfile(), .create(RoomConfig(roomId: "other")))), t0 + 6),
        ]
        for i in 0..<20 {
            list.append((.command(.sendMessage(app: "app", roomId: "live", .session(i % 2 == 0 ? a : b), .text, content: "m\(i)")), t0 + 10 + Int64(i)))
        }
        list += [
            (.command(.mute(app: "app", roomId: "live", ["bob"], .minutes(1), .server, rc: RCNotify(), nim: nil)), t0 + 40),
            (.command(.sendMessage(app: "app", roomId: "live", .session(b), .text, content: "refused")), t0 + 41),
            (.command(.setAttributes(app: "app", roomId: "live", [KeyValue("seat", "alice")], owner: nil, autoDelete: true, .session(a))), t0 + 42),
            (.command(.queueOffer(app: "app", roomId: "live", key: "mic", value: "a", transient: true, .session(a))), t0 + 43),
            (.command(.sendMessage(app: "app", roomId: "live", .server(userId: "", nickname: "", avatar: ""), .custom, content: "{}")), t0 + 44),
            (.tick, t0 + 61_000),
            (.command(.sendMessage(app: "app", roomId: "live", .session(b), .text, content: "unmuted")), t0 + 61_001),
            (.command(.disconnect(a)), t0 + 62_000),
            (.command(.kick(app: "app", roomId: "live", target: "bob", .server, notifyExt: "bye")), t0 + 62_001),
            (.command(.destroyRooms(app: "app", ["other"])), t0 + 62_002),
            (.tick, t0 + 200_000),
        ]
        return list
    }

    /// Applies the entries to a fresh domain as a node would: the command decoded from the log's
    /// bytes, ids from the entry. Returns one line per outcome.
    static func replay(throughCodec: Bool) throws -> [String] {
        let ids = EntryIDs()
        let domain = ChatDomain(makeID: { ids.next() })
        var out: [String] = []
        for (position, (entry, at)) in entries().enumerated() {
            ids.begin(position: Int64(position + 1), at: at)
            let outcome: Outcome
            switch entry {
            case .tick:
                outcome = domain.tick(now: at)
            case .command(var c):
                if throughCodec { c = try JSONDecoder().decode(Command.self, from: try JSONEncoder().encode(c)) }
                outcome = domain.apply(c, now: at)
            }
            out.append("\(position + 1) \(outcome.reply) \(outcome.effects) \(outcome.mutations) \(outcome.webhooks)")
        }
        return out
    }

    @Test func nodesApplyingTheSameEntriesAgree() throws {
        let first = try Self.replay(throughCodec: false)
        let second = try Self.replay(throughCodec: true)
        #expect(first.count == Self.entries().count)
        for (x, y) in zip(first, second) { #expect(x == y) }
        // The entries did things (and were refused where they should be): not a vacuous agreement.
        let messages = first.filter { $0.contains("success(Chat.Reply.message(") }
        #expect(messages.count == 22)
        #expect(first.contains { $0.contains("muted") && $0.contains("failure") })
        // Ids come from the entry: the first message of entry 10 is "<at>-<position 10>-<1>" (base 36, padded).
        let at10 = EntryIDs.pad(UInt64(Self.entries()[9].at), 9)
        #expect(first[9].contains("\"\(at10)-000000000000a-0001\""))
    }

    @Test func entryIDsAreUniqueAndFollowTheEntry() {
        let ids = EntryIDs()
        var seen = Set<String>()
        for p in 1...200 {
            ids.begin(position: Int64(p), at: 1_800_000_000_000 + Int64(p / 10))
            for _ in 0..<5 { #expect(seen.insert(ids.next()).inserted) }
        }
        ids.begin(position: 7, at: 5)
        let a = ids.next()
        ids.begin(position: 7, at: 5)
        #expect(ids.next() == a && a == "000000005-0000000000007-0001")
        // Same time: ids sort in log order, then in order within the entry.
        ids.begin(position: 36, at: 5)
        let later = ids.next(), later2 = ids.next()
        #expect(a < later && later < later2)
    }
}
