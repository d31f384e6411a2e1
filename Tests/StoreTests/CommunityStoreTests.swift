import Chat
import Foundation
import GRDB
import Store
import Testing

/// MO-3, MO-5 on disk: community messages (with their edits and metadata) and channel controls
/// are written with the commands that made them and a restart restores exactly the same state;
/// the history bound and a deleted channel or group leave no rows behind.
@Suite struct CommunityStoreTests {
    let now: Int64 = 1_800_000_000_000

    @Test("MO-3, MO-5: messages, edits, metadata and controls survive a restart; evicted and deleted ones leave the store")
    func restoredExactly() throws {
        let store = try Store(inMemory: logger)
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        let counter = Counter()
        let domain = ChatDomain(makeID: { counter.next() })
        try store.restore(into: domain, now: now)
        var t = now
        func run(_ c: Command) -> Outcome {
            t += 1
            let out = domain.apply(c, now: t)
            commitAndWait(store, out.mutations)
            return out
        }
        #expect(run(.createGroup(app: "a", groupId: "g", name: "G", creator: "alice")).mutations.isEmpty == false)
        _ = run(.joinGroup(app: "a", groupId: "g", ["bob"]))
        _ = run(.createChannel(app: "a", groupId: "g", channelId: "c", .public))
        var ids: [String] = []
        for i in 0..<(Limits.maxCommunityHistoryPerChannel + 2) {
            let out = run(.sendCommunityMessage(app: "a", groupIds: ["g"], channelId: "c",
                                                CommunityDraft(fromUserId: "bob", type: "T", content: "m\(i)", metadata: i == 5 ? ["k": "v"] : nil), .server))
            guard case .success(.communityMessages(let list)) = out.reply, let m = list.first else { Issue.record("\(out.reply)"); return }
            ids.append(m.messageId)
        }
        let last = ids[ids.count - 1]
        _ = run(.community(app: "a", groupId: "g", .edit(channelId: "c", messageId: last, fromUserId: "bob", content: "edited"), .server))
        _ = run(.sendCommunityMessage(app: "a", groupIds: ["g"], channelId: "RCDefault",
                                      CommunityDraft(fromUserId: "bob", type: "T", content: "meta", metadata: [:]), .server))
        _ = run(.community(app: "a", groupId: "g", .editList(.muted, channelId: "", add: true, users: ["bob"]), .server))
        _ = run(.community(app: "a", groupId: "g", .editList(.allowedSenders, channelId: "c", add: true, users: ["alice"]), .server))
        _ = run(.community(app: "a", groupId: "g", .setFrozen(channelId: "c", true), .server))
        let rows = try store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM communityMessage WHERE channelId = 'c'") }
        #expect(rows == Limits.maxCommunityHistoryPerChannel, "the two oldest left the store")

        let back = try restored(store, now: t)
        let queries: [Query] = [
            .communityHistory(app: "a", groupId: "g", CommunityHistoryQuery(channelId: nil, viewer: nil, oldest: now, newest: t, limit: 100, newestFirst: true)),
            .communityHistory(app: "a", groupId: "g", CommunityHistoryQuery(channelId: "c", viewer: "bob", oldest: now, newest: t, limit: 100, newestFirst: false)),
            .communityRules(app: "a", groupId: "g", channelId: ""), .communityRules(app: "a", groupId: "g", channelId: "c"),
            .communityMessage(app: "a", groupId: "g", channelId: "c", messageId: last),
        ]
        for q in queries { #expect(back.query(q, now: t) == domain.query(q, now: t), "a query differs after the restart") }
        #expect(back.image() == domain.image(), "the restored domain is in the same state")
        if back.image() != domain.image() { return }
        guard case .success(.communityMessage(let m)) = back.query(.communityMessage(app: "a", groupId: "g", channelId: "c", messageId: last), now: t) else {
            Issue.record("no message")
            return
        }
        #expect(m.content == "edited" && m.version == 1)

        // A deleted channel, then a dismissed group, leave no rows.
        _ = run(.deleteChannel(app: "a", groupId: "g", channelId: "c"))
        var left = try store.database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM communityMessage WHERE channelId = 'c'") }
        #expect(left == 0)
        _ = run(.dismissGroup(app: "a", groupId: "g"))
        left = try store.database.read { db in
            try Int.fetchOne(db, sql: "SELECT (SELECT count(*) FROM communityMessage) + (SELECT count(*) FROM communityRules)")
        }
        #expect(left == 0)
    }
}

/// Distinct ids (the store keys messages by id).
final class Counter: @unchecked Sendable {
    // Safety: used by one test's domain on one thread.
    private var n = 0
    func next() -> String {
        n += 1
        return "m\(n)"
    }
}
