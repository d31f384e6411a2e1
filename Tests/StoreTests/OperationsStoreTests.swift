import Chat
import Crypto
import Foundation
import GRDB
import Store
import Testing
import TestKit

/// A fresh directory in the test process's scratch folder (TestKit), removed by `defer` in each
/// test (and with the folder when the process exits).
func scratchDirectory(_ name: String) throws -> String {
    temporaryDirectory("roomcast-\(name)")
}

func sha256(_ path: String) throws -> String {
    SHA256.hash(data: try Data(contentsOf: URL(fileURLWithPath: path))).map { String(format: "%02x", $0) }.joined()
}

/// A data directory with a store holding app `a` with one room and `messages` messages; the
/// store is stopped and released (its WAL checkpointed into the file).
func makeDataDirectory(_ name: String, messages: Int = 3) throws -> String {
    let dir = try scratchDirectory(name)
    do {
        let store = try Store(path: DataDirectory.databasePath(dir), durability: .normal, logger: logger)
        try store.upsertApp(key: "a", secret: "secret-of-a-123", origin: "config", settings: AppSettings(), now: now)
        try store.upsertApp(key: "b", secret: "secret-of-b-123", origin: "config", settings: AppSettings(), now: now + 1)
        store.start()
        commitAndWait(store, [.putRoom(room("r")), .putRoom(room("s", app: "b"))]
            + (0..<messages).map { .appendMessage(RoomKey(app: "a", roomId: "r"), message("m\($0)", at: now + Int64($0))) })
        store.stop()
    }
    return dir
}

let now: Int64 = 1_800_000_000_000

func message(_ id: String, at time: Int64) -> ChatMessage {
    ChatMessage(id: id, roomId: "r", sender: "u", senderNickname: "", senderAvatar: "", senderExt: "", kind: .text, content: "content of \(id)", time: time,
                fromServer: true)
}

func count(_ db: any DatabaseReader, _ sql: String) throws -> Int {
    try db.read { try Int.fetchOne($0, sql: sql) ?? -1 }
}

