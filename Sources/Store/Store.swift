import Chat
import Foundation
import GRDB
import Logging
import Reactor
import Synchronization

/// The SQLite store (WAL, through GRDB): the domain's durable state, written by one thread in
/// batches (group commit). A change is acknowledged only after the batch holding it committed.
/// `Store(inMemory:)` keeps the same schema and writer in memory, for in-process tests.
public final class Store: @unchecked Sendable {
    // Safety: `database` is GRDB's thread-safe DatabasePool or DatabaseQueue; `pending` is a
    // Mutex; the counters and `writableFlag` are atomics; `afterBatch` is immutable. `thread` and
    // `readerThread` are set by `start` and cleared by `stop`, and `probeInterval` is set before
    // `start`, all on the owner's thread; the writer thread only reads it.

    /// How commits reach the disk. `normal` survives a killed process (the OS has the data);
    /// `full` also survives power loss, at the cost of an fsync per batch.
    public enum Durability: String, Sendable, CaseIterable {
        case normal
        case full
    }

    /// The open write transaction of a batch, handed to each commit's `extra`. Only valid while
    /// `extra` runs. Callers that only forward an `extra` closure need not know GRDB; the writes
    /// themselves (e.g. the webhook outbox) use `database`.
    public struct Transaction {
        public let database: Database
    }

    /// One unit of work for the writer: mutations to make durable, extra writes that must share
    /// their transaction (e.g. webhook outbox rows), and what to do once they are on disk.
    public struct Commit: Sendable {
        public var mutations: [Mutation]
        public var extra: (@Sendable (Transaction) throws -> Void)?
        public var onDurable: @Sendable () -> Void
        /// Runs instead of `onDurable` when the commit could not be written (the store turns
        /// read-only; nothing of this commit is on disk).
        public var onFailed: (@Sendable () -> Void)?
        /// CL-9: the database's image at this commit's place (exactly what the commits before it
        /// wrote, its own writes included), handed over once it is committed, before `onDurable`.
        /// A file store commits the commits before it (and it) on their own, so that a read
        /// transaction begun right after sees that state while the store goes on; an in-memory
        /// store's image is its bytes.
        public var image: (@Sendable (Result<ReplicaImage, Error>) -> Void)?
        public init(mutations: [Mutation], extra: (@Sendable (Transaction) throws -> Void)? = nil, onDurable: @escaping @Sendable () -> Void,
                    onFailed: (@Sendable () -> Void)? = nil, image: (@Sendable (Result<ReplicaImage, Error>) -> Void)? = nil) {
            self.mutations = mutations
            self.extra = extra
            self.onDurable = onDurable
            self.onFailed = onFailed
            self.image = image
        }

        var writes: Bool { !mutations.isEmpty || extra != nil || image != nil }
    }

    /// The database: a `DatabasePool` (WAL) for a file, a `DatabaseQueue` in memory. Reads may
    /// use it from any thread; commits of the domain go through `submit`.
    public let database: any DatabaseWriter
    /// The file, or ":memory:" for an in-memory store.
    public let path: String
    private let logger: Logger
    private let pending = Mutex<[Commit]>([])
    private let writer: EventLoop
    private var thread: PosixThread?
    /// Reads that answer queries off the engine and the I/O loops (history beyond memory).
    private let reader: EventLoop
    private var readerThread: PosixThread?
    /// Runs on the writer thread after each batch's callbacks (the engine's publisher: what the
    /// batch released reaches the I/O loops once per batch).
    private let afterBatch: (@Sendable () -> Void)?
    /// False from a failed commit until a probe write succeeds (e.g. the disk was full and has
    /// space again): commits are refused meanwhile.
    private let writableFlag = Atomic<Bool>(true)
    public var isWritable: Bool { writableFlag.load(ordering: .acquiring) }
    /// How many times a batch failed to commit (each failure turns the store read-only until a
    /// probe write succeeds). A commit's owner learns of a failure through its `onFailed`; this
    /// tells it whether it has reacted to that failure already.
    public var failures: Int { failureCount.load(ordering: .acquiring) }
    private let failureCount = Atomic<Int>(0)
    /// How often a read-only store tries to write again.
    public var probeInterval: Duration = .seconds(1)
    public let batchesCommitted = Atomic<Int>(0)
    /// Commits that wrote something (mutations or extra writes); commits that only wait for the
    /// ones before them (`onDurable` alone) are not counted.
    public let commitsCommitted = Atomic<Int>(0)

