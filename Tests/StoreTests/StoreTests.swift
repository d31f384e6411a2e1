import Chat
import Dispatch
import Foundation
import GRDB
import Logging
import Store
import Synchronization
import Testing

/// Values the store's threads hand back to a test.
final class Recorder: Sendable {
    let values = Mutex<[String]>([])
    func add(_ v: String) { values.withLock { $0.append(v) } }
    var all: [String] { values.withLock { $0 } }
}

let logger = Logger(label: "roomcast.store-tests")

/// Submits a commit and waits until it is durable (the writer thread calls `onDurable`).
func commitAndWait(_ store: Store, _ mutations: [Mutation], extra: (@Sendable (Store.Transaction) throws -> Void)? = nil) {
    let done = DispatchSemaphore(value: 0)
    store.submit(Store.Commit(mutations: mutations, extra: extra, onDurable: { done.signal() }))
    #expect(done.wait(timeout: .now() + 30) == .success, "the commit never became durable")
}

/// A domain restored from `store` (as start-up does).
func restored(_ store: Store, now: Int64) throws -> ChatDomain {
    let domain = ChatDomain(makeID: { "unused" })
    try store.restore(into: domain, now: now)
    return domain
}

func room(_ id: String, app: String = "a") -> RoomRecord {
    RoomRecord(key: RoomKey(app: app, roomId: id), name: id, announcement: "", ext: "", broadcastUrl: "", creator: "",
               queueModificationLevel: .anyone, destroyPolicy: .default, keepAlive: true, multiDevice: .multiple, muted: false,
               open: true, enterExitNotifications: true, queueLimit: 100, createdAt: 1, epoch: "e1", lastActivity: 1)
}

@Suite("Store: commits, the in-memory store, restore")
struct StoreTests {
    let now: Int64 = 1_800_000_000_000