@Suite("Operations on the store (OP-1, OP-2, OP-3)")
struct OperationsStoreTests {
    // OP-3: a directory written by a newer roomcast (a migration this build does not know) is
    // refused at open with a message that says so, and its database is left as it was.
    @Test func aNewerDirectoryIsRefusedAndLeftUntouched() throws {
        let dir = try makeDataDirectory("newer")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = DataDirectory.databasePath(dir)
        do {
            let q = try DatabaseQueue(path: path)
            try q.write { try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v99-from-the-future')") }
            try q.close()
        }
        let before = try sha256(path)
        #expect(throws: SchemaError.self) { _ = try Store(path: path, durability: .normal, logger: logger) }
        do {
            _ = try Store(path: path, durability: .normal, logger: logger)
        } catch let e as SchemaError {
            #expect(e.description.contains("newer roomcast") && e.description.contains("schema version 99")
                    && e.description.contains("knows schema versions up to \(SchemaVersion.current)") && e.description.contains("Nothing was changed"))
        }
        #expect(throws: SchemaError.self) { _ = try StoreFile(directory: dir, create: false, migrate: true) }
        #expect(try sha256(path) == before)
        let wal = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? NSNumber)?.intValue ?? 0
        #expect(wal == 0, "nothing was written to the WAL either")
        // A backup of it is refused by this build's check too.
        #expect(throws: StoreBackup.Failure.newer(path: path, version: 99)) { _ = try StoreBackup.check(path) }
    }

    // OP-3: a migration this build does not know under a lower number (another branch's or a
    // development build's) is refused too, and the message does not call it newer.
    @Test func anUnknownMigrationOfAnotherBuildIsRefused() throws {
        let dir = try makeDataDirectory("other-build")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = DataDirectory.databasePath(dir)
        do {
            let q = try DatabaseQueue(path: path)
            try q.write { try $0.execute(sql: "INSERT INTO grdb_migrations (identifier) VALUES ('v2-from-another-branch')") }
            try q.close()
        }
        let before = try sha256(path)
        do {
            _ = try Store(path: path, durability: .normal, logger: logger)
            Issue.record("a database with an unknown migration was opened")
        } catch let e as SchemaError {
            #expect(e.description.contains("a roomcast build this one does not know") && e.description.contains("v2-from-another-branch")
                    && !e.description.contains("newer roomcast") && e.description.contains("Nothing was changed"))
        }
        #expect(try sha256(path) == before)
    }

    // OP-3: the schema version is the newest migration's number; a new store is current.
    @Test func aNewStoreIsAtTheCurrentVersion() throws {
        let dir = try makeDataDirectory("current")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = try StoreFile(directory: dir, create: false, migrate: false)
        #expect(file.state.isCurrent && file.state.version == SchemaVersion.current)
        #expect(SchemaVersion.current == SchemaVersion.known.count)
    }

    // OP-1: a backup is a checked copy under its final name only; the copy holds the data and
    // opens as a store; what is not a backup is refused with the reason.
    @Test func backupIsCheckedAndRestorable() throws {
        let dir = try makeDataDirectory("backup-source", messages: 50)
        let out = try scratchDirectory("backup-out")
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: out)
        }
        let file = try StoreFile(directory: dir, create: false, migrate: false)
        var steps = 0
        let summary = try file.backup(to: out + "/b.sqlite", pace: StoreBackup.Pace(pagesPerStep: 2)) { _ in steps += 1 }
        #expect(steps > 2, "copied in steps")
        #expect(summary.path == out + "/b.sqlite" && summary.schemaVersion == SchemaVersion.current && summary.pages > 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: out) == ["b.sqlite"], "no partial file is left")
        let checked = try StoreBackup.check(out + "/b.sqlite")
        #expect(checked.bytes == summary.bytes && checked.pages == summary.pages && checked.schemaVersion == SchemaVersion.current)
        // A file of its own (no WAL beside it).
        let header = try FileHandle(forReadingFrom: URL(fileURLWithPath: out + "/b.sqlite")).read(upToCount: 20) ?? Data()
        #expect(header.count == 20 && header[18] == 1 && header[19] == 1, "rollback-journal mode")

        // Restore into an empty directory; a store opens it with the data.
        let target = out + "/restored"
        let restore = try StoreBackup.restore(from: out + "/b.sqlite", into: target, force: false)
        #expect(restore.replacedInto == nil)
        let store = try Store(path: DataDirectory.databasePath(target), durability: .normal, logger: logger)
        #expect(try count(store.database, "SELECT COUNT(*) FROM message WHERE app = 'a'") == 50)
        let domain = try restored(store, now: now)
        #expect(domain.epoch(app: "a", roomId: "r") != nil)

        // Not backups: another file, a damaged one, a SQLite database without our schema.
        try Data("not a database at all".utf8).write(to: URL(fileURLWithPath: out + "/text.sqlite"))
        #expect { _ = try StoreBackup.check(out + "/text.sqlite") } throws: { ($0 as? StoreBackup.Failure).map { if case .notABackup = $0 { true } else { false } } ?? false }
        var bytes = try Data(contentsOf: URL(fileURLWithPath: out + "/b.sqlite"))
        for i in stride(from: 4096 * 3, to: min(bytes.count, 4096 * 6), by: 7) { bytes[i] ^= 0x5A }
        try bytes.write(to: URL(fileURLWithPath: out + "/damaged.sqlite"))
        #expect { _ = try StoreBackup.check(out + "/damaged.sqlite") } throws: { ($0 as? StoreBackup.Failure).map { if case .notABackup = $0 { true } else { false } } ?? false }
        let other = try DatabaseQueue(path: out + "/other.sqlite")
        try other.write { try $0.execute(sql: "CREATE TABLE t (x)") }
        try other.close()
        #expect { _ = try StoreBackup.check(out + "/other.sqlite") } throws: { ($0 as? StoreBackup.Failure).map { if case .notABackup = $0 { true } else { false } } ?? false }
    }

    // OP-1: restore refuses a directory in use and a non-empty one (unless forced) and changes
    // nothing; forced, it moves the database it replaces aside.
    @Test func restoreRefusalsChangeNothing() throws {
        let source = try makeDataDirectory("restore-source", messages: 5)
        let target = try makeDataDirectory("restore-target", messages: 9)
        let out = try scratchDirectory("restore-out")
        defer { for d in [source, target, out] { try? FileManager.default.removeItem(atPath: d) } }
        _ = try StoreFile(directory: source, create: false, migrate: false).backup(to: out + "/b.sqlite")
        let before = try sha256(DataDirectory.databasePath(target))

        #expect(throws: StoreBackup.RestoreFailure.notEmpty(directory: target)) {
            _ = try StoreBackup.restore(from: out + "/b.sqlite", into: target, force: false)
        }
        let lock = try DataDirectoryLock(directory: target)
        #expect(DataDirectory.inUse(target) == .held(pid: getpid()))
        #expect(throws: StoreBackup.RestoreFailure.inUse(directory: target, pid: getpid())) {
            _ = try StoreBackup.restore(from: out + "/b.sqlite", into: target, force: true)
        }
        lock.release()
        #expect(DataDirectory.inUse(target) == nil)
        #expect(throws: StoreBackup.Failure.self) { _ = try StoreBackup.restore(from: out + "/missing.sqlite", into: target, force: true) }
        #expect(try sha256(DataDirectory.databasePath(target)) == before)

        let forced = try StoreBackup.restore(from: out + "/b.sqlite", into: target, force: true, now: { now })
        let aside = try #require(forced.replacedInto)
        #expect(try sha256(aside + "/" + DataDirectory.databaseName) == before)
        let store = try Store(path: DataDirectory.databasePath(target), durability: .normal, logger: logger)
        #expect(try count(store.database, "SELECT COUNT(*) FROM message") == 5)
    }

    // OP-2: apps managed on the store: each change raises the generation; refusals change
    // nothing; a removal with the node stopped deletes the app and all its data (and nothing of
    // another app); one made while the node ran is carried out when a store next opens.
    @Test func operatorAppsOnTheStore() throws {
        let dir = try makeDataDirectory("apps", messages: 4)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = try StoreFile(directory: dir, create: false, migrate: true)
        let g0 = try file.operatorAppsGeneration()
        let added = try file.addApp(key: "c", secret: "secret-of-c-0123456", now: now)
        #expect(added.status == .active && added.origin == "api")
        #expect(try file.operatorAppsGeneration() == g0 + 1)
        let rotated = try file.rotateAppSecret(key: "c", secret: "next-secret-of-c-0123", now: now, graceMilliseconds: 1000)
        #expect(rotated.previousSecret == "secret-of-c-0123456" && rotated.previousSecret(at: now + 999) != nil && rotated.previousSecret(at: now + 1000) == nil)
        let snapshot = try file.operatorApps()
        for bad in [{ _ = try file.addApp(key: "c", secret: "secret-of-c-0123456", now: now) },
                    { _ = try file.addApp(key: "with space", secret: "secret-0123456789", now: now) },
                    { _ = try file.addApp(key: "d", secret: "short", now: now) },
                    { _ = try file.rotateAppSecret(key: "nobody", secret: "secret-0123456789", now: now, graceMilliseconds: 1) },
                    { _ = try file.setAppActive(key: "nobody", false) },
                    { _ = try file.removeApp(key: "nobody", nodeRunning: false) }] as [() throws -> Void] {
            #expect(throws: OperatorAppsError.self) { try bad() }
        }
        #expect(try file.operatorApps() == snapshot)
        // Setting the status an app has changes nothing either.
        _ = try file.setAppActive(key: "c", true)
        #expect(try file.operatorApps().generation == snapshot.generation)

        // Stopped node: deleted at once with its rooms and messages; app b keeps its room.
        #expect(try file.removeApp(key: "a", nodeRunning: false) == .deleted)
        #expect(try count(file.database, "SELECT COUNT(*) FROM app WHERE key = 'a'") == 0)
        #expect(try count(file.database, "SELECT COUNT(*) FROM room WHERE app = 'a'") == 0)
        #expect(try count(file.database, "SELECT COUNT(*) FROM message WHERE app = 'a'") == 0)
        #expect(try count(file.database, "SELECT COUNT(*) FROM room WHERE app = 'b'") == 1)

        // Running node: marked, refused, deleted when a store next opens.
        #expect(try file.removeApp(key: "b", nodeRunning: true) == .atNextStart)
        #expect(try file.app("b")?.status == .removing)
        #expect(throws: OperatorAppsError.removing("b")) { _ = try file.setAppActive(key: "b", true) }
        let store = try Store(path: DataDirectory.databasePath(dir), durability: .normal, logger: logger)
        #expect(try store.app("b") == nil)
        #expect(try count(store.database, "SELECT COUNT(*) FROM room WHERE app = 'b'") == 0)
        #expect(try store.operatorApps().apps.map(\.key) == ["c"])
    }

    // OP-2: an operator command never migrates a database under a running node of an older
    // roomcast: it would change the schema beneath it.
    @Test func aCommandDoesNotMigrateUnderARunningOlderNode() throws {
        let dir = try makeDataDirectory("older-node")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        do {
            let q = try DatabaseQueue(path: DataDirectory.databasePath(dir))
            try q.write { try $0.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = ?", arguments: [SchemaVersion.known.last!]) }
            try q.close()
        }
        let lock = try DataDirectoryLock(directory: dir)
        defer { lock.release() }
        #expect(throws: SchemaError.self) { _ = try StoreFile(directory: dir, create: false, migrate: true) }
        #expect(try StoreFile(directory: dir, create: false, migrate: false).state.pending == [SchemaVersion.known.last!])
    }
}
