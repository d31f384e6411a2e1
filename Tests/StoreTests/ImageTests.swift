import Chat
import Dispatch
import Foundation
import GRDB
import Logging
import Store
import Synchronization
import Testing
import TestKit

/// Cluster snapshots (BX-5, CLUSTER.md): a replica's image, taken inside a commit, holds exactly
/// what the commits before it wrote, and a new in-memory replica loaded from it reads the same.
@Suite("Store: replica images")
struct ImageTests {
    static func rows(_ store: Store) throws -> [String] {
        try store.database.read { db in
            try Row.fetchAll(db, sql: "SELECT app, roomId, id, content FROM message ORDER BY app, roomId, id").map { "\($0)" }
                + Row.fetchAll(db, sql: "SELECT app, roomId FROM room ORDER BY app, roomId").map { "\($0)" }
        }
    }

    @Test func anImageHoldsWhatTheCommitsBeforeItWrote() throws {
        let a = try Store(inMemory: logger)
        a.start()
        defer { a.stop() }
        try a.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        commitAndWait(a, [.putRoom(room("r1"))])
        for i in 0..<200 {
            let m = ChatMessage(id: "m\(i)", roomId: "r1", sender: "u", senderNickname: "", senderAvatar: "", senderExt: "", kind: .text,
                                content: String(repeating: "é", count: i), time: Int64(i), fromServer: false)
            a.submit(Store.Commit(mutations: [.appendMessage(RoomKey(app: "a", roomId: "r1"), m)], onDurable: {}))
        }
        // Taken in order after the 200 messages, before the commit that follows it.
        let image = Mutex<[UInt8]>([])
        a.submit(Store.Commit(mutations: [], extra: { tx in
            let bytes = try Store.image(tx)
            image.withLock { $0 = bytes }
        }, onDurable: {}))
        commitAndWait(a, [.putRoom(room("r2"))])
        let bytes = image.withLock { $0 }
        #expect(bytes.count > 4096)

        // This test makes a commit fail on purpose (below): the store's error line says so.
        let b = try Store(inMemory: Logger(label: "roomcast.store-tests (expected: this test makes a commit fail on purpose)"))
        try b.load(image: bytes)
        b.start()
        defer { b.stop() }
        let expected = try Self.rows(a).filter { !$0.contains("r2") }
        #expect(try Self.rows(b) == expected)
        #expect(expected.count == 201)
        #expect(try b.apps().map(\.key) == ["a"])
        // The loaded replica takes commits (its prepared statements are made anew).
        commitAndWait(b, [.appendMessage(RoomKey(app: "a", roomId: "r1"), ChatMessage(id: "z", roomId: "r1", sender: "u", senderNickname: "",
                                                                                        senderAvatar: "", senderExt: "", kind: .text, content: "z",
                                                                                        time: 999, fromServer: false))])
        #expect(try Self.rows(b).count == 202)
        // Foreign keys still hold after loading.
        let refused = Mutex(false)
        let done = DispatchSemaphore(value: 0)
        b.submit(Store.Commit(mutations: [.appendMessage(RoomKey(app: "a", roomId: "nope"), ChatMessage(id: "y", roomId: "nope", sender: "u",
                                                                                                         senderNickname: "", senderAvatar: "", senderExt: "",
                                                                                                         kind: .text, content: "", time: 1, fromServer: false))],
                              onDurable: { done.signal() }, onFailed: { refused.withLock { $0 = true }; done.signal() }))
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(refused.withLock { $0 })
    }

