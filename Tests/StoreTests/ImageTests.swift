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

    /// Holds what a commit's `image` hands over.
    final class Taken: Sendable {
        let image = Mutex<Result<ReplicaImage, Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        var hand: @Sendable (Result<ReplicaImage, Error>) -> Void { { [self] r in image.withLock { $0 = r } } }
        func get() throws -> ReplicaImage {
            #expect(done.wait(timeout: .now() + 30) == .success)
            return try #require(image.withLock { $0 }).get()
        }
    }

    static func message(_ id: String, _ i: Int) -> Mutation {
        .appendMessage(RoomKey(app: "a", roomId: "r1"), ChatMessage(id: id, roomId: "r1", sender: "u", senderNickname: "", senderAvatar: "", senderExt: "",
                                                                    kind: .text, content: String(repeating: "x", count: 300), time: Int64(i), fromServer: false))
    }

    /// CL-9: a file store's image (a cluster leader's snapshot of its replica) is copied page by
    /// page from a read transaction begun right after its commit: it holds exactly the commits
    /// before it, those queued in the same batch included, and none after, also those written
    /// while it waited to be read; it is a rollback-journal image that loads in memory and as a
    /// replica; its copy on disk is unlinked at once, and a stale one is replaced.
    @Test("CL-9: a replica on disk gives images page by page, exactly at their commit, with no copy left behind")
    func aFileStoresImageIsCopiedPageByPage() throws {
        let directory = temporaryDirectory("roomcast-image")
        let path = directory + "/" + DataDirectory.replicaName
        let copy = path + DataDirectory.replicaSnapshotSuffix
        let a = try Store.replica(path: path, image: nil, logger: logger)
        try a.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        a.start()
        defer { a.stop() }
        commitAndWait(a, [.putRoom(room("r1"))])
        // Queued at once (one batch as far as the writer is concerned), the image in the middle.
        let taken = Taken()
        for i in 0..<2_000 { a.submit(Store.Commit(mutations: [Self.message("early-\(i)", i)], onDurable: {})) }
        a.submit(Store.Commit(mutations: [], onDurable: { taken.done.signal() }, image: taken.hand))
        for i in 0..<500 { a.submit(Store.Commit(mutations: [Self.message("late-\(i)", i)], onDurable: {})) }
        let image = try taken.get()
        // Written after the image was taken and before it is read.
        commitAndWait(a, [.putRoom(room("r2"))])
        #expect(try Self.rows(a).count == 2_502)

        try Data("a stale copy".utf8).write(to: URL(fileURLWithPath: copy))
        try image.copy()
        #expect(!FileManager.default.fileExists(atPath: copy), "the copy is unlinked once it is open")
        var pieces = 0
        var bytes: [UInt8] = []
        let count = try image.read(pieceBytes: 64 * 1024) { piece in
            #expect(piece.count <= 64 * 1024)
            pieces += 1
            bytes.append(contentsOf: piece)
        }
        #expect(count == bytes.count && pieces > 8, "\(count) bytes in \(pieces) pieces")
        #expect(bytes.starts(with: Array("SQLite format 3\0".utf8)) && bytes[18] == 1 && bytes[19] == 1, "a rollback-journal image")
        #expect(try image.bytes() == bytes, "read again, the same copy")
        image.close()
        #expect(throws: (any Error).self) { try image.bytes() }

        let expected = try Self.rows(a).filter { !$0.contains("late-") && !$0.contains("r2") }
        #expect(expected.count == 2_001)
        let inMemory = try Store(inMemory: logger)
        try inMemory.load(image: bytes)
        #expect(try Self.rows(inMemory) == expected)
        let replicaDirectory = temporaryDirectory("roomcast-image")
        let b = try Store.replica(path: replicaDirectory + "/" + DataDirectory.replicaName, image: bytes, logger: logger)
        #expect(try Self.rows(b) == expected)
    }

    /// An in-memory store's image (tests' engines) is its bytes, handed over the same way.
    @Test func anInMemoryStoresImageIsItsBytes() throws {
        let a = try Store(inMemory: logger)
        try a.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        a.start()
        defer { a.stop() }
        commitAndWait(a, [.putRoom(room("r1"))])
        let taken = Taken()
        for i in 0..<100 { a.submit(Store.Commit(mutations: [Self.message("early-\(i)", i)], onDurable: {})) }
        a.submit(Store.Commit(mutations: [], onDurable: { taken.done.signal() }, image: taken.hand))
        for i in 0..<50 { a.submit(Store.Commit(mutations: [Self.message("late-\(i)", i)], onDurable: {})) }
        let image = try taken.get()
        commitAndWait(a, [])
        let c = try Store(inMemory: logger)
        try c.load(image: try image.bytes())
        #expect(try Self.rows(c) == Self.rows(a).filter { !$0.contains("late-") })
        #expect(try Self.rows(c).count == 101)
    }

    /// CL-9: a replica made from an image in a file (a starting node's download) takes the file's
    /// place; an earlier run's copies and downloads are removed; a file that is not a sound
    /// database is refused and leaves neither itself nor a replica behind.
    @Test("CL-9: a replica made from an image file, and what a refused or stale one leaves (nothing)")
    func aReplicaFromAnImageFile() throws {
        let a = try Store(inMemory: logger)
        try a.upsertApp(key: "a", secret: "s", origin: "config", settings: AppSettings(), now: 1)
        a.start()
        commitAndWait(a, [.putRoom(room("r1"))])
        let image = Mutex<[UInt8]>([])
        commitAndWait(a, [], extra: { tx in
            let bytes = try Store.image(tx)
            image.withLock { $0 = bytes }
        })
        a.stop()
        let bytes = image.withLock { $0 }

        let directory = temporaryDirectory("roomcast-image")
        let path = directory + "/" + DataDirectory.replicaName
        let download = path + DataDirectory.replicaDownloadSuffix, copy = path + DataDirectory.replicaSnapshotSuffix
        for file in [download, copy] { try Data("left over".utf8).write(to: URL(fileURLWithPath: file)) }
        let empty = try Store.replica(path: path, imageFile: nil, logger: logger)
        #expect(try Self.rows(empty).isEmpty)
        #expect(!FileManager.default.fileExists(atPath: download) && !FileManager.default.fileExists(atPath: copy))

        try Data(bytes).write(to: URL(fileURLWithPath: download))
        let b = try Store.replica(path: path, imageFile: download, logger: logger)
        #expect(try Self.rows(b) == Self.rows(a))
        #expect(!FileManager.default.fileExists(atPath: download), "moved into place")

        var damaged = bytes
        for i in 100..<min(damaged.count, 8192) { damaged[i] = 0xFF }
        for refused in [Array("not a database".utf8), damaged] {
            try Data(refused).write(to: URL(fileURLWithPath: download))
            #expect(throws: (any Error).self) { try Store.replica(path: path, imageFile: download, logger: logger) }
            #expect(!FileManager.default.fileExists(atPath: download) && !FileManager.default.fileExists(atPath: path))
        }
    }

    @Test func bytesThatAreNotADatabaseAreRefused() throws {
        let b = try Store(inMemory: logger)
        #expect(throws: (any Error).self) { try b.load(image: Array("not a database at all, not even close".utf8)) }
    }
}
