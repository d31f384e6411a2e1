@testable import Chat
import Testing

/// SPEC §13 and the audit's memory findings: what one tenant's users can make the server hold is
/// bounded — rooms per app, rooms a user's clients may create per minute, and each room's
/// in-memory history window (count and bytes); older history is answered from disk.
@Suite("Quotas and the in-memory history bound")
struct QuotaTests {
    func enter(_ id: String) -> JoinMode { .enter(RoomConfig(roomId: id)) }

    @Test func aUsersClientsCreateAtMostTheirQuotaOfRoomsPerMinute() {
        let h = Harness { $0.multipleRoomsPerUser = true; $0.maxRoomsPerUser = 1000 }
        let alice = h.connect("alice")
        #expect(AppSettings().roomCreatesPerUserPerMinute == Limits.defaultRoomCreatesPerUserPerMinute)
        for i in 0..<Limits.defaultRoomCreatesPerUserPerMinute { #expect(h.join(alice, "r\(i)", mode: enter("r\(i)")).succeeded) }
        let refused = h.join(alice, "one-more", mode: enter("one-more"))
        #expect(refused.error?.code == .limitExceeded && refused.error?.field == "roomId")
        #expect(h.query(.room(app: h.app, roomId: "one-more")) == nil, "refused creations change nothing")
        // Entering rooms that exist is not creating; the app server's creations do not count.
        #expect(h.join(alice, "r0", mode: enter("r0")).succeeded)
        #expect(h.createRoom("by-server").succeeded)
        // Another user has a quota of their own; a minute later alice has hers again.
        let bob = h.connect("bob")
        #expect(h.join(bob, "b0", mode: enter("b0")).succeeded)
        h.now += 60_000
        #expect(h.join(alice, "one-more", mode: enter("one-more")).succeeded)
    }

    @Test func anAppHoldsAtMostItsRoomLimitByDefault() {
        #expect(AppSettings().maxRooms == Limits.defaultMaxRooms && Limits.defaultMaxRooms > 0)
        let h = Harness { $0.maxRooms = 3 }
        for i in 0..<3 { #expect(h.createRoom("r\(i)").succeeded) }
        #expect(h.createRoom("r3").error?.code == .roomLimitReached)
    }

    @Test func theInMemoryHistoryWindowIsBoundedByCountAndBytes() {
        var window = RecentHistory(historyLimit: 1000)
        func message(_ i: Int, bytes: Int) -> ChatMessage {
            ChatMessage(id: "m\(i)", roomId: "r", sender: "u", senderNickname: "", senderAvatar: "", senderExt: "", kind: .text,
                        content: String(repeating: "x", count: bytes), time: Int64(i), fromServer: false)
        }
        for i in 0..<(Limits.historyMemoryMessagesPerRoom - 1) { window.append(message(i, bytes: 10)) }
        #expect(!window.truncated && window.count == Limits.historyMemoryMessagesPerRoom - 1)
        for i in 0..<10 { window.append(message(100 + i, bytes: 10)) }
        #expect(window.truncated && window.count == Limits.historyMemoryMessagesPerRoom)
        // Large messages: the byte bound wins, the newest message is always kept.
        for i in 0..<20 { window.append(message(200 + i, bytes: 16 * 1024)) }
        #expect(window.bytes <= Limits.historyMemoryBytesPerRoom)
        #expect(window[window.count - 1].id == "m219")
        window.append(message(300, bytes: Limits.historyMemoryBytesPerRoom * 2))
        #expect(window.count == 1 && window[0].id == "m300")
    }

    // NIM-8: a query memory cannot answer whole says so (the engine then reads the store).
    @Test func historyBeyondTheWindowIsMarkedIncomplete() throws {
        let h = Harness {  // many sends at one instant
            $0.sendsPerUserPerSecond = 1_000_000
            $0.roomMessagesPerSecond = 100_000
        }
        let alice = h.connect("alice")
        #expect(h.createRoom("r").succeeded)
        #expect(h.join(alice, "r").succeeded)
        for i in 0..<(Limits.historyMemoryMessagesPerRoom + 5) {
            h.now += 1
            #expect(h.run(.sendMessage(app: h.app, roomId: "r", .session(alice), .text, content: "m\(i)")).succeeded)
        }
        let newest = try h.domain.historyInMemory(app: h.app, roomId: "r", start: 0, limit: 20, .descending, kinds: [], now: h.now)
        #expect(newest.complete && newest.messages.first?.content == "m\(Limits.historyMemoryMessagesPerRoom + 4)")
        let all = try h.domain.historyInMemory(app: h.app, roomId: "r", start: 0, limit: 100, .descending, kinds: [], now: h.now)
        #expect(!all.complete && all.messages.count == Limits.historyMemoryMessagesPerRoom)
        let oldestFirst = try h.domain.historyInMemory(app: h.app, roomId: "r", start: 0, limit: 10, .ascending, kinds: [], now: h.now)
        #expect(!oldestFirst.complete)
    }
}

extension QuotaTests {
    // The create quota's memory is bounded: users who stopped creating are forgotten.
    @Test func theCreateQuotaForgetsUsersAfterAMinute() {
        let h = Harness { $0.multipleRoomsPerUser = true }
        for i in 0..<50 {
            let s = h.connect("u\(i)")
            #expect(h.join(s, "r\(i)", mode: enter("r\(i)")).succeeded)
        }
        #expect(h.domain.apps[h.app]?.recentCreates.count == 50)
        h.now += 61_000
        _ = h.domain.tick(now: h.now)
        #expect(h.domain.apps[h.app]?.recentCreates.isEmpty == true)
    }
}