    /// A store in the SQLite file at `path` (WAL; created and migrated if needed).
    /// `afterBatch`: runs on the writer thread after each batch's callbacks.
    public convenience init(path: String, durability: Durability, logger: Logger, afterBatch: (@Sendable () -> Void)? = nil) throws {
        try self.init(path: path, synchronous: durability == .full ? "FULL" : "NORMAL", logger: logger, afterBatch: afterBatch)
    }

    /// A file store with SQLite's `synchronous` setting: FULL, NORMAL, or OFF for a cluster
    /// node's replica (`Store.replica`).
    convenience init(path: String, synchronous sync: String, logger: Logger, afterBatch: (@Sendable () -> Void)?) throws {
        // OP-3: checked before the pool opens the file (opening it writes).
        try SchemaVersion.refuseNewer(path: path)
        var config = Self.configuration()
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = \(sync)")
        }
        try self.init(database: DatabasePool(path: path, configuration: config), path: path, logger: logger, afterBatch: afterBatch)
    }

    /// A private in-memory store with the same schema and the same writer thread; it is gone
    /// when the store is released. For in-process tests.
    public convenience init(inMemory logger: Logger, afterBatch: (@Sendable () -> Void)? = nil) throws {
        try self.init(database: DatabaseQueue(configuration: Self.configuration()), path: ":memory:", logger: logger, afterBatch: afterBatch)
    }

    private init(database: any DatabaseWriter, path: String, logger: Logger, afterBatch: (@Sendable () -> Void)?) throws {
        self.afterBatch = afterBatch
        self.database = database
        self.path = path
        self.logger = logger
        // OP-3: a directory written by a newer roomcast is refused before anything is written.
        try SchemaVersion.refuseNewer(database, path: path)
        try Schema.migrator.migrate(database)
        // OP-2: apps removed while the node ran are deleted now, before anything reads them.
        try OperatorApps.purgeRemoved(database)
        writer = try EventLoop(name: "roomcast-store", readBufferSize: 16)
        reader = try EventLoop(name: "roomcast-store-read", readBufferSize: 16)
    }

    private static func configuration() -> Configuration {
        var config = Configuration()
        config.label = "roomcast"
        config.foreignKeysEnabled = true
        return config
    }

    /// Starts the writer thread.
    public func start() {
        let writer = self.writer
        thread = PosixThread.start(name: "roomcast-store") { writer.run() }
        let reader = self.reader
        readerThread = PosixThread.start(name: "roomcast-store-read") { reader.run() }
    }

    /// Runs `body` on the store's reader thread (reads see every committed batch).
    public func read(_ body: @escaping @Sendable (Store) -> Void) {
        reader.execute { [self] in body(self) }
    }

    /// Commits what is pending, then stops the writer thread.
    public func stop() {
        let done = Atomic<Bool>(false)
        writer.execute { [self] in
            drain()
            done.store(true, ordering: .releasing)
        }
        while !done.load(ordering: .acquiring) { usleep(1000) }
        writer.stop()
        thread?.join()
        thread = nil
        reader.stop()
        readerThread?.join()
        readerThread = nil
    }

    /// Queues a commit; `onDurable` runs on the writer thread after the batch is on disk.
    /// Commits run in submission order.
    public func submit(_ commit: Commit) {
        guard isWritable else {
            // Read-only: nothing is queued (it could not be written) and nothing acknowledged.
            if commit.mutations.isEmpty && commit.extra == nil { commit.onDurable() } else { commit.onFailed?() }
            return
        }
        let first = pending.withLock { queue -> Bool in
            queue.append(commit)
            return queue.count == 1
        }
        if first { writer.execute { [self] in drain() } }
    }

    /// Writes every pending commit in one transaction, then runs their callbacks in order. In a
    /// file store, a commit that takes an image (`Commit.image`) ends its transaction: the
    /// commits after it go in the next.
    private func drain() {
        while true {
            let pulled = pending.withLock { queue -> [Commit] in
                let b = queue
                queue.removeAll(keepingCapacity: true)
                return b
            }
            if pulled.isEmpty { return }
            guard isWritable else {
                // Made from state the owner has reloaded since the failure: refused, not written.
                for commit in pulled { commit.onFailed?() }
                continue
            }
            var start = 0
            while start < pulled.count {
                var end = start
                while end < pulled.count - 1, inMemory || pulled[end].image == nil { end += 1 }
                let batch = pulled[start...end]
                let images: [(@Sendable (Result<ReplicaImage, Error>) -> Void, Result<ReplicaImage, Error>)]
                do {
                    images = try write(batch)
                } catch {
                    // Nothing of this batch is on disk: none of it is acknowledged. What was
                    // submitted after it was made from the same in-memory state, so it fails too;
                    // the owner learns it through each commit's `onFailed` (the engine reloads its
                    // state from disk), and the store refuses commits until a probe write succeeds.
                    fail(Array(pulled[start...]), error)
                    return
                }
                commitsCommitted.add(batch.reduce(0) { $0 + ($1.writes ? 1 : 0) }, ordering: .relaxed)
                for (hand, image) in images { hand(image) }
                for commit in batch { commit.onDurable() }
                start = end + 1
            }
            afterBatch?()
        }
    }

    private var inMemory: Bool { path == ":memory:" }

    /// One transaction of `batch`, and the images its commits asked for.
    private func write(_ batch: ArraySlice<Commit>) throws -> [(@Sendable (Result<ReplicaImage, Error>) -> Void, Result<ReplicaImage, Error>)] {
        guard batch.contains(where: \.writes) else { return [] }
        let inMemory = self.inMemory, path = self.path
        let images = try database.writeWithoutTransaction { db in
            var images: [(@Sendable (Result<ReplicaImage, Error>) -> Void, Result<ReplicaImage, Error>)] = []
            try db.inTransaction {
                let tx = Transaction(database: db)
                for commit in batch {
                    try Self.apply(commit.mutations, db)
                    try commit.extra?(tx)
                    if inMemory, let hand = commit.image { images.append((hand, Result { ReplicaImage(bytes: try Self.image(tx)) })) }
                }
                return .commit
            }
            // Committed, and nothing else can write before this returns: the read transaction
            // begun here sees exactly this batch's state (the image's commit is its last).
            if !inMemory, let hand = batch.last?.image { images.append((hand, Result { try ReplicaImage(pinning: path) })) }
            return images
        }
        batchesCommitted.add(1, ordering: .relaxed)
        return images
    }

    private func fail(_ batch: [Commit], _ error: Error) {
        writableFlag.store(false, ordering: .releasing)
        failureCount.add(1, ordering: .releasing)
        let queued = pending.withLock { queue -> [Commit] in
            let q = queue
            queue.removeAll()
            return q
        }
        logger.error("store commit failed; read-only until writes work again",
                     metadata: ["error": "\(error)", "commits": "\(batch.count + queued.count)"])
        for commit in batch + queued { commit.onFailed?() }
        afterBatch?()
        scheduleProbe()
    }

    /// Tries a small write every `probeInterval` until one succeeds, then accepts commits again.
    private func scheduleProbe() {
        _ = writer.schedule(after: probeInterval) { [self] in
            do {
                try database.write { db in
                    try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('probe', ?)", arguments: [String(wallClockMilliseconds())])
                }
                writableFlag.store(true, ordering: .releasing)
                logger.notice("store writable again")
            } catch {
                scheduleProbe()
            }
        }
    }

    // MARK: Mutations → rows

    static let insertMessageSQL = """
        INSERT OR IGNORE INTO message (app, roomId, id, sender, senderNickname, senderAvatar, senderExt, kind, content, time, fromServer, priority, type,
                                       targets, targetTags, tagNames)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    static func apply(_ mutations: [Mutation], _ db: Database) throws {
        for m in mutations {
            switch m {
            case .putApp(let key, let settings):
                // The allowlist lives in the settings JSON; the column keeps a copy for readers
                // of the previous version (and `AppRow.allowedOrigins`).
                let json = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
                try db.execute(sql: "UPDATE app SET settings = ?, allowedOrigins = ? WHERE key = ?",
                               arguments: [json, AppRow.originsColumn(settings.allowedOrigins), key])
            case .putRoom(let r):
                try RoomRow(r).save(db)
            case .deleteRoom(let k):
                try db.execute(sql: "DELETE FROM room WHERE app = ? AND roomId = ?", arguments: [k.app, k.roomId])
            case .putMember(let k, let m):
                try MemberRow(app: k.app, roomId: k.roomId, userId: m.userId, role: m.role.rawValue, nickname: m.nickname,
                              avatar: m.avatar, ext: m.ext).save(db)
            case .deleteMember(let k, let u):
                try db.execute(sql: "DELETE FROM member WHERE app = ? AND roomId = ? AND userId = ?", arguments: [k.app, k.roomId, u])
            case .putBlock(let k, let u, let until):
                try BlockRow(app: k.app, roomId: k.roomId, userId: u, until: until).save(db)
            case .deleteBlock(let k, let u):
                try db.execute(sql: "DELETE FROM block WHERE app = ? AND roomId = ? AND userId = ?", arguments: [k.app, k.roomId, u])
            case .putPermanentMute(let k, let u):
                try PermanentMuteRow(app: k.app, roomId: k.roomId, userId: u).save(db)
            case .deletePermanentMute(let k, let u):
                try db.execute(sql: "DELETE FROM permanentMute WHERE app = ? AND roomId = ? AND userId = ?", arguments: [k.app, k.roomId, u])
            case .putTempMute(let k, let u, let until):
                try TempMuteRow(app: k.app, roomId: k.roomId, userId: u, until: until).save(db)
            case .deleteTempMute(let k, let u):
                try db.execute(sql: "DELETE FROM tempMute WHERE app = ? AND roomId = ? AND userId = ?", arguments: [k.app, k.roomId, u])
            case .putAllowlist(let k, let u):
                try AllowlistRow(app: k.app, roomId: k.roomId, userId: u).save(db)
            case .deleteAllowlist(let k, let u):
                try db.execute(sql: "DELETE FROM allowlist WHERE app = ? AND roomId = ? AND userId = ?", arguments: [k.app, k.roomId, u])
            case .putGlobalMute(let app, let u, let until):
                try GlobalMuteRow(app: app, userId: u, until: until).save(db)
            case .deleteGlobalMute(let app, let u):
                try db.execute(sql: "DELETE FROM globalMute WHERE app = ? AND userId = ?", arguments: [app, u])
            case .putOnlineUser(let app, let u, let device):
                try db.execute(sql: "INSERT OR REPLACE INTO onlineUser (app, userId, device) VALUES (?, ?, ?)", arguments: [app, u, device])
            case .deleteOnlineUser(let app, let u):
                try db.execute(sql: "DELETE FROM onlineUser WHERE app = ? AND userId = ?", arguments: [app, u])
            case .putAttribute(let k, let name, let a):
                try AttributeRow(app: k.app, roomId: k.roomId, key: name, value: a.value, owner: a.owner, autoDelete: a.autoDelete,
                                 updatedAt: a.updatedAt).save(db)
            case .deleteAttribute(let k, let name):
                try db.execute(sql: "DELETE FROM attribute WHERE app = ? AND roomId = ? AND key = ?", arguments: [k.app, k.roomId, name])
            case .putQueueElement(let k, let name, let e, let sequence):
                try QueueRow(app: k.app, roomId: k.roomId, key: name, value: e.value, owner: e.owner, sequence: sequence).save(db)
            case .deleteQueueElement(let k, let name):
                try db.execute(sql: "DELETE FROM queueElement WHERE app = ? AND roomId = ? AND key = ?", arguments: [k.app, k.roomId, name])
            case .clearQueue(let k):
                try db.execute(sql: "DELETE FROM queueElement WHERE app = ? AND roomId = ?", arguments: [k.app, k.roomId])
            case .appendMessage(let k, let msg):
                // The hottest write (every message): a prepared statement kept by the connection,
                // not a record encoded column by column.
                try db.cachedStatement(sql: Self.insertMessageSQL).execute(arguments: [
                    k.app, k.roomId, msg.id, msg.sender, msg.senderNickname, msg.senderAvatar, msg.senderExt, msg.kind.rawValue,
                    msg.content, msg.time, msg.fromServer, msg.priority.rawValue, msg.type, msg.storedTargets, msg.storedTargetTags, msg.storedTagNames,
                ])
            case .recallMessage(let k, let id):
                try db.execute(sql: "UPDATE message SET content = '', senderExt = '', recalled = 1 WHERE app = ? AND roomId = ? AND id = ?",
                               arguments: [k.app, k.roomId, id])
            case .pruneMessages(let app, let before):
                try db.execute(sql: "DELETE FROM message WHERE app = ? AND time < ?", arguments: [app, before])
            case .putGroup(let g):
                try UltraGroupRow(g).save(db)
            case .deleteGroup(let app, let groupId):
                try db.execute(sql: "DELETE FROM ultraGroup WHERE app = ? AND groupId = ?", arguments: [app, groupId])
            case .putGroupMember(let app, let groupId, let user, let sequence):
                try UltraGroupMemberRow(app: app, groupId: groupId, userId: user, sequence: sequence).save(db)
            case .deleteGroupMember(let app, let groupId, let user):
                try db.execute(sql: "DELETE FROM ultraGroupMember WHERE app = ? AND groupId = ? AND userId = ?", arguments: [app, groupId, user])
            case .putChannel(let c, let sequence?):
                try UltraChannelRow(c, sequence: sequence).save(db)
            case .putChannel(let c, nil):
                try db.execute(sql: "UPDATE ultraChannel SET type = ?, notificationLevel = ? WHERE app = ? AND groupId = ? AND channelId = ?",
                               arguments: [c.type.rawValue, c.notificationLevel.rawValue, c.app, c.groupId, c.channelId])
            case .deleteChannel(let app, let groupId, let channelId):
                try db.execute(sql: "DELETE FROM ultraChannel WHERE app = ? AND groupId = ? AND channelId = ?", arguments: [app, groupId, channelId])
            case .putPrivateMember(let app, let groupId, let channelId, let user, let sequence):
                try UltraPrivateMemberRow(app: app, groupId: groupId, channelId: channelId, userId: user, sequence: sequence).save(db)
            case .deletePrivateMember(let app, let groupId, let channelId, let user):
                try db.execute(sql: "DELETE FROM ultraPrivateMember WHERE app = ? AND groupId = ? AND channelId = ? AND userId = ?",
                               arguments: [app, groupId, channelId, user])
            case .putUserGroup(let app, let groupId, let userGroupId, let sequence):
                try UltraUserGroupRow(app: app, groupId: groupId, userGroupId: userGroupId, sequence: sequence).save(db)
            case .deleteUserGroup(let app, let groupId, let userGroupId):
                try db.execute(sql: "DELETE FROM ultraUserGroup WHERE app = ? AND groupId = ? AND userGroupId = ?", arguments: [app, groupId, userGroupId])
            case .putUserGroupMember(let app, let groupId, let userGroupId, let user, let sequence):
                try UltraUserGroupMemberRow(app: app, groupId: groupId, userGroupId: userGroupId, userId: user, sequence: sequence).save(db)
            case .deleteUserGroupMember(let app, let groupId, let userGroupId, let user):
                try db.execute(sql: "DELETE FROM ultraUserGroupMember WHERE app = ? AND groupId = ? AND userGroupId = ? AND userId = ?",
                               arguments: [app, groupId, userGroupId, user])
            case .putChannelUserGroup(let app, let groupId, let channelId, let userGroupId, let sequence):
                try UltraChannelUserGroupRow(app: app, groupId: groupId, channelId: channelId, userGroupId: userGroupId, sequence: sequence).save(db)
            case .deleteChannelUserGroup(let app, let groupId, let channelId, let userGroupId):
                try db.execute(sql: "DELETE FROM ultraChannelUserGroup WHERE app = ? AND groupId = ? AND channelId = ? AND userGroupId = ?",
                               arguments: [app, groupId, channelId, userGroupId])
            case .putConversationStatus(let app, let user, let status):
                try ConversationStatusRow(app: app, userId: user, status).save(db)
            case .putConversationTypeLevel(let app, let user, let type, let level):
                if level == .default {
                    try db.execute(sql: "DELETE FROM conversationTypeLevel WHERE app = ? AND userId = ? AND conversationType = ?",
                                   arguments: [app, user, type.rawValue])
                } else {
                    try ConversationTypeLevelRow(app: app, userId: user, conversationType: type.rawValue, notificationLevel: level.rawValue).save(db)
                }
            case .appendAudit(let app, let entry):
                // The newest `Limits.auditEntriesPerApp` of the app are kept, as in the domain.
                try db.execute(sql: "INSERT OR REPLACE INTO auditEntry (app, id, entry) VALUES (?, ?, ?)",
                               arguments: [app, entry.id, String(decoding: try JSONEncoder().encode(entry), as: UTF8.self)])
                try db.execute(sql: "DELETE FROM auditEntry WHERE app = ? AND id <= ?", arguments: [app, entry.id - Int64(Limits.auditEntriesPerApp)])
            case .putCommunityMessage(let app, let m):
                try db.execute(sql: """
                    INSERT INTO communityMessage (app, groupId, channelId, messageId, entry) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (app, groupId, channelId, messageId) DO UPDATE SET entry = excluded.entry
                    """, arguments: [app, m.groupId, m.channelId, m.messageId, String(decoding: try JSONEncoder().encode(m), as: UTF8.self)])
            case .deleteCommunityMessage(let app, let groupId, let channelId, let messageId):
                try db.execute(sql: "DELETE FROM communityMessage WHERE app = ? AND groupId = ? AND channelId = ? AND messageId = ?",
                               arguments: [app, groupId, channelId, messageId])
            case .putCommunityRules(let app, let groupId, let channelId, let rules):
                if rules.isEmpty {
                    try db.execute(sql: "DELETE FROM communityRules WHERE app = ? AND groupId = ? AND channelId = ?", arguments: [app, groupId, channelId])
                } else {
                    try db.execute(sql: "INSERT OR REPLACE INTO communityRules (app, groupId, channelId, entry) VALUES (?, ?, ?, ?)",
                                   arguments: [app, groupId, channelId, String(decoding: try JSONEncoder().encode(rules), as: UTF8.self)])
                }
            case .deleteCommunityChannel(let app, let groupId, let channelId):
                try db.execute(sql: "DELETE FROM communityMessage WHERE app = ? AND groupId = ? AND channelId = ?", arguments: [app, groupId, channelId])
                try db.execute(sql: "DELETE FROM communityRules WHERE app = ? AND groupId = ? AND channelId = ?", arguments: [app, groupId, channelId])
            }
        }
    }

    // MARK: Apps

    public func apps() throws -> [AppRow] {
        try database.read { db in try AppRow.order(Column("createdAt")).fetchAll(db) }
    }

    /// Inserts an app, or updates its secret (and origin) if it exists; keeps its settings
    /// (allowlist included).
    public func upsertApp(key: String, secret: String, origin: String, settings: AppSettings, now: Int64) throws {
        let json = String(decoding: try JSONEncoder().encode(settings), as: UTF8.self)
        try database.write { db in
            if var existing = try AppRow.fetchOne(db, key: key) {
                existing.secret = secret
                existing.origin = origin
                try existing.update(db)
            } else {
                try AppRow(key: key, secret: secret, settings: json, createdAt: now, origin: origin,
                           allowedOrigins: AppRow.originsColumn(settings.allowedOrigins)).insert(db)
            }
        }
    }

    // MARK: Restore

    /// Loads every durable row into a fresh domain (ARCHITECTURE §5): apps, then rooms and what
    /// they hold, queue elements in their order, and the recent history of each room.
    public func restore(into domain: ChatDomain, now: Int64) throws {
        try database.read { db in
            for app in try AppRow.fetchAll(db) {
                var settings = (try? JSONDecoder().decode(AppSettings.self, from: Data(app.settings.utf8))) ?? AppSettings()
                // Settings written by the previous version have no allowlist: it was only in the column.
                if settings.allowedOrigins == nil { settings.allowedOrigins = app.allowedOriginList }
                domain.restoreApp(app.key, settings)
            }
            for r in try RoomRow.fetchAll(db) { domain.restoreRoom(r.record) }
            for m in try MemberRow.fetchAll(db) {
                domain.restoreMember(RoomKey(app: m.app, roomId: m.roomId),
                                     MemberRecord(userId: m.userId, role: GrantedRole(rawValue: m.role) ?? .none, nickname: m.nickname,
                                                  avatar: m.avatar, ext: m.ext))
            }
            for b in try BlockRow.fetchAll(db) { domain.restoreBlock(RoomKey(app: b.app, roomId: b.roomId), b.userId, until: b.until) }
            for p in try PermanentMuteRow.fetchAll(db) { domain.restorePermanentMute(RoomKey(app: p.app, roomId: p.roomId), p.userId) }
            for t in try TempMuteRow.fetchAll(db) { domain.restoreTempMute(RoomKey(app: t.app, roomId: t.roomId), t.userId, until: t.until) }
            for a in try AllowlistRow.fetchAll(db) { domain.restoreAllowlist(RoomKey(app: a.app, roomId: a.roomId), a.userId) }
            for g in try GlobalMuteRow.fetchAll(db) { domain.restoreGlobalMute(app: g.app, g.userId, until: g.until) }
            for row in try Row.fetchAll(db, sql: "SELECT app, userId, device FROM onlineUser") {
                domain.restoreOnlineUser(app: row["app"], row["userId"], device: row["device"], now: now)
            }
            for a in try AttributeRow.fetchAll(db) {
                domain.restoreAttribute(RoomKey(app: a.app, roomId: a.roomId), a.key,
                                        Attribute(value: a.value, owner: a.owner, autoDelete: a.autoDelete, updatedAt: a.updatedAt))
            }
            for q in try QueueRow.order(Column("sequence")).fetchAll(db) {
                domain.restoreQueueElement(RoomKey(app: q.app, roomId: q.roomId), q.key,
                                           QueueElement(value: q.value, owner: q.owner, transient: false), sequence: q.sequence)
            }
            for g in try UltraGroupRow.fetchAll(db) { domain.restoreGroup(g.record) }
            for m in try UltraGroupMemberRow.order(Column("sequence")).fetchAll(db) {
                domain.restoreGroupMember(app: m.app, groupId: m.groupId, m.userId, sequence: m.sequence)
            }
            for c in try UltraChannelRow.order(Column("sequence")).fetchAll(db) { domain.restoreChannel(c.record, sequence: c.sequence) }
            for p in try UltraPrivateMemberRow.order(Column("sequence")).fetchAll(db) {
                domain.restorePrivateMember(app: p.app, groupId: p.groupId, channelId: p.channelId, p.userId, sequence: p.sequence)
            }
            for u in try UltraUserGroupRow.order(Column("sequence")).fetchAll(db) {
                domain.restoreUserGroup(app: u.app, groupId: u.groupId, userGroupId: u.userGroupId, sequence: u.sequence)
            }
            for m in try UltraUserGroupMemberRow.order(Column("sequence")).fetchAll(db) {
                domain.restoreUserGroupMember(app: m.app, groupId: m.groupId, userGroupId: m.userGroupId, m.userId, sequence: m.sequence)
            }
            for b in try UltraChannelUserGroupRow.order(Column("sequence")).fetchAll(db) {
                domain.restoreChannelUserGroup(app: b.app, groupId: b.groupId, channelId: b.channelId, userGroupId: b.userGroupId, sequence: b.sequence)
            }
            for s in try ConversationStatusRow.fetchAll(db) {
                if let status = s.status { domain.restoreConversationStatus(app: s.app, userId: s.userId, status) }
            }
            for t in try ConversationTypeLevelRow.fetchAll(db) {
                if let type = ConversationType(rawValue: t.conversationType), let level = NotificationLevel(rawValue: t.notificationLevel) {
                    domain.restoreConversationTypeLevel(app: t.app, userId: t.userId, type, level)
                }
            }
            // MO-8: each app's audit trail, oldest first.
            var audit: [String: [AuditEntry]] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT app, entry FROM auditEntry ORDER BY app, id") {
                let json: String = row["entry"]
                audit[row["app"], default: []].append(try JSONDecoder().decode(AuditEntry.self, from: Data(json.utf8)))
            }
            for (app, entries) in audit { domain.restoreAudit(app: app, entries) }
            // MO-3, MO-5: community messages in the order they were sent, and controls.
            for row in try Row.fetchAll(db, sql: "SELECT app, entry FROM communityMessage ORDER BY rowid") {
                let json: String = row["entry"]
                domain.restoreCommunityMessage(app: row["app"], try JSONDecoder().decode(CommunityMessage.self, from: Data(json.utf8)))
            }
            for row in try Row.fetchAll(db, sql: "SELECT app, groupId, channelId, entry FROM communityRules") {
                let json: String = row["entry"]
                domain.restoreCommunityRules(app: row["app"], groupId: row["groupId"], channelId: row["channelId"],
                                             try JSONDecoder().decode(CommunityRules.self, from: Data(json.utf8)))
            }
            // The newest messages of each room, oldest first (the in-memory history window; one
            // more than it holds, so the window knows when older ones are only on disk).
            for key in domain.appKeys {
                guard let settings = domain.appSettings(key) else { continue }
                let oldest = now - settings.historyRetentionMilliseconds
                let rows = try MessageRow.fetchAll(db, sql: """
                    SELECT * FROM (
                        SELECT *, ROW_NUMBER() OVER (PARTITION BY roomId ORDER BY time DESC, id DESC) AS rank
                        FROM message WHERE app = ? AND time >= ?
                    ) WHERE rank <= ? ORDER BY roomId, time, id
                    """, arguments: [key, oldest, min(settings.historyLimitPerRoom, Limits.historyMemoryMessagesPerRoom) + 1])
                for row in rows { domain.restoreMessage(RoomKey(app: row.app, roomId: row.roomId), row.message) }
            }
        }
    }
}