    /// A replica loaded from an image gives images of its own that hold every commit before them,
    /// also those in the image commit's own batch (still in the open transaction): a node that
    /// started from a snapshot may lead and publish the next one.
    @Test func aLoadedReplicasImagesHoldTheirWholeBatch() throws {
        let a = try Store(inMemory: logger)
        try a.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        a.start()
        commitAndWait(a, [.putRoom(room("r1"))])
        let first = Mutex<[UInt8]>([])
        commitAndWait(a, [], extra: { tx in
            let bytes = try Store.image(tx)
            first.withLock { $0 = bytes }
        })
        a.stop()

        let b = try Store(inMemory: logger)
        try b.load(image: first.withLock { $0 })
        b.start()
        defer { b.stop() }
        // Many commits queued at once (one batch, one transaction), the image last among them.
        let second = Mutex<[UInt8]>([])
        let done = DispatchSemaphore(value: 0)
        for i in 0..<300 {
            let m = ChatMessage(id: "m\(i)", roomId: "r1", sender: "u", senderNickname: "", senderAvatar: "", senderExt: "", kind: .text,
                                content: String(repeating: "x", count: 200), time: Int64(i), fromServer: false)
            b.submit(Store.Commit(mutations: [.appendMessage(RoomKey(app: "a", roomId: "r1"), m)], onDurable: {}))
        }
        b.submit(Store.Commit(mutations: [], extra: { tx in
            let bytes = try Store.image(tx)
            second.withLock { $0 = bytes }
        }, onDurable: { done.signal() }))
        #expect(done.wait(timeout: .now() + 30) == .success)
        let c = try Store(inMemory: logger)
        try c.load(image: second.withLock { $0 })
        #expect(try Self.rows(c) == Self.rows(b))
        #expect(try Self.rows(c).count == 301)
    }

    /// CL-9: a cluster node's replica lives in its data directory. Made from an image, it reads
    /// the same as the image's store and takes commits; what an earlier run left at its path is
    /// gone; its own images (a WAL-mode file) load where SQLite deserializes them in memory.
    @Test("CL-9: a replica on disk, made from an image, replaces what was there and gives images of its own")
    func aReplicaOnDisk() throws {
        let a = try Store(inMemory: logger)
        try a.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        a.start()
        commitAndWait(a, [.putRoom(room("r1"))])
        for i in 0..<100 {
            let m = ChatMessage(id: "m\(i)", roomId: "r1", sender: "u", senderNickname: "", senderAvatar: "", senderExt: "", kind: .text,
                                content: String(repeating: "x", count: 100), time: Int64(i), fromServer: false)
            a.submit(Store.Commit(mutations: [.appendMessage(RoomKey(app: "a", roomId: "r1"), m)], onDurable: {}))
        }
        let first = Mutex<[UInt8]>([])
        commitAndWait(a, [], extra: { tx in
            let bytes = try Store.image(tx)
            first.withLock { $0 = bytes }
        })
        a.stop()

        let directory = temporaryDirectory("roomcast-replica")
        let path = directory + "/" + DataDirectory.replicaName
        // An earlier run's replica and its WAL: not what this run is made of.
        try Data("left over".utf8).write(to: URL(fileURLWithPath: path + "-wal"))
        let stale = try Store.replica(path: path, image: nil, logger: logger)
        try stale.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        stale.start()
        commitAndWait(stale, [.putRoom(room("stale"))])
        stale.stop()

        let b = try Store.replica(path: path, image: first.withLock { $0 }, logger: logger)
        b.start()
        #expect(try Self.rows(b) == Self.rows(a))
        #expect(try Self.rows(b).count == 101, "the image's rows, none of the earlier run's")
        #expect(try b.database.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") } == "wal", "a file store, in WAL mode")
        commitAndWait(b, [.putRoom(room("r2"))])
        let second = Mutex<[UInt8]>([])
        commitAndWait(b, [], extra: { tx in
            let bytes = try Store.image(tx)
            second.withLock { $0 = bytes }
        })
        b.stop()
        let bytes = second.withLock { $0 }
        #expect(bytes.count > 20 && bytes[18] == 1 && bytes[19] == 1, "an image says rollback journal, whatever the replica's mode")
        let c = try Store(inMemory: logger)
        try c.load(image: bytes)
        #expect(try Self.rows(c) == Self.rows(b))
        #expect(try Self.rows(c).contains { $0.contains("r2") })

        // Bytes that are not a database leave no replica behind that could be mistaken for one.
        #expect(throws: (any Error).self) { try Store.replica(path: path, image: Array("not a database".utf8), logger: logger) }
        #expect(!FileManager.default.fileExists(atPath: path))
        var damaged = bytes
        for i in 100..<min(damaged.count, 8192) { damaged[i] = 0xFF }
        #expect(throws: (any Error).self) { try Store.replica(path: path, image: damaged, logger: logger) }
    }

    @Test func bytesThatAreNotADatabaseAreRefused() throws {
        let b = try Store(inMemory: logger)
        #expect(throws: (any Error).self) { try b.load(image: Array("not a database at all, not even close".utf8)) }
    }
}