    // A commit's mutations and its `extra` run in one transaction: `extra` sees the mutations
    // of its own commit before anything is committed, and both are there once it is durable.
    @Test func mutationsAndExtraShareOneTransaction() throws {
        let store = try Store(inMemory: logger)
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        var settings = AppSettings()
        settings.maxRooms = 7
        let seen = Recorder()
        commitAndWait(store, [.putApp("a", settings), .putRoom(room("r"))], extra: { tx in
            let db = tx.database
            seen.add("inside transaction: \(db.isInsideTransaction)")
            seen.add("rooms: \(try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM room") ?? -1)")
            try db.execute(sql: "UPDATE room SET name = 'by extra' WHERE app = 'a' AND roomId = 'r'")
        })
        #expect(seen.all == ["inside transaction: true", "rooms: 1"])
        let (name, json) = try store.database.read { db in
            (try String.fetchOne(db, sql: "SELECT name FROM room WHERE roomId = 'r'"), try AppRow.fetchOne(db, key: "a")?.settings)
        }
        #expect(name == "by extra")
        #expect(try JSONDecoder().decode(AppSettings.self, from: Data((json ?? "").utf8)) == settings)
        #expect(store.batchesCommitted.load(ordering: .relaxed) == 1)
    }

    // The same, seen from another connection of a file store (WAL): while `extra` runs, a reader
    // sees neither the mutations nor the extra write; after the commit it sees both.
    @Test func readersSeeACommitWholeOrNotAtAll() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("roomcast-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = try Store(path: dir.appendingPathComponent("t.sqlite").path, durability: .normal, logger: logger)
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        let count = "SELECT (SELECT COUNT(*) FROM room) || '/' || (SELECT COUNT(*) FROM globalMute)"
        let seen = Recorder()
        commitAndWait(store, [.putRoom(room("r"))], extra: { tx in
            try tx.database.execute(sql: "INSERT INTO globalMute (app, userId, until) VALUES ('a', 'u', 1)")
            // Another connection, on another thread, while this transaction is open.
            let read = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                seen.add("during: " + ((try? store.database.read { db in try String.fetchOne(db, sql: count) }) ?? "error"))
                read.signal()
            }
            read.wait()
        })
        let after = try store.database.read { db in try String.fetchOne(db, sql: count) }
        #expect(seen.all == ["during: 0/0"])
        #expect(after == "1/1")
    }

    // The writer thread of the in-memory store keeps submission order, for the writes and for
    // the callbacks, and groups commits into batches.
    @Test func commitsRunInSubmissionOrder() throws {
        let store = try Store(inMemory: logger)
        store.start()
        let writes = Recorder(), durable = Recorder()
        for i in 0..<50 {
            store.submit(Store.Commit(mutations: [], extra: { _ in writes.add("\(i)") }, onDurable: { durable.add("\(i)") }))
        }
        store.stop()
        #expect(writes.all == (0..<50).map(String.init))
        #expect(durable.all == (0..<50).map(String.init))
        #expect(store.commitsCommitted.load(ordering: .relaxed) == 50)
        #expect((1...50).contains(store.batchesCommitted.load(ordering: .relaxed)))
    }

    // Two in-memory stores are separate databases.
    @Test func inMemoryStoresAreSeparate() throws {
        let one = try Store(inMemory: logger), two = try Store(inMemory: logger)
        try one.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        #expect(try one.apps().map(\.key) == ["a"])
        #expect(try two.apps().isEmpty)
    }

    // Restoring from the in-memory store gives back what the domain wrote: settings, rooms and
    // what they hold, moderation, attributes, the queue, history, ultra groups, conversation status.
    @Test func restoreGivesBackWhatWasWritten() throws {
        let store = try Store(inMemory: logger)
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        var n = 0
        let domain = ChatDomain(makeID: {
            n += 1
            return "id\(n)"
        })
        try store.restore(into: domain, now: now)
        var config = RoomConfig(roomId: "r")
        config.name = "Room"
        config.attributes = ["k1": "v1"]
        let commands: [Command] = [
            .updateAppSettings(app: "a", AppSettingsPatch(maxRooms: 5, historyLimitPerRoom: 50, allowedOrigins: ["https://a.example"])),
            .createRoom(app: "a", config),
            .block(app: "a", roomId: "r", ["alice"], minutes: 10, .server, rc: nil, nim: nil),
            .mute(app: "a", roomId: "r", ["bob"], .permanent, .server, rc: nil, nim: nil),
            .mute(app: "a", roomId: "r", ["erin"], .minutes(5), .server, rc: nil, nim: nil),
            .addToAllowlist(app: "a", roomId: "r", ["carol"], rc: nil),
            .globalMute(app: "a", ["dave"], minutes: 10, rc: nil),
            .setAttributes(app: "a", roomId: "r", [KeyValue(key: "k2", value: "v2")], owner: nil, autoDelete: false, .server),
            .queueOffer(app: "a", roomId: "r", key: "q1", value: "x", transient: false, .server),
            .queueOffer(app: "a", roomId: "r", key: "q0", value: "y", transient: false, .server),
            .sendMessage(app: "a", roomId: "r", .server(userId: "", nickname: "", avatar: ""), .text, content: "hello"),
            .createGroup(app: "a", groupId: "g", name: "G", creator: nil),
            .joinGroup(app: "a", groupId: "g", ["alice", "bob"]),
            .createChannel(app: "a", groupId: "g", channelId: "c", .private),
            .addPrivateMembers(app: "a", groupId: "g", channelId: "c", ["bob"]),
            // MO-4: user groups, members and bindings; a deleted one, an unbound one and a
            // deleted channel leave no rows behind.
            .createChannel(app: "a", groupId: "g", channelId: "gone", .private),
            .createUserGroups(app: "a", groupId: "g", ["ug2", "ug1", "ug3", "ug4"]),
            .addUserGroupMembers(app: "a", groupId: "g", userGroupId: "ug1", ["bob", "alice"]),
            .addUserGroupMembers(app: "a", groupId: "g", userGroupId: "ug3", ["alice"]),
            .bindUserGroups(app: "a", groupId: "g", channelId: "c", ["ug1", "ug2", "ug3"]),
            .bindUserGroups(app: "a", groupId: "g", channelId: "gone", ["ug1"]),
            .deleteUserGroups(app: "a", groupId: "g", ["ug3"]),
            .unbindUserGroups(app: "a", groupId: "g", channelId: "c", ["ug2"]),
            .deleteChannel(app: "a", groupId: "g", channelId: "gone"),
            .setConversationStatus(app: "a", userId: "alice", ConversationKey(type: .group, targetId: "g1"), pinned: true, level: nil, .server),
            .setConversationTypeLevel(app: "a", userId: "alice", .private, .blocked),
        ]
        for c in commands {
            let out = domain.apply(c, now: now)
            if case .failure(let e) = out.reply { Issue.record("\(c) failed: \(e)") }
            store.submit(Store.Commit(mutations: out.mutations, onDurable: {}))
        }
        commitAndWait(store, [])

        let back = try restored(store, now: now)
        let queries: [Query] = [
            .appSettings(app: "a"), .room(app: "a", roomId: "r"),
            .members(app: "a", roomId: "r", .regular, .ascending, limit: 500, after: nil),
            .blocks(app: "a", roomId: "r"), .mutes(app: "a", roomId: "r"), .allowlist(app: "a", roomId: "r"), .globalMutes(app: "a"),
            .attributes(app: "a", roomId: "r", keys: []), .queue(app: "a", roomId: "r"),
            .history(app: "a", roomId: "r", start: 0, limit: 100, .ascending, kinds: []),
            .group(app: "a", groupId: "g"), .groupMembers(app: "a", groupId: "g", page: 1, pageSize: 100),
            .channels(app: "a", groupId: "g", page: 1, pageSize: 100),
            .privateMembers(app: "a", groupId: "g", channelId: "c", page: 1, pageSize: 100),
            .userGroups(app: "a", groupId: "g", page: 1, pageSize: 100),
            .channelUserGroups(app: "a", groupId: "g", channelId: "c", page: 1, pageSize: 100),
            .userChannels(app: "a", groupId: "g", userId: "alice", page: 1, pageSize: 100),
            .conversationStatuses(app: "a", userId: "alice", since: 0, limit: 100),
            .conversationTypeLevel(app: "a", userId: "alice", .private),
        ]
        for q in queries {
            let original = domain.query(q, now: now), copy = back.query(q, now: now)
            #expect(copy == original, "\(q)")
            if case .failure(let e) = original { Issue.record("\(q) failed: \(e)") }
        }
        var expected = AppSettings()
        expected.maxRooms = 5
        expected.historyLimitPerRoom = 50
        expected.allowedOrigins = ["https://a.example"]
        #expect(back.appSettings("a") == expected)
        guard case .success(.messages(let history)) = back.query(.history(app: "a", roomId: "r", start: 0, limit: 100, .ascending, kinds: []), now: now)
        else { Issue.record("no history"); return }
        #expect(history.map(\.content) == ["hello"])
    }

    // A patch's allowlist is written to the settings JSON and, in the same statement, to the
    // column (one origin per line); restore and `apps()` both see it, and clearing empties both.
    @Test func allowedOriginsRoundTrip() throws {
        let store = try Store(inMemory: logger)
        try store.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: now)
        store.start()
        defer { store.stop() }
        let domain = try restored(store, now: now)
        func patch(_ p: AppSettingsPatch) {
            let out = domain.apply(.updateAppSettings(app: "a", p), now: now)
            #expect(out.mutations.count == 1)
            commitAndWait(store, out.mutations)
        }

        patch(AppSettingsPatch(allowedOrigins: ["https://a.example", "*.b.example"]))
        let row = try #require(try store.apps().first)
        #expect(row.allowedOrigins == "https://a.example\n*.b.example")
        #expect(row.allowedOriginList == ["https://a.example", "*.b.example"])
        #expect(try JSONDecoder().decode(AppSettings.self, from: Data(row.settings.utf8)).allowedOrigins == ["https://a.example", "*.b.example"])
        #expect(try restored(store, now: now).appSettings("a") == domain.appSettings("a"))

        // Another field later keeps the allowlist.
        patch(AppSettingsPatch(maxRoomsPerUser: 2))
        #expect(try restored(store, now: now).appSettings("a")?.allowedOrigins == ["https://a.example", "*.b.example"])
        #expect(try store.apps().first?.allowedOrigins == "https://a.example\n*.b.example")

        patch(AppSettingsPatch(allowedOrigins: []))
        #expect(try store.apps().first?.allowedOrigins == "")
        #expect(try store.apps().first?.allowedOriginList == nil)
        let back = try restored(store, now: now)
        #expect(back.appSettings("a")?.allowedOrigins == nil)
        #expect(back.appSettings("a")?.maxRoomsPerUser == 2)

        // upsertApp of an existing app (a restart with --app) keeps settings and allowlist.
        patch(AppSettingsPatch(allowedOrigins: ["https://c.example"]))
        try store.upsertApp(key: "a", secret: "new", origin: "config", settings: AppSettings(), now: now)
        #expect(try store.apps().first?.secret == "new")
        #expect(try store.apps().first?.allowedOrigins == "https://c.example")
        #expect(try restored(store, now: now).appSettings("a")?.allowedOrigins == ["https://c.example"])
    }

    // A new app is inserted with its allowlist in both places.
    @Test func newAppKeepsItsAllowlist() throws {
        let store = try Store(inMemory: logger)
        var settings = AppSettings()
        settings.allowedOrigins = ["https://a.example"]
        try store.upsertApp(key: "a", secret: "s", origin: "api", settings: settings, now: now)
        #expect(try store.apps().first?.allowedOriginList == ["https://a.example"])
        #expect(try restored(store, now: now).appSettings("a") == settings)
    }

    // Rows written by the previous version: the allowlist was only in the column (set by the
    // removed `setAllowedOrigins`), never in the settings JSON. Restore takes the column; a later
    // change of any field writes it into the JSON too. When the JSON has one, the JSON wins.
    @Test func oldRowsTakeTheAllowlistFromTheColumn() throws {
        let store = try Store(inMemory: logger)
        try store.database.write { db in
            try AppRow(key: "old", secret: "s", settings: #"{"maxRooms":3,"memberChangeEvents":false}"#, createdAt: 1, origin: "config",
                       allowedOrigins: "https://a.example\nhttps://b.example").insert(db)
            try AppRow(key: "open", secret: "s", settings: #"{"maxRooms":4}"#, createdAt: 2, origin: "config").insert(db)
            try AppRow(key: "new", secret: "s", settings: #"{"allowedOrigins":["https://json.example"]}"#, createdAt: 3, origin: "api",
                       allowedOrigins: "https://column.example").insert(db)
        }
        store.start()
        defer { store.stop() }
        let domain = try restored(store, now: now)
        var old = AppSettings()
        old.maxRooms = 3
        old.memberChangeEvents = false
        old.allowedOrigins = ["https://a.example", "https://b.example"]
        #expect(domain.appSettings("old") == old)
        #expect(domain.appSettings("open")?.allowedOrigins == nil)
        #expect(domain.appSettings("open")?.maxRooms == 4)
        #expect(domain.appSettings("new")?.allowedOrigins == ["https://json.example"])

        let out = domain.apply(.updateAppSettings(app: "old", AppSettingsPatch(maxRooms: 9)), now: now)
        commitAndWait(store, out.mutations)
        let json = try #require(try store.apps().first { $0.key == "old" }?.settings)
        #expect(try JSONDecoder().decode(AppSettings.self, from: Data(json.utf8)).allowedOrigins == ["https://a.example", "https://b.example"])
        #expect(try restored(store, now: now).appSettings("old")?.maxRooms == 9)
    }
}
